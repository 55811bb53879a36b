//! Queue configuration (merge, replace, reset) and deletion; data across restarts.

mod common;

use common::{Harness, txns};
use queen_mock_broker::ManualClock;
use serde_json::json;

#[tokio::test]
async fn configure_merges_resets_and_replaces() {
    let h = Harness::new().await;
    let (s, r) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "q", "options": {"leaseTime": 30, "retryLimit": 7}}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(r["configured"], true);
    assert_eq!(r["queue"], "q");
    assert_eq!(r["options"]["leaseTime"], 30);
    assert_eq!(
        r["options"]["dedupWindowSeconds"], 3600,
        "every option is echoed"
    );
    // Absent keeps, null resets.
    let (_, r) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "q", "options": {"leaseTime": null}}),
        )
        .await;
    assert_eq!(r["options"]["leaseTime"], 300);
    assert_eq!(r["options"]["retryLimit"], 7);
    // Replace resets every option not sent.
    let (_, r) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "q", "mode": "replace", "options": {"delayedProcessing": 2}}),
        )
        .await;
    assert_eq!(r["options"]["retryLimit"], 3);
    assert_eq!(r["options"]["delayedProcessing"], 2);
}

#[tokio::test]
async fn configure_refuses_bad_option_values() {
    let h = Harness::new().await;
    for options in [
        json!({"leaseTime": 0}),
        json!({"retryLimit": "3"}),
        json!({"deadLetterQueue": 1}),
        json!({"leaseTime": 1.5}),
    ] {
        let (s, r) = h
            .post(
                "/api/v1/configure",
                json!({"queue": "q", "options": options}),
            )
            .await;
        assert_eq!(s, 400, "{options} -> {r}");
        assert_eq!(r["code"], "bad_request");
    }
    let (s, _) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "q", "mode": "sideways"}),
        )
        .await;
    assert_eq!(s, 400);
    // Nothing was created by the refusals: a pop of the queue finds nothing, and the
    // first real configure sees defaults.
    let (_, r) = h.post("/api/v1/configure", json!({"queue": "q"})).await;
    assert_eq!(r["options"]["leaseTime"], 300);
}

#[tokio::test]
async fn deleting_a_queue_removes_everything_in_it() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    h.push_one("q", "p", "a", json!(1)).await;
    h.push_one("q", "p", "b", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=1").await.unwrap();
    h.ack_msg(&p["messages"][0], "dlq").await;
    let (s, r) = h.delete("/api/v1/resources/queues/q").await;
    assert_eq!(s, 200);
    assert_eq!(r["deleted"], true);
    assert_eq!(h.get("/api/v1/dlq?queue=q").await.1["total"], 0);
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
    // Recreated from scratch: offsets restart and old ids are no duplicates.
    let r = h.push_one("q", "p", "a", json!(2)).await;
    assert_eq!(
        (r["status"].clone(), r["offset"].clone()),
        (json!("queued"), json!(0))
    );
    let before = h.broker.stats().commits;
    let (_, r) = h.delete("/api/v1/resources/queues/never-was").await;
    assert_eq!(r["deleted"], false);
    assert_eq!(
        h.broker.stats().commits,
        before,
        "nothing to delete, nothing committed"
    );
}

#[tokio::test]
async fn data_survives_a_restart_on_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data/queen.redb");
    let clock = ManualClock::new();
    let h = Harness::on_file(&path, &clock).await;
    h.configure("q", json!({"retryLimit": 5})).await;
    for i in 0..3 {
        h.push_one("q", "p", &format!("m{i}"), json!({"i": i}))
            .await;
    }
    let p = h
        .pop("/api/v1/pop/queue/q?batch=1&consumerGroup=g&subscriptionMode=all")
        .await
        .unwrap();
    h.ack_msg(&p["messages"][0], "completed").await;
    let held = h.pop("/api/v1/pop/queue/q?batch=1").await.unwrap();
    h.broker.shutdown().await;

    let h = Harness::on_file(&path, &clock).await;
    // Options, messages, cursors, leases and the dedup index all came back.
    let (_, r) = h.post("/api/v1/configure", json!({"queue": "q"})).await;
    assert_eq!(r["options"]["retryLimit"], 5);
    assert_eq!(
        h.push_one("q", "p", "m1", json!(0)).await["status"],
        "duplicate"
    );
    let g = h
        .pop("/api/v1/pop/queue/q?batch=10&consumerGroup=g")
        .await
        .unwrap();
    assert_eq!(txns(&g), ["m1", "m2"]);
    assert!(
        h.pop("/api/v1/pop/queue/q").await.is_none(),
        "the queue-mode lease survived"
    );
    assert_eq!(
        h.ack_msg(&held["messages"][0], "completed").await["success"],
        true
    );
    h.broker.shutdown().await;
}

#[tokio::test]
async fn min_pop_wait_time_is_stored_clamped_into_0_to_60000() {
    // The official client's `the_broker_clamps_a_minimum_pop_wait_it_considers_absurd`.
    let h = Harness::new().await;
    for (sent, stored) in [(90_000, 60_000), (-5, 0), (250, 250)] {
        let (s, b) = h
            .post(
                "/api/v1/configure",
                json!({"queue": "q", "options": {"minPopWaitTime": sent}}),
            )
            .await;
        assert_eq!(s, 200, "{b}");
        assert_eq!(b["options"]["minPopWaitTime"], stored, "{sent}: {b}");
    }
    let (s, b) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "q", "options": {"minPopWaitTime": "soon"}}),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].clone()),
        (400, json!("bad_request")),
        "{b}"
    );
}
