//! Every way a run can fail to judge the broker exits 2 with one line naming the cause,
//! never 0 and never 1 with a pile of "failures": each test here reproduces one false
//! pass of issue 51 (a web server that is not Queen, a refused token, an `--only`
//! that selects nothing, a broker killed mid-run, a run of skips alone).

mod support;

use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role};
use support::{run_binary, scratch, start_dying_proxy, start_not_queen, unreachable_url};

/// The one `could not run` line of standard error.
fn cause(stderr: &str) -> &str {
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("queen-conformance: could not run: "))
        .collect();
    assert_eq!(lines.len(), 1, "one line naming the cause: {stderr}");
    lines[0]
}

/// `python3 -m http.server` serving a `health` file answers 200 on /health: under
/// `--profile auto` the suite once skipped all 227 cases and exited 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_is_not_queen_could_not_be_judged() {
    let web = start_not_queen().await;
    let dir = scratch("not-queen");
    let baseline = dir.join("baseline.txt");
    std::fs::write(&baseline, "# nothing known\n").expect("a baseline");
    let written = dir.join("written.txt");
    for extra in [
        vec!["--profile", "auto"],
        vec!["--profile", "queen2"],
        vec![
            "--profile",
            "auto",
            "--baseline",
            baseline.to_str().expect("UTF-8"),
        ],
        vec![
            "--profile",
            "auto",
            "--write-baseline",
            written.to_str().expect("UTF-8"),
        ],
    ] {
        let mut args = vec!["--url", web.as_str()];
        args.extend(extra.iter());
        let r = run_binary(&args).await;
        assert_eq!(r.code, Some(2), "{extra:?}: {}{}", r.stdout, r.stderr);
        let line = cause(&r.stderr);
        assert!(line.contains("not a Queen broker"), "{line}");
        assert!(
            line.contains("POST /api/v1/push answered HTTP 501"),
            "{line}"
        );
        assert_eq!(
            r.stderr.lines().count(),
            1,
            "one line, a web page's newlines included: {}",
            r.stderr
        );
        assert!(
            !r.stdout.contains("skipped"),
            "no case was reported: {}",
            r.stdout
        );
    }
    assert!(
        !written.exists(),
        "a run that could not judge writes no baseline"
    );
}

/// A missing, wrong or too weak token: exit 2 naming the role needed, not 226
/// "failures"; and `--write-baseline` in that state writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_refused_at_the_preflight_names_the_role_needed() {
    let auth = Auth::new()
        .token("ro", Role::ReadOnly, "acme", None)
        .token("rw", Role::ReadWrite, "acme", None)
        .token("adm", Role::Admin, "acme", None);
    let broker = MockBroker::builder()
        .in_memory()
        .auth(auth)
        .start()
        .await
        .expect("a broker with auth");
    let url = broker.url();
    let dir = scratch("auth");
    let file = dir.join("baseline.txt");
    let file_s = file.to_str().expect("UTF-8");
    let only = "txn.push.*,core.health";
    for (token, status, needs) in [
        (None, "HTTP 401", "pass one of role admin"),
        (Some("wrong"), "HTTP 401", "pass one of role admin"),
        (Some("ro"), "HTTP 403", "this request needs admin"),
        (Some("rw"), "HTTP 403", "this request needs admin"),
    ] {
        let mut args = vec![
            "--url",
            url.as_str(),
            "--only",
            only,
            "--write-baseline",
            file_s,
        ];
        if let Some(t) = token {
            args.extend(["--token", t]);
        }
        let r = run_binary(&args).await;
        assert_eq!(r.code, Some(2), "{token:?}: {}{}", r.stdout, r.stderr);
        let line = cause(&r.stderr);
        assert!(line.contains("auth refused"), "{token:?}: {line}");
        assert!(line.contains(status), "{token:?}: {line}");
        assert!(line.contains(needs), "{token:?}: {line}");
        assert!(!r.stdout.contains("FAIL"), "{token:?}: {}", r.stdout);
        assert!(!file.exists(), "{token:?}: a refused run wrote a baseline");
    }
    // The refused runs left nothing behind: the role is asked before anything is made.
    let queues = reqwest::Client::new()
        .get(format!("{url}/api/v1/resources/queues"))
        .bearer_auth("adm")
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .expect("a body");
    assert!(!queues.contains("preflight"), "{queues}");
    // The admin token runs, and passes.
    let r = run_binary(&["--url", &url, "--only", only, "--token", "adm"]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    broker.shutdown().await;
}

/// `--only` that selects nothing, or a list with one part that selects nothing (a
/// typo), is an error before the broker is asked anything.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_only_that_selects_nothing_is_an_error() {
    let down = unreachable_url();
    for (only, part) in [
        ("no.such.case", "\"no.such.case\""),
        ("txn.pusj.*,core.health", "\"txn.pusj.*\""),
        ("core.health,", "__none__"),
    ] {
        let r = run_binary(&["--url", &down, "--only", only]).await;
        if part == "__none__" {
            // A trailing comma is no part at all: the rest selects.
            assert!(
                r.stderr.contains("not ready"),
                "{only}: reached the broker check: {}",
                r.stderr
            );
            continue;
        }
        assert_eq!(r.code, Some(2), "{only}: {}{}", r.stdout, r.stderr);
        let line = cause(&r.stderr);
        assert!(
            line.contains(&format!("--only {part} selects no case")),
            "{line}"
        );
    }
}

/// Every selected case skipped: nothing was judged, so nothing passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_of_skips_alone_judged_nothing() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let r = run_binary(&[
        "--url",
        &broker.url(),
        "--profile",
        "v0",
        "--only",
        "core.kv.*",
    ])
    .await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    let line = cause(&r.stderr);
    assert!(line.contains("nothing was judged"), "{line}");
    assert!(line.contains("profile v0 lacks Kv"), "{line}");
    // Its JUnit report is not green either.
    let dir = scratch("judged");
    let junit = dir.join("junit.xml");
    let arg = format!("junit={}", junit.display());
    let r = run_binary(&[
        "--url",
        &broker.url(),
        "--profile",
        "v0",
        "--only",
        "core.kv.*",
        "--format",
        &arg,
    ])
    .await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    assert!(xml.contains("errors=\"1\""), "{xml}");
    assert!(xml.contains("<error message=\"nothing was judged"), "{xml}");
    broker.shutdown().await;
}

/// A broker killed mid-run: one line naming the case where it stopped, the cases after
/// it not run, and no transport "failures".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_that_stops_answering_midrun_is_named_once() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    // The core cases at two at a time take well over 3 s (several wait out a 1 s lease
    // or TTL); the proxy dies after 1.5 s, after the preflight.
    let proxy = start_dying_proxy(&broker.url(), Duration::from_millis(1500)).await;
    let r = run_binary(&["--url", &proxy, "--only", "core.*", "--concurrency", "2"]).await;
    assert_eq!(r.code, Some(2), "{}{}", r.stdout, r.stderr);
    let line = cause(&r.stderr);
    assert!(
        line.contains("the broker stopped answering during case core."),
        "{line}"
    );
    assert!(line.contains("case(s) had finished"), "{line}");
    assert!(
        r.stdout.contains("STOPPED: the broker stopped answering"),
        "{}",
        r.stdout
    );
    let summary = r
        .stdout
        .lines()
        .find(|l| l.contains(" passed, "))
        .unwrap_or_else(|| panic!("a summary: {}", r.stdout));
    assert!(summary.contains(" 0 failed"), "{summary}");
    assert!(summary.contains(" not run"), "{summary}");
    assert!(
        !r.stdout.lines().any(|l| l.contains(" FAIL ")),
        "no transport \"failures\": {}",
        r.stdout
    );
    broker.shutdown().await;
}

/// At 150 ms a request (the speed the issue measured), the cases that wait for a lease
/// or a TTL size their window from the preflight's latency and pass, and a property
/// that runs out of its time budget is inconclusive, not a MUST failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_broker_gets_sized_windows_and_inconclusive_properties() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let slow = support::start_proxy(&broker.url(), &[support::Breakage::Slow]).await;
    let only = "core.health,core.kv.expired-is-absent,core.pop.lease-expiry-redelivers,txn.ack.fenced.expired-lease,prop.model.queue";
    // More sequences than fit in the property's 35 s budget at this speed.
    let r = run_binary(&["--url", &slow, "--only", only, "--cases", "5000"]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("4 passed, 0 failed, 0 skipped, 1 inconclusive"),
        "{}",
        r.stdout
    );
    let row = r
        .stdout
        .lines()
        .find(|l| l.starts_with("prop.model.queue"))
        .expect("the property's row");
    assert!(row.contains("INCONC"), "{row}");
    assert!(row.contains("of 5000 sequences ran, none failed"), "{row}");
    broker.shutdown().await;
}
