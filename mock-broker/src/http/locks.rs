//! `POST /api/v1/locks`.

use axum::Json as AxumJson;
use axum::response::{IntoResponse, Response};

use super::Caller;
use super::error::ApiError;
use super::extract::{Body, parse_body_with};
use super::wire::kv::At;
use super::wire::locks::{LocksAnswer, LocksBody, result};
use crate::engine::locks;
use crate::error::EngineError;

fn bad(m: String) -> ApiError {
    EngineError::LocksBadRequest(m).into()
}

pub async fn locks(s: Caller, Body(bytes): Body) -> Result<Response, ApiError> {
    let body: LocksBody = parse_body_with(&bytes, bad)?;
    let ops = body
        .operations
        .ok_or_else(|| bad("operations is required".to_string()))?;
    if ops.len() > locks::MAX_OPS {
        return Err(bad(format!(
            "{} lock operations; the limit is {}",
            ops.len(),
            locks::MAX_OPS
        )));
    }
    let ops = ops
        .into_iter()
        .enumerate()
        .map(|(i, op)| op.into_op(At("operations", Some(i))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(bad)?;
    let outcomes = s.engine.locks(s.tenant(), ops.clone()).await?;
    let results = ops
        .iter()
        .zip(&outcomes)
        .enumerate()
        .map(|(i, (op, r))| result(i, op, r))
        .collect();
    Ok(AxumJson(LocksAnswer { results }).into_response())
}
