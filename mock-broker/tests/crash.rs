//! Crash safety of the transaction call (issue #8, item 4).
//!
//! Starts the `queen-mock-broker` binary on a redb file, seeds an input queue durably,
//! and runs eight SDK workers that each pop input messages and commit one transaction
//! per batch: the acks, one or two pushes, a KV row, a timer and a consumer position,
//! all named after a unique tag. Meanwhile the broker is killed with SIGKILL at random
//! moments and restarted on the same file, its checkpoint interval changing from round to
//! round (see `checkpoint_ms`). After every kill the file is reopened (a copy
//! of it and its write-ahead log between rounds, the file itself after the last round)
//! and checked:
//!
//! - every transaction the broker answered `success: true` is entirely present (lost = 0);
//! - every transaction attempted, answered or not, is all there or not there at all
//!   (partial = 0), with its outputs stored exactly once and each input consumed by
//!   exactly one committed transaction;
//! - every acknowledged seed push is still there, and nothing unknown appeared.
//!
//! Three rounds by default; `QUEEN_CRASH_ROUNDS=N` for more, `QUEEN_CRASH_SEED=S` to
//! replay the kill timings. Run with `-- --nocapture` to see the figures.

#![cfg(unix)]

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use queen_mock_broker::MockBroker;
use queen_sdk::{
    Client, Commit, Error, Message, PushItem, RetryPolicy, RollbackReason, SubscriptionMode,
    TransactionBuilder,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The queue the workers consume.
const INPUT: &str = "crash-in";
/// Its partitions (`p0`..): one lease per partition and group, so this bounds concurrency.
const INPUT_PARTITIONS: u64 = 32;
/// The consumer group of the workers.
const GROUP: &str = "crash-workers";
/// The queue the transactions push to, and its partitions (`o0`..).
const OUTPUT: &str = "crash-out";
const OUTPUT_PARTITIONS: u64 = 4;
/// The KV namespace of the transactions' rows (key: the tag).
const NS: &str = "crash";
/// The queue of the transactions' timers (key: the tag).
const TIMERS: &str = "crash-timers";
/// A queue of `MARKS` messages on which each transaction sets the position of its own
/// group `pos-<tag>` (an offset in `1..=MARKS`).
const MARKS_QUEUE: &str = "crash-marks";
const MARKS: u64 = 8;
/// Concurrent workers.
const WORKERS: usize = 8;
/// Lease of a pop; a worker resends a step with no verdict until shortly before it ends.
/// A pop whose answer a kill cut off leaves its partition leased to nobody until then,
/// so it is short.
const LEASE: Duration = Duration::from_secs(2);
const RESEND_FOR: Duration = Duration::from_millis(1_500);
/// Inputs are topped up at a round's start when fewer than this many look unconsumed.
const INPUT_LOW: u64 = 1_000;
const INPUT_BATCH: u64 = 1_500;
/// How long a (re)started broker may take to say it listens (redb may repair the file).
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a round may wait for its first acknowledged transaction.
const FIRST_ACK_TIMEOUT: Duration = Duration::from_secs(20);

/// xorshift64*: a small seeded generator, so that a seed replays the kill timings.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.max(1))
    }
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    /// A number in `lo..=hi`.
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo + 1)
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v:?} is not a number")),
    )
}

// ---------------------------------------------------------------------------------
// The broker process.

/// The broker binary running on the data file, with the tail of what it printed.
struct Broker {
    child: Child,
    url: String,
    output: Arc<Mutex<Vec<String>>>,
}

fn keep_tail(buf: &Mutex<Vec<String>>, line: String) {
    let mut b = buf.lock().unwrap();
    b.push(line);
    if b.len() > 200 {
        b.drain(..100);
    }
}

impl Broker {
    /// Starts the binary and waits for its `listening on` line.
    async fn start(data: &Path, checkpoint_ms: u64) -> Broker {
        let mut child = Command::new(env!("CARGO_BIN_EXE_queen-mock-broker"))
            .arg("--listen")
            .arg("127.0.0.1:0")
            .arg("--data")
            .arg(data)
            .arg("--checkpoint-ms")
            .arg(checkpoint_ms.to_string())
            .arg("--log")
            .arg("warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn queen-mock-broker");
        let output = Arc::new(Mutex::new(Vec::new()));
        // Both pipes are drained for the broker's whole life, so that it never blocks on
        // a full pipe; the `listening` line is handed over on the way.
        let (ready_tx, mut ready_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
        let mut stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let out = Arc::clone(&output);
        tokio::spawn(async move {
            while let Ok(Some(line)) = stdout.next_line().await {
                if let Some(url) = line.split("listening on ").nth(1) {
                    let _ = ready_tx.send(url.trim().to_string());
                }
                keep_tail(&out, format!("stdout: {line}"));
            }
        });
        let mut stderr = BufReader::new(child.stderr.take().unwrap()).lines();
        let err = Arc::clone(&output);
        tokio::spawn(async move {
            while let Ok(Some(line)) = stderr.next_line().await {
                keep_tail(&err, format!("stderr: {line}"));
            }
        });
        let started = Instant::now();
        let url = match tokio::time::timeout(READY_TIMEOUT, ready_rx.recv()).await {
            Ok(Some(url)) => url,
            outcome => {
                let status = match tokio::time::timeout(Duration::from_secs(1), child.wait()).await
                {
                    Ok(s) => format!("exited with {s:?}"),
                    Err(_) => "still running".into(),
                };
                let _ = child.kill().await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                panic!(
                    "queen-mock-broker on {} did not print its `listening on` line within {:?} \
                     ({}; {status}); its output:\n{}",
                    data.display(),
                    started.elapsed(),
                    if outcome.is_err() {
                        "timed out"
                    } else {
                        "its stdout closed"
                    },
                    output.lock().unwrap().join("\n"),
                );
            }
        };
        Broker { child, url, output }
    }

    /// SIGKILL, and wait for the process to be gone.
    async fn kill(mut self) {
        self.child.kill().await.expect("SIGKILL the broker");
    }
}

// ---------------------------------------------------------------------------------
// What the workers did.

/// One transaction, as the worker built it before sending it.
#[derive(Debug, Clone)]
struct Attempt {
    tag: String,
    /// The `id` of each acked input message.
    inputs: Vec<u64>,
    /// The output partition of each pushed message, by its number `n`.
    outputs: Vec<String>,
    /// The position set for group `pos-<tag>` on the marks queue.
    position: u64,
}

/// The last answer a worker got for a transaction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    /// `success: true`.
    Committed,
    /// `success: false` (after a lost answer: the first send probably committed).
    RolledBack { after_lost_answer: bool },
    /// No verdict: every send's answer was lost, and the worker gave up.
    Unknown,
}

#[derive(Default)]
struct Log {
    attempts: Vec<Attempt>,
    /// Tags answered `success: true`.
    acknowledged: HashSet<String>,
    verdicts: HashMap<String, Verdict>,
    /// Answers that were neither a verdict nor a lost answer (a 4xx, a gate, ...).
    unexpected: Vec<String>,
}

struct Conn {
    /// Incremented at each start of the broker: the round number.
    generation: usize,
    client: Client,
}

struct Shared {
    conn: RwLock<Conn>,
    stop: AtomicBool,
    log: Mutex<Log>,
    /// Acknowledged transactions per broker generation.
    acked_by_generation: Mutex<HashMap<usize, u64>>,
    sends: AtomicU64,
    /// Transactions that lost at least one answer (the broker died, or was down).
    lost_answers: AtomicU64,
}

impl Shared {
    fn conn(&self) -> (usize, Client) {
        let c = self.conn.read().unwrap();
        (c.generation, c.client.clone())
    }
    fn acked_in(&self, generation: usize) -> u64 {
        *self
            .acked_by_generation
            .lock()
            .unwrap()
            .get(&generation)
            .unwrap_or(&0)
    }
}

/// A worker's client: no SDK retries, since a restarted broker listens on a new port;
/// the worker resends with the client of the current broker instead.
fn worker_client(url: &str) -> Client {
    Client::builder()
        .url(url)
        .retry(RetryPolicy::none())
        .connect_timeout(Duration::from_secs(1))
        .request_timeout(Duration::from_secs(10))
        .build()
        .expect("client")
}

/// Whether `e` says nothing about whether the call applied (the broker died, or is
/// overloaded): the step may be sent again.
fn answer_lost(e: &Error) -> bool {
    match e {
        Error::Transport(_)
        | Error::OutcomeUnknown { .. }
        | Error::Exhausted { .. }
        | Error::DeadlineExceeded { .. } => true,
        Error::Api { status, .. } => *status == 429 || *status >= 500,
        _ => false,
    }
}

/// The step: ack the batch, push the outputs, write the KV row, set the timer and the
/// position, every part named after the tag.
fn step(client: &Client, msgs: &[Message<Value>], a: &Attempt) -> TransactionBuilder {
    let mut t = client.transaction();
    for m in msgs {
        t = t.ack(m);
    }
    for (n, part) in a.outputs.iter().enumerate() {
        let payload = json!({"tag": a.tag, "n": n, "inputs": a.inputs});
        t = t.push(OUTPUT, |p| p.partition(part.as_str()).payload(&payload));
    }
    let row = json!({"tag": a.tag, "inputs": a.inputs});
    t.kv(|k| k.put(NS, &a.tag, &row, queen_sdk::Ttl::Forever))
        .timer(TIMERS, a.tag.as_str(), |tm| {
            tm.after(Duration::from_secs(86_400)).payload(&a.tag)
        })
        .position(MARKS_QUEUE, format!("pos-{}", a.tag), "Default", a.position)
}

async fn worker(id: usize, shared: Arc<Shared>, seed: u64) {
    let mut rng = Rng::new(seed);
    let mut seq = 0u64;
    while !shared.stop.load(Ordering::Relaxed) {
        let (_, client) = shared.conn();
        let popped = client
            .pop::<Value>(INPUT)
            .group(GROUP)
            .subscription(SubscriptionMode::All)
            .batch(rng.range(1, 2) as u32)
            .lease(LEASE)
            .send()
            .await;
        let msgs = match popped {
            Ok(m) if m.is_empty() => {
                tokio::time::sleep(Duration::from_millis(20)).await;
                continue;
            }
            Ok(m) => m,
            Err(e) => {
                if !answer_lost(&e) {
                    shared
                        .log
                        .lock()
                        .unwrap()
                        .unexpected
                        .push(format!("pop: {e}"));
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let popped_at = Instant::now();
        let a = Attempt {
            tag: format!("t{id}-{seq}"),
            inputs: msgs
                .iter()
                .map(|m| m.data["id"].as_u64().expect("an input's id"))
                .collect(),
            outputs: (0..rng.range(1, 2))
                .map(|_| format!("o{}", rng.range(0, OUTPUT_PARTITIONS - 1)))
                .collect(),
            position: rng.range(1, MARKS),
        };
        seq += 1;
        // Recorded before anything is sent: whatever the file holds of it is checked.
        shared.log.lock().unwrap().attempts.push(a.clone());
        let mut lost_before = false;
        let verdict = loop {
            let (generation, client) = shared.conn();
            shared.sends.fetch_add(1, Ordering::Relaxed);
            match step(&client, &msgs, &a).commit().await {
                Ok(Commit::Committed(_)) => {
                    *shared
                        .acked_by_generation
                        .lock()
                        .unwrap()
                        .entry(generation)
                        .or_default() += 1;
                    shared
                        .log
                        .lock()
                        .unwrap()
                        .acknowledged
                        .insert(a.tag.clone());
                    break Verdict::Committed;
                }
                Ok(Commit::Gated { gate, .. }) => {
                    shared
                        .log
                        .lock()
                        .unwrap()
                        .unexpected
                        .push(format!("{}: gated ({gate}) without a gate", a.tag));
                    break Verdict::RolledBack {
                        after_lost_answer: lost_before,
                    };
                }
                Err(Error::RolledBack { reason, .. }) => {
                    // An expired lease (a slow step) or a resend of a step that had
                    // committed: anything else is a surprise.
                    if !matches!(
                        reason,
                        RollbackReason::RejectedAck | RollbackReason::Duplicate
                    ) {
                        shared
                            .log
                            .lock()
                            .unwrap()
                            .unexpected
                            .push(format!("{}: rolled back ({reason})", a.tag));
                    }
                    break Verdict::RolledBack {
                        after_lost_answer: lost_before,
                    };
                }
                Err(e) if answer_lost(&e) => {
                    if !lost_before {
                        shared.lost_answers.fetch_add(1, Ordering::Relaxed);
                    }
                    lost_before = true;
                    if shared.stop.load(Ordering::Relaxed) || popped_at.elapsed() > RESEND_FOR {
                        break Verdict::Unknown;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                Err(e) => {
                    shared
                        .log
                        .lock()
                        .unwrap()
                        .unexpected
                        .push(format!("{}: {e}", a.tag));
                    break Verdict::Unknown;
                }
            }
        };
        shared.log.lock().unwrap().verdicts.insert(a.tag, verdict);
    }
}

// ---------------------------------------------------------------------------------
// Checking a file.

#[derive(Debug, Default)]
struct Check {
    attempted: usize,
    acknowledged: usize,
    /// Attempts entirely present / entirely absent.
    present: usize,
    absent: usize,
    /// Present although no answer said so (the answer was lost, or rolled back a resend).
    present_unanswered: usize,
    /// Failures, each with a description.
    lost: Vec<String>,
    partial: Vec<String>,
    duplicated: Vec<String>,
    double_consumed: Vec<String>,
    seed_lost: Vec<String>,
    phantom: Vec<String>,
}

impl Check {
    fn failures(&self) -> usize {
        self.lost.len()
            + self.partial.len()
            + self.duplicated.len()
            + self.double_consumed.len()
            + self.seed_lost.len()
            + self.phantom.len()
    }

    fn describe(&self) -> String {
        let mut s = String::new();
        for (what, v) in [
            ("lost", &self.lost),
            ("partial", &self.partial),
            ("duplicated", &self.duplicated),
            ("double consumed", &self.double_consumed),
            ("seed lost", &self.seed_lost),
            ("phantom", &self.phantom),
        ] {
            for d in v.iter().take(10) {
                s.push_str(&format!("  {what}: {d}\n"));
            }
            if v.len() > 10 {
                s.push_str(&format!("  ... and {} more {what}\n", v.len() - 10));
            }
        }
        s
    }
}

/// The write-ahead log beside a data file.
fn wal_of(data: &Path) -> PathBuf {
    let mut p = data.as_os_str().to_owned();
    p.push(".wal");
    PathBuf::from(p)
}

/// The checkpoint interval of the broker's `generation`-th start. A round is shorter
/// than the default interval, so the kills would land only between checkpoints: other
/// rounds checkpoint after every batch, or every 30 ms, so that kills land during and
/// just after checkpoints too (a log started again over the last generation's records).
fn checkpoint_ms(generation: usize) -> u64 {
    [10_000, 0, 30][generation % 3]
}

/// Opens `data` with an in-process broker and checks it against what the workers did.
async fn check_file(
    data: &Path,
    attempts: &[Attempt],
    acked: &HashSet<String>,
    seeded: u64,
) -> Check {
    let broker = MockBroker::builder()
        .data_file(data)
        .start()
        .await
        .unwrap_or_else(|e| panic!("reopening {} after the kill: {e}", data.display()));
    let c = check(&broker, attempts, acked, seeded);
    broker.shutdown().await;
    c
}

fn check(broker: &MockBroker, attempts: &[Attempt], acked: &HashSet<String>, seeded: u64) -> Check {
    let ins = broker.inspect();
    let mut c = Check {
        attempted: attempts.len(),
        acknowledged: acked.len(),
        ..Default::default()
    };

    // Inputs: id -> consumed by the group (its offset is below the group's cursor; a
    // transaction acks a whole batch, so a partition's done messages are its head).
    let mut consumed: HashMap<u64, bool> = HashMap::new();
    for p in 0..INPUT_PARTITIONS {
        let part = format!("p{p}");
        let cursor = ins
            .cursor(INPUT, &part, GROUP)
            .expect("read a cursor")
            .map_or(0, |c| c.next_offset);
        for m in ins.messages(INPUT, &part).expect("read the inputs") {
            let id = m.data["id"].as_u64().expect("an input's id");
            if consumed.insert(id, m.offset < cursor).is_some() {
                c.seed_lost.push(format!(
                    "input {id} is stored twice (second at {part}@{})",
                    m.offset
                ));
            }
        }
    }
    for id in 0..seeded {
        if !consumed.contains_key(&id) {
            c.seed_lost
                .push(format!("input {id} was pushed (201) but is not in {INPUT}"));
        }
    }

    // Outputs: tag -> (partition, n) of each stored message.
    let mut outputs: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for p in 0..OUTPUT_PARTITIONS {
        let part = format!("o{p}");
        for m in ins.messages(OUTPUT, &part).expect("read the outputs") {
            let tag = m.data["tag"].as_str().unwrap_or_default().to_string();
            let n = m.data["n"].as_u64().unwrap_or(u64::MAX);
            outputs.entry(tag).or_default().push((part.clone(), n));
        }
    }
    let timers: HashSet<String> = ins
        .timers(TIMERS)
        .expect("read the timers")
        .into_iter()
        .map(|t| t.key)
        .collect();
    let known: HashSet<&str> = attempts.iter().map(|a| a.tag.as_str()).collect();
    for tag in outputs.keys().filter(|t| !known.contains(t.as_str())) {
        c.phantom.push(format!(
            "output with tag {tag:?}, which no worker attempted"
        ));
    }
    for tag in timers.iter().filter(|t| !known.contains(t.as_str())) {
        c.phantom
            .push(format!("timer {tag:?}, which no worker attempted"));
    }

    let mut committed_for_input: HashMap<u64, Vec<&str>> = HashMap::new();
    for a in attempts {
        let tag = a.tag.as_str();
        let mut have = Vec::new();
        let mut miss = Vec::new();
        let stored = outputs.get(tag).map(Vec::as_slice).unwrap_or_default();
        for (n, part) in a.outputs.iter().enumerate() {
            let copies = stored
                .iter()
                .filter(|(p, m)| p == part && *m == n as u64)
                .count();
            let name = format!("output {n} in {part}");
            if copies == 0 {
                miss.push(name);
            } else {
                if copies > 1 {
                    c.duplicated
                        .push(format!("{tag}: {name} is stored {copies} times"));
                }
                have.push(name);
            }
        }
        if stored
            .iter()
            .any(|(p, n)| a.outputs.get(*n as usize) != Some(p))
        {
            c.duplicated
                .push(format!("{tag}: unexpected outputs stored: {stored:?}"));
        }
        let row = ins.kv::<Value>(NS, tag).expect("read a KV row");
        match row {
            Some(v) => {
                if v == json!({"tag": tag, "inputs": a.inputs}) {
                    have.push("kv".into());
                } else {
                    miss.push(format!("kv (holds {v})"));
                }
            }
            None => miss.push("kv".into()),
        }
        if timers.contains(tag) {
            have.push("timer".into());
        } else {
            miss.push("timer".into());
        }
        let pos = ins
            .cursor(MARKS_QUEUE, "Default", &format!("pos-{tag}"))
            .expect("read a position");
        match pos {
            Some(p) if p.next_offset == a.position => have.push("position".into()),
            Some(p) => miss.push(format!(
                "position (at {}, not {})",
                p.next_offset, a.position
            )),
            None => miss.push("position".into()),
        }
        let acknowledged = acked.contains(tag);
        if miss.is_empty() {
            // Entirely present: its inputs must be consumed too.
            let unacked: Vec<u64> = a
                .inputs
                .iter()
                .copied()
                .filter(|i| consumed.get(i) != Some(&true))
                .collect();
            if unacked.is_empty() {
                c.present += 1;
                if !acknowledged {
                    c.present_unanswered += 1;
                }
            } else {
                c.partial.push(format!(
                    "{tag} (acknowledged: {acknowledged}): every part present but the ack of input(s) {unacked:?}"
                ));
            }
            for i in &a.inputs {
                committed_for_input.entry(*i).or_default().push(tag);
            }
        } else if have.is_empty() {
            c.absent += 1;
            if acknowledged {
                c.lost.push(format!(
                    "{tag}: acknowledged, and nothing of it is in the file"
                ));
            }
        } else {
            let d =
                format!("{tag} (acknowledged: {acknowledged}): present {have:?}, missing {miss:?}");
            if acknowledged {
                c.lost.push(d.clone());
            }
            c.partial.push(d);
        }
    }
    // Each consumed input was consumed by exactly one transaction that is in the file;
    // an input still unconsumed by none.
    for (id, done) in &consumed {
        let by = committed_for_input
            .get(id)
            .map(Vec::as_slice)
            .unwrap_or_default();
        if *done && by.is_empty() {
            c.partial.push(format!(
                "input {id} is acked, but no transaction that acked it is in the file"
            ));
        }
        if by.len() > 1 {
            c.double_consumed
                .push(format!("input {id} was consumed by {by:?}"));
        }
    }
    c
}

// ---------------------------------------------------------------------------------
// The test.

/// Pushes inputs `from..from + n`, durably (the push answers after its commit).
async fn push_inputs(client: &Client, from: u64, n: u64) {
    for chunk in (from..from + n).collect::<Vec<_>>().chunks(500) {
        let items = chunk
            .iter()
            .map(|i| {
                PushItem::new(INPUT, &json!({"id": i}))
                    .partition(format!("p{}", i % INPUT_PARTITIONS))
                    .transaction_id(format!("in-{i}"))
            })
            .collect();
        let pushed = client.push(items).await.expect("push the inputs");
        assert!(
            pushed.iter().all(|p| !p.is_duplicate()),
            "a fresh input came back as a duplicate"
        );
    }
}

/// One line of figures for a round whose file was checked.
fn print_round(round: usize, ran_for: Duration, restart: Duration, acked: u64, c: &Check) {
    println!(
        "round {round:>3}: ran {:>4} ms after a {:>4} ms (re)start, acknowledged {acked:>4}; \
         file: {} attempted, {} present ({} without a success answer), {} absent, \
         lost {}, partial {}",
        ran_for.as_millis(),
        restart.as_millis(),
        c.attempted,
        c.present,
        c.present_unanswered,
        c.absent,
        c.lost.len(),
        c.partial.len(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn committed_transactions_survive_sigkill_and_none_is_partial() {
    let rounds = env_u64("QUEEN_CRASH_ROUNDS").unwrap_or(3).max(1) as usize;
    let seed = env_u64("QUEEN_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
    });
    let started = Instant::now();
    println!("crash test: {rounds} rounds, {WORKERS} workers, seed {seed} (QUEEN_CRASH_SEED)");
    let mut rng = Rng::new(seed);
    let dir = tempfile::tempdir().expect("a temp dir");
    let data: PathBuf = dir.path().join("queen.redb");
    let snapshot: PathBuf = dir.path().join("snapshot.redb");

    // Seed, durably, before the first kill.
    let mut broker = Broker::start(&data, checkpoint_ms(1)).await;
    let mut restart = started.elapsed();
    let control = Client::new(&broker.url).expect("client");
    control
        .push(
            (0..MARKS)
                .map(|i| PushItem::new(MARKS_QUEUE, &i).transaction_id(format!("mark-{i}")))
                .collect(),
        )
        .await
        .expect("push the marks");
    let mut seeded = INPUT_BATCH;
    push_inputs(&control, 0, seeded).await;

    let shared = Arc::new(Shared {
        conn: RwLock::new(Conn {
            generation: 1,
            client: worker_client(&broker.url),
        }),
        stop: AtomicBool::new(false),
        log: Mutex::new(Log::default()),
        acked_by_generation: Mutex::new(HashMap::new()),
        sends: AtomicU64::new(0),
        lost_answers: AtomicU64::new(0),
    });
    let workers: Vec<_> = (0..WORKERS)
        .map(|w| tokio::spawn(worker(w, Arc::clone(&shared), rng.next())))
        .collect();

    let mut last_round = (Duration::ZERO, Duration::ZERO);
    for round in 1..=rounds {
        let round_start = Instant::now();
        // Top the inputs up when the workers are about to run out.
        let consumed: u64 = {
            let log = shared.log.lock().unwrap();
            log.attempts
                .iter()
                .filter(|a| log.acknowledged.contains(&a.tag))
                .map(|a| a.inputs.len() as u64)
                .sum()
        };
        if seeded - consumed.min(seeded) < INPUT_LOW {
            let control = Client::new(&broker.url).expect("client");
            push_inputs(&control, seeded, INPUT_BATCH).await;
            seeded += INPUT_BATCH;
        }

        // Let the workers run for a random while, with at least one acknowledged step.
        tokio::time::sleep(Duration::from_millis(rng.range(50, 400))).await;
        let waited = Instant::now();
        while shared.acked_in(round) == 0 {
            assert!(
                waited.elapsed() < FIRST_ACK_TIMEOUT,
                "round {round}: no transaction was acknowledged within {FIRST_ACK_TIMEOUT:?} \
                 of the broker's start; its output:\n{}",
                broker.output.lock().unwrap().join("\n")
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let ran_for = round_start.elapsed();
        broker.kill().await;
        if round == rounds {
            last_round = (ran_for, restart);
            break;
        }

        // Check a copy of the file as the kill left it, then restart on the file itself
        // (so that the broker, not the check, is the one that recovers it).
        // The database is its file and its write-ahead log (`<data>.wal`): a copy of
        // both is what a kill left.
        std::fs::copy(&data, &snapshot).expect("copy the data file");
        std::fs::copy(wal_of(&data), wal_of(&snapshot)).expect("copy the write-ahead log");
        let (attempts, acked) = {
            let log = shared.log.lock().unwrap();
            (log.attempts.clone(), log.acknowledged.clone())
        };
        let check = check_file(&snapshot, &attempts, &acked, seeded).await;
        std::fs::remove_file(&snapshot).expect("remove the snapshot");
        std::fs::remove_file(wal_of(&snapshot)).expect("remove the snapshot's log");
        print_round(round, ran_for, restart, shared.acked_in(round), &check);
        let failed = check.failures();
        assert!(
            failed == 0,
            "round {round} (seed {seed}): {failed} failures in the file after SIGKILL:\n{}",
            check.describe()
        );

        let t = Instant::now();
        broker = Broker::start(&data, checkpoint_ms(round + 1)).await;
        restart = t.elapsed();
        *shared.conn.write().unwrap() = Conn {
            generation: round + 1,
            client: worker_client(&broker.url),
        };
    }

    // The broker is dead: stop the workers, then check the file itself.
    shared.stop.store(true, Ordering::Relaxed);
    for w in workers {
        tokio::time::timeout(Duration::from_secs(30), w)
            .await
            .expect("a worker did not stop")
            .expect("a worker panicked");
    }
    let log = std::mem::take(&mut *shared.log.lock().unwrap());
    let last = check_file(&data, &log.attempts, &log.acknowledged, seeded).await;
    // Counted now that every worker has stopped: an answer read just before a kill may
    // have been recorded just after it.
    let acked_rounds: Vec<u64> = (1..=rounds).map(|r| shared.acked_in(r)).collect();
    print_round(
        rounds,
        last_round.0,
        last_round.1,
        acked_rounds[rounds - 1],
        &last,
    );
    let verdicts = |f: &dyn Fn(&Verdict) -> bool| log.verdicts.values().filter(|v| f(v)).count();
    let rolled_back = verdicts(&|v| matches!(v, Verdict::RolledBack { .. }));
    let rolled_back_after_lost = verdicts(&|v| {
        matches!(
            v,
            Verdict::RolledBack {
                after_lost_answer: true
            }
        )
    });
    let unknown = verdicts(&|v| *v == Verdict::Unknown);
    println!(
        "crash test: {rounds} rounds in {:.1} s (seed {seed}); inputs pushed {seeded}; \
         transactions attempted {}, acknowledged {} (fewest in a round: {}), rolled back \
         {rolled_back} ({rolled_back_after_lost} after a lost answer), outcome unknown \
         {unknown}; sends {}, transactions with a lost answer {}; in the file: {} present ({} without \
         a success answer), {} absent; lost {}, partial {}, duplicated {}, double consumed {}, \
         seed lost {}, phantom {}",
        started.elapsed().as_secs_f64(),
        last.attempted,
        last.acknowledged,
        acked_rounds.iter().min().unwrap(),
        shared.sends.load(Ordering::Relaxed),
        shared.lost_answers.load(Ordering::Relaxed),
        last.present,
        last.present_unanswered,
        last.absent,
        last.lost.len(),
        last.partial.len(),
        last.duplicated.len(),
        last.double_consumed.len(),
        last.seed_lost.len(),
        last.phantom.len(),
    );

    assert!(
        log.unexpected.is_empty(),
        "unexpected answers (first 10 of {}): {:#?}",
        log.unexpected.len(),
        &log.unexpected[..log.unexpected.len().min(10)]
    );
    assert!(
        acked_rounds.iter().all(|&n| n > 0),
        "a round acknowledged nothing: {acked_rounds:?}"
    );
    assert_eq!(
        last.acknowledged,
        acked_rounds.iter().sum::<u64>() as usize,
        "every acknowledgement is counted in its round"
    );
    assert!(
        last.failures() == 0,
        "seed {seed}: {} failures in the file after the last kill:\n{}",
        last.failures(),
        last.describe()
    );
    assert_eq!(
        last.present + last.absent,
        last.attempted,
        "every attempt is present or absent"
    );
}
