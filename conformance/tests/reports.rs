//! The JSON and JUnit reports, written to files and parsed back, agree with the report
//! they render; and the binary writes a JUnit file that parses.

use std::path::{Path, PathBuf};

use queen_conformance::ctx::Exchange;
use queen_conformance::report::Flake;
use queen_conformance::{CaseResult, Failure, Level, Report, RunConfig, Status, all_cases, run};
use queen_mock_broker::MockBroker;
use quick_xml::Reader;
use quick_xml::escape::unescape;
use quick_xml::events::Event;
use serde_json::{Value, json};

/// A fresh folder under the target's temporary directory.
fn scratch() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("reports-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

/// A report with one pass, one fail (with its exchange), one skip and one flaky case,
/// and text that needs escaping.
fn synthetic() -> Report {
    let exchange = Exchange {
        request: "POST /api/v1/transaction".into(),
        body: Some(json!({"operations": [{"type": "push", "items": [{"queue": "q<&>"}]}]})),
        status: 200,
        answer: json!({"success": true, "results": []}),
    };
    Report {
        url: "http://broker.invalid:6632".into(),
        profile: "queen2".into(),
        results: vec![
            CaseResult {
                id: "syn.ok.passes".into(),
                level: Level::Must,
                rule: "It passes.".into(),
                section: "wire.md §5 Ack".into(),
                status: Status::Pass,
                millis: 5,
            },
            CaseResult {
                id: "syn.bad.fails".into(),
                level: Level::Should,
                rule: "It fails <loudly> & \"quotes\" 'too'.".into(),
                section: "wire.md §5 Ack".into(),
                status: Status::Fail(Failure {
                    exchange: Some(exchange.into()),
                    ..Failure::new("success = false <&>", "success = true")
                }),
                millis: 7,
            },
            CaseResult {
                id: "syn.skipped".into(),
                level: Level::Must,
                rule: "It needs KV.".into(),
                section: "wire.md §5 Ack".into(),
                status: Status::Skip("profile lacks Kv".into()),
                millis: 0,
            },
            CaseResult {
                id: "syn.sometimes".into(),
                level: Level::Must,
                rule: "It holds now & then.".into(),
                section: "transaction.md KV operations".into(),
                status: Status::Flaky(Flake {
                    failure: Failure::new("a new version", "8025 then <3024>"),
                    attempts: 2,
                    failed: 1,
                }),
                millis: 9,
            },
        ],
        millis: 12,
        ..Report::default()
    }
}

/// What a JUnit file says.
#[derive(Debug, Default)]
struct Junit {
    /// The testsuite's tests, failures and skipped attributes.
    suite: (usize, usize, usize),
    /// Testcase names, in order.
    cases: Vec<String>,
    /// Failure elements: (testcase, message attribute, text).
    failures: Vec<(String, String, String)>,
    /// Testcases with a skipped element.
    skipped: Vec<String>,
    /// Flaky-failure elements (Surefire's rerun form): (testcase, message, text).
    flaky: Vec<(String, String, String)>,
}

fn attr(e: &quick_xml::events::BytesStart, name: &str) -> String {
    e.attributes()
        .map(|a| a.expect("an attribute"))
        .find(|a| a.key.as_ref() == name.as_bytes())
        .map(|a| a.unescape_value().expect("a value").into_owned())
        .unwrap_or_else(|| panic!("no attribute {name}"))
}

fn parse_junit(xml: &str) -> Junit {
    let mut r = Reader::from_str(xml);
    let mut out = Junit::default();
    let mut suites = 0;
    let mut current = String::new();
    loop {
        match r.read_event().expect("well-formed XML") {
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"testsuite" => {
                suites += 1;
                let n = |k| attr(&e, k).parse::<usize>().expect("a count");
                out.suite = (n("tests"), n("failures"), n("skipped"));
            }
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"testcase" => {
                current = attr(&e, "name");
                assert!(!attr(&e, "classname").is_empty());
                out.cases.push(current.clone());
            }
            Event::Start(e) if e.name().as_ref() == b"failure" => {
                let message = attr(&e, "message");
                let end = e.to_end().into_owned();
                let raw = r.read_text(end.name()).expect("failure text");
                let text = unescape(&raw).expect("escaped text").into_owned();
                out.failures.push((current.clone(), message, text));
            }
            Event::Empty(e) if e.name().as_ref() == b"failure" => {
                out.failures
                    .push((current.clone(), attr(&e, "message"), String::new()));
            }
            Event::Start(e) if e.name().as_ref() == b"flakyFailure" => {
                let message = attr(&e, "message");
                let end = e.to_end().into_owned();
                let raw = r.read_text(end.name()).expect("flaky text");
                let text = unescape(&raw).expect("escaped text").into_owned();
                out.flaky.push((current.clone(), message, text));
            }
            Event::Start(e) | Event::Empty(e) if e.name().as_ref() == b"skipped" => {
                out.skipped.push(current.clone());
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(suites, 1, "one testsuite");
    out
}

/// Writes `report` as JSON and JUnit, reads both back, and checks them against it.
fn check_files(report: &Report, dir: &Path) {
    let (passed, failed, skipped) = report.counts();
    let ids: Vec<&str> = report.results.iter().map(|r| r.id.as_str()).collect();
    let skipped_ids: Vec<&str> = report
        .results
        .iter()
        .filter(|r| matches!(r.status, Status::Skip(_)))
        .map(|r| r.id.as_str())
        .collect();

    let json_path = dir.join("report.json");
    std::fs::write(&json_path, report.to_json()).expect("write JSON");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(&json_path).expect("read JSON"))
        .expect("the JSON report parses");
    assert_eq!(v["url"], json!(report.url));
    assert_eq!(v["profile"], json!(report.profile));
    let rows = v["results"].as_array().expect("results");
    let json_ids: Vec<&str> = rows.iter().map(|r| r["id"].as_str().expect("id")).collect();
    assert_eq!(json_ids, ids);
    let count = |s: &str| rows.iter().filter(|r| r["status"] == json!(s)).count();
    assert_eq!(
        (count("pass"), count("fail"), count("skip")),
        (passed, failed, skipped)
    );
    for (row, r) in rows.iter().zip(&report.results) {
        assert_eq!(row["level"], json!(r.level), "{}", r.id);
        assert_eq!(row["rule"], json!(r.rule), "{}", r.id);
        match &r.status {
            Status::Pass => assert!(row.get("detail").is_none(), "{}: {row}", r.id),
            Status::Skip(why) => assert_eq!(row["detail"], json!(why), "{}", r.id),
            Status::Flaky(fl) => {
                let d = &row["detail"];
                assert_eq!(d["attempts"], json!(fl.attempts), "{}", r.id);
                assert_eq!(d["failed"], json!(fl.failed), "{}", r.id);
                assert_eq!(d["failure"]["expected"], json!(fl.failure.expected));
                assert_eq!(d["failure"]["actual"], json!(fl.failure.actual));
            }
            Status::Inconclusive(f) => {
                assert_eq!(row["detail"]["actual"], json!(f.actual), "{}", r.id);
                assert_eq!(row["detail"]["kind"], json!("inconclusive"), "{}", r.id);
            }
            Status::NotRun(why) => assert_eq!(row["detail"], json!(why), "{}", r.id),
            Status::Fail(f) => {
                assert_eq!(row["detail"]["expected"], json!(f.expected), "{}", r.id);
                assert_eq!(row["detail"]["actual"], json!(f.actual), "{}", r.id);
                if let Some(x) = &f.exchange {
                    assert_eq!(row["detail"]["exchange"]["request"], json!(x.request));
                    assert_eq!(row["detail"]["exchange"]["status"], json!(x.status));
                    assert_eq!(row["detail"]["exchange"]["answer"], x.answer);
                }
            }
        }
    }
    let json_failed: Vec<&str> = rows
        .iter()
        .filter(|r| r["status"] == json!("fail"))
        .map(|r| r["id"].as_str().expect("id"))
        .collect();
    assert_eq!(json_failed, report.failed_ids());

    let xml_path = dir.join("report.xml");
    std::fs::write(&xml_path, report.to_junit()).expect("write JUnit");
    let j = parse_junit(&std::fs::read_to_string(&xml_path).expect("read JUnit"));
    assert_eq!(j.suite, (report.results.len(), failed, skipped));
    assert_eq!(j.cases, ids);
    assert_eq!(j.failures.len(), failed);
    assert_eq!(j.skipped, skipped_ids);
    let junit_failed: Vec<&str> = j.failures.iter().map(|f| f.0.as_str()).collect();
    assert_eq!(junit_failed, report.failed_ids());
    assert_eq!(j.flaky.len(), report.flaky(), "{:?}", j.flaky);
    for (id, message, text) in &j.flaky {
        let r = report.results.iter().find(|r| &r.id == id).expect("a row");
        let Status::Flaky(fl) = &r.status else {
            panic!("{id} is a flakyFailure but not flaky")
        };
        assert_eq!(message, &fl.failure.expected, "{id}");
        assert!(text.contains(&fl.summary()), "{id}: {text}");
    }
    for (id, message, text) in &j.failures {
        let r = report.results.iter().find(|r| &r.id == id).expect("a row");
        let Status::Fail(f) = &r.status else {
            unreachable!()
        };
        assert_eq!(message, &f.expected, "{id}");
        assert!(
            text.contains(&format!("expected: {}", f.expected)),
            "{id}: {text}"
        );
        assert!(
            text.contains(&format!("actual: {}", f.actual)),
            "{id}: {text}"
        );
        if let Some(x) = &f.exchange {
            assert!(text.contains(&x.request), "{id}: {text}");
        }
    }
}

#[test]
fn a_synthetic_report_round_trips_through_json_and_junit() {
    let report = synthetic();
    assert_eq!(report.counts(), (1, 1, 1));
    assert_eq!(report.flaky(), 1);
    assert!(!report.ok() && report.failed_ids() == ["syn.bad.fails"]);
    check_files(&report, &scratch());
    let text = report.to_text();
    assert!(
        text.contains("1 passed, 1 failed, 1 skipped, 1 flaky"),
        "{text}"
    );
    assert!(text.contains("FLAKY syn.sometimes [MUST]"), "{text}");
    assert!(
        text.contains("  flaky:    failed 1 of 2 attempts"),
        "{text}"
    );
    assert!(
        report
            .to_markdown()
            .contains("- `syn.sometimes`: flaky: failed 1 of 2 attempts"),
        "{}",
        report.to_markdown()
    );
    assert!(text.contains("FAIL syn.bad.fails [SHOULD]"), "{text}");
    assert!(text.contains("  spec:     wire.md §5 Ack"), "{text}");
}

#[test]
fn the_text_report_cuts_long_bodies_and_json_and_junit_keep_them() {
    let mut report = synthetic();
    let big = "x".repeat(1 << 20);
    let Status::Fail(f) = &mut report.results[1].status else {
        unreachable!()
    };
    let x = f.exchange.as_mut().expect("an exchange");
    x.body = Some(json!({"payload": big}));
    x.answer = json!({"echo": big});
    let text = report.to_text();
    assert!(
        text.len() < 16 * 1024,
        "the text report is {} bytes",
        text.len()
    );
    let whole = json!({"payload": big}).to_string().len();
    let kept = queen_conformance::report::TEXT_BODY_LIMIT;
    assert!(
        text.contains(&format!("{} more bytes cut", whole - kept)),
        "{}",
        &text[..4096.min(text.len())]
    );
    let v: Value = serde_json::from_str(&report.to_json()).expect("JSON");
    assert_eq!(
        v["results"][1]["detail"]["exchange"]["body"]["payload"],
        json!(big)
    );
    assert_eq!(
        v["results"][1]["detail"]["exchange"]["answer"]["echo"],
        json!(big)
    );
    assert!(
        report.to_junit().contains(&big),
        "JUnit keeps the whole body"
    );
    // Short bodies are printed whole.
    assert_eq!(queen_conformance::report::cut("short"), "short");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_against_the_broker_round_trips_through_json_and_junit() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let mut cfg = RunConfig::new(broker.url());
    cfg.only = Some("txn.push".into());
    let report = run(&cfg, all_cases()).await;
    assert!(!report.results.is_empty(), "txn.push selects cases");
    assert!(report.results.iter().all(|r| r.id.contains("txn.push")));
    check_files(&report, &scratch());
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_writes_a_junit_file() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let out = scratch().join("junit.xml");
    let run = tokio::process::Command::new(env!("CARGO_BIN_EXE_queen-conformance"))
        .args([
            "--url",
            &broker.url(),
            "--format",
            "junit",
            "--only",
            "txn.push",
        ])
        .arg("--output")
        .arg(&out)
        .env_remove("QUEEN_URL")
        .env_remove("QUEEN_TOKEN")
        .output()
        .await
        .expect("the binary runs");
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&run.stderr)
    );
    let j = parse_junit(&std::fs::read_to_string(&out).expect("the JUnit file"));
    let (tests, failures, skipped) = j.suite;
    assert!(tests > 0);
    assert_eq!(failures, 0);
    assert_eq!(j.cases.len(), tests);
    assert!(
        j.cases.iter().all(|c| c.contains("txn.push")),
        "{:?}",
        j.cases
    );
    assert!(j.failures.is_empty());
    assert_eq!(j.skipped.len(), skipped);
    assert!(
        stdout.contains(&format!(
            "{} passed, 0 failed, {skipped} skipped",
            tests - skipped
        )),
        "{stdout}"
    );
    broker.shutdown().await;
}
