//! Administration: queue options, queue and group deletion, dead letters, seeking a
//! consumer group, and the broker's health.
//!
//! ```no_run
//! # async fn demo(client: queen_sdk::Client) -> queen_sdk::Result<()> {
//! use std::time::Duration;
//! use queen_sdk::{DlqQuery, QueueOptions, SeekTo};
//!
//! let stored = client
//!     .configure("orders", QueueOptions::new().lease_time(Duration::from_secs(30)).retry_limit(5))
//!     .await?;
//! assert_eq!(stored.options.lease_time, Some(30));
//!
//! let page = client.dlq::<serde_json::Value>(DlqQuery::queue("orders").limit(20)).await?;
//! for dead in &page.messages {
//!     println!("{} failed: {:?}", dead.id, dead.error_message);
//! }
//! client.seek("billing", "orders", SeekTo::End).await?;
//! # Ok(()) }
//! ```

use std::time::Duration;

use reqwest::Method;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::client::{Client, Opts};
use crate::error::{Error, Result};
use crate::message::decode;
use crate::validate;

/// A queue's options (`wire.md` section 2). Every field is optional: an absent one keeps
/// the queue's current value on [`Client::configure`] (unless [`QueueOptions::replace`]
/// is set), and the broker answers every option with its stored value.
///
/// Times are whole seconds on the wire; the setters take [`Duration`]s and round up.
///
/// ```
/// use std::time::Duration;
/// use queen_sdk::QueueOptions;
/// let opts = QueueOptions::new()
///     .lease_time(Duration::from_secs(60))
///     .retry_limit(5)
///     .dead_letter_queue(true)
///     .dedup_window(Duration::from_secs(600));
/// assert_eq!(opts.lease_time, Some(60));
/// // Or as a struct literal:
/// let same = QueueOptions { lease_time: Some(60), retry_limit: Some(5), ..Default::default() };
/// assert_eq!(same.retry_limit, opts.retry_limit);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct QueueOptions {
    /// Seconds a popped batch stays leased (broker default 300).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_time: Option<u64>,
    /// `failed` acks a message may take and still be redelivered (default 3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_limit: Option<u32>,
    /// `false`: an exhausted or `dlq` message is dropped instead (default `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dead_letter_queue: Option<bool>,
    /// Seconds a new message stays invisible (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delayed_processing: Option<u64>,
    /// Seconds a `(partition, transactionId)` is remembered for deduplication; 0 turns
    /// it off (default 3600).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dedup_window_seconds: Option<u64>,
    /// Seconds messages are kept; 0 keeps them forever (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retention_seconds: Option<u64>,
    /// The queue's namespace (used by `GET /api/v1/pop?namespace=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The queue's task (used by `GET /api/v1/pop?task=`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    /// Other options of the protocol (`priority`, `retryDelay`, `ttl`, ...), by wire
    /// name: sent as given and answered with their stored values.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
    /// Reset every option not sent to its default (`mode: "replace"`) instead of
    /// merging. Never on the wire as an option.
    #[serde(skip)]
    pub replace: bool,
}

fn secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

impl QueueOptions {
    /// No options: a configure with it only creates the queue.
    pub fn new() -> Self {
        Self::default()
    }

    /// How long a popped batch stays leased.
    pub fn lease_time(mut self, d: Duration) -> Self {
        self.lease_time = Some(secs(d));
        self
    }

    /// `failed` acks a message may take and still be redelivered.
    pub fn retry_limit(mut self, n: u32) -> Self {
        self.retry_limit = Some(n);
        self
    }

    /// Dead-letter (`true`) or drop (`false`) exhausted and `dlq` messages.
    pub fn dead_letter_queue(mut self, on: bool) -> Self {
        self.dead_letter_queue = Some(on);
        self
    }

    /// How long a new message stays invisible.
    pub fn delayed_processing(mut self, d: Duration) -> Self {
        self.delayed_processing = Some(secs(d));
        self
    }

    /// How long a pushed `transactionId` is remembered; zero turns deduplication off.
    pub fn dedup_window(mut self, d: Duration) -> Self {
        self.dedup_window_seconds = Some(secs(d));
        self
    }

    /// How long messages are kept; zero keeps them forever.
    pub fn retention(mut self, d: Duration) -> Self {
        self.retention_seconds = Some(secs(d));
        self
    }

    /// The queue's namespace.
    pub fn namespace(mut self, ns: impl Into<String>) -> Self {
        self.namespace = Some(ns.into());
        self
    }

    /// The queue's task.
    pub fn task(mut self, task: impl Into<String>) -> Self {
        self.task = Some(task.into());
        self
    }

    /// Any other option, by its wire name (`"priority"`, `"retryDelay"`, ...).
    pub fn option(mut self, name: impl Into<String>, value: impl Into<Value>) -> Self {
        self.extra.insert(name.into(), value.into());
        self
    }

    /// Replace the whole configuration: options not sent go back to their defaults.
    pub fn replace(mut self) -> Self {
        self.replace = true;
        self
    }
}

/// What [`Client::configure`] answers: the queue's stored configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueConfig {
    /// The queue.
    pub queue: String,
    /// Every stored option, `namespace` and `task` included.
    pub options: QueueOptions,
}

/// The broker's health (`GET /health`).
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
    pub fn all() -> Self {
        Self::default()
    }

    /// Dead letters of `queue`.
    pub fn queue(queue: impl Into<String>) -> Self {
        DlqQuery {
            queue: Some(queue.into()),
            ..Self::default()
        }
    }

    /// Only those of `group`.
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = Some(group.into());
        self
    }

    /// Most rows in the page.
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = Some(n);
        self
    }

    /// Rows to skip.
    pub fn offset(mut self, n: u64) -> Self {
        self.offset = Some(n);
        self
    }
}

/// A dead-lettered message with a typed payload.
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
#[derive(Debug, Clone, PartialEq)]
pub struct DlqPage<T = Value> {
    /// The page, oldest first.
    pub messages: Vec<DeadLetter<T>>,
    /// How many match the query in all.
    pub total: u64,
}

/// Where [`Client::seek`] moves a consumer group's cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeekTo {
    /// Past every stored message: the group reads only what arrives next.
    End,
    /// To the first message stored at or after this ISO-8601 time
    /// (`2026-10-02T09:14:03Z`).
    Time(String),
}

impl Client {
    /// Creates or updates `queue` and answers its stored options. Options left `None`
    /// keep their current values (see [`QueueOptions::replace`]).
    ///
    /// ```no_run
    /// # async fn demo(client: queen_sdk::Client) -> queen_sdk::Result<()> {
    /// use std::time::Duration;
    /// use queen_sdk::QueueOptions;
    /// let cfg = client
    ///     .configure("orders", QueueOptions::new().lease_time(Duration::from_secs(30)))
    ///     .await?;
    /// assert_eq!(cfg.options.lease_time, Some(30));
    /// assert_eq!(cfg.options.retry_limit, Some(3)); // the broker's default, echoed
    /// # Ok(()) }
    /// ```
    pub async fn configure(&self, queue: &str, options: QueueOptions) -> Result<QueueConfig> {
        validate::name("configure", queue)?;
        let mut body = json!({ "queue": queue });
        if let Some(ns) = &options.namespace {
            body["namespace"] = ns.clone().into();
        }
        if let Some(t) = &options.task {
            body["task"] = t.clone().into();
        }
        let mut wire = serde_json::to_value(&options)?;
        if let Some(m) = wire.as_object_mut() {
            m.remove("namespace");
            m.remove("task");
        }
        body["options"] = wire;
        if options.replace {
            body["mode"] = "replace".into();
        }
        let answer = self
            .client_call(Method::POST, "/api/v1/configure", &body)
            .await?;
        let b = answer.body;
        if let Some(e) = b.get("error").and_then(Value::as_str) {
            return Err(Error::Api {
                status: 200,
                code: b.get("code").and_then(Value::as_str).map(str::to_string),
                message: e.to_string(),
                retry_after: None,
            });
        }
        let mut stored: QueueOptions =
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
    pub async fn delete_queue(&self, queue: &str) -> Result<bool> {
        validate::name("delete_queue", queue)?;
        let path = format!("/api/v1/resources/queues/{}", validate::segment(queue));
        let answer = self
            .call::<()>(Method::DELETE, &path, None, None, Opts::SAFE)
            .await?;
        Ok(answer
            .body
            .get("deleted")
            .and_then(Value::as_bool)
            .unwrap_or(false))
    }

    /// Lists dead letters, their payloads decoded as `T`.
    ///
    /// ```no_run
    /// # async fn demo(client: queen_sdk::Client) -> queen_sdk::Result<()> {
    /// use queen_sdk::DlqQuery;
    /// let page = client.dlq::<serde_json::Value>(DlqQuery::queue("orders")).await?;
    /// println!("{} dead letters", page.total);
    /// # Ok(()) }
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
    /// ```no_run
    /// # async fn demo(client: queen_sdk::Client) -> queen_sdk::Result<()> {
    /// use queen_sdk::SeekTo;
    /// client.seek("billing", "orders", SeekTo::Time("2026-10-02T00:00:00Z".into())).await?;
    /// # Ok(()) }
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
            SeekTo::Time(t) => json!({ "timestamp": t }),
        };
        let answer = self.client_call(Method::POST, path, &body).await?;
        let b = answer.body;
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
    pub async fn delete_group(&self, group: &str) -> Result<u64> {
        validate::name("delete_group", group)?;
        let path = format!("/api/v1/consumer-groups/{}", validate::segment(group));
        let answer = self
            .call::<()>(Method::DELETE, &path, None, None, Opts::SAFE)
            .await?;
        Ok(answer
            .body
            .get("partitionsDeleted")
            .and_then(Value::as_u64)
            .unwrap_or(0))
    }

    /// Asks the broker whether it is healthy (`GET /health`, no auth needed).
    ///
    /// ```no_run
    /// # async fn demo(client: queen_sdk::Client) -> queen_sdk::Result<()> {
    /// assert!(client.health().await?.is_healthy());
    /// # Ok(()) }
    /// ```
    pub async fn health(&self) -> Result<Health> {
        let answer = self
            .call::<()>(Method::GET, "/health", None, None, Opts::SAFE)
            .await?;
        decode(answer, "health answer")
    }
}
