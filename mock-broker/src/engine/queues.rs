//! Queues and partitions: options, creation on first use, deletion.

use std::collections::HashMap;
use std::sync::Arc;

use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{
    OptionsPatch, PartitionRecord, PartitionRef, QueueOptions, QueueRecord,
};
use crate::store::{StoreError, T, Tx, View};

/// Largest queue or partition name, in bytes: the key budget (ours, `wire.md` section 1).
pub const MAX_NAME_BYTES: usize = 1024;

/// The partition a push without one goes to.
pub const DEFAULT_PARTITION: &str = "Default";

/// The range a client may set `minPopWaitTime` in; values outside are stored clamped
/// into it (the official client's test: a Queen 2 broker stores 90000 as 60000 and -5
/// as 0).
pub const MIN_POP_WAIT_RANGE: (i64, i64) = (0, 60_000);

/// The options the delivery rules act on, copied out of a queue's options.
#[derive(Debug, Clone, Copy)]
pub struct Settings {
    /// Seconds a popped batch stays leased.
    pub lease_time: i64,
    /// `failed` acks a message may take and still be redelivered.
    pub retry_limit: i64,
    /// Dead-letter (true) or drop (false) an exhausted message.
    pub dead_letter_queue: bool,
    /// Seconds a new message stays invisible.
    pub delayed_processing: i64,
    /// Seconds a `(partition, transactionId)` is remembered; 0 turns dedup off.
    pub dedup_window_seconds: i64,
}

impl Settings {
    /// The settings of `options`.
    pub fn of(options: &QueueOptions) -> Self {
        Settings {
            lease_time: options.lease_time,
            retry_limit: options.retry_limit,
            dead_letter_queue: options.dead_letter_queue,
            delayed_processing: options.delayed_processing,
            dedup_window_seconds: options.dedup_window_seconds,
        }
    }
}

/// Checks a queue or partition name: present, within the key budget.
pub fn check_name(what: &str, name: &str) -> Result<(), EngineError> {
    if name.is_empty() {
        return Err(EngineError::bad(format!("{what} must not be empty")));
    }
    if name.len() > MAX_NAME_BYTES {
        return Err(EngineError::NameTooLong(format!(
            "{what} is {} bytes; the limit is {MAX_NAME_BYTES}",
            name.len()
        )));
    }
    Ok(())
}

/// A configure request, already parsed.
#[derive(Debug, Clone, Default)]
pub struct Configure {
    /// The queue to create or update.
    pub queue: String,
    /// `Some(None)`: reset; `None`: keep.
    pub namespace: Option<Option<String>>,
    /// `Some(None)`: reset; `None`: keep.
    pub task: Option<Option<String>>,
    /// The options sent.
    pub options: OptionsPatch,
    /// `mode: "replace"`: options not sent go back to their defaults.
    pub replace: bool,
}

/// Creates or updates a queue, merging options; returns the stored record.
pub fn configure(tx: &mut Tx, tenant: &str, req: Configure) -> Result<QueueRecord, EngineError> {
    check_name("queue", &req.queue)?;
    let key = Key::tenant(tenant).str(&req.queue).into_bytes();
    let mut rec = match tx.get::<QueueRecord>(T::Queues, &key)? {
        Some(r) => r,
        None => new_queue(&req.queue, tx.now),
    };
    if req.replace {
        rec.options = QueueOptions::default();
    }
    rec.options.apply(req.options);
    let (lo, hi) = MIN_POP_WAIT_RANGE;
    rec.options.min_pop_wait_time = rec.options.min_pop_wait_time.clamp(lo, hi);
    if let Some(ns) = req.namespace {
        rec.namespace = ns;
    } else if req.replace {
        rec.namespace = None;
    }
    if let Some(task) = req.task {
        rec.task = task;
    } else if req.replace {
        rec.task = None;
    }
    tx.put(T::Queues, key, &rec);
    Ok(rec)
}

fn new_queue(name: &str, now: i64) -> QueueRecord {
    let (namespace, task) = derived_namespace_task(name);
    QueueRecord {
        namespace,
        task,
        options: QueueOptions::default(),
        created_at: now,
    }
}

/// The namespace and task a queue named `namespace.task.rest` gets when it is created
/// without them (Queen 2 derives them from a dotted name, so a queue that was only
/// ever pushed to can still be found by a discovery pop).
fn derived_namespace_task(name: &str) -> (Option<String>, Option<String>) {
    let mut parts = name.splitn(3, '.');
    match (parts.next(), parts.next(), parts.next()) {
        (Some(ns), Some(task), Some(rest))
            if !ns.is_empty() && !task.is_empty() && !rest.is_empty() =>
        {
            (Some(ns.to_string()), Some(task.to_string()))
        }
        _ => (None, None),
    }
}

/// The queue's record, created with defaults when it does not exist.
pub fn ensure_queue(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
) -> Result<Arc<QueueRecord>, StoreError> {
    let key = Key::tenant(tenant).str(queue).into_bytes();
    if let Some(bytes) = tx.get_raw(T::Queues, &key)? {
        return decode_queue(tx, &bytes);
    }
    let rec = new_queue(queue, tx.now);
    tx.put(T::Queues, key, &rec);
    Ok(Arc::new(rec))
}

/// The queue's record, if it exists.
pub fn get_queue(
    tx: &Tx,
    tenant: &str,
    queue: &str,
) -> Result<Option<Arc<QueueRecord>>, StoreError> {
    tx.get_raw(T::Queues, &Key::tenant(tenant).str(queue).into_bytes())?
        .map(|bytes| decode_queue(tx, &bytes))
        .transpose()
}

/// Decoded queue records by their stored bytes, in the writer's memory. Every push and
/// pop reads its queue's record, and decoding the JSON of its options was the largest
/// single cost of the writer's profile after the commit. Keyed by content, so never
/// stale.
#[derive(Default)]
struct DecodedQueues(HashMap<Vec<u8>, Arc<QueueRecord>>);

/// Most queue records kept decoded.
const DECODED_QUEUES_MAX: usize = 4096;

pub(crate) fn decode_queue(tx: &Tx, bytes: &[u8]) -> Result<Arc<QueueRecord>, StoreError> {
    tx.with_memory(|cache: &mut DecodedQueues| {
        if let Some(q) = cache.0.get(bytes) {
            return Ok(q.clone());
        }
        let q = Arc::new(crate::store::records::decode::<QueueRecord>(bytes)?);
        if cache.0.len() >= DECODED_QUEUES_MAX {
            cache.0.clear();
        }
        cache.0.insert(bytes.to_vec(), q.clone());
        Ok(q)
    })
}

/// The key of a partition record.
pub fn partition_key(tenant: &str, queue: &str, partition: &str) -> Vec<u8> {
    Key::tenant(tenant).str(queue).str(partition).into_bytes()
}

/// The partition's record, created (with the tenant's next partition id) when it does
/// not exist.
pub fn ensure_partition(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    partition: &str,
) -> Result<PartitionRecord, StoreError> {
    let key = partition_key(tenant, queue, partition);
    if let Some(rec) = tx.get::<PartitionRecord>(T::Partitions, &key)? {
        return Ok(rec);
    }
    let id = next_counter(tx, tenant, Counter::PartitionId)?;
    let rec = PartitionRecord {
        id,
        next_offset: 0,
        created_at: tx.now,
    };
    tx.put(T::Partitions, key, &rec);
    tx.put(
        T::PartitionIds,
        Key::tenant(tenant).u64(id).into_bytes(),
        &PartitionRef {
            queue: queue.to_string(),
            partition: partition.to_string(),
        },
    );
    Ok(rec)
}

/// A counter kept per tenant, whose values callers see (partition ids, KV versions) or
/// whose order they see (dead letters).
///
/// Per tenant, so that no tenant learns another's write rate from the gaps: a
/// broker-wide counter let one tenant's next KV version skip by another's writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counter {
    /// Partition ids: every key under a partition id also begins with the tenant.
    PartitionId,
    /// KV row versions: only monotonic per row is promised.
    KvVersion,
    /// The order of dead letters.
    DlqSeq,
}

impl Counter {
    /// The `meta` key a broker-wide counter had before counters were per tenant.
    fn legacy_key(self) -> &'static str {
        match self {
            Counter::PartitionId => "next_partition_id",
            Counter::KvVersion => "kv_version",
            Counter::DlqSeq => "next_dlq_seq",
        }
    }
}

/// Takes the tenant's next value of `counter` (starting at 1).
///
/// A tenant's counter that does not exist yet starts where the broker-wide counter of a
/// file written before this change stood, so no value is taken twice in a tenant (a
/// version or a partition id reused would be an ABA for a caller holding the old one).
pub fn next_counter(tx: &mut Tx, tenant: &str, counter: Counter) -> Result<u64, StoreError> {
    // The name first, then the tenant: a broker-wide key (a bare name, no separator)
    // never equals one of these.
    let key = Key::tenant(counter.legacy_key()).str(tenant).into_bytes();
    let next = match tx.get::<u64>(T::Meta, &key)? {
        Some(next) => next,
        None => tx
            .get::<u64>(T::Meta, counter.legacy_key().as_bytes())?
            .unwrap_or(1),
    };
    tx.put(T::Meta, key, &(next + 1));
    Ok(next)
}

/// One partition of a queue, as listed.
#[derive(Debug, Clone)]
pub struct PartitionEntry {
    /// The partition's name.
    pub name: String,
    /// Its record.
    pub rec: PartitionRecord,
}

/// The partitions of a queue, in name order.
pub fn list_partitions(
    view: &impl View,
    tenant: &str,
    queue: &str,
) -> Result<Vec<PartitionEntry>, StoreError> {
    let prefix = Key::tenant(tenant).str(queue).into_bytes();
    let mut out = Vec::new();
    view.scan_rows(T::Partitions, &prefix, &prefix, &mut |k, v| {
        // The key is the prefix and the name: read only the name (this runs per
        // partition on every wildcard pop).
        if let Some(name) = KeyReader::new(&k[prefix.len()..]).str() {
            out.push(PartitionEntry {
                name,
                rec: crate::store::records::decode(v)?,
            });
        }
        Ok(true)
    })?;
    Ok(out)
}

/// Removes a queue with its partitions, messages, cursors, leases, subscriptions and
/// dead letters. Answers whether the queue existed.
pub fn delete_queue(tx: &mut Tx, tenant: &str, queue: &str) -> Result<bool, StoreError> {
    let qkey = Key::tenant(tenant).str(queue).into_bytes();
    let existed = tx.get_raw(T::Queues, &qkey)?.is_some();
    let partitions = list_partitions(tx, tenant, queue)?;
    if !existed && partitions.is_empty() {
        // Nothing to delete: stage nothing, so the call costs no durable commit.
        return Ok(false);
    }
    for p in partitions {
        let pid = Key::tenant(tenant).u64(p.rec.id).into_bytes();
        // Lease records name the partitions they claim; drop them with the cursors.
        let mut leases = Vec::new();
        tx.scan(T::Consumers, &pid, &pid, |_, v| {
            let c: crate::store::records::ConsumerRecord = crate::store::records::decode(v)?;
            if let Some(l) = c.lease {
                leases.push(l.id);
            }
            Ok(true)
        })?;
        for id in leases {
            tx.delete(T::Leases, Key::tenant(tenant).str(&id).into_bytes());
        }
        for t in [T::Messages, T::TxnIndex, T::Consumers, T::Dead] {
            tx.delete_prefix(t, &pid)?;
        }
        tx.delete(T::PartitionIds, pid);
        tx.delete(T::Partitions, partition_key(tenant, queue, &p.name));
    }
    tx.delete_prefix(T::Subscriptions, &qkey)?;
    crate::engine::dlq::delete_queue_entries(tx, tenant, queue)?;
    tx.delete(T::Queues, qkey);
    Ok(existed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::{Memory, Room, Tables};

    #[test]
    fn a_tenants_counter_goes_on_from_a_broker_wide_one_and_apart_from_the_others() {
        let db = crate::store::open(None).unwrap();
        let txn = db.begin_write().unwrap();
        let mut tables = Tables::open(&txn, 0, Room::default()).unwrap();
        let memory = Memory::default();
        let mut tx = Tx::new(&mut tables, 0, &memory);
        // A file written when versions were broker-wide: the next one was 78.
        tx.put(T::Meta, b"kv_version".to_vec(), &78u64);
        let mut next = |tenant| next_counter(&mut tx, tenant, Counter::KvVersion).unwrap();
        assert_eq!(
            (next("acme"), next("acme")),
            (78, 79),
            "no version taken twice"
        );
        assert_eq!(next("globex"), 78, "globex counts apart from acme");
        assert_eq!((next("acme"), next("globex")), (80, 79));
        let first_id = next_counter(&mut tx, "acme", Counter::PartitionId).unwrap();
        assert_eq!(first_id, 1, "no broker-wide partition counter: from 1");
    }
}
