//! Which failures are retried, how long the client waits, and when it gives up.
//!
//! Real time: tokio's paused clock auto-advances while a request waits on the socket, which
//! fires the client's timeouts, so these tests measure with `std::time::Instant` and keep the
//! waits short.

use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queen_sdk::{
    Client, Commit, Error, Message, RetryPolicy, RollbackReason, TransactionBuilder, Ttl,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const LEASE: &str = "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37";

/// Answers the `n`th request with the `n`th template (the last one repeats) and records
/// when each request arrived.
struct Seq {
    answers: Vec<ResponseTemplate>,
    arrivals: Arc<Mutex<Vec<Instant>>>,
}

impl Respond for Seq {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let mut arrivals = self.arrivals.lock().unwrap();
        arrivals.push(Instant::now());
        let i = (arrivals.len() - 1).min(self.answers.len() - 1);
        self.answers[i].clone()
    }
}

/// A broker whose transaction route answers `answers` in turn; answers the arrival times.
async fn broker(answers: Vec<ResponseTemplate>) -> (MockServer, Arc<Mutex<Vec<Instant>>>) {
    let server = MockServer::start().await;
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .respond_with(Seq {
            answers,
            arrivals: arrivals.clone(),
        })
        .mount(&server)
        .await;
    (server, arrivals)
}

/// A tiny backoff: 1 ms, no jitter.
fn fast() -> RetryPolicy {
    RetryPolicy::default()
        .min_delay(Duration::from_millis(1))
        .max_delay(Duration::from_millis(5))
        .jitter(false)
}

fn client(server: &MockServer, policy: RetryPolicy) -> Client {
    Client::builder()
        .url(server.uri())
        .retry(policy)
        .build()
        .expect("client")
}

fn engine_error(status: u16, code: &str) -> ResponseTemplate {
    ResponseTemplate::new(status)
        .set_body_json(json!({"error": format!("{code} error"), "code": code}))
}

fn commit_answer() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c11", "success": true,
        "results": [{ "index": 0, "type": "ack", "success": true,
                      "transactionId": "order-7-paid", "error": null, "dlq": false }]
    }))
}

/// A Queen 2 commit of a transaction carrying KV: each KV op has its `kv` result (a
/// broker that answers without them ignored the KV part, which the SDK reports).
fn kv_commit_answer() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c12", "success": true,
        "results": [{ "type": "kv", "opIndex": 0, "op": "incr", "ns": "stats", "key": "orders",
                      "applied": true, "value": 1, "version": 1 }]
    }))
}

fn rollback(reason: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "0199a7c3-0a2e-7c11-8d40-5f6e7a8b9c02", "success": false,
        "reason": reason, "error": "QDUP the transaction rolled back", "results": []
    }))
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

/// A fenced ack and a push whose id is derived from it: safe to send twice.
fn fenced_step(t: TransactionBuilder, msg: &Message<Value>) -> TransactionBuilder {
    t.ack(msg)
        .push("receipts", |p| p.payload(&json!({"orderId": "order-7"})))
}

/// KV writes only, with no gate: sending it twice counts twice.
fn ungated_kv(t: TransactionBuilder) -> TransactionBuilder {
    t.kv(|k| k.incr("stats", "orders", 1, Ttl::Forever))
        .kv(|k| {
            k.put(
                "orders",
                "order-7",
                &json!({"status": "paid"}),
                Ttl::days(1),
            )
        })
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .expect("recording is on")
        .iter()
        .map(|r| r.body_json().expect("a JSON body"))
        .collect()
}

fn count(arrivals: &Arc<Mutex<Vec<Instant>>>) -> usize {
    arrivals.lock().unwrap().len()
}

// --- what is retried ----------------------------------------------------------------

#[tokio::test]
async fn a_503_then_200_is_retried_for_a_fenced_ack_and_commits_as_retried() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry"), commit_answer()]).await;
    let msg = order_paid();
    let outcome = fenced_step(client(&server, fast()).transaction(), &msg)
        .commit()
        .await
        .expect("retried and committed");
    match outcome {
        Commit::Committed(c) => {
            assert!(c.retried, "the commit came after a retry");
            assert_eq!(c.results().len(), 1);
        }
        other => panic!("expected a commit, got {other:?}"),
    }
    assert_eq!(count(&arrivals), 2);
    // The retry is the same body: the same lease and the same derived push id.
    let sent = bodies(&server).await;
    assert_eq!(sent[0], sent[1]);
}

#[tokio::test]
async fn a_500_and_a_502_are_retried_too() {
    let (server, arrivals) = broker(vec![
        engine_error(500, "internal"),
        ResponseTemplate::new(502).set_body_string("bad gateway"),
        commit_answer(),
    ])
    .await;
    let msg = order_paid();
    let outcome = client(&server, fast())
        .transaction()
        .ack(&msg)
        .commit()
        .await
        .expect("committed on the third attempt");
    assert!(outcome.committed().unwrap().retried);
    assert_eq!(count(&arrivals), 3);
}

#[tokio::test]
async fn a_first_time_commit_is_not_marked_retried() {
    let (server, _) = broker(vec![commit_answer()]).await;
    let msg = order_paid();
    let c = client(&server, fast())
        .transaction()
        .ack(&msg)
        .commit()
        .await
        .unwrap()
        .committed()
        .unwrap();
    assert!(!c.retried);
}

#[tokio::test]
async fn a_400_is_never_retried() {
    let (server, arrivals) = broker(vec![engine_error(400, "bad_request"), commit_answer()]).await;
    let msg = order_paid();
    let out = fenced_step(client(&server, fast()).transaction(), &msg)
        .commit()
        .await;
    match out {
        Err(Error::Api { status, code, .. }) => {
            assert_eq!(status, 400);
            assert_eq!(code.as_deref(), Some("bad_request"));
        }
        other => panic!("expected the 400, got {other:?}"),
    }
    assert_eq!(count(&arrivals), 1, "exactly one request");
}

#[tokio::test]
async fn a_507_storage_full_is_not_retried() {
    // A full broker stays full until space is freed: retrying only burns the deadline.
    let (server, arrivals) = broker(vec![engine_error(507, "storage_full"), commit_answer()]).await;
    let msg = order_paid();
    let err = fenced_step(client(&server, fast()).transaction(), &msg)
        .commit()
        .await
        .expect_err("refused");
    assert_eq!(err.status(), Some(507));
    assert_eq!(err.code(), Some("storage_full"));
    assert_eq!(count(&arrivals), 1, "exactly one request");
}

#[tokio::test]
async fn other_4xx_answers_are_never_retried() {
    for (status, code) in [
        (401, "unauthorized"),
        (403, "forbidden"),
        (404, "no_such_route"),
        (413, "name_too_long"),
    ] {
        let (server, arrivals) = broker(vec![engine_error(status, code), commit_answer()]).await;
        let msg = order_paid();
        let out = client(&server, fast())
            .transaction()
            .ack(&msg)
            .commit()
            .await;
        let err = out.expect_err("refused");
        assert_eq!(err.status(), Some(status));
        assert_eq!(count(&arrivals), 1, "{status}: exactly one request");
    }
}

/// A Queen 2 commit of an ungated KV step with the SDK's step marker first among its
/// KV operations: three `kv` results, the marker's at slot 0.
fn marked_kv_commit_answer() -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c13", "success": true,
        "results": [
            { "index": 0, "type": "kv", "opIndex": 0, "op": "putIfAbsent", "ns": "queen.steps",
              "key": "k", "applied": true, "version": 1 },
            { "index": 1, "type": "kv", "opIndex": 1, "op": "incr", "ns": "stats", "key": "orders",
              "applied": true, "value": 1, "version": 1 },
            { "index": 2, "type": "kv", "opIndex": 2, "op": "put", "ns": "orders", "key": "order-7",
              "applied": true, "version": 1 }
        ]
    }))
}

#[tokio::test]
async fn an_ungated_kv_only_transaction_is_resent_under_the_step_marker_after_a_503() {
    let (server, arrivals) =
        broker(vec![engine_error(503, "retry"), marked_kv_commit_answer()]).await;
    let outcome = ungated_kv(client(&server, fast()).transaction())
        .commit()
        .await
        .expect("resent: the marker makes it harmless");
    let c = outcome.committed().expect("committed");
    assert!(c.retried);
    // The caller reads its own two results, numbered as it added them.
    let kv: Vec<_> = c
        .kv()
        .map(|k| (k.index, k.op_index, k.op.as_str()))
        .collect();
    assert_eq!(kv, [(0, 0, "incr"), (1, 1, "put")]);
    assert_eq!(count(&arrivals), 2);
    let sent = bodies(&server).await;
    assert_eq!(sent[0], sent[1], "the same bytes, marker and all");
    let marker = &sent[0]["kv"][0];
    assert_eq!(marker["op"], "putIfAbsent");
    assert_eq!(marker["ns"], queen_sdk::STEP_MARKER_NS);
    assert_eq!(marker["required"], true);
    assert_eq!(marker["ttlSeconds"], 60, "twice fast()'s 30 s deadline");
    assert_eq!(sent[0]["kv"][1]["op"], "incr");
    assert_eq!(sent[0]["kv"].as_array().unwrap().len(), 3);
}

#[tokio::test]
async fn a_guarded_step_that_keeps_failing_after_it_may_have_applied_is_outcome_unknown() {
    // The marker guards the call's own resends only: its key is new for each call, so
    // the caller cannot send the step again safely, and is told so.
    let (server, arrivals) = broker(vec![engine_error(503, "retry")]).await;
    let out = ungated_kv(client(&server, fast().max_attempts(3)).transaction())
        .commit()
        .await;
    match out {
        Err(Error::OutcomeUnknown { cause }) => {
            assert!(
                matches!(*cause, Error::Exhausted { attempts: 3, .. }),
                "{cause}"
            );
        }
        other => panic!("expected OutcomeUnknown, got {other:?}"),
    }
    assert_eq!(count(&arrivals), 3);
}

#[tokio::test]
async fn an_ungated_kv_only_transaction_is_resent_as_is_when_asked() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry"), kv_commit_answer()]).await;
    let outcome = ungated_kv(client(&server, fast()).transaction())
        .resend(queen_sdk::Resend::AsIs)
        .commit()
        .await
        .expect("retried as asked");
    assert!(outcome.committed().unwrap().retried);
    assert_eq!(count(&arrivals), 2);
}

#[tokio::test]
async fn an_ungated_timer_only_transaction_is_resent_under_the_step_marker_after_a_500() {
    let answer = ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c14", "success": true,
        "results": [
            { "index": 0, "type": "kv", "opIndex": 0, "op": "putIfAbsent", "ns": "queen.steps",
              "key": "k", "applied": true, "version": 1 },
            { "index": 1, "type": "timer", "opIndex": 0, "queue": "reminders", "key": "order-7",
              "ok": true, "status": "scheduled", "deliverAt": "2026-10-01T09:15:03Z" }
        ]
    }));
    let (server, arrivals) = broker(vec![engine_error(500, "internal"), answer]).await;
    let c = client(&server, fast())
        .transaction()
        .timer("reminders", "order-7", |t| t.after(Duration::from_secs(60)))
        .commit()
        .await
        .expect("resent under the marker")
        .committed()
        .expect("committed");
    assert_eq!(count(&arrivals), 2);
    assert_eq!(c.kv().count(), 0, "the marker's result is not the caller's");
    let timer = c.timers().next().expect("the timer's result");
    assert_eq!((timer.index, timer.op_index), (0, 0));
    assert_eq!(
        bodies(&server).await[1]["kv"][0]["ns"],
        queen_sdk::STEP_MARKER_NS
    );
}

#[tokio::test]
async fn a_push_with_a_fresh_id_is_resent_under_the_same_id() {
    // No ack to derive from and no explicit id: the id is minted once for the call, so
    // a resend after a commit would roll back as a duplicate.
    let (server, arrivals) = broker(vec![engine_error(503, "retry"), commit_answer()]).await;
    let outcome = client(&server, fast())
        .transaction()
        .push("receipts", |p| p.payload(&1))
        .commit()
        .await
        .expect("resent");
    assert!(outcome.committed().unwrap().retried);
    assert_eq!(count(&arrivals), 2);
    let sent = bodies(&server).await;
    let id = |b: &Value| b["operations"][0]["items"][0]["transactionId"].clone();
    assert_eq!(id(&sent[0]), id(&sent[1]));
    assert!(sent[0].get("kv").is_none(), "the push guards it: no marker");
}

#[tokio::test]
async fn a_push_with_an_explicit_id_is_retried() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry"), commit_answer()]).await;
    let outcome = client(&server, fast())
        .transaction()
        .push("receipts", |p| {
            p.transaction_id("receipt-order-7").payload(&1)
        })
        .commit()
        .await
        .expect("a deterministic push is safe to resend");
    assert!(outcome.is_committed());
    assert_eq!(count(&arrivals), 2);
}

#[tokio::test]
async fn a_gated_kv_transaction_is_retried() {
    let (server, arrivals) = broker(vec![engine_error(503, "no_leader"), kv_commit_answer()]).await;
    let outcome = ungated_kv(client(&server, fast()).transaction())
        .once("paid", "order-7-paid", Ttl::days(1))
        .commit()
        .await
        .expect("a required marker makes it safe");
    assert!(outcome.is_committed());
    assert_eq!(count(&arrivals), 2);
}

#[tokio::test]
async fn a_429_is_retried_even_for_an_ungated_kv_only_transaction() {
    let (server, arrivals) =
        broker(vec![engine_error(429, "overloaded"), kv_commit_answer()]).await;
    let outcome = ungated_kv(client(&server, fast()).transaction())
        .commit()
        .await
        .expect("a 429 surely did not apply");
    assert!(outcome.is_committed());
    assert_eq!(count(&arrivals), 2);
}

#[tokio::test]
async fn a_refused_connection_is_retried_on_the_next_url_even_when_unsafe() {
    // A port nothing listens on: the connection is refused, so nothing was applied.
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (server, arrivals) = broker(vec![kv_commit_answer()]).await;
    let client = Client::builder()
        .urls([dead, server.uri()])
        .retry(fast())
        .build()
        .unwrap();
    let outcome = ungated_kv(client.transaction())
        .commit()
        .await
        .expect("moved on to the live broker");
    assert!(outcome.is_committed());
    assert_eq!(count(&arrivals), 1);
}

#[tokio::test]
async fn a_pop_is_retried_after_a_503() {
    let server = MockServer::start().await;
    let arrivals = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("GET"))
        .and(path("/api/v1/pop/queue/orders"))
        .respond_with(Seq {
            answers: vec![engine_error(503, "retry"), ResponseTemplate::new(204)],
            arrivals: arrivals.clone(),
        })
        .mount(&server)
        .await;
    let got = client(&server, fast())
        .pop::<Value>("orders")
        .send()
        .await
        .expect("retried");
    assert!(got.is_empty());
    assert_eq!(count(&arrivals), 2);
}

// --- how long it waits, when it gives up --------------------------------------------

#[tokio::test]
async fn retry_after_is_honoured() {
    let (server, arrivals) = broker(vec![
        engine_error(503, "retry").insert_header("Retry-After", "1"),
        commit_answer(),
    ])
    .await;
    let msg = order_paid();
    let outcome = client(&server, fast())
        .transaction()
        .ack(&msg)
        .commit()
        .await
        .expect("committed after the wait");
    assert!(outcome.is_committed());
    let at = arrivals.lock().unwrap().clone();
    assert_eq!(at.len(), 2);
    let gap = at[1] - at[0];
    assert!(
        gap >= Duration::from_millis(950),
        "the retry came {gap:?} after the first attempt; the broker asked for 1 s"
    );
    assert!(gap < Duration::from_secs(3), "waited {gap:?}");
}

#[tokio::test]
async fn retry_after_on_a_429_is_honoured() {
    let (server, arrivals) = broker(vec![
        engine_error(429, "overloaded").insert_header("Retry-After", "1"),
        kv_commit_answer(),
    ])
    .await;
    let outcome = ungated_kv(client(&server, fast()).transaction())
        .commit()
        .await
        .expect("committed after the wait");
    assert!(outcome.is_committed());
    let at = arrivals.lock().unwrap().clone();
    assert_eq!(at.len(), 2);
    assert!(
        at[1] - at[0] >= Duration::from_millis(950),
        "{:?}",
        at[1] - at[0]
    );
}

#[tokio::test]
async fn the_deadline_is_respected() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry")]).await;
    let policy = RetryPolicy::default()
        .max_attempts(1_000)
        .min_delay(Duration::from_millis(50))
        .max_delay(Duration::from_millis(100))
        .jitter(false)
        .deadline(Duration::from_millis(300));
    let msg = order_paid();
    let started = Instant::now();
    let out = client(&server, policy)
        .transaction()
        .ack(&msg)
        .commit()
        .await;
    let took = started.elapsed();
    let sent = count(&arrivals);
    assert!(took < Duration::from_secs(1), "gave up after {took:?}");
    assert!(
        (2..=8).contains(&sent),
        "{sent} requests in a 300 ms deadline"
    );
    match out {
        Err(Error::Exhausted { attempts, last }) => {
            assert_eq!(attempts as usize, sent);
            assert_eq!(last.status(), Some(503));
        }
        Err(Error::Api { status: 503, .. }) => {}
        // On a loaded machine an attempt can still be in flight when the deadline
        // passes: it is cut, and that is the deadline being respected too.
        Err(Error::DeadlineExceeded { attempts }) => assert!(attempts as usize >= sent),
        other => panic!("expected Exhausted, the 503 or DeadlineExceeded, got {other:?}"),
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_deadline_gives_up_at_once() {
    let (server, arrivals) = broker(vec![
        engine_error(503, "retry").insert_header("Retry-After", "5"),
        commit_answer(),
    ])
    .await;
    let policy = fast().deadline(Duration::from_millis(300));
    let msg = order_paid();
    let started = Instant::now();
    let out = client(&server, policy)
        .transaction()
        .ack(&msg)
        .commit()
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(count(&arrivals), 1);
    match out {
        Err(Error::Api {
            status: 503,
            retry_after,
            ..
        }) => assert_eq!(retry_after, Some(Duration::from_secs(5))),
        other => panic!("expected the 503, got {other:?}"),
    }
}

#[tokio::test]
async fn max_attempts_bounds_the_retries() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry")]).await;
    let msg = order_paid();
    let out = client(&server, fast().max_attempts(3))
        .transaction()
        .ack(&msg)
        .commit()
        .await;
    match out {
        Err(Error::Exhausted { attempts, last }) => {
            assert_eq!(attempts, 3);
            assert_eq!(last.code(), Some("retry"));
        }
        other => panic!("expected Exhausted, got {other:?}"),
    }
    assert_eq!(count(&arrivals), 3);
}

#[tokio::test]
async fn retry_policy_none_sends_once() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry"), commit_answer()]).await;
    let msg = order_paid();
    let out = client(&server, RetryPolicy::none())
        .transaction()
        .ack(&msg)
        .commit()
        .await;
    assert!(
        matches!(out, Err(Error::Api { status: 503, .. })),
        "{out:?}"
    );
    assert_eq!(count(&arrivals), 1);
}

// --- a retry that rolls back --------------------------------------------------------

#[tokio::test]
async fn a_retried_commit_that_rolls_back_as_duplicate_reports_retried() {
    let (server, arrivals) = broker(vec![engine_error(503, "retry"), rollback("duplicate")]).await;
    let msg = order_paid();
    let out = fenced_step(client(&server, fast()).transaction(), &msg)
        .commit()
        .await;
    match out {
        Err(Error::RolledBack {
            reason, retried, ..
        }) => {
            assert_eq!(reason, RollbackReason::Duplicate);
            assert!(retried, "the first attempt probably committed");
        }
        other => panic!("expected a duplicate rollback, got {other:?}"),
    }
    assert_eq!(count(&arrivals), 2);
}

#[tokio::test]
async fn a_retried_commit_that_rolls_back_as_rejected_ack_reports_retried() {
    let (server, _) = broker(vec![engine_error(503, "timeout"), rollback("rejected_ack")]).await;
    let msg = order_paid();
    let out = client(&server, fast())
        .transaction()
        .ack(&msg)
        .commit()
        .await;
    assert!(
        matches!(
            out,
            Err(Error::RolledBack {
                reason: RollbackReason::RejectedAck,
                retried: true,
                ..
            })
        ),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_retried_commit_that_is_gated_reports_retried() {
    let gated = ResponseTemplate::new(200).set_body_json(json!({
        "transactionId": "t", "success": false, "reason": "kv_precondition",
        "error": "QKV", "results": [], "ok": false, "failedIndex": 0,
        "kvReason": "exists", "version": 90102, "value": true
    }));
    let (server, _) = broker(vec![engine_error(503, "retry"), gated]).await;
    let out = client(&server, fast())
        .transaction()
        .once("paid", "order-7-paid", Ttl::days(1))
        .commit()
        .await
        .expect("a gate is a value");
    match out {
        Commit::Gated { retried, gate, .. } => {
            assert!(retried);
            assert_eq!((gate.slot, gate.kind), (0, queen_sdk::GateKind::Once));
        }
        other => panic!("expected gated, got {other:?}"),
    }
}

// --- what a retry's verdict means -----------------------------------------------------

#[tokio::test]
async fn a_duplicate_after_a_429_is_not_marked_retried() {
    // A 429 surely did not apply, so a duplicate on the resend is a real duplicate.
    let (server, arrivals) =
        broker(vec![engine_error(429, "overloaded"), rollback("duplicate")]).await;
    let msg = order_paid();
    let out = fenced_step(client(&server, fast()).transaction(), &msg)
        .commit()
        .await;
    match out {
        Err(Error::RolledBack {
            reason, retried, ..
        }) => {
            assert_eq!(reason, RollbackReason::Duplicate);
            assert!(
                !retried,
                "the first attempt was refused, not possibly applied"
            );
        }
        other => panic!("expected a duplicate rollback, got {other:?}"),
    }
    assert_eq!(count(&arrivals), 2);
}

#[tokio::test]
async fn the_deadline_bounds_an_attempt_in_flight() {
    let (server, _) = broker(vec![commit_answer().set_delay(Duration::from_secs(5))]).await;
    let policy = fast().deadline(Duration::from_millis(300));
    let started = Instant::now();
    let msg = order_paid();
    let out = fenced_step(client(&server, policy.clone()).transaction(), &msg)
        .commit()
        .await;
    assert!(
        matches!(out, Err(Error::DeadlineExceeded { attempts: 1 })),
        "{out:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    // An ungated step cut off in flight may have applied: its outcome is unknown.
    let out = ungated_kv(client(&server, policy).transaction())
        .commit()
        .await;
    assert!(matches!(out, Err(Error::OutcomeUnknown { .. })), "{out:?}");
}
