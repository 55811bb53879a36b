//! Retention (`retentionEnabled` with `retentionSeconds` / `completedRetentionSeconds`):
//! the background sweep deletes what the options say, and nothing else.

mod common;

use std::time::Duration;

use common::Harness;
use serde_json::json;

/// Offsets of the messages still stored in `queue`/`p`.
fn stored(h: &Harness, queue: &str) -> Vec<u64> {
    h.broker
        .inspect()
        .messages(queue, "p")
        .unwrap()
        .iter()
        .map(|m| m.offset)
        .collect()
}

/// Waits (real time, bounded) until the sweep leaves `want` stored.
async fn settles_at(h: &Harness, queue: &str, want: &[u64]) {
    for _ in 0..100 {
        if stored(h, queue) == want {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(stored(h, queue), want, "retention did not settle");
}

#[tokio::test]
async fn completed_retention_deletes_only_what_every_group_has_committed() {
    let h = Harness::new().await;
    h.configure(
        "q",
        json!({"retentionEnabled": true, "completedRetentionSeconds": 60}),
    )
    .await;
    for i in 0..4 {
        h.push_one("q", "p", &format!("m{i}"), json!(i)).await;
    }
    // Queue mode completes m0..m2; the named group has completed only m0.
    let p = h.pop("/api/v1/pop/queue/q?batch=3").await.unwrap();
    h.ack_msg(&p["messages"][2], "completed").await;
    let g = h
        .pop("/api/v1/pop/queue/q?batch=1&consumerGroup=g&subscriptionMode=all")
        .await
        .unwrap();
    h.ack_msg(&g["messages"][0], "completed").await;

    h.advance(30);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(stored(&h, "q"), [0, 1, 2, 3], "younger than the retention");
    h.advance(31);
    settles_at(&h, "q", &[1, 2, 3]).await;

    // The group catches up: now m0..m2 are completed by everyone.
    let g = h
        .pop("/api/v1/pop/queue/q?batch=2&consumerGroup=g")
        .await
        .unwrap();
    h.ack_msg(&g["messages"][1], "completed").await;
    h.advance(1);
    settles_at(&h, "q", &[3]).await;
    // What is left is still delivered, at its own offset.
    let rest = h.pop("/api/v1/pop/queue/q?consumerGroup=g").await.unwrap();
    assert_eq!(rest["messages"][0]["transactionId"], "m3");
    assert_eq!(rest["messages"][0]["offset"], 3);
}

#[tokio::test]
async fn retention_seconds_deletes_old_messages_consumed_or_not() {
    let h = Harness::new().await;
    h.configure(
        "q",
        json!({"retentionEnabled": true, "retentionSeconds": 60}),
    )
    .await;
    h.push_one("q", "p", "old", json!(0)).await;
    h.advance(45);
    h.push_one("q", "p", "young", json!(1)).await;
    h.advance(16);
    settles_at(&h, "q", &[1]).await;
    let p = h.pop("/api/v1/pop/queue/q").await.unwrap();
    assert_eq!(p["messages"][0]["transactionId"], "young");
    // An ack of a deleted message is unresolved.
    let r = h
        .ack(json!({"transactionId": "old", "partitionId": p["partitionId"]}))
        .await;
    assert!(r["error"].as_str().unwrap().contains("unresolv"), "{r}");
}

#[tokio::test]
async fn without_retention_enabled_nothing_is_deleted() {
    let h = Harness::new().await;
    h.configure(
        "q",
        json!({"retentionSeconds": 60, "completedRetentionSeconds": 1}),
    )
    .await;
    h.push_one("q", "p", "m0", json!(0)).await;
    let p = h.pop("/api/v1/pop/queue/q").await.unwrap();
    h.ack_msg(&p["messages"][0], "completed").await;
    h.advance(3600);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(stored(&h, "q"), [0]);
}

#[tokio::test]
async fn a_workload_that_consumes_what_it_produces_keeps_its_stored_bytes_bounded() {
    let h = Harness::new().await;
    h.configure(
        "q",
        json!({"retentionEnabled": true, "completedRetentionSeconds": 1}),
    )
    .await;
    let payload = json!({"blob": "x".repeat(2_000)});
    let mut after_round = Vec::new();
    for round in 0..20 {
        for i in 0..20 {
            h.push_one("q", "p", &format!("r{round}-{i}"), payload.clone())
                .await;
        }
        let p = h.pop("/api/v1/pop/queue/q?batch=20").await.unwrap();
        h.ack_msg(&p["messages"][19], "completed").await;
        h.advance(2);
        settles_at(&h, "q", &[]).await;
        after_round.push(h.broker.stats().live_bytes);
    }
    // 400 messages of 2 KB went through; what stays is the queue's bookkeeping.
    let (first, last) = (after_round[1], after_round[19]);
    assert!(
        last <= first + 1_024,
        "stored bytes grew from {first} to {last}: {after_round:?}"
    );
    assert!(last < 20 * 2_000, "{last} bytes kept");
}

#[tokio::test]
async fn a_queue_wider_than_one_sweep_is_trimmed_whole_over_several() {
    let h = Harness::new().await;
    h.configure(
        "wide",
        json!({"retentionEnabled": true, "retentionSeconds": 10}),
    )
    .await;
    let n = queen_mock_broker::engine::retention::PARTITIONS_PER_SWEEP + 904;
    let items: Vec<_> = (0..n)
        .map(|i| json!({"queue": "wide", "partition": format!("p{i}"), "payload": i}))
        .collect();
    for chunk in items.chunks(1_000) {
        h.push(json!(chunk)).await;
    }
    let left = |h: &Harness| {
        (0..n)
            .filter(|i| {
                !h.broker
                    .inspect()
                    .messages("wide", &format!("p{i}"))
                    .unwrap()
                    .is_empty()
            })
            .count()
    };
    h.advance(11);
    // "p999" sorts last: the walk reaches it in the second sweep at the earliest.
    for _ in 0..100 {
        let last = h.broker.inspect().messages("wide", "p999").unwrap();
        if last.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(left(&h), 0, "every partition trimmed");
}
