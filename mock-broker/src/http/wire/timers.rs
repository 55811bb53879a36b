//! Timers on the wire: an operation of `POST /api/v1/timers` (and of a transaction's
//! `timers` array) parsed into [`TimerOp`], and timer results, peeks and pages rendered.

use std::collections::BTreeMap;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};

use super::kv::At;
use crate::clock::format_iso;
use crate::engine::push::MAX_TRANSACTION_ID_BYTES;
use crate::engine::queues::{DEFAULT_PARTITION, check_name};
use crate::engine::timers::{TimerOp, TimerPage, TimerQueue, TimerRecord, TimerResult, TimerSpec};
use crate::error::EngineError;

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

/// The body of `POST /api/v1/timers`.
#[derive(Debug, Deserialize)]
pub struct TimersBody {
    /// The operations; required.
    pub operations: Option<Vec<TimerOpWire>>,
}

/// One timer operation as sent.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerOpWire {
    op: Option<String>,
    queue: Option<String>,
    timer_key: Option<String>,
    partition: Option<String>,
    txn: Option<String>,
    payload: Option<String>,
    delay_ms: Option<i64>,
    payload_zstd: Option<bool>,
    encrypted: Option<bool>,
    /// Every other field, kept by name only: the broker-owned ones are refused.
    #[serde(flatten)]
    other: BTreeMap<String, IgnoredAny>,
}

impl TimerOpWire {
    /// A `cancel` of a path's `(queue, key)`, by the owner `txn` if given.
    pub fn cancel(queue: String, key: String, txn: Option<String>) -> Self {
        TimerOpWire {
            op: Some("cancel".into()),
            queue: Some(queue),
            timer_key: Some(key),
            txn,
            ..Default::default()
        }
    }

    /// Checks the operation's rules and builds the command; `bad` makes a 400 of the
    /// call's code (`timers_bad_request` standalone, `bad_request` in a transaction).
    pub fn into_op(self, at: At, bad: fn(String) -> EngineError) -> Result<TimerOp, EngineError> {
        for field in self.other.keys() {
            if field.starts_with('_') || BROKER_OWNED.contains(&field.as_str()) {
                return Err(bad(format!(
                    "{at}.{field} is owned by the broker and may not be sent"
                )));
            }
        }
        let op = self.op.ok_or_else(|| bad(format!("{at}.op is required")))?;
        // `None`: a cancel, which sets nothing.
        let set: Option<fn(TimerSpec) -> TimerOp> = match op.as_str() {
            "schedule" => Some(TimerOp::Schedule),
            "reschedule" => Some(TimerOp::Reschedule),
            "cancel" => None,
            other => {
                return Err(bad(format!("{at}.op: unknown timer operation {other:?}")));
            }
        };
        let queue = self
            .queue
            .ok_or_else(|| bad(format!("{at}.queue is required")))?;
        check_name("queue", &queue)?;
        let timer_key = self
            .timer_key
            .ok_or_else(|| bad(format!("{at}.timerKey is required")))?;
        if timer_key.is_empty() || timer_key.len() > 1024 {
            return Err(bad(format!("{at}.timerKey must be 1 to 1024 bytes")));
        }
        if self
            .txn
            .as_ref()
            .is_some_and(|t| t.len() > MAX_TRANSACTION_ID_BYTES)
        {
            return Err(bad(format!("{at}.txn is over 65,535 bytes")));
        }
        let partition = self
            .partition
            .unwrap_or_else(|| DEFAULT_PARTITION.to_string());
        check_name("partition", &partition)?;
        let Some(set) = set else {
            return Ok(TimerOp::Cancel {
                queue,
                timer_key,
                owner: self.txn,
            });
        };
        let payload = self
            .payload
            .ok_or_else(|| bad(format!("{at}.payload is required")))?;
        let decoded = B64
            .decode(&payload)
            .map_err(|e| bad(format!("{at}.payload must be base64: {e}")))?;
        let (zstd, encrypted) = (
            self.payload_zstd.unwrap_or(false),
            self.encrypted.unwrap_or(false),
        );
        // Delivered as the message's JSON body when it is JSON: then held to push's
        // rules, or a consumer would decode a value push refuses (`1e400`, a lone
        // surrogate, a duplicate key: which of the two does a reader keep?).
        if !zstd
            && !encrypted
            && let Err(e) = crate::portable::check_if_json(&decoded)
        {
            return Err(bad(format!(
                "{at}.payload decodes to JSON that is not portable: {e}"
            )));
        }
        let payload_len = decoded.len();
        let delay_ms = self
            .delay_ms
            .ok_or_else(|| bad(format!("{at}.delayMs is required")))?;
        Ok(set(TimerSpec {
            queue,
            timer_key,
            payload,
            payload_len,
            delay_ms,
            txn: self.txn,
            partition,
            zstd,
            encrypted,
        }))
    }
}

/// One timer result as answered, fields in name order.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TimerResultWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    deliver_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<&'a str>,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    op_index: Option<usize>,
    queue: &'a str,
    status: &'static str,
    timer_key: &'a str,
    txn: Option<&'a str>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    ty: Option<&'static str>,
}

impl TimerResultWire<'_> {
    /// The result at slot `index` of a standalone call.
    pub fn at(self, index: usize) -> Self {
        TimerResultWire {
            index: Some(index),
            ..self
        }
    }

    /// The result of `timers[op_index]` at slot `index` of a transaction.
    pub fn in_transaction(self, index: usize, op_index: usize) -> Self {
        TimerResultWire {
            index: Some(index),
            op_index: Some(op_index),
            ty: Some("timer"),
            ..self
        }
    }
}

/// Renders one timer result.
pub fn result(r: &TimerResult) -> TimerResultWire<'_> {
    TimerResultWire {
        deliver_at: r.record.as_ref().map(|t| format_iso(t.deliver_at)),
        index: None,
        message_id: r.record.as_ref().map(|t| t.message_id.as_str()),
        ok: r.status.ok(),
        op_index: None,
        queue: &r.queue,
        status: r.status.as_str(),
        timer_key: &r.timer_key,
        txn: match &r.record {
            Some(t) => Some(&t.txn),
            None => r.txn.as_deref(),
        },
        ty: None,
    }
}

/// `{"results": [...]}` of a standalone call.
#[derive(Serialize)]
pub struct TimersAnswer<'a> {
    /// One per operation, in order.
    pub results: Vec<TimerResultWire<'a>>,
}

/// The peek answer for `(queue, key)`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PeekWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    attempts: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    deliver_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    encrypted: Option<bool>,
    found: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    message_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload_zstd: Option<bool>,
    queue: &'a str,
    timer_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    txn: Option<&'a str>,
}

/// Renders a peek of `(queue, key)`.
pub fn peek<'a>(queue: &'a str, key: &'a str, rec: Option<&'a TimerRecord>) -> PeekWire<'a> {
    PeekWire {
        attempts: rec.map(|r| r.attempts),
        deliver_at: rec.map(|r| format_iso(r.deliver_at)),
        encrypted: rec.map(|r| r.encrypted),
        found: rec.is_some(),
        message_id: rec.map(|r| r.message_id.as_str()),
        partition: rec.map(|r| r.partition.as_str()),
        payload: rec.map(|r| r.payload.as_str()),
        payload_zstd: rec.map(|r| r.zstd),
        queue,
        timer_key: key,
        txn: rec.map(|r| r.txn.as_str()),
    }
}

/// A row of a page of pending timers.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RowWire<'a> {
    attempts: u32,
    deliver_at: String,
    message_id: &'a str,
    partition: &'a str,
    timer_key: &'a str,
    txn: &'a str,
}

/// A page of a queue's pending timers.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageWire<'a> {
    next_after: Option<&'a str>,
    rows: Vec<RowWire<'a>>,
    truncated: bool,
}

/// Renders a page.
pub fn page(p: &TimerPage) -> PageWire<'_> {
    PageWire {
        next_after: p.next_after.as_deref(),
        rows: p
            .rows
            .iter()
            .map(|(key, r)| RowWire {
                attempts: r.attempts,
                deliver_at: format_iso(r.deliver_at),
                message_id: &r.message_id,
                partition: &r.partition,
                timer_key: key,
                txn: &r.txn,
            })
            .collect(),
        truncated: p.truncated,
    }
}

/// A queue of `GET /api/v1/timers`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueueWire<'a> {
    next_deliver_at: String,
    pending: u64,
    queue: &'a str,
}

/// `GET /api/v1/timers`: the tenant's queues with pending timers.
#[derive(Serialize)]
pub struct QueuesWire<'a> {
    queues: Vec<QueueWire<'a>>,
}

/// Renders the queue listing.
pub fn queues(qs: &[TimerQueue]) -> QueuesWire<'_> {
    QueuesWire {
        queues: qs
            .iter()
            .map(|q| QueueWire {
                next_deliver_at: format_iso(q.next_deliver_at),
                pending: q.pending,
                queue: &q.queue,
            })
            .collect(),
    }
}
