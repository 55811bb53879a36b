//! Message traces: recorded against a popped message, read back by message and by
//! name, durable, refused when malformed or about an unknown message (issue 16).

mod common;

use common::Harness;
use queen_mock_broker::MockBroker;
use serde_json::{Value, json};

/// Pushes one message to `q` and pops it for group `g`.
async fn popped(h: &Harness) -> Value {
    h.push_one("q", "p", "t1", json!({"order": 7})).await;
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all")
        .await
        .unwrap();
    p["messages"][0].clone()
}

fn trace(m: &Value, names: Value, event: &str, data: Value) -> Value {
    json!({
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "consumerGroup": m["consumerGroup"],
        "traceNames": names,
        "eventType": event,
        "data": data,
    })
}

#[tokio::test]
async fn a_trace_is_read_back_by_its_message_and_by_its_names() {
    let h = Harness::new().await;
    let m = popped(&h).await;
    let (s, r) = h
        .post(
            "/api/v1/traces",
            trace(
                &m,
                json!(["checkout", "order-7"]),
                "step",
                json!({"step": "paid"}),
            ),
        )
        .await;
    assert_eq!(s, 201, "{r}");
    assert_eq!(r["success"], true);
    assert!(r["traceId"].is_string());
    h.advance(1);
    // One name as a bare string is taken too.
    let (s, _) = h
        .post(
            "/api/v1/traces",
            trace(&m, json!("checkout"), "info", json!({"step": "shipped"})),
        )
        .await;
    assert_eq!(s, 201);

    let path = format!(
        "/api/v1/traces/{}/{}",
        m["partitionId"].as_str().unwrap(),
        m["transactionId"].as_str().unwrap()
    );
    let (s, by_msg) = h.get(&path).await;
    assert_eq!(s, 200, "{by_msg}");
    let traces = by_msg["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 2, "{by_msg}");
    assert_eq!(traces[0]["data"]["step"], "paid", "oldest first");
    assert_eq!(traces[0]["event_type"], "step");
    assert_eq!(traces[0]["consumer_group"], "g");
    assert_eq!(traces[0]["trace_names"], json!(["checkout", "order-7"]));

    let (_, names) = h.get("/api/v1/traces/names").await;
    assert_eq!(names["total"], 2, "{names}");
    let rows = names["trace_names"].as_array().unwrap();
    assert_eq!(
        rows[0]["trace_name"], "checkout",
        "most recently seen first: {names}"
    );
    assert_eq!(rows[0]["trace_count"], 2);
    assert_eq!(rows[0]["message_count"], 1);
    assert!(rows[0]["last_seen"].is_string());
    assert_eq!(names["pagination"], json!({"limit": 50, "offset": 0}));

    let (_, by_name) = h
        .get("/api/v1/traces/by-name/checkout?limit=1&offset=1")
        .await;
    assert_eq!(by_name["total"], 2, "{by_name}");
    let row = &by_name["traces"][0];
    assert_eq!(
        row["data"]["step"], "shipped",
        "the second page of one: {by_name}"
    );
    assert_eq!(row["transaction_id"], "t1");
    assert_eq!(row["partition_id"], m["partitionId"]);
    assert_eq!(row["queue_name"], "q");
    assert_eq!(row["partition_name"], "p");
    assert_eq!(row["message_payload"], json!({"order": 7}));
    let (_, none) = h.get("/api/v1/traces/by-name/nobody").await;
    assert_eq!(
        (none["total"].clone(), none["traces"].clone()),
        (json!(0), json!([]))
    );
}

#[tokio::test]
async fn a_trace_of_an_unknown_message_is_404_and_writes_nothing() {
    let h = Harness::new().await;
    let m = popped(&h).await;
    for (pid, txn) in [
        (m["partitionId"].clone(), json!("nope")),
        (json!("999"), m["transactionId"].clone()),
        (json!("not-a-partition"), json!("t1")),
    ] {
        let body =
            json!({"transactionId": txn, "partitionId": pid, "traceNames": ["x"], "data": {}});
        let (s, b) = h.post("/api/v1/traces", body).await;
        assert_eq!(
            (s.as_u16(), b["code"].clone()),
            (404, json!("not_found")),
            "{b}"
        );
    }
    let (_, names) = h.get("/api/v1/traces/names").await;
    assert_eq!(names["total"], 0, "{names}");
}

#[tokio::test]
async fn a_malformed_trace_is_400_and_writes_nothing() {
    let h = Harness::new().await;
    let m = popped(&h).await;
    let ok = trace(&m, json!(["n"]), "info", json!({}));
    let without = |k: &str| {
        let mut b = ok.clone();
        b.as_object_mut().unwrap().remove(k);
        b
    };
    let with = |k: &str, v: Value| {
        let mut b = ok.clone();
        b[k] = v;
        b
    };
    for body in [
        without("data"),
        without("transactionId"),
        without("partitionId"),
        with("traceNames", json!(7)),
        with("traceNames", json!([""])),
        with("traceNames", json!(["x".repeat(300)])),
        with("eventType", json!("")),
        with("partitionId", json!(5)),
    ] {
        let (s, b) = h.post("/api/v1/traces", body.clone()).await;
        assert_eq!(s, 400, "{body} -> {b}");
        assert_eq!(b["code"], "bad_request", "{b}");
    }
    let (s, _) = h.post_raw("/api/v1/traces", "[1]").await;
    assert_eq!(s, 400);
    let (s, _) = h.get("/api/v1/traces/names?limit=-1").await;
    assert_eq!(s, 400);
    let (_, names) = h.get("/api/v1/traces/names").await;
    assert_eq!(names["total"], 0, "{names}");
    // A null `data` is a value, not an absence.
    let (s, b) = h.post("/api/v1/traces", with("data", Value::Null)).await;
    assert_eq!(s, 201, "{b}");
}

#[tokio::test]
async fn traces_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.redb");
    let b = MockBroker::builder()
        .data_file(&file)
        .start()
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let url = b.url().to_string();
    http.post(format!("{url}/api/v1/push"))
        .json(&json!({"items": [{"queue": "q", "transactionId": "t1", "payload": 1}]}))
        .send()
        .await
        .unwrap();
    let p: Value = http
        .get(format!("{url}/api/v1/pop/queue/q"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let m = &p["messages"][0];
    let res = http
        .post(format!("{url}/api/v1/traces"))
        .json(&trace(m, json!(["kept"]), "info", json!({"n": 1})))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    b.shutdown().await;
    let b = MockBroker::builder()
        .data_file(&file)
        .start()
        .await
        .unwrap();
    let names: Value = http
        .get(format!("{}/api/v1/traces/by-name/kept", b.url()))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(names["total"], 1, "{names}");
    assert_eq!(names["traces"][0]["data"], json!({"n": 1}));
    b.shutdown().await;
}
