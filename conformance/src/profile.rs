//! Profiles: which capabilities a broker is expected to have, named (`queen2`,
//! `queen2-fast`, `v0`) or found by probing the broker (`auto`, see the
//! [`probe`](mod@crate::probe) module).

use std::borrow::Cow;

use crate::case::Capability::{self, *};

/// A named set of capabilities.
#[derive(Debug, Clone)]
pub struct Profile {
    /// Its name on the command line.
    pub name: Cow<'static, str>,
    /// What it says.
    pub about: Cow<'static, str>,
    /// The capabilities a broker of this profile has.
    pub caps: Cow<'static, [Capability]>,
    /// Why a capability is missing, when that is known (the probe's findings): the
    /// skip reason of the cases that need it.
    pub missing_why: Vec<(Capability, String)>,
    /// Cases this profile's contract does not contain, by id, each with the reason:
    /// the `v0` profile judges a broker by the PostgreSQL page, so the cases that check
    /// a Queen 2 convention that page never promised are skipped there, by name.
    pub waived: &'static [(&'static str, &'static str)],
}

impl Profile {
    const fn fixed(
        name: &'static str,
        about: &'static str,
        caps: &'static [Capability],
    ) -> Profile {
        Profile {
            name: Cow::Borrowed(name),
            about: Cow::Borrowed(about),
            caps: Cow::Borrowed(caps),
            missing_why: Vec::new(),
            waived: &[],
        }
    }

    const fn waiving(
        name: &'static str,
        about: &'static str,
        caps: &'static [Capability],
        waived: &'static [(&'static str, &'static str)],
    ) -> Profile {
        Profile {
            name: Cow::Borrowed(name),
            about: Cow::Borrowed(about),
            caps: Cow::Borrowed(caps),
            missing_why: Vec::new(),
            waived,
        }
    }

    /// Why the case `id` is not part of this profile's contract, if it is not.
    pub fn waiver(&self, id: &str) -> Option<String> {
        self.waived
            .iter()
            .find(|(w, _)| *w == id)
            .map(|(_, why)| format!("profile {}: a Queen 2 convention: {why}", self.name))
    }

    /// Whether the profile has `cap`.
    pub fn has(&self, cap: Capability) -> bool {
        self.caps.contains(&cap)
    }

    /// Why a case that needs `missing` is skipped.
    pub fn skip_reason(&self, missing: &[Capability]) -> String {
        let parts: Vec<String> = missing
            .iter()
            .map(
                |cap| match self.missing_why.iter().find(|(c, _)| c == cap) {
                    Some((_, why)) => format!("{cap:?}: {why}"),
                    None => format!("{cap:?}"),
                },
            )
            .collect();
        format!("profile {} lacks {}", self.name, parts.join("; "))
    }
}

/// Every named profile (`auto` is built by probing, [`crate::probe::probe`]).
pub const PROFILES: &[Profile] = &[
    Profile::fixed(
        "queen2",
        "Queen 2: everything (the default)",
        &[
            Core, Kv, Timers, Positions, Locks, Time, Cursor, Fetch, Streams, Ephemeral, Admin,
        ],
    ),
    Profile::fixed(
        "queen2-fast",
        "Queen 2 without the cases that wait for real time (lease expiry, timer firing)",
        &[
            Core, Kv, Timers, Positions, Locks, Cursor, Fetch, Streams, Ephemeral, Admin,
        ],
    ),
    Profile::waiving(
        "v0",
        "Queen v0, the PostgreSQL broker, judged by its own page (transaction-v0-postgres.md): no KV, timers, positions, locks or Queen 2 consumer rules, and the Queen 2 conventions that page never promised skipped by name",
        &[Core, Time],
        V0_WAIVED,
    ),
];

/// The cases the `v0` profile skips, each a Queen 2 convention that
/// `transaction-v0-postgres.md` (and the v0 broker's wire) never promised, with why.
/// The page's own MUSTs are the `txn.v0.*` cases (and the Queen 2 cases that state a
/// rule both pages share), which the profile runs.
pub const V0_WAIVED: &[(&str, &str)] = &[
    // wire.md's answer shapes and conventions, which the v0 page (one route:
    // POST /api/v1/transaction) never states.
    (
        "core.ack.shape",
        "the `noop` key on ack results is wire.md's; v0's ack answers carry none",
    ),
    (
        "core.ack.batch-shape",
        "the `noop` key on ack results is wire.md's; v0's ack answers carry none",
    ),
    (
        "core.ack.completed-aliases",
        "`success`/`acked`/`ok` as aliases of `completed` are wire.md's (v0 takes `completed` and `success`); an unrecognised status is still checked, by core.ack.unknown-status-is-failed",
    ),
    (
        "core.ack.dlq-now",
        "the DLQ listing's `total` is wire.md's; v0 answers `messages` and `pagination` only",
    ),
    (
        "core.ack.failed-retry-limit",
        "the DLQ listing's `total` is wire.md's; v0 answers `messages` and `pagination` only",
    ),
    (
        "core.ack.failed-dropped-without-dlq",
        "`deadLetterQueue: false` dropping a message is wire.md's configure option; the v0 page has no configure",
    ),
    (
        "core.errors.missing-queue",
        "the `code` key of error bodies is wire.md's; v0 answers `{error}`",
    ),
    (
        "core.errors.no-such-route",
        "the JSON 404 `no_such_route` is wire.md's; v0 answers an unknown route with a web page",
    ),
    (
        "core.lease.extend-renews",
        "the lease-extend answer's keys are wire.md's; v0 answers an array of one `{index, leaseId, success, expiresAt, error}`",
    ),
    (
        "core.lease.extend-unknown",
        "the lease-extend answer's keys are wire.md's; v0 answers an array of one `{index, leaseId, success, expiresAt, error}`",
    ),
    (
        "core.lease.extend-never-revives",
        "the lease-extend answer's keys are wire.md's; v0 answers an array of one `{index, leaseId, success, expiresAt, error}`",
    ),
    (
        "core.pop.empty-204",
        "204 for an empty pop is wire.md's; v0 answers 200 `{\"error\": \"no_available_partition\", \"messages\": []}`",
    ),
    (
        "core.pop.shape.ours",
        "`queue`, `offset` and `deliveryAttempt` on each popped message are wire.md's own additions; v0 names the queue once, at the top of the answer",
    ),
    (
        "core.pop.lease-expiry-attempt",
        "`deliveryAttempt` is wire.md's; v0's messages carry none",
    ),
    (
        "core.pop.lease-expiry-redelivers",
        "the pop's `leaseSeconds` is wire.md's; v0 leases for the queue's `leaseTime` (300 s by default) whatever the pop asks",
    ),
    (
        "core.push.result-shape",
        "`offset` on push results is wire.md's; v0 answers `partition_id` and `trace_id` instead",
    ),
    (
        "core.push.offsets-dense",
        "partition offsets are wire.md's; v0 has no offsets",
    ),
    (
        "core.push.dedup.in-call",
        "the duplicate's `offset` is wire.md's; v0 has no offsets",
    ),
    (
        "prop.model.queue",
        "the model is wire.md 4a's cursor (offsets, batch clamping, leaseSeconds); v0 has no offsets",
    ),
    // transaction.md's rules where the v0 page says otherwise or nothing.
    (
        "txn.ack.fenced.already-acked",
        "`reason: \"rejected_ack\"` is transaction.md's; the v0 page's rollback carries the cause as `error` text only (the rollback itself: txn.v0.rollback.wrong-lease)",
    ),
    (
        "txn.ack.fenced.expired-lease",
        "`reason` and the pop's `leaseSeconds` are transaction.md's and wire.md's; the v0 page's rule is txn.v0.rollback.expired-lease",
    ),
    (
        "txn.ack.fenced.other-worker",
        "redelivery after a pop's `leaseSeconds` is wire.md's; v0 leases for the queue's `leaseTime` whatever the pop asks",
    ),
    (
        "txn.ack.fenced.outside-batch",
        "`reason` is transaction.md's; the v0 page's rule is txn.v0.rollback.beyond-batch",
    ),
    (
        "txn.ack.lease.own-first",
        "`reason` is transaction.md's; the v0 page's resolution order is txn.v0.ack.required-leases",
    ),
    (
        "txn.ack.lease.other-acks",
        "transaction.md's second rule (the other acks' leaseIds); the v0 page's second rule is the consumer row's current lease holder",
    ),
    (
        "txn.ack.lease.required-leases",
        "transaction.md's resolution order; the v0 page takes the consumer row's current lease holder before `requiredLeases`",
    ),
    (
        "txn.ack.status.completed-aliases",
        "the `acked`/`ok` aliases are wire.md's; the v0 page keeps `completed`, `retry` and `dlq`",
    ),
    (
        "txn.ack.status.failed-counts-attempt",
        "a `failed` ack clamping the cursor and counting an attempt is wire.md 4a's; v0's page says only that unrecognised statuses become `failed`",
    ),
    (
        "txn.ack.status.failed-no-dlq-drops",
        "`deadLetterQueue: false` is wire.md's configure option; the v0 page has no configure",
    ),
    (
        "txn.ack.status.retry-not-counted",
        "attempt counting is wire.md 4a's; the v0 page's `retry` rule is txn.v0.ack.retry",
    ),
    (
        "txn.ack.status.unknown-is-failed",
        "attempt counting is wire.md 4a's; the v0 page's rule is txn.v0.ack.unrecognised-status",
    ),
    (
        "txn.ack.unfenced.after-dlq",
        "transaction.md refuses an unfenced ack of a settled message; the v0 page skips the lease check for lease-less acks and reports a repeat as already committed",
    ),
    (
        "txn.ack.unfenced.after-failed",
        "transaction.md refuses an unfenced ack of a settled message; the v0 page skips the lease check for lease-less acks and reports a repeat as already committed",
    ),
    (
        "txn.ack.unfenced.after-retry",
        "attempt counting is wire.md 4a's; the v0 page's `retry` rule is txn.v0.ack.retry",
    ),
    (
        "txn.ack.unfenced.not-found",
        "`reason` is transaction.md's; the v0 page's rule is txn.v0.rollback.unknown-ack",
    ),
    (
        "txn.push.duplicate.in-window",
        "`reason: \"duplicate\"` is transaction.md's; the v0 page's rule (a QDUP error) is txn.v0.rollback.duplicate-push",
    ),
    (
        "txn.retry.fenced-ack.rejected",
        "`reason` is transaction.md's; the v0 page's rollbacks carry `error` text only",
    ),
    (
        "txn.retry.push-id.duplicate",
        "`reason` is transaction.md's; the v0 page's rule is txn.v0.retry.qdup",
    ),
    (
        "txn.rollback.body.envelope",
        "`reason` is transaction.md's; the v0 page's rollback shape is checked by the txn.v0.rollback.* cases",
    ),
    (
        "txn.rollback.order.ack-before-push",
        "which cause a rollback names first is transaction.md's; the v0 page names no order",
    ),
    (
        "txn.rollback.wrote-nothing.core",
        "`reason` is transaction.md's; that a rollback writes nothing is checked by the txn.v0.rollback.* cases",
    ),
    (
        "txn.shape.name-too-long.queue",
        "the 255-byte name limit is wire.md's; the v0 page sets none (v0 rolls back with its database's error)",
    ),
    (
        "txn.shape.name-too-long.partition",
        "the 255-byte name limit is wire.md's; the v0 page sets none (v0 rolls back with its database's error)",
    ),
    (
        "txn.shape.transaction-id-too-long",
        "the transactionId length limit is wire.md's; the v0 page sets none (v0 rolls back with its database's error)",
    ),
    (
        "txn.shape.not-array.required-leases",
        "a 400 for a non-array `requiredLeases` is transaction.md's; the v0 page's 400s are for `operations` and operation types",
    ),
    (
        "txn.shape.operations.kv-element",
        "kv elements are Queen 2's; the v0 page's rule for any other `type` is txn.shape.operations.unknown-type and txn.v0.shape.unknown-type",
    ),
    (
        "txn.shape.operations.timer-element",
        "timer elements are Queen 2's; the v0 page's rule for any other `type` is txn.shape.operations.unknown-type and txn.v0.shape.unknown-type",
    ),
    (
        "txn.shape.push.missing-queue",
        "a 400 for a missing `queue` is transaction.md's; the v0 page defaults `queue` to the empty string",
    ),
    (
        "txn.v0.answer-shape",
        "that a v0-shaped request gets exactly v0's keys is transaction.md's promise; the v0 page lists the keys without forbidding more (v0 adds `partitionId`): txn.v0.answer.result-keys",
    ),
];

/// The profile named `name`.
pub fn find(name: &str) -> Option<Profile> {
    PROFILES.iter().find(|p| p.name == name).cloned()
}
