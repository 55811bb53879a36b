//! A worker that depends on existing state, proven with the run's initial state seeded
//! by `WorkerCheck::setup` and `WorkerCheck::kv_row`: an inventory worker that takes
//! one unit of stock per order in the same step as its ack. Also: the setup's calls are
//! neither faulted nor counted, it is applied on every run (replays and shrinking
//! included) and not again after a broker restart, and its failure is reported as a
//! setup failure. `QUEEN_VERIFY_SCHEDULES` raises the schedule count.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use queen_sdk::{Client, PushItem, Resend, StartAt, Ttl};
use queen_verify::{
    Event, Input, Invariant, Route, Schedule, Stop, TraceEntry, Verdict, WorkerCheck,
};
use serde_json::{Value, json};

/// Takes one unit of `stock/sku-1` per order, in the step that acks it, gated by a
/// marker derived from the order: a resend of a step that committed (its answer lost)
/// writes nothing.
async fn reserve(client: Client, stop: Stop) -> Result<queen_sdk::Summary, queen_sdk::WorkerError> {
    client
        .worker::<Value>("orders")
        .group("inventory", StartAt::Beginning)
        .run(
            move |msg, step| {
                let marker = format!("{}-reserved", msg.transaction_id);
                let step = step
                    .once("reserved", &marker, Ttl::days(1))
                    .kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required());
                async move { Ok::<_, String>(step) }
            },
            stop,
        )
        .await
}

/// The same step without the marker, resent as it is (`Resend::AsIs`). Its ack is
/// fenced, but a fenced ack of a message already acked is a no-op while the rest of its
/// batch holds the lease (`spec/transaction.md`: only a released lease rolls the
/// resend back), and its condition is as true on the resend, so the resend of a step
/// whose answer was lost takes a second unit. With the default `Resend::Marked` the SDK's step
/// marker gates that resend.
async fn reserve_ungated(
    client: Client,
    stop: Stop,
    resend_as_is: bool,
) -> Result<queen_sdk::Summary, queen_sdk::WorkerError> {
    client
        .worker::<Value>("orders")
        .group("inventory", StartAt::Beginning)
        .run(
            move |_msg, step| {
                let step = step
                    .kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required())
                    .resend(if resend_as_is {
                        Resend::AsIs
                    } else {
                        Resend::Marked
                    });
                async move { Ok::<_, String>(step) }
            },
            stop,
        )
        .await
}

/// Four orders against a stock of 10 (enough for all, see the runtime's handling of a
/// gated step): exactly 4 units taken, whatever the faults.
fn reservations(check: WorkerCheck) -> WorkerCheck {
    check
        .group("inventory")
        .inputs((1..=4).map(|n| Input::new("orders", &json!({"orderId": n}))))
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::kv_equals("stock", "sku-1", json!(6)))
        .invariant(Invariant::no_dead_letters())
}

/// Seeds the stock with the general hook.
async fn seed_stock(client: Client) -> Result<(), queen_verify::SetupError> {
    client.kv().put("stock", "sku-1", &10, Ttl::Forever).await?;
    Ok(())
}

#[tokio::test]
async fn a_reservation_worker_is_exactly_once_with_its_stock_seeded_by_a_setup_hook() {
    let verdict = reservations(WorkerCheck::new(reserve).setup(seed_stock))
        .schedules_from_env(8)
        .run()
        .await;
    assert!(verdict.passed(), "{verdict}");
}

#[tokio::test]
async fn the_ungated_reservation_resent_as_is_is_caught_taking_a_unit_twice() {
    let schedule: Schedule = "transaction#1:commit-then-drop".parse().unwrap();
    let as_is = |client, stop| reserve_ungated(client, stop, true);
    let check = reservations(WorkerCheck::new(as_is).setup(seed_stock)).replicas(1);
    let verdict = check.replay(schedule.clone()).await;
    let c = verdict
        .counterexample
        .as_ref()
        .expect("the second unit is found");
    assert_eq!(c.violation.invariant, "kv stock/sku-1 = 6", "{verdict}");
    assert_eq!(
        c.violation.detail, "stock/sku-1 = 5, expected 6",
        "{verdict}"
    );

    // The gated worker rides out the same schedule, and so does the ungated one when
    // the SDK's step marker guards its resend.
    let check = reservations(WorkerCheck::new(reserve).setup(seed_stock)).replicas(1);
    let verdict = check.replay(schedule.clone()).await;
    assert!(verdict.passed(), "{verdict}");
    assert_eq!(verdict.faults_hit, 1);
    let marked = |client, stop| reserve_ungated(client, stop, false);
    let check = reservations(WorkerCheck::new(marked).setup(seed_stock)).replicas(1);
    let verdict = check.replay(schedule).await;
    assert!(verdict.passed(), "{verdict}");
    assert_eq!(verdict.faults_hit, 1);
}

#[tokio::test]
async fn a_kv_row_seeds_the_same_state_and_a_broker_restart_keeps_it_without_seeding_again() {
    let check = reservations(WorkerCheck::new(reserve).kv_row("stock", "sku-1", &10, Ttl::Forever));
    // A restart after the third step: seeding again would put the stock back to 10
    // with two units already taken, and the run would end at 8.
    for schedule in [
        "none",
        "transaction#3:broker-restart",
        "transaction#2:commit-then-drop",
        "transaction#1:lease-expiry",
    ] {
        let verdict = check.replay(schedule.parse().unwrap()).await;
        assert!(verdict.passed(), "{schedule}: {verdict}");
    }
    let verdict = check
        .replay("transaction#3:broker-restart".parse().unwrap())
        .await;
    assert_eq!(verdict.faults_hit, 1, "{verdict}");
}

#[tokio::test]
async fn the_setup_calls_are_neither_faulted_nor_counted() {
    // The setup calls every route a schedule can fault: a step, a standalone push, a
    // standalone KV write. Were they counted, `transaction#1` would be the setup's step.
    let setup = |client: Client| async move {
        let step = client
            .transaction()
            .push("audit", |p| p.payload(&json!({"seeded": "stock"})))
            .commit()
            .await?;
        assert!(step.committed().is_some());
        client
            .push(vec![PushItem::new("audit", &json!({"seeded": "catalog"}))])
            .await?;
        client.kv().put("stock", "sku-1", &10, Ttl::Forever).await?;
        Ok(())
    };
    // The last invariant always breaks, so the verdict carries the run's trace.
    let check = reservations(WorkerCheck::new(reserve).setup(setup))
        .replicas(1)
        .invariant(Invariant::new("show the trace", |_| Err("shown".into())));
    let schedule: Schedule = "transaction#1:commit-then-drop, push#1:unavailable, kv#1:unavailable"
        .parse()
        .unwrap();
    let verdict = check.replay(schedule).await;
    let c = verdict.counterexample.as_ref().expect("the probe breaks");
    // Every real invariant held, stock included: the setup ran, and in full.
    assert_eq!(c.violation.invariant, "show the trace", "{verdict}");
    // Only the worker's first step was hit; the setup's push and KV write were not.
    assert_eq!(verdict.faults_hit, 1, "{verdict}");
    assert!(
        matches!(
            c.trace.first(),
            Some(TraceEntry::Event(Event::Setup {
                kv_rows: 0,
                hooks: 1,
                ..
            }))
        ),
        "{verdict}"
    );
    let calls: Vec<_> = c
        .trace
        .iter()
        .filter_map(|e| match e {
            TraceEntry::Call(call) => Some(call),
            TraceEntry::Event(_) => None,
        })
        .collect();
    assert!(
        calls.iter().all(|call| call.replica == Some(0)),
        "{verdict}"
    );
    let hit: Vec<_> = calls.iter().filter(|call| call.fault.is_some()).collect();
    assert_eq!(hit.len(), 1, "{verdict}");
    assert_eq!(
        (hit[0].route, hit[0].nth),
        (Route::Transaction, 1),
        "{verdict}"
    );
    let first_step = calls.iter().find(|call| call.route == Route::Transaction);
    assert!(
        first_step.is_some_and(|call| call.fault.is_some()),
        "{verdict}"
    );
}

/// The first seed from 0 whose first schedule has a fault, so a failure shrinks.
fn seed_with_faults(check: &WorkerCheck) -> u64 {
    (0..)
        .find(|&s| !check.clone().seed(s).drawn(1)[0].is_empty())
        .expect("a seed with a fault")
}

#[test]
fn the_setup_runs_once_on_every_run_including_each_shrinking_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&runs);
    let check = reservations(WorkerCheck::new(reserve))
        .setup(move |client| {
            counted.fetch_add(1, Ordering::SeqCst);
            seed_stock(client)
        })
        // Breaks on every run, after the stock (which every run must have had).
        .invariant(Invariant::new("always broken", |_| Err("probe".into())))
        .schedules(1)
        .max_shrink_runs(3);
    let check = check.clone().seed(seed_with_faults(&check));
    let verdict: Verdict = check.run_blocking();
    let c = verdict.counterexample.as_ref().expect("the probe breaks");
    assert_eq!(c.violation.invariant, "always broken", "{verdict}");
    assert!(c.shrink_runs > 0, "{verdict}");
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1 + c.shrink_runs as usize,
        "{verdict}"
    );

    // A replay runs it once more.
    let before = runs.load(Ordering::SeqCst);
    let _ = check.replay_blocking(c.schedule.clone());
    assert_eq!(runs.load(Ordering::SeqCst), before + 1);
}

#[tokio::test]
async fn a_setup_error_is_reported_as_a_setup_failure_without_shrinking() {
    let check = reservations(WorkerCheck::new(reserve))
        .kv_row("stock", "sku-1", &10, Ttl::Forever)
        .setup(|client: Client| async move {
            // The row above is there (rows and hooks run in the order given)...
            let stock = client.kv().get::<i64>("stock", "sku-1").await?;
            assert_eq!(stock.map(|r| r.value), Some(10));
            // ... but the catalogue the worker would need is not.
            Err("no catalogue entry for sku-1".into())
        })
        .schedules(4);
    let verdict = check.run().await;
    assert!(!verdict.passed());
    assert_eq!(verdict.schedules, 1, "it stops at the first run: {verdict}");
    // Could not run, with its cause: never a violation, never a catch.
    assert!(verdict.counterexample.is_none(), "{verdict}");
    assert_eq!(verdict.violations(), 0);
    assert_eq!(verdict.outcome(), queen_verify::Outcome::CouldNotRun);
    let why = verdict.could_not_run.as_ref().expect("a setup failure");
    assert_eq!(
        why.cause,
        "the run could not be set up (the worker never started): setup hook 1 failed: no catalogue entry for sku-1"
    );
    assert_eq!(why.at.as_ref().map(|(case, _)| *case), Some(1));
    let report = verdict.to_string();
    assert!(report.contains("could not run"), "{report}");
    assert!(
        report.contains("nothing proven, nothing caught"),
        "{report}"
    );
    assert!(!report.contains("violations"), "{report}");
}

#[tokio::test]
async fn a_panicking_or_endless_setup_hook_is_reported_too() {
    let panics = WorkerCheck::new(reserve)
        .invariant(Invariant::inputs_acked())
        .setup(|_client| async move { panic!("the fixture file is missing") });
    let verdict = panics.replay(Schedule::new()).await;
    let why = verdict.could_not_run.expect("a setup failure");
    assert!(
        why.cause
            .ends_with("setup hook 1 panicked: the fixture file is missing"),
        "{why}"
    );

    let endless = WorkerCheck::new(reserve)
        .invariant(Invariant::inputs_acked())
        .run_timeout(std::time::Duration::from_millis(200))
        .setup(|_client| std::future::pending());
    let verdict = endless.replay(Schedule::new()).await;
    let why = verdict.could_not_run.expect("a setup failure");
    assert!(
        why.cause
            .contains("setup hook 1 did not finish within 200ms"),
        "{why}"
    );
}
