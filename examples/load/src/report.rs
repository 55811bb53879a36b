//! Counting a run and reporting it: a per-worker [`Tally`] merged into one, and the
//! [`Report`] printed as text or as one JSON object.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use hdrhistogram::Histogram;
use queen_mock_broker::StatsSnapshot;
use serde::Serialize;

use super::driver::{Outcome, Step};

/// Distinct error texts kept as samples.
const ERROR_SAMPLES: usize = 5;

/// A latency histogram in microseconds, 1 µs to 10 min, 3 significant digits: bounded
/// memory whatever the run's length.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1)
}

/// The latency histograms of a phase, shared by its workers behind a mutex (one lock
/// per operation, far cheaper than the operation): two histograms in all, whatever
/// the concurrency.
pub(crate) struct Latencies {
    /// Whole-operation latency (pop and transaction, for the popping shapes).
    pub total: Histogram<u64>,
    /// The write call's latency (the transaction alone, for the popping shapes).
    pub commit: Histogram<u64>,
}

impl Latencies {
    pub fn new() -> Latencies {
        Latencies {
            total: histogram(),
            commit: histogram(),
        }
    }

    /// The quantiles of both.
    pub fn summary(&self) -> (Latency, Latency) {
        (Latency::of(&self.total), Latency::of(&self.commit))
    }
}

/// What one worker (or, merged, the whole phase) counted.
#[derive(Default)]
pub(crate) struct Tally {
    /// Operations that succeeded and ended by the deadline.
    pub ops: u64,
    /// Operations that succeeded after the deadline (started before it): not counted.
    pub late: u64,
    /// Failed calls, by kind.
    pub errors: BTreeMap<String, u64>,
    /// Rolled-back verdicts, by reason.
    pub rollbacks: BTreeMap<String, u64>,
    /// A few distinct error texts.
    pub samples: Vec<String>,
    /// Pops that found nothing.
    pub empty_pops: u64,
    /// Messages popped (warm-up or window, whatever the outcome).
    pub popped: u64,
    /// Messages popped by the operations counted in `ops`.
    pub messages: u64,
}

impl Tally {
    /// Counts one operation that took `took` and ended inside the window or not.
    /// Errors and rollbacks count wherever they end; successes only inside the window,
    /// and only they go into `latencies`.
    pub fn record(
        &mut self,
        step: Step,
        took: Duration,
        in_window: bool,
        latencies: &Mutex<Latencies>,
    ) {
        self.popped += step.popped;
        match step.outcome {
            Outcome::Done if in_window => {
                self.ops += 1;
                self.messages += step.popped;
                let mut l = latencies.lock().unwrap_or_else(|e| e.into_inner());
                l.total.saturating_record(micros(took));
                if let Some(c) = step.commit {
                    l.commit.saturating_record(micros(c));
                }
            }
            Outcome::Done => self.late += 1,
            Outcome::Empty => self.empty_pops += 1,
            Outcome::RolledBack(reason) => *self.rollbacks.entry(reason).or_default() += 1,
            Outcome::Error(kind, detail) => {
                let sample = format!("{kind}: {detail}");
                if self.samples.len() < ERROR_SAMPLES && !self.samples.contains(&sample) {
                    self.samples.push(sample);
                }
                *self.errors.entry(kind).or_default() += 1;
            }
        }
    }

    pub fn merge(&mut self, o: Tally) {
        self.ops += o.ops;
        self.late += o.late;
        for (k, v) in o.errors {
            *self.errors.entry(k).or_default() += v;
        }
        for (k, v) in o.rollbacks {
            *self.rollbacks.entry(k).or_default() += v;
        }
        for s in o.samples {
            if self.samples.len() < ERROR_SAMPLES && !self.samples.contains(&s) {
                self.samples.push(s);
            }
        }
        self.empty_pops += o.empty_pops;
        self.popped += o.popped;
        self.messages += o.messages;
    }
}

/// Latency quantiles in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Slowest.
    pub max: f64,
    /// Mean.
    pub mean: f64,
}

impl Latency {
    fn of(h: &Histogram<u64>) -> Latency {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Latency {
                p50: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
                mean: 0.0,
            };
        }
        Latency {
            p50: ms(h.value_at_quantile(0.50)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
            mean: h.mean() / 1000.0,
        }
    }
}

/// The embedded broker's group commit over the measured window (deltas of
/// `MockBroker::stats()` taken at the window's start and at its deadline).
#[derive(Debug, Clone, Serialize)]
pub struct GroupCommit {
    /// Durable commits.
    pub commits: u64,
    /// Batches that wrote nothing (no commit needed).
    pub read_only_batches: u64,
    /// Commands applied (pops, pushes, transactions, ...).
    pub commands: u64,
    /// Batches (commits and read-only) per second.
    pub batches_per_s: f64,
    /// Durable commits per second.
    pub commits_per_s: f64,
    /// Commands per second.
    pub commands_per_s: f64,
    /// Commands per batch.
    pub average_batch: f64,
}

impl GroupCommit {
    pub(crate) fn between(before: StatsSnapshot, after: StatsSnapshot, secs: f64) -> GroupCommit {
        let delta = StatsSnapshot {
            commits: after.commits.saturating_sub(before.commits),
            commands: after.commands.saturating_sub(before.commands),
            read_only_batches: after
                .read_only_batches
                .saturating_sub(before.read_only_batches),
            live_bytes: after.live_bytes,
        };
        let secs = secs.max(f64::EPSILON);
        GroupCommit {
            commits: delta.commits,
            read_only_batches: delta.read_only_batches,
            commands: delta.commands,
            batches_per_s: (delta.commits + delta.read_only_batches) as f64 / secs,
            commits_per_s: delta.commits as f64 / secs,
            commands_per_s: delta.commands as f64 / secs,
            average_batch: delta.average_batch(),
        }
    }
}

/// The background data stored before the run (untimed): `--stored-messages`,
/// `--stored-kv`, `--stored-timers`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Stored {
    /// Messages in a queue of their own that nothing reads.
    pub messages: u64,
    /// Partitions they are spread over.
    pub partitions: usize,
    /// KV keys.
    pub kv: u64,
    /// Pending timers (30 days ahead: none fires during the run).
    pub timers: u64,
    /// Seconds the whole load took.
    pub load_s: f64,
    /// Seconds the messages took.
    pub messages_s: f64,
    /// Seconds the KV keys took.
    pub kv_s: f64,
    /// Seconds the timers took.
    pub timers_s: f64,
}

/// One run's figures; `--json` prints it as one object.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// `push`, `ack-push`, `seed-step`, `pop` or `pop-ack`.
    pub shape: String,
    /// `sdk` or `raw`.
    pub mode: String,
    /// `embedded` (a file-backed broker in a temporary directory), `url`, `noop` (the
    /// in-process no-op server) or `noop-url`.
    pub target: String,
    /// The base URL driven.
    pub url: String,
    /// Concurrent workers (one request in flight each).
    pub concurrency: usize,
    /// Input partitions.
    pub partitions: usize,
    /// Most messages per pop (`pop` and `pop-ack`; 1 for the others).
    pub batch: u32,
    /// Consumer groups of `pop` and `pop-ack` (0: queue mode).
    pub groups: usize,
    /// The measured window, seconds.
    pub duration_s: f64,
    /// The untimed warm-up before it, seconds.
    pub warmup_s: f64,
    /// Successful operations that ended inside the window.
    pub ops: u64,
    /// Successful operations that ended after the deadline (not counted).
    pub late_ops: u64,
    /// `ops` per second of the window.
    pub throughput: f64,
    /// Messages popped by the operations counted in `ops` (one per operation for
    /// `ack-push` and `seed-step`, up to `batch` for `pop` and `pop-ack`, none for
    /// `push`).
    pub messages: u64,
    /// `messages` per second of the window.
    pub messages_per_s: f64,
    /// Whole-operation latency (pop + transaction for `ack-push` and `seed-step`, pop +
    /// ack for `pop-ack`).
    pub latency_ms: Latency,
    /// The write call alone (the transaction, the push, the ack of `pop-ack`; for `pop`
    /// the pop itself).
    pub commit_latency_ms: Latency,
    /// Failed calls.
    pub errors: u64,
    /// Failed calls by kind.
    pub error_kinds: BTreeMap<String, u64>,
    /// A few distinct error texts.
    pub error_samples: Vec<String>,
    /// Rolled-back verdicts (wrote nothing).
    pub rollbacks: u64,
    /// Rolled-back verdicts by reason.
    pub rollback_reasons: BTreeMap<String, u64>,
    /// Pops that found nothing within their wait (`pop` and `pop-ack` do not wait):
    /// not errors, not counted in `ops`.
    pub empty_pops: u64,
    /// Messages pre-filled into the input queue (untimed; with `groups`, every group
    /// reads all of them).
    pub prefilled: u64,
    /// Seconds the pre-fill took (untimed, but part of the run's wall time).
    pub prefill_s: f64,
    /// The input ran out (for the group that read most) by the window's end: the
    /// throughput is then a lower bound.
    pub input_exhausted: bool,
    /// The background data stored before the run, if any.
    pub stored: Option<Stored>,
    /// The group commit, for the embedded broker.
    pub group_commit: Option<GroupCommit>,
    /// The process's peak resident memory in MiB (Linux `VmHWM`; the embedded broker
    /// and the load generator together), when known.
    pub peak_rss_mib: Option<f64>,
    /// CPU time this process spent per successful operation over the window, in µs
    /// (user and system, all threads; Linux). Against the embedded broker it holds the
    /// broker and the load generator, and it is steadier than throughput on a shared
    /// host: a change's effect shows here when the machine's noise hides it in ops/s.
    pub cpu_us_per_op: Option<f64>,
    /// CPU time the embedded broker's writer thread spent per successful operation
    /// over the window, in µs (Linux; `None` by `--url` and against the no-op, which
    /// have no writer in this process). The writer is the one serial stage: with its
    /// sync's wait, this bounds the broker's rate whatever the cores do, so a change
    /// to the writer shows here before it shows in ops/s.
    pub writer_cpu_us_per_op: Option<f64>,
    /// The process's allocations per successful operation over the window, in a
    /// `count-allocs` build (`None` otherwise).
    pub allocs: Option<Allocs>,
}

/// Allocations per operation over the measured window (the whole process: against the
/// embedded broker, the broker's too; by `--url`, the client's alone).
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Allocs {
    /// Allocations and reallocations per operation.
    pub per_op: f64,
    /// Bytes they asked for, per operation.
    pub bytes_per_op: f64,
}

/// The CPU time (user + system, every thread) this process has used, in seconds, from
/// `/proc/self/stat` (Linux; `None` elsewhere).
pub fn process_cpu_secs() -> Option<f64> {
    stat_cpu_secs(&std::fs::read_to_string("/proc/self/stat").ok()?)
}

/// The CPU time (user + system) of this process's threads named `name`, in seconds,
/// from `/proc/self/task/*/stat` (Linux; `None` elsewhere or when no thread has it).
pub fn thread_cpu_secs(name: &str) -> Option<f64> {
    let mut total = None;
    for task in std::fs::read_dir("/proc/self/task").ok()?.flatten() {
        let dir = task.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        if comm.trim_end() != name {
            continue;
        }
        if let Some(secs) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| stat_cpu_secs(&s))
        {
            *total.get_or_insert(0.0) += secs;
        }
    }
    total
}

/// utime + stime of one `stat` line of `/proc`, in seconds.
pub(crate) fn stat_cpu_secs(stat: &str) -> Option<f64> {
    // The command name (field 2) may hold spaces; the fields after it are plain.
    let rest = &stat[stat.rfind(')')? + 2..];
    let mut fields = rest.split_whitespace();
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after `)`.
    let utime: f64 = fields.nth(11)?.parse().ok()?;
    let stime: f64 = fields.next()?.parse().ok()?;
    // USER_HZ is 100 on every Linux the kernel's ABI promises it to user space.
    Some((utime + stime) / 100.0)
}

/// The process's peak resident set size in MiB, from `/proc/self/status` (Linux).
pub fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

impl Report {
    /// The human-readable report.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let lat = |l: &Latency| {
            format!(
                "p50 {:.2} ms  p99 {:.2} ms  p999 {:.2} ms  max {:.2} ms  mean {:.2} ms",
                l.p50, l.p99, l.p999, l.max, l.mean
            )
        };
        let pop_options = if self.shape == "pop" || self.shape == "pop-ack" {
            format!(
                " | batch {} | {}",
                self.batch,
                match self.groups {
                    0 => "queue mode".to_string(),
                    g => format!("{g} consumer groups"),
                }
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            s,
            "queen load: {} via {} | {} workers | {} partitions{pop_options} | {:.1} s measured after {:.1} s warm-up",
            self.shape,
            self.mode,
            self.concurrency,
            self.partitions,
            self.duration_s,
            self.warmup_s
        );
        let _ = writeln!(s, "target:       {} {}", self.target, self.url);
        let _ = writeln!(
            s,
            "throughput:   {:.1} ops/s ({} ops; {} ended after the deadline, not counted)",
            self.throughput, self.ops, self.late_ops
        );
        if self.messages > 0 {
            let _ = writeln!(
                s,
                "messages:     {:.1} msgs/s popped ({} messages, {:.2} per operation)",
                self.messages_per_s,
                self.messages,
                self.messages as f64 / self.ops.max(1) as f64
            );
        }
        let _ = writeln!(s, "latency:      {}", lat(&self.latency_ms));
        let _ = writeln!(s, "write call:   {}", lat(&self.commit_latency_ms));
        let kinds = |m: &BTreeMap<String, u64>| {
            if m.is_empty() {
                String::new()
            } else {
                let v: Vec<String> = m.iter().map(|(k, n)| format!("{k}: {n}")).collect();
                format!(" ({})", v.join(", "))
            }
        };
        let _ = writeln!(
            s,
            "errors:       {}{}   rollbacks: {}{}   empty pops: {}",
            self.errors,
            kinds(&self.error_kinds),
            self.rollbacks,
            kinds(&self.rollback_reasons),
            self.empty_pops
        );
        for e in &self.error_samples {
            let _ = writeln!(s, "  error:      {e}");
        }
        if self.prefilled > 0 {
            let _ = writeln!(
                s,
                "input:        {} messages pre-filled in {:.1} s{}",
                self.prefilled,
                self.prefill_s,
                if self.input_exhausted {
                    "; RAN OUT during the window (throughput is a lower bound; raise --prefill)"
                } else {
                    ""
                }
            );
        }
        if let Some(st) = &self.stored {
            let _ = writeln!(
                s,
                "stored:       {} messages over {} partitions, {} KV keys, {} timers, loaded in {:.1} s (untimed)",
                st.messages, st.partitions, st.kv, st.timers, st.load_s
            );
        }
        if let Some(g) = &self.group_commit {
            let _ = writeln!(
                s,
                "group commit: {:.1} batches/s ({:.1} durable commits/s), avg batch {:.2} commands, {:.1} commands/s ({} commits, {} read-only batches, {} commands)",
                g.batches_per_s,
                g.commits_per_s,
                g.average_batch,
                g.commands_per_s,
                g.commits,
                g.read_only_batches,
                g.commands
            );
        }
        if let Some(us) = self.cpu_us_per_op {
            let _ = writeln!(
                s,
                "cpu:          {us:.0} µs of process CPU per operation (user + system, all threads)"
            );
        }
        if let Some(us) = self.writer_cpu_us_per_op {
            let _ = writeln!(
                s,
                "writer:       {us:.1} µs of the writer thread's CPU per operation (the serial stage)"
            );
        }
        if let Some(a) = self.allocs {
            let _ = writeln!(
                s,
                "allocs:       {:.1} allocations per operation, {:.0} bytes (whole process)",
                a.per_op, a.bytes_per_op
            );
        }
        if let Some(mib) = self.peak_rss_mib {
            let _ = writeln!(s, "memory:       peak RSS {mib:.0} MiB (whole process)");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn a_thread_is_found_by_its_name_and_its_cpu_counted() {
        assert_eq!(thread_cpu_secs("no-such-thread"), None);
        let spinner = std::thread::Builder::new()
            .name("load-spinner".into())
            .spawn(|| {
                // Spin until /proc shows at least two ticks of this thread's CPU.
                let until = Instant::now() + Duration::from_secs(10);
                let mut x = 0u64;
                while Instant::now() < until {
                    x = x.wrapping_add(std::hint::black_box(1));
                    if thread_cpu_secs("load-spinner").is_some_and(|s| s >= 0.02) {
                        return Some(x);
                    }
                }
                None
            })
            .unwrap();
        assert!(
            spinner.join().unwrap().is_some(),
            "the spinning thread's CPU never showed"
        );
        let process = process_cpu_secs().expect("this process's CPU");
        assert!(
            process >= 0.02,
            "the process holds its threads' CPU: {process}"
        );
    }
}
