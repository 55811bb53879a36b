//! HTTP for message traces (`/api/v1/traces*`): record an event against a message,
//! list the names in use, read the traces of a name or of a message. The rules are in
//! `engine/traces.rs`, the shapes in `http/wire/traces.rs`.

use axum::Json as AxumJson;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::budgeted::json_holding;
use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use super::resources::not_found;
use super::wire::traces::*;
use super::{AppState, Caller};
use crate::clock::format_iso;
use crate::engine::answers::Charged;
use crate::engine::traces::Recorded as Outcome;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/traces", post(record))
        .route("/api/v1/traces/names", get(names))
        .route("/api/v1/traces/by-name/{name}", get(by_name))
        .route(
            "/api/v1/traces/{partition_id}/{transaction_id}",
            get(for_message),
        )
}

/// `POST /api/v1/traces`: 201 `{success: true, traceId}` once durable; 404 when the
/// message is unknown (nothing is written).
pub async fn record(s: Caller, Json(body): Json<TraceBody>) -> Result<Response, ApiError> {
    let parsed = body.parse(s.identity.sub.clone())?;
    let missing = || not_found("no such message: check partitionId and transactionId".into());
    let Some(trace) = parsed.trace else {
        return Err(missing());
    };
    match s.engine.record_trace(s.tenant(), trace).await? {
        Outcome::Stored(id) => Ok((
            StatusCode::CREATED,
            AxumJson(Recorded {
                success: true,
                trace_id: &id,
            }),
        )
            .into_response()),
        Outcome::NoMessage => Err(missing()),
    }
}

fn page(p: &Params, default_limit: i64) -> Result<(usize, usize), ApiError> {
    let limit = p.int("limit", default_limit, 1, 10_000)? as usize;
    let offset = p.int("offset", 0, 0, i64::MAX)? as usize;
    Ok((limit, offset))
}

/// `GET /api/v1/traces/names?limit=50&offset=0`: the names in use, most recently seen
/// first.
pub async fn names(s: Caller, p: Params) -> Result<Response, ApiError> {
    let (limit, offset) = page(&p, 50)?;
    let Charged { value: got, held } = s.engine.trace_names(s.tenant(), limit, offset).await?;
    let body = NameList {
        trace_names: got
            .rows
            .iter()
            .map(|n| NameRow {
                trace_name: &n.name,
                trace_count: n.traces,
                message_count: n.messages,
                last_seen: format_iso(n.last_seen),
            })
            .collect(),
        total: got.total,
        pagination: Pagination { limit, offset },
    };
    Ok(json_holding(&body, held))
}

/// `GET /api/v1/traces/by-name/{name}?limit=100&offset=0`: the traces carrying a name,
/// oldest first, with their messages.
pub async fn by_name(
    s: Caller,
    PathParams(name): PathParams<String>,
    p: Params,
) -> Result<Response, ApiError> {
    let (limit, offset) = page(&p, 100)?;
    let Charged { value: got, held } = s
        .engine
        .traces_by_name(s.tenant(), &name, limit, offset)
        .await?;
    let body = ByName {
        traces: got
            .rows
            .iter()
            .map(|r| {
                let t = &r.trace;
                NamedTraceRow {
                    id: &t.id,
                    transaction_id: &t.transaction_id,
                    partition_id: t.partition_id.to_string(),
                    event_type: &t.event_type,
                    data: &t.data,
                    consumer_group: &t.consumer_group,
                    worker_id: t.worker.as_deref(),
                    created_at: format_iso(t.created_at),
                    queue_name: &t.queue,
                    partition_name: &t.partition,
                    message_payload: r.payload.as_deref(),
                    trace_names: &t.names,
                }
            })
            .collect(),
        total: got.total,
        pagination: Pagination { limit, offset },
    };
    Ok(json_holding(&body, held))
}

/// `GET /api/v1/traces/{partitionId}/{transactionId}`: every trace of one message,
/// oldest first (none for an unknown message).
pub async fn for_message(
    s: Caller,
    PathParams((pid, txn)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let Charged {
        value: traces,
        held,
    } = match pid.parse::<u64>() {
        Ok(id) => s.engine.message_traces(s.tenant(), id, &txn).await?,
        Err(_) => Charged {
            value: Vec::new(),
            held: s.engine.answer_budget().empty(),
        },
    };
    let body = MessageTraces {
        traces: traces
            .iter()
            .map(|t| MessageTrace {
                id: &t.id,
                event_type: &t.event_type,
                data: &t.data,
                consumer_group: &t.consumer_group,
                worker_id: t.worker.as_deref(),
                created_at: format_iso(t.created_at),
                trace_names: &t.names,
            })
            .collect(),
    };
    Ok(json_holding(&body, held))
}
