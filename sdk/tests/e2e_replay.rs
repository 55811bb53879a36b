//! Workers that run for months: a replay after a fix produces each output once per
//! epoch, a saga's late loser learns who won, and deliveries older than the dedup
//! window are counted (or dead-lettered) as the worker was told.

use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_mock_broker::harness::Fault;
use queen_sdk::{
    Client, Commit, Epoch, GateKind, PastWindow, PushItem, QueueOptions, SeekTo, StartAt, Ttl,
};
use serde::{Deserialize, Serialize};

const TXN: &str = "/api/v1/transaction";

fn counter(broker: &MockBroker, ns: &str, key: &str) -> Option<String> {
    broker.inspect().kv_row(ns, key).unwrap().map(|r| r.value)
}

fn stored(broker: &MockBroker, queue: &str) -> usize {
    broker
        .inspect()
        .messages(queue, queen_sdk::DEFAULT_PARTITION)
        .unwrap()
        .len()
}

/// The saga's first step: a payment request, a `once` marker, a timeout timer and a
/// counter of runs, all from one order event.
async fn start_saga(worker: queen_sdk::Worker<String>, fixed: bool) -> queen_sdk::Summary {
    worker
        .run_until_idle(move |order, step| async move {
            let id = order.data.clone();
            // The bug: the first version asked for the wrong amount.
            let amount = if fixed { 100 } else { 10 };
            Ok::<_, String>(
                step.once("saga-started", &id, Ttl::days(30))
                    .push("payment-requests", |p| {
                        p.payload(&serde_json::json!({"order": id, "amount": amount}))
                    })
                    .timer("saga-timeouts", &id, |t| {
                        t.after(Duration::from_secs(1800)).payload(&id)
                    })
                    .kv(|k| k.incr("runs", "start-saga", 1, Ttl::Forever)),
            )
        })
        .await
        .unwrap()
}

#[tokio::test]
async fn a_replay_after_a_fix_produces_each_output_once_per_epoch() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    client
        .push(
            (1..=3)
                .map(|n| PushItem::new("orders", &format!("o-{n}")))
                .collect(),
        )
        .await
        .unwrap();
    let worker = || {
        client
            .worker::<String>("orders")
            .group("sagas", StartAt::Beginning)
    };

    let first = start_saga(worker(), false).await;
    assert_eq!((first.committed, first.already_done), (3, 0), "{first}");
    assert_eq!(stored(&broker, "payment-requests"), 3);

    // Replayed without an epoch: every step finds its marker, nothing is produced.
    assert_eq!(
        client
            .seek("sagas", "orders", SeekTo::Beginning)
            .await
            .unwrap(),
        1
    );
    let plain = start_saga(worker(), true).await;
    assert_eq!((plain.committed, plain.already_done), (0, 3), "{plain}");
    assert_eq!(stored(&broker, "payment-requests"), 3);

    // The fix, in a new epoch: each step runs again and produces its outputs once.
    let fix = Epoch::new("fix-1").unwrap();
    client
        .seek("sagas", "orders", SeekTo::Beginning)
        .await
        .unwrap();
    let replay = start_saga(worker().epoch(fix.clone()), true).await;
    assert_eq!((replay.committed, replay.already_done), (3, 0), "{replay}");
    let requests = broker
        .inspect()
        .messages("payment-requests", queen_sdk::DEFAULT_PARTITION)
        .unwrap();
    let amounts: Vec<i64> = requests
        .iter()
        .map(|m| m.data["amount"].as_i64().unwrap())
        .collect();
    assert_eq!(amounts, [10, 10, 10, 100, 100, 100]);
    assert_eq!(counter(&broker, "runs", "start-saga").as_deref(), Some("6"));
    assert_eq!(broker.inspect().timers("saga-timeouts").unwrap().len(), 3);

    // The same epoch again (a second replay, a redelivery): already done, nothing new.
    client
        .seek("sagas", "orders", SeekTo::Beginning)
        .await
        .unwrap();
    let again = start_saga(worker().epoch(fix), true).await;
    assert_eq!((again.committed, again.already_done), (0, 3), "{again}");
    assert_eq!(stored(&broker, "payment-requests"), 6);
    assert_eq!(counter(&broker, "runs", "start-saga").as_deref(), Some("6"));

    // Another epoch, another run.
    client
        .seek("sagas", "orders", SeekTo::Beginning)
        .await
        .unwrap();
    let second_fix = start_saga(worker().epoch(Epoch::new("fix-2").unwrap()), true).await;
    assert_eq!(second_fix.committed, 3, "{second_fix}");
    assert_eq!(stored(&broker, "payment-requests"), 9);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_resend_inside_an_epoch_is_still_a_duplicate() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    client
        .push(
            (1..=2)
                .map(|n| PushItem::new("orders", &format!("o-{n}")))
                .collect(),
        )
        .await
        .unwrap();
    // The first commit applies and its answer is lost; the SDK sends it again.
    broker.faults().inject(Fault::commit_then_drop().on(TXN));
    let summary = client
        .worker::<String>("orders")
        .epoch(Epoch::new("fix-1").unwrap())
        .run_until_idle(|order, step| async move {
            let id = order.data.clone();
            Ok::<_, String>(step.push("payment-requests", |p| p.payload(&id)))
        })
        .await
        .unwrap();
    assert_eq!(stored(&broker, "payment-requests"), 2, "{summary}");
    assert_eq!(summary.committed + summary.already_done, 2, "{summary}");
    broker.shutdown().await;
}

#[tokio::test]
async fn an_epoch_changes_derived_ids_and_marker_keys_and_nothing_else() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let real = Client::new(broker.url()).unwrap();
    real.push(vec![PushItem::new("orders", &"o-1")])
        .await
        .unwrap();
    let msg = real.pop::<String>("orders").send().await.unwrap().remove(0);
    let step = || {
        real.transaction()
            .ack(&msg)
            .once("paid", "o-1", Ttl::days(1))
            .kv(|k| k.put("orders", "o-1", &"paid", Ttl::days(1)))
            .push("receipts", |p| p.payload(&"r"))
            .push("audit", |p| p.transaction_id("mine").payload(&"a"))
            .timer("reminders", "o-1", |t| t.after(Duration::from_secs(60)))
    };
    let fix = Epoch::new("fix-1").unwrap();
    let plain = step().to_body().unwrap();
    let in_fix = step().epoch(&fix).to_body().unwrap();
    let in_fix_again = step().epoch(&fix).to_body().unwrap();
    let in_fix2 = step()
        .epoch(&Epoch::new("fix-2").unwrap())
        .to_body()
        .unwrap();
    let push_id =
        |b: &serde_json::Value, i: usize| b["operations"][i]["items"][0]["transactionId"].clone();
    // Derived: stable within an epoch, different across epochs and from none.
    assert_eq!(push_id(&in_fix, 1), push_id(&in_fix_again, 1));
    assert_ne!(push_id(&in_fix, 1), push_id(&plain, 1));
    assert_ne!(push_id(&in_fix, 1), push_id(&in_fix2, 1));
    assert_eq!(in_fix["timers"][0]["txn"], in_fix_again["timers"][0]["txn"]);
    assert_ne!(in_fix["timers"][0]["txn"], plain["timers"][0]["txn"]);
    // The user's own id and other keys are the user's.
    assert_eq!(push_id(&in_fix, 2), "mine");
    assert_eq!(in_fix["kv"][1]["key"], "o-1");
    // The marker's key carries the epoch.
    assert_eq!(plain["kv"][0]["key"], "o-1");
    assert_eq!(in_fix["kv"][0]["key"], "o-1@fix-1");
    broker.shutdown().await;
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct SagaEvent {
    order: String,
    /// `paid` (the payment service answered) or `timed-out` (the saga's timer fired).
    outcome: String,
}

#[tokio::test]
async fn the_late_payment_knows_the_timeout_won_and_refunds() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let event = |outcome: &str| {
        PushItem::new(
            "saga-events",
            &SagaEvent {
                order: "o-7".into(),
                outcome: outcome.into(),
            },
        )
    };
    // The timeout fires first; the payment result arrives late.
    client
        .push(vec![event("timed-out"), event("paid"), event("timed-out")])
        .await
        .unwrap();
    let summary = client
        .worker::<SagaEvent>("saga-events")
        .on_refused(|msg, gate| async move {
            match (gate.kind, gate.lost_to()) {
                // The other outcome won: a captured payment must go back.
                (GateKind::Once, Some(winner)) if winner == "timed-out" => {
                    Ok(msg.step().push("refunds", |p| p.payload(&msg.data.order)))
                }
                _ => Err(format!("unexpected refusal: {gate}")),
            }
        })
        .run_until_idle(|msg, step| async move {
            let e = &msg.data;
            Ok::<_, String>(
                step.once_as("saga-outcome", &e.order, &e.outcome, Ttl::days(30))
                    .kv(|k| k.put("sagas", &e.order, &e.outcome, Ttl::days(30))),
            )
        })
        .await
        .unwrap();
    // The timeout committed; the late payment was refused and refunded; the repeated
    // timeout (a duplicate event) found its own outcome: already done.
    assert_eq!(
        (summary.committed, summary.refused, summary.already_done),
        (1, 1, 1),
        "{summary}"
    );
    assert_eq!(stored(&broker, "refunds"), 1);
    assert_eq!(
        counter(&broker, "sagas", "o-7").as_deref(),
        Some("\"timed-out\"")
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_once_gate_tells_its_own_run_from_the_other_outcome() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let settle = |outcome: &'static str| {
        client
            .transaction()
            .once_as("saga-outcome", "o-1", &outcome, Ttl::days(1))
    };
    assert!(settle("paid").commit().await.unwrap().is_committed());
    let Commit::Gated { gate, .. } = settle("paid").commit().await.unwrap() else {
        panic!("the marker exists")
    };
    assert!(gate.already_done());
    assert_eq!(gate.lost_to(), None);
    let Commit::Gated { gate, .. } = settle("timed-out").commit().await.unwrap() else {
        panic!("the marker exists")
    };
    assert!(!gate.already_done(), "{gate}");
    assert_eq!(gate.lost_to(), Some(&serde_json::json!("paid")));
    // A plain `once` on the same key stores `true`: it cannot tell, and is done.
    let Commit::Gated { gate, .. } = client
        .transaction()
        .once("saga-outcome", "o-1", Ttl::days(1))
        .commit()
        .await
        .unwrap()
    else {
        panic!("the marker exists")
    };
    assert_eq!((gate.lost_to(), gate.already_done()), (None, true));
    broker.shutdown().await;
}

#[tokio::test]
async fn deliveries_older_than_the_dedup_window_are_counted_and_handled_as_told() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    for q in ["old-process", "old-dlq", "old-declared"] {
        client
            .configure(q, QueueOptions::new().dedup_window(Duration::from_secs(1)))
            .await
            .unwrap();
        client.push(vec![PushItem::new(q, &1)]).await.unwrap();
    }
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    // One fresh message beside the old one: not counted.
    client
        .push(vec![PushItem::new("old-process", &2)])
        .await
        .unwrap();
    let worker = |q: &'static str, policy| client.worker::<u32>(q).past_dedup_window(policy);
    let charge = |n: queen_sdk::Delivery<u32>, step: queen_sdk::TransactionBuilder| async move {
        let n = n.data;
        Ok::<_, String>(step.push("charges", |p| p.payload(&n)))
    };

    let processed = worker("old-process", PastWindow::Process)
        .run_until_idle(charge)
        .await
        .unwrap();
    assert_eq!(
        (processed.past_dedup_window, processed.committed),
        (1, 2),
        "{processed}"
    );
    assert!(
        processed.to_string().contains("past the dedup window 1"),
        "{processed}"
    );

    let dead = worker("old-dlq", PastWindow::DeadLetter)
        .run_until_idle(charge)
        .await
        .unwrap();
    assert_eq!(
        (dead.past_dedup_window, dead.dead_lettered, dead.processed),
        (1, 1, 0),
        "{dead}"
    );
    let dlq = client
        .dlq::<u32>(queen_sdk::DlqQuery::queue("old-dlq"))
        .await
        .unwrap();
    let why = dlq.messages[0].error_message.clone().unwrap_or_default();
    assert!(why.contains("dedup window"), "{why}");

    // A declared window overrides the queue's: a day, so nothing is past it.
    let declared = worker("old-declared", PastWindow::DeadLetter)
        .dedup_window(Duration::from_secs(86_400))
        .run_until_idle(charge)
        .await
        .unwrap();
    assert_eq!(
        (declared.past_dedup_window, declared.committed),
        (0, 1),
        "{declared}"
    );
    broker.shutdown().await;
}
