//! A reference model of the transaction spec, for the properties (`prop.*` cases).
//!
//! It holds one queue with a few partitions, one consumer group's cursors and leases
//! on them, the dedup window (the default 3,600 s: a `transactionId` once stored in a
//! partition stays a duplicate for the whole test) and one KV namespace. Each step of a
//! generated sequence is first applied here, and the broker's answer is compared with
//! what the model predicts. The model is pure: it knows nothing of HTTP, and the ids the
//! broker mints (message ids, lease ids) are handed to it from the broker's answers.
//!
//! What it follows, from `transaction.md` and `wire.md`:
//!
//! - a partition is an ordered log; a push of a `(partition, transactionId)` already
//!   stored (or repeated earlier in the same call) is a duplicate of the original;
//! - the group's progress on a partition is one cursor (`wire.md` 4a, "ack as commit");
//!   a pop serves a partition only when the group holds no live lease there, delivers
//!   the contiguous run from the cursor, and leases it; a pop of any partition with
//!   `partitions=N` claims every partition with work under one lease;
//! - a fenced ack (in a transaction, or alone on `POST /api/v1/ack`) needs the
//!   partition's live lease for the group and a message inside the leased batch, else
//!   `rejected_ack` (alone: `success: false`); a `completed` ack at offset k commits the
//!   cursor to k+1 (every earlier message of the batch is done with it), one below the
//!   cursor is a no-op, and the lease is released when the cursor reaches the batch end;
//! - a named group in `new` mode is subscribed at its first pop of the queue: what
//!   every partition held then is skipped, and everything pushed afterwards, on any
//!   partition, new ones too, is delivered; `all` mode and queue mode read everything;
//! - a transaction checks its acks, then its pushes (an item already stored:
//!   `duplicate`; a repeat inside the call: stored once, `duplicate: true`), then its KV
//!   operations (a lost `required` one: `kv_precondition`); the first guard that fires
//!   rolls everything back; a malformed part, or a body with nothing in it, is a 400 that
//!   changes nothing;
//! - `incr` counts from 0 on an absent key and loses with `limit` outside its bounds or
//!   `type` on a non-number; `putIfAbsent` loses with `exists` and reports the winner's
//!   value;
//! - a seek to the end moves the group's cursor to the end of every partition and
//!   releases its leases there.

use std::collections::BTreeMap;

use serde_json::Value;

/// One stored message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stored {
    /// Its `transactionId`.
    pub txn: String,
    /// Its `messageId`, once the broker has told it.
    pub message_id: Option<String>,
}

/// The group's lease on a partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    /// The broker's `leaseId`.
    pub id: String,
    /// The offsets delivered under it.
    pub batch: Vec<u64>,
}

/// One partition of the queue, and the group's state on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Partition {
    /// The log, by offset.
    pub log: Vec<Stored>,
    /// The group's cursor: the next offset it reads; everything before it is done.
    pub cursor: u64,
    /// The group's live lease, if any (leases in the tests never expire).
    pub lease: Option<Lease>,
}

impl Partition {
    /// Whether anything was ever stored here (the partition exists).
    pub fn exists(&self) -> bool {
        !self.log.is_empty()
    }

    /// The offset of the message with `txn`, if stored (the dedup window).
    pub fn offset_of(&self, txn: &str) -> Option<u64> {
        self.log.iter().position(|m| m.txn == txn).map(|o| o as u64)
    }

    /// Whether the group is done with the message at `offset` (it is below the cursor).
    pub fn is_done(&self, offset: u64) -> bool {
        offset < self.cursor
    }

    fn append(&mut self, txn: &str) -> u64 {
        self.log.push(Stored {
            txn: txn.to_string(),
            message_id: None,
        });
        self.log.len() as u64 - 1
    }
}

/// Where a group starts reading (`subscriptionMode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// From the beginning: `all`, and queue mode (which ignores the hints).
    All,
    /// `new`: from the group's first pop of the queue on; `subscribed` once it popped.
    New {
        /// Whether the first pop happened.
        subscribed: bool,
    },
}

/// The verdict on one item of `POST /api/v1/push`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PushVerdict {
    /// Stored at `offset`.
    Queued {
        /// Its offset.
        offset: u64,
    },
    /// Already stored: the original's offset and message id.
    Duplicate {
        /// The original's offset.
        offset: u64,
        /// The original's message id, when known.
        message_id: Option<String>,
    },
}

/// One pushed item of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    /// The partition (index into [`Model::parts`]).
    pub part: usize,
    /// Its `transactionId`.
    pub txn: String,
}

/// One element of a transaction's `operations`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TxnOp {
    /// An ack (`completed`) fenced by `lease`.
    Ack {
        /// The message's partition.
        part: usize,
        /// The message's offset.
        offset: u64,
        /// The lease it carries.
        lease: String,
    },
    /// A push of one or more items.
    Push(Vec<Item>),
}

/// One element of a transaction's `kv`.
#[derive(Debug, Clone, PartialEq)]
pub enum KvOp {
    /// `incr` by `delta`, within `[min, max]`.
    Incr {
        /// The key.
        key: String,
        /// The step.
        delta: i64,
        /// Lowest allowed result.
        min: Option<i64>,
        /// Highest allowed result.
        max: Option<i64>,
        /// A gate: a loss rolls the transaction back.
        required: bool,
    },
    /// `putIfAbsent` of `value`.
    PutIfAbsent {
        /// The key.
        key: String,
        /// The value.
        value: Value,
        /// A gate: a loss rolls the transaction back.
        required: bool,
    },
}

impl KvOp {
    /// Whether it is a gate.
    pub fn required(&self) -> bool {
        match self {
            KvOp::Incr { required, .. } | KvOp::PutIfAbsent { required, .. } => *required,
        }
    }
}

/// A transaction as the model sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Txn {
    /// `operations`, in order.
    pub ops: Vec<TxnOp>,
    /// `kv`, in order (each key at most once).
    pub kv: Vec<KvOp>,
    /// The body carries a malformed part: a 400.
    pub malformed: bool,
}

/// The predicted element of `results` at one slot.
#[derive(Debug, Clone, PartialEq)]
pub enum Slot {
    /// An ack that succeeded.
    Ack,
    /// A pushed item.
    Push {
        /// Its partition.
        part: usize,
        /// Its `transactionId`.
        txn: String,
        /// A repeat of an earlier item of the same call.
        duplicate: bool,
        /// Where it (or the item it repeats) is stored.
        offset: u64,
    },
    /// A KV operation.
    Kv {
        /// Its place in the `kv` array.
        op_index: usize,
        /// Whether it applied.
        applied: bool,
        /// The `value` the result must carry, where the spec says which.
        value: Option<Value>,
        /// The losing reason.
        reason: Option<&'static str>,
    },
}

/// What a transaction must answer.
#[derive(Debug, Clone, PartialEq)]
pub enum TxnVerdict {
    /// HTTP 400; nothing changed.
    Refused,
    /// HTTP 200, `success: true`, one result per slot.
    Committed(Vec<Slot>),
    /// HTTP 200, `success: false`, `results: []`; nothing changed.
    RolledBack {
        /// `rejected_ack`, `duplicate` or `kv_precondition`.
        reason: &'static str,
        /// For `kv_precondition`: the lost operation's slot, its reason and (for
        /// `exists`) the current value.
        kv: Option<(usize, &'static str, Option<Value>)>,
    },
}

impl std::fmt::Display for TxnVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TxnVerdict::Refused => write!(f, "HTTP 400"),
            TxnVerdict::Committed(slots) => {
                write!(f, "commit [")?;
                for (i, s) in slots.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    match s {
                        Slot::Ack => write!(f, "ack")?,
                        Slot::Push { duplicate, .. } => {
                            write!(f, "{}", if *duplicate { "push dup" } else { "push" })?
                        }
                        Slot::Kv {
                            applied: true,
                            value,
                            ..
                        } => write!(f, "kv={}", value.as_ref().unwrap_or(&Value::Null))?,
                        Slot::Kv { reason, .. } => write!(f, "kv lost {}", reason.unwrap_or("?"))?,
                    }
                }
                write!(f, "]")
            }
            TxnVerdict::RolledBack { reason, kv: None } => write!(f, "rollback {reason}"),
            TxnVerdict::RolledBack {
                reason,
                kv: Some((i, why, _)),
            } => write!(f, "rollback {reason} (failedIndex {i}, {why})"),
        }
    }
}

/// The queue, the group and the namespace.
#[derive(Debug, Clone, PartialEq)]
pub struct Model {
    /// The partitions, by index.
    pub parts: Vec<Partition>,
    /// The namespace's live keys.
    pub kv: BTreeMap<String, Value>,
    /// The group's starting point.
    pub start: Start,
}

impl Model {
    /// An empty queue of `partitions` partitions, a group that reads from the
    /// beginning, and an empty namespace.
    pub fn new(partitions: usize) -> Self {
        Model {
            parts: vec![Partition::default(); partitions],
            kv: BTreeMap::new(),
            start: Start::All,
        }
    }

    /// The same, for a named group in `new` mode that has not popped yet.
    pub fn new_mode(partitions: usize) -> Self {
        Model {
            start: Start::New { subscribed: false },
            ..Model::new(partitions)
        }
    }

    /// Records a pop of the group (before its answer is predicted): the first pop of a
    /// `new` group fixes its start, so everything stored until now is skipped, on
    /// every partition; partitions created later are read from their first message.
    pub fn popping(&mut self) {
        if self.start == (Start::New { subscribed: false }) {
            self.start = Start::New { subscribed: true };
            for p in &mut self.parts {
                p.cursor = p.cursor.max(p.log.len() as u64);
            }
        }
    }

    /// Whether the queue has any partition yet.
    pub fn queue_exists(&self) -> bool {
        self.parts.iter().any(Partition::exists)
    }

    /// Pushes one item (`POST /api/v1/push` handles its items one after the other).
    pub fn push(&mut self, part: usize, txn: &str) -> PushVerdict {
        let p = &mut self.parts[part];
        match p.offset_of(txn) {
            Some(offset) => PushVerdict::Duplicate {
                offset,
                message_id: p.log[offset as usize].message_id.clone(),
            },
            None => PushVerdict::Queued {
                offset: p.append(txn),
            },
        }
    }

    /// Records the broker's message id for a stored message.
    pub fn set_message_id(&mut self, part: usize, offset: u64, id: &str) {
        if let Some(m) = self.parts[part].log.get_mut(offset as usize)
            && m.message_id.is_none()
        {
            m.message_id = Some(id.to_string());
        }
    }

    /// The offsets a pop of up to `batch` from `part` delivers (empty: nothing): the
    /// contiguous run from the cursor, unless the group holds a lease there.
    pub fn pop(&self, part: usize, batch: usize) -> Vec<u64> {
        let p = &self.parts[part];
        if p.lease.is_some() {
            return Vec::new();
        }
        (p.cursor..p.log.len() as u64).take(batch).collect()
    }

    /// What a pop of any partition with `partitions` at least the partition count and
    /// a `batch` larger than the queue delivers: every partition with work that the
    /// group holds no lease on, each with its whole run from the cursor.
    pub fn pop_any(&self) -> Vec<(usize, Vec<u64>)> {
        (0..self.parts.len())
            .map(|i| (i, self.pop(i, usize::MAX)))
            .filter(|(_, o)| !o.is_empty())
            .collect()
    }

    /// Records the lease of a pop that delivered `batch`.
    pub fn lease(&mut self, part: usize, id: &str, batch: Vec<u64>) {
        self.parts[part].lease = Some(Lease {
            id: id.to_string(),
            batch,
        });
    }

    /// A `completed` ack of the message at `offset` of `part`, fenced by `lease`: `None`
    /// when refused (not the partition's live lease, or outside its batch), else
    /// `(noop, lease_released)`. Ack as commit: the cursor moves to offset + 1 (a repeat
    /// below it is a no-op); the lease ends when the cursor reaches its batch's end.
    pub fn ack(&mut self, part: usize, offset: u64, lease: &str) -> Option<(bool, bool)> {
        let p = &mut self.parts[part];
        let fenced = p
            .lease
            .as_ref()
            .is_some_and(|l| l.id == lease && l.batch.contains(&offset));
        if !fenced {
            return None;
        }
        if p.is_done(offset) {
            return Some((true, false));
        }
        p.cursor = offset + 1;
        let batch_done = p
            .lease
            .as_ref()
            .is_some_and(|l| l.batch.iter().all(|o| p.is_done(*o)));
        if batch_done {
            p.lease = None;
        }
        Some((false, batch_done))
    }

    /// Seeks the group to the end of every partition, releasing its leases.
    pub fn seek_to_end(&mut self) {
        for p in self.parts.iter_mut().filter(|p| p.exists()) {
            p.cursor = p.log.len() as u64;
            p.lease = None;
        }
    }

    /// What `t` must answer, and the state after it.
    pub fn transaction(&self, t: &Txn) -> (TxnVerdict, Model) {
        if t.malformed || (t.ops.is_empty() && t.kv.is_empty()) {
            return (TxnVerdict::Refused, self.clone());
        }
        let rollback = |reason, kv| (TxnVerdict::RolledBack { reason, kv }, self.clone());
        let mut m = self.clone();
        // The one index space: an ack takes a slot, a push one per item, then the kv.
        let mut at = Vec::with_capacity(t.ops.len());
        let mut next = 0;
        for op in &t.ops {
            at.push(next);
            next += match op {
                TxnOp::Ack { .. } => 1,
                TxnOp::Push(items) => items.len(),
            };
        }
        let kv_base = next;
        let mut slots = vec![Slot::Ack; kv_base + t.kv.len()];

        // 1. Acks, in order.
        for op in &t.ops {
            let TxnOp::Ack {
                part,
                offset,
                lease,
            } = op
            else {
                continue;
            };
            if m.ack(*part, *offset, lease).is_none() {
                return rollback("rejected_ack", None);
            }
        }

        // 2. Pushes, in order: a repeat inside the call is stored once.
        let mut seen: BTreeMap<(usize, &str), u64> = BTreeMap::new();
        for (op, &slot) in t.ops.iter().zip(&at) {
            let TxnOp::Push(items) = op else { continue };
            for (j, it) in items.iter().enumerate() {
                let (duplicate, offset) = match seen.get(&(it.part, it.txn.as_str())) {
                    Some(&o) => (true, o),
                    None => {
                        if m.parts[it.part].offset_of(&it.txn).is_some() {
                            return rollback("duplicate", None);
                        }
                        let o = m.parts[it.part].append(&it.txn);
                        seen.insert((it.part, it.txn.as_str()), o);
                        (false, o)
                    }
                };
                slots[slot + j] = Slot::Push {
                    part: it.part,
                    txn: it.txn.clone(),
                    duplicate,
                    offset,
                };
            }
        }

        // 3. KV, in order.
        for (i, op) in t.kv.iter().enumerate() {
            let slot = kv_base + i;
            match m.kv_apply(op) {
                Ok(value) => {
                    slots[slot] = Slot::Kv {
                        op_index: i,
                        applied: true,
                        value: Some(value),
                        reason: None,
                    }
                }
                Err((why, current)) => {
                    // The spec names the value a loser reports only for `exists`.
                    let value = current.filter(|_| why == "exists");
                    if op.required() {
                        return rollback("kv_precondition", Some((slot, why, value)));
                    }
                    slots[slot] = Slot::Kv {
                        op_index: i,
                        applied: false,
                        value,
                        reason: Some(why),
                    };
                }
            }
        }
        (TxnVerdict::Committed(slots), m)
    }

    /// Applies one KV operation: the new value, or the losing reason and current value.
    fn kv_apply(&mut self, op: &KvOp) -> Result<Value, (&'static str, Option<Value>)> {
        match op {
            KvOp::Incr {
                key,
                delta,
                min,
                max,
                ..
            } => {
                let current = self.kv.get(key).cloned();
                let base = match &current {
                    None => 0,
                    Some(Value::Number(n)) if n.is_i64() => n.as_i64().unwrap_or_default(),
                    Some(_) => return Err(("type", current)),
                };
                let Some(n) = base.checked_add(*delta) else {
                    return Err(("limit", current));
                };
                if min.is_some_and(|m| n < m) || max.is_some_and(|m| n > m) {
                    return Err(("limit", current));
                }
                self.kv.insert(key.clone(), n.into());
                Ok(n.into())
            }
            KvOp::PutIfAbsent { key, value, .. } => match self.kv.get(key) {
                Some(current) => Err(("exists", Some(current.clone()))),
                None => {
                    self.kv.insert(key.clone(), value.clone());
                    Ok(value.clone())
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn push(part: usize, txn: &str) -> TxnOp {
        TxnOp::Push(vec![Item {
            part,
            txn: txn.into(),
        }])
    }

    fn ack(part: usize, offset: u64, lease: &str) -> TxnOp {
        TxnOp::Ack {
            part,
            offset,
            lease: lease.into(),
        }
    }

    fn commit(m: &mut Model, t: &Txn) -> Vec<Slot> {
        let (v, next) = m.transaction(t);
        let TxnVerdict::Committed(slots) = v else {
            panic!("expected a commit, got {v}");
        };
        *m = next;
        slots
    }

    #[test]
    fn pushes_deduplicate_per_partition() {
        let mut m = Model::new(2);
        assert_eq!(m.push(0, "a"), PushVerdict::Queued { offset: 0 });
        assert_eq!(m.push(1, "a"), PushVerdict::Queued { offset: 0 });
        m.set_message_id(0, 0, "m0");
        assert_eq!(
            m.push(0, "a"),
            PushVerdict::Duplicate {
                offset: 0,
                message_id: Some("m0".into())
            }
        );
        assert_eq!(m.push(0, "b"), PushVerdict::Queued { offset: 1 });
    }

    #[test]
    fn a_resent_ack_whose_lease_was_released_is_rejected() {
        let mut m = Model::new(1);
        m.push(0, "a");
        m.push(0, "b");
        assert_eq!(m.pop(0, 1), vec![0]);
        m.lease(0, "L1", vec![0]);
        assert!(m.pop(0, 1).is_empty(), "leased");
        let t = Txn {
            ops: vec![ack(0, 0, "L1"), push(0, "c")],
            ..Default::default()
        };
        commit(&mut m, &t);
        assert_eq!(m.parts[0].cursor, 1);
        assert!(m.parts[0].lease.is_none(), "the whole batch is done");
        let (v, _) = m.transaction(&t);
        assert_eq!(
            v,
            TxnVerdict::RolledBack {
                reason: "rejected_ack",
                kv: None
            }
        );
        assert_eq!(m.pop(0, 5), vec![1, 2]);
    }

    #[test]
    fn a_resent_ack_under_a_live_lease_is_a_noop_and_the_push_decides() {
        let mut m = Model::new(1);
        m.push(0, "a");
        m.push(0, "b");
        m.lease(0, "L1", m.pop(0, 2));
        let t = Txn {
            ops: vec![ack(0, 0, "L1"), push(0, "c")],
            ..Default::default()
        };
        commit(&mut m, &t);
        assert!(m.parts[0].lease.is_some(), "offset 1 is still out");
        let (v, _) = m.transaction(&t);
        assert_eq!(
            v,
            TxnVerdict::RolledBack {
                reason: "duplicate",
                kv: None
            }
        );
        let only_ack = Txn {
            ops: vec![ack(0, 0, "L1")],
            ..Default::default()
        };
        assert_eq!(commit(&mut m, &only_ack), vec![Slot::Ack]);
    }

    #[test]
    fn repeats_inside_a_call_are_stored_once() {
        let mut m = Model::new(1);
        let t = Txn {
            ops: vec![TxnOp::Push(vec![
                Item {
                    part: 0,
                    txn: "x".into(),
                },
                Item {
                    part: 0,
                    txn: "x".into(),
                },
            ])],
            ..Default::default()
        };
        let slots = commit(&mut m, &t);
        assert!(matches!(
            slots[1],
            Slot::Push {
                duplicate: true,
                offset: 0,
                ..
            }
        ));
        assert_eq!(m.parts[0].log.len(), 1);
    }

    #[test]
    fn guards_fire_in_the_spec_order() {
        let mut m = Model::new(1);
        m.push(0, "a");
        m.kv.insert("k".into(), json!(1));
        let t = Txn {
            ops: vec![push(0, "a"), ack(0, 0, "nope")],
            kv: vec![KvOp::PutIfAbsent {
                key: "k".into(),
                value: json!(2),
                required: true,
            }],
            malformed: false,
        };
        assert!(matches!(
            m.transaction(&t).0,
            TxnVerdict::RolledBack {
                reason: "rejected_ack",
                ..
            }
        ));
        let t = Txn {
            ops: vec![push(0, "a")],
            ..t
        };
        assert!(matches!(
            m.transaction(&t).0,
            TxnVerdict::RolledBack {
                reason: "duplicate",
                ..
            }
        ));
        let t = Txn {
            ops: vec![push(0, "b")],
            ..t
        };
        assert_eq!(
            m.transaction(&t).0,
            TxnVerdict::RolledBack {
                reason: "kv_precondition",
                kv: Some((1, "exists", Some(json!(1))))
            }
        );
    }

    #[test]
    fn an_ungated_incr_counts_twice_and_gates_lose() {
        let mut m = Model::new(1);
        let incr = Txn {
            kv: vec![KvOp::Incr {
                key: "n".into(),
                delta: 2,
                min: None,
                max: Some(4),
                required: false,
            }],
            ..Default::default()
        };
        commit(&mut m, &incr);
        commit(&mut m, &incr);
        assert_eq!(m.kv["n"], json!(4));
        let slots = commit(&mut m, &incr);
        assert_eq!(
            slots,
            vec![Slot::Kv {
                op_index: 0,
                applied: false,
                value: None,
                reason: Some("limit")
            }]
        );
        m.kv.insert("s".into(), json!("text"));
        let typed = Txn {
            kv: vec![KvOp::Incr {
                key: "s".into(),
                delta: 1,
                min: None,
                max: None,
                required: true,
            }],
            ..Default::default()
        };
        assert_eq!(
            m.transaction(&typed).0,
            TxnVerdict::RolledBack {
                reason: "kv_precondition",
                kv: Some((0, "type", None))
            }
        );
    }

    #[test]
    fn refusals_and_seeks() {
        let mut m = Model::new(2);
        assert_eq!(m.transaction(&Txn::default()).0, TxnVerdict::Refused);
        let bad = Txn {
            ops: vec![push(0, "a")],
            malformed: true,
            ..Default::default()
        };
        let (v, after) = m.transaction(&bad);
        assert_eq!((v, &after), (TxnVerdict::Refused, &m));
        m.push(0, "a");
        m.push(0, "b");
        m.lease(0, "L", m.pop(0, 1));
        m.seek_to_end();
        assert!(m.pop(0, 5).is_empty());
        assert!(m.parts[0].lease.is_none());
        m.push(0, "c");
        m.push(1, "d");
        assert_eq!(m.pop(0, 5), vec![2]);
        assert_eq!(m.pop(1, 5), vec![0]);
    }

    #[test]
    fn an_ack_commits_the_cursor_past_every_earlier_message_of_its_batch() {
        let mut m = Model::new(1);
        for t in ["a", "b", "c", "d"] {
            m.push(0, t);
        }
        m.lease(0, "L1", m.pop(0, 3));
        // The middle one: a and b are done, c stays out under the lease.
        commit(
            &mut m,
            &Txn {
                ops: vec![ack(0, 1, "L1")],
                ..Default::default()
            },
        );
        assert_eq!(m.parts[0].cursor, 2);
        assert!(m.parts[0].lease.is_some());
        assert!(m.pop(0, 5).is_empty(), "c is still leased");
        // a is below the cursor: a no-op under the live lease.
        let slots = commit(
            &mut m,
            &Txn {
                ops: vec![ack(0, 0, "L1")],
                ..Default::default()
            },
        );
        assert_eq!((slots, m.parts[0].cursor), (vec![Slot::Ack], 2));
        // The last one ends the batch and the lease.
        commit(
            &mut m,
            &Txn {
                ops: vec![ack(0, 2, "L1")],
                ..Default::default()
            },
        );
        assert!(m.parts[0].lease.is_none());
        assert_eq!(m.pop(0, 5), vec![3]);
        // Acking only the last message of a batch completes it at once.
        m.push(0, "e");
        m.lease(0, "L2", m.pop(0, 5));
        commit(
            &mut m,
            &Txn {
                ops: vec![ack(0, 4, "L2")],
                ..Default::default()
            },
        );
        assert!(m.parts[0].lease.is_none());
        assert!(m.pop(0, 5).is_empty());
        // And a fenced ack under the lease it released rolls back.
        let (v, _) = m.transaction(&Txn {
            ops: vec![ack(0, 3, "L2")],
            ..Default::default()
        });
        assert_eq!(
            v,
            TxnVerdict::RolledBack {
                reason: "rejected_ack",
                kv: None
            }
        );
    }

    #[test]
    fn a_new_group_skips_what_was_stored_before_its_first_pop_on_every_partition() {
        let mut m = Model::new_mode(3);
        m.push(0, "old");
        m.popping();
        assert!(m.pop_any().is_empty(), "the backlog is skipped");
        m.popping();
        m.push(0, "new");
        m.push(2, "late");
        assert_eq!(m.pop_any(), vec![(0, vec![1]), (2, vec![0])]);
        let mut all = Model::new(3);
        all.push(0, "old");
        all.popping();
        assert_eq!(all.pop_any(), vec![(0, vec![0])]);
    }
}
