//! Exactly-once for every step shape: the broker commits a step and its answer is lost
//! (a dropped connection, a 503), the SDK sends it again, and the stored state shows
//! the step applied once. Each shape is tried mid-batch (the lease stays held by the
//! rest of the batch, so the ack's fence does not stop the resend) and, where it
//! matters, last of its batch.

use std::time::Duration;

use queen_mock_broker::harness::Fault;
use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{
    Client, Commit, Error, GateKind, Message, PushItem, RetryPolicy, RollbackReason, StartAt,
    SubscriptionMode, Ttl,
};
use serde_json::{Value, json};

const TXN: &str = "/api/v1/transaction";

/// How the first commit's answer is lost.
#[derive(Clone, Copy, Debug)]
enum Lost {
    Dropped,
    Unavailable,
}

impl Lost {
    fn fault(self) -> Fault {
        match self {
            Lost::Dropped => Fault::commit_then_drop(),
            Lost::Unavailable => Fault::commit_then_unavailable(),
        }
        .on(TXN)
    }
}

const BOTH: [Lost; 2] = [Lost::Dropped, Lost::Unavailable];

async fn broker() -> (MockBroker, ManualClock, Client) {
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
    (broker, clock, client)
}

/// `n` orders in one partition, popped as one batch under one lease.
async fn batch(client: &Client, n: usize) -> Vec<Message<Value>> {
    client
        .push(
            (0..n)
                .map(|i| PushItem::new("orders", &json!({"n": i})).partition("p"))
                .collect(),
        )
        .await
        .unwrap();
    let msgs = client
        .pop::<Value>("orders")
        .group("billing")
        .subscription(SubscriptionMode::All)
        .batch(n as u32)
        .send()
        .await
        .unwrap();
    assert_eq!(msgs.len(), n);
    assert!(msgs.iter().all(|m| m.lease_id == msgs[0].lease_id));
    msgs
}

fn counter(broker: &MockBroker, ns: &str, key: &str) -> Option<String> {
    broker.inspect().kv_row(ns, key).unwrap().map(|r| r.value)
}

/// The resend was refused by the SDK's step marker: the first attempt committed.
fn assert_step_gate(out: &queen_sdk::Result<Commit>) {
    match out {
        Ok(Commit::Gated { gate, retried, .. }) => {
            assert_eq!(gate.kind, GateKind::Step, "{gate}");
            assert!(gate.already_done(), "{gate}");
            assert!(retried);
        }
        other => panic!("expected the step marker to gate the resend, got {other:?}"),
    }
}

#[tokio::test]
async fn ack_and_incr_mid_batch_counts_once() {
    for lost in BOTH {
        let (broker, _clock, client) = broker().await;
        let msgs = batch(&client, 3).await;
        broker.faults().inject(lost.fault());
        let out = client
            .transaction()
            .ack(&msgs[0])
            .kv(|k| k.incr("stats", "n", 1, Ttl::Forever))
            .commit()
            .await;
        assert_step_gate(&out);
        assert_eq!(
            broker.requests().matching(TXN).len(),
            2,
            "{lost:?}: resent once"
        );
        assert_eq!(
            counter(&broker, "stats", "n").as_deref(),
            Some("1"),
            "{lost:?}"
        );
        // The rest of the batch is still the worker's, under the same lease.
        for m in &msgs[1..] {
            let out = client
                .transaction()
                .ack(m)
                .kv(|k| k.incr("stats", "n", 1, Ttl::Forever))
                .commit()
                .await
                .unwrap();
            // The caller sees only its own results: the marker's slot is left out.
            let c = out.committed().unwrap();
            assert_eq!(c.kv().count(), 1);
            assert_eq!(c.results().len(), 2);
            assert_eq!(c.kv().next().unwrap().index, 1);
        }
        assert_eq!(
            counter(&broker, "stats", "n").as_deref(),
            Some("3"),
            "{lost:?}"
        );
        let cursor = broker
            .inspect()
            .cursor("orders", "p", "billing")
            .unwrap()
            .unwrap();
        assert_eq!(cursor.next_offset, 3);
        broker.shutdown().await;
    }
}

#[tokio::test]
async fn ack_and_incr_last_of_batch_counts_once() {
    let (broker, _clock, client) = broker().await;
    let msgs = batch(&client, 2).await;
    let first = client.transaction().ack(&msgs[0]).commit().await.unwrap();
    assert!(first.is_committed());
    broker.faults().inject(Lost::Dropped.fault());
    let out = client
        .transaction()
        .ack(&msgs[1])
        .kv(|k| k.incr("stats", "n", 1, Ttl::Forever))
        .commit()
        .await;
    // The last ack released the lease: the broker checks acks first.
    assert!(
        matches!(
            out,
            Err(Error::RolledBack {
                reason: RollbackReason::RejectedAck,
                retried: true,
                ..
            })
        ),
        "{out:?}"
    );
    assert_eq!(counter(&broker, "stats", "n").as_deref(), Some("1"));
    broker.shutdown().await;
}

#[tokio::test]
async fn ack_and_timer_mid_batch_schedules_once() {
    for lost in BOTH {
        let (broker, _clock, client) = broker().await;
        let msgs = batch(&client, 2).await;
        broker.faults().inject(lost.fault());
        let out = client
            .transaction()
            .ack(&msgs[0])
            .timer("reminders", "order-0", |t| {
                t.after(Duration::from_secs(60)).payload(&"order-0")
            })
            .commit()
            .await;
        assert_step_gate(&out);
        let timers = broker.inspect().timers("reminders").unwrap();
        assert_eq!(timers.len(), 1, "{lost:?}");
        broker.shutdown().await;
    }
}

#[tokio::test]
async fn ack_and_position_mid_batch_applies_once() {
    let (broker, _clock, client) = broker().await;
    client
        .push((0..4).map(|n| PushItem::new("events", &n)).collect())
        .await
        .unwrap();
    let msgs = batch(&client, 2).await;
    broker.faults().inject(Lost::Dropped.fault());
    let out = client
        .transaction()
        .ack(&msgs[0])
        .position("events", "audit", "Default", 3)
        .commit()
        .await;
    assert_step_gate(&out);
    let cursor = broker
        .inspect()
        .cursor("events", "Default", "audit")
        .unwrap()
        .unwrap();
    assert_eq!(cursor.next_offset, 3);
    broker.shutdown().await;
}

#[tokio::test]
async fn ack_and_a_push_with_the_users_own_id_mid_batch_pushes_once() {
    for lost in BOTH {
        let (broker, _clock, client) = broker().await;
        let msgs = batch(&client, 3).await;
        broker.faults().inject(lost.fault());
        let out = client
            .transaction()
            .ack(&msgs[0])
            .push("receipts", |p| p.transaction_id("receipt-0").payload(&"r0"))
            .kv(|k| k.incr("stats", "n", 1, Ttl::Forever))
            .commit()
            .await;
        assert!(
            matches!(
                out,
                Err(Error::RolledBack {
                    reason: RollbackReason::Duplicate,
                    retried: true,
                    ..
                })
            ),
            "{lost:?}: {out:?}"
        );
        assert_eq!(
            broker
                .inspect()
                .messages("receipts", "Default")
                .unwrap()
                .len(),
            1
        );
        assert_eq!(counter(&broker, "stats", "n").as_deref(), Some("1"));
        broker.shutdown().await;
    }
}

#[tokio::test]
async fn a_failed_ack_mid_batch_counts_one_attempt() {
    let (broker, _clock, client) = broker().await;
    let msgs = batch(&client, 2).await;
    broker.faults().inject(Lost::Dropped.fault());
    let out = client
        .transaction()
        .ack_with(
            &msgs[0],
            queen_sdk::AckStatus::Failed {
                error: "payment service down".into(),
            },
        )
        .kv(|k| k.incr("stats", "failures", 1, Ttl::Forever))
        .commit()
        .await;
    // A `failed` ack gives the batch back, releasing the lease: the resend's ack is
    // refused first. Either way the second attempt wrote nothing.
    assert!(
        matches!(
            out,
            Err(Error::RolledBack {
                reason: RollbackReason::RejectedAck,
                retried: true,
                ..
            })
        ),
        "{out:?}"
    );
    assert_eq!(counter(&broker, "stats", "failures").as_deref(), Some("1"));
    broker.shutdown().await;
}

#[tokio::test]
async fn a_required_decrement_of_a_stock_of_5_leaves_4() {
    for lost in BOTH {
        let (broker, _clock, client) = broker().await;
        client
            .kv()
            .put("stock", "sku", &5, Ttl::Forever)
            .await
            .unwrap();
        broker.faults().inject(lost.fault());
        let out = client
            .transaction()
            .kv(|k| k.incr("stock", "sku", -1, Ttl::Forever).min(0).required())
            .commit()
            .await;
        assert_step_gate(&out);
        assert_eq!(
            counter(&broker, "stock", "sku").as_deref(),
            Some("4"),
            "{lost:?}"
        );
        broker.shutdown().await;
    }
}

#[tokio::test]
async fn a_lock_guarded_step_applies_once() {
    let (broker, _clock, client) = broker().await;
    let lock = client.lock("nightly").acquire().await.unwrap().unwrap();
    broker.faults().inject(Lost::Dropped.fault());
    let out = client
        .transaction()
        .guard(&lock.guard())
        .kv(|k| k.incr("reports", "runs", 1, Ttl::Forever))
        .commit()
        .await;
    assert_step_gate(&out);
    assert_eq!(counter(&broker, "reports", "runs").as_deref(), Some("1"));
    broker.shutdown().await;
}

#[tokio::test]
async fn an_expected_version_step_is_told_apart_from_a_refusal() {
    let (broker, _clock, client) = broker().await;
    client
        .kv()
        .put("carts", "c-1", &1, Ttl::Forever)
        .await
        .unwrap();
    let version = broker
        .inspect()
        .kv_row("carts", "c-1")
        .unwrap()
        .unwrap()
        .version;
    let step = || {
        client
            .transaction()
            .kv(|k| {
                k.put("carts", "c-1", &2, Ttl::Forever)
                    .expect(version)
                    .required()
            })
            .kv(|k| k.incr("stats", "cart-writes", 1, Ttl::Forever))
    };
    broker.faults().inject(Lost::Dropped.fault());
    // The resend finds the version moved: by its own first attempt, which the step
    // marker says, not by another writer.
    assert_step_gate(&step().commit().await);
    assert_eq!(
        counter(&broker, "stats", "cart-writes").as_deref(),
        Some("1")
    );
    // The same step sent again later is a refusal by its own condition.
    match step().commit().await.unwrap() {
        Commit::Gated { gate, retried, .. } => {
            assert_eq!(
                (gate.kind, gate.index, retried),
                (GateKind::Condition, 0, false)
            );
        }
        other => panic!("{other:?}"),
    }
    broker.shutdown().await;
}

#[tokio::test]
async fn a_step_of_completed_acks_alone_carries_no_marker() {
    let (broker, _clock, client) = broker().await;
    let msgs = batch(&client, 2).await;
    broker.faults().inject(Lost::Dropped.fault());
    let out = client.transaction().ack(&msgs[0]).commit().await.unwrap();
    // Acking twice is a no-op: the resend commits (a marker would have gated it).
    let c = out.committed().expect("the resend of a bare ack commits");
    assert!(c.retried);
    assert_eq!(broker.requests().matching(TXN).len(), 2);
    let cursor = broker
        .inspect()
        .cursor("orders", "p", "billing")
        .unwrap()
        .unwrap();
    assert_eq!(cursor.next_offset, 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_worker_with_batch_5_and_ack_incr_counts_5_for_5_messages() {
    for lost in BOTH {
        let (broker, _clock, client) = broker().await;
        client
            .push((0..5).map(|n| PushItem::new("orders", &n)).collect())
            .await
            .unwrap();
        broker.faults().inject(lost.fault());
        let summary = client
            .worker::<u32>("orders")
            .group("billing", StartAt::Beginning)
            .batch(5)
            .run_until_idle(|_msg, step| async move {
                Ok::<_, std::convert::Infallible>(
                    step.kv(|k| k.incr("tally", "n", 1, Ttl::Forever)),
                )
            })
            .await
            .unwrap();
        assert_eq!(
            counter(&broker, "tally", "n").as_deref(),
            Some("5"),
            "{lost:?}: {summary}"
        );
        assert_eq!(
            (summary.processed, summary.committed, summary.already_done),
            (5, 4, 1),
            "{lost:?}: {summary}"
        );
        broker.shutdown().await;
    }
}

#[tokio::test]
async fn resend_never_leaves_an_unguarded_step_unknown_and_applied_once() {
    let (broker, _clock, client) = broker().await;
    let msgs = batch(&client, 2).await;
    broker.faults().inject(Lost::Dropped.fault());
    let out = client
        .transaction()
        .ack(&msgs[0])
        .kv(|k| k.incr("stats", "n", 1, Ttl::Forever))
        .resend(queen_sdk::Resend::Never)
        .commit()
        .await;
    assert!(matches!(out, Err(Error::OutcomeUnknown { .. })), "{out:?}");
    assert_eq!(broker.requests().matching(TXN).len(), 1, "not resent");
    assert_eq!(counter(&broker, "stats", "n").as_deref(), Some("1"));
    broker.shutdown().await;
}
