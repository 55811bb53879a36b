//! A worker runtime: the consume loop most workers need, done once and right.
//!
//! [`Client::worker`] configures it; [`Worker::run`] pops batches, hands each message
//! to your handler, commits the step the handler returns, settles every outcome so no
//! message loops forever, keeps leases renewed, runs partitions concurrently while
//! keeping each partition's order, and on shutdown drains and answers a [`Summary`].

mod lane;
mod run;
mod settle;
mod summary;

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tracing::Instrument;

pub use settle::Outcome;
pub use summary::{ErrorKind, Stopped, Summary};

use crate::client::Client;
use crate::consume::poll::PollSpec;
use crate::consume::{DEFAULT_BATCH, DEFAULT_LEASE, DEFAULT_WAIT, Delivery};
use crate::error::{Error, Result};
use crate::message::{Message, SubscriptionMode};
use crate::txn::TransactionBuilder;
use crate::validate;

/// How long a stopping worker waits for its handlers when not told.
const DEFAULT_GRACE: Duration = Duration::from_secs(30);

/// Configures a worker; start it with [`Client::worker`], then [`Worker::run`].
///
/// The handler gets each [`Delivery`] and answers the step to commit for it (a
/// [`TransactionBuilder`]; the runner adds the ack of the delivery if the step lacks
/// it) or an error. The runner settles every outcome:
///
/// | outcome | what the runner does |
/// |---|---|
/// | the step commits | done |
/// | [`crate::Commit::Gated`], or a `duplicate` rollback | the step was already done: the message is acked `completed` on its own |
/// | a `rejected_ack` rollback, or the lease known lost | the lease holder has the message: nothing is committed |
/// | a `rejected_ack` rollback of a resend (`retried: true`) | the first attempt most probably committed, its ack releasing the lease: counted as already done (if not, the redelivered step finds itself done) |
/// | the handler errs or panics, or the step cannot commit ([`Error::Invalid`], another rollback) | acked `failed` with the error text (one attempt; the queue's `retryLimit` dead-letters it in the end); the worker goes on |
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
/// use queen_sdk::{PushItem, SubscriptionMode, Ttl};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct OrderPaid { order_id: String, total: f64 }
///
/// client.push(vec![PushItem::new("orders", &OrderPaid { order_id: "o-7".into(), total: 12.5 })]).await?;
/// let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
/// let worker = client
///     .worker::<OrderPaid>("orders")
///     .group("billing")
///     .subscription(SubscriptionMode::All)
///     .concurrency(4)
///     .batch(10)
///     .lease(Duration::from_secs(60));
/// let steps = client.clone();
/// let running = tokio::spawn(worker.run(
///     move |order| {
///         let step = steps
///             .transaction()
///             .ack(&order)
///             .push("receipts", |p| p.payload(&order.data.order_id))
///             .once("paid", &order.data.order_id, Ttl::days(1));
///         async move { Ok::<_, std::convert::Infallible>(step) }
///     },
///     async { stopped.await.ok(); }, // or tokio::signal::ctrl_c(), a CancellationToken's cancelled()...
/// ));
/// # while broker.inspect().messages("receipts", "Default")?.is_empty() {
/// #     tokio::time::sleep(Duration::from_millis(20)).await;
/// # }
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
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Configures a worker on `queue` whose payloads decode as `T`: one batch at a time
    /// (`concurrency` 1), 10 messages a pop, 60 s leases renewed while in hand, 30 s
    /// long-polls, a 30 s grace period at shutdown, the competing consumers' group.
    /// See [`Worker`].
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let worker = client.worker::<serde_json::Value>("orders").group("billing").concurrency(8);
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
                subscription: None,
            },
            concurrency: 1,
            grace: DEFAULT_GRACE,
            observer: None,
            undecodable: None,
            _t: PhantomData,
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> Worker<T> {
    /// The consumer group (default: competing consumers). A new named group reads only
    /// what arrives after its first pop unless told otherwise ([`Worker::subscription`]).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let billing = client.worker::<serde_json::Value>("orders").group("billing");
    /// # let _ = billing;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.spec.group = Some(group.into());
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

    /// Where a new named group starts reading.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use queen_sdk::SubscriptionMode;
    /// let replay = client.worker::<serde_json::Value>("orders").group("replay").subscription(SubscriptionMode::All);
    /// # let _ = replay;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn subscription(mut self, mode: SubscriptionMode) -> Self {
        self.spec.subscription = Some(mode);
        self
    }

    /// How many batches (so partitions) are handled at once (default 1, at least 1:
    /// 0 fails [`Worker::run`] with [`Error::Invalid`]).
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

    /// The lease each batch is popped with, renewed about every third of it while the
    /// batch is in hand (whole seconds; default 60 s; under 1 s fails [`Worker::run`]).
    /// A short lease lets a crashed worker's messages come back quickly.
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
    /// let steps = client.clone();
    /// client
    ///     .worker::<u32>("jobs")
    ///     .on_settled(|msg, outcome| {
    ///         if let Outcome::Committed { transaction_id, .. } = outcome {
    ///             println!("{} committed in {transaction_id}", msg.id);
    ///         }
    ///     })
    ///     .run(
    ///         move |job| std::future::ready(Ok::<_, String>(steps.transaction().ack(&job))),
    ///         tokio::time::sleep(std::time::Duration::from_millis(300)),
    ///     )
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
    /// the step to commit, like the main handler, and is settled the same way: an
    /// `ack_with(&delivery, AckStatus::Dlq)` dead-letters it, a plain ack drops it, an
    /// error acks it `failed`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client.push(vec![PushItem::new("jobs", &"seven")]).await?;
    /// let (steps, fixes) = (client.clone(), client.clone());
    /// let summary = client
    ///     .worker::<u32>("jobs")
    ///     .on_undecodable(move |bad, reason| {
    ///         // Keep it for a human, in a queue of our own, and ack it.
    ///         let step = fixes
    ///             .transaction()
    ///             .ack(&bad)
    ///             .push("jobs-to-fix", |p| p.payload(&serde_json::json!({"payload": bad.data, "why": reason})));
    ///         async move { Ok::<_, String>(step) }
    ///     })
    ///     .run(
    ///         move |job| std::future::ready(Ok::<_, String>(steps.transaction().ack(&job))),
    ///         tokio::time::sleep(std::time::Duration::from_millis(300)),
    ///     )
    ///     .await?;
    /// assert_eq!((summary.committed, summary.dead_lettered), (1, 0));
    /// assert_eq!(broker.inspect().messages("jobs-to-fix", "Default")?.len(), 1);
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
        self.undecodable = Some(Arc::new(move |d, reason| {
            let fut = handler(d, reason);
            Box::pin(async move { fut.await.map_err(|e| format!("{e:#}")) })
        }));
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
    /// token's `cancelled()`...) or the broker refuses its pop for good (401, 403, the
    /// queue gone: then [`Summary::stopped`] says so). On shutdown it stops polling,
    /// lets running handlers finish within the grace period and commits their steps,
    /// gives back delivered messages not started (`retry` acks), stops renewing leases,
    /// and answers the [`Summary`].
    ///
    /// Idle queues, failed pops (backed off and retried), handler errors and panics do
    /// not stop it. Settings that cannot work (`concurrency(0)`, `batch(0)`, a lease
    /// under a second, a bad queue name) fail with [`Error::Invalid`] before anything is
    /// sent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Error, PushItem};
    /// client.push(vec![PushItem::new("jobs", &1), PushItem::new("jobs", &"two")]).await?;
    /// let steps = client.clone();
    /// let summary = client
    ///     .worker::<u32>("jobs")
    ///     .run(
    ///         move |job| {
    ///             let step = steps.transaction().ack(&job);
    ///             async move { Ok::<_, Error>(step) }
    ///         },
    ///         tokio::time::sleep(std::time::Duration::from_millis(500)), // stop after half a second
    ///     )
    ///     .await?;
    /// assert_eq!((summary.committed, summary.dead_lettered), (1, 1)); // "two" is no u32
    ///
    /// let misuse = client.worker::<u32>("jobs").concurrency(0).run(
    ///     |job| async move { Err::<queen_sdk::TransactionBuilder, _>(format!("{}", job.id)) },
    ///     std::future::pending(),
    /// );
    /// assert!(matches!(misuse.await, Err(Error::Invalid { .. })));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn run<H, Fut, E>(
        self,
        handler: H,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<Summary>
    where
        H: Fn(Delivery<T>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = std::result::Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        self.check()?;
        let mut spec = self.spec;
        // The broker leases in whole seconds: renew on the lease it grants.
        spec.lease = Duration::from_secs(spec.lease.as_secs());
        let handler: lane::Handler<T> = Arc::new(move |d| {
            let fut = handler(d);
            Box::pin(async move { fut.await.map_err(|e| format!("{e:#}")) })
        });
        let span = tracing::info_span!(
            "queen.worker",
            queue = %spec.queue,
            group = spec.group.as_deref().unwrap_or(crate::QUEUE_MODE),
        );
        Ok(run::run(
            self.client,
            spec,
            self.concurrency,
            self.grace,
            (handler, self.undecodable),
            self.observer,
            shutdown,
        )
        .instrument(span)
        .await)
    }
}
