//! `POST /api/v1/transaction`.

use axum::Json as AxumJson;
use serde_json::Value;

use super::Caller;
use super::error::ApiError;
use super::extract::Json;
use crate::engine::txn;

pub async fn transaction(s: Caller, Json(body): Json<Value>) -> Result<AxumJson<Value>, ApiError> {
    let mut t = txn::parse(&body)?;
    t.stamp_producer(s.identity.sub.as_deref());
    Ok(AxumJson(s.engine.transaction(s.tenant(), t).await?))
}
