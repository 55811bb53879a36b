//! A worker's loop as a stream: long-polled batches, delivered one message at a time,
//! each kept leased in the background while it is alive.

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::{FusedStream, Stream};
use serde::de::DeserializeOwned;
use tokio::task::JoinHandle;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::message::{Message, SubscriptionMode};

/// The lease a consumer asks for when none is set.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// How long a consumer long-polls when none is set.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(30);

/// Configures a consumer. Start it with [`Client::consume`], then call
/// [`Consume::stream`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use std::time::Duration;
/// use futures::StreamExt;
/// use queen_sdk::SubscriptionMode;
///
/// #[derive(serde::Deserialize)]
/// struct Order { id: String }
///
/// let mut orders = client
///     .consume::<Order>("orders")
///     .group("billing")
///     .subscription(SubscriptionMode::All)
///     .batch(20)
///     .lease(Duration::from_secs(30))
///     .stream();
/// while let Some(delivery) = orders.next().await {
///     let delivery = delivery?;
///     println!("order {}", delivery.data.id); // derefs to Message<Order>
///     let outcome = client.transaction().ack(&delivery).commit().await?;
///     assert!(outcome.is_committed()); // an ack alone is never gated
///     # break;
/// } // dropping a delivery stops renewing its lease
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[must_use = "a consumer does nothing until its stream is polled"]
pub struct Consume<T> {
    client: Client,
    queue: String,
    partition: Option<String>,
    group: Option<String>,
    batch: u32,
    wait: Duration,
    lease: Duration,
    subscription: Option<SubscriptionMode>,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Consume<T> {
    fn clone(&self) -> Self {
        Consume {
            client: self.client.clone(),
            queue: self.queue.clone(),
            partition: self.partition.clone(),
            group: self.group.clone(),
            batch: self.batch,
            wait: self.wait,
            lease: self.lease,
            subscription: self.subscription,
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Consume<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consume")
            .field("queue", &self.queue)
            .field("partition", &self.partition)
            .field("group", &self.group)
            .field("batch", &self.batch)
            .field("wait", &self.wait)
            .field("lease", &self.lease)
            .field("subscription", &self.subscription)
            .finish_non_exhaustive()
    }
}

impl Client {
    /// Starts a consumer of `queue` whose payloads decode as `T`: 10 messages a pop,
    /// 30 s long-polls, 60 s leases, the competing consumers' group. See [`Consume`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// let mut deliveries = client.consume::<serde_json::Value>("orders").stream();
    /// let delivery = deliveries.next().await.expect("the stream never ends")?;
    /// assert_eq!(delivery.data["id"], "o-7");
    /// assert!(client.transaction().ack(&delivery).commit().await?.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn consume<T: DeserializeOwned + Send + 'static>(
        &self,
        queue: impl Into<String>,
    ) -> Consume<T> {
        Consume {
            client: self.clone(),
            queue: queue.into(),
            partition: None,
            group: None,
            batch: 10,
            wait: DEFAULT_WAIT,
            lease: DEFAULT_LEASE,
            subscription: None,
            _t: PhantomData,
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> Consume<T> {
    /// The consumer group (default: competing consumers). A new named group reads only
    /// what arrives after its first pop unless told otherwise ([`Consume::subscription`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// use queen_sdk::SubscriptionMode;
    /// let mut billing = client
    ///     .consume::<serde_json::Value>("orders")
    ///     .group("billing")
    ///     .subscription(SubscriptionMode::All)
    ///     .stream();
    /// let delivery = billing.next().await.expect("the stream never ends")?;
    /// assert_eq!(delivery.consumer_group, "billing");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Only this partition.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use futures::StreamExt;
    /// use queen_sdk::PushItem;
    /// client
    ///     .push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")])
    ///     .await?;
    /// let mut only_b = client.consume::<u32>("orders").partition("b").stream();
    /// assert_eq!(only_b.next().await.expect("the stream never ends")?.data, 2);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Most messages per pop (default 10, at least 1).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let big_batches = client.consume::<serde_json::Value>("orders").batch(100).stream();
    /// # drop(big_batches);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn batch(mut self, n: u32) -> Self {
        self.batch = n.max(1);
        self
    }

    /// How long each pop long-polls for a message (default 30 s, at least 100 ms). An
    /// empty long-poll is not yielded: the stream polls again.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let orders = client.consume::<serde_json::Value>("orders").wait(Duration::from_secs(5)).stream();
    /// # drop(orders);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn wait(mut self, d: Duration) -> Self {
        self.wait = d.max(Duration::from_millis(100));
        self
    }

    /// The lease each batch is popped with (whole seconds, rounded down, at least 1;
    /// default 60 s). About every third of it, while a delivery of the batch is alive, the
    /// lease is extended to this much from then, so a short lease costs a few extensions and
    /// lets a crashed worker's messages come back quickly.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// let mut orders = client.consume::<serde_json::Value>("orders").lease(Duration::from_secs(2)).stream();
    /// let delivery = orders.next().await.expect("the stream never ends")?;
    /// tokio::time::sleep(Duration::from_secs(3)).await; // longer than the lease...
    /// assert!(!delivery.lease_lost()); // ...but it was kept alive
    /// let outcome = client.transaction().ack(&delivery).commit().await?;
    /// assert!(outcome.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease(mut self, d: Duration) -> Self {
        self.lease = Duration::from_secs(d.as_secs().max(1));
        self
    }

    /// Where a new named group starts reading.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use queen_sdk::SubscriptionMode;
    /// let replay = client
    ///     .consume::<serde_json::Value>("orders")
    ///     .group("replay")
    ///     .subscription(SubscriptionMode::All)
    ///     .stream();
    /// # drop(replay);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn subscription(mut self, mode: SubscriptionMode) -> Self {
        self.subscription = Some(mode);
        self
    }

    /// The deliveries, in order. The stream never ends on its own: when a batch is
    /// exhausted it long-polls for the next one. A failed pop is yielded as an error;
    /// after a transient one (a 5xx, a lost connection) polling again tries again,
    /// after any other the stream ends.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use futures::StreamExt;
    /// use queen_sdk::PushItem;
    /// client.push((1..=3).map(|n| PushItem::new("jobs", &n)).collect()).await?;
    /// let mut jobs = client.consume::<u32>("jobs").stream();
    /// let mut done = Vec::new();
    /// while let Some(job) = jobs.next().await {
    ///     let job = job?;
    ///     assert!(client.transaction().ack(&job).commit().await?.is_committed());
    ///     done.push(job.data);
    ///     if done.len() == 3 {
    ///         break;
    ///     }
    /// }
    /// assert_eq!(done, [1, 2, 3]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stream(self) -> Deliveries<T> {
        Deliveries {
            cfg: Arc::new(self),
            buffer: VecDeque::new(),
            pending: None,
            done: false,
        }
    }

    async fn pop(cfg: Arc<Self>) -> Result<Vec<Message<T>>> {
        let mut p = cfg
            .client
            .pop::<T>(cfg.queue.clone())
            .batch(cfg.batch)
            .wait(cfg.wait)
            .lease(cfg.lease);
        if let Some(g) = &cfg.group {
            p = p.group(g.clone());
        }
        if let Some(part) = &cfg.partition {
            p = p.partition(part.clone());
        }
        if let Some(m) = cfg.subscription {
            p = p.subscription(m);
        }
        p.send().await
    }
}

type PopFuture<T> = Pin<Box<dyn Future<Output = Result<Vec<Message<T>>>> + Send>>;

/// The stream of [`Delivery`]s returned by [`Consume::stream`].
///
/// Messages popped but not yet yielded are held (and kept leased) by the stream: drop
/// the stream to let them go.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use futures::StreamExt;
/// let mut deliveries: queen_sdk::Deliveries<serde_json::Value> = client.consume("orders").stream();
/// if let Some(delivery) = deliveries.next().await {
///     let delivery = delivery?;
///     assert!(client.transaction().ack(&delivery).commit().await?.is_committed());
/// }
/// drop(deliveries); // stops polling and lets go of what it still holds
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[must_use = "streams do nothing unless polled"]
pub struct Deliveries<T> {
    cfg: Arc<Consume<T>>,
    buffer: VecDeque<Delivery<T>>,
    pending: Option<PopFuture<T>>,
    done: bool,
}

// The pop future is boxed and nothing else is pinned: moving the stream is fine.
impl<T> Unpin for Deliveries<T> {}

impl<T> fmt::Debug for Deliveries<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deliveries")
            .field("queue", &self.cfg.queue)
            .field("buffered", &self.buffer.len())
            .field("polling", &self.pending.is_some())
            .field("done", &self.done)
            .finish()
    }
}

/// Whether polling again may help after `e`.
fn transient(e: &Error) -> bool {
    match e {
        Error::Api { status, .. } => *status == 429 || *status >= 500,
        Error::Transport(_) | Error::Exhausted { .. } | Error::OutcomeUnknown { .. } => true,
        _ => false,
    }
}

impl<T: DeserializeOwned + Send + 'static> Stream for Deliveries<T> {
    type Item = Result<Delivery<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(d) = this.buffer.pop_front() {
                return Poll::Ready(Some(Ok(d)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let cfg = Arc::clone(&this.cfg);
            let fut = this
                .pending
                .get_or_insert_with(|| Box::pin(Consume::pop(cfg)));
            let out = match fut.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(out) => out,
            };
            this.pending = None;
            match out {
                Ok(msgs) => {
                    // An empty long-poll: poll again.
                    let Some(first) = msgs.first() else { continue };
                    let keeper = LeaseKeeper::start(
                        this.cfg.client.clone(),
                        first.lease_id.clone(),
                        this.cfg.lease,
                    );
                    this.buffer.extend(msgs.into_iter().map(|msg| Delivery {
                        msg,
                        keeper: Arc::clone(&keeper),
                    }));
                }
                Err(e) => {
                    if !transient(&e) {
                        this.done = true;
                    }
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> FusedStream for Deliveries<T> {
    fn is_terminated(&self) -> bool {
        self.done && self.buffer.is_empty()
    }
}

/// Extends one batch's lease until every delivery of the batch is gone.
#[derive(Debug)]
struct LeaseKeeper {
    task: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
}

impl LeaseKeeper {
    fn start(client: Client, lease_id: String, lease: Duration) -> Arc<Self> {
        let lost = Arc::new(AtomicBool::new(false));
        if lease_id.is_empty() {
            return Arc::new(LeaseKeeper { task: None, lost });
        }
        let flag = Arc::clone(&lost);
        let every = (lease / 3).max(Duration::from_millis(100));
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match client.extend_lease(&lease_id, lease).await {
                    Ok(ext) if ext.renewed > 0 => {
                        tracing::trace!(lease = %lease_id, expires_at = ?ext.expires_at, "lease extended");
                    }
                    Ok(_) => {
                        tracing::debug!(lease = %lease_id, "lease ended; no longer extending it");
                        flag.store(true, Ordering::Relaxed);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(lease = %lease_id, error = %e, "lease extension failed; will retry");
                    }
                }
            }
        });
        Arc::new(LeaseKeeper {
            task: Some(task),
            lost,
        })
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

/// One delivered message. It derefs to [`Message<T>`], so it acks like one
/// (`client.transaction().ack(&delivery)`).
///
/// While it (or another delivery of its batch, or the stream still holding some of the
/// batch) is alive, the batch's lease is extended in the background. Drop it when the
/// message is handled; dropping it unacked lets the message come back after the lease.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use futures::StreamExt;
/// use queen_sdk::{AckStatus, Delivery};
/// let mut orders = client.consume::<serde_json::Value>("orders").stream();
/// let delivery: Delivery<serde_json::Value> = orders.next().await.expect("the stream never ends")?;
/// // A Delivery acks like a Message, in a transaction or on its own.
/// client.ack(&delivery, AckStatus::Completed).await?;
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub struct Delivery<T> {
    msg: Message<T>,
    keeper: Arc<LeaseKeeper>,
}

impl<T: fmt::Debug> fmt::Debug for Delivery<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("msg", &self.msg)
            .field("lease_lost", &self.lease_lost())
            .finish()
    }
}

impl<T> Deref for Delivery<T> {
    type Target = Message<T>;

    fn deref(&self) -> &Message<T> {
        &self.msg
    }
}

impl<T> AsRef<Message<T>> for Delivery<T> {
    fn as_ref(&self) -> &Message<T> {
        &self.msg
    }
}

impl<T> Delivery<T> {
    /// The message.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// let mut orders = client.consume::<serde_json::Value>("orders").stream();
    /// let delivery = orders.next().await.expect("the stream never ends")?;
    /// let msg: &queen_sdk::Message = delivery.message();
    /// assert_eq!(msg.queue, "orders");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn message(&self) -> &Message<T> {
        &self.msg
    }

    /// The message, keeping nothing leased on its account: ack it before its lease
    /// lapses.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// let mut orders = client.consume::<serde_json::Value>("orders").stream();
    /// let msg = orders.next().await.expect("the stream never ends")?.into_message();
    /// assert!(client.transaction().ack(&msg).commit().await?.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_message(self) -> Message<T> {
        self.msg
    }

    /// Whether an extension found the lease gone: it expired, another consumer holds
    /// the partition now, or every message of the batch was acked. An ack fenced by a
    /// lost lease rolls back.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// let mut orders = client.consume::<serde_json::Value>("orders").stream();
    /// let delivery = orders.next().await.expect("the stream never ends")?;
    /// if !delivery.lease_lost() {
    ///     assert!(client.transaction().ack(&delivery).commit().await?.is_committed());
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_lost(&self) -> bool {
        self.keeper.lost.load(Ordering::Relaxed)
    }
}
