//! What the transaction log (`engine::txn_log`, `GET /api/v1/transactions`) costs each
//! `POST /api/v1/transaction`: the handler's bounded copy of the parsed request
//! (`Parts::of`), the entry built from the answer (`Entry::answered`) and the push into
//! the tenant's ring under its mutex (`TxnLog::record`), measured on the `parse` bench's
//! seed step (ack, push, KV put and `putIfAbsent`, timer) with a committed answer, in a
//! ring that is full (every push also drops the oldest entry, as in a steady state).
//!
//! Run with `cargo bench -p queen-mock-broker --bench txn_log`.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use queen_mock_broker::engine::txn::{StepResult, TxnOutcome};
use queen_mock_broker::engine::txn_log::{Entry, KEPT, Parts, TxnLog};
use queen_mock_broker::http::parse_transaction;
use serde_json::json;

fn bench(c: &mut Criterion) {
    let body = json!({
      "operations": [
        { "type": "ack", "transactionId": "order-7-paid", "partitionId": "17",
          "consumerGroup": "billing", "leaseId": "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37" },
        { "type": "push", "items": [
          { "queue": "receipts", "partition": "customer-123",
            "transactionId": "receipt-order-7", "payload": { "orderId": "order-7", "total": 120.5 } } ] }
      ],
      "requiredLeases": ["0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37"],
      "kv": [
        { "op": "put", "ns": "orders", "key": "order-7", "value": { "status": "paid" }, "ttlSeconds": 2592000 },
        { "op": "putIfAbsent", "ns": "paid", "key": "order-7-paid", "value": true, "ttlSeconds": 86400, "required": true }
      ],
      "timers": [
        { "op": "schedule", "queue": "reminders", "timerKey": "order-7", "delayMs": 86400000,
          "txn": "reminder-order-7", "payload": "eyJvcmRlcklkIjoib3JkZXItNyJ9" }
      ]
    });
    let t = parse_transaction(&serde_json::to_vec(&body).expect("renders")).expect("valid");
    // The answer's ack and push results (the parts `Entry::answered` reads).
    let out = TxnOutcome::Committed {
        id: "0199a7c2-6000-7000-8000-000000000001".into(),
        results: vec![
            StepResult::Ack {
                transaction_id: "order-7-paid".into(),
                dlq: false,
            },
            StepResult::Push {
                transaction_id: "receipt-order-7".into(),
                message_id: "0199a7c2-6000-7000-8000-000000000002".into(),
                queue: "receipts".into(),
                partition_id: 18,
                offset: 41,
                duplicate: false,
            },
        ],
    };
    let log = TxnLog::default();
    let ua = Some("queen-sdk/0.1.0 (rust)");
    for _ in 0..KEPT {
        log.record("acme", Entry::answered(Parts::of(&t), &out, 0, ua));
    }
    let mut g = c.benchmark_group("txn_log");
    g.throughput(Throughput::Elements(1));
    g.bench_function("seed_step/record", |b| {
        b.iter(|| {
            let parts = Parts::of(black_box(&t));
            log.record("acme", Entry::answered(parts, black_box(&out), 0, ua));
        })
    });
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
