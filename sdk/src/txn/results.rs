//! What a committed transaction answers: one typed result per slot of the index space.

use std::borrow::Cow;
use std::fmt;
use std::ops::Range;
use std::sync::OnceLock;

use bytes::Bytes;

use crate::error::Capability;

use serde::Deserialize;
use serde::de::{IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_json::value::RawValue;

/// A committed ack.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
/// use queen_sdk::StepResult;
/// let c = client.transaction().ack(&msg).commit().await?.committed().unwrap();
/// let StepResult::Ack(ack) = &c.results()[0] else { panic!("slot 0 is the ack") };
/// assert_eq!((ack.index, ack.transaction_id.as_str(), ack.dlq), (0, msg.transaction_id.as_str(), false));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct AckResult {
    /// Its slot.
    pub index: usize,
    /// The acked message's `transactionId`.
    pub transaction_id: String,
    /// The message was dead-lettered.
    pub dlq: bool,
}

/// A committed push.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let c = client
///     .transaction()
///     .push("receipts", |p| p.transaction_id("receipt-7").payload(&"paid"))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// let push = c.pushes().next().unwrap();
/// assert_eq!((push.queue.as_str(), push.transaction_id.as_str()), ("receipts", "receipt-7"));
/// assert!(!push.message_id.is_empty() && !push.duplicate);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PushResult {
    /// Its slot.
    pub index: usize,
    /// The dedup key used.
    pub transaction_id: String,
    /// The stored message's id.
    pub message_id: String,
    /// The queue.
    pub queue: String,
    /// A repeat of an earlier item of the same call: nothing new was stored.
    pub duplicate: bool,
}

/// A KV operation's result.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::Ttl;
/// let c = client
///     .transaction()
///     .push("receipts", |p| p.payload(&"paid"))
///     .kv(|k| k.put("orders", "o-7", &"paid", Ttl::days(1)))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// let kv = c.kv().next().unwrap();
/// assert_eq!((kv.index, kv.op_index, kv.op.as_str()), (1, 0, "put")); // slot 1: after the push
/// assert_eq!((kv.applied, kv.key.as_deref()), (Some(true), Some("o-7")));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct KvResult {
    /// Its slot.
    pub index: usize,
    /// Its place in the `kv` array.
    pub op_index: usize,
    /// The operation (`put`, `putIfAbsent`, ...).
    pub op: String,
    /// Whether a write or check held (`None` for reads).
    pub applied: Option<bool>,
    /// Why it did not.
    pub reason: Option<crate::KvReason>,
    /// The key.
    pub key: Option<String>,
    /// The value written, read, or found in the way.
    pub value: Option<Value>,
    /// The row's version.
    pub version: Option<u64>,
    /// For `get`: whether the key exists.
    pub found: Option<bool>,
    /// The whole element as the broker sent it, as JSON text, for fields this type does
    /// not name (`rows`, `missing`, ...): [`KvResult::raw_value`] parses it. Kept as text
    /// because most callers never look: a tree per result was a third of the
    /// allocations of a seed step's answer.
    pub raw: Box<RawValue>,
}

impl KvResult {
    /// [`KvResult::raw`] parsed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let c = client.transaction().kv(|k| k.get("carts", "c-9")).commit().await?.committed().unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!(r.raw_value()["found"], false);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn raw_value(&self) -> Value {
        // The text came from a JSON answer that parsed.
        serde_json::from_str(self.raw.get()).unwrap_or(Value::Null)
    }

    /// A KV result from its element `v`: `index` and `op_index` where `v` names none.
    pub(crate) fn from_value(v: &Value, index: usize, op_index: usize) -> KvResult {
        KvResult {
            index: v
                .get("index")
                .and_then(Value::as_u64)
                .map_or(index, |n| n as usize),
            op_index: v
                .get("opIndex")
                .and_then(Value::as_u64)
                .map_or(op_index, |n| n as usize),
            op: s(v, "op").unwrap_or_default(),
            applied: v.get("applied").and_then(Value::as_bool),
            reason: s(v, "reason").map(|r| crate::KvReason::parse(&r)),
            key: s(v, "key"),
            value: v.get("value").cloned(),
            version: v.get("version").and_then(Value::as_u64),
            found: v.get("found").and_then(Value::as_bool),
            raw: serde_json::value::to_raw_value(v).unwrap_or_else(|_| RawValue::NULL.to_owned()),
        }
    }
}

/// Equal when every field is, `raw` compared as JSON (not as text: key order and
/// spacing are the sender's).
impl PartialEq for KvResult {
    fn eq(&self, o: &KvResult) -> bool {
        (
            self.index,
            self.op_index,
            &self.op,
            self.applied,
            &self.reason,
            &self.key,
            &self.value,
            self.version,
            self.found,
        ) == (
            o.index, o.op_index, &o.op, o.applied, &o.reason, &o.key, &o.value, o.version, o.found,
        ) && (self.raw.get() == o.raw.get() || self.raw_value() == o.raw_value())
    }
}

/// A timer operation's result.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// let c = client
///     .transaction()
///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(60)).txn("remind-o-7"))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// let t = c.timers().next().unwrap();
/// assert_eq!((t.status.clone(), t.ok), (queen_sdk::TimerStatus::Scheduled, true));
/// assert_eq!((t.queue.as_str(), t.timer_key.as_str()), ("reminders", "o-7"));
/// assert_eq!(t.txn.as_deref(), Some("remind-o-7"));
/// assert!(t.message_id.is_some() && t.deliver_at.is_some());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TimerResult {
    /// Its slot.
    pub index: usize,
    /// Its place in the `timers` array.
    pub op_index: usize,
    /// What the operation did.
    pub status: TimerStatus,
    /// Whether it took effect.
    pub ok: bool,
    /// The queue.
    pub queue: String,
    /// The timer key.
    pub timer_key: String,
    /// The pushed message's `transactionId`.
    pub txn: Option<String>,
    /// The pushed message's id.
    pub message_id: Option<String>,
    /// When it fires (ISO-8601).
    pub deliver_at: Option<String>,
}

/// What a timer operation did, as the broker says it (`status`).
///
/// ```
/// use queen_sdk::TimerStatus;
/// assert_eq!(TimerStatus::parse("too_late"), TimerStatus::TooLate);
/// assert_eq!(TimerStatus::Cancelled.as_str(), "cancelled");
/// assert_eq!(TimerStatus::parse("held").to_string(), "held"); // one this SDK does not know
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TimerStatus {
    /// Set, where none was pending.
    Scheduled,
    /// Set, replacing a pending timer of the key.
    Rescheduled,
    /// A pending timer was cancelled.
    Cancelled,
    /// No timer of the key was pending (it may have fired): nothing to cancel.
    Absent,
    /// Firing had begun: too late to cancel.
    TooLate,
    /// A status this SDK does not know, as the broker sent it.
    Other(String),
}

impl TimerStatus {
    /// The status of the broker's text.
    pub fn parse(s: &str) -> TimerStatus {
        match s {
            "scheduled" => TimerStatus::Scheduled,
            "rescheduled" => TimerStatus::Rescheduled,
            "cancelled" => TimerStatus::Cancelled,
            "absent" => TimerStatus::Absent,
            "too_late" => TimerStatus::TooLate,
            other => TimerStatus::Other(other.to_string()),
        }
    }

    /// The broker's text for it.
    pub fn as_str(&self) -> &str {
        match self {
            TimerStatus::Scheduled => "scheduled",
            TimerStatus::Rescheduled => "rescheduled",
            TimerStatus::Cancelled => "cancelled",
            TimerStatus::Absent => "absent",
            TimerStatus::TooLate => "too_late",
            TimerStatus::Other(s) => s,
        }
    }
}

impl fmt::Display for TimerStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A position's result.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("events", &1)]).await?;
/// use queen_sdk::StepResult;
/// let c = client.transaction().position("events", "audit", "Default", 1).commit().await?.committed().unwrap();
/// let StepResult::Position(p) = &c.results()[0] else { panic!("slot 0 is the position") };
/// assert_eq!(p.raw["offset"], 1);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PositionResult {
    /// Its slot.
    pub index: usize,
    /// Its place in the `positions` array.
    pub op_index: usize,
    /// The whole element (its shape is the broker's own).
    pub raw: Value,
}

/// One slot of a committed transaction's results. Slots run through the acks and
/// pushes in the order they were added, then the KV operations, the timers and the
/// positions.
///
/// ```
/// # use queen_sdk::Ttl;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
/// use queen_sdk::StepResult;
/// let c = client
///     .transaction()
///     .ack(&msg)
///     .kv(|k| k.incr("stats", "orders", 1, Ttl::Forever))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// for r in c.results() {
///     match r {
///         StepResult::Ack(a) => println!("acked {}", a.transaction_id),
///         StepResult::Kv(k) => println!("{} applied: {:?}", k.op, k.applied),
///         other => println!("{other:?}"),
///     }
/// }
/// assert!(matches!(c.results(), [StepResult::Ack(_), StepResult::Kv(_)]));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StepResult {
    /// An ack.
    Ack(AckResult),
    /// A pushed item.
    Push(PushResult),
    /// A KV operation.
    Kv(KvResult),
    /// A timer operation.
    Timer(TimerResult),
    /// A position.
    Position(PositionResult),
    /// A result of a type this SDK does not know.
    Other(Value),
}

fn s(v: &Value, k: &str) -> Option<String> {
    v.get(k).and_then(Value::as_str).map(str::to_string)
}

fn u(v: &Value, k: &str) -> usize {
    v.get(k).and_then(Value::as_u64).unwrap_or(0) as usize
}

/// The fields of an ack, push, timer or KV result, read straight from its text: no
/// JSON tree per element (a seed step's answer took 50 allocations with them, 5 µs
/// alone and several times that with the allocator shared under load).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Typed<'a> {
    #[serde(rename = "type", borrow)]
    ty: Option<Cow<'a, str>>,
    index: Option<u64>,
    op_index: Option<u64>,
    transaction_id: Option<String>,
    dlq: Option<bool>,
    message_id: Option<String>,
    queue_name: Option<String>,
    duplicate: Option<bool>,
    status: Option<String>,
    ok: Option<bool>,
    queue: Option<String>,
    timer_key: Option<String>,
    txn: Option<String>,
    deliver_at: Option<String>,
    op: Option<String>,
    applied: Option<bool>,
    reason: Option<String>,
    key: Option<String>,
    /// `Some(Null)` for a `null` that is there, as [`Value::get`] gives.
    #[serde(default, deserialize_with = "present")]
    value: Option<Value>,
    version: Option<u64>,
    found: Option<bool>,
}

/// A field that is present, even as `null`.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

impl StepResult {
    /// Decodes one element of `results` from its text: an ack, push, timer or KV result
    /// straight into its fields, anything else (which keeps its `raw` tree) through
    /// [`Value`].
    /// An element whose fields are not of the expected JSON types is read as leniently
    /// as before: through [`Value`], each such field taken as absent.
    pub(crate) fn from_raw(raw: &RawValue) -> StepResult {
        if let Ok(t) = serde_json::from_str::<Typed<'_>>(raw.get()) {
            let index = t.index.unwrap_or(0) as usize;
            match t.ty.as_deref() {
                Some("ack") => {
                    return StepResult::Ack(AckResult {
                        index,
                        transaction_id: t.transaction_id.unwrap_or_default(),
                        dlq: t.dlq.unwrap_or(false),
                    });
                }
                Some("push") => {
                    return StepResult::Push(PushResult {
                        index,
                        transaction_id: t.transaction_id.unwrap_or_default(),
                        message_id: t.message_id.unwrap_or_default(),
                        queue: t.queue_name.unwrap_or_default(),
                        duplicate: t.duplicate.unwrap_or(false),
                    });
                }
                Some("kv") => {
                    return StepResult::Kv(KvResult {
                        index,
                        op_index: t.op_index.unwrap_or(0) as usize,
                        op: t.op.unwrap_or_default(),
                        applied: t.applied,
                        reason: t.reason.map(|r| crate::KvReason::parse(&r)),
                        key: t.key,
                        value: t.value,
                        version: t.version,
                        found: t.found,
                        raw: raw.to_owned(),
                    });
                }
                Some("timer") => {
                    return StepResult::Timer(TimerResult {
                        index,
                        op_index: t.op_index.unwrap_or(0) as usize,
                        status: TimerStatus::parse(t.status.as_deref().unwrap_or_default()),
                        ok: t.ok.unwrap_or(false),
                        queue: t.queue.unwrap_or_default(),
                        timer_key: t.timer_key.unwrap_or_default(),
                        txn: t.txn,
                        message_id: t.message_id,
                        deliver_at: t.deliver_at,
                    });
                }
                _ => {}
            }
        }
        // The text is JSON (the answer parsed), so this fails only on a nesting limit.
        StepResult::parse(serde_json::from_str(raw.get()).unwrap_or(Value::Null))
    }

    /// Decodes one element of `results`, keeping it whole where the result has a `raw`.
    fn parse(v: Value) -> StepResult {
        let index = u(&v, "index");
        match v.get("type").and_then(Value::as_str) {
            Some("ack") => StepResult::Ack(AckResult {
                index,
                transaction_id: s(&v, "transactionId").unwrap_or_default(),
                dlq: v.get("dlq").and_then(Value::as_bool).unwrap_or(false),
            }),
            Some("push") => StepResult::Push(PushResult {
                index,
                transaction_id: s(&v, "transactionId").unwrap_or_default(),
                message_id: s(&v, "messageId").unwrap_or_default(),
                queue: s(&v, "queueName").unwrap_or_default(),
                duplicate: v.get("duplicate").and_then(Value::as_bool).unwrap_or(false),
            }),
            Some("kv") => StepResult::Kv(KvResult::from_value(&v, index, 0)),
            Some("timer") => StepResult::Timer(TimerResult {
                index,
                op_index: u(&v, "opIndex"),
                status: TimerStatus::parse(
                    v.get("status").and_then(Value::as_str).unwrap_or_default(),
                ),
                ok: v.get("ok").and_then(Value::as_bool).unwrap_or(false),
                queue: s(&v, "queue").unwrap_or_default(),
                timer_key: s(&v, "timerKey").unwrap_or_default(),
                txn: s(&v, "txn"),
                message_id: s(&v, "messageId"),
                deliver_at: s(&v, "deliverAt"),
            }),
            Some("position") => StepResult::Position(PositionResult {
                index,
                op_index: u(&v, "opIndex"),
                raw: v,
            }),
            _ => StepResult::Other(v),
        }
    }
}

/// A committed transaction.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let c = client
///     .transaction()
///     .push("receipts", |p| p.payload(&"paid"))
///     .commit()
///     .await?
///     .committed()
///     .expect("no gate, no rollback");
/// assert!(!c.transaction_id.is_empty());
/// assert_eq!(c.results().len(), 1);
/// assert!(!c.retried);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Committed {
    /// The id the broker minted for this call (not a dedup key).
    pub transaction_id: String,
    /// An earlier attempt failed in a way that may have applied it (a 5xx or a lost
    /// connection, not a 429), and this answer came to a resend.
    pub retried: bool,
    results: Results,
}

/// A commit's per-slot results: the answer's `results` text, decoded when first read.
///
/// Most steps never read them (a worker commits, then takes its next message), and
/// decoding them was most of a commit's answer: a seed step's five results are about
/// fifteen owned strings, and decoding the answer was 7.4% of the load generator's
/// samples per step through the SDK (perf, `seed-step` at 64 workers). A loop of
/// 200,000 of that answer (release): 4.0 to 5.2 µs decoded whole, 0.8 to 1.0 µs for
/// the envelope alone, 1.9 to 2.9 µs with the check that its Queen 2 parts came back
/// (a step without them skips it). The answer's bytes are kept instead (one
/// reference-counted buffer, no copy) and decoded once, on the first read.
#[derive(Clone)]
struct Results {
    /// The answer's body.
    body: Bytes,
    /// Where its `results` array is in `body`; empty when the answer had none.
    span: Range<usize>,
    /// The slot of the SDK's step marker ([`crate::STEP_MARKER_NS`]), left out of the
    /// results the caller reads: the slots after it move down one, and so do the KV
    /// results' `op_index`.
    hidden: Option<usize>,
    decoded: OnceLock<Vec<StepResult>>,
}

impl Results {
    fn get(&self) -> &[StepResult] {
        self.decoded.get_or_init(|| {
            let text = &self.body[self.span.clone()];
            if text.is_empty() {
                return Vec::new();
            }
            // The envelope's decode checked that this is an array of JSON values, so
            // this fails only on serde_json's nesting limit, as the envelope would have.
            let mut all: Vec<StepResult> = serde_json::from_slice::<Vec<&RawValue>>(text)
                .map(|r| r.into_iter().map(StepResult::from_raw).collect())
                .unwrap_or_default();
            if let Some(hidden) = self.hidden
                && hidden < all.len()
            {
                all.remove(hidden);
                for r in &mut all[hidden..] {
                    r.move_down();
                }
            }
            all
        })
    }
}

impl StepResult {
    /// Moves this result down one slot, as the step marker's result before it is left
    /// out ([`Results::hidden`]).
    fn move_down(&mut self) {
        match self {
            StepResult::Ack(a) => a.index = a.index.saturating_sub(1),
            StepResult::Push(p) => p.index = p.index.saturating_sub(1),
            StepResult::Kv(k) => {
                k.index = k.index.saturating_sub(1);
                k.op_index = k.op_index.saturating_sub(1);
            }
            StepResult::Timer(t) => t.index = t.index.saturating_sub(1),
            StepResult::Position(p) => p.index = p.index.saturating_sub(1),
            StepResult::Other(_) => {}
        }
    }
}

impl Committed {
    /// A commit whose results are the `results` array at `span` of `body` (an empty
    /// span: none), decoded when first read.
    pub(crate) fn from_answer(
        transaction_id: String,
        retried: bool,
        body: Bytes,
        span: Range<usize>,
    ) -> Committed {
        Committed {
            transaction_id,
            retried,
            results: Results {
                body,
                span,
                hidden: None,
                decoded: OnceLock::new(),
            },
        }
    }

    /// Leaves the result at `slot` (the SDK's step marker) out of what the caller reads.
    pub(crate) fn hide_slot(&mut self, slot: usize) {
        self.results.hidden = Some(slot);
    }

    /// Which kinds of Queen 2 result came back, as [`Capability`] bits: KV, timer,
    /// position (a Queen v0 broker leaves all out, Queen 2's engine positions), read
    /// from each result's `type` alone when they are not decoded yet.
    pub(crate) fn v2_results(&self) -> u8 {
        if let Some(decoded) = self.results.decoded.get() {
            return decoded.iter().fold(0, |bits, r| {
                bits | match r {
                    StepResult::Kv(_) => Capability::Kv.bit(),
                    StepResult::Timer(_) => Capability::Timers.bit(),
                    StepResult::Position(_) => Capability::Positions.bit(),
                    _ => 0,
                }
            });
        }
        let text = &self.results.body[self.results.span.clone()];
        serde_json::from_slice::<AnyV2>(text).map_or(0, |any| any.0)
    }

    /// One result per slot, in index order, decoded from the answer the first time
    /// they are read.
    ///
    /// ```
    /// # use queen_sdk::Ttl;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::StepResult;
    /// let c = client
    ///     .transaction()
    ///     .push("receipts", |p| p.payload(&"paid"))
    ///     .kv(|k| k.put("orders", "o-7", &"paid", Ttl::Forever))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// assert!(matches!(c.results(), [StepResult::Push(_), StepResult::Kv(_)]));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn results(&self) -> &[StepResult] {
        self.results.get()
    }

    /// The results, owned (see [`Committed::results`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let c = client.transaction().push("receipts", |p| p.payload(&"paid")).commit().await?;
    /// let results = c.committed().unwrap().into_results();
    /// assert_eq!(results.len(), 1);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn into_results(self) -> Vec<StepResult> {
        self.results.get();
        self.results.decoded.into_inner().unwrap_or_default()
    }

    /// The push results, in order.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let c = client
    ///     .transaction()
    ///     .push("a", |p| p.payload(&1))
    ///     .push("b", |p| p.payload(&2))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let queues: Vec<&str> = c.pushes().map(|p| p.queue.as_str()).collect();
    /// assert_eq!(queues, ["a", "b"]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn pushes(&self) -> impl Iterator<Item = &PushResult> {
        self.results().iter().filter_map(|r| match r {
            StepResult::Push(p) => Some(p),
            _ => None,
        })
    }

    /// The KV results, in order.
    ///
    /// ```
    /// # use queen_sdk::Ttl;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let c = client
    ///     .transaction()
    ///     .kv(|k| k.incr("stats", "a", 1, Ttl::Forever))
    ///     .kv(|k| k.incr("stats", "b", 5, Ttl::Forever))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let values: Vec<_> = c.kv().map(|k| k.value.clone()).collect();
    /// assert_eq!(values, [Some(1.into()), Some(5.into())]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn kv(&self) -> impl Iterator<Item = &KvResult> {
        self.results().iter().filter_map(|r| match r {
            StepResult::Kv(k) => Some(k),
            _ => None,
        })
    }

    /// The timer results, in order.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let c = client
    ///     .transaction()
    ///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(60)))
    ///     .timer("reminders", "o-8", |t| t.cancel())
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let statuses: Vec<&str> = c.timers().map(|t| t.status.as_str()).collect();
    /// assert_eq!(statuses, ["scheduled", "absent"]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn timers(&self) -> impl Iterator<Item = &TimerResult> {
        self.results().iter().filter_map(|r| match r {
            StepResult::Timer(t) => Some(t),
            _ => None,
        })
    }
}

/// Whether a `results` array holds a KV, timer or position result: one pass over its
/// text that allocates nothing, each element read as leniently as the decode reads it
/// (one that is not an object, or whose `type` is not a string, is some other result).
/// Reading each element's `type` through a small struct instead took 2.2 µs on a seed
/// step's answer, more than decoding its envelope.
struct AnyV2(u8);

impl<'de> Deserialize<'de> for AnyV2 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<AnyV2, D::Error> {
        struct Elements;
        impl<'de> Visitor<'de> for Elements {
            type Value = AnyV2;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an array of results")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<AnyV2, A::Error> {
                let mut bits = 0;
                while let Some(IsV2(v2)) = seq.next_element()? {
                    bits |= v2;
                }
                Ok(AnyV2(bits))
            }
        }
        d.deserialize_seq(Elements)
    }
}

/// One element of `results` (or its `type`'s value): the [`Capability`] bit of the
/// Queen 2 part it names, or 0.
struct IsV2(u8);

impl<'de> Deserialize<'de> for IsV2 {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<IsV2, D::Error> {
        d.deserialize_any(IsV2Visitor)
    }
}

/// A key of a result: whether it is `type` (read without copying it).
struct IsType(bool);

impl<'de> Deserialize<'de> for IsType {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<IsType, D::Error> {
        struct Key;
        impl Visitor<'_> for Key {
            type Value = IsType;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E>(self, v: &str) -> Result<IsType, E> {
                Ok(IsType(v == "type"))
            }
        }
        d.deserialize_str(Key)
    }
}

/// Any JSON value is `false` but a string naming a Queen 2 part, or an object whose
/// `type` is one.
struct IsV2Visitor;

impl<'de> Visitor<'de> for IsV2Visitor {
    type Value = IsV2;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_str<E>(self, v: &str) -> Result<IsV2, E> {
        Ok(IsV2(match v {
            "kv" => Capability::Kv.bit(),
            "timer" => Capability::Timers.bit(),
            "position" => Capability::Positions.bit(),
            _ => 0,
        }))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<IsV2, A::Error> {
        let mut v2 = 0;
        while let Some(IsType(is_type)) = map.next_key()? {
            if is_type {
                v2 = map.next_value::<IsV2>()?.0;
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(IsV2(v2))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<IsV2, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(IsV2(0))
    }
    fn visit_bool<E>(self, _: bool) -> Result<IsV2, E> {
        Ok(IsV2(0))
    }
    fn visit_i64<E>(self, _: i64) -> Result<IsV2, E> {
        Ok(IsV2(0))
    }
    fn visit_u64<E>(self, _: u64) -> Result<IsV2, E> {
        Ok(IsV2(0))
    }
    fn visit_f64<E>(self, _: f64) -> Result<IsV2, E> {
        Ok(IsV2(0))
    }
    fn visit_unit<E>(self) -> Result<IsV2, E> {
        Ok(IsV2(0))
    }
}

impl fmt::Debug for Committed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Committed")
            .field("transaction_id", &self.transaction_id)
            .field("results", &self.results())
            .field("retried", &self.retried)
            .finish()
    }
}

/// Equal when the ids, the retry flags and the decoded results are.
impl PartialEq for Committed {
    fn eq(&self, o: &Committed) -> bool {
        self.transaction_id == o.transaction_id
            && self.retried == o.retried
            && self.results() == o.results()
    }
}

/// The outcome of [`crate::TransactionBuilder::commit`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Commit, Ttl};
/// let step = || client.transaction().once("welcomed", "user-1", Ttl::days(365)).push("emails", |p| p.payload(&"welcome"));
/// for _ in 0..2 {
///     match step().commit().await? {
///         Commit::Committed(c) => println!("sent, in {}", c.transaction_id),
///         Commit::Gated { gate, .. } => {
///             assert!(gate.already_done()); // the `once` marker exists: sent before
///             assert_eq!((gate.index, gate.slot), (0, 1)); // kv[0], after the push's slot 0
///         }
///     }
/// }
/// assert_eq!(broker.inspect().messages("emails", "Default")?.len(), 1);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub enum Commit {
    /// Everything applied.
    Committed(Committed),
    /// A `required` KV operation did not apply: nothing was written. This is a value,
    /// not an error; [`Gate`](crate::Gate) says which gate refused and why, and
    /// [`Gate::already_done`](crate::Gate::already_done) whether that means the step was
    /// done before (a `once` marker that exists) or was refused (a lapsed lock, a failed
    /// condition).
    Gated {
        /// The id the broker minted for this call.
        transaction_id: String,
        /// The gate that refused the step.
        gate: crate::Gate,
        /// This came to a retry: the first attempt most probably committed.
        retried: bool,
    },
}

impl Commit {
    /// Whether everything applied.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let outcome = client.transaction().push("receipts", |p| p.payload(&"paid")).commit().await?;
    /// assert!(outcome.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_committed(&self) -> bool {
        matches!(self, Commit::Committed(_))
    }

    /// The committed results, if it committed; `None` when it was gated.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let step = || client.transaction().once("done", "job-9", Ttl::hours(1));
    /// assert!(step().commit().await?.committed().is_some());
    /// assert!(step().commit().await?.committed().is_none()); // gated
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn committed(self) -> Option<Committed> {
        match self {
            Commit::Committed(c) => Some(c),
            Commit::Gated { .. } => None,
        }
    }
}

/// The fields of a lost `required` gate in a rollback body: `failedIndex`, `kvReason`,
/// `version`, `value`.
pub(crate) fn gate_fields(b: &Value) -> (usize, String, Option<u64>, Option<Value>) {
    (
        b.get("failedIndex").and_then(Value::as_u64).unwrap_or(0) as usize,
        b.get("kvReason")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string(),
        b.get("version").and_then(Value::as_u64),
        b.get("value").filter(|v| !v.is_null()).cloned(),
    )
}
