//! Consumer progress as Queen 2 does it (`wire.md` 4a): acks commit a cursor, a nack
//! clamps it for the rest of its call, subscriptions are per group and queue.
//!
//! Each test names the rule it pins; the official client's live tests
//! (`semantics.rs`, `core.rs` of `queen-mq` 2.7.0) assert the same behaviour.

mod common;

use std::time::Duration;

use common::{Harness, txns};
use queen_mock_broker::clock::{Clock, format_iso};
use queen_mock_broker::{ManualClock, MockBroker};
use serde_json::{Value, json};

/// Pushes `n` messages `m1..=mn` to one partition of `queue`.
async fn push_n(h: &Harness, queue: &str, n: usize) {
    for i in 1..=n {
        h.push_one(queue, "p", &format!("m{i}"), json!({"n": i}))
            .await;
    }
}

async fn pop_all(h: &Harness, queue: &str, batch: usize) -> Value {
    h.pop(&format!("/api/v1/pop/queue/{queue}?batch={batch}"))
        .await
        .expect("a batch")
}

/// `/ack/batch` of the popped messages with one status each, fenced by their lease.
async fn ack_batch(h: &Harness, msgs: &[Value], statuses: &[&str]) -> Vec<Value> {
    let items: Vec<Value> = msgs
        .iter()
        .zip(statuses)
        .map(|(m, s)| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": m["leaseId"], "status": s, "error": "nope"})
        })
        .collect();
    let (s, b) = h
        .post("/api/v1/ack/batch", json!({"acknowledgments": items}))
        .await;
    assert_eq!(s, 200, "{b}");
    b.as_array().expect("array").clone()
}

fn msgs(pop: &Value) -> Vec<Value> {
    pop["messages"].as_array().expect("messages").clone()
}

#[tokio::test]
async fn a_group_that_popped_an_empty_queue_reads_partitions_created_later() {
    // 4a: "the first pop of a named group on a queue fixes its starting point for the
    // whole queue, once ... a partition created later is read from its first message."
    let h = Harness::new().await;
    h.configure("nq", json!({})).await;
    assert!(
        h.pop("/api/v1/pop/queue/nq?wait=false&consumerGroup=g")
            .await
            .is_none()
    );
    h.advance(1);
    for p in ["p1", "p2", "p3"] {
        h.push_one("nq", p, &format!("{p}-m"), json!(p)).await;
    }
    let mut seen = Vec::new();
    for _ in 0..3 {
        let p = h
            .pop("/api/v1/pop/queue/nq?consumerGroup=g&autoAck=true")
            .await
            .expect("each new partition delivers to the group");
        seen.extend(txns(&p));
    }
    seen.sort();
    assert_eq!(seen, ["p1-m", "p2-m", "p3-m"]);
}

#[tokio::test]
async fn new_mode_skips_the_backlog_of_known_partitions_but_reads_new_ones_whole() {
    let h = Harness::new().await;
    h.push_one("q", "early", "backlog", json!(0)).await;
    h.advance(1);
    assert!(
        h.pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=new")
            .await
            .is_none(),
        "pre-subscription backlog is not delivered in new mode"
    );
    h.advance(1);
    h.push_one("q", "late", "late-1", json!(1)).await;
    h.push_one("q", "early", "early-2", json!(2)).await;
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&partitions=8&batch=10&autoAck=true")
        .await
        .unwrap();
    let mut got = txns(&p);
    got.sort();
    assert_eq!(got, ["early-2", "late-1"]);
    // Queue mode ignores the hint and reads everything.
    let all = h
        .pop("/api/v1/pop/queue/q?subscriptionMode=new&partitions=8&batch=10")
        .await
        .unwrap();
    assert_eq!(msgs(&all).len(), 3);
}

#[tokio::test]
async fn subscription_from_a_time_starts_every_partition_there() {
    let h = Harness::new().await;
    h.push_one("q", "a", "old", json!(0)).await;
    h.advance(10);
    let from = format_iso(h.clock.now_micros());
    h.push_one("q", "a", "new-a", json!(1)).await;
    h.push_one("q", "b", "new-b", json!(2)).await;
    let p = h
        .pop(&format!(
            "/api/v1/pop/queue/q?consumerGroup=g&subscriptionFrom={from}&partitions=4&batch=10"
        ))
        .await
        .unwrap();
    let mut got = txns(&p);
    got.sort();
    assert_eq!(got, ["new-a", "new-b"]);
}

#[tokio::test]
async fn acking_only_the_last_message_completes_the_whole_batch() {
    // 4a: "Acking only the last message of a batch completes the whole batch."
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 5})).await;
    push_n(&h, "q", 5).await;
    let p = pop_all(&h, "q", 5).await;
    let r = h.ack_msg(&msgs(&p)[4], "completed").await;
    assert_eq!(r["success"], true, "{r}");
    assert_eq!(r["leaseReleased"], true, "{r}");
    h.advance(10);
    assert!(h.pop("/api/v1/pop/queue/q?batch=10").await.is_none());
}

#[tokio::test]
async fn an_ack_completes_earlier_messages_of_the_batch_but_not_later_ones() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 5})).await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let r = h.ack_msg(&msgs(&p)[1], "completed").await;
    assert_eq!(r["leaseReleased"], false, "the batch is not done: {r}");
    h.advance(10);
    let again = pop_all(&h, "q", 10).await;
    assert_eq!(txns(&again), ["m3"]);
    assert_eq!(again["messages"][0]["deliveryAttempt"], 2);
}

#[tokio::test]
async fn below_the_cursor_a_completion_is_a_noop_and_a_nack_is_refused() {
    let h = Harness::new().await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let m = msgs(&p);
    assert_eq!(h.ack_msg(&m[1], "completed").await["success"], true);
    let late = h.ack_msg(&m[0], "completed").await;
    assert_eq!(
        (late["success"].clone(), late["noop"].clone()),
        (json!(true), json!(true)),
        "{late}"
    );
    for status in ["failed", "retry", "dlq"] {
        let r = h.ack_msg(&m[0], status).await;
        assert_eq!(r["success"], false, "{status}: {r}");
        assert!(r["error"].as_str().unwrap().contains("committed"), "{r}");
    }
    let fresh = h.ack_msg(&m[2], "completed").await;
    assert_eq!(
        (fresh["success"].clone(), fresh["noop"].clone()),
        (json!(true), json!(false))
    );
    assert_eq!(fresh["leaseReleased"], true);
}

#[tokio::test]
async fn a_failed_item_clamps_the_cursor_for_the_rest_of_its_call_and_releases_the_lease() {
    // 4a: "A failed or retry item at offset k clamps the cursor at k for the rest of
    // that call ... The lease is then released."
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 300, "retryLimit": 5}))
        .await;
    push_n(&h, "q", 5).await;
    let p = pop_all(&h, "q", 5).await;
    let r = ack_batch(
        &h,
        &msgs(&p),
        &["completed", "failed", "completed", "completed", "completed"],
    )
    .await;
    assert_eq!(r.len(), 5);
    assert!(r.iter().all(|x| x["success"] == true), "{r:?}");
    assert_eq!(r[1]["leaseReleased"], true, "{r:?}");
    // No wait for the lease: the nack released it.
    let again = pop_all(&h, "q", 10).await;
    assert_eq!(txns(&again), ["m2", "m3", "m4", "m5"]);
    assert_eq!(again["messages"][0]["deliveryAttempt"], 2);
}

#[tokio::test]
async fn a_retry_item_clamps_without_charging_the_retry_budget() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let r = ack_batch(&h, &msgs(&p), &["completed", "retry", "completed"]).await;
    assert!(r.iter().all(|x| x["success"] == true), "{r:?}");
    for round in 2..5 {
        let again = pop_all(&h, "q", 10).await;
        assert_eq!(txns(&again), ["m2", "m3"], "round {round}");
        assert_eq!(again["messages"][0]["deliveryAttempt"], round);
        ack_batch(&h, &msgs(&again)[..1], &["retry"]).await;
    }
    let (_, dlq) = h.get("/api/v1/dlq?queue=q").await;
    assert_eq!(dlq["total"], 0, "retry never dead-letters: {dlq}");
    // The budget is whole: with retryLimit 0 the first failure dead-letters.
    let again = pop_all(&h, "q", 10).await;
    assert_eq!(h.ack_msg(&msgs(&again)[0], "failed").await["dlq"], true);
}

#[tokio::test]
async fn nacking_a_whole_claim_in_one_call_succeeds_item_by_item_and_hands_it_back() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 20})).await;
    push_n(&h, "q", 4).await;
    let p = pop_all(&h, "q", 4).await;
    let r = ack_batch(&h, &msgs(&p), &["failed"; 4]).await;
    assert!(
        r.iter().all(|x| x["success"] == true && x["dlq"] == false),
        "{r:?}"
    );
    let again = pop_all(&h, "q", 10).await;
    assert_eq!(txns(&again), ["m1", "m2", "m3", "m4"]);
}

#[tokio::test]
async fn a_failed_ack_past_the_retry_limit_dead_letters_and_releases_the_rest() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 1})).await;
    push_n(&h, "q", 3).await;
    for attempt in 1..=2 {
        let p = pop_all(&h, "q", 3).await;
        assert_eq!(txns(&p), ["m1", "m2", "m3"], "attempt {attempt}");
        let r = h.ack_msg(&msgs(&p)[0], "failed").await;
        assert_eq!(r["dlq"], attempt == 2, "{r}");
        assert_eq!(r["leaseReleased"], true, "{r}");
    }
    // m1 is dead; the rest come back at once, not after the lease.
    assert_eq!(txns(&pop_all(&h, "q", 10).await), ["m2", "m3"]);
    let (_, dlq) = h.get("/api/v1/dlq?queue=q").await;
    assert_eq!(dlq["total"], 1);
}

#[tokio::test]
async fn a_dlq_ack_dead_letters_now_and_moves_the_cursor_past_it() {
    let h = Harness::new().await;
    push_n(&h, "q", 2).await;
    let p = pop_all(&h, "q", 2).await;
    let r = h.ack_msg(&msgs(&p)[0], "dlq").await;
    assert_eq!(
        (r["success"].clone(), r["dlq"].clone()),
        (json!(true), json!(true)),
        "{r}"
    );
    let r = h.ack_msg(&msgs(&p)[1], "completed").await;
    assert_eq!(r["leaseReleased"], true, "{r}");
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
}

#[tokio::test]
async fn a_dead_letter_is_settled_but_completing_it_later_is_refused() {
    // transaction.md: an unfenced ack "still rolls back with rejected_ack when the
    // message ... was already acked with a failed, retry or dlq status".
    let h = Harness::new().await;
    push_n(&h, "q", 2).await;
    let p = pop_all(&h, "q", 2).await;
    assert_eq!(h.ack_msg(&msgs(&p)[0], "dlq").await["dlq"], true);
    let pid = p["partitionId"].clone();
    let r = h
        .ack(json!({"transactionId": "m1", "partitionId": pid}))
        .await;
    assert_eq!(r["success"], false, "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("dead-lettered"),
        "{r}"
    );
    let t = h
        .txn_ok(json!({"operations": [{"type": "ack", "transactionId": "m1", "partitionId": pid}]}))
        .await;
    assert_eq!(t["reason"], "rejected_ack", "{t}");
}

#[tokio::test]
async fn an_unknown_transaction_id_is_unresolved_and_costs_the_holder_nothing() {
    let h = Harness::new().await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let mut ghost = msgs(&p)[0].clone();
    ghost["transactionId"] = json!("never-pushed");
    for status in ["completed", "failed"] {
        let r = h.ack_msg(&ghost, status).await;
        assert_eq!(r["success"], false, "{r}");
        assert!(r["error"].as_str().unwrap().contains("unresolv"), "{r}");
    }
    let r = ack_batch(&h, &msgs(&p), &["completed"; 3]).await;
    assert!(r.iter().all(|x| x["success"] == true), "{r:?}");
    assert_eq!(r[2]["leaseReleased"], true);
}

#[tokio::test]
async fn a_lapsed_lease_fences_its_acks_but_an_unfenced_ack_still_commits() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 1})).await;
    push_n(&h, "q", 1).await;
    let p = pop_all(&h, "q", 1).await;
    h.advance(2);
    let fenced = h.ack_msg(&msgs(&p)[0], "completed").await;
    assert_eq!(fenced["success"], false);
    assert_eq!(fenced["error"], "invalid or expired lease");
    let unfenced = h
        .ack(json!({"transactionId": "m1", "partitionId": p["partitionId"]}))
        .await;
    assert_eq!(unfenced["success"], true, "{unfenced}");
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
}

#[tokio::test]
async fn a_transaction_acking_the_last_message_completes_the_batch_and_a_dead_lease_rolls_back() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 5})).await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let last = &msgs(&p)[2];
    let step = json!({"operations": [{"type": "ack", "transactionId": "m3",
        "partitionId": last["partitionId"], "leaseId": last["leaseId"]}]});
    assert_eq!(h.txn_ok(step.clone()).await["success"], true);
    h.advance(10);
    assert!(
        h.pop("/api/v1/pop/queue/q").await.is_none(),
        "m1 and m2 were completed with m3"
    );
    let again = h.txn_ok(step).await;
    assert_eq!(again["success"], false);
    assert_eq!(again["reason"], "rejected_ack", "{again}");
}

#[tokio::test]
async fn a_transaction_nack_clamps_like_an_ack_batch() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 5})).await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let ops: Vec<Value> = msgs(&p)
        .iter()
        .zip(["completed", "failed", "completed"])
        .map(|(m, s)| {
            json!({"type": "ack", "transactionId": m["transactionId"],
            "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": s})
        })
        .collect();
    assert_eq!(h.txn_ok(json!({"operations": ops})).await["success"], true);
    assert_eq!(txns(&pop_all(&h, "q", 10).await), ["m2", "m3"]);
}

#[tokio::test]
async fn acks_move_only_their_own_groups_cursor() {
    let h = Harness::new().await;
    push_n(&h, "q", 3).await;
    let w = h
        .pop("/api/v1/pop/queue/q?consumerGroup=worker&subscriptionMode=all&batch=3")
        .await
        .unwrap();
    ack_batch(&h, &msgs(&w), &["completed"; 3]).await;
    assert!(
        h.pop("/api/v1/pop/queue/q?consumerGroup=worker")
            .await
            .is_none()
    );
    let a = h
        .pop("/api/v1/pop/queue/q?consumerGroup=auditor&subscriptionMode=all&batch=3")
        .await
        .unwrap();
    assert_eq!(txns(&a), ["m1", "m2", "m3"]);
}

#[tokio::test]
async fn a_multi_partition_pop_drains_several_partitions_under_one_lease_sharing_batch() {
    let h = Harness::new().await;
    for p in ["a", "b", "c"] {
        for i in 0..2 {
            h.push_one("q", p, &format!("{p}{i}"), json!(i)).await;
        }
    }
    let p = h
        .pop("/api/v1/pop/queue/q?partitions=3&batch=5")
        .await
        .unwrap();
    let m = msgs(&p);
    assert_eq!(m.len(), 5, "batch caps the whole claim: {p}");
    assert_eq!(p["partitionsClaimed"], 3);
    assert!(m.iter().all(|x| x["leaseId"] == p["leaseId"]));
    let mut parts: Vec<&str> = m.iter().map(|x| x["partition"].as_str().unwrap()).collect();
    parts.dedup();
    assert_eq!(parts.len(), 3, "partition by partition: {parts:?}");
}

#[tokio::test]
async fn a_waiting_named_group_wakes_when_a_new_partition_gets_a_message() {
    let h = Harness::new().await;
    h.configure("q", json!({})).await;
    assert!(h.pop("/api/v1/pop/queue/q?consumerGroup=g").await.is_none());
    let url = h.url("/api/v1/pop/queue/q?consumerGroup=g&wait=true&timeout=20000");
    let http = h.http.clone();
    let waiting = tokio::spawn(async move { http.get(url).send().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(200)).await;
    h.advance(1);
    let started = std::time::Instant::now();
    h.push_one("q", "brand-new", "hello", json!(1)).await;
    let res = waiting.await.unwrap();
    assert_eq!(res.status(), 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woke on the push"
    );
    let body: Value = res.json().await.unwrap();
    assert_eq!(txns(&body), ["hello"]);
}

#[tokio::test]
async fn cursor_and_lease_survive_a_restart_in_the_middle_of_a_batch() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let clock = ManualClock::new();
    let start = |clock: ManualClock| {
        let file = file.clone();
        async move {
            MockBroker::builder()
                .data_file(file)
                .clock(clock)
                .start()
                .await
                .unwrap()
        }
    };
    let h = Harness::with(start(clock.clone()).await, clock.clone());
    h.configure("q", json!({"leaseTime": 30})).await;
    push_n(&h, "q", 3).await;
    let p = pop_all(&h, "q", 3).await;
    let m = msgs(&p);
    assert_eq!(h.ack_msg(&m[0], "completed").await["success"], true);
    h.broker.shutdown().await;

    let h = Harness::with(start(clock.clone()).await, clock.clone());
    assert!(
        h.pop("/api/v1/pop/queue/q").await.is_none(),
        "the lease is still live after the restart"
    );
    let r = h.ack_msg(&m[1], "completed").await;
    assert_eq!(
        (r["success"].clone(), r["leaseReleased"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );
    assert_eq!(
        h.ack_msg(&m[0], "completed").await["noop"],
        true,
        "the cursor survived"
    );
    h.advance(31);
    let again = pop_all(&h, "q", 10).await;
    assert_eq!(txns(&again), ["m3"], "only what the cursor had not passed");
    h.broker.shutdown().await;
}
