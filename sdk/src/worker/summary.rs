//! What a worker did, counted as it goes and handed back when it stops.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::Error;

/// The kinds of trouble a [`Summary`] counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The handler answered an error: the message was acked `failed`, or the handler
    /// was run again ([`crate::Worker::retry_handler`]; each failed run counts).
    Handler,
    /// The handler panicked (the message was acked `failed`).
    Panic,
    /// A payload did not decode as the worker's type (it was dead-lettered, or handed to
    /// [`crate::Worker::on_undecodable`]).
    Undecodable,
    /// A step broke a rule of the API ([`Error::Invalid`]), rolled back for a reason
    /// that retrying cannot change, or needs a feature the broker lacks
    /// ([`Error::Unsupported`]) (the message was acked `failed`).
    Step,
    /// A call may or may not have applied ([`Error::OutcomeUnknown`], or a step whose
    /// retries ran out): the message is left to its lease's expiry.
    OutcomeUnknown,
    /// The broker was unavailable: a 5xx, a 429, a timeout or a lost connection (a pop
    /// is tried again after a backoff).
    Unavailable,
    /// The broker refused a call (a 4xx).
    Refused,
    /// A gate refused a step for a reason other than "already done": a lock's guard
    /// that lapsed, a `required` condition that failed (see [`crate::Gate`]).
    Gated,
    /// The broker's answer did not decode.
    Decode,
    /// The token provider failed.
    Token,
}

impl ErrorKind {
    /// The kind of an SDK error.
    pub(crate) fn of(e: &Error) -> ErrorKind {
        match e {
            Error::Api { status, .. } if *status >= 500 || *status == 429 || *status == 408 => {
                ErrorKind::Unavailable
            }
            Error::Api { .. } => ErrorKind::Refused,
            Error::Transport(_) | Error::DeadlineExceeded { .. } | Error::Exhausted { .. } => {
                ErrorKind::Unavailable
            }
            Error::OutcomeUnknown { .. } => ErrorKind::OutcomeUnknown,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Undecodable { .. } => ErrorKind::Undecodable,
            Error::Token { .. } => ErrorKind::Token,
            Error::Invalid { .. }
            | Error::Serialize(_)
            | Error::RolledBack { .. }
            | Error::Unsupported { .. } => ErrorKind::Step,
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

/// Why a worker stopped, when it stopped as asked (a stop it was not asked for is a
/// [`crate::WorkerError`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stopped {
    /// Its shutdown signal fired ([`crate::Worker::run`]).
    #[default]
    Shutdown,
    /// Nothing was left to pop and nothing was in hand
    /// ([`crate::Worker::run_until_idle`]).
    Idle,
}

/// What a worker did, returned by [`crate::Worker::run`].
///
/// Every delivered message ends in exactly one of `committed`, `already_done`,
/// `failed`, `refused`, `dead_lettered`, `lease_lost`, `unknown`, `released` or
/// `abandoned`; `processed` counts those a handler was started for.
///
/// ```
/// let s = queen_sdk::Summary::default();
/// assert_eq!((s.processed, s.committed, s.released), (0, 0, 0));
/// println!("{s}");
/// ```
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct Summary {
    /// Messages handed to the handler (once each, however often
    /// [`Worker::retry_handler`](crate::Worker::retry_handler) runs it again).
    pub processed: u64,
    /// Handler runs repeated in process after an error, under
    /// [`Worker::retry_handler`](crate::Worker::retry_handler): not deliveries, so in
    /// none of the counters below (a message retried twice and then committed counts
    /// 2 here and 1 in `committed`).
    pub retries: u64,
    /// Steps committed.
    pub committed: u64,
    /// Messages whose step was already done (a [`once`](crate::TransactionBuilder::once)
    /// marker that exists, or a `duplicate` rollback): acked `completed` on their own.
    pub already_done: u64,
    /// Messages acked `failed` (a handler error or panic, or a step that cannot
    /// commit); the queue's `retryLimit` dead-letters them in the end.
    pub failed: u64,
    /// Messages whose step a gate refused (a lapsed lock's guard, a failed `required`
    /// condition): settled by the [`Worker::on_refused`](crate::Worker::on_refused)
    /// handler's step, or, without one, acked `failed` with the gate as the reason (they
    /// come back, and the retry limit dead-letters them in the end). Never counted as
    /// committed or done.
    pub refused: u64,
    /// Messages dead-lettered: a payload that does not decode as the worker's type, or
    /// a `failed` ack (a handler error, a refused step) past the queue's retry limit.
    pub dead_lettered: u64,
    /// Messages dropped because their lease was lost (expired, or taken over): their
    /// step was not committed, the lease holder has them.
    pub lease_lost: u64,
    /// Steps whose outcome is unknown (the commit may have applied): left to the
    /// lease's expiry, after which the redelivered step finds itself done.
    pub unknown: u64,
    /// Delivered but not started when the worker stopped, or behind a message acked
    /// `failed`: given back with `retry` acks (no attempt counted), so another worker
    /// gets them at once.
    pub released: u64,
    /// Left unsettled: in flight when the grace period ran out (the handler was
    /// cancelled; the message is given back with a `retry` ack, refused if its step had
    /// committed), behind a step whose outcome is unknown, or refused for good (401,
    /// 403: the worker stops) (left to the lease).
    pub abandoned: u64,
    /// Deliveries of messages older than the queue's dedup window, where a derived
    /// push id no longer proves a second run a duplicate (see
    /// [`Worker::past_dedup_window`](crate::Worker::past_dedup_window)). Also counted
    /// in the outcome they ended in; each is logged as a `warn` event. Expected during
    /// a replay; otherwise a sign of a backlog older than the window.
    pub past_dedup_window: u64,
    /// Trouble met, by kind (handler errors, panics, failed pops, ...).
    pub errors: BTreeMap<ErrorKind, u64>,
    /// Why it stopped.
    pub stopped: Stopped,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "processed {}, committed {}, already done {}, failed {}, refused {}, dead-lettered {}, lease lost {}, unknown {}, released {}, abandoned {}",
            self.processed,
            self.committed,
            self.already_done,
            self.failed,
            self.refused,
            self.dead_lettered,
            self.lease_lost,
            self.unknown,
            self.released,
            self.abandoned
        )?;
        if self.retries > 0 {
            write!(f, ", handler retries {}", self.retries)?;
        }
        if self.past_dedup_window > 0 {
            write!(f, "; past the dedup window {}", self.past_dedup_window)?;
        }
        if !self.errors.is_empty() {
            let errors: Vec<String> = self
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            write!(f, "; errors: {}", errors.join(", "))?;
        }
        Ok(())
    }
}

/// What the worker's lanes report back: the running count, and the broker's refusal
/// of a call for good (401, 403), which stops the worker.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tally {
    summary: Arc<Mutex<Summary>>,
    refusal: Arc<Refusal>,
}

/// The first refusal for good, and the wake-up of the run loop that waits for one.
#[derive(Debug, Default)]
struct Refusal {
    error: Mutex<Option<Error>>,
    notify: tokio::sync::Notify,
}

impl Tally {
    pub(crate) fn add(&self, f: impl FnOnce(&mut Summary)) {
        f(&mut self.summary.lock().unwrap_or_else(PoisonError::into_inner));
    }

    pub(crate) fn error(&self, kind: ErrorKind) {
        self.add(|s| *s.errors.entry(kind).or_default() += 1);
    }

    /// The count so far, taken out.
    pub(crate) fn take(&self) -> Summary {
        std::mem::take(&mut self.summary.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Records a refusal for good (the first one is kept) and wakes the run loop.
    pub(crate) fn refuse(&self, e: Error) {
        let mut slot = self
            .refusal
            .error
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if slot.is_none() {
            *slot = Some(e);
        }
        drop(slot);
        self.refusal.notify.notify_one();
    }

    /// Resolves with the first refusal for good.
    pub(crate) async fn refused(&self) -> Error {
        loop {
            let notified = self.refusal.notify.notified();
            if let Some(e) = self
                .refusal
                .error
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take()
            {
                return e;
            }
            notified.await;
        }
    }
}
