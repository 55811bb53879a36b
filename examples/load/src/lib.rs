//! # queen-load
//!
//! The load generator behind the `load` binary: throughput, latency and the group commit
//! of `push`, `ack-push` and `seed-step`, through the SDK or bare HTTP, against an
//! embedded durable broker, a broker at `--url`, or a no-op baseline server.
//!
//! ```sh
//! cargo run --release -p queen-load -- --shape ack-push --concurrency 64 --duration 5
//! cargo run --release -p queen-load -- --shape seed-step --mode raw --json
//! cargo run --release -p queen-load -- --shape ack-push --against-noop --mode raw
//! cargo run --release -p queen-load -- --serve-noop --listen 127.0.0.1:7000
//! bash examples/load/run-all.sh     # every shape at 1, 64 and 256 workers, with ratios
//! ```
//!
//! `--concurrency` workers each run one operation after another until the deadline:
//!
//! | shape | one operation |
//! |---|---|
//! | `push` | one push call of one item with a deterministic `transactionId` |
//! | `ack-push` | a pop of one message (batch 1), then one transaction: its ack (fenced by the lease) and one push |
//! | `seed-step` | a pop, then the seed's whole step (`spec/transaction.md`, Example): ack, receipt push, KV `put`, `once` marker, timer |
//!
//! The popping shapes read an input queue pre-filled (untimed) round-robin over
//! `--partitions` partitions, so that concurrent workers do not queue behind one
//! partition's lease; the input is topped up between the warm-up and the measured window
//! from the warm-up's rate. A pop long-polls (at most 1 s, never past the deadline).
//!
//! `--mode sdk` drives `queen-sdk` (without retries, so that every failure counts);
//! `--mode raw` sends the same bodies from templates with a bare reqwest client with the
//! SDK's pool settings, so `sdk / raw` is the SDK's own cost. Without `--url` the target
//! is an embedded broker on a file in a temporary directory (durable, as users run it),
//! and the report adds its group commit over the window. `--against-noop` drives the
//! no-op server instead (in-process, or the one at `--url` started with `--serve-noop`):
//! each operation is then the shape's write call alone (no pop), on a synthetic message,
//! or with `--noop-pop` a pop answered with one canned message and then the write call.
//!
//! Throughput counts the operations that succeeded and ended inside the window; errors
//! and rollbacks are counted wherever they end. Every loop stops by itself at the
//! deadline (an operation in flight is let finish, bounded, so no lease is left behind).
//! Targets must be on the loopback interface unless `--allow-remote` is given.

#![warn(missing_docs)]

mod driver;
mod noop;
mod report;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::{Context as _, bail, ensure};
use clap::{Parser, ValueEnum};
use queen_mock_broker::{MockBroker, StatsSnapshot};
use queen_sdk::RetryPolicy;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::Instant;

pub use report::{GroupCommit, Latency, Report};

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
    /// Pop one message, then a transaction: its ack (leased) and one push.
    AckPush,
    /// Pop one message, then the seed's step: ack, push, KV put, `once`, timer.
    SeedStep,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Push => "push",
            Shape::AckPush => "ack-push",
            Shape::SeedStep => "seed-step",
        }
    }
}

/// How requests are made.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Through `queen-sdk`.
    Sdk,
    /// Prebuilt JSON bodies over a bare reqwest client.
    Raw,
}

/// The command line of `load`.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "load",
    about = "Load generator for Queen: throughput, latency and the group commit of push, ack-push and seed-step"
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
    /// Through the SDK or with bare HTTP.
    #[arg(long, value_enum, default_value_t = Mode::Sdk)]
    pub mode: Mode,
    /// Partitions the input is spread over.
    #[arg(long, default_value_t = 64)]
    pub partitions: usize,
    /// Seconds run before the measured window, not counted.
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    /// Input messages to pre-fill (default: sized from a guess, then topped up from
    /// the warm-up's rate).
    #[arg(long)]
    pub prefill: Option<u64>,
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
                    .start()
                    .await
                    .context("starting the embedded broker")?;
                let url = broker.url();
                Ok((Target::Embedded { broker, _dir: dir }, url, "embedded"))
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
    let pops = !args.against_noop && args.shape != Shape::Push;
    Ok(Report {
        shape: args.shape.name().into(),
        mode: match args.mode {
            Mode::Sdk => "sdk".into(),
            Mode::Raw => "raw".into(),
        },
        target: target_kind.into(),
        url,
        concurrency: args.concurrency,
        partitions: args.partitions,
        duration_s: duration,
        warmup_s: args.warmup,
        ops: tally.ops,
        late_ops: tally.late,
        throughput: tally.ops as f64 / duration,
        latency_ms,
        commit_latency_ms,
        errors: tally.errors.values().sum(),
        error_kinds: tally.errors,
        error_samples: tally.samples,
        rollbacks: tally.rollbacks.values().sum(),
        rollback_reasons: tally.rollbacks,
        empty_pops: tally.empty_pops,
        prefilled: d.prefilled,
        input_exhausted: pops && d.popped_total >= d.prefilled,
        group_commit: d.group_commit,
        peak_rss_mib: report::peak_rss_mib(),
        cpu_us_per_op: d.cpu_us_per_op,
    })
}

/// The run itself: pre-fill, warm-up, top-up, the measured window; answers what it
/// measured.
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
    });
    let driver = Arc::new(Driver::new(
        args.mode == Mode::Raw,
        url,
        args.token.as_deref(),
    )?);
    let pops = !args.against_noop && args.shape != Shape::Push;
    // The pre-fill's own client retries: it is set-up, not load.
    let filler = driver::sdk_client(url, args.token.as_deref(), RetryPolicy::default())?;
    let c = args.concurrency as u64;
    // A generous first guess of the rate; the warm-up measures the real one.
    let guess = (600 * c).min(6000) as f64;
    let mut prefilled = 0u64;
    if pops {
        let first = match args.prefill {
            Some(n) => n,
            None => {
                let secs = if args.warmup > 0.0 {
                    args.warmup
                } else {
                    duration
                };
                (guess * secs * 1.5) as u64 + 4 * c + 500
            }
        };
        fill(&filler, &plan, &mut prefilled, first).await?;
    }

    let mut popped_total = 0u64;
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
        let warm = collect(workers).await?;
        popped_total += warm.popped;
        if pops && args.prefill.is_none() {
            let rate = warm.popped as f64 / args.warmup;
            let need = (rate * duration * 1.5) as u64 + 4 * c + 500;
            let left = prefilled.saturating_sub(popped_total);
            if need > left {
                fill(&filler, &plan, &mut prefilled, need - left).await?;
            }
        }
    }

    let before = target.stats();
    let cpu_before = report::process_cpu_secs();
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
    let tally = collect(workers).await?;
    let cpu_us_per_op = match (cpu_before, cpu_after) {
        (Some(b), Some(a)) if tally.ops > 0 => Some((a - b) * 1e6 / tally.ops as f64),
        _ => None,
    };
    popped_total += tally.popped;
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
        prefilled,
        popped_total,
        group_commit,
        cpu_us_per_op,
    })
}

/// What [`drive`] measured.
struct Drive {
    /// The window's operations, errors and rollbacks.
    tally: Tally,
    /// The window's latencies.
    latencies: Latencies,
    /// Input messages pre-filled.
    prefilled: u64,
    /// Input messages popped over warm-up and window.
    popped_total: u64,
    /// The group commit over the window (embedded broker).
    group_commit: Option<GroupCommit>,
    /// Process CPU per operation over the window.
    cpu_us_per_op: Option<f64>,
}

/// Pre-fills `count` more input events.
async fn fill(
    client: &queen_sdk::Client,
    plan: &Plan,
    prefilled: &mut u64,
    count: u64,
) -> anyhow::Result<()> {
    let t = std::time::Instant::now();
    driver::prefill(
        client,
        &plan.names.input,
        plan.partitions,
        *prefilled,
        count,
    )
    .await?;
    *prefilled += count;
    eprintln!(
        "load: pre-filled {count} input messages over {} partitions in {:.2} s (untimed)",
        plan.partitions,
        t.elapsed().as_secs_f64()
    );
    Ok(())
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

async fn collect(workers: Vec<JoinHandle<Tally>>) -> anyhow::Result<Tally> {
    let mut all = Tally::default();
    for w in workers {
        match w.await {
            Ok(t) => all.merge(t),
            Err(e) => bail!("a worker failed: {e}"),
        }
    }
    Ok(all)
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
                popped: false,
                commit: None,
            },
        };
        let end = Instant::now();
        tally.record(step, end - start, end <= deadline, &latencies);
    }
    tally
}
