//! HTTP for reading and handling messages by hand: the listing (`GET /api/v1/messages`),
//! a dead letter's replay and deletion (`POST .../retry`, `DELETE` on
//! `/api/v1/messages/{partitionId}/{transactionId}`), reads by offset
//! (`POST /api/v1/fetch`) and partition discovery (`POST /api/v1/partitions/changed`).
//!
//! Shapes follow the official client (`queen-mq` 2.7.0: `admin.rs`, `reads.rs` and their
//! live tests) and `queen-protocol` 1.5.0. Where `wire.md` says nothing of these routes,
//! the client's tests are the authority: the delete and the retry act on dead letters
//! only, and a live message is "not found" (404) for both.

use axum::Json as AxumJson;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use super::wire::browse::{
    ChangedBody, FetchBody, HandledAnswer, MessageListAnswer, changed_answer, fetch_answer,
    parse_status,
};
use super::{AppState, Caller};
use crate::clock::parse_iso;
use crate::engine::answers::Charged;
use crate::engine::browse::{Fetched, MessageFilter};

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/messages", get(list))
        .route(
            "/api/v1/messages/{partition_id}/{transaction_id}/retry",
            post(retry),
        )
        .route("/api/v1/fetch", post(fetch))
        .route("/api/v1/partitions/changed", post(changed))
}

fn not_found(pid: &str, txn: &str) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no dead letter of message {txn:?} in partition {pid:?}: only dead letters can \
             be deleted or retried by hand (a live message is acked or left to retention)"
        ),
    )
}

/// The partition id of a path: an id this broker did not mint names no partition, so
/// the message is "not found", as a foreign one is.
fn partition_id(pid: &str) -> Option<u64> {
    pid.parse().ok()
}

/// Deletes a message's dead-letter rows; 404 when it has none. Routed in
/// [`super::router`] beside the message detail (`GET`, `http/resources.rs`), which
/// shares its path.
pub async fn delete_message(
    s: Caller,
    PathParams((pid, txn)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let Some(id) = partition_id(&pid) else {
        return Err(not_found(&pid, &txn));
    };
    let Some(r) = s.engine.delete_dead_letter(s.tenant(), id, &txn).await? else {
        return Err(not_found(&pid, &txn));
    };
    Ok(AxumJson(HandledAnswer {
        success: true,
        partition_id: &pid,
        transaction_id: &txn,
        queue: &r.queue,
        partition: &r.partition,
        dead_letters_removed: r.rows,
        message_id: None,
        offset: None,
        message: "dead letter deleted",
    })
    .into_response())
}

/// Replays a dead-lettered message: pushed again to its partition, its dead-letter
/// rows dropped; 404 when it has none.
pub async fn retry(
    s: Caller,
    PathParams((pid, txn)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let Some(id) = partition_id(&pid) else {
        return Err(not_found(&pid, &txn));
    };
    let Some(r) = s.engine.retry_dead_letter(s.tenant(), id, &txn).await? else {
        return Err(not_found(&pid, &txn));
    };
    Ok(AxumJson(HandledAnswer {
        success: true,
        partition_id: &pid,
        transaction_id: &txn,
        queue: &r.removed.queue,
        partition: &r.removed.partition,
        dead_letters_removed: r.removed.rows,
        message_id: Some(&r.appended.message_id),
        offset: Some(r.appended.offset),
        message: "dead letter pushed again",
    })
    .into_response())
}

/// Largest page of the listing.
const MAX_LIST_LIMIT: i64 = 1000;

/// Most matches the listing skips.
const MAX_LIST_OFFSET: i64 = 1_000_000;

fn time_param(params: &Params, name: &str) -> Result<Option<i64>, ApiError> {
    params
        .get(name)
        .map(|v| {
            parse_iso(v).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "query parameter {name} must be an ISO-8601 time, got {v:?}"
                ))
            })
        })
        .transpose()
}

/// `GET /api/v1/messages?queue=&partition=&ns=&task=&status=&from=&to=&limit=&offset=`:
/// messages newest first with their status. Without `from`/`to` every stored message
/// matches **(ours)**: the Queen server's default of the last hour is not kept.
pub async fn list(s: Caller, params: Params) -> Result<Response, ApiError> {
    let status = match params.get("status") {
        None => None,
        Some(v) => Some(parse_status(v).ok_or_else(|| {
            ApiError::bad_request(format!(
                "status must be pending, processing, completed or dead_letter, got {v:?}"
            ))
        })?),
    };
    let filter = MessageFilter {
        queue: params.get("queue").map(str::to_string),
        partition: params.get("partition").map(str::to_string),
        namespace: params
            .get("ns")
            .or_else(|| params.get("namespace"))
            .map(str::to_string),
        task: params.get("task").map(str::to_string),
        status,
        from: time_param(&params, "from")?,
        to: time_param(&params, "to")?,
        limit: params.int("limit", 200, 1, MAX_LIST_LIMIT)? as usize,
        offset: params.int("offset", 0, 0, MAX_LIST_OFFSET)? as usize,
    };
    let (limit, offset) = (filter.limit, filter.offset);
    let Charged { value: page, held } = s.engine.list_messages(s.tenant(), filter).await?;
    let messages: Vec<_> = page.messages.iter().map(Into::into).collect();
    let answer = MessageListAnswer {
        total: messages.len(),
        messages,
        limit,
        offset,
        mode: page.mode.into(),
    };
    Ok(super::budgeted::json_holding(&answer, held))
}

/// `POST /api/v1/fetch`: records by offset, no lease, no cursor.
pub async fn fetch(s: Caller, Json(body): Json<FetchBody>) -> Result<Response, ApiError> {
    let call = body.into_fetch()?;
    let out = s.engine.fetch(s.tenant(), call).await?;
    // The records are rendered, then dropped; the answer keeps its room in the
    // budget until its body has been sent.
    let Fetched { entries, held } = out;
    let answer = fetch_answer(&entries);
    Ok(super::budgeted::json_holding(&answer, held))
}

/// `POST /api/v1/partitions/changed`: partitions written since a time, in creation
/// order, a page at a time.
pub async fn changed(s: Caller, Json(body): Json<ChangedBody>) -> Result<Response, ApiError> {
    let queries = body.into_queries()?;
    let out = s.engine.changed(s.tenant(), queries).await?;
    Ok(AxumJson(changed_answer(&out)).into_response())
}
