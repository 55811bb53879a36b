//! The binary as a CI pipeline uses it: exit codes 0/1/2, baselines of known failures,
//! the diff of two brokers, and `--profile auto` against a broker without positions.
//! The rule-breaking brokers are the proxies of `support` in front of the reference
//! broker.

mod support;

use queen_mock_broker::MockBroker;
use serde_json::Value;
use support::{Breakage, run_binary, scratch, start_proxy, unreachable_url};

/// A quick selection: the push rules of the transaction, and health.
const SELECTION: &str = "txn.push.*,core.health";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_say_conformant_different_or_could_not_run() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let ok = run_binary(&["--url", &broker.url(), "--only", SELECTION]).await;
    assert_eq!(ok.code, Some(0), "{}{}", ok.stdout, ok.stderr);
    assert!(
        ok.stdout.contains("3 passed, 0 failed, 0 skipped"),
        "{}",
        ok.stdout
    );

    let proxy = start_proxy(&broker.url(), &[Breakage::DropReason]).await;
    let bad = run_binary(&["--url", &proxy, "--only", SELECTION]).await;
    assert_eq!(bad.code, Some(1), "{}{}", bad.stdout, bad.stderr);
    assert!(
        bad.stdout
            .contains("FAIL txn.push.duplicate.in-window [MUST]"),
        "{}",
        bad.stdout
    );
    assert!(
        bad.stdout
            .contains("  spec:     conformance/spec/transaction.md#txn-push (restating transaction.md Push operation)"),
        "{}",
        bad.stdout
    );

    // Nothing listens: 2, with a message that says so, whether it waits or not.
    let down = unreachable_url();
    for wait in ["0", "1"] {
        let r = run_binary(&["--url", &down, "--only", SELECTION, "--wait-ready", wait]).await;
        assert_eq!(
            r.code,
            Some(2),
            "--wait-ready {wait}: {}{}",
            r.stdout,
            r.stderr
        );
        assert!(
            r.stderr.contains("could not run") && r.stderr.contains("not ready"),
            "{}",
            r.stderr
        );
        assert!(!r.stdout.contains("FAIL"), "no case ran: {}", r.stdout);
    }
    // A URL that is not a broker's (GET /health is not 200) or not a URL at all: 2.
    let wrong = format!("{}/not-the-base", broker.url());
    let r = run_binary(&["--url", &wrong, "--only", SELECTION]).await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    assert!(r.stderr.contains("HTTP 404"), "{}", r.stderr);
    let r = run_binary(&["--url", "not a url", "--only", SELECTION]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn help_explains_the_exit_codes() {
    let r = run_binary(&["--help"]).await;
    assert_eq!(r.code, Some(0));
    for needle in [
        "0  conformant",
        "1  differences",
        "2  could not run",
        "--wait-ready",
        "--baseline",
        "--diff",
        "auto",
    ] {
        assert!(r.stdout.contains(needle), "{needle}: {}", r.stdout);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_baseline_passes_known_failures_and_names_only_new_ones() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let dir = scratch("baseline");
    let file = dir.join("baseline.txt");
    let file_s = file.to_str().expect("a UTF-8 path");
    // Against a broker that breaks one rule: the baseline records its failures.
    let one = start_proxy(&broker.url(), &[Breakage::DropReason]).await;
    let w = run_binary(&[
        "--url",
        &one,
        "--only",
        SELECTION,
        "--write-baseline",
        file_s,
    ])
    .await;
    assert_eq!(
        w.code,
        Some(1),
        "the run itself failed: {}{}",
        w.stdout,
        w.stderr
    );
    let text = std::fs::read_to_string(&file).expect("the baseline file");
    let ids: Vec<&str> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split_whitespace().next().unwrap_or_default())
        .collect();
    assert_eq!(ids, ["txn.push.duplicate.in-window"], "{text}");
    assert!(text.contains("expected"), "each id has its reason: {text}");

    // The same broker again: exactly the known failures, exit 0.
    let again = run_binary(&["--url", &one, "--only", SELECTION, "--baseline", file_s]).await;
    assert_eq!(again.code, Some(0), "{}{}", again.stdout, again.stderr);
    assert!(
        again
            .stdout
            .contains("1 known failure(s) failed again, 0 new"),
        "{}",
        again.stdout
    );

    // A second broken rule: exit 1, naming only the new case.
    let two = start_proxy(
        &broker.url(),
        &[Breakage::DropReason, Breakage::HealthWithoutVersion],
    )
    .await;
    let worse = run_binary(&["--url", &two, "--only", SELECTION, "--baseline", file_s]).await;
    assert_eq!(worse.code, Some(1), "{}{}", worse.stdout, worse.stderr);
    let new: Vec<&str> = worse
        .stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("NEW FAILURE "))
        .collect();
    assert_eq!(new.len(), 1, "{}", worse.stdout);
    assert!(new[0].starts_with("core.health:"), "{}", worse.stdout);

    // The reference broker fixes the known one: reported, and not a failure.
    let fixed = run_binary(&[
        "--url",
        &broker.url(),
        "--only",
        SELECTION,
        "--baseline",
        file_s,
    ])
    .await;
    assert_eq!(fixed.code, Some(0), "{}{}", fixed.stdout, fixed.stderr);
    assert!(
        fixed.stdout.contains("FIXED txn.push.duplicate.in-window"),
        "{}",
        fixed.stdout
    );

    // A baseline that cannot be read: could not run.
    let missing = dir.join("nope.txt");
    let r = run_binary(&[
        "--url",
        &broker.url(),
        "--baseline",
        missing.to_str().unwrap_or(""),
    ])
    .await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_diff_of_two_brokers_lists_exactly_the_broken_cases() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let proxy = start_proxy(&broker.url(), &[Breakage::HealthWithoutVersion]).await;
    let only = "txn.push.*,core.health,core.errors.*";
    let d = run_binary(&[
        "--diff",
        &broker.url(),
        &proxy,
        "--only",
        only,
        "--format",
        "json",
    ])
    .await;
    assert_eq!(d.code, Some(1), "{}{}", d.stdout, d.stderr);
    let v: Value = serde_json::from_str(&d.stdout).expect("a JSON diff");
    let ids: Vec<&str> = v["differences"]
        .as_array()
        .expect("differences")
        .iter()
        .map(|x| x["id"].as_str().expect("an id"))
        .collect();
    assert_eq!(ids, ["core.health"], "{}", d.stdout);
    let x = &v["differences"][0];
    assert_eq!(
        (x["a"]["verdict"].as_str(), x["b"]["verdict"].as_str()),
        (Some("pass"), Some("fail"))
    );
    assert!(
        x["b"]["exchange"]
            .as_str()
            .is_some_and(|e| e.contains("GET /health")),
        "{x}"
    );
    assert_eq!(v["counts_a"], serde_json::json!([5, 0, 0]), "{}", d.stdout);

    let md = run_binary(&[
        "--diff",
        &broker.url(),
        &proxy,
        "--only",
        only,
        "--format",
        "markdown",
    ])
    .await;
    assert_eq!(md.code, Some(1));
    assert!(
        md.stdout.contains("| `core.health` | pass | fail |"),
        "{}",
        md.stdout
    );
    assert!(!md.stdout.contains("`txn.push"), "{}", md.stdout);
    let text = run_binary(&["--diff", &broker.url(), &proxy, "--only", only]).await;
    assert!(
        text.stdout.contains("1 case(s) with different verdicts"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains("core.health  A: pass  B: fail"),
        "{}",
        text.stdout
    );

    // The same broker twice: no difference, exit 0.
    let same = run_binary(&["--diff", &broker.url(), &broker.url(), "--only", only]).await;
    assert_eq!(same.code, Some(0), "{}{}", same.stdout, same.stderr);
    // One side down: could not run.
    let down = run_binary(&["--diff", &broker.url(), &unreachable_url(), "--only", only]).await;
    assert_eq!(down.code, Some(2), "{}", down.stderr);
    broker.shutdown().await;
}

/// `--profile auto` reads a capability as absent only on a clear sign. A broker that
/// starts refusing `positions` with a 400 is a regression: the positions cases run and
/// fail (exit 1), where reading any 4xx as absence skipped them and passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_auto_fails_a_broker_that_starts_refusing_positions() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let proxy = start_proxy(&broker.url(), &[Breakage::RefusePositions]).await;
    let only = "txn.positions.*,prop.model.seek,txn.push.*";
    let r = run_binary(&[
        "--url",
        &proxy,
        "--profile",
        "auto",
        "--only",
        only,
        "--cases",
        "4",
    ])
    .await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let probe_line = |cap: &str| {
        r.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(cap))
            .unwrap_or_else(|| panic!("no probe line for {cap}: {}", r.stdout))
            .to_string()
    };
    assert!(probe_line("Positions").contains(" run "), "{}", r.stdout);
    assert!(probe_line("Positions").contains("HTTP 400"), "{}", r.stdout);
    for id in [
        "txn.positions.result-shape",
        "txn.positions.set-and-release",
    ] {
        let row = r
            .stdout
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} not reported: {}", r.stdout));
        assert!(row.contains("FAIL"), "{row}");
    }
    broker.shutdown().await;
}

/// A clear sign of absence still skips: the answer Queen v0 and queen-engine 1.3 give
/// a transaction with only `positions` (they read it as a body without `operations`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn profile_auto_skips_positions_on_a_broker_without_them_and_says_so() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let proxy = start_proxy(&broker.url(), &[Breakage::PositionsUnknown]).await;
    let only = "txn.positions.*,prop.model.seek,txn.push.*";
    let r = run_binary(&["--url", &proxy, "--profile", "auto", "--only", only]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    let probe_line = |cap: &str| {
        r.stdout
            .lines()
            .find(|l| l.trim_start().starts_with(cap))
            .unwrap_or_else(|| panic!("no probe line for {cap}: {}", r.stdout))
            .to_string()
    };
    assert!(probe_line("Positions").contains(" no "), "{}", r.stdout);
    assert!(
        probe_line("Positions").contains("requires an operations array"),
        "{}",
        r.stdout
    );
    for cap in ["Core", "Cursor", "Kv", "Timers", "Locks"] {
        assert!(probe_line(cap).contains(" yes "), "{cap}: {}", r.stdout);
    }
    for id in [
        "txn.positions.result-shape",
        "txn.positions.set-and-release",
        "prop.model.seek",
    ] {
        let row = r
            .stdout
            .lines()
            .find(|l| l.starts_with(id))
            .unwrap_or_else(|| panic!("{id} not reported: {}", r.stdout));
        assert!(row.contains("skip"), "{row}");
        assert!(
            row.contains("profile auto lacks Positions: not found by the probe"),
            "{row}"
        );
    }
    assert!(
        r.stdout.contains("2 passed, 0 failed, 3 skipped"),
        "{}",
        r.stdout
    );
    // Straight against the reference broker, auto finds everything.
    let all = run_binary(&["--url", &broker.url(), "--profile", "auto", "--only", only]).await;
    assert_eq!(all.code, Some(0), "{}{}", all.stdout, all.stderr);
    assert!(
        all.stdout.contains("5 passed, 0 failed, 0 skipped"),
        "{}",
        all.stdout
    );
    broker.shutdown().await;
}
