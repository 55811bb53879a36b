//! `POST /api/v1/transaction`, and the log of the tenant's recent calls the console
//! reads (`GET /api/v1/transactions`, [`crate::engine::txn_log`]).

use std::convert::Infallible;

use axum::Json as AxumJson;
use axum::extract::FromRequestParts;
use axum::http::request::Parts as RequestParts;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};

use super::Caller;
use super::error::ApiError;
use super::extract::{Body, Params, parse_body};
use super::wire::txn::{self as wire, TxnBody, answer};
use crate::engine::txn;
use crate::engine::txn_log::{Entry, KEPT, Parts, Refusal};

/// Parses and checks a transaction body as `POST /api/v1/transaction` does before
/// anything runs: the JSON rules of [`parse_body`] and the body's shape in one typed
/// parse, then each part's rules and limits ([`TxnBody::into_transaction`]). Every
/// refusal is a 4xx. The seam of the `transaction_body` fuzz target
/// (`mock-broker/fuzz`) and of the parse benchmark.
#[doc(hidden)]
pub fn parse_transaction(bytes: &[u8]) -> Result<txn::Transaction, ApiError> {
    Ok(parse_body::<TxnBody>(bytes)?.into_transaction()?)
}

/// The caller's `User-Agent` header, for the transaction log: the header's value is
/// shared, not copied, until an entry keeps (at most 256 bytes of) it.
pub struct UserAgent(Option<HeaderValue>);

impl<S: Send + Sync> FromRequestParts<S> for UserAgent {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut RequestParts, _: &S) -> Result<Self, Infallible> {
        Ok(UserAgent(parts.headers.get(header::USER_AGENT).cloned()))
    }
}

/// Runs a transaction and records the call in the tenant's log: its parts, and the
/// commit, the rollback or the refusal it was answered with. A body refused before it
/// was parsed (unreadable, too large, not a transaction) is logged too, without parts;
/// a call the gate refused (401, 403, 415) never reaches here and is not.
pub async fn transaction(
    s: Caller,
    UserAgent(ua): UserAgent,
    body: Result<Body, ApiError>,
) -> Result<Response, ApiError> {
    // A header that is not visible ASCII is left out rather than guessed at.
    let ua = ua.as_ref().and_then(|v| v.to_str().ok());
    let record = |entry: Entry| s.engine.txn_log().record(s.tenant(), entry);
    let now = || s.engine.clock().now_micros();
    let mut t = match body.and_then(|Body(bytes)| parse_transaction(&bytes)) {
        Ok(t) => t,
        Err(e) => {
            record(Entry::refused(None, refusal(&e), now(), ua));
            return Err(e);
        }
    };
    t.stamp_producer(s.identity.sub.as_deref());
    // Copied before the call takes the transaction: at most 16 elements of each list.
    let parts = Parts::of(&t);
    match s.engine.transaction(s.tenant(), t).await {
        Ok(out) => {
            record(Entry::answered(parts, &out, now(), ua));
            Ok(AxumJson(answer(&out)).into_response())
        }
        Err(e) => {
            let e = ApiError::from(e);
            record(Entry::refused(Some(parts), refusal(&e), now(), ua));
            Err(e)
        }
    }
}

/// `GET /api/v1/transactions?limit=`: the tenant's last calls, newest first (`limit`
/// 1 to 256, default 50). Kept in memory: a restart empties it.
pub async fn log(s: Caller, params: Params) -> Result<Response, ApiError> {
    let limit = params.int("limit", 50, 1, KEPT as i64)? as usize;
    let recent = s.engine.recent_transactions(s.tenant(), limit).await?;
    Ok(AxumJson(wire::log(&recent)).into_response())
}

/// The engine's reason and the text of an error answer, as the log keeps them.
fn refusal(e: &ApiError) -> (Refusal, &str) {
    (e.refusal(), &e.message)
}
