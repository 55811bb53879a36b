//! Push: dense offsets, FIFO, deduplication within a call, across calls, and the
//! window's expiry.

mod common;

use common::{Harness, txns};
use serde_json::json;

#[tokio::test]
async fn offsets_are_dense_per_partition_and_pop_is_fifo() {
    let h = Harness::new().await;
    for i in 0..5 {
        let r = h
            .push_one("q", "a", &format!("a{i}"), json!({"i": i}))
            .await;
        assert_eq!(r["offset"], i, "{r}");
        assert_eq!(r["status"], "queued");
        assert_eq!(r["queueName"], "q");
    }
    // Another partition has its own log from 0.
    let r = h.push_one("q", "b", "b0", json!(1)).await;
    assert_eq!(r["offset"], 0);

    let pop = h
        .pop("/api/v1/pop/queue/q/partition/a?batch=10")
        .await
        .unwrap();
    assert_eq!(txns(&pop), ["a0", "a1", "a2", "a3", "a4"]);
    let offsets: Vec<_> = pop["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["offset"].clone())
        .collect();
    assert_eq!(offsets, [0, 1, 2, 3, 4]);
    assert_eq!(pop["messages"][2]["data"], json!({"i": 2}));
}

#[tokio::test]
async fn a_repeat_inside_one_call_is_a_duplicate_of_the_first() {
    let h = Harness::new().await;
    let out = h
        .push(json!([
            {"queue": "q", "transactionId": "t", "payload": 1},
            {"queue": "q", "transactionId": "t", "payload": 2},
            {"queue": "q", "transactionId": "u", "payload": 3},
        ]))
        .await;
    assert_eq!(out[0]["status"], "queued");
    assert_eq!(out[1]["status"], "duplicate");
    assert_eq!(out[1]["message_id"], out[0]["message_id"]);
    assert_eq!(out[1]["offset"], out[0]["offset"]);
    assert_eq!(out[2]["offset"], 1, "the duplicate took no offset");
    let pop = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_eq!(txns(&pop), ["t", "u"]);
    assert_eq!(pop["messages"][0]["data"], 1, "first wins");
}

#[tokio::test]
async fn a_repeat_across_calls_is_a_duplicate_until_the_window_closes() {
    let h = Harness::new().await;
    h.configure("q", json!({"dedupWindowSeconds": 60})).await;
    let first = h.push_one("q", "p", "t", json!(1)).await;
    h.advance(59);
    let again = h.push_one("q", "p", "t", json!(2)).await;
    assert_eq!(again["status"], "duplicate");
    assert_eq!(again["message_id"], first["message_id"]);
    assert_eq!(again["offset"], 0);
    // The same id in another partition is another message.
    let other = h.push_one("q", "p2", "t", json!(3)).await;
    assert_eq!(other["status"], "queued");

    h.advance(1);
    let after = h.push_one("q", "p", "t", json!(4)).await;
    assert_eq!(after["status"], "queued", "the window has closed: {after}");
    assert_eq!(after["offset"], 1);
    assert_ne!(after["message_id"], first["message_id"]);
}

#[tokio::test]
async fn a_zero_window_turns_dedup_off() {
    let h = Harness::new().await;
    h.configure("q", json!({"dedupWindowSeconds": 0})).await;
    h.push_one("q", "p", "t", json!(1)).await;
    let again = h.push_one("q", "p", "t", json!(1)).await;
    assert_eq!(again["status"], "queued");
    assert_eq!(again["offset"], 1);
}

#[tokio::test]
async fn missing_ids_are_minted_and_defaults_apply() {
    let h = Harness::new().await;
    let out = h
        .push(json!([{"queue": "fresh", "payload": {"x": 1}, "traceId": "ignored"}]))
        .await;
    let mid = out[0]["message_id"].as_str().unwrap();
    assert_eq!(
        out[0]["transaction_id"].as_str(),
        Some(mid),
        "minted id is the message id"
    );
    assert_eq!(uuid_version(mid), 7);
    let pop = h.pop("/api/v1/pop/queue/fresh").await.unwrap();
    assert_eq!(pop["partition"], "Default");
    assert_eq!(pop["messages"][0]["traceId"], serde_json::Value::Null);
    assert_eq!(pop["messages"][0]["producerSub"], serde_json::Value::Null);
    assert_eq!(pop["messages"][0]["deliveryAttempt"], 1);
    assert!(
        pop["messages"][0]["createdAt"]
            .as_str()
            .unwrap()
            .ends_with('Z')
    );
}

fn uuid_version(s: &str) -> u32 {
    s.chars().nth(14).and_then(|c| c.to_digit(16)).unwrap()
}

#[tokio::test]
async fn a_delayed_message_stays_invisible_until_due() {
    let h = Harness::new().await;
    h.configure("q", json!({"delayedProcessing": 10})).await;
    h.push_one("q", "p", "t", json!(1)).await;
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
    h.advance(10);
    assert!(h.pop("/api/v1/pop/queue/q").await.is_some());
}
