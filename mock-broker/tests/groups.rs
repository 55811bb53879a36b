//! Consumer groups: seek (releasing leases), forgetting a group, the DLQ listing.

mod common;

use common::{Harness, txns};
use serde_json::json;

#[tokio::test]
async fn seek_to_end_skips_the_backlog_and_releases_the_lease() {
    let h = Harness::new().await;
    for i in 0..3 {
        h.push_one("q", "p", &format!("m{i}"), json!(i)).await;
    }
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&batch=1")
        .await
        .unwrap();
    let (s, r) = h
        .post(
            "/api/v1/consumer-groups/g/queues/q/seek",
            json!({"toEnd": true}),
        )
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        r,
        json!({"success": true, "consumerGroup": "g", "queueName": "q", "partitionsUpdated": 1})
    );
    // The lease is gone: its holder's ack is fenced out.
    assert_eq!(
        h.ack_msg(&p["messages"][0], "completed").await["success"],
        false
    );
    assert!(h.pop("/api/v1/pop/queue/q?consumerGroup=g").await.is_none());
    h.push_one("q", "p", "later", json!(1)).await;
    assert_eq!(
        txns(&h.pop("/api/v1/pop/queue/q?consumerGroup=g").await.unwrap()),
        ["later"]
    );
}

#[tokio::test]
async fn seek_to_a_time_rewinds_and_redelivers() {
    let h = Harness::new().await;
    h.push_one("q", "p", "a", json!(1)).await;
    h.advance(5);
    let t = queen_mock_broker::clock::format_iso(queen_mock_broker::Clock::now_micros(&h.clock));
    h.push_one("q", "p", "b", json!(2)).await;
    h.push_one("q", "p", "c", json!(3)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    for m in p["messages"].as_array().unwrap() {
        h.ack_msg(m, "completed").await;
    }
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
    let (s, _) = h
        .post(
            "/api/v1/consumer-groups/__QUEUE_MODE__/queues/q/partitions/p/seek",
            json!({"timestamp": t}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(
        txns(&h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap()),
        ["b", "c"]
    );
}

#[tokio::test]
async fn seek_needs_exactly_one_target() {
    let h = Harness::new().await;
    h.push_one("q", "p", "a", json!(1)).await;
    for body in [
        json!({}),
        json!({"toEnd": true, "timestamp": "2026-01-01T00:00:00Z"}),
        json!({"timestamp": "soon"}),
    ] {
        let (s, r) = h
            .post("/api/v1/consumer-groups/g/queues/q/seek", body.clone())
            .await;
        assert_eq!(s, 400, "{body} -> {r}");
        assert_eq!(r["code"], "bad_request");
    }
    let (s, _) = h
        .post(
            "/api/v1/consumer-groups/g/queues/missing/seek",
            json!({"toEnd": true}),
        )
        .await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn deleting_a_group_forgets_its_cursor_and_lease() {
    let h = Harness::new().await;
    for i in 0..2 {
        h.push_one("q", "p", &format!("m{i}"), json!(i)).await;
    }
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&batch=1")
        .await
        .unwrap();
    h.ack_msg(&p["messages"][0], "completed").await;
    let (s, r) = h
        .delete("/api/v1/consumer-groups/g?deleteMetadata=true")
        .await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(r["success"], true);
    // A fresh subscription with mode all starts from the beginning again.
    let again = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&batch=10")
        .await
        .unwrap();
    assert_eq!(txns(&again), ["m0", "m1"]);
}

#[tokio::test]
async fn the_dlq_listing_filters_and_pages() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    h.configure("r", json!({"retryLimit": 0})).await;
    for i in 0..5 {
        h.push_one("q", "p", &format!("q{i}"), json!(i)).await;
    }
    h.push_one("r", "p", "r0", json!(0)).await;
    for queue in ["q", "r"] {
        while let Some(p) = h.pop(&format!("/api/v1/pop/queue/{queue}?batch=10")).await {
            for m in p["messages"].as_array().unwrap() {
                h.ack_msg(m, "dlq").await;
            }
        }
    }
    let (_, all) = h.get("/api/v1/dlq").await;
    assert_eq!(all["total"], 6);
    let (_, page) = h.get("/api/v1/dlq?queue=q&limit=2&offset=2").await;
    assert_eq!(page["total"], 5);
    let ids: Vec<_> = page["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].clone())
        .collect();
    assert_eq!(ids, ["q2", "q3"]);
    assert_eq!(page["pagination"], json!({"limit": 2, "offset": 2}));
    let (_, none) = h.get("/api/v1/dlq?queue=q&consumerGroup=other").await;
    assert_eq!(none["total"], 0);
    assert_eq!(none["messages"], json!([]));
}
