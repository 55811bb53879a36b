//! The exact JSON body the transaction builder sends, one builder method at a time,
//! captured by a wiremock broker and compared with a literal `json!`.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use queen_sdk::{AckStatus, Client, LockGuard, Message, RetryPolicy, TransactionBuilder, Ttl};
use serde_json::{Value, json};
use wiremock::matchers::{body_json, header, method, path};
use wiremock::{Mock, MockServer};

mod common;
use common::Commits;

/// The lease of the spec's example.
const LEASE_A: &str = "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37";
/// A second lease that sorts before `LEASE_A`.
const LEASE_B: &str = "0199a7c2-5e1b-7f3a-8c21-00000000b002";

/// A popped message as `wire.md` section 4 shows it.
fn message(id: &str, txn: &str, partition_id: &str, lease: &str, group: &str) -> Message<Value> {
    serde_json::from_value(json!({
        "id": id,
        "transactionId": txn,
        "traceId": null,
        "data": {"orderId": "order-7", "customer": "customer-123", "total": 120.5},
        "producerSub": null,
        "createdAt": "2026-10-01T09:14:03.512887Z",
        "partitionId": partition_id,
        "partition": "customer-123",
        "leaseId": lease,
        "consumerGroup": group,
        "queue": "orders",
        "offset": 17,
        "deliveryAttempt": 1
    }))
    .expect("a pop message decodes")
}

/// The spec's event, delivered to `billing` under `LEASE_A`.
fn order_paid() -> Message<Value> {
    message(
        "0199a7c2-5e1a-7000-8000-000000000007",
        "order-7-paid",
        "42",
        LEASE_A,
        "billing",
    )
}

/// Another message of another partition, under `LEASE_B`.
fn order_shipped() -> Message<Value> {
    message(
        "0199a7c2-5e1a-7000-8000-000000000008",
        "order-8-paid",
        "43",
        LEASE_B,
        "billing",
    )
}

fn client(server: &MockServer) -> Client {
    Client::builder()
        .url(server.uri())
        .retry(RetryPolicy::none())
        .build()
        .expect("client")
}

/// Commits the transaction `build` makes against a fresh broker and answers the one
/// body it received, without the SDK's step marker: the marker's own rule is pinned by
/// `the_step_marker_goes_first_where_nothing_else_guards_a_resend`, and here it is
/// checked for its shape wherever it comes.
async fn sent(build: impl FnOnce(TransactionBuilder) -> TransactionBuilder) -> Value {
    let mut body = sent_whole(build).await;
    let Some(kv) = body.get_mut("kv").and_then(Value::as_array_mut) else {
        return body;
    };
    if kv
        .first()
        .is_some_and(|op| op["ns"] == queen_sdk::STEP_MARKER_NS)
    {
        let marker = kv.remove(0);
        assert_eq!(marker["op"], "putIfAbsent", "{marker}");
        assert_eq!(
            (&marker["value"], &marker["required"]),
            (&json!(true), &json!(true))
        );
        assert!(marker["key"].as_str().is_some_and(|k| !k.is_empty()));
        if kv.is_empty() {
            body.as_object_mut().unwrap().remove("kv");
        }
    }
    body
}

/// As [`sent`], the body whole.
async fn sent_whole(build: impl FnOnce(TransactionBuilder) -> TransactionBuilder) -> Value {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .and(header("content-type", "application/json"))
        .respond_with(Commits { positions: true })
        .expect(1)
        .mount(&server)
        .await;
    let c = client(&server);
    let outcome = build(c.transaction()).commit().await.expect("commit");
    assert!(outcome.is_committed());
    let received = server.received_requests().await.expect("recording is on");
    assert_eq!(received.len(), 1, "exactly one request");
    received[0].body_json().expect("the body is JSON")
}

/// The `transactionId` of the `n`th push operation's only item.
fn push_id(body: &Value, n: usize) -> String {
    let pushes: Vec<&Value> = body["operations"]
        .as_array()
        .expect("operations")
        .iter()
        .filter(|o| o["type"] == "push")
        .collect();
    let items = pushes[n]["items"].as_array().expect("items");
    assert_eq!(items.len(), 1);
    items[0]["transactionId"]
        .as_str()
        .expect("a string id")
        .to_string()
}

fn uuid_version(id: &str) -> usize {
    uuid::Uuid::parse_str(id)
        .unwrap_or_else(|e| panic!("{id:?} is not a UUID: {e}"))
        .get_version_num()
}

// --- the seed's example -------------------------------------------------------------

/// The spec's Example, built with the builder, is the spec's body plus what every SDK
/// adds: the ack's `status` and its lease in `requiredLeases`, and the push's partition.
#[tokio::test]
async fn the_seed_step_sends_the_spec_example_body() {
    let expected = json!({
      "operations": [
        { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
          "consumerGroup": "billing", "leaseId": "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37",
          "status": "completed" },
        { "type": "push", "items": [
          { "queue": "receipts", "partition": "customer-123",
            "transactionId": "receipt-order-7", "payload": { "orderId": "order-7", "total": 120.5 } } ] }
      ],
      "requiredLeases": ["0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37"],
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
    });
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .and(body_json(&expected))
        .respond_with(Commits { positions: true })
        .expect(1)
        .mount(&server)
        .await;
    let msg = order_paid();
    let outcome = client(&server)
        .transaction()
        .ack(&msg)
        .push("receipts", |p| {
            p.partition("customer-123")
                .transaction_id("receipt-order-7")
                .payload(&json!({"orderId": "order-7", "total": 120.5}))
        })
        .kv(|k| {
            k.put(
                "orders",
                "order-7",
                &json!({"status": "paid"}),
                Ttl::days(30),
            )
        })
        .once("paid", "order-7-paid", Ttl::days(1))
        .timer("reminders", "order-7", |t| {
            t.after(Duration::from_secs(86_400))
                .txn("reminder-order-7")
                .payload(&json!({"orderId": "order-7"}))
        })
        .commit()
        .await
        .expect("the body matched the spec's example");
    assert!(outcome.is_committed());
}

// --- acks ---------------------------------------------------------------------------

#[tokio::test]
async fn ack_puts_the_lease_on_the_ack_and_in_required_leases() {
    let msg = order_paid();
    let body = sent(|t| t.ack(&msg)).await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
                  "consumerGroup": "billing", "leaseId": LEASE_A, "status": "completed" }
            ],
            "requiredLeases": [LEASE_A]
        })
    );
}

#[tokio::test]
async fn ack_takes_the_consumer_group_from_the_message() {
    let msg = message("m-1", "t-1", "42", LEASE_A, "__QUEUE_MODE__");
    let body = sent(|t| t.ack(&msg)).await;
    assert_eq!(body["operations"][0]["consumerGroup"], "__QUEUE_MODE__");
}

#[tokio::test]
async fn ack_with_completed_is_the_same_as_ack() {
    let msg = order_paid();
    let a = sent(|t| t.ack(&msg)).await;
    let b = sent(|t| t.ack_with(&msg, AckStatus::Completed)).await;
    assert_eq!(a, b);
}

#[tokio::test]
async fn ack_with_failed_sends_status_failed_and_the_error() {
    let msg = order_paid();
    let body = sent(|t| {
        t.ack_with(
            &msg,
            AckStatus::Failed {
                error: "payment provider down".into(),
            },
        )
    })
    .await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
                  "consumerGroup": "billing", "leaseId": LEASE_A, "status": "failed",
                  "error": "payment provider down" }
            ],
            "requiredLeases": [LEASE_A]
        })
    );
}

#[tokio::test]
async fn ack_with_retry_sends_status_retry_and_no_error() {
    let msg = order_paid();
    let body = sent(|t| t.ack_with(&msg, AckStatus::Retry)).await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
                  "consumerGroup": "billing", "leaseId": LEASE_A, "status": "retry" }
            ],
            "requiredLeases": [LEASE_A]
        })
    );
}

#[tokio::test]
async fn ack_with_dlq_sends_status_dlq_and_no_error() {
    let msg = order_paid();
    let body = sent(|t| t.ack_with(&msg, AckStatus::Dlq)).await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
                  "consumerGroup": "billing", "leaseId": LEASE_A, "status": "dlq" }
            ],
            "requiredLeases": [LEASE_A]
        })
    );
}

#[tokio::test]
async fn two_acks_of_two_leases_list_both_leases_sorted() {
    let (a, b) = (order_paid(), order_shipped());
    let body = sent(|t| t.ack(&a).ack(&b)).await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
                  "consumerGroup": "billing", "leaseId": LEASE_A, "status": "completed" },
                { "type": "ack", "transactionId": "order-8-paid", "partitionId": "43",
                  "consumerGroup": "billing", "leaseId": LEASE_B, "status": "completed" }
            ],
            // Sorted: LEASE_B < LEASE_A.
            "requiredLeases": [LEASE_B, LEASE_A]
        })
    );
    // The order of the acks does not change the list.
    let reversed = sent(|t| t.ack(&b).ack(&a)).await;
    assert_eq!(reversed["requiredLeases"], json!([LEASE_B, LEASE_A]));
}

#[tokio::test]
async fn two_acks_of_the_same_lease_list_it_once() {
    let a = order_paid();
    let b = message("m-9", "order-9-paid", "42", LEASE_A, "billing");
    let body = sent(|t| t.ack(&a).ack(&b)).await;
    assert_eq!(body["requiredLeases"], json!([LEASE_A]));
    assert_eq!(body["operations"][0]["leaseId"], LEASE_A);
    assert_eq!(body["operations"][1]["leaseId"], LEASE_A);
    assert_eq!(body["operations"][1]["transactionId"], "order-9-paid");
}

#[tokio::test]
async fn an_ack_of_an_auto_ack_message_has_no_lease_and_no_required_leases() {
    let msg = message("m-1", "order-7-paid", "42", "", "billing");
    assert!(!msg.is_leased());
    let body = sent(|t| t.ack(&msg)).await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "ack", "transactionId": "order-7-paid", "partitionId": "42",
                  "consumerGroup": "billing", "status": "completed" }
            ]
        })
    );
}

// --- pushes -------------------------------------------------------------------------

#[tokio::test]
async fn push_sends_partition_payload_transaction_id_and_trace_id() {
    let body = sent(|t| {
        t.push("receipts", |p| {
            p.partition("customer-123")
                .payload(&json!({"orderId": "order-7", "total": 120.5}))
                .transaction_id("receipt-order-7")
                .trace_id("4bf92f3577b34da6a3ce929d0e0e4736")
        })
    })
    .await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "push", "items": [
                    { "queue": "receipts", "partition": "customer-123",
                      "transactionId": "receipt-order-7",
                      "payload": { "orderId": "order-7", "total": 120.5 },
                      "traceId": "4bf92f3577b34da6a3ce929d0e0e4736" } ] }
            ]
        })
    );
}

#[tokio::test]
async fn push_defaults_to_the_default_partition_and_an_empty_object() {
    let body = sent(|t| t.push("receipts", |p| p.transaction_id("r-1"))).await;
    assert_eq!(
        body,
        json!({
            "operations": [
                { "type": "push", "items": [
                    { "queue": "receipts", "partition": "Default",
                      "transactionId": "r-1", "payload": {} } ] }
            ]
        })
    );
}

#[tokio::test]
async fn push_keeps_a_typed_payload_as_json() {
    #[derive(serde::Serialize)]
    #[serde(rename_all = "camelCase")]
    struct Receipt<'a> {
        order_id: &'a str,
        total: f64,
        lines: Vec<u32>,
    }
    let body = sent(|t| {
        t.push("receipts", |p| {
            p.transaction_id("r-1").payload(&Receipt {
                order_id: "order-7",
                total: 120.5,
                lines: vec![1, 2],
            })
        })
    })
    .await;
    assert_eq!(
        body["operations"][0]["items"][0]["payload"],
        json!({"orderId": "order-7", "total": 120.5, "lines": [1, 2]})
    );
}

/// The seed step's push, without an explicit id.
fn receipt_step(t: TransactionBuilder, msg: &Message<Value>) -> TransactionBuilder {
    t.ack(msg).push("receipts", |p| {
        p.partition("customer-123")
            .payload(&json!({"orderId": "order-7"}))
    })
}

#[tokio::test]
async fn a_push_in_a_step_that_acks_gets_a_derived_id_stable_across_builds() {
    let msg = order_paid();
    let first = push_id(&sent(|t| receipt_step(t, &msg)).await, 0);
    let second = push_id(&sent(|t| receipt_step(t, &msg)).await, 0);
    assert_eq!(first, second, "the same step derives the same id");
    // The message has a broker-made UUIDv7 id: the derived one starts with its time.
    assert_eq!(uuid_version(&first), 8, "a derived, time-ordered UUID");
    assert_eq!(
        first[..13],
        msg.id[..13],
        "the acked message's timestamp leads"
    );
    // A later message's step sorts after it; another of the same time differs.
    let later = message(
        "0199a7c2-6000-7000-8000-000000000009",
        "order-9-paid",
        "42",
        LEASE_A,
        "billing",
    );
    let after = push_id(&sent(|t| receipt_step(t, &later)).await, 0);
    assert!(first < after, "{first} sorts before {after}");
    let sibling = push_id(&sent(|t| receipt_step(t, &order_shipped())).await, 0);
    assert_ne!(first, sibling);
}

#[tokio::test]
async fn a_push_acking_a_message_not_named_by_a_uuidv7_gets_a_name_based_id() {
    // A broker that names messages otherwise (a UUIDv4, or any text): nothing to order
    // by, so the id is the UUIDv5 of the step, stable as ever.
    for id in ["6f1c0b8e-2d4a-4c3b-9a1e-5b7d2c9f0a11", "message-7"] {
        let msg = message(id, "order-7-paid", "42", LEASE_A, "billing");
        let first = push_id(&sent(|t| receipt_step(t, &msg)).await, 0);
        let second = push_id(&sent(|t| receipt_step(t, &msg)).await, 0);
        assert_eq!(first, second);
        assert_eq!(
            uuid_version(&first),
            5,
            "a derived (name-based) UUID for {id}"
        );
    }
}

#[tokio::test]
async fn the_derived_push_id_survives_a_redelivery_under_a_new_lease() {
    // The spec's example: the group is seeked back and the same event pops again under a
    // new lease; the step must derive the same receipt id so that it rolls back.
    let first = order_paid();
    let mut again = order_paid();
    again.lease_id = LEASE_B.into();
    again.delivery_attempt = Some(1);
    let a = push_id(&sent(|t| receipt_step(t, &first)).await, 0);
    let b = push_id(&sent(|t| receipt_step(t, &again)).await, 0);
    assert_eq!(a, b);
}

#[tokio::test]
async fn the_derived_push_id_differs_by_queue() {
    let msg = order_paid();
    let base = push_id(&sent(|t| receipt_step(t, &msg)).await, 0);
    let other = push_id(
        &sent(|t| {
            t.ack(&msg).push("invoices", |p| {
                p.partition("customer-123")
                    .payload(&json!({"orderId": "order-7"}))
            })
        })
        .await,
        0,
    );
    assert_ne!(base, other);
}

#[tokio::test]
async fn the_derived_push_id_differs_by_partition() {
    let msg = order_paid();
    let base = push_id(&sent(|t| receipt_step(t, &msg)).await, 0);
    let other = push_id(
        &sent(|t| {
            t.ack(&msg).push("receipts", |p| {
                p.partition("customer-456")
                    .payload(&json!({"orderId": "order-7"}))
            })
        })
        .await,
        0,
    );
    assert_ne!(base, other);
    // The default partition is a partition too.
    let default = push_id(
        &sent(|t| t.ack(&msg).push("receipts", |p| p.payload(&json!({})))).await,
        0,
    );
    assert_ne!(base, default);
}

#[tokio::test]
async fn the_derived_push_id_differs_by_position_in_the_step() {
    let msg = order_paid();
    // Two pushes to the same queue and partition in one step are two messages.
    let body = sent(|t| {
        t.ack(&msg)
            .push("receipts", |p| p.partition("customer-123").payload(&1))
            .push("receipts", |p| p.partition("customer-123").payload(&2))
    })
    .await;
    let (first, second) = (push_id(&body, 0), push_id(&body, 1));
    assert_ne!(first, second);
    // The first one is the same as in a step with only that push.
    let alone = push_id(
        &sent(|t| {
            t.ack(&msg)
                .push("receipts", |p| p.partition("customer-123").payload(&1))
        })
        .await,
        0,
    );
    assert_eq!(first, alone);
}

#[tokio::test]
async fn the_derived_push_id_differs_by_acked_message() {
    let (a, b) = (order_paid(), order_shipped());
    let by_a = push_id(&sent(|t| receipt_step(t, &a)).await, 0);
    let by_b = push_id(&sent(|t| receipt_step(t, &b)).await, 0);
    assert_ne!(by_a, by_b);
    let by_both = push_id(&sent(|t| receipt_step(t.ack(&b), &a)).await, 0);
    assert_ne!(by_both, by_a);
    assert_ne!(by_both, by_b);
    // The order of the acks does not matter.
    let by_both_reversed = push_id(&sent(|t| receipt_step(t, &a).ack(&b)).await, 0);
    assert_eq!(by_both, by_both_reversed);
}

/// Named groups each see every message (fan-out, `wire.md` section 4): two groups that
/// each run their own step on the same message and push to the same queue and partition
/// are two different steps, so their derived ids must differ. Otherwise the second
/// group's step rolls back as `duplicate` although it never ran.
#[tokio::test]
async fn the_derived_push_id_differs_by_consumer_group() {
    let billing = order_paid();
    let mut analytics = order_paid();
    analytics.consumer_group = "analytics".into();
    analytics.lease_id = LEASE_B.into();
    let a = push_id(
        &sent(|t| t.ack(&billing).push("audit", |p| p.payload(&1))).await,
        0,
    );
    let b = push_id(
        &sent(|t| t.ack(&analytics).push("audit", |p| p.payload(&1))).await,
        0,
    );
    assert_ne!(
        a, b,
        "two consumer groups' steps on one message derive the same push id"
    );
}

#[tokio::test]
async fn an_explicit_push_id_wins_over_the_derived_one() {
    let msg = order_paid();
    let body = sent(|t| {
        t.ack(&msg)
            .push("receipts", |p| p.transaction_id("receipt-order-7"))
    })
    .await;
    assert_eq!(push_id(&body, 0), "receipt-order-7");
}

#[tokio::test]
async fn a_push_with_no_ack_and_no_id_gets_a_fresh_id() {
    let build = |t: TransactionBuilder| t.push("receipts", |p| p.payload(&json!({"n": 1})));
    let first = push_id(&sent(build).await, 0);
    let second = push_id(&sent(build).await, 0);
    assert_ne!(first, second, "no ack to derive from: a new id every time");
    assert_eq!(uuid_version(&first), 7);
    assert_eq!(uuid_version(&second), 7);
}

// --- KV -----------------------------------------------------------------------------

#[tokio::test]
async fn kv_put_with_a_ttl() {
    let body = sent(|t| {
        t.kv(|k| {
            k.put(
                "orders",
                "order-7",
                &json!({"status": "paid"}),
                Ttl::days(30),
            )
        })
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "put", "ns": "orders", "key": "order-7", "value": { "status": "paid" },
              "ttlSeconds": 2592000 }
        ]})
    );
}

#[tokio::test]
async fn kv_put_forever_with_expect_and_required() {
    let body = sent(|t| {
        t.kv(|k| {
            k.put("orders", "order-7", &"paid", Ttl::Forever)
                .expect(90101)
                .required()
        })
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "put", "ns": "orders", "key": "order-7", "value": "paid",
              "forever": true, "expect": 90101, "required": true }
        ]})
    );
}

#[tokio::test]
async fn kv_ttl_from_a_duration_and_from_text() {
    let body = sent(|t| {
        t.kv(|k| k.put("a", "k1", &1, Duration::from_millis(1500)))
            .kv(|k| k.put("a", "k2", &2, "90m".parse::<Ttl>().unwrap()))
            .kv(|k| k.put("a", "k3", &3, Ttl::seconds(45)))
    })
    .await;
    assert_eq!(body["kv"][0]["ttlSeconds"], 2);
    assert_eq!(body["kv"][1]["ttlSeconds"], 5400);
    assert_eq!(body["kv"][2]["ttlSeconds"], 45);
    for op in body["kv"].as_array().unwrap() {
        assert!(op.get("forever").is_none(), "exactly one expiry: {op}");
    }
}

#[tokio::test]
async fn kv_put_if_absent() {
    let body = sent(|t| {
        t.kv(|k| k.put_if_absent("paid", "order-7-paid", &json!({"by": "w-1"}), Ttl::hours(1)))
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "putIfAbsent", "ns": "paid", "key": "order-7-paid",
              "value": { "by": "w-1" }, "ttlSeconds": 3600 }
        ]})
    );
}

#[tokio::test]
async fn kv_delete_plain_and_with_expect_and_required() {
    let body = sent(|t| {
        t.kv(|k| k.delete("orders", "order-7"))
            .kv(|k| k.delete("orders", "order-8").expect(42).required())
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "delete", "ns": "orders", "key": "order-7" },
            { "op": "delete", "ns": "orders", "key": "order-8", "expect": 42, "required": true }
        ]})
    );
}

#[tokio::test]
async fn kv_check_absent_and_at_a_version() {
    let body = sent(|t| {
        t.kv(|k| k.check("orders", "order-7", 0))
            .kv(|k| k.check("orders", "order-8", 90101).required())
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "check", "ns": "orders", "key": "order-7", "expect": 0 },
            { "op": "check", "ns": "orders", "key": "order-8", "expect": 90101, "required": true }
        ]})
    );
}

#[tokio::test]
async fn kv_incr_with_min_and_max() {
    let body = sent(|t| {
        t.kv(|k| k.incr("stats", "orders", 1, Ttl::Forever))
            .kv(|k| {
                k.incr("quota", "customer-123", -2, Ttl::days(1))
                    .min(0)
                    .max(10)
                    .required()
            })
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "incr", "ns": "stats", "key": "orders", "delta": 1, "forever": true },
            { "op": "incr", "ns": "quota", "key": "customer-123", "delta": -2, "min": 0,
              "max": 10, "ttlSeconds": 86400, "required": true }
        ]})
    );
}

#[tokio::test]
async fn kv_get_and_get_many() {
    let body = sent(|t| {
        t.kv(|k| k.get("orders", "order-7"))
            .kv(|k| k.get_many("orders", ["order-8", "order-9"]))
            .kv(|k| k.get("orders", "order-10").expect(5))
    })
    .await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "get", "ns": "orders", "key": "order-7" },
            { "op": "getMany", "ns": "orders", "keys": ["order-8", "order-9"] },
            { "op": "get", "ns": "orders", "key": "order-10", "expect": 5 }
        ]})
    );
}

#[tokio::test]
async fn once_is_put_if_absent_of_true_with_required() {
    let body = sent(|t| t.once("paid", "order-7-paid", Ttl::days(1))).await;
    let expected = json!({"kv": [
        { "op": "putIfAbsent", "ns": "paid", "key": "order-7-paid", "value": true,
          "ttlSeconds": 86400, "required": true }
    ]});
    assert_eq!(body, expected);
    let by_hand = sent(|t| {
        t.kv(|k| {
            k.put_if_absent("paid", "order-7-paid", &true, Ttl::days(1))
                .required()
        })
    })
    .await;
    assert_eq!(body, by_hand);
    let forever = sent(|t| t.once("paid", "order-7-paid", Ttl::Forever)).await;
    assert_eq!(
        forever["kv"][0],
        json!({ "op": "putIfAbsent", "ns": "paid", "key": "order-7-paid", "value": true,
                "forever": true, "required": true })
    );
}

// --- timers -------------------------------------------------------------------------

fn decoded_payload(timer: &Value) -> Vec<u8> {
    B64.decode(timer["payload"].as_str().expect("a base64 string"))
        .expect("valid base64")
}

#[tokio::test]
async fn timer_schedule_with_a_json_payload() {
    let body = sent(|t| {
        t.timer("reminders", "order-7", |t| {
            t.after(Duration::from_secs(86_400))
                .txn("reminder-order-7")
                .payload(&json!({"orderId": "order-7"}))
        })
    })
    .await;
    assert_eq!(
        body,
        json!({"timers": [
            { "op": "schedule", "queue": "reminders", "timerKey": "order-7", "delayMs": 86400000,
              "txn": "reminder-order-7", "payload": "eyJvcmRlcklkIjoib3JkZXItNyJ9" }
        ]})
    );
    let payload: Value = serde_json::from_slice(&decoded_payload(&body["timers"][0])).unwrap();
    assert_eq!(payload, json!({"orderId": "order-7"}));
}

#[tokio::test]
async fn timer_schedule_is_the_default_action() {
    let explicit = sent(|t| {
        t.timer("reminders", "k", |t| {
            t.after(Duration::from_secs(1)).txn("x")
        })
    })
    .await;
    let default = sent(|t| {
        t.timer("reminders", "k", |t| {
            t.after(Duration::from_secs(1)).txn("x")
        })
    })
    .await;
    assert_eq!(explicit, default);
    assert_eq!(explicit["timers"][0]["op"], "schedule");
}

#[tokio::test]
async fn timer_reschedule_with_raw_bytes_and_a_partition() {
    let raw: Vec<u8> = vec![0, 159, 146, 150, 255, b'q'];
    let body = sent(|t| {
        t.timer("reminders", "order-7", |t| {
            t.after(Duration::from_millis(1500))
                .reschedule()
                .partition("customer-123")
                .txn("reminder-order-7-v2")
                .payload_bytes(raw.clone())
        })
    })
    .await;
    assert_eq!(
        body,
        json!({"timers": [
            { "op": "reschedule", "queue": "reminders", "timerKey": "order-7", "delayMs": 1500,
              "partition": "customer-123", "txn": "reminder-order-7-v2",
              "payload": B64.encode(&raw) }
        ]})
    );
    assert_eq!(decoded_payload(&body["timers"][0]), raw);
}

#[tokio::test]
async fn timer_cancel_sends_only_queue_key_and_txn() {
    let body = sent(|t| {
        t.timer("reminders", "order-7", |t| t.cancel())
            .timer("reminders", "order-8", |t| {
                t.cancel().txn("reminder-order-8")
            })
    })
    .await;
    assert_eq!(
        body,
        json!({"timers": [
            { "op": "cancel", "queue": "reminders", "timerKey": "order-7" },
            { "op": "cancel", "queue": "reminders", "timerKey": "order-8", "txn": "reminder-order-8" }
        ]})
    );
}

#[tokio::test]
async fn timer_at_a_time_becomes_a_delay() {
    let at = SystemTime::now() + Duration::from_secs(60);
    let body = sent(|t| t.timer("reminders", "k", |t| t.at(at).txn("x"))).await;
    let delay = body["timers"][0]["delayMs"].as_u64().expect("delayMs");
    assert!(
        (55_000..=60_000).contains(&delay),
        "delayMs {delay} for a time 60 s ahead"
    );
}

fn reminder_step(t: TransactionBuilder, msg: &Message<Value>) -> TransactionBuilder {
    t.ack(msg).timer("reminders", "order-7", |t| {
        t.after(Duration::from_secs(60))
            .payload(&json!({"orderId": "order-7"}))
    })
}

#[tokio::test]
async fn a_timer_in_a_step_that_acks_gets_a_derived_txn() {
    let msg = order_paid();
    let first = sent(|t| reminder_step(t, &msg)).await;
    let second = sent(|t| reminder_step(t, &msg)).await;
    let txn = first["timers"][0]["txn"].as_str().expect("a derived txn");
    assert_eq!(uuid_version(txn), 5);
    assert_eq!(first["timers"][0]["txn"], second["timers"][0]["txn"]);
    // It differs by timer key, by queue and by acked message.
    let other_key = sent(|t| {
        t.ack(&msg)
            .timer("reminders", "order-8", |t| t.after(Duration::from_secs(60)))
    })
    .await;
    assert_ne!(first["timers"][0]["txn"], other_key["timers"][0]["txn"]);
    let other_queue = sent(|t| {
        t.ack(&msg)
            .timer("nudges", "order-7", |t| t.after(Duration::from_secs(60)))
    })
    .await;
    assert_ne!(first["timers"][0]["txn"], other_queue["timers"][0]["txn"]);
    let other_msg = sent(|t| reminder_step(t, &order_shipped())).await;
    assert_ne!(first["timers"][0]["txn"], other_msg["timers"][0]["txn"]);
}

#[tokio::test]
async fn a_timer_without_an_ack_or_a_txn_gets_one_minted_for_the_call() {
    // Queen 2's engine refuses a scheduled timer without a txn; with no ack to derive
    // it from, it is minted for the call (the same in the call's resends).
    let a = sent(t_timer).await;
    let b = sent(t_timer).await;
    let txn = |b: &Value| b["timers"][0]["txn"].as_str().map(str::to_string);
    assert!(txn(&a).is_some_and(|t| !t.is_empty()), "{a}");
    assert_ne!(txn(&a), txn(&b), "a new one for each call");
}

fn t_timer(t: TransactionBuilder) -> TransactionBuilder {
    t.timer("reminders", "order-7", |t| t.after(Duration::from_secs(60)))
}

#[tokio::test]
async fn a_cancel_in_a_step_that_acks_gets_no_derived_txn() {
    let msg = order_paid();
    let body = sent(|t| t.ack(&msg).timer("reminders", "order-7", |t| t.cancel())).await;
    assert_eq!(
        body["timers"][0],
        json!({ "op": "cancel", "queue": "reminders", "timerKey": "order-7" })
    );
}

// --- positions and guards -----------------------------------------------------------

#[tokio::test]
async fn position_sets_a_groups_next_offset() {
    let body = sent(|t| {
        t.position("orders", "billing", "customer-123", 18)
            .position("orders", "billing", "customer-456", 0)
    })
    .await;
    assert_eq!(
        body,
        json!({"positions": [
            { "queue": "orders", "consumerGroup": "billing", "partition": "customer-123", "offset": 18 },
            { "queue": "orders", "consumerGroup": "billing", "partition": "customer-456", "offset": 0 }
        ]})
    );
}

#[tokio::test]
async fn guard_is_a_required_check_of_the_lock_row() {
    let lock = LockGuard {
        name: "nightly-report".into(),
        slot: 2,
        token: 90177,
    };
    let body = sent(|t| t.guard(&lock)).await;
    assert_eq!(
        body,
        json!({"kv": [
            { "op": "check", "ns": "queen-locks", "key": "nightly-report#2", "expect": 90177,
              "required": true }
        ]})
    );
    let by_hand =
        sent(|t| t.kv(|k| k.check("queen-locks", "nightly-report#2", 90177).required())).await;
    assert_eq!(body, by_hand);
}

// --- the whole body -----------------------------------------------------------------

#[tokio::test]
async fn empty_parts_are_omitted() {
    let kv_only = sent(|t| t.kv(|k| k.get("orders", "order-7"))).await;
    assert_eq!(
        kv_only.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["kv"]
    );
    let timers_only = sent(|t| t.timer("reminders", "k", |t| t.cancel())).await;
    assert_eq!(
        timers_only.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["timers"]
    );
    let positions_only = sent(|t| t.position("orders", "billing", "p", 1)).await;
    assert_eq!(
        positions_only
            .as_object()
            .unwrap()
            .keys()
            .collect::<Vec<_>>(),
        ["positions"]
    );
    let push_only = sent(|t| t.push("receipts", |p| p.transaction_id("r"))).await;
    assert_eq!(
        push_only.as_object().unwrap().keys().collect::<Vec<_>>(),
        ["operations"],
        "a push without an ack has no requiredLeases"
    );
    let msg = order_paid();
    let ack_only = sent(|t| t.ack(&msg)).await;
    let mut keys: Vec<_> = ack_only.as_object().unwrap().keys().collect();
    keys.sort();
    assert_eq!(keys, ["operations", "requiredLeases"]);
}

#[tokio::test]
async fn operations_keep_the_order_of_the_builder_calls() {
    let msg = order_paid();
    let body = sent(|t| {
        t.push("first", |p| p.transaction_id("p-1"))
            .ack(&msg)
            .push("second", |p| p.transaction_id("p-2"))
    })
    .await;
    let ops = body["operations"].as_array().unwrap();
    assert_eq!(ops.len(), 3);
    assert_eq!(ops[0]["items"][0]["queue"], "first");
    assert_eq!(ops[1]["type"], "ack");
    assert_eq!(ops[2]["items"][0]["queue"], "second");
}

#[tokio::test]
async fn to_body_is_the_body_commit_sends() {
    let msg = order_paid();
    let server = MockServer::start().await;
    let c = client(&server);
    let step = |t: TransactionBuilder| {
        t.ack(&msg)
            .push("receipts", |p| p.payload(&json!({"orderId": "order-7"})))
            .kv(|k| k.incr("stats", "orders", 1, Ttl::Forever))
            .timer("reminders", "order-7", |t| t.after(Duration::from_secs(5)))
            .position("orders", "billing", "customer-123", 18)
    };
    let rendered = step(c.transaction()).to_body().expect("valid");
    let body = sent(step).await;
    assert_eq!(rendered, body);
}

/// The SDK's step marker in a body, if it has one: the first KV operation.
fn marker(body: &Value) -> Option<&Value> {
    body["kv"]
        .get(0)
        .filter(|op| op["ns"] == queen_sdk::STEP_MARKER_NS)
}

#[tokio::test]
async fn the_step_marker_goes_first_where_nothing_else_guards_a_resend() {
    let msg = order_paid();
    let incr = |t: TransactionBuilder| t.kv(|k| k.incr("stats", "n", 1, Ttl::Forever));
    // Guarded by what the step itself leaves behind, or harmless to repeat: no marker.
    for (shape, body) in [
        ("completed ack", sent_whole(|t| t.ack(&msg)).await),
        (
            "ack + push",
            sent_whole(|t| incr(t.ack(&msg).push("receipts", |p| p.payload(&1)))).await,
        ),
        (
            "ack + once",
            sent_whole(|t| incr(t.ack(&msg).once("paid", "order-7", Ttl::days(1)))).await,
        ),
        (
            "push alone",
            sent_whole(|t| t.push("receipts", |p| p.payload(&1))).await,
        ),
    ] {
        assert!(marker(&body).is_none(), "{shape}: {body}");
    }
    // Nothing the first commit leaves says "done": the marker goes first.
    let guard = LockGuard {
        name: "nightly".into(),
        slot: 0,
        token: 3,
    };
    for (shape, body) in [
        ("ack + incr", sent_whole(|t| incr(t.ack(&msg))).await),
        (
            "failed ack",
            sent_whole(|t| t.ack_with(&msg, AckStatus::Failed { error: "x".into() })).await,
        ),
        (
            "ack + timer",
            sent_whole(|t| {
                t.ack(&msg)
                    .timer("r", "k", |t| t.after(Duration::from_secs(5)))
            })
            .await,
        ),
        (
            "ack + position",
            sent_whole(|t| t.ack(&msg).position("orders", "audit", "Default", 3)).await,
        ),
        (
            "required condition",
            sent_whole(|t| t.kv(|k| k.incr("stock", "sku", -1, Ttl::Forever).min(0).required()))
                .await,
        ),
        ("lock guard", sent_whole(|t| incr(t.guard(&guard))).await),
        (
            "expected version",
            sent_whole(|t| t.kv(|k| k.put("carts", "c-1", &2, Ttl::Forever).expect(4).required()))
                .await,
        ),
    ] {
        let m = marker(&body).unwrap_or_else(|| panic!("{shape}: no marker in {body}"));
        assert_eq!(
            (&m["op"], &m["value"], &m["required"], &m["ttlSeconds"]),
            (
                &json!("putIfAbsent"),
                &json!(true),
                &json!(true),
                &json!(60)
            ),
            "{shape}"
        );
    }
    // A step that acks leased messages names its marker by them: the same step sent
    // again by hand (a clone) is recognised, another message's step is not.
    let a = sent_whole(|t| incr(t.ack(&msg))).await;
    let b = sent_whole(|t| incr(t.ack(&msg))).await;
    let other = sent_whole(|t| incr(t.ack(&order_shipped()))).await;
    assert_eq!(marker(&a).unwrap()["key"], marker(&b).unwrap()["key"]);
    assert_ne!(marker(&a).unwrap()["key"], marker(&other).unwrap()["key"]);
    // Any other step's marker is new for each call: one builder used as a template for
    // two steps must not make them one.
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .respond_with(Commits { positions: true })
        .mount(&server)
        .await;
    let template = incr(client(&server).transaction());
    for _ in 0..2 {
        assert!(
            template
                .clone()
                .commit()
                .await
                .expect("commit")
                .is_committed()
        );
    }
    let received = server.received_requests().await.expect("recording is on");
    let keys: Vec<Value> = received
        .iter()
        .map(|r| marker(&r.body_json::<Value>().unwrap()).unwrap()["key"].clone())
        .collect();
    assert_eq!(keys.len(), 2);
    assert_ne!(keys[0], keys[1]);
}
