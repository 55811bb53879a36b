//! Runs the `load` binary briefly (1 s measured, 4 workers) against an embedded broker
//! for each shape and mode (the popping shapes `pop` and `pop-ack` with batches and
//! consumer groups too, and a run over background stored data), and against the no-op
//! baseline (in-process and as a separate `--serve-noop` process), and checks that its
//! report parses, shows work done and no errors.

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
    // The writer thread is found by its name and is part of the process.
    let (writer, all) = (
        r["writer_cpu_us_per_op"].as_f64(),
        r["cpu_us_per_op"].as_f64(),
    );
    let (writer, all) = (
        writer.unwrap_or_else(|| panic!("no writer CPU: {r:#}")),
        all.unwrap_or_else(|| panic!("no process CPU: {r:#}")),
    );
    assert!(
        (0.0..=all).contains(&writer),
        "the writer's CPU is a share of the process's: {r:#}"
    );
    r
}

#[test]
fn push_embedded() {
    let r = embedded("push", "sdk");
    assert_eq!(r["prefilled"], 0, "push reads nothing: {r:#}");
}

#[test]
fn push_kv_embedded_and_against_the_noop() {
    for mode in ["sdk", "raw"] {
        let r = embedded("push-kv", mode);
        assert_eq!(r["prefilled"], 0, "push-kv reads nothing: {r:#}");
        let r = report(&["--shape", "push-kv", "--mode", mode, "--against-noop"]);
        assert_eq!(r["target"], "noop");
        assert!(r["writer_cpu_us_per_op"].is_null(), "no writer: {r:#}");
    }
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
fn hyper_mode_embedded() {
    // The raw bodies over hyper-util's client: the same steps succeed.
    for shape in ["push-kv", "ack-push"] {
        let r = embedded(shape, "hyper");
        assert_eq!(r["mode"], "hyper", "{r:#}");
    }
}

/// A `pop` or `pop-ack` run against the embedded broker at `batch` messages per pop and
/// with `groups` consumer groups: the messages are counted, at most `batch` per
/// operation, and the input lasted.
fn popping(shape: &str, mode: &str, batch: u64, groups: u64) -> Value {
    let (b, g) = (batch.to_string(), groups.to_string());
    let r = report(&[
        "--shape",
        shape,
        "--mode",
        mode,
        "--batch",
        &b,
        "--groups",
        &g,
        "--partitions",
        "16",
    ]);
    assert_eq!(r["target"], "embedded");
    assert_eq!(r["shape"], shape);
    assert_eq!(
        (r["batch"].as_u64(), r["groups"].as_u64()),
        (Some(batch), Some(groups))
    );
    let (ops, msgs) = (r["ops"].as_u64().unwrap(), r["messages"].as_u64().unwrap());
    assert!(
        ops <= msgs && msgs <= ops * batch,
        "{msgs} messages for {ops} pops of at most {batch}: {r:#}"
    );
    assert!(r["messages_per_s"].as_f64().unwrap() > 0.0, "{r:#}");
    assert_eq!(r["input_exhausted"], false, "{r:#}");
    assert!(r["prefill_s"].as_f64().unwrap() > 0.0, "{r:#}");
    assert!(r["group_commit"]["commits"].as_u64().unwrap() > 0, "{r:#}");
    r
}

#[test]
fn pop_embedded() {
    popping("pop", "sdk", 1, 0);
    popping("pop", "raw", 3, 2);
}

#[test]
fn pop_ack_embedded() {
    popping("pop-ack", "sdk", 4, 2);
    popping("pop-ack", "raw", 1, 0);
}

#[test]
fn an_empty_input_is_empty_pops_not_errors() {
    let out = load(&[
        "--json",
        "--shape",
        "pop",
        "--prefill",
        "4",
        "--partitions",
        "2",
        "--duration",
        "1",
        "--warmup",
        "0.2",
        "--concurrency",
        "2",
    ]);
    let r: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(r["errors"], 0, "{r:#}");
    assert!(r["empty_pops"].as_u64().unwrap() > 0, "{r:#}");
    assert_eq!(r["input_exhausted"], true, "{r:#}");
}

#[test]
fn over_stored_data() {
    let r = report(&[
        "--shape",
        "seed-step",
        "--stored-messages",
        "600",
        "--stored-partitions",
        "50",
        "--stored-kv",
        "300",
        "--stored-timers",
        "300",
    ]);
    let s = &r["stored"];
    assert_eq!(
        (
            s["messages"].as_u64(),
            s["partitions"].as_u64(),
            s["kv"].as_u64(),
            s["timers"].as_u64()
        ),
        (Some(600), Some(50), Some(300), Some(300)),
        "{r:#}"
    );
    assert!(s["load_s"].as_f64().unwrap() > 0.0, "{r:#}");
    assert_eq!(r["input_exhausted"], false, "{r:#}");
}

#[test]
fn against_the_in_process_noop() {
    for mode in ["sdk", "raw", "hyper"] {
        let r = report(&["--shape", "seed-step", "--mode", mode, "--against-noop"]);
        assert_eq!(r["target"], "noop");
        assert!(r["group_commit"].is_null());
        // The pop is the operation: the no-op answers it (and the ack).
        let r = report(&["--shape", "pop-ack", "--mode", mode, "--against-noop"]);
        assert_eq!(r["messages"], r["ops"], "{r:#}");
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
        "writer:",
    ] {
        assert!(out.contains(label), "no {label:?} in:\n{out}");
    }
}

#[test]
fn refuses_options_of_other_shapes() {
    for args in [
        &["--shape", "ack-push", "--batch", "5"][..],
        &["--shape", "push", "--groups", "2"],
        &["--shape", "pop", "--groups", "8", "--concurrency", "4"],
        &["--against-noop", "--stored-kv", "10"],
    ] {
        let status = Command::new(BIN)
            .args(args)
            .args(["--duration", "1"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .expect("run load");
        assert!(!status.success(), "load {args:?} ran");
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
