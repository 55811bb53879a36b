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
    conn.write_all(b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n")
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

/// Starts a long-poll on `conn` (a request busy in its handler for `ms`).
async fn long_poll_on(conn: &mut TcpStream, ms: u64) {
    let req = format!(
        "GET /api/v1/pop/queue/empty?wait=true&timeout={ms} HTTP/1.1\r\nhost: localhost\r\n\r\n"
    );
    conn.write_all(req.as_bytes()).await.unwrap();
}

#[tokio::test]
async fn at_the_limit_the_longest_idle_connection_makes_room_and_a_busy_one_never() {
    let broker = MockBroker::builder()
        .max_connections(2)
        .start()
        .await
        .unwrap();
    let addr = broker.addr();
    // Two connections busy in a handler: a third is accepted by the kernel but not
    // served, as neither may be cut.
    let (mut a, mut b) = (
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    );
    long_poll_on(&mut a, 1_500).await;
    long_poll_on(&mut b, 60_000).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let mut c = TcpStream::connect(addr).await.unwrap();
    assert_eq!(
        health_on(&mut c, Duration::from_millis(500)).await,
        None,
        "a third connection is not served while two are busy"
    );
    // Once a's long-poll is answered, a is idle: it is closed for c, whose request is
    // answered; b, still busy, is not touched.
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), c.read(&mut buf))
        .await
        .expect("served once a connection is idle")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
    let n = tokio::time::timeout(Duration::from_secs(5), a.read(&mut buf))
        .await
        .expect("a answered")
        .unwrap();
    assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 204"));
    let closed = tokio::time::timeout(Duration::from_secs(5), a.read(&mut buf)).await;
    assert!(
        matches!(closed, Ok(Ok(0)) | Ok(Err(_))),
        "a was closed to make room"
    );
    assert!(
        tokio::time::timeout(Duration::from_millis(200), b.read(&mut buf))
            .await
            .is_err(),
        "b's long-poll goes on"
    );
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
    slow.write_all(b"POST /api/v1/push HTTP/1.1\r\nhost: localhost\r\ncontent-")
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
        b"POST /api/v1/push HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 100000000\r\n\r\n{\"items\": [",
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
        b"POST /api/v1/push HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 60\r\n\r\n{\"items\": [",
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

/// Idle keep-alive connections and slow clients (a head trickled, a body stalled) that
/// hold every slot do not shut a working client out: at the limit, the connection idle
/// the longest is closed for the new one. `QUEEN_FLOOD_CONNECTIONS` and
/// `QUEEN_FLOOD_LIMIT` set the flood's size and the broker's limit (default 600
/// against 200); the client's slowest answer and this process's RSS are printed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_idle_and_slow_connections_does_not_shut_a_working_client_out() {
    let var = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (flood, limit) = (
        var("QUEEN_FLOOD_CONNECTIONS", 600),
        var("QUEEN_FLOOD_LIMIT", 200),
    );
    let rss_mib = || {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                let line = s.lines().find(|l| l.starts_with("VmRSS:"))?.to_string();
                line.split_whitespace().nth(1)?.parse::<u64>().ok()
            })
            .map_or(0.0, |kb| kb as f64 / 1024.0)
    };
    let rss_before = rss_mib();
    let broker = MockBroker::builder()
        .max_connections(limit)
        .start()
        .await
        .unwrap();
    let addr = broker.addr();
    let mut held = Vec::new();
    for i in 0..flood {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            continue;
        };
        // A third idle after one request (keep-alive), a third with half a head, a
        // third with a head and a stalled body; none finishes.
        let bytes: &[u8] = match i % 3 {
            0 => b"GET /health HTTP/1.1\r\nhost: localhost\r\n\r\n",
            1 => b"GET /health HTTP/1.1\r\nhost: localhost\r\nx-slow: ",
            _ => b"POST /api/v1/push HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"items\": [",
        };
        let _ = s.write_all(bytes).await;
        held.push(s);
    }
    // A working client on fresh connections (no pool), and one on a kept-alive one.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let kept = reqwest::Client::new();
    let mut slowest = Duration::ZERO;
    for i in 0..40 {
        let http = if i % 2 == 0 { &fresh } else { &kept };
        let started = Instant::now();
        let res = tokio::time::timeout(
            Duration::from_secs(10),
            http.post(format!("{}/api/v1/push", broker.url()))
                .json(&json!({"items": [{"queue": "work", "transactionId": format!("w{i}"), "payload": i}]}))
                .send(),
        )
        .await
        .unwrap_or_else(|_| panic!("request {i} waited 10 s behind the flood"))
        .unwrap();
        assert_eq!(res.status(), StatusCode::CREATED);
        slowest = slowest.max(started.elapsed());
    }
    eprintln!(
        "flood: {} connections held against a limit of {limit}; the working client's slowest answer {slowest:?}; this process's RSS {rss_before:.1} MiB before the flood, {:.1} MiB during it",
        held.len(),
        rss_mib()
    );
    let stored = broker.inspect().messages("work", "Default").unwrap().len();
    assert_eq!(stored, 40);
    drop(held);
    broker.shutdown().await;
}
