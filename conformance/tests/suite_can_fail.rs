//! The suite can fail: put a proxy in front of the reference broker that breaks one rule
//! of the spec, and the cases that check that rule must fail, with the request and the
//! broker's answer in the report; the same selection, run directly against the broker,
//! passes.
//!
//! The properties run with a fixed seed, the same one directly and through each proxy,
//! so both runs generate the same sequences and a failure through the proxy is the
//! proxy's doing.

mod support;

use queen_conformance::{Case, Report, RunConfig, Status, all_cases, run};
use queen_mock_broker::MockBroker;
use serde_json::json;
use support::{Breakage, start_proxy};

/// The rule cases every proxy below breaks.
const RULE_CASES: [&str; 2] = [
    "txn.push.duplicate.in-window",
    "txn.kv.precondition.failed-index",
];

/// The properties' seed, shared by the direct and the proxied runs.
const SEED: u64 = 1;

/// The rule cases, and the properties when `props`.
fn selection(props: bool) -> Vec<Case> {
    let all = all_cases();
    for id in RULE_CASES {
        assert!(all.iter().any(|c| c.id == id), "the suite has no case {id}");
    }
    let chosen: Vec<Case> = all
        .into_iter()
        .filter(|c| RULE_CASES.contains(&c.id) || (props && c.id.starts_with("prop.")))
        .collect();
    if props {
        assert!(chosen.iter().filter(|c| c.id.starts_with("prop.")).count() >= 3);
    }
    chosen
}

fn config(url: &str) -> RunConfig {
    let mut cfg = RunConfig::new(url);
    cfg.seed = Some(SEED);
    cfg.prop_cases = 32;
    cfg
}

fn failure<'a>(report: &'a Report, id: &str) -> &'a queen_conformance::Failure {
    let row = report
        .results
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("{id} did not run"));
    match &row.status {
        Status::Fail(f) => f,
        other => panic!(
            "{id} should fail under the proxy, got {other:?}\n{}",
            report.to_text()
        ),
    }
}

/// Runs the selection through a proxy that breaks `breaks`, and checks what failed.
async fn through(breaks: Breakage) -> Report {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let proxy = start_proxy(&broker.url(), &[breaks]).await;
    let report = run(&config(&proxy), selection(true)).await;
    println!("{breaks:?}:\n{}", report.to_text());
    assert!(!report.ok());
    let failed = report.failed_ids();
    assert!(!failed.is_empty());
    for id in RULE_CASES {
        assert!(failed.contains(&id), "{id} passed under {breaks:?}");
    }
    // Every failure shows the request and the answer that showed it.
    for row in &report.results {
        if let Status::Fail(f) = &row.status {
            let x = f
                .exchange
                .as_ref()
                .unwrap_or_else(|| panic!("{}: a failure without its exchange", row.id));
            assert!(
                x.request.starts_with("POST /api/v1/") || x.request.starts_with("GET /api/v1/"),
                "{}: {}",
                row.id,
                x.request
            );
            assert!(x.status >= 200, "{}: status {}", row.id, x.status);
        }
    }
    broker.shutdown().await;
    report
}

fn prop_failures(report: &Report) -> Vec<(&str, &queen_conformance::Failure)> {
    report
        .results
        .iter()
        .filter(|r| r.id.starts_with("prop."))
        .filter_map(|r| match &r.status {
            Status::Fail(f) => Some((r.id.as_str(), f)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_selection_passes_directly_against_the_broker() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let report = run(&config(&broker.url()), selection(true)).await;
    println!("{}", report.to_text());
    assert!(report.ok(), "failed directly: {:?}", report.failed_ids());
    assert_eq!(report.counts(), (RULE_CASES.len() + 3, 0, 0));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_flips_success_fails_the_suite() {
    let report = through(Breakage::FlipSuccess).await;
    // Every transaction verdict is wrong: every property trips on its first one.
    let props = prop_failures(&report);
    assert_eq!(props.len(), 3, "{}", report.to_text());
    for (id, f) in props {
        assert!(f.expected.contains("success"), "{id}: {}", f.expected);
        assert!(f.actual.contains("minimal failing sequence"), "{id}");
        let x = f.exchange.as_ref().expect("an exchange");
        assert_eq!(x.request, "POST /api/v1/transaction", "{id}");
        assert!(x.body.is_some(), "{id}: the request body");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_drops_the_reason_fails_the_suite() {
    let report = through(Breakage::DropReason).await;
    let f = failure(&report, "txn.push.duplicate.in-window");
    let x = f.exchange.as_ref().expect("an exchange");
    assert_eq!(x.request, "POST /api/v1/transaction");
    assert!(x.body.is_some());
    assert_eq!(x.status, 200);
    assert_eq!(x.answer["success"], json!(false), "{}", x.answer);
    assert!(x.answer.get("reason").is_none(), "{}", x.answer);
    let props = prop_failures(&report);
    assert_eq!(props.len(), 3, "{}", report.to_text());
    for (id, f) in props {
        assert!(f.expected.contains("reason"), "{id}: {}", f.expected);
        let x = f.exchange.as_ref().expect("an exchange");
        assert!(x.answer.get("reason").is_none(), "{id}: {}", x.answer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_forwards_rolled_back_writes_fails_the_suite() {
    let report = through(Breakage::ForwardRolledBack).await;
    // The rollback itself looks right; what gives it away is the write that landed.
    for id in RULE_CASES {
        let f = failure(&report, id);
        assert!(f.exchange.is_some(), "{id}");
    }
    let props = prop_failures(&report);
    assert!(
        props.iter().any(|(id, _)| *id == "prop.model.queue"),
        "{}",
        report.to_text()
    );
    for (id, f) in props {
        assert!(f.actual.contains("minimal failing sequence"), "{id}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_hides_noop_fails_the_cursor_cases() {
    // A broker that does not tell an ack below the cursor from a first commit (wire.md
    // 4a): the cases that ack a message the cursor already passed fail, with the
    // exchange that shows it; directly against the broker they pass.
    let ids = [
        "core.cursor.commit.earlier-completed",
        "core.cursor.commit.last-completes-batch",
        "core.cursor.dlq-moves-cursor",
    ];
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let chosen = || -> Vec<Case> {
        all_cases()
            .into_iter()
            .filter(|c| ids.contains(&c.id))
            .collect()
    };
    assert_eq!(chosen().len(), ids.len());
    let direct = run(&config(&broker.url()), chosen()).await;
    assert!(direct.ok(), "{}", direct.to_text());
    let proxy = start_proxy(&broker.url(), &[Breakage::NoNoop]).await;
    let report = run(&config(&proxy), chosen()).await;
    assert_eq!(report.failed_ids(), ids.to_vec(), "{}", report.to_text());
    for id in ids {
        let f = failure(&report, id);
        assert!(f.expected.contains("noop: true"), "{id}: {}", f.expected);
        let x = f.exchange.as_ref().expect("an exchange");
        assert_eq!(x.request, "POST /api/v1/ack", "{id}");
        assert_eq!(x.answer[0]["noop"], json!(false), "{id}");
    }
    broker.shutdown().await;
}
