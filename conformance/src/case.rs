//! A case: one rule of the spec, with a stable id, its level, the sentence it checks,
//! the capabilities it needs, and the check itself.

use std::future::Future;
use std::pin::Pin;

use crate::ctx::{Ctx, Exchange};

/// How binding the rule is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Level {
    /// A broker that breaks it is not conformant.
    Must,
    /// Expected; a broker may differ for a stated reason.
    Should,
}

impl Level {
    /// `MUST` or `SHOULD`.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::Must => "MUST",
            Level::Should => "SHOULD",
        }
    }
}

/// A part of the API a case depends on; profiles list the ones a broker has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub enum Capability {
    /// Queues, push, pop, ack, leases, the transaction's acks and pushes.
    Core,
    /// KV (standalone and in transactions).
    Kv,
    /// Timers.
    Timers,
    /// Positions in transactions, and seek.
    Positions,
    /// Locks.
    Locks,
    /// Cases that wait for real time to pass (lease expiry, timer firing).
    Time,
    /// Queen 2's consumer-progress rules (`wire.md` 4a): ack as commit, subscriptions
    /// per group, multi-partition pops, long polls woken by any partition.
    Cursor,
    /// Reads by offset without a lease (`POST /api/v1/fetch`).
    Fetch,
    /// The stream runner's routes (`/streams/v1/*`): queries, claims, cycles, state.
    Streams,
    /// Ephemeral queues (`/api/v1/ephemeral/*`).
    Ephemeral,
    /// Administration by hand: a consumer group's subscription time and deletion
    /// (`/api/v1/consumer-groups/{group}…`), and a dead letter retried or deleted
    /// (`/api/v1/messages/{partitionId}/{transactionId}`).
    Admin,
}

/// Why a case failed: what was expected, what was seen, and the exchange that showed it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Failure {
    /// What the spec requires.
    pub expected: String,
    /// What the broker did.
    pub actual: String,
    /// The request and answer (filled in by the runner from the case's last exchange).
    pub exchange: Option<Box<Exchange>>,
}

impl Failure {
    /// A failure.
    pub fn new(expected: impl Into<String>, actual: impl Into<String>) -> Self {
        Failure {
            expected: expected.into(),
            actual: actual.into(),
            exchange: None,
        }
    }
}

/// The future a case returns.
pub type CaseFuture = Pin<Box<dyn Future<Output = Result<(), Failure>> + Send>>;

/// One rule as a runnable check.
#[derive(Clone)]
pub struct Case {
    /// Stable id, such as `txn.ack.fenced.expired-lease`.
    pub id: &'static str,
    /// MUST or SHOULD.
    pub level: Level,
    /// The sentence of the spec it checks.
    pub rule: &'static str,
    /// What it needs of the broker.
    pub needs: &'static [Capability],
    /// The check.
    pub run: fn(Ctx) -> CaseFuture,
}

impl Case {
    /// The section of the spec the case's rule comes from (see [`spec_section`]).
    pub fn section(&self) -> &'static str {
        spec_section(self.id)
    }
}

/// Where in the spec the rules of a case id come from: the document and section,
/// chosen by the id's longest known prefix.
pub fn spec_section(id: &str) -> &'static str {
    const SECTIONS: &[(&str, &str)] = &[
        ("core.health", "wire.md §12 Health"),
        ("core.errors", "wire.md §1 Conventions"),
        ("core.push", "wire.md §3 Push"),
        ("core.pop", "wire.md §4 Pop"),
        ("core.ack", "wire.md §5 Ack"),
        ("core.lease", "wire.md §6 Leases"),
        ("core.kv", "wire.md §9 KV"),
        ("core.timers", "wire.md §10 Timers"),
        ("core.cursor.pop", "wire.md §4 Pop"),
        (
            "core.cursor.subscription",
            "wire.md §4a Consumer progress (Subscription), §4 Pop",
        ),
        (
            "core.cursor.subscription.from-beginning",
            "wire.md §4 Pop (subscriptionMode), §4a; queen-mq 2.6.0 (Python) tests/test_consume.py",
        ),
        (
            "core.cursor",
            "wire.md §4a Consumer progress: ack as commit, §5 Ack",
        ),
        (
            "core.kv.incr-ttl",
            "wire.md §9 KV; queen-mq 2.6.0 (Python) tests/test_kv.py",
        ),
        (
            "core.kv.absent-version",
            "wire.md §9 KV; queen-mq 2.6.0 (Python) tests/test_kv.py",
        ),
        (
            "txn.cursor",
            "wire.md §4a Consumer progress: ack as commit; transaction.md Ack operation",
        ),
        (
            "txn.ack.status",
            "transaction.md Ack operation; wire.md §5 Ack",
        ),
        ("txn.ack", "transaction.md How an ack finds its lease"),
        (
            "txn.shape",
            "transaction.md Request, Limits; wire.md §1 Conventions",
        ),
        ("txn.rollback", "transaction.md Rollback reasons"),
        ("txn.retry", "transaction.md Retries"),
        ("txn.kv", "transaction.md KV operations"),
        (
            "txn.kv.incr-ttl",
            "transaction.md KV operations; wire.md §9 KV; queen-mq 2.6.0 (Python) tests/test_kv.py",
        ),
        ("txn.timers", "transaction.md Timer operations, Limits"),
        ("txn.positions", "transaction.md Positions; wire.md §7"),
        ("txn.example", "transaction.md Example"),
        (
            "txn.index",
            "wire.md §13 The transaction's result index space",
        ),
        ("txn.push", "transaction.md Push operation"),
        ("txn.v0", "transaction-v0-postgres.md"),
        (
            "surface.fetch",
            "mock-broker/ROUTES.md §5.1 POST /api/v1/fetch; queen-mq 2.7.0 tests/reads.rs; queen-protocol fetch.rs",
        ),
        (
            "surface.streams",
            "mock-broker/ROUTES.md §9 Stream runner; queen-mq 2.7.0 tests/streams.rs",
        ),
        (
            "surface.ephemeral",
            "mock-broker/ROUTES.md §8 Ephemeral queues; queen-protocol 1.5.0 Ephemeral*",
        ),
        (
            "surface.groups",
            "mock-broker/ROUTES.md §4.4, §4.5 Consumer groups; queen-mq 2.7.0 tests/admin.rs",
        ),
        (
            "surface.messages.detail",
            "mock-broker/ROUTES.md §3.2 GET /api/v1/messages/{partitionId}/{transactionId}; queen-mq 2.6.0 (Python) tests/test_pop.py",
        ),
        (
            "surface.messages",
            "mock-broker/ROUTES.md §3.3, §3.4 Messages by hand; queen-mq 2.7.0 tests/admin.rs, tests/coverage.rs",
        ),
        (
            "prop.",
            "transaction.md Retries, Rollback reasons; wire.md §4a",
        ),
    ];
    SECTIONS
        .iter()
        .filter(|(prefix, _)| id.starts_with(prefix))
        .max_by_key(|(prefix, _)| prefix.len())
        .map_or("transaction.md", |(_, s)| s)
}

impl std::fmt::Debug for Case {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Case")
            .field("id", &self.id)
            .field("level", &self.level)
            .finish()
    }
}

/// Declares a case: `case!(id, Must, "rule", [Core, Kv], |cx| async move { ... })`.
#[macro_export]
macro_rules! case {
    ($id:expr, $level:ident, $rule:expr, [$($cap:ident),*], $body:expr) => {
        $crate::case::Case {
            id: $id,
            level: $crate::case::Level::$level,
            rule: $rule,
            needs: &[$($crate::case::Capability::$cap),*],
            run: |cx| Box::pin(($body)(cx)),
        }
    };
}
