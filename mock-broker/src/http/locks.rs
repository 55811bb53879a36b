//! `POST /api/v1/locks`.

use axum::Json as AxumJson;
use serde_json::{Value, json};

use super::Caller;
use super::error::ApiError;
use super::extract::Json;
use crate::engine::locks;
use crate::error::EngineError;
use crate::fields;

fn bad(m: String) -> ApiError {
    EngineError::Coded {
        status: 400,
        code: "locks_bad_request",
        message: m,
        reason: None,
    }
    .into()
}

pub async fn locks(s: Caller, Json(body): Json<Value>) -> Result<AxumJson<Value>, ApiError> {
    let ops = fields::operations(&body).map_err(bad)?;
    if ops.len() > locks::MAX_OPS {
        return Err(bad(format!(
            "{} lock operations; the limit is {}",
            ops.len(),
            locks::MAX_OPS
        )));
    }
    let ops = ops
        .iter()
        .enumerate()
        .map(|(i, v)| locks::parse_op(v, &format!("operations[{i}]")))
        .collect::<Result<Vec<_>, _>>()?;
    let results = s.engine.locks(s.tenant(), ops).await?;
    Ok(AxumJson(json!({ "results": results })))
}
