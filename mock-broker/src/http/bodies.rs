//! Request bodies under the broker's body budget ([`crate::engine::answers`],
//! `--body-budget`): a body holds its room from before its first byte is read until
//! its handler is done, so that the bodies in memory at once, read whole before they
//! are parsed, add up to at most the budget whatever their number.
//!
//! The probe of issue 52 sent 48 bodies of 60 MiB at once: each was read whole while
//! the others arrived, and the broker's resident set went from 54 to 2,115 MiB
//! (`tests/memory.rs`). A body that declares its length is charged
//! [`body_cost`] of it before it is read, waiting for room at most
//! [`AnswerBudget::WAIT`]; a chunked body is charged chunk by chunk as it arrives.
//! When no room comes, the call is answered 429 `overloaded` with `Retry-After`, as a
//! fetch whose answer finds no room is: a declared body is read away first (without
//! keeping it), so the client, still writing it, hears the answer.

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Body;
use axum::extract::Request;
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;

use super::error::ApiError;
use crate::engine::answers::{AnswerBudget, Held, body_cost};

/// Runs the call holding room in `budget` for its body until the handler is done (a
/// request without a body takes none).
pub(super) async fn run_charged(budget: AnswerBudget, req: Request, next: Next) -> Response {
    if !super::takes_body(&req) {
        return next.run(req).await;
    }
    match declared_length(&req) {
        Some(0) => next.run(req).await,
        Some(len) => match budget.acquire(body_cost(len)).await {
            Ok(held) => {
                let res = next.run(req).await;
                drop(held);
                res
            }
            Err(busy) => super::drain_then(req, ApiError::from(busy).into_response()).await,
        },
        None if req.headers().contains_key(header::TRANSFER_ENCODING) => {
            let slot = Arc::new(Mutex::new(None));
            let req = charge_as_read(req, budget, slot.clone());
            let res = next.run(req).await;
            drop(slot);
            res
        }
        None => next.run(req).await,
    }
}

/// The body's declared length, when it declares one that is a number (the gate checks
/// it against the limit of 64 MiB first: `declared_too_large`).
pub(super) fn declared_length(req: &Request) -> Option<u64> {
    req.headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `req` with a body charged to `budget` chunk by chunk as it is read; the room is
/// handed to `slot` once the body has been read whole, so that it outlives the body
/// (whose bytes the handler holds). A chunk that finds no room within
/// [`AnswerBudget::WAIT`] ends the body with the refusal, which the extractor answers
/// 429 (`extract::body_bytes`).
fn charge_as_read(req: Request, budget: AnswerBudget, slot: Arc<Mutex<Option<Held>>>) -> Request {
    let (parts, body) = req.into_parts();
    let held = budget.empty();
    let chunks = futures::stream::unfold(
        Some((body.into_data_stream(), held, slot)),
        |state| async move {
            let (mut stream, mut held, slot) = state?;
            match stream.next().await {
                None => {
                    *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(held);
                    None
                }
                Some(Err(e)) => Some((Err(axum::BoxError::from(e)), None)),
                Some(Ok(chunk)) => match held.charge(body_cost(chunk.len() as u64)).await {
                    Ok(()) => Some((Ok(chunk), Some((stream, held, slot)))),
                    Err(busy) => Some((Err(axum::BoxError::from(busy)), None)),
                },
            }
        },
    );
    Request::from_parts(parts, Body::from_stream(chunks))
}
