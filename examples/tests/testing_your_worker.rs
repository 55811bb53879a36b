use std::time::Duration;

use queen_mock_broker::harness::Fault;
use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{Client, Error, Message, PushItem, SubscriptionMode, TransactionBuilder, Ttl};
use serde_json::{Value, json};

/// The worker's step under test: ack the event, push a receipt, set a marker, and
/// schedule a reminder for tomorrow.
fn pay(client: &Client, event: &Message<Value>) -> TransactionBuilder {
    client
        .transaction()
        .ack(event)
        .push("receipts", |p| {
            p.partition("customer-123")
                .payload(&json!({"orderId": "order-7"}))
        })
        .once("paid", "order-7-paid", Ttl::days(1))
        .timer("reminders", |t| {
            t.key("order-7")
                .after(Duration::from_secs(86_400))
                .payload(&json!({"orderId": "order-7"}))
        })
}

#[tokio::test]
async fn a_lost_answer_is_retried_and_the_step_applies_once() -> anyhow::Result<()> {
    // An in-process broker on a free port, on a clock that moves only when told to.
    let clock = ManualClock::new();
    let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    let client = Client::new(broker.url())?;

    client
        .push(vec![
            PushItem::new("orders", &json!({"orderId": "order-7"})).transaction_id("order-7-paid"),
        ])
        .await?;
    let event = client
        .pop::<Value>("orders")
        .group("billing")
        .subscription(SubscriptionMode::All)
        .send()
        .await?
        .remove(0);

    // The broker commits the step, then drops the connection: the answer is lost.
    broker
        .faults()
        .inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    match pay(&client, &event).commit().await {
        // The SDK sent it again; the retry rolled back and says the first one committed.
        Err(Error::RolledBack { retried: true, .. }) => {}
        other => panic!("expected a harmless rollback of the retry, got {other:?}"),
    }
    assert_eq!(broker.requests().matching("/api/v1/transaction").len(), 2);

    // Applied exactly once: read the stored state directly.
    let inspect = broker.inspect();
    assert_eq!(inspect.messages("receipts", "customer-123")?.len(), 1);
    assert!(inspect.kv("paid", "order-7-paid")?.is_some());
    assert_eq!(inspect.timers("reminders")?.len(), 1);
    let cursor = inspect.cursor("orders", "Default", "billing")?.unwrap();
    assert_eq!(cursor.next_offset, 1, "the event is acked");

    // A day passes in an instant, and the reminder fires.
    clock.advance(Duration::from_secs(86_400));
    let reminders = client
        .pop::<Value>("reminders")
        .wait(Duration::from_secs(5))
        .send()
        .await?;
    assert_eq!(reminders.len(), 1);
    assert_eq!(reminders[0].data, json!({"orderId": "order-7"}));

    broker.shutdown().await;
    Ok(())
}
