//! Error answers: `{"error": "<text>", "code": "<code>"}` with the status of `wire.md`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

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

impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let message = e.to_string();
        match e {
            EngineError::BadRequest(_) => ApiError::bad_request(message),
            EngineError::NameTooLong(_) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "name_too_long", message)
            }
            EngineError::PayloadTooLarge(_) => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            EngineError::Overloaded => ApiError {
                retry_after: Some(1),
                ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "overloaded", message)
            },
            EngineError::ShuttingDown => ApiError {
                retry_after: Some(1),
                ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "retry", message)
            },
            EngineError::KvRefusal(r) if r.too_large => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            EngineError::KvRefusal(r) => ApiError {
                reason: Some(r.reason),
                ..ApiError::new(StatusCode::BAD_REQUEST, "kv_bad_request", message)
            },
            EngineError::TimersBadRequest(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "timers_bad_request", message)
            }
            EngineError::TimerHorizonExceeded(_) => {
                ApiError::new(StatusCode::FORBIDDEN, "timer_horizon_exceeded", message)
            }
            EngineError::LocksBadRequest(_) => {
                ApiError::new(StatusCode::BAD_REQUEST, "locks_bad_request", message)
            }
            EngineError::QueueFull(_) => ApiError {
                retry_after: Some(1),
                ..ApiError::new(StatusCode::TOO_MANY_REQUESTS, "queue_full", message)
            },
            EngineError::EphemeralUnavailable(_) => ApiError {
                retry_after: Some(1),
                ..ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "ephemeral_unavailable",
                    message,
                )
            },
            EngineError::StorageFull(_) => ApiError {
                // Space may come back (acks and deletes free it, an operator adds it).
                retry_after: Some(5),
                ..ApiError::new(StatusCode::INSUFFICIENT_STORAGE, "storage_full", message)
            },
            EngineError::StorageUnavailable(_) => {
                tracing::warn!(error = %message, "storage unavailable");
                ApiError {
                    retry_after: Some(1),
                    ..ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "retry", message)
                }
            }
            EngineError::Storage(_) => {
                tracing::error!(error = %message, "storage failure");
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
            }
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
