//! The storage cap (`MockBrokerBuilder::storage_cap`, `--storage-cap`): at the cap, calls
//! that add data answer 507 `storage_full` and write nothing, while reads, pops, acks
//! and deletes go on, so a full broker can be drained back under its cap. The count of
//! stored bytes survives a restart.

mod common;

use common::Harness;
use queen_mock_broker::{ManualClock, MockBroker};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// A broker capped at `cap` bytes, on `file` if given.
async fn capped(cap: u64, file: Option<&std::path::Path>) -> Harness {
    let clock = ManualClock::new();
    let builder = MockBroker::builder().clock(clock.clone()).storage_cap(cap);
    let builder = match file {
        Some(f) => builder.data_file(f),
        None => builder.in_memory(),
    };
    Harness::with(builder.start().await.expect("broker starts"), clock)
}

/// Pushes one message of about 1 KiB to `queue`.
async fn push_kib(h: &Harness, queue: &str, i: usize) -> (StatusCode, Value) {
    h.post(
        "/api/v1/push",
        json!({"items": [{"queue": queue, "transactionId": format!("{queue}-{i}"),
                           "payload": {"pad": "x".repeat(1024)}}]}),
    )
    .await
}

/// Pushes `n` messages of about 1 KiB to `queue`, each its own call, all under the cap.
async fn fill(h: &Harness, queue: &str, n: usize) {
    for i in 0..n {
        let (s, b) = push_kib(h, queue, i).await;
        assert_eq!(s, StatusCode::CREATED, "push {i} under the cap: {b}");
    }
}

/// Pushes 1 KiB messages to `queue` until the broker answers 507; returns how many
/// went in. The push that crossed the cap went in: the cap is checked before a write.
async fn fill_up(h: &Harness, queue: &str) -> usize {
    for i in 0..1000 {
        let (s, b) = push_kib(h, queue, i).await;
        if s == StatusCode::INSUFFICIENT_STORAGE {
            assert_eq!(b["code"], "storage_full", "{b}");
            return i;
        }
        assert_eq!(s, StatusCode::CREATED, "push {i} under the cap: {b}");
    }
    panic!("1000 pushes of 1 KiB never reached the cap");
}

/// Asserts a 507 `storage_full` with the error body, and that no commit happened.
async fn assert_full(h: &Harness, res: (StatusCode, Value)) {
    let before = h.broker.stats().commits;
    let (s, b) = res;
    assert_eq!(s, StatusCode::INSUFFICIENT_STORAGE, "{b}");
    assert_eq!(b["code"], "storage_full", "{b}");
    assert!(b["error"].as_str().is_some_and(|e| !e.is_empty()), "{b}");
    assert_eq!(
        h.broker.stats().commits,
        before,
        "a refusal commits nothing"
    );
}

#[tokio::test]
async fn at_the_cap_pushes_are_refused_and_reads_acks_and_deletes_go_on() {
    let cap = 16 * 1024;
    let h = capped(cap, None).await;
    fill(&h, "keep", 4).await;
    assert!(fill_up(&h, "drop").await >= 2);
    let live = h.broker.stats().live_bytes;
    assert!(live >= cap, "refused only at the cap: {live}");

    let push = json!({"items": [{"queue": "keep", "transactionId": "late", "payload": 1}]});
    let before = h.broker.stats().commits;
    let res = h.post("/api/v1/push", push.clone()).await;
    assert_full(&h, res).await;
    assert_eq!(h.broker.stats().commits, before);
    assert_eq!(
        h.broker
            .inspect()
            .messages("keep", "Default")
            .unwrap()
            .len(),
        4
    );

    // Reads and pops still answer; an ack still commits.
    let (s, b) = h.get("/api/v1/dlq?queue=keep").await;
    assert!(s.is_success(), "{b}");
    let popped = h
        .pop("/api/v1/pop/queue/keep?consumerGroup=g&subscriptionMode=all&batch=1")
        .await
        .expect("a message to pop");
    let msg = popped["messages"][0].clone();
    let acked = h.ack_msg(&msg, "completed").await;
    assert_eq!(acked["success"], true, "{acked}");

    // Deleting a queue frees its bytes; pushes go through again.
    let (s, b) = h.delete("/api/v1/resources/queues/drop").await;
    assert!(s.is_success(), "{b}");
    let after_delete = h.broker.stats().live_bytes;
    assert!(
        after_delete < live / 2,
        "deleting a queue frees its bytes: {after_delete} of {live}"
    );
    let (s, b) = h.post("/api/v1/push", push).await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
}

#[tokio::test]
async fn a_full_broker_refuses_a_transaction_that_pushes_but_applies_one_that_only_acks() {
    let h = capped(4 * 1024, None).await;
    assert!(fill_up(&h, "in").await >= 1, "a message to take");
    let m1 = h
        .pop("/api/v1/pop/queue/in?consumerGroup=g&subscriptionMode=all&batch=1")
        .await
        .unwrap()["messages"][0]
        .clone();
    let ack = |m: &Value| {
        json!({"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
               "consumerGroup": "g", "leaseId": m["leaseId"]})
    };

    // Ack + push: refused whole, the ack included.
    let res = h
        .txn(json!({"operations": [ack(&m1),
            {"type": "push", "items": [{"queue": "out", "payload": 1}]}]}))
        .await;
    assert_full(&h, res).await;
    assert!(
        h.broker
            .inspect()
            .messages("out", "Default")
            .unwrap()
            .is_empty()
    );

    // KV writes and timers in a transaction are refused too.
    let res = h
        .txn(json!({"kv": [{"op": "put", "ns": "n", "key": "k", "value": 1, "forever": true}]}))
        .await;
    assert_full(&h, res).await;

    // The refused transaction's ack, alone, goes through.
    let b = h.txn_ok(json!({"operations": [ack(&m1)]})).await;
    assert_eq!(b["success"], true, "{b}");
}

#[tokio::test]
async fn a_full_broker_refuses_kv_writes_and_timers_but_not_their_deletes() {
    let h = capped(2 * 1024, None).await;
    let (s, b) = h
        .post(
            "/api/v1/kv",
            json!({"operations": [
            {"op": "put", "ns": "n", "key": "big", "value": "y".repeat(3000), "forever": true}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = h
        .post("/api/v1/timers", json!({"operations": [
            {"op": "schedule", "queue": "q", "timerKey": "t", "delayMs": 60_000, "txn": "t1", "payload": "e30="}]}))
        .await;
    assert_full(&h, (s, b)).await;
    let res = h
        .post(
            "/api/v1/kv",
            json!({"operations": [
            {"op": "incr", "ns": "n", "key": "count", "by": 1, "forever": true}]}),
        )
        .await;
    assert_full(&h, res).await;

    // A delete is not refused: it is how space comes back.
    let (s, b) = h
        .post(
            "/api/v1/kv",
            json!({"operations": [{"op": "delete", "ns": "n", "key": "big"}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, b) = h
        .post("/api/v1/timers", json!({"operations": [
            {"op": "schedule", "queue": "q", "timerKey": "t", "delayMs": 60_000, "txn": "t1", "payload": "e30="}]}))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
}

#[tokio::test]
async fn the_stored_byte_count_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let h = capped(4 * 1024, Some(&file)).await;
    fill_up(&h, "q").await;
    let live = h.broker.stats().live_bytes;
    assert!(live >= 4 * 1024, "{live}");
    h.broker.shutdown().await;

    let h = capped(4 * 1024, Some(&file)).await;
    assert_eq!(h.broker.stats().live_bytes, live);
    let res = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "payload": 1}]}),
        )
        .await;
    assert_full(&h, res).await;
    h.broker.shutdown().await;

    // Without a cap the same file takes writes again.
    let again = MockBroker::builder()
        .data_file(&file)
        .start()
        .await
        .unwrap();
    let h = Harness::with(again, ManualClock::new());
    let (s, b) = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "payload": 1}]}),
        )
        .await;
    assert_eq!(s, StatusCode::CREATED, "{b}");
}
