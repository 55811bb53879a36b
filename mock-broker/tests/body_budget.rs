//! Request bodies under the broker's body budget (issue 52, item 4; `--body-budget`):
//! a body holds room from before it is read until its handler is done, and a request
//! that finds no room waits for it, then is refused 429 `overloaded` with
//! `Retry-After`, never 500. The memory it bounds is measured in `tests/memory.rs`.

use std::time::Duration;

use queen_mock_broker::MockBroker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Waits (at most a minute) until `holds` is true of the body budget's free bytes.
async fn until_room(broker: &MockBroker, holds: impl Fn(u64) -> bool) {
    let waited = tokio::time::timeout(Duration::from_secs(60), async {
        while !holds(broker.engine().body_budget().available()) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    assert!(
        waited.is_ok(),
        "the body budget has {} bytes free",
        broker.engine().body_budget().available()
    );
}

#[tokio::test]
async fn a_body_that_finds_the_budget_spent_waits_then_is_refused_429_and_room_comes_back() {
    let broker = MockBroker::builder()
        .body_budget(256 << 10)
        .start()
        .await
        .unwrap();
    let all = broker.engine().body_budget().bytes();
    // A chunked body whose first 200 KiB cost more than the whole budget: it is read
    // alone, holding all of it, and then the client stalls.
    let mut slow = TcpStream::connect(broker.addr()).await.unwrap();
    slow.write_all(
        b"POST /api/v1/push HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
          Transfer-Encoding: chunked\r\n\r\n",
    )
    .await
    .unwrap();
    let chunk = vec![b' '; 200 << 10];
    slow.write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
        .await
        .unwrap();
    slow.write_all(&chunk).await.unwrap();
    slow.write_all(b"\r\n").await.unwrap();
    until_room(&broker, |free| free == 0).await;

    // A small push finds no room: it waits, then is answered 429 with Retry-After.
    let http = reqwest::Client::new();
    let push = serde_json::json!({"items": [{"queue": "q", "payload": 1}]});
    let res = http
        .post(format!("{}/api/v1/push", broker.url()))
        .json(&push)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 429);
    assert!(res.headers().contains_key("retry-after"));
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(body["code"], "overloaded", "{body}");

    // The slow body ends (whitespace: 400, a JSON body is required); once its handler
    // is done, its room is back and the push goes through.
    slow.write_all(b"0\r\n\r\n").await.unwrap();
    let mut head = [0u8; 12];
    slow.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 400", "{}", String::from_utf8_lossy(&head));
    until_room(&broker, |free| free == all).await;
    let res = http
        .post(format!("{}/api/v1/push", broker.url()))
        .json(&push)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    broker.shutdown().await;
}
