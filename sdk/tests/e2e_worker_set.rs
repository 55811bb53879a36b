//! End to end against the in-process reference broker: workers on several queues
//! under one shutdown signal (`WorkerSet`, a `CancellationToken`), stopped together,
//! and all stopped when one fails.

mod quick;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role};
use queen_sdk::{
    CancellationToken, Client, PushItem, StartAt, Stopped, WorkerErrorKind, WorkerSet,
};

fn client(broker: &MockBroker, token: &str) -> Client {
    quick::client(broker, Some(token))
}

async fn broker() -> MockBroker {
    MockBroker::builder()
        .auth(
            Auth::new()
                .token("writer", Role::ReadWrite, "acme", None)
                .token("reader", Role::ReadOnly, "acme", None),
        )
        .start()
        .await
        .unwrap()
}

/// A handler that counts its messages and commits their steps.
fn counting(
    count: &Arc<AtomicUsize>,
) -> impl Fn(
    queen_sdk::Delivery<u32>,
    queen_sdk::TransactionBuilder,
) -> std::future::Ready<Result<queen_sdk::TransactionBuilder, String>>
+ Send
+ Sync
+ 'static {
    let count = count.clone();
    move |_, step| {
        count.fetch_add(1, Ordering::SeqCst);
        std::future::ready(Ok(step))
    }
}

async fn until(what: &str, cond: impl Fn() -> bool) {
    let give_up = tokio::time::Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(tokio::time::Instant::now() < give_up, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn two_workers_on_two_queues_stop_together_on_one_signal() {
    let broker = broker().await;
    let client = client(&broker, "writer");
    client
        .push((1..=3).map(|n| PushItem::new("orders", &n)).collect())
        .await
        .unwrap();
    client
        .push((1..=2).map(|n| PushItem::new("payments", &n)).collect())
        .await
        .unwrap();
    let (orders, payments) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let stop = CancellationToken::new();
    let mut set = WorkerSet::new(stop.clone());
    set.spawn(
        "orders",
        client
            .worker::<u32>("orders")
            .group("saga", StartAt::Beginning)
            .wait(Duration::from_millis(200)),
        counting(&orders),
    )
    .spawn(
        "payments",
        client
            .worker::<u32>("payments")
            .group("saga", StartAt::Beginning)
            .wait(Duration::from_millis(200)),
        counting(&payments),
    );
    let joined = tokio::spawn(set.join());
    until("both queues handled", || {
        orders.load(Ordering::SeqCst) == 3 && payments.load(Ordering::SeqCst) == 2
    })
    .await;
    assert!(!joined.is_finished(), "the set runs until the signal");
    stop.cancel();
    let summaries = tokio::time::timeout(Duration::from_secs(10), joined)
        .await
        .expect("both stop on the one signal")
        .unwrap()
        .expect("both stopped as asked");
    let got: Vec<(&str, u64, Stopped)> = summaries
        .iter()
        .map(|(name, s)| (name.as_str(), s.committed, s.stopped))
        .collect();
    assert_eq!(
        got,
        [
            ("orders", 3, Stopped::Shutdown),
            ("payments", 2, Stopped::Shutdown)
        ]
    );
}

#[tokio::test]
async fn when_one_worker_fails_the_others_stop_and_the_error_names_it() {
    let broker = broker().await;
    let writer = client(&broker, "writer");
    let reader = client(&broker, "reader"); // a pop leases: refused to a read-only token
    writer
        .push(vec![PushItem::new("payments", &1)])
        .await
        .unwrap();
    let app = CancellationToken::new();
    let paid = Arc::new(AtomicUsize::new(0));
    let mut set = WorkerSet::new(app.child_token());
    let stop = set.token();
    set.spawn(
        "payments",
        writer
            .worker::<u32>("payments")
            .wait(Duration::from_millis(200)),
        counting(&paid),
    )
    .spawn(
        "audit",
        reader
            .worker::<u32>("audit")
            .wait(Duration::from_millis(200)),
        counting(&Arc::new(AtomicUsize::new(0))),
    );
    // Nobody cancels the token: the failure alone stops the set.
    let failed = tokio::time::timeout(Duration::from_secs(20), set.join())
        .await
        .expect("the failure stops the other worker too")
        .expect_err("a failed worker fails the set");
    assert_eq!(failed.failed(), "audit");
    assert_eq!(failed.error().kind(), WorkerErrorKind::Refused);
    assert_eq!(failed.error().cause().status(), Some(403), "{failed}");
    let results = failed.results();
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].0, "payments");
    let payments = results[0].1.as_ref().expect("stopped as asked, by the set");
    assert_eq!(payments.stopped, Stopped::Shutdown);
    assert!(results[1].1.is_err());
    assert!(stop.is_cancelled(), "the set cancelled its token");
    assert!(!app.is_cancelled(), "not the parent's");
    assert!(
        failed.to_string().starts_with("worker `audit` failed: "),
        "{failed}"
    );
    assert!(
        failed
            .to_string()
            .ends_with("; 1 other worker stopped with it"),
        "{failed}"
    );
}
