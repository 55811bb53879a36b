//! Standalone KV (`POST /api/v1/kv`): reads and writes outside a transaction.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::client::{Client, Replay};
use crate::error::{Error, Result};
use crate::json::{Operations, render};
use crate::txn::{Gate, GateKind, KvReason, KvResult, Ttl};

mod ops;

pub(crate) use ops::KvWire;
pub use ops::{Check, Delete, Get, GetMany, Incr, Kv, KvOp, Put, PutIfAbsent};

/// Most operations in one standalone KV call.
pub(crate) const MAX_STANDALONE_OPS: usize = 256;
/// Most keys named in one standalone KV call.
pub(crate) const MAX_STANDALONE_KEYS: usize = 1024;

/// The standalone KV API. Get it with [`Client::kv`]; it is as cheap to clone as the
/// client.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::Ttl;
/// use serde_json::json;
///
/// let kv = client.kv();
/// kv.put("carts", "c-1", &json!({"items": 2}), Ttl::hours(1)).await?;
/// if let Some(row) = kv.get::<serde_json::Value>("carts", "c-1").await? {
///     println!("{} at version {}", row.value, row.version);
/// }
/// let first = kv.put_if_absent("claims", "job-9", &"worker-a", Ttl::minutes(5)).await?;
/// if !first.applied {
///     println!("already claimed by {:?}", first.value);
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// Writes that are not gated are not safe to send twice (an `incr` would count twice, a
/// `putIfAbsent` would answer that it lost to itself), so after a 5xx or a lost
/// connection they end in [`crate::Error::OutcomeUnknown`] instead of being retried.
/// Reads, and batches gated by a `required` write that a replay would lose, are retried.
#[derive(Debug, Clone)]
pub struct KvStore {
    client: Client,
}

/// A row read by [`KvStore::get`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{KvRow, Ttl};
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Cart { items: u32 }
/// client.kv().put("carts", "c-1", &Cart { items: 2 }, Ttl::hours(1)).await?;
/// let row: KvRow<Cart> = client.kv().get("carts", "c-1").await?.expect("just written");
/// assert_eq!((row.key.as_str(), row.value.items), ("c-1", 2));
/// assert!(row.version > 0 && row.expires_at.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KvRow<T = Value> {
    /// The key.
    pub key: String,
    /// The value.
    pub value: T,
    /// The row's version: a fencing token for this key, new on every write.
    pub version: u64,
    /// When it lapses (ISO-8601); `None` for a row that lives forever.
    pub expires_at: Option<String>,
    /// When it was last written (ISO-8601).
    pub updated_at: Option<String>,
}

/// What a standalone write did.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::Ttl;
/// let w = client.kv().put("carts", "c-1", &2, Ttl::hours(1)).await?;
/// assert!(w.applied && w.reason.is_none());
/// assert_eq!(w.value, Some(serde_json::json!(2)));
/// assert!(w.version.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct KvWrite {
    /// Whether it applied.
    pub applied: bool,
    /// Why it did not.
    pub reason: Option<KvReason>,
    /// The value written, or the value in the way (a `putIfAbsent` loser gets the
    /// winner's), or the counter's value after an `incr`.
    pub value: Option<Value>,
    /// The row's version after the write (or the winner's, for a loser).
    pub version: Option<u64>,
}

impl KvWrite {
    fn parse(r: &Value) -> KvWrite {
        KvWrite {
            applied: r.get("applied").and_then(Value::as_bool).unwrap_or(false),
            reason: r.get("reason").and_then(Value::as_str).map(KvReason::parse),
            value: r.get("value").filter(|v| !v.is_null()).cloned(),
            version: r.get("version").and_then(Value::as_u64),
        }
    }

    /// The value decoded as `T`, if there is one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let n = client.kv().incr("stats", "orders", 3, Ttl::Forever).await?;
    /// assert_eq!(n.value_as::<i64>()?, Some(3));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn value_as<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        self.value
            .clone()
            .map(serde_json::from_value)
            .transpose()
            .map_err(Error::from)
    }
}

/// What [`KvStore::batch`] answers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Kv, KvBatch, KvReason, Ttl};
/// let kv = client.kv();
/// let mark = || kv.batch(vec![Kv.put_if_absent("seen", "evt-1", &true, Ttl::days(1)).required()]);
/// assert!(matches!(mark().await?, KvBatch::Applied { .. }));
/// match mark().await? {
///     KvBatch::Gated { gate, .. } => assert_eq!((gate.index, gate.reason), (0, KvReason::Exists)),
///     KvBatch::Applied { .. } => panic!("evt-1 was seen"),
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub enum KvBatch {
    /// The call ran; one result per operation, in order (a write that lost a
    /// precondition which was not `required` says `applied: Some(false)`).
    Applied {
        /// One result per operation; `index` and `op_index` are its place in the call.
        results: Vec<KvResult>,
        /// An earlier attempt failed in a way that may have applied it (a 5xx or a lost
        /// connection, not a 429), and this answer came to a resend.
        retried: bool,
    },
    /// A `required` operation did not apply: nothing of the call was written.
    Gated {
        /// The operation that refused the call (its `index` is its place in the call;
        /// its kind is [`GateKind::Condition`](crate::GateKind::Condition)).
        gate: Gate,
        /// This came to a retry: the first attempt most probably applied.
        retried: bool,
    },
}

impl KvBatch {
    /// The results, if the call was not gated.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Kv;
    /// let results = client.kv().batch(vec![Kv.get("carts", "c-1")]).await?.results().expect("no gate");
    /// assert_eq!(results[0].found, Some(false));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn results(self) -> Option<Vec<KvResult>> {
        match self {
            KvBatch::Applied { results, .. } => Some(results),
            KvBatch::Gated { .. } => None,
        }
    }
}

impl Client {
    /// The standalone KV API; see [`KvStore`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let kv = client.kv();
    /// kv.put("carts", "c-1", &2, Ttl::hours(1)).await?;
    /// assert_eq!(kv.get::<u32>("carts", "c-1").await?.map(|row| row.value), Some(2));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn kv(&self) -> KvStore {
        KvStore {
            client: self.clone(),
        }
    }
}

fn parse_result(i: usize, v: &Value) -> KvResult {
    // A standalone call's results are in the order of its operations.
    KvResult {
        op_index: i,
        ..KvResult::from_value(v, i, i)
    }
}

impl KvStore {
    /// Sends `ops`; answers the raw body and whether it took a retry.
    async fn run(&self, ops: &[KvOp], replay: Replay) -> Result<(Value, bool)> {
        if ops.is_empty() {
            return Err(Error::invalid("kv", "at least one operation is needed"));
        }
        if ops.len() > MAX_STANDALONE_OPS {
            return Err(Error::invalid(
                "kv",
                format!(
                    "{} KV operations; the limit is {MAX_STANDALONE_OPS}",
                    ops.len()
                ),
            ));
        }
        let keys: usize = ops.iter().map(KvOp::key_count).sum();
        if keys > MAX_STANDALONE_KEYS {
            return Err(Error::invalid(
                "kv",
                format!("{keys} KV keys; the limit is {MAX_STANDALONE_KEYS}"),
            ));
        }
        let wire = ops
            .iter()
            .enumerate()
            .map(|(i, k)| {
                k.checked_wire(&crate::validate::Part {
                    list: "operations",
                    index: i,
                    kind: Some(k.name()),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let body = render(&Operations { operations: wire })?;
        let answer = self.client.post("/api/v1/kv", body, replay).await?;
        Ok((answer.value()?, answer.maybe_applied_before))
    }

    /// Runs one op and answers its result element.
    async fn one(&self, op: KvOp, replay: Replay) -> Result<Value> {
        let (body, _) = self.run(std::slice::from_ref(&op), replay).await?;
        body.get("results")
            .and_then(|r| r.get(0))
            .cloned()
            .ok_or_else(|| Error::Decode {
                message: "a KV answer without results".into(),
                body: body.to_string(),
            })
    }

    /// Reads `ns/key`; `None` when it is absent or expired.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.kv().put("carts", "c-1", &serde_json::json!({"items": 2}), queen_sdk::Ttl::hours(1)).await?;
    /// #[derive(serde::Deserialize)]
    /// struct Cart { items: u32 }
    /// let cart = client.kv().get::<Cart>("carts", "c-1").await?;
    /// assert_eq!(cart.map(|row| row.value.items), Some(2));
    /// assert!(client.kv().get::<Cart>("carts", "c-2").await?.is_none());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn get<T: DeserializeOwned>(&self, ns: &str, key: &str) -> Result<Option<KvRow<T>>> {
        let r = self.one(Kv.get(ns, key).into(), Replay::Safe).await?;
        if r.get("found").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        let value = serde_json::from_value(r.get("value").cloned().unwrap_or(Value::Null))
            .map_err(|e| Error::Decode {
                message: format!("kv value of {ns}/{key}: {e}"),
                body: r.to_string(),
            })?;
        let s = |k: &str| r.get(k).and_then(Value::as_str).map(str::to_string);
        Ok(Some(KvRow {
            key: s("key").unwrap_or_else(|| key.to_string()),
            value,
            version: r.get("version").and_then(Value::as_u64).unwrap_or(0),
            expires_at: s("expiresAt"),
            updated_at: s("updatedAt"),
        }))
    }

    /// Writes `value` to `ns/key` for `ttl`. Not retried after a 5xx or a lost
    /// connection (that ends in [`crate::Error::OutcomeUnknown`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let w = client.kv().put("carts", "c-1", &serde_json::json!({"items": 2}), Ttl::days(1)).await?;
    /// assert!(w.applied);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn put<V: Serialize + ?Sized>(
        &self,
        ns: &str,
        key: &str,
        value: &V,
        ttl: impl Into<Ttl>,
    ) -> Result<KvWrite> {
        let r = self
            .one(Kv.put(ns, key, value, ttl).into(), Replay::Unsafe)
            .await?;
        Ok(KvWrite::parse(&r))
    }

    /// Writes `value` only if `ns/key` is absent. The loser gets `applied: false`,
    /// `reason: "exists"` and the winner's value and version.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let kv = client.kv();
    /// assert!(kv.put_if_absent("claims", "job-9", &"worker-a", Ttl::minutes(5)).await?.applied);
    /// let w = kv.put_if_absent("claims", "job-9", &"worker-b", Ttl::minutes(5)).await?;
    /// if !w.applied {
    ///     let holder: Option<String> = w.value_as()?;
    ///     assert_eq!(holder.as_deref(), Some("worker-a"));
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn put_if_absent<V: Serialize + ?Sized>(
        &self,
        ns: &str,
        key: &str,
        value: &V,
        ttl: impl Into<Ttl>,
    ) -> Result<KvWrite> {
        let r = self
            .one(Kv.put_if_absent(ns, key, value, ttl).into(), Replay::Unsafe)
            .await?;
        Ok(KvWrite::parse(&r))
    }

    /// Removes `ns/key`; answers whether it existed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let kv = client.kv();
    /// kv.put("carts", "c-1", &2, Ttl::hours(1)).await?;
    /// assert!(kv.delete("carts", "c-1").await?);
    /// assert!(!kv.delete("carts", "c-1").await?);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn delete(&self, ns: &str, key: &str) -> Result<bool> {
        let r = self.one(Kv.delete(ns, key).into(), Replay::Unsafe).await?;
        Ok(r.get("applied").and_then(Value::as_bool).unwrap_or(false))
    }

    /// Adds `delta` to the number at `ns/key` (an absent key counts from 0) and answers
    /// the new value in [`KvWrite::value`]. For bounds, use [`KvStore::batch`] with
    /// [`Incr::min`] and [`Incr::max`]. `ttl` applies only when the `incr` creates the
    /// key (a fixed window; see [`Kv::incr`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// client.kv().incr("stats", "orders", 1, Ttl::Forever).await?;
    /// let n = client.kv().incr("stats", "orders", 1, Ttl::Forever).await?;
    /// assert_eq!(n.value_as::<i64>()?, Some(2));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn incr(
        &self,
        ns: &str,
        key: &str,
        delta: i64,
        ttl: impl Into<Ttl>,
    ) -> Result<KvWrite> {
        let r = self
            .one(Kv.incr(ns, key, delta, ttl).into(), Replay::Unsafe)
            .await?;
        Ok(KvWrite::parse(&r))
    }

    /// Runs several operations in one call, built with the transaction's [`Kv`]
    /// builder (anything that converts into a [`KvOp`]). A lost `required` operation writes nothing of the call and answers
    /// [`KvBatch::Gated`]. A batch of reads is retried after a 5xx or a lost
    /// connection, and so is one with a `required` write that a replay would lose
    /// (`putIfAbsent`, `delete`, or a write with `expect`: the retry then answers
    /// `Gated { retried: true, .. }`, meaning the first attempt most probably applied);
    /// any other batch that writes ends in [`crate::Error::OutcomeUnknown`] instead.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Kv, KvBatch, KvOp, Ttl};
    /// for _ in 0..2 {
    ///     let out = client
    ///         .kv()
    ///         .batch(vec![
    ///             // Operations of different kinds share a list as KvOps.
    ///             KvOp::from(Kv.put_if_absent("seen", "evt-1", &true, Ttl::days(1)).required()),
    ///             Kv.incr("stats", "events", 1, Ttl::Forever).into(),
    ///         ])
    ///         .await?;
    ///     match out {
    ///         KvBatch::Applied { results, .. } => println!("counted: {:?}", results[1].value),
    ///         KvBatch::Gated { .. } => println!("evt-1 was already counted"),
    ///     }
    /// }
    /// assert_eq!(client.kv().get::<i64>("stats", "events").await?.map(|r| r.value), Some(1));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn batch<I>(&self, ops: I) -> Result<KvBatch>
    where
        I: IntoIterator,
        I::Item: Into<KvOp>,
    {
        let ops: Vec<KvOp> = ops.into_iter().map(Into::into).collect();
        // A required write whose precondition its own first application breaks
        // (`putIfAbsent`, `delete`, a write with `expect`) makes a replay gate itself.
        let replay = if ops.iter().all(|k| !k.writes()) || ops.iter().any(KvOp::gates_its_replay) {
            Replay::Safe
        } else {
            Replay::Unsafe
        };
        let (b, retried) = self.run(&ops, replay).await?;
        if b.get("ok") == Some(&Value::Bool(false)) {
            if b.get("reason").and_then(Value::as_str) == Some("kv_precondition") {
                let (slot, reason, version, value) = crate::txn::gate_fields(&b);
                let op = ops.get(slot).map(|op| (op, GateKind::Condition));
                let gate = Gate::of(slot, slot, op, &reason, version, value);
                return Ok(KvBatch::Gated { gate, retried });
            }
            return Err(Error::Api {
                status: 200,
                code: b.get("reason").and_then(Value::as_str).map(str::to_string),
                message: b
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or("the KV call failed")
                    .to_string(),
                retry_after: None,
            });
        }
        let results = b
            .get("results")
            .and_then(Value::as_array)
            .map(|rs| {
                rs.iter()
                    .enumerate()
                    .map(|(i, r)| parse_result(i, r))
                    .collect()
            })
            .unwrap_or_default();
        Ok(KvBatch::Applied { results, retried })
    }
}
