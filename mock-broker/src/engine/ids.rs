//! Broker-minted identifiers: UUIDv7s (`wire.md`: `messageId` and `leaseId` are
//! broker-minted UUIDv7 strings) that tell nothing of anyone's traffic.
//!
//! A UUIDv7 is 48 bits of Unix milliseconds, then 74 bits the minter chooses (around
//! the version and variant bits). `Uuid::now_v7` fills them with a process-wide
//! counter, +1 per id within a millisecond: the gap between two of one tenant's ids
//! was then exactly 1 + the ids minted for everyone else in between, a count of
//! another tenant's pushes, pops and transactions. Here those 74 bits are random for
//! lease, transaction, query and request ids ([`lease_id`], [`transaction_id`],
//! [`query_id`]): two of one millisecond are unordered, and nothing relies on their
//! order.
//!
//! Two ids keep an order, each within its own scope, by a random step from the scope's
//! previous id ([`Stepped`], in the writer's memory), so their gaps count only the
//! scope's own ids:
//!
//! - message ids, per partition ([`MessageIds`]): a partition's messages sort by id in
//!   offset order, as clients rely on (the official Rust client's stream runner takes
//!   the greatest id of a batch for its last message). The broker itself orders by
//!   offset, the key of its messages; when the memory is fresh the partition's last
//!   stored message gives the floor, so the order holds across restarts;
//! - trace ids, per tenant ([`TraceIds`]): a trace's key ends with its id, and a
//!   message's traces, like a name's, are read oldest first by key
//!   ([`super::traces`]).

use std::collections::HashMap;

use uuid::{NoContext, Timestamp, Uuid};

/// Bits of a UUIDv7 after its timestamp that the minter chooses.
const RANDOM_BITS: u32 = 74;

/// A UUIDv7 of the current millisecond whose other 74 bits are random (uuid's
/// `fast-rng`: a ChaCha generator seeded from the OS, per thread).
fn random_v7() -> Uuid {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Uuid::new_v7(Timestamp::from_unix(
        NoContext,
        now.as_secs(),
        now.subsec_nanos(),
    ))
}

/// A new message id.
pub fn message_id() -> String {
    random_v7().to_string()
}

/// A new lease id.
pub fn lease_id() -> String {
    random_v7().to_string()
}

/// A new transaction id (the `transactionId` a transaction call is answered with).
pub fn transaction_id() -> String {
    random_v7().to_string()
}

/// A new stream query id.
pub fn query_id() -> String {
    random_v7().to_string()
}

/// The millisecond and the 74 chosen bits of a UUIDv7.
fn split(u: Uuid) -> (u64, u128) {
    let v = u.as_u128();
    let ms = (v >> 80) as u64;
    let rand_a = (v >> 64) & 0xFFF;
    let rand_b = v & ((1 << 62) - 1);
    (ms, (rand_a << 62) | rand_b)
}

/// A UUIDv7 of millisecond `ms` with the 74 chosen bits `r`.
fn join(ms: u64, r: u128) -> Uuid {
    let rand_a = (r >> 62) & 0xFFF;
    let rand_b = r & ((1 << 62) - 1);
    Uuid::from_u128((u128::from(ms) << 80) | (0x7 << 76) | (rand_a << 64) | (0b10 << 62) | rand_b)
}

/// Keys whose last id a [`Stepped`] minter remembers; past it the memory starts
/// afresh (a key's next id then starts from its floor, see [`Stepped::next`]).
const REMEMBERED: usize = 65_536;

/// Ids that sort in the order they were minted under one key (a tenant, a partition),
/// without a counter shared between keys: a fresh random id in a new millisecond, else
/// the key's previous id plus a random step of 1 to 2^32. Kept in the writer's memory
/// (`Tx::with_memory`), where these ids are minted one command at a time.
pub struct Stepped<K> {
    last: HashMap<K, (u64, u128)>,
}

impl<K> Default for Stepped<K> {
    fn default() -> Self {
        Stepped {
            last: HashMap::new(),
        }
    }
}

impl<K: std::hash::Hash + Eq> Stepped<K> {
    /// Whether an id of `key` is remembered (else [`Stepped::next`] asks its floor).
    pub fn knows(&self, key: &K) -> bool {
        self.last.contains_key(key)
    }

    /// A new id for `key`, above its previous one, and above `floor` (the last id
    /// stored under the key, read only when the memory does not hold one: after a
    /// start, a reopen or a failed batch) when it gives one.
    pub fn next(&mut self, key: K, floor: impl FnOnce() -> Option<String>) -> String {
        let fresh = split(random_v7());
        let before = match self.last.get(&key) {
            Some(&last) => Some(last),
            None => floor()
                .and_then(|id| Uuid::parse_str(&id).ok())
                .filter(|u| u.get_version_num() == 7)
                .map(split),
        };
        let next = match before {
            Some((ms, r)) if fresh.0 <= ms => {
                let step = 1 + u128::from(rand_step());
                match r.checked_add(step).filter(|n| *n < 1 << RANDOM_BITS) {
                    Some(n) => (ms, n),
                    // The millisecond's space is spent: borrow the next one.
                    None => (ms + 1, step),
                }
            }
            _ => fresh,
        };
        if self.last.len() >= REMEMBERED && !self.last.contains_key(&key) {
            self.last.clear();
        }
        self.last.insert(key, next);
        join(next.0, next.1).to_string()
    }
}

/// Trace ids, stepped per tenant.
pub type TraceIds = Stepped<String>;

/// Message ids, stepped per partition (tenant, partition id): a partition's messages
/// sort by id in offset order, as clients that take the greatest id of a batch for its
/// last message rely on (the official Rust client's stream runner).
pub type MessageIds = Stepped<(String, u64)>;

/// A random step for [`Stepped`].
fn rand_step() -> u32 {
    (Uuid::new_v4().as_u128() & u128::from(u32::MAX)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(id: &str) -> (u64, u128) {
        let u = Uuid::parse_str(id).unwrap();
        assert_eq!(u.get_version_num(), 7, "{id}");
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122, "{id}");
        split(u)
    }

    /// The probe of issue 52: tenant A mints an id, tenant B mints `k` (0 to 7), A
    /// mints again. With the process-wide counter, two ids of A in one millisecond
    /// were exactly `k + 1` apart. Now the gap is random: it never equals `k + 1`, is
    /// never small, and knowing `k` says nothing of it (the mean gap for small and
    /// large `k` is the same, within noise); every chosen bit is set about half of
    /// the time.
    #[test]
    fn the_gap_between_a_tenants_ids_tells_nothing_of_anothers() {
        let mut same_ms = 0;
        let mut by_k: [Vec<f64>; 8] = Default::default();
        let mut ones = [0u32; RANDOM_BITS as usize];
        let mut minted = 0u32;
        for round in 0..20_000u32 {
            let k = (round % 8) as usize;
            let a1 = message_id();
            for _ in 0..k {
                message_id(); // tenant B's
            }
            let a2 = message_id();
            let ((ms1, r1), (ms2, r2)) = (parts(&a1), parts(&a2));
            for r in [r1, r2] {
                minted += 1;
                for (bit, n) in ones.iter_mut().enumerate() {
                    *n += ((r >> bit) & 1) as u32;
                }
            }
            if ms1 != ms2 {
                continue;
            }
            same_ms += 1;
            let gap = r2.abs_diff(r1);
            assert_ne!(gap, k as u128 + 1, "round {round}: the gap counts B's ids");
            assert!(gap >= 1 << 40, "round {round}: a gap of {gap}");
            by_k[k].push(gap as f64 / (1u128 << RANDOM_BITS) as f64);
        }
        assert!(same_ms > 1000, "only {same_ms} pairs in one millisecond");
        // Two random points of [0, 1) are 1/3 apart on average; whatever k is.
        for (k, gaps) in by_k.iter().enumerate() {
            let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
            assert!((mean - 1.0 / 3.0).abs() < 0.05, "k = {k}: mean gap {mean}");
        }
        for (bit, n) in ones.iter().enumerate() {
            let share = f64::from(*n) / f64::from(minted);
            assert!((0.45..0.55).contains(&share), "bit {bit} set {share}");
        }
    }

    /// Trace ids keep their order within a tenant, even many in one millisecond, and
    /// another tenant's ids do not move a tenant's: A's step stays its own random
    /// step however many B mints in between.
    #[test]
    fn trace_ids_sort_as_minted_within_a_tenant_and_apart_from_the_others() {
        let mut ids = TraceIds::default();
        let mut last = ids.next("a".to_string(), || None);
        for i in 0..20_000 {
            for _ in 0..(i % 5) {
                ids.next("b".to_string(), || None);
            }
            let next = ids.next("a".to_string(), || None);
            assert!(next > last, "{next} after {last}");
            let ((ms1, r1), (ms2, r2)) = (parts(&last), parts(&next));
            if ms1 == ms2 {
                assert!(r2 - r1 <= 1 << 32, "A's step moved by B: {}", r2 - r1);
            }
            last = next;
        }
    }

    #[test]
    fn split_and_join_are_inverse() {
        for _ in 0..100 {
            let u = random_v7();
            let (ms, r) = split(u);
            assert_eq!(join(ms, r), u);
        }
    }
}
