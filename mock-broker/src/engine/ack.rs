//! Acknowledgements: fencing, statuses, retry limits and dead letters.

use std::collections::BTreeMap;

use super::QUEUE_MODE;
use super::consumers::{self, StartAt};
use super::queues::{Settings, get_queue, partition_key};
use crate::store::keys::Key;
use crate::store::records::{
    AckMark, ConsumerRecord, DlqRecord, MessageRecord, PartitionRecord, PartitionRef, QueueOptions,
    TxnRef,
};
use crate::store::{StoreError, T, Tx};

/// One acknowledgement.
#[derive(Debug, Clone)]
pub struct Ack {
    /// The acked message's `transactionId`.
    pub transaction_id: String,
    /// The message's partition id, as the pop gave it.
    pub partition_id: String,
    /// The outcome.
    pub status: AckMark,
    /// The group acking.
    pub group: String,
    /// The lease the ack is fenced by; `None`: unfenced.
    pub lease_id: Option<String>,
    /// Why it failed (kept on the dead letter).
    pub error: Option<String>,
}

/// Parses a wire status: `completed` and its aliases, `retry`, `dlq`; anything else
/// (case-sensitive) is `failed`.
pub fn parse_status(s: Option<&str>) -> AckMark {
    match s {
        None | Some("completed" | "success" | "acked" | "ok") => AckMark::Completed,
        Some("retry") => AckMark::Retry,
        Some("dlq") => AckMark::Dlq,
        Some(_) => AckMark::Failed,
    }
}

/// The verdict on one ack.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckOutcome {
    /// Applied (or a harmless repeat).
    pub success: bool,
    /// Why it was refused.
    pub error: Option<String>,
    /// The ack completed its lease's batch and released the lease.
    pub lease_released: bool,
    /// The message was dead-lettered by this ack.
    pub dlq: bool,
    /// A `completed` ack of a message already completed: nothing changed.
    pub noop: bool,
}

impl AckOutcome {
    fn rejected(why: impl Into<String>) -> Self {
        AckOutcome {
            error: Some(why.into()),
            ..Default::default()
        }
    }
}

/// One ack call: the items of an `/ack` or `/ack/batch` body, or the acks of a
/// transaction, applied in order (`wire.md` 4a).
///
/// A `failed` or `retry` item at offset k clamps its partition's cursor at k for the
/// rest of the call: completions after it in the same call do not move the cursor past
/// k. The lease it names is released when the call ends ([`AckCall::finish`]), not at
/// once, so the other items of the same call (a `nack_all` of a whole batch) are still
/// judged against the lease they were sent with.
#[derive(Debug, Default)]
pub struct AckCall {
    /// `(partition id, group)`: how far the cursor may move for the rest of the call,
    /// and the lease to release when the call ends.
    clamps: BTreeMap<(u64, String), Clamp>,
}

#[derive(Debug)]
struct Clamp {
    at: u64,
    lease: Option<String>,
}

impl AckCall {
    /// A fresh call with no clamps.
    pub fn new() -> Self {
        Self::default()
    }

    /// Limits the cursor of `(pid, group)` to `at` for the rest of the call and marks
    /// `lease` (the partition's live lease, if any) for release at its end.
    fn clamp(&mut self, pid: u64, group: &str, at: u64, lease: Option<&str>) {
        let e = self
            .clamps
            .entry((pid, group.to_string()))
            .or_insert(Clamp { at, lease: None });
        e.at = e.at.min(at);
        if e.lease.is_none() {
            e.lease = lease.map(str::to_string);
        }
    }

    fn limit(&self, pid: u64, group: &str) -> Option<u64> {
        // A clamp is rare and the map small; the allocation-free lookup is a scan.
        self.clamps
            .iter()
            .find(|((p, g), _)| *p == pid && g == group)
            .map(|(_, c)| c.at)
    }

    /// Ends the call: releases every lease a `failed` or `retry` item clamped, so the
    /// clamped message and the rest of its batch are delivered again at the next pop.
    pub fn finish(self, tx: &mut Tx, tenant: &str) -> Result<(), StoreError> {
        for ((pid, group), clamp) in self.clamps {
            let Some(lease) = clamp.lease else { continue };
            let ckey = consumers::key(tenant, pid, &group);
            let Some(mut c) = tx.get::<ConsumerRecord>(T::Consumers, &ckey)? else {
                continue;
            };
            if c.lease.as_ref().is_some_and(|l| l.id == lease) {
                consumers::release_lease(tx, tenant, pid, &mut c)?;
                consumers::save(tx, tenant, pid, &group, &c);
            }
        }
        Ok(())
    }
}

/// Applies one ack of `call`; a refusal writes nothing.
pub fn ack(
    tx: &mut Tx,
    tenant: &str,
    a: &Ack,
    call: &mut AckCall,
) -> Result<AckOutcome, StoreError> {
    let unresolved = || {
        AckOutcome::rejected(format!(
            "unresolved: transactionId {:?} is not in partition {}",
            a.transaction_id, a.partition_id
        ))
    };
    let Ok(pid) = a.partition_id.parse::<u64>() else {
        return Ok(AckOutcome::rejected("unresolved: unknown partitionId"));
    };
    let Some(pref) =
        tx.get::<PartitionRef>(T::PartitionIds, &Key::tenant(tenant).u64(pid).into_bytes())?
    else {
        return Ok(AckOutcome::rejected("unresolved: unknown partitionId"));
    };
    let idx = Key::tenant(tenant)
        .u64(pid)
        .str(&a.transaction_id)
        .into_bytes();
    let Some(TxnRef { offset, .. }) = tx.get::<TxnRef>(T::TxnIndex, &idx)? else {
        return Ok(unresolved());
    };
    let Some(part) = tx.get::<PartitionRecord>(
        T::Partitions,
        &partition_key(tenant, &pref.queue, &pref.partition),
    )?
    else {
        return Ok(AckOutcome::rejected("unresolved: unknown partitionId"));
    };
    let now = tx.now;
    let stored = tx.get::<ConsumerRecord>(T::Consumers, &consumers::key(tenant, pid, &a.group))?;
    let mut c = match stored {
        Some(c) => c,
        None if a.lease_id.is_some() => return Ok(AckOutcome::rejected(INVALID_LEASE)),
        // A named group's first read fixes where it starts; an ack cannot be that read.
        None if a.group != QUEUE_MODE => {
            return Ok(AckOutcome::rejected(
                "the consumer group has not consumed this partition",
            ));
        }
        None => consumers::load(tx, tenant, &pref.queue, &part, &a.group, StartAt::All)?.0,
    };
    let live = consumers::live_lease(&c, now).map(str::to_string);
    if let Some(lease) = &a.lease_id
        && live.as_deref() != Some(lease.as_str())
    {
        return Ok(AckOutcome::rejected(INVALID_LEASE));
    }

    let dead_key = Key::tenant(tenant)
        .u64(pid)
        .str(&a.group)
        .u64(offset)
        .into_bytes();
    // Below the cursor: committed already. A dead letter is settled but not completed:
    // completing it now is refused, as `transaction.md` says of any ack after a `dlq`.
    if offset < c.cursor {
        if a.status == AckMark::Completed && tx.get_raw(T::Dead, &dead_key)?.is_some() {
            return Ok(AckOutcome::rejected("message was already dead-lettered"));
        }
        return Ok(if a.status == AckMark::Completed {
            AckOutcome {
                success: true,
                noop: true,
                ..Default::default()
            }
        } else {
            AckOutcome::rejected(
                "message is already committed (below the group's cursor); it cannot be redelivered",
            )
        });
    }
    let st = c.pending.get(&offset);
    if a.lease_id.is_some() && !st.is_some_and(|s| s.in_lease) {
        return Ok(AckOutcome::rejected("message is not in the leased batch"));
    }
    // Nacked or dead-lettered since its last delivery: that verdict stands until the
    // message is delivered again.
    if let Some(prev) = st.and_then(|s| s.acked) {
        return Ok(repeat(prev, a.status));
    }

    let settings = get_queue(tx, tenant, &pref.queue)?
        .map(|q| Settings::of(&q.options))
        .unwrap_or_else(|| Settings::of(&QueueOptions::default()));
    let limit = call.limit(pid, &a.group);
    let mut out = AckOutcome {
        success: true,
        ..Default::default()
    };
    let st = c.pending.entry(offset).or_default();
    // Where the cursor goes (before this call's clamp), and whether the item is a nack
    // that clamps the rest of the call.
    let (target, nack_at) = match a.status {
        AckMark::Completed => (Some(offset + 1), None),
        AckMark::Retry => {
            st.acked = Some(AckMark::Retry);
            (None, Some(offset))
        }
        AckMark::Failed if st.failures as i64 >= settings.retry_limit => {
            // Out of attempts: dead-lettered now. The nack still ends the batch, so
            // what follows the message is delivered again at the next pop.
            st.failures += 1;
            (None, Some(offset + 1))
        }
        AckMark::Failed => {
            st.failures += 1;
            st.acked = Some(AckMark::Failed);
            (None, Some(offset))
        }
        AckMark::Dlq => (Some(offset + 1), None),
    };
    let dead = matches!(a.status, AckMark::Dlq)
        || (a.status == AckMark::Failed && nack_at == Some(offset + 1));
    if dead {
        let failures = st.failures;
        st.acked = Some(AckMark::Dlq);
        // Settled: skipped by pops even while a clamp keeps the cursor before it.
        st.done = true;
        tx.put(T::Dead, dead_key, &());
        if settings.dead_letter_queue {
            dead_letter(tx, tenant, &pref, pid, offset, a, failures)?;
            out.dlq = true;
        }
    }
    if let Some(target) = target {
        let to = limit.map_or(target, |l| target.min(l));
        consumers::commit(&mut c, to);
    }
    consumers::advance(&mut c);
    if let Some(at) = nack_at {
        out.lease_released = live.is_some();
        call.clamp(pid, &a.group, at, live.as_deref());
    } else if live.is_some() && limit.is_none() && !consumers::batch_open(&c) {
        out.lease_released = consumers::release_lease(tx, tenant, pid, &mut c)?;
    }
    consumers::save(tx, tenant, pid, &a.group, &c);
    Ok(out)
}

/// The refusal of an ack whose lease is not the partition's live lease for the group.
const INVALID_LEASE: &str = "invalid or expired lease";

/// The verdict on an ack of a message whose last delivery was already nacked or
/// dead-lettered (and not delivered again since).
fn repeat(prev: AckMark, now: AckMark) -> AckOutcome {
    if prev == AckMark::Completed && now == AckMark::Completed {
        AckOutcome {
            success: true,
            noop: true,
            ..Default::default()
        }
    } else {
        let what = match prev {
            AckMark::Completed => "completed",
            AckMark::Failed => "failed",
            AckMark::Retry => "retry",
            AckMark::Dlq => "dlq",
        };
        AckOutcome::rejected(format!("message was already acked with status {what}"))
    }
}

fn dead_letter(
    tx: &mut Tx,
    tenant: &str,
    pref: &PartitionRef,
    pid: u64,
    offset: u64,
    a: &Ack,
    failures: u32,
) -> Result<(), StoreError> {
    let mkey = Key::tenant(tenant).u64(pid).u64(offset).into_bytes();
    let Some(message) = tx.get::<MessageRecord>(T::Messages, &mkey)? else {
        return Ok(());
    };
    let seq = super::queues::next_counter(tx, tenant, super::queues::Counter::DlqSeq)?;
    tx.put(
        T::Dlq,
        Key::tenant(tenant).u64(seq).into_bytes(),
        &DlqRecord {
            queue: pref.queue.clone(),
            partition: pref.partition.clone(),
            partition_id: pid,
            offset,
            group: a.group.clone(),
            message,
            error: a.error.clone(),
            retry_count: failures,
            failed_at: tx.now,
        },
    );
    Ok(())
}
