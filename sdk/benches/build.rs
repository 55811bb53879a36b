//! The SDK's own cost per transaction, without a network: building the seed step of
//! `spec/transaction.md` (ack under the lease, receipt push, KV put, `once` marker,
//! reminder timer) and an `ack-push` step from a popped message, validating them and
//! rendering the request body to bytes, as `commit()` does before it sends.
//!
//! Also what making a `Client` costs, with and without TLS.
//!
//! Run with `cargo bench -p queen-sdk --bench build`. Each benchmark reports
//! transactions per second; compare them with the broker's `--bench parse` (the same
//! bodies parsed and validated) and the load generator's figures to see what share of a
//! step the client takes.

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use queen_sdk::{Client, Message, TransactionBuilder, Ttl};
use serde_json::{Value, json};

/// A message as a pop delivers it: the seed's `order-paid` event.
fn popped() -> Message<Value> {
    Message {
        id: "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f30".into(),
        transaction_id: "order-7-paid".into(),
        data: json!({"orderId": "order-7", "customer": "customer-123", "total": 120.5}),
        partition_id: "17".into(),
        partition: "customer-123".into(),
        lease_id: "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37".into(),
        consumer_group: "billing".into(),
        queue: "orders".into(),
        offset: Some(41),
        delivery_attempt: Some(1),
        trace_id: None,
        producer_sub: None,
        created_at: "2026-11-30T08:00:00.000Z".into(),
    }
}

fn seed_step(c: &Client, m: &Message<Value>) -> TransactionBuilder {
    let order = m.data["orderId"].as_str().expect("orderId");
    c.transaction()
        .ack(m)
        .push("receipts", |p| {
            p.partition("customer-123")
                .payload(&json!({"orderId": order, "total": 120.5}))
        })
        .kv(|k| k.put("orders", order, &json!({"status": "paid"}), Ttl::days(30)))
        .once("paid", format!("{order}-paid"), Ttl::days(1))
        .timer("reminders", order, |t| {
            t.after(Duration::from_secs(86_400))
                .payload(&json!({"orderId": order}))
        })
}

fn ack_push(c: &Client, m: &Message<Value>) -> TransactionBuilder {
    c.transaction()
        .ack(m)
        .push("receipts", |p| p.partition(&m.partition).payload(&m.data))
}

fn bench(c: &mut Criterion) {
    let client = Client::new("http://127.0.0.1:6632").expect("a client");
    let msg = popped();
    let mut g = c.benchmark_group("sdk_build");
    g.throughput(Throughput::Elements(1));
    g.bench_function("seed_step", |b| {
        b.iter(|| {
            black_box(
                seed_step(&client, black_box(&msg))
                    .to_bytes()
                    .expect("valid"),
            )
        })
    });
    g.bench_function("ack_push", |b| {
        b.iter(|| {
            black_box(
                ack_push(&client, black_box(&msg))
                    .to_bytes()
                    .expect("valid"),
            )
        })
    });
    g.finish();

    // What a client costs to make (each test of a suite may make several): a client of
    // `http://` brokers sets up no TLS; one of an `https://` broker loads the
    // platform's root certificates.
    let mut g = c.benchmark_group("sdk_client_new");
    g.bench_function("http", |b| {
        b.iter(|| black_box(Client::new(black_box("http://127.0.0.1:6632")).expect("a client")))
    });
    g.bench_function("https", |b| {
        b.iter(|| black_box(Client::new(black_box("https://queen.example.com")).expect("a client")))
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
