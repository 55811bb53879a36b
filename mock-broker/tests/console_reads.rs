//! The reads a console needs (issue 44, ROUTES.md section 10): a tenant's KV namespaces
//! (`GET /api/v1/kv`) and a namespace's rows (`GET /api/v1/kv/{ns}`), its timer queues
//! (`GET /api/v1/timers`), and the log of its recent transaction calls
//! (`GET /api/v1/transactions`). Each route's shape, its bad parameters (400 with
//! `{error, code}`), and that another tenant sees none of it.

mod common;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use common::Harness;
use queen_mock_broker::auth::{Auth, Role};
use queen_mock_broker::clock::format_iso;
use queen_mock_broker::{Clock, ManualClock, MockBroker};
use reqwest::StatusCode;
use serde_json::{Value, json};

const UA: &str = "console-reads-test/1";

/// Runs KV operations that must all apply.
async fn kv(h: &Harness, ops: Value) -> Vec<Value> {
    let (s, b) = h.post("/api/v1/kv", json!({ "operations": ops })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{b}"))
        .clone()
}

async fn put(h: &Harness, ns: &str, key: &str, value: Value, expiry: Value) {
    let mut op = json!({"op": "put", "ns": ns, "key": key, "value": value});
    op.as_object_mut()
        .unwrap()
        .extend(expiry.as_object().unwrap().clone());
    let r = kv(h, json!([op])).await;
    assert_eq!(r[0]["applied"], true, "{}", r[0]);
}

/// `GET path`, asserting 200.
async fn read(h: &Harness, path: &str) -> Value {
    let (s, b) = h.get(path).await;
    assert_eq!(s, StatusCode::OK, "{path}: {b}");
    b
}

/// Sends a transaction with a `User-Agent`; answers the status and body.
async fn txn_as(h: &Harness, ua: &str, body: &Value) -> (StatusCode, Value) {
    let res = h
        .http
        .post(h.url("/api/v1/transaction"))
        .header("user-agent", ua)
        .json(body)
        .send()
        .await
        .unwrap();
    let status = res.status();
    (status, res.json().await.unwrap())
}

/// The tenant's logged calls, newest first.
async fn log(h: &Harness, limit: usize) -> Vec<Value> {
    let b = read(h, &format!("/api/v1/transactions?limit={limit}")).await;
    b["transactions"]
        .as_array()
        .unwrap_or_else(|| panic!("{b}"))
        .clone()
}

fn b64(v: &Value) -> String {
    B64.encode(v.to_string())
}

#[tokio::test]
async fn namespaces_count_their_live_keys_in_name_order() {
    let h = Harness::new().await;
    assert_eq!(read(&h, "/api/v1/kv").await, json!({"namespaces": []}));
    put(&h, "stock", "b", json!(2), json!({"ttlSeconds": 10})).await;
    put(&h, "stock", "a", json!(1), json!({"forever": true})).await;
    put(&h, "stock", "c", json!(3), json!({"forever": true})).await;
    put(
        &h,
        "orders",
        "x",
        json!({"id": 1}),
        json!({"forever": true}),
    )
    .await;
    put(&h, "gone", "y", json!(0), json!({"ttlSeconds": 5})).await;
    h.advance(6);
    // `gone` holds only an expired key: it is not listed.
    assert_eq!(
        read(&h, "/api/v1/kv").await,
        json!({"namespaces": [{"keys": 1, "ns": "orders"}, {"keys": 3, "ns": "stock"}]})
    );
    h.advance(5);
    let after = read(&h, "/api/v1/kv").await;
    assert_eq!(after["namespaces"][1], json!({"keys": 2, "ns": "stock"}));
    // Query parameters are not read.
    assert_eq!(read(&h, "/api/v1/kv?limit=0").await, after);
}

#[tokio::test]
async fn a_namespace_pages_its_live_rows_in_key_order_as_get_prefix_does() {
    let h = Harness::new().await;
    for (i, key) in ["k3", "k1", "k5", "k2", "k4"].iter().enumerate() {
        put(&h, "stock", key, json!({"n": i}), json!({"forever": true})).await;
    }
    put(&h, "stock", "other", json!("x"), json!({"ttlSeconds": 60})).await;
    put(&h, "stock", "k0", json!("lapses"), json!({"ttlSeconds": 5})).await;
    put(
        &h,
        "elsewhere",
        "k1",
        json!("not here"),
        json!({"forever": true}),
    )
    .await;
    h.advance(6);

    let first = read(&h, "/api/v1/kv/stock?limit=2&prefix=k").await;
    assert_eq!(first["truncated"], true, "{first}");
    assert_eq!(first["nextAfter"], "k2", "{first}");
    let keys = |b: &Value| -> Vec<String> {
        b["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys(&first), ["k1", "k2"], "the expired k0 is skipped");
    let row = &first["rows"][0];
    let mut fields: Vec<&str> = row
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.as_str())
        .collect();
    fields.sort();
    assert_eq!(
        fields,
        ["expiresAt", "key", "updatedAt", "value", "version"]
    );
    assert_eq!(row["value"], json!({"n": 1}));
    assert_eq!(row["expiresAt"], Value::Null);

    let rest = read(&h, "/api/v1/kv/stock?limit=2&prefix=k&after=k2").await;
    assert_eq!(keys(&rest), ["k3", "k4"]);
    let last = read(&h, "/api/v1/kv/stock?limit=2&prefix=k&after=k4").await;
    assert_eq!(keys(&last), ["k5"]);
    assert_eq!(last["truncated"], false);
    assert_eq!(last["nextAfter"], Value::Null);

    // The whole namespace with the defaults is what `getPrefix` answers.
    let all = read(&h, "/api/v1/kv/stock").await;
    assert_eq!(keys(&all), ["k1", "k2", "k3", "k4", "k5", "other"]);
    let op = kv(
        &h,
        json!([{"op": "getPrefix", "ns": "stock", "prefix": ""}]),
    )
    .await;
    assert_eq!(all["rows"], op[0]["rows"]);
    assert_eq!(
        read(&h, "/api/v1/kv/unknown").await,
        json!({"nextAfter": null, "rows": [], "truncated": false})
    );
    // One segment more is still the single key.
    let one = read(&h, "/api/v1/kv/stock/k1").await;
    assert_eq!(
        (one["found"].clone(), one["value"].clone()),
        (json!(true), json!({"n": 1}))
    );
}

#[tokio::test]
async fn timer_queues_list_their_pending_count_and_next_time() {
    let h = Harness::new().await;
    assert_eq!(read(&h, "/api/v1/timers").await, json!({"queues": []}));
    let t0 = h.clock.now_micros();
    let payload = b64(&json!({"remind": true}));
    let ops = json!([
        {"op": "schedule", "queue": "reminders", "timerKey": "a", "payload": payload, "delayMs": 60_000},
        {"op": "schedule", "queue": "reminders", "timerKey": "b", "payload": payload, "delayMs": 10_000},
        {"op": "schedule", "queue": "alerts", "timerKey": "x", "payload": payload, "delayMs": 5_000},
    ]);
    let (s, b) = h.post("/api/v1/timers", json!({ "operations": ops })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(
        read(&h, "/api/v1/timers").await,
        json!({"queues": [
            {"nextDeliverAt": format_iso(t0 + 5_000_000), "pending": 1, "queue": "alerts"},
            {"nextDeliverAt": format_iso(t0 + 10_000_000), "pending": 2, "queue": "reminders"},
        ]})
    );
    let (s, b) = h.delete("/api/v1/timers/reminders/b").await;
    assert_eq!(
        (s, b["status"].clone()),
        (StatusCode::OK, json!("cancelled"))
    );
    let (s, b) = h.delete("/api/v1/timers/alerts/x").await;
    assert_eq!(
        (s, b["status"].clone()),
        (StatusCode::OK, json!("cancelled"))
    );
    // A queue without pending timers leaves the listing.
    assert_eq!(
        read(&h, "/api/v1/timers").await,
        json!({"queues": [{"nextDeliverAt": format_iso(t0 + 60_000_000), "pending": 1, "queue": "reminders"}]})
    );
}

/// Pushes `o-1` to `orders/p` and pops it for `billing`: answers the message.
async fn leased(h: &Harness) -> Value {
    h.push_one("orders", "p", "o-1", json!({"order": 1})).await;
    let pop = h
        .pop("/api/v1/pop/queue/orders/partition/p?batch=1&consumerGroup=billing&subscriptionMode=all")
        .await
        .expect("a message");
    pop["messages"][0].clone()
}

/// A worker's whole step: the ack of `msg`, a receipt, a stock count, a reminder and
/// an audit position.
fn step(msg: &Value) -> Value {
    json!({
        "operations": [
            {"type": "ack", "transactionId": msg["transactionId"], "partitionId": msg["partitionId"],
             "leaseId": msg["leaseId"], "consumerGroup": "billing", "status": "completed"},
            {"type": "push", "items": [{"queue": "receipts", "partition": "r", "transactionId": "r-1", "payload": {"order": 1}}]},
        ],
        "kv": [{"op": "incr", "ns": "stock", "key": "sku-1", "delta": -1, "forever": true}],
        "timers": [{"op": "schedule", "queue": "reminders", "timerKey": "o-1", "payload": b64(&json!(1)), "delayMs": 60_000}],
        "positions": [{"queue": "orders", "partition": "p", "consumerGroup": "audit", "offset": 1}],
    })
}

#[tokio::test]
async fn the_log_shows_a_committed_transaction_with_its_parts_linked_to_its_messages() {
    let h = Harness::new().await;
    assert!(log(&h, 50).await.is_empty());
    let msg = leased(&h).await;
    let pid = msg["partitionId"].as_str().unwrap().to_string();
    let (s, answer) = txn_as(&h, UA, &step(&msg)).await;
    assert_eq!(
        (s, answer["success"].clone()),
        (StatusCode::OK, json!(true)),
        "{answer}"
    );
    let at = format_iso(h.clock.now_micros());

    let entries = log(&h, 50).await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let e = &entries[0];
    let receipt = &e["pushes"]["items"][0];
    let receipt_pid = receipt["partitionId"]
        .as_str()
        .expect("a committed push's partition id");
    assert_eq!(
        *e,
        json!({
            "acks": {"items": [{"consumerGroup": "billing", "dlq": false, "partition": "p",
                "partitionId": pid, "queue": "orders", "status": "completed", "transactionId": "o-1"}], "more": 0},
            "at": at,
            "id": answer["transactionId"],
            "kv": {"items": [{"key": "sku-1", "ns": "stock", "op": "incr"}], "more": 0},
            "outcome": {"status": "committed"},
            "positions": {"items": [{"consumerGroup": "audit", "offset": 1, "partition": "p", "queue": "orders"}], "more": 0},
            "pushes": {"items": [{"duplicate": false, "offset": 0, "partition": "r", "partitionId": receipt_pid,
                "queue": "receipts", "transactionId": "r-1"}], "more": 0},
            "seq": 1,
            "timers": {"items": [{"op": "schedule", "queue": "reminders", "timerKey": "o-1"}], "more": 0},
            "userAgent": UA,
        })
    );
    // Each ack and push links to its message.
    for (pid, txn, queue) in [
        (pid.as_str(), "o-1", "orders"),
        (receipt_pid, "r-1", "receipts"),
    ] {
        let m = read(&h, &format!("/api/v1/messages/{pid}/{txn}")).await;
        assert_eq!(m["queue"], queue, "{m}");
    }
}

#[tokio::test]
async fn the_log_shows_each_rollback_with_the_reason_its_answer_gave() {
    let h = Harness::new().await;
    let msg = leased(&h).await;
    let body = step(&msg);
    assert_eq!(h.txn_ok(body.clone()).await["success"], true);

    // The same step committed a second time: its lease went with the first commit.
    let again = h.txn_ok(body).await;
    assert_eq!(again["reason"], "rejected_ack", "{again}");
    assert!(
        again["error"]
            .as_str()
            .is_some_and(|e| e.contains("invalid or expired lease")),
        "{again}"
    );
    // A push whose transaction id is already in its partition's window.
    let dup = json!({"operations": [{"type": "push", "items": [{"queue": "receipts", "partition": "r", "transactionId": "r-1", "payload": {}}]}]});
    let duplicate = h.txn_ok(dup).await;
    assert_eq!(duplicate["reason"], "duplicate", "{duplicate}");
    // A required KV precondition that fails.
    let guarded = json!({
        "operations": [{"type": "push", "items": [{"queue": "receipts", "transactionId": "r-9", "payload": {}}]}],
        "kv": [{"op": "put", "ns": "stock", "key": "sku-2", "value": 1, "forever": true},
               {"op": "check", "ns": "stock", "key": "sku-1", "expect": 999, "required": true}],
    });
    let lost = h.txn_ok(guarded).await;
    assert_eq!(lost["reason"], "kv_precondition", "{lost}");

    let entries = log(&h, 50).await;
    let seqs: Vec<u64> = entries.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, [4, 3, 2, 1], "newest first");
    for (e, answer) in entries.iter().zip([&lost, &duplicate, &again]) {
        let o = &e["outcome"];
        assert_eq!(o["status"], "rolled_back", "{e}");
        assert_eq!(o["reason"], answer["reason"], "{e}");
        assert_eq!(o["error"], answer["error"], "{e}");
        assert_eq!(e["id"], answer["transactionId"], "{e}");
        let kv_lost = answer["reason"] == "kv_precondition";
        assert_eq!(
            o["failedIndex"],
            if kv_lost {
                answer["failedIndex"].clone()
            } else {
                Value::Null
            }
        );
        assert_eq!(
            o["kvReason"],
            if kv_lost {
                answer["kvReason"].clone()
            } else {
                Value::Null
            }
        );
        // Nothing was applied: the pushes have no place, the acks no verdict.
        for p in e["pushes"]["items"].as_array().unwrap() {
            assert_eq!(
                (p["partitionId"].clone(), p["offset"].clone()),
                (Value::Null, Value::Null),
                "{e}"
            );
        }
        for a in e["acks"]["items"].as_array().unwrap() {
            assert_eq!(a["dlq"], Value::Null, "{e}");
        }
        assert_eq!(e["userAgent"], Value::Null, "reqwest sends no user agent");
    }
    assert_eq!(entries[0]["outcome"]["failedIndex"], 2);
    assert_eq!(entries[0]["outcome"]["kvReason"], "version");
    assert_eq!(
        entries[0]["kv"]["items"][1],
        json!({"key": "sku-1", "ns": "stock", "op": "check"})
    );
    assert_eq!(entries[1]["pushes"]["items"][0]["transactionId"], "r-1");
    assert_eq!(entries[3]["outcome"]["status"], "committed");
    assert_eq!(log(&h, 1).await, entries[..1].to_vec());
}

#[tokio::test]
async fn a_refused_call_is_logged_with_its_status_and_code_and_lists_are_cut() {
    let h = Harness::new().await;
    let (s, refused) = txn_as(&h, UA, &json!({"operations": []})).await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{refused}");
    let (s, not_json) = h.post_raw("/api/v1/transaction", "{").await;
    assert_eq!(s, StatusCode::BAD_REQUEST, "{not_json}");
    let items: Vec<Value> = (0..20)
        .map(|i| json!({"queue": "wide", "transactionId": format!("w-{i}"), "payload": i}))
        .collect();
    let wide = h
        .txn_ok(json!({"operations": [{"type": "push", "items": items}]}))
        .await;
    assert_eq!(wide["success"], true);

    let entries = log(&h, 50).await;
    let pushes = &entries[0]["pushes"];
    assert_eq!(pushes["items"].as_array().unwrap().len(), 16);
    assert_eq!(pushes["more"], 4);
    assert_eq!(pushes["items"][15]["transactionId"], "w-15");
    assert_eq!(pushes["items"][15]["offset"], 15);
    for (e, answer) in entries[1..].iter().zip([&not_json, &refused]) {
        assert_eq!(
            e["outcome"],
            json!({"code": answer["code"], "error": answer["error"], "httpStatus": 400, "status": "refused"})
        );
        assert_eq!(e["id"], Value::Null);
        for part in ["acks", "pushes", "kv", "timers", "positions"] {
            assert_eq!(e[part], json!({"items": [], "more": 0}), "{e}");
        }
    }
    assert_eq!(entries[2]["userAgent"], UA);
}

#[tokio::test]
async fn bad_parameters_are_400_with_error_and_code() {
    let h = Harness::new().await;
    for (path, code) in [
        ("/api/v1/kv/stock?limit=0", "bad_request"),
        ("/api/v1/kv/stock?limit=1001", "bad_request"),
        ("/api/v1/kv/stock?limit=ten", "bad_request"),
        ("/api/v1/kv/stock?prefix=%zz", "bad_request"),
        ("/api/v1/kv/Stock", "kv_bad_request"),
        ("/api/v1/kv/st%00ck", "kv_bad_request"),
        ("/api/v1/transactions?limit=0", "bad_request"),
        ("/api/v1/transactions?limit=257", "bad_request"),
        ("/api/v1/transactions?limit=-1", "bad_request"),
        ("/api/v1/transactions?limit=%FF", "bad_request"),
        ("/api/v1/timer-log?limit=0", "bad_request"),
        ("/api/v1/timer-log?limit=257", "bad_request"),
    ] {
        let (s, b) = h.get(path).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path}: {b}");
        assert_eq!(b["code"], code, "{path}: {b}");
        assert!(
            b["error"].as_str().is_some_and(|e| !e.is_empty()),
            "{path}: {b}"
        );
    }
    let long = format!("/api/v1/kv/{}", "n".repeat(65));
    let (s, b) = h.get(&long).await;
    assert_eq!(
        (s, b["reason"].clone()),
        (StatusCode::BAD_REQUEST, json!("kv_bad_ns")),
        "{b}"
    );
    // The bounds themselves are fine.
    read(&h, "/api/v1/kv/stock?limit=1000").await;
    read(&h, "/api/v1/transactions?limit=256").await;
}

#[tokio::test]
async fn another_tenant_sees_none_of_it() {
    let clock = ManualClock::new();
    let auth = Auth::new()
        .token("a-ro", Role::ReadOnly, "acme", None)
        .token("a-rw", Role::ReadWrite, "acme", None)
        .token("g-rw", Role::ReadWrite, "globex", None);
    let broker = MockBroker::builder()
        .in_memory()
        .clock(clock.clone())
        .auth(auth)
        .start()
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let call = async |token: &str, method: reqwest::Method, path: &str, body: Option<Value>| {
        let mut req = http
            .request(method, format!("{}{path}", broker.url()))
            .bearer_auth(token);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let res = req.send().await.unwrap();
        (res.status(), res.json::<Value>().await.unwrap())
    };
    let post = reqwest::Method::POST;
    let get = reqwest::Method::GET;
    let push = json!({"items": [{"queue": "orders", "partition": "p", "transactionId": "o-1", "payload": {}}]});
    let (s, _) = call("a-rw", post.clone(), "/api/v1/push", Some(push)).await;
    assert_eq!(s, StatusCode::CREATED);
    let (_, pop) = call(
        "a-rw",
        get.clone(),
        "/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all",
        None,
    )
    .await;
    let msg = pop["messages"][0].clone();
    let pid = msg["partitionId"].as_str().unwrap().to_string();
    let (s, answer) = call(
        "a-rw",
        post.clone(),
        "/api/v1/transaction",
        Some(step(&msg)),
    )
    .await;
    assert_eq!(
        (s, answer["success"].clone()),
        (StatusCode::OK, json!(true)),
        "{answer}"
    );

    // acme reads its own, with its lowest role.
    let (_, ns) = call("a-ro", get.clone(), "/api/v1/kv", None).await;
    assert_eq!(ns, json!({"namespaces": [{"keys": 1, "ns": "stock"}]}));
    let (_, rows) = call("a-ro", get.clone(), "/api/v1/kv/stock", None).await;
    assert_eq!(rows["rows"][0]["key"], "sku-1");
    let (_, timers) = call("a-ro", get.clone(), "/api/v1/timers", None).await;
    assert_eq!(timers["queues"][0]["queue"], "reminders");
    let (_, acme_log) = call("a-ro", get.clone(), "/api/v1/transactions", None).await;
    assert_eq!(acme_log["transactions"].as_array().unwrap().len(), 1);

    // globex sees nothing of it, and its own call naming acme's partition id resolves
    // to no queue of acme's.
    for (path, empty) in [
        ("/api/v1/kv", json!({"namespaces": []})),
        (
            "/api/v1/kv/stock",
            json!({"nextAfter": null, "rows": [], "truncated": false}),
        ),
        ("/api/v1/timers", json!({"queues": []})),
        ("/api/v1/transactions", json!({"transactions": []})),
    ] {
        let (s, b) = call("g-rw", get.clone(), path, None).await;
        assert_eq!((s, b), (StatusCode::OK, empty), "{path}");
    }
    let (_, out) = call(
        "g-rw",
        post.clone(),
        "/api/v1/transaction",
        Some(step(&msg)),
    )
    .await;
    assert_eq!(out["reason"], "rejected_ack", "{out}");
    let (_, g_log) = call("g-rw", get.clone(), "/api/v1/transactions", None).await;
    let ack = &g_log["transactions"][0]["acks"]["items"][0];
    assert_eq!(ack["partitionId"], pid.as_str());
    assert_eq!(
        (ack["queue"].clone(), ack["partition"].clone()),
        (Value::Null, Value::Null),
        "{ack}"
    );
    assert_eq!(
        g_log["transactions"][0]["seq"], 1,
        "sequence numbers are per tenant"
    );
    let (_, after) = call("a-ro", get.clone(), "/api/v1/transactions", None).await;
    assert_eq!(after, acme_log, "globex's call is not in acme's log");
    // A call the gate refuses (too low a role) never reaches the log.
    let (s, _) = call(
        "a-ro",
        post.clone(),
        "/api/v1/transaction",
        Some(step(&msg)),
    )
    .await;
    assert_eq!(s, StatusCode::FORBIDDEN);
    let (_, after) = call("a-ro", get, "/api/v1/transactions", None).await;
    assert_eq!(after, acme_log);
    broker.shutdown().await;
}
