//! Acks: statuses, the retry limit, dead letters, fencing, repeats, batches, leases.

mod common;

use common::{Harness, txns};
use serde_json::{Value, json};

async fn one(h: &Harness, queue: &str) -> Value {
    let p = h
        .pop(&format!("/api/v1/pop/queue/{queue}?batch=1"))
        .await
        .expect("a message");
    p["messages"][0].clone()
}

#[tokio::test]
async fn completed_releases_the_lease_when_the_whole_batch_is_done() {
    let h = Harness::new().await;
    for i in 0..2 {
        h.push_one("q", "p", &format!("m{i}"), json!(i)).await;
    }
    let p = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    let r0 = h.ack_msg(&p["messages"][0], "completed").await;
    assert_eq!(
        r0,
        json!({"index": 0, "transactionId": "m0", "success": true, "error": null, "leaseReleased": false, "dlq": false, "noop": false})
    );
    let r1 = h.ack_msg(&p["messages"][1], "success").await;
    assert_eq!(r1["leaseReleased"], true, "{r1}");
    h.push_one("q", "p", "m2", json!(2)).await;
    assert_eq!(
        txns(&h.pop("/api/v1/pop/queue/q?batch=5").await.unwrap()),
        ["m2"]
    );
}

#[tokio::test]
async fn failed_is_redelivered_exactly_retry_limit_plus_one_times_then_dead_lettered() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 2})).await;
    h.push_one("q", "p", "m", json!({"k": 1})).await;
    for attempt in 1..=3 {
        let m = one(&h, "q").await;
        assert_eq!(m["deliveryAttempt"], attempt);
        let r = h
            .ack(json!({"transactionId": "m", "partitionId": m["partitionId"], "leaseId": m["leaseId"], "status": "failed", "error": format!("boom {attempt}")}))
            .await;
        assert_eq!(r["success"], true, "{r}");
        assert_eq!(r["dlq"], attempt == 3, "attempt {attempt}: {r}");
    }
    assert!(
        h.pop("/api/v1/pop/queue/q").await.is_none(),
        "dead-lettered after 3 = retryLimit + 1 deliveries"
    );
    let (s, dlq) = h.get("/api/v1/dlq?queue=q").await;
    assert_eq!(s, 200);
    assert_eq!(dlq["total"], 1);
    let d = &dlq["messages"][0];
    assert_eq!(d["transactionId"], "m");
    assert_eq!(d["errorMessage"], "boom 3");
    assert_eq!(d["retryCount"], 3);
    assert_eq!(d["data"], json!({"k": 1}));
    assert_eq!(d["consumerGroup"], "__QUEUE_MODE__");
    assert_eq!(dlq["pagination"], json!({"limit": 100, "offset": 0}));
}

#[tokio::test]
async fn an_unknown_status_counts_as_failed() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    h.push_one("q", "p", "m", json!(1)).await;
    let m = one(&h, "q").await;
    let r = h.ack_msg(&m, "COMPLETED").await;
    assert_eq!(
        r["dlq"], true,
        "case-sensitive: COMPLETED is failed, and retryLimit 0 dead-letters: {r}"
    );
}

#[tokio::test]
async fn without_a_dead_letter_queue_an_exhausted_message_is_dropped() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0, "deadLetterQueue": false}))
        .await;
    h.push_one("q", "p", "m", json!(1)).await;
    h.push_one("q", "p", "n", json!(2)).await;
    let m = one(&h, "q").await;
    let r = h.ack_msg(&m, "failed").await;
    assert_eq!(
        (r["success"].clone(), r["dlq"].clone()),
        (json!(true), json!(false)),
        "{r}"
    );
    let (_, dlq) = h.get("/api/v1/dlq?queue=q").await;
    assert_eq!(dlq["total"], 0);
    assert_eq!(dlq["messages"], json!([]));
    // Dropped means done: the partition moves on.
    assert_eq!(txns(&h.pop("/api/v1/pop/queue/q").await.unwrap()), ["n"]);
}

#[tokio::test]
async fn retry_redelivers_without_counting_an_attempt() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    h.push_one("q", "p", "m", json!(1)).await;
    for _ in 0..3 {
        let m = one(&h, "q").await;
        assert_eq!(h.ack_msg(&m, "retry").await["dlq"], false);
    }
    let m = one(&h, "q").await;
    assert_eq!(m["deliveryAttempt"], 4);
    // retryLimit 0: the first failed ack dead-letters, so retries counted nothing.
    assert_eq!(h.ack_msg(&m, "failed").await["dlq"], true);
}

#[tokio::test]
async fn dlq_dead_letters_at_once() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    let m = one(&h, "q").await;
    let r = h.ack_msg(&m, "dlq").await;
    assert_eq!(r["dlq"], true);
    assert_eq!(h.get("/api/v1/dlq?queue=q").await.1["total"], 1);
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
}

#[tokio::test]
async fn a_stale_lease_is_fenced() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 10})).await;
    h.push_one("q", "p", "m", json!(1)).await;
    let stale = one(&h, "q").await;
    h.advance(10);
    let fresh = one(&h, "q").await;
    assert_ne!(stale["leaseId"], fresh["leaseId"]);
    let r = h.ack_msg(&stale, "completed").await;
    assert_eq!(r["success"], false, "{r}");
    assert!(r["error"].as_str().unwrap().contains("lease"), "{r}");
    // The fresh holder's ack still works: the refused ack changed nothing.
    assert_eq!(h.ack_msg(&fresh, "completed").await["success"], true);
}

#[tokio::test]
async fn an_expired_lease_is_fenced_even_before_anyone_else_pops() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 10})).await;
    h.push_one("q", "p", "m", json!(1)).await;
    let m = one(&h, "q").await;
    h.advance(11);
    assert_eq!(h.ack_msg(&m, "completed").await["success"], false);
}

#[tokio::test]
async fn a_lease_fences_only_messages_of_its_batch() {
    let h = Harness::new().await;
    for t in ["a", "b"] {
        h.push_one("q", "p", t, json!(1)).await;
    }
    let p = h.pop("/api/v1/pop/queue/q?batch=1").await.unwrap();
    let m = &p["messages"][0];
    let r = h
        .ack(
            json!({"transactionId": "b", "partitionId": m["partitionId"], "leaseId": m["leaseId"]}),
        )
        .await;
    assert_eq!(
        r["success"], false,
        "b was not delivered under this lease: {r}"
    );
}

#[tokio::test]
async fn completed_twice_is_a_noop_and_other_repeats_are_refused() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    h.push_one("q", "p", "f", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=1").await.unwrap();
    let m = &p["messages"][0];
    assert_eq!(h.ack_msg(m, "completed").await["noop"], false);
    // Unfenced repeat: a no-op.
    let unfenced = json!({"transactionId": "m", "partitionId": m["partitionId"]});
    let r = h.ack(unfenced.clone()).await;
    assert_eq!(
        (r["success"].clone(), r["noop"].clone()),
        (json!(true), json!(true)),
        "{r}"
    );
    // Fenced repeat: the lease was released by the first ack.
    assert_eq!(h.ack_msg(m, "completed").await["success"], false);
    // A failed ack of a completed message is refused.
    let r = h
        .ack(json!({"transactionId": "m", "partitionId": m["partitionId"], "status": "failed"}))
        .await;
    assert_eq!(r["success"], false, "{r}");

    // An unfenced ack after a failed one (not yet redelivered) is refused.
    let f = one(&h, "q").await;
    assert_eq!(h.ack_msg(&f, "failed").await["success"], true);
    let r = h
        .ack(json!({"transactionId": "f", "partitionId": f["partitionId"]}))
        .await;
    assert_eq!(r["success"], false, "already acked with failed: {r}");
}

#[tokio::test]
async fn an_unfenced_ack_applies_even_under_another_workers_lease() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    let m = one(&h, "q").await;
    let r = h
        .ack(json!({"transactionId": "m", "partitionId": m["partitionId"]}))
        .await;
    assert_eq!(r["success"], true);
    assert_eq!(
        r["leaseReleased"], true,
        "it completed the leased batch: {r}"
    );
    // The holder's own ack is now a completed repeat.
    assert_eq!(
        h.ack_msg(&m, "completed").await["success"],
        false,
        "lease released"
    );
}

#[tokio::test]
async fn acks_of_unknown_messages_and_partitions_are_refused() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    let m = one(&h, "q").await;
    for body in [
        json!({"transactionId": "nope", "partitionId": m["partitionId"]}),
        json!({"transactionId": "m", "partitionId": "999999"}),
        json!({"transactionId": "m", "partitionId": "not-a-partition"}),
    ] {
        let r = h.ack(body.clone()).await;
        assert_eq!(r["success"], false, "{body} -> {r}");
        assert!(r["error"].is_string());
    }
}

#[tokio::test]
async fn a_batch_ack_answers_each_ack_in_order() {
    let h = Harness::new().await;
    for t in ["a", "b", "c"] {
        h.push_one("q", "p", t, json!(1)).await;
    }
    let p = h.pop("/api/v1/pop/queue/q?batch=3").await.unwrap();
    let (lease, pid) = (p["leaseId"].clone(), p["partitionId"].clone());
    let (s, out) = h
        .post(
            "/api/v1/ack/batch",
            json!({"acknowledgments": [
                {"transactionId": "a", "partitionId": pid, "leaseId": lease, "status": "completed"},
                {"transactionId": "zzz", "partitionId": pid, "leaseId": lease},
                {"transactionId": "b", "partitionId": pid, "leaseId": lease, "status": "completed"},
                {"transactionId": "c", "partitionId": pid, "leaseId": lease, "status": "completed"},
            ], "consumerGroup": null}),
        )
        .await;
    assert_eq!(s, 200);
    let out = out.as_array().unwrap();
    assert_eq!(out.len(), 4);
    let success: Vec<_> = out.iter().map(|r| r["success"].clone()).collect();
    assert_eq!(success, [true, false, true, true]);
    let idx: Vec<_> = out.iter().map(|r| r["index"].clone()).collect();
    assert_eq!(idx, [0, 1, 2, 3]);
    assert_eq!(out[3]["leaseReleased"], true);
}

#[tokio::test]
async fn a_lease_extends_while_live_and_never_revives() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 10})).await;
    h.push_one("q", "p", "m", json!(1)).await;
    let m = one(&h, "q").await;
    let lease = m["leaseId"].as_str().unwrap().to_string();
    h.advance(8);
    let res = h
        .http
        .post(h.url(&format!("/api/v1/lease/{lease}/extend")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "no body is fine");
    let ext: Value = res.json().await.unwrap();
    assert_eq!(ext["success"], true);
    assert_eq!(ext["renewed"], 1);
    assert_eq!(ext["newExpiresAt"], ext["expiresAt"]);
    assert_eq!(ext["newExpiresAt"], ext["lease_expires_at"]);
    h.advance(59);
    assert_eq!(
        h.ack_msg(&m, "completed").await["success"],
        true,
        "60 s default extension held"
    );

    h.push_one("q", "p", "n", json!(1)).await;
    let n = one(&h, "q").await;
    h.advance(11);
    let (s, ext) = h
        .post(
            &format!("/api/v1/lease/{}/extend", n["leaseId"].as_str().unwrap()),
            json!({}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(ext["success"], false);
    assert_eq!(ext["renewed"], 0);
    assert_eq!(ext["newExpiresAt"], Value::Null);
    let (_, unknown) = h
        .post("/api/v1/lease/not-a-lease/extend", json!({"seconds": 5}))
        .await;
    assert_eq!(unknown["success"], false);
}

#[tokio::test]
async fn a_fenced_completed_repeat_under_a_live_lease_is_a_noop() {
    let h = Harness::new().await;
    for t in ["a", "b"] {
        h.push_one("q", "p", t, json!(1)).await;
    }
    let p = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    let a = &p["messages"][0];
    assert_eq!(h.ack_msg(a, "completed").await["success"], true);
    // The cursor moved past `a`, the lease still holds `b`: the same ack again is a
    // completed repeat, not a refusal.
    let again = h.ack_msg(a, "completed").await;
    assert_eq!(
        (again["success"].clone(), again["noop"].clone()),
        (json!(true), json!(true)),
        "{again}"
    );
    let failed = h.ack_msg(a, "failed").await;
    assert_eq!(
        failed["success"], false,
        "a failed ack of a completed message is refused"
    );
    assert_eq!(
        h.ack_msg(&p["messages"][1], "completed").await["leaseReleased"],
        true
    );
}

/// The dead-letter listing charges its page to the broker's answer budget (issue 52,
/// item 4) and answers it whole: a page larger than the whole budget waits for all of
/// it and comes alone, never cut short (a client pages on by `limit`), and the room
/// comes back after.
#[tokio::test]
async fn a_dead_letter_page_over_the_answer_budget_comes_whole() {
    let h = Harness::with_answer_budget(3 << 20).await;
    let big = h.push_mib("q", "p", 4).await;
    for _ in 0..4 {
        let m = one(&h, "q").await;
        assert_eq!(h.ack_msg(&m, "dlq").await["dlq"], true);
    }
    for _ in 0..2 {
        let (s, page) = h.get("/api/v1/dlq?queue=q&limit=3").await;
        assert_eq!(s, 200, "{page}");
        let names: Vec<_> = page["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["transactionId"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(names, ["m0", "m1", "m2"], "the whole page, about 6 MiB");
        assert_eq!(page["total"], 4);
        assert_eq!(
            page["messages"][0]["data"].as_str().unwrap().len(),
            big.len()
        );
    }
    let (_, rest) = h.get("/api/v1/dlq?queue=q&limit=3&offset=3").await;
    assert_eq!(rest["messages"][0]["transactionId"], "m3");
}
