//! Bounds on what clients can hold: a connection limit, a deadline for a request's head
//! (slow clients), and a shutdown that answers 503 `retry` instead of dropping callers.

mod common;

use std::time::{Duration, Instant};

use common::Harness;
use queen_mock_broker::{ManualClock, MockBroker};
use reqwest::StatusCode;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Sends a raw `GET /health` on `conn` and reads the status line, or `None` if no
/// answer came within `wait`.
async fn health_on(conn: &mut TcpStream, wait: Duration) -> Option<String> {
    conn.write_all(b"GET /health HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(wait, conn.read(&mut buf))
        .await
        .ok()?
        .ok()?;
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    text.lines().next().map(str::to_string)
}

#[tokio::test]
async fn connections_past_the_limit_wait_until_one_closes() {
    let broker = MockBroker::builder()
        .max_connections(2)
        .start()
        .await
        .unwrap();
    let addr = broker.addr();
    let mut a = TcpStream::connect(addr).await.unwrap();
    let mut b = TcpStream::connect(addr).await.unwrap();
    assert!(
        health_on(&mut a, Duration::from_secs(5))
            .await
            .is_some_and(|l| l.contains("200"))
    );
    assert!(
        health_on(&mut b, Duration::from_secs(5))
            .await
            .is_some_and(|l| l.contains("200"))
    );

    // The third connection is accepted by the kernel but not served.
    let mut c = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        health_on(&mut c, Duration::from_millis(500)).await,
        None,
        "a third connection is not served while two are open"
    );

    // Closing one lets it in; the request it already sent is answered.
    drop(a);
    let mut buf = vec![0u8; 1024];
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .expect("served once a slot frees")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    broker.shutdown().await;
}

#[tokio::test]
async fn a_client_too_slow_to_send_its_request_head_is_disconnected() {
    let broker = MockBroker::builder()
        .header_read_timeout(Duration::from_millis(300))
        .start()
        .await
        .unwrap();
    let mut slow = TcpStream::connect(broker.addr()).await.unwrap();
    slow.write_all(b"POST /api/v1/push HTTP/1.1\r\nhost: x\r\ncontent-")
        .await
        .unwrap();
    let started = Instant::now();
    let mut buf = vec![0u8; 1024];
    let read = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf))
        .await
        .expect("the broker ends the connection well before 10 s");
    // Closed (0 bytes or a reset), possibly after a 408: either way the slot is free.
    match read {
        Ok(0) | Err(_) => {}
        Ok(n) => assert!(
            String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 408"),
            "{}",
            String::from_utf8_lossy(&buf[..n])
        ),
    }
    assert!(started.elapsed() >= Duration::from_millis(200));

    // A client that sends in time is served.
    let h = Harness::with(broker, ManualClock::new());
    let (s, _) = h.get("/health").await;
    assert_eq!(s, StatusCode::OK);
}

#[tokio::test]
async fn a_declared_body_over_the_limit_is_413_at_once_and_writes_nothing() {
    // The default read deadline (60 s): the answer must not wait for it.
    let broker = MockBroker::start_in_memory().await.unwrap();
    let started = Instant::now();
    let mut big = TcpStream::connect(broker.addr()).await.unwrap();
    big.write_all(
        b"POST /api/v1/push HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n{\"items\": [",
    )
    .await
    .unwrap();
    let mut text = String::new();
    let mut buf = vec![0u8; 2048];
    // Read until the connection closes: the answer, then the close.
    loop {
        let n = tokio::time::timeout(Duration::from_secs(10), big.read(&mut buf))
            .await
            .expect("answered well before the 60 s read deadline")
            .unwrap_or(0);
        if n == 0 {
            break;
        }
        text.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    assert!(text.starts_with("HTTP/1.1 413"), "{text}");
    assert!(text.contains("payload_too_large"), "{text}");
    assert!(text.contains("100000000"), "says what was declared: {text}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // A body at the limit's edge is still read (and refused for what it is, not its size).
    let (s, r) = {
        let res = reqwest::Client::new()
            .post(format!("{}/api/v1/push", broker.url()))
            .header("content-type", "application/json")
            .body(vec![b' '; 1024])
            .send()
            .await
            .unwrap();
        (res.status(), res.text().await.unwrap())
    };
    assert_eq!(s, StatusCode::BAD_REQUEST, "{r}");
    assert_eq!(broker.stats().commits, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_body_that_trickles_in_past_the_deadline_is_408_and_writes_nothing() {
    let broker = MockBroker::builder()
        .header_read_timeout(Duration::from_millis(400))
        .start()
        .await
        .unwrap();
    let mut slow = TcpStream::connect(broker.addr()).await.unwrap();
    slow.write_all(
        b"POST /api/v1/push HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n{\"items\": [",
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 2048];
    let n = tokio::time::timeout(Duration::from_secs(10), slow.read(&mut buf))
        .await
        .expect("answered well before 10 s")
        .unwrap();
    let text = String::from_utf8_lossy(&buf[..n]).to_string();
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("request_timeout"), "{text}");
    assert_eq!(broker.stats().commits, 0);
    broker.shutdown().await;
}

#[tokio::test]
async fn during_shutdown_new_requests_get_503_retry_and_work_in_flight_finishes() {
    let broker = MockBroker::builder()
        .drain_period(Duration::from_millis(800))
        .start()
        .await
        .unwrap();
    let url = broker.url();
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{url}/api/v1/push"))
        .json(&json!({"items": [{"queue": "q", "transactionId": "before", "payload": 1}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), StatusCode::CREATED);

    // A long-poll in flight when the shutdown starts is answered (empty), not cut.
    let waiting = tokio::spawn({
        let (http, url) = (http.clone(), url.clone());
        async move {
            http.get(format!(
                "{url}/api/v1/pop/queue/empty?consumerGroup=g&wait=true&timeout=60000"
            ))
            .send()
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopping = tokio::spawn(broker.shutdown());
    tokio::time::sleep(Duration::from_millis(150)).await;

    let pop = waiting.await.unwrap().expect("the long-poll is answered");
    assert!(pop.status().is_success(), "{}", pop.status());

    for (method, path) in [("POST", "/api/v1/push"), ("GET", "/health")] {
        let req = http.request(method.parse().unwrap(), format!("{url}{path}"));
        let req = if method == "POST" {
            req.json(&json!({"items": [{"queue": "q", "transactionId": "during", "payload": 2}]}))
        } else {
            req
        };
        let res = req.send().await.expect("answered during the drain");
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE, "{path}");
        assert_eq!(
            res.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap()),
            Some("1")
        );
        let body: serde_json::Value = res.json().await.unwrap();
        assert_eq!(body["code"], "retry", "{body}");
    }
    stopping.await.unwrap();

    // After the drain the port is closed.
    let closed = http.get(format!("{url}/health")).send().await;
    assert!(closed.is_err(), "nothing listens after shutdown");
}
