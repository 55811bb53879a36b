//! Push and pop.

use std::time::Duration;

use axum::Json as AxumJson;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, Params, PathParams, parse_body};
use crate::clock::{format_iso, parse_iso};
use crate::engine::consumers::StartAt;
use crate::engine::pop::{PopOutcome, PopRequest, Target};
use crate::engine::push::NewMessage;
use crate::engine::queues::DEFAULT_PARTITION;
use crate::engine::{Popped, QUEUE_MODE};

#[derive(Deserialize)]
pub struct PushBody {
    items: Vec<PushItemBody>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PushItemBody {
    queue: Option<String>,
    partition: Option<String>,
    #[serde(default, deserialize_with = "present")]
    payload: Option<Box<RawValue>>,
    transaction_id: Option<String>,
}

/// Tells an absent payload (refused) from `"payload": null` (a JSON null message).
pub(crate) fn present<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

#[derive(Serialize)]
struct PushResultBody {
    index: usize,
    message_id: String,
    transaction_id: String,
    #[serde(rename = "queueName")]
    queue_name: String,
    status: &'static str,
    offset: u64,
}

/// Parses and checks a push body as `POST /api/v1/push` does before anything is
/// written: the JSON rules of [`parse_body`], then each item's fields, names and
/// `transactionId` ([`NewMessage::validate`]). Every refusal is a 4xx. The seam of the
/// `push_body` fuzz target (`mock-broker/fuzz`).
#[doc(hidden)]
pub fn parse_push(bytes: &[u8]) -> Result<Vec<NewMessage>, ApiError> {
    let items = push_items(parse_body(bytes)?, None)?;
    for item in &items {
        item.validate()?;
    }
    Ok(items)
}

fn push_items(body: PushBody, sub: Option<String>) -> Result<Vec<NewMessage>, ApiError> {
    let mut items = Vec::with_capacity(body.items.len());
    for (i, it) in body.items.into_iter().enumerate() {
        let queue = it
            .queue
            .ok_or_else(|| ApiError::bad_request(format!("items[{i}].queue is required")))?;
        let payload = it
            .payload
            .ok_or_else(|| ApiError::bad_request(format!("items[{i}].payload is required")))?;
        items.push(NewMessage {
            queue,
            partition: it.partition.unwrap_or_else(|| DEFAULT_PARTITION.into()),
            payload,
            transaction_id: it.transaction_id,
            // The push route stores no trace id (`wire.md` section 3).
            trace_id: None,
            producer_sub: sub.clone(),
            message_id: None,
        });
    }
    Ok(items)
}

pub async fn push(s: Caller, Json(body): Json<PushBody>) -> Result<Response, ApiError> {
    let items = push_items(body, s.identity.sub.clone())?;
    let appended = s.engine.push(s.tenant(), items).await?;
    let out: Vec<PushResultBody> = appended
        .into_iter()
        .enumerate()
        .map(|(index, (queue, a))| PushResultBody {
            index,
            message_id: a.message_id,
            transaction_id: a.transaction_id,
            queue_name: queue,
            status: if a.duplicate { "duplicate" } else { "queued" },
            offset: a.offset,
        })
        .collect();
    Ok((StatusCode::CREATED, AxumJson(out)).into_response())
}

pub async fn pop_queue(
    s: Caller,
    PathParams(queue): PathParams<String>,
    params: Params,
) -> Result<Response, ApiError> {
    pop(s, Target::Queue(queue), params).await
}

pub async fn pop_partition(
    s: Caller,
    PathParams((queue, partition)): PathParams<(String, String)>,
    params: Params,
) -> Result<Response, ApiError> {
    pop(s, Target::Partition(queue, partition), params).await
}

pub async fn pop_discovery(s: Caller, params: Params) -> Result<Response, ApiError> {
    let target = Target::Discovery {
        namespace: params.get("namespace").map(str::to_string),
        task: params.get("task").map(str::to_string),
    };
    pop(s, target, params).await
}

/// Largest `batch` one pop may ask for.
const MAX_BATCH: i64 = 10_000;

fn parse_pop(target: Target, p: &Params) -> Result<(PopRequest, Option<Duration>), ApiError> {
    let batch = p.int("batch", 200, 1, MAX_BATCH)? as usize;
    let wait = p.bool("wait", false)?;
    let timeout = p.int("timeout", 30_000, 0, 3_600_000)?;
    let group = p.get("consumerGroup").unwrap_or(QUEUE_MODE).to_string();
    // `from_beginning` is what the official clients send for `all` (queen-mq 2.6.0
    // `subscription_mode("from_beginning")`): an alias, the same start.
    let mode = match p.get("subscriptionMode") {
        None | Some("new") => StartAt::New,
        Some("all" | "from_beginning") => StartAt::All,
        Some(m) => {
            return Err(ApiError::bad_request(format!(
                "subscriptionMode must be new, all or from_beginning, got {m:?}"
            )));
        }
    };
    let start = match p.get("subscriptionFrom") {
        None => mode,
        Some("now") => StartAt::New,
        Some(t) => StartAt::Time(parse_iso(t).ok_or_else(|| {
            ApiError::bad_request(format!(
                "subscriptionFrom must be now or an ISO time, got {t:?}"
            ))
        })?),
    };
    let auto_ack = p.bool("autoAck", false)?;
    let lease_seconds = match p.get("leaseSeconds") {
        None => None,
        Some(_) => Some(p.int("leaseSeconds", 0, 1, 31_536_000)?),
    };
    let partitions = p.int("partitions", 1, 1, 1_000)? as usize;
    // Pop autopilot (queen-mq 2.6.0 `utils/autopilot.py`): a client that leaves
    // `batch` or `partitions` unset sends `autopilot=true` and omits them, for the
    // broker to size. This broker sizes such a pop with its defaults (batch 200,
    // partitions 1) and sends no `autopilot` echo, which the client reads as "no
    // advice"; a value that is not a boolean is still refused.
    p.bool("autopilot", false)?;
    let req = PopRequest {
        target,
        batch,
        group,
        start,
        auto_ack,
        lease_seconds,
        partitions,
    };
    Ok((req, wait.then(|| Duration::from_millis(timeout as u64))))
}

async fn pop(s: Caller, target: Target, params: Params) -> Result<Response, ApiError> {
    let (req, wait) = parse_pop(target, &params)?;
    let group = req.group.clone();
    let Popped { outcome: out, held } = s.engine.pop(s.tenant(), req, wait).await?;
    if out.messages.is_empty() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    // The messages' room in the answer budget is held until the body has been sent.
    let answer = render(&out, &group);
    Ok(super::budgeted::json_holding(&answer, held))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PopBody<'a> {
    success: bool,
    queue: &'a str,
    partition: &'a str,
    partition_id: String,
    lease_id: &'a str,
    consumer_group: &'a str,
    messages: Vec<MessageBody<'a>>,
    partitions_claimed: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageBody<'a> {
    id: &'a str,
    transaction_id: &'a str,
    trace_id: Option<&'a str>,
    data: &'a RawValue,
    producer_sub: Option<&'a str>,
    created_at: String,
    partition_id: String,
    partition: &'a str,
    lease_id: &'a str,
    consumer_group: &'a str,
    queue: &'a str,
    offset: u64,
    delivery_attempt: u32,
}

fn render<'a>(out: &'a PopOutcome, group: &'a str) -> PopBody<'a> {
    let first = &out.messages[0];
    PopBody {
        success: true,
        queue: &first.queue,
        partition: &first.partition,
        partition_id: first.partition_id.to_string(),
        lease_id: &out.lease_id,
        consumer_group: group,
        partitions_claimed: out.partitions_claimed,
        messages: out
            .messages
            .iter()
            .map(|d| MessageBody {
                id: &d.message.id,
                transaction_id: &d.message.txn,
                trace_id: d.message.trace.as_deref(),
                data: &d.message.data,
                producer_sub: d.message.producer_sub.as_deref(),
                created_at: format_iso(d.message.created_at),
                partition_id: d.partition_id.to_string(),
                partition: &d.partition,
                lease_id: &out.lease_id,
                consumer_group: group,
                queue: &d.queue,
                offset: d.offset,
                delivery_attempt: d.delivery_attempt,
            })
            .collect(),
    }
}
