//! Engine throughput through the group-commit writer, without HTTP, on a file-backed
//! (durable) redb database.
//!
//! Two workloads, each at 1 and at 64 concurrent callers:
//!
//! - `push`: every operation pushes one message (small JSON payload, unique
//!   `transactionId`) in its own command.
//! - `pop+ack`: a queue is pre-filled across 64 partitions (untimed), then every
//!   operation pops one message from the queue wildcard as the competing-consumers group
//!   and acks it `completed` under its lease.
//!
//! One criterion iteration is one operation by each caller, so throughput is reported
//! in operations (elements) per second. After each configuration one line goes to
//! stderr with the group commit's figures over every timed section of that
//! configuration (warm-up included): durable commits per second of measured wall time
//! and the average batch (commands per batch, every batch counted).
//!
//! Run with `cargo bench -p queen-mock-broker --bench engine`.

use std::time::{Duration, Instant};

mod common;

use common::{Bed, CALLERS, PARTITIONS, PREFILL_CHUNK, config, next_id, runtime};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use queen_mock_broker::engine::ack::Ack;
use queen_mock_broker::engine::consumers::StartAt;
use queen_mock_broker::engine::pop::{PopRequest, Target};
use queen_mock_broker::engine::push::NewMessage;
use queen_mock_broker::engine::{DEFAULT_TENANT, QUEUE_MODE};
use queen_mock_broker::store::records::AckMark;
use queen_mock_broker::{Engine, StatsSnapshot};
use serde_json::value::RawValue;

/// Group-commit counters summed over the timed sections of one configuration.
#[derive(Default)]
struct Tally {
    stats: StatsSnapshot,
    wall: Duration,
    ops: u64,
    empty_pops: u64,
}

impl Tally {
    fn add(&mut self, before: StatsSnapshot, after: StatsSnapshot, wall: Duration, ops: u64) {
        self.stats.commits += after.commits - before.commits;
        self.stats.commands += after.commands - before.commands;
        self.stats.read_only_batches += after.read_only_batches - before.read_only_batches;
        self.wall += wall;
        self.ops += ops;
    }

    fn report(&self, what: &str, callers: usize) {
        let secs = self.wall.as_secs_f64().max(f64::EPSILON);
        let mut line = format!(
            "group-commit {what} c={callers}: {:.0} commits/s, avg batch {:.1} commands \
             ({} commits, {} read-only batches, {} commands, {} ops in {:.2} s timed",
            self.stats.commits as f64 / secs,
            self.stats.average_batch(),
            self.stats.commits,
            self.stats.read_only_batches,
            self.stats.commands,
            self.ops,
            secs,
        );
        if what == "pop+ack" {
            line.push_str(&format!(", {} empty pops retried", self.empty_pops));
        }
        line.push(')');
        eprintln!("{line}");
    }
}

fn message(queue: &str, partition: &str) -> NewMessage {
    let id = next_id();
    NewMessage {
        queue: queue.to_string(),
        partition: partition.to_string(),
        payload: RawValue::from_string(format!(r#"{{"orderId":{id},"amount":42.5}}"#))
            .expect("valid JSON"),
        transaction_id: Some(format!("bench-{id}")),
        trace_id: None,
        producer_sub: None,
        message_id: None,
    }
}

/// `callers` tasks each push `iters` messages, one per command; returns the wall time.
async fn push_run(engine: &Engine, callers: usize, iters: u64) -> Duration {
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|i| {
            let engine = engine.clone();
            let partition = format!("p{i}");
            tokio::spawn(async move {
                for _ in 0..iters {
                    let out = engine
                        .push(DEFAULT_TENANT, vec![message("bench-push", &partition)])
                        .await
                        .expect("push");
                    assert!(!out[0].1.duplicate, "unique ids are never duplicates");
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.expect("push task");
    }
    start.elapsed()
}

fn bench_push(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("push");
    for callers in CALLERS {
        let bed = Bed::new();
        let engine = bed.engine.clone();
        let mut tally = Tally::default();
        group.throughput(Throughput::Elements(callers as u64));
        group.bench_function(BenchmarkId::new("callers", callers), |b| {
            b.iter_custom(|iters| {
                let before = engine.stats();
                let wall = rt.block_on(push_run(&engine, callers, iters));
                tally.add(before, engine.stats(), wall, iters * callers as u64);
                wall
            })
        });
        tally.report("push", callers);
        drop(engine);
        bed.close();
    }
    group.finish();
}

/// Fills `queue` with `total` messages spread round-robin over [`PARTITIONS`].
async fn prefill(engine: &Engine, queue: &str, total: u64) {
    let mut batch = Vec::with_capacity(PREFILL_CHUNK);
    for n in 0..total {
        batch.push(message(queue, &format!("p{}", n as usize % PARTITIONS)));
        if batch.len() == PREFILL_CHUNK || n + 1 == total {
            engine
                .push(DEFAULT_TENANT, std::mem::take(&mut batch))
                .await
                .expect("prefill");
        }
    }
}

/// `callers` tasks each pop one message and ack it, `iters` times; returns the wall
/// time and how many pops found nothing (every partition with work was leased).
async fn pop_ack_run(engine: &Engine, queue: &str, callers: usize, iters: u64) -> (Duration, u64) {
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let engine = engine.clone();
            let req = PopRequest {
                target: Target::Queue(queue.to_string()),
                batch: 1,
                group: QUEUE_MODE.into(),
                start: StartAt::All,
                auto_ack: false,
                lease_seconds: None,
                partitions: 1,
            };
            tokio::spawn(async move {
                let mut empty = 0u64;
                let mut done = 0u64;
                while done < iters {
                    let popped = engine
                        .pop(DEFAULT_TENANT, req.clone(), None)
                        .await
                        .expect("pop")
                        .outcome;
                    let Some(m) = popped.messages.first() else {
                        // The remaining messages sit in partitions leased by others.
                        empty += 1;
                        tokio::task::yield_now().await;
                        continue;
                    };
                    let acked = engine
                        .ack(
                            DEFAULT_TENANT,
                            vec![Ack {
                                transaction_id: m.message.txn.clone(),
                                partition_id: m.partition_id.to_string(),
                                status: AckMark::Completed,
                                group: QUEUE_MODE.into(),
                                lease_id: Some(popped.lease_id.clone()),
                                error: None,
                            }],
                        )
                        .await
                        .expect("ack");
                    assert!(acked[0].success, "ack refused: {:?}", acked[0].error);
                    done += 1;
                }
                empty
            })
        })
        .collect();
    let mut empty = 0;
    for t in tasks {
        empty += t.await.expect("pop+ack task");
    }
    (start.elapsed(), empty)
}

fn bench_pop_ack(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("pop+ack");
    for callers in CALLERS {
        let bed = Bed::new();
        let engine = bed.engine.clone();
        let mut tally = Tally::default();
        group.throughput(Throughput::Elements(callers as u64));
        group.bench_function(BenchmarkId::new("callers", callers), |b| {
            b.iter_custom(|iters| {
                // A fresh queue holding exactly the messages this run consumes.
                let queue = format!("bench-popack-{}", next_id());
                let total = iters * callers as u64;
                rt.block_on(prefill(&engine, &queue, total));
                let before = engine.stats();
                let (wall, empty) = rt.block_on(pop_ack_run(&engine, &queue, callers, iters));
                tally.add(before, engine.stats(), wall, total);
                tally.empty_pops += empty;
                wall
            })
        });
        tally.report("pop+ack", callers);
        drop(engine);
        bed.close();
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_push, bench_pop_ack
}
criterion_main!(benches);
