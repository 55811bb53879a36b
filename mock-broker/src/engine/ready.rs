//! Which partitions a wildcard pop may claim from: per queue and consumer group, kept in
//! the writer's memory, so a pop costs the same on a queue of 100,000 partitions as on
//! one of 64.
//!
//! A pop on a queue must find a partition with work and no live lease for its group.
//! Listing every partition on every pop is O(partitions), and Queen's model invites a
//! partition per customer or entity: at 100,000 partitions the old scan (every 8th pop,
//! and every pop that found its hints of recently freed partitions empty) made pops 20x
//! slower than at 64.
//!
//! Instead the writer keeps, per (tenant, queue, group), the **candidates**: a superset
//! of the partitions claimable now, in arrival order, and the partitions that become
//! claimable at a known time (a lease's expiry, a delayed message's visibility). A pop
//! takes candidates until it is full; a candidate that turns out not claimable costs one
//! look and is dropped (or moved to its time). The set is **complete**: a partition
//! claimable for the group is a candidate, or timed at or before now. What keeps it so:
//!
//! - it is built from a full listing at the group's first wildcard pop of the queue in
//!   this writer's life (after a start, a reopen, a failed batch or an eviction);
//! - a partition becomes claimable only through a write the writer sees
//!   ([`observe`]): a message stored in it, or a change to the group's row on it (an
//!   ack, a release, a seek, a row removed), or through time, which a timed entry holds.
//!   The writes reach it from `crate::store::Tx::flush`, so only commands that
//!   succeeded count; a batch that fails to commit clears the writer's memory.
//!
//! A false candidate costs one look, so the rules only have to err on that side. Debug
//! builds check completeness: a wildcard pop that finds nothing lists every partition
//! and asserts none was claimable ([`super::pop`]).
//!
//! Measured (examples/load/benchmarks-history.md, third round): wildcard pops at
//! 100,000 partitions ran at 0.05x their rate at 64 partitions with the old scan, 0.91x
//! with this index (pop with a lease and an ack: 0.09x, then 0.94x).
//!
//! Memory: about 40 bytes per candidate. Past [`MAX_ENTRIES`] candidates or
//! [`MAX_GROUPS`] groups, the whole index is dropped and rebuilt on use.

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;

use crate::clock::Micros;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{self, ConsumerRecord, PartitionRef};
use crate::store::{Change, T, Tx};

/// Most candidates held over every queue and group before the index starts afresh.
pub const MAX_ENTRIES: usize = 4_000_000;

/// Most (queue, group) pairs held before the index starts afresh.
pub const MAX_GROUPS: usize = 65_536;

/// Most partition owners remembered (partition id to tenant and queue).
const MAX_OWNERS: usize = 1_000_000;

/// When a partition may be claimable for a group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    /// Now: it is in `order`.
    Now,
    /// From this time: it is in `timed`.
    At(Micros),
}

/// One group's candidates on one queue.
#[derive(Default)]
struct Candidates {
    /// Each partition at most once.
    slots: HashMap<u64, Slot>,
    /// The partitions whose slot is `Now`, oldest first; may hold stale ids (a
    /// partition moved to `At` since), skipped when taken.
    order: VecDeque<u64>,
    /// The partitions whose slot is `At`, by time.
    timed: BTreeSet<(Micros, u64)>,
}

impl Candidates {
    fn now(&mut self, pid: u64) {
        match self.slots.insert(pid, Slot::Now) {
            Some(Slot::Now) => {}
            Some(Slot::At(t)) => {
                self.timed.remove(&(t, pid));
                self.order.push_back(pid);
            }
            None => self.order.push_back(pid),
        }
    }

    fn at(&mut self, pid: u64, t: Micros) {
        if let Some(Slot::At(old)) = self.slots.insert(pid, Slot::At(t)) {
            self.timed.remove(&(old, pid));
        }
        self.timed.insert((t, pid));
    }

    /// The next partition to look at: timed ones that are due first join the order.
    fn take(&mut self, now: Micros) -> Option<u64> {
        while let Some(&(t, pid)) = self.timed.first() {
            if t > now {
                break;
            }
            self.timed.pop_first();
            self.slots.insert(pid, Slot::Now);
            self.order.push_back(pid);
        }
        while let Some(pid) = self.order.pop_front() {
            if self.slots.get(&pid) == Some(&Slot::Now) {
                self.slots.remove(&pid);
                return Some(pid);
            }
        }
        None
    }
}

/// The index: tenant, then queue, then group. Looked up by `&str`, so the hot path
/// allocates only for a queue or group met the first time.
#[derive(Default)]
pub struct Ready {
    tenants: HashMap<String, HashMap<String, HashMap<String, Candidates>>>,
    /// Partition id to queue, per tenant (partition ids are counted per tenant).
    owners: HashMap<String, HashMap<u64, Arc<str>>>,
    /// Entries in `owners`, bounded by [`MAX_OWNERS`].
    owner_count: usize,
    /// Groups built since the index last started afresh.
    groups: usize,
    /// Candidates they were built with (what the index holds, give or take the
    /// partitions created since).
    built_with: usize,
}

impl Ready {
    fn group(&mut self, tenant: &str, queue: &str, group: &str) -> Option<&mut Candidates> {
        self.tenants.get_mut(tenant)?.get_mut(queue)?.get_mut(group)
    }
}

/// Whether the group's candidates on the queue are held (else the pop builds them).
pub fn is_built(tx: &Tx, tenant: &str, queue: &str, group: &str) -> bool {
    tx.with_memory(|r: &mut Ready| r.group(tenant, queue, group).is_some())
}

/// Starts the group's candidates on the queue with every one of its partitions.
pub fn build(tx: &Tx, tenant: &str, queue: &str, group: &str, pids: Vec<u64>) {
    tx.with_memory(|r: &mut Ready| {
        // Bounded however many groups come and go (one per request, say): dropping
        // everything is always correct, it only costs rebuilds.
        if r.groups >= MAX_GROUPS || r.built_with + pids.len() > MAX_ENTRIES {
            r.tenants.clear();
            r.groups = 0;
            r.built_with = 0;
        }
        r.groups += 1;
        r.built_with += pids.len();
        let mut c = Candidates::default();
        for pid in pids {
            c.now(pid);
        }
        r.tenants
            .entry(tenant.to_string())
            .or_default()
            .entry(queue.to_string())
            .or_default()
            .insert(group.to_string(), c);
    })
}

/// The next candidate partition for the group on the queue, if any.
pub fn take(tx: &Tx, tenant: &str, queue: &str, group: &str) -> Option<u64> {
    let now = tx.now;
    tx.with_memory(|r: &mut Ready| r.group(tenant, queue, group)?.take(now))
}

/// Notes that the partition is not claimable for the group before `t`.
pub fn not_before(tx: &Tx, tenant: &str, queue: &str, group: &str, pid: u64, t: Micros) {
    tx.with_memory(|r: &mut Ready| {
        if let Some(c) = r.group(tenant, queue, group) {
            c.at(pid, t);
        }
    })
}

/// Feeds the index with what a command that succeeded wrote (see the module's rules).
pub fn observe(tx: &mut Tx) {
    let changes = tx.take_changes();
    if changes.is_empty() || tx.with_memory(|r: &mut Ready| r.tenants.is_empty()) {
        return;
    }
    let now = tx.now;
    let mut last_message: Option<&[u8]> = None;
    for change in &changes {
        match change {
            Change::Message { key } => {
                // A push of many messages to one partition: one note is enough.
                let head = &key[..key.len().saturating_sub(8)];
                if last_message == Some(head) {
                    continue;
                }
                last_message = Some(head);
                let mut k = KeyReader::new(key);
                let (Some(tenant), Some(pid)) = (k.str(), k.u64()) else {
                    continue;
                };
                let Some(queue) = owner(tx, &tenant, pid) else {
                    continue;
                };
                tx.with_memory(|r: &mut Ready| {
                    if let Some(groups) =
                        r.tenants.get_mut(&tenant).and_then(|q| q.get_mut(&*queue))
                    {
                        for c in groups.values_mut() {
                            c.now(pid);
                        }
                    }
                });
            }
            Change::Consumer { key, row } => {
                let mut k = KeyReader::new(key);
                let (Some(tenant), Some(pid), Some(group)) = (k.str(), k.u64(), k.str()) else {
                    continue;
                };
                let Some(queue) = owner(tx, &tenant, pid) else {
                    continue;
                };
                // A removed row is read afresh from the subscription: look again.
                let leased_until = row
                    .as_deref()
                    .and_then(|b| records::decode::<ConsumerRecord>(b).ok())
                    .and_then(|c| c.lease)
                    .map(|l| l.expires_at)
                    .filter(|&t| t > now);
                tx.with_memory(|r: &mut Ready| {
                    if let Some(c) = r.group(&tenant, &queue, &group) {
                        match leased_until {
                            Some(t) => c.at(pid, t),
                            None => c.now(pid),
                        }
                    }
                });
            }
        }
    }
}

/// The queue a partition belongs to, remembered once read.
fn owner(tx: &Tx, tenant: &str, pid: u64) -> Option<Arc<str>> {
    let known = tx.with_memory(|r: &mut Ready| r.owners.get(tenant)?.get(&pid).cloned());
    if known.is_some() {
        return known;
    }
    let pref = tx
        .get::<PartitionRef>(T::PartitionIds, &Key::tenant(tenant).u64(pid).into_bytes())
        .ok()??;
    let queue: Arc<str> = pref.queue.into();
    tx.with_memory(|r: &mut Ready| {
        if !r.tenants.contains_key(tenant) {
            return;
        }
        if r.owner_count >= MAX_OWNERS {
            r.owners.clear();
            r.owner_count = 0;
        }
        // Once per partition met: the allocation of the tenant's name does not matter.
        let owners = r.owners.entry(tenant.to_string()).or_default();
        if owners.insert(pid, queue.clone()).is_none() {
            r.owner_count += 1;
        }
    });
    Some(queue)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_come_back_once_in_order_and_timed_ones_when_due() {
        let mut c = Candidates::default();
        c.now(3);
        c.now(1);
        c.now(3);
        c.at(7, 100);
        assert_eq!(c.take(0), Some(3));
        assert_eq!(c.take(0), Some(1));
        assert_eq!(c.take(99), None, "7 is not due before 100");
        assert_eq!(c.take(100), Some(7));
        assert_eq!(c.take(1_000), None, "each once");
    }

    #[test]
    fn a_later_note_replaces_an_earlier_one() {
        let mut c = Candidates::default();
        c.now(5);
        c.at(5, 50);
        assert_eq!(c.take(0), None, "leased until 50: not a candidate now");
        c.at(5, 80);
        assert_eq!(c.take(60), None, "the lease was extended to 80");
        c.now(5);
        assert_eq!(c.take(60), Some(5), "released");
        assert_eq!(c.take(100), None, "the timed entry went with the release");
    }
}
