//! The client's HTTP exchange: the headers every request carries, what each way of
//! failing below HTTP is reported as, and which of them a retry may follow.
//!
//! Real time and real sockets: the failures are a closed port, a server that stops
//! midway through its answer, one that never answers and one that speaks no TLS.

use std::time::{Duration, Instant};

use queen_sdk::{Client, Error, PushItem, RetryPolicy, TransportErrorKind, Ttl};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A server that reads each request's head (unless `at_once`) and answers `answer`,
/// then closes the connection; answers its URL.
async fn raw_server(answer: &'static [u8], at_once: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 4096];
                while !at_once && !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = socket.write_all(answer).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    url
}

fn one_attempt(url: &str) -> Client {
    Client::builder()
        .url(url)
        .retry(RetryPolicy::none())
        .build()
        .unwrap()
}

fn transport_kind(err: &Error) -> Option<TransportErrorKind> {
    match err {
        Error::Transport(e) => Some(e.kind()),
        Error::OutcomeUnknown { cause } => transport_kind(cause),
        Error::Exhausted { last, .. } => transport_kind(last),
        _ => None,
    }
}

#[tokio::test]
async fn every_request_carries_the_user_agent_and_a_post_its_token_and_json_type() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/push"))
        .respond_with(ResponseTemplate::new(201).set_body_json(json!([
            {"index": 0, "message_id": "0199a7c2-61f1-7d55-b0e2-7a1c9e4f6d20",
             "transaction_id": "t-1", "queueName": "orders", "status": "queued", "offset": 0}
        ])))
        .mount(&server)
        .await;
    let client = Client::builder()
        .url(server.uri())
        .token("s3cret")
        .user_agent("billing-worker/2.1")
        .build()
        .unwrap();
    client
        .push(vec![
            PushItem::new("orders", &json!({"id": 1})).transaction_id("t-1"),
        ])
        .await
        .unwrap();
    let requests = server.received_requests().await.unwrap();
    assert_eq!(requests.len(), 1);
    let header = |name: &str| {
        requests[0]
            .headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string)
    };
    assert_eq!(header("user-agent").as_deref(), Some("billing-worker/2.1"));
    assert_eq!(header("authorization").as_deref(), Some("Bearer s3cret"));
    assert_eq!(header("content-type").as_deref(), Some("application/json"));
    let host = server.uri().trim_start_matches("http://").to_string();
    assert_eq!(header("host"), Some(host));
    assert_eq!(requests[0].url.path(), "/api/v1/push");
    let sent: serde_json::Value = requests[0].body_json().unwrap();
    assert_eq!(sent["items"][0]["queue"], "orders");
}

#[tokio::test]
async fn a_closed_port_is_a_connect_error_that_says_why() {
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let err = one_attempt(&closed)
        .pop::<serde_json::Value>("orders")
        .send()
        .await
        .unwrap_err();
    let Error::Transport(e) = &err else {
        panic!("{err:?}")
    };
    assert_eq!(e.kind(), TransportErrorKind::Connect);
    assert!(e.is_connect() && !e.is_timeout());
    let text = err.to_string();
    assert!(text.contains("could not connect"), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
    assert!(std::error::Error::source(e).is_some(), "the cause is kept");
}

#[tokio::test]
async fn an_answer_cut_off_midway_is_a_broken_connection_and_its_outcome_unknown() {
    // The head promises 100 bytes; 10 come, then the connection closes.
    let url =
        raw_server(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"success\"", false)
            .await;
    let err = one_attempt(&url)
        .pop::<serde_json::Value>("orders")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        transport_kind(&err),
        Some(TransportErrorKind::Broken),
        "{err:?}"
    );

    // An ungated KV step may have applied before the answer broke: with no attempt
    // left, its outcome is unknown.
    let client = Client::builder()
        .url(&url)
        .retry(RetryPolicy::default().min_delay(Duration::from_millis(1)))
        .build()
        .unwrap();
    let err = one_attempt(&url)
        .transaction()
        .kv(|k| k.incr("stats", "orders", 1, Ttl::days(1)))
        .commit()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::OutcomeUnknown { .. }), "{err:?}");
    assert_eq!(transport_kind(&err), Some(TransportErrorKind::Broken));
    // With the marker it is resent, and when every answer breaks the caller still
    // cannot tell whether it applied: unknown, never a plain failure.
    let err = client
        .transaction()
        .kv(|k| k.incr("stats", "orders", 1, Ttl::days(1)))
        .commit()
        .await
        .unwrap_err();
    assert!(matches!(err, Error::OutcomeUnknown { .. }), "{err:?}");
    assert_eq!(transport_kind(&err), Some(TransportErrorKind::Broken));
}

#[tokio::test]
async fn an_answer_slower_than_the_request_timeout_is_a_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(10)))
        .mount(&server)
        .await;
    let client = Client::builder()
        .url(server.uri())
        .request_timeout(Duration::from_millis(200))
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    let started = Instant::now();
    let err = client.health().await.unwrap_err();
    let waited = started.elapsed();
    let Error::Transport(e) = &err else {
        panic!("{err:?}")
    };
    assert!(e.is_timeout(), "{e}");
    assert!(e.to_string().contains("200ms"), "{e}");
    assert!(
        waited >= Duration::from_millis(200) && waited < Duration::from_secs(3),
        "{waited:?}"
    );
}

#[cfg(feature = "rustls")]
#[tokio::test]
async fn an_https_url_speaks_tls_and_a_failed_handshake_is_a_connect_error() {
    // A plain-HTTP server behind an https:// URL: the TLS handshake fails, so nothing
    // was sent and the call may be resent.
    let url = raw_server(
        b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n",
        true,
    )
    .await;
    let url = url.replacen("http://", "https://", 1);
    let err = one_attempt(&url).health().await.unwrap_err();
    assert_eq!(
        transport_kind(&err),
        Some(TransportErrorKind::Connect),
        "{err:?}"
    );
}

#[test]
fn a_token_no_header_can_carry_or_credentials_in_the_url_are_refused_when_built() {
    let err = Client::builder()
        .url("http://127.0.0.1:6632")
        .token("line\nbreak")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    let err = Client::builder()
        .url("http://user:pw@127.0.0.1:6632")
        .build()
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains("token()"), "{err}");
}
