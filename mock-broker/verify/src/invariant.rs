//! Invariants: what must hold of the broker's state once a worker has finished, whatever
//! faults it met.
//!
//! They are checked against the stored state, not through the API the worker used, so a
//! worker cannot pass by reading back its own mistakes: in process, read directly with
//! the broker's inspector (with the `in-process` feature); against a broker URL, read by the
//! verifier's own client (never through the fault proxy) with the broker's public API.
//! [`State`]'s accessors ([`State::messages`], [`State::cursor`], [`State::kv_row`],
//! [`State::timers`], [`State::dead_letters`]) work the same on both; the helpers use
//! only them. The helpers cover what exactly-once means for a Queen worker: every input
//! acknowledged, every output pushed exactly once, every state row holding the value of
//! exactly one application, nothing dead-lettered unless expected. [`Invariant::new`]
//! states anything else.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

#[cfg(feature = "in-process")]
use queen_mock_broker::MockBroker;
#[cfg(feature = "in-process")]
use queen_mock_broker::harness::Inspector;
#[cfg(feature = "in-process")]
use queen_mock_broker::store::StoreError;
use queen_sdk::DeadLetter;
use serde_json::Value;

use crate::check::Input;
use crate::stored::{StoredMessage, StoredTimer};

/// Where a [`State`] reads from: the in-process broker's storage, or a broker's public
/// API (`remote`). Invariants are sync; a remote backend blocks on each read.
pub(crate) trait Backend: Sync {
    /// The in-process broker's storage; `None` against a URL.
    #[cfg(feature = "in-process")]
    fn inspector(&self) -> Option<Inspector<'_>>;
    /// The stored messages of a partition, in offset order.
    fn messages(&self, queue: &str, partition: &str) -> Result<Vec<StoredMessage>, StateError>;
    /// A group's position on a partition; `None` if it has none there.
    fn cursor(
        &self,
        queue: &str,
        partition: &str,
        group: &str,
    ) -> Result<Option<GroupCursor>, StateError>;
    /// A KV row.
    fn kv_row(&self, ns: &str, key: &str) -> Result<Option<KvEntry>, StateError>;
    /// A queue's pending timers.
    fn timers(&self, queue: &str) -> Result<Vec<StoredTimer>, StateError>;
    /// The broker's time, in microseconds since the epoch.
    fn now_micros(&self) -> i64;
}

#[cfg(feature = "in-process")]
impl Backend for MockBroker {
    fn inspector(&self) -> Option<Inspector<'_>> {
        Some(self.inspect())
    }

    fn messages(&self, queue: &str, partition: &str) -> Result<Vec<StoredMessage>, StateError> {
        let stored = self.inspect().messages(queue, partition)?;
        Ok(stored.into_iter().map(StoredMessage::from).collect())
    }

    fn cursor(
        &self,
        queue: &str,
        partition: &str,
        group: &str,
    ) -> Result<Option<GroupCursor>, StateError> {
        let now = self.clock().now_micros();
        Ok(self
            .inspect()
            .cursor(queue, partition, group)?
            .map(|c| GroupCursor {
                next_offset: c.next_offset,
                lease_held: c.lease_id.is_some() && c.lease_expires_at.is_some_and(|t| t > now),
                lease_id: c.lease_id,
            }))
    }

    fn kv_row(&self, ns: &str, key: &str) -> Result<Option<KvEntry>, StateError> {
        Ok(self.inspect().kv_row(ns, key)?.map(|r| KvEntry {
            // The broker stores what it parsed as JSON: it parses back.
            value: serde_json::from_str(&r.value).unwrap_or(Value::Null),
            version: r.version,
            expires_at: r.expires_at,
        }))
    }

    fn timers(&self, queue: &str) -> Result<Vec<StoredTimer>, StateError> {
        let pending = self.inspect().timers(queue)?;
        Ok(pending.into_iter().map(StoredTimer::from).collect())
    }

    fn now_micros(&self) -> i64 {
        self.clock().now_micros()
    }
}

/// What [`State::inspect`] unwinds with when there is no in-process broker (a check
/// against a URL): the remote runner catches it and reports the run as one that could
/// not be carried out, naming the invariant, instead of a panic.
#[cfg_attr(not(feature = "in-process"), allow(dead_code))]
pub(crate) struct InProcessOnly;

/// A [`State`] read that failed: the storage of the in-process broker, or a call to a
/// broker's API, answered an error. Invariants usually turn it into their own error
/// text with `map_err(|e| e.to_string())?`.
///
/// ```
/// use queen_verify::{Invariant, State};
/// let read = Invariant::new("receipts readable", |s: &State<'_>| {
///     s.messages("receipts", "Default").map(|_| ()).map_err(|e| e.to_string())
/// });
/// # let _ = read;
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The in-process broker's storage could not be read.
    #[cfg(feature = "in-process")]
    #[error("reading the broker's storage: {0}")]
    Store(#[from] StoreError),
    /// A call to the broker's API failed.
    #[error("reading {what} through the broker's API: {source}")]
    Api {
        /// What was being read (`messages of receipts/Default`).
        what: String,
        /// The SDK's error.
        source: queen_sdk::Error,
    },
    /// The broker answered something this reader cannot use.
    #[error("reading {what} through the broker's API: {why}")]
    Unreadable {
        /// What was being read.
        what: String,
        /// What was wrong with the answer.
        why: String,
    },
}

/// A consumer group's position on one partition, as [`State::cursor`] reads it.
///
/// ```
/// let acked = queen_verify::Invariant::new("orders/Default fully acked", |s| {
///     let c = s.cursor("orders", "Default", s.group()).map_err(|e| e.to_string())?;
///     match c {
///         Some(c) if c.next_offset as usize >= s.inputs().len() && !c.lease_held => Ok(()),
///         other => Err(format!("{other:?}")),
///     }
/// });
/// # let _ = acked;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupCursor {
    /// The first offset the group has not yet acknowledged.
    pub next_offset: u64,
    /// Whether a lease is held there now.
    pub lease_held: bool,
    /// The lease recorded there, when the backend tells it (in process it is kept
    /// after it lapses, until the broker notices; a broker's API gives no lease id).
    pub lease_id: Option<String>,
}

/// A KV row, as [`State::kv_row`] reads it.
///
/// ```
/// let stock = queen_verify::Invariant::new("stock never negative", |s| {
///     let row = s.kv_row("stock", "sku-1").map_err(|e| e.to_string())?;
///     match row.and_then(|r| r.value.as_i64()) {
///         Some(n) if n < 0 => Err(format!("stock/sku-1 = {n}")),
///         _ => Ok(()),
///     }
/// });
/// # let _ = stock;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct KvEntry {
    /// The value.
    pub value: Value,
    /// Its version: new on every write.
    pub version: u64,
    /// When it lapses, in microseconds since the epoch; `None`: never.
    pub expires_at: Option<i64>,
}

/// The broker's final state, as an invariant sees it: the stored state, the inputs and
/// the group the worker consumed them as, and the dead letters of the inputs' queues.
///
/// The same accessors work in process and against a broker URL
/// ([`WorkerCheck::against`](crate::WorkerCheck::against)): [`State::messages`],
/// [`State::cursor`], [`State::kv_row`], [`State::timers`], [`State::dead_letters`].
/// [`State::inspect`] reads the in-process broker's storage only.
///
/// ```
/// use queen_verify::{Invariant, State};
/// // An invariant of your own: the `audit` queue holds one entry per input.
/// let audit = Invariant::new("one audit entry per input", |s: &State<'_>| {
///     let n = s.messages("audit", "Default").map_err(|e| e.to_string())?.len();
///     if n == s.inputs().len() { Ok(()) } else { Err(format!("{n} audit entries")) }
/// });
/// assert_eq!(audit.name(), "one audit entry per input");
/// ```
pub struct State<'a> {
    pub(crate) broker: &'a dyn Backend,
    pub(crate) inputs: &'a [Input],
    pub(crate) group: &'a str,
    pub(crate) dead: &'a [DeadLetter],
}

impl<'a> State<'a> {
    /// Reads the in-process broker's storage directly: messages, cursors, KV rows,
    /// timers. In-process runs only: a check against a broker URL has no storage to
    /// read, and a run whose invariant calls this is reported as one that could not be
    /// carried out (a setup failure naming the invariant), not run. The accessors
    /// [`State::messages`], [`State::cursor`], [`State::kv_row`] and [`State::timers`]
    /// read the same things on both.
    ///
    /// ```
    /// let reminders = queen_verify::Invariant::new("a reminder per input", |s| {
    ///     let n = s.inspect().timers("reminders").map_err(|e| e.to_string())?.len();
    ///     if n == s.inputs().len() { Ok(()) } else { Err(format!("{n} reminders")) }
    /// });
    /// # let _ = reminders;
    /// ```
    #[cfg(feature = "in-process")]
    #[cfg_attr(docsrs, doc(cfg(feature = "in-process")))]
    pub fn inspect(&self) -> Inspector<'a> {
        match self.broker.inspector() {
            Some(i) => i,
            // Not a panic: `resume_unwind` skips the panic hook, and the remote runner
            // catches it to report which invariant needs an in-process broker.
            None => std::panic::resume_unwind(Box::new(InProcessOnly)),
        }
    }

    /// The stored messages of `queue`'s `partition`, in offset order (none if it does
    /// not exist). Against a URL they are read by listing the partition and reading
    /// each message's payload.
    ///
    /// ```
    /// let once = queen_verify::Invariant::new("one receipt per input", |s| {
    ///     let n = s.messages("receipts", "Default").map_err(|e| e.to_string())?.len();
    ///     if n == s.inputs().len() { Ok(()) } else { Err(format!("{n} receipts")) }
    /// });
    /// # let _ = once;
    /// ```
    pub fn messages(&self, queue: &str, partition: &str) -> Result<Vec<StoredMessage>, StateError> {
        self.broker.messages(queue, partition)
    }

    /// `group`'s position on `queue`'s `partition` (`None`: it has none there yet).
    /// Against a URL it is read from the group's detail
    /// (`GET /api/v1/consumer-groups/{group}`).
    ///
    /// ```
    /// let cursor = queen_verify::Invariant::new("the group read the first partition", |s| {
    ///     let c = s.cursor("orders", "Default", s.group()).map_err(|e| e.to_string())?;
    ///     c.map(|_| ()).ok_or_else(|| format!("group {} never read it", s.group()))
    /// });
    /// # let _ = cursor;
    /// ```
    pub fn cursor(
        &self,
        queue: &str,
        partition: &str,
        group: &str,
    ) -> Result<Option<GroupCursor>, StateError> {
        self.broker.cursor(queue, partition, group)
    }

    /// The KV row `ns/key` (`None`: absent). Against a URL an expired row reads as
    /// absent, as the broker's API answers it.
    ///
    /// ```
    /// let paid = queen_verify::Invariant::new("order o-1 paid", |s| {
    ///     let row = s.kv_row("orders", "o-1").map_err(|e| e.to_string())?;
    ///     match row {
    ///         Some(r) if r.value["status"] == "paid" => Ok(()),
    ///         other => Err(format!("orders/o-1: {other:?}")),
    ///     }
    /// });
    /// # let _ = paid;
    /// ```
    pub fn kv_row(&self, ns: &str, key: &str) -> Result<Option<KvEntry>, StateError> {
        self.broker.kv_row(ns, key)
    }

    /// The pending timers of `queue`, by key. Against a URL they are listed with
    /// `GET /api/v1/timers/{queue}`.
    ///
    /// ```
    /// let none_left = queen_verify::Invariant::new("no reminder left", |s| {
    ///     let left = s.timers("reminders").map_err(|e| e.to_string())?;
    ///     if left.is_empty() { Ok(()) } else { Err(format!("{} pending", left.len())) }
    /// });
    /// # let _ = none_left;
    /// ```
    pub fn timers(&self, queue: &str) -> Result<Vec<StoredTimer>, StateError> {
        self.broker.timers(queue)
    }

    /// The inputs pushed before the worker started, in order.
    ///
    /// ```
    /// let queues = queen_verify::Invariant::new("inputs on orders", |s| {
    ///     if s.inputs().iter().all(|i| i.queue == "orders") { Ok(()) } else { Err("elsewhere".into()) }
    /// });
    /// # let _ = queues;
    /// ```
    pub fn inputs(&self) -> &'a [Input] {
        self.inputs
    }

    /// The consumer group the worker consumes the inputs as.
    ///
    /// ```
    /// let cursor = queen_verify::Invariant::new("the group read the first partition", |s| {
    ///     let c = s.cursor("orders", "Default", s.group()).map_err(|e| e.to_string())?;
    ///     c.map(|_| ()).ok_or_else(|| format!("group {} never read it", s.group()))
    /// });
    /// # let _ = cursor;
    /// ```
    pub fn group(&self) -> &'a str {
        self.group
    }

    /// The dead letters of the inputs' queues.
    ///
    /// ```
    /// let few = queen_verify::Invariant::new("at most one dead letter", |s| {
    ///     if s.dead_letters().len() <= 1 { Ok(()) } else { Err(format!("{}", s.dead_letters().len())) }
    /// });
    /// # let _ = few;
    /// ```
    pub fn dead_letters(&self) -> &'a [DeadLetter] {
        self.dead
    }

    /// The broker's time in microseconds since the epoch: in process, its manual
    /// clock; against a URL, the verifier's system clock.
    ///
    /// ```
    /// let live = queen_verify::Invariant::new("orders/o-1 has not expired", |s| {
    ///     let row = s.kv_row("orders", "o-1").map_err(|e| e.to_string())?;
    ///     match row.and_then(|r| r.expires_at) {
    ///         Some(t) if t <= s.now_micros() => Err("expired".into()),
    ///         _ => Ok(()),
    ///     }
    /// });
    /// # let _ = live;
    /// ```
    pub fn now_micros(&self) -> i64 {
        self.broker.now_micros()
    }
}

type CheckFn = dyn Fn(&State<'_>) -> Result<(), String> + Send + Sync;

/// A named property of the final state. Build one with a helper or with
/// [`Invariant::new`]; give them to [`WorkerCheck::invariant`](crate::WorkerCheck::invariant).
///
/// ```
/// use queen_verify::Invariant;
/// let checks = [
///     Invariant::inputs_acked(),
///     Invariant::pushed_once("receipts", "orderId", [("customer-1", "order-1")]),
///     Invariant::kv_equals("orders", "order-1", serde_json::json!({"status": "paid"})),
///     Invariant::no_dead_letters(),
/// ];
/// assert_eq!(checks[3].name(), "nothing dead-lettered");
/// ```
#[derive(Clone)]
pub struct Invariant {
    name: String,
    check: Arc<CheckFn>,
    /// It says which inputs may end dead-lettered ([`Invariant::dead_letters`]), so the
    /// check's own "no input dead-lettered" is left to it.
    judges_dead_letters: bool,
}

impl fmt::Debug for Invariant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Invariant")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Invariant {
    /// An invariant named `name`: `check` answers `Err(what is wrong)` when it does not
    /// hold.
    ///
    /// ```
    /// use queen_verify::{Invariant, State};
    /// let no_timers = Invariant::new("no reminder left", |s: &State<'_>| {
    ///     let left = s.timers("reminders").map_err(|e| e.to_string())?;
    ///     if left.is_empty() { Ok(()) } else { Err(format!("{} pending", left.len())) }
    /// });
    /// # let _ = no_timers;
    /// ```
    pub fn new(
        name: impl Into<String>,
        check: impl Fn(&State<'_>) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        Invariant {
            name: name.into(),
            check: Arc::new(check),
            judges_dead_letters: false,
        }
    }

    /// Its name, as reports print it.
    ///
    /// ```
    /// assert_eq!(queen_verify::Invariant::inputs_acked().name(), "every input acknowledged");
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    pub(crate) fn check(&self, state: &State<'_>) -> Result<(), String> {
        (self.check)(state)
    }

    /// Whether it judges the inputs' dead letters itself.
    pub(crate) fn judges_dead_letters(&self) -> bool {
        self.judges_dead_letters
    }

    /// Every input acknowledged by the worker's group: the group's cursor is past every
    /// input of each partition, so none is left in flight or unread. The broker applies
    /// a `completed` ack at most once (a second one is a no-op), so with the outputs'
    /// and state's invariants this is "acknowledged exactly once"; a dead-lettered
    /// input is acknowledged too, which [`Invariant::no_dead_letters`] rules out.
    ///
    /// ```
    /// let acked = queen_verify::Invariant::inputs_acked();
    /// # let _ = acked;
    /// ```
    pub fn inputs_acked() -> Self {
        Invariant::new("every input acknowledged", |s: &State<'_>| {
            let mut per_partition: BTreeMap<(&str, &str), u64> = BTreeMap::new();
            for i in s.inputs() {
                *per_partition.entry((&i.queue, &i.partition)).or_default() += 1;
            }
            let mut missing = Vec::new();
            for ((queue, partition), n) in per_partition {
                let cursor = s
                    .cursor(queue, partition, s.group())
                    .map_err(|e| e.to_string())?;
                let done = cursor.as_ref().map_or(0, |c| c.next_offset);
                if done < n {
                    missing.push(format!(
                        "{queue}/{partition}: {done} of {n} acknowledged by group {}{}",
                        s.group(),
                        match cursor {
                            Some(GroupCursor {
                                lease_id: Some(l), ..
                            }) => format!(" (lease {l} outstanding)"),
                            Some(GroupCursor {
                                lease_held: true, ..
                            }) => " (a lease outstanding)".to_string(),
                            _ => String::new(),
                        }
                    ));
                }
            }
            if missing.is_empty() {
                Ok(())
            } else {
                Err(missing.join("; "))
            }
        })
    }

    /// Every expected output pushed exactly once: in `queue`, each `(partition, key)`
    /// of `expected` is the value of payload field `field` of exactly one stored
    /// message, and no other message is stored in those partitions. A worker whose
    /// pushes carry derived transaction ids cannot store one twice (the broker refuses
    /// the duplicate); one that pushes under fresh ids stores a second copy when a step
    /// runs twice, and this finds it.
    ///
    /// ```
    /// let receipts = queen_verify::Invariant::pushed_once(
    ///     "receipts",
    ///     "orderId",
    ///     [("customer-1", "order-1"), ("customer-2", "order-2")],
    /// );
    /// assert_eq!(receipts.name(), "receipts: each expected orderId pushed exactly once");
    /// ```
    pub fn pushed_once<P, K>(
        queue: impl Into<String>,
        field: impl Into<String>,
        expected: impl IntoIterator<Item = (P, K)>,
    ) -> Self
    where
        P: Into<String>,
        K: Into<String>,
    {
        let field: String = field.into();
        let queue: String = queue.into();
        let key_of = {
            let field = field.clone();
            move |m: &StoredMessage| match m.data.get(&field) {
                Some(Value::String(s)) => Some(s.clone()),
                Some(v) => Some(v.to_string()),
                None => None,
            }
        };
        let name = format!("{queue}: each expected {field} pushed exactly once");
        Self::pushed_once_by(name, queue, expected, key_of)
    }

    /// [`Invariant::pushed_once`] with your own key of a stored message (`None`: it is
    /// no expected output, and is reported as unexpected).
    ///
    /// ```
    /// let by_id = queen_verify::Invariant::pushed_once_by(
    ///     "receipts by payload id",
    ///     "receipts",
    ///     [("Default", "7")],
    ///     |m| m.data.get("id").map(|v| v.to_string()),
    /// );
    /// # let _ = by_id;
    /// ```
    pub fn pushed_once_by<P, K>(
        name: impl Into<String>,
        queue: impl Into<String>,
        expected: impl IntoIterator<Item = (P, K)>,
        key_of: impl Fn(&StoredMessage) -> Option<String> + Send + Sync + 'static,
    ) -> Self
    where
        P: Into<String>,
        K: Into<String>,
    {
        let queue: String = queue.into();
        let mut wanted: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (p, k) in expected {
            wanted.entry(p.into()).or_default().push(k.into());
        }
        Invariant::new(name, move |s: &State<'_>| {
            let mut wrong = Vec::new();
            for (partition, keys) in &wanted {
                let stored = s.messages(&queue, partition).map_err(|e| e.to_string())?;
                let mut seen: BTreeMap<String, Vec<u64>> = BTreeMap::new();
                for m in &stored {
                    match key_of(m) {
                        Some(k) => seen.entry(k).or_default().push(m.offset),
                        None => wrong.push(format!(
                            "{queue}/{partition} offset {}: a message with no key ({})",
                            m.offset, m.data
                        )),
                    }
                }
                for k in keys {
                    match seen.remove(k).unwrap_or_default().as_slice() {
                        [_] => {}
                        [] => wrong.push(format!("{queue}/{partition}: {k} never pushed")),
                        many => wrong.push(format!(
                            "{queue}/{partition}: {k} pushed {} times (offsets {many:?}, transaction ids {:?})",
                            many.len(),
                            stored
                                .iter()
                                .filter(|m| many.contains(&m.offset))
                                .map(|m| m.transaction_id.as_str())
                                .collect::<Vec<_>>()
                        )),
                    }
                }
                for (k, offsets) in seen {
                    wrong.push(format!(
                        "{queue}/{partition}: unexpected {k} (offsets {offsets:?})"
                    ));
                }
            }
            if wrong.is_empty() {
                Ok(())
            } else {
                Err(wrong.join("; "))
            }
        })
    }

    /// The KV row `ns/key` exists, has not expired, and holds `value`: the value of
    /// exactly one application of each step (an ungated write applied twice, such as an
    /// `incr`, shows here).
    ///
    /// ```
    /// let total = queen_verify::Invariant::kv_equals("revenue", "customer-1", serde_json::json!(30));
    /// assert_eq!(total.name(), "kv revenue/customer-1 = 30");
    /// ```
    pub fn kv_equals(ns: impl Into<String>, key: impl Into<String>, value: Value) -> Self {
        let (ns, key) = (ns.into(), key.into());
        Invariant::new(format!("kv {ns}/{key} = {value}"), move |s: &State<'_>| {
            let row = s.kv_row(&ns, &key).map_err(|e| e.to_string())?;
            let Some(row) = row else {
                return Err(format!("{ns}/{key} is missing"));
            };
            if row.expires_at.is_some_and(|t| t <= s.now_micros()) {
                return Err(format!("{ns}/{key} has expired"));
            }
            let stored = row.value;
            if stored == value {
                Ok(())
            } else {
                Err(format!("{ns}/{key} = {stored}, expected {value}"))
            }
        })
    }

    /// No message of the inputs' queues is in the dead-letter queue.
    ///
    /// ```
    /// let none = queen_verify::Invariant::no_dead_letters();
    /// # let _ = none;
    /// ```
    pub fn no_dead_letters() -> Self {
        Self::dead_letters(Vec::<String>::new()).renamed("nothing dead-lettered")
    }

    /// Exactly these inputs (by transaction id) are dead-lettered, none other: for a
    /// worker that is meant to reject some inputs.
    ///
    /// ```
    /// let poison = queen_verify::Invariant::dead_letters(["order-13"]);
    /// assert_eq!(poison.name(), "dead letters are exactly [\"order-13\"]");
    /// ```
    pub fn dead_letters<S: Into<String>>(expected: impl IntoIterator<Item = S>) -> Self {
        let mut expected: Vec<String> = expected.into_iter().map(Into::into).collect();
        expected.sort();
        let mut judge = Invariant::new(
            format!("dead letters are exactly {expected:?}"),
            move |s: &State<'_>| {
                let mut got: Vec<String> = s
                    .dead_letters()
                    .iter()
                    .map(|d| d.transaction_id.clone())
                    .collect();
                got.sort();
                if got == expected {
                    Ok(())
                } else {
                    Err(format!(
                        "dead-lettered: {}",
                        s.dead_letters()
                            .iter()
                            .map(|d| format!(
                                "{} ({}/{}: {})",
                                d.transaction_id,
                                d.queue,
                                d.partition,
                                d.error_message.as_deref().unwrap_or("no reason")
                            ))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
            },
        );
        judge.judges_dead_letters = true;
        judge
    }

    /// The same check under another name.
    ///
    /// ```
    /// let i = queen_verify::Invariant::inputs_acked().renamed("orders consumed");
    /// assert_eq!(i.name(), "orders consumed");
    /// ```
    pub fn renamed(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }
}
