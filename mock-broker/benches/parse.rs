//! The broker's cost of reading a transaction before the writer sees it: the body's
//! bytes parsed by the route's own function (`http::parse_transaction`: the JSON rules,
//! then one typed serde pass into the wire shape) and checked into an
//! `engine::txn::Transaction` (every rule of `spec/transaction.md` that needs no
//! storage). Two bodies: the seed step (ack, push, KV put, `putIfAbsent`
//! gate, timer) and an `ack-push` step. The bare `serde_json::from_slice` into a
//! `Value` of the same bytes is measured beside them: the share validation adds.
//!
//! Run with `cargo bench -p queen-mock-broker --bench parse`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use queen_mock_broker::http::parse_transaction;
use serde_json::{Value, json};

/// The `ack-push` step: the seed's ack and receipt push, fenced by the lease.
fn ack_push() -> Value {
    json!({
      "operations": [
        { "type": "ack", "transactionId": "order-7-paid", "partitionId": "17",
          "consumerGroup": "billing", "leaseId": "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37" },
        { "type": "push", "items": [
          { "queue": "receipts", "partition": "customer-123",
            "transactionId": "receipt-order-7", "payload": { "orderId": "order-7", "total": 120.5 } } ] }
      ],
      "requiredLeases": ["0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37"]
    })
}

/// The seed step: `ack-push` plus the order's KV put, the `putIfAbsent` gate and the
/// reminder timer.
fn seed_step() -> Value {
    let mut body = ack_push();
    body["kv"] = json!([
        { "op": "put", "ns": "orders", "key": "order-7", "value": { "status": "paid" },
          "ttlSeconds": 2592000 },
        { "op": "putIfAbsent", "ns": "paid", "key": "order-7-paid", "value": true,
          "ttlSeconds": 86400, "required": true }
    ]);
    body["timers"] = json!([
        { "op": "schedule", "queue": "reminders", "timerKey": "order-7", "delayMs": 86400000,
          "txn": "reminder-order-7", "payload": "eyJvcmRlcklkIjoib3JkZXItNyJ9" }
    ]);
    body
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("broker_parse");
    g.throughput(Throughput::Elements(1));
    for (name, body) in [("seed_step", seed_step()), ("ack_push", ack_push())] {
        let body = serde_json::to_vec(&body).expect("renders");
        g.bench_function(format!("{name}/json_only"), |b| {
            b.iter(|| black_box(serde_json::from_slice::<Value>(black_box(&body)).expect("JSON")))
        });
        g.bench_function(format!("{name}/parse_and_validate"), |b| {
            b.iter(|| black_box(parse_transaction(black_box(&body)).expect("a valid transaction")))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
