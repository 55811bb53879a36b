//! Decoding of every answer shape: commits, rollbacks, gates, engine errors, pops, acks
//! and pushes, served by a wiremock broker.

use std::time::Duration;

use queen_sdk::{
    AckOutcome, AckResult, AckStatus, Client, Commit, Committed, Error, KvResult, Message,
    PositionResult, PushItem, PushResult, Pushed, RetryPolicy, RollbackReason, StepResult,
    TimerResult,
};
use serde::Deserialize;
use serde_json::value::to_raw_value;
use serde_json::{Value, json};
use wiremock::matchers::{method, path, query_param};
use wiremock::{Mock, MockServer, ResponseTemplate};

const LEASE: &str = "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37";

fn client(server: &MockServer) -> Client {
    Client::builder()
        .url(server.uri())
        .retry(RetryPolicy::none())
        .build()
        .expect("client")
}

fn order_paid() -> Message<Value> {
    serde_json::from_value(json!({
        "id": "0199a7c2-5e1a-7000-8000-000000000007", "transactionId": "order-7-paid",
        "traceId": null, "data": {"orderId": "order-7"}, "producerSub": null,
        "createdAt": "2026-10-01T09:14:03.512887Z", "partitionId": "42",
        "partition": "customer-123", "leaseId": LEASE, "consumerGroup": "billing"
    }))
    .expect("a pop message decodes")
}

/// A broker that answers one transaction call with `answer`.
async fn answering_transactions(answer: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .respond_with(answer)
        .expect(1)
        .mount(&server)
        .await;
    server
}

/// Commits a fenced ack (safe to replay, so no answer turns into `OutcomeUnknown`)
/// against a broker that answers `answer` once, without retries.
async fn commit_answered(answer: ResponseTemplate) -> queen_sdk::Result<Commit> {
    let server = answering_transactions(answer).await;
    let msg = order_paid();
    client(&server).transaction().ack(&msg).commit().await
}

async fn commit_json(status: u16, body: Value) -> queen_sdk::Result<Commit> {
    commit_answered(ResponseTemplate::new(status).set_body_json(body)).await
}

fn committed(outcome: queen_sdk::Result<Commit>) -> Committed {
    match outcome {
        Ok(Commit::Committed(c)) => c,
        other => panic!("expected a commit, got {other:?}"),
    }
}

fn rolled_back(outcome: queen_sdk::Result<Commit>) -> (RollbackReason, String, bool) {
    match outcome {
        Err(Error::RolledBack {
            reason,
            error,
            retried,
        }) => (reason, error, retried),
        other => panic!("expected a rollback, got {other:?}"),
    }
}

fn api_error(
    outcome: queen_sdk::Result<Commit>,
) -> (u16, Option<String>, String, Option<Duration>) {
    match outcome {
        Err(Error::Api {
            status,
            code,
            message,
            retry_after,
        }) => (status, code, message, retry_after),
        other => panic!("expected Error::Api, got {other:?}"),
    }
}

// --- commits ------------------------------------------------------------------------

/// The spec's Example, "The commit".
fn seed_commit() -> Value {
    json!({
      "transactionId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c11",
      "success": true,
      "results": [
        { "index": 0, "type": "ack", "success": true, "transactionId": "order-7-paid",
          "error": null, "dlq": false },
        { "index": 1, "type": "push", "success": true, "transactionId": "receipt-order-7",
          "messageId": "0199a7c2-61f1-7d55-b0e2-7a1c9e4f6d20", "queueName": "receipts" },
        { "index": 2, "op": "put", "applied": true, "key": "order-7",
          "value": { "status": "paid" }, "version": 90101, "opIndex": 0, "type": "kv" },
        { "index": 3, "op": "putIfAbsent", "applied": true, "key": "order-7-paid",
          "value": true, "version": 90102, "opIndex": 1, "type": "kv" },
        { "ok": true, "status": "scheduled", "queue": "reminders", "timerKey": "order-7",
          "txn": "reminder-order-7", "messageId": "0199a7c2-61f1-7d55-b0e2-8b3f0a2d4e71",
          "deliverAt": "2026-10-02T09:14:03.512887Z", "opIndex": 0, "index": 4, "type": "timer" }
      ]
    })
}

#[tokio::test]
async fn the_seed_commit_decodes_into_typed_results() {
    let body = seed_commit();
    let c = committed(commit_json(200, body.clone()).await);
    assert_eq!(c.transaction_id, "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c11");
    assert!(!c.retried);
    let expected = vec![
        StepResult::Ack(AckResult {
            index: 0,
            transaction_id: "order-7-paid".into(),
            dlq: false,
        }),
        StepResult::Push(PushResult {
            index: 1,
            transaction_id: "receipt-order-7".into(),
            message_id: "0199a7c2-61f1-7d55-b0e2-7a1c9e4f6d20".into(),
            queue: "receipts".into(),
            duplicate: false,
        }),
        StepResult::Kv(KvResult {
            index: 2,
            op_index: 0,
            op: "put".into(),
            applied: Some(true),
            reason: None,
            key: Some("order-7".into()),
            value: Some(json!({"status": "paid"})),
            version: Some(90101),
            found: None,
            raw: to_raw_value(&body["results"][2]).unwrap(),
        }),
        StepResult::Kv(KvResult {
            index: 3,
            op_index: 1,
            op: "putIfAbsent".into(),
            applied: Some(true),
            reason: None,
            key: Some("order-7-paid".into()),
            value: Some(json!(true)),
            version: Some(90102),
            found: None,
            raw: to_raw_value(&body["results"][3]).unwrap(),
        }),
        StepResult::Timer(TimerResult {
            index: 4,
            op_index: 0,
            status: queen_sdk::TimerStatus::Scheduled,
            ok: true,
            queue: "reminders".into(),
            timer_key: "order-7".into(),
            txn: Some("reminder-order-7".into()),
            message_id: Some("0199a7c2-61f1-7d55-b0e2-8b3f0a2d4e71".into()),
            deliver_at: Some("2026-10-02T09:14:03.512887Z".into()),
        }),
    ];
    assert_eq!(c.results(), expected);
    // The accessors pick each kind, in order.
    assert_eq!(c.pushes().count(), 1);
    assert_eq!(c.pushes().next().unwrap().queue, "receipts");
    assert_eq!(
        c.kv().map(|k| k.version).collect::<Vec<_>>(),
        [Some(90101), Some(90102)]
    );
    assert_eq!(
        c.timers().next().unwrap().status,
        queen_sdk::TimerStatus::Scheduled
    );
}

/// A result whose fields are not of the types the SDK reads (a broker's bug, or a
/// future broker's extension) still decodes: each such field is taken as absent, as it
/// always was, and the other results are unharmed. Escaped text is unescaped.
#[tokio::test]
async fn odd_field_types_in_a_result_are_taken_as_absent() {
    let c = committed(
        commit_json(
            200,
            json!({ "transactionId": "t", "success": true, "results": [
                { "index": 0, "type": "ack", "transactionId": "order-7-paid", "dlq": "no" },
                { "index": "1", "type": "push", "transactionId": "receipt-\u{e9}\"7\"",
                  "messageId": 17, "queueName": "receipts", "duplicate": true },
                { "index": 2, "type": "timer", "ok": true, "status": "scheduled",
                  "queue": "reminders", "timerKey": "o\n7", "txn": null, "opIndex": 0 },
                { "index": 3, "type": "kv", "op": "get", "opIndex": 0, "key": "k",
                  "found": true, "value": null, "version": "7" },
                { "index": 4, "type": "kv", "op": "get", "opIndex": 1, "key": "k2",
                  "found": true, "value": null, "version": 8 },
            ]}),
        )
        .await,
    );
    // An explicit `null` value is kept as one, on the typed path and the lenient one.
    let kv: Vec<&KvResult> = c.kv().collect();
    assert_eq!(
        kv.iter()
            .map(|k| (k.index, k.value.clone(), k.version))
            .collect::<Vec<_>>(),
        [
            (3, Some(Value::Null), None),
            (4, Some(Value::Null), Some(8))
        ]
    );
    assert_eq!(kv[0].raw_value()["version"], "7");
    assert_eq!(
        c.results()[..3],
        [
            StepResult::Ack(AckResult {
                index: 0,
                transaction_id: "order-7-paid".into(),
                dlq: false,
            }),
            StepResult::Push(PushResult {
                index: 0,
                transaction_id: "receipt-\u{e9}\"7\"".into(),
                message_id: String::new(),
                queue: "receipts".into(),
                duplicate: true,
            }),
            StepResult::Timer(TimerResult {
                index: 2,
                op_index: 0,
                status: queen_sdk::TimerStatus::Scheduled,
                ok: true,
                queue: "reminders".into(),
                timer_key: "o\n7".into(),
                txn: None,
                message_id: None,
                deliver_at: None,
            }),
        ]
    );
}

#[tokio::test]
async fn a_position_result_is_kept_whole() {
    let element = json!({ "index": 1, "type": "position", "opIndex": 0, "queue": "orders",
                          "consumerGroup": "billing", "partition": "customer-123", "offset": 18 });
    let c = committed(
        commit_json(
            200,
            json!({ "transactionId": "t", "success": true, "results": [
                { "index": 0, "type": "ack", "success": true, "transactionId": "order-7-paid",
                  "error": null, "dlq": false },
                element.clone()
            ]}),
        )
        .await,
    );
    assert_eq!(
        c.results()[1],
        StepResult::Position(PositionResult {
            index: 1,
            op_index: 0,
            raw: element,
        })
    );
}

#[tokio::test]
async fn other_result_shapes_decode() {
    let get_miss = json!({ "index": 1, "type": "kv", "op": "get", "opIndex": 0, "found": false,
                           "key": "order-9" });
    let get_many = json!({ "index": 2, "type": "kv", "op": "getMany", "opIndex": 1,
                           "rows": [{ "key": "a", "value": 1, "version": 5 }], "missing": ["b"] });
    let lost = json!({ "index": 3, "type": "kv", "op": "putIfAbsent", "opIndex": 2,
                       "applied": false, "reason": "exists", "key": "m", "value": true,
                       "version": 7 });
    let dup_push = json!({ "index": 4, "type": "push", "success": true, "transactionId": "r",
                           "messageId": "m-1", "queueName": "receipts", "duplicate": true });
    let dlq_ack = json!({ "index": 0, "type": "ack", "success": true, "transactionId": "x",
                          "error": null, "dlq": true });
    let absent = json!({ "ok": false, "status": "absent", "queue": "reminders",
                         "timerKey": "order-7", "txn": null, "opIndex": 0, "index": 5,
                         "type": "timer" });
    let future = json!({ "index": 6, "type": "hologram", "x": 1 });
    let c = committed(
        commit_json(
            200,
            json!({ "transactionId": "t", "success": true, "results": [
                dlq_ack, get_miss.clone(), get_many.clone(), lost, dup_push, absent, future.clone()
            ]}),
        )
        .await,
    );
    assert_eq!(
        c.results()[0],
        StepResult::Ack(AckResult {
            index: 0,
            transaction_id: "x".into(),
            dlq: true,
        })
    );
    let kv: Vec<&KvResult> = c.kv().collect();
    assert_eq!(kv[0].found, Some(false));
    assert_eq!(kv[0].applied, None);
    assert_eq!(kv[0].value, None);
    assert_eq!(kv[0].raw_value(), get_miss);
    assert_eq!(kv[1].op, "getMany");
    assert_eq!(kv[1].raw_value()["rows"][0]["value"], 1);
    assert_eq!(kv[1].raw_value()["missing"], json!(["b"]));
    assert_eq!(kv[2].applied, Some(false));
    assert_eq!(kv[2].reason, Some(queen_sdk::KvReason::Exists));
    assert_eq!(kv[2].value, Some(json!(true)));
    assert_eq!(kv[2].version, Some(7));
    assert!(c.pushes().next().unwrap().duplicate);
    let t = c.timers().next().unwrap();
    assert_eq!(
        (t.ok, t.status.as_str(), t.txn.as_deref()),
        (false, "absent", None)
    );
    assert_eq!(t.index, 5);
    assert_eq!(c.results()[6], StepResult::Other(future));
}

/// `results` is checked when the answer arrives and decoded when first read: an answer
/// whose `results` is not an array is refused at once, as a typed decode refused it; an
/// absent or `null` one is no results.
#[tokio::test]
async fn results_that_are_not_an_array_are_refused_and_absent_ones_are_empty() {
    for bad in [json!({ "0": { "type": "ack" } }), json!("ack"), json!(7)] {
        let got = commit_json(
            200,
            json!({ "transactionId": "t", "success": true, "results": bad }),
        )
        .await;
        assert!(matches!(got, Err(Error::Decode { .. })), "{bad}: {got:?}");
    }
    let absent =
        committed(commit_json(200, json!({ "transactionId": "t", "success": true })).await);
    assert!(absent.results().is_empty());
    let null = committed(
        commit_json(
            200,
            json!({ "transactionId": "t", "success": true, "results": null }),
        )
        .await,
    );
    assert!(null.results().is_empty());
    assert_eq!(null.transaction_id, "t");
}

/// Decoded once: a second read hands back the same results, a clone compares equal
/// (before and after its own decode), and the owned results are the same.
#[tokio::test]
async fn results_are_decoded_once_and_a_clone_compares_equal() {
    let c = committed(commit_json(200, seed_commit()).await);
    let copy = c.clone();
    let first = c.results();
    assert_eq!(first.len(), 5);
    assert!(std::ptr::eq(first, c.results()), "decoded once, then kept");
    assert_eq!(copy, c);
    assert_eq!(format!("{copy:?}"), format!("{c:?}"));
    assert_eq!(copy.into_results(), c.results());
}

/// A step with a KV part is a Queen 2 commit when any result is a KV one, even beside
/// results of shapes the SDK does not know (read without decoding them).
#[tokio::test]
async fn a_kv_result_beside_odd_ones_is_a_queen_2_commit() {
    let server = answering_transactions(ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "t", "success": true, "results": [
            7, { "type": 5 }, { "index": 0, "type": "push", "transactionId": "r",
              "messageId": "m", "queueName": "receipts" },
            { "index": 1, "type": "kv", "op": "put", "opIndex": 0, "applied": true,
              "key": "order-7", "version": 1 }
        ]
    })))
    .await;
    let c = client(&server)
        .transaction()
        .push("receipts", |p| p.payload(&1))
        .kv(|k| k.put("orders", "order-7", &"paid", queen_sdk::Ttl::Forever))
        .commit()
        .await
        .expect("a Queen 2 commit")
        .committed()
        .expect("not gated");
    assert_eq!(c.kv().map(|k| k.version).collect::<Vec<_>>(), [Some(1)]);
    assert!(matches!(c.results()[0], StepResult::Other(_)));
}

// --- rollbacks ----------------------------------------------------------------------

fn rollback(reason: &str) -> Value {
    json!({
      "transactionId": "0199a7c3-0a2e-7c11-8d40-5f6e7a8b9c02",
      "success": false,
      "reason": reason,
      "error": "the transaction rolled back",
      "results": []
    })
}

#[tokio::test]
async fn the_duplicate_rollback_is_an_error() {
    let body = json!({
      "transactionId": "0199a7c3-0a2e-7c11-8d40-5f6e7a8b9c02",
      "success": false,
      "reason": "duplicate",
      "error": "QDUP a pushed message to receipts/customer-123 is a duplicate (original offset 17); the transaction rolled back",
      "results": []
    });
    let (reason, error, retried) = rolled_back(commit_json(200, body).await);
    assert_eq!(reason, RollbackReason::Duplicate);
    assert!(error.starts_with("QDUP"), "{error}");
    assert!(!retried);
}

#[tokio::test]
async fn rejected_ack_and_its_alias_ack_rejected_are_one_reason() {
    for spelling in ["rejected_ack", "ack_rejected"] {
        let (reason, _, retried) = rolled_back(commit_json(200, rollback(spelling)).await);
        assert_eq!(reason, RollbackReason::RejectedAck, "{spelling}");
        assert!(!retried);
    }
}

#[tokio::test]
async fn rejected_position_is_a_known_reason() {
    let (reason, _, _) = rolled_back(commit_json(200, rollback("rejected_position")).await);
    assert_eq!(reason, RollbackReason::RejectedPosition);
}

#[tokio::test]
async fn an_unknown_reason_is_kept_verbatim() {
    let (reason, error, _) = rolled_back(commit_json(200, rollback("timer_conflict")).await);
    assert_eq!(reason, RollbackReason::Other("timer_conflict".into()));
    assert_eq!(reason.as_str(), "timer_conflict");
    assert_eq!(error, "the transaction rolled back");
}

#[tokio::test]
async fn the_kv_precondition_rollback_is_gated() {
    let body = json!({
      "transactionId": "0199a7c3-0a2e-7c11-8d40-5f6e7a8b9c02",
      "success": false,
      "reason": "kv_precondition",
      "error": "QKV a required KV precondition failed; the transaction rolled back",
      "results": [],
      "ok": false,
      "failedIndex": 3,
      "kvReason": "exists",
      "version": 90102,
      "value": true
    });
    let outcome = commit_json(200, body).await.expect("a gate is a value");
    let Commit::Gated {
        transaction_id,
        gate,
        retried,
    } = &outcome
    else {
        panic!("expected gated, got {outcome:?}")
    };
    assert_eq!(transaction_id, "0199a7c3-0a2e-7c11-8d40-5f6e7a8b9c02");
    assert!(!retried);
    // Slot 3 of a step with one ack: kv[2], which this step does not have (the broker's
    // answer is taken as it is; the gate's kind and key are then unknown).
    assert_eq!((gate.slot, gate.index), (3, 2));
    assert_eq!(gate.reason, queen_sdk::KvReason::Exists);
    assert_eq!(
        (gate.version, gate.value.clone()),
        (Some(90102), Some(json!(true)))
    );
    assert!(!outcome.is_committed());
    assert!(outcome.committed().is_none());
}

#[tokio::test]
async fn a_gate_on_an_absent_key_has_no_version_or_value() {
    let outcome = commit_json(
        200,
        json!({ "transactionId": "t", "success": false, "reason": "kv_precondition",
                "error": "QKV", "results": [], "ok": false, "failedIndex": 0,
                "kvReason": "absent", "version": null, "value": null }),
    )
    .await
    .expect("a gate is a value");
    match outcome {
        Commit::Gated { gate, .. } => {
            assert_eq!(gate.slot, 0);
            assert_eq!(gate.reason, queen_sdk::KvReason::Absent);
            assert_eq!(gate.version, None);
            assert_eq!(gate.value, None);
        }
        other => panic!("expected gated, got {other:?}"),
    }
}

#[tokio::test]
async fn a_4xx_carrying_the_rollback_envelope_decodes_as_the_rollback() {
    let (reason, _, retried) = rolled_back(commit_json(409, rollback("duplicate")).await);
    assert_eq!(reason, RollbackReason::Duplicate);
    assert!(!retried);
    let (reason, _, _) = rolled_back(commit_json(400, rollback("rejected_ack")).await);
    assert_eq!(reason, RollbackReason::RejectedAck);
    let gated = commit_json(
        409,
        json!({ "transactionId": "t", "success": false, "reason": "kv_precondition",
                "error": "QKV", "results": [], "ok": false, "failedIndex": 1,
                "kvReason": "version", "version": 12, "value": {"a": 1} }),
    )
    .await
    .expect("a gate is a value");
    assert!(matches!(
        gated,
        Commit::Gated { ref gate, .. }
            if gate.slot == 1 && gate.reason == queen_sdk::KvReason::Version && gate.version == Some(12)
    ));
}

#[tokio::test]
async fn an_answer_without_success_is_a_decode_error() {
    let out = commit_json(200, json!({"transactionId": "t", "results": []})).await;
    assert!(matches!(out, Err(Error::Decode { .. })), "{out:?}");
    let out = commit_answered(ResponseTemplate::new(200).set_body_string("<html>ok</html>")).await;
    assert!(matches!(out, Err(Error::Decode { .. })), "{out:?}");
}

// --- engine errors ------------------------------------------------------------------

#[tokio::test]
async fn a_400_bad_request_is_an_api_error() {
    let (status, code, message, retry_after) = api_error(
        commit_json(
            400,
            json!({"error": "a transactionId is over 65,535 bytes", "code": "bad_request"}),
        )
        .await,
    );
    assert_eq!(status, 400);
    assert_eq!(code.as_deref(), Some("bad_request"));
    assert_eq!(message, "a transactionId is over 65,535 bytes");
    assert_eq!(retry_after, None);
}

#[tokio::test]
async fn a_413_name_too_long_keeps_its_code() {
    let out = commit_json(
        413,
        json!({"error": "a queue name is over the key budget", "code": "name_too_long"}),
    )
    .await;
    let err = out.as_ref().expect_err("an error");
    assert_eq!(err.status(), Some(413));
    assert_eq!(err.code(), Some("name_too_long"));
    let (status, _, message, _) = api_error(out);
    assert_eq!(status, 413);
    assert_eq!(message, "a queue name is over the key budget");
}

#[tokio::test]
async fn a_429_overloaded_keeps_its_retry_after() {
    let (status, code, _, retry_after) = api_error(
        commit_answered(
            ResponseTemplate::new(429)
                .insert_header("Retry-After", "2")
                .set_body_json(json!({"error": "too many requests", "code": "overloaded"})),
        )
        .await,
    );
    assert_eq!(status, 429);
    assert_eq!(code.as_deref(), Some("overloaded"));
    assert_eq!(retry_after, Some(Duration::from_secs(2)));
}

#[tokio::test]
async fn a_503_retry_keeps_its_retry_after() {
    let (status, code, message, retry_after) = api_error(
        commit_answered(
            ResponseTemplate::new(503)
                .insert_header("Retry-After", "1")
                .set_body_json(json!({"error": "leader changed", "code": "retry"})),
        )
        .await,
    );
    assert_eq!(status, 503);
    assert_eq!(code.as_deref(), Some("retry"));
    assert_eq!(message, "leader changed");
    assert_eq!(retry_after, Some(Duration::from_secs(1)));
}

#[tokio::test]
async fn a_500_internal_is_an_api_error() {
    let (status, code, _, retry_after) =
        api_error(commit_json(500, json!({"error": "boom", "code": "internal"})).await);
    assert_eq!(status, 500);
    assert_eq!(code.as_deref(), Some("internal"));
    assert_eq!(retry_after, None);
}

#[tokio::test]
async fn a_507_storage_full_is_an_api_error() {
    let (status, code, _, _) =
        api_error(commit_json(507, json!({"error": "disk full", "code": "storage_full"})).await);
    assert_eq!((status, code.as_deref()), (507, Some("storage_full")));
}

#[tokio::test]
async fn without_code_the_error_is_the_code() {
    let (status, code, message, _) =
        api_error(commit_json(429, json!({"error": "rate_limited"})).await);
    assert_eq!(status, 429);
    assert_eq!(code.as_deref(), Some("rate_limited"));
    assert_eq!(message, "rate_limited");
}

#[tokio::test]
async fn an_open_set_code_is_kept() {
    let (_, code, _, _) = api_error(
        commit_json(
            403,
            json!({"error": "role too low", "code": "forbidden_by_proxy"}),
        )
        .await,
    );
    assert_eq!(code.as_deref(), Some("forbidden_by_proxy"));
}

#[tokio::test]
async fn a_non_json_error_body_keeps_the_text() {
    let (status, code, message, _) = api_error(
        commit_answered(ResponseTemplate::new(401).set_body_string("unauthorized")).await,
    );
    assert_eq!(status, 401);
    assert_eq!(code, None);
    assert_eq!(message, "unauthorized");
}

// --- pop ----------------------------------------------------------------------------

#[derive(Debug, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderPaid {
    order_id: String,
    customer: String,
    total: f64,
}

#[tokio::test]
async fn pop_204_is_an_empty_vec() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders"))
        .respond_with(ResponseTemplate::new(204))
        .expect(1)
        .mount(&server)
        .await;
    let got = client(&server)
        .pop::<OrderPaid>("orders")
        .send()
        .await
        .expect("an empty pop");
    assert!(got.is_empty());
}

#[tokio::test]
async fn pop_200_with_no_messages_is_an_empty_vec() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"success": true, "messages": []})),
        )
        .expect(1)
        .mount(&server)
        .await;
    let got = client(&server)
        .pop::<OrderPaid>("orders")
        .send()
        .await
        .expect("an empty pop");
    assert!(got.is_empty());
}

#[tokio::test]
async fn pop_200_decodes_typed_messages() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders"))
        .and(query_param("consumerGroup", "billing"))
        .and(query_param("batch", "10"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "success": true, "queue": "orders", "partition": "customer-123",
            "partitionId": "42", "leaseId": LEASE, "consumerGroup": "billing",
            "partitionsClaimed": 1,
            "messages": [
                { "id": "0199a7c2-5e1a-7000-8000-000000000007", "transactionId": "order-7-paid",
                  "traceId": null,
                  "data": { "orderId": "order-7", "customer": "customer-123", "total": 120.5 },
                  "producerSub": null, "createdAt": "2026-10-01T09:14:03.512887Z",
                  "partitionId": "42", "partition": "customer-123", "leaseId": LEASE,
                  "consumerGroup": "billing", "queue": "orders", "offset": 17,
                  "deliveryAttempt": 1, "someFutureKey": {"x": 1} },
                { "id": "0199a7c2-5e1a-7000-8000-000000000008", "transactionId": "order-8-paid",
                  "traceId": "4bf92f3577b34da6a3ce929d0e0e4736",
                  "data": { "orderId": "order-8", "customer": "customer-123", "total": 7.0 },
                  "producerSub": "svc-orders", "createdAt": "2026-10-01T09:14:04+00:00",
                  "partitionId": "42", "partition": "customer-123", "leaseId": LEASE,
                  "consumerGroup": "billing" }
            ]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let got = client(&server)
        .pop::<OrderPaid>("orders")
        .group("billing")
        .batch(10)
        .send()
        .await
        .expect("a pop");
    assert_eq!(got.len(), 2);
    let m = &got[0];
    assert_eq!(
        m.data,
        OrderPaid {
            order_id: "order-7".into(),
            customer: "customer-123".into(),
            total: 120.5
        }
    );
    assert_eq!(m.id, "0199a7c2-5e1a-7000-8000-000000000007");
    assert_eq!(m.transaction_id, "order-7-paid");
    assert_eq!(m.partition_id, "42");
    assert_eq!(m.partition, "customer-123");
    assert_eq!(m.lease_id, LEASE);
    assert!(m.is_leased());
    assert_eq!(m.consumer_group, "billing");
    assert_eq!(m.queue, "orders");
    assert_eq!(m.offset, Some(17));
    assert_eq!(m.delivery_attempt, Some(1));
    assert_eq!(m.trace_id, None);
    assert_eq!(m.producer_sub, None);
    assert_eq!(m.created_at, "2026-10-01T09:14:03.512887Z");
    let n = &got[1];
    assert_eq!(n.data.order_id, "order-8");
    assert_eq!(
        n.trace_id.as_deref(),
        Some("4bf92f3577b34da6a3ce929d0e0e4736")
    );
    assert_eq!(n.producer_sub.as_deref(), Some("svc-orders"));
    assert_eq!((n.offset, n.delivery_attempt), (None, None));
}

#[tokio::test]
async fn an_auto_ack_pop_decodes_an_unleased_message() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders/partition/customer-123"))
        .and(query_param("autoAck", "true"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "success": true, "leaseId": "", "messages": [
                { "id": "m", "transactionId": "t", "traceId": null, "data": 5,
                  "producerSub": null, "createdAt": "2026-10-01T09:14:03Z",
                  "partitionId": "42", "partition": "customer-123", "leaseId": "",
                  "consumerGroup": "__QUEUE_MODE__" } ]
        })))
        .expect(1)
        .mount(&server)
        .await;
    let got = client(&server)
        .pop::<u32>("orders")
        .partition("customer-123")
        .auto_ack()
        .send()
        .await
        .expect("a pop");
    assert_eq!(got[0].data, 5);
    assert!(!got[0].is_leased());
}

#[tokio::test]
async fn a_payload_of_the_wrong_type_is_a_decode_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "success": true, "messages": [
                { "id": "m", "transactionId": "t", "traceId": null, "data": "not an order",
                  "producerSub": null, "createdAt": "2026-10-01T09:14:03Z",
                  "partitionId": "42", "partition": "p", "leaseId": LEASE,
                  "consumerGroup": "billing" } ]
        })))
        .mount(&server)
        .await;
    let out = client(&server).pop::<OrderPaid>("orders").send().await;
    assert!(matches!(out, Err(Error::Decode { .. })), "{out:?}");
}

#[tokio::test]
async fn a_failed_pop_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"success": false, "error": "queue is paused"})),
        )
        .mount(&server)
        .await;
    let out = client(&server).pop::<OrderPaid>("orders").send().await;
    match out {
        Err(Error::Api {
            status, message, ..
        }) => {
            assert_eq!(status, 200);
            assert_eq!(message, "queue is paused");
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

// --- ack and push -------------------------------------------------------------------

#[tokio::test]
async fn ack_results_decode_into_ack_outcomes() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/ack/batch"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            { "index": 0, "transactionId": "order-7-paid", "success": true, "error": null,
              "leaseReleased": true, "dlq": false, "noop": false },
            { "index": 1, "transactionId": "order-8-paid", "success": false,
              "error": "the lease expired", "leaseReleased": false, "dlq": false, "noop": false },
            { "index": 2, "transactionId": "order-9-paid", "success": true, "error": null,
              "leaseReleased": false, "dlq": true, "noop": false },
            { "index": 3, "transactionId": "order-7-paid", "success": true, "error": null,
              "leaseReleased": false, "dlq": false, "noop": true }
        ])))
        .expect(1)
        .mount(&server)
        .await;
    let m = order_paid();
    let out = client(&server)
        .ack_batch(&[
            (&m, AckStatus::Completed),
            (
                &m,
                AckStatus::Failed {
                    error: "boom".into(),
                },
            ),
            (&m, AckStatus::Dlq),
            (&m, AckStatus::Retry),
        ])
        .await
        .expect("acks");
    assert_eq!(
        out,
        vec![
            AckOutcome {
                success: true,
                error: None,
                lease_released: true,
                dlq: false,
                noop: false
            },
            AckOutcome {
                success: false,
                error: Some("the lease expired".into()),
                lease_released: false,
                dlq: false,
                noop: false
            },
            AckOutcome {
                success: true,
                error: None,
                lease_released: false,
                dlq: true,
                noop: false
            },
            AckOutcome {
                success: true,
                error: None,
                lease_released: false,
                dlq: false,
                noop: true
            },
        ]
    );
    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    let acks = sent["acknowledgments"].as_array().unwrap();
    assert_eq!(acks.len(), 4);
    assert_eq!(acks[0]["leaseId"], LEASE);
    assert_eq!(acks[1]["status"], "failed");
    assert_eq!(acks[1]["error"], "boom");
    assert_eq!(acks[2]["status"], "dlq");
    assert_eq!(acks[3]["status"], "retry");
}

#[tokio::test]
async fn a_single_ack_decodes_one_outcome() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/ack/batch"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!([
            { "index": 0, "transactionId": "order-7-paid", "success": true, "error": null,
              "leaseReleased": true, "dlq": false, "noop": false }
        ])))
        .expect(1)
        .mount(&server)
        .await;
    let out = client(&server)
        .ack(&order_paid(), AckStatus::Completed)
        .await
        .expect("an ack");
    assert!(out.success && out.lease_released);
}

#[tokio::test]
async fn push_results_decode_into_pushed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/push"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!([
            { "index": 0, "message_id": "0199a7c2-61f1-7d55-b0e2-7a1c9e4f6d20",
              "transaction_id": "order-7", "queueName": "orders", "status": "queued",
              "offset": 17 },
            { "index": 1, "message_id": "0199a7c2-61f1-7d55-b0e2-7a1c9e4f6d20",
              "transaction_id": "order-7", "queueName": "orders", "status": "duplicate",
              "offset": 17 },
            { "index": 2, "message_id": "", "transaction_id": "order-8",
              "queueName": "orders", "status": "error", "error": "the partition is full" }
        ])))
        .expect(1)
        .mount(&server)
        .await;
    let out = client(&server)
        .push(vec![
            PushItem::new("orders", &json!({"n": 1})).transaction_id("order-7"),
            PushItem::new("orders", &json!({"n": 1})).transaction_id("order-7"),
            PushItem::new("orders", &json!({"n": 2})).transaction_id("order-8"),
        ])
        .await
        .expect("a push");
    assert_eq!(
        out[0],
        Pushed {
            index: 0,
            message_id: "0199a7c2-61f1-7d55-b0e2-7a1c9e4f6d20".into(),
            transaction_id: "order-7".into(),
            queue: "orders".into(),
            status: "queued".into(),
            offset: Some(17),
        }
    );
    assert!(!out[0].is_duplicate());
    assert!(out[1].is_duplicate());
    assert_eq!(out[1].offset, Some(17));
    assert_eq!(out[2].status, "error");
    assert_eq!(out[2].offset, None);
}

#[tokio::test]
async fn lease_extension_decodes_renewed_and_expired() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(format!("/api/v1/lease/{LEASE}/extend")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "leaseId": LEASE, "success": true, "renewed": 2,
            "newExpiresAt": "2026-10-01T09:15:03Z", "expiresAt": "2026-10-01T09:15:03Z",
            "lease_expires_at": "2026-10-01T09:15:03Z"
        })))
        .up_to_n_times(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path(format!("/api/v1/lease/{LEASE}/extend")))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "leaseId": LEASE, "success": false, "renewed": 0,
            "newExpiresAt": null, "expiresAt": null, "lease_expires_at": null
        })))
        .mount(&server)
        .await;
    let c = client(&server);
    let ok = c
        .extend_lease(LEASE, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(ok.renewed, 2);
    assert_eq!(ok.expires_at.as_deref(), Some("2026-10-01T09:15:03Z"));
    let gone = c
        .extend_lease(LEASE, Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(gone.renewed, 0);
    assert_eq!(gone.expires_at, None);
}

#[test]
fn a_message_group_without_a_status_reads_queen_2_engines_consumed_flag() {
    // Queen 2's engine answers each group's entry with `consumed`, not `status`.
    let g: queen_sdk::MessageGroup =
        serde_json::from_value(serde_json::json!({"name": "billing", "consumed": true})).unwrap();
    assert_eq!(g.status, queen_sdk::MessageStatus::Completed);
    let g: queen_sdk::MessageGroup =
        serde_json::from_value(serde_json::json!({"name": "billing", "consumed": false})).unwrap();
    assert_eq!(g.status, queen_sdk::MessageStatus::Pending);
    let g: queen_sdk::MessageGroup = serde_json::from_value(
        serde_json::json!({"name": "billing", "status": "processing", "deliveryAttempts": 2}),
    )
    .unwrap();
    assert_eq!(
        (g.status, g.delivery_attempts),
        (queen_sdk::MessageStatus::Processing, 2)
    );
}
