//! Message traces (`/api/v1/traces*`): events a worker records against a message it
//! handles, read back by message or by one of the names the event carries.
//!
//! Traces are durable: recording goes through the writer like any write and is
//! answered only once committed. They live in [`T::Traces`] under two kinds of key,
//! both led by the tenant, so that each read is one prefix scan:
//!
//! - `(tenant, "m", partition id, transactionId, trace id)` holds the event: every
//!   trace of one message, oldest first (trace ids are UUIDv7s that sort as minted within a tenant:
//!   `engine::ids::TraceIds`);
//! - `(tenant, "n", name, trace id)` points back to it: every trace carrying a name.
//!
//! A trace outlives its message (retention or a queue deletion does not remove it):
//! it is the record of what happened, and the reads say when the message is gone.

use redb::Database;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::answers::{self, Charged, Held, Starved};
use super::{Engine, ids};
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::Key;
use crate::store::records::{MessageRecord, PartitionRef, TxnRef, decode};
use crate::store::{Reader, StoreError, T, Tx, View};

/// An event to record.
#[derive(Debug, Clone)]
pub struct NewTrace {
    /// The message's partition id.
    pub partition_id: u64,
    /// The message's `transactionId`.
    pub transaction_id: String,
    /// The group handling it.
    pub consumer_group: String,
    /// `info`, `error`, `step`, … (free-form).
    pub event_type: String,
    /// The event's payload, as sent.
    pub data: Box<RawValue>,
    /// Names to find it by.
    pub names: Vec<String>,
    /// Who recorded it (the token's subject), if known.
    pub worker: Option<String>,
}

/// A recorded event.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TraceRecord {
    /// Its id (UUIDv7).
    pub id: String,
    /// The message's partition id.
    pub partition_id: u64,
    /// The message's queue, when recorded.
    pub queue: String,
    /// The message's partition, when recorded.
    pub partition: String,
    /// The message's `transactionId`.
    pub transaction_id: String,
    /// The group handling it.
    pub consumer_group: String,
    /// Its type.
    pub event_type: String,
    /// Its payload.
    pub data: Box<RawValue>,
    /// Who recorded it.
    pub worker: Option<String>,
    /// When.
    pub created_at: Micros,
    /// Its names, sorted.
    pub names: Vec<String>,
}

/// The name index's row: where the event is.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct NameRef {
    partition_id: u64,
    transaction_id: String,
    created_at: Micros,
}

/// What recording answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Recorded {
    /// Stored, under this id.
    Stored(String),
    /// No such message (in this tenant): nothing stored.
    NoMessage,
}

/// One name with what carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameSummary {
    /// The name.
    pub name: String,
    /// Traces carrying it.
    pub traces: u64,
    /// Distinct messages those traces are about.
    pub messages: u64,
    /// The newest of them.
    pub last_seen: Micros,
}

/// A page of something, with the count of all matches.
#[derive(Debug, Clone)]
pub struct Page<R> {
    /// The rows of the page.
    pub rows: Vec<R>,
    /// Every match.
    pub total: u64,
}

/// A trace found by name, with its message's payload while the message is stored.
#[derive(Debug, Clone)]
pub struct NamedTrace {
    /// The event.
    pub trace: TraceRecord,
    /// The message's payload; `None` once the message is gone.
    pub payload: Option<Box<RawValue>>,
}

fn event_key(tenant: &str, pid: u64, txn: &str, id: &str) -> Vec<u8> {
    Key::tenant(tenant)
        .str("m")
        .u64(pid)
        .str(txn)
        .str(id)
        .into_bytes()
}

fn name_key(tenant: &str, name: &str, id: &str) -> Vec<u8> {
    Key::tenant(tenant).str("n").str(name).str(id).into_bytes()
}

/// Records an event against a stored message.
pub fn record(tx: &mut Tx, tenant: &str, t: &NewTrace) -> Result<Recorded, StoreError> {
    let tk = Key::tenant(tenant);
    let Some(pref) = tx.get::<PartitionRef>(
        T::PartitionIds,
        &tk.clone().u64(t.partition_id).into_bytes(),
    )?
    else {
        return Ok(Recorded::NoMessage);
    };
    let idx = tk.u64(t.partition_id).str(&t.transaction_id).into_bytes();
    if tx.get::<TxnRef>(T::TxnIndex, &idx)?.is_none() {
        return Ok(Recorded::NoMessage);
    }
    let id = tx.with_memory(|t: &mut ids::TraceIds| t.next(tenant.to_string(), || None));
    let mut names = t.names.clone();
    names.sort();
    names.dedup();
    let rec = TraceRecord {
        id: id.clone(),
        partition_id: t.partition_id,
        queue: pref.queue,
        partition: pref.partition,
        transaction_id: t.transaction_id.clone(),
        consumer_group: t.consumer_group.clone(),
        event_type: t.event_type.clone(),
        data: t.data.clone(),
        worker: t.worker.clone(),
        created_at: tx.now,
        names,
    };
    for n in &rec.names {
        let r = NameRef {
            partition_id: rec.partition_id,
            transaction_id: rec.transaction_id.clone(),
            created_at: rec.created_at,
        };
        tx.put(T::Traces, name_key(tenant, n, &id), &r);
    }
    tx.put(
        T::Traces,
        event_key(tenant, t.partition_id, &t.transaction_id, &id),
        &rec,
    );
    Ok(Recorded::Stored(id))
}

/// Every trace of one message, oldest first.
pub fn for_message(
    db: &Database,
    tenant: &str,
    pid: u64,
    txn: &str,
    held: &mut Held,
) -> Result<Result<Vec<TraceRecord>, Starved>, StoreError> {
    let r = Reader::begin(db)?;
    let prefix = Key::tenant(tenant).str("m").u64(pid).str(txn).into_bytes();
    let (mut out, mut starved) = (Vec::new(), None);
    r.scan(T::Traces, &prefix, &prefix, |_, v| {
        if let Err(s) = held.charge_whole(answers::record_cost(v.len())) {
            starved = Some(s);
            return Ok(false);
        }
        out.push(decode(v)?);
        Ok(true)
    })?;
    Ok(starved.map_or(Ok(out), Err))
}

/// The names in use, the most recently seen first.
pub fn names(
    db: &Database,
    tenant: &str,
    limit: usize,
    offset: usize,
    held: &mut Held,
) -> Result<Result<Page<NameSummary>, Starved>, StoreError> {
    let r = Reader::begin(db)?;
    let prefix = Key::tenant(tenant).str("n").into_bytes();
    let mut all: Vec<NameSummary> = Vec::new();
    let mut messages: std::collections::HashSet<(u64, String)> = Default::default();
    // The set of one name's messages is cleared at the next name: what it held is
    // charged again, so the charge is what the largest set and every summary hold.
    let (mut set_bytes, mut held_sets, mut starved) = (0u64, 0u64, None);
    r.scan(T::Traces, &prefix, &prefix, |k, v| {
        let mut kr = crate::store::keys::KeyReader::new(&k[prefix.len()..]);
        let Some(name) = kr.str() else {
            return Ok(true);
        };
        let n: NameRef = decode(v)?;
        // Rows of one name are adjacent: a new name starts a new summary.
        if all.last().is_none_or(|s| s.name != name) {
            if let Err(s) = held.charge_whole(name.len() as u64 + 96) {
                starved = Some(s);
                return Ok(false);
            }
            set_bytes = 0;
            messages.clear();
            all.push(NameSummary {
                name,
                traces: 0,
                messages: 0,
                last_seen: n.created_at,
            });
        }
        let s = all.last_mut().expect("pushed above");
        s.traces += 1;
        s.last_seen = s.last_seen.max(n.created_at);
        let entry = n.transaction_id.len() as u64 + 64;
        if messages.insert((n.partition_id, n.transaction_id)) {
            s.messages += 1;
            set_bytes += entry;
            // Room the largest set so far did not already take.
            if set_bytes > held_sets
                && let Err(e) = held.charge_whole(set_bytes - held_sets)
            {
                starved = Some(e);
                return Ok(false);
            }
            held_sets = held_sets.max(set_bytes);
        }
        Ok(true)
    })?;
    if let Some(s) = starved {
        return Ok(Err(s));
    }
    all.sort_by(|a, b| {
        b.last_seen
            .cmp(&a.last_seen)
            .then_with(|| a.name.cmp(&b.name))
    });
    let total = all.len() as u64;
    let rows = all.into_iter().skip(offset).take(limit).collect();
    Ok(Ok(Page { rows, total }))
}

/// The traces carrying `name`, oldest first, with their messages' payloads.
pub fn by_name(
    db: &Database,
    tenant: &str,
    name: &str,
    limit: usize,
    offset: usize,
    held: &mut Held,
) -> Result<Result<Page<NamedTrace>, Starved>, StoreError> {
    let r = Reader::begin(db)?;
    let prefix = Key::tenant(tenant).str("n").str(name).into_bytes();
    let mut refs: Vec<(String, NameRef)> = Vec::new();
    let mut total = 0u64;
    r.scan(T::Traces, &prefix, &prefix, |k, v| {
        total += 1;
        if total as usize > offset && refs.len() < limit {
            let id = crate::store::keys::KeyReader::new(&k[prefix.len()..])
                .str()
                .unwrap_or_default();
            refs.push((id, decode(v)?));
        }
        Ok(true)
    })?;
    let mut rows = Vec::with_capacity(refs.len());
    for (id, n) in refs {
        let key = event_key(tenant, n.partition_id, &n.transaction_id, &id);
        let Some(trace) = r.get_record::<TraceRecord>(T::Traces, &key)? else {
            continue;
        };
        let payload = message_payload(&r, tenant, n.partition_id, &n.transaction_id)?;
        let cost = answers::record_cost(trace.data.get().len())
            + payload
                .as_ref()
                .map_or(0, |p| answers::record_cost(p.get().len()));
        if let Err(s) = held.charge_whole(cost) {
            return Ok(Err(s));
        }
        rows.push(NamedTrace { trace, payload });
    }
    Ok(Ok(Page { rows, total }))
}

fn message_payload(
    r: &Reader,
    tenant: &str,
    pid: u64,
    txn: &str,
) -> Result<Option<Box<RawValue>>, StoreError> {
    let t = Key::tenant(tenant);
    let Some(TxnRef { offset, .. }) =
        r.get_record::<TxnRef>(T::TxnIndex, &t.clone().u64(pid).str(txn).into_bytes())?
    else {
        return Ok(None);
    };
    Ok(
        r.get_record::<MessageRecord>(T::Messages, &t.u64(pid).u64(offset).into_bytes())?
            .map(|m| m.data),
    )
}

impl Engine {
    /// Records a trace event, answered once it is durable.
    pub async fn record_trace(
        &self,
        tenant: &str,
        trace: NewTrace,
    ) -> Result<Recorded, EngineError> {
        let tenant = tenant.to_string();
        self.shared
            .writer
            .submit(move |tx| {
                tx.ensure_room()?;
                Ok(record(tx, &tenant, &trace)?)
            })
            .await
    }

    /// Every trace of one message ([`for_message`]), with the room they hold in the
    /// answer budget ([whole reads](crate::engine::answers#whole-answers)): keep it until the answer is sent.
    pub async fn message_traces(
        &self,
        tenant: &str,
        pid: u64,
        txn: &str,
    ) -> Result<Charged<Vec<TraceRecord>>, EngineError> {
        let (tenant, txn) = (tenant.to_string(), txn.to_string());
        self.read_whole(move |db, _, held| for_message(db, &tenant, pid, &txn, held))
            .await
    }

    /// The names in use ([`names`]), with the room they hold in the answer budget.
    pub async fn trace_names(
        &self,
        tenant: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Charged<Page<NameSummary>>, EngineError> {
        let tenant = tenant.to_string();
        self.read_whole(move |db, _, held| names(db, &tenant, limit, offset, held))
            .await
    }

    /// The traces carrying a name ([`by_name`]), with the room they and their
    /// messages' payloads hold in the answer budget.
    pub async fn traces_by_name(
        &self,
        tenant: &str,
        name: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Charged<Page<NamedTrace>>, EngineError> {
        let (tenant, name) = (tenant.to_string(), name.to_string());
        self.read_whole(move |db, _, held| by_name(db, &tenant, &name, limit, offset, held))
            .await
    }
}
