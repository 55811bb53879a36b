//! Read-only views of queues, partitions and messages for operators (the official
//! client's `admin()` reads): what is stored, what each consumer group has done with
//! it, what is dead-lettered.
//!
//! Every figure is computed from the last commit ([`Reader`]), never from the writer,
//! so these reads neither wait behind writes nor slow them. The counts of a partition
//! are those of its slowest consumer group (the lowest cursor among the groups that
//! have read it): a message is `completed` once every group that reads the partition
//! has committed past it, `processing` while that group holds it under a live lease,
//! `pending` otherwise, and `deadLetter` counts the partition's dead letters.

use std::collections::HashMap;

use redb::Database;

use super::answers::{Held, Starved};
use super::consumers;
use super::queues::{PartitionEntry, list_partitions};
use super::status::Filter;
use crate::clock::Micros;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{
    DlqRecord, MessageRecord, PartitionRecord, PartitionRef, QueueRecord, TxnRef, decode,
};
use crate::store::{Reader, StoreError, T, View};

/// Message counts, in the wire's vocabulary.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Messages stored.
    pub total: u64,
    /// Stored, not yet delivered to the slowest group (or delivered and released).
    pub pending: u64,
    /// Under a live lease of the slowest group.
    pub processing: u64,
    /// Committed by every group that reads the partition.
    pub completed: u64,
    /// Dead letters of the partition.
    pub dead_letter: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.total += o.total;
        self.pending += o.pending;
        self.processing += o.processing;
        self.completed += o.completed;
        self.dead_letter += o.dead_letter;
    }
}

/// One partition's figures.
#[derive(Debug, Clone)]
pub struct PartitionStats {
    /// Its name.
    pub name: String,
    /// Its broker-wide id.
    pub id: u64,
    /// When it was created.
    pub created_at: Micros,
    /// The offset of its oldest stored message (retention deletes from the head).
    pub first_offset: u64,
    /// The offset the next message gets.
    pub next_offset: u64,
    /// When its newest stored message was created.
    pub last_message_at: Option<Micros>,
    /// Its message counts.
    pub counts: Counts,
    /// Bytes of its stored messages.
    pub retained_bytes: u64,
    /// Consumer groups that have read it.
    pub groups: usize,
    /// When the oldest message its slowest group has not committed was created;
    /// `None` when every group (or, with no group yet, nobody) is caught up.
    pub oldest_unconsumed_at: Option<Micros>,
    /// Messages committed, summed over its groups (each group's cursor counts every
    /// message it committed, including those retention has since deleted).
    pub consumed: u64,
}

impl PartitionStats {
    /// Messages not yet committed by its slowest group (pending and processing).
    pub fn backlog(&self) -> u64 {
        self.counts.pending + self.counts.processing
    }
}

/// One queue's figures.
#[derive(Debug, Clone)]
pub struct QueueStats {
    /// Its name.
    pub name: String,
    /// Its record: namespace, task, options, creation time.
    pub record: QueueRecord,
    /// Its partitions, in name order: all of them, or the page asked for
    /// ([`queue_page`]).
    pub partitions: Vec<PartitionStats>,
    /// How many partitions it has (`partitions` may hold a page of them).
    pub partition_count: usize,
    /// The partitions' counts added up.
    pub totals: Counts,
    /// Bytes of its stored messages.
    pub retained_bytes: u64,
}

/// Where one message stands for one group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageStatus {
    /// Not yet delivered (or released for redelivery).
    Pending,
    /// Delivered under a live lease.
    Processing,
    /// Committed.
    Completed,
    /// Dead-lettered.
    DeadLetter,
}

/// One group's view of a message.
#[derive(Debug, Clone)]
pub struct GroupView {
    /// The group's name.
    pub name: String,
    /// Its cursor on the message's partition.
    pub cursor: u64,
    /// The message's status for it.
    pub status: MessageStatus,
    /// Whether its cursor is past the message: committed (acked, dead-lettered, or
    /// popped with `autoAck`), never delivered to it again.
    pub consumed: bool,
    /// Its live lease on the partition, if any.
    pub lease: Option<(String, Micros)>,
    /// Times the message was delivered to it since its cursor last moved.
    pub deliveries: u32,
    /// `failed` acks the message took from it.
    pub failures: u32,
}

/// A message with where it stands.
#[derive(Debug, Clone)]
pub struct MessageDetail {
    /// Its queue.
    pub queue: String,
    /// Its partition's name.
    pub partition: String,
    /// Its partition's id.
    pub partition_id: u64,
    /// Its offset.
    pub offset: u64,
    /// The stored message.
    pub message: MessageRecord,
    /// The queue's record (namespace, task, options).
    pub queue_record: QueueRecord,
    /// The overall status: processing if any group holds it, dead letter if any group
    /// dead-lettered it, completed when every group that read the partition is past it.
    pub status: MessageStatus,
    /// The groups that have read the partition.
    pub groups: Vec<GroupView>,
}

/// How a partition's stored messages are measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// Read every stored message: exact counts and bytes (the resources reads).
    Full,
    /// Read the log's ends only: a log is dense between its first stored offset and
    /// its next one (retention deletes a prefix, nothing deletes from the middle), so
    /// the counts are exact at the cost of a few key reads per partition; bytes are not
    /// measured (0). What the status and dashboard reads use, so that they stay cheap
    /// on a broker holding millions of messages.
    Watermarks,
}

/// What a listing of queues reads: which queues, how measured, and which of each
/// queue's partitions it keeps (their figures are added to the queue's totals either
/// way).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueueScan {
    /// How partitions are measured.
    pub measure: Measure,
    /// Which queues are covered.
    pub filter: Filter,
    /// Which of the covered queues (in name order) are read.
    pub page: Page,
    /// Which of each queue's partitions are kept: [`Page::ALL`] for a read that needs
    /// them, [`Page::NONE`] for one that shows a queue's counts only.
    pub partitions: Page,
}

/// A page of a listing, and how many rows the whole listing has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listing<R> {
    /// The page's rows, in the listing's order.
    pub rows: Vec<R>,
    /// Rows of the whole listing.
    pub total: usize,
}

/// What a queue's record and its listing row hold in an answer, besides its name: the
/// record (namespace, task, options) as read and its JSON row (measured: 300 to 450
/// bytes).
const QUEUE_COST: u64 = 1024;

/// What one kept partition holds in an answer, besides its name: its figures and its
/// JSON row (measured: 250 to 350 bytes).
const PARTITION_COST: u64 = std::mem::size_of::<PartitionStats>() as u64 + 384;

/// The covered queues of the tenant (a page of them) with their figures, in name
/// order, charged to `held` as they are read ([`Held::charge_whole`](crate::engine::answers::Held::charge_whole)): a
/// queue's record and row, then each partition it keeps. `Err(Starved)` when the
/// answer budget had no room: nothing of it is kept.
pub fn queues_measured(
    db: &Database,
    tenant: &str,
    now: Micros,
    scan: &QueueScan,
    held: &mut Held,
) -> Result<Result<Listing<QueueStats>, Starved>, StoreError> {
    let r = Reader::begin(db)?;
    let dead = dead_letters_by_partition(&r, tenant)?;
    // The map of partitions with dead letters: a key, a count and the table's share.
    if let Err(s) = held.charge_whole(dead.len() as u64 * 32) {
        return Ok(Err(s));
    }
    let prefix = Key::tenant(tenant).into_bytes();
    let kept = scan.page.range();
    let (mut found, mut total, mut starved) = (Vec::new(), 0, None);
    r.scan(T::Queues, &prefix, &prefix, |k, v| {
        let Some(name) = KeyReader::new(&k[prefix.len()..]).str() else {
            return Ok(true);
        };
        let record: QueueRecord = decode(v)?;
        if !scan.filter.covers(&name, &record) {
            return Ok(true);
        }
        total += 1;
        if kept.contains(&(total - 1)) {
            if let Err(s) = held.charge_whole(QUEUE_COST + name.len() as u64) {
                starved = Some(s);
                return Ok(false);
            }
            found.push((name, record));
        }
        Ok(true)
    })?;
    if let Some(s) = starved {
        return Ok(Err(s));
    }
    let mut rows = Vec::with_capacity(found.len());
    for queue in found {
        let q = stats(&r, tenant, queue, &dead, now, scan.measure, scan.partitions)?;
        let kept: u64 = q
            .partitions
            .iter()
            .map(|p| PARTITION_COST + p.name.len() as u64)
            .sum();
        if let Err(s) = held.charge_whole(kept) {
            return Ok(Err(s));
        }
        rows.push(q);
    }
    Ok(Ok(Listing { rows, total }))
}

/// Which rows of a listing (a queue's partitions, the queues of a tenant, the groups)
/// a read carries: `limit` of them, after skipping `offset`, in the listing's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Page {
    /// Rows skipped.
    pub offset: usize,
    /// Most rows carried.
    pub limit: usize,
}

impl Page {
    /// Every row.
    pub const ALL: Page = Page {
        offset: 0,
        limit: usize::MAX,
    };

    /// No row (a listing's total alone).
    pub const NONE: Page = Page {
        offset: 0,
        limit: 0,
    };

    /// The indexes of the rows carried.
    pub fn range(self) -> std::ops::Range<usize> {
        self.offset..self.offset.saturating_add(self.limit)
    }
}

/// One queue with its figures; `None` when it does not exist.
pub fn queue(
    db: &Database,
    tenant: &str,
    name: &str,
    now: Micros,
) -> Result<Option<QueueStats>, StoreError> {
    queue_page(db, tenant, name, now, Page::ALL)
}

/// [`queue`] with a page of its partitions: the figures of the others are added to
/// the totals and dropped, so an answer holds at most `page.limit` partitions however
/// many the queue has.
pub fn queue_page(
    db: &Database,
    tenant: &str,
    name: &str,
    now: Micros,
    page: Page,
) -> Result<Option<QueueStats>, StoreError> {
    let r = Reader::begin(db)?;
    let Some(record) =
        r.get_record::<QueueRecord>(T::Queues, &Key::tenant(tenant).str(name).into_bytes())?
    else {
        return Ok(None);
    };
    let dead = dead_letters_by_partition(&r, tenant)?;
    stats(
        &r,
        tenant,
        (name.to_string(), record),
        &dead,
        now,
        Measure::Full,
        page,
    )
    .map(Some)
}

/// One message by partition id and transaction id; `None` when either is unknown or
/// the message is no longer stored.
pub fn message(
    db: &Database,
    tenant: &str,
    partition_id: u64,
    transaction_id: &str,
    now: Micros,
) -> Result<Option<MessageDetail>, StoreError> {
    let r = Reader::begin(db)?;
    let t = Key::tenant(tenant);
    let Some(pref) =
        r.get_record::<PartitionRef>(T::PartitionIds, &t.clone().u64(partition_id).into_bytes())?
    else {
        return Ok(None);
    };
    let idx = t.clone().u64(partition_id).str(transaction_id).into_bytes();
    let Some(TxnRef { offset, .. }) = r.get_record::<TxnRef>(T::TxnIndex, &idx)? else {
        return Ok(None);
    };
    let mkey = t.clone().u64(partition_id).u64(offset).into_bytes();
    let Some(message) = r.get_record::<MessageRecord>(T::Messages, &mkey)? else {
        return Ok(None);
    };
    let Some(queue_record) =
        r.get_record::<QueueRecord>(T::Queues, &t.clone().str(&pref.queue).into_bytes())?
    else {
        return Ok(None);
    };
    let dead_groups = dead_groups_of(&r, tenant, partition_id, offset)?;
    let mut groups = Vec::new();
    consumers::each_row(&r, tenant, partition_id, |name, c| {
        let st = c.pending.get(&offset);
        let in_live = consumers::live_lease(&c, now).is_some() && st.is_some_and(|s| s.in_lease);
        // A dead-lettered message's pending entry is gone once the cursor passes it;
        // its DLQ row keeps the failures it took (each one after a delivery).
        let dead = dead_groups
            .iter()
            .find(|(g, _)| *g == name)
            .map(|(_, retries)| *retries);
        let status = if dead.is_some() {
            MessageStatus::DeadLetter
        } else if offset < c.cursor {
            MessageStatus::Completed
        } else if in_live {
            MessageStatus::Processing
        } else {
            MessageStatus::Pending
        };
        groups.push(GroupView {
            lease: c
                .lease
                .as_ref()
                .filter(|l| l.expires_at > now)
                .map(|l| (l.id.clone(), l.expires_at)),
            name,
            cursor: c.cursor,
            status,
            consumed: offset < c.cursor,
            deliveries: st.map_or(0, |s| s.deliveries).max(dead.unwrap_or(0)),
            failures: st.map_or(0, |s| s.failures).max(dead.unwrap_or(0)),
        });
    })?;
    let any = |s: MessageStatus| groups.iter().any(|g| g.status == s);
    let status = if any(MessageStatus::Processing) {
        MessageStatus::Processing
    } else if any(MessageStatus::DeadLetter) {
        MessageStatus::DeadLetter
    } else if !groups.is_empty() && groups.iter().all(|g| g.status == MessageStatus::Completed) {
        MessageStatus::Completed
    } else {
        MessageStatus::Pending
    };
    Ok(Some(MessageDetail {
        queue: pref.queue,
        partition: pref.partition,
        partition_id,
        offset,
        message,
        queue_record,
        status,
        groups,
    }))
}

fn stats(
    r: &Reader,
    tenant: &str,
    (name, record): (String, QueueRecord),
    dead: &HashMap<u64, u64>,
    now: Micros,
    measure: Measure,
    page: Page,
) -> Result<QueueStats, StoreError> {
    let mut partitions = Vec::new();
    let mut totals = Counts::default();
    let mut retained_bytes = 0;
    let all = list_partitions(r, tenant, &name)?;
    let partition_count = all.len();
    let kept = page.range();
    for (i, p) in all.into_iter().enumerate() {
        let s = partition_stats(r, tenant, p, dead, now, measure)?;
        totals.add(&s.counts);
        retained_bytes += s.retained_bytes;
        if kept.contains(&i) {
            partitions.push(s);
        }
    }
    Ok(QueueStats {
        name,
        record,
        partitions,
        partition_count,
        totals,
        retained_bytes,
    })
}

fn partition_stats(
    r: &Reader,
    tenant: &str,
    p: PartitionEntry,
    dead: &HashMap<u64, u64>,
    now: Micros,
    measure: Measure,
) -> Result<PartitionStats, StoreError> {
    let PartitionEntry {
        name,
        rec:
            PartitionRecord {
                id,
                next_offset,
                created_at,
            },
    } = p;
    let prefix = Key::tenant(tenant).u64(id).into_bytes();
    let (mut first, mut last, mut stored, mut bytes) = (None, None, 0u64, 0u64);
    match measure {
        Measure::Full => r.scan(T::Messages, &prefix, &prefix, |k, v| {
            let offset = u64::from_be_bytes(k[k.len() - 8..].try_into().expect("8-byte offset"));
            first.get_or_insert(offset);
            last = Some(offset);
            stored += 1;
            bytes += v.len() as u64;
            Ok(true)
        })?,
        Measure::Watermarks => {
            if let Some(f) = first_stored(r, tenant, id)? {
                first = Some(f);
                stored = next_offset.saturating_sub(f);
                last = next_offset.checked_sub(1);
            }
        }
    }
    let last_message_at = match last {
        Some(o) => r
            .get_record::<MessageRecord>(
                T::Messages,
                &Key::tenant(tenant).u64(id).u64(o).into_bytes(),
            )?
            .map(|m| m.created_at),
        None => None,
    };
    let first_offset = first.unwrap_or(next_offset);
    // The slowest group: the lowest cursor, and what it holds under a live lease.
    let mut slowest: Option<(u64, u64)> = None;
    let mut groups = 0;
    let mut consumed = 0;
    consumers::each_row(r, tenant, id, |_, c| {
        groups += 1;
        consumed += c.cursor.min(next_offset);
        let leased = if consumers::live_lease(&c, now).is_some() {
            c.pending
                .range(c.cursor..)
                .filter(|(_, s)| s.in_lease && !s.done)
                .count() as u64
        } else {
            0
        };
        if slowest.is_none_or(|(cur, _)| c.cursor < cur) {
            slowest = Some((c.cursor, leased));
        }
    })?;
    let (completed, processing) = match slowest {
        Some((cursor, leased)) => (
            cursor.clamp(first_offset, next_offset) - first_offset,
            leased,
        ),
        None => (0, 0),
    };
    let completed = completed.min(stored);
    let processing = processing.min(stored - completed);
    let oldest_unconsumed_at = if completed < stored {
        let at = first_offset + completed;
        r.get_record::<MessageRecord>(
            T::Messages,
            &Key::tenant(tenant).u64(id).u64(at).into_bytes(),
        )?
        .map(|m| m.created_at)
    } else {
        None
    };
    Ok(PartitionStats {
        name,
        id,
        created_at,
        first_offset,
        next_offset,
        last_message_at,
        counts: Counts {
            total: stored,
            pending: stored - completed - processing,
            processing,
            completed,
            dead_letter: dead.get(&id).copied().unwrap_or(0),
        },
        retained_bytes: bytes,
        groups,
        oldest_unconsumed_at,
        consumed,
    })
}

/// Dead letters per partition id.
fn dead_letters_by_partition(r: &Reader, tenant: &str) -> Result<HashMap<u64, u64>, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut out = HashMap::new();
    r.scan(T::Dlq, &prefix, &prefix, |_, v| {
        let d: DlqRecord = decode(v)?;
        *out.entry(d.partition_id).or_default() += 1;
        Ok(true)
    })?;
    Ok(out)
}

/// The groups that dead-lettered the message at `offset`, each with the `failed` acks
/// its DLQ row counts.
fn dead_groups_of(
    r: &Reader,
    tenant: &str,
    pid: u64,
    offset: u64,
) -> Result<Vec<(String, u32)>, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut out = Vec::new();
    r.scan(T::Dlq, &prefix, &prefix, |_, v| {
        let d: DlqRecord = decode(v)?;
        if d.partition_id == pid && d.offset == offset {
            out.push((d.group, d.retry_count));
        }
        Ok(true)
    })?;
    Ok(out)
}

/// One partition's backlog, as [`depth`] measures it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionDepth {
    /// The partition's name.
    pub partition: String,
    /// Messages left to commit.
    pub pending: u64,
}

/// A queue's backlog by watermark arithmetic: no message is read, only each
/// partition's head, next offset and cursors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Depth {
    /// The queue.
    pub queue: String,
    /// The group measured; `None`: the slowest group of each partition.
    pub group: Option<String>,
    /// Per partition, in name order.
    pub partitions: Vec<PartitionDepth>,
    /// The partitions' backlogs added up.
    pub pending: u64,
    /// Partitions owing anything.
    pub partitions_pending: u64,
}

/// The backlog of one queue, for one group or (with `group: None`) for the slowest
/// group of each partition; `None` when the queue does not exist. A group with no
/// cursor on a partition owes its whole stored range there (the official client's
/// `Admin::queue_depth` documents this), and so does a partition no group has read.
pub fn depth(
    db: &Database,
    tenant: &str,
    queue: &str,
    group: Option<&str>,
) -> Result<Option<Depth>, StoreError> {
    let r = Reader::begin(db)?;
    let t = Key::tenant(tenant);
    if r.get(T::Queues, &t.clone().str(queue).into_bytes())?
        .is_none()
    {
        return Ok(None);
    }
    let mut out = Depth {
        queue: queue.to_string(),
        group: group.map(str::to_string),
        partitions: Vec::new(),
        pending: 0,
        partitions_pending: 0,
    };
    for p in list_partitions(&r, tenant, queue)? {
        let next = p.rec.next_offset;
        let first = first_stored(&r, tenant, p.rec.id)?.unwrap_or(next);
        let cursor = match group {
            Some(g) => r
                .get_record::<crate::store::records::ConsumerRecord>(
                    T::Consumers,
                    &consumers::key(tenant, p.rec.id, g),
                )?
                .map(|c| c.cursor),
            None => {
                let mut lowest: Option<u64> = None;
                consumers::each_row(&r, tenant, p.rec.id, |_, c| {
                    lowest = Some(lowest.map_or(c.cursor, |l| l.min(c.cursor)));
                })?;
                lowest
            }
        };
        let from = cursor.unwrap_or(first).max(first);
        let pending = next.saturating_sub(from);
        out.pending += pending;
        out.partitions_pending += u64::from(pending > 0);
        out.partitions.push(PartitionDepth {
            partition: p.name,
            pending,
        });
    }
    Ok(Some(out))
}

/// The offset of a partition's oldest stored message, reading one key.
fn first_stored(r: &Reader, tenant: &str, pid: u64) -> Result<Option<u64>, StoreError> {
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    let mut first = None;
    r.scan(T::Messages, &prefix, &prefix, |k, _| {
        first = KeyReader::new(&k[prefix.len()..]).u64();
        Ok(false)
    })?;
    Ok(first)
}

/// What a queue is grouped by in [`groupings`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The queue's namespace.
    Namespace,
    /// The queue's task.
    Task,
}

/// Queues sharing one namespace or task, with their figures added up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grouping {
    /// The namespace or task.
    pub name: String,
    /// Its queues, in name order.
    pub queues: Vec<String>,
    /// Their partitions.
    pub partitions: usize,
    /// Their counts added up.
    pub counts: Counts,
}

/// The namespaces (or tasks) of `queues`, in name order; a queue without one is in
/// none.
pub fn groupings(queues: &[QueueStats], by: GroupBy) -> Vec<Grouping> {
    let mut out: std::collections::BTreeMap<&str, Grouping> = Default::default();
    for q in queues {
        let key = match by {
            GroupBy::Namespace => q.record.namespace.as_deref(),
            GroupBy::Task => q.record.task.as_deref(),
        };
        let Some(key) = key.filter(|k| !k.is_empty()) else {
            continue;
        };
        let g = out.entry(key).or_insert_with(|| Grouping {
            name: key.to_string(),
            queues: Vec::new(),
            partitions: 0,
            counts: Counts::default(),
        });
        g.queues.push(q.name.clone());
        g.partitions += q.partitions.len();
        g.counts.add(&q.totals);
    }
    out.into_values().collect()
}

/// One row of [`busiest_partitions`].
#[derive(Debug, Clone)]
pub struct RankedPartition<'a> {
    /// The partition's queue.
    pub queue: &'a str,
    /// The partition.
    pub stats: &'a PartitionStats,
}

/// The partitions of `queues` holding the most pending first (then the most
/// processing, then by queue and name), at most `limit` of them.
pub fn busiest_partitions(queues: &[QueueStats], limit: usize) -> Vec<RankedPartition<'_>> {
    let mut rows: Vec<RankedPartition<'_>> = queues
        .iter()
        .flat_map(|q| {
            q.partitions.iter().map(|p| RankedPartition {
                queue: &q.name,
                stats: p,
            })
        })
        .collect();
    rows.sort_by(|a, b| {
        (b.stats.counts.pending, b.stats.counts.processing)
            .cmp(&(a.stats.counts.pending, a.stats.counts.processing))
            .then_with(|| (a.queue, &a.stats.name).cmp(&(b.queue, &b.stats.name)))
    });
    rows.truncate(limit);
    rows
}
