//! `POST /api/v1/transaction`.

use axum::Json as AxumJson;
use axum::response::{IntoResponse, Response};

use super::Caller;
use super::error::ApiError;
use super::extract::{Body, parse_body};
use super::wire::txn::{TxnBody, answer};
use crate::engine::txn;

/// Parses and checks a transaction body as `POST /api/v1/transaction` does before
/// anything runs: the JSON rules of [`parse_body`] and the body's shape in one typed
/// parse, then each part's rules and limits ([`TxnBody::into_transaction`]). Every
/// refusal is a 4xx. The seam of the `transaction_body` fuzz target
/// (`mock-broker/fuzz`) and of the parse benchmark.
#[doc(hidden)]
pub fn parse_transaction(bytes: &[u8]) -> Result<txn::Transaction, ApiError> {
    Ok(parse_body::<TxnBody>(bytes)?.into_transaction()?)
}

pub async fn transaction(s: Caller, Body(bytes): Body) -> Result<Response, ApiError> {
    let mut t = parse_transaction(&bytes)?;
    t.stamp_producer(s.identity.sub.as_deref());
    let out = s.engine.transaction(s.tenant(), t).await?;
    Ok(AxumJson(answer(&out)).into_response())
}
