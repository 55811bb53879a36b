//! The soak (`load --soak MINUTES`): a fixed rate of mixed operations through the SDK
//! for a long time, sampled every `--sample-secs` into a CSV, with a plot and a summary
//! of what an hour's run is judged on: the broker's RSS and file size flat once
//! retention's horizon is reached, the p99 of later minutes against the first ten, no
//! errors, nothing lost.
//!
//! The mix (a fixed cycle of [`MIX`], dispatched at `--rate` operations a second, each
//! in a task of its own, at most `--concurrency` in flight):
//!
//! - `push`: one message to the input queue;
//! - `step`: a pop of one input message, then one transaction: its ack, a push of one
//!   message to the output queue, a KV put;
//! - `consume-out` and `consume-timers`: a pop of up to 16 messages of the output
//!   queue or of the timer queue, then one batch ack;
//! - `kv-get` and `kv-put`: one standalone KV read or write;
//! - `timer`: one timer scheduled `--timer-delay-secs` ahead on the timer queue, which
//!   fires it as a message that `consume-timers` takes.
//!
//! The three queues are configured with `completedRetentionSeconds` = `--retention-secs`
//! (and `retentionEnabled`), so the broker deletes what has been consumed once it is that
//! old, and nothing that has not been; KV keys cycle through [`KV_KEYS`] names. What the
//! broker stores thus stops growing once the horizon is passed, while a message that
//! was pushed and never consumed stays stored and is found by the check below.
//!
//! "Nothing lost": every message carries a transaction id `s{n}` with `n` from one
//! counter. A bit is set in `pushed` when its push (plain, in a transaction, or a timer's
//! schedule) was acknowledged, and in `consumed` when an ack of it (plain or in a
//! transaction) was. After the last minute, the soak waits for the last timers to fire
//! and pops and acks whatever is left; every acknowledged push not consumed by then is
//! lost. Retention cannot hide a loss: it only deletes consumed messages.
//!
//! Each sample reads, from `/proc/<pid>` of the broker (`--broker-pid`, or this process
//! when the broker is embedded), its RSS and open files; the sizes of the data file
//! (`--data`) and its `.wal`; the messages the three queues store
//! (`GET /api/v1/resources/queues/{q}`); and, for the interval, the calls, errors and the
//! p50/p99 of every call and of each kind.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::future::Future;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use hdrhistogram::Histogram;
use queen_mock_broker::MockBroker;
use queen_sdk::{AckStatus, Client, Commit, Message, PushItem, QueueOptions, RetryPolicy, Ttl};
use serde::Serialize;
use serde_json::Value;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::Args;
use super::driver::{Event, sdk_client};
use super::plot;

/// What one dispatched operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Push,
    Step,
    ConsumeOut,
    ConsumeTimers,
    KvGet,
    KvPut,
    Timer,
}

/// The cycle the dispatcher walks: per 14 operations, 3 pushes into the input and 4
/// steps popping it (more than pushes, so that a pop that finds nothing, as happens
/// while other pops hold the partitions, does not let a backlog build), 2 consumes of
/// up to 16 messages (one of the output queue, for the 3 step pushes, one of the timer
/// queue, for the 1 timer), 2 KV reads, 2 KV writes and 1 timer.
const MIX: [Op; 14] = [
    Op::Push,
    Op::Step,
    Op::KvGet,
    Op::Push,
    Op::ConsumeOut,
    Op::Step,
    Op::KvPut,
    Op::Push,
    Op::Step,
    Op::Timer,
    Op::KvGet,
    Op::Step,
    Op::ConsumeTimers,
    Op::KvPut,
];

/// The calls whose latencies are kept apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Push,
    Pop,
    Ack,
    Txn,
    KvGet,
    KvPut,
    Timer,
}

/// Every [`Call`], in the CSV's order, with its column name.
const CALLS: [(Call, &str); 7] = [
    (Call::Push, "push"),
    (Call::Pop, "pop"),
    (Call::Ack, "ack"),
    (Call::Txn, "txn"),
    (Call::KvGet, "kv_get"),
    (Call::KvPut, "kv_put"),
    (Call::Timer, "timer"),
];

/// KV keys written, cyclically: the KV table reaches its size once all are written
/// (about a minute at the default rate) instead of growing for as long as the soak runs
/// (expired rows are not purged, only overwritten).
const KV_KEYS: u64 = 10_000;

/// The soak queues' lease: long enough for any call the soak makes, short enough that a
/// lease left by a failed ack lapses within the final drain.
const LEASE: Duration = Duration::from_secs(30);

/// Most messages a `consume` pops.
const CONSUME_BATCH: u32 = 16;

/// Most messages a pop of the final drain takes.
const DRAIN_BATCH: u32 = 200;

/// Minutes (samples) the p99 of later ones is compared with: "p99 within 1.5x of its
/// first ten minutes".
const BASELINE_SAMPLES: usize = 10;

/// Error texts kept for the summary.
const ERROR_SAMPLES: usize = 20;

/// How long the in-flight operations may take to finish after the last minute.
const SETTLE: Duration = Duration::from_secs(60);

/// A call's outcome.
enum Res {
    Ok,
    /// A pop that found nothing.
    Empty,
    /// A verdict that wrote nothing (`rejected_ack`, a refused ack, a gated step...).
    Rolled(String),
    /// The call failed: a kind (`http 503`, `transport`...) and the detail.
    Err(String, String),
}

fn histogram() -> Histogram<u64> {
    // 1 µs to 60 s at three significant figures; a longer call is clamped to 60 s.
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid histogram bounds")
}

/// What an interval (or the run) counted.
#[derive(Debug, Clone, Copy, Default)]
struct Counts {
    /// Calls made.
    requests: u64,
    /// Operations of the mix completed.
    ops: u64,
    /// Calls that failed.
    errors: u64,
    /// Verdicts that wrote nothing.
    rollbacks: u64,
    /// Pops that found nothing (not errors).
    empty_pops: u64,
    /// Operations not dispatched because `--concurrency` were in flight: the rate was
    /// not held.
    skipped: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.requests += o.requests;
        self.ops += o.ops;
        self.errors += o.errors;
        self.rollbacks += o.rollbacks;
        self.empty_pops += o.empty_pops;
        self.skipped += o.skipped;
    }
}

/// The figures of one sampling interval.
struct Window {
    /// Latency (µs) of each kind of call, indexed like [`CALLS`].
    calls: Vec<Histogram<u64>>,
    /// Latency of every call.
    all: Histogram<u64>,
    counts: Counts,
}

impl Window {
    fn new() -> Window {
        Window {
            calls: CALLS.iter().map(|_| histogram()).collect(),
            all: histogram(),
            counts: Counts::default(),
        }
    }
}

/// Errors and rollbacks of the whole run, by kind, with the first texts.
#[derive(Default)]
struct Problems {
    errors: BTreeMap<String, u64>,
    rollbacks: BTreeMap<String, u64>,
    samples: Vec<String>,
}

/// A growable set of message numbers.
#[derive(Default)]
struct Bits(Vec<u64>);

impl Bits {
    /// Sets bit `i`; answers whether it was already set.
    fn set(&mut self, i: u64) -> bool {
        let (w, b) = ((i / 64) as usize, i % 64);
        if self.0.len() <= w {
            self.0.resize(w + 1, 0);
        }
        let was = self.0[w] & (1 << b) != 0;
        self.0[w] |= 1 << b;
        was
    }

    fn word(&self, w: usize) -> u64 {
        self.0.get(w).copied().unwrap_or(0)
    }
}

/// What was pushed and consumed (see the module's "nothing lost").
#[derive(Default)]
struct Ledger {
    pushed: Bits,
    consumed: Bits,
    n_pushed: u64,
    n_consumed: u64,
    /// Acks of a message already consumed (a redelivery after a lost ack or lease).
    redelivered: u64,
}

impl Ledger {
    fn pushed(&mut self, n: u64) {
        if !self.pushed.set(n) {
            self.n_pushed += 1;
        }
    }

    fn consumed(&mut self, n: u64) {
        if self.consumed.set(n) {
            self.redelivered += 1;
        } else {
            self.n_consumed += 1;
        }
    }

    /// Acknowledged pushes not consumed (yet).
    fn missing(&self) -> u64 {
        (0..self.pushed.0.len())
            .map(|w| (self.pushed.word(w) & !self.consumed.word(w)).count_ones() as u64)
            .sum()
    }

    /// Consumed messages whose push was never acknowledged (a push whose answer was
    /// lost, and which was stored all the same): not a loss, but counted.
    fn unconfirmed(&self) -> u64 {
        (0..self.consumed.0.len())
            .map(|w| (self.consumed.word(w) & !self.pushed.word(w)).count_ones() as u64)
            .sum()
    }
}

/// What every operation and the sampler share.
struct Shared {
    window: Mutex<Window>,
    problems: Mutex<Problems>,
    ledger: Mutex<Ledger>,
    next_id: AtomicU64,
}

/// Locks `m`, going on past a poisoned lock: the figures stay usable after a panic
/// elsewhere, and the panic is reported by its task.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Records one call.
    fn call(&self, call: Call, took: Duration, res: &Res) {
        let us = (took.as_micros() as u64).clamp(1, 60_000_000);
        {
            let mut w = lock(&self.window);
            let _ = w.calls[call as usize].record(us);
            let _ = w.all.record(us);
            w.counts.requests += 1;
            match res {
                Res::Ok => {}
                Res::Empty => w.counts.empty_pops += 1,
                Res::Rolled(_) => w.counts.rollbacks += 1,
                Res::Err(..) => w.counts.errors += 1,
            }
        }
        match res {
            Res::Rolled(reason) => {
                *lock(&self.problems)
                    .rollbacks
                    .entry(reason.clone())
                    .or_default() += 1
            }
            Res::Err(kind, detail) => {
                let mut p = lock(&self.problems);
                *p.errors.entry(kind.clone()).or_default() += 1;
                if p.samples.len() < ERROR_SAMPLES {
                    p.samples
                        .push(format!("{}: {kind}: {detail}", CALLS[call as usize].1));
                }
            }
            _ => {}
        }
    }

    fn take_window(&self) -> Window {
        std::mem::replace(&mut *lock(&self.window), Window::new())
    }
}

/// The soak's queue and namespace names (suffixed with the run, so that two runs on
/// one broker never meet).
struct Names {
    input: String,
    output: String,
    timers: String,
    ns: String,
}

impl Names {
    fn new(run: &str) -> Names {
        Names {
            input: format!("soak-in-{run}"),
            output: format!("soak-out-{run}"),
            timers: format!("soak-timers-{run}"),
            ns: format!("soak-{run}"),
        }
    }

    fn queues(&self) -> [&str; 3] {
        [&self.input, &self.output, &self.timers]
    }
}

/// The KV state a step and a `kv-put` write.
#[derive(Serialize)]
struct State {
    status: &'static str,
    n: u64,
}

/// The transaction id of message `n`.
fn txn(n: u64) -> String {
    format!("s{n}")
}

/// The message number in a transaction id of [`txn`]'s form.
fn number(txn: &str) -> Option<u64> {
    txn.strip_prefix('s')?.parse().ok()
}

/// The KV key operation `seq` reads or writes: spread over [`KV_KEYS`] by a
/// multiplicative hash, so reads hit keys written a while ago as well as new ones.
fn kv_key(seq: u64) -> String {
    format!("k{}", seq.wrapping_mul(2_654_435_761) % KV_KEYS)
}

async fn timed<F: Future>(f: F) -> (F::Output, Duration) {
    let t = Instant::now();
    let out = f.await;
    (out, t.elapsed())
}

fn sdk_res(e: queen_sdk::Error) -> Res {
    use queen_sdk::Error as E;
    let kind = match &e {
        E::RolledBack { reason, .. } => return Res::Rolled(reason.as_str().to_string()),
        E::Api { status, .. } => format!("http {status}"),
        E::Transport(_) => "transport".into(),
        E::Decode { .. } => "decode".into(),
        E::OutcomeUnknown { .. } => "outcome unknown".into(),
        _ => "other".into(),
    };
    Res::Err(kind, e.to_string())
}

/// What the operations need.
struct Ctx {
    client: Client,
    names: Names,
    partitions: u64,
    timer_delay: Duration,
    shared: Arc<Shared>,
}

impl Ctx {
    fn next_id(&self) -> u64 {
        self.shared.next_id.fetch_add(1, Ordering::Relaxed)
    }

    fn partition(&self, n: u64) -> String {
        format!("p{}", n % self.partitions)
    }

    /// Runs the `seq`-th dispatched operation.
    async fn run(&self, op: Op, seq: u64) {
        match op {
            Op::Push => self.push().await,
            Op::Step => self.step().await,
            Op::ConsumeOut => {
                self.consume(&self.names.output, CONSUME_BATCH).await;
            }
            Op::ConsumeTimers => {
                self.consume(&self.names.timers, CONSUME_BATCH).await;
            }
            Op::KvGet => self.kv_get(seq).await,
            Op::KvPut => self.kv_put(seq).await,
            Op::Timer => self.timer().await,
        }
        lock(&self.shared.window).counts.ops += 1;
    }

    async fn push(&self) {
        let n = self.next_id();
        let item = PushItem::new(&self.names.input, &Event::new(&n.to_string(), n))
            .partition(self.partition(n))
            .transaction_id(txn(n));
        let (out, took) = timed(self.client.push(vec![item])).await;
        let res = match out {
            Ok(p) => match p.first().map(|p| p.status.as_str()) {
                Some("queued") => {
                    lock(&self.shared.ledger).pushed(n);
                    Res::Ok
                }
                Some("duplicate") => Res::Rolled("duplicate".into()),
                other => Res::Err("push status".into(), format!("{other:?}")),
            },
            Err(e) => sdk_res(e),
        };
        self.shared.call(Call::Push, took, &res);
    }

    async fn step(&self) {
        let pop = self.client.pop::<Value>(&self.names.input).batch(1).send();
        let (got, took) = timed(pop).await;
        let msg = match got {
            Ok(mut v) if !v.is_empty() => {
                self.shared.call(Call::Pop, took, &Res::Ok);
                v.swap_remove(0)
            }
            Ok(_) => return self.shared.call(Call::Pop, took, &Res::Empty),
            Err(e) => return self.shared.call(Call::Pop, took, &sdk_res(e)),
        };
        let Some(n_in) = number(&msg.transaction_id) else {
            let res = Res::Err("foreign message".into(), msg.transaction_id.clone());
            return self.shared.call(Call::Pop, Duration::ZERO, &res);
        };
        let n_out = self.next_id();
        let step = self
            .client
            .transaction()
            .ack(&msg)
            .push(&self.names.output, |p| {
                p.partition(&msg.partition)
                    .transaction_id(txn(n_out))
                    .payload(&msg.data)
            })
            .kv(|k| {
                k.put(
                    &self.names.ns,
                    kv_key(n_out),
                    &State {
                        status: "stepped",
                        n: n_out,
                    },
                    Ttl::days(1),
                )
            });
        let (out, took) = timed(step.commit()).await;
        let res = match out {
            Ok(Commit::Committed(_)) => {
                let mut l = lock(&self.shared.ledger);
                l.consumed(n_in);
                l.pushed(n_out);
                Res::Ok
            }
            Ok(Commit::Gated { gate, .. }) => Res::Rolled(format!("gated {gate}")),
            Err(e) => sdk_res(e),
        };
        self.shared.call(Call::Txn, took, &res);
    }

    /// Pops up to `batch` messages of `queue` and acks them; answers how many it popped.
    async fn consume(&self, queue: &str, batch: u32) -> usize {
        let pop = self.client.pop::<Value>(queue).batch(batch).send();
        let (got, took) = timed(pop).await;
        let msgs = match got {
            Ok(v) if !v.is_empty() => {
                self.shared.call(Call::Pop, took, &Res::Ok);
                v
            }
            Ok(_) => {
                self.shared.call(Call::Pop, took, &Res::Empty);
                return 0;
            }
            Err(e) => {
                self.shared.call(Call::Pop, took, &sdk_res(e));
                return 0;
            }
        };
        let acks: Vec<(&Message<Value>, AckStatus)> =
            msgs.iter().map(|m| (m, AckStatus::Completed)).collect();
        let (out, took) = timed(self.client.ack_batch(&acks)).await;
        let res = match out {
            Ok(v) if v.len() == msgs.len() => {
                let mut refused = 0;
                let mut foreign = None;
                let mut l = lock(&self.shared.ledger);
                for (m, a) in msgs.iter().zip(&v) {
                    match (a.success, number(&m.transaction_id)) {
                        (true, Some(n)) => l.consumed(n),
                        (true, None) => foreign = Some(m.transaction_id.clone()),
                        (false, _) => refused += 1,
                    }
                }
                match (foreign, refused) {
                    (Some(t), _) => Res::Err("foreign message".into(), t),
                    (None, 0) => Res::Ok,
                    (None, _) => Res::Rolled("ack refused".into()),
                }
            }
            Ok(v) => Res::Err(
                "decode".into(),
                format!("{} ack verdicts for {} acks", v.len(), msgs.len()),
            ),
            Err(e) => sdk_res(e),
        };
        self.shared.call(Call::Ack, took, &res);
        msgs.len()
    }

    async fn kv_get(&self, seq: u64) {
        let (kv, key) = (self.client.kv(), kv_key(seq));
        let (out, took) = timed(kv.get::<Value>(&self.names.ns, &key)).await;
        let res = match out {
            Ok(_) => Res::Ok,
            Err(e) => sdk_res(e),
        };
        self.shared.call(Call::KvGet, took, &res);
    }

    async fn kv_put(&self, seq: u64) {
        let value = State {
            status: "put",
            n: seq,
        };
        let (kv, key) = (self.client.kv(), kv_key(seq));
        let put = kv.put(&self.names.ns, &key, &value, Ttl::days(1));
        let (out, took) = timed(put).await;
        let res = match out {
            Ok(w) if w.applied => Res::Ok,
            Ok(w) => Res::Rolled(format!("kv put {:?}", w.reason)),
            Err(e) => sdk_res(e),
        };
        self.shared.call(Call::KvPut, took, &res);
    }

    async fn timer(&self) {
        let n = self.next_id();
        let (timers, key) = (self.client.timers(), format!("t{n}"));
        let schedule = timers.schedule(&self.names.timers, &key, |t| {
            t.after(self.timer_delay)
                .partition(self.partition(n))
                .txn(txn(n))
                .payload(&Event::new(&n.to_string(), n))
        });
        let (out, took) = timed(schedule).await;
        let res = match out {
            Ok(r) if r.ok => {
                lock(&self.shared.ledger).pushed(n);
                Res::Ok
            }
            Ok(r) => Res::Rolled(format!("timer {:?}", r.status)),
            Err(e) => sdk_res(e),
        };
        self.shared.call(Call::Timer, took, &res);
    }
}

/// Where the broker's figures are read.
struct Probe {
    pid: Option<u32>,
    data: Option<PathBuf>,
}

impl Probe {
    /// `VmRSS` of `/proc/<pid>/status`, MiB.
    fn rss_mib(&self) -> Option<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid?)).ok()?;
        let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
        let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kib / 1024.0)
    }

    /// CPU seconds (user + system, every thread) the process has used.
    fn cpu_secs(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid?)).ok()?;
        super::report::stat_cpu_secs(&stat)
    }

    /// Entries of `/proc/<pid>/fd`.
    fn open_files(&self) -> Option<u64> {
        let dir = std::fs::read_dir(format!("/proc/{}/fd", self.pid?)).ok()?;
        Some(dir.count() as u64)
    }

    /// The data file's and its log's sizes, MiB (a log not there is 0).
    fn files_mib(&self) -> (Option<f64>, Option<f64>) {
        let Some(data) = &self.data else {
            return (None, None);
        };
        let mib = |p: &Path| {
            std::fs::metadata(p)
                .ok()
                .map(|m| m.len() as f64 / 1_048_576.0)
        };
        let mut wal = data.clone().into_os_string();
        wal.push(".wal");
        (mib(data), Some(mib(Path::new(&wal)).unwrap_or(0.0)))
    }
}

/// One CSV row: one sampling interval.
#[derive(Debug, Clone)]
struct Row {
    /// Minutes since the start, at the sample.
    minute: f64,
    /// Seconds the interval lasted.
    interval_s: f64,
    rss_mib: Option<f64>,
    /// The broker's CPU over the interval, percent of one core.
    cpu_pct: Option<f64>,
    data_mib: Option<f64>,
    wal_mib: Option<f64>,
    open_files: Option<u64>,
    /// Messages the soak's three queues store.
    stored_messages: Option<u64>,
    /// Their stored bytes (the broker's `retainedBytes`), MiB.
    retained_mib: Option<f64>,
    counts: Counts,
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    max_ms: Option<f64>,
    /// The p99 of each kind of call ([`CALLS`]' order).
    call_p99_ms: Vec<Option<f64>>,
    /// Acknowledged pushes so far.
    pushed: u64,
    /// Consumed messages so far.
    consumed: u64,
    /// Acknowledged pushes not consumed yet.
    backlog: u64,
}

fn ms(h: &Histogram<u64>, q: f64) -> Option<f64> {
    (!h.is_empty()).then(|| h.value_at_quantile(q) as f64 / 1000.0)
}

fn csv_header() -> String {
    let mut h = String::from(
        "minute,interval_s,rss_mib,cpu_pct,data_mib,wal_mib,open_files,stored_messages,retained_mib,\
         requests,ops,errors,rollbacks,empty_pops,skipped,p50_ms,p99_ms,max_ms",
    );
    for (_, name) in CALLS {
        let _ = write!(h, ",{name}_p99_ms");
    }
    h.push_str(",pushed,consumed,backlog");
    h
}

impl Row {
    fn csv(&self) -> String {
        fn f(v: Option<f64>) -> String {
            v.map(|v| format!("{v:.3}")).unwrap_or_default()
        }
        fn u(v: Option<u64>) -> String {
            v.map(|v| v.to_string()).unwrap_or_default()
        }
        let mut s = format!(
            "{:.3},{:.3},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}",
            self.minute,
            self.interval_s,
            f(self.rss_mib),
            f(self.cpu_pct),
            f(self.data_mib),
            f(self.wal_mib),
            u(self.open_files),
            u(self.stored_messages),
            f(self.retained_mib),
            self.counts.requests,
            self.counts.ops,
            self.counts.errors,
            self.counts.rollbacks,
            self.counts.empty_pops,
            self.counts.skipped,
            f(self.p50_ms),
            f(self.p99_ms),
            f(self.max_ms),
        );
        for v in &self.call_p99_ms {
            let _ = write!(s, ",{}", f(*v));
        }
        let _ = write!(s, ",{},{},{}", self.pushed, self.consumed, self.backlog);
        s
    }

    fn files_mib(&self) -> Option<f64> {
        Some(self.data_mib? + self.wal_mib.unwrap_or(0.0))
    }
}

/// A sample: its row, and the latency of all its calls (for the p99 of the first and
/// the last samples; `None` once it is neither, see [`forget_middle`]).
struct Sample {
    row: Row,
    all: Option<Histogram<u64>>,
}

/// Drops the histograms the summary will not read: with `2 * BASELINE_SAMPLES` samples
/// or more it reads only the first and the last `BASELINE_SAMPLES` (some 140 KiB each,
/// which a day of minutes would otherwise pile up to 200 MiB).
fn forget_middle(samples: &mut [Sample]) {
    let n = samples.len();
    if n > 2 * BASELINE_SAMPLES {
        samples[n - BASELINE_SAMPLES - 1].all = None;
    }
}

/// The sampler's settings.
struct Sampling {
    every: Duration,
    /// The run's end: the last sample is taken there.
    end: Instant,
    start: Instant,
}

/// Takes a sample every `s.every` and at `s.end` (or at once when `stop` is set),
/// appending each row to `csv` and redrawing the plot.
async fn sampler(
    ctx: Arc<Ctx>,
    probe: Probe,
    s: Sampling,
    mut stop: watch::Receiver<bool>,
    out: PathBuf,
    heading: String,
) -> anyhow::Result<Vec<Sample>> {
    let path = out.join("soak.csv");
    let mut csv =
        std::fs::File::create(&path).with_context(|| format!("creating {}", path.display()))?;
    writeln!(csv, "{}", csv_header())?;
    let mut samples: Vec<Sample> = Vec::new();
    let mut last = s.start;
    let mut cpu_last = probe.cpu_secs();
    loop {
        let next = (last + s.every).min(s.end);
        let stopped = tokio::select! {
            _ = tokio::time::sleep_until(next) => false,
            _ = stop.wait_for(|v| *v) => true,
        };
        let now = Instant::now();
        let w = ctx.shared.take_window();
        let (stored, retained) = stored(&ctx).await;
        let (pushed, consumed, backlog) = {
            let l = lock(&ctx.shared.ledger);
            (l.n_pushed, l.n_consumed, l.missing())
        };
        let (data_mib, wal_mib) = probe.files_mib();
        let cpu = probe.cpu_secs();
        let cpu_pct = cpu
            .zip(cpu_last)
            .map(|(b, a)| (b - a) / (now - last).as_secs_f64() * 100.0);
        cpu_last = cpu;
        let row = Row {
            minute: (now - s.start).as_secs_f64() / 60.0,
            interval_s: (now - last).as_secs_f64(),
            rss_mib: probe.rss_mib(),
            cpu_pct,
            data_mib,
            wal_mib,
            open_files: probe.open_files(),
            stored_messages: stored,
            retained_mib: retained,
            counts: w.counts,
            p50_ms: ms(&w.all, 0.50),
            p99_ms: ms(&w.all, 0.99),
            max_ms: (!w.all.is_empty()).then(|| w.all.max() as f64 / 1000.0),
            call_p99_ms: w.calls.iter().map(|h| ms(h, 0.99)).collect(),
            pushed,
            consumed,
            backlog,
        };
        last = now;
        writeln!(csv, "{}", row.csv())?;
        csv.flush()?;
        eprintln!(
            "soak: {}  rss {}  cpu {}  files {}  fds {}  stored {}  calls {}  errors {}  p50 {}  p99 {}  backlog {}",
            elapsed(row.minute),
            opt(row.rss_mib, " MiB"),
            opt(row.cpu_pct, "%"),
            opt(row.files_mib(), " MiB"),
            row.open_files.map_or("-".into(), |v| v.to_string()),
            row.stored_messages.map_or("-".into(), |v| v.to_string()),
            row.counts.requests,
            row.counts.errors,
            opt(row.p50_ms, " ms"),
            opt(row.p99_ms, " ms"),
            row.backlog,
        );
        samples.push(Sample {
            row,
            all: Some(w.all),
        });
        forget_middle(&mut samples);
        let rows: Vec<Row> = samples.iter().map(|s| s.row.clone()).collect();
        write_plot(&out, &rows, &heading)?;
        if stopped || now >= s.end {
            return Ok(samples);
        }
    }
}

/// Minutes as `m:ss`.
fn elapsed(minute: f64) -> String {
    let s = (minute * 60.0).round() as u64;
    format!("{:>3}:{:02}", s / 60, s % 60)
}

fn opt(v: Option<f64>, unit: &str) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}{unit}"))
}

/// Messages and bytes the soak's queues store (`None` if the broker did not say).
async fn stored(ctx: &Ctx) -> (Option<u64>, Option<f64>) {
    let (mut n, mut bytes) = (0u64, Some(0u64));
    for q in ctx.names.queues() {
        match ctx.client.queue_stats(q).await {
            Ok(d) => {
                n += d.totals.total;
                bytes = bytes.zip(d.retained_bytes).map(|(a, b)| a + b);
            }
            Err(e) => {
                eprintln!("soak: reading {q}'s stored messages failed: {e}");
                return (None, None);
            }
        }
    }
    (Some(n), bytes.map(|b| b as f64 / 1_048_576.0))
}

/// Writes `soak.svg` in `out`: RSS, file size, latency and stored messages over time.
fn write_plot(out: &Path, rows: &[Row], heading: &str) -> anyhow::Result<()> {
    let series = |name: &str, f: &dyn Fn(&Row) -> Option<f64>| plot::Series {
        name: name.into(),
        points: rows
            .iter()
            .filter_map(|r| Some((r.minute, f(r)?)))
            .collect(),
    };
    let panels = [
        plot::Panel {
            title: "Broker resident memory (VmRSS)".into(),
            unit: "MiB".into(),
            series: vec![series("RSS", &|r| r.rss_mib)],
        },
        plot::Panel {
            title: "Broker files".into(),
            unit: "MiB".into(),
            series: vec![
                series("data + log", &|r| r.files_mib()),
                series("data file", &|r| r.data_mib),
                series("log (.wal)", &|r| r.wal_mib),
            ],
        },
        plot::Panel {
            title: "Latency of every call over each interval".into(),
            unit: "ms".into(),
            series: vec![series("p99", &|r| r.p99_ms), series("p50", &|r| r.p50_ms)],
        },
        plot::Panel {
            title: "Messages stored in the soak's queues (retention), and not consumed yet".into(),
            unit: "".into(),
            series: vec![
                series("stored", &|r| r.stored_messages.map(|v| v as f64)),
                series("not consumed", &|r| Some(r.backlog as f64)),
            ],
        },
    ];
    let svg = plot::svg(heading, "minutes", &panels);
    let path = out.join("soak.svg");
    std::fs::write(&path, svg).with_context(|| format!("writing {}", path.display()))
}

/// What the run is judged on (`summary.json`; `summary.txt` says it in words).
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Minutes asked for.
    pub minutes: f64,
    /// Minutes run (less when stopped by Ctrl-C).
    pub minutes_run: f64,
    /// Operations a second asked for.
    pub rate: f64,
    /// Operations a second dispatched.
    pub rate_run: f64,
    /// Most operations in flight (`--concurrency`).
    pub concurrency: usize,
    /// Seconds between samples.
    pub sample_secs: f64,
    /// The queues' `completedRetentionSeconds`.
    pub retention_secs: u64,
    /// The broker's URL.
    pub url: String,
    /// The process sampled.
    pub broker_pid: Option<u32>,
    /// The data file sampled.
    pub data: Option<PathBuf>,
    /// Rows in the CSV.
    pub samples: usize,
    /// Calls made, the final drain's included.
    pub requests: u64,
    /// Operations of the mix completed.
    pub ops: u64,
    /// Calls that failed (the final drain's included).
    pub errors: u64,
    /// Errors by kind.
    pub error_kinds: BTreeMap<String, u64>,
    /// The first error texts.
    pub error_samples: Vec<String>,
    /// Verdicts that wrote nothing.
    pub rollbacks: u64,
    /// Rollbacks by reason.
    pub rollback_reasons: BTreeMap<String, u64>,
    /// Operations not dispatched because `--concurrency` were in flight.
    pub skipped: u64,
    /// Acknowledged pushes (plain, in a step, timers scheduled).
    pub pushed: u64,
    /// Messages consumed (acked).
    pub consumed: u64,
    /// Acknowledged pushes never consumed, after the drain.
    pub lost: u64,
    /// Acks of a message consumed before.
    pub redelivered: u64,
    /// Consumed messages whose push had no acknowledgement.
    pub unconfirmed: u64,
    /// Seconds the final drain took (the last timers' wait included).
    pub drain_s: f64,
    /// The broker's CPU over the samples, percent of one core, on average.
    pub cpu_pct_mean: Option<f64>,
    /// The busiest sample's CPU, percent of one core.
    pub cpu_pct_max: Option<f64>,
    /// Samples the p99 baseline is made of (the first ten, or a third of a shorter run).
    pub baseline_samples: usize,
    /// p99 of every call over the baseline samples, ms.
    pub p99_first_ms: Option<f64>,
    /// p99 over as many samples at the end, ms.
    pub p99_last_ms: Option<f64>,
    /// The worst one sample's p99 after the baseline, ms.
    pub p99_worst_ms: Option<f64>,
    /// The minute of that sample.
    pub p99_worst_minute: Option<f64>,
    /// The minute of the first sample past retention's horizon (`--retention-secs`
    /// plus one interval), if the run reached it.
    pub horizon_minute: Option<f64>,
    /// RSS at the horizon's sample, MiB.
    pub rss_horizon_mib: Option<f64>,
    /// RSS at the last sample, MiB.
    pub rss_end_mib: Option<f64>,
    /// The largest RSS sampled from the horizon on, MiB.
    pub rss_max_after_horizon_mib: Option<f64>,
    /// Data file + log at the horizon's sample, MiB.
    pub files_horizon_mib: Option<f64>,
    /// Data file + log at the last sample, MiB.
    pub files_end_mib: Option<f64>,
    /// The largest data file + log sampled from the horizon on, MiB.
    pub files_max_after_horizon_mib: Option<f64>,
    /// The data file alone at the horizon's sample, MiB.
    pub data_horizon_mib: Option<f64>,
    /// The data file alone at the last sample, MiB.
    pub data_end_mib: Option<f64>,
    /// Messages stored in the soak's queues at the horizon's sample.
    pub stored_horizon: Option<u64>,
    /// Messages stored in the soak's queues at the last sample.
    pub stored_end: Option<u64>,
    /// Open files at the horizon's sample.
    pub open_files_horizon: Option<u64>,
    /// Open files at the last sample.
    pub open_files_end: Option<u64>,
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".into(),
    }
}

impl Summary {
    /// The summary in words, a line a figure.
    pub fn text(&self) -> String {
        let f = |v: Option<f64>, unit: &str| opt(v, unit);
        let u = |v: Option<u64>| v.map_or("-".into(), |v| v.to_string());
        let mut s = String::new();
        let _ = writeln!(
            s,
            "soak: {:.1} of {:.1} min at {:.0} ops/s ({:.1} dispatched a second), samples every {} s, completed retention {} s, {}",
            self.minutes_run,
            self.minutes,
            self.rate,
            self.rate_run,
            self.sample_secs,
            self.retention_secs,
            self.url
        );
        let _ = writeln!(
            s,
            "calls: {} ({} operations); errors {}; rollbacks {}; not dispatched (all {} in flight) {}",
            self.requests, self.ops, self.errors, self.rollbacks, self.concurrency, self.skipped
        );
        for (k, n) in &self.error_kinds {
            let _ = writeln!(s, "  error {k}: {n}");
        }
        for e in &self.error_samples {
            let _ = writeln!(s, "  e.g. {e}");
        }
        for (k, n) in &self.rollback_reasons {
            let _ = writeln!(s, "  rollback {k}: {n}");
        }
        let _ = writeln!(
            s,
            "messages: {} pushed (acknowledged), {} consumed, lost {}; redelivered {}; consumed without an acknowledged push {}; drain {:.1} s",
            self.pushed, self.consumed, self.lost, self.redelivered, self.unconfirmed, self.drain_s
        );
        let _ = writeln!(
            s,
            "broker CPU: {} of one core on average, {} in the busiest sample",
            f(self.cpu_pct_mean, "%"),
            f(self.cpu_pct_max, "%"),
        );
        let _ = writeln!(
            s,
            "p99: first {} samples {}, last {} samples {} ({}); worst sample after the first {} {} at minute {} ({})",
            self.baseline_samples,
            f(self.p99_first_ms, " ms"),
            self.baseline_samples,
            f(self.p99_last_ms, " ms"),
            ratio(self.p99_last_ms, self.p99_first_ms),
            self.baseline_samples,
            f(self.p99_worst_ms, " ms"),
            self.p99_worst_minute
                .map_or("-".into(), |m| format!("{m:.1}")),
            ratio(self.p99_worst_ms, self.p99_first_ms),
        );
        match self.horizon_minute {
            Some(h) => {
                let _ = writeln!(
                    s,
                    "horizon: minute {h:.1} (retention {} s + one interval)",
                    self.retention_secs
                );
                let _ = writeln!(
                    s,
                    "  RSS {} -> {} at the end ({}), most after the horizon {}",
                    f(self.rss_horizon_mib, " MiB"),
                    f(self.rss_end_mib, " MiB"),
                    ratio(self.rss_end_mib, self.rss_horizon_mib),
                    f(self.rss_max_after_horizon_mib, " MiB"),
                );
                let _ = writeln!(
                    s,
                    "  data + log {} -> {} ({}), most after the horizon {}; data file {} -> {}",
                    f(self.files_horizon_mib, " MiB"),
                    f(self.files_end_mib, " MiB"),
                    ratio(self.files_end_mib, self.files_horizon_mib),
                    f(self.files_max_after_horizon_mib, " MiB"),
                    f(self.data_horizon_mib, " MiB"),
                    f(self.data_end_mib, " MiB"),
                );
                let _ = writeln!(
                    s,
                    "  stored messages {} -> {}; open files {} -> {}",
                    u(self.stored_horizon),
                    u(self.stored_end),
                    u(self.open_files_horizon),
                    u(self.open_files_end),
                );
            }
            None => {
                let why = if self.retention_secs == 0 {
                    "none: retention is off".to_string()
                } else {
                    format!(
                        "not reached (retention {} s + one interval is past the run)",
                        self.retention_secs
                    )
                };
                let _ = writeln!(
                    s,
                    "horizon: {why}; at the end RSS {}, data + log {}, stored messages {}, open files {}",
                    f(self.rss_end_mib, " MiB"),
                    f(self.files_end_mib, " MiB"),
                    u(self.stored_end),
                    u(self.open_files_end),
                );
            }
        }
        s
    }
}

/// The run's fixed inputs, for the summary.
struct Setup {
    minutes: f64,
    rate: f64,
    concurrency: usize,
    sample_secs: f64,
    retention_secs: u64,
    url: String,
    probe_pid: Option<u32>,
    probe_data: Option<PathBuf>,
}

/// Builds the summary from the samples and the run's totals.
fn summarize(
    setup: &Setup,
    samples: &[Sample],
    totals: &Counts,
    problems: &Problems,
    ledger: &Ledger,
    run: (f64, u64, f64),
) -> Summary {
    let (secs_run, dispatched, drain_s) = run;
    let n = samples.len();
    let base = if n >= 2 * BASELINE_SAMPLES {
        BASELINE_SAMPLES
    } else {
        (n / 3).max(1).min(n)
    };
    let merged = |s: &[Sample]| {
        let mut h = histogram();
        for x in s.iter().filter_map(|x| x.all.as_ref()) {
            let _ = h.add(x);
        }
        ms(&h, 0.99)
    };
    let (p99_first_ms, p99_last_ms) = if n == 0 {
        (None, None)
    } else {
        (merged(&samples[..base]), merged(&samples[n - base..]))
    };
    let worst = samples
        .iter()
        .skip(base)
        .filter_map(|s| Some((s.row.p99_ms?, s.row.minute)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    let horizon_s = setup.retention_secs as f64 + setup.sample_secs;
    let horizon = (setup.retention_secs > 0)
        .then(|| {
            samples
                .iter()
                .position(|s| s.row.minute * 60.0 + 1e-6 >= horizon_s)
        })
        .flatten();
    let last = samples.last().map(|s| &s.row);
    let at = |f: &dyn Fn(&Row) -> Option<f64>| horizon.and_then(|i| f(&samples[i].row));
    let most = |f: &dyn Fn(&Row) -> Option<f64>| {
        horizon.and_then(|i| {
            samples[i..]
                .iter()
                .filter_map(|s| f(&s.row))
                .max_by(f64::total_cmp)
        })
    };
    Summary {
        minutes: setup.minutes,
        minutes_run: secs_run / 60.0,
        rate: setup.rate,
        concurrency: setup.concurrency,
        rate_run: dispatched as f64 / secs_run.max(1e-9),
        sample_secs: setup.sample_secs,
        retention_secs: setup.retention_secs,
        url: setup.url.clone(),
        broker_pid: setup.probe_pid,
        data: setup.probe_data.clone(),
        samples: n,
        requests: totals.requests,
        ops: totals.ops,
        errors: totals.errors,
        error_kinds: problems.errors.clone(),
        error_samples: problems.samples.clone(),
        rollbacks: totals.rollbacks,
        rollback_reasons: problems.rollbacks.clone(),
        skipped: totals.skipped,
        pushed: ledger.n_pushed,
        consumed: ledger.n_consumed,
        lost: ledger.missing(),
        redelivered: ledger.redelivered,
        unconfirmed: ledger.unconfirmed(),
        drain_s,
        cpu_pct_mean: {
            let v: Vec<f64> = samples.iter().filter_map(|s| s.row.cpu_pct).collect();
            (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
        },
        cpu_pct_max: samples
            .iter()
            .filter_map(|s| s.row.cpu_pct)
            .max_by(f64::total_cmp),
        baseline_samples: base.min(n),
        p99_first_ms,
        p99_last_ms,
        p99_worst_ms: worst.map(|w| w.0),
        p99_worst_minute: worst.map(|w| w.1),
        horizon_minute: horizon.map(|i| samples[i].row.minute),
        rss_horizon_mib: at(&|r| r.rss_mib),
        rss_end_mib: last.and_then(|r| r.rss_mib),
        rss_max_after_horizon_mib: most(&|r| r.rss_mib),
        files_horizon_mib: at(&|r| r.files_mib()),
        files_end_mib: last.and_then(Row::files_mib),
        files_max_after_horizon_mib: most(&|r| r.files_mib()),
        data_horizon_mib: at(&|r| r.data_mib),
        data_end_mib: last.and_then(|r| r.data_mib),
        stored_horizon: horizon.and_then(|i| samples[i].row.stored_messages),
        stored_end: last.and_then(|r| r.stored_messages),
        open_files_horizon: horizon.and_then(|i| samples[i].row.open_files),
        open_files_end: last.and_then(|r| r.open_files),
    }
}

/// Checks the soak's options.
pub(crate) fn check(args: &Args, minutes: f64) -> anyhow::Result<()> {
    ensure!(
        minutes > 0.0 && minutes <= 24.0 * 60.0,
        "--soak must be more than 0 and at most 1440 minutes"
    );
    ensure!(
        args.rate >= 1.0 && args.rate <= 100_000.0,
        "--rate must be 1 to 100000 operations a second"
    );
    ensure!(
        args.sample_secs >= 0.5 && args.sample_secs <= 3600.0,
        "--sample-secs must be 0.5 to 3600"
    );
    ensure!(
        args.timer_delay_secs >= 0.1 && args.timer_delay_secs <= 600.0,
        "--timer-delay-secs must be 0.1 to 600"
    );
    ensure!(
        !args.stores(),
        "--stored-messages, --stored-kv and --stored-timers are not for --soak"
    );
    Ok(())
}

/// Runs the soak of `args` (`--soak MINUTES`), writes `soak.csv`, `soak.svg`,
/// `summary.txt` and `summary.json` in `--out`, prints the summary, and fails if any
/// call failed or any acknowledged push was lost.
pub(crate) async fn main(args: &Args, minutes: f64) -> anyhow::Result<()> {
    check(args, minutes)?;
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let (embedded, url, probe) = match &args.url {
        Some(u) => (
            None,
            u.trim_end_matches('/').to_string(),
            Probe {
                pid: args.broker_pid,
                data: args.data.clone(),
            },
        ),
        None => {
            let dir = tempfile::tempdir().context("a temporary directory for the broker")?;
            let data = dir.path().join("queen.redb");
            let broker = MockBroker::builder()
                .data_file(data.clone())
                .harness(args.harness)
                .start()
                .await
                .context("starting the embedded broker")?;
            let url = broker.url();
            // The embedded broker is this process: its RSS and files include the load
            // generator's.
            let probe = Probe {
                pid: Some(std::process::id()),
                data: Some(data),
            };
            (Some((broker, dir)), url, probe)
        }
    };
    let out = soak(args, minutes, &url, probe).await;
    if let Some((broker, _dir)) = embedded {
        broker.shutdown().await;
    }
    let summary = out?;
    let text = summary.text();
    std::fs::write(args.out.join("summary.txt"), &text)?;
    std::fs::write(
        args.out.join("summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    if args.json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        print!("{text}");
    }
    if summary.errors > 0 || summary.lost > 0 {
        bail!(
            "the soak had {} errors and lost {} messages",
            summary.errors,
            summary.lost
        );
    }
    Ok(())
}

async fn soak(args: &Args, minutes: f64, url: &str, probe: Probe) -> anyhow::Result<Summary> {
    let run = format!(
        "{:x}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis()
    );
    let names = Names::new(&run);
    // Set-up retries (it is not the load); the load's client does not, so that every
    // failure is counted.
    let setup_client = sdk_client(url, args.token.as_deref(), RetryPolicy::default())?;
    for q in names.queues() {
        let options = QueueOptions::new()
            .lease_time(LEASE)
            .option("retentionEnabled", true)
            .option("completedRetentionSeconds", args.retention_secs);
        setup_client
            .configure(q, options)
            .await
            .with_context(|| format!("configuring {q}"))?;
    }
    let shared = Arc::new(Shared {
        window: Mutex::new(Window::new()),
        problems: Mutex::new(Problems::default()),
        ledger: Mutex::new(Ledger::default()),
        next_id: AtomicU64::new(0),
    });
    let ctx = Arc::new(Ctx {
        client: sdk_client(url, args.token.as_deref(), RetryPolicy::none())?,
        names,
        partitions: args.partitions as u64,
        timer_delay: Duration::from_secs_f64(args.timer_delay_secs),
        shared: shared.clone(),
    });
    let sampler_ctx = Arc::new(Ctx {
        client: setup_client,
        names: Names::new(&run),
        partitions: ctx.partitions,
        timer_delay: ctx.timer_delay,
        shared: shared.clone(),
    });
    let setup = Setup {
        minutes,
        rate: args.rate,
        concurrency: args.concurrency,
        sample_secs: args.sample_secs,
        retention_secs: args.retention_secs,
        url: url.to_string(),
        probe_pid: probe.pid,
        probe_data: probe.data.clone(),
    };
    eprintln!(
        "soak: {minutes} min at {} ops/s against {url} (pid {}, data {}), samples every {} s into {}",
        args.rate,
        probe.pid.map_or("-".into(), |p| p.to_string()),
        probe
            .data
            .as_deref()
            .map_or("-".into(), |p| p.display().to_string()),
        args.sample_secs,
        args.out.display()
    );

    let start = Instant::now();
    let end = start + Duration::from_secs_f64(minutes * 60.0);
    let (stop_tx, stop_rx) = watch::channel(false);
    let heading = format!(
        "queen soak: {:.0} ops/s through the SDK, completed retention {} s",
        args.rate, args.retention_secs
    );
    let sampling = tokio::spawn(sampler(
        sampler_ctx,
        probe,
        Sampling {
            every: Duration::from_secs_f64(args.sample_secs),
            end,
            start,
        },
        stop_rx,
        args.out.clone(),
        heading.clone(),
    ));

    // The dispatcher: every few ms, as many operations as the rate owes since the
    // start (so a late tick catches up instead of lowering the rate), each in its own
    // task; a full `--concurrency` skips (and counts) an operation rather than waiting,
    // so a slow broker shows as skipped operations, not as a lower rate hidden in the
    // latencies.
    let slots = Arc::new(Semaphore::new(args.concurrency));
    let mut tick = tokio::time::interval(Duration::from_millis(5));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    let mut dispatched: u64 = 0;
    let stopped_at = loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = &mut ctrl_c => {
                eprintln!("soak: stopped by Ctrl-C; sampling, draining and summing up");
                break Instant::now();
            }
        }
        let now = Instant::now();
        if now >= end {
            break end;
        }
        let owed = ((now - start).as_secs_f64() * args.rate) as u64;
        while dispatched < owed {
            let seq = dispatched;
            dispatched += 1;
            let Ok(permit) = slots.clone().try_acquire_owned() else {
                lock(&shared.window).counts.skipped += 1;
                continue;
            };
            let ctx = ctx.clone();
            tokio::spawn(async move {
                ctx.run(MIX[(seq % MIX.len() as u64) as usize], seq).await;
                drop(permit);
            });
        }
    };
    let _ = stop_tx.send(true);
    let samples = sampling.await.context("the sampler panicked")??;
    let secs_run = (stopped_at - start).as_secs_f64();

    // What was in flight at the end finishes into the totals (not into a row).
    let all = u32::try_from(args.concurrency).unwrap_or(u32::MAX);
    if tokio::time::timeout(SETTLE, slots.acquire_many(all))
        .await
        .is_err()
    {
        eprintln!("soak: operations still in flight {SETTLE:?} after the end");
    }

    // The drain: the last timers fire, then whatever the queues hold is popped and
    // acked, until every acknowledged push is consumed or a lease left by a failed ack
    // has had time to lapse and be redelivered.
    let drain_start = Instant::now();
    tokio::time::sleep(ctx.timer_delay + Duration::from_secs(1)).await;
    let drain_end = Instant::now() + LEASE + Duration::from_secs(15);
    loop {
        let mut got = 0;
        for q in ctx.names.queues() {
            got += ctx.consume(q, DRAIN_BATCH).await;
        }
        if lock(&shared.ledger).missing() == 0 || Instant::now() >= drain_end {
            break;
        }
        if got == 0 {
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
    let drain_s = drain_start.elapsed().as_secs_f64();

    let mut totals = shared.take_window().counts;
    for s in &samples {
        totals.add(&s.row.counts);
    }
    let summary = {
        let problems = lock(&shared.problems);
        let ledger = lock(&shared.ledger);
        summarize(
            &setup,
            &samples,
            &totals,
            &problems,
            &ledger,
            (secs_run, dispatched, drain_s),
        )
    };
    let rows: Vec<Row> = samples.iter().map(|s| s.row.clone()).collect();
    write_plot(
        &args.out,
        &rows,
        &format!(
            "{heading}\n{:.1} min, {} calls, {} errors, {} lost",
            summary.minutes_run, summary.requests, summary.errors, summary.lost
        ),
    )?;
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_push_not_consumed_is_missing_and_a_consumption_without_a_push_is_not() {
        let mut l = Ledger::default();
        for n in [0, 1, 63, 64, 200] {
            l.pushed(n);
        }
        for n in [0, 63, 64, 300] {
            l.consumed(n);
        }
        l.consumed(64);
        assert_eq!((l.n_pushed, l.n_consumed, l.redelivered), (5, 4, 1));
        assert_eq!(l.missing(), 2, "1 and 200 were never consumed");
        assert_eq!(
            l.unconfirmed(),
            1,
            "300 was consumed without an acknowledged push"
        );
        l.consumed(1);
        l.consumed(200);
        assert_eq!(l.missing(), 0);
    }

    #[test]
    fn transaction_ids_round_trip_and_others_are_foreign() {
        assert_eq!(number(&txn(42)), Some(42));
        assert_eq!(number("order-7-paid"), None);
        assert_eq!(number("s"), None);
    }

    #[test]
    fn only_the_first_and_last_ten_histograms_are_kept() {
        let mut samples = Vec::new();
        for i in 0..35 {
            let mut h = histogram();
            h.record(i + 1).unwrap();
            samples.push(Sample {
                row: row(),
                all: Some(h),
            });
            forget_middle(&mut samples);
        }
        let kept: Vec<usize> = (0..samples.len())
            .filter(|&i| samples[i].all.is_some())
            .collect();
        let want: Vec<usize> = (0..10).chain(25..35).collect();
        assert_eq!(kept, want);
    }

    #[test]
    fn kv_keys_stay_within_their_bound() {
        let keys: std::collections::HashSet<String> = (0..100_000).map(kv_key).collect();
        assert!(keys.len() as u64 <= KV_KEYS);
        assert!(keys.len() as u64 > KV_KEYS / 2, "the keys are spread");
    }

    fn row() -> Row {
        Row {
            minute: 1.0,
            interval_s: 60.0,
            rss_mib: Some(80.0),
            cpu_pct: None,
            data_mib: None,
            wal_mib: Some(1.0),
            open_files: Some(20),
            stored_messages: None,
            retained_mib: None,
            counts: Counts::default(),
            p50_ms: Some(1.0),
            p99_ms: Some(2.0),
            max_ms: Some(3.0),
            call_p99_ms: vec![None; CALLS.len()],
            pushed: 5,
            consumed: 4,
            backlog: 1,
        }
    }

    #[test]
    fn a_row_has_as_many_csv_fields_as_the_header() {
        let row = row();
        assert_eq!(
            row.csv().split(',').count(),
            csv_header().split(',').count()
        );
        assert_eq!(row.files_mib(), None, "no data file, no size");
    }
}
