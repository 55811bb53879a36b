//! The transaction log: each tenant's recent `POST /api/v1/transaction` calls, for an
//! operator's console (`GET /api/v1/transactions`, issue 44).
//!
//! It lives in the engine's memory, like the activity counters, and is **not durable**:
//! a restart starts every tenant's log empty. It is bounded three ways, so a busy or
//! hostile tenant cannot grow it: the last [`KEPT`] calls per tenant, the first
//! [`ITEMS`] elements of each list of a call (with a count of the rest), and every text
//! cut to [`TEXT_BYTES`] ([`ERROR_BYTES`] for an error), a cut one ending with `…`.
//! Worst case about 16 MB per tenant that ever made a call; a typical entry is a few
//! hundred bytes.
//!
//! Recording is off the storage path: the HTTP handler builds an [`Entry`] from the
//! request it parsed and the answer it got (a few short strings copied), then
//! [`TxnLog::record`] holds one mutex for a map lookup and a ring push. Nothing is
//! written to storage, and an entry goes to the calling tenant's ring only. What an
//! entry leaves to the read is resolved then, as the reader's tenant: the queue and
//! partition an ack names by partition id.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use super::kv::{KvKind, LostReason};
use super::timers::TimerOp;
use super::txn::{RollbackReason, StepResult, Transaction, TxnOp, TxnOutcome};
use crate::clock::Micros;
use crate::store::keys::Key;
use crate::store::records::{AckMark, PartitionRef};
use crate::store::{StoreError, T, View};

/// Calls kept per tenant; the oldest goes when a new one comes.
pub const KEPT: usize = 256;
/// Elements kept of each list of a call (acks, pushed items, KV ops, timers, positions).
pub const ITEMS: usize = 16;
/// Longest name or id kept, in bytes.
pub const TEXT_BYTES: usize = 256;
/// Longest error text kept, in bytes.
pub const ERROR_BYTES: usize = 1024;

/// `s`, cut to at most `max` bytes on a character boundary; a cut text ends with `…`
/// (so a cut id never names another message by accident).
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max - '…'.len_utf8();
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &s[..end])
}

fn text(s: &str) -> String {
    cut(s, TEXT_BYTES)
}

/// `s` cut to [`TEXT_BYTES`], as this log cuts a name (the timer log cuts the same way).
pub(crate) fn cut_text(s: &str) -> String {
    text(s)
}

/// The first [`ITEMS`] elements of a list, and how many were left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part<I> {
    /// The elements kept, in request order.
    pub items: Vec<I>,
    /// Elements left out.
    pub more: usize,
}

impl<I> Default for Part<I> {
    fn default() -> Self {
        Part {
            items: Vec::new(),
            more: 0,
        }
    }
}

impl<I> Part<I> {
    fn of<'a, S: 'a>(all: impl ExactSizeIterator<Item = &'a S>, f: impl Fn(&S) -> I) -> Self {
        let n = all.len();
        let items: Vec<I> = all.take(ITEMS).map(f).collect();
        Part {
            more: n - items.len(),
            items,
        }
    }
}

/// An ack of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckItem {
    /// The partition id as sent (resolved to its queue and partition when read).
    pub partition_id: String,
    /// The acked message's `transactionId`.
    pub transaction_id: String,
    /// The group acking.
    pub group: String,
    /// The status sent.
    pub status: AckMark,
    /// Committed: whether the ack dead-lettered the message; otherwise `None`.
    pub dlq: Option<bool>,
}

/// A pushed item of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PushItem {
    /// Its queue.
    pub queue: String,
    /// Its partition.
    pub partition: String,
    /// Its `transactionId`: as sent, or the one minted for it when the call committed.
    pub transaction_id: Option<String>,
    /// Committed: the partition's id.
    pub partition_id: Option<u64>,
    /// Committed: the message's offset (the first item's, for a repeat within the call).
    pub offset: Option<u64>,
    /// Committed: a repeat of an earlier item of the call, answered by it.
    pub duplicate: bool,
}

/// A KV operation of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvItem {
    /// Which operation.
    pub op: KvKind,
    /// Its namespace.
    pub ns: String,
    /// Its key; `None` for `getMany`, which names several.
    pub key: Option<String>,
}

/// A timer operation of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerItem {
    /// `schedule`, `reschedule` or `cancel`.
    pub op: &'static str,
    /// The queue.
    pub queue: String,
    /// The timer's key.
    pub timer_key: String,
}

/// A position of the call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PositionItem {
    /// The queue.
    pub queue: String,
    /// The partition.
    pub partition: String,
    /// The group whose cursor moves.
    pub group: String,
    /// The next offset the group reads.
    pub offset: u64,
}

/// The parts of a call, as parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parts {
    /// `operations` of type `ack`.
    pub acks: Part<AckItem>,
    /// The items of `operations` of type `push`, flattened.
    pub pushes: Part<PushItem>,
    /// `kv`.
    pub kv: Part<KvItem>,
    /// `timers`.
    pub timers: Part<TimerItem>,
    /// `positions`.
    pub positions: Part<PositionItem>,
}

impl Parts {
    /// The bounded copy of a parsed call's parts.
    pub fn of(t: &Transaction) -> Self {
        let acks: Vec<_> = t
            .ops
            .iter()
            .filter_map(|op| match op {
                TxnOp::Ack(a) => Some(a),
                TxnOp::Push(_) => None,
            })
            .collect();
        let pushes: Vec<_> = t
            .ops
            .iter()
            .filter_map(|op| match op {
                TxnOp::Push(items) => Some(items),
                TxnOp::Ack(_) => None,
            })
            .flatten()
            .collect();
        Parts {
            acks: Part::of(acks.iter(), |a| AckItem {
                partition_id: text(&a.partition_id),
                transaction_id: text(&a.transaction_id),
                group: text(&a.group),
                status: a.status,
                dlq: None,
            }),
            pushes: Part::of(pushes.iter(), |m| PushItem {
                queue: text(&m.queue),
                partition: text(&m.partition),
                transaction_id: m.transaction_id.as_deref().map(text),
                partition_id: None,
                offset: None,
                duplicate: false,
            }),
            kv: Part::of(t.kv.iter(), |op| KvItem {
                op: op.kind(),
                ns: text(op.ns()),
                key: op.key().map(text),
            }),
            timers: Part::of(t.timers.iter(), |op| {
                let (queue, key) = op.target();
                TimerItem {
                    op: match op {
                        TimerOp::Schedule(_) => "schedule",
                        TimerOp::Reschedule(_) => "reschedule",
                        TimerOp::Cancel { .. } => "cancel",
                    },
                    queue: text(queue),
                    timer_key: text(key),
                }
            }),
            positions: Part::of(t.positions.iter(), |p| PositionItem {
                queue: text(&p.queue),
                partition: text(&p.partition),
                group: text(&p.group),
                offset: p.offset,
            }),
        }
    }

    /// Adds what a commit answered to the acks and pushes kept: results come in the
    /// request's order, so the kept elements are the first results of their kind.
    fn settle(&mut self, results: &[StepResult]) {
        let acks = results.iter().filter_map(|r| match r {
            StepResult::Ack { dlq, .. } => Some(*dlq),
            _ => None,
        });
        for (item, dlq) in self.acks.items.iter_mut().zip(acks) {
            item.dlq = Some(dlq);
        }
        let pushes = results.iter().filter_map(|r| match r {
            StepResult::Push {
                transaction_id,
                partition_id,
                offset,
                duplicate,
                ..
            } => Some((transaction_id, *partition_id, *offset, *duplicate)),
            _ => None,
        });
        for (item, (txn, pid, offset, duplicate)) in self.pushes.items.iter_mut().zip(pushes) {
            item.transaction_id = Some(text(txn));
            item.partition_id = Some(pid);
            item.offset = Some(offset);
            item.duplicate = duplicate;
        }
    }
}

/// How a call ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Everything was applied.
    Committed,
    /// Nothing was applied: a guard fired; the reason and text are the answer's.
    RolledBack {
        /// The answer's `reason`.
        reason: RollbackReason,
        /// The answer's `error`.
        error: String,
        /// A lost KV precondition: the answer's `failedIndex`.
        failed_index: Option<usize>,
        /// A lost KV precondition: the answer's `kvReason`.
        kv_reason: Option<LostReason>,
    },
    /// Refused before anything of it was applied: a bad body, the storage cap, a
    /// stopping broker, or a storage failure. The HTTP edge says which status and code
    /// that was; the log keeps the engine's reason.
    Refused {
        /// Why.
        refusal: Refusal,
        /// The answer's `error`.
        error: String,
    },
}

/// Why a call was refused, in the engine's terms: the HTTP edge maps each to a status
/// and code (`http::error`), so the log holds no wire concern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Refusal {
    /// The body is not a valid transaction: its shape, or a rule of the API.
    Invalid,
    /// A KV operation breaks a rule of the KV API.
    InvalidKv,
    /// A timer breaks a rule of the timers API.
    InvalidTimer,
    /// A timer would fire later than the broker's horizon.
    TimerHorizon,
    /// A lock operation breaks a rule of the locks API.
    InvalidLock,
    /// A queue or partition name is over the key budget.
    NameTooLong,
    /// The body, or a value in it, is over its size limit.
    TooLarge,
    /// The body did not arrive within the body deadline.
    BodyTimeout,
    /// The writer's queue was full.
    Overloaded,
    /// An ephemeral queue was full and refuses more.
    QueueFull,
    /// The ephemeral queues were at their memory budget.
    EphemeralUnavailable,
    /// The broker was stopping.
    ShuttingDown,
    /// At the storage cap, or the disk is full.
    StorageFull,
    /// The storage failed to write or was being reopened; nothing was applied.
    StorageUnavailable,
    /// The storage failed.
    StorageFailure,
}

impl From<&crate::error::EngineError> for Refusal {
    fn from(e: &crate::error::EngineError) -> Self {
        use crate::error::EngineError as E;
        match e {
            E::BadRequest(_) => Refusal::Invalid,
            E::NameTooLong(_) => Refusal::NameTooLong,
            E::PayloadTooLarge(_) => Refusal::TooLarge,
            E::Overloaded | E::AnswersBusy(_) => Refusal::Overloaded,
            E::ShuttingDown => Refusal::ShuttingDown,
            E::KvRefusal(r) if r.too_large => Refusal::TooLarge,
            E::KvRefusal(_) => Refusal::InvalidKv,
            E::TimersBadRequest(_) => Refusal::InvalidTimer,
            E::TimerHorizonExceeded(_) => Refusal::TimerHorizon,
            E::LocksBadRequest(_) => Refusal::InvalidLock,
            E::QueueFull(_) => Refusal::QueueFull,
            E::EphemeralUnavailable(_) => Refusal::EphemeralUnavailable,
            E::StorageFull(_) => Refusal::StorageFull,
            E::StorageUnavailable(_) => Refusal::StorageUnavailable,
            E::Storage(_) => Refusal::StorageFailure,
        }
    }
}

/// One call of the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The tenant's sequence number of the call, from 1 (per tenant, as every counter a
    /// caller can read, so it tells nothing of another tenant's traffic).
    pub seq: u64,
    /// The broker's time when it was answered.
    pub at: Micros,
    /// The `transactionId` it was answered with (the call's id); `None` when refused.
    pub id: Option<String>,
    /// The caller's `User-Agent`.
    pub user_agent: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// What it asked for; empty when its body was refused before it was parsed.
    pub parts: Parts,
}

impl Entry {
    /// A call the engine answered (committed or rolled back).
    pub fn answered(
        mut parts: Parts,
        out: &TxnOutcome,
        at: Micros,
        user_agent: Option<&str>,
    ) -> Self {
        let (id, outcome) = match out {
            TxnOutcome::Committed { id, results } => {
                parts.settle(results);
                (id, Outcome::Committed)
            }
            TxnOutcome::RolledBack {
                id,
                reason,
                error,
                kv,
            } => (
                id,
                Outcome::RolledBack {
                    reason: *reason,
                    error: cut(error, ERROR_BYTES),
                    failed_index: kv.as_ref().map(|(slot, _)| *slot),
                    kv_reason: kv.as_ref().map(|(_, lost)| lost.reason),
                },
            ),
        };
        Entry {
            seq: 0,
            at,
            id: Some(text(id)),
            user_agent: user_agent.map(text),
            outcome,
            parts,
        }
    }

    /// A refused call; `parts` when its body was parsed.
    pub fn refused(
        parts: Option<Parts>,
        (refusal, error): (Refusal, &str),
        at: Micros,
        user_agent: Option<&str>,
    ) -> Self {
        Entry {
            seq: 0,
            at,
            id: None,
            user_agent: user_agent.map(text),
            outcome: Outcome::Refused {
                refusal,
                error: cut(error, ERROR_BYTES),
            },
            parts: parts.unwrap_or_default(),
        }
    }
}

/// One tenant's calls, oldest first.
#[derive(Default)]
struct Ring {
    last_seq: u64,
    entries: VecDeque<Arc<Entry>>,
}

impl Ring {
    /// Pushes `entry` under the next number; answers the entry dropped past [`KEPT`].
    fn push(&mut self, mut entry: Arc<Entry>) -> Option<Arc<Entry>> {
        self.last_seq += 1;
        if let Some(e) = Arc::get_mut(&mut entry) {
            e.seq = self.last_seq;
        }
        self.entries.push_back(entry);
        (self.entries.len() > KEPT)
            .then(|| self.entries.pop_front())
            .flatten()
    }
}

/// Every tenant's recent calls (see the module's text).
#[derive(Default)]
pub struct TxnLog {
    tenants: Mutex<HashMap<String, Ring>>,
}

impl TxnLog {
    /// Appends `entry` to `tenant`'s ring under the next sequence number, dropping the
    /// oldest past [`KEPT`]. The lock covers the map lookup and the push; the dropped
    /// entry is freed after it.
    pub fn record(&self, tenant: &str, entry: Entry) {
        // Allocated before the lock; unique until pushed, so its number is set in place.
        let entry = Arc::new(entry);
        let gone = {
            let mut tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
            // The tenant's name is copied once, at its first call.
            match tenants.get_mut(tenant) {
                Some(ring) => ring.push(entry),
                None => tenants.entry(tenant.to_string()).or_default().push(entry),
            }
        };
        drop(gone);
    }

    /// `tenant`'s last `limit` calls, newest first.
    pub fn recent(&self, tenant: &str, limit: usize) -> Vec<Arc<Entry>> {
        let tenants = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        tenants
            .get(tenant)
            .map(|r| r.entries.iter().rev().take(limit).cloned().collect())
            .unwrap_or_default()
    }
}

/// A read of the log: its entries and the partitions their acks name.
#[derive(Debug, Clone, Default)]
pub struct Recent {
    /// Newest first.
    pub entries: Vec<Arc<Entry>>,
    /// Partition id to its queue and partition, for each id an ack names that is the
    /// reader's tenant's and still there.
    pub partitions: HashMap<u64, PartitionRef>,
}

/// The queue and partition of each of `pids` that `tenant` holds.
pub fn partitions(
    view: &impl View,
    tenant: &str,
    pids: impl IntoIterator<Item = u64>,
) -> Result<HashMap<u64, PartitionRef>, StoreError> {
    let mut out = HashMap::new();
    for pid in pids {
        let key = Key::tenant(tenant).u64(pid).into_bytes();
        if let Some(p) = view.get_record::<PartitionRef>(T::PartitionIds, &key)? {
            out.insert(pid, p);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refused(n: u16) -> Entry {
        Entry::refused(None, (Refusal::Invalid, &n.to_string()), 0, None)
    }

    #[test]
    fn a_ring_keeps_the_last_calls_per_tenant_newest_first() {
        let log = TxnLog::default();
        for n in 0..(KEPT as u16 + 3) {
            log.record("a", refused(n));
        }
        log.record("b", refused(0));
        let a = log.recent("a", KEPT + 10);
        assert_eq!(a.len(), KEPT);
        assert_eq!(a[0].seq, KEPT as u64 + 3);
        assert_eq!(a[KEPT - 1].seq, 4);
        let b = log.recent("b", 10);
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].seq, 1, "sequence numbers are per tenant");
        assert!(log.recent("c", 10).is_empty());
        assert_eq!(log.recent("a", 2).len(), 2);
    }

    #[test]
    fn texts_are_cut_on_a_character_boundary_and_marked() {
        assert_eq!(cut("short", 8), "short");
        let long = "é".repeat(200);
        let c = cut(&long, TEXT_BYTES);
        assert!(c.len() <= TEXT_BYTES && c.ends_with('…'), "{c}");
        assert!(long.starts_with(c.trim_end_matches('…')));
    }
}
