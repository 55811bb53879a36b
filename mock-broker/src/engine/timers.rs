//! Timers: a payload pushed to a queue at a time, scheduled, rescheduled or cancelled
//! standalone or inside a transaction, and fired by the scheduler through the writer.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::ids;
use super::push::{NewMessage, append};
use super::queues::{DEFAULT_PARTITION, check_name};
use crate::clock::{Micros, format_iso};
use crate::error::EngineError;
use crate::fields::Obj;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::decode;
use crate::store::{StoreError, T, Tx};

/// Standalone calls: most operations.
pub const MAX_OPS: usize = 256;
/// Standalone calls: largest decoded payload.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Standalone calls: default farthest `deliverAt`, in seconds (90 days).
pub const DEFAULT_HORIZON_S: i64 = 90 * 24 * 3600;
/// Most timers fired in one sweep (one command of the writer).
const SWEEP: usize = 512;

/// A pending timer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct TimerRecord {
    /// The `transactionId` of the message it pushes.
    pub txn: String,
    /// The id of the message it pushes.
    pub message_id: String,
    /// When it fires.
    pub deliver_at: Micros,
    /// The partition it pushes to.
    pub partition: String,
    /// The payload, base64 as given.
    pub payload: String,
    /// The payload is zstd-compressed.
    pub zstd: bool,
    /// The payload is encrypted.
    pub encrypted: bool,
    /// Fire attempts so far.
    pub attempts: u32,
    /// When it was (re)scheduled.
    pub scheduled_at: Micros,
}

/// The operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerKind {
    /// Set (replacing a pending timer of the key).
    Schedule,
    /// Replace (scheduling when absent).
    Reschedule,
    /// Remove a pending timer.
    Cancel,
}

impl TimerKind {
    /// Whether the op stores a timer (a cancel only frees space).
    pub fn adds_data(self) -> bool {
        !matches!(self, Self::Cancel)
    }
}

/// One parsed timer operation.
#[derive(Debug, Clone)]
pub struct TimerOp {
    /// Which operation.
    pub kind: TimerKind,
    /// Target queue.
    pub queue: String,
    /// The timer's key within the queue.
    pub timer_key: String,
    /// Base64 payload (schedule, reschedule).
    pub payload: String,
    /// Decoded payload length.
    pub payload_len: usize,
    /// Delay from now.
    pub delay_ms: i64,
    /// The pushed message's `transactionId`; minted when absent. For cancel: the owner.
    pub txn: Option<String>,
    /// Target partition.
    pub partition: String,
    /// Payload flags, kept and echoed.
    pub zstd: bool,
    /// Payload flags, kept and echoed.
    pub encrypted: bool,
}

/// Fields the broker owns: a request that carries one is refused.
const BROKER_OWNED: &[&str] = &[
    "producerSub",
    "messageId",
    "deliverAt",
    "delaySeconds",
    "attempts",
    "tenant",
    "tenantId",
    "tenantSub",
];

fn bad(code: &'static str, message: String) -> EngineError {
    EngineError::Coded {
        status: 400,
        code,
        message,
        reason: None,
    }
}

/// Parses one timer operation; `code` is the 400's code (`bad_request` in a
/// transaction, `timers_bad_request` standalone).
pub fn parse_op(v: &Value, path: &str, code: &'static str) -> Result<TimerOp, EngineError> {
    let o = Obj::of(v, path).map_err(|m| bad(code, m))?;
    for field in o.map.keys() {
        if field.starts_with('_') || BROKER_OWNED.contains(&field.as_str()) {
            return Err(bad(
                code,
                format!("{path}.{field} is owned by the broker and may not be sent"),
            ));
        }
    }
    let op = o.req_str("op").map_err(|m| bad(code, m))?;
    let kind = match op {
        "schedule" => TimerKind::Schedule,
        "reschedule" => TimerKind::Reschedule,
        "cancel" => TimerKind::Cancel,
        other => {
            return Err(bad(
                code,
                format!("{path}.op: unknown timer operation {other:?}"),
            ));
        }
    };
    let queue = o.req_str("queue").map_err(|m| bad(code, m))?.to_string();
    check_name("queue", &queue)?;
    let timer_key = o.req_str("timerKey").map_err(|m| bad(code, m))?.to_string();
    if timer_key.is_empty() || timer_key.len() > 1024 {
        return Err(bad(
            code,
            format!("{path}.timerKey must be 1 to 1024 bytes"),
        ));
    }
    let partition = o
        .str("partition")
        .map_err(|m| bad(code, m))?
        .unwrap_or(DEFAULT_PARTITION)
        .to_string();
    check_name("partition", &partition)?;
    let txn = o.str("txn").map_err(|m| bad(code, m))?.map(str::to_string);
    if txn
        .as_ref()
        .is_some_and(|t| t.len() > super::push::MAX_TRANSACTION_ID_BYTES)
    {
        return Err(bad(code, format!("{path}.txn is over 65,535 bytes")));
    }
    let mut out = TimerOp {
        kind,
        queue,
        timer_key,
        payload: String::new(),
        payload_len: 0,
        delay_ms: 0,
        txn,
        partition,
        zstd: o
            .bool("payloadZstd")
            .map_err(|m| bad(code, m))?
            .unwrap_or(false),
        encrypted: o
            .bool("encrypted")
            .map_err(|m| bad(code, m))?
            .unwrap_or(false),
    };
    if kind != TimerKind::Cancel {
        let payload = o.req_str("payload").map_err(|m| bad(code, m))?;
        let bytes = B64
            .decode(payload)
            .map_err(|e| bad(code, format!("{path}.payload must be base64: {e}")))?;
        out.payload = payload.to_string();
        out.payload_len = bytes.len();
        out.delay_ms = o
            .int("delayMs")
            .map_err(|m| bad(code, m))?
            .ok_or_else(|| bad(code, format!("{path}.delayMs is required")))?;
    }
    Ok(out)
}

/// Checks a call's operations together: one `(queue, timerKey)` per call; standalone
/// calls also keep the op cap, the payload ceiling and the horizon.
pub fn check_call(ops: &[TimerOp], standalone: bool, horizon_s: i64) -> Result<(), EngineError> {
    let code = if standalone {
        "timers_bad_request"
    } else {
        "bad_request"
    };
    let mut seen = std::collections::HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        if !seen.insert((op.queue.as_str(), op.timer_key.as_str())) {
            return Err(bad(
                code,
                format!(
                    "timers[{i}]: {}/{} appears twice in one call",
                    op.queue, op.timer_key
                ),
            ));
        }
    }
    if !standalone {
        return Ok(());
    }
    if ops.len() > MAX_OPS {
        return Err(bad(
            code,
            format!("{} timer operations; the limit is {MAX_OPS}", ops.len()),
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        if op.payload_len > MAX_PAYLOAD_BYTES {
            return Err(EngineError::PayloadTooLarge(format!(
                "operations[{i}].payload is {} bytes decoded; the limit is {MAX_PAYLOAD_BYTES}",
                op.payload_len
            )));
        }
        if op.kind != TimerKind::Cancel && op.delay_ms > horizon_s.saturating_mul(1000) {
            return Err(EngineError::Coded {
                status: 403,
                code: "timer_horizon_exceeded",
                message: format!("operations[{i}].delayMs reaches past the {horizon_s} s horizon"),
                reason: None,
            });
        }
    }
    Ok(())
}

fn timer_key(tenant: &str, queue: &str, key: &str) -> Vec<u8> {
    Key::tenant(tenant).str(queue).str(key).into_bytes()
}

/// Orders signed times as unsigned keys.
fn ordered(t: Micros) -> u64 {
    (t as u64) ^ (1 << 63)
}

fn due_key(at: Micros, tenant: &str, queue: &str, key: &str) -> Vec<u8> {
    let mut k = ordered(at).to_be_bytes().to_vec();
    k.extend(Key::tenant(tenant).str(queue).str(key).into_bytes());
    k
}

/// The pending timer at `(queue, key)`.
pub fn get(
    tx: &Tx,
    tenant: &str,
    queue: &str,
    key: &str,
) -> Result<Option<TimerRecord>, StoreError> {
    tx.get(T::Timers, &timer_key(tenant, queue, key))
}

fn remove(tx: &mut Tx, tenant: &str, queue: &str, key: &str, rec: &TimerRecord) {
    tx.delete(T::Timers, timer_key(tenant, queue, key));
    tx.delete(T::TimerDue, due_key(rec.deliver_at, tenant, queue, key));
}

fn result(status: &str, ok: bool, op: &TimerOp, rec: Option<&TimerRecord>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("ok".into(), ok.into());
    m.insert("status".into(), status.into());
    m.insert("queue".into(), op.queue.clone().into());
    m.insert("timerKey".into(), op.timer_key.clone().into());
    match rec {
        Some(r) => {
            m.insert("txn".into(), r.txn.clone().into());
            m.insert("messageId".into(), r.message_id.clone().into());
            m.insert("deliverAt".into(), format_iso(r.deliver_at).into());
        }
        None => {
            m.insert("txn".into(), op.txn.clone().into());
        }
    }
    m
}

/// Applies one operation and answers its result fields (no `index`).
pub fn apply(tx: &mut Tx, tenant: &str, op: &TimerOp) -> Result<Map<String, Value>, StoreError> {
    let existing = get(tx, tenant, &op.queue, &op.timer_key)?;
    if op.kind == TimerKind::Cancel {
        return Ok(match existing {
            Some(rec) if op.txn.as_ref().is_none_or(|t| *t == rec.txn) => {
                remove(tx, tenant, &op.queue, &op.timer_key, &rec);
                result("cancelled", true, op, Some(&rec))
            }
            _ => result("absent", false, op, None),
        });
    }
    if let Some(old) = &existing {
        remove(tx, tenant, &op.queue, &op.timer_key, old);
    }
    let message_id = ids::message_id();
    let rec = TimerRecord {
        txn: op.txn.clone().unwrap_or_else(|| message_id.clone()),
        message_id,
        deliver_at: tx
            .now
            .saturating_add(op.delay_ms.max(0).saturating_mul(1000)),
        partition: op.partition.clone(),
        payload: op.payload.clone(),
        zstd: op.zstd,
        encrypted: op.encrypted,
        attempts: 0,
        scheduled_at: tx.now,
    };
    tx.put(T::Timers, timer_key(tenant, &op.queue, &op.timer_key), &rec);
    tx.put(
        T::TimerDue,
        due_key(rec.deliver_at, tenant, &op.queue, &op.timer_key),
        &(),
    );
    let status = if existing.is_some() {
        "rescheduled"
    } else {
        "scheduled"
    };
    Ok(result(status, true, op, Some(&rec)))
}

/// The message body a timer delivers: its payload as JSON when it is JSON, otherwise
/// (binary, compressed or encrypted) the base64 text as a JSON string.
fn delivered_payload(rec: &TimerRecord) -> Box<RawValue> {
    if !rec.zstd
        && !rec.encrypted
        && let Ok(bytes) = B64.decode(&rec.payload)
        && let Ok(text) = String::from_utf8(bytes)
        && let Ok(raw) = RawValue::from_string(text)
    {
        return raw;
    }
    RawValue::from_string(Value::from(rec.payload.clone()).to_string()).expect("a JSON string")
}

/// Fires every timer due by now (up to one sweep): pushes its message and removes it.
/// Answers how many fired.
pub fn fire_due(tx: &mut Tx) -> Result<usize, StoreError> {
    let now = ordered(tx.now);
    let mut due = Vec::new();
    tx.scan(T::TimerDue, &[], &[], |k, _| {
        let Some(at) = k
            .get(..8)
            .map(|b| u64::from_be_bytes(b.try_into().expect("8 bytes")))
        else {
            return Ok(true);
        };
        if at > now || due.len() >= SWEEP {
            return Ok(false);
        }
        let mut r = KeyReader::new(&k[8..]);
        if let (Some(t), Some(q), Some(key)) = (r.str(), r.str(), r.str()) {
            due.push((t, q, key, k.to_vec()));
        }
        Ok(true)
    })?;
    for (tenant, queue, key, dkey) in &due {
        tx.delete(T::TimerDue, dkey.clone());
        let Some(rec) = get(tx, tenant, queue, key)? else {
            continue;
        };
        tx.delete(T::Timers, timer_key(tenant, queue, key));
        append(
            tx,
            tenant,
            NewMessage {
                queue: queue.clone(),
                partition: rec.partition.clone(),
                payload: delivered_payload(&rec),
                transaction_id: Some(rec.txn.clone()),
                trace_id: None,
                producer_sub: None,
                message_id: Some(rec.message_id.clone()),
            },
        )?;
    }
    Ok(due.len())
}

/// The peek answer for `(queue, key)`.
pub fn peek(tx: &Tx, tenant: &str, queue: &str, key: &str) -> Result<Value, StoreError> {
    Ok(match get(tx, tenant, queue, key)? {
        None => json!({"found": false, "queue": queue, "timerKey": key}),
        Some(r) => json!({
            "found": true,
            "queue": queue,
            "timerKey": key,
            "deliverAt": format_iso(r.deliver_at),
            "txn": r.txn,
            "messageId": r.message_id,
            "partition": r.partition,
            "payload": r.payload,
            "payloadZstd": r.zstd,
            "encrypted": r.encrypted,
            "attempts": r.attempts,
        }),
    })
}

/// A page of a queue's pending timers, in key order after `after`.
pub fn list(
    tx: &Tx,
    tenant: &str,
    queue: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<Value, StoreError> {
    let prefix = Key::tenant(tenant).str(queue).into_bytes();
    let start = match after {
        Some(a) => {
            let mut k = timer_key(tenant, queue, a);
            k.push(0xFF);
            k
        }
        None => prefix.clone(),
    };
    let (mut rows, mut truncated, mut last) = (Vec::new(), false, None::<String>);
    tx.scan(T::Timers, &start, &prefix, |k, v| {
        let mut r = KeyReader::new(k);
        let (_, _, key) = (r.str(), r.str(), r.str());
        let Some(key) = key else { return Ok(true) };
        if rows.len() == limit {
            truncated = true;
            return Ok(false);
        }
        let rec: TimerRecord = decode(v)?;
        rows.push(json!({
            "timerKey": key,
            "deliverAt": format_iso(rec.deliver_at),
            "txn": rec.txn,
            "messageId": rec.message_id,
            "partition": rec.partition,
            "attempts": rec.attempts,
        }));
        last = Some(key);
        Ok(true)
    })?;
    Ok(json!({
        "rows": rows,
        "truncated": truncated,
        "nextAfter": if truncated { last } else { None },
    }))
}
