//! Client-side limits: a request that breaks one is refused with `Error::Invalid` naming
//! the op, and nothing is sent; the boundary values are sent.

use std::collections::HashMap;
use std::time::Duration;

use queen_sdk::{Client, Error, Message, PushItem, RetryPolicy, TransactionBuilder, Ttl};
use serde_json::{Value, json};
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer};

mod common;
use common::Commits;

fn client(server: &MockServer) -> Client {
    Client::builder()
        .url(server.uri())
        .retry(RetryPolicy::none())
        .build()
        .expect("client")
}

/// A broker that must receive nothing (verified when it drops).
async fn silent_broker() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(Commits { positions: true })
        .expect(0)
        .named("nothing may be sent")
        .mount(&server)
        .await;
    server
}

async fn assert_nothing_sent(server: &MockServer) {
    let received = server.received_requests().await.expect("recording is on");
    assert!(
        received.is_empty(),
        "{} request(s) were sent",
        received.len()
    );
}

fn invalid<T: std::fmt::Debug>(out: queen_sdk::Result<T>) -> (String, String) {
    match out {
        Err(Error::Invalid { op, rule }) => (op, rule),
        other => panic!("expected Error::Invalid, got {other:?}"),
    }
}

/// Commits what `build` makes; answers the `Invalid` error's op and rule, having checked
/// that nothing was sent.
async fn refused(build: impl FnOnce(TransactionBuilder) -> TransactionBuilder) -> (String, String) {
    let server = silent_broker().await;
    let out = build(client(&server).transaction()).commit().await;
    assert_nothing_sent(&server).await;
    invalid(out)
}

/// Commits what `build` makes; answers the one body the broker received.
async fn accepted(build: impl FnOnce(TransactionBuilder) -> TransactionBuilder) -> Value {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .respond_with(Commits { positions: true })
        .expect(1)
        .mount(&server)
        .await;
    let outcome = build(client(&server).transaction())
        .commit()
        .await
        .expect("a valid transaction is sent");
    assert!(outcome.is_committed());
    let mut body: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    // The SDK's step marker (tests/txn_body.rs pins where it goes) is not the caller's.
    if let Some(kv) = body.get_mut("kv").and_then(Value::as_array_mut)
        && kv
            .first()
            .is_some_and(|op| op["ns"] == queen_sdk::STEP_MARKER_NS)
    {
        kv.remove(0);
    }
    body
}

fn assert_op(op: &str, wanted: &[&str]) {
    for w in wanted {
        assert!(
            op.contains(w),
            "the error names {op:?}; expected it to name {w:?}"
        );
    }
}

fn order_paid() -> Message<Value> {
    serde_json::from_value(json!({
        "id": "m-7", "transactionId": "order-7-paid", "traceId": null, "data": {},
        "producerSub": null, "createdAt": "2026-10-01T09:14:03Z", "partitionId": "42",
        "partition": "p", "leaseId": "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37",
        "consumerGroup": "billing"
    }))
    .unwrap()
}

// --- the transaction ----------------------------------------------------------------

#[tokio::test]
async fn an_empty_transaction_is_refused() {
    let (op, _) = refused(|t| t).await;
    assert_op(&op, &["transaction"]);
}

// --- namespaces ---------------------------------------------------------------------

#[tokio::test]
async fn a_namespace_with_uppercase_is_refused() {
    let (op, rule) = refused(|t| t.kv(|k| k.get("Orders", "order-7"))).await;
    assert_op(&op, &["kv[0]", "get"]);
    assert!(rule.contains("Orders"), "{rule}");
}

#[tokio::test]
async fn a_namespace_with_a_leading_dot_is_refused() {
    let (op, _) = refused(|t| t.kv(|k| k.put(".orders", "k", &1, Ttl::Forever))).await;
    assert_op(&op, &["kv[0]", "put"]);
}

#[tokio::test]
async fn a_namespace_with_a_leading_dash_or_underscore_is_refused() {
    for ns in ["-orders", "_orders"] {
        let (op, _) = refused(|t| t.kv(|k| k.get(ns, "k"))).await;
        assert_op(&op, &["kv[0]"]);
    }
}

#[tokio::test]
async fn a_namespace_of_65_chars_is_refused() {
    let ns = "a".repeat(65);
    let (op, _) = refused(|t| t.kv(|k| k.get(&ns, "k"))).await;
    assert_op(&op, &["kv[0]"]);
}

#[tokio::test]
async fn an_empty_namespace_is_refused() {
    let (op, _) = refused(|t| t.kv(|k| k.delete("", "k"))).await;
    assert_op(&op, &["kv[0]", "delete"]);
}

#[tokio::test]
async fn a_namespace_with_other_characters_is_refused() {
    for ns in ["orders/eu", "orders eu", "ordérs", "orders:1"] {
        let (op, _) = refused(|t| t.kv(|k| k.get(ns, "k"))).await;
        assert_op(&op, &["kv[0]"]);
    }
}

#[tokio::test]
async fn the_error_names_the_offending_kv_op() {
    let (op, _) = refused(|t| {
        t.kv(|k| k.get("ok", "a"))
            .kv(|k| k.get("ok", "b"))
            .kv(|k| k.incr("Bad", "c", 1, Ttl::Forever))
    })
    .await;
    assert_op(&op, &["kv[2]", "incr"]);
}

#[tokio::test]
async fn a_namespace_of_64_chars_and_every_allowed_character_is_sent() {
    let ns64 = format!("0{}", "a".repeat(63));
    let body = accepted(|t| {
        t.kv(|k| k.get(&ns64, "k"))
            .kv(|k| k.get("a0._-z", "k"))
            .kv(|k| k.get("9", "k"))
    })
    .await;
    assert_eq!(body["kv"][0]["ns"], ns64);
    assert_eq!(body["kv"][1]["ns"], "a0._-z");
}

// --- keys ---------------------------------------------------------------------------

#[tokio::test]
async fn an_empty_key_is_refused() {
    let (op, _) = refused(|t| t.kv(|k| k.put("orders", "", &1, Ttl::Forever))).await;
    assert_op(&op, &["kv[0]", "put"]);
}

#[tokio::test]
async fn a_key_of_513_bytes_is_refused() {
    let key = "k".repeat(513);
    let (op, _) = refused(|t| t.kv(|k| k.get("orders", &key))).await;
    assert_op(&op, &["kv[0]", "get"]);
}

#[tokio::test]
async fn a_key_is_measured_in_bytes_not_chars() {
    // 257 chars, 514 bytes.
    let key = "é".repeat(257);
    let (op, _) = refused(|t| t.kv(|k| k.get("orders", &key))).await;
    assert_op(&op, &["kv[0]"]);
}

#[tokio::test]
async fn a_key_with_nul_is_refused() {
    let (op, _) = refused(|t| t.kv(|k| k.check("orders", "order\u{0}7", 0))).await;
    assert_op(&op, &["kv[0]", "check"]);
}

#[tokio::test]
async fn a_bad_key_in_get_many_is_refused() {
    let (op, _) = refused(|t| t.kv(|k| k.get_many("orders", ["a", "", "c"]))).await;
    assert_op(&op, &["kv[0]", "getMany"]);
    let long = "k".repeat(513);
    let (op, _) = refused(|t| t.kv(|k| k.get_many("orders", ["a", long.as_str()]))).await;
    assert_op(&op, &["kv[0]", "getMany"]);
}

#[tokio::test]
async fn a_key_of_512_bytes_is_sent() {
    let key = "k".repeat(512);
    let body = accepted(|t| t.kv(|k| k.put("orders", &key, &1, Ttl::Forever))).await;
    assert_eq!(body["kv"][0]["key"], key);
}

#[tokio::test]
async fn the_same_key_written_twice_is_refused() {
    let (op, rule) = refused(|t| {
        t.kv(|k| k.put("orders", "order-7", &1, Ttl::Forever))
            .kv(|k| k.delete("orders", "order-7"))
    })
    .await;
    assert_op(&op, &["kv[1]", "delete"]);
    assert!(rule.contains("order-7"), "{rule}");
}

#[tokio::test]
async fn once_on_a_key_the_step_also_writes_is_refused() {
    let (op, _) = refused(|t| {
        t.kv(|k| k.incr("paid", "order-7", 1, Ttl::Forever))
            .once("paid", "order-7", Ttl::days(1))
    })
    .await;
    assert_op(&op, &["kv[1]", "putIfAbsent"]);
}

/// In an epoch a `once` marker writes `key@epoch`: a step that also writes that key
/// writes it twice, and is refused as such; the plain key is then another key.
#[tokio::test]
async fn in_an_epoch_once_and_a_write_of_its_epoch_key_are_refused() {
    let epoch = queen_sdk::Epoch::new("fix-1").unwrap();
    let (op, rule) = refused(|t| {
        t.epoch(&epoch)
            .once("paid", "order-7", Ttl::days(1))
            .kv(|k| k.put("paid", "order-7@fix-1", &1, Ttl::Forever))
    })
    .await;
    assert_op(&op, &["kv[1]", "put"]);
    assert!(rule.contains("order-7@fix-1"), "{rule}");
}

#[tokio::test]
async fn the_same_key_in_two_namespaces_or_read_and_written_is_sent() {
    let body = accepted(|t| {
        t.kv(|k| k.put("orders", "order-7", &1, Ttl::Forever))
            .kv(|k| k.put("archive", "order-7", &1, Ttl::Forever))
            .kv(|k| k.check("orders", "order-7", 0))
            .kv(|k| k.get("orders", "order-7"))
    })
    .await;
    assert_eq!(body["kv"].as_array().unwrap().len(), 4);
}

// --- counts -------------------------------------------------------------------------

fn puts(t: TransactionBuilder, n: usize) -> TransactionBuilder {
    (0..n).fold(t, |t, i| {
        t.kv(move |k| k.put("counters", format!("k-{i}"), &i, Ttl::Forever))
    })
}

#[tokio::test]
async fn sixty_five_kv_ops_are_refused() {
    let (op, rule) = refused(|t| puts(t, 65)).await;
    assert_op(&op, &["kv"]);
    assert!(rule.contains("64"), "{rule}");
}

#[tokio::test]
async fn sixty_four_kv_ops_are_sent() {
    // Guarded by its own push: no room is needed for the SDK's step marker.
    let body = accepted(|t| puts(t, 64).push("audit", |p| p.payload(&1))).await;
    assert_eq!(body["kv"].as_array().unwrap().len(), 64);
}

#[tokio::test]
async fn sixty_four_kv_writes_with_nothing_to_guard_a_resend_are_refused() {
    // The step marker would be the 65th operation: the step is refused before it is
    // sent, with what makes it safe.
    let (op, rule) = refused(|t| puts(t, 64)).await;
    assert_op(&op, &["kv"]);
    assert!(
        rule.contains("once") && rule.contains("step marker"),
        "{rule}"
    );
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("k-{i}")).collect()
}

#[tokio::test]
async fn two_hundred_fifty_seven_keys_via_get_many_are_refused() {
    let (op, rule) = refused(|t| t.kv(|k| k.get_many("orders", keys(257)))).await;
    assert_op(&op, &["kv"]);
    assert!(rule.contains("256"), "{rule}");
}

#[tokio::test]
async fn two_hundred_fifty_seven_keys_over_several_ops_are_refused() {
    let (op, _) = refused(|t| {
        (0..7).fold(t.kv(|k| k.get_many("orders", keys(250))), |t, i| {
            t.kv(move |k| k.get("other", format!("x-{i}")))
        })
    })
    .await;
    assert_op(&op, &["kv"]);
}

#[tokio::test]
async fn two_hundred_fifty_six_keys_via_get_many_are_sent() {
    let body = accepted(|t| t.kv(|k| k.get_many("orders", keys(256)))).await;
    assert_eq!(body["kv"][0]["keys"].as_array().unwrap().len(), 256);
}

// --- values and expiry --------------------------------------------------------------

#[tokio::test]
async fn a_value_over_64_kib_is_refused() {
    // 65,535 chars and two quotes: 65,537 bytes as compact JSON.
    let big = "x".repeat(65_535);
    let (op, _) = refused(|t| t.kv(|k| k.put("docs", "d", &big, Ttl::Forever))).await;
    assert_op(&op, &["kv[0]", "put"]);
}

#[tokio::test]
async fn a_value_of_exactly_64_kib_is_sent() {
    // 65,534 chars and two quotes: 65,536 bytes.
    let exact = "x".repeat(65_534);
    let body = accepted(|t| t.kv(|k| k.put("docs", "d", &exact, Ttl::Forever))).await;
    assert_eq!(body["kv"][0]["value"].as_str().unwrap().len(), 65_534);
}

// A KV write without its expiry does not compile (the expiry is an argument): pinned by
// the `compile_fail` examples on `queen_sdk::KvOp`.

#[tokio::test]
async fn a_ttl_of_zero_is_refused() {
    let (op, _) = refused(|t| t.kv(|k| k.put("orders", "order-7", &1, Ttl::seconds(0)))).await;
    assert_op(&op, &["kv[0]", "put"]);
}

#[tokio::test]
async fn a_value_that_does_not_serialise_is_refused() {
    let mut m: HashMap<(u8, u8), u8> = HashMap::new();
    m.insert((1, 2), 3);
    let (op, _) = refused(|t| t.kv(|k| k.put("orders", "order-7", &m, Ttl::Forever))).await;
    assert_op(&op, &["kv[0]", "put"]);
    let (op, _) = refused(|t| t.push("receipts", |p| p.payload(&m))).await;
    assert_op(&op, &["operations[0]", "push"]);
}

// --- timers -------------------------------------------------------------------------

#[tokio::test]
async fn a_timer_key_twice_on_one_queue_is_refused() {
    let (op, rule) = refused(|t| {
        t.timer("reminders", "order-7", |t| t.after(Duration::from_secs(1)))
            .timer("reminders", "order-7", |t| t.cancel())
    })
    .await;
    assert_op(&op, &["timers[1]"]);
    assert!(rule.contains("order-7"), "{rule}");
}

#[tokio::test]
async fn a_timer_key_on_two_queues_is_sent() {
    let body = accepted(|t| {
        t.timer("reminders", "order-7", |t| t.after(Duration::from_secs(1)))
            .timer("nudges", "order-7", |t| t.after(Duration::from_secs(1)))
    })
    .await;
    assert_eq!(body["timers"].as_array().unwrap().len(), 2);
}

// A timer without a delay, or without a key, does not compile (`TimerStart` makes the
// timer; the key is an argument): pinned by the `compile_fail` examples on `TimerStart`.

#[tokio::test]
async fn a_cancel_without_delay_is_sent() {
    let body = accepted(|t| t.timer("reminders", "order-7", |t| t.cancel())).await;
    assert_eq!(body["timers"][0]["op"], "cancel");
}

#[tokio::test]
async fn an_empty_timer_key_is_refused() {
    let (op, _) = refused(|t| t.timer("reminders", "", |t| t.after(Duration::from_secs(1)))).await;
    assert_op(&op, &["timers[0]"]);
}

#[tokio::test]
async fn a_timer_txn_over_65535_bytes_is_refused() {
    let txn = "t".repeat(65_536);
    let (op, _) = refused(|t| {
        t.timer("reminders", "order-7", |t| {
            t.after(Duration::from_secs(1)).txn(txn)
        })
    })
    .await;
    assert_op(&op, &["timers[0]"]);
}

// --- positions ----------------------------------------------------------------------

fn positions(t: TransactionBuilder, n: usize) -> TransactionBuilder {
    (0..n).fold(t, |t, i| {
        t.position("orders", "billing", format!("p-{i}"), 0)
    })
}

#[tokio::test]
async fn sixteen_thousand_three_hundred_eighty_five_positions_are_refused() {
    let (op, rule) = refused(|t| positions(t, 16_385)).await;
    assert_op(&op, &["positions"]);
    assert!(rule.contains("16384"), "{rule}");
}

#[tokio::test]
async fn sixteen_thousand_three_hundred_eighty_four_positions_are_sent() {
    let body = accepted(|t| positions(t, 16_384)).await;
    assert_eq!(body["positions"].as_array().unwrap().len(), 16_384);
}

// --- ids and names ------------------------------------------------------------------

#[tokio::test]
async fn a_pushed_transaction_id_over_65535_bytes_is_refused() {
    let id = "t".repeat(65_536);
    let (op, _) = refused(|t| t.push("receipts", |p| p.transaction_id(id))).await;
    assert_op(&op, &["operations[0]", "push"]);
}

#[tokio::test]
async fn the_error_names_the_offending_push() {
    let id = "t".repeat(65_536);
    let msg = order_paid();
    let (op, _) = refused(|t| {
        t.ack(&msg)
            .push("receipts", |p| p.payload(&1))
            .push("receipts", |p| p.transaction_id(id))
    })
    .await;
    assert_op(&op, &["operations[2]", "push"]);
}

#[tokio::test]
async fn a_pushed_transaction_id_of_65535_bytes_is_sent() {
    let id = "t".repeat(65_535);
    let body = accepted(|t| t.push("receipts", |p| p.transaction_id(id.clone()))).await;
    assert_eq!(
        body["operations"][0]["items"][0]["transactionId"]
            .as_str()
            .unwrap()
            .len(),
        65_535
    );
}

#[tokio::test]
async fn a_pushed_queue_name_over_1024_bytes_is_refused() {
    let queue = "q".repeat(1_025);
    let (op, _) = refused(|t| t.push(queue, |p| p.transaction_id("r"))).await;
    assert_op(&op, &["operations[0]", "push"]);
}

#[tokio::test]
async fn a_pushed_partition_name_over_1024_bytes_is_refused() {
    let partition = "p".repeat(1_025);
    let (op, _) =
        refused(|t| t.push("receipts", |p| p.transaction_id("r").partition(partition))).await;
    assert_op(&op, &["operations[0]", "push"]);
}

#[tokio::test]
async fn an_empty_pushed_queue_name_is_refused() {
    let (op, _) = refused(|t| t.push("", |p| p.transaction_id("r"))).await;
    assert_op(&op, &["operations[0]", "push"]);
}

#[tokio::test]
async fn a_queue_and_partition_name_of_1024_bytes_are_sent() {
    let name = "q".repeat(1_024);
    let body = accepted(|t| {
        t.push(name.clone(), |p| {
            p.transaction_id("r").partition(name.clone())
        })
    })
    .await;
    assert_eq!(body["operations"][0]["items"][0]["queue"], name);
}

#[tokio::test]
async fn a_timer_queue_name_over_1024_bytes_is_refused() {
    let queue = "q".repeat(1_025);
    let (op, _) = refused(|t| t.timer(queue, "k", |t| t.after(Duration::from_secs(1)))).await;
    assert_op(&op, &["timers[0]"]);
}

/// The broker checks a timer's partition name too (413 `name_too_long`).
#[tokio::test]
async fn a_timer_partition_name_over_1024_bytes_is_refused() {
    let partition = "p".repeat(1_025);
    let (op, _) = refused(|t| {
        t.timer("reminders", "k", |t| {
            t.after(Duration::from_secs(1)).partition(partition)
        })
    })
    .await;
    assert_op(&op, &["timers[0]"]);
}

/// The broker checks a position's queue name too (413 `name_too_long`).
#[tokio::test]
async fn a_position_queue_name_over_1024_bytes_is_refused() {
    let queue = "q".repeat(1_025);
    let (op, _) = refused(|t| t.position(&queue, "billing", "p", 0)).await;
    assert_op(&op, &["positions"]);
}

// --- the other calls ----------------------------------------------------------------

#[tokio::test]
async fn a_standalone_push_with_a_bad_name_or_id_is_refused() {
    let server = silent_broker().await;
    let c = client(&server);
    let (op, _) = invalid(
        c.push(vec![PushItem::new("q".repeat(1_025), &json!({}))])
            .await,
    );
    assert_op(&op, &["items[0]"]);
    let (op, _) = invalid(
        c.push(vec![
            PushItem::new("orders", &json!({})),
            PushItem::new("orders", &json!({})).transaction_id("t".repeat(65_536)),
        ])
        .await,
    );
    assert_op(&op, &["items[1]"]);
    let (op, _) = invalid(
        c.push(vec![
            PushItem::new("orders", &json!({})).partition("p".repeat(1_025)),
        ])
        .await,
    );
    assert_op(&op, &["items[0]"]);
    assert_nothing_sent(&server).await;
}

#[tokio::test]
async fn a_pop_with_a_bad_queue_name_is_refused() {
    let server = silent_broker().await;
    let c = client(&server);
    let (op, _) = invalid(c.pop::<Value>("q".repeat(1_025)).send().await);
    assert_op(&op, &["queue"]);
    let (op, _) = invalid(c.pop::<Value>("").send().await);
    assert_op(&op, &["queue"]);
    assert_nothing_sent(&server).await;
}

#[tokio::test]
async fn an_unleased_ack_beside_a_leased_one_is_refused() {
    let leased: Message<Value> = serde_json::from_value(json!({
        "id": "m1", "transactionId": "t1", "traceId": null, "data": 1, "producerSub": null,
        "createdAt": "2026-10-01T09:14:03.512887Z", "partitionId": "1", "partition": "p",
        "leaseId": "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37", "consumerGroup": "g"
    }))
    .unwrap();
    let mut auto = leased.clone();
    auto.lease_id = String::new();
    auto.transaction_id = "t2".into();
    let (op, rule) = refused(|t| t.ack(&leased).ack(&auto)).await;
    assert_eq!(op, "ack");
    assert!(rule.contains("lease"), "{rule}");
}
