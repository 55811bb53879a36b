//! The engine's refusals and failures, independent of HTTP.
//!
//! A verdict about the data (a refused ack, a rolled-back transaction) is not an error:
//! it is part of a successful answer. These are the cases where the call itself fails.

use std::sync::Arc;

use crate::store::{Degradation, StoreError};

/// Why a command was not carried out.
///
/// Non-exhaustive: a new refusal is not a breaking change.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The request is malformed or breaks a rule of the API (HTTP 400 `bad_request`).
    #[error("{0}")]
    BadRequest(String),
    /// A queue or partition name is over the key budget (HTTP 413 `name_too_long`).
    #[error("{0}")]
    NameTooLong(String),
    /// A body or value is over its size limit (HTTP 413 `payload_too_large`).
    #[error("{0}")]
    PayloadTooLarge(String),
    /// The writer's queue is full (HTTP 429 `overloaded`).
    #[error("the broker is overloaded; retry shortly")]
    Overloaded,
    /// Answers being sent hold the broker's answer budget and none made room in time
    /// (HTTP 429 `overloaded`, with `Retry-After`; see [`crate::engine::answers`]).
    #[error("{0}")]
    AnswersBusy(String),
    /// The broker is stopping and takes no new writes (HTTP 503 `retry`).
    #[error("the broker is shutting down; retry against a running broker")]
    ShuttingDown,
    /// A KV operation breaks a rule of the KV API before anything ran (HTTP 400
    /// `kv_bad_request` with the refusal's `reason`, or 413 for a value over its cap).
    #[error("{}", .0.message)]
    KvRefusal(crate::engine::kv::KvRefusal),
    /// A standalone timers call breaks a rule of the timers API (HTTP 400
    /// `timers_bad_request`).
    #[error("{0}")]
    TimersBadRequest(String),
    /// A timer would fire later than the broker's horizon allows (HTTP 403
    /// `timer_horizon_exceeded`).
    #[error("{0}")]
    TimerHorizonExceeded(String),
    /// A locks call breaks a rule of the locks API (HTTP 400 `locks_bad_request`).
    #[error("{0}")]
    LocksBadRequest(String),
    /// An ephemeral queue is at its `maxBytes`/`maxLength` and its policy is `reject`
    /// (HTTP 429 `queue_full`, with `Retry-After`).
    #[error("{0}")]
    QueueFull(String),
    /// The ephemeral queues of this broker are at their memory budget (HTTP 503
    /// `ephemeral_unavailable`, with `Retry-After`).
    #[error("{0}")]
    EphemeralUnavailable(String),
    /// The storage cap is reached and the command would add data (HTTP 507
    /// `storage_full`). Reads, acks and deletes still work.
    #[error("{0}")]
    StorageFull(String),
    /// Storage failed; nothing of the batch was committed (HTTP 500 `internal`). The
    /// storage error is kept whole as the source, shared by every caller of the batch.
    #[error("storage failure: {0}")]
    Storage(#[source] Arc<StoreError>),
    /// The storage failed to write (an I/O error, a failed fsync) or is being reopened
    /// after one; nothing of the batch was applied (HTTP 503 `retry`).
    #[error("storage unavailable, retry shortly: {0}")]
    StorageUnavailable(#[source] Arc<StoreError>),
}

impl EngineError {
    /// Shorthand for a 400.
    pub fn bad(msg: impl Into<String>) -> Self {
        EngineError::BadRequest(msg.into())
    }
}

impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> Self {
        Arc::new(e).into()
    }
}

impl From<Arc<StoreError>> for EngineError {
    fn from(e: Arc<StoreError>) -> Self {
        match (&*e, e.degradation()) {
            (StoreError::Full { .. } | StoreError::DiskFull | StoreError::NoSpace(_), _)
            | (_, Some(Degradation::StorageFull)) => EngineError::StorageFull(e.to_string()),
            (StoreError::Unavailable(_), _) | (_, Some(Degradation::IoError)) => {
                EngineError::StorageUnavailable(e)
            }
            _ => EngineError::Storage(e),
        }
    }
}
