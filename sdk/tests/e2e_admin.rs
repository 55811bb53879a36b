//! End to end against the in-process reference broker: configure, delete, DLQ, seek,
//! group deletion and health.

use std::time::Duration;

use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{AckStatus, Client, DlqQuery, PushItem, QueueOptions, SeekTo, SubscriptionMode};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Payment {
    id: u32,
}

async fn broker_with_clock() -> (MockBroker, Client, ManualClock) {
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .in_memory()
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let client = Client::new(broker.url()).unwrap();
    (broker, client, clock)
}

async fn push(client: &Client, queue: &str, ids: &[u32]) {
    let items = ids
        .iter()
        .map(|id| PushItem::new(queue, &Payment { id: *id }).partition("p"))
        .collect();
    client.push(items).await.unwrap();
}

#[tokio::test]
async fn configure_answers_the_stored_options_and_merges() {
    let (_broker, client, _clock) = broker_with_clock().await;
    let cfg = client
        .configure(
            "jobs",
            QueueOptions::new()
                .lease_time(Duration::from_secs(10))
                .dedup_window(Duration::from_secs(600))
                .namespace("billing")
                .option("priority", 4),
        )
        .await
        .unwrap();
    assert_eq!(cfg.queue, "jobs");
    assert_eq!(cfg.options.lease_time, Some(Duration::from_secs(10)));
    assert_eq!(cfg.options.dedup_window, Some(Duration::from_secs(600)));
    assert_eq!(cfg.options.namespace.as_deref(), Some("billing"));
    // Every option comes back with its value: the defaults are echoed.
    assert_eq!(cfg.options.retry_limit, Some(3));
    assert_eq!(cfg.options.dead_letter_queue, Some(true));
    assert_eq!(cfg.options.retention, Some(Duration::from_secs(0)));
    assert_eq!(cfg.options.extra.get("priority"), Some(&json!(4)));

    // A second configure merges: the lease time is kept.
    let cfg = client
        .configure("jobs", QueueOptions::new().retry_limit(5))
        .await
        .unwrap();
    assert_eq!(cfg.options.lease_time, Some(Duration::from_secs(10)));
    assert_eq!(cfg.options.retry_limit, Some(5));

    // Replace resets what is not sent.
    let cfg = client
        .configure("jobs", QueueOptions::new().retry_limit(1).replace())
        .await
        .unwrap();
    assert_eq!(cfg.options.lease_time, Some(Duration::from_secs(300)));
    assert_eq!(cfg.options.retry_limit, Some(1));
}

#[tokio::test]
async fn queue_options_are_sent_as_the_protocol_crate_reads_them() {
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/configure"))
        .respond_with(
            ResponseTemplate::new(200).set_body_json(json!({"queue": "q", "options": {}})),
        )
        .mount(&server)
        .await;
    let client = Client::new(server.uri()).unwrap();
    let ours = QueueOptions::new()
        .lease_time(Duration::from_secs(30))
        .retry_limit(2)
        .dead_letter_queue(false)
        .delayed_processing(Duration::from_secs(5))
        .dedup_window(Duration::from_secs(60))
        .retention(Duration::from_secs(86_400));
    client.configure("q", ours).await.unwrap();
    let sent: Value = server.received_requests().await.unwrap()[0]
        .body_json()
        .unwrap();
    let theirs: queen_protocol::QueueOptions =
        serde_json::from_value(sent["options"].clone()).unwrap();
    assert_eq!(theirs.lease_time, Some(30));
    assert_eq!(theirs.retry_limit, Some(2));
    assert_eq!(theirs.dead_letter_queue, Some(false));
    assert_eq!(theirs.delayed_processing, Some(5));
    assert_eq!(theirs.dedup_window_seconds, Some(60));
    assert_eq!(theirs.retention_seconds, Some(86_400));
}

#[tokio::test]
async fn configure_then_pop_honours_the_lease_time() {
    let (_broker, client, clock) = broker_with_clock().await;
    client
        .configure(
            "jobs",
            QueueOptions::new().lease_time(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    push(&client, "jobs", &[1]).await;

    let first = client.pop::<Payment>("jobs").send().await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].delivery_attempt, Some(1));

    clock.advance(Duration::from_secs(9));
    let none = client.pop::<Payment>("jobs").send().await.unwrap();
    assert!(none.is_empty(), "still leased after 9 s of a 10 s lease");

    clock.advance(Duration::from_secs(2));
    let again = client.pop::<Payment>("jobs").send().await.unwrap();
    assert_eq!(again.len(), 1, "redelivered once the 10 s lease expired");
    assert_eq!(again[0].id, first[0].id);
    assert_eq!(again[0].delivery_attempt, Some(2));
    assert_ne!(again[0].lease_id, first[0].lease_id);
}

#[tokio::test]
async fn delete_queue_removes_it_and_says_whether_it_existed() {
    let (_broker, client, _clock) = broker_with_clock().await;
    push(&client, "scratch", &[1, 2]).await;
    assert!(client.delete_queue("scratch").await.unwrap());
    let none = client.pop::<Payment>("scratch").send().await.unwrap();
    assert!(none.is_empty());
    assert!(!client.delete_queue("scratch").await.unwrap());
}

#[tokio::test]
async fn dlq_lists_what_a_dlq_or_exhausted_ack_dead_lettered() {
    let (_broker, client, _clock) = broker_with_clock().await;
    client
        .configure("payments", QueueOptions::new().retry_limit(0))
        .await
        .unwrap();
    push(&client, "payments", &[1, 2]).await;

    let batch = client
        .pop::<Payment>("payments")
        .batch(2)
        .send()
        .await
        .unwrap();
    assert_eq!(batch.len(), 2);
    let out = client
        .ack_batch(&[
            (&batch[0], AckStatus::Dlq),
            (
                &batch[1],
                AckStatus::Failed {
                    error: "card declined".into(),
                },
            ),
        ])
        .await
        .unwrap();
    assert!(out.iter().all(|o| o.success && o.dlq), "{out:?}");

    let page = client
        .dlq::<Payment>(DlqQuery::queue("payments"))
        .await
        .unwrap();
    assert_eq!(page.total, 2);
    assert_eq!(page.messages.len(), 2);
    let by_id = |id: u32| {
        page.messages
            .iter()
            .find(|m| m.data.id == id)
            .unwrap_or_else(|| panic!("message {id} in {page:?}"))
    };
    assert_eq!(by_id(1).transaction_id, batch[0].transaction_id);
    assert_eq!(by_id(1).queue, "payments");
    assert_eq!(by_id(2).error_message.as_deref(), Some("card declined"));
    assert!(!by_id(2).failed_at.is_empty());

    // Paging and filters.
    let one = client
        .dlq::<Value>(DlqQuery::queue("payments").limit(1).offset(1))
        .await
        .unwrap();
    assert_eq!((one.messages.len(), one.total), (1, 2));
    let other = client
        .dlq::<Value>(DlqQuery::queue("elsewhere"))
        .await
        .unwrap();
    assert_eq!((other.messages.len(), other.total), (0, 0));
}

#[tokio::test]
async fn seek_to_end_skips_what_is_stored_and_seek_to_a_time_rewinds() {
    let (_broker, client, _clock) = broker_with_clock().await;
    push(&client, "events", &[1, 2, 3]).await;

    let moved = client.seek("audit", "events", SeekTo::End).await.unwrap();
    assert_eq!(moved, 1);
    let none = client
        .pop::<Payment>("events")
        .group("audit")
        .subscription(SubscriptionMode::All)
        .send()
        .await
        .unwrap();
    assert!(none.is_empty(), "the group starts past the stored messages");

    push(&client, "events", &[4]).await;
    let next = client
        .pop::<Payment>("events")
        .group("audit")
        .batch(10)
        .send()
        .await
        .unwrap();
    assert_eq!(next.iter().map(|m| m.data.id).collect::<Vec<_>>(), vec![4]);

    // Rewind this partition to the beginning of time: everything again (the lease
    // the group held is released by the seek).
    client
        .seek_partition("audit", "events", "p", SeekTo::Beginning)
        .await
        .unwrap();
    let all = client
        .pop::<Payment>("events")
        .group("audit")
        .batch(10)
        .send()
        .await
        .unwrap();
    assert_eq!(
        all.iter().map(|m| m.data.id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4]
    );

    // Forgetting the group drops its cursor and lease.
    client.delete_group("audit").await.unwrap();
}

#[tokio::test]
async fn health_says_healthy() {
    let (_broker, client, _clock) = broker_with_clock().await;
    let h = client.health().await.unwrap();
    assert!(h.is_healthy(), "{h:?}");
    assert!(h.version.is_some());
}
