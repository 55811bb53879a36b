//! Which gate refused a step, and why, as types: a worker tells "already done" (a
//! `once` marker that exists) from "not allowed" (a lapsed lock, a failed condition)
//! by matching on them, not by comparing strings.

use std::fmt;

use serde_json::Value;

use crate::kv::KvOp;

/// Why a KV operation did not apply, as the broker says it (`reason`, or `kvReason`
/// when the operation was a gate).
///
/// ```
/// use queen_sdk::KvReason;
/// assert_eq!(KvReason::parse("exists"), KvReason::Exists);
/// assert_eq!(KvReason::Limit.as_str(), "limit");
/// assert_eq!(KvReason::parse("quota").to_string(), "quota"); // one this SDK does not know
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KvReason {
    /// The key exists (a `putIfAbsent`, or an `expect` of version 0).
    Exists,
    /// The key does not exist (a `delete`, a `check`, or an `expect` of a version).
    Absent,
    /// The key's version is not the one expected (a lock's guard after another holder
    /// took the lock; a lapsed lock whose row expired answers [`KvReason::Absent`]).
    Version,
    /// An `incr` would pass its `min` or `max`.
    Limit,
    /// An `incr` of a value that is not an integer.
    Type,
    /// A reason this SDK does not know, as the broker sent it.
    Other(String),
}

impl KvReason {
    /// The reason of the broker's text.
    pub fn parse(s: &str) -> KvReason {
        match s {
            "exists" => KvReason::Exists,
            "absent" => KvReason::Absent,
            "version" => KvReason::Version,
            "limit" => KvReason::Limit,
            "type" => KvReason::Type,
            other => KvReason::Other(other.to_string()),
        }
    }

    /// The broker's text for it.
    pub fn as_str(&self) -> &str {
        match self {
            KvReason::Exists => "exists",
            KvReason::Absent => "absent",
            KvReason::Version => "version",
            KvReason::Limit => "limit",
            KvReason::Type => "type",
            KvReason::Other(s) => s,
        }
    }
}

impl fmt::Display for KvReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which builder call made a gate, which decides what its refusal means.
///
/// ```
/// use queen_sdk::GateKind;
/// assert_ne!(GateKind::Once, GateKind::Guard);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum GateKind {
    /// [`TransactionBuilder::once`](crate::TransactionBuilder::once) or
    /// [`once_as`](crate::TransactionBuilder::once_as): refused because the marker
    /// exists: the step was done before, or, for `once_as`, another outcome set it
    /// ([`Gate::lost_to`]).
    Once,
    /// [`TransactionBuilder::guard`](crate::TransactionBuilder::guard): refused because
    /// the lock is no longer held (it lapsed, or was released or taken over).
    Guard,
    /// Any other `required` KV operation added with
    /// [`TransactionBuilder::kv`](crate::TransactionBuilder::kv): refused because its
    /// condition failed (stock below an `incr`'s `min`, a version that moved, ...).
    Condition,
    /// The SDK's own step marker ([`crate::STEP_MARKER_NS`]), which it adds to a step
    /// that nothing else guards against a resend: refused because the marker exists,
    /// so an earlier attempt of this very step committed, the whole of it (its acks
    /// included), and only its answer was lost. Always with `retried: true`; the
    /// gate's `index` is 0 and means nothing (your operations keep their own indices).
    Step,
}

/// The gate that refused a step: which `required` KV operation did not apply, and why.
/// Nothing of the step was written.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Commit, GateKind, KvReason, Ttl};
/// client.kv().put("stock", "sku-1", &1, Ttl::Forever).await?;
/// let reserve = || {
///     client
///         .transaction()
///         .once("reserved", "order-7", Ttl::days(1))
///         .kv(|k| k.incr("stock", "sku-1", -2, Ttl::Forever).min(0).required())
/// };
/// let Commit::Gated { gate, .. } = reserve().commit().await? else { panic!("1 - 2 < 0") };
/// assert_eq!((gate.kind, gate.index, gate.reason.clone()), (GateKind::Condition, 1, KvReason::Limit));
/// assert_eq!((gate.ns.as_str(), gate.key.as_str()), ("stock", "sku-1"));
/// assert!(!gate.already_done()); // refused: not done before
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Gate {
    /// Which builder call made it.
    pub kind: GateKind,
    /// Its place among the step's KV operations in the order they were added (each
    /// `.kv(..)`, `.once(..)` and `.guard(..)` call adds one), from 0.
    pub index: usize,
    /// Its slot in the broker's result index space (the step's acks and pushes come
    /// first): the answer's `failedIndex`.
    pub slot: usize,
    /// The namespace of the key.
    pub ns: String,
    /// The key (for a lock's guard, the lock row's: `name#slot`).
    pub key: String,
    /// Why it did not apply.
    pub reason: KvReason,
    /// The row's current version, if it exists.
    pub version: Option<u64>,
    /// The row's current value, if it exists (for a [`once_as`](crate::TransactionBuilder::once_as)
    /// marker, the outcome that set it).
    pub value: Option<Value>,
    /// The outcome this step's own `once_as` marker would have stored.
    claimed: Option<Value>,
}

impl Gate {
    /// Whether the refusal says the step's work already happened: a
    /// [`once`](crate::TransactionBuilder::once) marker that exists, or the SDK's step
    /// marker ([`GateKind::Step`]: this step's own earlier attempt). Only such a step may
    /// be settled as done; [`Client::worker`](crate::Client::worker) acks it `completed`
    /// on its own and hands every other refusal to the handler's decision.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let step = || client.transaction().once("paid", "order-7", Ttl::days(1));
    /// assert!(step().commit().await?.is_committed());
    /// let Commit::Gated { gate, .. } = step().commit().await? else { panic!("the marker exists") };
    /// assert!(gate.already_done());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn already_done(&self) -> bool {
        matches!(self.kind, GateKind::Once | GateKind::Step)
            && self.reason == KvReason::Exists
            && self.set_by_me()
    }

    /// Whether the marker is known to hold this step's own outcome: always for a marker
    /// that claims none; for a [`once_as`](crate::TransactionBuilder::once_as) marker,
    /// only when the broker sent the stored value and it is this step's. A refusal
    /// without the value (a broker may leave out a large one) is not taken as done: the
    /// step that lost a race would otherwise be settled as done and its other branch
    /// (a refund) never run.
    fn set_by_me(&self) -> bool {
        match (&self.claimed, &self.value) {
            (None, _) => true,
            (Some(mine), Some(stored)) => stored == mine,
            (Some(_), None) => false,
        }
    }

    /// The outcome that won, when this step's [`once_as`](crate::TransactionBuilder::once_as)
    /// marker was refused because another outcome set it first: the stored value, which
    /// differs from this step's. `None` for any other gate (a plain
    /// [`once`](crate::TransactionBuilder::once) claims no outcome), for a marker this
    /// step's own outcome set (it is [`already_done`](Gate::already_done)), and when the
    /// broker did not send the stored value (then the gate is not `already_done` either:
    /// who won is unknown).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let decide = |outcome: &'static str| client.transaction().once_as("outcome", "order-7", &outcome, Ttl::days(1));
    /// decide("paid").commit().await?.committed().unwrap();
    /// let Commit::Gated { gate, .. } = decide("timed-out").commit().await? else { panic!("decided") };
    /// assert_eq!(gate.lost_to(), Some(&serde_json::json!("paid")));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lost_to(&self) -> Option<&Value> {
        match (&self.kind, &self.reason, &self.value, &self.claimed) {
            (GateKind::Once, KvReason::Exists, Some(stored), Some(mine)) if stored != mine => {
                Some(stored)
            }
            _ => None,
        }
    }

    /// The gate of a rollback's `failedIndex` (`slot`): `op`, the operation at
    /// `index` among the KV operations, with the call that made it.
    pub(crate) fn of(
        slot: usize,
        index: usize,
        op: Option<(&KvOp, GateKind)>,
        reason: &str,
        version: Option<u64>,
        value: Option<Value>,
    ) -> Gate {
        let (kind, ns, key) = match op {
            Some((op, kind)) => (
                kind,
                op.ns().to_string(),
                op.key().unwrap_or_default().to_string(),
            ),
            None => (GateKind::Condition, String::new(), String::new()),
        };
        // Only a `once_as` marker's value says who set it: `once` stores `true` and
        // claims no outcome, so it is done whatever the marker holds (markers other
        // clients set included).
        let claimed = match op {
            Some((op, GateKind::Once)) => op
                .written_value()
                .and_then(|raw| serde_json::from_str(raw.get()).ok())
                .filter(|v| *v != Value::Bool(true)),
            _ => None,
        };
        Gate {
            kind,
            index,
            slot,
            ns,
            key,
            reason: KvReason::parse(reason),
            version,
            value,
            claimed,
        }
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.kind {
            GateKind::Once => "once marker",
            GateKind::Guard => "lock guard",
            GateKind::Condition => "condition",
            GateKind::Step => "an earlier attempt of this step committed: step marker",
        };
        write!(
            f,
            "{kind} {}/{} (kv[{}]) refused the step: {}",
            self.ns, self.key, self.index, self.reason
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn once_gate(claimed: Option<Value>, stored: Option<Value>) -> Gate {
        Gate {
            kind: GateKind::Once,
            index: 0,
            slot: 0,
            ns: "outcome".into(),
            key: "order-7".into(),
            reason: KvReason::parse("exists"),
            version: Some(1),
            value: stored,
            claimed,
        }
    }

    #[test]
    fn a_claimed_marker_is_done_only_when_the_broker_says_it_holds_this_outcome() {
        let paid = || Some(Value::from("paid"));
        let mine = once_gate(paid(), paid());
        assert!(mine.already_done() && mine.lost_to().is_none());
        let lost = once_gate(paid(), Some(Value::from("timed-out")));
        assert!(!lost.already_done());
        assert_eq!(lost.lost_to(), Some(&Value::from("timed-out")));
        let unknown = once_gate(paid(), None);
        assert!(
            !unknown.already_done(),
            "without the stored value, who won is unknown: not settled as done"
        );
        assert!(unknown.lost_to().is_none());
        // A plain `once` claims nothing: done whatever the marker holds, or if unsaid.
        assert!(once_gate(None, None).already_done());
        assert!(once_gate(None, Some(Value::from("x"))).already_done());
    }
}
