//! A worker closure that runs a worker per queue under one proof: each gets a clone of
//! the verifier's `Stop` (or the set gets its token), and all of them stop at the end
//! of the run.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use queen_sdk::{Client, StartAt, WorkerSet};
use queen_verify::{Input, Invariant, Schedule, Stop, WorkerCheck};
use serde_json::{Value, json};

/// How many worker closures started, and how many returned because every worker in
/// them stopped.
#[derive(Default)]
struct Ends {
    started: AtomicUsize,
    returned: AtomicUsize,
}

fn two_queues(check: WorkerCheck) -> WorkerCheck {
    check
        .group("saga")
        .inputs((1..=3).map(|n| Input::new("orders", &json!({"order": n}))))
        .inputs((1..=2).map(|n| Input::new("payments", &json!({"payment": n}))))
        .invariant(Invariant::inputs_acked())
}

#[tokio::test]
async fn workers_given_clones_of_one_stop_all_stop_at_the_end_of_the_run() {
    let ends = Arc::new(Ends::default());
    let seen = ends.clone();
    let check = two_queues(WorkerCheck::new(move |client: Client, stop: Stop| {
        let ends = seen.clone();
        async move {
            ends.started.fetch_add(1, Ordering::SeqCst);
            let handle =
                |_msg: queen_sdk::Delivery<Value>, step| async move { Ok::<_, String>(step) };
            let orders = client
                .worker::<Value>("orders")
                .group("saga", StartAt::Beginning)
                .run(handle, stop.clone());
            let payments = client
                .worker::<Value>("payments")
                .group("saga", StartAt::Beginning)
                .run(handle, stop);
            let (orders, payments) = tokio::join!(orders, payments);
            ends.returned.fetch_add(1, Ordering::SeqCst);
            orders.and(payments).map(|_| ()).map_err(|e| e.to_string())
        }
    }));
    let verdict = check.replay(Schedule::new()).await;
    assert!(verdict.passed(), "{verdict}");
    let (started, returned) = (
        ends.started.load(Ordering::SeqCst),
        ends.returned.load(Ordering::SeqCst),
    );
    assert!(started >= 1);
    assert_eq!(returned, started, "every closure's two workers stopped");
}

#[tokio::test]
async fn a_worker_set_on_the_stops_token_stops_at_the_end_of_the_run() {
    let ends = Arc::new(Ends::default());
    let seen = ends.clone();
    let check = two_queues(WorkerCheck::new(move |client: Client, stop: Stop| {
        let ends = seen.clone();
        async move {
            ends.started.fetch_add(1, Ordering::SeqCst);
            let mut workers = WorkerSet::new(stop.token());
            for queue in ["orders", "payments"] {
                workers.spawn(
                    queue,
                    client
                        .worker::<Value>(queue)
                        .group("saga", StartAt::Beginning),
                    |_msg, step| async move { Ok::<_, String>(step) },
                );
            }
            let joined = workers.join().await;
            ends.returned.fetch_add(1, Ordering::SeqCst);
            joined.map(|_| ()).map_err(|e| e.to_string())
        }
    }));
    let verdict = check.replay(Schedule::new()).await;
    assert!(verdict.passed(), "{verdict}");
    let (started, returned) = (
        ends.started.load(Ordering::SeqCst),
        ends.returned.load(Ordering::SeqCst),
    );
    assert!(started >= 1);
    assert_eq!(returned, started, "every closure's set stopped");
}
