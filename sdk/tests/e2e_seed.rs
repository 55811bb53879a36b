//! End to end against the in-process reference broker: the seed's order-worker step.

use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_sdk::{Client, Commit, Error, PushItem, RollbackReason, Ttl};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Serialize, Deserialize)]
struct OrderPaid {
    order_id: String,
    customer: String,
    total: f64,
}

async fn setup() -> (MockBroker, Client) {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let event = OrderPaid {
        order_id: "order-7".into(),
        customer: "customer-123".into(),
        total: 120.5,
    };
    client
        .push(vec![
            PushItem::new("orders", &event)
                .partition("p")
                .transaction_id("order-7-paid"),
        ])
        .await
        .unwrap();
    (broker, client)
}

fn step(client: &Client, msg: &queen_sdk::Message<OrderPaid>) -> queen_sdk::TransactionBuilder {
    let o = &msg.data;
    client
        .transaction()
        .ack(msg)
        .push("receipts", |p| {
            p.partition(&o.customer)
                .payload(&json!({"orderId": o.order_id, "total": o.total}))
        })
        .kv(|k| {
            k.put(
                "orders",
                &o.order_id,
                &json!({"status": "paid"}),
                Ttl::days(30),
            )
        })
        .once("paid", format!("{}-paid", o.order_id), Ttl::days(1))
        .timer("reminders", &o.order_id, |t| {
            t.after(Duration::from_secs(86_400))
                .payload(&json!({"orderId": o.order_id}))
        })
}

#[tokio::test]
async fn the_seed_step_commits_and_a_redelivery_rolls_back_as_duplicate() {
    let (broker, client) = setup().await;
    let batch = client
        .pop::<OrderPaid>("orders")
        .group("billing")
        .subscription(queen_sdk::SubscriptionMode::All)
        .batch(1)
        .send()
        .await
        .unwrap();
    assert_eq!(batch.len(), 1);
    let msg = &batch[0];
    assert_eq!(msg.data.order_id, "order-7");

    let committed = step(&client, msg)
        .commit()
        .await
        .unwrap()
        .committed()
        .expect("committed");
    assert_eq!(committed.results().len(), 5);
    let receipt = committed.pushes().next().unwrap().clone();
    assert!(!receipt.duplicate);
    assert_eq!(committed.kv().count(), 2);
    assert_eq!(
        committed.timers().next().unwrap().status,
        queen_sdk::TimerStatus::Scheduled
    );

    // The group is rewound and the same event comes back under a new lease: the same
    // step derives the same receipt id, so it rolls back as a duplicate.
    let http = reqwest::Client::new();
    let res = http
        .post(format!(
            "{}/api/v1/consumer-groups/billing/queues/orders/seek",
            broker.url()
        ))
        .json(&json!({"timestamp": "2000-01-01T00:00:00Z"}))
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success());
    let again = client
        .pop::<OrderPaid>("orders")
        .group("billing")
        .batch(1)
        .send()
        .await
        .unwrap();
    assert_ne!(again[0].lease_id, msg.lease_id);
    match step(&client, &again[0]).commit().await {
        Err(Error::RolledBack {
            reason, retried, ..
        }) => {
            assert_eq!(reason, RollbackReason::Duplicate);
            assert!(!retried);
        }
        other => panic!("expected a duplicate rollback, got {other:?}"),
    }
    let receipts = client
        .pop::<serde_json::Value>("receipts")
        .batch(10)
        .send()
        .await
        .unwrap();
    assert_eq!(receipts.len(), 1, "written once");
    assert_eq!(receipts[0].transaction_id, receipt.transaction_id);
}

#[tokio::test]
async fn a_second_run_with_a_fresh_lease_and_no_push_is_gated() {
    let (_broker, client) = setup().await;
    let m = client
        .pop::<OrderPaid>("orders")
        .subscription(queen_sdk::SubscriptionMode::All)
        .send()
        .await
        .unwrap();
    let first = client
        .transaction()
        .ack(&m[0])
        .once("paid", "order-7", Ttl::hours(1))
        .commit()
        .await
        .unwrap();
    assert!(first.is_committed());
    let gated = client
        .transaction()
        .kv(|k| k.incr("stats", "orders", 1, Ttl::Forever))
        .once("paid", "order-7", Ttl::hours(1))
        .commit()
        .await
        .unwrap();
    match gated {
        Commit::Gated { gate, .. } => {
            assert_eq!((gate.slot, gate.index), (1, 1));
            assert_eq!(gate.kind, queen_sdk::GateKind::Once);
            assert_eq!(gate.reason, queen_sdk::KvReason::Exists);
            assert_eq!((gate.ns.as_str(), gate.key.as_str()), ("paid", "order-7"));
            assert_eq!(gate.value, Some(json!(true)));
            assert!(gate.already_done());
        }
        other => panic!("expected gated, got {other:?}"),
    }
}
