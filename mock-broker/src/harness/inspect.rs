//! Reading stored state directly, for assertions in tests: a queue's messages, a group's
//! cursor and lease, a KV row, the pending timers. Reads see every write answered so far.

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::clock::Micros;
use crate::engine::consumers;
use crate::engine::kv::{KvRow, row_key};
use crate::engine::queues::{DEFAULT_PARTITION, partition_key};
use crate::engine::timers::TimerRecord;
use crate::engine::{DEFAULT_TENANT, Engine};
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{ConsumerRecord, MessageRecord, PartitionRecord, decode};
use crate::store::{Reader, StoreError, T};

/// Why an [`Inspector`] read failed: the storage, or a stored value that is not the type
/// asked for.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # reqwest::Client::new().post(format!("{}/api/v1/kv", broker.url()))
/// #     .json(&serde_json::json!({"operations": [{"op": "put", "ns": "carts", "key": "c-1", "value": {"items": 2}, "ttlSeconds": 3600}]}))
/// #     .send().await?;
/// use queen_mock_broker::harness::InspectError;
/// let wrong = broker.inspect().kv::<String>("carts", "c-1"); // {"items":2} is no string
/// match wrong {
///     Err(InspectError::Decode { ns, key, target, .. }) => {
///         assert_eq!((ns.as_str(), key.as_str(), target), ("carts", "c-1", "alloc::string::String"));
///     }
///     other => panic!("expected a decode error, got {other:?}"),
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InspectError {
    /// The database could not be read.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The KV value at `ns`/`key` does not decode as the type asked for.
    #[error("kv {ns}/{key} does not decode as {target}: {source}")]
    Decode {
        /// The row's namespace.
        ns: String,
        /// The row's key.
        key: String,
        /// The type asked for, as [`std::any::type_name`] spells it.
        target: &'static str,
        /// What serde found wrong.
        source: serde_json::Error,
    },
}

/// A stored message, as [`Inspector::messages`] reads it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let http = reqwest::Client::new();
/// # http.post(format!("{}/api/v1/push", broker.url()))
/// #     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": {"id": "o-7"}, "transactionId": "order-7"}]}))
/// #     .send().await?;
/// use queen_mock_broker::DEFAULT_PARTITION;
/// use queen_mock_broker::harness::InspectedMessage;
/// let msgs: Vec<InspectedMessage> = broker.inspect().messages("orders", DEFAULT_PARTITION)?;
/// assert_eq!((msgs[0].offset, msgs[0].transaction_id.as_str()), (0, "order-7"));
/// assert_eq!(msgs[0].data, serde_json::json!({"id": "o-7"}));
/// assert!(msgs[0].created_at > 0);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct InspectedMessage {
    /// Its offset.
    pub offset: u64,
    /// Its id.
    pub id: String,
    /// Its `transactionId`.
    pub transaction_id: String,
    /// Its payload.
    pub data: Value,
    /// Its trace id.
    pub trace_id: Option<String>,
    /// When it was stored.
    pub created_at: Micros,
}

/// A group's position and lease on one partition, as [`Inspector::cursor`] reads it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let http = reqwest::Client::new();
/// # http.post(format!("{}/api/v1/push", broker.url()))
/// #     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": {"id": "o-7"}, "transactionId": "order-7"}]}))
/// #     .send().await?;
/// # let popped: serde_json::Value = http
/// #     .get(format!("{}/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all", broker.url()))
/// #     .send().await?.json().await?;
/// use queen_mock_broker::DEFAULT_PARTITION;
/// let cursor = broker.inspect().cursor("orders", DEFAULT_PARTITION, "billing")?.expect("billing read it");
/// assert_eq!(cursor.next_offset, 0); // popped, not yet acked
/// assert_eq!(cursor.lease_id.as_deref(), popped["leaseId"].as_str());
/// assert!(cursor.lease_expires_at.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedCursor {
    /// The first offset not yet done for the group.
    pub next_offset: u64,
    /// The lease recorded there, if any. It may have lapsed without the broker having
    /// noticed yet: compare `lease_expires_at` with the broker's clock.
    pub lease_id: Option<String>,
    /// When that lease lapses.
    pub lease_expires_at: Option<Micros>,
}

/// A pending timer, as [`Inspector::timers`] reads it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let http = reqwest::Client::new();
/// # http.post(format!("{}/api/v1/timers", broker.url()))
/// #     .json(&serde_json::json!({"operations": [{"op": "schedule", "queue": "reminders", "timerKey": "o-7",
/// #         "delayMs": 60_000, "payload": "Im8tNyI=", "txn": "remind-o-7"}]}))
/// #     .send().await?;
/// let timers = broker.inspect().timers("reminders")?;
/// assert_eq!((timers[0].key.as_str(), timers[0].txn.as_str()), ("o-7", "remind-o-7"));
/// assert!(timers[0].deliver_at > broker.clock().now_micros());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InspectedTimer {
    /// Its key.
    pub key: String,
    /// The pushed message's `transactionId`.
    pub txn: String,
    /// The pushed message's id.
    pub message_id: String,
    /// When it fires.
    pub deliver_at: Micros,
}

/// Reads the broker's state without its public API. It reads the `default` tenant: the
/// tenant of every call when authentication is off
/// ([`MockBrokerBuilder::auth`](crate::MockBrokerBuilder::auth)), and of tokens given no
/// other.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
/// let broker = MockBroker::start_in_memory().await?;
/// reqwest::Client::new()
///     .post(format!("{}/api/v1/push", broker.url()))
///     .json(&serde_json::json!({"items": [{"queue": "q", "payload": {"n": 1}}]}))
///     .send()
///     .await?;
/// let msgs = broker.inspect().messages("q", DEFAULT_PARTITION)?;
/// assert_eq!(msgs[0].data, serde_json::json!({"n": 1}));
/// broker.shutdown().await;
/// # Ok(()) }
/// ```
pub struct Inspector<'a> {
    engine: &'a Engine,
}

impl<'a> Inspector<'a> {
    pub(crate) fn new(engine: &'a Engine) -> Self {
        Inspector { engine }
    }

    fn reader(&self) -> Result<Reader, StoreError> {
        Reader::begin(&*self.engine.db()?)
    }

    fn partition(
        &self,
        r: &Reader,
        queue: &str,
        partition: &str,
    ) -> Result<Option<PartitionRecord>, StoreError> {
        // `""` is the partition a push without one goes to, as on the wire.
        let partition = if partition.is_empty() {
            DEFAULT_PARTITION
        } else {
            partition
        };
        r.get(
            T::Partitions,
            &partition_key(DEFAULT_TENANT, queue, partition),
        )?
        .map(|b| decode(&b))
        .transpose()
    }

    /// The queues, by name (a queue exists from its first push or configure).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// # http.post(format!("{}/api/v1/push", broker.url()))
    /// #     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": {"id": "o-7"}, "transactionId": "order-7"}]}))
    /// #     .send().await?;
    /// assert_eq!(broker.inspect().queues()?, ["orders"]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn queues(&self) -> Result<Vec<String>, StoreError> {
        let r = self.reader()?;
        let prefix = Key::tenant(DEFAULT_TENANT).into_bytes();
        let mut out = Vec::new();
        r.scan(T::Queues, &prefix, &prefix, |k, _| {
            let mut kr = KeyReader::new(k);
            let _ = kr.str();
            out.extend(kr.str());
            Ok(true)
        })?;
        Ok(out)
    }

    /// Every stored message of a partition (`""` reads
    /// [`DEFAULT_PARTITION`](crate::DEFAULT_PARTITION)), in offset order,
    /// acked or not; empty for an unknown queue or partition.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// # http.post(format!("{}/api/v1/push", broker.url()))
    /// #     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": {"id": "o-7"}, "transactionId": "order-7"}]}))
    /// #     .send().await?;
    /// let msgs = broker.inspect().messages("orders", "")?;
    /// assert_eq!(msgs.len(), 1);
    /// assert!(broker.inspect().messages("orders", "customer-1")?.is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn messages(
        &self,
        queue: &str,
        partition: &str,
    ) -> Result<Vec<InspectedMessage>, StoreError> {
        let r = self.reader()?;
        let Some(p) = self.partition(&r, queue, partition)? else {
            return Ok(Vec::new());
        };
        let prefix = Key::tenant(DEFAULT_TENANT).u64(p.id).into_bytes();
        let mut out = Vec::new();
        r.scan(T::Messages, &prefix, &prefix, |k, v| {
            let m: MessageRecord = decode(v)?;
            out.push(InspectedMessage {
                offset: u64::from_be_bytes(k[k.len() - 8..].try_into().expect("an 8-byte offset")),
                id: m.id,
                transaction_id: m.txn,
                data: serde_json::from_str(m.data.get()).unwrap_or(Value::Null),
                trace_id: m.trace,
                created_at: m.created_at,
            });
            Ok(true)
        })?;
        Ok(out)
    }

    /// A group's cursor and lease on a partition (`""` reads
    /// [`DEFAULT_PARTITION`](crate::DEFAULT_PARTITION)); `None` before the group read it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// # http.post(format!("{}/api/v1/push", broker.url()))
    /// #     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": {"id": "o-7"}, "transactionId": "order-7"}]}))
    /// #     .send().await?;
    /// use queen_mock_broker::DEFAULT_PARTITION;
    /// assert!(broker.inspect().cursor("orders", DEFAULT_PARTITION, "billing")?.is_none());
    /// # let _: serde_json::Value = http
    /// #     .get(format!("{}/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all", broker.url()))
    /// #     .send().await?.json().await?;
    /// assert!(broker.inspect().cursor("orders", "", "billing")?.is_some()); // "" reads DEFAULT_PARTITION
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cursor(
        &self,
        queue: &str,
        partition: &str,
        group: &str,
    ) -> Result<Option<InspectedCursor>, StoreError> {
        let r = self.reader()?;
        let Some(p) = self.partition(&r, queue, partition)? else {
            return Ok(None);
        };
        let Some(bytes) = r.get(T::Consumers, &consumers::key(DEFAULT_TENANT, p.id, group))? else {
            return Ok(None);
        };
        let c: ConsumerRecord = decode(&bytes)?;
        Ok(Some(InspectedCursor {
            next_offset: c.cursor,
            lease_id: c.lease.as_ref().map(|l| l.id.clone()),
            lease_expires_at: c.lease.as_ref().map(|l| l.expires_at),
        }))
    }

    /// The value of a KV row, decoded as `T` (`serde_json::Value` for any JSON); `None`
    /// when the key is absent. As stored: a row past its expiry that the broker has not
    /// yet removed is still read (see [`Inspector::kv_row`] for its expiry and version).
    /// A value that is not a `T` is an [`InspectError::Decode`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// # http.post(format!("{}/api/v1/kv", broker.url()))
    /// #     .json(&serde_json::json!({"operations": [
    /// #         {"op": "put", "ns": "carts", "key": "c-1", "value": {"items": 2}, "ttlSeconds": 3600},
    /// #         {"op": "incr", "ns": "stats", "key": "paid", "by": 1, "ttlSeconds": 3600}]}))
    /// #     .send().await?;
    /// #[derive(serde::Deserialize, Debug, PartialEq)]
    /// struct Cart { items: u32 }
    ///
    /// let inspect = broker.inspect();
    /// assert_eq!(inspect.kv::<Cart>("carts", "c-1")?, Some(Cart { items: 2 }));
    /// assert_eq!(inspect.kv::<u64>("stats", "paid")?, Some(1));
    /// assert_eq!(inspect.kv::<serde_json::Value>("carts", "c-1")?, Some(serde_json::json!({"items": 2})));
    /// assert_eq!(inspect.kv::<Cart>("carts", "c-2")?, None);
    /// assert!(inspect.kv::<u64>("carts", "c-1").is_err()); // a cart is no number
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn kv<T: DeserializeOwned>(&self, ns: &str, key: &str) -> Result<Option<T>, InspectError> {
        let Some(row) = self.kv_row(ns, key)? else {
            return Ok(None);
        };
        serde_json::from_str(&row.value)
            .map(Some)
            .map_err(|source| InspectError::Decode {
                ns: ns.to_string(),
                key: key.to_string(),
                target: std::any::type_name::<T>(),
                source,
            })
    }

    /// A KV row as stored: its value as compact JSON text, its version, when it was
    /// written and when it lapses. It may have expired: compare `expires_at` with the
    /// broker's clock.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// # http.post(format!("{}/api/v1/kv", broker.url()))
    /// #     .json(&serde_json::json!({"operations": [{"op": "put", "ns": "carts", "key": "c-1", "value": {"items": 2}, "ttlSeconds": 3600}]}))
    /// #     .send().await?;
    /// use queen_mock_broker::Clock;
    /// let row = broker.inspect().kv_row("carts", "c-1")?.expect("written");
    /// assert_eq!(row.value, r#"{"items":2}"#);
    /// assert_eq!(row.expires_at.unwrap() - row.updated_at, 3_600_000_000); // 1 h, in µs
    /// assert!(row.expires_at.unwrap() > broker.clock().now_micros()); // not yet lapsed
    /// assert!(broker.inspect().kv_row("carts", "c-2")?.is_none());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn kv_row(&self, ns: &str, key: &str) -> Result<Option<KvRow>, StoreError> {
        let r = self.reader()?;
        r.get(T::Kv, &row_key(DEFAULT_TENANT, ns, key))?
            .map(|b| decode(&b))
            .transpose()
    }

    /// The pending timers of a queue, by key.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// # http.post(format!("{}/api/v1/timers", broker.url()))
    /// #     .json(&serde_json::json!({"operations": [{"op": "schedule", "queue": "reminders", "timerKey": "o-7",
    /// #         "delayMs": 60_000, "payload": "Im8tNyI=", "txn": "remind-o-7"}]}))
    /// #     .send().await?;
    /// let keys: Vec<String> = broker.inspect().timers("reminders")?.into_iter().map(|t| t.key).collect();
    /// assert_eq!(keys, ["o-7"]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn timers(&self, queue: &str) -> Result<Vec<InspectedTimer>, StoreError> {
        let r = self.reader()?;
        let prefix = Key::tenant(DEFAULT_TENANT).str(queue).into_bytes();
        let mut out = Vec::new();
        r.scan(T::Timers, &prefix, &prefix, |k, v| {
            let mut kr = KeyReader::new(k);
            let (_, _, key) = (kr.str(), kr.str(), kr.str());
            let t: TimerRecord = decode(v)?;
            out.push(InspectedTimer {
                key: key.unwrap_or_default(),
                txn: t.txn,
                message_id: t.message_id,
                deliver_at: t.deliver_at,
            });
            Ok(true)
        })?;
        Ok(out)
    }
}
