//! Reading messages without consuming them: the operator's message listing
//! (`GET /api/v1/messages`), reads by offset (`POST /api/v1/fetch`) and partition
//! discovery (`POST /api/v1/partitions/changed`).
//!
//! None of these takes a lease, moves a cursor or writes anything: each is served from
//! one snapshot of the last commit ([`Reader`]), so two readers asking the same
//! question get the same answer and no consumer group notices them. Only a fetch that
//! asks to wait (`maxWaitMs`) waits, and then only for a commit that adds messages.
//!
//! Offsets are the log's: a partition's `highWatermark` is its next offset, its
//! `logStartOffset` the oldest offset retention kept. Partitions are listed in creation
//! order, which is the order of their broker-wide ids.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, HashSet};
use std::time::Duration;

use redb::Database;
use serde_json::value::RawValue;

use super::answers::{self, Charged, Held, Starved};
use super::consumers;
use super::queues::{PartitionEntry, list_partitions};
use super::resources::MessageStatus;
use super::{Engine, QUEUE_MODE};
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{
    ConsumerRecord, DlqRecord, MessageRecord, PartitionRecord, QueueRecord, decode,
};
use crate::store::{Reader, StoreError, T, View};

// ------------------------------------------------------------------------ fetch

/// Most entries one fetch or one discovery call may carry (more: 400).
pub const MAX_ENTRIES: usize = 1024;

/// Payload bytes one fetch entry reads when it names no budget.
pub const DEFAULT_ENTRY_BYTES: u64 = 1 << 20;

/// The most payload bytes one fetch entry reads, whatever it asks.
pub const MAX_ENTRY_BYTES: u64 = 8 << 20;

/// The most payload bytes one fetch call reads, whatever it asks; also its default.
pub const MAX_CALL_BYTES: u64 = 64 << 20;

/// The longest a fetch waits for a record.
pub const MAX_WAIT: Duration = Duration::from_secs(30);

/// Most records one entry answers, however small they are **(ours)**: a budget in
/// bytes alone lets a run of tiny records grow one answer without bound.
pub const MAX_RECORDS_PER_ENTRY: usize = 10_000;

/// One partition to read, from an offset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FetchEntry {
    /// The queue.
    pub queue: String,
    /// The partition's name.
    pub partition: String,
    /// The first offset wanted.
    pub offset: u64,
    /// Payload bytes this entry may read (at least one record is read regardless).
    pub max_bytes: u64,
}

/// A fetch call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetch {
    /// The partitions to read, answered in this order.
    pub entries: Vec<FetchEntry>,
    /// Payload bytes the whole call may read: once spent, later entries answer no
    /// records (their bounds still).
    pub max_bytes: u64,
    /// How long to wait when nothing is there yet (zero: answer at once).
    pub max_wait: Duration,
    /// Payload bytes that end a wait (a record counts at least one byte; 0: never wait).
    pub min_bytes: u64,
}

/// Why an entry answered no records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchError {
    /// The offset is below the oldest kept or above the next to be written.
    OffsetOutOfRange,
    /// No such queue or partition for this tenant.
    UnknownPartition,
}

/// One entry's answer.
#[derive(Debug, Clone)]
pub struct FetchedEntry {
    /// The queue, as asked.
    pub queue: String,
    /// The partition, as resolved.
    pub partition: String,
    /// The records read, in offset order, with their offsets.
    pub records: Vec<(u64, MessageRecord)>,
    /// The next offset the partition will write.
    pub high_watermark: u64,
    /// The oldest offset still kept.
    pub log_start_offset: u64,
    /// Why there are no records, when it is an error.
    pub error: Option<FetchError>,
}

/// A record's payload bytes as the budgets count them: its JSON text, at least one.
fn record_bytes(m: &MessageRecord) -> u64 {
    (m.data.get().len() as u64).max(1)
}

/// The offset of the oldest stored message of a partition; `None` when none is.
fn first_stored(r: &impl View, tenant: &str, pid: u64) -> Result<Option<u64>, StoreError> {
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    let mut first = None;
    r.scan_rows(T::Messages, &prefix, &prefix, &mut |k, _| {
        first = KeyReader::new(&k[prefix.len()..]).u64();
        Ok(false)
    })?;
    Ok(first)
}

/// A fetch's answer and the room it holds in the broker's [`AnswerBudget`](answers::AnswerBudget).
#[derive(Debug)]
pub struct Fetched {
    /// One answer per entry, in the call's order.
    pub entries: Vec<FetchedEntry>,
    /// The room the records hold; keep it until the answer has been sent.
    pub held: Held,
}

/// How a read of [`fetch`] ended.
#[derive(Debug)]
pub enum FetchRead {
    /// Read as far as the call's budgets (and the answer budget) let it.
    Read {
        /// One answer per entry.
        entries: Vec<FetchedEntry>,
        /// The answer budget ran out before the call's own budgets did.
        cut: bool,
    },
    /// The answer budget had no room for even the first record, which costs this much
    /// ([`answers::record_cost`]): wait for that much room and read again.
    Starved(u64),
}

/// Reads every entry of a fetch from one snapshot of the last commit, charging each
/// record to `held` ([`answers::record_cost`]). When the answer budget has no room for
/// a record, the call ends there, as when its own byte budget is spent: the entries
/// after it answer their bounds and no records.
pub fn fetch(
    db: &Database,
    tenant: &str,
    f: &Fetch,
    held: &mut Held,
) -> Result<FetchRead, StoreError> {
    let r = Reader::begin(db)?;
    let mut call_left = f.max_bytes;
    let mut out = Vec::with_capacity(f.entries.len());
    let (mut any, mut cut, mut starved) = (false, false, None);
    for e in &f.entries {
        let mut entry = FetchedEntry {
            queue: e.queue.clone(),
            partition: e.partition.clone(),
            records: Vec::new(),
            high_watermark: 0,
            log_start_offset: 0,
            error: None,
        };
        let pkey = super::queues::partition_key(tenant, &e.queue, &e.partition);
        let Some(part) = r.get_record::<PartitionRecord>(T::Partitions, &pkey)? else {
            entry.error = Some(FetchError::UnknownPartition);
            out.push(entry);
            continue;
        };
        let start = first_stored(&r, tenant, part.id)?.unwrap_or(part.next_offset);
        entry.high_watermark = part.next_offset;
        entry.log_start_offset = start;
        if e.offset < start || e.offset > part.next_offset {
            entry.error = Some(FetchError::OffsetOutOfRange);
            out.push(entry);
            continue;
        }
        let budget = e.max_bytes.min(MAX_ENTRY_BYTES);
        let mut used = 0u64;
        if call_left > 0 && !cut {
            let prefix = Key::tenant(tenant).u64(part.id).into_bytes();
            let from = Key::tenant(tenant).u64(part.id).u64(e.offset).into_bytes();
            r.scan(T::Messages, &from, &prefix, |k, v| {
                let Some(offset) = KeyReader::new(&k[prefix.len()..]).u64() else {
                    return Ok(true);
                };
                let m: MessageRecord = decode(v)?;
                let n = record_bytes(&m);
                // The first record always comes back, so one large record cannot
                // stall a reader; after it, the budgets bind.
                if !entry.records.is_empty() && (used + n > budget || n > call_left) {
                    return Ok(false);
                }
                let cost = answers::record_cost(v.len());
                // A record that costs more than the whole budget is answered alone,
                // holding all of it.
                if !held.try_charge(cost) && (any || !held.holds_all()) {
                    cut = true;
                    if !any {
                        starved = Some(cost);
                    }
                    return Ok(false);
                }
                any = true;
                used += n;
                call_left = call_left.saturating_sub(n);
                entry.records.push((offset, m));
                Ok(entry.records.len() < MAX_RECORDS_PER_ENTRY && call_left > 0)
            })?;
        }
        out.push(entry);
    }
    Ok(match starved {
        Some(cost) => FetchRead::Starved(cost),
        None => FetchRead::Read { entries: out, cut },
    })
}

impl Engine {
    /// Reads records by offset ([`fetch`]); with a wait, until a record is there, an
    /// entry fails, or the wait passes. The records are charged to the broker's
    /// answer budget: when it is spent the answer carries what fitted; when not even
    /// one record fits, the call waits for room ([`answers::AnswerBudget::acquire`]) and is
    /// refused with [`EngineError::AnswersBusy`] if none comes.
    pub async fn fetch(&self, tenant: &str, f: Fetch) -> Result<Fetched, EngineError> {
        let f = std::sync::Arc::new(f);
        let longest = MAX_WAIT.min(self.limits().max_wait);
        let deadline = tokio::time::Instant::now() + f.max_wait.min(longest);
        let waker = self.shared.wakers.tenant(tenant);
        let answers = self.answer_budget();
        let mut room = answers.empty();
        loop {
            // Register before reading, so a push committed in between still wakes us.
            let pushed = waker.notified();
            tokio::pin!(pushed);
            pushed.as_mut().enable();
            let (t, call) = (tenant.to_string(), f.clone());
            let mut held = std::mem::replace(&mut room, answers.empty());
            let (read, held) = self
                .read(move |db, _| fetch(db, &t, &call, &mut held).map(|r| (r, held)))
                .await?;
            let (entries, cut) = match read {
                FetchRead::Read { entries, cut } => (entries, cut),
                FetchRead::Starved(cost) => {
                    drop(held);
                    room = answers.acquire(cost).await?;
                    continue;
                }
            };
            let bytes: u64 = entries
                .iter()
                .flat_map(|e| &e.records)
                .map(|(_, m)| record_bytes(m))
                .sum();
            let failed = entries.iter().any(|e| e.error.is_some());
            if f.min_bytes == 0
                || f.entries.is_empty()
                || bytes >= f.min_bytes
                || failed
                || cut
                || self.is_closing()
                || tokio::time::Instant::now() >= deadline
            {
                return Ok(Fetched { entries, held });
            }
            // Waiting holds no room: what was read is read again after the wait.
            drop((entries, held));
            tokio::select! {
                _ = &mut pushed => {}
                _ = tokio::time::sleep_until(deadline) => {}
            }
        }
    }

    /// Lists the partitions of queues written since a time ([`changed`]).
    pub async fn changed(
        &self,
        tenant: &str,
        queries: Vec<ChangedQuery>,
    ) -> Result<Changed, EngineError> {
        let tenant = tenant.to_string();
        self.read(move |db, _| changed(db, &tenant, &queries)).await
    }

    /// Lists messages with where they stand ([`list_messages`]), with the room the
    /// page holds in the answer budget ([whole reads](crate::engine::answers#whole-answers)): keep it until the
    /// answer has been sent.
    pub async fn list_messages(
        &self,
        tenant: &str,
        filter: MessageFilter,
    ) -> Result<Charged<MessagePage>, EngineError> {
        let tenant = tenant.to_string();
        self.read_whole(move |db, now, held| list_messages(db, &tenant, &filter, now, held))
            .await
    }
}

// -------------------------------------------------------------------- discovery

/// Partitions per discovery page when the entry names no limit, and the most.
pub const MAX_CHANGED_PAGE: usize = 1000;

/// One queue to list the partitions of.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedQuery {
    /// The queue.
    pub queue: String,
    /// Only partitions last written at or after this time; `None`: all.
    pub since: Option<Micros>,
    /// Continue after this cursor (from an earlier page's `next`).
    pub after: Option<String>,
    /// Partitions per page (1 to [`MAX_CHANGED_PAGE`]).
    pub limit: usize,
}

/// One partition as discovery lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChangedPartition {
    /// Its name.
    pub name: String,
    /// Its broker-wide id, the same for its whole life.
    pub id: u64,
    /// The offset of its last record; -1 when it has none.
    pub last_offset: i64,
    /// The oldest offset still kept.
    pub log_start: u64,
    /// When its newest record was stored (its creation, before any).
    pub last_write_at: Micros,
}

/// One queue's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChangedAnswer {
    /// No such queue for this tenant.
    UnknownQueue,
    /// The cursor is not one this broker issued.
    BadCursor,
    /// A page in creation order, and the cursor of the next one when more match.
    Page {
        /// The partitions.
        partitions: Vec<ChangedPartition>,
        /// The cursor to continue from; `None`: the pass is over.
        next: Option<String>,
    },
}

/// A discovery call's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// One answer per query, in order, with its queue.
    pub answers: Vec<(String, ChangedAnswer)>,
    /// The greatest record stamp this answer is complete up to: any record it does not
    /// count was stored at or after it, so the next pass passes it as `since`.
    pub safe_time: Micros,
}

/// The cursor naming the position after partition `id` in creation order.
fn cursor(id: u64) -> String {
    format!("p|{id}")
}

fn parse_cursor(s: &str) -> Option<u64> {
    s.strip_prefix("p|")?.parse().ok()
}

/// A partition's bounds and last write, as discovery lists it.
fn describe(r: &Reader, tenant: &str, p: PartitionEntry) -> Result<ChangedPartition, StoreError> {
    let PartitionRecord {
        id,
        next_offset,
        created_at,
    } = p.rec;
    let newest = match next_offset.checked_sub(1) {
        Some(last) => r.get_record::<MessageRecord>(
            T::Messages,
            &Key::tenant(tenant).u64(id).u64(last).into_bytes(),
        )?,
        None => None,
    };
    Ok(ChangedPartition {
        name: p.name,
        id,
        last_offset: next_offset as i64 - 1,
        log_start: first_stored(r, tenant, id)?.unwrap_or(next_offset),
        last_write_at: newest.map_or(created_at, |m| m.created_at.max(created_at)),
    })
}

/// Lists, per query, the queue's partitions in creation order, written at or after
/// `since`, a page at a time; all from one snapshot of the last commit.
///
/// `safe_time` is the newest last write among the partitions of the queues asked
/// about (of every queue, for a call that asks about none): the writer stamps records
/// with a clock that only moves on, so a record committed after this snapshot is
/// stamped at or after it, and a next pass from it (inclusive) meets that record.
pub fn changed(
    db: &Database,
    tenant: &str,
    queries: &[ChangedQuery],
) -> Result<Changed, StoreError> {
    let r = Reader::begin(db)?;
    let mut safe_time = 0;
    let mut answers = Vec::with_capacity(queries.len());
    if queries.is_empty() {
        let prefix = Key::tenant(tenant).into_bytes();
        let mut queues = HashSet::new();
        r.scan(T::Queues, &prefix, &prefix, |k, _| {
            if let Some(q) = KeyReader::new(&k[prefix.len()..]).str() {
                queues.insert(q);
            }
            Ok(true)
        })?;
        for q in queues {
            for p in list_partitions(&r, tenant, &q)? {
                safe_time = safe_time.max(describe(&r, tenant, p)?.last_write_at);
            }
        }
    }
    for q in queries {
        let qkey = Key::tenant(tenant).str(&q.queue).into_bytes();
        if r.get_raw(T::Queues, &qkey)?.is_none() {
            answers.push((q.queue.clone(), ChangedAnswer::UnknownQueue));
            continue;
        }
        let after = match q.after.as_deref().filter(|a| !a.is_empty()) {
            None => None,
            Some(a) => match parse_cursor(a) {
                Some(id) => Some(id),
                None => {
                    answers.push((q.queue.clone(), ChangedAnswer::BadCursor));
                    continue;
                }
            },
        };
        let mut all = Vec::new();
        for p in list_partitions(&r, tenant, &q.queue)? {
            let d = describe(&r, tenant, p)?;
            safe_time = safe_time.max(d.last_write_at);
            all.push(d);
        }
        all.sort_by_key(|p| p.id);
        let mut matching = all.into_iter().filter(|p| {
            after.is_none_or(|a| p.id > a) && q.since.is_none_or(|s| p.last_write_at >= s)
        });
        let limit = q.limit.clamp(1, MAX_CHANGED_PAGE);
        let partitions: Vec<ChangedPartition> = matching.by_ref().take(limit).collect();
        let next = match (matching.next(), partitions.last()) {
            (Some(_), Some(last)) => Some(cursor(last.id)),
            _ => None,
        };
        answers.push((q.queue.clone(), ChangedAnswer::Page { partitions, next }));
    }
    Ok(Changed { answers, safe_time })
}

// --------------------------------------------------------------------- listing

/// Filters and page of the message listing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MessageFilter {
    /// Only this queue's messages.
    pub queue: Option<String>,
    /// Only this partition's (by name).
    pub partition: Option<String>,
    /// Only queues of this namespace.
    pub namespace: Option<String>,
    /// Only queues of this task.
    pub task: Option<String>,
    /// Only messages with this status.
    pub status: Option<MessageStatus>,
    /// Only messages created at or after this time.
    pub from: Option<Micros>,
    /// Only messages created at or before this time.
    pub to: Option<Micros>,
    /// Page size.
    pub limit: usize,
    /// Matches to skip, newest first.
    pub offset: usize,
}

/// One listed message.
#[derive(Debug, Clone)]
pub struct ListedMessage {
    /// Its queue.
    pub queue: String,
    /// Its partition's name.
    pub partition: String,
    /// Its partition's id.
    pub partition_id: u64,
    /// Its offset.
    pub offset: u64,
    /// The queue's namespace.
    pub namespace: Option<String>,
    /// The queue's task.
    pub task: Option<String>,
    /// Where it stands (as the message detail says: processing if a group holds it, a
    /// dead letter if a group dead-lettered it, completed once every group that reads
    /// its partition is past it, pending otherwise).
    pub status: MessageStatus,
    /// When the live lease holding it ends.
    pub lease_expires_at: Option<Micros>,
    /// The stored message, without its payload (`data` is `null`: the listing does not
    /// show it, and a page of large payloads is not held for nothing).
    pub message: MessageRecord,
}

/// Which kinds of consumer read the listed partitions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConsumerMode {
    /// The competing-consumers group reads at least one of them.
    pub has_queue_mode: bool,
    /// Named groups reading them.
    pub bus_groups: usize,
}

/// A page of the listing, newest first.
#[derive(Debug, Clone, Default)]
pub struct MessagePage {
    /// The page.
    pub messages: Vec<ListedMessage>,
    /// The consumers of the partitions looked at.
    pub mode: ConsumerMode,
}

/// A message's status for the groups reading its partition, and the live lease that
/// holds it (the rules of [`super::resources::message`], over rows read once per
/// partition).
fn status_of(
    offset: u64,
    rows: &[(String, ConsumerRecord)],
    dead: Option<&Vec<String>>,
    now: Micros,
) -> (MessageStatus, Option<Micros>) {
    let mut lease = None;
    let (mut processing, mut completed) = (false, 0);
    for (_, c) in rows {
        let held = c.lease.as_ref().filter(|l| l.expires_at > now);
        if offset < c.cursor {
            completed += 1;
        } else if let Some(l) = held
            && c.pending
                .get(&offset)
                .is_some_and(|s| s.in_lease && !s.done)
        {
            processing = true;
            lease = Some(l.expires_at);
        }
    }
    let status = if processing {
        MessageStatus::Processing
    } else if dead.is_some_and(|d| !d.is_empty()) {
        MessageStatus::DeadLetter
    } else if !rows.is_empty() && completed == rows.len() {
        MessageStatus::Completed
    } else {
        MessageStatus::Pending
    };
    (status, lease)
}

/// What one match the listing keeps while it walks costs: its place in the heap of
/// the newest and its status in the map beside it, with the tables' share.
const MATCH_COST: u64 = 96;

/// What one listed message holds in an answer: its record without its payload, its
/// queue's and partition's names and its JSON row (measured: 500 to 700 bytes).
const LISTED_COST: u64 = 1024;

/// Lists the tenant's messages matching `f`, newest first (by creation time), from one
/// snapshot of the last commit. Only the first `offset + limit` matches are kept while
/// the matches are walked, and the page's payloads are not kept (the listing does not
/// show them). What is kept is charged to `held` ([`Held::charge_whole`](crate::engine::answers::Held::charge_whole)):
/// `Err(Starved)` when the answer budget had no room.
pub fn list_messages(
    db: &Database,
    tenant: &str,
    f: &MessageFilter,
    now: Micros,
    held: &mut Held,
) -> Result<Result<MessagePage, Starved>, StoreError> {
    let r = Reader::begin(db)?;
    // Dead letters by (partition, offset): the groups that dead-lettered each.
    let prefix = Key::tenant(tenant).into_bytes();
    let mut dead: HashMap<(u64, u64), Vec<String>> = HashMap::new();
    let mut starved = None;
    r.scan(T::Dlq, &prefix, &prefix, |_, v| {
        let d: DlqRecord = decode(v)?;
        if let Err(s) = held.charge_whole(d.group.len() as u64 + 64) {
            starved = Some(s);
            return Ok(false);
        }
        dead.entry((d.partition_id, d.offset))
            .or_default()
            .push(d.group);
        Ok(true)
    })?;
    if let Some(s) = starved {
        return Ok(Err(s));
    }
    let mut queues = Vec::new();
    match &f.queue {
        Some(q) => {
            let key = Key::tenant(tenant).str(q).into_bytes();
            if let Some(rec) = r.get_record::<QueueRecord>(T::Queues, &key)? {
                queues.push((q.clone(), rec));
            }
        }
        None => r.scan(T::Queues, &prefix, &prefix, |k, v| {
            if let Some(name) = KeyReader::new(&k[prefix.len()..]).str() {
                queues.push((name, decode(v)?));
            }
            Ok(true)
        })?,
    }
    queues.retain(|(_, q)| {
        f.namespace
            .as_ref()
            .is_none_or(|n| q.namespace.as_ref() == Some(n))
            && f.task.as_ref().is_none_or(|t| q.task.as_ref() == Some(t))
    });

    let keep = f.offset.saturating_add(f.limit);
    // The newest `keep` matches: a min-heap on (created_at, partition id, offset).
    let mut newest: BinaryHeap<Reverse<(Micros, u64, u64)>> = BinaryHeap::new();
    let mut found: HashMap<(u64, u64), (MessageStatus, Option<Micros>)> = HashMap::new();
    let mut mode = ConsumerMode::default();
    let mut bus = HashSet::new();
    let mut where_is: HashMap<u64, (usize, String)> = HashMap::new();
    for (qi, (queue, _)) in queues.iter().enumerate() {
        for p in list_partitions(&r, tenant, queue)? {
            if f.partition.as_ref().is_some_and(|want| *want != p.name) {
                continue;
            }
            let pid = p.rec.id;
            let mut rows = Vec::new();
            consumers::each_row(&r, tenant, pid, |g, c| rows.push((g, c)))?;
            for (g, _) in &rows {
                if g == QUEUE_MODE {
                    mode.has_queue_mode = true;
                } else {
                    bus.insert(g.clone());
                }
            }
            where_is.insert(pid, (qi, p.name));
            let mprefix = Key::tenant(tenant).u64(pid).into_bytes();
            r.scan(T::Messages, &mprefix, &mprefix, |k, v| {
                let Some(offset) = KeyReader::new(&k[mprefix.len()..]).u64() else {
                    return Ok(true);
                };
                let m: MessageRecord = decode(v)?;
                if f.from.is_some_and(|t| m.created_at < t)
                    || f.to.is_some_and(|t| m.created_at > t)
                {
                    return Ok(true);
                }
                let (status, lease) = status_of(offset, &rows, dead.get(&(pid, offset)), now);
                if f.status.is_some_and(|s| s != status) {
                    return Ok(true);
                }
                if newest.len() < keep
                    && let Err(s) = held.charge_whole(MATCH_COST)
                {
                    starved = Some(s);
                    return Ok(false);
                }
                newest.push(Reverse((m.created_at, pid, offset)));
                found.insert((pid, offset), (status, lease));
                if newest.len() > keep
                    && let Some(Reverse((_, p, o))) = newest.pop()
                {
                    found.remove(&(p, o));
                }
                Ok(true)
            })?;
            if let Some(s) = starved {
                return Ok(Err(s));
            }
        }
    }
    mode.bus_groups = bus.len();
    let mut page: Vec<(Micros, u64, u64)> = newest.into_iter().map(|Reverse(k)| k).collect();
    page.sort_by(|a, b| b.cmp(a));
    let mut messages = Vec::with_capacity(f.limit);
    for (_, pid, offset) in page.into_iter().skip(f.offset).take(f.limit) {
        let key = Key::tenant(tenant).u64(pid).u64(offset).into_bytes();
        let (Some(mut message), Some((qi, partition)), Some(&(status, lease))) = (
            r.get_record::<MessageRecord>(T::Messages, &key)?,
            where_is.get(&pid),
            found.get(&(pid, offset)),
        ) else {
            continue;
        };
        message.data = RawValue::NULL.to_owned();
        if let Err(s) = held.charge_whole(LISTED_COST) {
            return Ok(Err(s));
        }
        let (queue, rec) = &queues[*qi];
        messages.push(ListedMessage {
            queue: queue.clone(),
            partition: partition.clone(),
            partition_id: pid,
            offset,
            namespace: rec.namespace.clone(),
            task: rec.task.clone(),
            status,
            lease_expires_at: lease,
            message,
        });
    }
    Ok(Ok(MessagePage { messages, mode }))
}
