//! How long an in-process broker takes to start and shut down: the fixed cost every
//! test that builds its own `MockBroker` pays. The target is start + shutdown under
//! 5 ms, so a test suite can give every test a fresh broker.
//!
//! Three benchmarks, each one `start` (open the storage, bind a free loopback port,
//! start the writer thread, the timer scheduler and the HTTP server) followed by
//! `shutdown().await` (stop the server, drain the writer, close the database). Every
//! broker is built as tests build it: default options, test harness on.
//!
//! - `lifecycle/memory`: `MockBroker::start_in_memory()`.
//! - `lifecycle/file`: `MockBroker::builder().data_file(path).start()` on a new file in
//!   a fresh temporary directory each time (creating and removing the directory is not
//!   timed).
//! - `lifecycle/file_reopen`: the same on one existing file that already holds 1,000
//!   messages (pushed once, untimed, across 10 partitions), reopened each time: start
//!   cost must not grow badly with what the file holds.
//!
//! Criterion reports its own estimate per benchmark. Since a timing test must never fail
//! a build, the 5 ms guard is a report, not an assertion: after the group, one line per
//! benchmark goes to stderr with the median (and min, max) of 50 plain timed
//! start + shutdown runs and whether that median is under 5 ms.
//!
//! Run with `cargo bench -p queen-mock-broker --bench lifecycle` (well under a minute).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

// Only the runtime and criterion's settings are needed here.
#[allow(dead_code)]
mod common;

use common::{config, runtime};
use criterion::{Criterion, criterion_group, criterion_main};
use queen_mock_broker::MockBroker;
use queen_mock_broker::engine::DEFAULT_TENANT;
use queen_mock_broker::engine::push::NewMessage;
use serde_json::value::RawValue;
use tempfile::TempDir;

/// The issue's target for one start + shutdown.
const TARGET: Duration = Duration::from_millis(5);

/// Plain timed runs per benchmark for the reported median.
const RUNS: usize = 50;

/// Messages the reopened file holds.
const STORED: usize = 1_000;

/// Partitions the stored messages are spread over.
const STORED_PARTITIONS: usize = 10;

/// Queue the stored messages are in.
const STORED_QUEUE: &str = "bench-reopen";

/// Messages per push command while filling the file.
const FILL_CHUNK: usize = 100;

/// The three start + shutdown shapes measured.
#[derive(Clone, Copy)]
enum Shape {
    Memory,
    File,
    FileReopen,
}

impl Shape {
    const ALL: [Shape; 3] = [Shape::Memory, Shape::File, Shape::FileReopen];

    fn name(self) -> &'static str {
        match self {
            Shape::Memory => "memory",
            Shape::File => "file",
            Shape::FileReopen => "file_reopen",
        }
    }
}

/// A file that already holds [`STORED`] messages, in a temporary directory.
struct Filled {
    path: PathBuf,
    _dir: TempDir,
}

impl Filled {
    /// Pushes [`STORED`] messages into a new file, shuts that broker down, then reopens
    /// the file once to check they are all there.
    async fn new() -> Filled {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("filled.redb");
        let broker = start_file(&path).await;
        let mut batch = Vec::with_capacity(FILL_CHUNK);
        for n in 0..STORED {
            batch.push(message(n));
            if batch.len() == FILL_CHUNK || n + 1 == STORED {
                broker
                    .engine()
                    .push(DEFAULT_TENANT, std::mem::take(&mut batch))
                    .await
                    .expect("fill the file");
            }
        }
        broker.shutdown().await;

        let again = start_file(&path).await;
        let held: usize = (0..STORED_PARTITIONS)
            .map(|p| {
                again
                    .inspect()
                    .messages(STORED_QUEUE, &format!("p{p}"))
                    .expect("inspect the reopened file")
                    .len()
            })
            .sum();
        assert_eq!(held, STORED, "the reopened file holds every message");
        again.shutdown().await;
        Filled { path, _dir: dir }
    }
}

/// Stored message `n`: small JSON payload, unique `transactionId`.
fn message(n: usize) -> NewMessage {
    NewMessage {
        queue: STORED_QUEUE.to_string(),
        partition: format!("p{}", n % STORED_PARTITIONS),
        payload: RawValue::from_string(format!(r#"{{"orderId":{n},"amount":42.5}}"#))
            .expect("valid JSON"),
        transaction_id: Some(format!("stored-{n}")),
        trace_id: None,
        producer_sub: None,
        message_id: None,
    }
}

async fn start_file(path: &Path) -> MockBroker {
    MockBroker::builder()
        .data_file(path)
        .start()
        .await
        .expect("start a file-backed broker")
}

/// One timed start + shutdown of `shape`; only the broker's own work is timed.
async fn once(shape: Shape, filled: &Filled) -> Duration {
    match shape {
        Shape::Memory => {
            let start = Instant::now();
            let broker = MockBroker::start_in_memory()
                .await
                .expect("start an in-memory broker");
            broker.shutdown().await;
            start.elapsed()
        }
        Shape::File => {
            let dir = tempfile::tempdir().expect("temporary directory");
            let path = dir.path().join("queen.redb");
            let start = Instant::now();
            start_file(&path).await.shutdown().await;
            let took = start.elapsed();
            drop(dir);
            took
        }
        Shape::FileReopen => {
            let start = Instant::now();
            start_file(&filled.path).await.shutdown().await;
            start.elapsed()
        }
    }
}

/// `iters` timed runs of `shape`, summed.
async fn run(shape: Shape, filled: &Filled, iters: u64) -> Duration {
    let mut total = Duration::ZERO;
    for _ in 0..iters {
        total += once(shape, filled).await;
    }
    total
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Median (and extremes) of [`RUNS`] plain runs of `shape`, as one stderr line.
async fn report(shape: Shape, filled: &Filled) {
    let mut took = Vec::with_capacity(RUNS);
    for _ in 0..RUNS {
        took.push(once(shape, filled).await);
    }
    took.sort();
    let median = (took[RUNS / 2 - 1] + took[RUNS / 2]) / 2;
    let verdict = if median < TARGET { "under" } else { "OVER" };
    eprintln!(
        "lifecycle/{}: median {:.2} ms of {RUNS} start+shutdown runs (min {:.2}, max {:.2}): \
         {verdict} the {} ms target",
        shape.name(),
        ms(median),
        ms(took[0]),
        ms(took[RUNS - 1]),
        TARGET.as_millis(),
    );
}

fn bench_lifecycle(c: &mut Criterion) {
    let rt = runtime();
    let filled = rt.block_on(Filled::new());
    let mut group = c.benchmark_group("lifecycle");
    for shape in Shape::ALL {
        group.bench_function(shape.name(), |b| {
            b.iter_custom(|iters| rt.block_on(run(shape, &filled, iters)))
        });
    }
    group.finish();
    for shape in Shape::ALL {
        rt.block_on(report(shape, &filled));
    }
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_lifecycle
}
criterion_main!(benches);
