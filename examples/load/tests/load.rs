//! Runs the `load` binary briefly (1 s measured, 4 workers) against an embedded broker
//! for each shape and mode, and against the no-op baseline (in-process and as a separate
//! `--serve-noop` process), and checks that its report parses, shows work done and no
//! errors.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_load");

/// Far above what one run needs (a few seconds), for a loaded CI machine.
const TIMEOUT: Duration = Duration::from_secs(120);

/// Kills the child when dropped (a failed assertion must not leave it running).
struct Guard(Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Runs `load` with `args`; answers its stdout, panicking (with stderr) unless it exits
/// 0 within [`TIMEOUT`].
fn load(args: &[&str]) -> String {
    let mut child = Guard(
        Command::new(BIN)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {BIN}: {e}")),
    );
    let drain = |mut r: Box<dyn Read + Send>| {
        thread::spawn(move || {
            let mut s = String::new();
            let _ = r.read_to_string(&mut s);
            s
        })
    };
    let out = drain(Box::new(child.0.stdout.take().expect("stdout")));
    let err = drain(Box::new(child.0.stderr.take().expect("stderr")));
    let started = Instant::now();
    let status = loop {
        if let Some(s) = child.0.try_wait().expect("waiting for load") {
            break s;
        }
        assert!(
            started.elapsed() < TIMEOUT,
            "load {args:?} did not finish within {TIMEOUT:?}"
        );
        thread::sleep(Duration::from_millis(20));
    };
    let (stdout, stderr) = (out.join().unwrap(), err.join().unwrap());
    assert!(
        status.success(),
        "load {args:?} failed ({status}):\n{stdout}\n{stderr}"
    );
    stdout
}

/// Runs `load --json` with `args` for 1 s at 4 workers and answers the parsed report,
/// after checking what every run must show.
fn report(args: &[&str]) -> Value {
    let mut all = vec![
        "--json",
        "--duration",
        "1",
        "--warmup",
        "0.3",
        "--concurrency",
        "4",
    ];
    all.extend_from_slice(args);
    let out = load(&all);
    let r: Value = serde_json::from_str(out.trim())
        .unwrap_or_else(|e| panic!("the report is not one JSON object ({e}):\n{out}"));
    assert!(r["ops"].as_u64().unwrap() > 0, "no operation: {r:#}");
    assert!(
        r["throughput"].as_f64().unwrap() > 0.0,
        "no throughput: {r:#}"
    );
    assert_eq!(r["errors"], 0, "errors: {r:#}");
    assert_eq!(r["rollbacks"], 0, "rollbacks: {r:#}");
    assert_eq!(r["concurrency"], 4);
    let lat = &r["latency_ms"];
    let (p50, p99, p999) = (
        lat["p50"].as_f64().unwrap(),
        lat["p99"].as_f64().unwrap(),
        lat["p999"].as_f64().unwrap(),
    );
    assert!(
        0.0 < p50 && p50 <= p99 && p99 <= p999,
        "latency quantiles out of order: {lat}"
    );
    r
}

/// An embedded run: the group commit is reported and committed something.
fn embedded(shape: &str, mode: &str) -> Value {
    let r = report(&["--shape", shape, "--mode", mode]);
    assert_eq!(r["target"], "embedded");
    assert_eq!(r["shape"], shape);
    assert_eq!(r["mode"], mode);
    let g = &r["group_commit"];
    assert!(
        g["commits"].as_u64().unwrap() > 0,
        "no durable commit: {r:#}"
    );
    assert!(g["batches_per_s"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(g["average_batch"].as_f64().unwrap() >= 1.0, "{r:#}");
    r
}

#[test]
fn push_embedded() {
    let r = embedded("push", "sdk");
    assert_eq!(r["prefilled"], 0, "push reads nothing: {r:#}");
}

#[test]
fn ack_push_embedded() {
    let r = embedded("ack-push", "sdk");
    assert!(r["prefilled"].as_u64().unwrap() > r["ops"].as_u64().unwrap());
    assert_eq!(r["input_exhausted"], false, "{r:#}");
}

#[test]
fn seed_step_embedded() {
    let r = embedded("seed-step", "sdk");
    assert_eq!(r["input_exhausted"], false, "{r:#}");
}

#[test]
fn raw_mode_embedded() {
    for shape in ["push", "ack-push", "seed-step"] {
        embedded(shape, "raw");
    }
}

#[test]
fn against_the_in_process_noop() {
    for mode in ["sdk", "raw"] {
        let r = report(&["--shape", "seed-step", "--mode", mode, "--against-noop"]);
        assert_eq!(r["target"], "noop");
        assert!(r["group_commit"].is_null());
    }
}

#[test]
fn against_a_serve_noop_process() {
    let mut server = Guard(
        Command::new(BIN)
            .args([
                "--serve-noop",
                "--listen",
                "127.0.0.1:0",
                "--duration",
                "60",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the no-op server"),
    );
    let mut line = String::new();
    BufReader::new(server.0.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the server's first line");
    let url = line
        .trim()
        .rsplit(' ')
        .next()
        .filter(|u| u.starts_with("http://127.0.0.1:"))
        .unwrap_or_else(|| panic!("no URL in {line:?}"))
        .to_string();
    for shape in ["push", "ack-push"] {
        let r = report(&[
            "--shape",
            shape,
            "--mode",
            "raw",
            "--against-noop",
            "--url",
            &url,
        ]);
        assert_eq!(r["target"], "noop-url");
    }
}

#[test]
fn text_output_names_the_figures() {
    let out = load(&[
        "--shape",
        "ack-push",
        "--duration",
        "1",
        "--warmup",
        "0",
        "--concurrency",
        "4",
    ]);
    for label in [
        "throughput:",
        "latency:",
        "errors:       0",
        "group commit:",
    ] {
        assert!(out.contains(label), "no {label:?} in:\n{out}");
    }
}

#[test]
fn refuses_a_target_off_the_loopback() {
    let status = Command::new(BIN)
        .args(["--url", "http://example.invalid:6632", "--duration", "1"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("run load");
    assert!(!status.success());
}
