//! The rules of the stream runner's routes (`/streams/v1/*`): query registration,
//! claims, cycles, state.
//!
//! A stream runner (the official clients' `Stream::run`) pops its source queue under
//! its own consumer group, folds what it read into per-partition state, and then
//! commits the state changes, the messages it emits and the ack of what it read as one
//! **cycle**: one writer command, so all of it lands in one durable commit or none of
//! it does. That is what makes a window exactly-once against its own state.
//!
//! - A **query** is registered by name with a fingerprint of its operator chain
//!   (`config_hash`). The same name with another chain is refused, because the stored
//!   state was computed by the old chain; `reset` wipes that state and accepts the new
//!   chain. A query id is minted once per name and kept across resets.
//! - **State** is keyed `(query, partition id, key)`, JSON values, durable in redb, so
//!   a runner that restarts resumes its windows. Each partition with state also has a
//!   summary row (newest write, row count) so the sweep a runner does after a restart
//!   (`state/partitions`, "untouched for N ms") reads one row per partition.
//! - A **claim** leases idle partitions of the source queue to the query's group with
//!   an empty batch: granted only when nobody holds the partition for the group and the
//!   group has read all of it. The runner then closes ripe windows in a cycle whose ack
//!   names the claim's lease with no message (`count: 0`); if the lease is gone the
//!   cycle is refused whole, so two runners never close one window.
//!
//! Leases, cursors and pushes are the broker's own ([`consumers`], [`push`]); this
//! module adds only the state and the cycle's ack rules.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::ack::{self, Ack, AckCall};
use super::answers::{Charged, Held, Starved};
use super::consumers;
use super::push::{self, Appended, NewMessage};
use super::queues::partition_key;
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::{
    AckMark, ConsumerRecord, LeaseRecord, LeaseState, PartitionRecord, PartitionRef,
    SubscriptionRecord, TxnRef,
};
use crate::store::stream_keys as keys;
use crate::store::{StoreError, T, Tx, View, records};

/// Longest state key, in bytes **(ours)**.
pub const MAX_STATE_KEY_BYTES: usize = 4096;
/// Largest state value, as compact JSON **(ours)**.
pub const MAX_STATE_VALUE_BYTES: usize = 1 << 20;
/// Longest `config_hash`, in bytes **(ours)**.
pub const MAX_CONFIG_HASH_BYTES: usize = 1024;
/// Most partitions in one claim **(ours)**.
pub const MAX_CLAIM_PARTITIONS: usize = 1000;
/// Most explicit keys in one state read **(ours)**.
pub const MAX_STATE_GET_KEYS: usize = 10_000;
/// A claim's lease when none is asked for, and the longest it may ask for (seconds).
pub const DEFAULT_CLAIM_LEASE_SECONDS: i64 = 30;
/// See [`DEFAULT_CLAIM_LEASE_SECONDS`].
pub const MAX_CLAIM_LEASE_SECONDS: i64 = 600;
/// Partitions per page of `state/partitions` when no limit is given, and the most.
pub const DEFAULT_PARTITIONS_PAGE: usize = 1000;
/// See [`DEFAULT_PARTITIONS_PAGE`].
pub const MAX_PARTITIONS_PAGE: usize = 10_000;

/// The refusal of a cycle whose ack names a lease that is not the partition's live
/// lease for the group (the words of a plain ack's refusal).
pub const INVALID_LEASE: &str = "invalid or expired lease";

// ------------------------------------------------------------------ records

/// A registered query (`StreamQueries`, by name).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueryRecord {
    /// The broker-minted id every later call names.
    pub id: String,
    /// The name the runner registered (its durable identity).
    pub name: String,
    /// The queue the runner reads.
    pub source_queue: String,
    /// The queue it emits to, if any (kept for operators; no rule depends on it).
    pub sink_queue: Option<String>,
    /// The fingerprint of the operator chain the state was computed by.
    pub config_hash: String,
    /// When the name was first registered.
    pub created_at: Micros,
    /// When it was last registered.
    pub updated_at: Micros,
}

/// One state cell (`StreamState`).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct StateCell {
    value: Box<RawValue>,
    updated_at: Micros,
    /// The value's `windowEnd`, when it is a number: what `ripe_at_or_before` filters
    /// on, read once at write time instead of parsing every value at every read.
    window_end: Option<i64>,
}

/// A partition holding state for a query (`StreamQueries`, "part" rows).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PartitionSummary {
    queue: String,
    partition: String,
    rows: u64,
    updated_at: Micros,
}

// ----------------------------------------------------------------- commands

/// `POST /streams/v1/queries`.
#[derive(Debug, Clone)]
pub struct Register {
    /// The query's durable name.
    pub name: String,
    /// The queue it reads.
    pub source_queue: String,
    /// The queue it emits to.
    pub sink_queue: Option<String>,
    /// The operator chain's fingerprint.
    pub config_hash: String,
    /// On a changed chain: wipe the state and accept it.
    pub reset: bool,
}

/// What a registration did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Registered {
    /// Registered (or found).
    Ok {
        /// The query id.
        query_id: String,
        /// The name registered.
        name: String,
        /// The chain now on record.
        config_hash: String,
        /// The name was not registered before.
        fresh: bool,
        /// A changed chain was accepted and the old state wiped.
        reset: bool,
    },
    /// The name is registered with another chain and no reset was asked for.
    Mismatch {
        /// The registered query's id.
        query_id: String,
        /// The name.
        name: String,
    },
}

/// One change to a partition's state.
#[derive(Debug, Clone)]
pub enum StateOp {
    /// Set `key` to `value`.
    Upsert {
        /// The state key.
        key: String,
        /// The new value, as JSON text.
        value: Box<RawValue>,
    },
    /// Remove `key` (absent: nothing to do).
    Delete {
        /// The state key.
        key: String,
    },
}

impl StateOp {
    /// The key the op changes.
    pub fn key(&self) -> &str {
        match self {
            StateOp::Upsert { key, .. } | StateOp::Delete { key } => key,
        }
    }
}

/// The source ack a cycle carries.
#[derive(Debug, Clone)]
pub struct CycleAck {
    /// The last message the cycle covers; `None`: the empty batch of a claim.
    pub transaction_id: Option<String>,
    /// The lease the cycle runs under.
    pub lease_id: String,
    /// `completed` commits; a nack is applied as a plain ack's would be.
    pub status: AckMark,
    /// How many messages the cycle covers (reported back; the cursor follows
    /// `transaction_id`).
    pub count: u64,
    /// Why the messages failed, for a nack.
    pub error: Option<String>,
}

/// `POST /streams/v1/cycle`: everything one cycle commits.
#[derive(Debug, Clone)]
pub struct Cycle {
    /// The query.
    pub query_id: String,
    /// The source partition the cycle is about.
    pub partition_id: String,
    /// The group whose cursor the ack moves; `None` is the claim's default,
    /// `streams.<query name>`, so a claim and its cycle without a group agree.
    pub group: Option<String>,
    /// State changes, in order.
    pub state_ops: Vec<StateOp>,
    /// Messages to emit, in order.
    pub pushes: Vec<NewMessage>,
    /// The source ack; `None` on a flush that consumed nothing.
    pub ack: Option<CycleAck>,
    /// Release the lease with the ack (`false`: keep it, so the rest of the batch
    /// comes back, in order, only when it lapses).
    pub release_lease: bool,
}

impl Cycle {
    /// Whether the cycle may store new data (the storage cap applies).
    pub fn adds_data(&self) -> bool {
        !self.pushes.is_empty()
            || self
                .state_ops
                .iter()
                .any(|op| matches!(op, StateOp::Upsert { .. }))
    }
}

/// What the ack of a committed cycle did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CycleAckResult {
    /// The messages the cycle said it covers.
    pub count: u64,
    /// The lease was released.
    pub lease_released: bool,
    /// A nack dead-lettered the message.
    pub dlq: bool,
}

/// The answer to a cycle.
#[derive(Debug, Clone)]
pub enum CycleOutcome {
    /// Everything applied, in one commit.
    Committed {
        /// The source queue.
        queue: String,
        /// State ops applied.
        state_ops_applied: usize,
        /// One per emitted message, in order: its queue, partition and what the push did.
        pushed: Vec<(String, String, Appended)>,
        /// The ack's effect; `None` without an ack.
        ack: Option<CycleAckResult>,
    },
    /// Nothing applied.
    Refused {
        /// The source queue, when the partition is known.
        queue: Option<String>,
        /// Why, for a person.
        error: String,
    },
}

/// `POST /streams/v1/claim`.
#[derive(Debug, Clone)]
pub struct Claim {
    /// The query.
    pub query_id: String,
    /// The partitions to claim, in order.
    pub partition_ids: Vec<String>,
    /// The group; `streams.<query name>` when absent.
    pub group: Option<String>,
    /// The lease's length.
    pub lease_seconds: i64,
}

/// One partition's answer to a claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimStatus {
    /// Leased to the caller with an empty batch.
    Claimed,
    /// Someone of the group holds it.
    Busy,
    /// Messages wait for the group: its next pop delivers them.
    Backlog,
    /// Not a partition of the query's source queue.
    Missing,
}

impl ClaimStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            ClaimStatus::Claimed => "claimed",
            ClaimStatus::Busy => "busy",
            ClaimStatus::Backlog => "backlog",
            ClaimStatus::Missing => "missing",
        }
    }
}

/// One partition of a claim's answer.
#[derive(Debug, Clone)]
pub struct ClaimedPartition {
    /// As asked.
    pub partition_id: String,
    /// Its name ("" when missing).
    pub partition: String,
    /// The verdict.
    pub status: ClaimStatus,
    /// When the claim lapses (claimed only).
    pub lease_expires_at: Option<Micros>,
}

/// The answer to a claim.
#[derive(Debug, Clone)]
pub enum ClaimOutcome {
    /// The claim was judged partition by partition.
    Done {
        /// The lease every claimed partition got ("" when none was).
        lease_id: String,
        /// Its length.
        lease_seconds: i64,
        /// The broker's clock: processing-time windows close on it.
        now: Micros,
        /// One per asked partition, in order.
        partitions: Vec<ClaimedPartition>,
    },
    /// The query is unknown.
    UnknownQuery,
}

/// `POST /streams/v1/state/get`.
#[derive(Debug, Clone)]
pub struct StateQuery {
    /// The query.
    pub query_id: String,
    /// The partition.
    pub partition_id: String,
    /// Only these keys (empty: every key).
    pub keys: Vec<String>,
    /// Only keys starting with this.
    pub key_prefix: Option<String>,
    /// Only cells whose value's `windowEnd` is a number at or before this (epoch ms).
    pub ripe_at_or_before: Option<i64>,
}

/// One state cell as read.
#[derive(Debug, Clone)]
pub struct StateRow {
    /// Its key.
    pub key: String,
    /// Its value, as JSON text.
    pub value: Box<RawValue>,
    /// When it was last written.
    pub updated_at: Micros,
}

/// `POST /streams/v1/state/partitions`.
#[derive(Debug, Clone)]
pub struct PartitionsQuery {
    /// The query.
    pub query_id: String,
    /// Only partitions whose newest state write is at least this old (ms).
    pub untouched_for_ms: Option<i64>,
    /// Resume after this partition id.
    pub after: Option<u64>,
    /// Page size.
    pub limit: usize,
}

/// A partition holding state.
#[derive(Debug, Clone)]
pub struct StatePartition {
    /// Its id.
    pub partition_id: u64,
    /// Its name.
    pub partition: String,
    /// Its queue.
    pub queue: String,
    /// The newest write to its state.
    pub updated_at: Micros,
}

/// A page of partitions holding state.
#[derive(Debug, Clone)]
pub struct PartitionsPage {
    /// In partition id order.
    pub partitions: Vec<StatePartition>,
    /// More to read: resume after this id.
    pub next: Option<u64>,
}

// -------------------------------------------------------------------- rules

fn find_query(
    view: &impl View,
    tenant: &str,
    query_id: &str,
) -> Result<Option<QueryRecord>, StoreError> {
    let Some(name) =
        view.get_record::<String>(T::StreamQueries, &keys::query_by_id(tenant, query_id))?
    else {
        return Ok(None);
    };
    view.get_record::<QueryRecord>(T::StreamQueries, &keys::query_by_name(tenant, &name))
}

/// Registers a query, or finds it: the same name with another chain is refused
/// unless `reset`, which wipes its state (never its group's cursor).
pub fn register(tx: &mut Tx, tenant: &str, r: &Register) -> Result<Registered, EngineError> {
    let key = keys::query_by_name(tenant, &r.name);
    let now = tx.now;
    let Some(mut rec) = tx.get::<QueryRecord>(T::StreamQueries, &key)? else {
        tx.ensure_room()?;
        let rec = QueryRecord {
            id: super::ids::query_id(),
            name: r.name.clone(),
            source_queue: r.source_queue.clone(),
            sink_queue: r.sink_queue.clone(),
            config_hash: r.config_hash.clone(),
            created_at: now,
            updated_at: now,
        };
        tx.put(
            T::StreamQueries,
            keys::query_by_id(tenant, &rec.id),
            &rec.name,
        );
        tx.put(T::StreamQueries, key, &rec);
        return Ok(Registered::Ok {
            query_id: rec.id,
            name: rec.name,
            config_hash: rec.config_hash,
            fresh: true,
            reset: false,
        });
    };
    let changed = rec.config_hash != r.config_hash;
    if changed && !r.reset {
        return Ok(Registered::Mismatch {
            query_id: rec.id,
            name: rec.name,
        });
    }
    // As the public broker does, `reset` wipes only when the chain changed: a runner
    // that joins a running query with `reset` must not throw away its peers' windows.
    if changed {
        tx.delete_prefix(T::StreamState, &keys::state_query_prefix(tenant, &rec.id))?;
        tx.delete_prefix(
            T::StreamQueries,
            &keys::state_partitions_prefix(tenant, &rec.id),
        )?;
    }
    rec.source_queue = r.source_queue.clone();
    rec.sink_queue = r.sink_queue.clone();
    rec.config_hash = r.config_hash.clone();
    rec.updated_at = now;
    tx.put(T::StreamQueries, key, &rec);
    Ok(Registered::Ok {
        query_id: rec.id,
        name: rec.name,
        config_hash: rec.config_hash,
        fresh: false,
        reset: changed,
    })
}

/// The partition `partition_id` names, if it is one of the tenant's.
fn partition_of(
    view: &impl View,
    tenant: &str,
    partition_id: &str,
) -> Result<Option<(u64, PartitionRef)>, StoreError> {
    let Ok(pid) = partition_id.parse::<u64>() else {
        return Ok(None);
    };
    let pref = view
        .get_record::<PartitionRef>(T::PartitionIds, &Key::tenant(tenant).u64(pid).into_bytes())?;
    Ok(pref.map(|p| (pid, p)))
}

/// The `windowEnd` of a state value, when it is an object with a numeric one.
fn window_end(value: &RawValue) -> Option<i64> {
    #[derive(Deserialize)]
    struct Probe<'a> {
        #[serde(rename = "windowEnd", borrow)]
        window_end: Option<&'a RawValue>,
    }
    let raw = serde_json::from_str::<Probe>(value.get())
        .ok()?
        .window_end?;
    serde_json::from_str::<i64>(raw.get()).ok().or_else(|| {
        serde_json::from_str::<f64>(raw.get())
            .ok()
            .map(|f| f as i64)
    })
}

/// Applies one cycle: state ops, pushes and the ack in one command. A refusal (the
/// lease is gone, the acked message is not in the leased batch, the query or
/// partition is unknown) discards everything staged.
pub fn cycle(tx: &mut Tx, tenant: &str, c: &Cycle) -> Result<CycleOutcome, EngineError> {
    for item in &c.pushes {
        item.validate()?;
    }
    let Some(query) = find_query(&*tx, tenant, &c.query_id)? else {
        return refuse(tx, None, format!("unknown query_id {:?}", c.query_id));
    };
    let Some((pid, pref)) = partition_of(&*tx, tenant, &c.partition_id)? else {
        return refuse(
            tx,
            None,
            format!("unknown partition_id {:?}", c.partition_id),
        );
    };
    if pref.queue != query.source_queue {
        return refuse(
            tx,
            Some(&pref.queue),
            format!(
                "partition_id {:?} is not a partition of the query's source queue {:?}",
                c.partition_id, query.source_queue
            ),
        );
    }
    if c.adds_data() {
        tx.ensure_room()?;
    }

    // The ack first: when its lease is gone nothing else may land.
    let group = c
        .group
        .clone()
        .unwrap_or_else(|| default_group(&query.name));
    let ack = match &c.ack {
        Some(a) => match apply_ack(tx, tenant, pid, &group, c, a)? {
            Ok(r) => Some(r),
            Err(why) => return refuse(tx, Some(&pref.queue), why),
        },
        None => None,
    };

    let applied = apply_state(tx, tenant, &query.id, pid, &pref, &c.state_ops)?;

    let mut pushed = Vec::with_capacity(c.pushes.len());
    for item in &c.pushes {
        let (queue, partition) = (item.queue.clone(), item.partition.clone());
        pushed.push((queue, partition, push::append(tx, tenant, item.clone())?));
    }

    Ok(CycleOutcome::Committed {
        queue: pref.queue,
        state_ops_applied: applied,
        pushed,
        ack,
    })
}

/// Discards everything the cycle staged and answers its refusal.
fn refuse(tx: &mut Tx, queue: Option<&str>, error: String) -> Result<CycleOutcome, EngineError> {
    tx.discard();
    Ok(CycleOutcome::Refused {
        queue: queue.map(str::to_string),
        error,
    })
}

/// The cycle's ack. `Ok(Err(why))`: refused, the whole cycle with it.
fn apply_ack(
    tx: &mut Tx,
    tenant: &str,
    pid: u64,
    group: &str,
    c: &Cycle,
    a: &CycleAck,
) -> Result<Result<CycleAckResult, String>, StoreError> {
    let ckey = consumers::key(tenant, pid, group);
    let Some(mut rec) = tx.get::<ConsumerRecord>(T::Consumers, &ckey)? else {
        return Ok(Err(INVALID_LEASE.into()));
    };
    if consumers::live_lease(&rec, tx.now) != Some(a.lease_id.as_str()) {
        return Ok(Err(INVALID_LEASE.into()));
    }
    let Some(txn) = &a.transaction_id else {
        // The empty batch of a claim: the cursor stays, the lease goes.
        let released = c.release_lease && consumers::release_lease(tx, tenant, pid, &mut rec)?;
        if released {
            consumers::save(tx, tenant, pid, group, &rec);
        }
        return Ok(Ok(CycleAckResult {
            count: a.count,
            lease_released: released,
            dlq: false,
        }));
    };
    if a.status != AckMark::Completed {
        // A nack is a plain ack's nack: the same retry limit, dead letters and
        // redelivery of the rest of the batch.
        let mut call = AckCall::new();
        let out = ack::ack(
            tx,
            tenant,
            &Ack {
                transaction_id: txn.clone(),
                partition_id: pid.to_string(),
                status: a.status,
                group: group.to_string(),
                lease_id: Some(a.lease_id.clone()),
                error: a.error.clone(),
            },
            &mut call,
        )?;
        if !out.success {
            return Ok(Err(out.error.unwrap_or_else(|| "ack refused".into())));
        }
        call.finish(tx, tenant)?;
        return Ok(Ok(CycleAckResult {
            count: a.count,
            lease_released: out.lease_released,
            dlq: out.dlq,
        }));
    }
    let idx = Key::tenant(tenant).u64(pid).str(txn).into_bytes();
    let Some(TxnRef { offset, .. }) = tx.get::<TxnRef>(T::TxnIndex, &idx)? else {
        return Ok(Err(format!(
            "unresolved: transactionId {txn:?} is not in partition {pid}"
        )));
    };
    if offset < rec.cursor {
        return Ok(Err(format!(
            "transactionId {txn:?} is already committed (below the group's cursor)"
        )));
    }
    if !rec.pending.get(&offset).is_some_and(|s| s.in_lease) {
        return Ok(Err(format!(
            "transactionId {txn:?} is not in the leased batch"
        )));
    }
    consumers::commit(&mut rec, offset + 1);
    consumers::advance(&mut rec);
    // Kept (a gate's partial ack), the lease holds the rest of the batch until it
    // lapses, and it is then delivered again in order.
    let released = c.release_lease && consumers::release_lease(tx, tenant, pid, &mut rec)?;
    consumers::save(tx, tenant, pid, group, &rec);
    Ok(Ok(CycleAckResult {
        count: a.count,
        lease_released: released,
        dlq: false,
    }))
}

/// Applies state ops in order and keeps the partition's summary row; answers how many
/// were applied.
fn apply_state(
    tx: &mut Tx,
    tenant: &str,
    query_id: &str,
    pid: u64,
    pref: &PartitionRef,
    ops: &[StateOp],
) -> Result<usize, StoreError> {
    if ops.is_empty() {
        return Ok(0);
    }
    let now = tx.now;
    let skey = keys::state_partition(tenant, query_id, pid);
    let mut summary = tx
        .get::<PartitionSummary>(T::StreamQueries, &skey)?
        .unwrap_or(PartitionSummary {
            queue: pref.queue.clone(),
            partition: pref.partition.clone(),
            rows: 0,
            updated_at: now,
        });
    for op in ops {
        let ckey = keys::state_cell(tenant, query_id, pid, op.key());
        let existed = tx.get_raw(T::StreamState, &ckey)?.is_some();
        match op {
            StateOp::Upsert { value, .. } => {
                tx.put(
                    T::StreamState,
                    ckey,
                    &StateCell {
                        window_end: window_end(value),
                        value: value.clone(),
                        updated_at: now,
                    },
                );
                summary.rows += u64::from(!existed);
            }
            StateOp::Delete { .. } => {
                if existed {
                    tx.delete(T::StreamState, ckey);
                    summary.rows -= 1;
                }
            }
        }
    }
    summary.updated_at = now;
    if summary.rows == 0 {
        tx.delete(T::StreamQueries, skey);
    } else {
        tx.put(T::StreamQueries, skey, &summary);
    }
    Ok(ops.len())
}

/// The group a claim or a cycle that names none acts for, as the official stream
/// runner names it: `streams.<query>`.
fn default_group(query: &str) -> String {
    format!("streams.{query}")
}

/// Claims idle partitions of the query's source queue for its group, each with an
/// empty batch under one lease.
pub fn claim(tx: &mut Tx, tenant: &str, c: &Claim) -> Result<ClaimOutcome, StoreError> {
    let Some(query) = find_query(&*tx, tenant, &c.query_id)? else {
        return Ok(ClaimOutcome::UnknownQuery);
    };
    let group = c
        .group
        .clone()
        .unwrap_or_else(|| default_group(&query.name));
    let now = tx.now;
    let expires_at = now + c.lease_seconds * 1_000_000;
    let mut lease_id = String::new();
    let mut claims = Vec::new();
    let mut partitions = Vec::with_capacity(c.partition_ids.len());
    for asked in &c.partition_ids {
        let (status, partition) = match partition_of(&*tx, tenant, asked)? {
            Some((pid, pref)) if pref.queue == query.source_queue => {
                let status = claim_one(tx, tenant, pid, &pref, &group, &mut lease_id, expires_at)?;
                if status == ClaimStatus::Claimed {
                    claims.push(pid);
                }
                (status, pref.partition)
            }
            _ => (ClaimStatus::Missing, String::new()),
        };
        partitions.push(ClaimedPartition {
            partition_id: asked.clone(),
            partition,
            status,
            lease_expires_at: (status == ClaimStatus::Claimed).then_some(expires_at),
        });
    }
    if !claims.is_empty() {
        tx.put(
            T::Leases,
            Key::tenant(tenant).str(&lease_id).into_bytes(),
            &LeaseRecord {
                group,
                queue: query.source_queue,
                claims,
                expires_at,
            },
        );
    }
    Ok(ClaimOutcome::Done {
        lease_id,
        lease_seconds: c.lease_seconds,
        now,
        partitions,
    })
}

fn claim_one(
    tx: &mut Tx,
    tenant: &str,
    pid: u64,
    pref: &PartitionRef,
    group: &str,
    lease_id: &mut String,
    expires_at: Micros,
) -> Result<ClaimStatus, StoreError> {
    let Some(part) = tx.get::<PartitionRecord>(
        T::Partitions,
        &partition_key(tenant, &pref.queue, &pref.partition),
    )?
    else {
        return Ok(ClaimStatus::Missing);
    };
    let mut rec =
        match tx.get::<ConsumerRecord>(T::Consumers, &consumers::key(tenant, pid, group))? {
            Some(rec) => rec,
            None => {
                // A group that never read the partition. Where it starts is fixed by its
                // subscription; with none yet, only an empty partition is surely read.
                let skey = Key::tenant(tenant).str(&pref.queue).str(group).into_bytes();
                let cursor = match tx.get::<SubscriptionRecord>(T::Subscriptions, &skey)? {
                    Some(sub) => consumers::first_offset_at(tx, tenant, &part, sub.from)?,
                    None if part.next_offset == 0 => 0,
                    None => return Ok(ClaimStatus::Backlog),
                };
                ConsumerRecord {
                    cursor,
                    ..Default::default()
                }
            }
        };
    if consumers::live_lease(&rec, tx.now).is_some() {
        return Ok(ClaimStatus::Busy);
    }
    if unread(tx, tenant, pid, &rec)? {
        return Ok(ClaimStatus::Backlog);
    }
    // A lapsed lease ends here, as at a pop.
    consumers::release_lease(tx, tenant, pid, &mut rec)?;
    if lease_id.is_empty() {
        *lease_id = super::ids::lease_id();
    }
    rec.lease = Some(LeaseState {
        id: lease_id.clone(),
        expires_at,
        first: rec.cursor,
    });
    consumers::save(tx, tenant, pid, group, &rec);
    Ok(ClaimStatus::Claimed)
}

/// Whether a message the group has not settled is stored at or after its cursor (a
/// delayed one too: the group has not read it). Offsets retention removed are not
/// messages that wait, so the log is scanned rather than the offsets counted.
fn unread(tx: &Tx, tenant: &str, pid: u64, rec: &ConsumerRecord) -> Result<bool, StoreError> {
    let prefix = Key::tenant(tenant).u64(pid).into_bytes();
    let start = Key::tenant(tenant).u64(pid).u64(rec.cursor).into_bytes();
    let mut found = false;
    tx.scan(T::Messages, &start, &prefix, |k, _| {
        let offset = KeyReader::new(&k[prefix.len()..]).u64();
        found = offset.is_none_or(|o| !rec.pending.get(&o).is_some_and(|s| s.done));
        Ok(!found)
    })?;
    Ok(found)
}

/// What one state row holds in an answer besides its key and value: the row and its
/// JSON (`{"key", "value", "updatedAt"}`), with the vector's share.
const STATE_ROW_COST: u64 = 128;

/// Reads a partition's state cells, in key order, charging each row kept to `held`
/// (its key, and its value twice: read and rendered): a prefix read has no count
/// limit, and 10,000 named keys of 1 MiB values are 10 GiB. `Ok(None)`: the query is
/// unknown; `Err(Starved)`: the answer budget had no room.
pub fn state_get(
    view: &impl View,
    tenant: &str,
    q: &StateQuery,
    held: &mut Held,
) -> Result<Result<Option<Vec<StateRow>>, Starved>, StoreError> {
    let Some(query) = find_query(view, tenant, &q.query_id)? else {
        return Ok(Ok(None));
    };
    let Ok(pid) = q.partition_id.parse::<u64>() else {
        // Not an id this broker minted: a partition with no state.
        return Ok(Ok(Some(Vec::new())));
    };
    let cost = |key: &str, cell: &StateCell| {
        STATE_ROW_COST + key.len() as u64 + 2 * cell.value.get().len() as u64
    };
    let mut starved = None;
    let prefix = q.key_prefix.as_deref().unwrap_or("");
    let keep = |key: &str, cell: &StateCell| {
        key.starts_with(prefix)
            && q.ripe_at_or_before
                .is_none_or(|at| cell.window_end.is_some_and(|end| end <= at))
    };
    let row = |key: String, cell: StateCell| StateRow {
        key,
        value: cell.value,
        updated_at: cell.updated_at,
    };
    let mut rows = Vec::new();
    if q.keys.is_empty() {
        let base = keys::state_cells_prefix(tenant, &query.id, pid, "");
        let start = keys::state_cells_prefix(tenant, &query.id, pid, prefix);
        view.scan_rows(T::StreamState, &start, &start, &mut |k, v| {
            let Some(key) = KeyReader::new(&k[base.len()..]).str() else {
                return Err(StoreError::Corrupt("undecodable state key".into()));
            };
            let cell: StateCell = records::decode(v)?;
            if keep(&key, &cell) {
                if let Err(s) = held.charge_whole(cost(&key, &cell)) {
                    starved = Some(s);
                    return Ok(false);
                }
                rows.push(row(key, cell));
            }
            Ok(true)
        })?;
    } else {
        let mut wanted: Vec<&String> = q.keys.iter().collect();
        wanted.sort();
        wanted.dedup();
        for key in wanted {
            let ckey = keys::state_cell(tenant, &query.id, pid, key);
            if let Some(cell) = view.get_record::<StateCell>(T::StreamState, &ckey)?
                && keep(key, &cell)
            {
                if let Err(s) = held.charge_whole(cost(key, &cell)) {
                    starved = Some(s);
                    break;
                }
                rows.push(row(key.clone(), cell));
            }
        }
    }
    Ok(match starved {
        Some(s) => Err(s),
        None => Ok(Some(rows)),
    })
}

/// A page of the partitions holding the query's state, in partition id order.
/// `None`: the query is unknown.
pub fn state_partitions(
    view: &impl View,
    tenant: &str,
    q: &PartitionsQuery,
    now: Micros,
) -> Result<Option<PartitionsPage>, StoreError> {
    let Some(query) = find_query(view, tenant, &q.query_id)? else {
        return Ok(None);
    };
    let prefix = keys::state_partitions_prefix(tenant, &query.id);
    let start = match q.after {
        // Right after `after`: the next id's key.
        Some(after) => match after.checked_add(1) {
            Some(next) => keys::state_partition(tenant, &query.id, next),
            None => {
                return Ok(Some(PartitionsPage {
                    partitions: Vec::new(),
                    next: None,
                }));
            }
        },
        None => prefix.clone(),
    };
    let cutoff = q
        .untouched_for_ms
        .map(|ms| now.saturating_sub(ms.saturating_mul(1000)));
    let mut partitions = Vec::new();
    let mut more = false;
    view.scan_rows(T::StreamQueries, &start, &prefix, &mut |k, v| {
        let Some(pid) = KeyReader::new(&k[prefix.len()..]).u64() else {
            return Err(StoreError::Corrupt(
                "undecodable state partition key".into(),
            ));
        };
        let s: PartitionSummary = records::decode(v)?;
        if cutoff.is_some_and(|c| s.updated_at > c) {
            return Ok(true);
        }
        if partitions.len() == q.limit {
            more = true;
            return Ok(false);
        }
        partitions.push(StatePartition {
            partition_id: pid,
            partition: s.partition,
            queue: s.queue,
            updated_at: s.updated_at,
        });
        Ok(true)
    })?;
    let next = more
        .then(|| partitions.last().map(|p| p.partition_id))
        .flatten();
    Ok(Some(PartitionsPage { partitions, next }))
}

// ------------------------------------------------------------------ engine

impl super::Engine {
    /// Registers a stream query.
    pub async fn stream_register(
        &self,
        tenant: &str,
        r: Register,
    ) -> Result<Registered, EngineError> {
        let tenant = tenant.to_string();
        self.shared
            .writer
            .submit(move |tx| register(tx, &tenant, &r))
            .await
    }

    /// Commits one stream cycle, atomically.
    pub async fn stream_cycle(&self, tenant: &str, c: Cycle) -> Result<CycleOutcome, EngineError> {
        let tenant = tenant.to_string();
        self.shared
            .writer
            .submit(move |tx| cycle(tx, &tenant, &c))
            .await
    }

    /// Claims idle partitions for a stream's group.
    pub async fn stream_claim(
        &self,
        tenant: &str,
        mut c: Claim,
    ) -> Result<ClaimOutcome, EngineError> {
        let tenant = tenant.to_string();
        c.lease_seconds = c.lease_seconds.min(self.limits().max_lease_secs());
        self.shared
            .writer
            .submit(move |tx| Ok(claim(tx, &tenant, &c)?))
            .await
    }

    /// Reads a partition's stream state from the last commit ([`state_get`]), with
    /// the room the rows hold in the answer budget ([whole reads](crate::engine::answers#whole-answers)): keep it
    /// until the answer has been sent.
    pub async fn stream_state(
        &self,
        tenant: &str,
        q: StateQuery,
    ) -> Result<Charged<Option<Vec<StateRow>>>, EngineError> {
        let tenant = tenant.to_string();
        self.read_whole(move |db, _, held| {
            state_get(&crate::store::Reader::begin(db)?, &tenant, &q, held)
        })
        .await
    }

    /// Lists the partitions holding a query's state, from the last commit.
    pub async fn stream_state_partitions(
        &self,
        tenant: &str,
        q: PartitionsQuery,
    ) -> Result<Option<PartitionsPage>, EngineError> {
        let tenant = tenant.to_string();
        self.read(move |db, now| {
            state_partitions(&crate::store::Reader::begin(db)?, &tenant, &q, now)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    #[test]
    fn window_end_is_read_from_numeric_values_only() {
        assert_eq!(
            window_end(&raw(r#"{"acc":1,"windowEnd":10000}"#)),
            Some(10_000)
        );
        assert_eq!(window_end(&raw(r#"{"windowEnd":1.5e3}"#)), Some(1500));
        assert_eq!(window_end(&raw(r#"{"windowEnd":"10000"}"#)), None);
        assert_eq!(window_end(&raw(r#"{"acc":1}"#)), None);
        assert_eq!(window_end(&raw("1754301599000")), None, "the watermark row");
    }
}
