//! What every run shares, in process or by URL: the worker and setup types, a run's
//! spec and outcome, the stop signal, and the initial state written before the
//! inputs. The in-process run itself (a fresh broker per schedule, its harness hook
//! doing the faults) is `run/in_process.rs`, built with the `in-process` feature; a run
//! by URL is `remote.rs`.
//!
//! The run's initial state (the check's KV rows and setup hooks) is written before the
//! inputs are pushed, through a client of the verifier's own (its user agent is
//! `SETUP_AGENT`), whose calls are neither faulted nor counted even when they come
//! later: a schedule's `transaction#1` is the worker's first step whatever the setup
//! did. It is written once per run: a broker restart keeps it on the file, as a real
//! one would.

#[cfg(feature = "in-process")]
mod in_process;

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use queen_sdk::{Client, PushItem, RetryPolicy, Ttl};
use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

use crate::check::{Input, SetupError};
use crate::invariant::Invariant;
use crate::report::{Event, HARNESS_FAILED, SETUP_FAILED, TraceEntry, Violation};
use crate::schedule::Route;
#[cfg(feature = "in-process")]
pub(crate) use in_process::run_one;

/// The future a worker closure answers, its outcome as text.
pub(crate) type WorkerFuture = Pin<Box<dyn Future<Output = Result<(), String>> + Send>>;

/// The worker under test: started once per replica, and again after a restart.
pub(crate) type WorkerFn = Arc<dyn Fn(Client, Stop) -> WorkerFuture + Send + Sync>;

/// The future a setup hook answers.
pub(crate) type SetupFuture = Pin<Box<dyn Future<Output = Result<(), SetupError>> + Send>>;

/// A setup hook: run once per run, before the inputs are pushed.
pub(crate) type SetupFn = Arc<dyn Fn(Client) -> SetupFuture + Send + Sync>;

/// One step of a run's initial state, in the order the check was given them.
#[derive(Clone)]
pub(crate) enum SetupStep {
    /// A KV row written with a standalone put.
    KvRow {
        ns: String,
        key: String,
        value: Value,
        ttl: Ttl,
    },
    /// A hook given the setup client.
    Hook(SetupFn),
}

/// The user agent of the verifier's own client: the inputs' push, the setup, the
/// dead-letter read. The request hook lets its calls through untouched and uncounted.
pub(crate) const SETUP_AGENT: &str = "queen-verify/setup";
pub(crate) const REPLICA_AGENT: &str = "queen-verify/replica-";

/// Resolves when the verifier tells the worker to stop (the run is over): pass it to
/// [`queen_sdk::Worker::run`] as its shutdown signal. It also resolves if the verifier
/// is gone.
///
/// It clones, so a worker closure that runs several workers (one per queue) gives each
/// a copy and they all stop together; [`Stop::token`] hands the same signal to a
/// [`queen_sdk::WorkerSet`], which also stops them all when one fails.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queen_verify::{Invariant, WorkerCheck};
/// // A worker that does nothing but wait for its stop signal.
/// let check = WorkerCheck::new(|_client, stop| async move {
///     stop.await;
///     Ok::<(), String>(())
/// })
/// .invariant(Invariant::inputs_acked());
/// assert!(check.replay("none".parse().unwrap()).await.passed());
/// # }
/// ```
pub struct Stop {
    token: CancellationToken,
    /// The wait, made at the first poll (a clone starts without one).
    waiting: Option<Pin<Box<WaitForCancellationFutureOwned>>>,
}

impl Stop {
    /// Fires when `token` is cancelled.
    pub(crate) fn new(token: CancellationToken) -> Stop {
        Stop {
            token,
            waiting: None,
        }
    }

    /// A token cancelled when this signal fires: a [`queen_sdk::WorkerSet`]'s (or any
    /// code's that takes a [`CancellationToken`]). A child token: the set cancels it when
    /// one of its workers fails, which stops the set, not the verifier's run.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_sdk::{Client, StartAt, WorkerSet};
    /// use queen_verify::{Invariant, Stop, WorkerCheck};
    /// // Two queues, two workers, one stop: the orders' worker pushes a payment, the
    /// // payments' worker records it.
    /// let check = WorkerCheck::new(|client: Client, stop: Stop| async move {
    ///     let mut workers = WorkerSet::new(stop.token());
    ///     workers
    ///         .spawn(
    ///             "orders",
    ///             client.worker::<serde_json::Value>("orders").group("saga", StartAt::Beginning),
    ///             |msg, step| async move { Ok::<_, String>(step.push("payments", |p| p.payload(&msg.data))) },
    ///         )
    ///         .spawn(
    ///             "payments",
    ///             client.worker::<serde_json::Value>("payments").group("saga", StartAt::Beginning),
    ///             |_msg, step| async move { Ok::<_, String>(step) },
    ///         );
    ///     workers.join().await.map(|_| ()).map_err(|e| e.to_string())
    /// })
    /// .group("saga") // the group whose acks the invariants read
    /// .input(queen_verify::Input::new("orders", &serde_json::json!({"order": "o-7"})))
    /// .invariant(Invariant::inputs_acked());
    /// let verdict = check.replay("none".parse().unwrap()).await;
    /// assert!(verdict.passed(), "{verdict}");
    /// # }
    /// ```
    pub fn token(&self) -> CancellationToken {
        self.token.child_token()
    }
}

impl Clone for Stop {
    /// The same signal: every clone fires when the verifier stops the worker.
    fn clone(&self) -> Stop {
        Stop::new(self.token.clone())
    }
}

impl fmt::Debug for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Stop")
            .field("fired", &self.token.is_cancelled())
            .finish()
    }
}

impl Future for Stop {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let token = &this.token;
        this.waiting
            .get_or_insert_with(|| Box::pin(token.clone().cancelled_owned()))
            .as_mut()
            .poll(cx)
    }
}

/// What one run needs, shared by every run of a check. (`lease`, `idle` and `hold`
/// move an in-process broker's clock: by URL they are not read.)
#[cfg_attr(not(feature = "in-process"), allow(dead_code))]
pub(crate) struct RunSpec {
    pub worker: WorkerFn,
    pub setup: Vec<SetupStep>,
    pub inputs: Vec<Input>,
    pub invariants: Vec<Invariant>,
    pub group: String,
    pub replicas: usize,
    pub lease: Duration,
    pub idle: Duration,
    pub run_timeout: Duration,
    pub hold: Duration,
    pub retry: RetryPolicy,
}

/// What one run found.
#[derive(Debug)]
pub(crate) struct RunOutcome {
    pub violation: Option<Violation>,
    pub trace: Vec<TraceEntry>,
    pub faults_hit: usize,
}

/// Calls that hold no step: long-polls and lease renewals.
pub(crate) fn is_background(route: Route) -> bool {
    matches!(route, Route::Pop | Route::LeaseExtend)
}

/// The run never got to the worker (see [`Violation::is_setup_failure`]).
pub(crate) fn setup_failure(what: String) -> RunOutcome {
    failure(SETUP_FAILED, what)
}

/// The verifier could not carry out a run under way (a broker restart, the last reads).
pub(crate) fn harness_failure(what: String) -> RunOutcome {
    failure(HARNESS_FAILED, what)
}

fn failure(invariant: &str, detail: String) -> RunOutcome {
    RunOutcome {
        violation: Some(Violation {
            invariant: invariant.into(),
            detail,
        }),
        trace: Vec::new(),
        faults_hit: 0,
    }
}

/// Writes the run's initial state with the setup client, in the order given: each KV
/// row with a standalone put, each hook run to its end (at most the run's timeout). The
/// error says which step failed and how.
pub(crate) async fn prepare(spec: &RunSpec, admin: &Client) -> Result<(), String> {
    let mut hooks = 0;
    for step in &spec.setup {
        match step {
            SetupStep::KvRow {
                ns,
                key,
                value,
                ttl,
            } => {
                let w = admin
                    .kv()
                    .put(ns, key, value, *ttl)
                    .await
                    .map_err(|e| format!("seeding the KV row {ns}/{key}: {e}"))?;
                if !w.applied {
                    return Err(format!(
                        "seeding the KV row {ns}/{key}: the broker did not apply it ({w:?})"
                    ));
                }
            }
            SetupStep::Hook(hook) => {
                hooks += 1;
                // A task of its own, so a panic is reported like an error.
                let mut task = tokio::spawn(hook(admin.clone()));
                match tokio::time::timeout(spec.run_timeout, &mut task).await {
                    Ok(Ok(Ok(()))) => {}
                    Ok(Ok(Err(e))) => return Err(format!("setup hook {hooks} failed: {e}")),
                    Ok(Err(e)) => {
                        let why = match e.try_into_panic() {
                            Ok(p) => p
                                .downcast_ref::<&str>()
                                .map(|s| s.to_string())
                                .or_else(|| p.downcast_ref::<String>().cloned())
                                .unwrap_or_else(|| "a panic".into()),
                            Err(e) => e.to_string(),
                        };
                        return Err(format!("setup hook {hooks} panicked: {why}"));
                    }
                    Err(_) => {
                        task.abort();
                        return Err(format!(
                            "setup hook {hooks} did not finish within {:?} (the run's timeout)",
                            spec.run_timeout
                        ));
                    }
                }
            }
        }
    }
    Ok(())
}

/// Writes the run's initial state ([`prepare`]), then pushes the inputs, with the
/// verifier's own client; answers the trace's [`Event::Setup`] when there was an
/// initial state to write.
pub(crate) async fn set_up(spec: &RunSpec, admin: &Client) -> Result<Option<Event>, String> {
    let prepared = Instant::now();
    prepare(spec, admin).await?;
    let took = prepared.elapsed();
    if !spec.inputs.is_empty() {
        let items = spec
            .inputs
            .iter()
            .map(|i| {
                PushItem::new(&i.queue, &i.payload)
                    .partition(&i.partition)
                    .transaction_id(&i.transaction_id)
            })
            .collect();
        admin
            .push(items)
            .await
            .map_err(|e| format!("pushing the inputs: {e}"))?;
    }
    let kv_rows = spec
        .setup
        .iter()
        .filter(|s| matches!(s, SetupStep::KvRow { .. }))
        .count();
    Ok((!spec.setup.is_empty()).then(|| Event::Setup {
        kv_rows,
        hooks: spec.setup.len() - kv_rows,
        took,
    }))
}
