//! HTTP for ephemeral queues (`/api/v1/ephemeral/*`): in-memory queues with their
//! own push, pop and ack (the rules are in `engine/ephemeral.rs`, the shapes in
//! `http/wire/ephemeral.rs`).
//!
//! Two answers differ from the durable family on purpose (`queen-protocol`): an empty
//! pop is 200 with `messages: []`, not 204; and the one 404 about a queue rather than
//! a route, on `depth`, carries the code `ephemeral_queue_not_found`.

use std::time::Duration;

use axum::Json as AxumJson;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};

use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use super::wire::ephemeral::*;
use super::{AppState, Caller};
use crate::engine::ephemeral::PopRequest;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/ephemeral/configure", post(configure))
        .route("/api/v1/ephemeral/push", post(push))
        .route("/api/v1/ephemeral/pop", get(pop))
        .route("/api/v1/ephemeral/ack", post(ack))
        .route("/api/v1/ephemeral/reset", post(reset))
        .route("/api/v1/ephemeral/queue/{queue}", delete(remove))
        .route("/api/v1/ephemeral/queues", get(list))
        .route("/api/v1/ephemeral/queues/{queue}/depth", get(depth))
}

/// `POST /api/v1/ephemeral/configure`: declares a queue; 201 with every option.
pub async fn configure(s: Caller, Json(body): Json<ConfigureBody>) -> Result<Response, ApiError> {
    let (queue, mut patch) = body.parse()?;
    // A lease is held at most `--max-lease` here as on the durable queues.
    let cap = u64::try_from(s.engine.limits().max_lease_secs()).unwrap_or(u64::MAX);
    patch.lease_seconds = patch.lease_seconds.map(|l| l.min(cap));
    let now = s.engine.clock().now_micros();
    let o = s
        .engine
        .ephemeral()
        .configure(s.tenant(), &queue, &patch, now)?;
    let body = Configured {
        queue: &queue,
        declared: true,
        options: (&o).into(),
    };
    Ok((StatusCode::CREATED, AxumJson(body)).into_response())
}

/// `POST /api/v1/ephemeral/push`: appends to one ring, all or nothing; 201 `{pushed}`.
pub async fn push(s: Caller, Json(body): Json<PushBody>) -> Result<Response, ApiError> {
    let p = body.parse()?;
    let now = s.engine.clock().now_micros();
    let pushed = s.engine.ephemeral().push(
        s.tenant(),
        &p.queue,
        p.partition.as_deref(),
        p.payloads,
        now,
    )?;
    Ok((StatusCode::CREATED, AxumJson(Pushed { pushed })).into_response())
}

/// `GET /api/v1/ephemeral/pop?queue=&partition=&batch=1&wait=&timeout=30000&group=&autoAck=`.
pub async fn pop(s: Caller, p: Params) -> Result<Response, ApiError> {
    let queue = p
        .get("queue")
        .ok_or_else(|| ApiError::bad_request("queue is required"))?
        .to_string();
    crate::engine::queues::check_name("queue", &queue)?;
    let partition = p.get("partition").map(str::to_string);
    if let Some(x) = &partition {
        crate::engine::queues::check_name("partition", x)?;
    }
    let group = p.get("group").map(str::to_string);
    if let Some(g) = &group {
        crate::engine::queues::check_name("group", g)?;
    }
    let batch = p.int("batch", 1, 1, 10_000)? as usize;
    let wait = p.bool("wait", false)?;
    let timeout = p.int("timeout", DEFAULT_WAIT_MS, 0, 300_000)? as u64;
    let req = PopRequest {
        queue,
        partition,
        batch,
        group,
        auto_ack: p.bool("autoAck", false)?,
        wait: wait.then(|| Duration::from_millis(timeout)),
    };
    let got = s.engine.ephemeral_pop(s.tenant(), req.clone()).await?;
    let body = Popped {
        queue: &req.queue,
        messages: got
            .iter()
            .map(|d| DeliveredOut {
                id: &d.id,
                partition: &d.partition,
                payload: &d.payload,
                attempts: d.attempts,
            })
            .collect(),
    };
    Ok(AxumJson(body).into_response())
}

/// The long-poll default, the durable pop's (`queen-protocol`'s
/// `EPHEMERAL_DEFAULT_WAIT_TIMEOUT_MILLIS`).
const DEFAULT_WAIT_MS: i64 = 30_000;

/// `POST /api/v1/ephemeral/ack`: one `{id, outcome}` per ack, in order (verdicts,
/// never errors: a stale or unknown id is an answer).
pub async fn ack(s: Caller, Json(body): Json<AckBody>) -> Result<Response, ApiError> {
    let a = body.parse()?;
    let now = s.engine.clock().now_micros();
    let outcomes = s
        .engine
        .ephemeral()
        .ack(s.tenant(), &a.queue, a.group.as_deref(), &a.acks, now);
    let body = AckResults {
        results: a
            .acks
            .iter()
            .zip(outcomes)
            .map(|((id, _), o)| AckResult {
                id,
                outcome: outcome(o),
            })
            .collect(),
    };
    Ok(AxumJson(body).into_response())
}

/// `POST /api/v1/ephemeral/reset`: drops every message, lease and cursor; keeps the
/// declaration.
pub async fn reset(s: Caller, Json(body): Json<ResetBody>) -> Result<Response, ApiError> {
    let queue = body.parse()?;
    let dropped = s.engine.ephemeral().reset(s.tenant(), &queue);
    Ok(AxumJson(Reset {
        queue: &queue,
        dropped,
    })
    .into_response())
}

/// `DELETE /api/v1/ephemeral/queue/{queue}`: removes the queue and its declaration;
/// a missing queue is 200 `deleted: false`.
pub async fn remove(
    s: Caller,
    PathParams(queue): PathParams<String>,
) -> Result<Response, ApiError> {
    let (deleted, declared) = s.engine.ephemeral().delete(s.tenant(), &queue);
    Ok(AxumJson(Deleted {
        queue: &queue,
        deleted,
        declared,
    })
    .into_response())
}

/// `GET /api/v1/ephemeral/queues`: every queue's gauges.
pub async fn list(s: Caller) -> Result<Response, ApiError> {
    let now = s.engine.clock().now_micros();
    let all = s.engine.ephemeral().list(s.tenant(), now);
    Ok(AxumJson(QueueList {
        queues: all.iter().map(Into::into).collect(),
    })
    .into_response())
}

/// `GET /api/v1/ephemeral/queues/{queue}/depth`: one queue's gauges; 404
/// `ephemeral_queue_not_found` when there is no such queue.
pub async fn depth(s: Caller, PathParams(queue): PathParams<String>) -> Result<Response, ApiError> {
    let now = s.engine.clock().now_micros();
    let Some(f) = s.engine.ephemeral().figures(s.tenant(), &queue, now) else {
        return Err(ApiError::new(
            StatusCode::NOT_FOUND,
            "ephemeral_queue_not_found",
            format!("no ephemeral queue {queue:?} exists on this broker"),
        ));
    };
    Ok(AxumJson(FiguresOut::from(&f)).into_response())
}
