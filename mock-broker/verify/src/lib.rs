//! # queen-verify
//!
//! Prove a Queen worker exactly-once under faults. The hard part of a worker is not the
//! happy path but what happens when an answer is lost after a commit, a lease expires
//! mid-step, the broker restarts, or a 503 comes back: does it push twice, lose a
//! message, or loop? [`WorkerCheck`] answers that for *your* worker: it runs it under
//! many seeded random fault schedules, each on a fresh in-process durable broker
//! ([`queen_mock_broker::MockBroker`] on a temporary file and a manual clock), checks
//! your [`Invariant`]s against the broker's stored state after each run, and shrinks
//! the first failing schedule (with proptest) to a minimal one that it prints with the
//! calls around its faults and the one call that replays it.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use queen_sdk::{StartAt, Ttl};
//! use queen_verify::{Input, Invariant, WorkerCheck};
//! use serde_json::json;
//!
//! let verdict = WorkerCheck::new(|client, stop| async move {
//!     client
//!         .worker::<serde_json::Value>("orders")
//!         .group("billing", StartAt::Beginning)
//!         .run(
//!             move |order, step| {
//!                 let id = order.data["orderId"].as_str().unwrap_or_default().to_string();
//!                 let step = step // fenced by its lease
//!                     .push("receipts", |p| p.payload(&json!({"orderId": id}))) // derived id
//!                     .once("paid", &format!("{id}-paid"), Ttl::days(1)); // a gate
//!                 async move { Ok::<_, String>(step) }
//!             },
//!             stop,
//!         )
//!         .await
//! })
//! .group("billing")
//! .inputs(["o-1", "o-2"].map(|id| Input::new("orders", &json!({"orderId": id}))))
//! .invariant(Invariant::inputs_acked())
//! .invariant(Invariant::pushed_once("receipts", "orderId", [("Default", "o-1"), ("Default", "o-2")]))
//! .invariant(Invariant::no_dead_letters())
//! .schedules(4)
//! .run()
//! .await;
//! assert!(verdict.passed(), "{verdict}");
//! # }
//! ```
//!
//! ## Initial state
//!
//! A worker that reads or changes existing state (an inventory worker reserving stock,
//! a billing worker reading a customer's plan) needs that state on every fresh broker
//! before its inputs arrive. [`WorkerCheck::kv_row`] seeds a KV row;
//! [`WorkerCheck::setup`] runs a hook of your own with a [`queen_sdk::Client`] for
//! anything else. Both run, in the order given, on every run (each schedule, each
//! replay, each shrinking run) before the inputs are pushed and before any fault is
//! armed; their calls are never faulted and not counted, so `transaction#1` names the
//! worker's first step with or without them; and they run once per run, as durable
//! state is written once: a simulated broker restart keeps it and does not write it
//! again. A hook's error fails the run as a setup failure
//! ([`Violation::is_setup_failure`]), reported at once, not shrunk.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use queen_sdk::{StartAt, Ttl};
//! use queen_verify::{Input, Invariant, WorkerCheck};
//! use serde_json::json;
//!
//! let verdict = WorkerCheck::new(|client, stop| async move {
//!     client
//!         .worker::<serde_json::Value>("orders")
//!         .group("inventory", StartAt::Beginning)
//!         .run(
//!             move |order, step| {
//!                 let marker = format!("{}-reserved", order.transaction_id);
//!                 let step = step
//!                     .once("reserved", &marker, Ttl::days(1)) // a resend writes nothing
//!                     .kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required());
//!                 async move { Ok::<_, String>(step) }
//!             },
//!             stop,
//!         )
//!         .await
//! })
//! .kv_row("stock", "sku-1", &10, Ttl::Forever)
//! .setup(|client| async move {
//!     // Anything else the worker expects to find, with the SDK.
//!     client.kv().put("catalog", "sku-1", &json!({"name": "mug"}), Ttl::Forever).await?;
//!     Ok(())
//! })
//! .group("inventory")
//! .inputs((1..=3).map(|n| Input::new("orders", &json!({"orderId": n}))))
//! .invariant(Invariant::inputs_acked())
//! .invariant(Invariant::kv_equals("stock", "sku-1", json!(7))) // one unit per order
//! .schedules(4)
//! .run()
//! .await;
//! assert!(verdict.passed(), "{verdict}");
//! # }
//! ```
//!
//! Without its `once` marker this worker is caught: a fenced ack of a message already
//! acknowledged is a no-op while the rest of its batch holds the lease, so the resend
//! of a step whose answer was lost (`transaction#1:commit-then-drop`) takes a second
//! unit (`stock/sku-1 = 6, expected 7`).
//!
//! ## Faults
//!
//! A [`Schedule`] ties each [`Fault`] to one call, named by route and ordinal
//! (`transaction#2:commit-then-drop`): 503 before applying, commit then 503, commit then a
//! dropped connection, a delay, 429 with `Retry-After`, a lease expiry (the broker's
//! clock jumps past the lease while the call is in flight, and the call is held so
//! another replica can take the message), a broker crash and restart on the same file
//! between two calls, and a worker restart (the replica that sent the call is cancelled
//! mid-call and started again). A [`FaultPlan`] says which kinds, on which routes, how
//! often, and how many per schedule.
//!
//! Besides the schedule, a run moves the broker's clock past the lease whenever the
//! worker makes no progress for a moment with inputs unacknowledged (what a lost answer
//! or a killed worker leaves waits on a lease), and ends when the worker's group has
//! acknowledged every input, or counts as a violation after [`WorkerCheck::run_timeout`].
//!
//! ## Against a broker URL
//!
//! [`WorkerCheck::against`] runs the same check against a running broker (this
//! project's standalone `queen-mock-broker`, Queen 2 or Queen v0, started by CI): the
//! replicas talk to a fault proxy the check starts on a local ephemeral port, which
//! forwards to the broker and does the schedule's faults, and the invariants read the
//! broker's state through its public API ([`State::messages`], [`State::cursor`],
//! [`State::kv_row`], [`State::timers`], [`State::dead_letters`]; [`State::inspect`] is
//! in-process only). The broker is shared by every schedule, so [`Broker::url`] takes
//! the [`Resources`] reset before each one (the inputs' queues and the group always
//! are). A broker restart needs the broker's process: it is not drawn. A lease expiry
//! happens in real time (the proxy holds the call past the lease before forwarding
//! it), and a lapsed lease is waited for, so the worker's leases are capped at
//! [`Broker::lease`] (2 s by default): a schedule takes seconds.
//!
//! ```no_run
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use queen_sdk::StartAt;
//! use queen_verify::{Broker, Input, Invariant, Resources, WorkerCheck};
//! use serde_json::json;
//!
//! let url = std::env::var("QUEEN_URL").unwrap_or_else(|_| "http://127.0.0.1:6632".into());
//! let verdict = WorkerCheck::new(|client, stop| async move {
//!     client
//!         .worker::<serde_json::Value>("orders")
//!         .group("billing", StartAt::Beginning)
//!         .run(|order, step| async move {
//!             Ok::<_, String>(step.push("receipts", |p| p.payload(&order.data)))
//!         }, stop)
//!         .await
//! })
//! .group("billing")
//! .inputs((1..=3).map(|n| Input::new("orders", &json!({"orderId": n}))))
//! .invariant(Invariant::inputs_acked())
//! .invariant(Invariant::pushed_once("receipts", "orderId", (1..=3).map(|n| ("Default", n.to_string()))))
//! .against(Broker::url(url, Resources::new().queues(["receipts"])))
//! .schedules_from_env(8)
//! .run()
//! .await;
//! assert!(verdict.passed(), "{verdict}");
//! # }
//! ```
//!
//! ## With proptest directly
//!
//! [`Schedule::strategy`] is a proptest strategy, and [`WorkerCheck::replay_blocking`]
//! runs one schedule, so a check also fits your own runner (or a `proptest!` block):
//!
//! ```
//! use proptest::prelude::*;
//! use proptest::test_runner::{Config, TestRunner};
//! use queen_verify::{FaultPlan, Invariant, Schedule, WorkerCheck};
//!
//! let check = WorkerCheck::new(|_client, stop| async move { stop.await })
//!     .invariant(Invariant::inputs_acked());
//! let config = Config { cases: 2, failure_persistence: None, ..Config::default() };
//! TestRunner::new(config)
//!     .run(&Schedule::strategy(&FaultPlan::default()), |schedule| {
//!         let verdict = check.replay_blocking(schedule);
//!         prop_assert!(verdict.passed(), "{verdict}");
//!         Ok(())
//!     })
//!     .unwrap();
//! ```
//!
//! ## What is deterministic
//!
//! A run is a simulation, replayed exactly from its seed and schedule:
//!
//! - it happens on a one-thread tokio runtime whose clock is paused, so waiting costs
//!   nothing: the SDK's backoffs and long-polls, lease renewals, the idle window, a
//!   lease-expiry hold and a `Delay` fault all move virtual time instead of sleeping
//!   (`verify-worker`'s 500 schedules and two broken workers took 2.1 s against 91.2 s
//!   of mostly real waiting before, in one run; see BENCHMARKS.md);
//! - the broker's clock starts at the same instant on every run
//!   (2026-01-01T00:00:00Z) and moves with virtual time, plus the run's jumps;
//! - the broker's writer runs in lockstep with the runtime
//!   ([`queen_mock_broker::WriteMode::Lockstep`]): each write is applied and made
//!   durable alone while the runtime waits for it, so nothing depends on its pace;
//! - every choice the verifier makes comes from the seed or the schedule, and the ids
//!   the broker mints are numbered per run in the trace (`/api/v1/lease/<id-1>/extend`).
//!
//! So the same check and seed print the same verdict, and a printed schedule, replayed,
//! makes the same calls in the same order with the same answers: the same trace, the
//! same counterexample, every time (`tests/replay.rs` replays one 20 times). What the
//! verifier cannot fix is your worker's own nondeterminism: ids it draws at random
//! (`Uuid::new_v4` in a push shows up as other ids in a report; a counter does not),
//! reads of the wall clock, threads or runtimes of its own, blocking I/O. Calls travel
//! over loopback sockets, which the kernel delivers within the sending call; a host so
//! loaded that it defers that delivery could let the paused clock move while bytes are
//! in transit, which no run of ours has shown. A run's timeout
//! ([`WorkerCheck::run_timeout`]) counts on the paused clock and on the wall clock
//! alike, so a worker that spins without ever waiting still ends. Each run's data file
//! is in `/dev/shm` where there is one: every commit still syncs the file and the log,
//! and a broker restart recovers from them as it would from a disk.
//!
//! Against a broker URL none of this holds: time is real and the broker is another
//! process (see the section above).
//!
//! ## The seed
//!
//! A check draws its schedules from its seed, [`WorkerCheck::seed`]: 0 unless it sets
//! one. A fixed seed makes a CI job repeatable: every run draws the same schedules and
//! prints the same verdict. A proof program ([`Cli`]) takes `--seed N`, or
//! `--seed random` to draw a new seed, which it prints so that what that run found can
//! be replayed.
//!
//! ## Features
//!
//! - `in-process` (default): the in-process broker, `queen-mock-broker` with its redb
//!   storage and axum server: a check without [`WorkerCheck::against`] runs each
//!   schedule on one, and [`State::inspect`] reads its storage. Built with
//!   `default-features = false`, the crate checks workers against a broker by URL only
//!   and links none of that (`cargo tree -e normal`: 124 lines against 389, 80 distinct
//!   crates against 182; a clean debug build 49 s against 70 s on 2 cores); a check there that has no
//!   URL could not run, and says so.
//!
//! ## Layout
//!
//! - `check`: [`WorkerCheck`], the builder (initial state, inputs, invariants, faults)
//!   and the run/shrink loop;
//! - `schedule`: [`Schedule`], [`Fault`], [`FaultPlan`] and the proptest strategy;
//! - `invariant`: [`Invariant`] and its helpers, over the final [`State`];
//! - `run`: what every run shares (the initial state written, the inputs pushed);
//!   `run/in_process.rs` one schedule's run on a fresh in-process broker, driven by a
//!   request hook on its harness (the `in-process` feature);
//! - `remote`: a run against a broker by URL, through a fault proxy;
//! - `stored`: [`StoredMessage`] and [`StoredTimer`], what invariants read;
//! - `cli`: [`Cli`], a proof program's command line and exit codes;
//! - `report`: [`Verdict`], [`Counterexample`] and the trace.

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod check;
mod cli;
mod invariant;
mod remote;
mod replicas;
mod report;
mod run;
mod schedule;
mod stored;

pub use crate::{
    invariant::{GroupCursor, KvEntry, StateError},
    remote::{Broker, Resources},
};
pub use check::{Input, SCHEDULES_VAR, SetupError, WorkerCheck, WorkerResult};
pub use cli::{Cli, CliError, ReplayCommand, USAGE};
pub use invariant::{Invariant, State};
pub use report::{
    CouldNotRun, Counterexample, Event, Outcome, TraceCall, TraceEntry, Verdict, Violation,
};
pub use run::Stop;
pub use schedule::{
    Fault, FaultKind, FaultPlan, ParseScheduleError, Route, Schedule, ScheduledFault,
};
pub use stored::{StoredMessage, StoredTimer};

/// The README's example, compiled as a doctest so that the code a reader copies builds.
#[cfg(all(doctest, feature = "in-process"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
