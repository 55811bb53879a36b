//! Retention: deleting the messages a queue's retention options say to delete.
//!
//! A queue with `retentionEnabled: true` (the official wire types' gate: "retention only
//! runs when this is on") loses, from the head of each partition's log:
//! - with `retentionSeconds` N > 0, every message created more than N seconds ago,
//!   consumed or not;
//! - with `completedRetentionSeconds` N > 0, every message created more than N seconds
//!   ago that is completed: below the cursor of every consumer group that has read the
//!   partition (a partition nobody has read keeps everything).
//!
//! Both rules only ever remove a prefix of a log (creation times grow with offsets, and
//! so does "below every cursor"), so a sweep walks each partition from its first stored
//! message and stops at the first one it keeps. Cursors, leases and offsets are left as
//! they are: a pop skips the gap, and an ack of a deleted message is unresolved. A
//! message's dedup entry goes with it, so after retention its `transactionId` is new
//! again. Sweeps run through the writer like every other write, in bounded steps (in
//! messages deleted and in partitions visited, each sweep going on where the last
//! stopped), so a large backlog or a wide queue is worked off over several sweeps
//! instead of stalling other commands.

use crate::store::keys::{Key, KeyReader};
use crate::store::records::{self, MessageRecord, PartitionRecord, QueueRecord, TxnRef};
use crate::store::{StoreError, T, Tx};

/// Most messages one sweep deletes; the rest waits for the next sweep.
pub const SWEEP_BUDGET: usize = 10_000;

/// The retention a queue's options ask for, if any.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Policy {
    /// Delete messages older than this many seconds; 0: off.
    max_age: i64,
    /// Delete completed messages older than this many seconds; 0: off.
    completed_max_age: i64,
}

impl Policy {
    fn of(q: &QueueRecord) -> Option<Policy> {
        let o = &q.options;
        if !o.retention_enabled {
            return None;
        }
        let p = Policy {
            max_age: o.retention_seconds.max(0),
            completed_max_age: o.completed_retention_seconds.max(0),
        };
        (p.max_age > 0 || p.completed_max_age > 0).then_some(p)
    }
}

/// Most partitions one sweep visits. A sweep goes on where the last one stopped, so a
/// queue of 100,000 partitions is covered in 25 sweeps (25 s at one sweep a second)
/// instead of each sweep holding the writer for a walk of all of them: on such a queue
/// one unbounded sweep took longer than the whole second it runs in.
pub const PARTITIONS_PER_SWEEP: usize = 4096;

/// Where the next sweep starts: the `partitions` key (inclusive) after the last one
/// visited, in the writer's memory. `None`: from the first.
#[derive(Default)]
struct Resume(Option<Vec<u8>>);

/// Deletes up to `budget` messages that retention no longer keeps, over the partitions
/// of every tenant's retained queues, at most [`PARTITIONS_PER_SWEEP`] of them, from
/// where the last sweep stopped. Answers how many it deleted.
pub fn sweep(tx: &mut Tx, budget: usize) -> Result<usize, StoreError> {
    let mut queues = Vec::new();
    tx.scan(T::Queues, &[], &[], |k, v| {
        let mut r = KeyReader::new(k);
        if let (Some(tenant), Some(queue)) = (r.str(), r.str())
            && let Some(p) = Policy::of(&*super::queues::decode_queue(tx, v)?)
        {
            queues.push((Key::tenant(&tenant).str(&queue).into_bytes(), tenant, p));
        }
        Ok(true)
    })?;
    let resume = tx.with_memory(|r: &mut Resume| r.0.take());
    let mut walk = Walk {
        deleted: 0,
        visited: 0,
        budget,
        next: None,
    };
    // From the resume point to the end; then, with visits to spare, from the start up
    // to the resume point.
    let passes = [(resume.clone(), None), (None, resume)];
    'passes: for (from, until) in passes {
        for (prefix, tenant, policy) in &queues {
            let start = match &from {
                Some(f) if f.as_slice() > prefix.as_slice() => f.clone(),
                _ => prefix.clone(),
            };
            if !walk.queue(tx, tenant, prefix, &start, until.as_deref(), *policy)? {
                break 'passes;
            }
        }
        if from.is_none() {
            break;
        }
    }
    tx.with_memory(|r: &mut Resume| r.0 = walk.next);
    Ok(walk.deleted)
}

/// One sweep's progress.
struct Walk {
    deleted: usize,
    visited: usize,
    budget: usize,
    /// Where the next sweep starts, once this one has run out of visits or budget.
    next: Option<Vec<u8>>,
}

impl Walk {
    /// Trims the queue's partitions from `start` (a `partitions` key), stopping before
    /// `until`. Answers `false` once the sweep has spent its visits or its budget.
    fn queue(
        &mut self,
        tx: &mut Tx,
        tenant: &str,
        prefix: &[u8],
        start: &[u8],
        until: Option<&[u8]>,
        policy: Policy,
    ) -> Result<bool, StoreError> {
        let room = PARTITIONS_PER_SWEEP - self.visited;
        let mut parts: Vec<(Vec<u8>, u64)> = Vec::new();
        let mut more = false;
        tx.scan(T::Partitions, start, prefix, |k, v| {
            if until.is_some_and(|u| k >= u) {
                return Ok(false);
            }
            if parts.len() == room {
                more = true;
                return Ok(false);
            }
            let rec: PartitionRecord = records::decode(v)?;
            parts.push((k.to_vec(), rec.id));
            Ok(true)
        })?;
        for (key, pid) in parts {
            self.deleted += trim(tx, tenant, pid, policy, self.budget - self.deleted)?;
            self.visited += 1;
            if self.deleted >= self.budget {
                // This partition may have more to delete: start the next sweep on it.
                self.next = Some(key);
                return Ok(false);
            }
            let mut after = key;
            after.push(0);
            self.next = Some(after);
        }
        if more {
            return Ok(false);
        }
        Ok(self.visited < PARTITIONS_PER_SWEEP)
    }
}

/// Deletes the head of one partition's log that `policy` no longer keeps.
fn trim(
    tx: &mut Tx,
    tenant: &str,
    pid: u64,
    policy: Policy,
    budget: usize,
) -> Result<usize, StoreError> {
    let now = tx.now;
    let older_than = |secs: i64| now.saturating_sub(secs.saturating_mul(1_000_000));
    let completed_below = if policy.completed_max_age > 0 {
        min_cursor(tx, tenant, pid)?
    } else {
        None
    };
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    let mut doomed: Vec<(u64, String)> = Vec::new();
    tx.scan(T::Messages, &prefix, &prefix, |k, v| {
        let offset = u64::from_be_bytes(k[k.len() - 8..].try_into().expect("8-byte offset"));
        let m: MessageRecord = records::decode(v)?;
        let expired = policy.max_age > 0 && m.created_at < older_than(policy.max_age);
        let completed = completed_below.is_some_and(|c| offset < c)
            && m.created_at < older_than(policy.completed_max_age);
        if !(expired || completed) {
            return Ok(false);
        }
        doomed.push((offset, m.txn));
        Ok(doomed.len() < budget)
    })?;
    for (offset, txn) in &doomed {
        tx.delete(
            T::Messages,
            Key::tenant(tenant).u64(pid).u64(*offset).into_bytes(),
        );
        let idx = Key::tenant(tenant).u64(pid).str(txn).into_bytes();
        // A later message may have reused the id after the dedup window: keep its entry.
        if tx
            .get::<TxnRef>(T::TxnIndex, &idx)?
            .is_some_and(|r| r.offset == *offset)
        {
            tx.delete(T::TxnIndex, idx);
        }
    }
    Ok(doomed.len())
}

/// The lowest cursor of the groups that have read the partition, if any has.
fn min_cursor(tx: &Tx, tenant: &str, pid: u64) -> Result<Option<u64>, StoreError> {
    let mut min: Option<u64> = None;
    super::consumers::each_row(tx, tenant, pid, |_, c| {
        min = Some(min.map_or(c.cursor, |m| m.min(c.cursor)));
    })?;
    Ok(min)
}
