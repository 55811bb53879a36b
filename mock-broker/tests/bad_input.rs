//! Bad input: a 4xx with `{"error", "code"}`, never a 5xx, and nothing written.

mod common;

use common::Harness;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Asserts the refusal's status and code, and that no commit happened.
async fn refused(h: &Harness, before: u64, res: (StatusCode, Value), status: u16, code: &str) {
    let (s, body) = res;
    assert_eq!(s.as_u16(), status, "{body}");
    assert_eq!(body["code"], code, "{body}");
    assert!(
        body["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{body}"
    );
    assert_eq!(
        h.broker.stats().commits,
        before,
        "a refused request wrote nothing"
    );
}

#[tokio::test]
async fn malformed_push_bodies_are_400_and_store_nothing() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for raw in [
        "",
        "{",
        "not json",
        "[]",
        r#"{"items": {}}"#,
        r#"{"items": [{"queue": 5, "payload": 1}]}"#,
        r#"{"items": [{"payload": 1}]}"#,
        r#"{"items": [{"queue": "q"}]}"#,
        r#"{"items": [{"queue": "q", "payload": 1, "transactionId": 7}]}"#,
        r#"{"items": [{"queue": "q", "payload": 1}]} trailing"#,
        r#"{"items": [{"queue": "", "payload": 1}]}"#,
    ] {
        let res = h.post_raw("/api/v1/push", raw).await;
        refused(&h, before, res, 400, "bad_request").await;
    }
    // A valid item next to an invalid one: the whole call stores nothing.
    let res = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "payload": 1}, {"queue": "q"}]}),
        )
        .await;
    refused(&h, before, res, 400, "bad_request").await;
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
}

#[tokio::test]
async fn names_over_the_key_budget_are_413_name_too_long() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let long = "x".repeat(1025);
    let res = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "ok", "payload": 1}, {"queue": long, "payload": 1}]}),
        )
        .await;
    refused(&h, before, res, 413, "name_too_long").await;
    let res = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "partition": long, "payload": 1}]}),
        )
        .await;
    refused(&h, before, res, 413, "name_too_long").await;
    let res = h.post("/api/v1/configure", json!({"queue": long})).await;
    refused(&h, before, res, 413, "name_too_long").await;
    // 1,024 bytes is within the budget.
    let (s, _) = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "x".repeat(1024), "payload": 1}]}),
        )
        .await;
    assert_eq!(s, 201);
}

#[tokio::test]
async fn a_transaction_id_over_65535_bytes_is_400() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let res = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "payload": 1, "transactionId": "t".repeat(65_536)}]}),
        )
        .await;
    refused(&h, before, res, 400, "bad_request").await;
    let (s, _) = h
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": "q", "payload": 1, "transactionId": "t".repeat(65_535)}]}),
        )
        .await;
    assert_eq!(s, 201);
}

#[tokio::test]
async fn a_body_over_64_mib_is_413_payload_too_large() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let mut body = String::from(r#"{"items": [{"queue": "q", "payload": ""#);
    body.push_str(&"a".repeat(64 * 1024 * 1024));
    body.push_str(r#""}]}"#);
    let res = h.post_raw("/api/v1/push", body).await;
    refused(&h, before, res, 413, "payload_too_large").await;
}

#[tokio::test]
async fn unknown_routes_and_methods_answer_json() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let res = h.get("/api/v1/nothing-here").await;
    refused(&h, before, res, 404, "no_such_route").await;
    let res = h.get("/api/v1/push").await;
    refused(&h, before, res, 405, "method_not_allowed").await;
}

#[tokio::test]
async fn bad_query_parameters_are_400() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    let before = h.broker.stats().commits;
    for q in [
        "batch=0",
        "batch=abc",
        "wait=maybe",
        "timeout=-1",
        "subscriptionMode=sometimes",
        "subscriptionFrom=yesterday",
        "autoAck=2",
        "leaseSeconds=0",
        "partitions=0",
    ] {
        let res = h.get(&format!("/api/v1/pop/queue/q?{q}")).await;
        refused(&h, before, res, 400, "bad_request").await;
    }
    for q in ["limit=0", "limit=x", "offset=-1"] {
        let res = h.get(&format!("/api/v1/dlq?{q}")).await;
        refused(&h, before, res, 400, "bad_request").await;
    }
    // The message is still there for a proper pop.
    assert!(h.pop("/api/v1/pop/queue/q").await.is_some());
}

#[tokio::test]
async fn malformed_acks_extends_and_seeks_are_400() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for (path, raw) in [
        ("/api/v1/ack", "{}"),
        ("/api/v1/ack", r#"{"transactionId": "t"}"#),
        ("/api/v1/ack", r#"{"transactionId": 1, "partitionId": "1"}"#),
        (
            "/api/v1/ack",
            r#"{"transactionId": "t", "partitionId": "1", "status": 3}"#,
        ),
        ("/api/v1/ack/batch", r#"{"acknowledgments": {}}"#),
        ("/api/v1/ack/batch", r#"{}"#),
        ("/api/v1/lease/x/extend", r#"{"seconds": "ten"}"#),
        ("/api/v1/lease/x/extend", r#"{"seconds": 0}"#),
        ("/api/v1/lease/x/extend", r#"[1]"#),
        (
            "/api/v1/consumer-groups/g/queues/q/seek",
            r#"{"toEnd": "yes"}"#,
        ),
        ("/api/v1/configure", r#"{"options": {}}"#),
        ("/api/v1/configure", r#"{"queue": "q", "options": []}"#),
    ] {
        let res = h.post_raw(path, raw).await;
        refused(&h, before, res, 400, "bad_request").await;
    }
}

#[tokio::test]
async fn a_body_that_says_it_is_not_json_is_415_and_stores_nothing() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let body = r#"{"items": [{"queue": "q", "payload": 1}]}"#;
    for ct in [
        "text/plain",
        "application/x-www-form-urlencoded",
        "application/xml",
    ] {
        let res = h
            .http
            .post(h.url("/api/v1/push"))
            .header("content-type", ct)
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 415, "{ct}");
        let b: Value = res.json().await.unwrap();
        assert_eq!(b["code"], "unsupported_media_type", "{b}");
        assert!(b["error"].as_str().unwrap().contains(ct), "{b}");
    }
    // No type at all: what a web page's `no-cors` `fetch` of a `Blob` sends, with no
    // preflight. Refused too, declared length or chunked.
    let res = h
        .http
        .post(h.url("/api/v1/push"))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 415);
    let b: Value = res.json().await.unwrap();
    assert_eq!(b["code"], "unsupported_media_type", "{b}");
    let chunked = format!(
        "POST /api/v1/push HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\
         Connection: close\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
        body.len()
    );
    let (status, b) = raw_exchange(&h, chunked.as_bytes()).await;
    assert_eq!(
        (status, &b["code"]),
        (415, &json!("unsupported_media_type"))
    );
    assert_eq!(h.broker.stats().commits, before, "nothing written");
    // JSON with parameters, a +json type: taken.
    for ct in [
        Some("application/json; charset=utf-8"),
        Some("application/vnd.queen+json"),
    ] {
        let mut req = h.http.post(h.url("/api/v1/push")).body(body);
        if let Some(ct) = ct {
            req = req.header("content-type", ct);
        }
        assert_eq!(req.send().await.unwrap().status().as_u16(), 201, "{ct:?}");
    }
    // An empty body under any type or none (a lease extension; a POST route that
    // takes no body) is not refused for its type: a declared length of 0, no body at
    // all, or a chunked body of nothing but whitespace.
    let res = h
        .http
        .post(h.url("/api/v1/lease/nope/extend"))
        .header("content-type", "text/plain")
        .header("content-length", "0")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let res = h
        .http
        .post(h.url("/api/v1/lease/nope/extend"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let blank = "POST /api/v1/lease/nope/extend HTTP/1.1\r\nHost: localhost\r\n\
                 Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\n \n\r\n0\r\n\r\n";
    let (status, b) = raw_exchange(&h, blank.as_bytes()).await;
    assert_eq!(status, 200, "{b}");
}

/// Sends raw bytes on a new connection and reads the answer until the broker closes it.
async fn raw_exchange(h: &Harness, request: &[u8]) -> (u16, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = h.broker.url().trim_start_matches("http://").to_string();
    let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
    // The broker may answer and close before it has read all of an oversized head.
    let _ = conn.write_all(request).await;
    let mut answer = Vec::new();
    let _ = conn.read_to_end(&mut answer).await;
    let text = String::from_utf8(answer).unwrap();
    let status = text[9..12].parse().unwrap();
    let (head, body) = text.split_once("\r\n\r\n").unwrap();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/json"),
        "{head}"
    );
    (status, serde_json::from_str(body).unwrap())
}

#[tokio::test]
async fn requests_hyper_cannot_parse_answer_json_too() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let (status, body) = raw_exchange(&h, b"NOT HTTP AT ALL\r\n\r\n").await;
    assert_eq!((status, body["code"].as_str()), (400, Some("bad_request")));
    let long_uri = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(70_000));
    let (status, body) = raw_exchange(&h, long_uri.as_bytes()).await;
    assert_eq!((status, body["code"].as_str()), (414, Some("uri_too_long")));
    let big_head = format!(
        "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n",
        "a".repeat(500_000)
    );
    let (status, body) = raw_exchange(&h, big_head.as_bytes()).await;
    assert_eq!(
        (status, body["code"].as_str()),
        (431, Some("headers_too_large"))
    );
    assert!(body["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(h.broker.stats().commits, before, "nothing written");
    // The broker goes on serving well-formed requests.
    assert_eq!(h.get("/health").await.0, 200);
}
