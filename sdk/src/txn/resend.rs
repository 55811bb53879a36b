//! When a step may be sent again after its answer was lost, and what makes it so.
//!
//! After a 5xx or a dropped connection the first attempt may have committed. The broker
//! keeps no request id, so a resend is harmless only when something the first commit
//! *left behind* makes the broker refuse it, and the refusal says "done":
//!
//! - a pushed message: the resend's push names the same `transactionId` (the body is
//!   rendered once per `commit()`), so it rolls back as `duplicate`;
//! - a [`once`](TransactionBuilder::once) marker: the resend finds it and is gated;
//! - nothing to repeat: a step of `completed` acks and KV reads alone (acking a
//!   message twice is a no-op).
//!
//! A fenced ack is not enough: acking one message of a batch does not release the
//! batch's lease while the rest is leased, so the resend's ack passes its fence and
//! the step applies twice (an `incr` counted twice). A `required` condition or a lock's
//! guard is not enough either: the first commit leaves it as true as it found it (a
//! decrement above its `min`, a token still valid). Neither is a required write whose
//! application breaks its own precondition (a `putIfAbsent`, an `expect`ed version)
//! on its own: its refusal on a resend cannot tell "the first attempt wrote this" from
//! "it was refused both times".
//!
//! Every other step gets the SDK's own marker, [`STEP_MARKER_NS`]: a `required`
//! `putIfAbsent` placed first among the step's KV operations, so that a resend after a
//! commit is gated by it before any condition of yours is evaluated and answers
//! [`Commit::Gated`](crate::Commit::Gated) with [`GateKind::Step`]. On a broker known to
//! have no KV (Queen v0), or with [`Resend::Never`], such a step is not resent: a
//! failure that may have applied is [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown).

use std::collections::BTreeSet;

use super::{GateKind, Operation, TransactionBuilder, Ttl};
use crate::client::Replay;
use crate::error::{Capability, Error, Result};
use crate::ids::derive_id;
use crate::kv::{Kv, KvOp};
use crate::message::AckStatus;
use crate::validate;

/// The KV namespace of the marker the SDK adds to a step that nothing else guards
/// against a resend (see [`TransactionBuilder::commit`]): one row per such step, kept
/// for twice the client's retry deadline (at least a minute), its value `true`. The
/// rows show in KV listings and expire by themselves.
///
/// ```
/// assert_eq!(queen_sdk::STEP_MARKER_NS, "queen.steps");
/// ```
pub const STEP_MARKER_NS: &str = "queen.steps";

/// How a step is sent again after a failure that may have applied it (a 5xx, a lost
/// connection), when nothing the step itself writes guards the resend; see
/// [`TransactionBuilder::resend`]. A step guarded by its own parts (a push, a `once`
/// marker) or harmless to repeat (`completed` acks and reads) is resent under every
/// policy.
///
/// ```
/// use queen_sdk::{Resend, Ttl};
/// let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// // A hot path that would rather not pay for the marker: not resent; a failure that
/// // may have applied is `Error::OutcomeUnknown`, and a worker leaves the message to
/// // its lease (redelivered if the step did not apply, gone if it did).
/// let step = client.transaction().kv(|k| k.incr("stats", "n", 1, Ttl::Forever)).resend(Resend::Never);
/// # let _ = step;
/// assert_eq!(Resend::default(), Resend::Marked);
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[non_exhaustive]
pub enum Resend {
    /// The step carries the SDK's step marker ([`STEP_MARKER_NS`]) and is resent: a
    /// resend after a commit is gated ([`GateKind::Step`]). One more KV write in the
    /// step's own transaction: on the cheapest such step (ack + `incr`, through the SDK
    /// against the durable reference broker, 64 workers) 0.86 of the throughput and
    /// 1.16 times the CPU per step without it (`examples/load/step-marker-cost.sh`,
    /// 6 rounds, medians). The default.
    #[default]
    Marked,
    /// No marker, and not resent once an attempt may have applied:
    /// [`Error::OutcomeUnknown`](crate::Error::OutcomeUnknown). Nothing to pay on the
    /// happy path; a worker leaves the message to its lease's expiry, whose
    /// redelivery finds the step done (its ack applied) or runs it again.
    Never,
    /// No marker, resent as it is: the step may apply twice (an `incr` counts twice).
    /// For a step you know to be harmless to repeat.
    AsIs,
}

/// The shortest time a step marker is kept.
const MIN_MARKER_TTL_SECS: u64 = 60;

/// What keeps a resend of a step from applying it twice.
#[derive(Debug)]
pub(super) enum Guard {
    /// Nothing to guard: a step of `completed` acks and KV reads alone.
    Harmless,
    /// A push or a `once` marker of the step's own: a resend after a commit rolls back
    /// as `duplicate` or is gated as already done.
    Own {
        /// Only within this call: a push whose id was minted for it (a step that acks
        /// nothing derives none).
        this_call_only: bool,
    },
    /// The SDK's step marker, added first among the KV operations.
    Marker {
        /// The `putIfAbsent`.
        op: KvOp,
        /// Its key was minted for this call (a step without leased acks), so a
        /// resend by the caller would not be guarded.
        this_call_only: bool,
    },
    /// Nothing, and no marker can be had (the broker has no KV) or the caller chose
    /// none ([`Resend::Never`], [`Resend::AsIs`]): resent only if the caller said so.
    Unguarded,
}

impl Guard {
    /// Whether the transport may send the body again after a failure that may have
    /// applied.
    pub(super) fn replay(&self, policy: Resend) -> Replay {
        match self {
            Guard::Own {
                this_call_only: true,
            }
            | Guard::Marker {
                this_call_only: true,
                ..
            } => Replay::Guarded,
            Guard::Harmless | Guard::Own { .. } | Guard::Marker { .. } => Replay::Safe,
            Guard::Unguarded if policy == Resend::AsIs => Replay::Safe,
            Guard::Unguarded => Replay::Unsafe,
        }
    }

    /// The marker, if this guard is one.
    pub(super) fn marker(&self) -> Option<&KvOp> {
        match self {
            Guard::Marker { op, .. } => Some(op),
            _ => None,
        }
    }
}

impl TransactionBuilder {
    /// How a resend of this step is kept from applying it twice.
    pub(super) fn guard_for_resend(&self) -> Result<Guard> {
        let has_push = self.ops.iter().any(|o| matches!(o, Operation::Push(_)));
        let has_once = self.kv.iter().any(|(_, kind)| *kind == GateKind::Once);
        let acks = self.ops.iter().any(|o| matches!(o, Operation::Ack { .. }));
        if has_once {
            return Ok(Guard::Own {
                this_call_only: false,
            });
        }
        if has_push {
            // A push names itself by the step's acks, else by an id minted for this
            // call, unless the caller named every push.
            let named = self.ops.iter().all(|o| match o {
                Operation::Push(p) => p.transaction_id.is_some(),
                Operation::Ack { .. } => true,
            });
            return Ok(Guard::Own {
                this_call_only: !acks && !named,
            });
        }
        // Reads and checks write nothing: reading twice is harmless.
        let only_completed_acks = self.kv.iter().all(|(k, _)| !k.writes())
            && self.timers.is_empty()
            && self.positions.is_empty()
            && self.ops.iter().all(|o| {
                matches!(
                    o,
                    Operation::Ack {
                        status: AckStatus::Completed,
                        ..
                    }
                )
            });
        if only_completed_acks {
            return Ok(Guard::Harmless);
        }
        if self.resend != Resend::Marked || self.client.lacks(Capability::Kv) {
            return Ok(Guard::Unguarded);
        }
        if self.kv.len() >= validate::MAX_KV_OPS {
            return Err(Error::invalid(
                "kv",
                format!(
                    "{} KV operations leave no room for the step marker that keeps a resend \
                     from applying this step twice (the limit is {} with it): add a `once` \
                     marker or a push of the step's own, or split the step",
                    self.kv.len(),
                    validate::MAX_KV_OPS
                ),
            ));
        }
        let keys: usize = self.kv.iter().map(|(k, _)| k.key_count()).sum();
        if keys >= validate::MAX_KV_KEYS {
            return Err(Error::invalid(
                "kv",
                format!(
                    "{keys} KV keys leave no room for the step marker that keeps a resend \
                     from applying this step twice (the limit is {} with it): add a `once` \
                     marker or a push of the step's own, or split the step",
                    validate::MAX_KV_KEYS
                ),
            ));
        }
        let ttl = self
            .client
            .retry_policy()
            .overall_deadline()
            .as_secs()
            .saturating_mul(2)
            .max(MIN_MARKER_TTL_SECS);
        let (key, this_call_only) = match self.derived_marker_key() {
            Some(key) => (key, false),
            None => (uuid::Uuid::now_v7().to_string(), true),
        };
        let marker = Kv
            .put_if_absent(STEP_MARKER_NS, key, &true, Ttl::seconds(ttl))
            .required();
        Ok(Guard::Marker {
            op: marker.into(),
            this_call_only,
        })
    }

    /// The marker's key when the step acks leased messages: derived from the leases and
    /// acks, so a clone of the builder sent again by hand is the same step, and a
    /// redelivery under a new lease is a new one. Any other step's key is new for each
    /// call: a builder cloned as a template for several steps must not make them one.
    fn derived_marker_key(&self) -> Option<String> {
        let mut leases = BTreeSet::new();
        let mut acks = BTreeSet::new();
        for op in &self.ops {
            if let Operation::Ack {
                message_id,
                group,
                lease_id: Some(lease),
                status,
                ..
            } = op
            {
                leases.insert(lease.as_str());
                acks.insert(super::render::ack_name(message_id, group, status.wire().0));
            }
        }
        if leases.is_empty() {
            return None;
        }
        let mut parts = vec!["step"];
        parts.extend(leases);
        parts.extend(acks.iter().map(String::as_str));
        Some(derive_id(&parts))
    }
}
