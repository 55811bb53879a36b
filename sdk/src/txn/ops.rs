//! The parts of a transaction: push items, KV operations, timers, positions.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Serialize;
use serde_json::Value;

use super::ttl::Ttl;

/// One pushed item. Configure it in [`crate::TransactionBuilder::push`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let c = client
///     .transaction()
///     .push("receipts", |p| p.partition("customer-1").payload(&"receipt 1"))
///     .push("receipts", |p| p.partition("customer-2").payload(&"receipt 2"))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// assert_eq!(c.pushes().count(), 2);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Push {
    pub(crate) queue: String,
    pub(crate) partition: Option<String>,
    pub(crate) payload: Option<Result<Value, String>>,
    pub(crate) transaction_id: Option<String>,
    pub(crate) trace_id: Option<String>,
}

impl Push {
    /// The partition (default `Default`).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let body = client.transaction().push("receipts", |p| p.partition("customer-1")).to_body()?;
    /// assert_eq!(body["operations"][0]["items"][0]["partition"], "customer-1");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The payload (default `{}`). One that does not serialise fails the transaction
    /// with [`crate::Error::Invalid`] before anything is sent.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// #[derive(serde::Serialize)]
    /// struct Receipt { order_id: String, total: f64 }
    /// let receipt = Receipt { order_id: "o-7".into(), total: 12.5 };
    /// let body = client.transaction().push("receipts", |p| p.payload(&receipt)).to_body()?;
    /// assert_eq!(body["operations"][0]["items"][0]["payload"]["total"], 12.5);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        self.payload = Some(serde_json::to_value(payload).map_err(|e| e.to_string()));
        self
    }

    /// The dedup key. Without one, a step that acks messages gets one derived from
    /// them (the same on every run of the step); see [`crate::derive_id`].
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use queen_sdk::derive_id;
    /// let id = derive_id(&["invoice", "order-7"]);
    /// let body = client.transaction().push("invoices", |p| p.transaction_id(&id)).to_body()?;
    /// assert_eq!(body["operations"][0]["items"][0]["transactionId"], id.as_str());
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = Some(id.into());
        self
    }

    /// A trace id kept on the message.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// client.transaction().push("receipts", |p| p.trace_id("trace-42")).commit().await?.committed().unwrap();
    /// let msgs = client.pop::<serde_json::Value>("receipts").send().await?;
    /// assert_eq!(msgs[0].trace_id.as_deref(), Some("trace-42"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn trace_id(mut self, id: impl Into<String>) -> Self {
        self.trace_id = Some(id.into());
        self
    }
}

/// A consumer group's next offset on a partition, set by
/// [`crate::TransactionBuilder::position`]; its wire form is an entry of `positions`
/// (the fields in the order the JSON tree used to send them, by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Position {
    pub(crate) consumer_group: String,
    pub(crate) offset: u64,
    pub(crate) partition: String,
    pub(crate) queue: String,
}

/// Builds KV operations for [`crate::TransactionBuilder::kv`] and
/// [`crate::KvStore::batch`], where it is used by value: `Kv.put(..)`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Kv, Ttl};
/// // In a transaction, the closure receives a Kv...
/// client.transaction().kv(|k| k.put("carts", "c-1", &2).ttl(Ttl::hours(1))).commit().await?.committed().unwrap();
/// // ...and a standalone batch takes KvOps built from one.
/// let out = client.kv().batch(vec![Kv.get("carts", "c-1")]).await?;
/// assert_eq!(out.results().unwrap()[0].value, Some(serde_json::json!(2)));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Kv;

/// One KV operation, with its modifiers. Build it from [`Kv`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Kv, KvOp, Ttl};
/// let claim: KvOp = Kv.put_if_absent("claims", "job-9", &"worker-a").ttl(Ttl::minutes(5)).required();
/// let out = client.kv().batch(vec![claim]).await?;
/// assert!(out.results().is_some()); // the claim was free
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct KvOp {
    pub(crate) op: &'static str,
    pub(crate) ns: String,
    pub(crate) key: String,
    pub(crate) keys: Vec<String>,
    pub(crate) value: Option<Result<Value, String>>,
    pub(crate) ttl: Option<Ttl>,
    pub(crate) expect: Option<u64>,
    pub(crate) required: bool,
    pub(crate) delta: Option<Value>,
    pub(crate) min: Option<Value>,
    pub(crate) max: Option<Value>,
}

impl Kv {
    fn op(self, op: &'static str, ns: &str, key: &str) -> KvOp {
        KvOp {
            op,
            ns: ns.to_string(),
            key: key.to_string(),
            keys: Vec::new(),
            value: None,
            ttl: None,
            expect: None,
            required: false,
            delta: None,
            min: None,
            max: None,
        }
    }

    /// Writes `value` (give it a [`KvOp::ttl`] or [`KvOp::forever`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let c = client
    ///     .transaction()
    ///     .kv(|k| k.put("orders", "o-7", &serde_json::json!({"status": "paid"})).ttl(Ttl::days(30)))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let put = c.kv().next().unwrap();
    /// assert_eq!(put.applied, Some(true));
    /// assert!(put.version.is_some());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn put<T: Serialize + ?Sized>(self, ns: &str, key: &str, value: &T) -> KvOp {
        let mut op = self.op("put", ns, key);
        op.value = Some(serde_json::to_value(value).map_err(|e| e.to_string()));
        op
    }

    /// Writes `value` only if the key is absent; the loser learns the winner's value
    /// (`applied: false`, `reason: "exists"`). Add [`KvOp::required`] to make it a gate.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let claim = |worker: &'static str| {
    ///     client.transaction().kv(move |k| k.put_if_absent("claims", "job-9", &worker).ttl(Ttl::minutes(5)))
    /// };
    /// claim("worker-a").commit().await?.committed().unwrap();
    /// let lost = claim("worker-b").commit().await?.committed().unwrap();
    /// let r = lost.kv().next().unwrap();
    /// assert_eq!((r.applied, r.reason.as_deref()), (Some(false), Some("exists")));
    /// assert_eq!(r.value, Some(serde_json::json!("worker-a")));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_if_absent<T: Serialize + ?Sized>(self, ns: &str, key: &str, value: &T) -> KvOp {
        let mut op = self.put(ns, key, value);
        op.op = "putIfAbsent";
        op
    }

    /// Removes a key (`applied: false`, `reason: "absent"` when there was none).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let c = client.transaction().kv(|k| k.delete("carts", "c-1")).commit().await?.committed().unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!((r.applied, r.reason.as_deref()), (Some(false), Some("absent")));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete(self, ns: &str, key: &str) -> KvOp {
        self.op("delete", ns, key)
    }

    /// Asserts the key's version without writing (`0`: it must not exist). With
    /// [`KvOp::required`], a lost check gates the transaction.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let v = client.kv().put("config", "limits", &10, Ttl::Forever).await?.version.unwrap();
    /// // Commit only if nobody changed the config since it was read at version v.
    /// let step = |seen: u64| {
    ///     client
    ///         .transaction()
    ///         .kv(move |k| k.check("config", "limits", seen).required())
    ///         .push("changes", |p| p.payload(&"limits reviewed"))
    /// };
    /// assert!(step(v).commit().await?.is_committed());
    /// client.kv().put("config", "limits", &20, Ttl::Forever).await?;
    /// assert!(matches!(step(v).commit().await?, Commit::Gated { .. }));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(self, ns: &str, key: &str, expect: u64) -> KvOp {
        self.op("check", ns, key).expect(expect)
    }

    /// Adds `delta` to a number (an absent key counts from 0); the result's `value` is
    /// the new number. Bound it with [`KvOp::min`] and [`KvOp::max`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let add = |n| client.transaction().kv(move |k| k.incr("stats", "orders", n).forever());
    /// add(5).commit().await?.committed().unwrap();
    /// let c = add(-2).commit().await?.committed().unwrap();
    /// assert_eq!(c.kv().next().unwrap().value, Some(serde_json::json!(3)));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn incr(self, ns: &str, key: &str, delta: i64) -> KvOp {
        let mut op = self.op("incr", ns, key);
        op.delta = Some(delta.into());
        op
    }

    /// Reads one key, as of the transaction (`found`, `value`, `version`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// client.kv().put("carts", "c-1", &serde_json::json!({"items": 2}), Ttl::hours(1)).await?;
    /// let c = client.transaction().kv(|k| k.get("carts", "c-1")).commit().await?.committed().unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!(r.found, Some(true));
    /// assert_eq!(r.value, Some(serde_json::json!({"items": 2})));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(self, ns: &str, key: &str) -> KvOp {
        self.op("get", ns, key)
    }

    /// Reads several keys: the result's [`KvResult::raw`](crate::KvResult::raw) holds
    /// `rows` and `missing`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// client.kv().put("carts", "c-1", &1, Ttl::hours(1)).await?;
    /// let c = client
    ///     .transaction()
    ///     .kv(|k| k.get_many("carts", ["c-1", "c-2"]))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!(r.raw["rows"][0]["key"], "c-1");
    /// assert_eq!(r.raw["missing"], serde_json::json!(["c-2"]));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_many<I: IntoIterator<Item = S>, S: Into<String>>(self, ns: &str, keys: I) -> KvOp {
        let mut op = self.op("getMany", ns, "");
        op.keys = keys.into_iter().map(Into::into).collect();
        op
    }
}

impl KvOp {
    /// Requires the current version to be `version` (`0`: the key must not exist);
    /// otherwise the write does not apply (`reason: "version"`, or `"exists"` /
    /// `"absent"`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let w = client.kv().put("carts", "c-1", &1, Ttl::hours(1)).await?;
    /// let v = w.version.unwrap();
    /// let update = |seen: u64, n: u32| {
    ///     client.transaction().kv(move |k| k.put("carts", "c-1", &n).ttl(Ttl::hours(1)).expect(seen))
    /// };
    /// let first = update(v, 2).commit().await?.committed().unwrap();
    /// assert_eq!(first.kv().next().unwrap().applied, Some(true));
    /// let stale = update(v, 3).commit().await?.committed().unwrap(); // v is no longer current
    /// assert_eq!(stale.kv().next().unwrap().applied, Some(false));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn expect(mut self, version: u64) -> Self {
        self.expect = Some(version);
        self
    }

    /// Makes the operation a gate: if its precondition loses, the whole transaction
    /// rolls back (answered as [`crate::Commit::Gated`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let claim = |worker: &'static str| {
    ///     client
    ///         .transaction()
    ///         .kv(move |k| k.put_if_absent("claims", "job-9", &worker).ttl(Ttl::minutes(5)).required())
    ///         .push("jobs-started", move |p| p.payload(&worker))
    /// };
    /// assert!(claim("worker-a").commit().await?.is_committed());
    /// match claim("worker-b").commit().await? {
    ///     Commit::Gated { value, .. } => assert_eq!(value, Some(serde_json::json!("worker-a"))),
    ///     Commit::Committed(_) => panic!("job-9 was claimed"),
    /// }
    /// assert_eq!(broker.inspect().messages("jobs-started", "Default")?.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The row's lifetime: a [`Ttl`], or a [`std::time::Duration`] (rounded up to whole
    /// seconds).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// use queen_sdk::Ttl;
    /// let body = client
    ///     .transaction()
    ///     .kv(|k| k.put("sessions", "s-1", &"alice").ttl(Duration::from_secs(900)))
    ///     .kv(|k| k.put("carts", "c-1", &2).ttl(Ttl::days(1)))
    ///     .to_body()?;
    /// assert_eq!(body["kv"][0]["ttlSeconds"], 900);
    /// assert_eq!(body["kv"][1]["ttlSeconds"], 86_400);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn ttl(mut self, ttl: impl Into<Ttl>) -> Self {
        self.ttl = Some(ttl.into());
        self
    }

    /// The row never lapses.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let body = client.transaction().kv(|k| k.put("config", "limits", &10).forever()).to_body()?;
    /// assert_eq!(body["kv"][0]["forever"], true);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn forever(self) -> Self {
        self.ttl(Ttl::Forever)
    }

    /// `incr`: the lowest allowed result; a step below it does not apply
    /// (`reason: "limit"`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let take = || client.transaction().kv(|k| k.incr("stock", "sku-1", -1).min(0).forever());
    /// let c = take().commit().await?.committed().unwrap(); // 0 - 1 would be below 0
    /// let r = c.kv().next().unwrap();
    /// assert_eq!((r.applied, r.reason.as_deref()), (Some(false), Some("limit")));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn min(mut self, min: i64) -> Self {
        self.min = Some(min.into());
        self
    }

    /// `incr`: the highest allowed result; a step above it does not apply
    /// (`reason: "limit"`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let hit = || client.transaction().kv(|k| k.incr("quota", "user-1", 1).max(2).forever());
    /// for _ in 0..2 {
    ///     assert_eq!(hit().commit().await?.committed().unwrap().kv().next().unwrap().applied, Some(true));
    /// }
    /// let third = hit().commit().await?.committed().unwrap();
    /// assert_eq!(third.kv().next().unwrap().reason.as_deref(), Some("limit"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn max(mut self, max: i64) -> Self {
        self.max = Some(max.into());
        self
    }

    /// Whether the operation writes its key.
    pub(crate) fn writes(&self) -> bool {
        matches!(self.op, "put" | "putIfAbsent" | "delete" | "incr")
    }

    pub(crate) fn needs_expiry(&self) -> bool {
        matches!(self.op, "put" | "putIfAbsent" | "incr")
    }

    /// The wire form (the value already checked).
    pub(crate) fn to_wire<'a>(&'a self, value: Option<&'a Value>) -> KvWire<'a> {
        let getmany = self.op == "getMany";
        KvWire {
            op: self.op,
            ns: &self.ns,
            key: (!getmany).then_some(self.key.as_str()),
            keys: getmany.then_some(self.keys.as_slice()),
            value,
            ttl_seconds: match self.ttl {
                Some(Ttl::Seconds(s)) => Some(s),
                _ => None,
            },
            forever: (self.ttl == Some(Ttl::Forever)).then_some(true),
            expect: self.expect,
            required: self.required.then_some(true),
            delta: self.delta.as_ref(),
            min: self.min.as_ref(),
            max: self.max.as_ref(),
        }
    }
}

/// What a timer operation does. Set it with [`Timer::schedule`], [`Timer::reschedule`]
/// or [`Timer::cancel`].
///
/// ```
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// use std::time::Duration;
/// let body = client
///     .transaction()
///     .timer("reminders", |t| t.key("o-7").cancel())
///     .timer("reminders", |t| t.key("o-8").reschedule().after(Duration::from_secs(60)))
///     .to_body()?;
/// assert_eq!(body["timers"][0]["op"], "cancel");
/// assert_eq!(body["timers"][1]["op"], "reschedule");
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimerAction {
    /// Set it, replacing a pending timer of the key.
    #[default]
    Schedule,
    /// Replace it (scheduling it when absent).
    Reschedule,
    /// Remove the pending timer.
    Cancel,
}

/// One timer operation. Configure it in [`crate::TransactionBuilder::timer`] or with the
/// standalone [`crate::Timers`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// let c = client
///     .transaction()
///     .timer("reminders", |t| t.key("order-7").after(Duration::from_secs(3600)).payload(&"order-7"))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// assert_eq!(c.timers().next().unwrap().timer_key, "order-7");
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Timer {
    pub(crate) queue: String,
    pub(crate) key: String,
    pub(crate) action: TimerAction,
    pub(crate) delay: Option<Result<Duration, String>>,
    pub(crate) partition: Option<String>,
    pub(crate) txn: Option<String>,
    pub(crate) payload: Option<Result<Vec<u8>, String>>,
}

impl Timer {
    /// The timer's key within its queue (required; at most 1,024 bytes).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client.transaction().timer("reminders", |t| t.key("o-7").after(Duration::from_secs(60))).to_body()?;
    /// assert_eq!(body["timers"][0]["timerKey"], "o-7");
    /// // Without a key, nothing is sent.
    /// assert!(client.transaction().timer("reminders", |t| t.after(Duration::from_secs(60))).to_body().is_err());
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// Fires `delay` from the commit (sent in whole milliseconds).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client.transaction().timer("reminders", |t| t.key("o-7").after(Duration::from_secs(90))).to_body()?;
    /// assert_eq!(body["timers"][0]["delayMs"], 90_000);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(Ok(delay));
        self
    }

    /// Fires at `at`: the delay from now by this machine's clock (a time in the past
    /// fires at once).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::{Duration, SystemTime};
    /// let tomorrow = SystemTime::now() + Duration::from_secs(86_400);
    /// let body = client.transaction().timer("reminders", |t| t.key("o-7").at(tomorrow)).to_body()?;
    /// assert!(body["timers"][0]["delayMs"].as_u64().unwrap() > 86_000_000);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn at(mut self, at: SystemTime) -> Self {
        self.delay = Some(Ok(at.duration_since(SystemTime::now()).unwrap_or_default()));
        self
    }

    /// The partition of the message it pushes.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client
    ///     .transaction()
    ///     .timer("reminders", |t| t.key("o-7").after(Duration::from_secs(60)).partition("customer-1"))
    ///     .to_body()?;
    /// assert_eq!(body["timers"][0]["partition"], "customer-1");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The pushed message's `transactionId`. Without one, a step that acks messages
    /// gets one derived from them, the queue and the timer key; otherwise the broker
    /// mints one.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client
    ///     .transaction()
    ///     .timer("reminders", |t| t.key("o-7").after(Duration::from_secs(60)).txn("reminder-o-7"))
    ///     .to_body()?;
    /// assert_eq!(body["timers"][0]["txn"], "reminder-o-7");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn txn(mut self, txn: impl Into<String>) -> Self {
        self.txn = Some(txn.into());
        self
    }

    /// A payload serialised as JSON (delivered as JSON). Without a payload, the timer's
    /// is empty and its message's data is `""`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::{ManualClock, MockBroker};
    /// let clock = ManualClock::new();
    /// let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    /// let client = queen_sdk::Client::new(broker.url())?;
    /// let reminder = serde_json::json!({"orderId": "o-7"});
    /// client
    ///     .transaction()
    ///     .timer("reminders", |t| t.key("o-7").after(Duration::from_secs(60)).payload(&reminder))
    ///     .timer("reminders", |t| t.key("o-8").after(Duration::from_secs(60)))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .expect("no gate");
    /// clock.advance(Duration::from_secs(61)); // the timer falls due
    /// let fired = client.pop::<serde_json::Value>("reminders").wait(Duration::from_secs(5)).send().await?;
    /// assert_eq!(fired[0].data, reminder);
    /// assert_eq!(fired[1].data, ""); // o-8 had no payload
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        self.payload = Some(serde_json::to_vec(payload).map_err(|e| e.to_string()));
        self
    }

    /// Raw payload bytes (sent base64-encoded; bytes that are not JSON are delivered as
    /// their base64 text).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client
    ///     .transaction()
    ///     .timer("reminders", |t| t.key("o-7").after(Duration::from_secs(60)).payload_bytes(b"{}".to_vec()))
    ///     .to_body()?;
    /// assert_eq!(body["timers"][0]["payload"], "e30="); // base64 of "{}"
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn payload_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(Ok(bytes.into()));
        self
    }

    /// Schedule it (the default), replacing a pending timer of the key.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let set = |secs| client.transaction().timer("reminders", move |t| t.key("o-7").schedule().after(Duration::from_secs(secs)));
    /// let first = set(60).commit().await?.committed().unwrap();
    /// let again = set(120).commit().await?.committed().unwrap();
    /// assert_eq!(first.timers().next().unwrap().status, "scheduled");
    /// assert_eq!(again.timers().next().unwrap().status, "rescheduled");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn schedule(mut self) -> Self {
        self.action = TimerAction::Schedule;
        self
    }

    /// Reschedule it (scheduling it when absent).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let c = client
    ///     .transaction()
    ///     .timer("reminders", |t| t.key("o-7").reschedule().after(Duration::from_secs(60)))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// assert!(c.timers().next().unwrap().ok);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reschedule(mut self) -> Self {
        self.action = TimerAction::Reschedule;
        self
    }

    /// Cancel it (no delay or payload needed): `ok: false`, `status: "absent"` when no
    /// timer of the key is pending.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// client.timers().schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60))).await?;
    /// let c = client.transaction().timer("reminders", |t| t.key("o-7").cancel()).commit().await?.committed().unwrap();
    /// assert_eq!(c.timers().next().unwrap().status, "cancelled");
    /// assert!(broker.inspect().timers("reminders")?.is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cancel(mut self) -> Self {
        self.action = TimerAction::Cancel;
        self
    }

    /// The wire form, with the resolved `txn`.
    pub(crate) fn to_wire<'a>(
        &'a self,
        txn: Option<Cow<'a, str>>,
        delay_ms: u64,
        payload: Option<&[u8]>,
    ) -> TimerWire<'a> {
        let op = match self.action {
            TimerAction::Schedule => "schedule",
            TimerAction::Reschedule => "reschedule",
            TimerAction::Cancel => "cancel",
        };
        let scheduled = self.action != TimerAction::Cancel;
        TimerWire {
            op,
            queue: &self.queue,
            timer_key: &self.key,
            delay_ms: scheduled.then_some(delay_ms),
            payload: scheduled.then(|| B64.encode(payload.unwrap_or_default())),
            partition: self.partition.as_deref().filter(|_| scheduled),
            txn,
        }
    }
}

impl KvOp {
    /// Checks the operation's own rules (namespace, key, expiry, value size) and renders
    /// it, for calls outside a transaction (the standalone KV handle).
    pub(crate) fn checked_wire(&self, op: &str) -> crate::Result<KvWire<'_>> {
        use crate::{Error, validate};
        validate::ns(op, &self.ns)?;
        if self.op == "getMany" {
            for key in &self.keys {
                validate::key(op, key)?;
            }
        } else {
            validate::key(op, &self.key)?;
        }
        if self.needs_expiry() && self.ttl.is_none() {
            return Err(Error::invalid(
                op,
                "needs exactly one expiry: .ttl(..) or .forever()",
            ));
        }
        if let Some(Ttl::Seconds(0)) = self.ttl {
            return Err(Error::invalid(op, "a TTL must be at least 1 second"));
        }
        let value = match &self.value {
            None => None,
            Some(Err(e)) => return Err(Error::invalid(op, format!("value: {e}"))),
            Some(Ok(v)) => {
                let len = validate::json_len(v);
                if len > validate::MAX_VALUE_BYTES {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "the value is {len} bytes as JSON; the limit is {}",
                            validate::MAX_VALUE_BYTES
                        ),
                    ));
                }
                Some(v)
            }
        };
        Ok(self.to_wire(value))
    }
}

impl Timer {
    /// Checks the timer's own rules (queue, key, delay, payload) and renders it with
    /// `txn`, for calls outside a transaction (the standalone timers handle).
    pub(crate) fn checked_wire<'a>(
        &'a self,
        op: &str,
        txn: Option<Cow<'a, str>>,
    ) -> crate::Result<TimerWire<'a>> {
        use crate::{Error, validate};
        validate::name(op, &self.queue)?;
        if self.key.is_empty() {
            return Err(Error::invalid(op, "a timer needs a key: .key(..)"));
        }
        if self.key.len() > 1024 {
            return Err(Error::invalid(op, "a timer key is at most 1,024 bytes"));
        }
        if let Some(p) = &self.partition {
            validate::name(op, p)?;
        }
        if let Some(t) = &txn {
            validate::transaction_id(op, t)?;
        }
        let delay = match &self.delay {
            Some(Ok(d)) => d.as_millis() as u64,
            Some(Err(e)) => return Err(Error::invalid(op, e.clone())),
            None if self.action == TimerAction::Cancel => 0,
            None => return Err(Error::invalid(op, "a timer needs .after(..) or .at(..)")),
        };
        let payload = match &self.payload {
            Some(Ok(b)) => Some(b.as_slice()),
            Some(Err(e)) => return Err(Error::invalid(op, format!("payload: {e}"))),
            None => None,
        };
        Ok(self.to_wire(txn, delay, payload))
    }
}

/// A KV operation as the broker reads it, borrowed from its [`KvOp`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KvWire<'a> {
    op: &'static str,
    ns: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forever: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expect: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    required: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<&'a Value>,
}

/// A timer operation as the broker reads it, borrowed from its [`Timer`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimerWire<'a> {
    op: &'static str,
    queue: &'a str,
    timer_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    /// Base64 of the payload's bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    txn: Option<Cow<'a, str>>,
}
