//! Sending an answer that holds room in the broker's answer budget
//! ([`crate::engine::answers`]): the room is given back once the body has been handed
//! to the connection, not when the handler returns.
//!
//! The body goes out in slices of [`CHUNK`] bytes of one buffer; hyper asks for the
//! next slice only when its write buffer has room (about 400 KiB), so when it asks for
//! the end of the body at most that much of the answer is still unsent. A connection
//! that closes early drops the body, and the room with it.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

use super::error::ApiError;
use crate::engine::answers::Held;

/// Bytes per slice of a budgeted body.
const CHUNK: usize = 64 * 1024;

/// `value` as a JSON answer whose body keeps `held` until it has been sent. The room
/// is first settled to the rendered body's length: the records it was charged for are
/// dropped by then.
pub fn json_holding(value: &impl Serialize, mut held: Held) -> Response {
    let text = match serde_json::to_vec(value) {
        Ok(text) => text,
        Err(e) => {
            return ApiError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                format!("cannot render the answer: {e}"),
            )
            .into_response();
        }
    };
    held.settle(text.len() as u64);
    let len = text.len();
    let slices = futures::stream::unfold((Bytes::from(text), held), |(mut rest, held)| async {
        if rest.is_empty() {
            // Dropping the state here gives the room back.
            return None;
        }
        let slice = rest.split_to(rest.len().min(CHUNK));
        Some((Ok::<_, Infallible>(slice), (rest, held)))
    });
    (
        [
            (header::CONTENT_TYPE, "application/json".to_string()),
            (header::CONTENT_LENGTH, len.to_string()),
        ],
        Body::from_stream(slices),
    )
        .into_response()
}
