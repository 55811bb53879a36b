//! `POST /api/v1/transaction`.

use axum::Json as AxumJson;
use serde_json::Value;

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, parse_body};
use crate::engine::txn;

/// Parses and checks a transaction body as `POST /api/v1/transaction` does before
/// anything runs: the JSON rules of [`parse_body`], then the body's shape and limits
/// ([`txn::parse`]). Every refusal is a 4xx. The seam of the `transaction_body` fuzz
/// target (`mock-broker/fuzz`).
#[doc(hidden)]
pub fn parse_transaction(bytes: &[u8]) -> Result<txn::Transaction, ApiError> {
    Ok(txn::parse(&parse_body::<Value>(bytes)?)?)
}

pub async fn transaction(s: Caller, Json(body): Json<Value>) -> Result<AxumJson<Value>, ApiError> {
    let mut t = txn::parse(&body)?;
    t.stamp_producer(s.identity.sub.as_deref());
    Ok(AxumJson(s.engine.transaction(s.tenant(), t).await?))
}
