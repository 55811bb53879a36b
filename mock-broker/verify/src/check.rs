//! [`WorkerCheck`]: the builder a user fills in (worker, inputs, invariants, faults) and
//! the runner that draws schedules, runs each on a fresh broker, and shrinks the first
//! failure with proptest.
//!
//! The runner uses proptest's pieces directly rather than its `proptest!` macro: a
//! [`TestRunner`] seeded from the check's seed draws each schedule's value tree, and on a
//! failure the same `simplify`/`complicate` walk that proptest's own runner does finds a
//! minimal schedule, and one more pass tries dropping each remaining fault alone (a
//! walk can stop early when a removal passes once by timing). Driving it by hand is
//! what lets a check stop on a time budget, count faults, keep the failing run's trace,
//! and accept a shrunk candidate only when it breaks the *same* invariant (a run is not
//! fully deterministic; see the crate docs).
//! Each run happens on a runtime of its own, on a blocking thread, so a check can be
//! awaited from any runtime (or called with [`WorkerCheck::run_blocking`] from none):
//! in process, one thread on a paused clock (see the crate docs, "What is
//! deterministic").

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use queen_sdk::{Client, QUEUE_MODE, RetryPolicy, Ttl};
use serde::Serialize;
use serde_json::Value;

use crate::invariant::Invariant;
use crate::report::{CouldNotRun, Counterexample, Verdict};
#[cfg(feature = "in-process")]
use crate::run::run_one;
use crate::run::{
    RunOutcome, RunSpec, SetupFn, SetupFuture, SetupStep, Stop, WorkerFn, WorkerFuture,
};
use crate::schedule::{FaultPlan, Schedule};

/// The environment variable read by [`WorkerCheck::schedules_from_env`].
///
/// ```
/// assert_eq!(queen_verify::SCHEDULES_VAR, "QUEEN_VERIFY_SCHEDULES");
/// ```
pub const SCHEDULES_VAR: &str = "QUEEN_VERIFY_SCHEDULES";

/// A message pushed before the worker starts.
///
/// ```
/// use queen_verify::Input;
/// let order = Input::new("orders", &serde_json::json!({"orderId": "order-1"}))
///     .partition("customer-1")
///     .transaction_id("order-1-paid");
/// assert_eq!((order.queue.as_str(), order.partition.as_str()), ("orders", "customer-1"));
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Input {
    /// Its queue.
    pub queue: String,
    /// Its partition (default `Default`).
    pub partition: String,
    /// Its `transactionId` (default `input-<n>`, its place among the inputs).
    pub transaction_id: String,
    /// Its payload.
    pub payload: Value,
}

impl Input {
    /// A message for `queue` with this payload.
    ///
    /// # Panics
    /// If `payload` does not serialize to JSON (a map with non-string keys).
    ///
    /// ```
    /// let i = queen_verify::Input::new("jobs", &7);
    /// assert_eq!(i.payload, serde_json::json!(7));
    /// ```
    pub fn new<T: Serialize + ?Sized>(queue: impl Into<String>, payload: &T) -> Self {
        Input {
            queue: queue.into(),
            partition: "Default".into(),
            transaction_id: String::new(),
            payload: serde_json::to_value(payload).expect("an input payload serializes to JSON"),
        }
    }

    /// In this partition.
    ///
    /// ```
    /// let i = queen_verify::Input::new("jobs", &7).partition("p1");
    /// assert_eq!(i.partition, "p1");
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = p.into();
        self
    }

    /// With this `transactionId`.
    ///
    /// ```
    /// let i = queen_verify::Input::new("jobs", &7).transaction_id("job-7");
    /// assert_eq!(i.transaction_id, "job-7");
    /// ```
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = id.into();
        self
    }
}

/// What a worker closure may answer: `()` or a `Result` whose error prints (a
/// [`queen_sdk::Summary`] in `Ok` is fine).
///
/// ```
/// use queen_verify::WorkerResult;
/// assert_eq!(().into_result(), Ok(()));
/// assert_eq!(Err::<u8, _>("refused").into_result(), Err("refused".to_string()));
/// ```
pub trait WorkerResult: Send + 'static {
    /// The outcome, its error as text.
    ///
    /// ```
    /// use queen_verify::WorkerResult;
    /// assert_eq!(Ok::<_, String>(1).into_result(), Ok(()));
    /// ```
    fn into_result(self) -> Result<(), String>;
}

impl WorkerResult for () {
    fn into_result(self) -> Result<(), String> {
        Ok(())
    }
}

impl<T: Send + 'static, E: fmt::Display + Send + 'static> WorkerResult for Result<T, E> {
    fn into_result(self) -> Result<(), String> {
        self.map(|_| ()).map_err(|e| e.to_string())
    }
}

/// The error a [`WorkerCheck::setup`] hook answers: any error, which `?` converts (a
/// [`queen_sdk::Error`], a `serde_json::Error`, ...), or a message (`Err("...".into())`).
/// The run then fails as a setup failure
/// ([`Violation::is_setup_failure`](crate::Violation::is_setup_failure)) whose detail is
/// this error's text.
///
/// ```
/// use queen_verify::SetupError;
/// let e: SetupError = "no stock row for sku-1".into();
/// assert_eq!(e.to_string(), "no stock row for sku-1");
/// let parsed: Result<u32, SetupError> = "ten".parse::<u32>().map_err(Into::into);
/// assert!(parsed.is_err());
/// ```
pub type SetupError = Box<dyn std::error::Error + Send + Sync>;

/// Proves a worker exactly-once under faults: runs it under many seeded fault
/// schedules, each on a fresh in-process broker, checks the invariants after each, and
/// shrinks the first failing schedule to a minimal one.
///
/// The worker is a closure given a [`Client`] for the broker and a [`Stop`] signal; it
/// runs until the signal, typically as the SDK's runner
/// (`client.worker::<T>(queue)...run(handler, stop)`). It is started once per replica
/// (default 2, as a deployment runs more than one), and again after a
/// [`Fault::WorkerRestart`](crate::Fault::WorkerRestart).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queen_sdk::StartAt;
/// use queen_verify::{Input, Invariant, WorkerCheck};
///
/// let check = WorkerCheck::new(|client, stop| async move {
///     client
///         .worker::<serde_json::Value>("jobs")
///         .group("workers", StartAt::Beginning)
///         .run(
///             move |job, step| {
///                 // Ack the job and push its result, in one step (the result's id is
///                 // derived from the acked job, so a second run is a duplicate).
///                 let step = step.push("results", |p| p.payload(&job.data));
///                 async move { Ok::<_, String>(step) }
///             },
///             stop,
///         )
///         .await
/// })
/// .group("workers")
/// .input(Input::new("jobs", &serde_json::json!({"job": "a"})))
/// .input(Input::new("jobs", &serde_json::json!({"job": "b"})))
/// .invariant(Invariant::inputs_acked())
/// .invariant(Invariant::pushed_once("results", "job", [("Default", "a"), ("Default", "b")]))
/// .seed(7)
/// .schedules(3);
/// let verdict = check.run().await;
/// assert!(verdict.passed(), "{verdict}");
/// # }
/// ```
#[derive(Clone)]
pub struct WorkerCheck {
    pub(crate) worker: WorkerFn,
    pub(crate) setup: Vec<SetupStep>,
    pub(crate) inputs: Vec<Input>,
    pub(crate) invariants: Vec<Invariant>,
    pub(crate) group: String,
    pub(crate) plan: FaultPlan,
    pub(crate) schedules: usize,
    pub(crate) budget: Option<Duration>,
    pub(crate) seed: u64,
    pub(crate) replicas: usize,
    pub(crate) lease: Duration,
    pub(crate) idle: Duration,
    pub(crate) run_timeout: Duration,
    pub(crate) hold: Duration,
    pub(crate) retry: RetryPolicy,
    pub(crate) max_shrink_runs: u32,
    /// Inputs may end dead-lettered ([`WorkerCheck::allow_dead_letters`]).
    pub(crate) dead_letters_allowed: bool,
    /// A setting that could not be read (a bad [`SCHEDULES_VAR`]): the check cannot run.
    pub(crate) bad_setting: Option<String>,
    /// `Some`: run against a broker by URL through a fault proxy (see `remote`).
    pub(crate) remote: Option<Arc<crate::remote::Remote>>,
}

impl fmt::Debug for WorkerCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rows = self
            .setup
            .iter()
            .filter(|s| matches!(s, SetupStep::KvRow { .. }))
            .count();
        f.debug_struct("WorkerCheck")
            .field("kv_rows", &rows)
            .field("setup_hooks", &(self.setup.len() - rows))
            .field("inputs", &self.inputs.len())
            .field("invariants", &self.invariants)
            .field("group", &self.group)
            .field("plan", &self.plan)
            .field("schedules", &self.schedules)
            .field("seed", &self.seed)
            .field("replicas", &self.replicas)
            .finish_non_exhaustive()
    }
}

impl WorkerCheck {
    /// A check of `worker`: no initial state, no inputs, no invariants, the default
    /// [`FaultPlan`], 100 schedules from seed 0, 2 replicas, a 60 s lease, the competing
    /// consumers' group.
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_client, stop| async move { stop.await });
    /// # let _ = check;
    /// ```
    pub fn new<F, Fut>(worker: F) -> Self
    where
        F: Fn(Client, Stop) -> Fut + Send + Sync + 'static,
        Fut: Future + Send + 'static,
        Fut::Output: WorkerResult,
    {
        let worker: WorkerFn = Arc::new(move |client, stop| -> WorkerFuture {
            let fut = worker(client, stop);
            Box::pin(async move { fut.await.into_result() })
        });
        WorkerCheck {
            worker,
            setup: Vec::new(),
            inputs: Vec::new(),
            invariants: Vec::new(),
            group: QUEUE_MODE.to_string(),
            plan: FaultPlan::default(),
            schedules: 100,
            budget: None,
            seed: 0,
            replicas: 2,
            lease: Duration::from_secs(60),
            idle: Duration::from_millis(200),
            run_timeout: Duration::from_secs(30),
            hold: Duration::from_millis(300),
            retry: RetryPolicy::default()
                .max_attempts(5)
                .min_delay(Duration::from_millis(20))
                .max_delay(Duration::from_millis(250))
                .jitter(false),
            max_shrink_runs: 48,
            dead_letters_allowed: false,
            bad_setting: None,
            remote: None,
        }
    }

    /// Seeds the KV row `ns/key` with `value` (serialized with serde) for `ttl`, before
    /// the inputs are pushed: the state a worker expects to find, such as the stock an
    /// inventory worker reserves from.
    ///
    /// Like every step of the initial state it is written once per run, on the fresh
    /// broker, by the verifier's own client: never faulted, not counted in the
    /// schedule's call numbers, and kept (not written again) across a simulated broker
    /// restart, as a durable row is. Rows and [`WorkerCheck::setup`] hooks run in the
    /// order given. A `ttl` counts on the broker's clock, which a run moves forward by
    /// the lease and a second at each lease expiry and idle wait: give [`Ttl::Forever`]
    /// to a row that must outlive the run. A row the broker refuses fails the run as a
    /// setup failure ([`Violation::is_setup_failure`](crate::Violation::is_setup_failure)).
    ///
    /// # Panics
    /// If `value` does not serialize to JSON (a map with non-string keys).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_sdk::Ttl;
    /// use queen_verify::{Invariant, WorkerCheck};
    /// use serde_json::json;
    ///
    /// let check = WorkerCheck::new(|_client, stop| async move { stop.await })
    ///     .kv_row("stock", "sku-1", &10, Ttl::Forever)
    ///     .kv_row("catalog", "sku-1", &json!({"name": "mug"}), Ttl::days(30))
    ///     .invariant(Invariant::kv_equals("stock", "sku-1", json!(10)));
    /// assert!(check.replay(Default::default()).await.passed());
    /// # }
    /// ```
    pub fn kv_row<T: Serialize + ?Sized>(
        mut self,
        ns: impl Into<String>,
        key: impl Into<String>,
        value: &T,
        ttl: impl Into<Ttl>,
    ) -> Self {
        self.setup.push(SetupStep::KvRow {
            ns: ns.into(),
            key: key.into(),
            value: serde_json::to_value(value).expect("a KV row's value serializes to JSON"),
            ttl: ttl.into(),
        });
        self
    }

    /// Runs `hook` against each run's fresh broker before the inputs are pushed and
    /// before any fault is armed: the general form of [`WorkerCheck::kv_row`], for
    /// initial state that takes more than a row (a batch of rows, a lock, a timer, a
    /// message on a queue the worker reads from but that is not an input).
    ///
    /// `hook` is given the verifier's own [`Client`] for the broker. Its calls are never
    /// faulted and are not counted in the schedule's call numbers (even if it keeps the
    /// client and calls later), so `transaction#1:lease-expiry` names the worker's
    /// first step with or without a setup. It runs once per run (every schedule, every
    /// replay and every shrinking run alike, in the order given among the other hooks
    /// and rows), and not again after a simulated broker restart, which keeps what it
    /// wrote on the file. An error it answers, a panic, or not finishing within
    /// [`WorkerCheck::run_timeout`] fails the run as a setup failure
    /// ([`Violation::is_setup_failure`](crate::Violation::is_setup_failure)) that names
    /// the hook and says why; such a failure is reported at once, without shrinking.
    /// Messages it pushes are not inputs: a run ends when the worker has acknowledged
    /// the [`WorkerCheck::input`]s.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_sdk::{Client, Ttl};
    /// use queen_verify::{Invariant, WorkerCheck};
    /// use serde_json::json;
    ///
    /// let check = WorkerCheck::new(|_client, stop| async move { stop.await })
    ///     .setup(|client: Client| async move {
    ///         let kv = client.kv();
    ///         for (sku, n) in [("sku-1", 10), ("sku-2", 3)] {
    ///             kv.put("stock", sku, &n, Ttl::Forever).await?;
    ///         }
    ///         Ok(())
    ///     })
    ///     .invariant(Invariant::kv_equals("stock", "sku-2", json!(3)));
    /// assert!(check.replay(Default::default()).await.passed());
    /// # }
    /// ```
    pub fn setup<F, Fut>(mut self, hook: F) -> Self
    where
        F: Fn(Client) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<(), SetupError>> + Send + 'static,
    {
        let hook: SetupFn = Arc::new(move |client| -> SetupFuture { Box::pin(hook(client)) });
        self.setup.push(SetupStep::Hook(hook));
        self
    }

    /// Pushes `input` before the worker starts (inputs are pushed in the order given).
    ///
    /// ```
    /// use queen_verify::{Input, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .input(Input::new("orders", &1));
    /// # let _ = check;
    /// ```
    pub fn input(mut self, input: Input) -> Self {
        self.inputs.push(input);
        self
    }

    /// Pushes each of `inputs`.
    ///
    /// ```
    /// use queen_verify::{Input, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .inputs((1..=3).map(|n| Input::new("orders", &n)));
    /// # let _ = check;
    /// ```
    pub fn inputs(mut self, inputs: impl IntoIterator<Item = Input>) -> Self {
        self.inputs.extend(inputs);
        self
    }

    /// Checks `invariant` after every run (in the order given; the first that breaks
    /// is reported).
    ///
    /// ```
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::no_dead_letters());
    /// # let _ = check;
    /// ```
    pub fn invariant(mut self, invariant: Invariant) -> Self {
        self.invariants.push(invariant);
        self
    }

    /// The consumer group the worker consumes the inputs as (default: the competing
    /// consumers, [`QUEUE_MODE`]). A run is over when this group has acknowledged
    /// every input.
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await }).group("billing");
    /// # let _ = check;
    /// ```
    pub fn group(mut self, group: impl Into<String>) -> Self {
        self.group = group.into();
        self
    }

    /// Which faults to draw and how often (default [`FaultPlan::default`]).
    ///
    /// ```
    /// use queen_verify::{FaultKind, FaultPlan, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .faults(FaultPlan::only([FaultKind::CommitThenDrop]));
    /// # let _ = check;
    /// ```
    pub fn faults(mut self, plan: FaultPlan) -> Self {
        self.plan = plan;
        self
    }

    /// How many schedules [`WorkerCheck::run`] draws (default 100).
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await }).schedules(500);
    /// # let _ = check;
    /// ```
    pub fn schedules(mut self, n: usize) -> Self {
        self.schedules = n;
        self
    }

    /// `n` schedules, or the number in [`SCHEDULES_VAR`] (`QUEEN_VERIFY_SCHEDULES`)
    /// when it is set: CI runs a few, a nightly job many, with the same test.
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .schedules_from_env(24);
    /// # let _ = check;
    /// ```
    ///
    /// A value that is not a whole number is not ignored: the check then cannot run,
    /// and says why ([`Verdict::could_not_run`]). `0` cannot run either: it proves
    /// nothing.
    pub fn schedules_from_env(mut self, n: usize) -> Self {
        match std::env::var(SCHEDULES_VAR) {
            Err(_) => self.schedules(n),
            Ok(v) => match v.trim().parse() {
                Ok(n) => self.schedules(n),
                Err(_) => {
                    self.bad_setting = Some(format!(
                        "{SCHEDULES_VAR}={v:?} is not a number of schedules"
                    ));
                    self
                }
            },
        }
    }

    /// Lets inputs end dead-lettered. Without it (or an
    /// [`Invariant::dead_letters`] naming the ones expected), an input that ends in
    /// the dead-letter queue is a violation, "no input dead-lettered": a worker that
    /// gives up on every input otherwise satisfies "every input acknowledged".
    ///
    /// ```
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked())
    ///     .allow_dead_letters();
    /// # let _ = check;
    /// ```
    pub fn allow_dead_letters(mut self) -> Self {
        self.dead_letters_allowed = true;
        self
    }

    /// Stops drawing new schedules once `d` has passed (a schedule under way, and a
    /// shrink, still finish).
    ///
    /// ```
    /// use std::time::Duration;
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .schedules(usize::MAX)
    ///     .time_budget(Duration::from_secs(60));
    /// # let _ = check;
    /// ```
    pub fn time_budget(mut self, d: Duration) -> Self {
        self.budget = Some(d);
        self
    }

    /// The seed the schedules are drawn from. The default is 0, fixed on purpose: every
    /// run of a check draws the same schedules and prints the same verdict, so a CI job
    /// is repeatable and a failure it reports is there the next time. To explore other
    /// schedules, set another seed, or run a [`Cli`](crate::Cli) program with
    /// `--seed random`, which draws one and prints it (the run can then be replayed).
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await }).seed(0x5eed);
    /// # let _ = check;
    /// ```
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// How many copies of the worker run at once (default 2, at least 1). With one, a
    /// message whose lease lapses mid-step is only taken again by the same copy.
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await }).replicas(3);
    /// # let _ = check;
    /// ```
    pub fn replicas(mut self, n: usize) -> Self {
        self.replicas = n.max(1);
        self
    }

    /// The worker's lease (default 60 s, the SDK's): lease expiries move the broker's
    /// clock by this plus a second.
    ///
    /// ```
    /// use std::time::Duration;
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .lease(Duration::from_secs(30));
    /// # let _ = check;
    /// ```
    pub fn lease(mut self, d: Duration) -> Self {
        self.lease = d;
        self
    }

    /// How long the worker may make no progress (no step, ack or push answered, no
    /// message popped) with inputs unacknowledged before the broker's clock is moved
    /// past the lease, so what waits on a lapsed lease comes back (default 200 ms, on
    /// the run's paused clock: it costs no real time in process).
    ///
    /// ```
    /// use std::time::Duration;
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .idle(Duration::from_millis(500));
    /// # let _ = check;
    /// ```
    pub fn idle(mut self, d: Duration) -> Self {
        self.idle = d;
        self
    }

    /// The most one run may take before it counts as a violation of "every input
    /// acknowledged" (default 30 s), counted on the run's paused clock and on the wall
    /// clock alike: a worker that waits makes virtual time pass, one that spins does
    /// not.
    ///
    /// ```
    /// use std::time::Duration;
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .run_timeout(Duration::from_secs(10));
    /// # let _ = check;
    /// ```
    pub fn run_timeout(mut self, d: Duration) -> Self {
        self.run_timeout = d;
        self
    }

    /// How long a call is held after a lease expiry, so another replica can take the
    /// message meanwhile (default 300 ms, on the run's paused clock).
    ///
    /// ```
    /// use std::time::Duration;
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .lease_expiry_hold(Duration::from_millis(500));
    /// # let _ = check;
    /// ```
    pub fn lease_expiry_hold(mut self, d: Duration) -> Self {
        self.hold = d;
        self
    }

    /// The retry policy of the clients given to the worker (default: 5 attempts, 20 to
    /// 250 ms apart, no jitter: enough to ride out a broker restart quickly).
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .retry(queen_sdk::RetryPolicy::default());
    /// # let _ = check;
    /// ```
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// At most `n` runs spent shrinking a failing schedule (default 48).
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await }).max_shrink_runs(10);
    /// # let _ = check;
    /// ```
    pub fn max_shrink_runs(mut self, n: u32) -> Self {
        self.max_shrink_runs = n;
        self
    }

    pub(crate) fn spec(&self) -> Arc<RunSpec> {
        let mut inputs = self.inputs.clone();
        for (n, i) in inputs.iter_mut().enumerate() {
            if i.transaction_id.is_empty() {
                i.transaction_id = format!("input-{n}");
            }
        }
        Arc::new(RunSpec {
            worker: Arc::clone(&self.worker),
            setup: self.setup.clone(),
            inputs,
            invariants: self.judged_invariants(),
            group: self.group.clone(),
            replicas: self.replicas,
            lease: self.lease,
            idle: self.idle,
            run_timeout: self.run_timeout,
            hold: self.hold,
            retry: self.retry.clone(),
        })
    }

    /// The invariants a run is judged by: the caller's, then, unless dead letters are
    /// allowed or an invariant judges them, "no input dead-lettered".
    fn judged_invariants(&self) -> Vec<Invariant> {
        let mut all = self.invariants.clone();
        if !self.dead_letters_allowed && !all.iter().any(Invariant::judges_dead_letters) {
            all.push(Invariant::no_dead_letters().renamed(
                "no input dead-lettered (WorkerCheck::allow_dead_letters, or Invariant::dead_letters, to expect some)",
            ));
        }
        all
    }

    /// Why this check cannot judge its worker before any run, if it cannot.
    fn unrunnable(&self) -> Option<CouldNotRun> {
        if let Some(bad) = &self.bad_setting {
            return Some(CouldNotRun::before_any_run(bad.clone()));
        }
        if self.invariants.is_empty() {
            return Some(CouldNotRun::before_any_run(
                "no invariant: nothing would be judged (add one, e.g. Invariant::inputs_acked())",
            ));
        }
        None
    }

    /// A verdict of a check that could not run.
    fn could_not(
        &self,
        why: CouldNotRun,
        schedules: usize,
        faults_hit: usize,
        started: Instant,
    ) -> Verdict {
        Verdict {
            seed: self.seed,
            schedules,
            faults_hit,
            elapsed: started.elapsed(),
            counterexample: None,
            could_not_run: Some(why),
        }
    }

    fn plan(&self) -> FaultPlan {
        let mut plan = self.plan.clone();
        if !plan.nth_set {
            plan.max_nth = (self.inputs.len() as u32 + 2).max(3);
        }
        plan
    }

    /// The schedules this check's seed draws, in order (the first `n`): what
    /// [`WorkerCheck::run`] would run, without running anything.
    ///
    /// ```
    /// let check = queen_verify::WorkerCheck::new(|_c, stop| async move { stop.await }).seed(3);
    /// assert_eq!(check.drawn(5), check.drawn(5)); // a seed fixes its schedules
    /// ```
    pub fn drawn(&self, n: usize) -> Vec<Schedule> {
        let strategy = Schedule::strategy(&self.plan());
        let mut runner = self.runner();
        (0..n)
            .map(|_| Schedule::draw(&strategy, &mut runner).current())
            .collect()
    }

    fn runner(&self) -> TestRunner {
        let mut bytes = [0u8; 32];
        // splitmix64 over the seed fills ChaCha's 32-byte seed.
        let mut x = self.seed;
        for chunk in bytes.chunks_mut(8) {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
        }
        let config = Config {
            failure_persistence: None,
            ..Config::default()
        };
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
    }

    /// Runs the schedules (see [`WorkerCheck::schedules`] and
    /// [`WorkerCheck::time_budget`]) and answers the verdict: passed, or the first
    /// failing schedule shrunk to a minimal one. It runs on a runtime of its own on a
    /// blocking thread, so it can be awaited from any runtime.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked())
    ///     .schedules(2);
    /// assert_eq!(check.run().await.schedules, 2);
    /// # }
    /// ```
    pub async fn run(&self) -> Verdict {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.run_blocking())
            .await
            .expect("the verification thread")
    }

    /// [`WorkerCheck::run`], for code outside any async runtime (a plain `#[test]`).
    /// Do not call it from inside a runtime: it starts its own.
    ///
    /// ```
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked())
    ///     .schedules(1);
    /// assert!(check.run_blocking().passed());
    /// // A check with no invariant, or no schedule, proves nothing: it cannot run.
    /// assert!(check.clone().schedules(0).run_blocking().could_not_run.is_some());
    /// ```
    pub fn run_blocking(&self) -> Verdict {
        let verdict = self.run_schedules();
        self.clean_up();
        verdict
    }

    fn run_schedules(&self) -> Verdict {
        let started = Instant::now();
        if let Some(why) = self.unrunnable() {
            return self.could_not(why, 0, 0, started);
        }
        if self.schedules == 0 {
            return self.could_not(
                CouldNotRun::before_any_run(format!(
                    "no schedule to run (schedules(0), or {SCHEDULES_VAR}=0): nothing would be proven"
                )),
                0,
                0,
                started,
            );
        }
        let rt = self.runtime();
        let spec = self.spec();
        let strategy = Schedule::strategy(&self.plan());
        let mut runner = self.runner();
        let (mut schedules, mut faults_hit) = (0, 0);
        while schedules < self.schedules && self.budget.is_none_or(|b| started.elapsed() < b) {
            let mut tree = Schedule::draw(&strategy, &mut runner);
            let schedule = tree.current();
            schedules += 1;
            let outcome = self.run_schedule(&rt, &spec, schedule.clone());
            faults_hit += outcome.faults_hit;
            let Some(violation) = outcome.violation.clone() else {
                continue;
            };
            if violation.is_could_not_run() {
                return self.could_not(
                    CouldNotRun::of(&violation, schedules, schedule),
                    schedules,
                    faults_hit,
                    started,
                );
            }
            // Shrink: proptest's walk; a candidate counts as failing only if it breaks
            // the same invariant. A setup failure came before any fault: no schedule
            // is smaller.
            let shrink = !violation.is_setup_failure();
            let mut best: (Schedule, RunOutcome) = (schedule.clone(), outcome);
            let mut runs = 0;
            if shrink && tree.simplify() {
                while runs < self.max_shrink_runs {
                    runs += 1;
                    let candidate = tree.current();
                    let o = self.run_schedule(&rt, &spec, candidate.clone());
                    let same = o
                        .violation
                        .as_ref()
                        .is_some_and(|v| v.invariant == violation.invariant);
                    if same {
                        best = (candidate, o);
                        if !tree.simplify() {
                            break;
                        }
                    } else if !tree.complicate() {
                        break;
                    }
                }
            }
            // Then one fault at a time: a proptest walk can stop early (a removal that
            // passed once by timing ends it), and single removals are cheap to try.
            let mut i = best.0.len();
            while shrink && i > 0 && runs < self.max_shrink_runs {
                i -= 1;
                let mut faults = best.0.faults().to_vec();
                faults.remove(i);
                let candidate = Schedule::from(faults);
                runs += 1;
                let o = self.run_schedule(&rt, &spec, candidate.clone());
                if o.violation
                    .as_ref()
                    .is_some_and(|v| v.invariant == violation.invariant)
                {
                    best = (candidate, o);
                }
            }
            let (minimal, o) = best;
            return Verdict {
                seed: self.seed,
                schedules,
                faults_hit,
                elapsed: started.elapsed(),
                counterexample: Some(Counterexample {
                    seed: self.seed,
                    case: schedules,
                    original: schedule,
                    schedule: minimal,
                    shrink_runs: runs,
                    violation: o.violation.unwrap_or(violation),
                    trace: o.trace,
                }),
                could_not_run: None,
            };
        }
        if schedules == 0 {
            return self.could_not(
                CouldNotRun::before_any_run("the time budget ended before the first schedule"),
                0,
                faults_hit,
                started,
            );
        }
        Verdict {
            seed: self.seed,
            schedules,
            faults_hit,
            elapsed: started.elapsed(),
            counterexample: None,
            could_not_run: None,
        }
    }

    /// Runs one given schedule (a printed minimal schedule, parsed back) and answers
    /// its verdict, without drawing or shrinking: the replay of a reported failure.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), queen_verify::ParseScheduleError> {
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked());
    /// let verdict = check.replay("pop#1:unavailable".parse()?).await;
    /// assert_eq!(verdict.schedules, 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn replay(&self, schedule: Schedule) -> Verdict {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.replay_blocking(schedule))
            .await
            .expect("the verification thread")
    }

    /// [`WorkerCheck::replay`] for code outside any async runtime.
    ///
    /// ```
    /// use queen_verify::{Invariant, Schedule, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked());
    /// assert!(check.replay_blocking(Schedule::new()).passed());
    /// ```
    pub fn replay_blocking(&self, schedule: Schedule) -> Verdict {
        let verdict = self.replay_one(schedule);
        self.clean_up();
        verdict
    }

    fn replay_one(&self, schedule: Schedule) -> Verdict {
        let started = Instant::now();
        if let Some(why) = self.unrunnable() {
            return self.could_not(why, 0, 0, started);
        }
        let o = self.run_schedule(&self.runtime(), &self.spec(), schedule.clone());
        if let Some(v) = o.violation.as_ref().filter(|v| v.is_could_not_run()) {
            let why = CouldNotRun::of(v, 1, schedule);
            return self.could_not(why, 1, o.faults_hit, started);
        }
        Verdict {
            seed: self.seed,
            schedules: 1,
            faults_hit: o.faults_hit,
            elapsed: started.elapsed(),
            counterexample: o.violation.map(|violation| Counterexample {
                seed: self.seed,
                case: 1,
                original: schedule.clone(),
                schedule,
                shrink_runs: 0,
                violation,
                trace: o.trace,
            }),
            could_not_run: None,
        }
    }
}

/// Why a check with no broker URL cannot run in a build without the in-process broker.
#[cfg(not(feature = "in-process"))]
const NO_IN_PROCESS: &str = "this build of queen-verify has no in-process broker (built \
    without its `in-process` feature): point the check at a broker with \
    WorkerCheck::against(Broker::url(..)), or build queen-verify with default features";

impl WorkerCheck {
    /// The runtime a check's runs happen on. In process: one thread on a paused clock,
    /// so a run's waits (backoffs, long-polls, the idle window, lease-expiry holds)
    /// cost no real time, and its tasks interleave the same way on every replay (the
    /// broker's writer in lockstep with it, see [`queen_mock_broker::WriteMode`]).
    /// Against a URL, real time: the broker and the network keep it.
    fn runtime(&self) -> tokio::runtime::Runtime {
        let mut b = match self.remote {
            None => {
                #[cfg_attr(not(feature = "in-process"), allow(unused_mut))]
                let mut b = tokio::runtime::Builder::new_current_thread();
                #[cfg(feature = "in-process")]
                b.start_paused(true);
                b
            }
            Some(_) => {
                let mut b = tokio::runtime::Builder::new_multi_thread();
                b.worker_threads(2);
                b
            }
        };
        b.enable_all()
            .build()
            .expect("a tokio runtime for the verification")
    }

    /// By URL, after a verdict: deletes what the check made there (pass or fail: a
    /// replay makes it again), so that the next check finds the names it resets empty.
    /// A failure is said on stderr: the verdict stands, and the next check refuses
    /// what is left (or deletes it with `--allow-reset`).
    fn clean_up(&self) {
        let Some(remote) = &self.remote else {
            return;
        };
        let done = self
            .runtime()
            .block_on(crate::remote::clean_up(self.spec(), Arc::clone(remote)));
        if let Err(e) = done {
            eprintln!("queen-verify: {e}");
        }
    }

    /// Runs one schedule: on a fresh in-process broker, or against the broker by URL.
    fn run_schedule(
        &self,
        rt: &tokio::runtime::Runtime,
        spec: &Arc<RunSpec>,
        schedule: Schedule,
    ) -> RunOutcome {
        match &self.remote {
            #[cfg(feature = "in-process")]
            None => rt.block_on(run_one(Arc::clone(spec), schedule)),
            #[cfg(not(feature = "in-process"))]
            None => {
                let _ = (rt, schedule);
                crate::run::setup_failure(NO_IN_PROCESS.to_string())
            }
            Some(remote) => rt.block_on(crate::remote::run_remote(
                Arc::clone(spec),
                schedule,
                Arc::clone(remote),
            )),
        }
    }
}
