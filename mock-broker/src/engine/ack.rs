//! Acknowledgements: fencing, statuses, retry limits and dead letters.

use super::QUEUE_MODE;
use super::consumers::{self, StartAt};
use super::queues::{Settings, get_queue, partition_key};
use crate::store::keys::Key;
use crate::store::records::{
    AckMark, ConsumerRecord, DlqRecord, MessageRecord, PartitionRecord, PartitionRef, TxnRef,
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

/// Applies one ack; a refusal writes nothing.
pub fn ack(tx: &mut Tx, tenant: &str, a: &Ack) -> Result<AckOutcome, StoreError> {
    let Ok(pid) = a.partition_id.parse::<u64>() else {
        return Ok(AckOutcome::rejected("unknown partitionId"));
    };
    let Some(pref) =
        tx.get::<PartitionRef>(T::PartitionIds, &Key::tenant(tenant).u64(pid).into_bytes())?
    else {
        return Ok(AckOutcome::rejected("unknown partitionId"));
    };
    let idx = Key::tenant(tenant)
        .u64(pid)
        .str(&a.transaction_id)
        .into_bytes();
    let Some(TxnRef { offset, .. }) = tx.get::<TxnRef>(T::TxnIndex, &idx)? else {
        return Ok(AckOutcome::rejected("message not found in partition"));
    };
    let Some(part) = tx.get::<PartitionRecord>(
        T::Partitions,
        &partition_key(tenant, &pref.queue, &pref.partition),
    )?
    else {
        return Ok(AckOutcome::rejected("unknown partitionId"));
    };
    let stored = tx.get::<ConsumerRecord>(T::Consumers, &consumers::key(tenant, pid, &a.group))?;
    let mut c = match stored {
        Some(c) => c,
        // A named group's first read fixes where it starts; an ack cannot be that read.
        None if a.group != QUEUE_MODE => {
            return Ok(AckOutcome::rejected(
                "the consumer group has not consumed this partition",
            ));
        }
        None => consumers::load(tx, tenant, &pref.queue, &part, &a.group, StartAt::All)?.0,
    };
    let now = tx.now;

    if let Some(lease) = &a.lease_id {
        if consumers::live_lease(&c, now) != Some(lease.as_str()) {
            return Ok(AckOutcome::rejected(
                "lease expired or not held for this partition and group",
            ));
        }
        let first = c.lease.as_ref().map_or(0, |l| l.first);
        if offset < c.cursor && offset >= first {
            // Done while this lease was held: a repeat of its ack.
            let dead_key = Key::tenant(tenant)
                .u64(pid)
                .str(&a.group)
                .u64(offset)
                .into_bytes();
            let prev = if tx.get_raw(T::Dead, &dead_key)?.is_some() {
                AckMark::Dlq
            } else {
                AckMark::Completed
            };
            return Ok(repeat(prev, a.status));
        }
        let Some(st) = c.pending.get(&offset).filter(|s| s.in_lease) else {
            return Ok(AckOutcome::rejected("message is not in the leased batch"));
        };
        if let Some(prev) = st.acked {
            return Ok(repeat(prev, a.status));
        }
    } else {
        let dead_key = Key::tenant(tenant)
            .u64(pid)
            .str(&a.group)
            .u64(offset)
            .into_bytes();
        if offset < c.cursor {
            if tx.get_raw(T::Dead, &dead_key)?.is_some() {
                return Ok(AckOutcome::rejected("message was already dead-lettered"));
            }
            return Ok(repeat(AckMark::Completed, a.status));
        }
        if let Some(st) = c.pending.get(&offset) {
            if st.done {
                let prev = st.acked.unwrap_or(AckMark::Completed);
                return Ok(repeat(prev, a.status));
            }
            if let Some(prev) = st.acked {
                return Ok(repeat(prev, a.status));
            }
        }
    }

    let settings = get_queue(tx, tenant, &pref.queue)?
        .map(|q| Settings::of(&q.options))
        .unwrap_or_else(|| Settings::of(&Default::default()));
    let st = c.pending.entry(offset).or_default();
    let mut out = AckOutcome {
        success: true,
        ..Default::default()
    };
    let dead = match a.status {
        AckMark::Completed => {
            st.done = true;
            false
        }
        AckMark::Retry => false,
        AckMark::Failed => {
            st.failures += 1;
            st.failures as i64 > settings.retry_limit
        }
        AckMark::Dlq => true,
    };
    st.acked = Some(if dead { AckMark::Dlq } else { a.status });
    let failures = st.failures;
    if dead {
        st.done = true;
        let dead_key = Key::tenant(tenant)
            .u64(pid)
            .str(&a.group)
            .u64(offset)
            .into_bytes();
        tx.put(T::Dead, dead_key, &());
        if settings.dead_letter_queue {
            dead_letter(tx, tenant, &pref, pid, offset, a, failures)?;
            out.dlq = true;
        }
    }
    let in_live_batch = c.pending.get(&offset).is_some_and(|s| s.in_lease)
        && consumers::live_lease(&c, now).is_some();
    consumers::advance(&mut c);
    if in_live_batch && consumers::batch_resolved(&c) {
        out.lease_released = consumers::release_lease(tx, tenant, pid, &mut c)?;
    }
    consumers::save(tx, tenant, pid, &a.group, &c);
    Ok(out)
}

/// The verdict on an ack of a message that already has one.
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
    let seq = super::queues::next_counter(tx, "next_dlq_seq")?;
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
