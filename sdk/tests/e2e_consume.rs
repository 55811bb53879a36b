//! End to end against the in-process reference broker: the consume stream, its order,
//! and its background lease renewal.

use std::time::Duration;

use futures::StreamExt;
use queen_mock_broker::MockBroker;
use queen_sdk::{Client, Error, PushItem, StartAt};
use serde::{Deserialize, Serialize};
use serde_json::json;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    n: u32,
}

async fn setup(queue: &str, count: u32) -> (MockBroker, Client) {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let items = (0..count)
        .map(|n| PushItem::new(queue, &Job { n }).partition("p"))
        .collect();
    client.push(items).await.unwrap();
    (broker, client)
}

#[tokio::test]
async fn consume_yields_messages_in_order_across_batches() {
    let (_broker, client) = setup("jobs", 5).await;
    let mut stream = client
        .consume::<Job>("jobs")
        .batch(2)
        .wait(Duration::from_millis(500))
        .stream();
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let d = tokio::time::timeout(Duration::from_secs(3), stream.next())
            .await
            .expect("a delivery within 3 s")
            .expect("the stream does not end")
            .unwrap();
        assert!(d.is_leased());
        assert!(!d.lease_lost());
        seen.push(d.data.n);
        // Deref to Message<Job>: acks like a message.
        let out = client.transaction().ack(&d).commit().await.unwrap();
        assert!(out.is_committed());
    }
    assert_eq!(seen, [0, 1, 2, 3, 4]);

    // Exhausted: the stream long-polls and picks up what arrives next.
    let next = tokio::spawn(async move {
        let d = stream.next().await.unwrap().unwrap();
        d.data.n
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    client
        .push(vec![PushItem::new("jobs", &Job { n: 99 }).partition("p")])
        .await
        .unwrap();
    let n = tokio::time::timeout(Duration::from_secs(3), next)
        .await
        .expect("the new message within 3 s")
        .unwrap();
    assert_eq!(n, 99);
}

#[tokio::test]
async fn a_delivery_held_past_its_lease_is_not_redelivered_because_the_stream_renews_it() {
    let (_broker, client) = setup("slow", 1).await;
    let mut stream = client
        .consume::<Job>("slow")
        .lease(Duration::from_secs(1))
        .wait(Duration::from_millis(200))
        .stream();
    let held = stream.next().await.unwrap().unwrap();
    assert_eq!(held.data.n, 0);

    // Hold it for 2.5 lease lengths.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let other = client.pop::<Job>("slow").send().await.unwrap();
    assert!(
        other.is_empty(),
        "still leased to the first consumer: {other:?}"
    );
    assert!(!held.lease_lost());

    // The first consumer's ack still holds: its lease is the live one.
    let out = client.transaction().ack(&held).commit().await.unwrap();
    assert!(out.is_committed());
    drop(held);
    drop(stream);
    let other = client.pop::<Job>("slow").send().await.unwrap();
    assert!(other.is_empty(), "acked: never redelivered");
}

#[tokio::test]
async fn dropping_an_unacked_delivery_stops_renewal_and_the_message_comes_back() {
    let (_broker, client) = setup("dropped", 1).await;
    let mut stream = client
        .consume::<Job>("dropped")
        .group("g", StartAt::Beginning)
        .lease(Duration::from_secs(1))
        .wait(Duration::from_millis(200))
        .stream();
    let d = stream.next().await.unwrap().unwrap();
    let first_lease = d.lease_id.clone();
    drop(d);

    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let again = client
        .pop::<Job>("dropped")
        .group("g")
        .send()
        .await
        .unwrap();
    assert_eq!(again.len(), 1, "redelivered after the lease lapsed");
    assert_eq!(again[0].delivery_attempt, Some(2));
    assert_ne!(again[0].lease_id, first_lease);
}

#[tokio::test]
async fn a_refused_pop_ends_the_stream() {
    let (_broker, client) = setup("ok", 0).await;
    let mut stream = client.consume::<Job>("").stream();
    let err = stream.next().await.unwrap().unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    assert!(stream.next().await.is_none());
}

#[tokio::test]
async fn failed_pops_are_yielded_and_the_stream_polls_again() {
    use queen_mock_broker::harness::Fault;
    let (broker, client) = setup("flaky", 1).await;
    broker
        .faults()
        .inject(Fault::unavailable().on("/api/v1/pop").times(2));
    let mut stream = client
        .consume::<Job>("flaky")
        .wait(Duration::from_millis(200))
        .stream();
    for _ in 0..2 {
        let err = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("an item within 5 s")
            .expect("the stream does not end")
            .unwrap_err();
        assert_eq!(err.status(), Some(503), "{err}");
    }
    // Backed off (the broker's Retry-After), then polled again.
    let d = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a delivery after the failures")
        .expect("the stream does not end")
        .unwrap();
    assert_eq!(d.data.n, 0);
}

#[tokio::test]
async fn a_401_ends_the_stream() {
    use queen_mock_broker::auth::{Auth, Role};
    let broker = MockBroker::builder()
        .auth(Auth::new().token("reader", Role::ReadOnly, "acme", None))
        .start()
        .await
        .unwrap();
    let anonymous = Client::new(broker.url()).unwrap();
    let mut stream = anonymous.consume::<Job>("locked").stream();
    let err = stream.next().await.unwrap().unwrap_err();
    assert_eq!(err.status(), Some(401), "{err}");
    assert!(stream.next().await.is_none(), "a terminal refusal ends it");
}

#[tokio::test]
async fn a_poison_payload_is_dead_lettered_and_the_stream_delivers_the_rest_in_order() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let items = [json!({"n": 1}), json!({"n": "x"}), json!({"n": 3})]
        .iter()
        .map(|p| PushItem::new("mixed", p).partition("p"))
        .collect();
    client.push(items).await.unwrap();
    let mut stream = client
        .consume::<Job>("mixed")
        .wait(Duration::from_millis(200))
        .stream();
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let d = tokio::time::timeout(Duration::from_secs(5), stream.next())
            .await
            .expect("a delivery within 5 s")
            .expect("the stream does not end")
            .unwrap();
        assert!(
            client
                .transaction()
                .ack(&d)
                .commit()
                .await
                .unwrap()
                .is_committed()
        );
        seen.push(d.data.n);
    }
    assert_eq!(seen, [1, 3]);
    let dead = client
        .dlq::<serde_json::Value>(queen_sdk::DlqQuery::queue("mixed"))
        .await
        .unwrap();
    assert_eq!(dead.messages.len(), 1);
    assert_eq!(dead.messages[0].data, json!({"n": "x"}));
    assert!(
        dead.messages[0]
            .error_message
            .as_deref()
            .is_some_and(|e| e.contains("invalid type")),
        "{:?}",
        dead.messages[0]
    );
}

/// When dead-lettering a poison payload fails, the rest of its batch is held back (a
/// completion would commit the cursor past the poison): it all comes back after the
/// lease, and the poison is dead-lettered then.
#[tokio::test]
async fn a_failed_dead_lettering_holds_back_the_rest_of_the_batch() {
    use queen_mock_broker::harness::Fault;
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::builder()
        .url(broker.url())
        .retry(queen_sdk::RetryPolicy::none())
        .build()
        .unwrap();
    let items = [json!({"n": "x"}), json!({"n": 2})]
        .iter()
        .map(|p| PushItem::new("held", p).partition("p"))
        .collect();
    client.push(items).await.unwrap();
    broker
        .faults()
        .inject(Fault::unavailable().on("/api/v1/ack").times(1));
    let mut stream = client
        .consume::<Job>("held")
        .lease(Duration::from_secs(1))
        .wait(Duration::from_millis(200))
        .stream();
    let d = tokio::time::timeout(Duration::from_secs(10), stream.next())
        .await
        .expect("a delivery within 10 s")
        .expect("the stream does not end")
        .unwrap();
    assert_eq!(d.data.n, 2);
    assert_eq!(
        d.delivery_attempt,
        Some(2),
        "held back, then delivered again after the lease"
    );
    let dead = client
        .dlq::<serde_json::Value>(queen_sdk::DlqQuery::queue("held"))
        .await
        .unwrap();
    assert_eq!(
        dead.messages.len(),
        1,
        "dead-lettered at the second delivery"
    );
}
