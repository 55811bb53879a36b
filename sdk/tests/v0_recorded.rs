//! The SDK against Queen v0, the PostgreSQL broker (`spec/transaction-v0-postgres.md`),
//! from answers recorded on a real one: the C++ server of `queen-mq/queen` at commit
//! `ab232125755a2deeef586e36451628fd4940b8a7`, built with `make build-only` and run on
//! PostgreSQL 15 (NUM_WORKERS=2, QUEEN_SYNC_ENABLED=false). Every body below is one of
//! its answers, byte for byte, with only the ids it minted as they came; wiremock
//! replays them, so CI covers v0 without PostgreSQL.
//!
//! What is checked: the ack + push step commits with the same typed outcomes as on
//! Queen 2 (a duplicate receipt is `RollbackReason::Duplicate`, a released lease is
//! `RejectedAck`, any other refusal keeps its text as `Other`); a step with KV that v0
//! committed without it is `Error::Unsupported { committed: true }`, and the next one is
//! refused before it is sent (and, behind several URLs, a Queen 2 commit on one does
//! not stop a v0 broker on another from being caught); KV and timer routes, answered by v0's web page, are
//! `Error::Unsupported`; the empty pop is empty; a consumer's messages carry their queue
//! and keep their lease on v0's lease-extend answer; `configure` never sends an empty
//! options object and rides out v0's failure on a configure that sets nothing.

use std::time::Duration;

use futures::StreamExt;
use queen_sdk::{
    Capability, Client, Commit, Error, QueueOptions, RetryPolicy, RollbackReason, StartAt, Ttl,
};
use serde_json::{Value, json};
use wiremock::matchers::{body_partial_json, method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

const QUEUE: &str = "rec-1796165101";
const LEASE: &str = "01a233c8-6822-7000-b002-ee2c16e03d94";

/// `GET /api/v1/pop/queue/rec-1796165101?consumerGroup=billing&batch=1&subscriptionMode=all`.
const POP: &str = r#"{"consumerGroup":"billing","leaseId":"01a233c8-6822-7000-b002-ee2c16e03d94","messages":[{"consumerGroup":"billing","createdAt":"2026-12-01T22:45:01.588354Z","data":{"customer":"customer-123","order_id":"order-7","total":120.5},"id":"01a233c8-680e-7000-bb4e-7973845bf5ba","leaseId":"01a233c8-6822-7000-b002-ee2c16e03d94","partition":"customer-123","partitionId":"5cfe2a59-9f15-47a7-b57f-f771ae1f0957","producerSub":null,"traceId":null,"transactionId":"order-7-paid"}],"partition":"customer-123","partitionId":"5cfe2a59-9f15-47a7-b57f-f771ae1f0957","partitionsClaimed":1,"queue":"rec-1796165101","success":true}"#;

/// The same pop once nothing is left: HTTP 200, not 204.
const EMPTY_POP: &str = r#"{"error":"no_available_partition","messages":[],"success":false}"#;

/// The ack + push step (with a `kv` part, which v0 ignores) committed.
const COMMITTED: &str = r#"{"results":[{"dlq":false,"error":null,"index":0,"success":true,"transactionId":"order-7-paid","type":"ack"},{"index":1,"messageId":"01a233c8-6884-7000-b463-9706c24be1f2","partitionId":"c03a6380-2ddf-463b-9028-fdf0fc1d2c94","queueName":"rec-1796165101-receipts","success":true,"transactionId":"receipt-of-order-7","type":"push"}],"success":true,"transactionId":"a471c45b-333c-4436-ab3b-3efbb9e4dc2d"}"#;

/// The same step sent again: its ack released the lease.
const LEASE_GONE: &str = r#"{"error":"ACK operation failed: Invalid or expired lease","results":[{"dlq":false,"error":"Invalid or expired lease","index":0,"success":false,"transactionId":"order-7-paid","type":"ack"}],"success":false,"transactionId":"b483d278-ad88-4a63-89d0-12f1aa422c2b"}"#;

/// A push whose transactionId is already stored in its partition.
const DUPLICATE: &str = r#"{"error":"duplicate key value violates unique constraint \"messages_partition_transaction_unique\"","results":[],"success":false,"transactionId":"540af964-833b-4f94-8abb-07e06d5509c4"}"#;

/// An ack of a transactionId its partition does not hold.
const NOT_FOUND: &str = r#"{"error":"ACK operation failed: Message not found","results":[{"dlq":false,"error":"Message not found","index":0,"success":false,"transactionId":"no-such-message","type":"ack"}],"success":false,"transactionId":"3c65eafe-e70a-43b8-9da8-b1a05956d570"}"#;

/// An ack with status `retry`, which v0's transaction does not take.
const RETRY_STATUS: &str = r#"{"error":"ACK operation failed: Unknown error","results":[{"dlq":false,"error":null,"index":0,"success":false,"transactionId":"m","type":"ack"}],"success":false,"transactionId":"c22ce959-b1de-4f65-b318-19b19b7dc32d"}"#;

/// `POST /api/v1/lease/{lease}/extend` of a live lease, and of an unknown one.
const EXTENDED: &str = r#"[{"error":null,"expiresAt":"2026-12-01T22:50:01.607Z","index":0,"leaseId":"01a233c8-6822-7000-b002-ee2c16e03d94","success":true}]"#;

/// `POST /api/v1/configure {"queue": ...}` (no options, or `"options": {}`): the queue is
/// stored, and the answer is this.
const CONFIGURE_NOTHING: &str =
    r#"{"error":"[json.exception.type_error.306] cannot use value() with null"}"#;

/// `POST /api/v1/configure {"queue": ..., "options": {"leaseTime": 300}}`.
const CONFIGURED: &str = r#"{"configured":true,"namespace":"","options":{"completedRetentionSeconds":0,"deadLetterQueue":false,"delayedProcessing":0,"dlqAfterMaxRetries":false,"encryptionEnabled":false,"leaseTime":300,"maxSize":0,"maxWaitTimeSeconds":0,"priority":0,"retentionEnabled":false,"retentionSeconds":0,"retryDelay":1000,"retryLimit":3,"ttl":3600,"windowBuffer":0},"partitionId":"6fa4fb3a-9551-4775-9948-b6dd8e98e422","queue":"rec-1796165101","queueId":"73f909f9-7b21-4e87-adb9-013287fd1137","task":""}"#;

/// Every route v0 does not have (`/api/v1/kv/...`, `/api/v1/timers/...`,
/// `/api/v1/locks/...`): HTTP 404, no Content-Type, this page.
const NO_ROUTE: &str =
    "<html><body><h1>File Not Found</h1><hr><i>uWebSockets/20 Server</i></body></html>";

fn json_answer(body: &str) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body.as_bytes().to_vec(), "application/json")
}

fn client(server: &MockServer) -> Client {
    Client::builder()
        .url(server.uri())
        .retry(RetryPolicy::none())
        .build()
        .unwrap()
}

async fn on_txn(server: &MockServer, body: &str) {
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .respond_with(json_answer(body))
        .mount(server)
        .await;
}

async fn on_pop(server: &MockServer) {
    let route = format!("/api/v1/pop/queue/{QUEUE}");
    first_then(
        server,
        "GET",
        &route,
        json_answer(POP),
        json_answer(EMPTY_POP),
    )
    .await;
}

/// `verb` on `route` answers `first` once, then `then` for good.
async fn first_then(
    server: &MockServer,
    verb: &str,
    route: &str,
    first: ResponseTemplate,
    then: ResponseTemplate,
) {
    Mock::given(method(verb))
        .and(path(route))
        .respond_with(first)
        .up_to_n_times(1)
        .with_priority(1)
        .mount(server)
        .await;
    Mock::given(method(verb))
        .and(path(route))
        .respond_with(then)
        .with_priority(2)
        .mount(server)
        .await;
}

async fn popped(client: &Client) -> queen_sdk::Message<Value> {
    let mut batch = client
        .pop::<Value>(QUEUE)
        .group("billing")
        .send()
        .await
        .unwrap();
    assert_eq!(batch.len(), 1);
    batch.remove(0)
}

fn transaction_calls(reqs: &[wiremock::Request]) -> usize {
    reqs.iter()
        .filter(|r| r.url.path() == "/api/v1/transaction")
        .count()
}

#[tokio::test]
async fn the_pop_decodes_and_the_ack_push_step_commits() {
    let server = MockServer::start().await;
    on_pop(&server).await;
    on_txn(&server, COMMITTED).await;
    let client = client(&server);
    let msg = popped(&client).await;
    assert_eq!(msg.transaction_id, "order-7-paid");
    assert_eq!(msg.lease_id, LEASE);
    assert_eq!(
        (msg.partition.as_str(), msg.consumer_group.as_str()),
        ("customer-123", "billing")
    );
    assert_eq!(msg.data["order_id"], "order-7");
    // v0 names the queue only at the top of its answer; a plain pop names it too.
    assert_eq!(msg.queue, QUEUE);
    // v0 has no offsets nor delivery attempts: absent, not a decode error.
    assert_eq!((msg.offset, msg.delivery_attempt), (None, None));

    let out = client
        .transaction()
        .ack(&msg)
        .push("rec-1796165101-receipts", |p| {
            p.partition("customer-123")
                .transaction_id("receipt-of-order-7")
                .payload(&json!({"orderId": "order-7"}))
        })
        .commit()
        .await
        .unwrap();
    let Commit::Committed(c) = out else {
        panic!("not committed: {out:?}")
    };
    assert_eq!(c.transaction_id, "a471c45b-333c-4436-ab3b-3efbb9e4dc2d");
    let push = c.pushes().next().unwrap();
    assert_eq!(push.transaction_id, "receipt-of-order-7");
    assert_eq!(push.message_id, "01a233c8-6884-7000-b463-9706c24be1f2");
    assert_eq!(push.queue, "rec-1796165101-receipts");
    assert!(!push.duplicate);
}

#[tokio::test]
async fn the_empty_pop_is_empty() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(format!("/api/v1/pop/queue/{QUEUE}")))
        .respond_with(json_answer(EMPTY_POP))
        .mount(&server)
        .await;
    let batch = client(&server).pop::<Value>(QUEUE).send().await.unwrap();
    assert!(batch.is_empty());
}

#[tokio::test]
async fn rollbacks_without_reason_are_classified_from_their_text() {
    for (answer, expected) in [
        (DUPLICATE, RollbackReason::Duplicate),
        (LEASE_GONE, RollbackReason::RejectedAck),
        (NOT_FOUND, RollbackReason::RejectedAck),
        (
            RETRY_STATUS,
            RollbackReason::Other("ACK operation failed: Unknown error".into()),
        ),
    ] {
        let server = MockServer::start().await;
        on_txn(&server, answer).await;
        let client = client(&server);
        let err = client
            .transaction()
            .push("receipts", |p| p.transaction_id("receipt-of-order-7"))
            .commit()
            .await
            .unwrap_err();
        let text: Value = serde_json::from_str(answer).unwrap();
        match err {
            Error::RolledBack {
                reason,
                error,
                retried,
            } => {
                assert_eq!(reason, expected, "{answer}");
                assert_eq!(error, text["error"].as_str().unwrap(), "the text is kept");
                assert!(!retried);
            }
            other => panic!("{answer}: expected a rollback, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_step_with_kv_is_unsupported_and_the_next_is_refused_before_sending() {
    let server = MockServer::start().await;
    on_pop(&server).await;
    on_txn(&server, COMMITTED).await;
    let client = client(&server);
    let msg = popped(&client).await;
    let step = client
        .transaction()
        .ack(&msg)
        .push("rec-1796165101-receipts", |p| {
            p.partition("customer-123")
                .payload(&json!({"orderId": "order-7"}))
        })
        .kv(|k| {
            k.put(
                "orders",
                "order-7",
                &json!({"status": "paid"}),
                Ttl::days(30),
            )
        });
    // v0 committed the ack and the push, and ignored `kv`.
    match step.clone().commit().await {
        Err(Error::Unsupported {
            capability: Capability::Kv,
            committed: true,
        }) => {}
        other => panic!("expected Unsupported kv (committed), got {other:?}"),
    }
    // Learned: the next step with KV is not sent at all.
    match step.commit().await {
        Err(Error::Unsupported {
            capability: Capability::Kv,
            committed: false,
        }) => {}
        other => panic!("expected Unsupported kv (not sent), got {other:?}"),
    }
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(transaction_calls(&reqs), 1);
    // A step of acks and pushes still goes.
    let ok = client
        .transaction()
        .push("receipts", |p| p.payload(&1))
        .commit()
        .await
        .unwrap();
    assert!(ok.is_committed());
}

#[tokio::test]
async fn kv_and_timer_routes_answered_by_a_web_page_are_unsupported() {
    let server = MockServer::start().await;
    Mock::given(path_regex("^/api/v1/(kv|timers|locks)"))
        .respond_with(ResponseTemplate::new(404).set_body_raw(NO_ROUTE.as_bytes().to_vec(), ""))
        .mount(&server)
        .await;
    let client = client(&server);
    match client.kv().get::<Value>("orders", "order-7").await {
        Err(Error::Unsupported {
            capability: Capability::Kv,
            committed: false,
        }) => {}
        other => panic!("expected Unsupported kv, got {other:?}"),
    }
    match client.timers().list("reminders", None, 10).await {
        Err(Error::Unsupported {
            capability: Capability::Timers,
            ..
        }) => {}
        other => panic!("expected Unsupported timers, got {other:?}"),
    }
    // The error names what is missing, for a worker to print as its reason.
    let e = client.kv().get::<Value>("orders", "o").await.unwrap_err();
    assert_eq!(
        e.to_string(),
        "the broker has no kv support; nothing was applied"
    );
}

#[tokio::test]
async fn a_consumer_keeps_its_lease_and_names_the_queue() {
    let server = MockServer::start().await;
    on_pop(&server).await;
    Mock::given(method("POST"))
        .and(path(format!("/api/v1/lease/{LEASE}/extend")))
        .respond_with(json_answer(EXTENDED))
        .mount(&server)
        .await;
    let client = client(&server);
    let mut stream = client
        .consume::<Value>(QUEUE)
        .group("billing", StartAt::New)
        .wait(Duration::from_millis(50))
        .lease(Duration::from_millis(300))
        .stream();
    let d = stream.next().await.unwrap().unwrap();
    // v0 names the queue once, at the top of its answer.
    assert_eq!(d.queue, QUEUE);
    // Renewed about every third of the lease: v0 answers an array of one, without
    // `renewed`, which is a renewal (read as none, the keeper would stop at the first).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let reqs = server.received_requests().await.unwrap();
    let extends = reqs
        .iter()
        .filter(|r| r.url.path().ends_with("/extend"))
        .count();
    assert!(extends >= 2, "extended {extends} times");
    assert!(!d.lease_lost(), "the lease was renewed, not lost");
}

#[tokio::test]
async fn configure_with_nothing_set_sends_no_options_and_rides_out_v0s_answer() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/configure"))
        .and(body_partial_json(json!({"options": {"leaseTime": 300}})))
        .respond_with(json_answer(CONFIGURED))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/configure"))
        .respond_with(json_answer(CONFIGURE_NOTHING))
        .with_priority(2)
        .mount(&server)
        .await;
    let client = client(&server);
    let cfg = client.configure(QUEUE, QueueOptions::new()).await.unwrap();
    assert_eq!(cfg.queue, QUEUE);
    assert_eq!(cfg.options.lease_time, Some(Duration::from_secs(300)));
    assert_eq!(cfg.options.retry_limit, Some(3));
    let reqs = server.received_requests().await.unwrap();
    let bodies: Vec<Value> = reqs
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    // First as asked, with no `options` at all; then, after v0's failure, the same
    // call with v0's default lease stated (v0 resets every option not sent anyway).
    assert_eq!(
        bodies,
        vec![
            json!({"queue": QUEUE}),
            json!({"queue": QUEUE, "options": {"leaseTime": 300}})
        ]
    );
}

#[tokio::test]
async fn configure_with_an_option_is_one_call() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/configure"))
        .respond_with(json_answer(CONFIGURED))
        .mount(&server)
        .await;
    let client = client(&server);
    let cfg = client
        .configure(
            QUEUE,
            QueueOptions::new().lease_time(Duration::from_secs(300)),
        )
        .await
        .unwrap();
    assert_eq!(cfg.options.lease_time, Some(Duration::from_secs(300)));
    assert_eq!(cfg.options.namespace.as_deref(), Some(""));
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 1);
    let body: Value = serde_json::from_slice(&reqs[0].body).unwrap();
    assert_eq!(body, json!({"queue": QUEUE, "options": {"leaseTime": 300}}));
}

#[tokio::test]
async fn v0s_configure_failure_on_a_call_that_sets_something_is_an_error() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/configure"))
        .respond_with(json_answer(CONFIGURE_NOTHING))
        .mount(&server)
        .await;
    let client = client(&server);
    let err = client
        .configure(QUEUE, QueueOptions::new().retry_limit(5))
        .await
        .unwrap_err();
    assert_eq!(err.status(), Some(200));
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
}

/// `POST /api/v1/ack/batch` for the message of [`POP`] with the call's top-level
/// `consumerGroup: "billing"` (recorded on the same broker, another queue's names).
const ACKED: &str = r#"[{"dlq":false,"error":null,"index":0,"leaseReleased":true,"partitionName":"p","queueName":"rec-ack-26310","success":true,"transactionId":"m-1"}]"#;
/// The same ack without the top-level group: v0 reads the call's group only, takes the
/// queue-mode group, and finds no such lease there.
const ACK_REFUSED: &str = r#"[{"dlq":false,"error":"Invalid or expired lease","index":0,"leaseReleased":false,"partitionName":"p","queueName":"rec-ack-26310","success":false,"transactionId":"m-1"}]"#;

#[tokio::test]
async fn a_named_groups_standalone_ack_names_its_group_for_the_whole_call() {
    let server = MockServer::start().await;
    on_pop(&server).await;
    Mock::given(method("POST"))
        .and(path("/api/v1/ack/batch"))
        .and(body_partial_json(json!({"consumerGroup": "billing"})))
        .respond_with(json_answer(ACKED))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(path("/api/v1/ack/batch"))
        .respond_with(json_answer(ACK_REFUSED))
        .with_priority(2)
        .mount(&server)
        .await;
    let client = client(&server);
    let msg = popped(&client).await;
    let out = client
        .ack(&msg, queen_sdk::AckStatus::Completed)
        .await
        .unwrap();
    assert!(out.success, "{out:?}");
    assert!(out.lease_released);
}

/// A Queen 2 broker's answer to a push + KV step (`POST /api/v1/transaction`).
const COMMITTED_V2: &str = r#"{"success":true,"transactionId":"t-2","results":[{"index":0,"type":"push","success":true,"transactionId":"receipt-of-order-7","messageId":"m-1"},{"index":0,"type":"kv","op":"put","success":true,"version":1}]}"#;

#[tokio::test]
async fn behind_several_urls_a_v0_broker_is_caught_after_a_queen_2_commit() {
    // The first URL is a Queen 2 broker that commits one step, then fails; the client
    // moves on to the second, a v0 broker, which commits the next step without its KV.
    let v2 = MockServer::start().await;
    first_then(
        &v2,
        "POST",
        "/api/v1/transaction",
        json_answer(COMMITTED_V2),
        ResponseTemplate::new(503),
    )
    .await;
    let v0 = MockServer::start().await;
    on_txn(&v0, COMMITTED).await;
    let client = Client::builder()
        .urls([v2.uri(), v0.uri()])
        .retry(
            RetryPolicy::default()
                .min_delay(Duration::from_millis(1))
                .max_delay(Duration::from_millis(5)),
        )
        .build()
        .unwrap();
    let step = client
        .transaction()
        .push("receipts", |p| {
            p.transaction_id("receipt-of-order-7")
                .payload(&json!({"orderId": "order-7"}))
        })
        .kv(|k| {
            k.put(
                "orders",
                "order-7",
                &json!({"status": "paid"}),
                Ttl::Forever,
            )
        });
    assert!(step.clone().commit().await.unwrap().is_committed());
    // The Queen 2 commit is not taken as proof about every URL: v0's answer is read.
    match step.commit().await {
        Err(Error::Unsupported {
            capability: Capability::Kv,
            committed: true,
        }) => {}
        other => panic!("expected Unsupported kv (committed by v0), got {other:?}"),
    }
    let v0_calls = transaction_calls(&v0.received_requests().await.unwrap());
    assert_eq!(v0_calls, 1, "the second step went to the v0 broker");
}
