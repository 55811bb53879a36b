//! Queues: the list, one queue with its partitions' figures, its depth, and the
//! partitions holding the most work.

use hyper::Method;
use serde::Deserialize;

use super::de;
use crate::QueueSettings;
use crate::client::{Client, Opts};
use crate::error::{Error, Result};
use crate::validate;

/// Messages by state: a queue's totals, a partition's figures.
///
/// A message is counted once, by where its slowest consumer group stands: `pending`
/// (nobody took it yet), `processing` (leased), `completed`, or `dead_letter`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::PushItem;
/// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// let c = client.queue_stats("orders").await?.totals;
/// assert_eq!((c.total, c.pending, c.processing, c.completed, c.dead_letter), (3, 3, 0, 0, 0));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct MessageCounts {
    /// Every stored message.
    #[serde(default, deserialize_with = "de::count")]
    pub total: u64,
    /// Not yet taken.
    #[serde(default, deserialize_with = "de::count")]
    pub pending: u64,
    /// Leased to a consumer.
    #[serde(default, deserialize_with = "de::count")]
    pub processing: u64,
    /// Done.
    #[serde(default, deserialize_with = "de::count")]
    pub completed: u64,
    /// Dead-lettered.
    #[serde(default, deserialize_with = "de::count")]
    pub dead_letter: u64,
}

/// One queue of [`Client::list_queues`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::PushItem;
/// let name = "billing.invoices.eu";
/// client.push(vec![PushItem::new(name, &1).partition("a"), PushItem::new(name, &2).partition("b")]).await?;
/// let q = client.list_queues().await?.into_iter().find(|q| q.name == name).unwrap();
/// assert_eq!((q.partitions, q.messages.total), (2, 2));
/// // Derived from the dotted name by the reference broker:
/// assert_eq!((q.namespace.as_deref(), q.task.as_deref()), (Some("billing"), Some("invoices")));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct QueueSummary {
    /// The queue's name.
    pub name: String,
    /// The broker's id for it (the reference broker repeats the name).
    #[serde(default, deserialize_with = "de::opt_text")]
    pub id: Option<String>,
    /// Its namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Its task.
    #[serde(default)]
    pub task: Option<String>,
    /// How many partitions it has.
    #[serde(default, deserialize_with = "de::count")]
    pub partitions: u64,
    /// Its messages by state.
    #[serde(default)]
    pub messages: MessageCounts,
    /// Bytes its stored messages take, when the broker measures them.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub retained_bytes: Option<u64>,
    /// When it was created (ISO-8601).
    #[serde(default)]
    pub created_at: Option<String>,
}

/// One partition of a [`QueueDetail`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::PushItem;
/// client.push((0..4).map(|n| PushItem::new("orders", &n).partition("eu")).collect()).await?;
/// let detail = client.queue_stats("orders").await?;
/// let eu = detail.partition("eu").expect("the partition");
/// assert_eq!((eu.stats.total, eu.first_offset, eu.next_offset), (4, Some(0), Some(4)));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PartitionStats {
    /// Its opaque id (the `partitionId` of its messages).
    #[serde(default, deserialize_with = "de::text")]
    pub id: String,
    /// Its name.
    pub name: String,
    /// When it was created (ISO-8601).
    #[serde(default)]
    pub created_at: Option<String>,
    /// The offset of its oldest stored message.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub first_offset: Option<u64>,
    /// The offset its next message will take.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub next_offset: Option<u64>,
    /// When its newest message was stored (ISO-8601).
    #[serde(default)]
    pub last_message_at: Option<String>,
    /// Consumer groups with a cursor on it.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub consumer_groups: Option<u64>,
    /// Bytes its stored messages take.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub retained_bytes: Option<u64>,
    /// Its messages by state.
    #[serde(default)]
    pub stats: MessageCounts,
}

/// One queue with its configuration and partitions ([`Client::queue_stats`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{PushItem, QueueOptions};
/// client.configure("orders", QueueOptions::new().retry_limit(5)).await?;
/// client.push(vec![PushItem::new("orders", &1).partition("a"), PushItem::new("orders", &2).partition("b")]).await?;
/// let q = client.queue_stats("orders").await?;
/// assert_eq!((q.name.as_str(), q.partitions.len(), q.totals.total), ("orders", 2, 2));
/// assert_eq!(q.config.retry_limit, Some(5));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct QueueDetail {
    /// The queue's name.
    pub name: String,
    /// The broker's id for it.
    #[serde(default, deserialize_with = "de::opt_text")]
    pub id: Option<String>,
    /// Its namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Its task.
    #[serde(default)]
    pub task: Option<String>,
    /// When it was created (ISO-8601).
    #[serde(default)]
    pub created_at: Option<String>,
    /// Its stored options (every option, with its value).
    #[serde(default)]
    pub config: QueueSettings,
    /// Its messages by state, over every partition.
    #[serde(default)]
    pub totals: MessageCounts,
    /// Bytes its stored messages take.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub retained_bytes: Option<u64>,
    /// Its partitions: every one on Queen 2; the first 1,000 on the reference broker,
    /// which pages a queue's detail (`partitions_total` then says how many there are).
    #[serde(default)]
    pub partitions: Vec<PartitionStats>,
    /// How many partitions the queue has, when the broker pages them (the reference
    /// broker's `partitionsTotal`); `None` from a broker that answers them all.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub partitions_total: Option<u64>,
}

impl QueueDetail {
    /// The partition named `name`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// client.push(vec![queen_sdk::PushItem::new("orders", &1)]).await?;
    /// let q = client.queue_stats("orders").await?;
    /// assert_eq!(q.partition("Default").map(|p| p.stats.pending), Some(1));
    /// assert!(q.partition("elsewhere").is_none());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partition(&self, name: &str) -> Option<&PartitionStats> {
        self.partitions.iter().find(|p| p.name == name)
    }
}

/// One partition's backlog in a [`QueueDepth`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// client.push(vec![queen_sdk::PushItem::new("orders", &1).partition("eu")]).await?;
/// let d = client.queue_depth("orders", None).await?;
/// assert_eq!((d.partitions[0].partition.as_str(), d.partitions[0].pending), ("eu", 1));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PartitionDepth {
    /// The partition's name.
    pub partition: String,
    /// Messages left to read there.
    #[serde(default, deserialize_with = "de::count")]
    pub pending: u64,
}

/// A queue's backlog by watermark arithmetic ([`Client::queue_depth`]): cheaper than
/// [`Client::queue_stats`], for the slowest group or for one group.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::PushItem;
/// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// let d = client.queue_depth("orders", Some("billing")).await?;
/// assert_eq!((d.pending, d.partitions_pending), (3, Some(1)));
/// assert_eq!(d.group.as_deref(), Some("billing"));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct QueueDepth {
    /// The queue.
    pub queue: String,
    /// The group asked about; `None` for the slowest group's view.
    #[serde(default)]
    pub group: Option<String>,
    /// Messages left to read (log depth).
    #[serde(default, deserialize_with = "de::count")]
    pub pending: u64,
    /// Partitions with anything left to read (older brokers omit it).
    #[serde(default, deserialize_with = "de::opt_count")]
    pub partitions_pending: Option<u64>,
    /// Whether the group conflates its backlog (older brokers omit it).
    #[serde(default)]
    pub conflation: Option<bool>,
    /// Handler runs left: `partitions_pending` for a conflating group, else `pending`
    /// (older brokers omit it).
    #[serde(default, deserialize_with = "de::opt_count")]
    pub effective_pending: Option<u64>,
    /// The backlog by partition.
    #[serde(default)]
    pub partitions: Vec<PartitionDepth>,
}

/// One row of [`Client::busiest_partitions`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// client.push(vec![queen_sdk::PushItem::new("orders", &1).partition("eu")]).await?;
/// let row = &client.busiest_partitions(Some("orders"), None).await?[0];
/// assert_eq!((row.queue.as_str(), row.partition.as_str(), row.pending), ("orders", "eu", 1));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct PartitionLoad {
    /// Its queue.
    pub queue: String,
    /// Its name.
    pub partition: String,
    /// Its opaque id.
    #[serde(default, deserialize_with = "de::text")]
    pub id: String,
    /// Messages not yet taken.
    #[serde(default, deserialize_with = "de::count")]
    pub pending: u64,
    /// Messages leased.
    #[serde(default, deserialize_with = "de::count")]
    pub processing: u64,
    /// Age in seconds of the oldest message its slowest group has not consumed;
    /// `None` when caught up.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub lag_seconds: Option<u64>,
}

fn queue_path(queue: &str) -> String {
    format!("/api/v1/resources/queues/{}", validate::segment(queue))
}

impl Client {
    /// Every queue with its message counts (`GET /api/v1/resources/queues`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// client.push(vec![PushItem::new("orders", &1), PushItem::new("refunds", &2)]).await?;
    /// let mut names: Vec<String> = client.list_queues().await?.into_iter().map(|q| q.name).collect();
    /// names.sort();
    /// assert_eq!(names, ["orders", "refunds"]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn list_queues(&self) -> Result<Vec<QueueSummary>> {
        #[derive(Deserialize)]
        struct List {
            #[serde(default)]
            queues: Vec<QueueSummary>,
        }
        let answer = self
            .call::<()>(
                Method::GET,
                "/api/v1/resources/queues",
                None,
                None,
                Opts::SAFE,
            )
            .await?;
        Ok(answer.decode::<List>("queue list")?.queues)
    }

    /// One queue: its options, totals and each partition's figures
    /// (`GET /api/v1/resources/queues/{queue}`). A queue that does not exist is an
    /// [`Error::Api`] with status 404 ([`Error::is_not_found`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, PushItem};
    /// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
    /// let first = client.pop::<u32>("orders").batch(1).send().await?.remove(0);
    /// client.ack(&first, AckStatus::Completed).await?;
    /// let q = client.queue_stats("orders").await?;
    /// assert_eq!((q.totals.completed, q.totals.pending), (1, 2));
    /// assert_eq!(q.partitions_total, Some(1)); // the reference broker pages partitions
    /// assert!(client.queue_stats("nope").await.unwrap_err().is_not_found());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn queue_stats(&self, queue: &str) -> Result<QueueDetail> {
        validate::name("queue_stats", queue)?;
        let answer = self
            .call::<()>(Method::GET, &queue_path(queue), None, None, Opts::SAFE)
            .await?;
        answer.decode("queue detail")
    }

    /// A queue's backlog (`GET /api/v1/resources/queues/{queue}/depth`): for `group`,
    /// or with `None` for the slowest group. A group with no cursor on a partition
    /// owes all of it. A queue that does not exist is a 404 ([`Error::is_not_found`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, PushItem, SubscriptionMode};
    /// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
    /// let got = client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(2).send().await?;
    /// client.ack(&got[1], AckStatus::Completed).await?; // commits both
    /// assert_eq!(client.queue_depth("orders", Some("billing")).await?.pending, 1);
    /// assert_eq!(client.queue_depth("orders", Some("audit")).await?.pending, 3);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn queue_depth(&self, queue: &str, group: Option<&str>) -> Result<QueueDepth> {
        validate::name("queue_depth", queue)?;
        if let Some(g) = group {
            validate::name("queue_depth", g)?;
        }
        let path = format!("{}/depth", queue_path(queue));
        let params: Vec<(&str, &str)> = group.map(|g| ("group", g)).into_iter().collect();
        let answer = self
            .call(Method::GET, &path, Some(&params), None, Opts::SAFE)
            .await?;
        answer.decode("queue depth")
    }

    /// The partitions holding the most pending messages, busiest first
    /// (`GET /api/v1/resources/partitions`): of one queue or all, at most `limit`
    /// rows (broker default 610). A `limit` of 0 is refused before sending.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::PushItem;
    /// let mut items: Vec<_> = (0..3).map(|n| PushItem::new("orders", &n).partition("busy")).collect();
    /// items.push(PushItem::new("orders", &9).partition("quiet"));
    /// client.push(items).await?;
    /// let rows = client.busiest_partitions(Some("orders"), Some(1)).await?;
    /// assert_eq!((rows.len(), rows[0].partition.as_str(), rows[0].pending), (1, "busy", 3));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn busiest_partitions(
        &self,
        queue: Option<&str>,
        limit: Option<u32>,
    ) -> Result<Vec<PartitionLoad>> {
        let mut params: Vec<(&str, String)> = Vec::new();
        if let Some(q) = queue {
            validate::name("busiest_partitions", q)?;
            params.push(("queue", q.to_string()));
        }
        if let Some(l) = limit {
            if l == 0 {
                return Err(Error::invalid(
                    "busiest_partitions",
                    "limit must be at least 1",
                ));
            }
            params.push(("limit", l.to_string()));
        }
        #[derive(Deserialize)]
        struct Ranked {
            #[serde(default)]
            partitions: Vec<PartitionLoad>,
        }
        let answer = self
            .call(
                Method::GET,
                "/api/v1/resources/partitions",
                Some(&params),
                None,
                Opts::SAFE,
            )
            .await?;
        Ok(answer.decode::<Ranked>("partitions ranking")?.partitions)
    }
}
