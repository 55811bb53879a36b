//! The README's "Prove your worker", as a test, and a broken worker caught by a replayed
//! schedule. `QUEEN_VERIFY_SCHEDULES` raises the schedule count (CI runs a few dozen).

use queen_sdk::{Client, PushItem, StartAt};
use queen_verify::{Input, Invariant, Route, Schedule, Stop, WorkerCheck};
use serde_json::{Value, json};

/// Acks each order and pushes its receipt in one step: the receipt's id is derived
/// from the acked order, and the ack is fenced by its lease.
async fn receipts(
    client: Client,
    stop: Stop,
) -> Result<queen_sdk::Summary, queen_sdk::WorkerError> {
    client
        .worker::<Value>("orders")
        .group("billing", StartAt::Beginning)
        .run(
            move |msg, step| {
                let step = step.push("receipts", |p| p.payload(&msg.data));
                async move { Ok::<_, String>(step) }
            },
            stop,
        )
        .await
}

/// Pushes each receipt in a call of its own, under a random id, then acks: not atomic.
async fn receipts_apart(
    client: Client,
    stop: Stop,
) -> Result<queen_sdk::Summary, queen_sdk::WorkerError> {
    let steps = client.clone();
    client
        .worker::<Value>("orders")
        .group("billing", StartAt::Beginning)
        .run(
            move |msg, step| {
                let client = steps.clone();
                async move {
                    let receipt = PushItem::new("receipts", &msg.data)
                        .transaction_id(uuid::Uuid::new_v4().to_string());
                    client.push(vec![receipt]).await?;
                    Ok::<_, queen_sdk::Error>(step)
                }
            },
            stop,
        )
        .await
}

fn orders(check: WorkerCheck) -> WorkerCheck {
    check
        .group("billing")
        .inputs((1..=4).map(|n| Input::new("orders", &json!({"orderId": n}))))
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::pushed_once(
            "receipts",
            "orderId",
            (1..=4).map(|n| ("Default", n.to_string())),
        ))
        .invariant(Invariant::no_dead_letters())
}

#[tokio::test]
async fn my_worker_is_exactly_once_under_faults() {
    let verdict = orders(WorkerCheck::new(receipts))
        .schedules_from_env(16)
        .run()
        .await;
    assert!(verdict.passed(), "{verdict}");
}

#[tokio::test]
async fn a_worker_that_pushes_apart_from_its_ack_is_caught_by_a_lease_expiry() {
    // One replica: the message whose step was refused after its lease lapsed comes back
    // to the same worker, which pushes its receipt a second time.
    let schedule: Schedule = "transaction#1:lease-expiry".parse().unwrap();
    let broken = orders(WorkerCheck::new(receipts_apart)).replicas(1);
    let verdict = broken.replay(schedule.clone()).await;
    let c = verdict.counterexample.expect("the second receipt is found");
    assert_eq!(
        c.violation.invariant,
        "receipts: each expected orderId pushed exactly once"
    );
    assert!(c.violation.detail.contains("pushed 2 times"), "{c}");
    assert_eq!(c.schedule, schedule);
    assert!(c.to_string().contains("transaction#1:lease-expiry"));

    // The atomic worker rides out the same schedule.
    let good = orders(WorkerCheck::new(receipts)).replicas(1);
    let verdict = good.replay(schedule).await;
    assert!(verdict.passed(), "{verdict}");
    assert_eq!(verdict.faults_hit, 1);
}

#[test]
fn a_seed_draws_the_same_schedules_and_a_schedule_prints_and_parses_back() {
    let check = || orders(WorkerCheck::new(receipts)).seed(42);
    let drawn = check().drawn(50);
    assert_eq!(drawn, check().drawn(50));
    assert_ne!(drawn, check().seed(43).drawn(50));
    for s in &drawn {
        assert_eq!(&s.to_string().parse::<Schedule>().unwrap(), s);
        for f in s.faults() {
            assert!(matches!(
                f.route,
                Route::Transaction | Route::Pop | Route::Ack | Route::Push
            ));
            assert!((1..=6).contains(&f.nth), "{f}");
        }
    }
    assert!(drawn.iter().any(|s| s.len() > 1));
}
