//! A check against a broker by URL: the worker's replicas talk to the check's fault
//! proxy, the invariants read the broker's public API. The broker is this project's,
//! started in process on an ephemeral port and used only by its URL (its harness is
//! off); set `QUEEN_URL` (and `QUEEN_TOKEN`) to run the same tests against a broker CI
//! started. Each test uses queues of its own, so they can share one.
//! `QUEEN_VERIFY_SCHEDULES` raises the schedule count.

use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_sdk::{Client, PushItem, StartAt, Ttl};
use queen_verify::{
    Broker, FaultKind, FaultPlan, Input, Invariant, Resources, Route, Schedule, Stop, WorkerCheck,
};
use serde_json::{Value, json};

/// The broker to check against: `QUEEN_URL`, or one of this project's started here
/// (kept alive by the returned handle).
async fn broker() -> (Option<MockBroker>, String) {
    if let Ok(url) = std::env::var("QUEEN_URL") {
        return (None, url);
    }
    let b = MockBroker::builder()
        .harness(false)
        .start()
        .await
        .expect("a broker on an ephemeral port");
    let url = b.url();
    (Some(b), url)
}

fn target(url: &str, resets: Resources) -> Broker {
    let b = Broker::url(url, resets);
    match std::env::var("QUEEN_TOKEN") {
        Ok(t) => b.token(t),
        Err(_) => b,
    }
}

/// Acks each order and pushes its receipt in one step (`receipts` in
/// prove_your_worker.rs), on queues named for the test.
fn receipts(orders: &'static str, out: &'static str) -> WorkerCheck {
    WorkerCheck::new(move |client: Client, stop: Stop| async move {
        client
            .worker::<Value>(orders)
            .group(orders, StartAt::Beginning)
            .run(
                move |msg, step| {
                    let step = step.push(out, |p| p.payload(&msg.data));
                    async move { Ok::<_, String>(step) }
                },
                stop,
            )
            .await
    })
}

/// Pushes each receipt in a call of its own, under a random id, then acks: not atomic
/// (`receipts_apart` in prove_your_worker.rs).
fn receipts_apart(orders: &'static str, out: &'static str) -> WorkerCheck {
    WorkerCheck::new(move |client: Client, stop: Stop| async move {
        let steps = client.clone();
        client
            .worker::<Value>(orders)
            .group(orders, StartAt::Beginning)
            .run(
                move |msg, step| {
                    let client = steps.clone();
                    async move {
                        let receipt = PushItem::new(out, &msg.data)
                            .transaction_id(uuid::Uuid::new_v4().to_string());
                        client.push(vec![receipt]).await?;
                        Ok::<_, queen_sdk::Error>(step)
                    }
                },
                stop,
            )
            .await
    })
}

/// The group is named after the input queue: a check resets its group on every queue,
/// so tests sharing a broker each have their own.
fn orders(check: WorkerCheck, orders: &str, out: &str) -> WorkerCheck {
    check
        .group(orders)
        .inputs((1..=4).map(|n| Input::new(orders, &json!({"orderId": n}))))
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::pushed_once(
            out,
            "orderId",
            (1..=4).map(|n| ("Default", n.to_string())),
        ))
        .invariant(Invariant::no_dead_letters())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_correct_worker_is_proven_by_url_under_proxy_faults() {
    let (_broker, url) = broker().await;
    let check = orders(receipts("orders-a", "receipts-a"), "orders-a", "receipts-a")
        .seed(7)
        .schedules_from_env(6)
        .against(target(&url, Resources::new().queues(["receipts-a"])));
    // The drawn schedules fault calls every run makes (each of the 4 orders takes a
    // transaction at least, and the first pop is always made): the proxy must have done
    // some of them.
    let made = check.drawn(6).iter().any(|s| {
        s.faults().iter().any(|f| match f.route {
            Route::Transaction => f.nth <= 4,
            Route::Pop => f.nth == 1,
            _ => false,
        })
    });
    assert!(
        made,
        "seed 7 faults a call every run makes: {:?}",
        check.drawn(6)
    );
    let verdict = check.run().await;
    assert!(verdict.passed(), "{verdict}");
    assert!(verdict.faults_hit > 0, "{verdict}");
    assert!(verdict.schedules >= 6, "{verdict}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_pushes_apart_from_its_ack_is_caught_by_url() {
    let (_broker, url) = broker().await;
    // The second receipt's push applies, its answer is lost and the replica restarted:
    // the order comes back once its lease lapses, and a second receipt is pushed.
    let schedule: Schedule = "push#2:worker-restart".parse().unwrap();
    let broken = orders(
        receipts_apart("orders-b", "receipts-b"),
        "orders-b",
        "receipts-b",
    )
    .replicas(1)
    .against(target(&url, Resources::new().queues(["receipts-b"])));
    let verdict = broken.replay(schedule.clone()).await;
    let c = verdict.counterexample.expect("the second receipt is found");
    assert_eq!(
        c.violation.invariant,
        "receipts-b: each expected orderId pushed exactly once"
    );
    assert!(c.violation.detail.contains("pushed 2 times"), "{c}");
    assert_eq!(verdict.faults_hit, 1, "{c}");
    assert!(c.to_string().contains("push#2:worker-restart"), "{c}");

    // The atomic worker rides out the same schedule, against the same broker (reset
    // between the runs).
    let good = orders(receipts("orders-b", "receipts-b"), "orders-b", "receipts-b")
        .replicas(1)
        .against(target(&url, Resources::new().queues(["receipts-b"])));
    let verdict = good
        .replay("transaction#2:worker-restart".parse().unwrap())
        .await;
    assert!(verdict.passed(), "{verdict}");
    assert_eq!(verdict.faults_hit, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invariant_that_inspects_storage_could_not_run_by_url() {
    let (_broker, url) = broker().await;
    let storage = Invariant::new("receipts in storage", |s| {
        let n = s
            .inspect()
            .messages("receipts-c", "Default")
            .map_err(|e| e.to_string())?
            .len();
        if n == 4 {
            Ok(())
        } else {
            Err(format!("{n} receipts"))
        }
    });
    let check = orders(receipts("orders-c", "receipts-c"), "orders-c", "receipts-c")
        .invariant(storage)
        .schedules(3)
        .against(target(&url, Resources::new().queues(["receipts-c"])));
    let verdict = check.run().await;
    assert!(verdict.counterexample.is_none(), "not a catch: {verdict}");
    let why = verdict.could_not_run.as_ref().expect("could not run");
    assert!(why.cause.contains("could not be set up"), "{why}");
    assert!(why.cause.contains("\"receipts in storage\""), "{why}");
    assert!(why.cause.contains("State::inspect()"), "{why}");
    assert_eq!(verdict.schedules, 1, "reported at once: {why}");
    assert_eq!(verdict.violations(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invariant_reading_a_queue_the_check_does_not_reset_could_not_run() {
    let (_broker, url) = broker().await;
    let check = orders(receipts("orders-d", "receipts-d"), "orders-d", "receipts-d")
        .against(target(&url, Resources::new()));
    let verdict = check.replay(Schedule::new()).await;
    assert!(verdict.counterexample.is_none(), "not a catch: {verdict}");
    let why = verdict.could_not_run.expect("could not run");
    assert!(why.cause.contains("could not be set up"), "{why}");
    assert!(
        why.cause
            .contains("reads queue \"receipts-d\" (add it with Resources::queues)"),
        "{why}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_schedule_starts_from_a_reset_broker() {
    let (_broker, url) = broker().await;
    // Each order adds one to a tally and sets a reminder: had the namespace and the
    // timers not been reset, the second schedule would find 6 of each.
    let check = WorkerCheck::new(|client: Client, stop: Stop| async move {
        client
            .worker::<Value>("orders-e")
            .group("tally", StartAt::Beginning)
            .run(
                move |msg, step| {
                    let key = msg.transaction_id.clone();
                    let step = step
                        .kv(|k| k.incr("tally-e", "count", 1, Ttl::Forever))
                        .timer("reminders-e", &key, |t| {
                            t.after(Duration::from_secs(3600)).payload(&key)
                        });
                    async move { Ok::<_, String>(step) }
                },
                stop,
            )
            .await
    })
    .group("tally")
    .inputs((1..=3).map(|n| Input::new("orders-e", &json!({"orderId": n}))))
    .invariant(Invariant::inputs_acked())
    .invariant(Invariant::kv_equals("tally-e", "count", json!(3)))
    .invariant(Invariant::new("a reminder per order", |s| {
        let n = s.timers("reminders-e").map_err(|e| e.to_string())?.len();
        if n == 3 {
            Ok(())
        } else {
            Err(format!("{n} reminders"))
        }
    }))
    // Delays only: an ungated incr applied twice is another test's business.
    .faults(FaultPlan::only([FaultKind::Delay]))
    .schedules(3)
    .against(target(
        &url,
        Resources::new()
            .kv_namespaces(["tally-e"])
            .timer_queues(["reminders-e"]),
    ));
    let verdict = check.run().await;
    assert!(verdict.passed(), "{verdict}");
    assert_eq!(verdict.schedules, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_refuses_to_reset_what_it_did_not_make_unless_allowed() {
    let (_broker, url) = broker().await;
    let mut admin = Client::builder().url(&url);
    if let Ok(t) = std::env::var("QUEEN_TOKEN") {
        admin = admin.token(t);
    }
    let admin = admin.build().unwrap();
    let listed = |q: &'static str| {
        let admin = admin.clone();
        async move {
            admin
                .messages(queen_sdk::MessageQuery::queue(q))
                .await
                .unwrap()
                .messages
                .len()
        }
    };
    // Someone's message, pushed by hand to a queue the check's worker pushes to.
    admin
        .push(vec![PushItem::new("receipts-f", &json!({"by": "hand"}))])
        .await
        .unwrap();
    let check = || {
        orders(receipts("orders-f", "receipts-f"), "orders-f", "receipts-f")
            .schedules(2)
            .faults(FaultPlan::only([FaultKind::Delay]))
    };
    let resets = || Resources::new().queues(["receipts-f"]);

    let verdict = check().against(target(&url, resets())).run().await;
    let Some(why) = verdict.could_not_run.as_ref() else {
        panic!("refused, not run: {verdict}");
    };
    assert_eq!(verdict.outcome().code(), 2, "{verdict}");
    assert!(
        why.cause.contains("the queue receipts-f (1 message)"),
        "names the queue and what it holds: {why}"
    );
    assert!(why.cause.contains("--allow-reset"), "{why}");
    assert_eq!(verdict.schedules, 1, "{why}");
    assert_eq!(
        listed("receipts-f").await,
        1,
        "the hand-pushed message survives"
    );
    assert_eq!(listed("orders-f").await, 0, "no input pushed: {why}");

    // Allowed, it deletes the message and proves the worker; after its last schedule
    // it deletes what it made, so a check that follows on the same names (as
    // verify-shapes follows verify-worker in CI) is not refused.
    let verdict = check()
        .against(target(&url, resets()).allow_reset())
        .run()
        .await;
    assert!(verdict.passed(), "{verdict}");
    assert_eq!(listed("receipts-f").await, 0, "what the check made is gone");
    assert_eq!(listed("orders-f").await, 0, "its inputs too");
    let verdict = check().against(target(&url, resets())).run().await;
    assert!(verdict.passed(), "{verdict}");
}
