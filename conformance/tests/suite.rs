//! The whole suite against an in-process reference broker.

use queen_conformance::{RunConfig, all_cases, run};
use queen_mock_broker::MockBroker;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_broker_passes_every_case() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let mut cfg = RunConfig::new(broker.url());
    if let Ok(n) = std::env::var("QUEEN_CONFORMANCE_CASES") {
        cfg.prop_cases = n.parse().expect("a number");
    }
    let report = run(&cfg, all_cases()).await;
    println!("{}", report.to_text());
    assert!(report.ok(), "failed: {:?}", report.failed_ids());
    let (passed, _, skipped) = report.counts();
    assert!(passed > 0);
    assert_eq!(skipped, 0, "the reference broker has every capability");
    // A flaky case is no failure of a run, but the reference broker must not have one.
    assert_eq!(report.flaky(), 0, "{}", report.summary());
    broker.shutdown().await;
}
