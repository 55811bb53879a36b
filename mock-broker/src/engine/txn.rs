//! `POST /api/v1/transaction`: a worker's whole step as one atomic write.
//!
//! The parts arrive checked and parsed (`http::wire::txn`), then are applied in the
//! order of the spec's rollback reasons (acks, pushes, positions, KV, timers) in one
//! staging view. The first guard that fires discards everything staged and answers the
//! rollback; otherwise every result is placed at its slot of the one index space
//! (operations, then kv, then timers, then positions).

use std::collections::{BTreeSet, HashMap};

use serde::{Deserialize, Serialize};

use super::ack::{self, Ack};
use super::groups::set_position;
use super::kv::{self, KvKind, KvOp, KvResult, Lost};
use super::push::{NewMessage, append};
use super::queues::{PartitionEntry, partition_key};
use super::timers::{self, TimerOp, TimerResult};
use crate::store::records::PartitionRecord;
use crate::store::{StoreError, T, Tx};

/// Most positions in one call.
pub const MAX_POSITIONS: usize = 16_384;

/// One element of `operations`.
#[derive(Debug, Clone)]
pub enum TxnOp {
    /// An ack; its `lease_id` is the one it carries itself, if any.
    Ack(Ack),
    /// A push of one or more items.
    Push(Vec<NewMessage>),
}

/// One element of `positions`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    /// The queue.
    pub queue: String,
    /// The group whose cursor moves.
    pub group: String,
    /// The partition.
    pub partition: String,
    /// The next offset the group reads.
    pub offset: u64,
}

/// A parsed transaction.
#[derive(Debug, Clone, Default)]
pub struct Transaction {
    /// `operations`, in order.
    pub ops: Vec<TxnOp>,
    /// `requiredLeases`.
    pub required_leases: Vec<String>,
    /// `kv`.
    pub kv: Vec<KvOp>,
    /// `timers`.
    pub timers: Vec<TimerOp>,
    /// `positions`.
    pub positions: Vec<Position>,
}

impl Transaction {
    /// Whether applying it may store new data (pushes, KV writes, timers), so the
    /// storage cap applies; acks and positions alone always go through.
    pub fn adds_data(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, TxnOp::Push(_)))
            || self.kv.iter().any(|op| op.kind().adds_data())
            || self.timers.iter().any(|op| op.adds_data())
    }

    /// Stamps the caller's subject on every pushed message (`producerSub` comes from the
    /// token, never from the request).
    pub fn stamp_producer(&mut self, sub: Option<&str>) {
        for op in &mut self.ops {
            if let TxnOp::Push(items) = op {
                for item in items {
                    item.producer_sub = sub.map(str::to_string);
                }
            }
        }
    }
}

/// What one part of a committed transaction did, at its slot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum StepResult {
    /// An ack applied.
    Ack {
        /// The acked message.
        transaction_id: String,
        /// The ack dead-lettered it.
        dlq: bool,
    },
    /// A message pushed (or, `duplicate`, a repeat within the call answered by the first).
    Push {
        /// Its dedup key.
        transaction_id: String,
        /// Its id.
        message_id: String,
        /// Its queue.
        queue: String,
        /// Its partition's id (the transaction log links a push to its message by it).
        partition_id: u64,
        /// Its offset in the partition.
        offset: u64,
        /// A repeat of an earlier item of this call.
        duplicate: bool,
    },
    /// A group's cursor moved.
    Position {
        /// Its index within `positions`.
        op_index: usize,
        /// Where it moved.
        position: Position,
    },
    /// A KV operation.
    Kv {
        /// Its index within `kv`.
        op_index: usize,
        /// Which operation.
        kind: KvKind,
        /// What it did.
        result: KvResult,
    },
    /// A timer operation.
    Timer {
        /// Its index within `timers`.
        op_index: usize,
        /// What it did.
        result: TimerResult,
    },
}

/// Why a transaction rolled back, in the order the guards are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RollbackReason {
    /// An ack was refused (lease, fencing, status).
    RejectedAck,
    /// A pushed message is already in its partition's dedup window.
    Duplicate,
    /// A position is outside its partition.
    RejectedPosition,
    /// A `required` KV precondition lost.
    KvPrecondition,
}

impl RollbackReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RejectedAck => "rejected_ack",
            Self::Duplicate => "duplicate",
            Self::RejectedPosition => "rejected_position",
            Self::KvPrecondition => "kv_precondition",
        }
    }
}

/// The answer of a transaction: kept as the request record too, so a retried call is
/// answered from it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum TxnOutcome {
    /// Everything was applied.
    Committed {
        /// The call's id.
        id: String,
        /// One per slot of the index space.
        results: Vec<StepResult>,
    },
    /// Nothing was applied.
    RolledBack {
        /// The call's id.
        id: String,
        /// Which guard fired.
        reason: RollbackReason,
        /// For a person.
        error: String,
        /// A lost KV precondition: its slot and why.
        kv: Option<(usize, Lost)>,
    },
}

impl TxnOutcome {
    /// Whether it committed.
    pub fn committed(&self) -> bool {
        matches!(self, Self::Committed { .. })
    }
}

/// Discards everything staged and answers the rollback.
fn rollback(tx: &mut Tx, id: &str, reason: RollbackReason, error: String) -> TxnOutcome {
    tx.discard();
    TxnOutcome::RolledBack {
        id: id.to_string(),
        reason,
        error,
        kv: None,
    }
}

/// Finds each ack's lease: its own, else the single lease named by `requiredLeases`
/// and the other acks together, else none (unfenced).
fn resolve_leases(t: &Transaction) -> Vec<Option<String>> {
    let acks: Vec<&Ack> = t
        .ops
        .iter()
        .filter_map(|o| match o {
            TxnOp::Ack(a) => Some(a),
            TxnOp::Push(_) => None,
        })
        .collect();
    acks.iter()
        .enumerate()
        .map(|(i, a)| {
            if let Some(own) = &a.lease_id {
                return Some(own.clone());
            }
            let named: BTreeSet<&str> = t
                .required_leases
                .iter()
                .map(String::as_str)
                .filter(|l| !l.is_empty())
                .chain(
                    acks.iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .filter_map(|(_, o)| o.lease_id.as_deref()),
                )
                .collect();
            (named.len() == 1).then(|| named.into_iter().next().unwrap().to_string())
        })
        .collect()
}

/// Applies the transaction; answers the commit or the rollback.
pub fn run(tx: &mut Tx, tenant: &str, t: &Transaction, id: &str) -> Result<TxnOutcome, StoreError> {
    // Slots of the one index space: operations (a push takes one per item), kv,
    // timers, positions.
    let mut op_slot = Vec::with_capacity(t.ops.len());
    let mut next = 0;
    for op in &t.ops {
        op_slot.push(next);
        next += match op {
            TxnOp::Ack(_) => 1,
            TxnOp::Push(items) => items.len(),
        };
    }
    let kv_base = next;
    let timer_base = kv_base + t.kv.len();
    let pos_base = timer_base + t.timers.len();
    let mut results: Vec<Option<StepResult>> = vec![None; pos_base + t.positions.len()];

    // 1. Acks.
    let leases = resolve_leases(t);
    let mut call = ack::AckCall::new();
    let mut ack_no = 0;
    for (op, &slot) in t.ops.iter().zip(&op_slot) {
        let TxnOp::Ack(a) = op else { continue };
        let resolved = Ack {
            lease_id: leases[ack_no].clone(),
            ..a.clone()
        };
        ack_no += 1;
        let out = ack::ack(tx, tenant, &resolved, &mut call)?;
        if !out.success {
            let why = out.error.unwrap_or_default();
            let error = format!(
                "QACK the ack of {} in partition {} was rejected ({why}); the transaction rolled back",
                a.transaction_id, a.partition_id
            );
            return Ok(rollback(tx, id, RollbackReason::RejectedAck, error));
        }
        results[slot] = Some(StepResult::Ack {
            transaction_id: a.transaction_id.clone(),
            dlq: out.dlq,
        });
    }

    call.finish(tx, tenant)?;

    // 2. Pushes. A repeat inside the call is first-wins; a key already in the
    // partition's window rolls everything back.
    let mut seen: HashMap<(String, String, String), (String, u64, u64)> = HashMap::new();
    for (op, &slot) in t.ops.iter().zip(&op_slot) {
        let TxnOp::Push(items) = op else { continue };
        for (j, item) in items.iter().enumerate() {
            let slot = slot + j;
            if let Some(txn) = &item.transaction_id
                && let Some((mid, pid, offset)) =
                    seen.get(&(item.queue.clone(), item.partition.clone(), txn.clone()))
            {
                results[slot] = Some(StepResult::Push {
                    transaction_id: txn.clone(),
                    message_id: mid.clone(),
                    queue: item.queue.clone(),
                    partition_id: *pid,
                    offset: *offset,
                    duplicate: true,
                });
                continue;
            }
            let a = append(tx, tenant, item.clone())?;
            if a.duplicate {
                let error = format!(
                    "QDUP a pushed message to {}/{} is a duplicate (original offset {}); the transaction rolled back",
                    item.queue, item.partition, a.offset
                );
                return Ok(rollback(tx, id, RollbackReason::Duplicate, error));
            }
            seen.insert(
                (
                    item.queue.clone(),
                    item.partition.clone(),
                    a.transaction_id.clone(),
                ),
                (a.message_id.clone(), a.partition_id, a.offset),
            );
            results[slot] = Some(StepResult::Push {
                transaction_id: a.transaction_id,
                message_id: a.message_id,
                queue: item.queue.clone(),
                partition_id: a.partition_id,
                offset: a.offset,
                duplicate: false,
            });
        }
    }

    // 3. Positions.
    for (i, p) in t.positions.iter().enumerate() {
        let slot = pos_base + i;
        let key = partition_key(tenant, &p.queue, &p.partition);
        let part = tx.get::<PartitionRecord>(T::Partitions, &key)?;
        let Some(rec) = part.filter(|r| p.offset <= r.next_offset) else {
            let error = format!(
                "QPOS position {} on {}/{} for {} is not in the partition; the transaction rolled back",
                p.offset, p.queue, p.partition, p.group
            );
            return Ok(rollback(tx, id, RollbackReason::RejectedPosition, error));
        };
        let entry = PartitionEntry {
            name: p.partition.clone(),
            rec,
        };
        set_position(tx, tenant, &p.queue, &entry, &p.group, p.offset)?;
        results[slot] = Some(StepResult::Position {
            op_index: i,
            position: p.clone(),
        });
    }

    // 4. KV.
    for (i, op) in t.kv.iter().enumerate() {
        let slot = kv_base + i;
        let result = kv::apply(tx, tenant, op)?;
        if let (Some(lost), true) = (result.lost(), op.required()) {
            let error = "QKV a required KV precondition failed; the transaction rolled back";
            let lost = lost.clone();
            let mut out = rollback(tx, id, RollbackReason::KvPrecondition, error.into());
            if let TxnOutcome::RolledBack { kv, .. } = &mut out {
                *kv = Some((slot, lost));
            }
            return Ok(out);
        }
        results[slot] = Some(StepResult::Kv {
            op_index: i,
            kind: op.kind(),
            result,
        });
    }

    // 5. Timers.
    for (i, op) in t.timers.iter().enumerate() {
        let slot = timer_base + i;
        let result = timers::apply(tx, tenant, op)?;
        results[slot] = Some(StepResult::Timer {
            op_index: i,
            result,
        });
    }

    Ok(TxnOutcome::Committed {
        id: id.to_string(),
        // Every slot was filled above: each part writes its own range.
        results: results.into_iter().flatten().collect(),
    })
}
