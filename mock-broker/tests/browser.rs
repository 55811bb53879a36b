//! A web page cannot drive the broker (issue 52): the default broker (auth off, on
//! loopback) refuses a request from a page of another origin, a body a page can send
//! without asking (no `Content-Type`), and a `Host` that is not a loopback name (DNS
//! rebinding), unless the operator allowed that origin or name; the broker's own page,
//! curl-like clients and the SDK go on as before.

use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
use serde_json::{Value, json};

const PUSH: &str = r#"{"items": [{"queue": "q", "payload": {"from": "a page"}}]}"#;

/// Sends `request` (its head lines after the request line, then the body) on a new
/// connection; answers the status, the head and the body.
async fn raw(broker: &MockBroker, line: &str, head: &[&str], body: &str) -> (u16, String, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut conn = tokio::net::TcpStream::connect(broker.addr()).await.unwrap();
    let mut req = format!("{line} HTTP/1.1\r\n");
    for h in head {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str(&format!(
        "Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    ));
    conn.write_all(req.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = conn.read_to_end(&mut answer).await;
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = serde_json::from_str(body).unwrap_or(Value::Null);
    (status, head.to_ascii_lowercase(), body)
}

fn stored(broker: &MockBroker) -> usize {
    broker
        .inspect()
        .messages("q", DEFAULT_PARTITION)
        .map_or(0, |m| m.len())
}

/// The CSRF page of the probe: a push and a pop from another site's page, with and
/// without `Origin`, with and without a type, are refused 403 with `{error, code}`
/// and change nothing; the broker's own origin, a request with no browser headers and
/// a navigation to the console go on.
#[tokio::test]
async fn a_page_of_another_site_cannot_push_pop_or_write() {
    let broker = MockBroker::builder().start().await.unwrap();
    let host = format!("Host: {}", broker.addr());
    let own = format!("Origin: http://{}", broker.addr());
    let (s, _, _) = raw(
        &broker,
        "POST /api/v1/push",
        &[&host, "Content-Type: application/json"],
        PUSH,
    )
    .await;
    assert_eq!(s, 201, "a client with no browser headers");
    assert_eq!(stored(&broker), 1);

    for (what, line, head) in [
        // fetch(url, {mode: 'no-cors', method: 'POST', body: new Blob([json])})
        (
            "no-cors fetch",
            "POST /api/v1/push",
            vec![
                "Origin: http://attacker.example",
                "Sec-Fetch-Site: cross-site",
            ],
        ),
        (
            "typed fetch",
            "POST /api/v1/push",
            vec![
                "Origin: http://attacker.example",
                "Content-Type: application/json",
            ],
        ),
        (
            "a sandboxed frame",
            "POST /api/v1/push",
            vec!["Origin: null", "Content-Type: application/json"],
        ),
        (
            "another port of localhost",
            "POST /api/v1/push",
            vec![
                "Origin: http://localhost:3000",
                "Content-Type: application/json",
            ],
        ),
        // <img src=".../pop/queue/q?autoAck=true&batch=10000">: no Origin on a GET.
        (
            "an image",
            "GET /api/v1/pop/queue/q?autoAck=true&batch=10000",
            vec!["Sec-Fetch-Site: cross-site", "Sec-Fetch-Dest: image"],
        ),
        (
            "a same-site image",
            "GET /api/v1/pop/queue/q?autoAck=true",
            vec!["Sec-Fetch-Site: same-site"],
        ),
        (
            "a top-level navigation",
            "GET /api/v1/pop/queue/q?autoAck=true",
            vec!["Sec-Fetch-Site: cross-site", "Sec-Fetch-Mode: navigate"],
        ),
        (
            "a form",
            "POST /api/v1/kv",
            vec![
                "Origin: http://attacker.example",
                "Content-Type: text/plain",
            ],
        ),
    ] {
        let mut head: Vec<&str> = head;
        head.push(&host);
        let (s, _, b) = raw(
            &broker,
            line,
            &head,
            if line.starts_with("POST") { PUSH } else { "" },
        )
        .await;
        assert_eq!(s, 403, "{what}: {b}");
        assert_eq!(b["code"], "origin_not_allowed", "{what}: {b}");
        assert!(
            b["error"]
                .as_str()
                .is_some_and(|e| e.contains("--allow-origin")),
            "{b}"
        );
    }
    assert_eq!(stored(&broker), 1, "nothing pushed");
    let cursor = broker
        .inspect()
        .cursor("q", DEFAULT_PARTITION, "__QUEUE_MODE__")
        .unwrap();
    assert!(
        cursor.is_none_or(|c| c.next_offset == 0 && c.lease_id.is_none()),
        "nothing popped"
    );

    // The broker's own page (the console) calls with its own origin.
    for site in ["same-origin", "none"] {
        let fetch_site = format!("Sec-Fetch-Site: {site}");
        let (s, _, b) = raw(
            &broker,
            "POST /api/v1/push",
            &[&host, &own, &fetch_site, "Content-Type: application/json"],
            PUSH,
        )
        .await;
        assert_eq!(s, 201, "{site}: {b}");
    }
    // A link from another site opens the console page (it reads nothing by itself).
    let (s, _, _) = raw(
        &broker,
        "GET /console",
        &[
            &host,
            "Sec-Fetch-Site: cross-site",
            "Sec-Fetch-Mode: navigate",
        ],
        "",
    )
    .await;
    assert_eq!(s, 200);
    broker.shutdown().await;
}

/// An origin the operator allows may call, with CORS answers (its preflight gets 204
/// with the methods and headers it may use); others still may not.
#[tokio::test]
async fn an_allowed_origin_may_call_with_cors_answers() {
    let broker = MockBroker::builder()
        .allow_origin("http://localhost:3000")
        .allow_origin("https://dash.example/")
        .start()
        .await
        .unwrap();
    let host = format!("Host: {}", broker.addr());
    let (s, head, _) = raw(
        &broker,
        "OPTIONS /api/v1/push",
        &[
            &host,
            "Origin: http://localhost:3000",
            "Access-Control-Request-Method: POST",
            "Access-Control-Request-Headers: content-type, authorization",
        ],
        "",
    )
    .await;
    assert_eq!(s, 204, "{head}");
    assert!(
        head.contains("access-control-allow-origin: http://localhost:3000"),
        "{head}"
    );
    assert!(
        head.contains("access-control-allow-headers: authorization, content-type"),
        "{head}"
    );
    for origin in [
        "Origin: http://localhost:3000",
        "Origin: https://dash.example",
    ] {
        let (s, head, b) = raw(
            &broker,
            "POST /api/v1/push",
            &[&host, origin, "Content-Type: application/json"],
            PUSH,
        )
        .await;
        assert_eq!(s, 201, "{origin}: {b}");
        assert!(head.contains("access-control-allow-origin: "), "{head}");
    }
    let (s, head, _) = raw(
        &broker,
        "OPTIONS /api/v1/push",
        &[
            &host,
            "Origin: http://attacker.example",
            "Access-Control-Request-Method: POST",
        ],
        "",
    )
    .await;
    assert_eq!(s, 403, "{head}");
    assert!(!head.contains("access-control-allow-origin"), "{head}");
    assert_eq!(stored(&broker), 2);
    broker.shutdown().await;
}

/// DNS rebinding: a page of `attacker.example`, whose name the attacker's DNS now
/// resolves to 127.0.0.1, is same-origin with what it reaches, so only the `Host` it
/// sends tells it apart. On loopback, a `Host` that is not a loopback name is refused
/// (403 `host_not_allowed`, even without `Origin`), unless the operator named it.
#[tokio::test]
async fn a_rebound_host_name_is_refused_on_a_loopback_broker() {
    let broker = MockBroker::builder()
        .allow_host("queen.internal")
        .start()
        .await
        .unwrap();
    let port = broker.addr().port();
    for host in [
        format!("Host: attacker.example:{port}"),
        "Host: attacker.example".to_string(),
        format!("Host: localhost.attacker.example:{port}"),
        format!("Host: 10.0.0.7:{port}"),
    ] {
        let origin = format!("Origin: http://{}", host.trim_start_matches("Host: "));
        for head in [vec![host.as_str()], vec![host.as_str(), origin.as_str()]] {
            let mut head = head;
            head.push("Content-Type: application/json");
            let (s, _, b) = raw(&broker, "POST /api/v1/push", &head, PUSH).await;
            assert_eq!(s, 403, "{head:?}: {b}");
            assert_eq!(b["code"], "host_not_allowed", "{b}");
        }
        let (s, _, b) = raw(&broker, "GET /api/v1/resources/queues", &[&host], "").await;
        assert_eq!((s, &b["code"]), (403, &json!("host_not_allowed")), "{host}");
    }
    assert_eq!(stored(&broker), 0);
    for host in [
        format!("Host: localhost:{port}"),
        format!("Host: 127.0.0.1:{port}"),
        format!("Host: 127.0.0.2:{port}"),
        format!("Host: [::1]:{port}"),
        "Host: queen.internal".to_string(),
        format!("Host: QUEEN.internal:{port}"),
    ] {
        let (s, _, b) = raw(
            &broker,
            "POST /api/v1/push",
            &[&host, "Content-Type: application/json"],
            PUSH,
        )
        .await;
        assert_eq!(s, 201, "{host}: {b}");
    }
    broker.shutdown().await;
}

/// Clients that are not browsers keep working: the SDK (a push, a pop, an ack, a
/// lease extension with no body) against a default broker.
#[tokio::test]
async fn the_sdk_and_bodiless_posts_keep_working() {
    let broker = MockBroker::builder().start().await.unwrap();
    let client = queen_sdk::Client::new(broker.url()).unwrap();
    client
        .push(vec![queen_sdk::PushItem::new("q", &json!({"n": 1}))])
        .await
        .unwrap();
    let got = client.pop::<Value>("q").send().await.unwrap();
    assert_eq!(got.len(), 1);
    // POST routes that take no body, sent without one and without a type.
    let http = reqwest::Client::new();
    for path in ["/api/v1/lease/nope/extend", "/api/v1/stats/refresh"] {
        let res = http
            .post(format!("{}{path}", broker.url()))
            .send()
            .await
            .unwrap();
        assert!(res.status().is_success(), "{path}: {}", res.status());
    }
    broker.shutdown().await;
}
