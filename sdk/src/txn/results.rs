//! What a committed transaction answers: one typed result per slot of the index space.

use serde_json::Value;

/// A committed ack.
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
#[derive(Debug, Clone, PartialEq)]
pub struct KvResult {
    /// Its slot.
    pub index: usize,
    /// Its place in the `kv` array.
    pub op_index: usize,
    /// The operation (`put`, `putIfAbsent`, ...).
    pub op: String,
    /// Whether a write or check held (`None` for reads).
    pub applied: Option<bool>,
    /// Why it did not (`exists`, `absent`, `version`, `limit`, `type`).
    pub reason: Option<String>,
    /// The key.
    pub key: Option<String>,
    /// The value written, read, or found in the way.
    pub value: Option<Value>,
    /// The row's version.
    pub version: Option<u64>,
    /// For `get`: whether the key exists.
    pub found: Option<bool>,
    /// The whole element, for fields this type does not name (`rows`, `missing`, ...).
    pub raw: Value,
}

/// A timer operation's result.
#[derive(Debug, Clone, PartialEq)]
pub struct TimerResult {
    /// Its slot.
    pub index: usize,
    /// Its place in the `timers` array.
    pub op_index: usize,
    /// `scheduled`, `rescheduled`, `cancelled`, `absent` or `too_late`.
    pub status: String,
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

/// A position's result.
#[derive(Debug, Clone, PartialEq)]
pub struct PositionResult {
    /// Its slot.
    pub index: usize,
    /// Its place in the `positions` array.
    pub op_index: usize,
    /// The whole element (its shape is the broker's own).
    pub raw: Value,
}

/// One slot of a committed transaction's results.
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

impl StepResult {
    /// Decodes one element of `results`.
    pub(crate) fn parse(v: &Value) -> StepResult {
        let index = u(v, "index");
        match v.get("type").and_then(Value::as_str) {
            Some("ack") => StepResult::Ack(AckResult {
                index,
                transaction_id: s(v, "transactionId").unwrap_or_default(),
                dlq: v.get("dlq").and_then(Value::as_bool).unwrap_or(false),
            }),
            Some("push") => StepResult::Push(PushResult {
                index,
                transaction_id: s(v, "transactionId").unwrap_or_default(),
                message_id: s(v, "messageId").unwrap_or_default(),
                queue: s(v, "queueName").unwrap_or_default(),
                duplicate: v.get("duplicate").and_then(Value::as_bool).unwrap_or(false),
            }),
            Some("kv") => StepResult::Kv(KvResult {
                index,
                op_index: u(v, "opIndex"),
                op: s(v, "op").unwrap_or_default(),
                applied: v.get("applied").and_then(Value::as_bool),
                reason: s(v, "reason"),
                key: s(v, "key"),
                value: v.get("value").cloned(),
                version: v.get("version").and_then(Value::as_u64),
                found: v.get("found").and_then(Value::as_bool),
                raw: v.clone(),
            }),
            Some("timer") => StepResult::Timer(TimerResult {
                index,
                op_index: u(v, "opIndex"),
                status: s(v, "status").unwrap_or_default(),
                ok: v.get("ok").and_then(Value::as_bool).unwrap_or(false),
                queue: s(v, "queue").unwrap_or_default(),
                timer_key: s(v, "timerKey").unwrap_or_default(),
                txn: s(v, "txn"),
                message_id: s(v, "messageId"),
                deliver_at: s(v, "deliverAt"),
            }),
            Some("position") => StepResult::Position(PositionResult {
                index,
                op_index: u(v, "opIndex"),
                raw: v.clone(),
            }),
            _ => StepResult::Other(v.clone()),
        }
    }
}

/// A committed transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Committed {
    /// The id the broker minted for this call (not a dedup key).
    pub transaction_id: String,
    /// One result per slot, in index order.
    pub results: Vec<StepResult>,
    /// The commit came after a retry.
    pub retried: bool,
}

impl Committed {
    /// The push results, in order.
    pub fn pushes(&self) -> impl Iterator<Item = &PushResult> {
        self.results.iter().filter_map(|r| match r {
            StepResult::Push(p) => Some(p),
            _ => None,
        })
    }

    /// The KV results, in order.
    pub fn kv(&self) -> impl Iterator<Item = &KvResult> {
        self.results.iter().filter_map(|r| match r {
            StepResult::Kv(k) => Some(k),
            _ => None,
        })
    }

    /// The timer results, in order.
    pub fn timers(&self) -> impl Iterator<Item = &TimerResult> {
        self.results.iter().filter_map(|r| match r {
            StepResult::Timer(t) => Some(t),
            _ => None,
        })
    }
}

/// The outcome of [`crate::TransactionBuilder::commit`].
#[derive(Debug, Clone, PartialEq)]
#[must_use]
pub enum Commit {
    /// Everything applied.
    Committed(Committed),
    /// A `required` KV operation lost its precondition: nothing was written. This is a
    /// value, not an error: a gate that holds someone else's marker usually means the
    /// step was already done.
    Gated {
        /// The id the broker minted for this call.
        transaction_id: String,
        /// The slot of the operation that lost.
        failed_index: usize,
        /// `exists`, `absent`, `version`, `limit` or `type`.
        kv_reason: String,
        /// The row's current version, if it exists.
        version: Option<u64>,
        /// The row's current value, if it exists.
        value: Option<Value>,
        /// This came to a retry: the first attempt most probably committed.
        retried: bool,
    },
}

impl Commit {
    /// Whether everything applied.
    pub fn is_committed(&self) -> bool {
        matches!(self, Commit::Committed(_))
    }

    /// The committed results, if it committed.
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
