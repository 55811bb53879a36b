//! End to end against the in-process reference broker: a worker's handler run again in
//! process with a growing wait before its message is acked `failed`
//! (`Worker::retry_handler`), and the broker's redelivery at once that makes it needed.

mod quick;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{
    AckStatus, Client, DlqQuery, ErrorKind, PushItem, QueueOptions, RetryPolicy, Summary,
    WorkerError,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Payment {
    order: String,
}

/// A client with quick retries of its calls (the handler's own policy is each test's).
fn client(broker: &MockBroker) -> Client {
    quick::client(broker, None)
}

async fn push(client: &Client, queue: &str, orders: &[&str]) {
    let items = orders
        .iter()
        .map(|o| PushItem::new(queue, &Payment { order: (*o).into() }).partition("p"))
        .collect();
    client.push(items).await.unwrap();
}

/// Each run of the handler: when it started, and the delivery it ran for.
type Runs = Arc<Mutex<Vec<(Instant, Option<u32>)>>>;

#[tokio::test]
async fn a_failed_ack_is_redelivered_at_once_whatever_retry_delay_says() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let defaults = client
        .configure("plain", QueueOptions::new())
        .await
        .unwrap();
    assert_eq!(
        defaults.options.retry_delay,
        Some(Duration::from_secs(1)),
        "Queen 2's default"
    );
    let stored = client
        .configure(
            "payments",
            QueueOptions::new().retry_delay(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    assert_eq!(stored.options.retry_delay, Some(Duration::from_secs(60)));
    push(&client, "payments", &["o-1"]).await;
    let first = client.pop::<Payment>("payments").send().await.unwrap();
    client
        .ack(
            &first[0],
            AckStatus::Failed {
                error: "no saga yet".into(),
            },
        )
        .await
        .unwrap();
    // As Queen 2: stored, not applied. The next pop has it, 60 s early.
    let again = client.pop::<Payment>("payments").send().await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].transaction_id, first[0].transaction_id);
}

#[tokio::test]
async fn a_handler_failing_twice_is_run_again_after_growing_waits_and_its_step_committed() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    client
        .configure("payments", QueueOptions::new().retry_limit(3))
        .await
        .unwrap();
    push(&client, "payments", &["o-1"]).await;
    let runs: Runs = Arc::default();
    let seen = runs.clone();
    let summary = client
        .worker::<Payment>("payments")
        .retry_handler(
            RetryPolicy::default()
                .max_attempts(4)
                .min_delay(Duration::from_millis(200))
                .max_delay(Duration::from_secs(2)),
        )
        .run_until_idle(move |d, step| {
            let mut runs = seen.lock().unwrap();
            runs.push((Instant::now(), d.delivery_attempt));
            let early = runs.len() <= 2; // the saga's row is not written yet
            async move {
                if early {
                    Err(format!("no saga for {}", d.data.order))
                } else {
                    Ok(step)
                }
            }
        })
        .await
        .unwrap();
    assert_eq!(
        (
            summary.processed,
            summary.committed,
            summary.failed,
            summary.dead_lettered,
            summary.retries
        ),
        (1, 1, 0, 0, 2),
        "{summary}"
    );
    assert_eq!(summary.errors.get(&ErrorKind::Handler), Some(&2));
    let runs = runs.lock().unwrap().clone();
    // All three runs on the first delivery: the broker never saw a `failed` ack.
    let deliveries: Vec<_> = runs.iter().map(|(_, a)| *a).collect();
    assert_eq!(deliveries, [Some(1); 3]);
    assert!(
        broker.requests().matching("/api/v1/ack").is_empty(),
        "no ack of its own: the step acked it"
    );
    // Waits of 200 ms, then 400 ms, each with up to as much again of jitter.
    let waits: Vec<Duration> = runs.windows(2).map(|w| w[1].0 - w[0].0).collect();
    assert!(waits[0] >= Duration::from_millis(200), "{waits:?}");
    assert!(waits[1] >= Duration::from_millis(400), "{waits:?}");
    let dead = client
        .dlq::<Payment>(DlqQuery::queue("payments"))
        .await
        .unwrap();
    assert_eq!(dead.total, 0);
}

#[tokio::test]
async fn a_handler_that_always_fails_is_acked_failed_after_its_runs_and_dead_lettered_at_the_limit()
{
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    client
        .configure("payments", QueueOptions::new().retry_limit(1))
        .await
        .unwrap();
    push(&client, "payments", &["o-1"]).await;
    let runs: Runs = Arc::default();
    let seen = runs.clone();
    let summary = client
        .worker::<Payment>("payments")
        .retry_handler(
            RetryPolicy::default()
                .max_attempts(3)
                .min_delay(Duration::from_millis(10))
                .max_delay(Duration::from_millis(50)),
        )
        .run_until_idle(move |d, _step| {
            let mut runs = seen.lock().unwrap();
            runs.push((Instant::now(), d.delivery_attempt));
            let n = runs.len();
            async move { Err::<queen_sdk::TransactionBuilder, _>(format!("no saga yet ({n})")) }
        })
        .await
        .unwrap();
    // Two deliveries (retryLimit 1), three runs each; one `failed` ack per delivery.
    let deliveries: Vec<_> = runs.lock().unwrap().iter().map(|(_, a)| *a).collect();
    assert_eq!(
        deliveries,
        [Some(1), Some(1), Some(1), Some(2), Some(2), Some(2)]
    );
    assert_eq!(
        (
            summary.processed,
            summary.retries,
            summary.failed,
            summary.dead_lettered,
            summary.committed
        ),
        (2, 4, 1, 1, 0),
        "{summary}"
    );
    assert_eq!(summary.errors.get(&ErrorKind::Handler), Some(&6));
    let dead = client
        .dlq::<Payment>(DlqQuery::queue("payments"))
        .await
        .unwrap();
    assert_eq!(dead.total, 1);
    assert_eq!(
        dead.messages[0].error_message.as_deref(),
        Some("no saga yet (6)"),
        "the last run's error"
    );
}

#[tokio::test]
async fn a_panic_is_not_run_again() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    client
        .configure("payments", QueueOptions::new().retry_limit(0))
        .await
        .unwrap();
    push(&client, "payments", &["o-1"]).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let seen = runs.clone();
    let summary = client
        .worker::<Payment>("payments")
        .retry_handler(RetryPolicy::default().max_attempts(5))
        .run_until_idle(move |d, step| {
            seen.fetch_add(1, Ordering::SeqCst);
            async move {
                if d.data.order == "o-1" {
                    panic!("a bug")
                }
                Ok::<_, String>(step)
            }
        })
        .await
        .unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(
        (summary.retries, summary.dead_lettered),
        (0, 1),
        "{summary}"
    );
    assert_eq!(summary.errors.get(&ErrorKind::Panic), Some(&1));
}

/// A worker run until told to stop, and the sender that tells it.
fn start<H, Fut>(
    worker: queen_sdk::Worker<Payment>,
    handler: H,
) -> (
    oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<Summary, WorkerError>>,
)
where
    H: Fn(queen_sdk::Delivery<Payment>, queen_sdk::TransactionBuilder) -> Fut
        + Send
        + Sync
        + 'static,
    Fut: Future<Output = Result<queen_sdk::TransactionBuilder, String>> + Send + 'static,
{
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(worker.run(handler, async {
        stopped.await.ok();
    }));
    (stop, task)
}

#[tokio::test]
async fn a_stop_during_a_wait_ends_it_at_once_and_acks_the_message_failed() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    push(&client, "payments", &["o-1", "o-2"]).await;
    let failed_once = Arc::new(Notify::new());
    let told = failed_once.clone();
    let (stop, task) = start(
        client
            .worker::<Payment>("payments")
            .batch(2)
            .wait(Duration::from_millis(200))
            // A minute before the next run, at least.
            .retry_handler(
                RetryPolicy::default()
                    .max_attempts(5)
                    .min_delay(Duration::from_secs(60))
                    .max_delay(Duration::from_secs(120))
                    .deadline(Duration::from_secs(3600)),
            ),
        move |_d, _step| {
            told.notify_one();
            async { Err("the bank is down".to_string()) }
        },
    );
    tokio::time::timeout(Duration::from_secs(10), failed_once.notified())
        .await
        .expect("the handler ran");
    stop.send(()).ok();
    // Well under the minute's wait: the stop cut it short.
    let summary = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("the worker stops without waiting out the backoff")
        .unwrap()
        .unwrap();
    assert_eq!(
        (
            summary.processed,
            summary.retries,
            summary.failed,
            summary.released
        ),
        (1, 0, 1, 1),
        "{summary}"
    );
    // Acked `failed` (an attempt counted), and the one behind it given back: both are
    // there for the next worker at once, the first on its second delivery.
    let next = client
        .pop::<Payment>("payments")
        .batch(10)
        .send()
        .await
        .unwrap();
    let got: Vec<_> = next.iter().map(|m| m.data.order.as_str()).collect();
    assert_eq!(got, ["o-1", "o-2"]);
    assert_eq!(next[0].delivery_attempt, Some(2));
}

#[tokio::test]
async fn a_lease_lost_during_a_wait_ends_it_and_nothing_is_acked() {
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let client = client(&broker);
    push(&client, "payments", &["o-1"]).await;
    let runs: Runs = Arc::default();
    let (seen, first_run) = (runs.clone(), Arc::new(Notify::new()));
    let told = first_run.clone();
    let (stop, task) = start(
        client
            .worker::<Payment>("payments")
            .lease(Duration::from_secs(3)) // renewed every second
            .wait(Duration::from_millis(200))
            .retry_handler(
                RetryPolicy::default()
                    .max_attempts(5)
                    .min_delay(Duration::from_secs(60))
                    .max_delay(Duration::from_secs(120))
                    .deadline(Duration::from_secs(3600)),
            ),
        move |d, step| {
            let mut runs = seen.lock().unwrap();
            runs.push((Instant::now(), d.delivery_attempt));
            told.notify_one();
            let first = runs.len() == 1;
            async move {
                if first {
                    Err("no saga yet".to_string())
                } else {
                    Ok(step)
                }
            }
        },
    );
    tokio::time::timeout(Duration::from_secs(10), first_run.notified())
        .await
        .expect("the handler ran");
    // The broker's clock past the lease: the next renewal finds it gone.
    clock.advance(Duration::from_secs(3600));
    let give_up = Instant::now() + Duration::from_secs(20);
    while runs.lock().unwrap().len() < 2 {
        assert!(
            Instant::now() < give_up,
            "redelivered well within the minute's wait"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.send(()).ok();
    let summary = tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("stopped")
        .unwrap()
        .unwrap();
    // Not acked `failed` by the first worker's lane (the lease was not its own any
    // more); the redelivery committed.
    assert_eq!(
        (
            summary.lease_lost,
            summary.failed,
            summary.retries,
            summary.committed
        ),
        (1, 0, 0, 1),
        "{summary}"
    );
    assert!(broker.requests().matching("/api/v1/ack").is_empty());
}
