//! Consumer groups: seeking and forgetting.

use super::consumers::{self, StartAt};
use super::queues::{PartitionEntry, get_queue, list_partitions};
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::ConsumerRecord;
use crate::store::{StoreError, T, Tx};

/// Where a seek moves the cursor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeekTo {
    /// Past the last message: only new messages are delivered.
    End,
    /// To the first message created at or after this time.
    Time(Micros),
}

/// Moves the group's cursor on one partition (or all of the queue's) and releases any
/// lease it holds there. Answers the number of partitions updated.
pub fn seek(
    tx: &mut Tx,
    tenant: &str,
    group: &str,
    queue: &str,
    partition: Option<&str>,
    to: SeekTo,
) -> Result<usize, EngineError> {
    if get_queue(tx, tenant, queue)?.is_none() {
        return Err(EngineError::bad(format!("queue {queue:?} does not exist")));
    }
    let mut parts = list_partitions(tx, tenant, queue)?;
    if let Some(p) = partition {
        parts.retain(|e| e.name == p);
        if parts.is_empty() {
            return Err(EngineError::bad(format!(
                "partition {p:?} of queue {queue:?} does not exist"
            )));
        }
    }
    let start = match to {
        SeekTo::End => StartAt::New,
        SeekTo::Time(t) => StartAt::Time(t),
    };
    consumers::subscription(tx, tenant, queue, group, start)?;
    for p in &parts {
        let offset = match to {
            SeekTo::End => p.rec.next_offset,
            SeekTo::Time(t) => consumers::first_offset_at(tx, tenant, &p.rec, t)?,
        };
        set_position(tx, tenant, queue, p, group, offset)?;
    }
    Ok(parts.len())
}

/// Sets the next offset the group reads on a partition and releases its lease there.
pub fn set_position(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    p: &PartitionEntry,
    group: &str,
    offset: u64,
) -> Result<(), StoreError> {
    let (mut c, _) = consumers::load(tx, tenant, queue, &p.rec, group, StartAt::All)?;
    consumers::release_lease(tx, tenant, p.rec.id, &mut c)?;
    c.cursor = offset.min(p.rec.next_offset);
    c.pending.clear();
    consumers::save(tx, tenant, p.rec.id, group, &c);
    Ok(())
}

/// Forgets the group's cursors and leases on every queue. With `metadata`, its
/// subscriptions go too, so a later pop subscribes afresh. Answers the number of
/// partition cursors removed.
pub fn delete_group(
    tx: &mut Tx,
    tenant: &str,
    group: &str,
    metadata: bool,
) -> Result<usize, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut queues = Vec::new();
    tx.scan(T::Subscriptions, &prefix, &prefix, |k, _| {
        let mut r = KeyReader::new(k);
        let (_, queue, g) = (r.str(), r.str(), r.str());
        if let (Some(queue), Some(g)) = (queue, g)
            && g == group
        {
            queues.push((queue, k.to_vec()));
        }
        Ok(true)
    })?;
    let mut removed = 0;
    for (queue, skey) in queues {
        for p in list_partitions(tx, tenant, &queue)? {
            let ckey = consumers::key(tenant, p.rec.id, group);
            if let Some(mut c) = tx.get::<ConsumerRecord>(T::Consumers, &ckey)? {
                consumers::release_lease(tx, tenant, p.rec.id, &mut c)?;
                tx.delete(T::Consumers, ckey);
                let dead = Key::tenant(tenant).u64(p.rec.id).str(group).into_bytes();
                tx.delete_prefix(T::Dead, &dead)?;
                removed += 1;
            }
        }
        if metadata {
            tx.delete(T::Subscriptions, skey);
        }
    }
    Ok(removed)
}
