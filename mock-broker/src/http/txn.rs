//! `POST /api/v1/transaction`.

use axum::Json as AxumJson;
use axum::extract::State;
use serde_json::Value;

use super::AppState;
use super::error::ApiError;
use super::extract::Json;
use crate::engine::txn;

pub async fn transaction(
    State(s): State<AppState>,
    Json(body): Json<Value>,
) -> Result<AxumJson<Value>, ApiError> {
    let t = txn::parse(&body)?;
    Ok(AxumJson(s.engine.transaction(s.tenant(), t).await?))
}
