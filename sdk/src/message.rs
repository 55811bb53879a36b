//! Messages: push, pop, ack, lease extension.

use std::marker::PhantomData;
use std::time::Duration;

use hyper::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::client::{Client, Opts, Replay};
use crate::error::{Error, Result};
use crate::json::{object, render};
use crate::validate;

/// The consumer group of competing consumers: the group of a pop, a consumer or an ack
/// that names none.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// let batch = client.pop::<serde_json::Value>("orders").send().await?;
/// assert_eq!(batch[0].consumer_group, queen_sdk::QUEUE_MODE);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub const QUEUE_MODE: &str = "__QUEUE_MODE__";

/// The partition of a push, a timer's message or a pop that names none.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{DEFAULT_PARTITION, PushItem};
/// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
/// let batch = client.pop::<String>("orders").send().await?;
/// assert_eq!(batch[0].partition, DEFAULT_PARTITION);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub const DEFAULT_PARTITION: &str = "Default";

/// A delivered message with a typed payload.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::PushItem;
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Order { id: String }
///
/// client.push(vec![PushItem::new("orders", &Order { id: "o-7".into() }).partition("customer-1")]).await?;
/// let batch = client.pop::<Order>("orders").send().await?;
/// let msg = &batch[0];
/// assert_eq!(msg.data.id, "o-7");
/// assert_eq!((msg.queue.as_str(), msg.partition.as_str()), ("orders", "customer-1"));
/// assert_eq!((msg.offset, msg.delivery_attempt), (Some(0), Some(1)));
/// assert!(msg.is_leased());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Message<T = Value> {
    /// The broker's message id.
    pub id: String,
    /// The message's dedup key.
    pub transaction_id: String,
    /// The payload.
    pub data: T,
    /// The partition's opaque id (for acks).
    pub partition_id: String,
    /// The partition's name.
    pub partition: String,
    /// The lease this delivery is held under; empty for an `autoAck` pop.
    pub lease_id: String,
    /// The group it was delivered to.
    pub consumer_group: String,
    /// Its queue.
    #[serde(default)]
    pub queue: String,
    /// Its offset in the partition.
    #[serde(default)]
    pub offset: Option<u64>,
    /// 1 on first delivery to this group.
    #[serde(default)]
    pub delivery_attempt: Option<u32>,
    /// A trace id, when the producer set one.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The producer's identity, when the broker has auth.
    #[serde(default)]
    pub producer_sub: Option<String>,
    /// When it was stored (ISO-8601).
    #[serde(default)]
    pub created_at: String,
}

impl<T> Message<T> {
    /// Whether the message is held under a lease (not an `autoAck` delivery).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client
    ///     .push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")])
    ///     .await?;
    /// let leased = client.pop::<u32>("orders").send().await?;
    /// assert!(leased[0].is_leased());
    /// let auto = client.pop::<u32>("orders").auto_ack().send().await?;
    /// assert!(!auto[0].is_leased()); // committed at delivery: nothing to ack
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_leased(&self) -> bool {
        !self.lease_id.is_empty()
    }
}

/// Where a new named group starts reading. The competing consumers ([`QUEUE_MODE`])
/// always read from the beginning.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::SubscriptionMode;
/// client.push(vec![queen_sdk::PushItem::new("orders", &"before")]).await?;
/// // A group that subscribes "new" skips what was stored before its first pop...
/// let fresh = client.pop::<String>("orders").group("audit").subscription(SubscriptionMode::New).send().await?;
/// assert!(fresh.is_empty());
/// // ...one that subscribes "all" reads from the beginning.
/// let all = client.pop::<String>("orders").group("replay").subscription(SubscriptionMode::All).send().await?;
/// assert_eq!(all[0].data, "before");
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionMode {
    /// Only messages that arrive after its first pop (the broker's default).
    New,
    /// From the beginning.
    All,
}

/// A pop request. Build it with [`Client::pop`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use std::time::Duration;
/// use queen_sdk::SubscriptionMode;
/// #[derive(serde::Deserialize)]
/// struct Order { id: String }
/// let batch = client
///     .pop::<Order>("orders")
///     .group("billing")
///     .subscription(SubscriptionMode::All)
///     .batch(50)
///     .wait(Duration::from_secs(20)) // answers as soon as a message is there
///     .send()
///     .await?;
/// assert_eq!(batch[0].data.id, "o-7");
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a pop does nothing until sent"]
pub struct Pop<'c, T> {
    client: &'c Client,
    queue: String,
    partition: Option<String>,
    params: Vec<(&'static str, String)>,
    wait: Option<Duration>,
    single_attempt: bool,
    _t: PhantomData<fn() -> T>,
}

/// How much longer than its wait a long-poll's HTTP exchange may take.
pub(crate) const LONG_POLL_MARGIN: Duration = Duration::from_secs(10);

impl<T: DeserializeOwned> Pop<'_, T> {
    /// One attempt, no retry: the consumer's poll loop backs off and polls again itself.
    pub(crate) fn single_attempt(mut self) -> Self {
        self.single_attempt = true;
        self
    }

    fn set(mut self, k: &'static str, v: String) -> Self {
        self.params.retain(|(n, _)| *n != k);
        self.params.push((k, v));
        self
    }

    /// Only this partition.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client
    ///     .push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")])
    ///     .await?;
    /// let from_b = client.pop::<u32>("orders").partition("b").send().await?;
    /// assert_eq!((from_b.len(), from_b[0].data), (1, 2));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The consumer group (default: competing consumers, [`QUEUE_MODE`]). A new named
    /// group reads only what arrives after its first pop unless told otherwise
    /// ([`Pop::subscription`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use queen_sdk::SubscriptionMode;
    /// // Each group reads the queue on its own.
    /// for group in ["billing", "shipping"] {
    ///     let batch = client
    ///         .pop::<serde_json::Value>("orders")
    ///         .group(group)
    ///         .subscription(SubscriptionMode::All)
    ///         .send()
    ///         .await?;
    ///     assert_eq!(batch[0].consumer_group, group);
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn group(self, g: impl Into<String>) -> Self {
        self.set("consumerGroup", g.into())
    }

    /// Most messages (default 200 on the broker).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client.push((0..5).map(|n| PushItem::new("orders", &n)).collect()).await?;
    /// let batch = client.pop::<u32>("orders").batch(2).send().await?;
    /// assert_eq!(batch.iter().map(|m| m.data).collect::<Vec<_>>(), [0, 1]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn batch(self, n: u32) -> Self {
        self.set("batch", n.to_string())
    }

    /// Long-polls up to `d` for a message: the pop answers as soon as one is there, or
    /// empty after `d`. The HTTP exchange is then allowed `d` plus 10 s, and the wait
    /// does not count against the retry policy's overall deadline.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let waiting = client.pop::<String>("orders").wait(Duration::from_secs(10)).send();
    /// let pushing = async {
    ///     tokio::time::sleep(Duration::from_millis(50)).await;
    ///     client.push(vec![queen_sdk::PushItem::new("orders", &"late")]).await
    /// };
    /// let (batch, _) = tokio::try_join!(waiting, pushing)?;
    /// assert_eq!(batch[0].data, "late");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn wait(mut self, d: Duration) -> Self {
        self.wait = Some(d);
        self.set("wait", "true".into())
            .set("timeout", d.as_millis().to_string())
    }

    /// Lease length for this pop, in whole seconds (rounded down, at least 1); the
    /// default is the queue's `leaseTime`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use std::time::Duration;
    /// let batch = client.pop::<serde_json::Value>("orders").lease(Duration::from_secs(30)).send().await?;
    /// let cursor = broker.inspect().cursor("orders", "Default", queen_sdk::QUEUE_MODE)?.unwrap();
    /// assert_eq!(cursor.lease_id.as_deref(), Some(batch[0].lease_id.as_str()));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease(self, d: Duration) -> Self {
        self.set("leaseSeconds", d.as_secs().max(1).to_string())
    }

    /// Commit at delivery: no lease, no redelivery, nothing to ack.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// let batch = client.pop::<serde_json::Value>("orders").auto_ack().send().await?;
    /// assert!(batch[0].lease_id.is_empty());
    /// assert!(client.pop::<serde_json::Value>("orders").send().await?.is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn auto_ack(self) -> Self {
        self.set("autoAck", "true".into())
    }

    /// Where a new named group starts (ignored once the group has read the queue).
    /// A raw pop keeps Queen's semantics: without this, a named group's first pop fixes
    /// its start at "new messages only", and what was stored before is never read by
    /// it. [`Client::worker`](crate::Client::worker) and [`Client::consume`] take the
    /// start as an argument instead ([`crate::StartAt`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use queen_sdk::SubscriptionMode;
    /// let batch = client
    ///     .pop::<serde_json::Value>("orders")
    ///     .group("replay")
    ///     .subscription(SubscriptionMode::All)
    ///     .send()
    ///     .await?;
    /// assert_eq!(batch.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn subscription(self, mode: SubscriptionMode) -> Self {
        let v = match mode {
            SubscriptionMode::New => "new",
            SubscriptionMode::All => "all",
        };
        self.set("subscriptionMode", v.into())
    }

    /// Where a new group starts, as the worker and the consume stream send it.
    pub(crate) fn start_at(self, start: crate::StartAt) -> Self {
        let (k, v) = start.param();
        self.set(k, v)
    }

    /// Start a new group's cursor at this ISO-8601 time (or `"now"`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// let batch = client
    ///     .pop::<serde_json::Value>("orders")
    ///     .group("backfill")
    ///     .subscription_from("2020-01-01T00:00:00Z")
    ///     .send()
    ///     .await?;
    /// assert_eq!(batch.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn subscription_from(self, at: impl Into<String>) -> Self {
        self.set("subscriptionFrom", at.into())
    }

    /// Claim up to `n` partitions under one lease (queue-wide pops only).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client
    ///     .push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")])
    ///     .await?;
    /// let batch = client.pop::<u32>("orders").partitions(2).send().await?;
    /// assert_eq!(batch.len(), 2);
    /// assert_eq!(batch[0].lease_id, batch[1].lease_id);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partitions(self, n: u32) -> Self {
        self.set("partitions", n.to_string())
    }

    /// Sends the pop. An empty answer is an empty vector. A pop is retried after a 5xx or
    /// a lost connection.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let none = client.pop::<serde_json::Value>("orders").send().await?;
    /// assert!(none.is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn send(self) -> Result<Vec<Message<T>>> {
        validate::name("queue", &self.queue)?;
        let path = match &self.partition {
            Some(p) => format!(
                "/api/v1/pop/queue/{}/partition/{}",
                validate::segment(&self.queue),
                validate::segment(p)
            ),
            None => format!("/api/v1/pop/queue/{}", validate::segment(&self.queue)),
        };
        let opts = Opts {
            replay: Replay::Safe,
            timeout: self.wait.map(|w| w + LONG_POLL_MARGIN),
            // The wait is the broker's to spend: it does not count against the
            // retry policy's deadline (a 30 s wait under a 30 s deadline was cut).
            extra_deadline: self.wait.map_or(Duration::ZERO, |w| w + LONG_POLL_MARGIN),
            single_attempt: self.single_attempt,
        };
        let answer = self
            .client
            .call(Method::GET, &path, Some(&self.params), None, opts)
            .await?;
        let mut msgs = decode_messages(&answer)?;
        // Queen v0 names the queue once, at the top of its pop answer, not on each
        // message: the message is from the queue this pop asked for.
        for m in msgs.iter_mut().filter(|m| m.queue.is_empty()) {
            m.queue.clone_from(&self.queue);
        }
        Ok(msgs)
    }
}

/// A pop answer's fields the client reads; the rest (the claim's lease and partition,
/// repeated on every message) is skipped unread.
#[derive(Deserialize)]
#[serde(bound = "T: DeserializeOwned")]
struct PopAnswer<T> {
    success: Option<bool>,
    error: Option<String>,
    messages: Option<Vec<Message<T>>>,
}

/// Decodes a pop answer (a 204 arrives blank), straight from its bytes into the
/// messages: no JSON tree is built on the way.
pub(crate) fn decode_messages<T: DeserializeOwned>(
    answer: &crate::client::Answer,
) -> Result<Vec<Message<T>>> {
    let Some(pop) = answer.decode::<Option<PopAnswer<T>>>("pop answer")? else {
        return Ok(Vec::new());
    };
    // Queen v0 answers an empty pop 200 `{"error": "no_available_partition", "messages":
    // [], "success": false}`: nothing to deliver, not a failure.
    if pop.error.as_deref() == Some("no_available_partition") {
        return Ok(Vec::new());
    }
    if pop.success == Some(false) {
        return Err(Error::Api {
            status: 200,
            code: None,
            message: pop.error.unwrap_or_else(|| "pop failed".into()),
            retry_after: None,
        });
    }
    Ok(pop.messages.unwrap_or_default())
}

/// How a message was handled.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use queen_sdk::AckStatus;
/// let batch = client.pop::<serde_json::Value>("orders").send().await?;
/// let failed = AckStatus::Failed { error: "the card was declined".into() };
/// let outcome = client.ack(&batch[0], failed).await?;
/// assert!(outcome.success && !outcome.dlq); // redelivered while the retry limit lasts
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AckStatus {
    /// Done.
    Completed,
    /// Failed: redelivered while the queue's `retryLimit` lasts, then dead-lettered.
    Failed {
        /// Why (kept on the dead letter).
        error: String,
    },
    /// Redeliver without counting an attempt.
    Retry,
    /// Dead-letter now.
    Dlq,
}

impl AckStatus {
    /// The wire status and error.
    pub(crate) fn wire(&self) -> (&'static str, Option<&str>) {
        match self {
            AckStatus::Completed => ("completed", None),
            AckStatus::Failed { error } => ("failed", Some(error)),
            AckStatus::Retry => ("retry", None),
            AckStatus::Dlq => ("dlq", None),
        }
    }
}

/// The verdict on one ack.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use queen_sdk::AckStatus;
/// let batch = client.pop::<serde_json::Value>("orders").send().await?;
/// let first = client.ack(&batch[0], AckStatus::Completed).await?;
/// assert!(first.success && first.lease_released); // the last of its batch
/// let again = client.ack(&batch[0], AckStatus::Completed).await?;
/// assert!(!again.success); // its lease is gone
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckOutcome {
    /// Applied (or a harmless repeat).
    pub success: bool,
    /// Why it was refused.
    #[serde(default)]
    pub error: Option<String>,
    /// The ack completed its batch and released the lease.
    #[serde(default)]
    pub lease_released: bool,
    /// The message was dead-lettered.
    #[serde(default)]
    pub dlq: bool,
    /// A completed ack of a message already completed.
    #[serde(default)]
    pub noop: bool,
}

/// One message to push. The SDK always sends a `transactionId` (a new UUIDv7 unless you
/// give one), so a retried push is deduplicated by the broker.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::PushItem;
/// let items = vec![
///     PushItem::new("orders", &serde_json::json!({"id": "o-7"})).partition("customer-1"),
///     PushItem::new("audit", &"order o-7 received"),
/// ];
/// let out = client.push(items).await?;
/// assert_eq!((out[0].queue.as_str(), out[1].queue.as_str()), ("orders", "audit"));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct PushItem {
    queue: String,
    partition: Option<String>,
    payload: Result<Value, String>,
    transaction_id: Option<String>,
}

impl PushItem {
    /// A message for `queue` with a typed payload (a payload that does not serialise
    /// fails the push with [`Error::Invalid`]).
    ///
    /// ```
    /// use queen_sdk::PushItem;
    /// #[derive(serde::Serialize)]
    /// struct Order<'a> { id: &'a str, total: f64 }
    /// let item = PushItem::new("orders", &Order { id: "o-7", total: 12.5 });
    /// # let _ = item;
    /// ```
    pub fn new<T: Serialize + ?Sized>(queue: impl Into<String>, payload: &T) -> Self {
        PushItem {
            queue: queue.into(),
            partition: None,
            payload: serde_json::to_value(payload).map_err(|e| e.to_string()),
            transaction_id: None,
        }
    }

    /// The partition (default `Default`). A partition's messages are delivered in
    /// order, one leased batch at a time.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client.push(vec![PushItem::new("orders", &"o-7").partition("customer-1")]).await?;
    /// assert_eq!(broker.inspect().messages("orders", "customer-1")?.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The dedup key: a second push of it to the same partition within the queue's
    /// dedup window stores nothing and answers `duplicate`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// let item = PushItem::new("orders", &"o-7").transaction_id("order-7");
    /// let first = client.push(vec![item.clone()]).await?;
    /// let again = client.push(vec![item]).await?;
    /// assert!(!first[0].is_duplicate() && again[0].is_duplicate());
    /// assert_eq!(first[0].message_id, again[0].message_id);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = Some(id.into());
        self
    }
}

/// What the broker did with one pushed item.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let out = client.push(vec![queen_sdk::PushItem::new("orders", &"o-7")]).await?;
/// assert_eq!((out[0].index, out[0].status.as_str(), out[0].offset), (0, "queued", Some(0)));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Pushed {
    /// Position in the request.
    pub index: usize,
    /// The stored message's id (the original's, for a duplicate).
    pub message_id: String,
    /// The dedup key used.
    pub transaction_id: String,
    /// The queue.
    #[serde(rename = "queueName")]
    pub queue: String,
    /// `queued`, `duplicate` or `error`.
    pub status: String,
    /// The message's offset (the original's, for a duplicate).
    #[serde(default)]
    pub offset: Option<u64>,
}

impl Pushed {
    /// Whether it was already stored (nothing new was written).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// let item = PushItem::new("orders", &"o-7").transaction_id("order-7");
    /// let out = client.push(vec![item.clone(), item]).await?;
    /// assert!(!out[0].is_duplicate());
    /// assert!(out[1].is_duplicate());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_duplicate(&self) -> bool {
        self.status == "duplicate"
    }
}

/// A lease extension's result.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// use std::time::Duration;
/// let batch = client.pop::<serde_json::Value>("orders").send().await?;
/// let ext = client.extend_lease(&batch[0].lease_id, Duration::from_secs(120)).await?;
/// assert_eq!(ext.renewed, 1);
/// assert!(ext.expires_at.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseExtension {
    /// Partition claims extended; 0 when the lease had expired or is unknown.
    pub renewed: u64,
    /// The new expiry (ISO-8601), when extended.
    pub expires_at: Option<String>,
}

impl Client {
    /// Starts a pop from `queue`, whose payloads decode as `T`; see [`Pop`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// #[derive(serde::Deserialize)]
    /// struct Order { id: String }
    /// for msg in client.pop::<Order>("orders").batch(10).send().await? {
    ///     println!("order {}", msg.data.id);
    ///     let outcome = client.transaction().ack(&msg).commit().await?;
    ///     assert!(outcome.is_committed());
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn pop<T: DeserializeOwned>(&self, queue: impl Into<String>) -> Pop<'_, T> {
        Pop {
            client: self,
            queue: queue.into(),
            partition: None,
            params: Vec::new(),
            wait: None,
            single_attempt: false,
            _t: PhantomData,
        }
    }

    /// Pushes messages; one result per item, in order. Every item carries a
    /// `transactionId`, so a push is retried after a 5xx or a lost connection: a resend is
    /// answered `duplicate` instead of stored twice.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// let out = client
    ///     .push(vec![PushItem::new("orders", &serde_json::json!({"id": 7})).transaction_id("order-7")])
    ///     .await?;
    /// assert!(!out[0].message_id.is_empty());
    /// assert_eq!(out[0].transaction_id, "order-7");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn push(&self, items: Vec<PushItem>) -> Result<Vec<Pushed>> {
        let mut wire = Vec::with_capacity(items.len());
        for (i, it) in items.into_iter().enumerate() {
            let op = format!("items[{i}]");
            validate::name(&op, &it.queue)?;
            if let Some(p) = &it.partition {
                validate::name(&op, p)?;
            }
            let txn = it
                .transaction_id
                .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
            validate::transaction_id(&op, &txn)?;
            let payload = it.payload.map_err(|e| Error::invalid(&op, e))?;
            let mut item = object([
                ("queue", it.queue.into()),
                ("payload", payload),
                ("transactionId", txn.into()),
            ]);
            if let Some(p) = it.partition {
                item["partition"] = p.into();
            }
            wire.push(item);
        }
        let body = object([("items", Value::Array(wire))]);
        let answer = self
            .post("/api/v1/push", render(&body)?, Replay::Safe)
            .await?;
        decode(answer, "push answer")
    }

    /// Acks one message on its own (fenced by its lease, if it has one). To ack and
    /// produce in one atomic step, use [`Client::transaction`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use queen_sdk::AckStatus;
    /// let batch = client.pop::<serde_json::Value>("orders").send().await?;
    /// let outcome = client.ack(&batch[0], AckStatus::Completed).await?;
    /// assert!(outcome.success);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ack<T>(&self, msg: &Message<T>, status: AckStatus) -> Result<AckOutcome> {
        Ok(self.ack_batch(&[(msg, status)]).await?.remove(0))
    }

    /// Acks several messages; one verdict per ack, each independent.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, PushItem};
    /// client.push(vec![PushItem::new("orders", &1), PushItem::new("orders", &2)]).await?;
    /// let batch = client.pop::<u32>("orders").send().await?;
    /// let verdicts = client
    ///     .ack_batch(&[(&batch[0], AckStatus::Completed), (&batch[1], AckStatus::Dlq)])
    ///     .await?;
    /// assert!(verdicts.iter().all(|v| v.success));
    /// assert!(verdicts[1].dlq);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn ack_batch<T>(&self, acks: &[(&Message<T>, AckStatus)]) -> Result<Vec<AckOutcome>> {
        let wire: Vec<_> = acks
            .iter()
            .map(|(m, s)| {
                let (status, error) = s.wire();
                (*m, status, error)
            })
            .collect();
        self.ack_wire(&wire).await
    }

    /// Dead-letters `msg` now, keeping `reason` on the dead letter (the wire's `dlq`
    /// status with an `error`, which [`AckStatus::Dlq`] does not carry).
    pub(crate) async fn ack_dlq<T>(&self, msg: &Message<T>, reason: &str) -> Result<AckOutcome> {
        let mut out = self.ack_wire(&[(msg, "dlq", Some(reason))]).await?;
        Ok(out.remove(0))
    }

    /// Sends acks given as wire status and error, in order, in one call.
    async fn ack_wire<T>(
        &self,
        acks: &[(&Message<T>, &str, Option<&str>)],
    ) -> Result<Vec<AckOutcome>> {
        let acknowledgments: Vec<Value> = acks
            .iter()
            .map(|(m, status, error)| {
                json!({
                    "transactionId": m.transaction_id,
                    "partitionId": m.partition_id,
                    "consumerGroup": m.consumer_group,
                    "leaseId": (!m.lease_id.is_empty()).then_some(&m.lease_id),
                    "status": status,
                    "error": error,
                })
            })
            .collect();
        if acknowledgments.is_empty() {
            return Ok(Vec::new());
        }
        // Queen v0 reads only the call's top-level `consumerGroup` (defaulting to queue
        // mode) and ignores each item's, so a named group's acks would all be refused
        // there; Queen 2 takes both. Send it when one group owns the whole call.
        let group = acks[0].0.consumer_group.as_str();
        let body = if acks.iter().all(|(m, ..)| m.consumer_group == group) {
            object([
                ("acknowledgments", Value::Array(acknowledgments)),
                ("consumerGroup", Value::String(group.to_string())),
            ])
        } else {
            object([("acknowledgments", Value::Array(acknowledgments))])
        };
        let answer = self
            .post("/api/v1/ack/batch", render(&body)?, Replay::Safe)
            .await?;
        decode(answer, "ack answer")
    }

    /// Extends a lease to `by` from now (whole seconds, rounded down, at least 1). A
    /// lease that has expired is never revived: `renewed` is 0 then.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// use std::time::Duration;
    /// let batch = client.pop::<serde_json::Value>("orders").send().await?;
    /// let ext = client.extend_lease(&batch[0].lease_id, Duration::from_secs(300)).await?;
    /// assert!(ext.renewed > 0);
    /// let gone = client.extend_lease("no-such-lease", Duration::from_secs(300)).await?;
    /// assert_eq!(gone.renewed, 0);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn extend_lease(&self, lease_id: &str, by: Duration) -> Result<LeaseExtension> {
        let body = json!({ "seconds": by.as_secs().max(1) });
        let path = format!("/api/v1/lease/{}/extend", validate::segment(lease_id));
        let answer = self.post(&path, render(&body)?, Replay::Safe).await?;
        Ok(LeaseExtension::read(&answer.value()?))
    }
}

impl LeaseExtension {
    /// The extension an answer reports, as Queen 2 gives it (an object `{leaseId,
    /// success, renewed, newExpiresAt, ...}`) or as Queen v0 does (an array of one
    /// `{index, leaseId, success, expiresAt, error}`, without `renewed`).
    pub(crate) fn read(answer: &Value) -> LeaseExtension {
        let b = match answer {
            Value::Array(items) => items.first().unwrap_or(&Value::Null),
            other => other,
        };
        let renewed = if b.get("success") == Some(&Value::Bool(true)) {
            b.get("renewed").and_then(Value::as_u64).unwrap_or(1)
        } else {
            0
        };
        let expires_at = ["newExpiresAt", "expiresAt", "lease_expires_at"]
            .iter()
            .find_map(|k| b.get(*k).and_then(Value::as_str))
            .map(str::to_string);
        LeaseExtension {
            renewed,
            expires_at,
        }
    }
}

/// Decodes an answer body into `T`.
pub(crate) fn decode<T: DeserializeOwned>(answer: crate::client::Answer, what: &str) -> Result<T> {
    answer.decode(what)
}
