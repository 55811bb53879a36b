//! Messages by hand: one message and where it stands for each group, the listing, and
//! replaying or deleting a dead letter.

use std::fmt;

use hyper::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::de;
use crate::QueueSettings;
use crate::client::{Client, Opts, Replay};
use crate::error::{Error, Result};
use crate::validate;

/// Where a message stands: for one group, or overall (by its slowest group).
///
/// ```
/// use queen_sdk::MessageStatus;
/// assert_eq!(MessageStatus::from("dead_letter".to_string()), MessageStatus::DeadLetter);
/// assert_eq!(MessageStatus::Processing.as_str(), "processing");
/// assert_eq!(MessageStatus::from("archived".to_string()), MessageStatus::Other("archived".into()));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
#[non_exhaustive]
pub enum MessageStatus {
    /// Not yet taken.
    Pending,
    /// Leased to a consumer.
    Processing,
    /// Done.
    Completed,
    /// Dead-lettered.
    DeadLetter,
    /// A status this SDK does not know, kept verbatim.
    Other(String),
}

impl From<String> for MessageStatus {
    fn from(s: String) -> Self {
        match s.as_str() {
            "pending" => Self::Pending,
            "processing" => Self::Processing,
            "completed" => Self::Completed,
            "dead_letter" => Self::DeadLetter,
            _ => Self::Other(s),
        }
    }
}

impl MessageStatus {
    /// The wire spelling (`pending`, `processing`, `completed`, `dead_letter`).
    ///
    /// ```
    /// assert_eq!(queen_sdk::MessageStatus::DeadLetter.as_str(), "dead_letter");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            Self::Pending => "pending",
            Self::Processing => "processing",
            Self::Completed => "completed",
            Self::DeadLetter => "dead_letter",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for MessageStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Where a message stands for one consumer group, in a [`MessageDetail`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{MessageStatus, PushItem, SubscriptionMode};
/// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
/// let msg = client.pop::<String>("orders").group("billing").subscription(SubscriptionMode::All).send().await?.remove(0);
/// let d = client.message::<String>(&msg.partition_id, &msg.transaction_id).await?;
/// let g = &d.consumer_groups[0];
/// assert_eq!((g.name.as_str(), &g.status, g.delivery_attempts), ("billing", &MessageStatus::Processing, 1));
/// assert_eq!(g.lease_id.as_deref(), Some(msg.lease_id.as_str()));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(from = "MessageGroupWire")]
#[non_exhaustive]
pub struct MessageGroup {
    /// The group.
    pub name: String,
    /// Where the message stands for it. Queen 2's engine answers only whether the group
    /// consumed it (`consumed`): then [`MessageStatus::Completed`] or
    /// [`MessageStatus::Pending`].
    pub status: MessageStatus,
    /// The group's cursor on the message's partition.
    pub cursor: Option<u64>,
    /// The lease the message is held under, while it is.
    pub lease_id: Option<String>,
    /// When that lease ends (ISO-8601).
    pub lease_expires_at: Option<String>,
    /// Times it was delivered to the group.
    pub delivery_attempts: u64,
    /// `failed` acks the group gave it.
    pub failures: u64,
}

/// [`MessageGroup`] as brokers send it: a `status`, or (Queen 2's engine) a `consumed`
/// flag.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct MessageGroupWire {
    name: String,
    #[serde(default)]
    status: Option<MessageStatus>,
    #[serde(default)]
    consumed: Option<bool>,
    #[serde(default, deserialize_with = "de::opt_count")]
    cursor: Option<u64>,
    #[serde(default)]
    lease_id: Option<String>,
    #[serde(default)]
    lease_expires_at: Option<String>,
    #[serde(default, deserialize_with = "de::count")]
    delivery_attempts: u64,
    #[serde(default, deserialize_with = "de::count")]
    failures: u64,
}

impl From<MessageGroupWire> for MessageGroup {
    fn from(w: MessageGroupWire) -> Self {
        let status = match (w.status, w.consumed) {
            (Some(s), _) => s,
            (None, Some(true)) => MessageStatus::Completed,
            (None, Some(false)) => MessageStatus::Pending,
            (None, None) => MessageStatus::Other(String::new()),
        };
        MessageGroup {
            name: w.name,
            status,
            cursor: w.cursor,
            lease_id: w.lease_id,
            lease_expires_at: w.lease_expires_at,
            delivery_attempts: w.delivery_attempts,
            failures: w.failures,
        }
    }
}

/// One message with its payload and where it stands ([`Client::message`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{MessageStatus, PushItem};
/// client.push(vec![PushItem::new("orders", &serde_json::json!({"id": "o-7"})).partition("eu").transaction_id("order-7")]).await?;
/// let pid = client.queue_stats("orders").await?.partitions[0].id.clone();
/// let d = client.message::<serde_json::Value>(&pid, "order-7").await?;
/// assert_eq!((d.queue.as_str(), d.partition.as_str(), d.offset), ("orders", "eu", Some(0)));
/// assert_eq!((d.status, d.data["id"].as_str()), (MessageStatus::Pending, Some("o-7")));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct MessageDetail<T = Value> {
    /// The message's id.
    pub id: String,
    /// Its dedup key.
    pub transaction_id: String,
    /// Its partition's opaque id.
    #[serde(default, deserialize_with = "de::text")]
    pub partition_id: String,
    /// Its partition's name.
    #[serde(default)]
    pub partition: String,
    /// Its queue.
    #[serde(default)]
    pub queue: String,
    /// Its queue's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Its queue's task.
    #[serde(default)]
    pub task: Option<String>,
    /// Its offset in the partition.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub offset: Option<u64>,
    /// Where it stands, by its slowest group.
    pub status: MessageStatus,
    /// The payload (also read from `payload`).
    pub data: T,
    /// Its trace id.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The producer's identity, when the broker has auth.
    #[serde(default)]
    pub producer_sub: Option<String>,
    /// When it was stored (ISO-8601).
    #[serde(default)]
    pub created_at: Option<String>,
    /// The most `failed` acks any group gave it.
    #[serde(default, deserialize_with = "de::count")]
    pub retry_count: u64,
    /// Its queue's options.
    #[serde(default)]
    pub queue_config: Option<QueueSettings>,
    /// Where it stands for each group with a cursor on its partition.
    #[serde(default)]
    pub consumer_groups: Vec<MessageGroup>,
}

/// Which messages [`Client::messages`] lists. Every filter is optional.
///
/// ```
/// use queen_sdk::{MessageQuery, MessageStatus};
/// let q = MessageQuery::queue("orders").partition("eu").status(MessageStatus::DeadLetter).limit(50);
/// assert_eq!((q.queue.as_deref(), q.limit), (Some("orders"), Some(50)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageQuery {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this partition.
    pub partition: Option<String>,
    /// Only queues of this namespace.
    pub namespace: Option<String>,
    /// Only queues of this task.
    pub task: Option<String>,
    /// Only messages standing so.
    pub status: Option<MessageStatus>,
    /// Only messages stored at or after this ISO-8601 time.
    pub from: Option<String>,
    /// Only messages stored at or before this ISO-8601 time.
    pub to: Option<String>,
    /// Most rows in the page (broker default 200, 1 to 1,000).
    pub limit: Option<u32>,
    /// Rows to skip.
    pub offset: Option<u64>,
}

/// Most rows a listing answers.
const MAX_LIST_LIMIT: u32 = 1000;

impl MessageQuery {
    /// Messages of every queue.
    ///
    /// ```
    /// assert_eq!(queen_sdk::MessageQuery::all(), queen_sdk::MessageQuery::default());
    /// ```
    pub fn all() -> Self {
        Self::default()
    }

    /// Messages of `queue`.
    ///
    /// ```
    /// let q = queen_sdk::MessageQuery::queue("orders");
    /// assert_eq!(q.queue.as_deref(), Some("orders"));
    /// ```
    pub fn queue(queue: impl Into<String>) -> Self {
        MessageQuery {
            queue: Some(queue.into()),
            ..Self::default()
        }
    }

    /// Only this partition.
    ///
    /// ```
    /// let q = queen_sdk::MessageQuery::queue("orders").partition("eu");
    /// assert_eq!(q.partition.as_deref(), Some("eu"));
    /// ```
    pub fn partition(mut self, partition: impl Into<String>) -> Self {
        self.partition = Some(partition.into());
        self
    }

    /// Only queues of this namespace.
    ///
    /// ```
    /// let q = queen_sdk::MessageQuery::all().namespace("billing");
    /// assert_eq!(q.namespace.as_deref(), Some("billing"));
    /// ```
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }

    /// Only queues of this task.
    ///
    /// ```
    /// let q = queen_sdk::MessageQuery::all().task("invoices");
    /// assert_eq!(q.task.as_deref(), Some("invoices"));
    /// ```
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Only messages standing so.
    ///
    /// ```
    /// use queen_sdk::{MessageQuery, MessageStatus};
    /// let q = MessageQuery::all().status(MessageStatus::Pending);
    /// assert_eq!(q.status, Some(MessageStatus::Pending));
    /// ```
    pub fn status(mut self, status: MessageStatus) -> Self {
        self.status = Some(status);
        self
    }

    /// Only messages stored at or after this ISO-8601 time.
    ///
    /// ```
    /// let q = queen_sdk::MessageQuery::all().from("2026-10-02T00:00:00Z");
    /// assert_eq!(q.from.as_deref(), Some("2026-10-02T00:00:00Z"));
    /// ```
    pub fn from(mut self, at: impl Into<String>) -> Self {
        self.from = Some(at.into());
        self
    }

    /// Only messages stored at or before this ISO-8601 time.
    ///
    /// ```
    /// let q = queen_sdk::MessageQuery::all().to("2026-10-03T00:00:00Z");
    /// assert_eq!(q.to.as_deref(), Some("2026-10-03T00:00:00Z"));
    /// ```
    pub fn to(mut self, at: impl Into<String>) -> Self {
        self.to = Some(at.into());
        self
    }

    /// Most rows in the page (1 to 1,000).
    ///
    /// ```
    /// assert_eq!(queen_sdk::MessageQuery::all().limit(20).limit, Some(20));
    /// ```
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }

    /// Rows to skip.
    ///
    /// ```
    /// assert_eq!(queen_sdk::MessageQuery::all().offset(40).offset, Some(40));
    /// ```
    pub fn offset(mut self, n: u64) -> Self {
        self.offset = Some(n);
        self
    }

    fn params(self) -> Result<Vec<(&'static str, String)>> {
        const OP: &str = "messages";
        let mut p = Vec::new();
        if let Some(q) = self.queue {
            validate::name(OP, &q)?;
            p.push(("queue", q));
        }
        if let Some(x) = self.partition {
            validate::name(OP, &x)?;
            p.push(("partition", x));
        }
        if let Some(ns) = self.namespace {
            p.push(("ns", ns));
        }
        if let Some(t) = self.task {
            p.push(("task", t));
        }
        if let Some(s) = self.status {
            p.push(("status", s.as_str().to_string()));
        }
        if let Some(f) = self.from {
            p.push(("from", f));
        }
        if let Some(t) = self.to {
            p.push(("to", t));
        }
        if let Some(l) = self.limit {
            if !(1..=MAX_LIST_LIMIT).contains(&l) {
                return Err(Error::invalid(
                    OP,
                    format!("limit is {l}; it must be 1 to {MAX_LIST_LIMIT}"),
                ));
            }
            p.push(("limit", l.to_string()));
        }
        if let Some(o) = self.offset {
            p.push(("offset", o.to_string()));
        }
        Ok(p)
    }
}

/// One row of [`Client::messages`]: a message without its payload.
///
/// Queen 2 keys its rows by a hash of the transaction id (`txn_hash`) and may leave the
/// id itself out; the reference broker sends both.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{MessageQuery, MessageStatus, PushItem};
/// client.push(vec![PushItem::new("orders", &1).transaction_id("order-1")]).await?;
/// let row = &client.messages(MessageQuery::queue("orders")).await?.messages[0];
/// assert_eq!((row.transaction_id.as_deref(), &row.status, row.offset), (Some("order-1"), &MessageStatus::Pending, Some(0)));
/// assert!(row.txn_hash.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ListedMessage {
    /// The message's id.
    #[serde(default)]
    pub id: String,
    /// Its dedup key, when the broker sends it.
    #[serde(default)]
    pub transaction_id: Option<String>,
    /// A hash of its dedup key, when the broker keys rows by it.
    #[serde(default)]
    pub txn_hash: Option<String>,
    /// Its partition's opaque id (also read from `segment.partitionId`).
    #[serde(default, deserialize_with = "de::opt_text")]
    pub partition_id: Option<String>,
    /// Its queue.
    #[serde(default)]
    pub queue: String,
    /// Its partition's name.
    #[serde(default)]
    pub partition: String,
    /// Its queue's namespace.
    #[serde(default)]
    pub namespace: Option<String>,
    /// Its queue's task.
    #[serde(default)]
    pub task: Option<String>,
    /// Where it stands, by its slowest group.
    pub status: MessageStatus,
    /// Its offset in the partition (also read from `segment.offset`).
    #[serde(default, deserialize_with = "de::opt_count")]
    pub offset: Option<u64>,
    /// Its trace id.
    #[serde(default)]
    pub trace_id: Option<String>,
    /// The producer's identity, when the broker has auth.
    #[serde(default)]
    pub producer_sub: Option<String>,
    /// When it was stored (ISO-8601).
    #[serde(default)]
    pub created_at: Option<String>,
    /// When its lease ends, while it is leased (ISO-8601).
    #[serde(default)]
    pub lease_expires_at: Option<String>,
}

/// Which kinds of consumer read the listed partitions, in a [`MessagePage`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{MessageQuery, PushItem};
/// client.push(vec![PushItem::new("orders", &1)]).await?;
/// client.pop::<u32>("orders").send().await?; // a competing consumer
/// let mode = client.messages(MessageQuery::queue("orders")).await?.mode.expect("a mode block");
/// assert_eq!((mode.kind.as_str(), mode.has_queue_mode, mode.bus_groups_count), ("queue", true, 0));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct ConsumerMode {
    /// `queue` (competing consumers), `bus` (named groups), `hybrid` (both) or `none`.
    #[serde(rename = "type", default)]
    pub kind: String,
    /// Whether competing consumers read them.
    #[serde(default, deserialize_with = "de::flag")]
    pub has_queue_mode: bool,
    /// How many named groups read them.
    #[serde(default, deserialize_with = "de::count")]
    pub bus_groups_count: u64,
}

/// One page of [`Client::messages`], newest first.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{MessageQuery, PushItem};
/// client.push((0..5).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// let page = client.messages(MessageQuery::queue("orders").limit(2).offset(1)).await?;
/// assert_eq!((page.messages.len(), page.limit, page.offset), (2, Some(2), Some(1)));
/// assert_eq!(page.messages[0].offset, Some(3)); // newest first, one skipped
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MessagePage {
    /// The rows.
    pub messages: Vec<ListedMessage>,
    /// The page size the broker applied.
    pub limit: Option<u64>,
    /// The rows it skipped.
    pub offset: Option<u64>,
    /// Which kinds of consumer read the listed partitions.
    pub mode: Option<ConsumerMode>,
}

/// What [`Client::retry_message`] and [`Client::delete_message`] did to a dead letter.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{AckStatus, PushItem};
/// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
/// let msg = client.pop::<String>("orders").send().await?.remove(0);
/// client.ack(&msg, AckStatus::Dlq).await?;
/// let done = client.delete_message(&msg.partition_id, &msg.transaction_id).await?;
/// assert_eq!((done.queue.as_deref(), done.dead_letters_removed), (Some("orders"), Some(1)));
/// assert_eq!(done.message_id, None); // nothing was pushed
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct DeadLetterHandled {
    /// The message's partition id, as addressed.
    #[serde(default, deserialize_with = "de::text")]
    pub partition_id: String,
    /// Its transaction id, as addressed.
    #[serde(default)]
    pub transaction_id: String,
    /// Its queue.
    #[serde(default)]
    pub queue: Option<String>,
    /// Its partition's name.
    #[serde(default)]
    pub partition: Option<String>,
    /// Dead-letter rows removed (one per group that dead-lettered it).
    #[serde(default, deserialize_with = "de::opt_count")]
    pub dead_letters_removed: Option<u64>,
    /// A replay's new message id.
    #[serde(default)]
    pub message_id: Option<String>,
    /// A replay's offset in the partition.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub offset: Option<u64>,
    /// What was done, for a person.
    #[serde(default)]
    pub message: Option<String>,
}

/// The path of a message, its ids checked and escaped.
fn message_path(op: &str, partition_id: &str, transaction_id: &str) -> Result<String> {
    if partition_id.is_empty() {
        return Err(Error::invalid(op, "a partitionId must not be empty"));
    }
    if partition_id.len() > validate::MAX_NAME_BYTES {
        return Err(Error::invalid(
            op,
            format!(
                "a partitionId is {} bytes; the limit is {}",
                partition_id.len(),
                validate::MAX_NAME_BYTES
            ),
        ));
    }
    if transaction_id.is_empty() {
        return Err(Error::invalid(op, "a transactionId must not be empty"));
    }
    validate::transaction_id(op, transaction_id)?;
    Ok(format!(
        "/api/v1/messages/{}/{}",
        validate::segment(partition_id),
        validate::segment(transaction_id)
    ))
}

/// A 2xx answer that reports a failure (`success: false`) as [`Error::Api`].
fn refused(b: &Value, what: &str) -> Option<Error> {
    (b.get("success") == Some(&Value::Bool(false))).then(|| Error::Api {
        status: 200,
        code: b.get("code").and_then(Value::as_str).map(str::to_string),
        message: b
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or(what)
            .to_string(),
        retry_after: None,
    })
}

fn from_tree<T: DeserializeOwned>(v: Value, what: &str) -> Result<T> {
    let body = v.to_string();
    serde_json::from_value(v).map_err(|e| Error::Decode {
        message: format!("{what}: {e}"),
        body,
    })
}

impl Client {
    /// One message, its payload decoded as `T`, with where it stands for each group
    /// (`GET /api/v1/messages/{partitionId}/{transactionId}`). A message the broker
    /// does not have (or a partition id it did not mint) is an [`Error::Api`] with
    /// status 404 ([`Error::is_not_found`]); empty ids are refused before sending.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, MessageStatus, PushItem};
    /// client.push(vec![PushItem::new("orders", &"o-7")]).await?;
    /// let msg = client.pop::<String>("orders").send().await?.remove(0);
    /// client.ack(&msg, AckStatus::Completed).await?;
    /// let d = client.message::<String>(&msg.partition_id, &msg.transaction_id).await?;
    /// assert_eq!((d.status, d.data.as_str()), (MessageStatus::Completed, "o-7"));
    /// let missing = client.message::<String>(&msg.partition_id, "no-such-txn").await.unwrap_err();
    /// assert!(missing.is_not_found());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn message<T: DeserializeOwned>(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> Result<MessageDetail<T>> {
        let path = message_path("message", partition_id, transaction_id)?;
        let answer = self
            .call::<()>(Method::GET, &path, None, None, Opts::SAFE)
            .await?;
        let mut v = answer.value()?;
        // The payload is `data` (as the SDKs read it); a console-shaped answer may
        // carry only `payload`.
        if let Some(obj) = v.as_object_mut()
            && !obj.contains_key("data")
            && let Some(p) = obj.get("payload").cloned()
        {
            obj.insert("data".into(), p);
        }
        from_tree(v, "message detail")
    }

    /// Lists messages without their payloads, newest first (`GET /api/v1/messages`).
    /// A `limit` outside 1 to 1,000 or an empty queue or partition name is refused
    /// before sending.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, MessageQuery, MessageStatus, PushItem};
    /// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
    /// let first = client.pop::<u32>("orders").batch(1).send().await?.remove(0);
    /// client.ack(&first, AckStatus::Dlq).await?;
    /// let dead = client.messages(MessageQuery::queue("orders").status(MessageStatus::DeadLetter)).await?;
    /// assert_eq!(dead.messages.len(), 1);
    /// assert_eq!(dead.messages[0].transaction_id.as_deref(), Some(first.transaction_id.as_str()));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn messages(&self, query: MessageQuery) -> Result<MessagePage> {
        let params = query.params()?;
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Segment {
            #[serde(default, deserialize_with = "de::opt_text")]
            partition_id: Option<String>,
            #[serde(default, deserialize_with = "de::opt_count")]
            offset: Option<u64>,
        }
        #[derive(Deserialize)]
        struct Row {
            #[serde(flatten)]
            message: ListedMessage,
            #[serde(default)]
            segment: Option<Segment>,
        }
        #[derive(Deserialize)]
        struct Page {
            #[serde(default)]
            messages: Vec<Row>,
            #[serde(default, deserialize_with = "de::opt_count")]
            limit: Option<u64>,
            #[serde(default, deserialize_with = "de::opt_count")]
            offset: Option<u64>,
            #[serde(default)]
            mode: Option<ConsumerMode>,
        }
        let answer = self
            .call(
                Method::GET,
                "/api/v1/messages",
                Some(&params),
                None,
                Opts::SAFE,
            )
            .await?;
        let page = answer
            .decode::<Option<Page>>("message listing")?
            .unwrap_or(Page {
                messages: Vec::new(),
                limit: None,
                offset: None,
                mode: None,
            });
        let messages = page
            .messages
            .into_iter()
            .map(
                |Row {
                     mut message,
                     segment,
                 }| {
                    if let Some(s) = segment {
                        message.partition_id = message.partition_id.or(s.partition_id);
                        message.offset = message.offset.or(s.offset);
                    }
                    message
                },
            )
            .collect();
        Ok(MessagePage {
            messages,
            limit: page.limit,
            offset: page.offset,
            mode: page.mode,
        })
    }

    /// Replays a dead-lettered message by hand
    /// (`POST /api/v1/messages/{partitionId}/{transactionId}/retry`): it is pushed
    /// again to its partition (a new message id, the same transaction id and payload)
    /// and its dead-letter rows are dropped. Only a dead letter can be replayed: a live
    /// message, or one replayed already, is a 404 ([`Error::is_not_found`]).
    ///
    /// A replay is a write whose resend would answer that 404 even though the first
    /// attempt applied, so it is not resent after a failure that may have applied (a
    /// 5xx or a lost connection): that is [`Error::OutcomeUnknown`]; read
    /// [`Client::dlq`] or [`Client::message`] to learn what happened.
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
    /// let dead = client.dlq::<String>(DlqQuery::queue("orders")).await?.messages.remove(0);
    /// let replay = client.retry_message(&dead.partition_id, &dead.transaction_id).await?;
    /// assert_eq!(replay.offset, Some(1)); // appended after the original
    /// assert_eq!(client.dlq::<String>(DlqQuery::queue("orders")).await?.total, 0);
    /// let again = client.pop::<String>("orders").send().await?;
    /// assert_eq!(again[0].data, "o-7");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn retry_message(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> Result<DeadLetterHandled> {
        let path = format!(
            "{}/retry",
            message_path("retry_message", partition_id, transaction_id)?
        );
        let opts = Opts {
            replay: Replay::Unsafe,
            ..Opts::SAFE
        };
        let answer = self
            .call::<()>(Method::POST, &path, None, None, opts)
            .await?;
        handled(
            answer.value()?,
            partition_id,
            transaction_id,
            "retry failed",
        )
    }

    /// Deletes a message's dead-letter rows by hand
    /// (`DELETE /api/v1/messages/{partitionId}/{transactionId}`). The log itself is not
    /// edited. Only a dead letter can be deleted: a live message, or one deleted
    /// already, is a 404 ([`Error::is_not_found`]). Deleting is safe to resend, so it
    /// is retried after a 5xx; a 404 after such a retry may mean the first attempt
    /// deleted it.
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
    /// client.delete_message(&msg.partition_id, &msg.transaction_id).await?;
    /// assert_eq!(client.dlq::<String>(DlqQuery::queue("orders")).await?.total, 0);
    /// let twice = client.delete_message(&msg.partition_id, &msg.transaction_id).await;
    /// assert!(twice.unwrap_err().is_not_found());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete_message(
        &self,
        partition_id: &str,
        transaction_id: &str,
    ) -> Result<DeadLetterHandled> {
        let path = message_path("delete_message", partition_id, transaction_id)?;
        let answer = self
            .call::<()>(Method::DELETE, &path, None, None, Opts::SAFE)
            .await?;
        handled(
            answer.value()?,
            partition_id,
            transaction_id,
            "delete failed",
        )
    }
}

fn handled(
    v: Value,
    partition_id: &str,
    transaction_id: &str,
    what: &str,
) -> Result<DeadLetterHandled> {
    if let Some(e) = refused(&v, what) {
        return Err(e);
    }
    let mut out: DeadLetterHandled = if v.is_null() {
        from_tree(serde_json::json!({}), what)?
    } else {
        from_tree(v, "dead letter answer")?
    };
    if out.partition_id.is_empty() {
        out.partition_id = partition_id.to_string();
    }
    if out.transaction_id.is_empty() {
        out.transaction_id = transaction_id.to_string();
    }
    Ok(out)
}
