//! The one error type of the SDK.
//!
//! Two brokers speak this API: Queen 2 (the replicated log, `spec/transaction.md`) and
//! Queen v0 (the PostgreSQL broker, `spec/transaction-v0-postgres.md`). The SDK has no
//! switch between them: it decodes what comes back. So the v0 answers that carry the same
//! meaning in another shape (a rollback with only an `error` text, a missing feature
//! answered by a web page) are mapped here onto the same typed outcomes.

use std::fmt;
use std::time::Duration;

use crate::transport::TransportError;

/// Why a transaction rolled back (everything but a lost `required` KV gate, which is a
/// value: [`crate::Commit::Gated`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Error, RollbackReason};
/// let step = client.transaction().push("receipts", |p| p.transaction_id("receipt-7"));
/// assert!(step.clone().commit().await?.is_committed());
/// // The same transactionId again: the broker rolls the whole step back.
/// match step.commit().await {
///     Err(Error::RolledBack { reason: RollbackReason::Duplicate, .. }) => {}
///     other => panic!("expected a duplicate, got {other:?}"),
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackReason {
    /// A fenced ack's lease had expired or moved on, or an unfenced ack found nothing
    /// to ack (`rejected_ack`, also spelled `ack_rejected`).
    RejectedAck,
    /// A pushed `transactionId` was already in its partition's dedup window.
    Duplicate,
    /// A required KV precondition lost. [`crate::TransactionBuilder::commit`] and
    /// [`crate::KvStore::batch`] answer that as a value (`Gated`), never as this error;
    /// it only comes from [`RollbackReason::parse`].
    KvPrecondition,
    /// A position named no offset of its partition.
    RejectedPosition,
    /// A reason this SDK does not know yet, kept verbatim.
    Other(String),
}

impl RollbackReason {
    /// Parses the wire's `reason`; an unknown one is kept as [`RollbackReason::Other`].
    ///
    /// ```
    /// use queen_sdk::RollbackReason;
    /// assert_eq!(RollbackReason::parse("ack_rejected"), RollbackReason::RejectedAck);
    /// assert_eq!(RollbackReason::parse("duplicate"), RollbackReason::Duplicate);
    /// assert_eq!(RollbackReason::parse("cosmic_ray"), RollbackReason::Other("cosmic_ray".into()));
    /// ```
    pub fn parse(s: &str) -> Self {
        match s {
            "rejected_ack" | "ack_rejected" => Self::RejectedAck,
            "duplicate" => Self::Duplicate,
            "kv_precondition" => Self::KvPrecondition,
            "rejected_position" => Self::RejectedPosition,
            other => Self::Other(other.to_string()),
        }
    }

    /// Classifies a rollback that came without a `reason` (Queen v0 answers only an
    /// `error` text) from that text: a duplicate pushed `transactionId` (v0's unique
    /// constraint on `(partition, transaction_id)`, or a `QDUP` error) is
    /// [`RollbackReason::Duplicate`]; a refused ack (`ACK operation failed: Invalid or
    /// expired lease`, `... Message not found`, a `QTXN` or `QACK` error) is
    /// [`RollbackReason::RejectedAck`]; anything else (v0's `ACK operation failed:
    /// Unknown error` for a status it does not take, `Unknown operation type: ...`, a
    /// database error) is [`RollbackReason::Other`] with the text kept whole.
    ///
    /// ```
    /// use queen_sdk::RollbackReason;
    /// let dup = r#"duplicate key value violates unique constraint "messages_partition_transaction_unique""#;
    /// assert_eq!(RollbackReason::from_error_text(dup), RollbackReason::Duplicate);
    /// let lease = "ACK operation failed: Invalid or expired lease";
    /// assert_eq!(RollbackReason::from_error_text(lease), RollbackReason::RejectedAck);
    /// let gone = "ACK operation failed: Message not found";
    /// assert_eq!(RollbackReason::from_error_text(gone), RollbackReason::RejectedAck);
    /// // v0's answer to an ack status its transaction does not take: kept, not a refusal.
    /// let status = "ACK operation failed: Unknown error";
    /// assert_eq!(RollbackReason::from_error_text(status), RollbackReason::Other(status.into()));
    /// assert_eq!(
    ///     RollbackReason::from_error_text("out of memory"),
    ///     RollbackReason::Other("out of memory".into())
    /// );
    /// ```
    pub fn from_error_text(error: &str) -> Self {
        let lower = error.to_ascii_lowercase();
        if error.starts_with("QDUP")
            || (lower.contains("duplicate key value") && lower.contains("transaction"))
        {
            Self::Duplicate
        } else if error.starts_with("QTXN")
            || error.starts_with("QACK")
            || lower.contains("invalid or expired lease")
            || lower.contains("message not found")
            // v0 says `ACK operation failed: Unknown error` for an ack status its
            // transaction does not take (`retry`): not a refusal of the ack's lease.
            || (lower.starts_with("ack operation failed") && !lower.ends_with("unknown error"))
        {
            Self::RejectedAck
        } else {
            Self::Other(error.to_string())
        }
    }

    /// The wire spelling (also what `Display` writes).
    ///
    /// ```
    /// use queen_sdk::RollbackReason;
    /// assert_eq!(RollbackReason::RejectedAck.as_str(), "rejected_ack");
    /// assert_eq!(RollbackReason::Duplicate.to_string(), "duplicate");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            Self::RejectedAck => "rejected_ack",
            Self::Duplicate => "duplicate",
            Self::KvPrecondition => "kv_precondition",
            Self::RejectedPosition => "rejected_position",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for RollbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A feature of the API that some brokers do not have. Queen v0 (the PostgreSQL broker)
/// has pushes, pops, acks, leases and the ack + push transaction, and none of these.
///
/// ```
/// use queen_sdk::Capability;
/// assert_eq!(Capability::Kv.to_string(), "kv");
/// assert_eq!(Capability::Timers.as_str(), "timers");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Capability {
    /// The KV store (`/api/v1/kv`, a transaction's `kv`, `once`).
    Kv,
    /// Timers (`/api/v1/timers`, a transaction's `timers`).
    Timers,
    /// Consumer positions set in a transaction (`positions`).
    Positions,
    /// Locks (`/api/v1/locks`).
    Locks,
}

impl Capability {
    /// Its name, as the API spells the part (`kv`, `timers`, `positions`, `locks`).
    ///
    /// ```
    /// assert_eq!(queen_sdk::Capability::Positions.as_str(), "positions");
    /// ```
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Kv => "kv",
            Self::Timers => "timers",
            Self::Positions => "positions",
            Self::Locks => "locks",
        }
    }

    /// Its bit in the client's sets of features learned.
    pub(crate) fn bit(self) -> u8 {
        match self {
            Self::Kv => 1,
            Self::Timers => 2,
            Self::Positions => 4,
            Self::Locks => 8,
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything that can go wrong.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Error, Ttl};
/// // A KV namespace must be lowercase: the SDK refuses before sending anything.
/// let step = client.transaction().kv(|k| k.put("Orders", "o-7", &"paid", Ttl::days(1)));
/// match step.commit().await {
///     Err(Error::Invalid { op, rule }) => println!("{op}: {rule}"),
///     other => panic!("expected Invalid, got {other:?}"),
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The request breaks a rule of the API; nothing was sent.
    #[error("invalid {op}: {rule}")]
    Invalid {
        /// The operation or part at fault, such as `kv[2]` or `push`.
        op: String,
        /// The rule it breaks.
        rule: String,
    },
    /// The broker refused the call or failed (`{"error", "code"}` with a 4xx or 5xx;
    /// `status` is 200 when a 2xx answer itself reports a failure).
    #[error("broker answered {status}{}: {message}", code.as_deref().map(|c| format!(" {c}")).unwrap_or_default())]
    Api {
        /// The HTTP status.
        status: u16,
        /// The broker's `code` (an open set: `bad_request`, `overloaded`, ...).
        code: Option<String>,
        /// The broker's `error` text.
        message: String,
        /// How long the broker asked to wait (429, 503).
        retry_after: Option<Duration>,
    },
    /// The transaction rolled back and wrote nothing.
    #[error("transaction rolled back ({reason}): {error}{}", if *retried { " [after a retry: the first attempt probably committed]" } else { "" })]
    RolledBack {
        /// Why.
        reason: RollbackReason,
        /// The broker's text (do not branch on it).
        error: String,
        /// This answer came to a retry of a call whose first answer was lost (a 5xx or
        /// a lost connection, not a 429): for `duplicate` and `rejected_ack` that means
        /// the first attempt most probably committed, and the step is done. (A lost gate
        /// is [`crate::Commit::Gated`], with its own `retried`.)
        retried: bool,
    },
    /// A call failed in a way that may or may not have applied it, and sending it again
    /// is not safe: a standalone KV write or timer schedule; a transaction on a broker
    /// without KV that nothing else guards (no step marker can be had there); or a
    /// transaction guarded for its own resends only (its step marker or push id minted
    /// for the call) whose last attempt may have applied. For a transaction, opt in
    /// with [`crate::TransactionBuilder::resend`] ([`crate::Resend::AsIs`]) to resend it as it is.
    #[error("the outcome is unknown (the call may have applied): {cause}")]
    OutcomeUnknown {
        /// What happened.
        cause: Box<Error>,
    },
    /// No connection, no whole answer in time, or a connection that broke
    /// mid-exchange; [`TransportError::kind`] says which.
    #[error("transport: {0}")]
    Transport(#[from] TransportError),
    /// The broker does not have this feature (Queen v0 has no KV, timers, positions or
    /// locks; Queen 2's engine 1.3 no positions or locks): its route answered with
    /// something other than the API (v0 serves its web console there) or with 404
    /// `no_such_route`, or, in a transaction, the broker is known to drop that part.
    /// When `committed` is true the broker committed the rest of the transaction and
    /// ignored this part: this is how a first transaction with a part such a broker
    /// drops ends, never as a commit; the client then refuses the next ones with that
    /// part before sending them, and only them (a broker without positions still gets
    /// KV steps). A client with one URL whose broker has committed such a part once
    /// knows it has it and stops checking its answers for it.
    #[error("the broker has no {capability} support{}", if *committed { "; it committed the rest of the transaction without it (only that part did not apply)" } else { "; nothing was applied" })]
    Unsupported {
        /// The missing feature.
        capability: Capability,
        /// Whether the broker committed the rest of the call anyway.
        committed: bool,
    },
    /// The broker's answer did not decode.
    #[error("undecodable answer: {message}")]
    Decode {
        /// What was wrong.
        message: String,
        /// The body, for diagnosis.
        body: String,
    },
    /// A payload did not serialise.
    #[error("payload does not serialise: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The retry policy's overall deadline passed while an attempt was in flight.
    #[error("the call's deadline passed during attempt {attempts}")]
    DeadlineExceeded {
        /// Attempts made, the interrupted one included.
        attempts: u32,
    },
    /// The client's [`crate::TokenProvider`] failed; nothing was sent.
    #[error("the token provider failed: {message}")]
    Token {
        /// Its error, as text.
        message: String,
    },
    /// A consumed message's payload does not decode as the consumer's type. Only a
    /// consumer set to hand such messages over ([`crate::Undecodable::Yield`]) yields
    /// this; by default they are dead-lettered. The delivery (still leased, with its
    /// payload as JSON) is yours to ack: dead-letter it, fail it, or complete it.
    #[error("message {} does not decode: {reason}", delivery.id)]
    Undecodable {
        /// The message, with its payload as JSON.
        delivery: Box<crate::Delivery<serde_json::Value>>,
        /// The decoding error.
        reason: String,
    },
    /// The retry policy gave up after more than one attempt (attempts used up, or the
    /// next wait would pass the deadline). A call that gives up after its first
    /// attempt answers that attempt's error itself.
    #[error("gave up after {attempts} attempts: {last}")]
    Exhausted {
        /// Attempts made.
        attempts: u32,
        /// The last failure.
        last: Box<Error>,
    },
}

impl Error {
    pub(crate) fn invalid(op: impl std::fmt::Display, rule: impl Into<String>) -> Self {
        Error::Invalid {
            op: op.to_string(),
            rule: rule.into(),
        }
    }

    /// The broker's `code`, for [`Error::Api`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let three = QueueOptions::new().option("retryLimit", "three"); // not a number
    /// let err = client.configure("orders", three).await.unwrap_err();
    /// assert_eq!(err.code(), Some("bad_request"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn code(&self) -> Option<&str> {
        match self {
            Error::Api { code, .. } => code.as_deref(),
            _ => None,
        }
    }

    /// The HTTP status, for [`Error::Api`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::QueueOptions;
    /// let three = QueueOptions::new().option("retryLimit", "three"); // not a number
    /// let err = client.configure("orders", three).await.unwrap_err();
    /// assert_eq!(err.status(), Some(400)); // a 4xx is never retried
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Api { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// Whether the broker answered that what the call names does not exist: an
    /// [`Error::Api`] with status 404 (a queue, a message, a dead letter), but not a
    /// 404 `no_such_route`, which says the broker lacks the route itself.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let err = client.queue_stats("no-such-queue").await.unwrap_err();
    /// assert!(err.is_not_found());
    /// assert_eq!((err.status(), err.code()), (Some(404), Some("not_found")));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::Api { status: 404, code, .. } if code.as_deref() != Some("no_such_route"))
    }

    /// Whether the call certainly did not apply, so sending it again is always safe:
    /// a 429, a 507 (storage full), or a connection that could not be made.
    pub(crate) fn surely_not_applied(&self) -> bool {
        match self {
            Error::Api { status, .. } => *status == 429 || *status == 507,
            Error::Transport(e) => e.is_connect(),
            _ => false,
        }
    }

    /// Whether a retry may help: 5xx, 429, and transport failures. Not a 507: a full
    /// broker stays full until someone frees space, so it is the caller's to handle.
    pub(crate) fn retryable(&self) -> bool {
        match self {
            Error::Api { status, .. } => *status == 429 || (*status >= 500 && *status != 507),
            // A connection that failed, timed out or broke mid-answer: the call may or
            // may not have applied; whether it may be resent is the caller's rule.
            Error::Transport(_) => true,
            _ => false,
        }
    }

    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}

/// Shorthand for a result whose error is [`Error`].
///
/// ```
/// fn ttl_of(setting: &str) -> queen_sdk::Result<queen_sdk::Ttl> {
///     setting.parse()
/// }
/// assert!(ttl_of("12h").is_ok());
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;
