//! HTTP for the stream runner's routes (`/streams/v1/*`): query registration, claims,
//! cycles, state. The rules are in `engine/streams.rs`, the shapes in
//! `http/wire/streams.rs`.
//!
//! Verdicts about the data (a cycle whose lease is gone, a query id the tenant does
//! not know) are HTTP 200 with `success: false`, as on the public broker; the one
//! refusal with its own status is a registration with a changed operator chain (409),
//! which the official runner turns into its "different operator chain" error.

use axum::Json as AxumJson;
use axum::Router;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;

use super::error::ApiError;
use super::extract::Json;
use super::wire::streams::{
    AckResultBody, ClaimAnswer, ClaimBody, CycleAnswer, CycleBody, PartitionsAnswer,
    PartitionsBody, PushResult, RegisterAnswer, RegisterBody, StateGetAnswer, StateGetBody,
    UnknownQuery,
};
use super::{AppState, Caller};
use crate::engine::answers::Charged;
use crate::engine::streams::{ClaimOutcome, CycleOutcome, Registered};

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/streams/v1/queries", post(register))
        .route("/streams/v1/cycle", post(cycle))
        .route("/streams/v1/claim", post(claim))
        .route("/streams/v1/state/get", post(state_get))
        .route("/streams/v1/state/partitions", post(state_partitions))
}

fn unknown(query_id: &str) -> Response {
    AxumJson(UnknownQuery::new(query_id)).into_response()
}

async fn register(s: Caller, Json(body): Json<RegisterBody>) -> Result<Response, ApiError> {
    let cmd = body.into_command()?;
    Ok(match s.engine.stream_register(s.tenant(), cmd).await? {
        Registered::Ok {
            query_id,
            name,
            config_hash,
            fresh,
            reset,
        } => AxumJson(RegisterAnswer {
            success: true,
            query_id,
            name,
            config_hash: Some(config_hash),
            fresh,
            reset,
            error: None,
            code: None,
        })
        .into_response(),
        Registered::Mismatch { query_id, name } => (
            StatusCode::CONFLICT,
            AxumJson(RegisterAnswer {
                success: false,
                error: Some(format!(
                    "config_hash mismatch: the operator chain of query {name:?} changed; pass \
                     reset: true to wipe its state, or register under a new name"
                )),
                query_id,
                name,
                config_hash: None,
                fresh: false,
                reset: false,
                code: Some("config_hash_mismatch"),
            }),
        )
            .into_response(),
    })
}

async fn cycle(s: Caller, Json(body): Json<CycleBody>) -> Result<Response, ApiError> {
    let cmd = body.into_command(s.identity.sub.as_deref())?;
    let (query_id, partition_id) = (cmd.query_id.clone(), cmd.partition_id.clone());
    let answer = match s.engine.stream_cycle(s.tenant(), cmd).await? {
        CycleOutcome::Committed {
            queue,
            state_ops_applied,
            pushed,
            ack,
        } => CycleAnswer {
            success: true,
            query_id,
            partition_id,
            queue_name: Some(queue),
            state_ops_applied,
            push_results: pushed
                .into_iter()
                .enumerate()
                .map(|(index, (queue, partition, a))| PushResult {
                    index,
                    message_id: a.message_id,
                    transaction_id: a.transaction_id,
                    queue_name: queue,
                    partition,
                    status: if a.duplicate { "duplicate" } else { "queued" },
                    offset: a.offset,
                })
                .collect(),
            ack_result: ack.map(AckResultBody::from),
            error: None,
        },
        CycleOutcome::Refused { queue, error } => CycleAnswer {
            success: false,
            query_id,
            partition_id,
            queue_name: queue,
            state_ops_applied: 0,
            push_results: Vec::new(),
            ack_result: None,
            error: Some(error),
        },
    };
    Ok(AxumJson(answer).into_response())
}

async fn claim(s: Caller, Json(body): Json<ClaimBody>) -> Result<Response, ApiError> {
    let cmd = body.into_command()?;
    let query_id = cmd.query_id.clone();
    Ok(match s.engine.stream_claim(s.tenant(), cmd).await? {
        ClaimOutcome::Done {
            lease_id,
            lease_seconds,
            now,
            partitions,
        } => AxumJson(ClaimAnswer {
            success: true,
            lease_id,
            lease_seconds,
            now_ms: now.div_euclid(1000),
            partitions: partitions.into_iter().map(Into::into).collect(),
        })
        .into_response(),
        ClaimOutcome::UnknownQuery => unknown(&query_id),
    })
}

async fn state_get(s: Caller, Json(body): Json<StateGetBody>) -> Result<Response, ApiError> {
    let q = body.into_query()?;
    let query_id = q.query_id.clone();
    let Charged { value: rows, held } = s.engine.stream_state(s.tenant(), q).await?;
    Ok(match rows {
        Some(rows) => {
            let answer = StateGetAnswer {
                success: true,
                rows: rows.into_iter().map(Into::into).collect(),
            };
            super::budgeted::json_holding(&answer, held)
        }
        None => unknown(&query_id),
    })
}

async fn state_partitions(
    s: Caller,
    Json(body): Json<PartitionsBody>,
) -> Result<Response, ApiError> {
    let q = body.into_query()?;
    let query_id = q.query_id.clone();
    Ok(
        match s.engine.stream_state_partitions(s.tenant(), q).await? {
            Some(page) => AxumJson(PartitionsAnswer::from(page)).into_response(),
            None => unknown(&query_id),
        },
    )
}
