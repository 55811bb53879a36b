//! `POST /api/v1/transaction`: the seed's example, every rollback reason, the reason
//! order, lease resolution, and "a rolled-back transaction wrote nothing".

mod common;

use common::{Harness, txns};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Pushes `order-7-paid` to `orders/p` and pops it as `billing`; returns the message.
async fn leased_order(h: &Harness) -> Value {
    h.push_one("orders", "p", "order-7-paid", json!({"orderId": "order-7"}))
        .await;
    let p = h
        .pop("/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all&batch=1")
        .await
        .expect("the order event");
    p["messages"][0].clone()
}

/// The seed's request, with the lease and partition of `msg`.
fn seed_body(msg: &Value) -> Value {
    json!({
      "operations": [
        { "type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"],
          "consumerGroup": "billing", "leaseId": msg["leaseId"] },
        { "type": "push", "items": [
          { "queue": "receipts", "partition": "customer-123",
            "transactionId": "receipt-order-7", "payload": { "orderId": "order-7", "total": 120.5 } } ] }
      ],
      "kv": [
        { "op": "put", "ns": "orders", "key": "order-7", "value": { "status": "paid" },
          "ttlSeconds": 2592000 },
        { "op": "putIfAbsent", "ns": "paid", "key": "order-7-paid", "value": true,
          "ttlSeconds": 86400, "required": true }
      ],
      "timers": [
        { "op": "schedule", "queue": "reminders", "timerKey": "order-7", "delayMs": 86400000,
          "txn": "reminder-order-7", "payload": "eyJvcmRlcklkIjoib3JkZXItNyJ9" }
      ]
    })
}

fn is_uuid(v: &Value) -> bool {
    v.as_str()
        .is_some_and(|s| s.len() == 36 && s.chars().filter(|c| *c == '-').count() == 4)
}

#[tokio::test]
async fn the_seed_example_commits_with_the_spec_result_shapes() {
    let h = Harness::new().await;
    let msg = leased_order(&h).await;
    let now = queen_mock_broker::Clock::now_micros(&h.clock);
    let out = h.txn_ok(seed_body(&msg)).await;
    assert_eq!(out["success"], true, "{out}");
    assert!(is_uuid(&out["transactionId"]), "{out}");
    let r = out["results"].as_array().unwrap();
    assert_eq!(r.len(), 5);
    assert_eq!(
        r[0],
        json!({"index": 0, "type": "ack", "success": true, "transactionId": "order-7-paid", "error": null, "dlq": false})
    );
    assert_eq!(r[1]["index"], 1);
    assert_eq!(r[1]["type"], "push");
    assert_eq!(r[1]["success"], true);
    assert_eq!(r[1]["transactionId"], "receipt-order-7");
    assert_eq!(r[1]["queueName"], "receipts");
    assert!(is_uuid(&r[1]["messageId"]));
    assert_eq!(
        (
            r[2]["index"].clone(),
            r[2]["op"].clone(),
            r[2]["applied"].clone(),
            r[2]["key"].clone(),
            r[2]["value"].clone(),
            r[2]["opIndex"].clone(),
            r[2]["type"].clone()
        ),
        (
            json!(2),
            json!("put"),
            json!(true),
            json!("order-7"),
            json!({"status": "paid"}),
            json!(0),
            json!("kv")
        )
    );
    assert_eq!(r[3]["op"], "putIfAbsent");
    assert_eq!(r[3]["applied"], true);
    assert_eq!(r[3]["opIndex"], 1);
    assert!(r[3]["version"].as_u64().unwrap() > r[2]["version"].as_u64().unwrap());
    assert_eq!(r[4]["ok"], true);
    assert_eq!(r[4]["status"], "scheduled");
    assert_eq!(r[4]["queue"], "reminders");
    assert_eq!(r[4]["timerKey"], "order-7");
    assert_eq!(r[4]["txn"], "reminder-order-7");
    assert_eq!(r[4]["index"], 4);
    assert_eq!(r[4]["opIndex"], 0);
    assert_eq!(r[4]["type"], "timer");
    let due = queen_mock_broker::clock::format_iso(now + 86_400_000_000);
    assert_eq!(r[4]["deliverAt"], due.as_str());

    // The effects are there: the receipt, the KV rows, the timer, and the ack.
    let receipt = h.pop("/api/v1/pop/queue/receipts").await.unwrap();
    assert_eq!(receipt["messages"][0]["id"], r[1]["messageId"]);
    assert_eq!(
        receipt["messages"][0]["data"],
        json!({"orderId": "order-7", "total": 120.5})
    );
    assert_eq!(
        h.kv_get("orders", "order-7").await["value"],
        json!({"status": "paid"})
    );
    let (_, timer) = h.get("/api/v1/timers/reminders/order-7").await;
    assert_eq!(timer["found"], true);
    assert_eq!(timer["messageId"], r[4]["messageId"]);
    assert!(
        h.pop("/api/v1/pop/queue/orders?consumerGroup=billing")
            .await
            .is_none(),
        "the event was acked"
    );
}

#[tokio::test]
async fn the_seed_example_sent_again_after_a_rewind_rolls_back_as_duplicate_and_writes_nothing() {
    let h = Harness::new().await;
    let msg = leased_order(&h).await;
    let first = h.txn_ok(seed_body(&msg)).await;
    assert_eq!(first["success"], true);
    let kv_version = first["results"][2]["version"].as_u64().unwrap();
    let row_before = h.kv_get("orders", "order-7").await;

    // The group is moved back and pops the event again under a new lease.
    let (s, _) = h
        .post(
            "/api/v1/consumer-groups/billing/queues/orders/seek",
            json!({"timestamp": "2000-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(s, 200);
    h.advance(5);
    let again = h
        .pop("/api/v1/pop/queue/orders?consumerGroup=billing&batch=1")
        .await
        .unwrap();
    let msg2 = again["messages"][0].clone();
    assert_ne!(msg2["leaseId"], msg["leaseId"]);

    let out = h.txn_ok(seed_body(&msg2)).await;
    assert_eq!(out["success"], false, "{out}");
    assert_eq!(out["reason"], "duplicate");
    assert_eq!(out["results"], json!([]));
    assert!(is_uuid(&out["transactionId"]));
    assert_ne!(
        out["transactionId"], first["transactionId"],
        "minted per call"
    );
    let error = out["error"].as_str().unwrap();
    assert!(
        error.contains("receipts/customer-123") && error.contains("original offset 0"),
        "{error}"
    );

    // Nothing was written: one receipt, the KV row untouched, the event still leased
    // and unacked, the timer as the first commit left it.
    let receipts = h.pop("/api/v1/pop/queue/receipts?batch=10").await.unwrap();
    assert_eq!(txns(&receipts), ["receipt-order-7"]);
    let row = h.kv_get("orders", "order-7").await;
    assert_eq!(row["version"].as_u64(), Some(kv_version));
    assert_eq!(row, row_before);
    let (_, timer) = h.get("/api/v1/timers/reminders/order-7").await;
    assert_eq!(timer["messageId"], first["results"][4]["messageId"]);
    assert!(
        h.pop("/api/v1/pop/queue/orders?consumerGroup=billing")
            .await
            .is_none(),
        "lease still held"
    );
    assert_eq!(
        h.ack_msg(&msg2, "completed").await["success"],
        true,
        "the event was not acked by the rollback"
    );
}

#[tokio::test]
async fn a_stale_lease_rolls_back_with_rejected_ack() {
    let h = Harness::new().await;
    h.configure("orders", json!({"leaseTime": 10})).await;
    let msg = leased_order(&h).await;
    h.advance(10);
    let out = h
        .txn_ok(json!({"operations": [
            {"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing", "leaseId": msg["leaseId"]},
            {"type": "push", "items": [{"queue": "out", "payload": 1}]}
        ]}))
        .await;
    assert_eq!(
        (out["success"].clone(), out["reason"].clone()),
        (json!(false), json!("rejected_ack")),
        "{out}"
    );
    assert!(h.pop("/api/v1/pop/queue/out").await.is_none());
}

#[tokio::test]
async fn an_ack_outside_the_leased_batch_rolls_back() {
    let h = Harness::new().await;
    h.push_one("q", "p", "a", json!(1)).await;
    h.push_one("q", "p", "b", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=1").await.unwrap();
    let m = &p["messages"][0];
    let out = h
        .txn_ok(json!({"operations": [{"type": "ack", "transactionId": "b", "partitionId": m["partitionId"], "leaseId": m["leaseId"]}]}))
        .await;
    assert_eq!(out["reason"], "rejected_ack", "{out}");
}

#[tokio::test]
async fn an_earlier_commit_that_released_the_lease_fences_a_repeat() {
    let h = Harness::new().await;
    let msg = leased_order(&h).await;
    let body = json!({"operations": [{"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing", "leaseId": msg["leaseId"]}]});
    assert_eq!(h.txn_ok(body.clone()).await["success"], true);
    let out = h.txn_ok(body).await;
    assert_eq!(out["reason"], "rejected_ack", "{out}");
}

#[tokio::test]
async fn unfenced_acks_follow_the_unfenced_rules() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 5})).await;
    h.push_one("q", "p", "a", json!(1)).await;
    h.push_one("q", "p", "f", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    let pid = p["partitionId"].clone();
    // Unknown message: not found after the cursor.
    let out = h
        .txn_ok(json!({"operations": [{"type": "ack", "transactionId": "zz", "partitionId": pid}]}))
        .await;
    assert_eq!(out["reason"], "rejected_ack");
    // No lease: acked even though another worker holds it.
    let out = h
        .txn_ok(json!({"operations": [{"type": "ack", "transactionId": "a", "partitionId": pid}]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    // Completed twice: a no-op, and the rest commits.
    let out = h
        .txn_ok(json!({"operations": [
            {"type": "ack", "transactionId": "a", "partitionId": pid},
            {"type": "push", "items": [{"queue": "side", "payload": 1}]}
        ]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    assert!(h.pop("/api/v1/pop/queue/side").await.is_some());
    // Already acked failed: refused.
    let out = h.txn_ok(json!({"operations": [{"type": "ack", "transactionId": "f", "partitionId": pid, "status": "failed"}]})).await;
    assert_eq!(out["success"], true);
    let out = h
        .txn_ok(json!({"operations": [{"type": "ack", "transactionId": "f", "partitionId": pid}]}))
        .await;
    assert_eq!(out["reason"], "rejected_ack", "{out}");
}

#[tokio::test]
async fn required_leases_supply_the_lease_of_acks_without_their_own() {
    let h = Harness::new().await;
    h.configure("orders", json!({"leaseTime": 10})).await;
    let msg = leased_order(&h).await;
    h.advance(10);
    // The one lease named by requiredLeases fences the ack: it has expired.
    let out = h
        .txn_ok(json!({
            "operations": [{"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing"}],
            "requiredLeases": [msg["leaseId"]]
        }))
        .await;
    assert_eq!(out["reason"], "rejected_ack", "{out}");
    // Two different leases name no single lease: the ack is unfenced and applies.
    let out = h
        .txn_ok(json!({
            "operations": [{"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing"}],
            "requiredLeases": [msg["leaseId"], "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37"]
        }))
        .await;
    assert_eq!(out["success"], true, "{out}");
}

#[tokio::test]
async fn another_acks_lease_fences_an_ack_without_its_own() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 10})).await;
    h.push_one("q", "p", "a", json!(1)).await;
    h.push_one("q", "p", "b", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    let (pid, lease) = (p["partitionId"].clone(), p["leaseId"].clone());
    h.advance(10);
    let out = h
        .txn_ok(json!({"operations": [
            {"type": "ack", "transactionId": "a", "partitionId": pid, "leaseId": lease},
            {"type": "ack", "transactionId": "b", "partitionId": pid}
        ]}))
        .await;
    assert_eq!(out["reason"], "rejected_ack");
}

#[tokio::test]
async fn a_repeated_push_inside_one_call_is_first_wins() {
    let h = Harness::new().await;
    let out = h
        .txn_ok(json!({"operations": [
            {"type": "push", "items": [
                {"queue": "q", "partition": "p", "transactionId": "t", "payload": 1},
                {"queue": "q", "partition": "p", "transactionId": "t", "payload": 2}
            ]}
        ]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["results"][1]["duplicate"], true);
    assert_eq!(
        out["results"][1]["messageId"],
        out["results"][0]["messageId"]
    );
    assert!(out["results"][0].get("duplicate").is_none());
    let p = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_eq!(p["messages"].as_array().unwrap().len(), 1);
    assert_eq!(p["messages"][0]["data"], 1);
}

#[tokio::test]
async fn the_flat_push_form_data_alias_default_payload_and_trace_id() {
    let h = Harness::new().await;
    let out = h
        .txn_ok(json!({"operations": [
            {"type": "push", "queue": "q", "partition": "p", "transactionId": "flat", "data": {"a": 1}, "traceId": "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37"},
            {"type": "push", "queue": "q", "partition": "p", "transactionId": "empty"}
        ]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    let p = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_eq!(p["messages"][0]["data"], json!({"a": 1}));
    assert_eq!(
        p["messages"][0]["traceId"],
        "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37"
    );
    assert_eq!(p["messages"][1]["data"], json!({}));
}

#[tokio::test]
async fn ack_statuses_inside_a_transaction() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    for t in ["r", "d"] {
        h.push_one("q", "p", t, json!(1)).await;
    }
    let p = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    let (pid, lease) = (p["partitionId"].clone(), p["leaseId"].clone());
    let out = h
        .txn_ok(json!({"operations": [
            {"type": "ack", "transactionId": "r", "partitionId": pid, "leaseId": lease, "status": "retry"},
            {"type": "ack", "transactionId": "d", "partitionId": pid, "leaseId": lease, "status": "dlq", "error": "poison"}
        ]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["results"][0]["dlq"], false);
    assert_eq!(out["results"][1]["dlq"], true);
    let (_, dlq) = h.get("/api/v1/dlq?queue=q").await;
    assert_eq!(dlq["messages"][0]["errorMessage"], "poison");
    let again = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    assert_eq!(txns(&again), ["r"], "retry redelivers; dlq does not");
    assert_eq!(again["messages"][0]["deliveryAttempt"], 2);
}

#[tokio::test]
async fn a_position_sets_the_next_offset_and_releases_the_lease() {
    let h = Harness::new().await;
    for i in 0..4 {
        h.push_one("q", "p", &format!("m{i}"), json!(i)).await;
    }
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all&batch=1")
        .await
        .unwrap();
    let out = h
        .txn_ok(json!({"positions": [{"queue": "q", "consumerGroup": "g", "partition": "p", "offset": 3}]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(
        out["results"],
        json!([{"index": 0, "type": "position", "opIndex": 0, "queue": "q", "consumerGroup": "g", "partition": "p", "offset": 3}])
    );
    assert_eq!(
        h.ack_msg(&p["messages"][0], "completed").await["success"],
        false,
        "lease released"
    );
    assert_eq!(
        txns(
            &h.pop("/api/v1/pop/queue/q?consumerGroup=g&batch=10")
                .await
                .unwrap()
        ),
        ["m3"]
    );
}

#[tokio::test]
async fn a_position_outside_the_partition_rolls_back() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    for pos in [
        json!({"queue": "q", "consumerGroup": "g", "partition": "nope", "offset": 0}),
        json!({"queue": "q", "consumerGroup": "g", "partition": "p", "offset": 2}),
    ] {
        let out = h.txn_ok(json!({"positions": [pos], "kv": [{"op": "put", "ns": "n", "key": "k", "value": 1, "forever": true}]})).await;
        assert_eq!(out["reason"], "rejected_position", "{out}");
    }
    assert_eq!(h.kv_get("n", "k").await["found"], false);
}

#[tokio::test]
async fn a_lost_required_kv_op_rolls_back_with_its_flat_index() {
    let h = Harness::new().await;
    let (_, first) = h
        .post("/api/v1/kv", json!({"operations": [{"op": "put", "ns": "paid", "key": "m", "value": "x", "forever": true}]}))
        .await;
    let version = first["results"][0]["version"].clone();
    let out = h
        .txn_ok(json!({
            "operations": [{"type": "push", "items": [{"queue": "q", "payload": 1}, {"queue": "q", "payload": 2}]}],
            "kv": [
                {"op": "put", "ns": "a", "key": "k", "value": 1, "forever": true},
                {"op": "putIfAbsent", "ns": "paid", "key": "m", "value": "y", "forever": true, "required": true}
            ]
        }))
        .await;
    assert_eq!(out["success"], false);
    assert_eq!(out["reason"], "kv_precondition");
    assert_eq!(out["ok"], false);
    assert_eq!(
        out["failedIndex"], 3,
        "2 push items, then kv[0], kv[1]: {out}"
    );
    assert_eq!(out["kvReason"], "exists");
    assert_eq!(out["version"], version);
    assert_eq!(out["value"], "x");
    assert_eq!(out["results"], json!([]));
    assert!(out["error"].as_str().unwrap().starts_with("QKV"));
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
    assert_eq!(h.kv_get("a", "k").await["found"], false);
}

#[tokio::test]
async fn a_lost_kv_op_without_required_is_applied_false_and_the_rest_commits() {
    let h = Harness::new().await;
    h.post("/api/v1/kv", json!({"operations": [{"op": "put", "ns": "n", "key": "taken", "value": 1, "forever": true}]}))
        .await;
    let out = h
        .txn_ok(json!({"kv": [
            {"op": "putIfAbsent", "ns": "n", "key": "taken", "value": 2, "forever": true},
            {"op": "put", "ns": "n", "key": "other", "value": 3, "forever": true}
        ]}))
        .await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["results"][0]["applied"], false);
    assert_eq!(out["results"][0]["reason"], "exists");
    assert_eq!(out["results"][0]["value"], 1);
    assert_eq!(h.kv_get("n", "other").await["value"], 3);
}

#[tokio::test]
async fn each_kv_reason_rolls_back_a_required_op() {
    let h = Harness::new().await;
    h.post(
        "/api/v1/kv",
        json!({"operations": [
            {"op": "put", "ns": "n", "key": "num", "value": 5, "forever": true},
            {"op": "put", "ns": "n", "key": "str", "value": "s", "forever": true}
        ]}),
    )
    .await;
    for (op, reason) in [
        (
            json!({"op": "putIfAbsent", "ns": "n", "key": "num", "value": 1, "forever": true}),
            "exists",
        ),
        (
            json!({"op": "delete", "ns": "n", "key": "missing"}),
            "absent",
        ),
        (
            json!({"op": "check", "ns": "n", "key": "num", "expect": 999_999}),
            "version",
        ),
        (
            json!({"op": "incr", "ns": "n", "key": "num", "delta": 10, "max": 10, "forever": true}),
            "limit",
        ),
        (
            json!({"op": "incr", "ns": "n", "key": "str", "forever": true}),
            "type",
        ),
    ] {
        let mut op = op;
        op["required"] = true.into();
        let out = h.txn_ok(json!({"kv": [op]})).await;
        assert_eq!(
            (out["reason"].clone(), out["kvReason"].clone()),
            (json!("kv_precondition"), json!(reason)),
            "{out}"
        );
        assert_eq!(out["failedIndex"], 0);
    }
}

#[tokio::test]
async fn the_reason_is_the_first_guard_in_the_spec_order() {
    let h = Harness::new().await;
    h.configure("orders", json!({"leaseTime": 10})).await;
    let msg = leased_order(&h).await;
    h.push_one("receipts", "customer-123", "receipt-order-7", json!(1))
        .await;
    h.post("/api/v1/kv", json!({"operations": [{"op": "put", "ns": "paid", "key": "m", "value": 1, "forever": true}]}))
        .await;
    h.advance(10);
    let stale_ack = json!({"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing", "leaseId": msg["leaseId"]});
    let dup_push = json!({"type": "push", "items": [{"queue": "receipts", "partition": "customer-123", "transactionId": "receipt-order-7", "payload": 1}]});
    let bad_pos =
        json!({"queue": "orders", "consumerGroup": "billing", "partition": "p", "offset": 99});
    let lost_kv = json!({"op": "putIfAbsent", "ns": "paid", "key": "m", "value": 1, "forever": true, "required": true});
    // Each pair is written with the later guard first in the body.
    let cases = [
        (
            json!({"operations": [dup_push.clone(), stale_ack.clone()]}),
            "rejected_ack",
        ),
        (
            json!({"operations": [dup_push.clone()], "positions": [bad_pos.clone()]}),
            "duplicate",
        ),
        (
            json!({"kv": [lost_kv.clone()], "positions": [bad_pos.clone()]}),
            "rejected_position",
        ),
        (
            json!({"kv": [lost_kv.clone()], "timers": [{"op": "schedule", "queue": "t", "timerKey": "k", "delayMs": 1, "payload": "e30="}]}),
            "kv_precondition",
        ),
        (
            json!({"operations": [dup_push, stale_ack], "kv": [lost_kv], "positions": [bad_pos]}),
            "rejected_ack",
        ),
    ];
    for (body, reason) in cases {
        let out = h.txn_ok(body.clone()).await;
        assert_eq!(out["reason"], reason, "{body} -> {out}");
    }
    let (_, t) = h.get("/api/v1/timers/t/k").await;
    assert_eq!(t["found"], false, "the rolled-back timer was not scheduled");
}

#[tokio::test]
async fn a_rolled_back_transaction_changed_nothing() {
    let h = Harness::new().await;
    for i in 0..3 {
        h.push_one("src", "p", &format!("m{i}"), json!(i)).await;
    }
    h.push_one("cursor", "p", "c0", json!(0)).await;
    h.push_one("cursor", "p", "c1", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/src?batch=1").await.unwrap();
    let m = p["messages"][0].clone();
    let (_, kv0) = h
        .post(
            "/api/v1/kv",
            json!({"operations": [
                {"op": "put", "ns": "gate", "key": "marker", "value": "set", "forever": true},
                {"op": "put", "ns": "state", "key": "count", "value": 10, "forever": true}
            ]}),
        )
        .await;
    let v_count = kv0["results"][1]["version"].as_u64().unwrap();
    let out = h
        .txn_ok(json!({
            "operations": [
                {"type": "ack", "transactionId": "m0", "partitionId": m["partitionId"], "leaseId": m["leaseId"]},
                {"type": "push", "items": [{"queue": "dst", "partition": "p", "transactionId": "new", "payload": 1}]}
            ],
            "kv": [
                {"op": "incr", "ns": "state", "key": "count", "delta": 5, "forever": true},
                {"op": "put", "ns": "state", "key": "fresh", "value": true, "ttlSeconds": 60},
                {"op": "putIfAbsent", "ns": "gate", "key": "marker", "value": "again", "forever": true, "required": true}
            ],
            "timers": [{"op": "schedule", "queue": "later", "timerKey": "k", "delayMs": 1000, "payload": "e30="}],
            "positions": [{"queue": "cursor", "consumerGroup": "__QUEUE_MODE__", "partition": "p", "offset": 2}]
        }))
        .await;
    assert_eq!(out["reason"], "kv_precondition", "{out}");
    // No state of any kind changed:
    // - the acked message is still leased and unacked;
    assert!(h.pop("/api/v1/pop/queue/src?batch=1").await.is_none());
    assert_eq!(h.ack_msg(&m, "completed").await["success"], true);
    // - no message was pushed, and its id is no dedup entry;
    assert!(h.pop("/api/v1/pop/queue/dst").await.is_none());
    assert_eq!(
        h.push_one("dst", "p", "new", json!(2)).await["status"],
        "queued"
    );
    // - the KV rows are as they were, and no version was consumed;
    let count = h.kv_get("state", "count").await;
    assert_eq!(
        (count["value"].clone(), count["version"].as_u64()),
        (json!(10), Some(v_count))
    );
    assert_eq!(h.kv_get("state", "fresh").await["found"], false);
    let (_, next) = h.post("/api/v1/kv", json!({"operations": [{"op": "put", "ns": "x", "key": "y", "value": 0, "forever": true}]})).await;
    assert_eq!(
        next["results"][0]["version"].as_u64(),
        Some(v_count + 1),
        "no version consumed"
    );
    // - no timer;
    assert_eq!(h.get("/api/v1/timers/later/k").await.1["found"], false);
    // - the cursor did not move.
    assert_eq!(
        txns(&h.pop("/api/v1/pop/queue/cursor?batch=10").await.unwrap()),
        ["c0", "c1"]
    );
}

#[tokio::test]
async fn retried_bodies_roll_back_harmlessly_when_they_carry_a_guard() {
    let h = Harness::new().await;
    let msg = leased_order(&h).await;
    // A fenced ack: the first commit released the lease.
    let fenced = json!({"operations": [{"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing", "leaseId": msg["leaseId"]}], "kv": [{"op": "incr", "ns": "c", "key": "fenced", "forever": true}]});
    assert_eq!(h.txn_ok(fenced.clone()).await["success"], true);
    assert_eq!(h.txn_ok(fenced).await["reason"], "rejected_ack");
    assert_eq!(h.kv_get("c", "fenced").await["value"], 1);
    // A deterministic push id.
    let pushed = json!({"operations": [{"type": "push", "items": [{"queue": "q", "transactionId": "det-1", "payload": 1}]}], "kv": [{"op": "incr", "ns": "c", "key": "pushed", "forever": true}]});
    assert_eq!(h.txn_ok(pushed.clone()).await["success"], true);
    assert_eq!(h.txn_ok(pushed).await["reason"], "duplicate");
    assert_eq!(h.kv_get("c", "pushed").await["value"], 1);
    // A required marker.
    let gated = json!({"kv": [{"op": "putIfAbsent", "ns": "done", "key": "step-1", "value": true, "forever": true, "required": true}, {"op": "incr", "ns": "c", "key": "gated", "forever": true}]});
    assert_eq!(h.txn_ok(gated.clone()).await["success"], true);
    assert_eq!(h.txn_ok(gated).await["reason"], "kv_precondition");
    assert_eq!(h.kv_get("c", "gated").await["value"], 1);
    // An ungated KV-only step runs again: the incr counts twice.
    let ungated = json!({"kv": [{"op": "incr", "ns": "c", "key": "ungated", "forever": true}]});
    assert_eq!(h.txn_ok(ungated.clone()).await["success"], true);
    assert_eq!(h.txn_ok(ungated).await["success"], true);
    assert_eq!(h.kv_get("c", "ungated").await["value"], 2);
}

#[tokio::test]
async fn an_unfenced_ack_does_not_stop_a_retry() {
    let h = Harness::new().await;
    let msg = leased_order(&h).await;
    let body = json!({"operations": [
        {"type": "ack", "transactionId": "order-7-paid", "partitionId": msg["partitionId"], "consumerGroup": "billing"},
        {"type": "push", "items": [{"queue": "q", "payload": 1}]}
    ]});
    assert_eq!(h.txn_ok(body.clone()).await["success"], true);
    assert_eq!(
        h.txn_ok(body).await["success"],
        true,
        "acking twice is a no-op"
    );
    let p = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_eq!(
        p["messages"].as_array().unwrap().len(),
        2,
        "the random-id push ran twice"
    );
}

#[tokio::test]
async fn a_timer_set_in_a_transaction_fires_when_the_clock_reaches_it() {
    let h = Harness::new().await;
    let out = h
        .txn_ok(json!({"timers": [{"op": "schedule", "queue": "reminders", "timerKey": "order-7", "delayMs": 60_000, "txn": "reminder-order-7", "payload": "eyJvcmRlcklkIjoib3JkZXItNyJ9"}]}))
        .await;
    let mid = out["results"][0]["messageId"].clone();
    h.advance(59);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert!(
        h.pop("/api/v1/pop/queue/reminders").await.is_none(),
        "never early"
    );
    h.advance(1);
    let mut fired = None;
    for _ in 0..40 {
        if let Some(p) = h.pop("/api/v1/pop/queue/reminders").await {
            fired = Some(p);
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let p = fired.expect("the timer fired");
    let m = &p["messages"][0];
    assert_eq!(m["id"], mid);
    assert_eq!(m["transactionId"], "reminder-order-7");
    assert_eq!(m["data"], json!({"orderId": "order-7"}));
}

#[tokio::test]
async fn every_call_gets_its_own_transaction_id() {
    let h = Harness::new().await;
    let body = json!({"kv": [{"op": "get", "ns": "n", "key": "k"}]});
    let a = h.txn_ok(body.clone()).await;
    let b = h.txn_ok(body).await;
    assert!(is_uuid(&a["transactionId"]) && is_uuid(&b["transactionId"]));
    assert_ne!(a["transactionId"], b["transactionId"]);
    assert_eq!(a["results"][0]["found"], false);
    let (s, _) = h.txn(json!({"operations": []})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_request_id_already_answered_is_never_applied_again() {
    use queen_mock_broker::engine::{DEFAULT_TENANT, requests};
    use queen_mock_broker::http::parse_transaction;
    let h = Harness::new().await;
    let engine = h.broker.engine();
    let body = br#"{"kv": [{"op": "incr", "ns": "c", "key": "n", "forever": true}]}"#;
    let id = requests::new_id();
    let first = engine
        .transaction_as(DEFAULT_TENANT, &id, parse_transaction(body).unwrap())
        .await
        .unwrap();
    let again = engine
        .transaction_as(DEFAULT_TENANT, &id, parse_transaction(body).unwrap())
        .await
        .unwrap();
    assert_eq!(first, again, "answered from the record");
    assert_eq!(h.kv_get("c", "n").await["value"], 1, "applied once");
    // A new request id is a new call: an ungated incr counts again.
    engine
        .transaction_as(
            DEFAULT_TENANT,
            &requests::new_id(),
            parse_transaction(body).unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(h.kv_get("c", "n").await["value"], 2);
}
