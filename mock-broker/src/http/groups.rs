//! Consumer groups (seek, delete) and the dead-letter listing.

use axum::Json as AxumJson;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use crate::clock::{format_iso, parse_iso};
use crate::engine::dlq::DlqQuery;
use crate::engine::groups::SeekTo;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeekBody {
    to_end: Option<bool>,
    timestamp: Option<String>,
}

fn seek_target(b: &SeekBody) -> Result<SeekTo, ApiError> {
    match (b.to_end, b.timestamp.as_deref()) {
        (Some(true), None) => Ok(SeekTo::End),
        (None | Some(false), Some(t)) => parse_iso(t).map(SeekTo::Time).ok_or_else(|| {
            ApiError::bad_request(format!("timestamp must be an ISO-8601 time, got {t:?}"))
        }),
        _ => Err(ApiError::bad_request(
            "send exactly one of {\"toEnd\": true} or {\"timestamp\": \"<ISO time>\"}",
        )),
    }
}

async fn seek(
    s: Caller,
    group: String,
    queue: String,
    partition: Option<String>,
    body: SeekBody,
) -> Result<AxumJson<Value>, ApiError> {
    let to = seek_target(&body)?;
    let n = s
        .engine
        .seek(s.tenant(), &group, &queue, partition.as_deref(), to)
        .await?;
    Ok(AxumJson(json!({
        "success": true,
        "consumerGroup": group,
        "queueName": queue,
        "partitionsUpdated": n,
    })))
}

pub async fn seek_queue(
    s: Caller,
    PathParams((group, queue)): PathParams<(String, String)>,
    Json(body): Json<SeekBody>,
) -> Result<AxumJson<Value>, ApiError> {
    seek(s, group, queue, None, body).await
}

pub async fn seek_partition(
    s: Caller,
    PathParams((group, queue, partition)): PathParams<(String, String, String)>,
    Json(body): Json<SeekBody>,
) -> Result<AxumJson<Value>, ApiError> {
    seek(s, group, queue, Some(partition), body).await
}

pub async fn delete_group(
    s: Caller,
    PathParams(group): PathParams<String>,
    params: Params,
) -> Result<AxumJson<Value>, ApiError> {
    let metadata = params.bool("deleteMetadata", true)?;
    let n = s.engine.delete_group(s.tenant(), &group, metadata).await?;
    Ok(AxumJson(json!({
        "success": true,
        "consumerGroup": group,
        "partitionsDeleted": n,
    })))
}

/// One dead letter as listed. `data` is serialised as the stored raw text: building a
/// `serde_json::Value` from it (as `json!` does) re-parses it under serde_json's depth
/// limit, and a payload nested deeper than that (stored before pushes checked depth, or
/// by a timer) made the listing panic.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeadLetterBody<'a> {
    id: &'a str,
    transaction_id: &'a str,
    partition_id: String,
    queue: &'a str,
    partition: &'a str,
    consumer_group: &'a str,
    data: &'a RawValue,
    error_message: Option<&'a str>,
    retry_count: u32,
    producer_sub: Option<&'a str>,
    created_at: String,
    failed_at: String,
}

#[derive(Serialize)]
struct DlqBody<'a> {
    messages: Vec<DeadLetterBody<'a>>,
    pagination: Value,
    total: usize,
}

pub async fn dlq(s: Caller, params: Params) -> Result<Response, ApiError> {
    let q = DlqQuery {
        queue: params.get("queue").map(str::to_string),
        group: params.get("consumerGroup").map(str::to_string),
        limit: params.int("limit", 100, 1, 1_000)? as usize,
        offset: params.int("offset", 0, 0, i64::MAX)? as usize,
    };
    let (limit, offset) = (q.limit, q.offset);
    let page = s.engine.dlq(s.tenant(), q).await?;
    let messages = page
        .records
        .iter()
        .map(|r| DeadLetterBody {
            id: &r.message.id,
            transaction_id: &r.message.txn,
            partition_id: r.partition_id.to_string(),
            queue: &r.queue,
            partition: &r.partition,
            consumer_group: &r.group,
            data: &r.message.data,
            error_message: r.error.as_deref(),
            retry_count: r.retry_count,
            producer_sub: r.message.producer_sub.as_deref(),
            created_at: format_iso(r.message.created_at),
            failed_at: format_iso(r.failed_at),
        })
        .collect();
    Ok(AxumJson(DlqBody {
        messages,
        pagination: json!({ "limit": limit, "offset": offset }),
        total: page.total,
    })
    .into_response())
}
