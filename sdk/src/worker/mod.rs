//! A worker runtime: the consume loop most workers need, done once and right.
//!
//! [`Client::worker`] configures it; [`Worker::run`] pops batches, hands each message
//! to your handler, commits the step the handler returns, settles every outcome so no
//! message loops forever, keeps leases renewed, runs partitions concurrently while
//! keeping each partition's order, and on shutdown drains and answers a [`Summary`].

mod backoff;
mod error;
mod horizon;
mod lane;
mod run;
mod set;
mod settle;
mod summary;

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tracing::Instrument;

pub use error::{WorkerError, WorkerErrorKind};
pub use horizon::PastWindow;
pub use set::{WorkerSet, WorkerSetError};
pub use settle::Outcome;
pub use summary::{ErrorKind, Stopped, Summary};

use crate::client::Client;
use crate::consume::poll::PollSpec;
use crate::consume::{DEFAULT_BATCH, DEFAULT_LEASE, DEFAULT_WAIT, Delivery, StartAt};
use crate::epoch::Epoch;
use crate::error::{Error, Result};
use crate::message::Message;
use crate::retry::RetryPolicy;
use crate::txn::{Gate, TransactionBuilder};
use crate::validate;

use horizon::Horizon;
use run::{Handlers, Until};

/// How long a stopping worker waits for its handlers when not told.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Configures a worker; start it with [`Client::worker`], then [`Worker::run`] (or
/// [`Worker::run_until_idle`] in a test).
///
/// The handler gets each [`Delivery`] and its step: a [`TransactionBuilder`] that
/// already acks the delivery, fenced by its lease. It adds the rest of the work
/// (pushes, KV, timers) and answers the step to commit, or an error. The runner commits
/// it and settles every outcome; only a step that was done is settled as done:
///
/// | outcome | what the runner does |
/// |---|---|
/// | the step commits | done |
/// | a [`once`](TransactionBuilder::once) marker exists ([`Gate::already_done`]), or a `duplicate` rollback | the step was done before: the message is acked `completed` on its own |
/// | the SDK's step marker gated a resend ([`GateKind::Step`](crate::GateKind::Step): the first attempt's answer was lost) | the step committed, its ack with it: counted as already done, nothing more acked |
/// | another gate refused the step (a lock's [`guard`](TransactionBuilder::guard) that lapsed, a `required` condition that failed: [`crate::Commit::Gated`]) | handed to [`Worker::on_refused`], whose step is committed instead; without one, acked `failed` with the gate as the reason (so it comes back, and the retry limit dead-letters it); counted as refused, never as done |
/// | a step done before whose own ack was not `completed` (a rejection acked `failed` or `dlq`, run again: its push is a duplicate) | the message is acked as that step said, not `completed` |
/// | the broker refuses a step or an ack for good (401, 403) | nothing applied: the worker stops with a [`WorkerError`] (as for a refused pop), the message left to its lease |
/// | a `rejected_ack` rollback, or the lease known lost | the lease holder has the message: nothing is committed |
/// | a `rejected_ack` rollback of a resend (`retried: true`) | the first attempt most probably committed, its ack releasing the lease: counted as already done (if not, the redelivered step finds itself done) |
/// | the handler errs or panics, or the step cannot commit ([`Error::Invalid`], another rollback) | acked `failed` with the error text (one attempt; the queue's `retryLimit` dead-letters it in the end); the worker goes on. With [`Worker::retry_handler`], a handler's error first runs it again after a growing wait, the lease renewed |
/// | the outcome is unknown ([`Error::OutcomeUnknown`], retries exhausted) | left to the lease's expiry, and counted |
/// | the payload does not decode as `T` | dead-lettered with the decoding error as the reason, or handed to [`Worker::on_undecodable`] |
///
/// Each popped batch is one partition's run of messages under one lease; up to
/// `concurrency` batches (so partitions) are handled at once, each strictly in order,
/// one message at a time. After a `failed` ack, a lost lease or an unknown outcome the
/// rest of that batch is left (it comes back, in order, at a later pop). Leases are
/// renewed while their batch is in hand. The worker runs in a `queen.worker` tracing
/// span (queue, group) and each step in a `queen.step` span
/// (queue, partition, group, message id, transaction id, delivery attempt, the
/// committed transaction's id and the outcome); settlements and failures are events.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// use queen_sdk::{PushItem, StartAt, Ttl};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// #[serde(rename_all = "camelCase")]
/// struct OrderPaid { order_id: String, total: f64 }
///
/// client.push(vec![PushItem::new("orders", &OrderPaid { order_id: "o-7".into(), total: 12.5 })]).await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let worker = client
///     .worker::<OrderPaid>("orders")
///     .group("billing", StartAt::Beginning) // a new group reads the backlog
///     .concurrency(4)
///     .batch(10)
///     .lease(Duration::from_secs(60));
/// let running = tokio::spawn(worker.run(
///     |order, step| async move {
///         Ok::<_, std::convert::Infallible>(
///             step.push("receipts", |p| p.payload(&order.data.order_id))
///                 .once("paid", &order.data.order_id, Ttl::days(1)),
///         )
///     },
///     async { stopped.await.ok(); }, // or tokio::signal::ctrl_c(), a CancellationToken's cancelled_owned()...
/// ));
/// # broker.wait_for("the receipt", Duration::from_secs(10), |i| Ok(i.messages("receipts", queen_sdk::DEFAULT_PARTITION)?.len() == 1)).await?;
/// stop.send(()).ok();
/// let summary = running.await??;
/// assert_eq!((summary.processed, summary.committed), (1, 1));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[must_use = "a worker does nothing until run"]
pub struct Worker<T> {
    client: Client,
    spec: PollSpec,
    concurrency: usize,
    grace: Duration,
    observer: Option<lane::Observer>,
    undecodable: Option<lane::UndecodableHandler>,
    refused: Option<lane::RefusedHandler<T>>,
    /// The queue's dedup window as the user declared it.
    dedup_window: Option<Duration>,
    past_window: PastWindow,
    retry: Option<RetryPolicy>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Worker<T> {
    fn clone(&self) -> Self {
        Worker {
            client: self.client.clone(),
            spec: self.spec.clone(),
            concurrency: self.concurrency,
            grace: self.grace,
            observer: self.observer.clone(),
            undecodable: self.undecodable.clone(),
            refused: self.refused.clone(),
            dedup_window: self.dedup_window,
            past_window: self.past_window,
            retry: self.retry.clone(),
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Worker<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Worker")
            .field("spec", &self.spec)
            .field("concurrency", &self.concurrency)
            .field("grace", &self.grace)
            .field("observed", &self.observer.is_some())
            .field("undecodable_handled", &self.undecodable.is_some())
            .field("refused_handled", &self.refused.is_some())
            .field("dedup_window", &self.dedup_window)
            .field("past_window", &self.past_window)
            .field("retry_handler", &self.retry)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Configures a worker on `queue` whose payloads decode as `T`: the competing
    /// consumers' group unless [`Worker::group`] names one, one batch at a time
    /// (`concurrency` 1), 10 messages a pop, 60 s leases renewed while in hand, 30 s
    /// long-polls, a 30 s grace period at shutdown. See [`Worker`].
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use queen_sdk::StartAt;
    /// let worker = client.worker::<serde_json::Value>("orders").group("billing", StartAt::Beginning).concurrency(8);
    /// # let _ = worker;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn worker<T: DeserializeOwned + Send + 'static>(
        &self,
        queue: impl Into<String>,
    ) -> Worker<T> {
        Worker {
            client: self.clone(),
            spec: PollSpec {
                queue: queue.into(),
                partition: None,
                group: None,
                batch: DEFAULT_BATCH,
                wait: DEFAULT_WAIT,
                lease: DEFAULT_LEASE,
                start: None,
                epoch: None,
            },
            concurrency: 1,
            grace: DEFAULT_GRACE,
            observer: None,
            undecodable: None,
            refused: None,
            dedup_window: None,
            past_window: PastWindow::Process,
            retry: None,
            _t: PhantomData,
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> Worker<T> {
    /// Work as the named consumer group (default: the competing consumers, which always
    /// read from the beginning), starting at `start` if the group has never read the
    /// queue: [`StartAt::Beginning`] processes the backlog, [`StartAt::New`] skips it,
    /// [`StartAt::Time`] starts at a time. A group that has read the queue goes on from
    /// its cursor whatever `start` says.
    ///
    /// The start is an argument because Queen's default for a new group is "new
    /// messages only": a worker deployed after its producers would skip their backlog
    /// without a word. (A raw [`Client::pop`] keeps Queen's default.)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, StartAt};
    /// client.push((1..=3).map(|n| PushItem::new("payments", &n)).collect()).await?;
    /// // First deployed after the three payments: it still handles them.
    /// let summary = client
    ///     .worker::<u32>("payments")
    ///     .group("ledger", StartAt::Beginning)
    ///     .run_until_idle(|_payment, step| async move { Ok::<_, String>(step) })
    ///     .await?;
    /// assert_eq!(summary.committed, 3);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn group(mut self, group: impl Into<String>, start: StartAt) -> Self {
        self.spec.group = Some(group.into());
        self.spec.start = Some(start);
        self
    }

    /// Only this partition (then `concurrency` above 1 gains nothing: a partition is
    /// leased to one batch at a time).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let one = client.worker::<serde_json::Value>("orders").partition("customer-1");
    /// # let _ = one;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.spec.partition = Some(partition.into());
        self
    }

    /// How many batches (so partitions) are handled at once (default 1, at least 1:
    /// 0 fails [`Worker::run`] with [`WorkerErrorKind::Invalid`]).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let wide = client.worker::<serde_json::Value>("orders").concurrency(16);
    /// # let _ = wide;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n;
        self
    }

    /// Most messages per pop (default 10, at least 1: 0 fails [`Worker::run`]).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let big = client.worker::<serde_json::Value>("orders").batch(100);
    /// # let _ = big;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn batch(mut self, n: u32) -> Self {
        self.spec.batch = n;
        self
    }

    /// Runs every step in `epoch` ([`Epoch`]): each step's derived push and timer ids
    /// and its `once` markers carry the epoch's name, as do the steps that
    /// [`Delivery::step`] builds in [`Worker::on_refused`] and
    /// [`Worker::on_undecodable`]. The replay after a fix: seek the group back
    /// ([`Client::seek`]) and run the corrected worker in a new epoch; each replayed
    /// message is processed again and each output produced once (a redelivery within
    /// the epoch is still a duplicate). Without it, a replayed step finds the first
    /// run's ids and markers and is counted already done.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Epoch, PushItem, SeekTo, StartAt, Ttl};
    /// client.push((1..=3).map(|n| PushItem::new("jobs", &n)).collect()).await?;
    /// let worker = client.worker::<u32>("jobs").group("squares", StartAt::Beginning);
    /// let square = |job: queen_sdk::Delivery<u32>, step: queen_sdk::TransactionBuilder| async move {
    ///     let n = job.data;
    ///     Ok::<_, String>(step.once("squared", n.to_string(), Ttl::days(1)).push("squares", |p| p.payload(&(n * n))))
    /// };
    /// assert_eq!(worker.clone().run_until_idle(square).await?.committed, 3);
    /// // A bug is fixed: replay the group in a new epoch.
    /// client.seek("squares", "jobs", SeekTo::Beginning).await?;
    /// let replay = worker.clone().epoch(Epoch::new("fix-1")?).run_until_idle(square).await?;
    /// assert_eq!((replay.committed, replay.already_done), (3, 0));
    /// // Replayed again in the same epoch: each step is already done.
    /// client.seek("squares", "jobs", SeekTo::Beginning).await?;
    /// let again = worker.epoch(Epoch::new("fix-1")?).run_until_idle(square).await?;
    /// assert_eq!((again.committed, again.already_done), (0, 3));
    /// assert_eq!(broker.inspect().messages("squares", queen_sdk::DEFAULT_PARTITION)?.len(), 6);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn epoch(mut self, epoch: Epoch) -> Self {
        self.spec.epoch = Some(epoch);
        self
    }

    /// The queue's dedup window, declared: how long the broker remembers a pushed
    /// `transactionId` ([`QueueOptions::dedup_window`](crate::QueueOptions::dedup_window)),
    /// so how long a step's derived push ids make its second run a duplicate. Without
    /// it the worker reads the window from the queue's detail
    /// ([`Client::queue_stats`]) when it starts, before its first pop, and assumes
    /// Queen's default, 3600 s, when the broker does not state it (Queen 2's engine
    /// does not). A delivery older than the window is counted and logged, and handled
    /// as [`Worker::past_dedup_window`] says. Zero says deduplication is off: nothing is
    /// counted.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let w = client.worker::<serde_json::Value>("orders").dedup_window(Duration::from_secs(86_400));
    /// # let _ = w;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn dedup_window(mut self, window: Duration) -> Self {
        self.dedup_window = Some(window);
        self
    }

    /// What to do with a delivery older than the queue's dedup window
    /// ([`Worker::dedup_window`]): process it (the default) or dead-letter it
    /// unprocessed ([`PastWindow`]). Either way it is counted in
    /// [`Summary::past_dedup_window`] and logged.
    ///
    /// The bounds of duplicate protection, in one place:
    ///
    /// | guard | recognises a second run for |
    /// |---|---|
    /// | a derived push or timer id | the queue's dedup window (`dedupWindowSeconds`, default 3600 s), counted from the first push |
    /// | a [`once`](TransactionBuilder::once) marker | its `ttl` |
    /// | the SDK's step marker ([`Resend`](crate::Resend)) | twice the retry deadline, at least 60 s: resends of one call only |
    /// | an [`Epoch`] | nothing across epochs: a new epoch runs every step again |
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::{PastWindow, PushItem, QueueOptions};
    /// client.configure("payments", QueueOptions::new().dedup_window(Duration::from_secs(1))).await?;
    /// client.push(vec![PushItem::new("payments", &7)]).await?;
    /// tokio::time::sleep(Duration::from_millis(2100)).await; // older than the window
    /// let summary = client
    ///     .worker::<u32>("payments")
    ///     .past_dedup_window(PastWindow::DeadLetter)
    ///     .run_until_idle(|_, step| async move { Ok::<_, String>(step.push("charges", |p| p.payload(&1))) })
    ///     .await?;
    /// assert_eq!((summary.past_dedup_window, summary.dead_lettered, summary.processed), (1, 1, 0));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn past_dedup_window(mut self, policy: PastWindow) -> Self {
        self.past_window = policy;
        self
    }

    /// The lease each batch is popped with, renewed about every third of it while the
    /// batch is in hand (whole seconds; default 60 s; under 1 s fails [`Worker::run`]).
    /// A short lease lets a crashed worker's messages come back quickly. It overrides,
    /// for this worker's pops, the queue's own `leaseTime`
    /// ([`QueueOptions::lease_time`](crate::QueueOptions::lease_time)).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let quick = client.worker::<serde_json::Value>("orders").lease(Duration::from_secs(15));
    /// # let _ = quick;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn lease(mut self, d: Duration) -> Self {
        self.spec.lease = d;
        self
    }

    /// How long each pop long-polls (default 30 s, at least 100 ms).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let w = client.worker::<serde_json::Value>("orders").wait(Duration::from_secs(10));
    /// # let _ = w;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn wait(mut self, d: Duration) -> Self {
        self.spec.wait = d.max(Duration::from_millis(100));
        self
    }

    /// How long a stopping worker lets its running handlers finish (default 30 s);
    /// past it they are cancelled, and their messages and those behind them are given
    /// back (`retry` acks) for the next worker.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let w = client.worker::<serde_json::Value>("orders").grace(Duration::from_secs(5));
    /// # let _ = w;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn grace(mut self, d: Duration) -> Self {
        self.grace = d;
        self
    }

    /// Runs the handler again, in process, when it answers an error, and acks the
    /// message `failed` only once `policy`'s attempts are used: the waits grow
    /// exponentially from [`RetryPolicy::min_delay`] to [`RetryPolicy::max_delay`],
    /// jittered unless [`RetryPolicy::jitter`] is off, at most
    /// [`RetryPolicy::max_attempts`] runs in all, and no wait ends past
    /// [`RetryPolicy::deadline`] counted from the first run. The `failed` ack carries the
    /// last error and spends one attempt of the queue's `retryLimit`. Without it (the
    /// default) the first error acks the message `failed`.
    ///
    /// This is where a backoff lives: Queen 2 redelivers a message acked `failed` at
    /// once (its queue option `retryDelay` is stored but not applied, see
    /// [`QueueOptions::retry_delay`](crate::QueueOptions::retry_delay)), so a handler
    /// that fails for a moment (a payment result arriving before the row it updates)
    /// would spend a `retryLimit` of 3 in under a second and be dead-lettered.
    ///
    /// - **What is run again**: an `Err` of the handler given to [`Worker::run`], taken
    ///   as transient. A failure you know is permanent is not an `Err`: answer the step
    ///   that settles it (`msg.step_with(AckStatus::Dlq)` dead-letters it now,
    ///   `msg.step_with(AckStatus::Failed { error })` spends one attempt with no wait).
    ///   A panic is a bug and is acked `failed` at once; the
    ///   [`on_refused`](Worker::on_refused) and [`on_undecodable`](Worker::on_undecodable)
    ///   handlers and a step that cannot commit are settled as before.
    /// - **The lease**: it is renewed during the wait as while a handler runs (about
    ///   every third of [`Worker::lease`]), so a wait may be longer than the lease. If it
    ///   can no longer be renewed the wait ends at once and nothing is acked: the lease
    ///   holder has the message ([`Summary::lease_lost`]). Each run's step is fenced by
    ///   the lease as always.
    /// - **Order**: the rest of the partition's batch waits behind the message.
    /// - **Shutdown**: a worker told to stop ends the wait at once and acks the message
    ///   `failed` with its last error. Not given back with `retry` and not left to the
    ///   lease: neither counts an attempt, so a message that always fails, met by
    ///   workers that restart often, would never reach the retry limit.
    /// - **Counted**: each further run in [`Summary::retries`], each failed run in
    ///   [`Summary::errors`] under [`ErrorKind::Handler`]; the message once, as it
    ///   settles.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::sync::Arc;
    /// use std::sync::atomic::{AtomicU32, Ordering};
    /// use std::time::Duration;
    /// use queen_sdk::{PushItem, QueueOptions, RetryPolicy};
    /// client.configure("payments", QueueOptions::new().retry_limit(3)).await?;
    /// client.push(vec![PushItem::new("payments", &"o-7")]).await?;
    /// let runs = Arc::new(AtomicU32::new(0));
    /// let seen = runs.clone();
    /// let summary = client
    ///     .worker::<String>("payments")
    ///     .retry_handler(
    ///         RetryPolicy::default()
    ///             .max_attempts(5)
    ///             .min_delay(Duration::from_millis(20))
    ///             .max_delay(Duration::from_secs(2)),
    ///     )
    ///     .run_until_idle(move |_payment, step| {
    ///         // The saga's row is not there for the first two runs.
    ///         let early = seen.fetch_add(1, Ordering::SeqCst) < 2;
    ///         async move { if early { Err("no saga yet") } else { Ok(step) } }
    ///     })
    ///     .await?;
    /// assert_eq!((summary.committed, summary.failed, summary.retries), (1, 0, 2));
    /// assert_eq!(runs.load(Ordering::SeqCst), 3); // all three on the first delivery
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_handler(mut self, policy: RetryPolicy) -> Self {
        self.retry = (policy.attempts() > 1).then_some(policy);
        self
    }

    /// Calls `f` after each message is settled, with the message (its payload left
    /// out) and how it ended: to log, count or export settlements your own way. It runs
    /// on the worker's lane, so keep it quick.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Outcome, PushItem};
    /// client.push(vec![PushItem::new("jobs", &1)]).await?;
    /// client
    ///     .worker::<u32>("jobs")
    ///     .on_settled(|msg, outcome| {
    ///         if let Outcome::Committed { transaction_id, .. } = outcome {
    ///             println!("{} committed in {transaction_id}", msg.id);
    ///         }
    ///     })
    ///     .run_until_idle(|_job, step| async move { Ok::<_, String>(step) })
    ///     .await?;
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_settled(
        mut self,
        f: impl Fn(&Message<()>, &Outcome) + Send + Sync + 'static,
    ) -> Self {
        self.observer = Some(Arc::new(f));
        self
    }

    /// Hands messages whose payload does not decode as `T` to `handler` (with the
    /// payload as JSON and the decoding error) instead of dead-lettering them. It answers
    /// the step to commit, like the main handler, and is settled the same way: a
    /// `bad.step_with(AckStatus::Dlq)` dead-letters it, `bad.step()` drops it, an error
    /// acks it `failed`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client.push(vec![PushItem::new("jobs", &"seven")]).await?;
    /// let summary = client
    ///     .worker::<u32>("jobs")
    ///     .on_undecodable(|bad, reason| async move {
    ///         // Keep it for a human, in a queue of our own, and ack it.
    ///         let keep = serde_json::json!({"payload": bad.data, "why": reason});
    ///         Ok::<_, String>(bad.step().push("jobs-to-fix", |p| p.payload(&keep)))
    ///     })
    ///     .run_until_idle(|_job, step| async move { Ok::<_, String>(step) })
    ///     .await?;
    /// assert_eq!((summary.committed, summary.dead_lettered), (1, 0));
    /// assert_eq!(broker.inspect().messages("jobs-to-fix", queen_sdk::DEFAULT_PARTITION)?.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_undecodable<H, Fut, E>(mut self, handler: H) -> Self
    where
        H: Fn(Delivery<serde_json::Value>, String) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        self.undecodable = Some(Arc::new(move |d, reason| lane::erased(handler(d, reason))));
        self
    }

    /// Decides what becomes of a message whose step a gate refused for a reason other
    /// than "already done": a lock's [`guard`](TransactionBuilder::guard) that lapsed,
    /// a `required` condition that failed (stock too low for
    /// `incr(-qty).min(0).required()`). `handler` gets the delivery again and the
    /// [`Gate`] that refused, and answers the step to commit instead: `msg.step().push(..)`
    /// settles it another way (a rejection pushed, the message acked),
    /// `msg.step_with(AckStatus::Dlq).push(..)` dead-letters it with the rejection,
    /// `msg.step_with(AckStatus::Retry)` gives it back without using an attempt, an
    /// error acks it `failed` with the gate and the error as the reason (it comes back;
    /// still counted as refused). Its committed step is
    /// [`Outcome::Refused`] with its `transaction_id`, counted in [`Summary::refused`] (or
    /// [`Summary::dead_lettered`] if it acked the message `dlq`), never as committed or
    /// done. A refusal of that step too is acked `failed`.
    ///
    /// Without it, a refused step's message is acked `failed` with the gate as the
    /// reason, counted in [`Summary::refused`]: it comes back, and the queue's retry
    /// limit dead-letters it in the end. It is never acked as done.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{GateKind, KvReason, PushItem, StartAt, Ttl};
    /// #[derive(serde::Serialize, serde::Deserialize)]
    /// struct Reserve { order: String, sku: String, qty: i64 }
    /// client.kv().put("stock", "sku-1", &2, Ttl::Forever).await?;
    /// client.push(vec![PushItem::new("reservations", &Reserve { order: "o-7".into(), sku: "sku-1".into(), qty: 5 })]).await?;
    /// let summary = client
    ///     .worker::<Reserve>("reservations")
    ///     .group("inventory", StartAt::Beginning)
    ///     .on_refused(|msg, gate| async move {
    ///         match (gate.kind, &gate.reason) {
    ///             // Not enough stock: say so, and settle the request.
    ///             (GateKind::Condition, KvReason::Limit) => Ok(msg.step().push("rejections", |p| p.payload(&msg.data.order))),
    ///             _ => Err(format!("retry later: {gate}")),
    ///         }
    ///     })
    ///     .run_until_idle(|msg, step| async move {
    ///         let r = &msg.data;
    ///         Ok::<_, String>(step.kv(|k| k.incr("stock", &r.sku, -r.qty, Ttl::Forever).min(0).required()))
    ///     })
    ///     .await?;
    /// // Settled by the rejection's step, and counted as refused: neither done nor committed.
    /// assert_eq!((summary.committed, summary.already_done, summary.refused), (0, 0, 1));
    /// assert_eq!(broker.inspect().kv::<i64>("stock", "sku-1")?, Some(2)); // untouched
    /// assert_eq!(broker.inspect().messages("rejections", queen_sdk::DEFAULT_PARTITION)?.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on_refused<H, Fut, E>(mut self, handler: H) -> Self
    where
        H: Fn(Delivery<T>, Gate) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        self.refused = Some(Arc::new(move |d, gate| lane::erased(handler(d, gate))));
        self
    }

    /// Checks the settings; nothing is sent.
    fn check(&self) -> Result<()> {
        validate::name("worker queue", &self.spec.queue)?;
        if self.concurrency == 0 {
            return Err(Error::invalid("worker", "concurrency must be at least 1"));
        }
        if self.spec.batch == 0 {
            return Err(Error::invalid("worker", "batch must be at least 1"));
        }
        if self.spec.lease < Duration::from_secs(1) {
            return Err(Error::invalid(
                "worker",
                format!(
                    "a lease of {:?} is under the broker's 1 s resolution",
                    self.spec.lease
                ),
            ));
        }
        Ok(())
    }

    /// Runs the worker until `shutdown` resolves (a signal, a channel, a cancellation
    /// token's `cancelled()`...). On shutdown it stops polling, lets running handlers
    /// finish within the grace period and commits their steps, gives back delivered
    /// messages not started (`retry` acks), stops renewing leases, and answers the
    /// [`Summary`].
    ///
    /// `handler` gets each delivery and its step (a transaction that already acks it,
    /// fenced by its lease) and answers the step to commit; see [`Worker`] for how each
    /// outcome is settled. Idle queues, failed pops (backed off and retried), handler
    /// errors and panics do not stop it.
    ///
    /// A handler's step that acks its message `dlq` ([`Delivery::step_with`]) is counted
    /// as dead-lettered ([`Outcome::DeadLettered`]), not as committed.
    ///
    /// One signal for several workers: a [`CancellationToken`](crate::CancellationToken)
    /// (re-exported by this crate), each worker given `token.clone().cancelled_owned()`
    /// (a future that owns its token, so it can be moved into a spawned task). To also
    /// stop them all when one fails, run them in a [`WorkerSet`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::CancellationToken;
    /// let stop = CancellationToken::new();
    /// let orders = tokio::spawn(client.worker::<String>("orders").run(
    ///     |_order, step| async move { Ok::<_, String>(step) },
    ///     stop.clone().cancelled_owned(),
    /// ));
    /// let payments = tokio::spawn(client.worker::<f64>("payments").run(
    ///     |_payment, step| async move { Ok::<_, String>(step) },
    ///     stop.clone().cancelled_owned(),
    /// ));
    /// stop.cancel(); // both stop
    /// let (orders, payments) = (orders.await??, payments.await??);
    /// assert_eq!((orders.stopped, payments.stopped), (queen_sdk::Stopped::Shutdown, queen_sdk::Stopped::Shutdown));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// A stop that `shutdown` did not ask for is an `Err`, so `main` fails with it: the
    /// broker refusing the worker for good (a pop answered 401, 403 or the queue gone, a
    /// step or an ack answered 401 or 403: a [`WorkerError`] of kind
    /// [`WorkerErrorKind::Refused`], after draining what it held), or settings that cannot work (`concurrency(0)`, `batch(0)`, a lease under
    /// a second, a bad queue name: [`WorkerErrorKind::Invalid`], before anything is
    /// sent). A read-only token is refused at the first pop (a pop leases, so it needs
    /// `read-write`), even on an empty queue.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, WorkerErrorKind};
    /// client.push(vec![PushItem::new("jobs", &1), PushItem::new("jobs", &"two")]).await?;
    /// let summary = client
    ///     .worker::<u32>("jobs")
    ///     .run(
    ///         |_job, step| async move { Ok::<_, String>(step) },
    ///         tokio::time::sleep(std::time::Duration::from_millis(500)), // stop after half a second
    ///     )
    ///     .await?;
    /// assert_eq!((summary.committed, summary.dead_lettered), (1, 1)); // "two" is no u32
    ///
    /// let misuse = client
    ///     .worker::<u32>("jobs")
    ///     .concurrency(0)
    ///     .run(|_job, step| async move { Ok::<_, String>(step) }, std::future::pending());
    /// assert_eq!(misuse.await.unwrap_err().kind(), WorkerErrorKind::Invalid);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<H, Fut, E>(
        self,
        handler: H,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::result::Result<Summary, WorkerError>
    where
        H: Fn(Delivery<T>, TransactionBuilder) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        self.start(handler, Until::Shutdown, shutdown).await
    }

    /// Runs the worker until the queue is settled: a pop finds nothing left while
    /// nothing is in hand (a message acked `failed` comes back and is handled again
    /// first, until it commits or the retry limit dead-letters it). Then it drains as on
    /// shutdown and answers the [`Summary`] (with [`Stopped::Idle`]). Pops do not
    /// long-poll, so it returns as soon as the queue is settled; what waits for a
    /// lease's expiry (a step whose outcome is unknown) or a timer is not waited for.
    ///
    /// For tests and batch jobs: a test runs its worker over what it pushed and then
    /// checks the stored state, without a polling loop or a sleep. Errors as
    /// [`Worker::run`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, Stopped};
    /// client.push((1..=5).map(|n| PushItem::new("jobs", &n)).collect()).await?;
    /// let summary = client
    ///     .worker::<u32>("jobs")
    ///     .run_until_idle(|job, step| async move {
    ///         Ok::<_, String>(step.push("squares", |p| p.payload(&(job.data * job.data))))
    ///     })
    ///     .await?;
    /// assert_eq!((summary.committed, summary.stopped), (5, Stopped::Idle));
    /// assert_eq!(broker.inspect().messages("squares", queen_sdk::DEFAULT_PARTITION)?.len(), 5);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run_until_idle<H, Fut, E>(
        mut self,
        handler: H,
    ) -> std::result::Result<Summary, WorkerError>
    where
        H: Fn(Delivery<T>, TransactionBuilder) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        self.spec.wait = Duration::ZERO;
        self.start(handler, Until::Idle, std::future::pending())
            .await
    }

    async fn start<H, Fut, E>(
        self,
        handler: H,
        until: Until,
        shutdown: impl Future<Output = ()> + Send,
    ) -> std::result::Result<Summary, WorkerError>
    where
        H: Fn(Delivery<T>, TransactionBuilder) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        if let Err(e) = self.check() {
            return Err(WorkerError::new(
                WorkerErrorKind::Invalid,
                e,
                Summary::default(),
            ));
        }
        let mut spec = self.spec;
        // The broker leases in whole seconds: renew on the lease it grants.
        spec.lease = Duration::from_secs(spec.lease.as_secs());
        let step: lane::Handler<T> = Arc::new(move |d, step| lane::erased(handler(d, step)));
        let span = tracing::info_span!(
            "queen.worker",
            queue = %spec.queue,
            group = spec.group.as_deref().unwrap_or(crate::QUEUE_MODE),
        );
        let handlers = Handlers {
            step,
            undecodable: self.undecodable,
            refused: self.refused,
            observer: self.observer,
            horizon: Horizon::new(self.dedup_window, self.past_window),
            retry: self.retry,
        };
        run::run(
            self.client,
            spec,
            self.concurrency,
            self.grace,
            handlers,
            until,
            shutdown,
        )
        .instrument(span)
        .await
    }
}
