//! Ephemeral queues: in-memory rings with their own push, pop and ack, shaped as
//! `queen-protocol` 1.5.0's `Ephemeral*` types (issue 16).

mod common;

use std::time::Duration;

use common::Harness;
use queen_protocol::{EphemeralAckResponse, EphemeralOutcome, EphemeralPopResponse};
use serde_json::{Value, json};

async fn push(h: &Harness, queue: &str, payloads: &[Value]) -> Value {
    let messages: Vec<Value> = payloads.iter().map(|p| json!({"payload": p})).collect();
    let (s, b) = h
        .post(
            "/api/v1/ephemeral/push",
            json!({"queue": queue, "messages": messages}),
        )
        .await;
    assert_eq!(s, 201, "{b}");
    b
}

async fn pop(h: &Harness, query: &str) -> EphemeralPopResponse {
    let (s, b) = h.get(&format!("/api/v1/ephemeral/pop?{query}")).await;
    assert_eq!(s, 200, "{b}");
    serde_json::from_value(b).expect("queen-protocol reads the pop")
}

async fn ack(h: &Harness, body: Value) -> EphemeralAckResponse {
    let (s, b) = h.post("/api/v1/ephemeral/ack", body).await;
    assert_eq!(s, 200, "{b}");
    serde_json::from_value(b).expect("queen-protocol reads the ack")
}

#[tokio::test]
async fn push_pop_ack_round_trip_in_order_with_the_payload_bytes_kept() {
    let h = Harness::new().await;
    let b = push(
        &h,
        "inbox",
        &[json!({"b": 1, "a": 2}), json!(2), json!(null)],
    )
    .await;
    assert_eq!(b, json!({"pushed": 3}));
    let got = pop(&h, "queue=inbox&batch=10").await;
    assert_eq!(got.queue, "inbox");
    let payloads: Vec<Value> = got.messages.iter().map(|m| m.payload.clone()).collect();
    assert_eq!(payloads, [json!({"b": 1, "a": 2}), json!(2), json!(null)]);
    assert!(
        got.messages
            .iter()
            .all(|m| m.attempts == 1 && m.partition == "Default")
    );
    let acks: Vec<Value> = got.messages.iter().map(|m| json!({"id": m.id})).collect();
    let r = ack(&h, json!({"queue": "inbox", "acks": acks})).await;
    assert!(
        r.results
            .iter()
            .all(|x| x.outcome == EphemeralOutcome::Acked),
        "{r:?}"
    );
    // Empty is 200 with `messages: []`, never 204.
    let (s, b) = h.get("/api/v1/ephemeral/pop?queue=inbox").await;
    assert_eq!(
        (s.as_u16(), b),
        (200, json!({"queue": "inbox", "messages": []}))
    );
    // The same ids again: nothing to settle.
    let again = ack(
        &h,
        json!({"queue": "inbox", "acks": [{"id": got.messages[0].id}]}),
    )
    .await;
    assert_eq!(again.results[0].outcome, EphemeralOutcome::Unknown);
}

#[tokio::test]
async fn a_group_competes_and_another_group_fans_out() {
    let h = Harness::new().await;
    push(&h, "q", &[json!(1), json!(2)]).await;
    let a = pop(&h, "queue=q&group=workers").await;
    let b = pop(&h, "queue=q&group=workers").await;
    assert_eq!(
        (a.messages[0].payload.clone(), b.messages[0].payload.clone()),
        (json!(1), json!(2))
    );
    let tail = pop(&h, "queue=q&group=audit&batch=10").await;
    assert_eq!(tail.messages.len(), 2, "its own cursor over the same ring");
    assert!(pop(&h, "queue=q&group=workers").await.messages.is_empty());
}

#[tokio::test]
async fn a_nack_or_a_lapsed_lease_redelivers_until_the_retry_limit_then_drops() {
    let h = Harness::new().await;
    let (s, c) = h
        .post(
            "/api/v1/ephemeral/configure",
            json!({"queue": "q", "options": {"leaseSeconds": 10, "retryLimit": 1}}),
        )
        .await;
    assert_eq!(s, 201, "{c}");
    assert_eq!(c["options"]["retryLimit"], 1);
    assert_eq!(
        c["options"]["maxLength"], 100_000,
        "every option, defaults included"
    );
    push(&h, "q", &[json!("m")]).await;
    let first = pop(&h, "queue=q").await;
    let r = ack(&h, json!({"queue": "q", "acks": [{"id": first.messages[0].id, "status": "failed", "error": "boom"}]})).await;
    assert_eq!(r.results[0].outcome, EphemeralOutcome::Redelivered);
    let second = pop(&h, "queue=q").await;
    assert_eq!(
        (second.messages[0].id.clone(), second.messages[0].attempts),
        (first.messages[0].id.clone(), 2)
    );
    // The lease lapses: one delivery past retryLimit 1, so the message is dropped.
    h.advance(11);
    assert!(pop(&h, "queue=q").await.messages.is_empty());
    let (_, d) = h.get("/api/v1/ephemeral/queues/q/depth").await;
    assert_eq!(
        (d["depth"].clone(), d["dropped"]["retry"].clone()),
        (json!(0), json!(1)),
        "{d}"
    );
}

#[tokio::test]
async fn an_id_from_another_broker_is_stale_and_a_garbled_one_unknown() {
    let h = Harness::new().await;
    push(&h, "q", &[json!(1)]).await;
    let r = ack(
        &h,
        json!({"queue": "q", "acks": [{"id": "e:0:Default:1"}, {"id": "garbage"}]}),
    )
    .await;
    assert_eq!(
        r.results.iter().map(|x| x.outcome).collect::<Vec<_>>(),
        [EphemeralOutcome::Stale, EphemeralOutcome::Unknown]
    );
}

#[tokio::test]
async fn bounds_refuse_with_queue_full_or_drop_the_oldest() {
    let h = Harness::new().await;
    h.post(
        "/api/v1/ephemeral/configure",
        json!({"queue": "q", "options": {"maxLength": 2}}),
    )
    .await;
    push(&h, "q", &[json!(1), json!(2)]).await;
    let (s, b) = h
        .post(
            "/api/v1/ephemeral/push",
            json!({"queue": "q", "messages": [{"payload": 3}]}),
        )
        .await;
    assert_eq!(
        (s.as_u16(), b["code"].clone()),
        (429, json!("queue_full")),
        "{b}"
    );
    h.post(
        "/api/v1/ephemeral/configure",
        json!({"queue": "q", "options": {"policy": "dropOldest"}}),
    )
    .await;
    push(&h, "q", &[json!(3)]).await;
    let got = pop(&h, "queue=q&batch=10").await;
    let payloads: Vec<Value> = got.messages.iter().map(|m| m.payload.clone()).collect();
    assert_eq!(payloads, [json!(2), json!(3)]);
}

#[tokio::test]
async fn gauges_reset_and_delete() {
    let h = Harness::new().await;
    push(&h, "q", &[json!(1), json!(2)]).await;
    let (s, l) = h.get("/api/v1/ephemeral/queues").await;
    assert_eq!(s, 200);
    assert_eq!(
        (
            l["queues"][0]["queue"].clone(),
            l["queues"][0]["depth"].clone()
        ),
        (json!("q"), json!(2))
    );
    let (s, d) = h.get("/api/v1/ephemeral/queues/q/depth").await;
    assert_eq!(s, 200);
    assert!(d["bytes"].as_u64().unwrap() >= 2, "{d}");
    let (_, r) = h
        .post("/api/v1/ephemeral/reset", json!({"queue": "q"}))
        .await;
    assert_eq!(r["dropped"], 2);
    let (_, r) = h
        .post("/api/v1/ephemeral/reset", json!({"queue": "never"}))
        .await;
    assert_eq!(r["dropped"], 0, "a missing queue had nothing to drop");
    let (s, del) = h.delete("/api/v1/ephemeral/queue/q").await;
    assert_eq!(s, 200);
    assert_eq!(
        (del["deleted"].clone(), del["declared"].clone()),
        (json!(true), json!(false))
    );
    let (_, del) = h.delete("/api/v1/ephemeral/queue/q").await;
    assert_eq!(del["deleted"], false);
    let (s, b) = h.get("/api/v1/ephemeral/queues/q/depth").await;
    assert_eq!(
        (s.as_u16(), b["code"].clone()),
        (404, json!("ephemeral_queue_not_found"))
    );
}

#[tokio::test]
async fn a_waiting_pop_wakes_when_a_message_lands() {
    let h = Harness::new().await;
    let url = h.url("/api/v1/ephemeral/pop?queue=w&wait=true&timeout=10000");
    let http = h.http.clone();
    let waiter = tokio::spawn(async move {
        http.get(url)
            .send()
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let started = std::time::Instant::now();
    push(&h, "w", &[json!("hi")]).await;
    let got = waiter.await.unwrap();
    assert_eq!(got["messages"][0]["payload"], "hi", "{got}");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "woken, not timed out"
    );
}

#[tokio::test]
async fn bad_input_is_400_and_changes_nothing() {
    let h = Harness::new().await;
    for (path, body) in [
        (
            "/api/v1/ephemeral/configure",
            json!({"queue": "q", "options": {"ttlSecond": 5}}),
        ),
        (
            "/api/v1/ephemeral/configure",
            json!({"queue": "q", "options": {"retryLimit": -1}}),
        ),
        (
            "/api/v1/ephemeral/configure",
            json!({"queue": "q", "options": {"policy": "drop"}}),
        ),
        ("/api/v1/ephemeral/configure", json!({"options": {}})),
        (
            "/api/v1/ephemeral/push",
            json!({"queue": "q", "messages": []}),
        ),
        (
            "/api/v1/ephemeral/push",
            json!({"queue": "q", "messages": [{"data": 1}]}),
        ),
        (
            "/api/v1/ephemeral/push",
            json!({"queue": "", "messages": [{"payload": 1}]}),
        ),
        (
            "/api/v1/ephemeral/ack",
            json!({"queue": "q", "acks": [{"id": ""}]}),
        ),
        ("/api/v1/ephemeral/ack", json!({"queue": "q", "acks": {}})),
        ("/api/v1/ephemeral/reset", json!({})),
    ] {
        let (s, b) = h.post(path, body.clone()).await;
        assert_eq!(s, 400, "{path} {body} -> {b}");
        assert_eq!(b["code"], "bad_request", "{b}");
    }
    for q in [
        "",
        "queue=q&batch=0",
        "queue=q&timeout=-1",
        "queue=q&wait=maybe",
    ] {
        let (s, b) = h.get(&format!("/api/v1/ephemeral/pop?{q}")).await;
        assert_eq!(s, 400, "{q}: {b}");
    }
    let (_, l) = h.get("/api/v1/ephemeral/queues").await;
    assert_eq!(l["queues"], json!([]), "nothing was made: {l}");
}

#[tokio::test]
async fn two_brokers_in_one_process_share_no_rings_and_no_counters() {
    let (a, b) = (
        queen_mock_broker::MockBroker::start_in_memory()
            .await
            .unwrap(),
        queen_mock_broker::MockBroker::start_in_memory()
            .await
            .unwrap(),
    );
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{}/api/v1/ephemeral/push", a.url()))
        .json(&json!({"queue": "q", "messages": [{"payload": 1}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let res = http
        .post(format!("{}/api/v1/push", a.url()))
        .json(&json!({"items": [{"queue": "d", "payload": 1}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let depth = http
        .get(format!("{}/api/v1/ephemeral/queues/q/depth", b.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(depth.status(), 404, "b has no ring of a's");
    // An id a minted is another incarnation's to b: `stale`, not someone else's ack.
    let popped: EphemeralPopResponse = http
        .get(format!("{}/api/v1/ephemeral/pop?queue=q", a.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let acked: EphemeralAckResponse = http
        .post(format!("{}/api/v1/ephemeral/ack", b.url()))
        .json(&json!({"queue": "q", "acks": [{"id": popped.messages[0].id}]}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(acked.results[0].outcome, EphemeralOutcome::Stale);
    let w: Value = http
        .get(format!("{}/api/v1/analytics/worker-metrics", b.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        w["summary"]["totalPushMessages"], 0,
        "b counted none of a's pushes: {w}"
    );
    a.shutdown().await;
    b.shutdown().await;
}
