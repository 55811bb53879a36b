//! A consumer group's state on one partition: cursor, lease and per-message marks.
//!
//! Shared by pop, ack, lease extension, seek and (later) the transaction's positions.

use super::QUEUE_MODE;
use crate::clock::Micros;
use crate::store::keys::Key;
use crate::store::records::{
    ConsumerRecord, LeaseRecord, MessageRecord, PartitionRecord, SubscriptionRecord,
};
use crate::store::{StoreError, T, Tx, View};

/// Where a named group's cursor starts on a partition it has not read yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StartAt {
    /// Only messages that arrive after the group's first pop (`subscriptionMode=new`).
    #[default]
    New,
    /// From the beginning of every partition (`subscriptionMode=all`).
    All,
    /// From a point in time (`subscriptionFrom`).
    Time(Micros),
}

/// The key of a consumer row.
pub fn key(tenant: &str, pid: u64, group: &str) -> Vec<u8> {
    Key::tenant(tenant).u64(pid).str(group).into_bytes()
}

/// Reads the group's subscription to `queue`, recording it now if it is the first use.
pub fn subscription(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    group: &str,
    start: StartAt,
) -> Result<SubscriptionRecord, StoreError> {
    let skey = Key::tenant(tenant).str(queue).str(group).into_bytes();
    if let Some(s) = tx.get::<SubscriptionRecord>(T::Subscriptions, &skey)? {
        return Ok(s);
    }
    let from = if group == QUEUE_MODE {
        i64::MIN
    } else {
        match start {
            // Later than every message stored before: a tie under a clock that does
            // not move must not count the backlog as new.
            StartAt::New => super::stamp::new_subscription(tx),
            StartAt::All => i64::MIN,
            StartAt::Time(t) => t,
        }
    };
    let rec = SubscriptionRecord { from };
    tx.put(T::Subscriptions, skey, &rec);
    Ok(rec)
}

/// The group's row on a partition, and whether it was stored; a missing row starts at
/// the subscription's start (and is not stored until saved).
pub fn load(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    part: &PartitionRecord,
    group: &str,
    start: StartAt,
) -> Result<(ConsumerRecord, bool), StoreError> {
    if let Some(c) = tx.get::<ConsumerRecord>(T::Consumers, &key(tenant, part.id, group))? {
        return Ok((c, true));
    }
    let sub = subscription(tx, tenant, queue, group, start)?;
    let fresh = ConsumerRecord {
        cursor: first_offset_at(tx, tenant, part, sub.from)?,
        lease: None,
        pending: Default::default(),
    };
    Ok((fresh, false))
}

/// Stores the group's row.
pub fn save(tx: &mut Tx, tenant: &str, pid: u64, group: &str, c: &ConsumerRecord) {
    tx.put(T::Consumers, key(tenant, pid, group), c);
}

/// The first offset of the partition whose message was created at or after `t`.
pub fn first_offset_at(
    tx: &Tx,
    tenant: &str,
    part: &PartitionRecord,
    t: Micros,
) -> Result<u64, StoreError> {
    if t == i64::MIN {
        return Ok(0);
    }
    // Creation times grow with offsets, so a binary search finds the boundary.
    let (mut lo, mut hi) = (0u64, part.next_offset);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        let k = Key::tenant(tenant).u64(part.id).u64(mid).into_bytes();
        let before = match tx.get::<MessageRecord>(T::Messages, &k)? {
            Some(m) => m.created_at < t,
            None => true, // removed messages are older than any kept one
        };
        if before {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    Ok(lo)
}

/// Whether the row holds a lease that has not expired.
pub fn live_lease(c: &ConsumerRecord, now: Micros) -> Option<&str> {
    c.lease
        .as_ref()
        .filter(|l| l.expires_at > now)
        .map(|l| l.id.as_str())
}

/// Ends the row's lease (whether live or lapsed): clears batch membership and removes
/// the partition from the lease record, dropping the record with its last claim.
pub fn release_lease(
    tx: &mut Tx,
    tenant: &str,
    pid: u64,
    c: &mut ConsumerRecord,
) -> Result<bool, StoreError> {
    let Some(lease) = c.lease.take() else {
        return Ok(false);
    };
    for st in c.pending.values_mut() {
        st.in_lease = false;
    }
    let lkey = Key::tenant(tenant).str(&lease.id).into_bytes();
    if let Some(mut rec) = tx.get::<LeaseRecord>(T::Leases, &lkey)? {
        rec.claims.retain(|&p| p != pid);
        if rec.claims.is_empty() {
            tx.delete(T::Leases, lkey);
        } else {
            tx.put(T::Leases, lkey, &rec);
        }
    }
    Ok(true)
}

/// Commits the cursor to `to` (never backwards): every message before it is done for
/// the group, and their per-message marks are forgotten.
pub fn commit(c: &mut ConsumerRecord, to: u64) {
    if to > c.cursor {
        c.pending = c.pending.split_off(&to);
        c.cursor = to;
    }
}

/// Moves the cursor past every settled message at its head (a message dead-lettered
/// while a clamp held the cursor before it).
pub fn advance(c: &mut ConsumerRecord) {
    while c.pending.get(&c.cursor).is_some_and(|s| s.done) {
        c.pending.remove(&c.cursor);
        c.cursor += 1;
    }
}

/// Whether messages delivered under the current lease remain at or after the cursor:
/// the batch is not complete yet, so its lease stays.
pub fn batch_open(c: &ConsumerRecord) -> bool {
    c.pending
        .range(c.cursor..)
        .any(|(_, s)| s.in_lease && !s.done)
}

/// Visits every group's row on a partition (its name and record), in any view: the
/// writer's staged one or a read of the last commit.
pub fn each_row(
    view: &impl View,
    tenant: &str,
    pid: u64,
    mut f: impl FnMut(String, ConsumerRecord),
) -> Result<(), StoreError> {
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    view.scan_rows(T::Consumers, &prefix, &prefix, &mut |k, v| {
        if let Some(group) = crate::store::keys::KeyReader::new(&k[prefix.len()..]).str() {
            f(group, crate::store::records::decode(v)?);
        }
        Ok(true)
    })
}
