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

/// What a case's `Err` means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum FailureKind {
    /// The broker broke the rule: the case fails.
    #[default]
    Broken,
    /// The case could not decide: the broker answered too slowly for the case's time
    /// window or budget (a TTL of 1 s holds only a few requests at 300 ms each). The
    /// runner reports it [`crate::Status::Inconclusive`], never as a failure.
    Inconclusive,
}

impl Capability {
    /// Every capability, in the order reports list them.
    pub const ALL: [Capability; 11] = [
        Capability::Core,
        Capability::Cursor,
        Capability::Positions,
        Capability::Kv,
        Capability::Timers,
        Capability::Locks,
        Capability::Time,
        Capability::Fetch,
        Capability::Streams,
        Capability::Ephemeral,
        Capability::Admin,
    ];

    /// Its name on the command line and in a baseline (`Positions`).
    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Core => "Core",
            Capability::Kv => "Kv",
            Capability::Timers => "Timers",
            Capability::Positions => "Positions",
            Capability::Locks => "Locks",
            Capability::Time => "Time",
            Capability::Cursor => "Cursor",
            Capability::Fetch => "Fetch",
            Capability::Streams => "Streams",
            Capability::Ephemeral => "Ephemeral",
            Capability::Admin => "Admin",
        }
    }
}

impl std::fmt::Display for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Capability {
    type Err = String;

    /// A capability by its name, in any case (`positions`, `Kv`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Capability::ALL
            .into_iter()
            .find(|c| c.as_str().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| {
                let names: Vec<&str> = Capability::ALL.iter().map(|c| c.as_str()).collect();
                format!("unknown capability {s:?}; known: {}", names.join(", "))
            })
    }
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
    /// Whether the rule was broken or could not be judged.
    #[serde(skip_serializing_if = "is_broken")]
    pub kind: FailureKind,
}

fn is_broken(k: &FailureKind) -> bool {
    *k == FailureKind::Broken
}

impl Failure {
    /// A failure: the broker broke the rule.
    pub fn new(expected: impl Into<String>, actual: impl Into<String>) -> Self {
        Failure {
            expected: expected.into(),
            actual: actual.into(),
            exchange: None,
            kind: FailureKind::Broken,
        }
    }

    /// The case could not decide (see [`FailureKind::Inconclusive`]): `why` says what
    /// was too slow.
    pub fn inconclusive(expected: impl Into<String>, why: impl Into<String>) -> Self {
        Failure {
            kind: FailureKind::Inconclusive,
            ..Failure::new(expected, why)
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
    /// Where the rule this case checks is written (see [`spec_section`]).
    pub fn section(&self) -> Section {
        spec_section(self.id)
    }
}

/// Where the rules of a case are written: a section of the suite's own statement of the
/// contract, `conformance/spec/` (shipped with the crate, so a failure's link works in
/// the checkout that ran it), and the upstream text that section restates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section {
    /// The file under `conformance/spec/` (`transaction.md`).
    pub file: &'static str,
    /// The id prefix whose cases the section covers (`txn.ack`); its anchor is
    /// [`Section::anchor`].
    pub prefix: &'static str,
    /// The upstream document and section it restates (`transaction.md How an ack finds
    /// its lease`).
    pub source: &'static str,
}

impl Section {
    /// The heading's anchor: the prefix with its dots as hyphens (`txn-ack`). Each
    /// section of `conformance/spec/` is a heading of exactly this text, so the anchor
    /// is the same on every Markdown renderer.
    pub fn anchor(&self) -> String {
        self.prefix.trim_end_matches('.').replace('.', "-")
    }

    /// The link a failure prints: the path from the workspace root and the anchor
    /// (`conformance/spec/transaction.md#txn-ack`).
    pub fn link(&self) -> String {
        format!("conformance/spec/{}#{}", self.file, self.anchor())
    }
}

impl std::fmt::Display for Section {
    /// `conformance/spec/transaction.md#txn-ack (restating transaction.md How an ack …)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (restating {})", self.link(), self.source)
    }
}

/// Every section: the id prefix, the file of `conformance/spec/` that states its rules,
/// and the upstream section those rules restate. A case belongs to the section of its
/// id's longest matching prefix.
pub const SECTIONS: &[(&str, &str, &str)] = &[
    ("core.health", "wire.md", "wire.md §12 Health"),
    ("core.errors", "wire.md", "wire.md §1 Conventions"),
    ("core.push", "wire.md", "wire.md §3 Push"),
    ("core.pop", "wire.md", "wire.md §4 Pop"),
    ("core.ack", "wire.md", "wire.md §5 Ack"),
    ("core.lease", "wire.md", "wire.md §6 Leases"),
    ("core.kv", "wire.md", "wire.md §9 KV"),
    ("core.timers", "wire.md", "wire.md §10 Timers"),
    ("core.cursor.pop", "cursor.md", "wire.md §4 Pop"),
    (
        "core.cursor.subscription",
        "cursor.md",
        "wire.md §4a Consumer progress (Subscription), §4 Pop",
    ),
    (
        "core.cursor.subscription.from-beginning",
        "cursor.md",
        "wire.md §4 Pop (subscriptionMode), §4a; queen-mq 2.6.0 (Python) tests/test_consume.py",
    ),
    (
        "core.cursor",
        "cursor.md",
        "wire.md §4a Consumer progress: ack as commit, §5 Ack",
    ),
    (
        "core.kv.incr-ttl",
        "wire.md",
        "wire.md §9 KV; queen-mq 2.6.0 (Python) tests/test_kv.py",
    ),
    (
        "core.kv.absent-version",
        "wire.md",
        "wire.md §9 KV; queen-mq 2.6.0 (Python) tests/test_kv.py",
    ),
    (
        "txn.cursor",
        "cursor.md",
        "wire.md §4a Consumer progress: ack as commit; transaction.md Ack operation",
    ),
    (
        "txn.ack.status",
        "transaction.md",
        "transaction.md Ack operation; wire.md §5 Ack",
    ),
    (
        "txn.ack",
        "transaction.md",
        "transaction.md How an ack finds its lease",
    ),
    (
        "txn.shape",
        "transaction.md",
        "transaction.md Request, Limits; wire.md §1 Conventions",
    ),
    (
        "txn.rollback",
        "transaction.md",
        "transaction.md Rollback reasons",
    ),
    ("txn.retry", "transaction.md", "transaction.md Retries"),
    ("txn.kv", "transaction.md", "transaction.md KV operations"),
    (
        "txn.kv.incr-ttl",
        "transaction.md",
        "transaction.md KV operations; wire.md §9 KV; queen-mq 2.6.0 (Python) tests/test_kv.py",
    ),
    (
        "txn.timers",
        "transaction.md",
        "transaction.md Timer operations, Limits",
    ),
    (
        "txn.positions",
        "transaction.md",
        "transaction.md Positions; wire.md §7",
    ),
    ("txn.example", "transaction.md", "transaction.md Example"),
    (
        "txn.index",
        "transaction.md",
        "wire.md §13 The transaction's result index space",
    ),
    (
        "txn.push",
        "transaction.md",
        "transaction.md Push operation",
    ),
    ("txn.v0", "v0.md", "transaction-v0-postgres.md"),
    (
        "surface.fetch",
        "surface.md",
        "mock-broker/ROUTES.md §5.1 POST /api/v1/fetch; queen-mq 2.7.0 tests/reads.rs; queen-protocol fetch.rs",
    ),
    (
        "surface.streams",
        "surface.md",
        "mock-broker/ROUTES.md §9 Stream runner; queen-mq 2.7.0 tests/streams.rs",
    ),
    (
        "surface.ephemeral",
        "surface.md",
        "mock-broker/ROUTES.md §8 Ephemeral queues; queen-protocol 1.5.0 Ephemeral*",
    ),
    (
        "surface.groups",
        "surface.md",
        "mock-broker/ROUTES.md §4.4, §4.5 Consumer groups; queen-mq 2.7.0 tests/admin.rs",
    ),
    (
        "surface.messages.detail",
        "surface.md",
        "mock-broker/ROUTES.md §3.2 GET /api/v1/messages/{partitionId}/{transactionId}; queen-mq 2.6.0 (Python) tests/test_pop.py",
    ),
    (
        "surface.messages",
        "surface.md",
        "mock-broker/ROUTES.md §3.3, §3.4 Messages by hand; queen-mq 2.7.0 tests/admin.rs, tests/coverage.rs",
    ),
    (
        "prop.",
        "properties.md",
        "transaction.md Retries, Rollback reasons; wire.md §4a",
    ),
];

/// Where the rules of a case id are written: the section of its id's longest known
/// prefix ([`SECTIONS`]). Every case of the suite has one (a unit test holds it to
/// that); an unknown id gets the index, `conformance/spec/README.md`.
pub fn spec_section(id: &str) -> Section {
    SECTIONS
        .iter()
        .filter(|(prefix, _, _)| id.starts_with(prefix))
        .max_by_key(|(prefix, _, _)| prefix.len())
        .map_or(
            Section {
                file: "README.md",
                prefix: "",
                source: "transaction.md",
            },
            |&(prefix, file, source)| Section {
                file,
                prefix,
                source,
            },
        )
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The suite's statement of the contract ships with it: every section a failure can
    /// link to has its heading in its file, and every case id is listed in the file of
    /// its section, so no failure links to a rule that is not written down.
    #[test]
    fn every_case_links_to_a_written_section() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("spec");
        let read = |file: &str| {
            std::fs::read_to_string(dir.join(file))
                .unwrap_or_else(|e| panic!("conformance/spec/{file}: {e}"))
        };
        for &(prefix, file, _) in SECTIONS {
            let s = spec_section(prefix);
            let heading = format!("\n## {}\n", s.anchor());
            assert!(
                read(file).contains(&heading),
                "conformance/spec/{file} has no heading {heading:?} for {prefix}"
            );
        }
        for case in crate::all_cases() {
            let s = case.section();
            assert_ne!(s.file, "README.md", "{} has no section", case.id);
            let text = read(s.file);
            let listed = format!("`{}`", case.id);
            let from = text
                .find(&format!("\n## {}\n", s.anchor()))
                .expect("the heading");
            let section = &text[from + 1..];
            let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
            assert!(
                section.contains(&listed),
                "{} is not listed under {} in conformance/spec/{}",
                case.id,
                s.anchor(),
                s.file
            );
        }
        assert_eq!(
            spec_section("txn.ack.fenced.expired-lease").to_string(),
            "conformance/spec/transaction.md#txn-ack (restating transaction.md How an ack finds its lease)"
        );
    }
}
