//! Transaction throughput through the group-commit writer, without HTTP, on a
//! file-backed (durable) redb database.
//!
//! One operation is one worker step shaped like the seed example of the transaction
//! spec: a caller pops one message (batch 1) as the consumer group `billing` from a
//! queue pre-filled across 64 partitions (untimed), then commits one transaction that
//!
//! - acks that message under its lease (`leaseId`, `partitionId`, `consumerGroup`),
//! - pushes one receipt to `receipts` / `customer-{n}` with a deterministic
//!   `transactionId`,
//! - `put`s `orders` / `order-{n}` with a small JSON value (`ttlSeconds` 30 days),
//! - gates the step on `putIfAbsent` `paid` / `order-{n}-paid` (`required: true`),
//! - schedules a timer on `reminders` keyed `order-{n}` a day away.
//!
//! The body is built with `serde_json::json!`, parsed with `http::parse_transaction` and run with
//! `Engine::transaction`; every answer must say `success: true`. The pop and the
//! transaction are timed together as the step, at 1 and at 64 concurrent callers, so
//! the throughput criterion reports (elements per second) is steps per second. The
//! timer scheduler is not started (the timers are 24 h away anyway).
//!
//! After each configuration one line goes to stderr with the group commit's figures
//! over every timed section of that configuration (warm-up included): durable commits
//! per second of measured wall time and the average batch (commands per batch, every
//! batch counted), followed by the steps per second and how many writer commands were
//! pops and how many were transactions (pops and transactions share batches, so the
//! commits themselves cannot be told apart).
//!
//! Run with `cargo bench -p queen-mock-broker --bench transaction`.

use std::time::{Duration, Instant};

mod common;

use common::{Bed, CALLERS, PARTITIONS, PREFILL_CHUNK, config, next_id, runtime};
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use queen_mock_broker::engine::DEFAULT_TENANT;
use queen_mock_broker::engine::consumers::StartAt;
use queen_mock_broker::engine::pop::{PopRequest, Target};
use queen_mock_broker::engine::push::NewMessage;
use queen_mock_broker::http::parse_transaction;
use queen_mock_broker::{Engine, StatsSnapshot};
use serde_json::json;
use serde_json::value::RawValue;

/// The consumer group of the seed example.
const GROUP: &str = "billing";

/// The reminder timer's payload of the seed example (base64 of `{"orderId":"order-7"}`).
const REMINDER_PAYLOAD: &str = "eyJvcmRlcklkIjoib3JkZXItNyJ9";

/// Group-commit counters summed over the timed sections of one configuration.
#[derive(Default)]
struct Tally {
    stats: StatsSnapshot,
    wall: Duration,
    steps: u64,
    empty_pops: u64,
}

impl Tally {
    fn add(
        &mut self,
        before: StatsSnapshot,
        after: StatsSnapshot,
        wall: Duration,
        steps: u64,
        empty_pops: u64,
    ) {
        self.stats.commits += after.commits - before.commits;
        self.stats.commands += after.commands - before.commands;
        self.stats.read_only_batches += after.read_only_batches - before.read_only_batches;
        self.wall += wall;
        self.steps += steps;
        self.empty_pops += empty_pops;
    }

    fn report(&self, callers: usize) {
        let secs = self.wall.as_secs_f64().max(f64::EPSILON);
        let pops = self.steps + self.empty_pops;
        eprintln!(
            "group-commit txn c={callers}: {:.0} commits/s, avg batch {:.1} commands \
             ({:.0} steps/s; {} commits, {} read-only batches, {} commands = {} pops \
             ({} empty, retried) + {} transactions; {} steps in {:.2} s timed)",
            self.stats.commits as f64 / secs,
            self.stats.average_batch(),
            self.steps as f64 / secs,
            self.stats.commits,
            self.stats.read_only_batches,
            self.stats.commands,
            pops,
            self.empty_pops,
            self.steps,
            self.steps,
            secs,
        );
    }
}

/// One input event: an order that was paid.
fn event(queue: &str, partition: &str) -> NewMessage {
    let id = next_id();
    NewMessage {
        queue: queue.to_string(),
        partition: partition.to_string(),
        payload: RawValue::from_string(format!(r#"{{"orderId":"order-{id}","total":120.5}}"#))
            .expect("valid JSON"),
        transaction_id: Some(format!("order-{id}-paid")),
        trace_id: None,
        producer_sub: None,
        message_id: None,
    }
}

/// Fills `queue` with `total` events spread round-robin over [`PARTITIONS`].
async fn prefill(engine: &Engine, queue: &str, total: u64) {
    let mut batch = Vec::with_capacity(PREFILL_CHUNK);
    for n in 0..total {
        batch.push(event(queue, &format!("p{}", n as usize % PARTITIONS)));
        if batch.len() == PREFILL_CHUNK || n + 1 == total {
            engine
                .push(DEFAULT_TENANT, std::mem::take(&mut batch))
                .await
                .expect("prefill");
        }
    }
}

/// The seed example's transaction for order `n`, acking its event `(txn_id,
/// partition_id)` under `lease_id`. Every id in it derives from `n`, so a retried step
/// would roll back as a duplicate.
fn step_body(n: u64, txn_id: &str, partition_id: u64, lease_id: &str) -> serde_json::Value {
    let order = format!("order-{n}");
    json!({
        "operations": [
            { "type": "ack", "transactionId": txn_id, "partitionId": partition_id.to_string(),
              "consumerGroup": GROUP, "leaseId": lease_id },
            { "type": "push", "items": [
                { "queue": "receipts", "partition": format!("customer-{n}"),
                  "transactionId": format!("receipt-{order}"),
                  "payload": { "orderId": order, "total": 120.5 } } ] }
        ],
        "kv": [
            { "op": "put", "ns": "orders", "key": order, "value": { "status": "paid" },
              "ttlSeconds": 2_592_000 },
            { "op": "putIfAbsent", "ns": "paid", "key": format!("{order}-paid"), "value": true,
              "ttlSeconds": 86_400, "required": true }
        ],
        "timers": [
            { "op": "schedule", "queue": "reminders", "timerKey": order, "delayMs": 86_400_000,
              "txn": format!("reminder-{order}"), "payload": REMINDER_PAYLOAD }
        ]
    })
}

/// The order number of an event, from its `transactionId` `order-{n}-paid`.
fn order_number(txn_id: &str) -> u64 {
    txn_id
        .strip_prefix("order-")
        .and_then(|s| s.strip_suffix("-paid"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("not an event of this benchmark: {txn_id:?}"))
}

/// `callers` tasks each pop one event and commit its step, `iters` times; returns the
/// wall time and how many pops found nothing (every partition with work was leased).
async fn txn_run(engine: &Engine, queue: &str, callers: usize, iters: u64) -> (Duration, u64) {
    let start = Instant::now();
    let tasks: Vec<_> = (0..callers)
        .map(|_| {
            let engine = engine.clone();
            let req = PopRequest {
                target: Target::Queue(queue.to_string()),
                batch: 1,
                group: GROUP.into(),
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
                        // The remaining events sit in partitions leased by others.
                        empty += 1;
                        tokio::task::yield_now().await;
                        continue;
                    };
                    let body = step_body(
                        order_number(&m.message.txn),
                        &m.message.txn,
                        m.partition_id,
                        &popped.lease_id,
                    );
                    let t = parse_transaction(&serde_json::to_vec(&body).expect("JSON renders"))
                        .expect("the seed's shape parses");
                    let answer = engine
                        .transaction(DEFAULT_TENANT, t)
                        .await
                        .expect("transaction");
                    assert!(answer.committed(), "rolled back: {answer:?}");
                    done += 1;
                }
                empty
            })
        })
        .collect();
    let mut empty = 0;
    for t in tasks {
        empty += t.await.expect("step task");
    }
    (start.elapsed(), empty)
}

fn bench_transaction(c: &mut Criterion) {
    let rt = runtime();
    let mut group = c.benchmark_group("transaction");
    for callers in CALLERS {
        let bed = Bed::new();
        let engine = bed.engine.clone();
        let mut tally = Tally::default();
        group.throughput(Throughput::Elements(callers as u64));
        group.bench_function(BenchmarkId::new("callers", callers), |b| {
            b.iter_custom(|iters| {
                // A fresh input queue holding exactly the events this run consumes.
                let queue = format!("bench-orders-{}", next_id());
                let total = iters * callers as u64;
                rt.block_on(prefill(&engine, &queue, total));
                let before = engine.stats();
                let (wall, empty) = rt.block_on(txn_run(&engine, &queue, callers, iters));
                tally.add(before, engine.stats(), wall, total, empty);
                wall
            })
        });
        tally.report(callers);
        drop(engine);
        bed.close();
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = config();
    targets = bench_transaction
}
criterion_main!(benches);
