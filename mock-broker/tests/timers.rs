//! Timers (`wire.md` section 10): schedule, reschedule, cancel, peek and list; firing
//! as a message with the timer's ids, never early; the refusals; restarts.

mod common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::Harness;
use queen_mock_broker::{Clock, ManualClock};
use reqwest::StatusCode;
use serde_json::{Value, json};

const DAY_MS: i64 = 24 * 3600 * 1000;

/// Base64 of a JSON value's text, as a timer payload.
fn b64(v: &Value) -> String {
    B64.encode(v.to_string())
}

/// A schedule op on `queue`/`key`.
fn schedule(queue: &str, key: &str, delay_ms: i64, txn: &str, payload: &Value) -> Value {
    json!({"op": "schedule", "queue": queue, "timerKey": key, "delayMs": delay_ms,
           "txn": txn, "payload": b64(payload)})
}

/// Sends `POST /api/v1/timers`; asserts 200 and returns the results.
async fn timers(h: &Harness, ops: Value) -> Vec<Value> {
    let (s, b) = h.post("/api/v1/timers", json!({ "operations": ops })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let r = b["results"].as_array().unwrap_or_else(|| panic!("{b}"));
    r.clone()
}

async fn one(h: &Harness, op: Value) -> Value {
    let mut r = timers(h, json!([op])).await;
    assert_eq!(r.len(), 1);
    r.remove(0)
}

async fn peek(h: &Harness, queue: &str, key: &str) -> Value {
    let (s, b) = h.get(&format!("/api/v1/timers/{queue}/{key}")).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

/// Pops `path` until something comes or `within` passes (the scheduler runs on its own).
async fn pop_within(h: &Harness, path: &str, within: Duration) -> Option<Value> {
    let deadline = tokio::time::Instant::now() + within;
    loop {
        if let Some(p) = h.pop(path).await {
            return Some(p);
        }
        if tokio::time::Instant::now() >= deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Pops until a message comes, for at most 2 s.
async fn fired(h: &Harness, queue: &str) -> Value {
    pop_within(
        h,
        &format!("/api/v1/pop/queue/{queue}?batch=100"),
        Duration::from_secs(2),
    )
    .await
    .unwrap_or_else(|| panic!("nothing fired into {queue} within 2 s"))
}

/// Asserts `queue` stays empty while the scheduler sweeps several times.
async fn stays_empty(h: &Harness, queue: &str, why: &str) {
    let p = pop_within(
        h,
        &format!("/api/v1/pop/queue/{queue}"),
        Duration::from_millis(500),
    )
    .await;
    assert!(p.is_none(), "{why}: {p:?}");
}

fn micros(iso: &Value) -> i64 {
    let s = iso.as_str().unwrap_or_else(|| panic!("not a time: {iso}"));
    assert!(s.ends_with('Z'), "{s}");
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{s}: {e}"));
    (t.unix_timestamp_nanos() / 1000) as i64
}

fn uuid_version(s: &Value) -> u32 {
    let s = s.as_str().unwrap_or_else(|| panic!("not a string: {s}"));
    assert_eq!(s.len(), 36, "{s}");
    s.chars().nth(14).and_then(|c| c.to_digit(16)).unwrap()
}

fn advance_ms(h: &Harness, ms: u64) {
    h.clock.advance(Duration::from_millis(ms));
}

/// Asserts a refusal and that nothing was committed since `before`.
fn assert_refused(h: &Harness, before: u64, res: (StatusCode, Value), status: u16, code: &str) {
    let (s, b) = res;
    assert_eq!(s.as_u16(), status, "{b}");
    assert_eq!(b["code"], code, "{b}");
    assert!(b["error"].as_str().is_some_and(|e| !e.is_empty()), "{b}");
    assert_eq!(h.broker.stats().commits, before, "a refusal writes nothing");
}

// ---------------------------------------------------------------- results

#[tokio::test]
async fn schedule_answers_scheduled_with_a_message_id_and_deliver_at() {
    let h = Harness::new().await;
    let now = h.clock.now_micros();
    let r = one(
        &h,
        schedule(
            "reminders",
            "order-7",
            86_400_000,
            "rem-7",
            &json!({"o": 7}),
        ),
    )
    .await;
    assert_eq!(r["index"], 0);
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["status"], "scheduled");
    assert_eq!(r["queue"], "reminders");
    assert_eq!(r["timerKey"], "order-7");
    assert_eq!(r["txn"], "rem-7");
    assert_eq!(uuid_version(&r["messageId"]), 7, "a broker-minted UUIDv7");
    assert_eq!(micros(&r["deliverAt"]), now + 86_400_000_000);

    // Several ops answer in order.
    let r = timers(
        &h,
        json!([
            schedule("reminders", "a", 1000, "ta", &json!(1)),
            schedule("other", "a", 2000, "tb", &json!(2)),
        ]),
    )
    .await;
    assert_eq!(r[0]["index"], 0);
    assert_eq!(r[0]["txn"], "ta");
    assert_eq!(r[1]["index"], 1);
    assert_eq!(r[1]["queue"], "other");
    assert_ne!(r[0]["messageId"], r[1]["messageId"]);
}

#[tokio::test]
async fn schedule_of_an_existing_key_replaces_it_and_answers_rescheduled() {
    let h = Harness::new().await;
    let first = one(&h, schedule("q", "k", 10_000, "t1", &json!("first"))).await;
    let second = one(&h, schedule("q", "k", 20_000, "t2", &json!("second"))).await;
    assert_eq!(second["ok"], true, "{second}");
    assert_eq!(second["status"], "rescheduled");
    assert_eq!(second["txn"], "t2");
    assert_eq!(
        micros(&second["deliverAt"]) - micros(&first["deliverAt"]),
        10_000_000
    );
    let p = peek(&h, "q", "k").await;
    assert_eq!(p["txn"], "t2", "{p}");
    assert_eq!(p["deliverAt"], second["deliverAt"]);

    // The replaced timer does not fire at its old time.
    h.advance(11);
    stays_empty(&h, "q", "the replaced timer fired").await;
    h.advance(10);
    let pop = fired(&h, "q").await;
    let msgs = pop["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "only the replacement fires: {pop}");
    assert_eq!(msgs[0]["transactionId"], "t2");
    assert_eq!(msgs[0]["id"], second["messageId"]);
    assert_eq!(msgs[0]["data"], "second");
}

#[tokio::test]
async fn reschedule_of_an_absent_key_schedules_it() {
    let h = Harness::new().await;
    let mut op = schedule("q", "k", 1000, "t", &json!({"r": 1}));
    op["op"] = "reschedule".into();
    let r = one(&h, op.clone()).await;
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["status"], "scheduled");
    assert_eq!(peek(&h, "q", "k").await["found"], true);
    // And of a present key it replaces it.
    op["txn"] = "t2".into();
    let r2 = one(&h, op).await;
    assert_eq!(r2["status"], "rescheduled", "{r2}");
    assert_eq!(r2["txn"], "t2");
    advance_ms(&h, 1001);
    let pop = fired(&h, "q").await;
    assert_eq!(pop["messages"].as_array().unwrap().len(), 1);
    assert_eq!(pop["messages"][0]["id"], r2["messageId"]);
    assert_eq!(pop["messages"][0]["data"], json!({"r": 1}));
}

#[tokio::test]
async fn cancel_answers_cancelled_and_the_timer_never_fires() {
    let h = Harness::new().await;
    let s1 = one(&h, schedule("q", "a", 1000, "ta", &json!(1))).await;
    one(&h, schedule("q", "b", 1000, "tb", &json!(2))).await;

    let c = one(&h, json!({"op": "cancel", "queue": "q", "timerKey": "a"})).await;
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(c["status"], "cancelled");
    assert_eq!(c["queue"], "q");
    assert_eq!(c["timerKey"], "a");
    assert_eq!(c["txn"], "ta");
    assert_eq!(c["messageId"], s1["messageId"]);

    let (s, c) = h.delete("/api/v1/timers/q/b?txn=tb").await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["ok"], true, "{c}");
    assert_eq!(c["status"], "cancelled");
    assert_eq!(c["timerKey"], "b");

    assert_eq!(peek(&h, "q", "a").await["found"], false);
    assert_eq!(peek(&h, "q", "b").await["found"], false);
    h.advance(5);
    stays_empty(&h, "q", "a cancelled timer fired").await;
}

#[tokio::test]
async fn cancel_of_an_absent_key_answers_absent_and_echoes_txn() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let r = one(
        &h,
        json!({"op": "cancel", "queue": "q", "timerKey": "nope", "txn": "mine"}),
    )
    .await;
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(r["status"], "absent");
    assert_eq!(r["queue"], "q");
    assert_eq!(r["timerKey"], "nope");
    assert_eq!(r["txn"], "mine");

    let r = one(
        &h,
        json!({"op": "cancel", "queue": "q", "timerKey": "nope"}),
    )
    .await;
    assert_eq!(r["status"], "absent");
    let o = r.as_object().unwrap();
    assert!(o.contains_key("txn") && r["txn"].is_null(), "{r}");

    let (s, r) = h.delete("/api/v1/timers/q/nope?txn=yours").await;
    assert_eq!(
        s,
        StatusCode::OK,
        "an absent timer is a verdict, not an error: {r}"
    );
    assert_eq!(r["ok"], false);
    assert_eq!(r["status"], "absent");
    assert_eq!(r["txn"], "yours");
    let (s, r) = h.delete("/api/v1/timers/q/nope").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(r["status"], "absent");
    assert!(r["txn"].is_null(), "{r}");
    assert_eq!(
        h.broker.stats().commits,
        before,
        "nothing to cancel, nothing written"
    );
}

// ---------------------------------------------------------------- firing

#[tokio::test]
async fn a_due_timer_pushes_its_payload_as_a_message_with_its_txn_and_message_id() {
    let h = Harness::new().await;
    let payload = json!({"orderId": "order-7", "lines": [1, 2.5, null], "ok": true});
    let mut op = schedule("reminders", "order-7", 3000, "reminder-order-7", &payload);
    op["partition"] = "customer-123".into();
    let s = one(&h, op).await;
    h.advance(4);
    let pop = fired(&h, "reminders").await;
    assert_eq!(pop["partition"], "customer-123");
    let msgs = pop["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{pop}");
    let m = &msgs[0];
    assert_eq!(m["id"], s["messageId"], "the id given at scheduling");
    assert_eq!(m["transactionId"], "reminder-order-7");
    assert_eq!(m["data"], payload, "a JSON payload is delivered as JSON");
    assert_eq!(m["partition"], "customer-123");
    assert_eq!(m["queue"], "reminders");

    // A timer without a partition goes to the default one.
    one(&h, schedule("plain", "k", 0, "tp", &json!([1, "two"]))).await;
    let pop = fired(&h, "plain").await;
    assert_eq!(pop["partition"], "Default");
    assert_eq!(pop["messages"][0]["data"], json!([1, "two"]));
}

#[tokio::test]
async fn a_timer_never_fires_before_deliver_at() {
    let h = Harness::new().await;
    let s = one(&h, schedule("q", "k", 5000, "t", &json!(1))).await;
    advance_ms(&h, 4999);
    assert!(h.clock.now_micros() < micros(&s["deliverAt"]));
    stays_empty(&h, "q", "fired before deliverAt").await;
    assert_eq!(peek(&h, "q", "k").await["found"], true, "still pending");
    advance_ms(&h, 2);
    let pop = fired(&h, "q").await;
    assert_eq!(pop["messages"][0]["transactionId"], "t");
}

#[tokio::test]
async fn a_zero_or_negative_delay_fires_at_the_first_sweep() {
    let h = Harness::new().await;
    one(&h, schedule("q", "zero", 0, "t0", &json!(0))).await;
    one(&h, schedule("q", "neg", -60_000, "tn", &json!(-1))).await;
    // The clock does not move: the scheduler's own sweep fires them.
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    while got.len() < 2 && tokio::time::Instant::now() < deadline {
        if let Some(p) = h.pop("/api/v1/pop/queue/q?batch=10").await {
            for m in p["messages"].as_array().unwrap() {
                got.push(m["transactionId"].as_str().unwrap().to_string());
                h.ack_msg(m, "completed").await;
            }
        } else {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    got.sort();
    assert_eq!(got, ["t0", "tn"]);
}

#[tokio::test]
async fn a_fired_timer_is_gone_from_peek_and_list_and_its_cancel_is_absent() {
    let h = Harness::new().await;
    one(&h, schedule("q", "k", 1000, "t", &json!(1))).await;
    one(&h, schedule("q", "later", 60_000, "tl", &json!(2))).await;
    h.advance(2);
    fired(&h, "q").await;
    let p = peek(&h, "q", "k").await;
    assert_eq!(p["found"], false, "{p}");
    let (_, l) = h.get("/api/v1/timers/q").await;
    let keys: Vec<_> = l["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["timerKey"].clone())
        .collect();
    assert_eq!(keys, [json!("later")], "{l}");
    let c = one(
        &h,
        json!({"op": "cancel", "queue": "q", "timerKey": "k", "txn": "t"}),
    )
    .await;
    assert_eq!(c["ok"], false, "{c}");
    assert_eq!(c["status"], "absent");
    assert_eq!(c["txn"], "t");
}

// ---------------------------------------------------------------- peek and list

#[tokio::test]
async fn peek_shows_a_pending_timer_and_a_missing_one_is_not_found() {
    let h = Harness::new().await;
    let payload = json!({"p": "x"});
    let s = one(&h, schedule("q", "k", 30_000, "t", &payload)).await;
    let p = peek(&h, "q", "k").await;
    assert_eq!(p["found"], true, "{p}");
    assert_eq!(p["deliverAt"], s["deliverAt"]);
    assert_eq!(p["txn"], "t");
    assert_eq!(p["payload"], b64(&payload), "the payload as sent");
    assert_eq!(p["attempts"], 0);
    let p = peek(&h, "q", "nope").await;
    assert_eq!(p["found"], false, "{p}");
    let p = peek(&h, "other", "k").await;
    assert_eq!(p["found"], false, "another queue's key: {p}");
}

#[tokio::test]
async fn list_pages_a_queues_pending_timers_by_key() {
    let h = Harness::new().await;
    timers(
        &h,
        json!([
            schedule("q", "c", 30_000, "tc", &json!(3)),
            schedule("q", "a", 10_000, "ta", &json!(1)),
            schedule("q", "b", 20_000, "tb", &json!(2)),
            schedule("elsewhere", "a0", 20_000, "te", &json!(0)),
        ]),
    )
    .await;
    let keys = |l: &Value| -> Vec<String> {
        l["rows"]
            .as_array()
            .unwrap_or_else(|| panic!("{l}"))
            .iter()
            .map(|r| r["timerKey"].as_str().unwrap().to_string())
            .collect()
    };
    let (s, all) = h.get("/api/v1/timers/q").await;
    assert_eq!(s, StatusCode::OK, "{all}");
    assert_eq!(keys(&all), ["a", "b", "c"]);
    assert_eq!(all["truncated"], false);
    assert_eq!(all["nextAfter"], Value::Null);
    assert_eq!(all["rows"][0]["txn"], "ta");
    assert!(all["rows"][0]["deliverAt"].is_string());

    let (_, p1) = h.get("/api/v1/timers/q?limit=2").await;
    assert_eq!(keys(&p1), ["a", "b"]);
    assert_eq!(p1["truncated"], true);
    assert_eq!(p1["nextAfter"], "b");
    let (_, p2) = h.get("/api/v1/timers/q?limit=2&after=b").await;
    assert_eq!(keys(&p2), ["c"]);
    assert_eq!(p2["truncated"], false);
    assert_eq!(p2["nextAfter"], Value::Null);

    let (_, none) = h.get("/api/v1/timers/nothing").await;
    assert_eq!(none["rows"], json!([]), "{none}");
    assert_eq!(none["truncated"], false);
}

// ---------------------------------------------------------------- refusals

#[tokio::test]
async fn broker_owned_fields_are_refused_with_400() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for (field, value) in [
        ("messageId", json!("0199a7c2-61f1-7d55-b0e2-8b3f0a2d4e71")),
        ("deliverAt", json!("2030-01-01T00:00:00.000000Z")),
        ("producerSub", json!("someone")),
        ("attempts", json!(0)),
        ("delaySeconds", json!(5)),
        ("_internal", json!(true)),
        ("_", json!(null)),
    ] {
        let mut op = schedule("q", "k", 1000, "t", &json!(1));
        op[field] = value.clone();
        let res = h
            .post(
                "/api/v1/timers",
                json!({"operations": [schedule("q", "witness", 1000, "w", &json!(0)), op]}),
            )
            .await;
        assert_refused(&h, before, res, 400, "timers_bad_request");
        let mut cancel = json!({"op": "cancel", "queue": "q", "timerKey": "k"});
        cancel[field] = value;
        let res = h
            .post("/api/v1/timers", json!({"operations": [cancel]}))
            .await;
        assert_refused(&h, before, res, 400, "timers_bad_request");
    }
    assert_eq!(peek(&h, "q", "witness").await["found"], false);
    assert_eq!(peek(&h, "q", "k").await["found"], false);
}

#[tokio::test]
async fn malformed_timer_ops_are_400_and_schedule_nothing() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let ok = b64(&json!(1));
    for op in [
        json!({"op": "fire", "queue": "q", "timerKey": "k"}),
        json!({"queue": "q", "timerKey": "k", "delayMs": 1, "payload": ok}),
        json!({"op": "schedule", "timerKey": "k", "delayMs": 1, "txn": "t", "payload": ok}),
        json!({"op": "schedule", "queue": "q", "delayMs": 1, "txn": "t", "payload": ok}),
        json!({"op": "schedule", "queue": "q", "timerKey": "", "delayMs": 1, "txn": "t", "payload": ok}),
        json!({"op": "schedule", "queue": "q", "timerKey": "k", "txn": "t", "payload": ok}),
        json!({"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": "1", "txn": "t", "payload": ok}),
        json!({"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 1, "txn": "t"}),
        json!({"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 1, "txn": "t",
               "payload": "not base64!"}),
        json!({"op": "cancel", "queue": 7, "timerKey": "k"}),
    ] {
        let res = h
            .post(
                "/api/v1/timers",
                json!({"operations": [schedule("q", "witness", 1000, "w", &json!(0)), op]}),
            )
            .await;
        let (s, b) = res;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert_eq!(h.broker.stats().commits, before, "{b}");
    }
    for body in [
        json!({}),
        json!({"operations": {}}),
        json!({"operations": [1]}),
    ] {
        let (s, b) = h.post("/api/v1/timers", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
    }
    assert_eq!(peek(&h, "q", "witness").await["found"], false);
    assert_eq!(h.broker.stats().commits, before);
}

#[tokio::test]
async fn the_same_queue_and_timer_key_twice_in_one_call_is_400() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for second in [
        schedule("q", "k", 2000, "t2", &json!(2)),
        json!({"op": "cancel", "queue": "q", "timerKey": "k"}),
        json!({"op": "reschedule", "queue": "q", "timerKey": "k", "delayMs": 1, "txn": "t3",
               "payload": b64(&json!(3))}),
    ] {
        let res = h
            .post(
                "/api/v1/timers",
                json!({"operations": [schedule("q", "k", 1000, "t1", &json!(1)), second]}),
            )
            .await;
        assert_refused(&h, before, res, 400, "timers_bad_request");
    }
    assert_eq!(peek(&h, "q", "k").await["found"], false);
    // The same key on another queue is another timer.
    let r = timers(
        &h,
        json!([
            schedule("q", "k", 1000, "t1", &json!(1)),
            schedule("q2", "k", 1000, "t2", &json!(2))
        ]),
    )
    .await;
    assert_eq!(r[1]["status"], "scheduled");
}

#[tokio::test]
async fn more_than_256_ops_is_400_and_256_are_accepted() {
    let h = Harness::new().await;
    let ops = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| {
                schedule(
                    "q",
                    &format!("k{i:03}"),
                    60_000,
                    &format!("t{i}"),
                    &json!(i),
                )
            })
            .collect()
    };
    let before = h.broker.stats().commits;
    let res = h
        .post("/api/v1/timers", json!({"operations": ops(257)}))
        .await;
    assert_refused(&h, before, res, 400, "timers_bad_request");
    assert_eq!(peek(&h, "q", "k000").await["found"], false);
    let r = timers(&h, json!(ops(256))).await;
    assert_eq!(r.len(), 256);
    let (_, l) = h.get("/api/v1/timers/q?limit=1000").await;
    assert_eq!(l["rows"].as_array().unwrap().len(), 256);
}

#[tokio::test]
async fn a_payload_over_1_mib_decoded_is_413() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let over = B64.encode(vec![b'a'; 1024 * 1024 + 1]);
    let res = h
        .post(
            "/api/v1/timers",
            json!({"operations": [
                schedule("q", "witness", 1000, "w", &json!(0)),
                {"op": "schedule", "queue": "q", "timerKey": "big", "delayMs": 1000, "txn": "t",
                 "payload": over},
            ]}),
        )
        .await;
    assert_refused(&h, before, res, 413, "payload_too_large");
    assert_eq!(peek(&h, "q", "witness").await["found"], false);
    let exact = B64.encode(vec![b'a'; 1024 * 1024]);
    let r = one(
        &h,
        json!({"op": "schedule", "queue": "q", "timerKey": "big", "delayMs": 1000, "txn": "t",
               "payload": exact}),
    )
    .await;
    assert_eq!(r["status"], "scheduled", "1 MiB exactly is accepted");
}

#[tokio::test]
async fn a_delay_beyond_the_90_day_horizon_is_403_timer_horizon_exceeded() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for delay in [90 * DAY_MS + 1000, 365 * DAY_MS] {
        let res = h
            .post(
                "/api/v1/timers",
                json!({"operations": [
                    schedule("q", "witness", 1000, "w", &json!(0)),
                    schedule("q", "far", delay, "t", &json!(1)),
                ]}),
            )
            .await;
        assert_refused(&h, before, res, 403, "timer_horizon_exceeded");
    }
    assert_eq!(peek(&h, "q", "witness").await["found"], false);
    let r = one(&h, schedule("q", "far", 90 * DAY_MS, "t", &json!(1))).await;
    assert_eq!(
        r["status"], "scheduled",
        "90 days exactly is within the horizon: {r}"
    );
}

#[tokio::test]
async fn a_delay_one_millisecond_past_the_horizon_is_403() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let res = h
        .post(
            "/api/v1/timers",
            json!({"operations": [schedule("q", "far", 90 * DAY_MS + 1, "t", &json!(1))]}),
        )
        .await;
    assert_refused(&h, before, res, 403, "timer_horizon_exceeded");
    assert_eq!(peek(&h, "q", "far").await["found"], false);
}

// ---------------------------------------------------------------- transactions

#[tokio::test]
async fn a_transactions_timers_skip_the_horizon_but_keep_the_per_op_rules() {
    let h = Harness::new().await;
    let (s, b) = h
        .post(
            "/api/v1/transaction",
            json!({"timers": [schedule("q", "far", 365 * DAY_MS, "t", &json!(1))]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["success"], true, "{b}");
    assert_eq!(b["results"][0]["type"], "timer");
    assert_eq!(b["results"][0]["status"], "scheduled");
    assert_eq!(peek(&h, "q", "far").await["found"], true);

    let before = h.broker.stats().commits;
    let mut owned = schedule("q", "k", 1000, "t", &json!(1));
    owned["messageId"] = "x".into();
    for body in [
        json!({"timers": [owned]}),
        json!({"timers": [schedule("q", "k", 1, "a", &json!(1)), schedule("q", "k", 2, "b", &json!(2))]}),
    ] {
        let (s, b) = h.post("/api/v1/transaction", body).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert_eq!(h.broker.stats().commits, before);
    }
    assert_eq!(peek(&h, "q", "k").await["found"], false);
}

// ---------------------------------------------------------------- restarts

#[tokio::test]
async fn timers_survive_a_restart_and_fire_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data/queen.redb");
    let clock = ManualClock::new();
    let h = Harness::on_file(&path, &clock).await;
    let s = one(
        &h,
        schedule("q", "k", 10_000, "t-restart", &json!({"after": "restart"})),
    )
    .await;
    one(&h, schedule("q", "gone", 10_000, "t-gone", &json!(0))).await;
    one(
        &h,
        json!({"op": "cancel", "queue": "q", "timerKey": "gone"}),
    )
    .await;
    h.broker.shutdown().await;

    let h = Harness::on_file(&path, &clock).await;
    let p = peek(&h, "q", "k").await;
    assert_eq!(p["found"], true, "the pending timer came back: {p}");
    assert_eq!(p["deliverAt"], s["deliverAt"]);
    assert_eq!(peek(&h, "q", "gone").await["found"], false);
    stays_empty(&h, "q", "fired early after the restart").await;
    h.advance(11);
    let pop = fired(&h, "q").await;
    let msgs = pop["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 1, "{pop}");
    assert_eq!(msgs[0]["id"], s["messageId"]);
    assert_eq!(msgs[0]["transactionId"], "t-restart");
    assert_eq!(msgs[0]["data"], json!({"after": "restart"}));
    h.broker.shutdown().await;
}

/// A timer's payload is delivered as the message's JSON body, so it is held to push's
/// rules (`wire.md` 1, I-JSON): a payload that decodes to JSON text with a number out
/// of range, a lone surrogate or a duplicate key is refused with 400 and nothing is
/// scheduled, standalone and in a transaction (a consumer would otherwise decode a
/// value push refuses). A payload that is not JSON at all stays legal (it is delivered
/// as its base64 text).
#[tokio::test]
async fn a_payload_that_is_not_portable_json_is_refused_as_push_refuses_it() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for text in [
        r#"{"n": 1e400}"#,
        r#"{"s": "\ud800"}"#,
        r#"{"role": "read-only", "role": "admin"}"#,
        &format!("{}1{}", "[".repeat(200), "]".repeat(200)),
    ] {
        let payload = B64.encode(text);
        let op = json!({"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 1,
                        "txn": "t", "payload": payload});
        let res = h
            .post("/api/v1/timers", json!({ "operations": [op.clone()] }))
            .await;
        assert_refused(&h, before, res, 400, "timers_bad_request");
        let mut in_txn = op;
        in_txn.as_object_mut().unwrap().remove("txn");
        let res = h.txn(json!({"operations": [], "timers": [in_txn]})).await;
        assert_refused(&h, before, res, 400, "bad_request");
        // Push refuses the same value.
        let (s, b) = h
            .post_raw(
                "/api/v1/push",
                format!(r#"{{"items": [{{"queue": "q", "payload": {text}}}]}}"#),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{text}: {b}");
    }
    // Not JSON: kept, and delivered as its base64 text.
    let r = one(
        &h,
        json!({"op": "schedule", "queue": "bin", "timerKey": "k",
                           "delayMs": 0, "txn": "t", "payload": B64.encode([0xff, 0x00])}),
    )
    .await;
    assert_eq!(r["status"], "scheduled", "{r}");
    assert_eq!(peek(&h, "q", "k").await["found"], false);
}
