//! Consumer groups: seeking, forgetting (on one queue or all), moving the subscription
//! time, and the operator's reads of where each group stands (the list, one group's
//! detail, the lagging partitions).
//!
//! A group's footprint is its subscription per queue (`Subscriptions`: where a cursor
//! starts on a partition it has not read) and its cursor per partition (`Consumers`).
//! The reads walk the subscriptions, so they cost one row per (group, queue) plus one
//! per partition of those queues, never a scan of the messages: a partition's lag is
//! its next offset minus the first stored offset at or after the cursor, and its age is
//! that message's creation time.

use redb::Database;

use super::answers::{Charged, Held, Starved};
use super::consumers::{self, StartAt};
use super::queues::{PartitionEntry, get_queue, list_partitions};
use super::resources::{Listing, Page};
use super::{Engine, QUEUE_MODE};
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{ConsumerRecord, MessageRecord, SubscriptionRecord, decode};
use crate::store::{Reader, StoreError, T, Tx, View};

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
    delete_group_on(tx, tenant, group, None, metadata)
}

/// [`delete_group`] on one queue (`Some`) or on every queue the group subscribed to
/// (`None`). Without `metadata` the subscription stays, so the group reads each
/// partition again from its subscription's start (`all`: from the beginning; `new`:
/// from the time it first subscribed); with it, the next pop subscribes afresh with
/// its own mode. A queue the group never read answers 0 and changes nothing.
pub fn delete_group_on(
    tx: &mut Tx,
    tenant: &str,
    group: &str,
    queue: Option<&str>,
    metadata: bool,
) -> Result<usize, StoreError> {
    let queues: Vec<(String, Vec<u8>)> = match queue {
        Some(q) => vec![(
            q.to_string(),
            Key::tenant(tenant).str(q).str(group).into_bytes(),
        )],
        None => subscriptions(tx, tenant, Some(group))?
            .into_iter()
            .map(|s| {
                let key = Key::tenant(tenant).str(&s.queue).str(group).into_bytes();
                (s.queue, key)
            })
            .collect(),
    };
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
        if metadata && tx.get_raw(T::Subscriptions, &skey)?.is_some() {
            tx.delete(T::Subscriptions, skey);
        }
    }
    Ok(removed)
}

/// One group's subscription to one queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subscription {
    /// The queue.
    pub queue: String,
    /// The group.
    pub group: String,
    /// Messages created at or after this time are read; `i64::MIN`: all of them.
    pub from: Micros,
}

impl Subscription {
    /// The subscription's mode in the wire's words: `all` reads every message, `new`
    /// those created from its time on (a `subscriptionFrom` start reads the same way).
    pub fn mode(&self) -> SubscriptionMode {
        if self.from == i64::MIN {
            SubscriptionMode::All
        } else {
            SubscriptionMode::New
        }
    }
}

/// Where a group's cursors start on partitions it has not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubscriptionMode {
    /// From the first message.
    All,
    /// From the subscription's time.
    New,
}

/// The tenant's subscriptions (of one group, or of all), in (queue, group) order.
pub fn subscriptions(
    view: &impl View,
    tenant: &str,
    group: Option<&str>,
) -> Result<Vec<Subscription>, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut out = Vec::new();
    view.scan_rows(T::Subscriptions, &prefix, &prefix, &mut |k, v| {
        let mut r = KeyReader::new(&k[prefix.len()..]);
        if let (Some(queue), Some(g)) = (r.str(), r.str())
            && group.is_none_or(|want| want == g)
        {
            let rec: SubscriptionRecord = decode(v)?;
            out.push(Subscription {
                queue,
                group: g,
                from: rec.from,
            });
        }
        Ok(true)
    })?;
    Ok(out)
}

/// Moves the start of every subscription of the group (on every queue) to `at`: each
/// partition it has not read yet is read from the first message created at or after
/// `at`. Cursors it already has stay where they are (a seek moves those). Answers the
/// subscriptions changed: 0 for a group that never subscribed (the route updates, it
/// does not create).
pub fn set_subscription(
    tx: &mut Tx,
    tenant: &str,
    group: &str,
    at: Micros,
) -> Result<usize, EngineError> {
    if group == QUEUE_MODE {
        return Err(EngineError::bad(format!(
            "{QUEUE_MODE} always reads every message; it has no subscription time to move"
        )));
    }
    let subs = subscriptions(tx, tenant, Some(group))?;
    for s in &subs {
        tx.put(
            T::Subscriptions,
            Key::tenant(tenant).str(&s.queue).str(group).into_bytes(),
            &SubscriptionRecord { from: at },
        );
    }
    Ok(subs.len())
}

/// Where one group stands on one partition it has read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionPosition {
    /// The partition's name.
    pub partition: String,
    /// Its broker-wide id.
    pub partition_id: u64,
    /// The group's cursor: the next offset it reads.
    pub cursor: u64,
    /// Stored messages at or after the cursor: what the group has still to read.
    pub offset_lag: u64,
    /// When the oldest of those was created; `None` when caught up.
    pub oldest_unconsumed_at: Option<Micros>,
    /// When the group's live lease there ends; `None` without one.
    pub lease_expires_at: Option<Micros>,
}

impl PartitionPosition {
    /// Whole seconds since the oldest unread message was created (0 when caught up).
    pub fn time_lag_seconds(&self, now: Micros) -> i64 {
        self.oldest_unconsumed_at
            .map_or(0, |t| (now - t).max(0) / 1_000_000)
    }
}

/// One group on one queue: its subscription and its positions there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupOnQueue {
    /// The subscription.
    pub subscription: Subscription,
    /// The partitions the group has a cursor on, in name order.
    pub partitions: Vec<PartitionPosition>,
}

/// What one partition position holds in an answer besides its name: itself and its
/// JSON row (measured: 250 to 300 bytes).
const POSITION_COST: u64 = std::mem::size_of::<PartitionPosition>() as u64 + 320;

/// Every group of the tenant (or one) on every queue it subscribed to (a page of those
/// rows, in group then queue order), from the last commit, charged to `held` as it is
/// read ([`Held::charge_whole`](crate::engine::answers::Held::charge_whole)): each subscription, then each position kept.
/// `Err(Starved)` when the answer budget had no room: nothing of it is kept.
pub fn overview(
    db: &Database,
    tenant: &str,
    group: Option<&str>,
    page: Page,
    now: Micros,
    held: &mut Held,
) -> Result<Result<Listing<GroupOnQueue>, Starved>, StoreError> {
    let r = Reader::begin(db)?;
    let all = subscriptions(&r, tenant, group)?;
    let names: u64 = all
        .iter()
        .map(|s| (s.group.len() + s.queue.len()) as u64 + 128)
        .sum();
    if let Err(s) = held.charge_whole(names) {
        return Ok(Err(s));
    }
    let total = all.len();
    let mut out = Vec::new();
    for subscription in all.into_iter().skip(page.offset).take(page.limit) {
        let mut partitions = Vec::new();
        for p in list_partitions(&r, tenant, &subscription.queue)? {
            let ckey = consumers::key(tenant, p.rec.id, &subscription.group);
            let Some(c) = r.get_record::<ConsumerRecord>(T::Consumers, &ckey)? else {
                continue;
            };
            if let Err(s) = held.charge_whole(POSITION_COST + p.name.len() as u64) {
                return Ok(Err(s));
            }
            let first = first_stored_from(&r, tenant, p.rec.id, c.cursor)?;
            partitions.push(PartitionPosition {
                partition: p.name,
                partition_id: p.rec.id,
                cursor: c.cursor,
                offset_lag: first.map_or(0, |(o, _)| p.rec.next_offset.saturating_sub(o)),
                oldest_unconsumed_at: first.map(|(_, at)| at),
                lease_expires_at: c
                    .lease
                    .as_ref()
                    .filter(|l| l.expires_at > now)
                    .map(|l| l.expires_at),
            });
        }
        out.push(GroupOnQueue {
            subscription,
            partitions,
        });
    }
    Ok(Ok(Listing { rows: out, total }))
}

/// The first stored message of a partition at or after `from`: its offset and creation
/// time (retention deletes from the head, so what follows it is stored too).
fn first_stored_from(
    view: &impl View,
    tenant: &str,
    pid: u64,
    from: u64,
) -> Result<Option<(u64, Micros)>, StoreError> {
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    let start = Key::tenant(tenant).u64(pid).u64(from).into_bytes();
    let mut found = None;
    view.scan_rows(T::Messages, &start, &prefix, &mut |k, v| {
        let mut r = KeyReader::new(&k[prefix.len()..]);
        if let Some(offset) = r.u64() {
            let m: MessageRecord = decode(v)?;
            found = Some((offset, m.created_at));
        }
        Ok(false)
    })?;
    Ok(found)
}

impl Engine {
    /// Forgets a consumer group on one queue (or on every queue: `None`).
    pub async fn delete_group_on(
        &self,
        tenant: &str,
        group: &str,
        queue: Option<&str>,
        metadata: bool,
    ) -> Result<usize, EngineError> {
        let (tenant, group) = (tenant.to_string(), group.to_string());
        let queue = queue.map(str::to_string);
        self.shared
            .writer
            .submit(move |tx| {
                Ok(delete_group_on(
                    tx,
                    &tenant,
                    &group,
                    queue.as_deref(),
                    metadata,
                )?)
            })
            .await
    }

    /// Moves a group's subscription time on every queue ([`set_subscription`]).
    pub async fn set_subscription(
        &self,
        tenant: &str,
        group: &str,
        at: Micros,
    ) -> Result<usize, EngineError> {
        let (tenant, group) = (tenant.to_string(), group.to_string());
        self.shared
            .writer
            .submit(move |tx| set_subscription(tx, &tenant, &group, at))
            .await
    }

    /// Where every group (or one) stands, from the last commit ([`overview`]): a
    /// page of the (group, queue) rows and the time they were read at, with the room
    /// they hold in the answer budget ([whole reads](crate::engine::answers#whole-answers)): keep it until the answer
    /// has been sent.
    pub async fn group_overview(
        &self,
        tenant: &str,
        group: Option<&str>,
        page: Page,
    ) -> Result<Charged<(Listing<GroupOnQueue>, Micros)>, EngineError> {
        let (tenant, group) = (tenant.to_string(), group.map(str::to_string));
        self.read_whole(move |db, now, held| {
            Ok(overview(db, &tenant, group.as_deref(), page, now, held)?.map(|l| (l, now)))
        })
        .await
    }
}
