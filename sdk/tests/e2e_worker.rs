//! End to end against the in-process reference broker: the worker runtime
//! (`Client::worker`) and the consume stream that never stops by itself.

mod quick;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use queen_mock_broker::auth::{Auth, Role};
use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{
    Client, DlqQuery, Error, ErrorKind, Outcome, PushItem, QueueOptions, StartAt, Stopped, Summary,
    TransactionBuilder, Ttl, Worker, WorkerError, WorkerErrorKind,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, oneshot};
use tokio::task::JoinHandle;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Job {
    n: u32,
}

/// A client with quick retries, so a test's failures are retried within milliseconds.
fn client(broker: &MockBroker) -> Client {
    quick::client(broker, None)
}

async fn push(client: &Client, queue: &str, partition: &str, payloads: &[serde_json::Value]) {
    let items = payloads
        .iter()
        .map(|p| PushItem::new(queue, p).partition(partition))
        .collect();
    client.push(items).await.unwrap();
}

/// A running worker and the way to stop it.
struct Running {
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<Summary, WorkerError>>,
}

impl Running {
    fn start<T, H, Fut>(worker: Worker<T>, handler: H) -> Running
    where
        T: serde::de::DeserializeOwned + Send + 'static,
        H: Fn(queen_sdk::Delivery<T>, TransactionBuilder) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<TransactionBuilder, String>> + Send + 'static,
    {
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(worker.run(handler, async {
            stopped.await.ok();
        }));
        Running { stop, task }
    }

    async fn stop(self) -> Summary {
        self.stop.send(()).ok();
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .expect("the worker stops within 10 s")
            .unwrap()
            .unwrap()
    }
}

/// Polls `cond` every 10 ms until it holds; fails after `within`.
async fn until(within: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let give_up = tokio::time::Instant::now() + within;
    while !cond() {
        assert!(tokio::time::Instant::now() < give_up, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A handler that records each payload and acks it in its step.
fn recorder(
    seen: Arc<Mutex<Vec<u32>>>,
) -> impl Fn(
    queen_sdk::Delivery<Job>,
    TransactionBuilder,
) -> std::future::Ready<Result<TransactionBuilder, String>>
+ Send
+ Sync
+ 'static {
    move |d, step| {
        seen.lock().unwrap().push(d.data.n);
        std::future::ready(Ok(step))
    }
}

// ---------------------------------------------------------------------------------
// Idle: paused tokio time. The broker shares the runtime, so its long-poll deadline and
// the client's timeouts and retry deadline all run on the same virtual clock. The
// broker's writer is a thread of its own, and the runtime would jump its clock while
// it waits for that thread; a blocking task holds auto-advance off, and the test moves
// time itself, in small steps, with a real pause between steps for the writer.

/// Holds tokio's auto-advance off while alive; moves time by hand.
struct Driver {
    _release: std::sync::mpsc::Sender<()>,
}

impl Driver {
    fn start() -> Driver {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        tokio::task::spawn_blocking(move || {
            let _ = rx.recv();
        });
        Driver { _release: tx }
    }

    /// Moves virtual time `by`, a quarter second at a time, letting real work settle
    /// between: a long-poll's answer has 40 steps (its 10 s margin), so 200 ms of real
    /// time, to arrive before its client-side timeout, even on a loaded machine.
    async fn advance(&self, by: Duration) {
        let step = Duration::from_millis(250);
        let mut left = by;
        while !left.is_zero() {
            let d = step.min(left);
            tokio::time::advance(d).await;
            left -= d;
            settle().await;
        }
    }
}

/// How long the idle tests wait with nothing to do: 150 s of virtual time by default
/// (past the retry policy's 30 s deadline, the 40 s request timeout and several 30 s
/// long-polls; 3 s of real time), or `QUEEN_IDLE_SECS` seconds (7200: two hours of
/// long-polls, about 2.5 minutes of real time).
fn idle_for() -> Duration {
    let secs = std::env::var("QUEEN_IDLE_SECS")
        .ok()
        .map(|s| s.parse().expect("QUEEN_IDLE_SECS is a number of seconds"))
        .unwrap_or(150);
    Duration::from_secs(secs)
}

/// A real pause for the broker's writer thread and the loopback sockets.
async fn settle() {
    tokio::task::spawn_blocking(|| std::thread::sleep(Duration::from_millis(5)))
        .await
        .unwrap();
}

#[tokio::test(start_paused = true)]
async fn an_idle_stream_with_default_settings_outlives_every_default_timeout() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap(); // every default
    let driver = Driver::start();
    let started = tokio::time::Instant::now();
    let errors = Arc::new(AtomicUsize::new(0));
    let errs = errors.clone();
    let consumer = tokio::spawn(async move {
        let mut stream = client.consume::<Job>("idle").stream();
        loop {
            match stream.next().await {
                Some(Ok(d)) => return d.data.n,
                Some(Err(e)) => {
                    eprintln!("stream error: {e}");
                    errs.fetch_add(1, Ordering::Relaxed);
                }
                None => panic!("the stream ended by itself"),
            }
        }
    });
    // Nothing to do for `idle_for()`: past every default timeout.
    let idle = idle_for();
    driver.advance(idle).await;
    assert!(!consumer.is_finished(), "the consumer is still waiting");
    let pops = broker.requests().matching("/api/v1/pop").len();
    // One long-poll of up to 30 s after another, none of them failed.
    let polls = idle.as_secs() as usize / 30;
    assert!(
        pops >= polls - 1,
        "it long-polled again and again: {pops} pops in {idle:?}"
    );

    let pusher = Client::new(broker.url()).unwrap();
    push(&pusher, "idle", "Default", &[serde_json::json!({"n": 42})]).await;
    for _ in 0..200 {
        if consumer.is_finished() {
            break;
        }
        driver.advance(Duration::from_millis(500)).await;
    }
    assert!(consumer.is_finished(), "the late message arrived");
    assert_eq!(consumer.await.unwrap(), 42);
    assert!(started.elapsed() >= idle);
    assert_eq!(
        errors.load(Ordering::Relaxed),
        0,
        "an idle queue is no error"
    );
    drop(driver);
    broker.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn an_idle_worker_with_default_settings_keeps_running_and_gets_a_late_message() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    let driver = Driver::start();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let running = Running::start(client.worker::<Job>("idle-worker"), recorder(seen.clone()));
    let idle = idle_for();
    driver.advance(idle).await;
    assert!(!running.task.is_finished(), "the worker is still running");
    let pops = broker.requests().matching("/api/v1/pop").len();
    assert!(
        pops >= idle.as_secs() as usize / 30 - 1,
        "it long-polled again and again: {pops} pops in {idle:?}"
    );

    push(
        &client,
        "idle-worker",
        "Default",
        &[serde_json::json!({"n": 7})],
    )
    .await;
    for _ in 0..200 {
        if !seen.lock().unwrap().is_empty() {
            break;
        }
        driver.advance(Duration::from_millis(500)).await;
    }
    assert_eq!(*seen.lock().unwrap(), [7]);
    running.stop.send(()).ok();
    let mut summary = None;
    for _ in 0..200 {
        if running.task.is_finished() {
            summary = Some(running.task.await.unwrap().unwrap());
            break;
        }
        driver.advance(Duration::from_millis(500)).await;
    }
    let summary = summary.expect("the worker stopped");
    assert_eq!((summary.processed, summary.committed), (1, 1), "{summary}");
    assert!(summary.errors.is_empty(), "{summary}");
    drop(driver);
    broker.shutdown().await;
}

// ---------------------------------------------------------------------------------

#[tokio::test]
async fn a_poison_payload_is_dead_lettered_and_the_good_ones_around_it_are_handled_in_order() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    push(
        &client,
        "poison",
        "p",
        &[
            serde_json::json!({"n": 1}),
            serde_json::json!({"n": "not a number"}),
            serde_json::json!({"n": 3}),
        ],
    )
    .await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let running = Running::start(
        client
            .worker::<Job>("poison")
            .wait(Duration::from_millis(200)),
        recorder(seen.clone()),
    );
    until(Duration::from_secs(5), "1 and 3 handled", || {
        seen.lock().unwrap().len() == 2
    })
    .await;
    assert_eq!(*seen.lock().unwrap(), [1, 3]);

    let dead = client
        .dlq::<serde_json::Value>(DlqQuery::queue("poison"))
        .await
        .unwrap();
    assert_eq!(dead.messages.len(), 1, "{dead:?}");
    assert_eq!(
        dead.messages[0].data,
        serde_json::json!({"n": "not a number"})
    );
    let why = dead.messages[0].error_message.clone().unwrap_or_default();
    assert!(
        why.contains("invalid type"),
        "the decode error is the reason: {why:?}"
    );

    // Still running: a later message is handled too.
    assert!(!running.task.is_finished());
    push(&client, "poison", "p", &[serde_json::json!({"n": 4})]).await;
    until(Duration::from_secs(5), "4 handled", || {
        seen.lock().unwrap().len() == 3
    })
    .await;
    let summary = running.stop().await;
    assert_eq!(*seen.lock().unwrap(), [1, 3, 4]);
    assert_eq!(
        (summary.processed, summary.committed, summary.dead_lettered),
        (3, 3, 1),
        "{summary}"
    );
    assert_eq!(summary.errors.get(&ErrorKind::Undecodable), Some(&1));
}

/// A broker on a manual clock, so a test can move past a lease without waiting.
async fn manual_broker() -> (MockBroker, ManualClock, Client) {
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let client = client(&broker);
    (broker, clock, client)
}

/// Runs one message through a worker whose step is `step`, stops the worker, moves the
/// broker past the lease, and answers the summary and whether the message came back.
async fn settle_one(
    queue: &str,
    build: impl Fn(&Client, &queen_sdk::Delivery<Job>) -> TransactionBuilder + Send + Sync + 'static,
    before: impl AsyncFnOnce(&Client),
) -> (Summary, usize, Vec<Outcome>) {
    let (broker, clock, client) = manual_broker().await;
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let observed = outcomes.clone();
    before(&client).await;
    push(&client, queue, "Default", &[serde_json::json!({"n": 1})]).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let (c, steps) = (calls.clone(), client.clone());
    let running = Running::start(
        client
            .worker::<Job>(queue)
            .lease(Duration::from_secs(2))
            .wait(Duration::from_millis(200))
            .on_settled(move |_, outcome| observed.lock().unwrap().push(outcome.clone())),
        move |d, _step| {
            c.fetch_add(1, Ordering::Relaxed);
            std::future::ready(Ok(build(&steps, &d)))
        },
    );
    until(Duration::from_secs(5), "the handler ran", || {
        calls.load(Ordering::Relaxed) == 1
    })
    .await;
    let summary = running.stop().await;
    clock.advance(Duration::from_secs(30)); // far past the lease
    let again = client.pop::<Job>(queue).send().await.unwrap();
    broker.shutdown().await;
    let outcomes = outcomes.lock().unwrap().clone();
    (summary, again.len(), outcomes)
}

#[tokio::test]
async fn a_gated_step_is_acked_on_its_own_and_not_redelivered_after_the_lease() {
    let (summary, redelivered, outcomes) = settle_one(
        "gated",
        |client, d| {
            client
                .transaction()
                .ack(d)
                .once("done", "job-1", Ttl::hours(1))
        },
        async |client: &Client| {
            // The step was done before: its marker is set.
            let marker = client.transaction().once("done", "job-1", Ttl::hours(1));
            assert!(marker.commit().await.unwrap().is_committed());
        },
    )
    .await;
    assert_eq!(
        (summary.processed, summary.already_done, summary.committed),
        (1, 1, 0),
        "{summary}"
    );
    assert_eq!(redelivered, 0, "acked: not redelivered after the lease");
    assert_eq!(outcomes, [Outcome::AlreadyDone { retried: false }]);
}

#[tokio::test]
async fn a_duplicate_on_the_first_attempt_is_acked_on_its_own_and_not_redelivered() {
    let (summary, redelivered, outcomes) = settle_one(
        "dup",
        // No ack in the step: the runner adds it.
        |client, _| {
            client
                .transaction()
                .push("receipts", |p| p.transaction_id("receipt-1").payload(&1))
        },
        async |client: &Client| {
            // The receipt exists already: the step's push is a duplicate.
            let receipt = PushItem::new("receipts", &1).transaction_id("receipt-1");
            client.push(vec![receipt]).await.unwrap();
        },
    )
    .await;
    assert_eq!(
        (summary.processed, summary.already_done, summary.committed),
        (1, 1, 0),
        "{summary}"
    );
    assert_eq!(redelivered, 0, "acked: not redelivered after the lease");
    assert_eq!(outcomes, [Outcome::AlreadyDone { retried: false }]);
}

#[tokio::test]
async fn a_lost_answer_whose_resend_rolls_back_is_settled_as_already_done() {
    use queen_mock_broker::harness::Fault;
    let (broker, clock, client) = manual_broker().await;
    push(
        &client,
        "lost-answer",
        "Default",
        &[serde_json::json!({"n": 1})],
    )
    .await;
    broker
        .faults()
        .inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let observed = outcomes.clone();
    let running = Running::start(
        client
            .worker::<Job>("lost-answer")
            .lease(Duration::from_secs(2))
            .wait(Duration::from_millis(200))
            .on_settled(move |_, o| observed.lock().unwrap().push(o.clone())),
        move |_d, step| std::future::ready(Ok(step.push("receipts", |p| p.payload(&1)))),
    );
    until(Duration::from_secs(5), "settled", || {
        !outcomes.lock().unwrap().is_empty()
    })
    .await;
    let summary = running.stop().await;
    assert_eq!(
        *outcomes.lock().unwrap(),
        [Outcome::AlreadyDone { retried: true }]
    );
    assert_eq!(
        (summary.already_done, summary.committed),
        (1, 0),
        "{summary}"
    );
    clock.advance(Duration::from_secs(30));
    assert!(
        client
            .pop::<Job>("lost-answer")
            .send()
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        broker
            .inspect()
            .messages("receipts", "Default")
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn handler_errors_and_panics_ack_failed_and_the_retry_limit_dead_letters_them() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    client
        .configure("flaky", QueueOptions::new().retry_limit(1))
        .await
        .unwrap();
    push(&client, "flaky", "errs", &[serde_json::json!({"n": 1})]).await;
    push(&client, "flaky", "panics", &[serde_json::json!({"n": 2})]).await;
    let calls = Arc::new(Mutex::new(BTreeMap::<u32, usize>::new()));
    let seen = calls.clone();
    let running = Running::start(
        client
            .worker::<Job>("flaky")
            .concurrency(2)
            .wait(Duration::from_millis(200)),
        move |d, step| {
            *seen.lock().unwrap().entry(d.data.n).or_default() += 1;
            async move {
                match d.data.n {
                    1 => Err("boom".to_string()),
                    2 => panic!("kaboom"),
                    _ => Ok(step),
                }
            }
        },
    );
    until(Duration::from_secs(10), "both in the DLQ", || {
        broker
            .inspect()
            .queues()
            .map(|_| calls.lock().unwrap().values().sum::<usize>() >= 4)
            .unwrap_or(false)
    })
    .await;
    let dead = async || {
        client
            .dlq::<Job>(DlqQuery::queue("flaky"))
            .await
            .unwrap()
            .messages
    };
    until(Duration::from_secs(5), "both dead-lettered", || true).await;
    let mut letters = dead().await;
    for _ in 0..100 {
        if letters.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
        letters = dead().await;
    }
    letters.sort_by_key(|l| l.data.n);
    assert_eq!(letters.len(), 2, "{letters:?}");
    assert_eq!(letters[0].error_message.as_deref(), Some("boom"));
    assert_eq!(
        letters[1].error_message.as_deref(),
        Some("handler panicked: kaboom")
    );
    // retryLimit 1: a first failure is redelivered, the second dead-letters.
    assert_eq!(*calls.lock().unwrap(), BTreeMap::from([(1, 2), (2, 2)]));

    // The worker goes on.
    push(&client, "flaky", "errs", &[serde_json::json!({"n": 3})]).await;
    until(Duration::from_secs(5), "3 handled", || {
        calls.lock().unwrap().contains_key(&3)
    })
    .await;
    let summary = running.stop().await;
    assert_eq!(
        (summary.failed, summary.dead_lettered, summary.committed),
        (2, 2, 1),
        "{summary}"
    );
    assert_eq!(summary.errors.get(&ErrorKind::Handler), Some(&2));
    assert_eq!(summary.errors.get(&ErrorKind::Panic), Some(&2));
}

#[tokio::test]
async fn concurrency_4_handles_4_partitions_at_once_each_in_order() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    for p in 0..4 {
        let payloads: Vec<_> = (0..3)
            .map(|n| serde_json::json!({"n": p * 10 + n}))
            .collect();
        push(&client, "wide", &format!("p{p}"), &payloads).await;
    }
    let in_flight = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let seen = Arc::new(Mutex::new(BTreeMap::<String, Vec<u32>>::new()));
    let (now, max, log) = (in_flight.clone(), most.clone(), seen.clone());
    let running = Running::start(
        client
            .worker::<Job>("wide")
            .concurrency(4)
            .wait(Duration::from_millis(200)),
        move |d, step| {
            let (now, max, log) = (now.clone(), max.clone(), log.clone());
            async move {
                let at_once = now.fetch_add(1, Ordering::SeqCst) + 1;
                max.fetch_max(at_once, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(150)).await;
                log.lock()
                    .unwrap()
                    .entry(d.partition.clone())
                    .or_default()
                    .push(d.data.n);
                now.fetch_sub(1, Ordering::SeqCst);
                Ok(step)
            }
        },
    );
    until(Duration::from_secs(10), "12 handled", || {
        seen.lock().unwrap().values().map(Vec::len).sum::<usize>() == 12
    })
    .await;
    let summary = running.stop().await;
    assert_eq!(most.load(Ordering::SeqCst), 4, "4 partitions at once");
    for (p, ns) in seen.lock().unwrap().iter() {
        let mut sorted = ns.clone();
        sorted.sort();
        assert_eq!(ns, &sorted, "partition {p} in order");
    }
    assert_eq!(
        (summary.processed, summary.committed),
        (12, 12),
        "{summary}"
    );
}

#[tokio::test]
async fn shutdown_finishes_the_running_handler_and_releases_what_was_not_started() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let payloads: Vec<_> = (0..5).map(|n| serde_json::json!({"n": n})).collect();
    push(&client, "drain", "p", &payloads).await;
    let started = Arc::new(Notify::new());
    let go_on = Arc::new(Notify::new());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let finished = Arc::new(AtomicUsize::new(0));
    let (s, g, log, done) = (
        started.clone(),
        go_on.clone(),
        seen.clone(),
        finished.clone(),
    );
    let running = Running::start(
        client
            .worker::<Job>("drain")
            .batch(5)
            .lease(Duration::from_secs(60))
            .wait(Duration::from_millis(200)),
        move |d, step| {
            let (s, g, log, done) = (s.clone(), g.clone(), log.clone(), done.clone());
            async move {
                log.lock().unwrap().push(d.data.n);
                s.notify_one();
                g.notified().await; // in flight when the worker is told to stop
                done.fetch_add(1, Ordering::SeqCst);
                Ok(step)
            }
        },
    );
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the first handler started");
    running.stop.send(()).ok();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(
        !running.task.is_finished(),
        "waiting for the running handler"
    );
    go_on.notify_one();
    let summary = tokio::time::timeout(Duration::from_secs(10), running.task)
        .await
        .expect("stopped")
        .unwrap()
        .unwrap();
    assert_eq!(*seen.lock().unwrap(), [0], "nothing else was started");
    assert_eq!(
        finished.load(Ordering::SeqCst),
        1,
        "the running handler finished"
    );
    assert_eq!(
        (summary.processed, summary.committed, summary.released),
        (1, 1, 4),
        "{summary}"
    );
    assert!(matches!(summary.stopped, Stopped::Shutdown));

    // Given back at once: another consumer gets them now, not after the 60 s lease.
    let next = client.pop::<Job>("drain").batch(10).send().await.unwrap();
    let ns: Vec<u32> = next.iter().map(|m| m.data.n).collect();
    assert_eq!(ns, [1, 2, 3, 4]);
}

#[tokio::test]
async fn past_the_grace_period_running_handlers_are_cancelled_and_their_messages_given_back() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let payloads: Vec<_> = (0..3).map(|n| serde_json::json!({"n": n})).collect();
    push(&client, "stuck", "p", &payloads).await;
    let started = Arc::new(Notify::new());
    let s = started.clone();
    let running = Running::start(
        client
            .worker::<Job>("stuck")
            .grace(Duration::from_millis(200))
            .wait(Duration::from_millis(200)),
        move |_, _| {
            let s = s.clone();
            async move {
                s.notify_one();
                std::future::pending::<()>().await; // never finishes
                Err("unreachable".to_string())
            }
        },
    );
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the handler started");
    let summary = running.stop().await;
    assert_eq!(
        (summary.processed, summary.abandoned, summary.released),
        (1, 1, 2),
        "the running one cut short, the two behind it given back: {summary}"
    );
    // All three are given back at once, not after the lease.
    let next = client.pop::<Job>("stuck").batch(10).send().await.unwrap();
    let ns: Vec<u32> = next.iter().map(|m| m.data.n).collect();
    assert_eq!(ns, [0, 1, 2]);
}

#[tokio::test]
async fn a_lost_lease_fires_the_signal_and_the_step_is_not_committed() {
    let (broker, clock, client) = manual_broker().await;
    push(&client, "lost", "Default", &[serde_json::json!({"n": 1})]).await;
    let started = Arc::new(Notify::new());
    let s = started.clone();
    let running = Running::start(
        client
            .worker::<Job>("lost")
            .lease(Duration::from_secs(1))
            .wait(Duration::from_millis(200)),
        move |d, step| {
            let s = s.clone();
            let step = step.push("receipts", |p| p.payload(&"done"));
            async move {
                if d.delivery_attempt != Some(1) {
                    // The redelivery after the lapse: not what this test is about.
                    return Err("a later attempt".to_string());
                }
                s.notify_one();
                tokio::time::timeout(Duration::from_secs(5), d.lease_lost_signal())
                    .await
                    .map_err(|_| "the lease-lost signal never fired".to_string())?;
                assert!(d.lease_lost());
                Ok(step) // too late: the runner must not commit it
            }
        },
    );
    tokio::time::timeout(Duration::from_secs(5), started.notified())
        .await
        .expect("the handler started");
    clock.advance(Duration::from_secs(10)); // the lease lapses before a renewal
    // The first attempt settles before the redelivery is acked (failed).
    until(Duration::from_secs(5), "the redelivery", || {
        !broker.requests().matching("/api/v1/ack").is_empty()
    })
    .await;
    let summary = running.stop().await;
    assert_eq!((summary.lease_lost, summary.committed), (1, 0), "{summary}");
    assert!(
        broker
            .inspect()
            .messages("receipts", "Default")
            .unwrap()
            .is_empty(),
        "the step was not committed"
    );
}

#[tokio::test]
async fn failed_pops_do_not_stop_the_worker() {
    use queen_mock_broker::harness::Fault;
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    broker
        .faults()
        .inject(Fault::unavailable().on("/api/v1/pop").times(2));
    push(&client, "bumpy", "Default", &[serde_json::json!({"n": 5})]).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let running = Running::start(
        client
            .worker::<Job>("bumpy")
            .wait(Duration::from_millis(200)),
        recorder(seen.clone()),
    );
    until(
        Duration::from_secs(10),
        "handled after the failures",
        || !seen.lock().unwrap().is_empty(),
    )
    .await;
    let summary = running.stop().await;
    assert_eq!(summary.committed, 1, "{summary}");
    assert_eq!(
        summary.errors.get(&ErrorKind::Unavailable),
        Some(&2),
        "{summary}"
    );
}

#[tokio::test]
async fn builder_misuse_is_invalid_before_anything_is_sent() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let handler = |_: queen_sdk::Delivery<Job>, _| async { Err::<TransactionBuilder, _>("unused") };
    let never = std::future::pending::<()>;
    let cases = [
        client.worker::<Job>("q").concurrency(0),
        client.worker::<Job>("q").batch(0),
        client.worker::<Job>("q").lease(Duration::from_millis(999)),
        client.worker::<Job>(""),
    ];
    for w in cases {
        let shown = format!("{w:?}");
        match w.run(handler, never()).await {
            Err(e) if e.kind() == WorkerErrorKind::Invalid => match e.cause() {
                Error::Invalid { op, rule } => eprintln!("{op}: {rule}"),
                other => panic!("{shown}: expected Invalid, got {other:?}"),
            },
            other => panic!("{shown}: expected Invalid, got {other:?}"),
        }
    }
    assert!(broker.requests().entries().is_empty(), "nothing was sent");
}

#[tokio::test]
async fn a_refused_pop_stops_the_worker_and_says_why() {
    let broker = MockBroker::builder()
        .auth(Auth::new().token("reader", Role::ReadOnly, "acme", None))
        .start()
        .await
        .unwrap();
    // No token: every pop is refused with a 401, which polling again cannot change.
    let client = client(&broker);
    let stopped = client
        .worker::<Job>("locked")
        .run(
            |_, _| async { Err::<TransactionBuilder, _>("unused") },
            std::future::pending::<()>(),
        )
        .await;
    // An Err, not an Ok summary: a `main` that runs it with `?` exits non-zero.
    let e = stopped.expect_err("a refused worker is an error");
    assert_eq!(e.kind(), WorkerErrorKind::Refused);
    assert_eq!(e.cause().status(), Some(401), "{e}");
    assert_eq!(e.summary().processed, 0);
    // It converts into the SDK's error (the cause) and into anyhow's, with its text.
    assert!(e.to_string().contains("refused"), "{e}");
    let as_sdk: Error = e.into();
    assert_eq!(as_sdk.status(), Some(401));
}

#[tokio::test]
async fn a_broker_restart_under_a_running_worker_is_ridden_out_and_nothing_is_lost() {
    // A durable broker on a file; it stops while the worker waits on it, and comes
    // back on the same address and file. The worker sees errors while it is gone, keeps
    // polling, and handles what was pushed before and after the restart, once each.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let first = MockBroker::builder()
        .data_file(&file)
        .start()
        .await
        .unwrap();
    let addr = first.addr();
    let client = client(&first);
    push(&client, "durable", "p", &[serde_json::json!({"n": 1})]).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let running = Running::start(
        client
            .worker::<Job>("durable")
            .wait(Duration::from_millis(200)),
        recorder(seen.clone()),
    );
    until(Duration::from_secs(10), "the first message", || {
        seen.lock().unwrap().len() == 1
    })
    .await;

    first.shutdown().await;
    // Down long enough for several polls to fail.
    tokio::time::sleep(Duration::from_millis(800)).await;
    let second = MockBroker::builder()
        .data_file(&file)
        .listen(addr)
        .start()
        .await
        .unwrap();
    push(&client, "durable", "p", &[serde_json::json!({"n": 2})]).await;
    until(
        Duration::from_secs(20),
        "the message pushed after the restart",
        || seen.lock().unwrap().len() == 2,
    )
    .await;
    let summary = running.stop().await;
    assert_eq!(*seen.lock().unwrap(), [1, 2], "each once, in order");
    assert_eq!(summary.committed, 2, "{summary}");
    assert!(
        !summary.errors.is_empty(),
        "the outage was seen and reported, not hidden: {summary}"
    );
    // Nothing left behind: both are committed on the broker's file.
    let again = client.pop::<Job>("durable").send().await.unwrap();
    assert!(again.is_empty(), "{again:?}");
    second.shutdown().await;
}

// ---------------------------------------------------------------------------------
// Only a step that was done is settled as done: a refusal by a gate other than an
// existing `once` marker goes to the handler's decision, never to `completed`.

/// Pushes one job, runs a worker until the queue is settled with `step` as its step
/// and `on_refused` (if any) deciding refusals, and answers the summary, the outcomes
/// and how many times the handler ran.
/// What a test's `on_refused` handler answers for a refused delivery.
type Decide = fn(queen_sdk::Delivery<Job>, queen_sdk::Gate) -> Result<TransactionBuilder, String>;

async fn refusal(
    broker: &MockBroker,
    queue: &str,
    retry_limit: u32,
    step: impl Fn(TransactionBuilder) -> TransactionBuilder + Send + Sync + 'static,
    on_refused: Option<Decide>,
) -> (Summary, Vec<Outcome>, usize) {
    let client = client(broker);
    client
        .configure(queue, QueueOptions::new().retry_limit(retry_limit))
        .await
        .unwrap();
    push(&client, queue, "Default", &[serde_json::json!({"n": 1})]).await;
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let (observed, calls) = (outcomes.clone(), Arc::new(AtomicUsize::new(0)));
    let counted = calls.clone();
    let mut worker = client
        .worker::<Job>(queue)
        .group("g", StartAt::Beginning)
        .on_settled(move |_, o| observed.lock().unwrap().push(o.clone()));
    if let Some(decide) = on_refused {
        worker = worker.on_refused(move |d, gate| async move { decide(d, gate) });
    }
    let summary = tokio::time::timeout(
        Duration::from_secs(20),
        worker.run_until_idle(move |_d, s| {
            counted.fetch_add(1, Ordering::SeqCst);
            std::future::ready(Ok::<_, String>(step(s)))
        }),
    )
    .await
    .expect("the queue settles")
    .unwrap();
    let outcomes = outcomes.lock().unwrap().clone();
    (summary, outcomes, calls.load(Ordering::SeqCst))
}

#[tokio::test]
async fn a_step_whose_lock_guard_lapsed_is_never_acked_as_done() {
    let (broker, clock, client) = manual_broker().await;
    let lock = client
        .lock("sku-1")
        .ttl(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap()
        .expect("free");
    let stale = lock.guard();
    drop(lock); // stops renewing: the lock lapses
    clock.advance(Duration::from_secs(5));
    let (summary, outcomes, calls) = refusal(
        &broker,
        "guarded",
        1,
        move |s| s.guard(&stale).push("reserved", |p| p.payload(&1)),
        None,
    )
    .await;
    // Refused twice (the first delivery and its retry), then dead-lettered: never done.
    assert_eq!(calls, 2, "{summary}");
    assert_eq!(
        (summary.already_done, summary.committed),
        (0, 0),
        "{summary}"
    );
    assert_eq!(
        (summary.refused, summary.dead_lettered),
        (1, 1),
        "{summary}"
    );
    assert_eq!(summary.errors.get(&ErrorKind::Gated), Some(&2), "{summary}");
    let Outcome::Refused {
        gate,
        dead_lettered,
        transaction_id: None,
    } = &outcomes[0]
    else {
        panic!("{outcomes:?}")
    };
    assert_eq!(
        (gate.kind, &gate.reason, gate.index, dead_lettered),
        (
            queen_sdk::GateKind::Guard,
            &queen_sdk::KvReason::Absent,
            0,
            &false
        )
    );
    assert!(gate.key.starts_with("sku-1#"), "{gate}");
    assert!(
        broker
            .inspect()
            .messages("reserved", "Default")
            .unwrap()
            .is_empty()
    );
    let dead = client.dlq::<Job>(DlqQuery::queue("guarded")).await.unwrap();
    assert_eq!(dead.messages.len(), 1);
    let reason = dead.messages[0].error_message.clone().unwrap_or_default();
    assert!(reason.contains("lock guard"), "{reason}");
    broker.shutdown().await;
}

/// A broker whose `stock/sku-1` holds `units`, and a client of it.
async fn stocked(units: i64) -> (MockBroker, Client) {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let put = client
        .kv()
        .put("stock", "sku-1", &units, Ttl::Forever)
        .await;
    assert!(put.unwrap().applied);
    (broker, client)
}

#[tokio::test]
async fn a_failed_required_condition_is_refused_and_its_handler_decides() {
    let (broker, client) = stocked(1).await;
    let reserve = |s: TransactionBuilder| {
        s.once("reserved", "order-1", Ttl::days(1))
            .kv(|k| k.incr("stock", "sku-1", -2, Ttl::Forever).min(0).required())
    };
    // Without a handler: acked failed (retry limit 0: dead-lettered at once).
    let (summary, outcomes, _) = refusal(&broker, "reserve-plain", 0, reserve, None).await;
    assert_eq!(
        (summary.already_done, summary.dead_lettered),
        (0, 1),
        "{summary}"
    );
    let Outcome::Refused {
        gate,
        dead_lettered: true,
        transaction_id: None,
    } = &outcomes[0]
    else {
        panic!("{outcomes:?}")
    };
    // The gate in call order: kv[1], after the `once` marker.
    assert_eq!(
        (
            gate.kind,
            &gate.reason,
            gate.index,
            gate.ns.as_str(),
            gate.key.as_str()
        ),
        (
            queen_sdk::GateKind::Condition,
            &queen_sdk::KvReason::Limit,
            1,
            "stock",
            "sku-1"
        )
    );
    // With one: it pushes a rejection and acks the message in a step of its own.
    let (summary, outcomes, _) = refusal(
        &broker,
        "reserve-decided",
        3,
        reserve,
        Some(|d, gate| {
            assert_eq!(gate.reason, queen_sdk::KvReason::Limit);
            Ok(d.step().push("rejections", |p| p.payload(&d.data)))
        }),
    )
    .await;
    // Settled by the rejection's step: counted as refused, neither committed nor done.
    assert_eq!(
        (summary.committed, summary.already_done, summary.refused),
        (0, 0, 1),
        "{summary}"
    );
    assert!(
        matches!(
            outcomes[..],
            [Outcome::Refused {
                transaction_id: Some(_),
                dead_lettered: false,
                ..
            }]
        ),
        "{outcomes:?}"
    );
    let rejections = broker.inspect().messages("rejections", "Default").unwrap();
    assert_eq!(rejections.len(), 1);
    // The stock and the marker are as they were: nothing of the refused step applied.
    let stock = client
        .kv()
        .get::<i64>("stock", "sku-1")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stock.value, 1);
    assert!(
        client
            .kv()
            .get::<bool>("reserved", "order-1")
            .await
            .unwrap()
            .is_none()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn an_existing_once_marker_is_the_one_refusal_settled_as_done() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let marker = client.transaction().once("paid", "job-1", Ttl::hours(1));
    assert!(marker.commit().await.unwrap().is_committed());
    let (summary, outcomes, calls) = refusal(
        &broker,
        "paid",
        3,
        |s| {
            s.once("paid", "job-1", Ttl::hours(1))
                .push("receipts", |p| p.payload(&1))
        },
        Some(|_, gate| panic!("an existing marker is no refusal: {gate}")),
    )
    .await;
    assert_eq!(
        (calls, summary.already_done, summary.refused),
        (1, 1, 0),
        "{summary}"
    );
    assert_eq!(outcomes, [Outcome::AlreadyDone { retried: false }]);
    broker.shutdown().await;
}

// ---------------------------------------------------------------------------------
// No silent skip: a new group states where it starts, and `Beginning` reads the backlog.

#[tokio::test]
async fn a_new_group_started_at_the_beginning_processes_the_backlog() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    let backlog: Vec<_> = (1..=3).map(|n| serde_json::json!({"n": n})).collect();
    push(&client, "payments", "Default", &backlog).await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    let summary = client
        .worker::<Job>("payments")
        .group("ledger", StartAt::Beginning)
        .run_until_idle(recorder(seen.clone()))
        .await
        .unwrap();
    assert_eq!(
        (summary.committed, summary.stopped),
        (3, Stopped::Idle),
        "{summary}"
    );
    assert_eq!(*seen.lock().unwrap(), [1, 2, 3]);
    // Stated on purpose, `New` skips it: another group reads nothing of it.
    let summary = client
        .worker::<Job>("payments")
        .group("audit", StartAt::New)
        .run_until_idle(recorder(seen.clone()))
        .await
        .unwrap();
    assert_eq!(summary.processed, 0, "{summary}");
    // From a time: only what was created at or after it.
    let later = std::time::SystemTime::now() + Duration::from_secs(3600);
    let summary = client
        .worker::<Job>("payments")
        .group("from-later", StartAt::Time(later))
        .run_until_idle(recorder(seen.clone()))
        .await
        .unwrap();
    assert_eq!(summary.processed, 0, "{summary}");
    broker.shutdown().await;
}

#[tokio::test]
async fn run_until_idle_handles_retries_until_the_queue_is_settled() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    client
        .configure("settle", QueueOptions::new().retry_limit(2))
        .await
        .unwrap();
    let jobs: Vec<_> = (1..=4).map(|n| serde_json::json!({"n": n})).collect();
    push(&client, "settle", "Default", &jobs).await;
    let tries = Arc::new(Mutex::new(BTreeMap::<u32, usize>::new()));
    let t = tries.clone();
    let summary = client
        .worker::<Job>("settle")
        .run_until_idle(move |d, step| {
            let mut tries = t.lock().unwrap();
            let n = tries.entry(d.data.n).or_default();
            *n += 1;
            // Job 2 fails once, then succeeds; job 3 always fails.
            let fail = (d.data.n == 2 && *n == 1) || d.data.n == 3;
            std::future::ready(if fail {
                Err("not now".to_string())
            } else {
                Ok(step)
            })
        })
        .await
        .unwrap();
    assert_eq!(
        (summary.committed, summary.dead_lettered),
        (3, 1),
        "{summary}"
    );
    assert_eq!(
        tries.lock().unwrap()[&3],
        3,
        "the first try and two retries"
    );
    assert!(client.pop::<Job>("settle").send().await.unwrap().is_empty());
    broker.shutdown().await;
}

#[tokio::test]
async fn a_lock_held_by_a_step_is_released_once_it_settles_even_when_refused() {
    let (broker, client) = stocked(1).await;
    let jobs: Vec<_> = (1..=2).map(|n| serde_json::json!({"n": n})).collect();
    push(&client, "reserve-locked", "Default", &jobs).await;
    let summary = client
        .worker::<Job>("reserve-locked")
        .on_refused(|d, _gate| async move {
            Ok::<_, String>(d.step().push("rejections", |p| p.payload(&d.data)))
        })
        .run_until_idle(|_d, step| async move {
            let lock = step
                .client()
                .lock("sku-1")
                .ttl(Duration::from_secs(600))
                .acquire()
                .await
                .map_err(|e| e.to_string())?
                .ok_or("sku-1 is held: the last step did not release it")?;
            Ok::<_, String>(
                step.kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required())
                    .hold(lock),
            )
        })
        .await
        .unwrap();
    // The first takes the last unit; the second is refused (and rejected): both steps
    // found the lock free, so the first released it after its commit.
    assert_eq!((summary.committed, summary.refused), (1, 1), "{summary}");
    assert_eq!(summary.errors.get(&ErrorKind::Gated), Some(&1), "{summary}");
    assert_eq!(
        broker
            .inspect()
            .messages("rejections", "Default")
            .unwrap()
            .len(),
        1
    );
    // And after the refused one too.
    assert!(client.lock("sku-1").acquire().await.unwrap().is_some());
    broker.shutdown().await;
}

#[tokio::test]
async fn a_rejection_acked_failed_and_run_again_is_never_acked_completed() {
    // The rejection's step acks the request `failed` (so it is tried again later) and
    // pushes a rejection. Run again, its derived push is a duplicate: the step was done
    // before, and the message is acked as that step said (`failed`), not `completed`.
    let (broker, client) = stocked(0).await;
    let (summary, outcomes, _) = refusal(
        &broker,
        "reserve-retried",
        2,
        |s| s.kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required()),
        Some(|d, gate| {
            let why = queen_sdk::AckStatus::Failed {
                error: gate.to_string(),
            };
            Ok(d.step_with(why).push("rejections", |p| p.payload(&d.data)))
        }),
    )
    .await;
    // Three deliveries (the first and two retries), none acked as done; the third
    // `failed` ack passes the retry limit and dead-letters it.
    let seen: Vec<&str> = outcomes.iter().map(Outcome::name).collect();
    assert_eq!(seen, ["refused", "failed", "failed"], "{summary}");
    assert_eq!(
        (
            summary.already_done,
            summary.refused,
            summary.failed,
            summary.dead_lettered
        ),
        (0, 1, 1, 1),
        "{summary}"
    );
    let rejections = broker.inspect().messages("rejections", "Default").unwrap();
    assert_eq!(rejections.len(), 1, "pushed once");
    let dead = client
        .dlq::<Job>(DlqQuery::queue("reserve-retried"))
        .await
        .unwrap();
    assert_eq!(dead.messages.len(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_step_the_broker_forbids_stops_the_worker_with_an_error() {
    // The worker pops with a read-write token; its credentials are then downgraded to a
    // read-only token (a token provider that rotates), so its step is refused 403. That
    // cannot have applied and will not change: the worker stops with an error instead
    // of going on.
    let broker = MockBroker::builder()
        .auth(
            Auth::new()
                .token("reader", Role::ReadOnly, "acme", None)
                .token("writer", Role::ReadWrite, "acme", None),
        )
        .start()
        .await
        .unwrap();
    let writer = Client::builder()
        .url(broker.url())
        .token("writer")
        .build()
        .unwrap();
    push(
        &writer,
        "forbidden",
        "Default",
        &[serde_json::json!({"n": 1})],
    )
    .await;
    let downgraded = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let now_reader = downgraded.clone();
    let rotating = Client::builder()
        .url(broker.url())
        .token_provider(move || {
            let reader = now_reader.load(Ordering::SeqCst);
            async move {
                Ok::<_, queen_sdk::TokenError>(if reader { "reader" } else { "writer" }.to_string())
            }
        })
        .build()
        .unwrap();
    let run = tokio::time::timeout(
        Duration::from_secs(10),
        rotating
            .worker::<Job>("forbidden")
            .wait(Duration::from_millis(200))
            .run(
                move |_d, step| {
                    downgraded.store(true, Ordering::SeqCst);
                    async move { Ok::<_, String>(step.push("receipts", |p| p.payload(&1))) }
                },
                std::future::pending::<()>(),
            ),
    )
    .await
    .expect("the worker stops by itself");
    let e = run.expect_err("a forbidden step is an error");
    assert_eq!(e.kind(), WorkerErrorKind::Refused);
    assert_eq!(e.cause().status(), Some(403), "{e}");
    let summary = e.summary();
    assert_eq!(
        (summary.processed, summary.abandoned, summary.unknown),
        (1, 1, 0),
        "{summary}"
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_step_that_dead_letters_its_message_is_counted_dead_lettered_not_committed() {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = client(&broker);
    push(
        &client,
        "invalid",
        "Default",
        &[serde_json::json!({"n": 1})],
    )
    .await;
    let outcomes = Arc::new(Mutex::new(Vec::new()));
    let observed = outcomes.clone();
    let summary = client
        .worker::<Job>("invalid")
        .on_settled(move |_, o| observed.lock().unwrap().push(o.clone()))
        .run_until_idle(|d, _step| async move {
            Ok::<_, String>(d.step_with(queen_sdk::AckStatus::Dlq))
        })
        .await
        .unwrap();
    assert_eq!(
        (summary.committed, summary.dead_lettered),
        (0, 1),
        "{summary}"
    );
    assert!(
        matches!(outcomes.lock().unwrap()[..], [Outcome::DeadLettered { .. }]),
        "{summary}"
    );
    let dead = client.dlq::<Job>(DlqQuery::queue("invalid")).await.unwrap();
    assert_eq!(dead.messages.len(), 1);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_refusal_whose_handler_fails_is_still_counted_refused() {
    let (broker, client) = stocked(0).await;
    let (summary, outcomes, _) = refusal(
        &broker,
        "refused-err",
        3,
        |s| s.kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required()),
        Some(|_d, _gate| Err("out of stock: later".to_string())),
    )
    .await;
    // Refused at each delivery (a retry limit of 3: 3 failures, then the dead
    // letter); never committed, never done, never `failed` as a handler error.
    assert_eq!(
        (summary.committed, summary.already_done, summary.failed),
        (0, 0, 0),
        "{summary}"
    );
    assert_eq!(
        summary.refused + summary.dead_lettered,
        summary.processed,
        "{summary}"
    );
    let first = outcomes[0].clone();
    assert!(
        matches!(
            first,
            Outcome::Refused {
                transaction_id: None,
                ..
            }
        ),
        "{first:?}"
    );
    let dead = client
        .dlq::<Job>(DlqQuery::queue("refused-err"))
        .await
        .unwrap();
    let reason = dead.messages[0].error_message.clone().unwrap_or_default();
    assert!(
        reason.contains("out of stock: later") && reason.contains("condition"),
        "{reason}"
    );
    broker.shutdown().await;
}

/// A worker's first call (the queue's dedup window, before its first pop) does not
/// hold up its shutdown: against a broker that takes connections and never answers,
/// a worker told to stop stops at once, without waiting out its retry deadline.
#[tokio::test]
async fn a_worker_told_to_stop_before_its_broker_answers_stops_at_once() {
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", silent.local_addr().unwrap());
    let held = tokio::spawn(async move {
        let mut open = Vec::new();
        while let Ok((conn, _)) = silent.accept().await {
            open.push(conn);
        }
    });
    let client = Client::builder().url(url).build().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let worker = tokio::spawn(client.worker::<Job>("jobs").run(
        |_d, step| async move { Ok::<_, String>(step) },
        async {
            let _ = stopped.await;
        },
    ));
    tokio::time::sleep(Duration::from_millis(200)).await;
    stop.send(()).unwrap();
    let summary = tokio::time::timeout(Duration::from_secs(2), worker)
        .await
        .expect("the worker stops within 2 s of being told")
        .unwrap()
        .expect("a stop is not an error");
    assert!(matches!(summary.stopped, Stopped::Shutdown));
    assert_eq!(summary.processed, 0);
    held.abort();
}
