//! Runs each example binary as a user would, checks that it exits 0 within a bound and
//! that its output says what it should.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use queen_mock_broker::MockBroker;
use queen_sdk::{Client, DlqQuery, PushItem};

/// Far above what each binary needs (a few seconds), for a loaded CI machine.
const TIMEOUT: Duration = Duration::from_secs(90);

struct Run {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

impl Run {
    fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    /// Asserts a line starting with `prefix` and containing every one of `parts`.
    fn expect_line(&self, prefix: &str, parts: &[&str]) -> &str {
        self.lines()
            .into_iter()
            .find(|l| l.starts_with(prefix) && parts.iter().all(|p| l.contains(p)))
            .unwrap_or_else(|| {
                panic!(
                    "no line starting with {prefix:?} containing {parts:?} in:\n{}",
                    self.stdout
                )
            })
    }

    fn count(&self, line: &str) -> usize {
        self.lines().into_iter().filter(|l| *l == line).count()
    }
}

/// Runs `bin` with `QUEEN_URL` set to `url`, or unset; kills it past [`TIMEOUT`].
fn run(bin: &str, url: Option<&str>) -> Run {
    let mut cmd = Command::new(bin);
    cmd.env_remove("QUEEN_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    match url {
        Some(u) => cmd.env("QUEEN_URL", u),
        None => cmd.env_remove("QUEEN_URL"),
    };
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
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
        if let Some(status) = child.try_wait().expect("waiting for the child") {
            break status;
        }
        if started.elapsed() > TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{bin} did not finish within {TIMEOUT:?}; output so far:\n{}",
                out.join().unwrap_or_default()
            );
        }
        thread::sleep(Duration::from_millis(20));
    };
    let r = Run {
        status,
        stdout: out.join().expect("stdout reader"),
        stderr: err.join().expect("stderr reader"),
    };
    assert!(
        r.status.success(),
        "{bin} exited with {}\nstdout:\n{}\nstderr:\n{}",
        r.status,
        r.stdout,
        r.stderr
    );
    r
}

const ORDER_WORKER: &str = env!("CARGO_BIN_EXE_order-worker");
const PIPELINE: &str = env!("CARGO_BIN_EXE_pipeline");
const LOCKS: &str = env!("CARGO_BIN_EXE_locks");
const SAGA: &str = env!("CARGO_BIN_EXE_saga");

#[test]
fn order_worker_commits_once_and_a_redelivery_rolls_back_as_duplicate() {
    let r = run(ORDER_WORKER, None);
    r.expect_line(
        "broker: embedded in-memory broker at http://127.0.0.1:",
        &[],
    );
    r.expect_line("popped order-7-paid as group billing", &[]);
    r.expect_line("step committed (transaction ", &[]);
    r.expect_line("  ack    order-7-paid as group billing", &[]);
    r.expect_line(
        "  push   receipt to receipts/customer-123, transactionId ",
        &["derived from the acked event"],
    );
    r.expect_line(
        "  kv     put orders/order-7 = {\"status\":\"paid\"} (applied: true",
        &[],
    );
    r.expect_line(
        "  kv     putIfAbsent paid/order-7-paid = true (applied: true",
        &[],
    );
    r.expect_line("  timer  reminders/order-7 scheduled, fires at ", &[]);
    r.expect_line("redelivery: group billing seeked back", &[]);
    r.expect_line("popped order-7-paid again under a new lease", &[]);
    r.expect_line(
        "second run rolled back as a duplicate",
        &["receipts/customer-123", "nothing was written"],
    );
    r.expect_line("orders/order-7 = {\"status\":\"paid\"}", &[]);
    r.expect_line("reminders pending: 1", &[]);
    assert_eq!(r.lines().last(), Some(&"receipts: 1"), "{}", r.stdout);
}

#[test]
fn pipeline_hands_every_message_on_once_through_a_lost_answer() {
    let r = run(PIPELINE, None);
    r.expect_line(
        "[enrich] msg-3: injected fault",
        &["commit this step, then drop the connection"],
    );
    r.expect_line(
        "[enrich] msg-3: the answer was lost; the SDK retried and the retry rolled back harmlessly",
        &["retried: true"],
    );
    r.expect_line(
        "  ingest: 5 committed (0 confirmed by a retry that rolled back)",
        &["ingested holds 5 messages, 5 distinct"],
    );
    r.expect_line(
        "  enrich: 5 committed (1 confirmed by a retry that rolled back)",
        &["enriched holds 5 messages, 5 distinct"],
    );
    r.expect_line(
        "  publish: 5 committed (0 confirmed by a retry that rolled back)",
        &["published holds 5 messages, 5 distinct"],
    );
    r.expect_line("  end of the line: 5 of 5 messages", &["each exactly once"]);
    r.expect_line(
        "  transactions sent: 16 (15 steps + 1 retry after the lost answer)",
        &["injected faults hit: 1"],
    );
    for i in 1..=5 {
        assert_eq!(r.count(&format!("[ingest] msg-{i} -> ingested")), 1);
        assert_eq!(r.count(&format!("[publish] msg-{i} -> published")), 1);
        if i != 3 {
            assert_eq!(r.count(&format!("[enrich] msg-{i} -> enriched")), 1);
        }
    }
}

#[test]
fn locks_refuse_the_old_holders_guarded_write() {
    let r = run(LOCKS, None);
    r.expect_line("broker: embedded in-memory broker", &["manual clock"]);
    r.expect_line("worker-a: acquired lock nightly-report", &[]);
    r.expect_line(
        "worker-b: lock nightly-report is held by another worker: not acquired",
        &[],
    );
    r.expect_line(
        "worker-a: guarded transaction committed: reports/nightly = \"part 1 by worker-a\"",
        &[],
    );
    r.expect_line("clock: broker time moved 4s forward", &[]);
    r.expect_line("worker-b: acquired lock nightly-report", &[]);
    r.expect_line(
        "worker-a: guarded transaction refused: Commit::Gated",
        &["nothing written"],
    );
    r.expect_line(
        "reports/nightly = \"part 1 by worker-a\"",
        &["unchanged by the refused write"],
    );
    r.expect_line(
        "worker-b: guarded transaction committed: reports/nightly = \"part 2 by worker-b\"",
        &[],
    );
    r.expect_line("worker-a: its lock handle reports the lock lost", &[]);
    r.expect_line("worker-b: released the lock (released: true)", &[]);
    r.expect_line("final: reports/nightly = \"part 2 by worker-b\"", &[]);
}

#[test]
fn saga_settles_each_race_once_and_a_replay_in_a_new_epoch_reproduces_receipts() {
    let r = run(SAGA, None);
    assert!(r.status.success(), "{}\n{}", r.stdout, r.stderr);
    r.expect_line("sagas: o-1 paid", &["retried"]);
    r.expect_line("sagas: o-3 timed out", &["refunded"]);
    r.expect_line(
        "worker payments:",
        &[
            "committed 2",
            "refused 1",
            "dead-lettered 0",
            "handler retries",
        ],
    );
    r.expect_line(
        "receipts v2, replayed without an epoch:",
        &["already done 2"],
    );
    r.expect_line("receipts v2, replayed in epoch fix-1:", &["committed 3"]);
    r.expect_line("receipts: 4", &["each once"]);
}

/// With `QUEEN_URL` set, the one-shot workers use that broker (here one started by the
/// test) and skip what needs the embedded harness.
#[tokio::test(flavor = "multi_thread")]
async fn the_workers_use_queen_url_when_it_is_set() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let url = broker.url();
    let runs =
        tokio::task::spawn_blocking(move || [PIPELINE, LOCKS].map(|bin| run(bin, Some(&url))))
            .await
            .unwrap();
    let [pipeline, locks] = &runs;
    for r in &runs {
        r.expect_line(&format!("broker: QUEEN_URL={}", broker.url()), &["-"]);
    }
    pipeline.expect_line("fault plan: none: QUEEN_URL is set", &["skipped"]);
    pipeline.expect_line("  enrich: 5 committed (0 confirmed", &["5 distinct"]);
    assert!(!pipeline.stdout.contains("injected fault"));
    locks.expect_line("worker-a stalls: its renewals stop", &[]);
    locks.expect_line("worker-a: guarded transaction refused: Commit::Gated", &[]);
    // The workers' state is in the broker the test owns, under the run's names.
    assert!(
        broker
            .inspect()
            .queues()
            .unwrap()
            .iter()
            .any(|q| q.starts_with("published-"))
    );
    broker.shutdown().await;
}

/// A worker binary running in the background, its stdout read line by line.
struct Live {
    child: Child,
    lines: mpsc::Receiver<String>,
    seen: Vec<String>,
}

impl Live {
    fn start(bin: &str, url: &str) -> Live {
        let mut child = Command::new(bin)
            .env_remove("QUEEN_TOKEN")
            .env("QUEEN_URL", url)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {bin}: {e}"));
        let (tx, lines) = mpsc::channel();
        let out = BufReader::new(child.stdout.take().expect("stdout"));
        thread::spawn(move || {
            for line in out.lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Live {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits for a line starting with `prefix` and containing every one of `parts`.
    fn wait_line(&mut self, prefix: &str, parts: &[&str]) -> String {
        let give_up = Instant::now() + TIMEOUT;
        loop {
            let left = give_up.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push(line.clone());
                    if line.starts_with(prefix) && parts.iter().all(|p| line.contains(p)) {
                        return line;
                    }
                }
                Err(_) => {
                    let _ = self.child.kill();
                    panic!(
                        "no line starting with {prefix:?} containing {parts:?}; output so far:\n{}",
                        self.seen.join("\n")
                    );
                }
            }
        }
    }

    /// Sends SIGINT (Ctrl-C) and waits for the exit.
    fn interrupt(&mut self) -> ExitStatus {
        let sent = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status()
            .expect("kill -INT");
        assert!(sent.success());
        let give_up = Instant::now() + TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("waiting for the child") {
                return status;
            }
            assert!(Instant::now() < give_up, "no exit after Ctrl-C");
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Live {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With `QUEEN_URL` set, `order-worker` is a long-lived worker: it settles every event
/// (a second event for an order already paid is acked as already done), keeps running,
/// and Ctrl-C drains it and prints its summary.
#[tokio::test(flavor = "multi_thread")]
async fn order_worker_runs_until_ctrl_c_against_queen_url() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let url = broker.url();
    let mut worker = tokio::task::spawn_blocking(move || {
        let mut w = Live::start(ORDER_WORKER, &url);
        w.wait_line(
            "order-worker: consuming orders as group billing",
            &["Ctrl-C"],
        );
        w
    })
    .await
    .unwrap();

    let event = serde_json::json!({"orderId": "order-9", "customer": "customer-1", "total": 9.5});
    let paid = |txn: &str| {
        PushItem::new("orders", &event)
            .partition("customer-1")
            .transaction_id(txn)
    };
    client.push(vec![paid("order-9-paid")]).await.unwrap();
    // The payment service publishes the same payment again (a new message).
    client.push(vec![paid("order-9-paid-again")]).await.unwrap();
    client
        .push(vec![
            PushItem::new("orders", &"not an order").partition("customer-2"),
        ])
        .await
        .unwrap();

    let (mut worker, status) = tokio::task::spawn_blocking(move || {
        worker.wait_line(
            "settled order-9-paid from orders/customer-1: committed",
            &[],
        );
        worker.wait_line(
            "settled order-9-paid-again from orders/customer-1: already_done",
            &[],
        );
        let status = worker.interrupt();
        (worker, status)
    })
    .await
    .unwrap();
    assert!(status.success(), "exit after Ctrl-C: {status}");
    let summary = worker.wait_line("stopped: ", &[]);
    assert!(
        summary.starts_with(
            "stopped: processed 2, committed 1, already done 1, failed 0, refused 0, dead-lettered 1"
        ),
        "{summary}"
    );
    let receipts = broker.inspect().messages("receipts", "customer-1").unwrap();
    assert_eq!(receipts.len(), 1, "one receipt for order-9");
    let dead = client
        .dlq::<serde_json::Value>(DlqQuery::queue("orders"))
        .await
        .unwrap();
    assert_eq!(
        dead.messages.len(),
        1,
        "the undecodable event is dead-lettered"
    );
    broker.shutdown().await;
}

/// The README's "Testing your worker" shows `tests/testing_your_worker.rs` verbatim, so
/// the code a reader copies is code that passes.
#[test]
fn the_readme_shows_the_testing_your_worker_test_verbatim() {
    let readme = include_str!("../../README.md");
    let test = include_str!("testing_your_worker.rs");
    let section = readme
        .split("## Testing your worker")
        .nth(1)
        .expect("README.md has a \"Testing your worker\" section");
    assert!(
        section.contains(&format!("```rust\n{test}```")),
        "README.md's \"Testing your worker\" code block differs from examples/tests/testing_your_worker.rs"
    );
}
