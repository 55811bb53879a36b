//! Consumer groups (seek, delete) and the dead-letter listing.

use axum::Json as AxumJson;
use serde::Deserialize;
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

pub async fn dlq(s: Caller, params: Params) -> Result<AxumJson<Value>, ApiError> {
    let q = DlqQuery {
        queue: params.get("queue").map(str::to_string),
        group: params.get("consumerGroup").map(str::to_string),
        limit: params.int("limit", 100, 1, 1_000)? as usize,
        offset: params.int("offset", 0, 0, i64::MAX)? as usize,
    };
    let (limit, offset) = (q.limit, q.offset);
    let page = s.engine.dlq(s.tenant(), q).await?;
    let messages: Vec<Value> = page
        .records
        .into_iter()
        .map(|r| {
            json!({
                "id": r.message.id,
                "transactionId": r.message.txn,
                "partitionId": r.partition_id.to_string(),
                "queue": r.queue,
                "partition": r.partition,
                "consumerGroup": r.group,
                "data": r.message.data,
                "errorMessage": r.error,
                "retryCount": r.retry_count,
                "producerSub": r.message.producer_sub,
                "createdAt": format_iso(r.message.created_at),
                "failedAt": format_iso(r.failed_at),
            })
        })
        .collect();
    Ok(AxumJson(json!({
        "messages": messages,
        "pagination": { "limit": limit, "offset": offset },
        "total": page.total,
    })))
}
