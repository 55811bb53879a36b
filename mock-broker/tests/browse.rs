//! Reading and handling messages by hand: reads by offset (`POST /api/v1/fetch`),
//! partition discovery (`POST /api/v1/partitions/changed`), the message listing
//! (`GET /api/v1/messages`), a dead letter's replay and deletion, and timer keys with
//! `/` in them. Shapes as the official client (`queen-mq` 2.7.0) reads them.

mod common;

use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::{Harness, txns};
use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

fn offsets(entry: &Value) -> Vec<u64> {
    entry["records"]
        .as_array()
        .unwrap_or_else(|| panic!("records: {entry}"))
        .iter()
        .map(|r| r["offset"].as_u64().unwrap())
        .collect()
}

async fn fetch(h: &Harness, body: Value) -> Vec<Value> {
    let (s, b) = h.post("/api/v1/fetch", body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("{b}"))
        .clone()
}

#[tokio::test]
async fn fetch_reads_by_offset_without_leasing_and_reports_the_bounds() {
    let h = Harness::new().await;
    for i in 0..3 {
        h.push_one("q", "p", &format!("m{i}"), json!({"n": i}))
            .await;
    }
    let e = fetch(
        &h,
        json!({"entries": [{"queue": "q", "partition": "p", "offset": 0}]}),
    )
    .await;
    assert_eq!(e.len(), 1);
    assert_eq!(offsets(&e[0]), [0, 1, 2]);
    assert_eq!(e[0]["records"][1]["transactionId"], "m1");
    assert_eq!(e[0]["records"][1]["payload"], json!({"n": 1}));
    assert!(e[0]["records"][0]["ts"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        (&e[0]["highWatermark"], &e[0]["logStartOffset"]),
        (&json!(3), &json!(0))
    );
    assert!(e[0].get("error").is_none(), "{}", e[0]);

    // From the high watermark: caught up, nothing, no error.
    let e = fetch(
        &h,
        json!({"entries": [{"queue": "q", "partition": "p", "offset": 3}]}),
    )
    .await;
    assert!(offsets(&e[0]).is_empty());
    assert!(e[0].get("error").is_none());

    // A read takes no lease and moves no cursor: a pop still gets everything.
    let p = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_eq!(txns(&p), ["m0", "m1", "m2"]);
}

#[tokio::test]
async fn fetch_marks_unknown_partitions_and_offsets_out_of_range_per_entry() {
    let h = Harness::new().await;
    h.push_one("q", "Default", "a", json!(1)).await;
    h.push_one("q", "7", "b", json!(2)).await;
    let e = fetch(
        &h,
        json!({"entries": [
            {"queue": "q", "offset": 0},
            {"queue": "q", "partition": 7, "offset": 0},
            {"queue": "q", "partition": "nope", "offset": 0},
            {"queue": "missing", "offset": 0},
            {"queue": "q", "offset": 5},
        ]}),
    )
    .await;
    assert_eq!(e.len(), 5, "one answer per entry, in order");
    assert_eq!(
        (e[0]["partition"].clone(), offsets(&e[0])),
        (json!("Default"), vec![0])
    );
    assert_eq!(
        (e[1]["partition"].clone(), offsets(&e[1])),
        (json!("7"), vec![0])
    );
    assert_eq!(e[2]["error"], "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(e[3]["error"], "UNKNOWN_TOPIC_OR_PARTITION");
    assert_eq!(e[4]["error"], "OFFSET_OUT_OF_RANGE");
    assert_eq!(e[4]["highWatermark"], 1, "the bounds come with the marker");
}

#[tokio::test]
async fn fetch_budgets_always_return_one_record_and_stop_at_the_call_ceiling() {
    let h = Harness::new().await;
    for i in 0..4 {
        h.push_one("q", "a", &format!("a{i}"), json!("0123456789"))
            .await;
        h.push_one("q", "b", &format!("b{i}"), json!("0123456789"))
            .await;
    }
    // Each payload is 12 bytes of JSON text. An entry budget of 1 still reads one.
    let e = fetch(
        &h,
        json!({"entries": [{"queue": "q", "partition": "a", "offset": 0, "maxBytes": 1}]}),
    )
    .await;
    assert_eq!(offsets(&e[0]), [0]);
    let e = fetch(
        &h,
        json!({"entries": [{"queue": "q", "partition": "a", "offset": 0, "maxBytes": 24}]}),
    )
    .await;
    assert_eq!(offsets(&e[0]), [0, 1]);
    // The call's ceiling is spent by the first entry: the second answers its bounds only.
    let e = fetch(
        &h,
        json!({"maxBytes": 36, "entries": [
            {"queue": "q", "partition": "a", "offset": 0},
            {"queue": "q", "partition": "b", "offset": 0},
        ]}),
    )
    .await;
    assert_eq!(offsets(&e[0]), [0, 1, 2]);
    assert!(offsets(&e[1]).is_empty());
    assert_eq!(e[1]["highWatermark"], 4);
}

#[tokio::test]
async fn a_waiting_fetch_answers_when_a_record_lands() {
    let h = Harness::new().await;
    h.push_one("q", "p", "first", json!(1)).await;
    let url = h.url("/api/v1/fetch");
    let http = h.http.clone();
    let waiting = tokio::spawn(async move {
        let started = std::time::Instant::now();
        let b: Value = http
            .post(url)
            .json(&json!({"maxWaitMs": 10000, "entries": [{"queue": "q", "partition": "p", "offset": 1}]}))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        (b, started.elapsed())
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    h.push_one("q", "p", "second", json!(2)).await;
    let (b, took) = waiting.await.unwrap();
    assert_eq!(offsets(&b["entries"][0]), [1], "{b}");
    assert!(
        took < Duration::from_secs(5),
        "woke by the push, not the deadline"
    );
}

#[tokio::test]
async fn bad_fetch_bodies_are_400_and_name_the_field() {
    let h = Harness::new().await;
    let many: Vec<Value> = (0..1025)
        .map(|_| json!({"queue": "q", "offset": 0}))
        .collect();
    for (body, says) in [
        (json!({}), "entries"),
        (
            json!({"entries": [{"queue": "q", "offset": -1}]}),
            "entries[0].offset",
        ),
        (json!({"entries": [{"queue": "q"}]}), "offset"),
        (
            json!({"entries": [{"queue": "", "offset": 0}]}),
            "entries[0].queue",
        ),
        (
            json!({"entries": [{"queue": "q", "offset": 0, "maxBytes": 0}]}),
            "maxBytes",
        ),
        (
            json!({"entries": [{"queue": "q", "offset": 0, "partition": ""}]}),
            "partition",
        ),
        (json!({"entries": many}), "1024"),
        (json!({"maxWaitMs": -1, "entries": []}), "maxWaitMs"),
    ] {
        let (s, b) = h.post("/api/v1/fetch", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} -> {b}");
        assert_eq!(b["code"], "bad_request");
        assert!(b["error"].as_str().unwrap().contains(says), "{says}: {b}");
    }
}

async fn changed(h: &Harness, entries: Value) -> Value {
    let (s, b) = h
        .post("/api/v1/partitions/changed", json!({ "entries": entries }))
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

fn names(entry: &Value) -> Vec<String> {
    entry["partitions"]
        .as_array()
        .unwrap_or_else(|| panic!("{entry}"))
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn discovery_lists_partitions_in_creation_order_by_page_and_since_a_safe_time() {
    let h = Harness::new().await;
    for name in ["zeta", "alpha", "mid"] {
        h.push_one("q", name, name, json!(1)).await;
        h.advance(1);
    }
    let all = changed(&h, json!([{"queue": "q"}])).await;
    assert_eq!(names(&all["entries"][0]), ["zeta", "alpha", "mid"]);
    assert_eq!(all["entries"][0]["next"], Value::Null, "the pass is over");
    assert_eq!(all["safeTimeDegraded"], false);
    let zeta = &all["entries"][0]["partitions"][0];
    assert_eq!(
        (&zeta["lastOffset"], &zeta["logStart"]),
        (&json!(0), &json!(0))
    );
    assert!(
        zeta["id"].is_string() && zeta["lastWriteAt"].is_string(),
        "{zeta}"
    );

    // Pages of one, following `next`.
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    for _ in 0..5 {
        let mut e = json!({"queue": "q", "limit": 1});
        if let Some(a) = &after {
            e["after"] = json!(a);
        }
        let page = changed(&h, json!([e])).await;
        seen.extend(names(&page["entries"][0]));
        match page["entries"][0]["next"].as_str() {
            Some(n) => after = Some(n.to_string()),
            None => break,
        }
    }
    assert_eq!(seen, ["zeta", "alpha", "mid"]);

    // From the safe time of a pass, only what was written since comes back.
    let safe = all["safeTime"].as_str().unwrap().to_string();
    h.advance(1);
    h.push_one("q", "alpha", "again", json!(2)).await;
    let next = changed(&h, json!([{"queue": "q", "since": safe}])).await;
    let listed = names(&next["entries"][0]);
    assert!(listed.contains(&"alpha".to_string()), "{next}");
    assert!(!listed.contains(&"zeta".to_string()), "{next}");
    let alpha = next["entries"][0]["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "alpha")
        .unwrap();
    assert_eq!(alpha["lastOffset"], 1);
    assert!(next["safeTime"].as_str().unwrap() > safe.as_str());
}

#[tokio::test]
async fn discovery_marks_unknown_queues_and_foreign_cursors_and_refuses_bad_times() {
    let h = Harness::new().await;
    h.push_one("q", "p", "a", json!(1)).await;
    let b = changed(
        &h,
        json!([{"queue": "ghost"}, {"queue": "q", "after": "not-a-cursor"}, {"queue": "q"}]),
    )
    .await;
    assert_eq!(
        b["entries"][0],
        json!({"queue": "ghost", "error": "UNKNOWN_TOPIC_OR_PARTITION"})
    );
    assert_eq!(
        b["entries"][1],
        json!({"queue": "q", "error": "BAD_CURSOR"})
    );
    assert_eq!(names(&b["entries"][2]), ["p"]);
    // A watermark-only call.
    let (s, w) = h.post("/api/v1/partitions/changed", json!({})).await;
    assert_eq!(s, StatusCode::OK, "{w}");
    assert_eq!(w["entries"], json!([]));
    assert_eq!(w["safeTime"], b["safeTime"]);
    for body in [
        json!({"entries": [{"queue": "q", "since": "yesterday"}]}),
        // A multi-byte character where the seconds would be filled in.
        json!({"entries": [{"queue": "q", "since": "2026-09-04T10:0éZ"}]}),
        json!({"entries": [{"queue": "q", "since": "2026-09-04T10:00é"}]}),
        json!({"entries": [{"since": "2026-01-01"}]}),
        json!({"entries": "q"}),
    ] {
        let (s, r) = h.post("/api/v1/partitions/changed", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} -> {r}");
        assert_eq!(r["code"], "bad_request");
    }
}

#[tokio::test]
async fn the_listing_shows_messages_newest_first_with_their_status() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    for i in 0..3 {
        h.push_one("q", "p", &format!("m{i}"), json!(i)).await;
        h.advance(1);
    }
    h.push_one("other", "p", "x", json!(0)).await;
    let p = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    h.ack_msg(&p["messages"][0], "completed").await;

    let (s, b) = h.get("/api/v1/messages?queue=q").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let rows = b["messages"].as_array().unwrap();
    let got: Vec<(&str, &str)> = rows
        .iter()
        .map(|m| {
            (
                m["transactionId"].as_str().unwrap(),
                m["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [("m2", "pending"), ("m1", "processing"), ("m0", "completed")]
    );
    assert_eq!(b["total"], 3, "the page's length");
    assert_eq!(b["mode"]["type"], "queue", "{b}");
    for m in rows {
        assert_eq!((&m["queue"], &m["partition"]), (&json!("q"), &json!("p")));
        for key in [
            "id",
            "txnHash",
            "partitionId",
            "segment",
            "createdAt",
            "offset",
        ] {
            assert!(m.get(key).is_some(), "{key}: {m}");
        }
    }

    let (_, page) = h.get("/api/v1/messages?queue=q&limit=1&offset=1").await;
    assert_eq!(txns(&page), ["m1"]);
    let (_, processing) = h.get("/api/v1/messages?status=processing").await;
    assert_eq!(txns(&processing), ["m1"]);
    let (_, everything) = h.get("/api/v1/messages").await;
    assert_eq!(everything["total"], 4);

    // A dead letter says so.
    h.ack_msg(&p["messages"][1], "dlq").await;
    let (_, dead) = h.get("/api/v1/messages?status=dead_letter").await;
    assert_eq!(txns(&dead), ["m1"]);

    for q in ["status=lost", "limit=0", "from=soon", "offset=-1"] {
        let (s, r) = h.get(&format!("/api/v1/messages?{q}")).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{q} -> {r}");
        assert_eq!(r["code"], "bad_request");
    }
}

/// Dead-letters the one message of `q` (pushed as `txn`) for the queue-mode group and
/// answers the popped message.
async fn dead_letter(h: &Harness, txn: &str) -> Value {
    h.push_one("q", "p", txn, json!({"poison": true})).await;
    let p = h.pop("/api/v1/pop/queue/q").await.unwrap();
    let m = p["messages"][0].clone();
    assert_eq!(h.ack_msg(&m, "dlq").await["dlq"], true);
    m
}

fn address(m: &Value) -> String {
    format!(
        "/api/v1/messages/{}/{}",
        m["partitionId"].as_str().unwrap(),
        m["transactionId"].as_str().unwrap()
    )
}

#[tokio::test]
async fn a_dead_letter_can_be_deleted_by_hand_and_a_live_message_cannot() {
    let h = Harness::new().await;
    h.push_one("q", "p", "live", json!(1)).await;
    let live = h.pop("/api/v1/pop/queue/q").await.unwrap()["messages"][0].clone();
    let (s, r) = h.delete(&address(&live)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "{r}");
    assert_eq!(r["code"], "not_found");
    h.ack_msg(&live, "completed").await;

    let dead = dead_letter(&h, "poison").await;
    let (s, r) = h.delete(&address(&dead)).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!(r["success"], true);
    assert_eq!(r["transactionId"], "poison");
    assert_eq!(r["deadLettersRemoved"], 1);
    let (_, dlq) = h.get("/api/v1/dlq").await;
    assert_eq!(dlq["total"], 0, "{dlq}");
    // The log is not edited: the message is still readable by offset.
    let e = fetch(
        &h,
        json!({"entries": [{"queue": "q", "partition": "p", "offset": 1}]}),
    )
    .await;
    assert_eq!(offsets(&e[0]), [1]);
    let (s, _) = h.delete(&address(&dead)).await;
    assert_eq!(s, StatusCode::NOT_FOUND, "a second delete finds nothing");
    let (s, r) = h.delete("/api/v1/messages/not-an-id/poison").await;
    assert_eq!(
        (s, &r["code"]),
        (StatusCode::NOT_FOUND, &json!("not_found"))
    );
}

#[tokio::test]
async fn retrying_a_dead_letter_delivers_it_again_and_a_live_message_is_refused() {
    let h = Harness::new().await;
    h.push_one("q", "p", "live", json!(1)).await;
    let live = h.pop("/api/v1/pop/queue/q").await.unwrap()["messages"][0].clone();
    let (s, r) = h
        .post(&format!("{}/retry", address(&live)), json!({}))
        .await;
    assert_eq!(
        s,
        StatusCode::NOT_FOUND,
        "retry replays dead letters only: {r}"
    );
    h.ack_msg(&live, "completed").await;

    let dead = dead_letter(&h, "poison").await;
    let (s, r) = h
        .post_raw(&format!("{}/retry", address(&dead)), Vec::<u8>::new())
        .await;
    assert_eq!(s, StatusCode::OK, "{r}");
    assert_eq!((&r["success"], &r["offset"]), (&json!(true), &json!(2)));
    assert_ne!(r["messageId"], dead["id"], "a new message");
    let (_, dlq) = h.get("/api/v1/dlq").await;
    assert_eq!(dlq["total"], 0);

    let again = h.pop("/api/v1/pop/queue/q").await.unwrap();
    assert_eq!(txns(&again), ["poison"]);
    assert_eq!(again["messages"][0]["data"], json!({"poison": true}));
    let acked = h.ack_msg(&again["messages"][0], "completed").await;
    assert_eq!(
        acked["success"], true,
        "the transaction id names the replay: {acked}"
    );
}

#[tokio::test]
async fn another_tenants_messages_partitions_and_dead_letters_are_unknown() {
    let auth = Auth::new().token("acme", Role::Admin, "acme", None).token(
        "globex",
        Role::Admin,
        "globex",
        None,
    );
    let b = MockBroker::builder().auth(auth).start().await.unwrap();
    let http = reqwest::Client::new();
    let send = |method: Method, token: &'static str, path: &str, body: Option<Value>| {
        let mut req = http
            .request(method, format!("{}{path}", b.url()))
            .bearer_auth(token);
        if let Some(body) = body {
            req = req.json(&body);
        }
        async move {
            let res = req.send().await.unwrap();
            let status = res.status();
            let v: Value = res.json().await.unwrap_or(Value::Null);
            (status, v)
        }
    };
    let push =
        json!({"items": [{"queue": "q", "partition": "p", "transactionId": "t", "payload": 1}]});
    let (s, _) = send(Method::POST, "acme", "/api/v1/push", Some(push)).await;
    assert_eq!(s, 201);
    let (_, popped) = send(Method::GET, "acme", "/api/v1/pop/queue/q", None).await;
    let m = &popped["messages"][0];
    let pid = m["partitionId"].as_str().unwrap().to_string();
    let ack =
        json!({"transactionId": "t", "partitionId": pid, "leaseId": m["leaseId"], "status": "dlq"});
    let (s, _) = send(Method::POST, "acme", "/api/v1/ack", Some(ack)).await;
    assert_eq!(s, 200);

    let fetch = json!({"entries": [{"queue": "q", "partition": "p", "offset": 0}]});
    let (_, mine) = send(Method::POST, "acme", "/api/v1/fetch", Some(fetch.clone())).await;
    assert_eq!(offsets(&mine["entries"][0]), [0]);
    let (_, theirs) = send(Method::POST, "globex", "/api/v1/fetch", Some(fetch)).await;
    assert_eq!(theirs["entries"][0]["error"], "UNKNOWN_TOPIC_OR_PARTITION");
    let (_, theirs) = send(
        Method::POST,
        "globex",
        "/api/v1/partitions/changed",
        Some(json!({"entries": [{"queue": "q"}]})),
    )
    .await;
    assert_eq!(theirs["entries"][0]["error"], "UNKNOWN_TOPIC_OR_PARTITION");
    let (_, theirs) = send(Method::GET, "globex", "/api/v1/messages", None).await;
    assert_eq!(theirs["messages"], json!([]));
    let (_, theirs) = send(Method::GET, "globex", "/api/v1/consumer-groups", None).await;
    assert_eq!(theirs, json!([]));
    let path = format!("/api/v1/messages/{pid}/t");
    let (s, _) = send(Method::POST, "globex", &format!("{path}/retry"), None).await;
    assert_eq!(s, 404);
    let (s, _) = send(Method::DELETE, "globex", &path, None).await;
    assert_eq!(s, 404);
    let (s, _) = send(Method::DELETE, "acme", &path, None).await;
    assert_eq!(s, 200, "still there for its own tenant");
    b.shutdown().await;
}

#[tokio::test]
async fn a_timer_key_with_slashes_is_peeked_and_cancelled_by_its_path() {
    let h = Harness::new().await;
    let (s, b) = h
        .post(
            "/api/v1/timers",
            json!({"operations": [{"op": "schedule", "queue": "q", "timerKey": "orders/42/remind",
                "delayMs": 86_400_000, "txn": "t", "payload": B64.encode("1")}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let (s, p) = h.get("/api/v1/timers/q/orders/42/remind").await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!((&p["found"], &p["txn"]), (&json!(true), &json!("t")));
    let (s, p) = h.get("/api/v1/timers/q/orders%2F42%2Fremind").await;
    assert_eq!((s, &p["found"]), (StatusCode::OK, &json!(true)), "{p}");
    let (s, c) = h.delete("/api/v1/timers/q/orders/42/remind").await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(c["status"], "cancelled", "{c}");
    let (_, p) = h.get("/api/v1/timers/q/orders/42/remind").await;
    assert_eq!(p["found"], false);
}

/// Under the answer budget (issue 52) a fetch answers the records that fit and the
/// reader goes on from the next offset, missing nothing; a record larger than the
/// whole budget is answered alone; the budget is given back once each answer is sent.
#[tokio::test]
async fn a_fetch_over_the_answer_budget_answers_what_fits_and_reads_on() {
    let h = Harness::with_answer_budget(3 << 20).await;
    // Six records of 1 MiB: each costs twice its size in the budget, so about one fits.
    h.push_mib("q", "p", 6).await;
    let mut next = 0;
    let mut rounds = 0;
    while next < 6 {
        let e = fetch(
            &h,
            json!({"entries": [{"queue": "q", "partition": "p", "offset": next, "maxBytes": 8 << 20}]}),
        )
        .await;
        let got = offsets(&e[0]);
        assert!(!got.is_empty(), "at least one record each time: {next}");
        assert!(got.len() < 6, "not all six at once under a 3 MiB budget");
        assert_eq!(got[0], next, "no record skipped");
        next = got.last().unwrap() + 1;
        rounds += 1;
    }
    assert!(rounds >= 2, "{rounds} rounds");

    // A budget smaller than one record: the record comes back alone, every time.
    let h = Harness::with_answer_budget(256 << 10).await;
    h.push_mib("q", "p", 2).await;
    for offset in [0, 1, 0] {
        let e = fetch(
            &h,
            json!({"entries": [{"queue": "q", "partition": "p", "offset": offset}]}),
        )
        .await;
        assert_eq!(offsets(&e[0]), [offset], "alone, and the room came back");
    }
}
