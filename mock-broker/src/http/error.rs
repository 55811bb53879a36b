//! Error answers: `{"error": "<text>", "code": "<code>"}` with the status of `wire.md`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::engine::txn_log::Refusal;
use crate::error::EngineError;

/// An error answer.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// The machine-readable code.
    pub code: &'static str,
    /// The text for a person.
    pub message: String,
    /// Seconds to wait before retrying (429, 503).
    pub retry_after: Option<u64>,
    /// A finer reason sent beside `code` (KV refusals).
    pub reason: Option<&'static str>,
}

impl ApiError {
    /// A 400 `bad_request`.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// Any status and code.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_after: None,
            reason: None,
        }
    }
}

impl ApiError {
    /// The status and code a refusal is answered with: the one mapping from the
    /// engine's reasons to the wire, used for every engine error and for the
    /// transaction log's refused calls.
    pub fn status_of(r: Refusal) -> (StatusCode, &'static str) {
        match r {
            Refusal::Invalid => (StatusCode::BAD_REQUEST, "bad_request"),
            Refusal::InvalidKv => (StatusCode::BAD_REQUEST, "kv_bad_request"),
            Refusal::InvalidTimer => (StatusCode::BAD_REQUEST, "timers_bad_request"),
            Refusal::TimerHorizon => (StatusCode::FORBIDDEN, "timer_horizon_exceeded"),
            Refusal::InvalidLock => (StatusCode::BAD_REQUEST, "locks_bad_request"),
            Refusal::NameTooLong => (StatusCode::PAYLOAD_TOO_LARGE, "name_too_long"),
            Refusal::TooLarge => (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            Refusal::BodyTimeout => (StatusCode::REQUEST_TIMEOUT, "request_timeout"),
            Refusal::Overloaded => (StatusCode::TOO_MANY_REQUESTS, "overloaded"),
            Refusal::QueueFull => (StatusCode::TOO_MANY_REQUESTS, "queue_full"),
            Refusal::EphemeralUnavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "ephemeral_unavailable")
            }
            Refusal::ShuttingDown | Refusal::StorageUnavailable => {
                (StatusCode::SERVICE_UNAVAILABLE, "retry")
            }
            Refusal::StorageFull => (StatusCode::INSUFFICIENT_STORAGE, "storage_full"),
            Refusal::StorageFailure => (StatusCode::INTERNAL_SERVER_ERROR, "internal"),
        }
    }

    /// The engine's reason for this answer, for the transaction log: the inverse of
    /// [`ApiError::status_of`] over the codes a transaction call can be answered with
    /// (a refusal made at the edge, such as an unreadable body, reads as the nearest
    /// reason of its status: a 4xx as `Invalid`, a 5xx as `StorageFailure`).
    pub fn refusal(&self) -> Refusal {
        match self.code {
            "bad_request" => Refusal::Invalid,
            "kv_bad_request" => Refusal::InvalidKv,
            "timers_bad_request" => Refusal::InvalidTimer,
            "timer_horizon_exceeded" => Refusal::TimerHorizon,
            "locks_bad_request" => Refusal::InvalidLock,
            "name_too_long" => Refusal::NameTooLong,
            "payload_too_large" => Refusal::TooLarge,
            "request_timeout" => Refusal::BodyTimeout,
            "overloaded" => Refusal::Overloaded,
            "queue_full" => Refusal::QueueFull,
            "ephemeral_unavailable" => Refusal::EphemeralUnavailable,
            "storage_full" => Refusal::StorageFull,
            "retry" => Refusal::StorageUnavailable,
            _ if self.status.is_server_error() => Refusal::StorageFailure,
            _ => Refusal::Invalid,
        }
    }
}

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let message = e.to_string();
        let (status, code) = ApiError::status_of(Refusal::from(&e));
        let plain = ApiError::new(status, code, message);
        match e {
            // Each `Retry-After` says when trying again may help.
            EngineError::Overloaded
            | EngineError::AnswersBusy(_)
            | EngineError::ShuttingDown
            | EngineError::QueueFull(_)
            | EngineError::EphemeralUnavailable(_) => ApiError {
                retry_after: Some(1),
                ..plain
            },
            EngineError::KvRefusal(r) if !r.too_large => ApiError {
                reason: Some(r.reason),
                ..plain
            },
            // Space may come back (acks and deletes free it, an operator adds it).
            EngineError::StorageFull(_) => ApiError {
                retry_after: Some(5),
                ..plain
            },
            EngineError::StorageUnavailable(_) => {
                tracing::warn!(error = %plain.message, "storage unavailable");
                ApiError {
                    retry_after: Some(1),
                    ..plain
                }
            }
            EngineError::Storage(_) => {
                tracing::error!(error = %plain.message, "storage failure");
                plain
            }
            _ => plain,
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message, "code": self.code });
        if let Some(r) = self.reason {
            body["reason"] = r.into();
        }
        let mut res = (self.status, axum::Json(body)).into_response();
        if let Some(secs) = self.retry_after {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The log keeps the engine's reason and renders it back through the edge's
    /// mapping: every reason must come back as the same reason, so the status and
    /// code the log shows are the ones the caller was answered with.
    #[test]
    fn every_refusal_reads_back_from_the_answer_it_gave() {
        for r in [
            Refusal::Invalid,
            Refusal::InvalidKv,
            Refusal::InvalidTimer,
            Refusal::TimerHorizon,
            Refusal::InvalidLock,
            Refusal::NameTooLong,
            Refusal::TooLarge,
            Refusal::BodyTimeout,
            Refusal::Overloaded,
            Refusal::QueueFull,
            Refusal::EphemeralUnavailable,
            Refusal::StorageFull,
            Refusal::StorageFailure,
        ] {
            let (status, code) = ApiError::status_of(r);
            assert_eq!(ApiError::new(status, code, "x").refusal(), r, "{code}");
        }
        // Two reasons share `503 retry`; either reads back as a 503 `retry`.
        let (status, code) = ApiError::status_of(Refusal::ShuttingDown);
        let back = ApiError::new(status, code, "x").refusal();
        assert_eq!(ApiError::status_of(back), (status, code));
    }
}
