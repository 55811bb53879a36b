//! A worker's loop as a stream: long-polled batches, delivered one message at a time,
//! each kept leased in the background while it is alive.
//!
//! The stream never ends by itself but on a terminal refusal (see [`Consume::stream`]);
//! each payload is decoded on its own ([`Undecodable`]).

mod decode;
pub(crate) mod lease;
pub(crate) mod poll;
mod start;

use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::ops::Deref;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures_core::{FusedStream, Stream};
use serde::de::DeserializeOwned;

pub use decode::Undecodable;
pub(crate) use decode::decode as decode_payload;
use lease::LeaseKeeper;

use crate::epoch::Epoch;
use poll::{PollSpec, Polled, Poller, RawMessage};
pub use start::StartAt;

use crate::client::Client;
use crate::error::{Error, Result};
use crate::message::Message;

/// The lease a consumer asks for when none is set.
pub(crate) const DEFAULT_LEASE: Duration = Duration::from_secs(60);
/// How long a consumer long-polls when none is set.
pub(crate) const DEFAULT_WAIT: Duration = Duration::from_secs(30);
/// Most messages a consumer pops at once when not told.
pub(crate) const DEFAULT_BATCH: u32 = 10;

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
/// use queen_sdk::StartAt;
///
/// #[derive(serde::Deserialize)]
/// struct Order { id: String }
///
/// let mut orders = client
///     .consume::<Order>("orders")
///     .group("billing", StartAt::Beginning) // a new group reads the backlog too
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
    spec: PollSpec,
    undecodable: Undecodable,
    _t: PhantomData<fn() -> T>,
}

impl<T> Clone for Consume<T> {
    fn clone(&self) -> Self {
        Consume {
            client: self.client.clone(),
            spec: self.spec.clone(),
            undecodable: self.undecodable,
            _t: PhantomData,
        }
    }
}

impl<T> fmt::Debug for Consume<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consume")
            .field("spec", &self.spec)
            .field("undecodable", &self.undecodable)
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
            undecodable: Undecodable::DeadLetter,
            _t: PhantomData,
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> Consume<T> {
    /// Consume as the named consumer group (default: the competing consumers, which
    /// always read from the beginning), starting at `start` if the group has never read
    /// the queue: [`StartAt::Beginning`] reads the backlog, [`StartAt::New`] skips it.
    /// The start is an argument because Queen's own default for a new group is "new
    /// messages only": a consumer deployed after its producers would skip their backlog
    /// without a word. (A raw [`Client::pop`] keeps Queen's default; see
    /// [`crate::Pop::subscription`].)
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// use queen_sdk::StartAt;
    /// let mut billing = client
    ///     .consume::<serde_json::Value>("orders")
    ///     .group("billing", StartAt::Beginning)
    ///     .stream();
    /// let delivery = billing.next().await.expect("the stream never ends")?;
    /// assert_eq!(delivery.consumer_group, "billing");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn group(mut self, group: impl Into<String>, start: StartAt) -> Self {
        self.spec.group = Some(group.into());
        self.spec.start = Some(start);
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
        self.spec.partition = Some(partition.into());
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
        self.spec.batch = n.max(1);
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
        self.spec.wait = d.max(Duration::from_millis(100));
        self
    }

    /// Runs each delivery's [`step`](Delivery::step) in `epoch` ([`Epoch`]): after a
    /// fix, seek the group back and consume in a new epoch, and each replayed step
    /// produces its outputs again, once.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// use queen_sdk::{Epoch, Ttl};
    /// let fix = Epoch::new("fix-1")?;
    /// let mut orders = client.consume::<serde_json::Value>("orders").epoch(&fix).stream();
    /// let order = orders.next().await.expect("the stream never ends")?;
    /// let body = order.step().once("invoiced", "o-7", Ttl::days(1)).to_body()?;
    /// assert_eq!(body["kv"][0]["key"], "o-7@fix-1");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn epoch(mut self, epoch: &Epoch) -> Self {
        self.spec.epoch = Some(epoch.clone());
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
        self.spec.lease = Duration::from_secs(d.as_secs().max(1));
        self
    }

    /// What to do with a message whose payload does not decode as `T` (default:
    /// [`Undecodable::DeadLetter`]). Either way the rest of its batch is delivered.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use futures::StreamExt;
    /// use queen_sdk::{DlqQuery, PushItem};
    /// client.push(vec![PushItem::new("jobs", &"seven"), PushItem::new("jobs", &8)]).await?;
    /// let mut jobs = client.consume::<u32>("jobs").stream(); // dead-letters by default
    /// let job = jobs.next().await.expect("the stream never ends")?;
    /// assert_eq!(job.data, 8);
    /// let dead = client.dlq::<serde_json::Value>(DlqQuery::queue("jobs")).await?;
    /// assert!(dead.messages[0].error_message.as_deref().unwrap_or("").contains("invalid type"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn undecodable(mut self, what: Undecodable) -> Self {
        self.undecodable = what;
        self
    }

    /// The deliveries, in order. The stream never ends on its own but on a terminal
    /// refusal (401, 403, a 404 or another 4xx that the same pop would meet again):
    /// when a batch is exhausted it long-polls for the next one.
    ///
    /// Each long-poll has its own timeout (its wait plus 10 s) and is not bounded by the
    /// retry policy's overall deadline, so an idle queue is no failure. A failed pop (a
    /// 5xx, a 429, a timeout, a lost connection) is yielded as an `Err` item and logged
    /// as a `tracing` event, and the next poll comes after a capped, jittered
    /// exponential backoff (from the policy's first delay up to 30 s, or the broker's
    /// `Retry-After`); the stream goes on.
    ///
    /// After you nack a delivery (`failed` or `retry`), the rest of its batch is
    /// redelivered at a later pop: drop what the stream still holds of it with
    /// [`Deliveries::discard_batch`] rather than handling it out of order.
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
    ///     let job = match job {
    ///         Ok(job) => job,
    ///         Err(e) => {
    ///             eprintln!("{e}"); // a failed pop: the stream backs off and goes on
    ///             continue;
    ///         }
    ///     };
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
            lease: self.spec.lease,
            epoch: self.spec.epoch.clone(),
            queue: self.spec.queue.clone(),
            undecodable: self.undecodable,
            poller: Some(Box::new(Poller::new(self.client, self.spec))),
            buffer: VecDeque::new(),
            pending: None,
            done: false,
            _t: PhantomData,
        }
    }
}

/// What the stream's one piece of background work came to.
enum Event {
    /// A poll, with the poller back.
    Polled(Box<Poller>, Polled),
    /// A dead-lettering ack was sent; `None`, or the batch `(partition id, lease id)`
    /// whose rest must not be delivered because the ack failed.
    Settled(Option<(String, String)>),
}

type Work = Pin<Box<dyn Future<Output = Event> + Send>>;

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
    lease: Duration,
    /// The epoch each delivery's step runs in.
    epoch: Option<Epoch>,
    queue: String,
    undecodable: Undecodable,
    /// `None` while a poll holds it.
    poller: Option<Box<Poller>>,
    buffer: VecDeque<(RawMessage, Arc<LeaseKeeper>)>,
    pending: Option<Work>,
    done: bool,
    _t: PhantomData<fn() -> T>,
}

// The background work is boxed and nothing else is pinned: moving the stream is fine.
impl<T> Unpin for Deliveries<T> {}

impl<T> fmt::Debug for Deliveries<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Deliveries")
            .field("queue", &self.queue)
            .field("buffered", &self.buffer.len())
            .field("busy", &self.pending.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl<T> Deliveries<T> {
    /// Drops what the stream still holds of `of`'s batch (same partition, same lease),
    /// unacked, and answers how many. Call it after nacking `of` (`failed` or `retry`):
    /// the broker delivers the rest of the batch again, after `of`, so handling it now
    /// would be out of order and its acks would be refused.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use futures::StreamExt;
    /// use queen_sdk::{AckStatus, PushItem};
    /// client.push((1..=3).map(|n| PushItem::new("jobs", &n)).collect()).await?;
    /// let mut jobs = client.consume::<u32>("jobs").batch(3).stream();
    /// let first = jobs.next().await.expect("the stream never ends")?;
    /// client.ack(&first, AckStatus::Failed { error: "downstream is down".into() }).await?;
    /// assert_eq!(jobs.discard_batch(&first), 2); // 2 and 3 come again, after 1
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn discard_batch<U>(&mut self, of: &Message<U>) -> usize {
        let before = self.buffer.len();
        self.buffer
            .retain(|(m, _)| !(m.partition_id == of.partition_id && m.lease_id == of.lease_id));
        before - self.buffer.len()
    }
}

/// Dead-letters an undecodable message with its decoding error as the reason.
async fn dead_letter(
    client: Client,
    msg: Message<serde_json::Value>,
    reason: String,
    keeper: Arc<LeaseKeeper>,
) -> Event {
    match client.ack_dlq(&msg, &reason).await {
        Ok(out) if out.success => {
            tracing::warn!(
                queue = %msg.queue, partition = %msg.partition, message_id = %msg.id, %reason,
                "payload does not decode: dead-lettered"
            );
            return Event::Settled(None);
        }
        Ok(out) => {
            tracing::warn!(
                queue = %msg.queue, message_id = %msg.id, %reason, refused = ?out.error,
                "payload does not decode; dead-lettering it was refused (the lease is lost)"
            );
            keeper.mark_lost();
        }
        Err(e) => {
            tracing::warn!(
                queue = %msg.queue, message_id = %msg.id, %reason, error = %e,
                "payload does not decode; dead-lettering it failed (it comes back after its lease)"
            );
        }
    }
    // Not settled: a completion of a later message would commit the cursor past it,
    // so the rest of its batch is not delivered now; it all comes back after the lease.
    Event::Settled(Some((msg.partition_id, msg.lease_id)))
}

impl<T: DeserializeOwned + Send + 'static> Stream for Deliveries<T> {
    type Item = Result<Delivery<T>>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        loop {
            if let Some(work) = this.pending.as_mut() {
                let event = match work.as_mut().poll(cx) {
                    Poll::Pending => return Poll::Pending,
                    Poll::Ready(ev) => ev,
                };
                this.pending = None;
                if let Event::Settled(Some((partition_id, lease_id))) = &event {
                    this.buffer.retain(|(m, _)| {
                        !(m.partition_id == *partition_id && m.lease_id == *lease_id)
                    });
                }
                if let Event::Polled(poller, polled) = event {
                    let client = poller.client().clone();
                    this.poller = Some(poller);
                    match polled {
                        Polled::Batch(msgs) => {
                            if let Some(first) = msgs.first() {
                                let keeper = Arc::new(
                                    LeaseKeeper::start(client, first.lease_id.clone(), this.lease)
                                        .in_epoch(this.epoch.clone()),
                                );
                                this.buffer
                                    .extend(msgs.into_iter().map(|m| (m, Arc::clone(&keeper))));
                            }
                        }
                        Polled::Failed(e) => return Poll::Ready(Some(Err(e))),
                        Polled::Refused(e) => {
                            this.done = true;
                            return Poll::Ready(Some(Err(e)));
                        }
                    }
                }
            }
            // Decoded only when it reaches the front: a dead-lettering `dlq` ack commits
            // the group's cursor past the message, so it must not overtake the
            // deliveries before it, which the caller has handled by now.
            if let Some((raw, keeper)) = this.buffer.pop_front() {
                match decode::decode::<T>(raw) {
                    Ok(msg) => return Poll::Ready(Some(Ok(Delivery { msg, keeper }))),
                    Err((msg, reason)) => match this.undecodable {
                        Undecodable::Yield => {
                            let delivery = Box::new(Delivery { msg, keeper });
                            return Poll::Ready(Some(Err(Error::Undecodable { delivery, reason })));
                        }
                        Undecodable::DeadLetter => {
                            let client = this
                                .poller
                                .as_ref()
                                .map(|p| p.client().clone())
                                .expect("the poller is home while nothing polls");
                            this.pending = Some(Box::pin(dead_letter(client, msg, reason, keeper)));
                            continue;
                        }
                    },
                }
            }
            if this.done {
                return Poll::Ready(None);
            }
            let mut poller = this
                .poller
                .take()
                .expect("the poller is home while nothing polls");
            this.pending = Some(Box::pin(async move {
                let polled = poller.poll().await;
                Event::Polled(poller, polled)
            }));
        }
    }
}

impl<T: DeserializeOwned + Send + 'static> FusedStream for Deliveries<T> {
    fn is_terminated(&self) -> bool {
        self.done && self.buffer.is_empty() && self.pending.is_none()
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
    pub(crate) msg: Message<T>,
    pub(crate) keeper: Arc<LeaseKeeper>,
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

    /// Whether the lease is known gone: an extension found it expired, held by another
    /// consumer now, or released (every message of the batch acked, or a nack), or
    /// extensions kept failing past its expiry. An ack fenced by a lost lease rolls
    /// back. [`Delivery::lease_lost_signal`] is the same as a future.
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
        self.keeper.is_lost()
    }

    /// Resolves when the lease is known to be lost: a renewal was refused (it expired,
    /// or another consumer holds the partition now) or renewals kept failing past its
    /// expiry. Race a long piece of work against it to stop early: whatever it would
    /// commit would roll back (`rejected_ack`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use std::time::Duration;
    /// use futures::StreamExt;
    /// let mut orders = client.consume::<serde_json::Value>("orders").lease(Duration::from_secs(1)).stream();
    /// let delivery = orders.next().await.expect("the stream never ends")?;
    /// # // Someone takes the partition away: the next renewal is refused.
    /// # client.seek(queen_sdk::QUEUE_MODE, "orders", queen_sdk::SeekTo::End).await?;
    /// tokio::select! {
    ///     _ = delivery.lease_lost_signal() => eprintln!("lease lost: giving up on {}", delivery.id),
    ///     _ = tokio::time::sleep(Duration::from_secs(30)) => { /* the long work */ }
    /// }
    /// assert!(delivery.lease_lost());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_lost_signal(&self) -> impl Future<Output = ()> + Send + 'static {
        self.keeper.lost()
    }

    /// A transaction that acks this message `completed`, fenced by its lease: the step
    /// to add the rest of the work to and commit. Nothing is sent until
    /// [`TransactionBuilder::commit`](crate::TransactionBuilder::commit).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// let mut orders = client.consume::<serde_json::Value>("orders").stream();
    /// let order = orders.next().await.expect("the stream never ends")?;
    /// let step = order.step().push("receipts", |p| p.payload(&order.data["id"]));
    /// assert!(step.commit().await?.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn step(&self) -> crate::TransactionBuilder {
        self.step_with(crate::AckStatus::Completed)
    }

    /// A transaction that acks this message with `status` (`failed` to have it
    /// redelivered, [`AckStatus::Dlq`](crate::AckStatus::Dlq) to dead-letter it),
    /// fenced by its lease.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use futures::StreamExt;
    /// use queen_sdk::{AckStatus, DlqQuery};
    /// let mut orders = client.consume::<serde_json::Value>("orders").stream();
    /// let order = orders.next().await.expect("the stream never ends")?;
    /// order.step_with(AckStatus::Dlq).commit().await?;
    /// assert_eq!(client.dlq::<serde_json::Value>(DlqQuery::queue("orders")).await?.messages.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn step_with(&self, status: crate::AckStatus) -> crate::TransactionBuilder {
        let step = self.keeper.client.transaction();
        match &self.keeper.epoch {
            Some(epoch) => step.epoch(epoch),
            None => step,
        }
        .ack_with(&self.msg, status)
    }
}
