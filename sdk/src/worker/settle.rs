//! How a worker settles each message, so that nothing comes back forever: the step
//! commits, or the message is acked on its own as the outcome requires.

use crate::client::Client;
use crate::consume::lease::LeaseKeeper;
use crate::error::{Error, RollbackReason};
use crate::message::{AckStatus, Message};
use crate::txn::{Commit, Gate, TransactionBuilder};

use super::summary::{ErrorKind, Tally};

/// How the worker settled one message; see [`crate::Worker::on_settled`].
///
/// ```
/// use queen_sdk::Outcome;
/// let o = Outcome::AlreadyDone { retried: true };
/// assert_eq!(o.name(), "already_done");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Outcome {
    /// Its step committed.
    Committed {
        /// The id the broker minted for the transaction.
        transaction_id: String,
        /// The answer came to a resend (an earlier attempt may have applied).
        retried: bool,
    },
    /// Its step was already done (a [`once`](crate::TransactionBuilder::once) marker
    /// that exists, or a `duplicate` rollback): the message was acked `completed` on
    /// its own. With `retried`, also a resend whose `rejected_ack` says the first
    /// attempt's ack most probably applied and released the lease (nothing left to
    /// ack).
    AlreadyDone {
        /// The verdict came to a resend: the first attempt most probably committed.
        retried: bool,
    },
    /// Acked `failed` (the handler failed or panicked, or the step cannot commit).
    Failed {
        /// The reason sent with the ack.
        error: String,
        /// The ack was past the queue's `retryLimit`: the message is dead-lettered.
        dead_lettered: bool,
    },
    /// A gate refused its step for a reason other than "already done" (a lapsed lock's
    /// guard, a failed `required` condition), and no
    /// [`Worker::on_refused`](crate::Worker::on_refused) handler took it: acked `failed`
    /// with the gate as the reason, so it comes back. Nothing of the step was written.
    Refused {
        /// The gate that refused the step.
        gate: Gate,
        /// The ack was past the queue's `retryLimit`: the message is dead-lettered.
        dead_lettered: bool,
    },
    /// Its payload does not decode: dead-lettered.
    DeadLettered {
        /// The decoding error, kept on the dead letter.
        reason: String,
    },
    /// The lease is gone: nothing was committed; the lease holder has the message.
    LeaseLost,
    /// A call may have applied or not: left to the lease's expiry.
    Unknown {
        /// What failed.
        error: String,
    },
}

impl Outcome {
    /// The outcome's name, as on the step's span (`committed`, `already_done`,
    /// `failed`, `refused`, `dead_lettered`, `lease_lost`, `unknown`).
    ///
    /// ```
    /// assert_eq!(queen_sdk::Outcome::LeaseLost.name(), "lease_lost");
    /// ```
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Committed { .. } => "committed",
            Outcome::AlreadyDone { .. } => "already_done",
            Outcome::Failed { .. } => "failed",
            Outcome::Refused { .. } => "refused",
            Outcome::DeadLettered { .. } => "dead_lettered",
            Outcome::LeaseLost => "lease_lost",
            Outcome::Unknown { .. } => "unknown",
        }
    }
}

/// What committing a step came to: settled, or refused by a gate and waiting for a
/// decision (the handler's [`crate::Worker::on_refused`], or [`refuse`]).
pub(crate) enum Step {
    Settled(Outcome),
    Refused(Gate),
}

/// Commits the handler's step for `head` (adding the ack of `head` if the step lacks
/// it) and settles what the commit answers, but for a refusal by a gate other than an
/// existing `once` marker: that is the caller's to decide.
pub(crate) async fn commit(
    client: &Client,
    tally: &Tally,
    head: &Message<()>,
    keeper: &LeaseKeeper,
    step: TransactionBuilder,
) -> Step {
    if keeper.is_lost() {
        // Its ack would roll back (`rejected_ack`); the lease holder has the message.
        tracing::warn!("lease lost before the step was committed: dropped");
        tally.add(|s| s.lease_lost += 1);
        return Step::Settled(Outcome::LeaseLost);
    }
    let step = if step.acks(head) {
        step
    } else {
        step.ack(head)
    };
    Step::Settled(match step.commit().await {
        Ok(Commit::Committed(c)) => {
            tracing::Span::current().record("step_txn", c.transaction_id.as_str());
            tracing::debug!(retried = c.retried, "step committed");
            tally.add(|s| s.committed += 1);
            Outcome::Committed {
                transaction_id: c.transaction_id,
                retried: c.retried,
            }
        }
        // A `once` marker exists: the step was done before. Its ack rolled back with
        // it, so the message must be acked alone or it comes back at every expiry.
        Ok(Commit::Gated { gate, retried, .. }) if gate.already_done() => {
            tracing::info!(%gate, retried, "step gated: already done; acking the message alone");
            ack_done(client, tally, head, keeper, retried).await
        }
        // Any other gate refused the step: not done, and not to be settled as done.
        Ok(Commit::Gated { gate, .. }) => {
            tracing::info!(%gate, "step refused by a gate");
            tally.error(ErrorKind::Gated);
            return Step::Refused(gate);
        }
        Err(Error::RolledBack {
            reason: RollbackReason::Duplicate,
            retried,
            ..
        }) => {
            tracing::info!(
                retried,
                "step rolled back as a duplicate: already done; acking the message alone"
            );
            ack_done(client, tally, head, keeper, retried).await
        }
        // A resend found the lease gone: most probably the first attempt committed and
        // its ack released the lease (the last message of the batch). Nothing can be
        // acked now; if the lease was truly lost instead, the redelivered step finds
        // itself done (its derived ids make it a duplicate) and is acked then.
        Err(Error::RolledBack {
            reason: RollbackReason::RejectedAck,
            retried: true,
            ..
        }) => {
            tracing::info!(
                "the step's answer was lost and its resend found the lease released: the first attempt most probably committed"
            );
            keeper.mark_lost();
            tally.add(|s| s.already_done += 1);
            Outcome::AlreadyDone { retried: true }
        }
        Err(Error::RolledBack {
            reason: RollbackReason::RejectedAck,
            ..
        }) => {
            tracing::warn!(
                "step rolled back: the lease was lost; the lease holder has the message"
            );
            keeper.mark_lost();
            tally.add(|s| s.lease_lost += 1);
            Outcome::LeaseLost
        }
        Err(e) => match ErrorKind::of(&e) {
            kind @ (ErrorKind::OutcomeUnknown | ErrorKind::Unavailable | ErrorKind::Decode) => {
                tracing::warn!(error = %e, "step outcome unknown: left to the lease's expiry");
                tally.error(kind);
                tally.add(|s| s.unknown += 1);
                Outcome::Unknown {
                    error: e.to_string(),
                }
            }
            kind => {
                tracing::warn!(error = %e, "step cannot commit: acking the message failed");
                tally.error(kind);
                fail(client, tally, head, keeper, &e.to_string()).await
            }
        },
    })
}

/// Acks `head` `completed` on its own: its step was already done.
async fn ack_done(
    client: &Client,
    tally: &Tally,
    head: &Message<()>,
    keeper: &LeaseKeeper,
    retried: bool,
) -> Outcome {
    match client.ack(head, AckStatus::Completed).await {
        Ok(out) if out.success => {
            tally.add(|s| s.already_done += 1);
            Outcome::AlreadyDone { retried }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, &e),
    }
}

/// Settles a step refused by `gate` that no handler took: acked `failed` with the gate
/// as the reason (it counts an attempt; the queue's `retryLimit` dead-letters it in the
/// end). Never acked as done: nothing of the step was written.
pub(crate) async fn refuse(
    client: &Client,
    tally: &Tally,
    head: &Message<()>,
    keeper: &LeaseKeeper,
    gate: Gate,
) -> Outcome {
    let status = AckStatus::Failed {
        error: gate.to_string(),
    };
    match client.ack(head, status).await {
        Ok(out) if out.success => {
            tracing::info!(%gate, dlq = out.dlq, "refused step: acked failed");
            tally.add(|s| {
                if out.dlq {
                    s.dead_lettered += 1;
                } else {
                    s.refused += 1;
                }
            });
            Outcome::Refused {
                gate,
                dead_lettered: out.dlq,
            }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, &e),
    }
}

/// Acks `head` `failed` with `why`: it counts an attempt, and the queue's
/// `retryLimit` dead-letters it in the end.
pub(crate) async fn fail(
    client: &Client,
    tally: &Tally,
    head: &Message<()>,
    keeper: &LeaseKeeper,
    why: &str,
) -> Outcome {
    let status = AckStatus::Failed {
        error: why.to_string(),
    };
    match client.ack(head, status).await {
        Ok(out) if out.success => {
            tracing::info!(error = why, dlq = out.dlq, "acked failed");
            tally.add(|s| {
                if out.dlq {
                    s.dead_lettered += 1;
                } else {
                    s.failed += 1;
                }
            });
            Outcome::Failed {
                error: why.to_string(),
                dead_lettered: out.dlq,
            }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, &e),
    }
}

/// Dead-letters an undecodable message with the decoding error as the reason.
pub(crate) async fn dead_letter(
    client: &Client,
    tally: &Tally,
    msg: &Message<serde_json::Value>,
    keeper: &LeaseKeeper,
    reason: &str,
) -> Outcome {
    tally.error(ErrorKind::Undecodable);
    match client.ack_dlq(msg, reason).await {
        Ok(out) if out.success => {
            tracing::warn!(%reason, "payload does not decode: dead-lettered");
            tally.add(|s| s.dead_lettered += 1);
            Outcome::DeadLettered {
                reason: reason.to_string(),
            }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, &e),
    }
}

/// An ack refused: the lease is gone.
fn refused(tally: &Tally, keeper: &LeaseKeeper, why: Option<String>) -> Outcome {
    tracing::warn!(refused = ?why, "ack refused: the lease was lost");
    keeper.mark_lost();
    tally.add(|s| s.lease_lost += 1);
    Outcome::LeaseLost
}

/// An ack that failed: it may have applied or not.
fn unknown(tally: &Tally, e: &Error) -> Outcome {
    tracing::warn!(error = %e, "ack failed: left to the lease's expiry");
    tally.error(ErrorKind::of(e));
    tally.add(|s| s.unknown += 1);
    Outcome::Unknown {
        error: e.to_string(),
    }
}
