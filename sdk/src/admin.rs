//! Administration: queue options, queue and group deletion, dead letters, seeking a
//! consumer group, and the broker's health.
//!
//! ```no_run
//! # async fn demo(client: queen_sdk::Client) -> queen_sdk::Result<()> {
//! use std::time::{Duration, SystemTime, UNIX_EPOCH};
//! use queen_sdk::{DlqQuery, QueueOptions, SeekTo};
//!
//! let stored = client
//!     .configure("orders", QueueOptions::new().lease_time(Duration::from_secs(30)).retry_limit(5))
//!     .await?;
//! assert_eq!(stored.options.lease_time, Some(Duration::from_secs(30)));
//!
//! let page = client.dlq::<serde_json::Value>(DlqQuery::queue("orders").limit(20)).await?;
//! for dead in &page.messages {
//!     println!("{} failed: {:?}", dead.id, dead.error_message);
//! }
//! client.seek("billing", "orders", SeekTo::End).await?;
//! # Ok(()) }
//! ```

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hyper::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::client::{Client, Opts, Replay};
use crate::error::{Error, Result};
use crate::json::render;
use crate::message::decode;
use crate::time::rfc3339;
use crate::validate;

/// The options to set on a queue ([`Client::configure`], `wire.md` section 2): a builder
/// in which every option is optional. An option not set keeps the queue's current value
/// (unless [`QueueOptions::replace`] resets it to its default). What the broker stores
/// comes back as [`QueueSettings`].
///
/// Times are whole seconds on the wire; the setters take [`Duration`]s and round up.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// use queen_sdk::QueueOptions;
/// let opts = QueueOptions::new()
///     .lease_time(Duration::from_secs(60))
///     .retry_limit(5)
///     .dead_letter_queue(true)
///     .dedup_window(Duration::from_secs(600));
/// let stored = client.configure("orders", opts).await?.options;
/// assert_eq!(stored.lease_time, Some(Duration::from_secs(60)));
/// assert_eq!(stored.retry_limit, Some(5));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
#[must_use]
pub struct QueueOptions {
    wire: OptionsWire,
    replace: bool,
}

/// A queue's options as the broker stores them: what [`Client::configure`] and the
/// operator reads answer. Times are [`Duration`]s (whole seconds on the wire); an option
/// the broker did not report is `None`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// use queen_sdk::{QueueOptions, QueueSettings};
/// let stored: QueueSettings = client.configure("orders", QueueOptions::new()).await?.options;
/// assert_eq!(stored.lease_time, Some(Duration::from_secs(300))); // the broker's default
/// assert_eq!(stored.retry_limit, Some(3));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(from = "OptionsWire")]
#[non_exhaustive]
pub struct QueueSettings {
    /// How long a popped batch stays leased (broker default 300 s).
    pub lease_time: Option<Duration>,
    /// `failed` acks a message may take and still be redelivered (default 3).
    pub retry_limit: Option<u32>,
    /// `false`: an exhausted or `dlq` message is dropped instead (default `true`).
    pub dead_letter_queue: Option<bool>,
    /// How long a new message stays invisible (default 0).
    pub delayed_processing: Option<Duration>,
    /// How long a `(partition, transactionId)` is remembered for deduplication; zero
    /// turns it off (default 3600 s).
    pub dedup_window: Option<Duration>,
    /// How long messages are kept; zero keeps them forever (default 0).
    pub retention: Option<Duration>,
    /// The redelivery delay the queue stores (`retryDelay`, in milliseconds on the wire;
    /// Queen 2's default 1 s). Queen 2 does not apply it: a `failed` message is
    /// redelivered at once (see [`QueueOptions::retry_delay`]).
    pub retry_delay: Option<Duration>,
    /// The queue's namespace (used by `GET /api/v1/pop?namespace=`).
    pub namespace: Option<String>,
    /// The queue's task (used by `GET /api/v1/pop?task=`).
    pub task: Option<String>,
    /// Other options of the protocol (`priority`, `ttl`, ...), by wire
    /// name, with their stored values.
    pub extra: Map<String, Value>,
}

/// The options on the wire: what a configure sends and what the broker answers.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OptionsWire {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    lease_time: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_limit: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dead_letter_queue: Option<bool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    delayed_processing: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dedup_window_seconds: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retention_seconds: Option<u64>,
    /// Milliseconds, unlike the other times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    retry_delay: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    task: Option<String>,
    #[serde(flatten)]
    extra: Map<String, Value>,
}

impl From<OptionsWire> for QueueSettings {
    fn from(w: OptionsWire) -> QueueSettings {
        QueueSettings {
            lease_time: w.lease_time.map(Duration::from_secs),
            retry_limit: w.retry_limit,
            dead_letter_queue: w.dead_letter_queue,
            delayed_processing: w.delayed_processing.map(Duration::from_secs),
            dedup_window: w.dedup_window_seconds.map(Duration::from_secs),
            retention: w.retention_seconds.map(Duration::from_secs),
            retry_delay: w.retry_delay.map(Duration::from_millis),
            namespace: w.namespace,
            task: w.task,
            extra: w.extra,
        }
    }
}

fn secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl QueueOptions {
    /// No options: a configure with it only creates the queue (or leaves it as it is).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let cfg = client.configure("orders", QueueOptions::new()).await?;
    /// assert_eq!(cfg.options.lease_time, Some(std::time::Duration::from_secs(300))); // the broker's default
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a popped batch stays leased (rounded up to whole seconds) when the pop
    /// does not say: a worker's pops say, with [`Worker::lease`](crate::Worker::lease)
    /// (default 60 s, renewed while in hand), which overrides this for them.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::QueueOptions;
    /// let opts = QueueOptions::new().lease_time(Duration::from_millis(1500));
    /// let stored = client.configure("orders", opts).await?.options;
    /// assert_eq!(stored.lease_time, Some(Duration::from_secs(2)));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lease_time(mut self, d: Duration) -> Self {
        self.wire.lease_time = Some(secs(d));
        self
    }

    /// `failed` acks a message may take and still be redelivered.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, DlqQuery, PushItem, QueueOptions};
    /// client.configure("orders", QueueOptions::new().retry_limit(0)).await?;
    /// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
    /// let msg = client.pop::<String>("orders").send().await?.remove(0);
    /// client.ack(&msg, AckStatus::Failed { error: "declined".into() }).await?;
    /// // No retries left: dead-lettered at once.
    /// assert_eq!(client.dlq::<String>(DlqQuery::queue("orders")).await?.total, 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_limit(mut self, n: u32) -> Self {
        self.wire.retry_limit = Some(n);
        self
    }

    /// Dead-letter (`true`) or drop (`false`) exhausted and `dlq` messages.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let stored = client.configure("orders", QueueOptions::new().dead_letter_queue(false)).await?.options;
    /// assert_eq!(stored.dead_letter_queue, Some(false));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn dead_letter_queue(mut self, on: bool) -> Self {
        self.wire.dead_letter_queue = Some(on);
        self
    }

    /// How long a new message stays invisible (rounded up to whole seconds).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::{PushItem, QueueOptions};
    /// client.configure("later", QueueOptions::new().delayed_processing(Duration::from_secs(60))).await?;
    /// client.push(vec![PushItem::new("later", &"o-7")]).await?;
    /// assert!(client.pop::<String>("later").send().await?.is_empty()); // not yet visible
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn delayed_processing(mut self, d: Duration) -> Self {
        self.wire.delayed_processing = Some(secs(d));
        self
    }

    /// How long a pushed `transactionId` is remembered; zero turns deduplication off.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::{PushItem, QueueOptions};
    /// client.configure("events", QueueOptions::new().dedup_window(Duration::ZERO)).await?;
    /// let item = PushItem::new("events", &"tick").transaction_id("tick-1");
    /// let out = client.push(vec![item.clone(), item]).await?;
    /// assert!(!out[1].is_duplicate()); // stored twice
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn dedup_window(mut self, d: Duration) -> Self {
        self.wire.dedup_window_seconds = Some(secs(d));
        self
    }

    /// How long messages are kept; zero keeps them forever.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::QueueOptions;
    /// let week = QueueOptions::new().retention(Duration::from_secs(7 * 86_400));
    /// let stored = client.configure("orders", week).await?.options;
    /// assert_eq!(stored.retention, Some(Duration::from_secs(604_800)));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn retention(mut self, d: Duration) -> Self {
        self.wire.retention_seconds = Some(secs(d));
        self
    }

    /// The queue's redelivery delay, `retryDelay` (rounded up to whole milliseconds):
    /// stored and echoed in the queue's configuration, and **not applied by Queen 2**. Its
    /// engine (queen-engine 1.3) releases the lease of a message acked `failed` at once
    /// (`005_log_ack.sql`, section 4) and its pop never reads the delay, so the message is
    /// redelivered at the next pop whatever this says; the reference broker does the
    /// same (`conformance/spec/wire.md#core-ack`). A backoff between a handler's
    /// attempts belongs to the worker: [`Worker::retry_handler`](crate::Worker::retry_handler).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::{AckStatus, PushItem, QueueOptions};
    /// let opts = QueueOptions::new().retry_delay(Duration::from_secs(5));
    /// let stored = client.configure("orders", opts).await?.options;
    /// assert_eq!(stored.retry_delay, Some(Duration::from_secs(5)));
    /// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
    /// let msg = client.pop::<String>("orders").send().await?.remove(0);
    /// client.ack(&msg, AckStatus::Failed { error: "not yet".into() }).await?;
    /// // Redelivered at once, not 5 s later.
    /// assert_eq!(client.pop::<String>("orders").send().await?.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_delay(mut self, d: Duration) -> Self {
        let ms = d.as_millis() + u128::from(!d.subsec_nanos().is_multiple_of(1_000_000));
        self.wire.retry_delay = Some(u64::try_from(ms).unwrap_or(u64::MAX));
        self
    }

    /// The queue's namespace.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let cfg = client.configure("orders", QueueOptions::new().namespace("shop").task("billing")).await?;
    /// assert_eq!(cfg.options.namespace.as_deref(), Some("shop"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.wire.namespace = Some(ns.into());
        self
    }

    /// The queue's task.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let cfg = client.configure("orders", QueueOptions::new().task("billing")).await?;
    /// assert_eq!(cfg.options.task.as_deref(), Some("billing"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.wire.task = Some(task.into());
        self
    }

    /// Any other option, by its wire name (`"priority"`, `"ttl"`, ...).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let cfg = client.configure("orders", QueueOptions::new().option("priority", 5)).await?;
    /// assert_eq!(cfg.options.extra["priority"], 5);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn option(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.wire.extra.insert(name.into(), value.into());
        self
    }

    /// Replace the whole configuration: options not sent go back to their defaults.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::QueueOptions;
    /// client.configure("orders", QueueOptions::new().retry_limit(9)).await?;
    /// let only_lease = QueueOptions::new().lease_time(Duration::from_secs(30)).replace();
    /// let cfg = client.configure("orders", only_lease).await?;
    /// assert_eq!(cfg.options.retry_limit, Some(3)); // back to the default
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn replace(mut self) -> Self {
        self.replace = true;
        self
    }
}

/// What [`Client::configure`] answers: the queue's stored configuration.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{QueueConfig, QueueOptions};
/// let cfg: QueueConfig = client.configure("orders", QueueOptions::new().retry_limit(5)).await?;
/// assert_eq!(cfg.queue, "orders");
/// assert_eq!(cfg.options.retry_limit, Some(5));
/// assert_eq!(cfg.options.dedup_window, Some(std::time::Duration::from_secs(3600))); // unchanged options too
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue.
    pub queue: String,
    /// Every stored option, `namespace` and `task` included.
    pub options: QueueSettings,
}

/// The broker's health (`GET /health`).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let health = client.health().await?;
/// assert_eq!(health.status, "healthy");
/// assert!(health.version.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Health {
    /// `"healthy"` when all is well.
    pub status: String,
    /// The broker's version.
    #[serde(default)]
    pub version: Option<String>,
}

impl Health {
    /// Whether the broker says it is healthy.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// assert!(client.health().await?.is_healthy());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_healthy(&self) -> bool {
        self.status == "healthy"
    }
}

/// Which dead letters [`Client::dlq`] lists. Every filter is optional.
///
/// ```
/// use queen_sdk::DlqQuery;
/// let q = DlqQuery::queue("orders").group("billing").limit(50).offset(100);
/// assert_eq!(q.limit, Some(50));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqQuery {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this consumer group.
    pub group: Option<String>,
    /// Most rows in the page (broker default 100, at most 1,000).
    pub limit: Option<u32>,
    /// Rows to skip.
    pub offset: Option<u64>,
}

impl DlqQuery {
    /// Dead letters of every queue.
    ///
    /// ```
    /// use queen_sdk::DlqQuery;
    /// let q = DlqQuery::all();
    /// assert_eq!(q, DlqQuery::default());
    /// ```
    pub fn all() -> Self {
        Self::default()
    }

    /// Dead letters of `queue`.
    ///
    /// ```
    /// use queen_sdk::DlqQuery;
    /// let q = DlqQuery::queue("orders");
    /// assert_eq!(q.queue.as_deref(), Some("orders"));
    /// ```
    pub fn queue(queue: impl Into<String>) -> Self {
        DlqQuery {
            queue: Some(queue.into()),
            ..Self::default()
        }
    }

    /// Only those of `group`.
    ///
    /// ```
    /// use queen_sdk::DlqQuery;
    /// let q = DlqQuery::queue("orders").group("billing");
    /// assert_eq!(q.group.as_deref(), Some("billing"));
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Most rows in the page.
    ///
    /// ```
    /// use queen_sdk::DlqQuery;
    /// let q = DlqQuery::all().limit(500);
    /// assert_eq!(q.limit, Some(500));
    /// ```
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }

    /// Rows to skip.
    ///
    /// ```
    /// use queen_sdk::DlqQuery;
    /// let second_page = DlqQuery::queue("orders").limit(100).offset(100);
    /// assert_eq!(second_page.offset, Some(100));
    /// ```
    pub fn offset(mut self, n: u64) -> Self {
        self.offset = Some(n);
        self
    }
}

/// A dead-lettered message with a typed payload.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{AckStatus, DlqQuery, PushItem};
/// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
/// let msg = client.pop::<String>("orders").send().await?.remove(0);
/// client.ack(&msg, AckStatus::Dlq).await?;
/// let page = client.dlq::<String>(DlqQuery::queue("orders")).await?;
/// let dead = &page.messages[0];
/// assert_eq!((dead.id.as_str(), dead.data.as_str()), (msg.id.as_str(), "o-7"));
/// assert_eq!((dead.queue.as_str(), dead.partition.as_str()), ("orders", "Default"));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeadLetter<T = Value> {
    /// The message's id.
    pub id: String,
    /// Its dedup key.
    pub transaction_id: String,
    /// Its partition's opaque id.
    #[serde(default)]
    pub partition_id: String,
    /// Its queue.
    #[serde(default)]
    pub queue: String,
    /// Its partition.
    #[serde(default)]
    pub partition: String,
    /// The group it failed in.
    #[serde(default)]
    pub consumer_group: Option<String>,
    /// The payload.
    pub data: T,
    /// The failing ack's `error` (also read from `error`).
    #[serde(default, alias = "error")]
    pub error_message: Option<String>,
    /// Failed attempts it took.
    #[serde(default)]
    pub retry_count: u32,
    /// The producer's identity, when the broker has auth.
    #[serde(default)]
    pub producer_sub: Option<String>,
    /// When it was stored (ISO-8601).
    #[serde(default)]
    pub created_at: String,
    /// When it was dead-lettered (ISO-8601).
    #[serde(default)]
    pub failed_at: String,
}

/// One page of dead letters.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{AckStatus, DlqQuery, PushItem};
/// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// for msg in client.pop::<u32>("orders").send().await? {
///     client.ack(&msg, AckStatus::Dlq).await?;
/// }
/// let page = client.dlq::<u32>(DlqQuery::queue("orders").limit(2)).await?;
/// assert_eq!((page.messages.len(), page.total), (2, 3));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct DlqPage<T = Value> {
    /// The page, oldest first.
    pub messages: Vec<DeadLetter<T>>,
    /// How many match the query in all.
    pub total: u64,
}

/// Where [`Client::seek`] moves a consumer group's cursor.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::{Duration, SystemTime};
/// use queen_sdk::{PushItem, SeekTo, SubscriptionMode};
/// client.push(vec![PushItem::new("orders", &"old")]).await?;
/// let audit = || client.pop::<String>("orders").group("audit").subscription(SubscriptionMode::All);
/// client.seek("audit", "orders", SeekTo::End).await?; // skip the backlog
/// assert!(audit().send().await?.is_empty());
/// let an_hour_ago = SystemTime::now() - Duration::from_secs(3600);
/// client.seek("audit", "orders", SeekTo::Time(an_hour_ago)).await?; // replay the last hour
/// assert_eq!(audit().send().await?[0].data, "old");
/// client.seek("audit", "orders", SeekTo::Beginning).await?; // or everything still stored
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// A replay delivers each message again, and a step run again finds its derived push
/// ids and `once` markers from the first run: it settles as already done. To run the
/// corrected step for real, give the worker a new [`Epoch`](crate::Epoch) as you seek.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SeekTo {
    /// To the first message still stored (`{"timestamp": "1970-01-01T00:00:00.000Z"}`:
    /// Queen 2's seek has no word for it): the group reads the whole stored log again.
    Beginning,
    /// Past every stored message: the group reads only what arrives next.
    End,
    /// To the first message stored at or after this time (sent as RFC 3339 UTC with
    /// milliseconds; a time before 1970 as the Unix epoch).
    Time(SystemTime),
}

impl Client {
    /// Creates or updates `queue` and answers its stored options. Options left `None`
    /// keep their current values (see [`QueueOptions::replace`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::QueueOptions;
    /// let cfg = client
    ///     .configure("orders", QueueOptions::new().lease_time(Duration::from_secs(30)))
    ///     .await?;
    /// assert_eq!(cfg.options.lease_time, Some(std::time::Duration::from_secs(30)));
    /// assert_eq!(cfg.options.retry_limit, Some(3)); // the broker's default, echoed
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn configure(&self, queue: &str, options: QueueOptions) -> Result<QueueConfig> {
        /// Queen v0's default `leaseTime` (what it stores when none is sent).
        const V0_DEFAULT_LEASE_SECONDS: u64 = 300;
        validate::name("configure", queue)?;
        let mut body = json!({ "queue": queue });
        if let Some(ns) = &options.wire.namespace {
            body["namespace"] = ns.clone().into();
        }
        if let Some(t) = &options.wire.task {
            body["task"] = t.clone().into();
        }
        let mut wire = serde_json::to_value(&options.wire)?;
        if let Some(m) = wire.as_object_mut() {
            m.remove("namespace");
            m.remove("task");
        }
        // No option set: no `options` object at all, never an empty one.
        let sets_nothing = wire.as_object().is_none_or(|m| m.is_empty());
        if !sets_nothing {
            body["options"] = wire;
        }
        if options.replace {
            body["mode"] = "replace".into();
        }
        let mut b = self
            .post("/api/v1/configure", render(&body)?, Replay::Safe)
            .await?
            .value()?;
        // Queen v0 (the PostgreSQL broker) stores a configure that sets nothing, then
        // fails to cache it and answers 200 `{"error": "[json.exception.type_error.306]
        // cannot use value() with null"}`. Its configure always resets every option not
        // sent to its default, so the same call with one of its defaults stated asks for
        // exactly what the first one did, and is answered.
        if sets_nothing
            && options.wire.namespace.is_none()
            && options.wire.task.is_none()
            && b.get("error")
                .and_then(Value::as_str)
                .is_some_and(|e| e.contains("cannot use value() with null"))
        {
            body["options"] = json!({ "leaseTime": V0_DEFAULT_LEASE_SECONDS });
            b = self
                .post("/api/v1/configure", render(&body)?, Replay::Safe)
                .await?
                .value()?;
        }
        if let Some(e) = b.get("error").and_then(Value::as_str) {
            return Err(Error::Api {
                status: 200,
                code: b.get("code").and_then(Value::as_str).map(str::to_string),
                message: e.to_string(),
                retry_after: None,
            });
        }
        let mut stored: QueueSettings =
            serde_json::from_value(b.get("options").cloned().unwrap_or_else(|| json!({})))
                .map_err(|e| Error::Decode {
                    message: format!("configure answer: {e}"),
                    body: b.to_string(),
                })?;
        let top = |k: &str| b.get(k).and_then(Value::as_str).map(str::to_string);
        stored.namespace = stored.namespace.or_else(|| top("namespace"));
        stored.task = stored.task.or_else(|| top("task"));
        Ok(QueueConfig {
            queue: top("queue").unwrap_or_else(|| queue.to_string()),
            options: stored,
        })
    }

    /// Deletes `queue` with its partitions, messages, leases and cursors. Answers
    /// whether it existed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// client.push(vec![queen_sdk::PushItem::new("scratch", &1)]).await?;
    /// assert!(client.delete_queue("scratch").await?);
    /// assert!(!client.delete_queue("scratch").await?);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete_queue(&self, queue: &str) -> Result<bool> {
        validate::name("delete_queue", queue)?;
        let path = format!("/api/v1/resources/queues/{}", validate::segment(queue));
        let answer = self
            .call::<()>(Method::DELETE, &path, None, None, Opts::SAFE)
            .await?;
        Ok(answer
            .value()?
            .get("deleted")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    /// Lists dead letters, their payloads decoded as `T`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, DlqQuery, PushItem};
    /// # client.push(vec![PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// # client.ack(&msg, AckStatus::Failed { error: "declined".into() }).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// # client.ack(&msg, AckStatus::Dlq).await?;
    /// let page = client.dlq::<serde_json::Value>(DlqQuery::queue("orders")).await?;
    /// println!("{} dead letters", page.total);
    /// assert_eq!(page.messages[0].data["id"], "o-7");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn dlq<T: DeserializeOwned>(&self, query: DlqQuery) -> Result<DlqPage<T>> {
        let mut params: Vec<(&str, String)> = Vec::new();
        if let Some(q) = query.queue {
            params.push(("queue", q));
        }
        if let Some(g) = query.group {
            params.push(("consumerGroup", g));
        }
        if let Some(l) = query.limit {
            params.push(("limit", l.to_string()));
        }
        if let Some(o) = query.offset {
            params.push(("offset", o.to_string()));
        }
        let answer = self
            .call(Method::GET, "/api/v1/dlq", Some(&params), None, Opts::SAFE)
            .await?;
        #[derive(Deserialize)]
        struct Page<T> {
            #[serde(default = "Vec::new")]
            messages: Vec<DeadLetter<T>>,
            #[serde(default)]
            total: u64,
        }
        let page: Page<T> = decode(answer, "dlq answer")?;
        Ok(DlqPage {
            messages: page.messages,
            total: page.total,
        })
    }

    /// Moves `group`'s cursor on every partition of `queue` and releases any lease it
    /// holds there. Answers how many partitions moved.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SeekTo};
    /// # client.push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")]).await?;
    /// let moved = client.seek("billing", "orders", SeekTo::Beginning).await?;
    /// assert_eq!(moved, 2); // both partitions
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn seek(&self, group: &str, queue: &str, to: SeekTo) -> Result<u64> {
        validate::name("seek", queue)?;
        let path = format!(
            "/api/v1/consumer-groups/{}/queues/{}/seek",
            validate::segment(group),
            validate::segment(queue)
        );
        self.seek_at(&path, to).await
    }

    /// Moves `group`'s cursor on one partition of `queue` (see [`Client::seek`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SeekTo};
    /// client.push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")]).await?;
    /// let moved = client.seek_partition("billing", "orders", "b", SeekTo::End).await?;
    /// assert_eq!(moved, 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn seek_partition(
        &self,
        group: &str,
        queue: &str,
        partition: &str,
        to: SeekTo,
    ) -> Result<u64> {
        validate::name("seek", queue)?;
        validate::name("seek", partition)?;
        let path = format!(
            "/api/v1/consumer-groups/{}/queues/{}/partitions/{}/seek",
            validate::segment(group),
            validate::segment(queue),
            validate::segment(partition)
        );
        self.seek_at(&path, to).await
    }

    async fn seek_at(&self, path: &str, to: SeekTo) -> Result<u64> {
        let body = match to {
            SeekTo::End => json!({ "toEnd": true }),
            SeekTo::Beginning => json!({ "timestamp": rfc3339(UNIX_EPOCH) }),
            SeekTo::Time(t) => json!({ "timestamp": rfc3339(t) }),
        };
        let answer = self.post(path, render(&body)?, Replay::Safe).await?;
        let b = answer.value()?;
        if b.get("success") == Some(&Value::Bool(false)) {
            return Err(Error::Api {
                status: 200,
                code: None,
                message: b
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("seek failed")
                    .to_string(),
                retry_after: None,
            });
        }
        Ok(b.get("partitionsUpdated")
            .and_then(Value::as_u64)
            .unwrap_or(0))
    }

    /// Forgets a consumer group: its cursors and leases on every queue. Answers how many
    /// partitions it had state on.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SubscriptionMode};
    /// client.push(vec![PushItem::new("orders", &1)]).await?;
    /// client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).send().await?;
    /// assert_eq!(client.delete_group("billing").await?, 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete_group(&self, group: &str) -> Result<u64> {
        validate::name("delete_group", group)?;
        let path = format!("/api/v1/consumer-groups/{}", validate::segment(group));
        let answer = self
            .call::<()>(Method::DELETE, &path, None, None, Opts::SAFE)
            .await?;
        // Queen 2 answers `deletedPartitions` (the official client's admin tests read
        // it); this project's brokers before it answered `partitionsDeleted`.
        let v = answer.value()?;
        Ok(["deletedPartitions", "partitionsDeleted"]
            .iter()
            .find_map(|k| v.get(*k).and_then(Value::as_u64))
            .unwrap_or(0))
    }

    /// Asks the broker whether it is healthy (`GET /health`, no auth needed).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// assert!(client.health().await?.is_healthy());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn health(&self) -> Result<Health> {
        let answer = self
            .call::<()>(Method::GET, "/health", None, None, Opts::SAFE)
            .await?;
        decode(answer, "health answer")
    }
}
