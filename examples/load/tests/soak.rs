//! Runs `load --soak` for a few seconds against its embedded durable broker, sampling
//! every second, and checks what the hour-long run is read from: a CSV row per sample
//! with the broker's figures, the SVG plot, and a summary with calls made, no errors,
//! nothing lost, and retention deleting consumed messages while it ran.

use std::io::Read;
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_load");

/// Far above what the run needs (about 10 s), for a loaded CI machine.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Runs `load` with `args`; panics (with its output) unless it exits 0 within
/// [`TIMEOUT`].
fn load(args: &[&str]) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}"));
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.stderr.take().expect("stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("waiting for load") {
            break s;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("load {args:?} did not finish within {TIMEOUT:?}");
        }
        thread::sleep(Duration::from_millis(50));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.success(),
        "load {args:?} failed ({status}):\n{stdout}\n{stderr}"
    );
}

/// The value of `column` in a CSV `row` under `header`.
fn field<'a>(header: &[&str], row: &'a [&'a str], column: &str) -> &'a str {
    let i = header
        .iter()
        .position(|h| *h == column)
        .unwrap_or_else(|| panic!("no column {column} in {header:?}"));
    row[i]
}

#[test]
fn a_short_soak_samples_every_second_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("soak");
    let out_s = out.to_str().unwrap();
    // 6 s at 200 operations a second, consumed messages deleted after 1 s.
    load(&[
        "--soak",
        "0.1",
        "--sample-secs",
        "1",
        "--rate",
        "200",
        "--retention-secs",
        "1",
        "--timer-delay-secs",
        "0.5",
        "--concurrency",
        "32",
        "--partitions",
        "8",
        "--out",
        out_s,
    ]);

    let csv = std::fs::read_to_string(out.join("soak.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    // One a second for 6 s; a loaded machine may wake the sampler late, never early.
    assert!((5..=7).contains(&rows.len()), "{} rows:\n{csv}", rows.len());
    for row in &rows {
        assert_eq!(row.len(), header.len(), "{row:?}");
        // The embedded broker is this process: its RSS, files and data file are read.
        let rss: f64 = field(&header, row, "rss_mib").parse().unwrap();
        let fds: u64 = field(&header, row, "open_files").parse().unwrap();
        let data: f64 = field(&header, row, "data_mib").parse().unwrap();
        assert!(rss > 1.0 && fds > 3 && data > 0.0, "{row:?}");
        let calls: u64 = field(&header, row, "requests").parse().unwrap();
        assert!(calls > 0, "{row:?}");
        assert_eq!(field(&header, row, "errors"), "0", "{row:?}");
        assert!(!field(&header, row, "p99_ms").is_empty(), "{row:?}");
        assert!(
            !field(&header, row, "stored_messages").is_empty(),
            "{row:?}"
        );
    }

    let svg = std::fs::read_to_string(out.join("soak.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
    // RSS, data + log, data, log, p99, p50, stored, not consumed.
    assert_eq!(svg.matches("<polyline").count(), 8, "{svg}");

    let summary: Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap()).unwrap();
    let n = |k: &str| {
        summary[k]
            .as_u64()
            .unwrap_or_else(|| panic!("{k}: {summary}"))
    };
    assert_eq!(n("errors"), 0, "{summary}");
    assert_eq!(n("lost"), 0, "{summary}");
    assert!(n("pushed") > 100, "{summary}");
    assert!(n("consumed") >= n("pushed"), "{summary}");
    // Retention ran: with 1 s of completed retention (swept every second), the queues
    // hold the last 2 or 3 s of the run's messages at the end, not all 6 s of them, as
    // they would without.
    assert!(
        n("stored_end") * 4 < n("pushed") * 3,
        "stored {} of {} pushed: {summary}",
        n("stored_end"),
        n("pushed")
    );
    assert!(summary["horizon_minute"].as_f64().is_some(), "{summary}");
    assert!(summary["p99_first_ms"].as_f64().is_some(), "{summary}");
    let text = std::fs::read_to_string(out.join("summary.txt")).unwrap();
    assert!(text.contains("lost 0"), "{text}");
}
