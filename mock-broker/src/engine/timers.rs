//! Timers: a payload pushed to a queue at a time, scheduled, rescheduled or cancelled
//! standalone or inside a transaction, and fired by the scheduler through the writer.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::ids;
use super::push::{NewMessage, append};
use super::timer_log::{Ended, TimerEnd};
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::decode;
use crate::store::{StoreError, T, Tx, View};

/// Standalone calls: most operations.
pub const MAX_OPS: usize = 256;
/// Standalone calls: largest decoded payload.
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// Standalone calls: default farthest `deliverAt`, in seconds (90 days).
pub const DEFAULT_HORIZON_S: i64 = 90 * 24 * 3600;
/// Most timers fired in one sweep (one command of the writer).
const SWEEP: usize = 512;

/// A pending timer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
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

/// One parsed timer operation. A schedule and a reschedule do the same thing (set the
/// key's timer, replacing a pending one; the answer says which happened); they stay two
/// variants because the wire names them apart and a log should too.
#[derive(Debug, Clone)]
pub enum TimerOp {
    /// `schedule`: set the key's timer.
    Schedule(TimerSpec),
    /// `reschedule`: replace the key's timer (scheduling it when absent).
    Reschedule(TimerSpec),
    /// `cancel`: remove the key's pending timer, only if `owner` (when given) set it.
    Cancel {
        /// Target queue.
        queue: String,
        /// The timer's key within the queue.
        timer_key: String,
        /// The `transactionId` the pending timer must carry.
        owner: Option<String>,
    },
}

/// What a schedule or reschedule sets.
#[derive(Debug, Clone)]
pub struct TimerSpec {
    /// Target queue.
    pub queue: String,
    /// The timer's key within the queue.
    pub timer_key: String,
    /// Base64 payload.
    pub payload: String,
    /// Decoded payload length.
    pub payload_len: usize,
    /// Delay from now.
    pub delay_ms: i64,
    /// The pushed message's `transactionId`; minted when absent.
    pub txn: Option<String>,
    /// Target partition.
    pub partition: String,
    /// Payload flags, kept and echoed.
    pub zstd: bool,
    /// Payload flags, kept and echoed.
    pub encrypted: bool,
}

impl TimerOp {
    /// The target `(queue, timerKey)`.
    pub fn target(&self) -> (&str, &str) {
        match self {
            Self::Schedule(s) | Self::Reschedule(s) => (&s.queue, &s.timer_key),
            Self::Cancel {
                queue, timer_key, ..
            } => (queue, timer_key),
        }
    }

    /// The timer this op sets, if it sets one.
    pub fn spec(&self) -> Option<&TimerSpec> {
        match self {
            Self::Schedule(s) | Self::Reschedule(s) => Some(s),
            Self::Cancel { .. } => None,
        }
    }

    /// Whether the op stores a timer (a cancel only frees space).
    pub fn adds_data(&self) -> bool {
        self.spec().is_some()
    }

    /// The `transactionId` the op names: the pushed message's, or a cancel's owner.
    fn txn(&self) -> Option<&String> {
        match self {
            Self::Schedule(s) | Self::Reschedule(s) => s.txn.as_ref(),
            Self::Cancel { owner, .. } => owner.as_ref(),
        }
    }
}

/// A 400 of a standalone call (`timers_bad_request`) or of a transaction
/// (`bad_request`).
fn bad(standalone: bool, message: String) -> EngineError {
    if standalone {
        EngineError::TimersBadRequest(message)
    } else {
        EngineError::BadRequest(message)
    }
}

/// Checks a call's operations together: one `(queue, timerKey)` per call; standalone
/// calls also keep the op cap, the payload ceiling and the horizon.
pub fn check_call(ops: &[TimerOp], standalone: bool, horizon_s: i64) -> Result<(), EngineError> {
    let mut seen = std::collections::HashSet::new();
    for (i, op) in ops.iter().enumerate() {
        let (queue, key) = op.target();
        if !seen.insert((queue, key)) {
            return Err(bad(
                standalone,
                format!("timers[{i}]: {queue}/{key} appears twice in one call"),
            ));
        }
    }
    if !standalone {
        return Ok(());
    }
    if ops.len() > MAX_OPS {
        return Err(bad(
            standalone,
            format!("{} timer operations; the limit is {MAX_OPS}", ops.len()),
        ));
    }
    for (i, op) in ops.iter().enumerate() {
        let Some(op) = op.spec() else { continue };
        if op.payload_len > MAX_PAYLOAD_BYTES {
            return Err(EngineError::PayloadTooLarge(format!(
                "operations[{i}].payload is {} bytes decoded; the limit is {MAX_PAYLOAD_BYTES}",
                op.payload_len
            )));
        }
        if op.delay_ms > horizon_s.saturating_mul(1000) {
            return Err(EngineError::TimerHorizonExceeded(format!(
                "operations[{i}].delayMs reaches past the {horizon_s} s horizon"
            )));
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

/// What a timer operation did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerStatus {
    /// A new timer is pending.
    Scheduled,
    /// A pending timer of the key was replaced.
    Rescheduled,
    /// The pending timer was removed.
    Cancelled,
    /// No pending timer of the key (and owner) to cancel.
    Absent,
}

impl TimerStatus {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Rescheduled => "rescheduled",
            Self::Cancelled => "cancelled",
            Self::Absent => "absent",
        }
    }

    /// Whether the operation took effect.
    pub fn ok(self) -> bool {
        !matches!(self, Self::Absent)
    }
}

/// The result of one timer operation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimerResult {
    /// What happened.
    pub status: TimerStatus,
    /// The queue.
    pub queue: String,
    /// The timer's key.
    pub timer_key: String,
    /// The owner sent (answered when no timer is concerned).
    pub txn: Option<String>,
    /// The timer set or cancelled.
    pub record: Option<TimerRecord>,
}

fn result(status: TimerStatus, op: &TimerOp, rec: Option<TimerRecord>) -> TimerResult {
    let (queue, timer_key) = op.target();
    TimerResult {
        status,
        queue: queue.to_string(),
        timer_key: timer_key.to_string(),
        txn: op.txn().cloned(),
        record: rec,
    }
}

/// Applies one operation.
pub fn apply(tx: &mut Tx, tenant: &str, op: &TimerOp) -> Result<TimerResult, StoreError> {
    let (queue, key) = op.target();
    let existing = get(tx, tenant, queue, key)?;
    let spec = match op {
        TimerOp::Cancel { owner, .. } => {
            return Ok(match existing {
                Some(rec) if owner.as_ref().is_none_or(|t| *t == rec.txn) => {
                    remove(tx, tenant, queue, key, &rec);
                    result(TimerStatus::Cancelled, op, Some(rec))
                }
                _ => result(TimerStatus::Absent, op, None),
            });
        }
        TimerOp::Schedule(spec) | TimerOp::Reschedule(spec) => spec,
    };
    if let Some(old) = &existing {
        remove(tx, tenant, queue, key, old);
    }
    let message_id = ids::message_id();
    let rec = TimerRecord {
        txn: spec.txn.clone().unwrap_or_else(|| message_id.clone()),
        message_id,
        deliver_at: tx
            .now
            .saturating_add(spec.delay_ms.max(0).saturating_mul(1000)),
        partition: spec.partition.clone(),
        payload: spec.payload.clone(),
        zstd: spec.zstd,
        encrypted: spec.encrypted,
        attempts: 0,
        scheduled_at: tx.now,
    };
    tx.put(T::Timers, timer_key(tenant, queue, key), &rec);
    tx.put(
        T::TimerDue,
        due_key(rec.deliver_at, tenant, queue, key),
        &(),
    );
    let status = if existing.is_some() {
        TimerStatus::Rescheduled
    } else {
        TimerStatus::Scheduled
    };
    Ok(result(status, op, Some(rec)))
}

/// The message body a timer delivers: its payload as JSON when it is portable JSON
/// (scheduling refuses JSON that is not; one stored before that rule is delivered as
/// its base64 text), otherwise (binary, compressed or encrypted) the base64 text as a
/// JSON string.
fn delivered_payload(rec: &TimerRecord) -> Box<RawValue> {
    if !rec.zstd
        && !rec.encrypted
        && let Ok(bytes) = B64.decode(&rec.payload)
        && crate::portable::check(&bytes).is_ok()
        && let Ok(text) = String::from_utf8(bytes)
        && let Ok(raw) = RawValue::from_string(text)
    {
        return raw;
    }
    let text = serde_json::to_string(&rec.payload).expect("a string renders");
    RawValue::from_string(text).expect("a JSON string")
}

/// Fires every timer due by now (up to one sweep): pushes its message and removes it.
/// Answers the timers fired, each with its tenant, for the timer log
/// ([`super::timer_log`]) once the write is committed.
pub fn fire_due(tx: &mut Tx) -> Result<Vec<(String, Ended)>, StoreError> {
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
    let mut fired = Vec::with_capacity(due.len());
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
        let at = tx.now;
        fired.push((
            tenant.clone(),
            Ended::new(TimerEnd::Fired, at, queue, key, &rec),
        ));
    }
    Ok(fired)
}

/// A page of a queue's pending timers.
#[derive(Debug, Clone, Default)]
pub struct TimerPage {
    /// `(timer key, timer)` in key order.
    pub rows: Vec<(String, TimerRecord)>,
    /// More timers follow.
    pub truncated: bool,
    /// Where the next page starts, when truncated.
    pub next_after: Option<String>,
}

/// A read of pending timers.
#[derive(Debug, Clone)]
pub enum TimerRead {
    /// One timer by key; `None`: none pending.
    One(Option<TimerRecord>),
    /// A page of a queue's.
    Page(TimerPage),
}

/// A page of a queue's pending timers, in key order after `after`.
pub fn list(
    tx: &Tx,
    tenant: &str,
    queue: &str,
    after: Option<&str>,
    limit: usize,
) -> Result<TimerPage, StoreError> {
    let prefix = Key::tenant(tenant).str(queue).into_bytes();
    let start = match after {
        Some(a) => {
            let mut k = timer_key(tenant, queue, a);
            k.push(0xFF);
            k
        }
        None => prefix.clone(),
    };
    let mut page = TimerPage::default();
    tx.scan(T::Timers, &start, &prefix, |k, v| {
        let mut r = KeyReader::new(k);
        let (_, _, key) = (r.str(), r.str(), r.str());
        let Some(key) = key else { return Ok(true) };
        if page.rows.len() == limit {
            page.truncated = true;
            return Ok(false);
        }
        page.rows.push((key, decode(v)?));
        Ok(true)
    })?;
    if page.truncated {
        page.next_after = page.rows.last().map(|(k, _)| k.clone());
    }
    Ok(page)
}

/// A timer queue of a tenant, as `GET /api/v1/timers` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TimerQueue {
    /// The queue the timers push to.
    pub queue: String,
    /// Its pending timers (a timer whose time came stays pending until a sweep fires it).
    pub pending: u64,
    /// The earliest `deliverAt` among them.
    pub next_deliver_at: Micros,
}

/// The leading fields of a [`TimerRecord`]: what the queue listing reads. Decoding
/// only them skips the payload (up to 1 MiB a timer), as both record formats allow: a
/// compact record's later fields are trailing bytes postcard leaves unread, a JSON one's
/// are unknown keys serde skips. The fields must stay the record's first three, in its
/// order (`the_head_of_a_timer_record_decodes_in_both_formats`).
#[derive(Deserialize)]
struct TimerHead {
    // Read to reach `deliver_at` (postcard cannot skip a field it is not told the type
    // of); looked at only by the test.
    #[allow(dead_code)]
    txn: String,
    #[allow(dead_code)]
    message_id: String,
    deliver_at: Micros,
}

/// The tenant's queues with at least one pending timer, in name order, with their
/// count and earliest time. Every pending timer of the tenant is visited (the due index
/// is ordered by time across tenants, so it cannot be narrowed to one): an operator's
/// read.
pub fn queues(view: &impl View, tenant: &str) -> Result<Vec<TimerQueue>, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut out: Vec<TimerQueue> = Vec::new();
    view.scan_rows(T::Timers, &prefix, &prefix, &mut |k, v| {
        let mut r = KeyReader::new(k);
        let (_, queue) = (r.str(), r.str());
        let Some(queue) = queue else { return Ok(true) };
        let head: TimerHead = decode(v)?;
        // Keys come in queue order: a queue's timers are one run.
        match out.last_mut() {
            Some(last) if last.queue == queue => {
                last.pending += 1;
                last.next_deliver_at = last.next_deliver_at.min(head.deliver_at);
            }
            _ => out.push(TimerQueue {
                queue,
                pending: 1,
                next_deliver_at: head.deliver_at,
            }),
        }
        Ok(true)
    })?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::records::{encode, encode_compact};

    #[test]
    fn the_head_of_a_timer_record_decodes_in_both_formats() {
        let rec = TimerRecord {
            txn: "t-1".into(),
            message_id: "m-1".into(),
            deliver_at: 1_796_342_400_000_000,
            partition: "p".into(),
            payload: "aGk=".repeat(100),
            zstd: false,
            encrypted: true,
            attempts: 2,
            scheduled_at: 7,
        };
        for bytes in [encode_compact(&rec), encode(&rec)] {
            let head: TimerHead = decode(&bytes).unwrap();
            assert_eq!(head.deliver_at, rec.deliver_at);
            assert_eq!(
                (head.txn.as_str(), head.message_id.as_str()),
                ("t-1", "m-1")
            );
        }
    }
}
