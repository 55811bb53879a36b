use std::convert::Infallible;
use std::time::Duration;

use queen_mock_broker::harness::Fault;
use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{Client, DEFAULT_PARTITION, Delivery, PushItem, StartAt, TransactionBuilder, Ttl};
use serde::Deserialize;
use serde_json::{Value, json};

/// The event, as producers write it: `{"orderId": "order-7"}`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderPaid {
    order_id: String,
}

/// The worker's step under test, added to `step` (which already acks the event): push a
/// receipt, set a marker, and schedule a reminder for tomorrow.
fn pay(event: &Delivery<OrderPaid>, step: TransactionBuilder) -> TransactionBuilder {
    let order = &event.data.order_id;
    step.push("receipts", |p| {
        p.partition("customer-123")
            .payload(&json!({"orderId": order}))
    })
    .once("paid", format!("{order}-paid"), Ttl::days(1))
    .timer("reminders", order, |t| {
        t.after(Duration::from_secs(86_400))
            .payload(&json!({"orderId": order}))
    })
}

#[tokio::test]
async fn a_lost_answer_is_retried_and_the_step_applies_once() -> anyhow::Result<()> {
    // An in-process broker on a free port, on a clock that moves only when told to.
    let clock = ManualClock::new();
    let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    let client = Client::new(broker.url())?;
    client
        .push(vec![PushItem::new(
            "orders",
            &json!({"orderId": "order-7"}),
        )])
        .await?;

    // The broker commits the step, then drops the connection: the answer is lost.
    broker
        .faults()
        .inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    // The worker handles what is queued, then stops: no polling loop, no sleep.
    let summary = client
        .worker::<OrderPaid>("orders")
        .group("billing", StartAt::Beginning)
        .run_until_idle(|event, step| async move { Ok::<_, Infallible>(pay(&event, step)) })
        .await?;
    // The SDK sent the step again; the resend found the first attempt committed.
    assert_eq!(
        (summary.processed, summary.already_done),
        (1, 1),
        "{summary}"
    );
    assert_eq!(broker.requests().matching("/api/v1/transaction").len(), 2);

    // Applied exactly once: read the stored state directly.
    let inspect = broker.inspect();
    assert_eq!(inspect.messages("receipts", "customer-123")?.len(), 1);
    assert_eq!(inspect.kv::<bool>("paid", "order-7-paid")?, Some(true));
    assert_eq!(inspect.timers("reminders")?.len(), 1);
    let cursor = inspect
        .cursor("orders", DEFAULT_PARTITION, "billing")?
        .unwrap();
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
