//! How a worker settles each message, so that nothing comes back forever: the step
//! commits, or the message is acked on its own as the outcome requires.

use crate::client::Client;
use crate::consume::lease::LeaseKeeper;
use crate::error::{Error, RollbackReason};
use crate::message::{AckStatus, Message};
use crate::txn::{Commit, Gate, GateKind, StepResult, TransactionBuilder};

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
    /// guard, a failed `required` condition): nothing of the step was written, and the
    /// message is not counted as done. Either the
    /// [`Worker::on_refused`](crate::Worker::on_refused) handler's step committed instead
    /// (`transaction_id` is `Some`: a rejection pushed, the message acked as that step
    /// said), or, without one, the message was acked `failed` with the gate as the
    /// reason, so it comes back.
    Refused {
        /// The gate that refused the step.
        gate: Gate,
        /// The refusal's step, when `on_refused` answered one and it committed.
        transaction_id: Option<String>,
        /// The message was dead-lettered (the refusal's step acked it `dlq`, or the
        /// `failed` ack was past the queue's `retryLimit`).
        dead_lettered: bool,
    },
    /// The broker refused the worker's call for good (401, 403): nothing of the step
    /// applied. The worker stops with a [`WorkerError`](crate::WorkerError), and the
    /// message is left to its lease.
    Stopped {
        /// The refusal.
        error: String,
    },
    /// Dead-lettered: its payload does not decode, or its step (committed) acked it
    /// `dlq` or `failed` past the queue's retry limit.
    DeadLettered {
        /// Why: the decoding error (kept on the dead letter), or the step that did it.
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
    /// `failed`, `refused`, `dead_lettered`, `lease_lost`, `unknown`, `stopped`).
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
            Outcome::Stopped { .. } => "stopped",
        }
    }
}

/// What committing a step came to: settled, or refused by a gate and waiting for a
/// decision (the handler's [`crate::Worker::on_refused`], or [`refuse`]).
pub(crate) enum Step {
    Settled(Outcome),
    Refused(Gate),
}

/// Whose step is committed: the handler's, or `on_refused`'s after `gate` refused the
/// handler's (then a commit is the refusal settled, not the work done).
pub(crate) enum Role {
    Handler,
    Refusal(Gate),
}

/// Whether `e` is the broker refusing the worker for good: its token or role.
fn refused_for_good(e: &Error) -> bool {
    matches!(
        e,
        Error::Api {
            status: 401 | 403,
            ..
        } | Error::Token { .. }
    )
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
    role: Role,
) -> Step {
    if keeper.is_lost() {
        // Its ack would roll back (`rejected_ack`); the lease holder has the message.
        tracing::warn!("lease lost before the step was committed: dropped");
        tally.add(|s| s.lease_lost += 1);
        return Step::Settled(Outcome::LeaseLost);
    }
    // How the step acks `head` (the runner adds a `completed` ack if it does not). A
    // step done before is settled as it would have settled the message: a step that
    // acks it `failed` (or `dlq`) and pushes a rejection, run again, must not turn into
    // a `completed` ack because its push is now a duplicate.
    let (step, status) = match step.ack_status(head).cloned() {
        Some(status) => (step, status),
        None => (step.ack(head), AckStatus::Completed),
    };
    Step::Settled(match step.commit().await {
        Ok(Commit::Committed(c)) => {
            tracing::Span::current().record("step_txn", c.transaction_id.as_str());
            tracing::debug!(retried = c.retried, "step committed");
            // The step dead-lettered the message (it acked it `dlq`, or `failed` past the
            // retry limit): counted so, not as work done. Only such a step's results are
            // read: a `completed` step's are never decoded here (decoding them was a
            // measurable part of a step's cost; see `Committed`).
            let dead_lettered = match status {
                AckStatus::Completed | AckStatus::Retry => false,
                AckStatus::Dlq => true,
                AckStatus::Failed { .. } => c.results().iter().any(|r| {
                    matches!(r, StepResult::Ack(a) if a.dlq && a.transaction_id == head.transaction_id)
                }),
            };
            match role {
                Role::Handler if dead_lettered => {
                    tally.add(|s| s.dead_lettered += 1);
                    Outcome::DeadLettered {
                        reason: format!("its step {} dead-lettered it", c.transaction_id),
                    }
                }
                Role::Handler => {
                    tally.add(|s| s.committed += 1);
                    Outcome::Committed {
                        transaction_id: c.transaction_id,
                        retried: c.retried,
                    }
                }
                Role::Refusal(gate) => {
                    tally.add(|s| {
                        if dead_lettered {
                            s.dead_lettered += 1;
                        } else {
                            s.refused += 1;
                        }
                    });
                    Outcome::Refused {
                        gate,
                        transaction_id: Some(c.transaction_id),
                        dead_lettered,
                    }
                }
            }
        }
        // The SDK's step marker exists: an earlier attempt of this very step committed,
        // its ack with it, and only its answer was lost. Nothing is left to ack (a
        // second `failed` ack would count a second attempt).
        Ok(Commit::Gated { gate, .. }) if gate.kind == GateKind::Step => {
            tracing::info!(%gate, "the step's answer was lost; its resend found it committed");
            match status {
                AckStatus::Dlq => {
                    tally.add(|s| s.dead_lettered += 1);
                    Outcome::DeadLettered {
                        reason: "its step, committed by an earlier attempt, dead-lettered it"
                            .into(),
                    }
                }
                AckStatus::Completed | AckStatus::Retry | AckStatus::Failed { .. } => {
                    tally.add(|s| s.already_done += 1);
                    Outcome::AlreadyDone { retried: true }
                }
            }
        }
        // A `once` marker exists: the step was done before. Its ack rolled back with
        // it, so the message must be acked alone or it comes back at every expiry.
        Ok(Commit::Gated { gate, retried, .. }) if gate.already_done() => {
            tracing::info!(%gate, retried, "step gated: already done; acking the message alone");
            ack_done(client, tally, head, keeper, retried, status).await
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
            ack_done(client, tally, head, keeper, retried, status).await
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
        // Refused for good (401, 403): nothing applied, and no ack would be taken.
        Err(e) if refused_for_good(&e) => stop(tally, e),
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

/// Acks `head` on its own as its step, done before, acked it (`completed`, or the
/// `failed` / `dlq` / `retry` the step said): the step's ack rolled back with it.
async fn ack_done(
    client: &Client,
    tally: &Tally,
    head: &Message<()>,
    keeper: &LeaseKeeper,
    retried: bool,
    status: AckStatus,
) -> Outcome {
    match status {
        AckStatus::Completed => {}
        AckStatus::Failed { error } => return fail(client, tally, head, keeper, &error).await,
        other => {
            // `dlq` or `retry`: what the step said, alone.
            let dlq = matches!(other, AckStatus::Dlq);
            return match client.ack(head, other).await {
                Ok(out) if out.success && dlq => {
                    tally.add(|s| s.dead_lettered += 1);
                    Outcome::DeadLettered {
                        reason: "its step, done before, dead-lettered it".into(),
                    }
                }
                Ok(out) if out.success => {
                    tally.add(|s| s.failed += 1);
                    Outcome::Failed {
                        error: "its step, done before, gave it back (retry)".into(),
                        dead_lettered: false,
                    }
                }
                Ok(out) => refused(tally, keeper, out.error),
                Err(e) => unknown(tally, e),
            };
        }
    }
    match client.ack(head, AckStatus::Completed).await {
        Ok(out) if out.success => {
            tally.add(|s| s.already_done += 1);
            Outcome::AlreadyDone { retried }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, e),
    }
}

/// Settles a step refused by `gate` that no handler took (or whose `on_refused` handler
/// failed, `why`): acked `failed` with the gate as the reason (it counts an attempt; the
/// queue's `retryLimit` dead-letters it in the end). Never acked as done: nothing of the
/// step was written.
pub(crate) async fn refuse(
    client: &Client,
    tally: &Tally,
    head: &Message<()>,
    keeper: &LeaseKeeper,
    gate: Gate,
    why: Option<&str>,
) -> Outcome {
    let error = match why {
        Some(why) => format!("{gate}; {why}"),
        None => gate.to_string(),
    };
    let status = AckStatus::Failed { error };
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
                transaction_id: None,
                dead_lettered: out.dlq,
            }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, e),
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
        Err(e) => unknown(tally, e),
    }
}

/// Why the worker dead-letters a message it did not process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// Its payload does not decode (counted as an error of that kind).
    Undecodable,
    /// It is older than its queue's dedup window ([`super::PastWindow::DeadLetter`]).
    PastWindow,
}

/// Dead-letters a message unprocessed, with `reason`.
pub(crate) async fn dead_letter<T>(
    client: &Client,
    tally: &Tally,
    msg: &Message<T>,
    keeper: &LeaseKeeper,
    reason: &str,
    cause: Cause,
) -> Outcome {
    if cause == Cause::Undecodable {
        tally.error(ErrorKind::Undecodable);
    }
    match client.ack_dlq(msg, reason).await {
        Ok(out) if out.success => {
            tracing::warn!(%reason, ?cause, "dead-lettered unprocessed");
            tally.add(|s| s.dead_lettered += 1);
            Outcome::DeadLettered {
                reason: reason.to_string(),
            }
        }
        Ok(out) => refused(tally, keeper, out.error),
        Err(e) => unknown(tally, e),
    }
}

/// An ack refused: the lease is gone.
fn refused(tally: &Tally, keeper: &LeaseKeeper, why: Option<String>) -> Outcome {
    tracing::warn!(refused = ?why, "ack refused: the lease was lost");
    keeper.mark_lost();
    tally.add(|s| s.lease_lost += 1);
    Outcome::LeaseLost
}

/// An ack that failed: it may have applied or not; refused for good (401, 403), the
/// worker stops.
fn unknown(tally: &Tally, e: Error) -> Outcome {
    if refused_for_good(&e) {
        return stop(tally, e);
    }
    tracing::warn!(error = %e, "ack failed: left to the lease's expiry");
    tally.error(ErrorKind::of(&e));
    tally.add(|s| s.unknown += 1);
    Outcome::Unknown {
        error: e.to_string(),
    }
}

/// The broker refused the worker's call for good: the message is left to its lease,
/// and the worker is told to stop with `e`.
fn stop(tally: &Tally, e: Error) -> Outcome {
    tracing::error!(error = %e, "the broker refused the worker's call for good: stopping");
    tally.error(ErrorKind::Refused);
    tally.add(|s| s.abandoned += 1);
    let error = e.to_string();
    tally.refuse(e);
    Outcome::Stopped { error }
}
