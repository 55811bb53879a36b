//! The baseline gate cannot drift: capabilities are recorded and a lost one fails,
//! `--require` names the ones a broker must have, a known case failing for another
//! reason is reported (and can fail), the properties run on a pinned seed, and one run
//! writes several formats in which known failures read as known (JUnit `<skipped>`).

mod support;

use queen_mock_broker::MockBroker;
use quick_xml::Reader;
use quick_xml::events::Event;
use serde_json::Value;
use support::{Breakage, run_binary, scratch, start_proxy};

/// The push rules of the transaction, and health: quick.
const SELECTION: &str = "txn.push.*,core.health";

/// One `<failure>`, `<skipped>` or `<error>`: (testcase, element, message).
type Element = (String, String, String);

/// Every such element, and the testsuite's (tests, failures, skipped).
fn junit(xml: &str) -> (Vec<Element>, (usize, usize, usize)) {
    let mut r = Reader::from_str(xml);
    let (mut out, mut suite, mut current) = (Vec::new(), (0, 0, 0), String::new());
    let attr = |e: &quick_xml::events::BytesStart, k: &str| {
        e.attributes()
            .map(|a| a.expect("an attribute"))
            .find(|a| a.key.as_ref() == k.as_bytes())
            .map(|a| a.unescape_value().expect("a value").into_owned())
            .unwrap_or_default()
    };
    loop {
        match r.read_event().expect("well-formed XML") {
            Event::Start(e) | Event::Empty(e) => {
                let name = String::from_utf8_lossy(e.name().as_ref()).into_owned();
                match name.as_str() {
                    "testsuite" => {
                        let n = |k| attr(&e, k).parse::<usize>().expect("a count");
                        suite = (n("tests"), n("failures"), n("skipped"));
                    }
                    "testcase" => current = attr(&e, "name"),
                    "failure" | "skipped" | "error" => {
                        out.push((current.clone(), name, attr(&e, "message")));
                    }
                    _ => {}
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    (out, suite)
}

/// A baseline written against a broker that breaks one rule gates the same broker
/// green in every format of one run, and a second broken rule turns JUnit red.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn known_failures_read_as_known_in_every_format_of_one_run() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let one = start_proxy(&broker.url(), &[Breakage::DropReason]).await;
    let dir = scratch("gate-formats");
    let file = dir.join("baseline.txt");
    let file_s = file.to_str().expect("UTF-8");
    let w = run_binary(&[
        "--url",
        &one,
        "--only",
        SELECTION,
        "--write-baseline",
        file_s,
    ])
    .await;
    assert_eq!(w.code, Some(1), "{}{}", w.stdout, w.stderr);
    let text = std::fs::read_to_string(&file).expect("the baseline");
    assert!(text.contains("#! format 2\n"), "{text}");
    assert!(text.contains("#! capabilities Core Cursor Positions Kv Timers Locks Time Fetch Streams Ephemeral Admin\n"), "{text}");
    assert!(text.contains("#! seed "), "{text}");

    let (j, m, js) = (
        dir.join("junit.xml"),
        dir.join("summary.md"),
        dir.join("report.json"),
    );
    let formats = [
        format!("junit={}", j.display()),
        format!("markdown={}", m.display()),
        format!("json={}", js.display()),
    ];
    let gate = |url: String| {
        let formats = formats.clone();
        let file_s = file_s.to_string();
        async move {
            run_binary(&[
                "--url",
                &url,
                "--only",
                SELECTION,
                "--baseline",
                &file_s,
                "--format",
                "text",
                "--format",
                &formats[0],
                "--format",
                &formats[1],
                "--format",
                &formats[2],
            ])
            .await
        }
    };
    let r = gate(one.clone()).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout.contains("KNOWN FAIL txn.push.duplicate.in-window"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("gate pass: baseline"), "{}", r.stdout);
    let (elements, suite) = junit(&std::fs::read_to_string(&j).expect("junit"));
    assert_eq!(
        suite.1, 0,
        "no <failure> on a gate that passes: {elements:?}"
    );
    let known = elements
        .iter()
        .find(|(case, _, _)| case == "txn.push.duplicate.in-window")
        .expect("the known case");
    assert_eq!(known.1, "skipped", "{known:?}");
    assert!(
        known.2.starts_with("known failure (in the baseline)"),
        "{known:?}"
    );
    let md = std::fs::read_to_string(&m).expect("markdown");
    assert!(md.contains("**Gate: pass** (baseline"), "{md}");
    assert!(md.contains("Known failures (in the baseline"), "{md}");
    assert!(!md.contains("New failures:"), "{md}");
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(&js).expect("json")).expect("JSON");
    assert_eq!(v["gate"]["ok"], Value::Bool(true), "{v}");
    assert_eq!(
        v["gate"]["still_failing"][0],
        "txn.push.duplicate.in-window"
    );

    // A second broken rule: red, naming only the new case.
    let two = start_proxy(
        &broker.url(),
        &[Breakage::DropReason, Breakage::HealthWithoutVersion],
    )
    .await;
    let r = gate(two).await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    let (elements, suite) = junit(&std::fs::read_to_string(&j).expect("junit"));
    assert_eq!(suite.1, 1, "{elements:?}");
    assert!(
        elements
            .iter()
            .any(|(c, e, _)| c == "core.health" && e == "failure"),
        "{elements:?}"
    );
    let md = std::fs::read_to_string(&m).expect("markdown");
    assert!(
        md.contains("**Gate: FAIL**") && md.contains("New failures:"),
        "{md}"
    );

    // Two reports for standard output is a mistake, said before any request.
    let r = run_binary(&["--url", &one, "--format", "text", "--format", "json"]).await;
    assert_eq!(r.code, Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("only one report goes to standard output"),
        "{}",
        r.stderr
    );
    broker.shutdown().await;
}

/// A capability the baseline's broker had and this one lacks is a new failure under
/// `--profile auto` (it would otherwise be skips and exit 0); `--require` names the
/// ones a broker must have.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capability_that_disappears_fails_the_gate() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let only = "txn.positions.*,txn.push.*";
    let dir = scratch("gate-caps");
    let file = dir.join("baseline.txt");
    let file_s = file.to_str().expect("UTF-8");
    let w = run_binary(&[
        "--url",
        &broker.url(),
        "--profile",
        "auto",
        "--only",
        only,
        "--write-baseline",
        file_s,
    ])
    .await;
    assert_eq!(w.code, Some(0), "{}{}", w.stdout, w.stderr);
    assert!(
        std::fs::read_to_string(&file)
            .expect("baseline")
            .contains(" Positions "),
        "the probe found positions"
    );
    let without = start_proxy(&broker.url(), &[Breakage::PositionsUnknown]).await;
    let j = dir.join("junit.xml");
    let junit_arg = format!("junit={}", j.display());
    let r = run_binary(&[
        "--url",
        &without,
        "--profile",
        "auto",
        "--only",
        only,
        "--baseline",
        file_s,
        "--format",
        "text",
        "--format",
        &junit_arg,
    ])
    .await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("MISSING CAPABILITY Positions: the baseline's broker had it"),
        "{}",
        r.stdout
    );
    let (elements, suite) = junit(&std::fs::read_to_string(&j).expect("junit"));
    assert_eq!(suite.1, 1, "{elements:?}");
    assert!(
        elements.iter().any(|(c, e, m)| c == "capability.Positions"
            && e == "failure"
            && m.contains("missing")),
        "{elements:?}"
    );

    // --require, without a baseline.
    let r = run_binary(&[
        "--url",
        &without,
        "--profile",
        "auto",
        "--only",
        only,
        "--require",
        "positions,Kv",
    ])
    .await;
    assert_eq!(r.code, Some(1), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("MISSING CAPABILITY Positions: --require names it"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("MISSING CAPABILITY Kv"), "{}", r.stdout);
    // A required capability the chosen profile leaves out, or a misspelt one: exit 2.
    for (args, says) in [
        (
            vec!["--profile", "queen2-fast", "--require", "Time"],
            "profile queen2-fast leaves it out",
        ),
        (
            vec!["--require", "Postions"],
            "unknown capability \"Postions\"",
        ),
    ] {
        let mut all = vec!["--url", without.as_str(), "--only", only];
        all.extend(args);
        let r = run_binary(&all).await;
        assert_eq!(r.code, Some(2), "{says}: {}{}", r.stdout, r.stderr);
        assert!(r.stderr.contains(says), "{}", r.stderr);
    }
    broker.shutdown().await;
}

/// A known case that fails for another reason than its baseline entry is reported
/// (`CHANGED`), and fails the gate under `--on-changed-reason fail`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_reason_is_reported_and_can_fail() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let one = start_proxy(&broker.url(), &[Breakage::DropReason]).await;
    let dir = scratch("gate-reason");
    let file = dir.join("baseline.txt");
    let file_s = file.to_str().expect("UTF-8");
    let w = run_binary(&[
        "--url",
        &one,
        "--only",
        SELECTION,
        "--write-baseline",
        file_s,
    ])
    .await;
    assert_eq!(w.code, Some(1), "{}{}", w.stdout, w.stderr);
    // The same run again, in new names and ids: the same reason.
    let same = run_binary(&["--url", &one, "--only", SELECTION, "--baseline", file_s]).await;
    assert_eq!(same.code, Some(0), "{}{}", same.stdout, same.stderr);
    assert!(
        same.stdout.contains(", 0 changed reason,"),
        "{}",
        same.stdout
    );
    // The file's reason edited: the case now fails for another reason.
    let text = std::fs::read_to_string(&file).expect("baseline");
    let edited: String = text
        .lines()
        .map(|l| {
            if l.starts_with("txn.push.duplicate.in-window") {
                "txn.push.duplicate.in-window  expected HTTP 200; got HTTP 500".to_string()
            } else {
                l.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(&file, edited).expect("write");
    let r = run_binary(&["--url", &one, "--only", SELECTION, "--baseline", file_s]).await;
    assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
    assert!(
        r.stdout
            .contains("CHANGED txn.push.duplicate.in-window (reported;"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains("was: expected HTTP 200; got HTTP 500"),
        "{}",
        r.stdout
    );
    let strict = run_binary(&[
        "--url",
        &one,
        "--only",
        SELECTION,
        "--baseline",
        file_s,
        "--on-changed-reason",
        "fail",
    ])
    .await;
    assert_eq!(strict.code, Some(1), "{}{}", strict.stdout, strict.stderr);
    broker.shutdown().await;
}

/// In gate mode the properties run on a pinned seed: the baseline's, or a fixed one for
/// a file without; `--seed` still wins.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_gate_pins_the_property_seed() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let dir = scratch("gate-seed");
    let json = dir.join("report.json");
    let json_arg = format!("json={}", json.display());
    let seed_of = |file: std::path::PathBuf, extra: Vec<&'static str>| {
        let (url, json_arg, json) = (broker.url(), json_arg.clone(), json.clone());
        async move {
            let mut args = vec![
                "--url".to_string(),
                url,
                "--only".into(),
                "core.health".into(),
                "--baseline".into(),
                file.display().to_string(),
                "--format".into(),
                json_arg,
            ];
            args.extend(extra.into_iter().map(String::from));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let r = run_binary(&args).await;
            assert_eq!(r.code, Some(0), "{}{}", r.stdout, r.stderr);
            let v: Value =
                serde_json::from_str(&std::fs::read_to_string(&json).expect("json")).expect("JSON");
            v["seed"].as_u64().expect("a seed")
        }
    };
    let old = dir.join("old.txt");
    std::fs::write(&old, "# format 1: no seed\n").expect("write");
    assert_eq!(
        seed_of(old.clone(), vec![]).await,
        queen_conformance::baseline::GATE_SEED
    );
    let pinned = dir.join("pinned.txt");
    std::fs::write(&pinned, "#! format 2\n#! seed 42\n").expect("write");
    assert_eq!(seed_of(pinned.clone(), vec![]).await, 42);
    assert_eq!(seed_of(pinned, vec!["--seed", "7"]).await, 7);
    broker.shutdown().await;
}
