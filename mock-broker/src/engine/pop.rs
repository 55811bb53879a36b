//! Claiming messages: one live lease per (partition, group), strict order, redelivery.

use super::answers::{self, AnswerBudget, Held};
use super::consumers::{self, StartAt};
use super::queues::{PartitionEntry, Settings, get_queue, list_partitions, partition_key};
use super::{ids, ready};
use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{
    ConsumerRecord, LeaseRecord, LeaseState, MessageRecord, PartitionRecord, PartitionRef,
    QueueRecord,
};
use crate::store::{StoreError, T, Tx, records};

/// Which partitions a pop may claim from.
#[derive(Debug, Clone)]
pub enum Target {
    /// Any partition of the queue with work.
    Queue(String),
    /// One named partition.
    Partition(String, String),
    /// Any queue whose namespace and task match the given ones.
    Discovery {
        /// Required namespace, when given.
        namespace: Option<String>,
        /// Required task, when given.
        task: Option<String>,
    },
}

/// A parsed pop request.
#[derive(Debug, Clone)]
pub struct PopRequest {
    /// Where to claim from.
    pub target: Target,
    /// Most messages to deliver, across every claimed partition.
    pub batch: usize,
    /// Whose cursor and lease.
    pub group: String,
    /// Where a new named group starts.
    pub start: StartAt,
    /// Commit at delivery: no lease.
    pub auto_ack: bool,
    /// Lease length; the queue's `leaseTime` when absent.
    pub lease_seconds: Option<i64>,
    /// Most partitions claimed under one lease.
    pub partitions: usize,
}

/// One delivered message.
#[derive(Debug, Clone)]
pub struct Delivered {
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
    /// 1 on first delivery to this group.
    pub delivery_attempt: u32,
}

/// What a pop claimed. Empty `messages`: nothing available.
#[derive(Debug, Clone, Default)]
pub struct PopOutcome {
    /// The lease covering every claimed partition; empty with `autoAck` or when empty.
    pub lease_id: String,
    /// The messages, partition by partition, each partition in offset order.
    pub messages: Vec<Delivered>,
    /// How many partitions were claimed.
    pub partitions_claimed: usize,
    /// When the lease lapses (every claim shares the first claim's length).
    pub lease_expires_at: crate::clock::Micros,
}

impl PopOutcome {
    /// Whether the pop has claimed all it may: its partitions or its batch.
    fn is_full(&self, req: &PopRequest) -> bool {
        self.partitions_claimed >= req.partitions || self.messages.len() >= req.batch
    }
}

/// Claims up to `req.batch` messages, with no bound on the lease but the request's or
/// the queue's (`pop_capped` with the broker's `--max-lease` is what the API runs).
pub fn pop(tx: &mut Tx, tenant: &str, req: &PopRequest) -> Result<PopOutcome, EngineError> {
    pop_capped(tx, tenant, req, i64::MAX)
}

/// Claims up to `req.batch` messages under a lease of at most `max_lease_secs`,
/// whatever the request's `leaseSeconds` or the queue's `leaseTime` asks: a longer ask
/// is clamped (the outcome's `lease_expires_at` says when it lapses). No answer budget
/// binds it ([`pop_within`] is what the API runs).
pub fn pop_capped(
    tx: &mut Tx,
    tenant: &str,
    req: &PopRequest,
    max_lease_secs: i64,
) -> Result<PopOutcome, EngineError> {
    let mut unbounded = AnswerBudget::new(u64::MAX).empty();
    pop_within(tx, tenant, req, max_lease_secs, &mut unbounded).map(|(out, _)| out)
}

/// The answer budget a pop charges its messages to while it claims them.
struct Charge<'a> {
    /// The pop's room in the broker's answer budget.
    held: &'a mut Held,
    /// Whether a message has been charged (and so will be answered).
    any: bool,
    /// The budget ran out: the pop claims nothing more.
    cut: bool,
    /// The cost of the first message, when the budget had no room even for it.
    starved: Option<u64>,
}

impl Charge<'_> {
    /// Charges one stored message ([`answers::record_cost`]); `false` when the budget
    /// has no room for it, which ends the pop. A message that costs more than the whole
    /// budget is answered alone, holding all of it (as a fetch's record is).
    fn message(&mut self, stored_bytes: usize) -> bool {
        let cost = answers::record_cost(stored_bytes);
        if !self.held.try_charge(cost) && (self.any || !self.held.holds_all()) {
            self.cut = true;
            if !self.any {
                self.starved = Some(cost);
            }
            return false;
        }
        self.any = true;
        true
    }
}

/// [`pop_capped`], charging each message to `held` (the broker's answer budget) before
/// it is claimed. When the budget has no room for the next message the pop ends there,
/// as when its batch is full: it delivers fewer messages than `batch`, and leases (or
/// with `autoAck` commits) only those. The ones not charged are neither claimed nor
/// marked: once the claimed ones are acked, the next pop gets them at their first
/// delivery, as if `batch` had been smaller. When it had no room even for the first, the
/// pop claims nothing and answers that message's cost ([`answers::record_cost`]): the
/// caller waits for that much room and pops again.
pub fn pop_within(
    tx: &mut Tx,
    tenant: &str,
    req: &PopRequest,
    max_lease_secs: i64,
    held: &mut Held,
) -> Result<(PopOutcome, Option<u64>), EngineError> {
    let mut charge = Charge {
        held,
        any: false,
        cut: false,
        starved: None,
    };
    let out = claim_all(tx, tenant, req, max_lease_secs, &mut charge)?;
    Ok((out, charge.starved))
}

fn claim_all(
    tx: &mut Tx,
    tenant: &str,
    req: &PopRequest,
    cap: i64,
    charge: &mut Charge<'_>,
) -> Result<PopOutcome, EngineError> {
    let mut out = PopOutcome::default();
    match &req.target {
        Target::Partition(queue, partition) => {
            let Some(q) = get_queue(tx, tenant, queue)? else {
                return Ok(out);
            };
            subscribe(tx, tenant, queue, req)?;
            let key = partition_key(tenant, queue, partition);
            if let Some(rec) = tx.get::<PartitionRecord>(T::Partitions, &key)? {
                let entry = PartitionEntry {
                    name: partition.clone(),
                    rec,
                };
                claim(tx, tenant, queue, &q, &entry, req, cap, &mut out, charge)?;
            }
        }
        Target::Queue(queue) => {
            if let Some(q) = get_queue(tx, tenant, queue)? {
                subscribe(tx, tenant, queue, req)?;
                claim_any(tx, tenant, queue, &q, req, cap, &mut out, charge)?;
            }
        }
        Target::Discovery { namespace, task } => {
            for (queue, q) in matching_queues(tx, tenant, namespace.as_deref(), task.as_deref())? {
                subscribe(tx, tenant, &queue, req)?;
                claim_any(tx, tenant, &queue, &q, req, cap, &mut out, charge)?;
                if !out.messages.is_empty() || charge.cut {
                    break;
                }
            }
        }
    }
    if let Some(first) = out.messages.first()
        && !req.auto_ack
    {
        // One lease record names every claimed partition, for extension and release.
        let mut claims: Vec<u64> = out.messages.iter().map(|m| m.partition_id).collect();
        claims.dedup();
        tx.put(
            T::Leases,
            Key::tenant(tenant).str(&out.lease_id).into_bytes(),
            &LeaseRecord {
                group: req.group.clone(),
                queue: first.queue.clone(),
                claims,
                expires_at: out.lease_expires_at,
            },
        );
    }
    Ok(out)
}

/// Fixes a named group's starting point on the queue at its first pop, once, for every
/// partition: those created later are read from their first message (`wire.md` 4a).
/// Recording it only when a partition was first met would make a group that popped an
/// empty queue skip everything pushed before its next pop.
fn subscribe(tx: &mut Tx, tenant: &str, queue: &str, req: &PopRequest) -> Result<(), StoreError> {
    if req.group != super::QUEUE_MODE {
        consumers::subscription(tx, tenant, queue, &req.group, req.start)?;
    }
    Ok(())
}

fn matching_queues(
    tx: &Tx,
    tenant: &str,
    namespace: Option<&str>,
    task: Option<&str>,
) -> Result<Vec<(String, QueueRecord)>, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut out = Vec::new();
    tx.scan(T::Queues, &prefix, &prefix, |k, v| {
        let mut r = KeyReader::new(k);
        let (_, name) = (r.str(), r.str());
        let rec: QueueRecord = records::decode(v)?;
        let ns_ok = namespace.is_none_or(|n| rec.namespace.as_deref() == Some(n));
        let task_ok = task.is_none_or(|t| rec.task.as_deref() == Some(t));
        if let Some(name) = name
            && ns_ok
            && task_ok
        {
            out.push((name, rec));
        }
        Ok(true)
    })?;
    Ok(out)
}

/// Claims from any partition of the queue with work, through the group's candidates
/// ([`ready`]): the cost of a pop does not grow with the queue's partitions.
#[allow(clippy::too_many_arguments)]
fn claim_any(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    q: &QueueRecord,
    req: &PopRequest,
    cap: i64,
    out: &mut PopOutcome,
    charge: &mut Charge<'_>,
) -> Result<(), StoreError> {
    let group = req.group.as_str();
    if !ready::is_built(tx, tenant, queue, group) {
        let pids = list_partitions(tx, tenant, queue)?
            .into_iter()
            .map(|p| p.rec.id)
            .collect();
        ready::build(tx, tenant, queue, group, pids);
    }
    while !out.is_full(req) && !charge.cut {
        let Some(pid) = ready::take(tx, tenant, queue, group) else {
            break;
        };
        let pref_key = Key::tenant(tenant).u64(pid).into_bytes();
        let Some(pref) = tx.get::<PartitionRef>(T::PartitionIds, &pref_key)? else {
            continue;
        };
        if pref.queue != queue {
            continue;
        }
        let key = partition_key(tenant, queue, &pref.partition);
        let Some(rec) = tx.get::<PartitionRecord>(T::Partitions, &key)? else {
            continue;
        };
        let entry = PartitionEntry {
            name: pref.partition,
            rec,
        };
        match claim(tx, tenant, queue, q, &entry, req, cap, out, charge)? {
            Look::Leased(until) | Look::Hidden(until) => {
                ready::not_before(tx, tenant, queue, group, pid, until);
            }
            // It has work the budget had no room for: it stays a candidate.
            Look::NoRoom => ready::not_before(tx, tenant, queue, group, pid, tx.now),
            // A claim's own row write tells the index what comes next (see `ready`).
            Look::Claimed | Look::Nothing => {}
        }
    }
    #[cfg(debug_assertions)]
    if out.messages.is_empty() && !out.is_full(req) && !charge.cut {
        assert_nothing_claimable(tx, tenant, queue, req)?;
    }
    Ok(())
}

/// The check behind `ready`'s completeness, in debug builds: a wildcard pop that found
/// nothing through the candidates finds nothing by listing every partition either.
#[cfg(debug_assertions)]
fn assert_nothing_claimable(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    req: &PopRequest,
) -> Result<(), StoreError> {
    for part in list_partitions(tx, tenant, queue)? {
        if part.rec.next_offset == 0 {
            continue;
        }
        let (c, _) = consumers::load(tx, tenant, queue, &part.rec, &req.group, req.start)?;
        if consumers::live_lease(&c, tx.now).is_some() {
            continue;
        }
        let found = deliverable(tx, tenant, part.rec.id, &c, 1, None)?;
        assert!(
            found.messages.is_empty(),
            "ready index: partition {:?} of {queue:?} is claimable for {:?} but was not a candidate",
            part.name,
            req.group
        );
    }
    Ok(())
}

/// What one look at a partition found.
enum Look {
    /// Messages were claimed from it.
    Claimed,
    /// The group's live lease holds it until then.
    Leased(crate::clock::Micros),
    /// Its next message is delayed until then.
    Hidden(crate::clock::Micros),
    /// Nothing to deliver (or no room left in the pop).
    Nothing,
    /// Work, but no room in the answer budget for its first message.
    NoRoom,
}

/// Claims one partition for the group if it has no live lease and has work, under a
/// lease of at most `cap` seconds.
// Arguments over clippy's count: `cap` and `charge` are the broker's bounds, not part
// of the request; bundling them would change every caller of the public `PopRequest`.
#[allow(clippy::too_many_arguments)]
fn claim(
    tx: &mut Tx,
    tenant: &str,
    queue: &str,
    q: &QueueRecord,
    part: &PartitionEntry,
    req: &PopRequest,
    cap: i64,
    out: &mut PopOutcome,
    charge: &mut Charge<'_>,
) -> Result<Look, StoreError> {
    let room = req.batch.saturating_sub(out.messages.len());
    if room == 0 || part.rec.next_offset == 0 {
        return Ok(Look::Nothing);
    }
    let pid = part.rec.id;
    let (mut c, stored) = consumers::load(tx, tenant, queue, &part.rec, &req.group, req.start)?;
    if let Some(lease) = c.lease.as_ref().filter(|l| l.expires_at > tx.now) {
        return Ok(Look::Leased(lease.expires_at));
    }
    let Deliverable {
        messages: offsets,
        hidden_until,
    } = deliverable(tx, tenant, pid, &c, room, Some(charge))?;
    if offsets.is_empty() && charge.cut {
        return Ok(Look::NoRoom);
    }
    if offsets.is_empty() {
        // Record a first-time cursor so a `new` subscription keeps its starting point.
        if !stored {
            consumers::save(tx, tenant, pid, &req.group, &c);
        }
        return Ok(hidden_until.map_or(Look::Nothing, Look::Hidden));
    }
    // A lapsed lease ends here: its unacked messages are delivered again below.
    consumers::release_lease(tx, tenant, pid, &mut c)?;
    if out.lease_id.is_empty() && !req.auto_ack {
        out.lease_id = ids::lease_id();
    }
    let lease_secs = req
        .lease_seconds
        .unwrap_or_else(|| Settings::of(&q.options).lease_time)
        .min(cap);
    let first = offsets.first().map_or(0, |(o, _)| *o);
    for (offset, message) in offsets {
        let st = c.pending.entry(offset).or_default();
        st.deliveries += 1;
        st.acked = None;
        if req.auto_ack {
            st.done = true;
            st.acked = Some(records::AckMark::Completed);
        } else {
            st.in_lease = true;
        }
        out.messages.push(Delivered {
            queue: queue.to_string(),
            partition: part.name.clone(),
            partition_id: pid,
            offset,
            message,
            delivery_attempt: st.deliveries,
        });
    }
    if req.auto_ack {
        consumers::advance(&mut c);
    } else {
        out.lease_expires_at = tx.now + lease_secs * 1_000_000;
        c.lease = Some(LeaseState {
            id: out.lease_id.clone(),
            expires_at: out.lease_expires_at,
            first,
        });
    }
    consumers::save(tx, tenant, pid, &req.group, &c);
    out.partitions_claimed += 1;
    Ok(Look::Claimed)
}

/// The next messages the group may receive from the partition, in order: from the
/// cursor, skipping done ones, stopping at the first not yet visible (and when that
/// one becomes visible), or at the first the answer budget has no room for.
fn deliverable(
    tx: &Tx,
    tenant: &str,
    pid: u64,
    c: &ConsumerRecord,
    room: usize,
    mut charge: Option<&mut Charge<'_>>,
) -> Result<Deliverable, StoreError> {
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    let start = Key::tenant(tenant).u64(pid).u64(c.cursor).into_bytes();
    let mut out = Vec::new();
    let mut hidden_until = None;
    let now = tx.now;
    tx.scan(T::Messages, &start, &prefix, |k, v| {
        let offset = u64::from_be_bytes(k[k.len() - 8..].try_into().expect("8-byte offset"));
        if c.pending.get(&offset).is_some_and(|s| s.done) {
            return Ok(true);
        }
        let m: MessageRecord = records::decode(v)?;
        if m.visible_at > now {
            hidden_until = Some(m.visible_at);
            return Ok(false);
        }
        if let Some(charge) = charge.as_deref_mut()
            && !charge.message(v.len())
        {
            return Ok(false);
        }
        out.push((offset, m));
        Ok(out.len() < room)
    })?;
    Ok(Deliverable {
        messages: out,
        hidden_until,
    })
}

/// What [`deliverable`] found.
struct Deliverable {
    /// The messages, by offset.
    messages: Vec<(u64, MessageRecord)>,
    /// When the message that stopped the scan becomes visible, if one did.
    hidden_until: Option<crate::clock::Micros>,
}
