//! # queen-load
//!
//! The load generator behind the `load` binary: throughput, latency and the group commit
//! of `push`, `push-kv`, `ack-push`, `seed-step`, `pop` and `pop-ack`, through the SDK or bare HTTP,
//! against an embedded durable broker, a broker at `--url`, or a no-op baseline server.
//!
//! ```sh
//! cargo run --release -p queen-load -- --shape ack-push --concurrency 64 --duration 5
//! cargo run --release -p queen-load -- --shape seed-step --mode raw --json
//! cargo run --release -p queen-load -- --shape ack-push --against-noop --mode raw
//! cargo run --release -p queen-load -- --serve-noop --listen 127.0.0.1:7000
//! cargo run --release -p queen-load -- --shape pop --partitions 100000 --prefill 200000
//! cargo run --release -p queen-load -- --shape ack-push --stored-messages 1000000 --stored-kv 100000
//! bash examples/load/run-all.sh          # push, ack-push, seed-step at 1, 64, 256 workers, with ratios
//! bash examples/load/partition-curve.sh  # pop and pop-ack over 64 to 100,000 partitions
//! bash examples/load/stored-data.sh      # push, ack-push, seed-step: empty vs lots of stored data
//! ```
//!
//! `--concurrency` workers each run one operation after another until the deadline:
//!
//! | shape | one operation |
//! |---|---|
//! | `push` | one push call of one item with a deterministic `transactionId` |
//! | `push-kv` | one transaction: a push of one item and one KV `put`, no pop |
//! | `ack-push` | a pop of one message (batch 1), then one transaction: its ack (fenced by the lease) and one push |
//! | `seed-step` | a pop, then the seed's whole step (`spec/transaction.md`, Example): ack, receipt push, KV `put`, `once` marker, timer |
//! | `pop` | one wildcard pop of up to `--batch` messages (default 1) with `autoAck`, not waiting |
//! | `pop-ack` | one wildcard pop of up to `--batch` messages under a lease, not waiting, then one batch ack (`POST /api/v1/ack/batch`, `completed`) of all of them |
//!
//! The popping shapes read an input queue pre-filled (untimed) round-robin over
//! `--partitions` partitions, so that concurrent workers do not queue behind one
//! partition's lease; the input is topped up between the warm-up and the measured window
//! from the warm-up's rate. A pop of `ack-push` and `seed-step` long-polls (at most 1 s,
//! never past the deadline); one of `pop` and `pop-ack` does not wait, and a pop that
//! finds nothing is counted as an empty pop, not an error. The messages the operations
//! popped are counted beside them (msgs/s). `--groups G` makes `pop` and `pop-ack` pop
//! as G consumer groups (worker i in `g{i % G}`, subscription mode `all`): each group
//! reads the whole input, so the pre-fill and its top-up are sized per group.
//!
//! `--stored-messages`, `--stored-kv` and `--stored-timers` first store background data
//! (untimed, in large calls, several in flight; the time is printed to stderr and kept
//! in the report): messages in a queue of their own over `--stored-partitions`, KV keys,
//! and timers 30 days ahead, so that a shape can be measured on an empty broker and on
//! one holding a lot.
//!
//! `--mode sdk` drives `queen-sdk` (without retries, so that every failure counts);
//! `--mode raw` sends the same bodies from templates with a bare reqwest client with the
//! SDK's pool settings, so `sdk / raw` is the SDK's own cost; `--mode hyper` sends them
//! over hyper-util's client directly, so `raw / hyper` is reqwest's own cost. Without `--url` the target
//! is an embedded broker on a file in a temporary directory (durable, and without the
//! test harness, as the released binary runs; `--harness` adds it), and the report adds
//! its group commit over the window. `--against-noop` drives the
//! no-op server instead (in-process, or the one at `--url` started with `--serve-noop`):
//! each operation is then the shape's write call alone (no pop), on a synthetic message,
//! or with `--noop-pop` a pop answered with one canned message and then the write call
//! (`pop` and `pop-ack` always send their pop: the no-op answers it, and the ack, as one
//! message and one verdict).
//!
//! Throughput counts the operations that succeeded and ended inside the window; errors
//! and rollbacks are counted wherever they end. Every loop stops by itself at the
//! deadline (an operation in flight is let finish, bounded, so no lease is left behind).
//! Targets must be on the loopback interface unless `--allow-remote` is given.
//!
//! `--soak MINUTES` runs the soak instead (`src/soak.rs`, and `soak.sh`): a fixed rate of
//! mixed operations for a long time, sampling the broker's RSS, file size, open files,
//! latency and errors each `--sample-secs` into a CSV and an SVG plot, and checking at
//! the end that no acknowledged push was lost.

#![warn(missing_docs)]

#[cfg(feature = "count-allocs")]
pub mod allocs;
mod driver;
mod fill;
mod noop;
mod plot;
mod report;
mod soak;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use clap::{Parser, ValueEnum};
use queen_mock_broker::{MockBroker, StatsSnapshot, WRITER_THREAD};
use queen_sdk::RetryPolicy;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use report::{Allocs, GroupCommit, Latency, Report, Stored};
pub use soak::Summary as SoakSummary;

use driver::{Driver, Names, Outcome, Plan, Step};
use report::{Latencies, Tally};

/// How long an operation may run past the deadline before it is abandoned and counted
/// as an error.
const GRACE: Duration = Duration::from_secs(15);

/// What one operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Shape {
    /// One push call of one item.
    Push,
    /// One transaction with one push and one KV `put`, no pop and no ack: the durable
    /// transaction's own cost against the no-op parsing the same body.
    PushKv,
    /// Pop one message, then a transaction: its ack (leased) and one push.
    AckPush,
    /// Pop one message, then the seed's step: ack, push, KV put, `once`, timer.
    SeedStep,
    /// Pop one message, then a transaction: its ack (leased) and one KV `incr`. Nothing
    /// the first commit leaves behind guards a resend of this step, so through the SDK
    /// it carries the SDK's step marker (`--no-step-marker` leaves it out: the marker's
    /// cost, measured against the same step without it).
    AckIncr,
    /// One wildcard pop of up to `--batch` messages with `autoAck`, not waiting.
    Pop,
    /// One wildcard pop of up to `--batch` messages under a lease, not waiting, then one
    /// batch ack (`completed`) of everything it delivered.
    PopAck,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Push => "push",
            Shape::PushKv => "push-kv",
            Shape::AckPush => "ack-push",
            Shape::SeedStep => "seed-step",
            Shape::AckIncr => "ack-incr",
            Shape::Pop => "pop",
            Shape::PopAck => "pop-ack",
        }
    }

    /// `pop` and `pop-ack`: the pop is the operation (there is no transaction), with
    /// `--batch` and `--groups`.
    pub(crate) fn pops_only(self) -> bool {
        matches!(self, Shape::Pop | Shape::PopAck)
    }

    /// `push` and `push-kv`: one write call, no pop, no input queue.
    pub(crate) fn writes_only(self) -> bool {
        matches!(self, Shape::Push | Shape::PushKv)
    }
}

/// How requests are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Through `queen-sdk`.
    Sdk,
    /// Prebuilt JSON bodies over a bare reqwest client.
    Raw,
    /// The same bodies over hyper-util's HTTP/1 client, without reqwest: `raw / hyper`
    /// is what reqwest itself costs a request.
    Hyper,
}

/// The command line of `load`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "load",
    about = "Load generator for Queen: throughput, latency and the group commit of push, ack-push, seed-step, pop and pop-ack"
)]
pub struct Args {
    /// The broker's base URL (loopback only). Without it, an embedded file-backed broker
    /// is started in a temporary directory.
    #[arg(long)]
    pub url: Option<String>,
    /// Concurrent workers, each with one request in flight.
    #[arg(long, short = 'c', default_value_t = 64)]
    pub concurrency: usize,
    /// Seconds measured, default 5 (with `--serve-noop`: seconds served, default 600, or
    /// until Ctrl-C).
    #[arg(long, short = 'd')]
    pub duration: Option<f64>,
    /// What one operation is.
    #[arg(long, value_enum, default_value_t = Shape::AckPush)]
    pub shape: Shape,
    /// Through the SDK, with bare reqwest, or with bare hyper-util.
    #[arg(long, value_enum, default_value_t = Mode::Sdk)]
    pub mode: Mode,
    /// Partitions the input is spread over.
    #[arg(long, default_value_t = 64)]
    pub partitions: usize,
    /// Seconds run before the measured window, not counted.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Input messages to pre-fill (default: sized from a guess, then topped up from
    /// the warm-up's rate). Given, it is all there is: no top-up. With `--groups`, every
    /// group reads the whole input, so this is per group.
    #[arg(long)]
    pub prefill: Option<u64>,
    /// Most messages per pop of `pop` and `pop-ack` (1 to 10000).
    #[arg(long, default_value_t = 1)]
    pub batch: u32,
    /// Consumer groups of `pop` and `pop-ack`: 0 pops in queue mode (the competing
    /// consumers); G > 0 makes worker i pop as group `g{i % G}` with subscription mode
    /// `all`, so that every group reads the whole input (the pre-fill and its top-up are
    /// then sized for the group that reads most).
    #[arg(long, default_value_t = 0)]
    pub groups: usize,
    /// Background messages stored before the run (untimed) in a queue of their own,
    /// `load-stored-<run>`, that nothing reads. Not with `--against-noop`.
    #[arg(long, default_value_t = 0)]
    pub stored_messages: u64,
    /// Partitions the stored messages are spread over, round-robin.
    #[arg(long, default_value_t = 10_000)]
    pub stored_partitions: usize,
    /// Background KV keys stored before the run (untimed), in the namespace
    /// `load-stored-<run>`, 256 puts per call, 30-day expiry.
    #[arg(long, default_value_t = 0)]
    pub stored_kv: u64,
    /// Background timers scheduled before the run (untimed), 30 days ahead so that none
    /// fires, 1,000 per transaction.
    #[arg(long, default_value_t = 0)]
    pub stored_timers: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// A bearer token for the broker.
    #[arg(long)]
    pub token: Option<String>,
    /// Drive the no-op server (in-process, or the one at `--url`) instead of a broker.
    #[arg(long)]
    pub against_noop: bool,
    /// With `--against-noop`: `ack-push` and `seed-step` also send their pop to the
    /// no-op server, which answers one canned message. An operation is then the same two
    /// HTTP exchanges as against a broker (pop, then the write), with no broker work
    /// behind either: the bound that HTTP and JSON alone put on these shapes.
    #[arg(long, requires = "against_noop")]
    pub noop_pop: bool,
    /// Run the no-op server and nothing else.
    #[arg(long)]
    pub serve_noop: bool,
    /// Where `--serve-noop` listens (port 0: a free one, printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    pub listen: SocketAddr,
    /// Allow a target or listen address that is not on the loopback interface.
    #[arg(long)]
    pub allow_remote: bool,
    /// Start the embedded broker with its test harness (fault injection and request
    /// log, on by default for a broker started in a test), to measure what it costs.
    /// Without it the embedded broker runs as the released binary does: without.
    #[arg(long)]
    pub harness: bool,
    /// `ack-incr` through the SDK: send the step without the SDK's step marker
    /// (`Resend::Never`), to measure what the marker costs.
    #[arg(long)]
    pub no_step_marker: bool,
    /// Soak mode (`src/soak.rs`): for this many minutes, a fixed `--rate` of mixed
    /// pushes, pops with acks, transactions (ack + push + KV put), KV reads and writes
    /// and timers through the SDK, on queues with completed retention, sampled every
    /// `--sample-secs` into `--out` (`soak.csv`, `soak.svg`, `summary.txt`,
    /// `summary.json`); fails if a call failed or an acknowledged push was lost.
    /// `--concurrency` bounds the operations in flight, `--partitions` the partitions.
    #[arg(long, value_name = "MINUTES", conflicts_with_all = ["duration", "against_noop", "serve_noop"])]
    pub soak: Option<f64>,
    /// `--soak`: operations a second, dispatched at a fixed rate whatever the answers'
    /// latency.
    #[arg(long, default_value_t = 300.0, requires = "soak")]
    pub rate: f64,
    /// `--soak`: seconds between samples (one CSV row each).
    #[arg(long, default_value_t = 60.0, requires = "soak")]
    pub sample_secs: f64,
    /// `--soak`: the queues' `completedRetentionSeconds`: consumed messages are deleted
    /// once this old (0: kept forever, so the file grows).
    #[arg(long, default_value_t = 300, requires = "soak")]
    pub retention_secs: u64,
    /// `--soak`: how far ahead timers are scheduled.
    #[arg(long, default_value_t = 5.0, requires = "soak")]
    pub timer_delay_secs: f64,
    /// `--soak` with `--url`: the broker's process id, whose RSS and open files are
    /// sampled from /proc (embedded: this process).
    #[arg(long, requires = "soak")]
    pub broker_pid: Option<u32>,
    /// `--soak` with `--url`: the broker's data file, whose size (and its `.wal`'s) is
    /// sampled (embedded: its own file).
    #[arg(long, requires = "soak")]
    pub data: Option<PathBuf>,
    /// `--soak`: the folder the CSV, the plot and the summary are written to.
    #[arg(long, default_value = "soak-out", requires = "soak")]
    pub out: PathBuf,
}

/// The default measured window, seconds.
const DEFAULT_DURATION: f64 = 5.0;

/// How long `--serve-noop` serves by default, seconds: it too stops by itself.
const DEFAULT_SERVE: f64 = 600.0;

impl Args {
    fn check(&self) -> anyhow::Result<()> {
        ensure!(
            (1..=10_000).contains(&self.concurrency),
            "--concurrency must be 1 to 10000"
        );
        ensure!(
            (1..=100_000).contains(&self.partitions),
            "--partitions must be 1 to 100000"
        );
        if let Some(d) = self.duration {
            ensure!(
                d > 0.0 && d <= 86_400.0,
                "--duration must be more than 0 and at most a day"
            );
        }
        ensure!(
            (0.0..=3600.0).contains(&self.warmup),
            "--warmup must be 0 to 3600"
        );
        ensure!(
            (1..=10_000).contains(&self.batch),
            "--batch must be 1 to 10000"
        );
        ensure!(
            self.batch == 1 || self.shape.pops_only(),
            "--batch is for --shape pop and pop-ack (the other shapes pop one message)"
        );
        ensure!(self.groups <= 1000, "--groups must be 0 to 1000");
        ensure!(
            self.groups == 0 || self.shape.pops_only(),
            "--groups is for --shape pop and pop-ack"
        );
        ensure!(
            self.groups <= self.concurrency,
            "--groups must not be more than --concurrency (a group without a worker reads nothing)"
        );
        ensure!(
            (1..=100_000).contains(&self.stored_partitions),
            "--stored-partitions must be 1 to 100000"
        );
        const MOST_STORED: u64 = 100_000_000;
        ensure!(
            self.stored_messages <= MOST_STORED
                && self.stored_kv <= MOST_STORED
                && self.stored_timers <= MOST_STORED,
            "--stored-messages, --stored-kv and --stored-timers must be at most {MOST_STORED}"
        );
        ensure!(
            !self.against_noop || !self.stores(),
            "--stored-messages, --stored-kv and --stored-timers need a broker, not --against-noop"
        );
        if !self.allow_remote {
            if self.serve_noop {
                ensure!(
                    self.listen.ip().is_loopback(),
                    "--listen {} is not a loopback address (add --allow-remote to insist)",
                    self.listen
                );
            }
            if let Some(u) = &self.url {
                ensure!(
                    is_loopback(u)?,
                    "--url {u} is not on the loopback interface (add --allow-remote to insist)"
                );
            }
        }
        Ok(())
    }
}

impl Args {
    /// Whether any background data is to be stored before the run.
    fn stores(&self) -> bool {
        self.stored_messages > 0 || self.stored_kv > 0 || self.stored_timers > 0
    }
}

fn is_loopback(url: &str) -> anyhow::Result<bool> {
    let u = reqwest::Url::parse(url).with_context(|| format!("--url {url} is not a URL"))?;
    let host = u.host_str().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    Ok(match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip.is_loopback(),
        Err(_) => host.eq_ignore_ascii_case("localhost"),
    })
}

/// Runs what `args` say and prints the report (or serves the no-op server).
pub async fn main(args: Args) -> anyhow::Result<()> {
    args.check()?;
    if args.serve_noop {
        return serve_noop(&args).await;
    }
    if let Some(minutes) = args.soak {
        return soak::main(&args, minutes).await;
    }
    let report = run(&args).await?;
    if args.json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print!("{}", report.text());
    }
    if report.errors > 0 {
        eprintln!("load: {} errors (see error_samples)", report.errors);
    }
    Ok(())
}

async fn serve_noop(args: &Args) -> anyhow::Result<()> {
    let (listener, addr) = noop::bind(args.listen).await?;
    println!("no-op server listening on http://{addr}");
    let limit = Duration::from_secs_f64(args.duration.unwrap_or(DEFAULT_SERVE));
    noop::serve(listener, async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = tokio::time::sleep(limit) => {}
        }
    })
    .await
}

/// What is being driven.
enum Target {
    Embedded {
        broker: MockBroker,
        _dir: tempfile::TempDir,
    },
    External,
    Noop {
        stop: oneshot::Sender<()>,
        server: JoinHandle<anyhow::Result<()>>,
    },
}

impl Target {
    async fn start(args: &Args) -> anyhow::Result<(Target, String, &'static str)> {
        match (&args.url, args.against_noop) {
            (Some(u), noop) => Ok((
                Target::External,
                u.trim_end_matches('/').to_string(),
                if noop { "noop-url" } else { "url" },
            )),
            (None, true) => {
                let (listener, addr) = noop::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
                let (stop, stopped) = oneshot::channel::<()>();
                let server = tokio::spawn(noop::serve(listener, async move {
                    let _ = stopped.await;
                }));
                Ok((
                    Target::Noop { stop, server },
                    format!("http://{addr}"),
                    "noop",
                ))
            }
            (None, false) => {
                let dir = tempfile::tempdir().context("a temporary directory for the broker")?;
                let broker = MockBroker::builder()
                    .data_file(dir.path().join("queen.redb"))
                    .harness(args.harness)
                    .start()
                    .await
                    .context("starting the embedded broker")?;
                let url = broker.url();
                let kind = if args.harness {
                    "embedded+harness"
                } else {
                    "embedded"
                };
                Ok((Target::Embedded { broker, _dir: dir }, url, kind))
            }
        }
    }

    fn stats(&self) -> Option<StatsSnapshot> {
        match self {
            Target::Embedded { broker, .. } => Some(broker.stats()),
            _ => None,
        }
    }

    async fn shutdown(self) {
        match self {
            Target::Embedded { broker, _dir } => broker.shutdown().await,
            Target::External => {}
            Target::Noop { stop, server } => {
                let _ = stop.send(());
                let _ = server.await;
            }
        }
    }
}

/// Runs the load and answers its report.
pub async fn run(args: &Args) -> anyhow::Result<Report> {
    let duration = args.duration.unwrap_or(DEFAULT_DURATION);
    let (target, url, target_kind) = Target::start(args).await?;
    let out = drive(args, duration, &url, &target).await;
    target.shutdown().await;
    let d = out?;
    let tally = d.tally;
    let (latency_ms, commit_latency_ms) = d.latencies.summary();
    let pops = !args.against_noop && !args.shape.writes_only();
    Ok(Report {
        shape: args.shape.name().into(),
        mode: match args.mode {
            Mode::Sdk => "sdk".into(),
            Mode::Raw => "raw".into(),
            Mode::Hyper => "hyper".into(),
        },
        target: target_kind.into(),
        url,
        concurrency: args.concurrency,
        partitions: args.partitions,
        batch: args.batch,
        groups: args.groups,
        duration_s: duration,
        warmup_s: args.warmup,
        ops: tally.ops,
        late_ops: tally.late,
        throughput: tally.ops as f64 / duration,
        messages: tally.messages,
        messages_per_s: tally.messages as f64 / duration,
        latency_ms,
        commit_latency_ms,
        errors: tally.errors.values().sum(),
        error_kinds: tally.errors,
        error_samples: tally.samples,
        rollbacks: tally.rollbacks.values().sum(),
        rollback_reasons: tally.rollbacks,
        empty_pops: tally.empty_pops,
        prefilled: d.prefilled,
        prefill_s: d.prefill_s,
        input_exhausted: pops && d.most_read >= d.prefilled,
        stored: d.stored,
        group_commit: d.group_commit,
        peak_rss_mib: report::peak_rss_mib(),
        cpu_us_per_op: d.cpu_us_per_op,
        writer_cpu_us_per_op: d.writer_cpu_us_per_op,
        allocs: d.allocs,
    })
}

/// The run itself: the stored data, the pre-fill, the warm-up, the top-up, the measured
/// window; answers what it measured.
async fn drive(args: &Args, duration: f64, url: &str, target: &Target) -> anyhow::Result<Drive> {
    let run_id = format!(
        "{:x}",
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis()
    );
    let plan = Arc::new(Plan {
        shape: args.shape,
        names: Names::new(&run_id),
        partitions: args.partitions,
        noop: args.against_noop,
        noop_pop: args.against_noop && args.noop_pop,
        batch: args.batch,
        groups: args.groups,
        no_step_marker: args.no_step_marker,
    });
    let driver = Arc::new(Driver::new(args.mode, url, args.token.as_deref())?);
    let pops = !args.against_noop && !args.shape.writes_only();
    // The set-up's own client retries: it is set-up, not load.
    let filler = driver::sdk_client(url, args.token.as_deref(), RetryPolicy::default())?;
    let stored = if args.stores() {
        Some(store(&filler, &plan.names, args).await?)
    } else {
        None
    };
    let c = args.concurrency as u64;
    // Messages one operation reads at most.
    let per_op = if args.shape.pops_only() {
        u64::from(args.batch)
    } else {
        1
    };
    // A generous first guess of the rate (per group), in messages; the warm-up measures
    // the real one.
    let guess = ((600 * c).min(6000) * per_op).min(60_000) as f64;
    let margin = 4 * c * per_op + 500;
    let mut input = Input::default();
    if pops {
        let first = match args.prefill {
            Some(n) => n,
            None => {
                let secs = if args.warmup > 0.0 {
                    args.warmup
                } else {
                    duration
                };
                (guess * secs * 1.5) as u64 + margin
            }
        };
        fill(&filler, &plan, &mut input, first).await?;
    }

    // Messages read by each group (one entry in queue mode): each group reads the whole
    // input, so the one that read most says how much of it is left.
    let mut read = vec![0u64; args.groups.max(1)];
    if args.warmup > 0.0 {
        let deadline = Instant::now() + Duration::from_secs_f64(args.warmup);
        let warm_latencies = Arc::new(Mutex::new(Latencies::new()));
        let workers = spawn(
            &driver,
            &plan,
            &warm_latencies,
            args.concurrency,
            0,
            deadline,
        );
        let (_, by_worker) = collect(workers).await?;
        add_reads(&mut read, &by_worker);
        if pops && args.prefill.is_none() {
            let most = most_read(&read);
            let mut rate = most as f64 / args.warmup;
            if most >= input.prefilled {
                // It ran out: the warm-up's rate is a lower bound.
                rate *= 2.0;
            }
            let need = (rate * duration * 1.5) as u64 + margin;
            let left = input.prefilled.saturating_sub(most);
            if need > left {
                fill(&filler, &plan, &mut input, need - left).await?;
            }
        }
    }

    let before = target.stats();
    let allocs_before = alloc_snapshot();
    let cpu_before = report::process_cpu_secs();
    let writer_before = report::thread_cpu_secs(WRITER_THREAD);
    let deadline = Instant::now() + Duration::from_secs_f64(duration);
    let latencies = Arc::new(Mutex::new(Latencies::new()));
    let workers = spawn(
        &driver,
        &plan,
        &latencies,
        args.concurrency,
        1 << 40,
        deadline,
    );
    tokio::time::sleep_until(deadline).await;
    let after = target.stats();
    let cpu_after = report::process_cpu_secs();
    let writer_after = report::thread_cpu_secs(WRITER_THREAD);
    let allocs_after = alloc_snapshot();
    let (tally, by_worker) = collect(workers).await?;
    add_reads(&mut read, &by_worker);
    let cpu_us_per_op = us_per_op(cpu_before, cpu_after, tally.ops);
    let writer_cpu_us_per_op = us_per_op(writer_before, writer_after, tally.ops);
    let allocs = match (allocs_before, allocs_after) {
        (Some((n0, b0)), Some((n1, b1))) if tally.ops > 0 => Some(Allocs {
            per_op: (n1 - n0) as f64 / tally.ops as f64,
            bytes_per_op: (b1 - b0) as f64 / tally.ops as f64,
        }),
        _ => None,
    };
    let group_commit = match (before, after) {
        (Some(b), Some(a)) => Some(GroupCommit::between(b, a, duration)),
        _ => None,
    };
    let latencies = match Arc::try_unwrap(latencies) {
        Ok(m) => m.into_inner().unwrap_or_else(|e| e.into_inner()),
        Err(_) => bail!("a worker outlived its phase"),
    };
    Ok(Drive {
        tally,
        latencies,
        prefilled: input.prefilled,
        prefill_s: input.secs,
        most_read: most_read(&read),
        stored,
        group_commit,
        cpu_us_per_op,
        writer_cpu_us_per_op,
        allocs,
    })
}

/// CPU seconds read before and after the window, as µs per operation (`None` when
/// either reading is missing or nothing completed).
fn us_per_op(before: Option<f64>, after: Option<f64>, ops: u64) -> Option<f64> {
    match (before, after) {
        (Some(b), Some(a)) if ops > 0 => Some((a - b) * 1e6 / ops as f64),
        _ => None,
    }
}

/// The process's allocations and bytes so far, in a `count-allocs` build.
fn alloc_snapshot() -> Option<(u64, u64)> {
    #[cfg(feature = "count-allocs")]
    return Some(allocs::snapshot());
    #[cfg(not(feature = "count-allocs"))]
    None
}

/// Adds each worker's reads to its group's (worker `w` is in group `w % groups`).
fn add_reads(read: &mut [u64], by_worker: &[u64]) {
    let groups = read.len();
    for (w, n) in by_worker.iter().enumerate() {
        read[w % groups] += n;
    }
}

/// The most messages one group has read.
fn most_read(read: &[u64]) -> u64 {
    read.iter().copied().max().unwrap_or(0)
}

/// What [`drive`] measured.
struct Drive {
    /// The window's operations, errors and rollbacks.
    tally: Tally,
    /// The window's latencies.
    latencies: Latencies,
    /// Input messages pre-filled.
    prefilled: u64,
    /// Seconds spent pre-filling (untimed).
    prefill_s: f64,
    /// The most input messages one group (the whole queue in queue mode) read over
    /// warm-up and window.
    most_read: u64,
    /// The background data stored before the run.
    stored: Option<Stored>,
    /// The group commit over the window (embedded broker).
    group_commit: Option<GroupCommit>,
    /// Process CPU per operation over the window.
    cpu_us_per_op: Option<f64>,
    /// The writer thread's CPU per operation over the window (embedded broker).
    writer_cpu_us_per_op: Option<f64>,
    /// Allocations per operation over the window (`count-allocs` builds).
    allocs: Option<Allocs>,
}

/// The input pre-filled so far.
#[derive(Default)]
struct Input {
    /// Messages.
    prefilled: u64,
    /// Seconds it took.
    secs: f64,
}

/// Pre-fills `count` more input events.
async fn fill(
    client: &queen_sdk::Client,
    plan: &Plan,
    input: &mut Input,
    count: u64,
) -> anyhow::Result<()> {
    let t = std::time::Instant::now();
    fill::push_events(
        client,
        &plan.names.input,
        plan.partitions,
        input.prefilled,
        count,
    )
    .await
    .context("pre-filling the input queue")?;
    input.prefilled += count;
    let secs = t.elapsed().as_secs_f64();
    input.secs += secs;
    eprintln!(
        "load: pre-filled {count} input messages over {} partitions in {secs:.2} s (untimed)",
        plan.partitions,
    );
    Ok(())
}

/// Stores the background data of `--stored-messages`, `--stored-kv` and
/// `--stored-timers` (untimed), one kind after the other.
async fn store(client: &queen_sdk::Client, names: &Names, args: &Args) -> anyhow::Result<Stored> {
    let all = std::time::Instant::now();
    let timed = |what: &str, n: u64, t: std::time::Instant| {
        let secs = t.elapsed().as_secs_f64();
        eprintln!(
            "load: stored {n} {what} in {secs:.2} s ({:.0}/s, untimed)",
            n as f64 / secs.max(1e-9)
        );
        secs
    };
    let mut s = Stored {
        messages: args.stored_messages,
        partitions: args.stored_partitions,
        kv: args.stored_kv,
        timers: args.stored_timers,
        ..Stored::default()
    };
    if s.messages > 0 {
        let t = std::time::Instant::now();
        fill::push_events(client, &names.stored, s.partitions, 0, s.messages)
            .await
            .context("storing --stored-messages")?;
        s.messages_s = timed(
            &format!("messages over {} partitions", s.partitions),
            s.messages,
            t,
        );
    }
    if s.kv > 0 {
        let t = std::time::Instant::now();
        fill::put_keys(client, &names.stored_ns, s.kv)
            .await
            .context("storing --stored-kv")?;
        s.kv_s = timed("KV keys", s.kv, t);
    }
    if s.timers > 0 {
        let t = std::time::Instant::now();
        fill::schedule_timers(client, &names.stored_timers, s.timers)
            .await
            .context("storing --stored-timers")?;
        s.timers_s = timed("timers", s.timers, t);
    }
    s.load_s = all.elapsed().as_secs_f64();
    eprintln!("load: stored data loaded in {:.2} s (untimed)", s.load_s);
    Ok(s)
}

fn spawn(
    driver: &Arc<Driver>,
    plan: &Arc<Plan>,
    latencies: &Arc<Mutex<Latencies>>,
    concurrency: usize,
    seq_base: u64,
    deadline: Instant,
) -> Vec<JoinHandle<Tally>> {
    (0..concurrency)
        .map(|w| {
            let driver = driver.clone();
            let plan = plan.clone();
            let latencies = latencies.clone();
            tokio::spawn(worker(driver, plan, latencies, w, seq_base, deadline))
        })
        .collect()
}

/// Merges the workers' tallies; also answers the messages each worker popped.
async fn collect(workers: Vec<JoinHandle<Tally>>) -> anyhow::Result<(Tally, Vec<u64>)> {
    let mut all = Tally::default();
    let mut by_worker = Vec::with_capacity(workers.len());
    for w in workers {
        match w.await {
            Ok(t) => {
                by_worker.push(t.popped);
                all.merge(t);
            }
            Err(e) => bail!("a worker failed: {e}"),
        }
    }
    Ok((all, by_worker))
}

/// One worker: operations one after another until the deadline.
async fn worker(
    driver: Arc<Driver>,
    plan: Arc<Plan>,
    latencies: Arc<Mutex<Latencies>>,
    w: usize,
    seq_base: u64,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let mut seq = seq_base;
    loop {
        let start = Instant::now();
        if start >= deadline {
            break;
        }
        seq += 1;
        let op = driver.op(&plan, w, seq, deadline);
        let step = match tokio::time::timeout_at(deadline + GRACE, op).await {
            Ok(step) => step,
            Err(_) => Step {
                outcome: Outcome::Error(
                    "abandoned".into(),
                    format!("an operation was still running {GRACE:?} after the deadline"),
                ),
                popped: 0,
                commit: None,
            },
        };
        let end = Instant::now();
        tally.record(step, end - start, end <= deadline, &latencies);
    }
    tally
}
