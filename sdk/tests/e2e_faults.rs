//! End to end through injected faults: lost answers, 503s, overload, lapsed leases and
//! timers, with the in-process broker's harness.

use std::time::Duration;

use queen_mock_broker::harness::{Fault, FaultKind};
use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{
    Client, Commit, Error, PushItem, RetryPolicy, RollbackReason, SubscriptionMode, Ttl,
};
use serde_json::{Value, json};

const TXN: &str = "/api/v1/transaction";

async fn setup() -> (MockBroker, ManualClock, Client) {
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let client = Client::builder()
        .url(broker.url())
        .retry(
            RetryPolicy::default()
                .min_delay(Duration::from_millis(5))
                .max_delay(Duration::from_millis(20))
                .jitter(false),
        )
        .build()
        .unwrap();
    client
        .push(vec![
            PushItem::new("orders", &json!({"orderId": "order-7"}))
                .partition("p")
                .transaction_id("order-7-paid"),
        ])
        .await
        .unwrap();
    (broker, clock, client)
}

async fn pop_one(client: &Client) -> queen_sdk::Message<Value> {
    client
        .pop::<Value>("orders")
        .group("billing")
        .subscription(SubscriptionMode::All)
        .batch(1)
        .send()
        .await
        .unwrap()
        .remove(0)
}

fn step(client: &Client, msg: &queen_sdk::Message<Value>) -> queen_sdk::TransactionBuilder {
    client
        .transaction()
        .ack(msg)
        .push("receipts", |p| {
            p.partition("customer-123")
                .payload(&json!({"orderId": "order-7"}))
        })
        .kv(|k| k.incr("stats", "paid", 1, Ttl::Forever))
}

#[tokio::test]
async fn a_lost_answer_is_retried_and_the_step_is_applied_once() {
    let (broker, _clock, client) = setup().await;
    let msg = pop_one(&client).await;
    broker.faults().inject(Fault::commit_then_drop().on(TXN));
    match step(&client, &msg).commit().await {
        Err(Error::RolledBack {
            reason, retried, ..
        }) => {
            assert!(
                matches!(
                    reason,
                    RollbackReason::RejectedAck | RollbackReason::Duplicate
                ),
                "{reason}"
            );
            assert!(retried, "the SDK says the first attempt probably committed");
        }
        other => panic!("expected a harmless rollback of the retry, got {other:?}"),
    }
    let hits = broker.faults().hits();
    assert_eq!(hits.len(), 1);
    assert_eq!(hits[0].kind, FaultKind::CommitThenDrop);
    assert_eq!(
        broker.requests().matching(TXN).len(),
        2,
        "sent, then retried once"
    );
    // Applied once: one receipt, the counter at 1, the event acked.
    assert_eq!(
        broker
            .inspect()
            .messages("receipts", "customer-123")
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        broker
            .inspect()
            .kv_row("stats", "paid")
            .unwrap()
            .unwrap()
            .value,
        "1"
    );
    let cursor = broker
        .inspect()
        .cursor("orders", "p", "billing")
        .unwrap()
        .unwrap();
    assert_eq!(cursor.next_offset, 1);
}

#[tokio::test]
async fn a_503_after_the_commit_is_retried_and_reported_as_probably_committed() {
    let (broker, _clock, client) = setup().await;
    let msg = pop_one(&client).await;
    broker
        .faults()
        .inject(Fault::commit_then_unavailable().on(TXN));
    let out = step(&client, &msg).commit().await;
    assert!(
        matches!(out, Err(Error::RolledBack { retried: true, .. })),
        "{out:?}"
    );
    assert_eq!(
        broker
            .inspect()
            .messages("receipts", "customer-123")
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn a_503_before_applying_is_retried_and_commits_once() {
    let (broker, _clock, client) = setup().await;
    let msg = pop_one(&client).await;
    broker.faults().inject(Fault::no_leader().on(TXN).times(2));
    let out = step(&client, &msg).commit().await.unwrap();
    match out {
        Commit::Committed(c) => assert!(c.retried),
        other => panic!("{other:?}"),
    }
    assert_eq!(broker.faults().hits().len(), 2);
    assert_eq!(broker.requests().matching(TXN).len(), 3);
    assert_eq!(
        broker
            .inspect()
            .messages("receipts", "customer-123")
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        broker
            .inspect()
            .kv_row("stats", "paid")
            .unwrap()
            .unwrap()
            .value,
        "1"
    );
}

#[tokio::test]
async fn an_ungated_kv_only_step_is_resent_under_the_step_marker_and_counts_once() {
    let (broker, _clock, client) = setup().await;
    broker
        .faults()
        .inject(Fault::commit_then_unavailable().on(TXN));
    let out = client
        .transaction()
        .kv(|k| k.incr("stats", "visits", 1, Ttl::Forever))
        .commit()
        .await;
    // The SDK's step marker gated the resend: the first attempt committed.
    match out {
        Ok(Commit::Gated { gate, retried, .. }) => {
            assert_eq!(gate.kind, queen_sdk::GateKind::Step);
            assert!(gate.already_done() && retried);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(broker.requests().matching(TXN).len(), 2, "resent once");
    // Counted once.
    assert_eq!(
        broker
            .inspect()
            .kv_row("stats", "visits")
            .unwrap()
            .unwrap()
            .value,
        "1"
    );
}

#[tokio::test]
async fn resend_as_is_opts_out_of_the_step_marker_and_counts_twice() {
    let (broker, _clock, client) = setup().await;
    broker
        .faults()
        .inject(Fault::commit_then_unavailable().on(TXN));
    let out = client
        .transaction()
        .kv(|k| k.incr("stats", "visits", 1, Ttl::Forever))
        .resend(queen_sdk::Resend::AsIs)
        .commit()
        .await
        .unwrap();
    assert!(out.committed().unwrap().retried);
    let visits = broker.inspect().kv_row("stats", "visits").unwrap().unwrap();
    assert_eq!(visits.value, "2", "what the caller opted into");
}

#[tokio::test]
async fn an_overloaded_answer_is_retried_after_retry_after_and_commits_once() {
    let (broker, _clock, client) = setup().await;
    broker.faults().inject(Fault::overloaded(1).on(TXN));
    let started = std::time::Instant::now();
    let out = client
        .transaction()
        .kv(|k| k.incr("stats", "visits", 1, Ttl::Forever))
        .commit()
        .await
        .unwrap();
    assert!(out.is_committed());
    assert!(
        started.elapsed() >= Duration::from_millis(900),
        "Retry-After honoured"
    );
    assert_eq!(
        broker
            .inspect()
            .kv_row("stats", "visits")
            .unwrap()
            .unwrap()
            .value,
        "1"
    );
}

#[tokio::test]
async fn a_delayed_answer_still_commits() {
    let (broker, _clock, client) = setup().await;
    broker
        .faults()
        .inject(Fault::delay(Duration::from_millis(200)).on(TXN));
    let out = client
        .transaction()
        .once("m", "k", Ttl::hours(1))
        .commit()
        .await
        .unwrap();
    assert!(out.is_committed());
    assert_eq!(
        broker.faults().hits()[0].kind,
        FaultKind::Delay(Duration::from_millis(200))
    );
}

#[tokio::test]
async fn a_lease_that_lapses_mid_step_rolls_back_and_the_message_comes_back() {
    let (broker, clock, client) = setup().await;
    let msg = client
        .pop::<Value>("orders")
        .group("billing")
        .subscription(SubscriptionMode::All)
        .lease(Duration::from_secs(30))
        .batch(1)
        .send()
        .await
        .unwrap()
        .remove(0);
    clock.advance(Duration::from_secs(31));
    match step(&client, &msg).commit().await {
        Err(Error::RolledBack {
            reason: RollbackReason::RejectedAck,
            retried: false,
            ..
        }) => {}
        other => panic!("expected rejected_ack, got {other:?}"),
    }
    assert!(
        broker
            .inspect()
            .messages("receipts", "customer-123")
            .unwrap()
            .is_empty()
    );
    let again = pop_one(&client).await;
    assert_eq!(again.transaction_id, "order-7-paid");
    assert_eq!(again.delivery_attempt, Some(2));
    assert!(step(&client, &again).commit().await.unwrap().is_committed());
}

#[tokio::test]
async fn a_timer_set_in_a_step_fires_when_the_clock_reaches_it() {
    let (broker, clock, client) = setup().await;
    let msg = pop_one(&client).await;
    let out = client
        .transaction()
        .ack(&msg)
        .timer("reminders", "order-7", |t| {
            t.after(Duration::from_secs(3600))
                .payload(&json!({"orderId": "order-7"}))
        })
        .commit()
        .await
        .unwrap()
        .committed()
        .unwrap();
    let timer = out.timers().next().unwrap().clone();
    assert_eq!(broker.inspect().timers("reminders").unwrap().len(), 1);
    clock.advance(Duration::from_secs(3600));
    let mut fired = Vec::new();
    for _ in 0..40 {
        fired = client
            .pop::<Value>("reminders")
            .batch(1)
            .send()
            .await
            .unwrap();
        if !fired.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(fired.len(), 1, "the timer fired");
    assert_eq!(Some(fired[0].id.clone()), timer.message_id);
    assert_eq!(fired[0].data, json!({"orderId": "order-7"}));
    assert!(broker.inspect().timers("reminders").unwrap().is_empty());
}
