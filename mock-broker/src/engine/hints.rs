//! Where a wildcard pop looks first: partitions that may have just become claimable.
//!
//! A pop on a queue must find a partition with work and no live lease for its group.
//! Scanning every partition on every pop costs O(partitions), and with as many workers as
//! partitions nearly all of them are leased at any moment, so most of the scan is waste
//! (it was the largest cost of the writer at 256 workers). Instead, the writer notes a
//! partition's id when a lease on it ends (an ack completes a batch, a lease lapses) or
//! a message lands in it, and a pop tries those first.
//!
//! A hint is only a hint: `pop::claim` checks everything as before, so a stale one (a
//! partition leased again, emptied, deleted, or noted by a command that then rolled
//! back) costs one wasted look. Nothing depends on a hint being present either: a pop
//! that finds none claimable falls back to the full scan, and every
//! [`FULL_SCAN_EVERY`]th pop scans anyway, so a partition nobody noted (a lease that
//! lapsed silently) is never starved. Hints live in the writer's memory (it runs every
//! command), and are bounded.

use std::collections::{HashMap, HashSet, VecDeque};

use crate::store::Tx;

/// One pop in this many ignores the hints and scans every partition.
pub const FULL_SCAN_EVERY: usize = 8;

/// Most partitions noted per queue; most queues with notes per tenant.
const PER_QUEUE: usize = 4096;
const QUEUES: usize = 4096;

#[derive(Default)]
struct Noted {
    order: VecDeque<u64>,
    set: HashSet<u64>,
}

/// The noted partitions, tenant then queue: looked up by `&str`, so noting and taking
/// allocate only for a queue seen the first time (both run on every push and every
/// ack). Kept in the writer's memory ([`Tx::with_memory`]).
#[derive(Default)]
pub struct Hints {
    by_tenant: HashMap<String, HashMap<String, Noted>>,
}

impl Hints {
    /// Notes that partition `pid` of `queue` may be claimable now.
    pub fn note(&mut self, tenant: &str, queue: &str, pid: u64) {
        let queues = match self.by_tenant.get_mut(tenant) {
            Some(q) => q,
            None => self.by_tenant.entry(tenant.to_string()).or_default(),
        };
        if !queues.contains_key(queue) && queues.len() >= QUEUES {
            queues.clear();
        }
        let noted = match queues.get_mut(queue) {
            Some(n) => n,
            None => queues.entry(queue.to_string()).or_default(),
        };
        if noted.set.len() < PER_QUEUE && noted.set.insert(pid) {
            noted.order.push_back(pid);
        }
    }

    /// Takes the next noted partition of `queue`, oldest first.
    pub fn take(&mut self, tenant: &str, queue: &str) -> Option<u64> {
        let noted = self.by_tenant.get_mut(tenant)?.get_mut(queue)?;
        let pid = noted.order.pop_front()?;
        noted.set.remove(&pid);
        Some(pid)
    }
}

/// Notes, in the writer's memory, that partition `pid` of `queue` may be claimable.
pub fn note(tx: &Tx, tenant: &str, queue: &str, pid: u64) {
    tx.with_memory(|h: &mut Hints| h.note(tenant, queue, pid));
}

/// Takes the next partition of `queue` noted in the writer's memory.
pub fn take(tx: &Tx, tenant: &str, queue: &str) -> Option<u64> {
    tx.with_memory(|h: &mut Hints| h.take(tenant, queue))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_come_back_once_each_in_order_and_per_queue() {
        let mut h = Hints::default();
        h.note("t", "q", 3);
        h.note("t", "q", 1);
        h.note("t", "q", 3);
        h.note("t", "other", 9);
        h.note("u", "q", 7);
        assert_eq!(h.take("t", "q"), Some(3));
        assert_eq!(h.take("t", "q"), Some(1));
        assert_eq!(h.take("t", "q"), None);
        assert_eq!(h.take("t", "other"), Some(9));
        assert_eq!(h.take("u", "q"), Some(7));
    }
}
