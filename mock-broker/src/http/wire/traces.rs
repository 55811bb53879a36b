//! The JSON shapes of the trace routes (see `http/traces.rs`).
//!
//! A trace is written in camelCase (`queen-protocol`'s `TraceRequest`) and read back
//! in snake_case (`transaction_id`, `event_type`, `trace_names`): the official
//! client's live test `a_recorded_trace_is_reachable_by_its_name` reads these keys,
//! and the public Queen server answers so.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

use crate::engine::QUEUE_MODE;
use crate::engine::traces::NewTrace;
use crate::error::EngineError;

/// Longest trace name, in bytes.
pub const MAX_NAME_BYTES: usize = 256;
/// Most names on one trace.
pub const MAX_NAMES: usize = 64;
/// Longest event type, in bytes.
pub const MAX_EVENT_TYPE_BYTES: usize = 128;
/// Largest `data`, in bytes of JSON.
pub const MAX_DATA_BYTES: usize = 1 << 20;

/// `traceNames`: one name or a list (`null` or absent: none).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Names {
    /// One name.
    One(String),
    /// Several.
    Many(Vec<String>),
}

/// A field whose `null` is a value, kept as raw JSON: present → `Some`.
fn raw_present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// `POST /api/v1/traces`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TraceBody {
    transaction_id: Option<String>,
    partition_id: Option<String>,
    consumer_group: Option<String>,
    trace_names: Option<Names>,
    event_type: Option<String>,
    #[serde(default, deserialize_with = "raw_present")]
    data: Option<Box<RawValue>>,
}

/// What a trace body names, checked: the message (`None` when the partition id is
/// not one this broker mints, which no message has) and the event.
pub struct ParsedTrace {
    /// The event, once the partition id reads as one of ours.
    pub trace: Option<NewTrace>,
}

impl TraceBody {
    /// Checks the body's rules and builds the event (`worker`: the caller's subject).
    pub fn parse(self, worker: Option<String>) -> Result<ParsedTrace, EngineError> {
        let txn = self
            .transaction_id
            .filter(|t| !t.is_empty())
            .ok_or_else(|| EngineError::bad("transactionId and partitionId are required"))?;
        let pid = self
            .partition_id
            .filter(|p| !p.is_empty())
            .ok_or_else(|| EngineError::bad("transactionId and partitionId are required"))?;
        let data = self
            .data
            .ok_or_else(|| EngineError::bad("data is required"))?;
        if data.get().len() > MAX_DATA_BYTES {
            return Err(EngineError::PayloadTooLarge(format!(
                "a trace's data is at most {MAX_DATA_BYTES} bytes of JSON"
            )));
        }
        if txn.len() > 65_535 {
            return Err(EngineError::bad("transactionId is at most 65535 bytes"));
        }
        let event_type = self.event_type.unwrap_or_else(|| "info".into());
        if event_type.is_empty() || event_type.len() > MAX_EVENT_TYPE_BYTES {
            return Err(EngineError::bad(format!(
                "eventType is 1 to {MAX_EVENT_TYPE_BYTES} bytes"
            )));
        }
        let group = self
            .consumer_group
            .filter(|g| !g.is_empty())
            .unwrap_or_else(|| QUEUE_MODE.into());
        crate::engine::queues::check_name("consumerGroup", &group)?;
        let names = match self.trace_names {
            None => Vec::new(),
            Some(Names::One(n)) => vec![n],
            Some(Names::Many(v)) => v,
        };
        if names.len() > MAX_NAMES {
            return Err(EngineError::bad(format!(
                "a trace carries at most {MAX_NAMES} names"
            )));
        }
        if let Some(n) = names
            .iter()
            .find(|n| n.is_empty() || n.len() > MAX_NAME_BYTES)
        {
            return Err(EngineError::bad(format!(
                "a trace name is 1 to {MAX_NAME_BYTES} bytes, got {} bytes",
                n.len()
            )));
        }
        // Partition ids are minted by this broker as numbers; any other string names
        // no partition (the trace's message is then unknown, a 404, not a 400).
        let trace = pid.parse::<u64>().ok().map(|partition_id| NewTrace {
            partition_id,
            transaction_id: txn,
            consumer_group: group,
            event_type,
            data,
            names,
            worker,
        });
        Ok(ParsedTrace { trace })
    }
}

/// `{success, traceId}`, the answer to a recorded trace.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded<'a> {
    /// Always true: a refusal is an error answer.
    pub success: bool,
    /// The trace's id.
    pub trace_id: &'a str,
}

/// A trace of one message.
#[derive(Serialize)]
pub struct MessageTrace<'a> {
    /// Its id.
    pub id: &'a str,
    /// Its type.
    pub event_type: &'a str,
    /// Its payload.
    pub data: &'a RawValue,
    /// The group that recorded it.
    pub consumer_group: &'a str,
    /// Who recorded it (the token's subject), if known.
    pub worker_id: Option<&'a str>,
    /// When.
    pub created_at: String,
    /// Its names.
    pub trace_names: &'a [String],
}

/// `GET /api/v1/traces/{partitionId}/{transactionId}`.
#[derive(Serialize)]
pub struct MessageTraces<'a> {
    /// Oldest first.
    pub traces: Vec<MessageTrace<'a>>,
}

/// `{limit, offset}`.
#[derive(Serialize)]
pub struct Pagination {
    /// Most rows.
    pub limit: usize,
    /// Rows skipped.
    pub offset: usize,
}

/// A name in use.
#[derive(Serialize)]
pub struct NameRow<'a> {
    /// The name.
    pub trace_name: &'a str,
    /// Traces carrying it.
    pub trace_count: u64,
    /// Distinct messages they are about.
    pub message_count: u64,
    /// The newest of them.
    pub last_seen: String,
}

/// `GET /api/v1/traces/names`.
#[derive(Serialize)]
pub struct NameList<'a> {
    /// Most recently seen first.
    pub trace_names: Vec<NameRow<'a>>,
    /// Every name.
    pub total: u64,
    /// The page.
    pub pagination: Pagination,
}

/// A trace found by name.
#[derive(Serialize)]
pub struct NamedTraceRow<'a> {
    /// Its id.
    pub id: &'a str,
    /// The message's `transactionId`.
    pub transaction_id: &'a str,
    /// The message's partition id.
    pub partition_id: String,
    /// Its type.
    pub event_type: &'a str,
    /// Its payload.
    pub data: &'a RawValue,
    /// The group that recorded it.
    pub consumer_group: &'a str,
    /// Who recorded it.
    pub worker_id: Option<&'a str>,
    /// When.
    pub created_at: String,
    /// The message's queue.
    pub queue_name: &'a str,
    /// The message's partition.
    pub partition_name: &'a str,
    /// The message's payload; `null` once the message is gone.
    pub message_payload: Option<&'a RawValue>,
    /// Its names.
    pub trace_names: &'a [String],
}

/// `GET /api/v1/traces/by-name/{name}`.
#[derive(Serialize)]
pub struct ByName<'a> {
    /// Oldest first.
    pub traces: Vec<NamedTraceRow<'a>>,
    /// Every trace carrying the name.
    pub total: u64,
    /// The page.
    pub pagination: Pagination,
}
