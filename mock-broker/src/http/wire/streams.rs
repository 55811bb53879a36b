//! The JSON shapes of the stream runner's routes (see `http/streams.rs`), as the
//! official clients' `queen-protocol` 1.5.0 spells them: snake_case at the top level,
//! camelCase inside a cycle's `ack` and `push_items` (`leaseId`, `transactionId`).
//!
//! Requests are parsed with serde into the engine's commands; a field of the wrong
//! type, a missing required field or a value outside its range is a 400 naming the
//! field, before anything is written. Unknown keys are ignored and `null` reads as
//! absent (`wire.md` section 1).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::clock::format_iso;
use crate::engine::ack::parse_status;
use crate::engine::push::NewMessage;
use crate::engine::queues::{DEFAULT_PARTITION, check_name};
use crate::engine::streams::{
    self as rules, Claim, ClaimedPartition, Cycle, CycleAck, CycleAckResult, PartitionsPage,
    PartitionsQuery, Register, StateOp, StateQuery, StateRow,
};
use crate::http::error::ApiError;

fn bad(m: impl Into<String>) -> ApiError {
    ApiError::bad_request(m)
}

/// A string field that must be present and not empty.
fn required(field: &str, v: Option<String>) -> Result<String, ApiError> {
    match v {
        Some(s) if !s.is_empty() => Ok(s),
        _ => Err(bad(format!("{field} is required"))),
    }
}

fn state_key(at: &str, key: Option<String>) -> Result<String, ApiError> {
    let key = required(at, key)?;
    if key.len() > rules::MAX_STATE_KEY_BYTES {
        return Err(bad(format!(
            "{at} is {} bytes; the limit is {}",
            key.len(),
            rules::MAX_STATE_KEY_BYTES
        )));
    }
    Ok(key)
}

// ----------------------------------------------------------------- register

/// The body of `POST /streams/v1/queries`.
#[derive(Debug, Deserialize)]
pub struct RegisterBody {
    name: Option<String>,
    source_queue: Option<String>,
    sink_queue: Option<String>,
    config_hash: Option<String>,
    reset: Option<bool>,
}

impl RegisterBody {
    /// Checks the fields and builds the command.
    pub fn into_command(self) -> Result<Register, ApiError> {
        let name = required("name", self.name)?;
        check_name("name", &name)?;
        let source_queue = required("source_queue", self.source_queue)?;
        check_name("source_queue", &source_queue)?;
        // `""` is no sink, as on the public broker (`NULLIF(sink_queue, '')`).
        let sink_queue = self.sink_queue.filter(|s| !s.is_empty());
        if let Some(s) = &sink_queue {
            check_name("sink_queue", s)?;
        }
        let config_hash = required("config_hash", self.config_hash)?;
        if config_hash.len() > rules::MAX_CONFIG_HASH_BYTES {
            return Err(bad(format!(
                "config_hash is {} bytes; the limit is {}",
                config_hash.len(),
                rules::MAX_CONFIG_HASH_BYTES
            )));
        }
        Ok(Register {
            name,
            source_queue,
            sink_queue,
            config_hash,
            reset: self.reset.unwrap_or(false),
        })
    }
}

/// The answer to a registration (200), or to a refused one (409, with `error` and
/// `code` beside the query's id and name).
#[derive(Debug, Serialize)]
pub struct RegisterAnswer {
    /// Registered.
    pub success: bool,
    /// The query id.
    pub query_id: String,
    /// The name.
    pub name: String,
    /// The chain on record (success only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    /// The name was new.
    pub fresh: bool,
    /// The old state was wiped.
    pub reset: bool,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The refusal's code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<&'static str>,
}

// -------------------------------------------------------------------- cycle

/// One state op as sent.
#[derive(Debug, Deserialize)]
struct StateOpBody {
    #[serde(rename = "type")]
    kind: Option<StateOpKind>,
    key: Option<String>,
    #[serde(default, deserialize_with = "present")]
    value: Option<Box<RawValue>>,
}

/// The state op types.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
enum StateOpKind {
    Upsert,
    Delete,
}

/// Tells an absent `value` (refused) from `"value": null` (a JSON null value).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// One emitted message as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushItemBody {
    queue: Option<String>,
    partition: Option<String>,
    #[serde(default, deserialize_with = "present")]
    payload: Option<Box<RawValue>>,
    #[serde(default, deserialize_with = "present")]
    data: Option<Box<RawValue>>,
    message_id: Option<String>,
    transaction_id: Option<String>,
    trace_id: Option<String>,
}

/// The cycle's ack as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AckBody {
    transaction_id: Option<String>,
    lease_id: Option<String>,
    status: Option<String>,
    count: Option<i64>,
    error: Option<String>,
}

/// The body of `POST /streams/v1/cycle`.
#[derive(Debug, Deserialize)]
pub struct CycleBody {
    query_id: Option<String>,
    partition_id: Option<String>,
    consumer_group: Option<String>,
    state_ops: Option<Vec<StateOpBody>>,
    push_items: Option<Vec<PushItemBody>>,
    ack: Option<AckBody>,
    release_lease: Option<bool>,
}

impl CycleBody {
    /// Checks the fields and builds the command; `producer_sub` is stamped on every
    /// emitted message (from the caller's token).
    pub fn into_command(self, producer_sub: Option<&str>) -> Result<Cycle, ApiError> {
        let query_id = required("query_id", self.query_id)?;
        let partition_id = required("partition_id", self.partition_id)?;
        // No group: the claim's default (the engine names it from the query).
        let group = self.consumer_group.filter(|g| !g.is_empty());
        let mut state_ops = Vec::new();
        for (i, op) in self.state_ops.unwrap_or_default().into_iter().enumerate() {
            let at = |f: &str| format!("state_ops[{i}].{f}");
            let kind = op
                .kind
                .ok_or_else(|| bad(format!("{} is required", at("type"))))?;
            let key = state_key(&at("key"), op.key)?;
            state_ops.push(match kind {
                StateOpKind::Upsert => {
                    let value = op
                        .value
                        .ok_or_else(|| bad(format!("{} is required", at("value"))))?;
                    if value.get().len() > rules::MAX_STATE_VALUE_BYTES {
                        return Err(ApiError::new(
                            axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                            "payload_too_large",
                            format!(
                                "{} is {} bytes; the limit is {}",
                                at("value"),
                                value.get().len(),
                                rules::MAX_STATE_VALUE_BYTES
                            ),
                        ));
                    }
                    StateOp::Upsert { key, value }
                }
                StateOpKind::Delete => StateOp::Delete { key },
            });
        }
        let mut pushes = Vec::new();
        for (i, it) in self.push_items.unwrap_or_default().into_iter().enumerate() {
            // An item without a queue is dropped, not refused: the official clients'
            // protocol crate pins that the public broker skips it and the cycle still
            // commits (`a_sink_push_with_no_queue_is_dropped_rather_than_rejected`).
            let Some(queue) = it.queue.filter(|q| !q.is_empty()) else {
                continue;
            };
            if let Some(id) = &it.message_id
                && uuid::Uuid::parse_str(id).is_err()
            {
                return Err(bad(format!("push_items[{i}].messageId must be a UUID")));
            }
            let payload = match it.payload.or(it.data) {
                Some(p) => p,
                None => RawValue::from_string("{}".into()).expect("{} is JSON"),
            };
            pushes.push(NewMessage {
                queue,
                // Here `""` is the default partition too, as on the public broker.
                partition: it
                    .partition
                    .filter(|p| !p.is_empty())
                    .unwrap_or_else(|| DEFAULT_PARTITION.into()),
                payload,
                transaction_id: it.transaction_id.filter(|t| !t.is_empty()),
                trace_id: it.trace_id,
                producer_sub: producer_sub.map(str::to_string),
                message_id: it.message_id,
            });
        }
        for item in &pushes {
            item.validate()?;
        }
        let ack = match self.ack {
            None => None,
            Some(a) => {
                let lease_id = required("ack.leaseId", a.lease_id)?;
                let count = a.count.unwrap_or(1);
                let count = u64::try_from(count).map_err(|_| bad("ack.count must be 0 or more"))?;
                let transaction_id = a.transaction_id.filter(|t| !t.is_empty());
                if transaction_id.is_none() && count != 0 {
                    return Err(bad(
                        "ack.transactionId is required unless ack.count is 0 (the empty batch of a claim)",
                    ));
                }
                Some(CycleAck {
                    transaction_id,
                    lease_id,
                    status: parse_status(a.status.as_deref()),
                    count,
                    error: a.error,
                })
            }
        };
        Ok(Cycle {
            query_id,
            partition_id,
            group,
            state_ops,
            pushes,
            ack,
            // The public broker's default: an omitted key releases the lease.
            release_lease: self.release_lease.unwrap_or(true),
        })
    }
}

/// One emitted message's result.
#[derive(Debug, Serialize)]
pub struct PushResult {
    /// Its place among the pushed items.
    pub index: usize,
    /// The stored message's id.
    pub message_id: String,
    /// Its dedup key.
    pub transaction_id: String,
    /// Its queue.
    #[serde(rename = "queueName")]
    pub queue_name: String,
    /// Its partition.
    pub partition: String,
    /// `queued` or `duplicate`.
    pub status: &'static str,
    /// Its offset.
    pub offset: u64,
}

/// The ack's result.
#[derive(Debug, Serialize)]
pub struct AckResultBody {
    /// Always true in a committed cycle.
    pub success: bool,
    /// The messages covered.
    pub count: u64,
    /// The lease was released.
    pub lease_released: bool,
    /// A nack dead-lettered the message.
    pub dlq: bool,
}

impl From<CycleAckResult> for AckResultBody {
    fn from(r: CycleAckResult) -> Self {
        AckResultBody {
            success: true,
            count: r.count,
            lease_released: r.lease_released,
            dlq: r.dlq,
        }
    }
}

/// The answer to a cycle: HTTP 200 whether it committed or was refused (`success`).
#[derive(Debug, Serialize)]
pub struct CycleAnswer {
    /// Committed.
    pub success: bool,
    /// As sent.
    pub query_id: String,
    /// As sent.
    pub partition_id: String,
    /// The source queue (`null` when the partition is unknown).
    #[serde(rename = "queueName")]
    pub queue_name: Option<String>,
    /// State ops applied.
    pub state_ops_applied: usize,
    /// One per emitted message.
    pub push_results: Vec<PushResult>,
    /// `null` without an ack (and on a refusal).
    pub ack_result: Option<AckResultBody>,
    /// Why it was refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

// -------------------------------------------------------------------- claim

/// The body of `POST /streams/v1/claim`.
#[derive(Debug, Deserialize)]
pub struct ClaimBody {
    query_id: Option<String>,
    partition_ids: Option<Vec<String>>,
    consumer_group: Option<String>,
    lease_seconds: Option<i64>,
}

impl ClaimBody {
    /// Checks the fields and builds the command.
    pub fn into_command(self) -> Result<Claim, ApiError> {
        let query_id = required("query_id", self.query_id)?;
        let partition_ids = self
            .partition_ids
            .ok_or_else(|| bad("partition_ids is required"))?;
        if partition_ids.len() > rules::MAX_CLAIM_PARTITIONS {
            return Err(bad(format!(
                "{} partition_ids; the limit is {}",
                partition_ids.len(),
                rules::MAX_CLAIM_PARTITIONS
            )));
        }
        let lease_seconds = self
            .lease_seconds
            .unwrap_or(rules::DEFAULT_CLAIM_LEASE_SECONDS);
        if !(1..=rules::MAX_CLAIM_LEASE_SECONDS).contains(&lease_seconds) {
            return Err(bad(format!(
                "lease_seconds must be from 1 to {}",
                rules::MAX_CLAIM_LEASE_SECONDS
            )));
        }
        Ok(Claim {
            query_id,
            partition_ids,
            group: self.consumer_group.filter(|g| !g.is_empty()),
            lease_seconds,
        })
    }
}

/// One partition of a claim's answer.
#[derive(Debug, Serialize)]
pub struct ClaimedPartitionBody {
    partition_id: String,
    partition: String,
    status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_expires_at: Option<String>,
}

impl From<ClaimedPartition> for ClaimedPartitionBody {
    fn from(p: ClaimedPartition) -> Self {
        ClaimedPartitionBody {
            partition_id: p.partition_id,
            partition: p.partition,
            status: p.status.as_str(),
            lease_expires_at: p.lease_expires_at.map(format_iso),
        }
    }
}

/// The answer to a claim.
#[derive(Debug, Serialize)]
pub struct ClaimAnswer {
    /// Judged (per partition).
    pub success: bool,
    /// The lease of every claimed partition ("" when none was).
    pub lease_id: String,
    /// Its length.
    pub lease_seconds: i64,
    /// The broker's clock, epoch ms.
    pub now_ms: i64,
    /// One per asked partition, in order.
    pub partitions: Vec<ClaimedPartitionBody>,
}

// -------------------------------------------------------------------- state

/// The body of `POST /streams/v1/state/get`.
#[derive(Debug, Deserialize)]
pub struct StateGetBody {
    query_id: Option<String>,
    partition_id: Option<String>,
    keys: Option<Vec<String>>,
    key_prefix: Option<String>,
    ripe_at_or_before: Option<i64>,
}

impl StateGetBody {
    /// Checks the fields and builds the query.
    pub fn into_query(self) -> Result<StateQuery, ApiError> {
        let keys = self.keys.unwrap_or_default();
        if keys.len() > rules::MAX_STATE_GET_KEYS {
            return Err(bad(format!(
                "{} keys; the limit is {}",
                keys.len(),
                rules::MAX_STATE_GET_KEYS
            )));
        }
        Ok(StateQuery {
            query_id: required("query_id", self.query_id)?,
            partition_id: required("partition_id", self.partition_id)?,
            keys,
            key_prefix: self.key_prefix.filter(|p| !p.is_empty()),
            ripe_at_or_before: self.ripe_at_or_before,
        })
    }
}

/// One state row as answered.
#[derive(Debug, Serialize)]
pub struct StateRowBody {
    key: String,
    value: Box<RawValue>,
    updated_at: String,
}

impl From<StateRow> for StateRowBody {
    fn from(r: StateRow) -> Self {
        StateRowBody {
            key: r.key,
            value: r.value,
            updated_at: format_iso(r.updated_at),
        }
    }
}

/// The answer to a state read.
#[derive(Debug, Serialize)]
pub struct StateGetAnswer {
    /// Read.
    pub success: bool,
    /// In key order.
    pub rows: Vec<StateRowBody>,
}

/// The body of `POST /streams/v1/state/partitions`.
#[derive(Debug, Deserialize)]
pub struct PartitionsBody {
    query_id: Option<String>,
    untouched_for_ms: Option<i64>,
    after: Option<String>,
    limit: Option<u64>,
}

impl PartitionsBody {
    /// Checks the fields and builds the query.
    pub fn into_query(self) -> Result<PartitionsQuery, ApiError> {
        let query_id = required("query_id", self.query_id)?;
        if self.untouched_for_ms.is_some_and(|ms| ms < 0) {
            return Err(bad("untouched_for_ms must be 0 or more"));
        }
        let after = match self.after.filter(|a| !a.is_empty()) {
            None => None,
            Some(a) => Some(a.parse::<u64>().map_err(|_| {
                bad(format!(
                    "after must be a partition id from a previous page's next, not {a:?}"
                ))
            })?),
        };
        let limit = match self.limit {
            None => rules::DEFAULT_PARTITIONS_PAGE,
            Some(n) if (1..=rules::MAX_PARTITIONS_PAGE as u64).contains(&n) => n as usize,
            Some(_) => {
                return Err(bad(format!(
                    "limit must be from 1 to {}",
                    rules::MAX_PARTITIONS_PAGE
                )));
            }
        };
        Ok(PartitionsQuery {
            query_id,
            untouched_for_ms: self.untouched_for_ms.filter(|ms| *ms > 0),
            after,
            limit,
        })
    }
}

/// One partition holding state.
#[derive(Debug, Serialize)]
pub struct StatePartitionBody {
    partition_id: String,
    partition: String,
    queue: String,
    updated_at: String,
}

/// The answer to `state/partitions`.
#[derive(Debug, Serialize)]
pub struct PartitionsAnswer {
    /// Listed.
    pub success: bool,
    /// In partition id order.
    pub partitions: Vec<StatePartitionBody>,
    /// More to read: pass it as `after`; absent at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next: Option<String>,
}

impl From<PartitionsPage> for PartitionsAnswer {
    fn from(p: PartitionsPage) -> Self {
        PartitionsAnswer {
            success: true,
            partitions: p
                .partitions
                .into_iter()
                .map(|s| StatePartitionBody {
                    partition_id: s.partition_id.to_string(),
                    partition: s.partition,
                    queue: s.queue,
                    updated_at: format_iso(s.updated_at),
                })
                .collect(),
            next: p.next.map(|n| n.to_string()),
        }
    }
}

/// The answer when the query id is unknown to the caller's tenant: a 200 verdict,
/// `success: false`, not a 404 (the official runner reads a 404 on `claim` and
/// `state/partitions` as "this broker has no claims" and stops claiming for good).
#[derive(Debug, Serialize)]
pub struct UnknownQuery {
    /// Always false.
    pub success: bool,
    /// For a person.
    pub error: String,
    /// `unknown_query`.
    pub code: &'static str,
}

impl UnknownQuery {
    /// The answer for `query_id`.
    pub fn new(query_id: &str) -> Self {
        UnknownQuery {
            success: false,
            error: format!("unknown query_id {query_id:?}: register the query first"),
            code: "unknown_query",
        }
    }
}
