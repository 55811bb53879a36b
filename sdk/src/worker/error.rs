//! How a worker that stopped for a reason its caller did not ask for says so: as an
//! `Err`, so that a `main` that runs it with `?` exits non-zero.

use std::fmt;

use crate::error::Error;

use super::summary::Summary;

/// Why a worker could not start or did not run to its shutdown signal.
///
/// ```
/// use queen_sdk::WorkerErrorKind;
/// assert_ne!(WorkerErrorKind::Invalid, WorkerErrorKind::Refused);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WorkerErrorKind {
    /// Its settings cannot work (`concurrency(0)`, `batch(0)`, a lease under a second,
    /// a bad queue name): nothing was sent.
    Invalid,
    /// The broker refused it in a way that trying again cannot change (a pop answered
    /// 401, 403 or the queue gone; a step or an ack answered 401 or 403): it stopped,
    /// after draining what it held.
    Refused,
}

/// A worker that stopped without being asked to, or could not start: what
/// [`Worker::run`](crate::Worker::run) and
/// [`Worker::run_until_idle`](crate::Worker::run_until_idle) answer instead of a
/// [`Summary`]. It keeps the summary of what was done before the stop, and converts
/// into the [`Error`] that caused it (so `?` works in a function that answers
/// [`crate::Result`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// use queen_sdk::{Client, StartAt, WorkerErrorKind};
/// // Settings that cannot work (a batch of 0) fail before anything is sent; a broker's
/// // refusal (a 401) is the same error, of kind `Refused`, with the summary so far.
/// let client = Client::new(broker.url())?;
/// let run = client
///     .worker::<u32>("orders")
///     .group("billing", StartAt::Beginning)
///     .batch(0)
///     .run(|_job, step| async move { Ok::<_, String>(step) }, std::future::pending())
///     .await;
/// let e = run.unwrap_err();
/// assert_eq!(e.kind(), WorkerErrorKind::Invalid);
/// assert_eq!(e.summary().processed, 0);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct WorkerError {
    kind: WorkerErrorKind,
    cause: Error,
    summary: Box<Summary>,
}

impl WorkerError {
    pub(crate) fn new(kind: WorkerErrorKind, cause: Error, summary: Summary) -> Self {
        WorkerError {
            kind,
            cause,
            summary: Box::new(summary),
        }
    }

    /// Why it stopped.
    pub fn kind(&self) -> WorkerErrorKind {
        self.kind
    }

    /// The error that stopped it (a 401's [`Error::Api`], the [`Error::Invalid`] of a
    /// setting, ...).
    pub fn cause(&self) -> &Error {
        &self.cause
    }

    /// What it did before it stopped.
    pub fn summary(&self) -> &Summary {
        &self.summary
    }

    /// What it did before it stopped, taken out.
    pub fn into_summary(self) -> Summary {
        *self.summary
    }
}

impl fmt::Display for WorkerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WorkerErrorKind::Invalid => write!(f, "the worker cannot start: {}", self.cause),
            WorkerErrorKind::Refused => write!(
                f,
                "the worker stopped: the broker refused it: {} ({})",
                self.cause, self.summary
            ),
        }
    }
}

impl std::error::Error for WorkerError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.cause)
    }
}

/// The cause, without the summary: `?` in a function that answers [`crate::Result`].
impl From<WorkerError> for Error {
    fn from(e: WorkerError) -> Error {
        e.cause
    }
}
