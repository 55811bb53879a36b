//! What a check answers: a [`Verdict`] for the whole run and, when an invariant broke,
//! a [`Counterexample`]: the seed, the minimal schedule, the invariant, and the calls
//! around the faults, printed so the failure can be replayed with one call.

use std::fmt;
use std::time::Duration;

use crate::schedule::{Fault, Route, Schedule};

/// The name under which a run that could not be set up is reported: the broker did not
/// start, the initial state (KV rows, setup hooks) could not be written, or the inputs
/// could not be pushed.
pub(crate) const SETUP_FAILED: &str = "the run could be set up";

/// The name under which a run the verifier could not carry out is reported (a broker
/// restart failed, the final state could not be read).
pub(crate) const HARNESS_FAILED: &str = "the verifier could carry out the run";

/// An invariant that did not hold at the end of a run.
///
/// ```
/// let v = queen_verify::Violation { invariant: "nothing dead-lettered".into(), detail: "order-3".into() };
/// assert_eq!(v.to_string(), "nothing dead-lettered: order-3");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The invariant's name.
    pub invariant: String,
    /// What was wrong.
    pub detail: String,
}

impl Violation {
    /// Whether the run never got to the worker: the broker did not start, a KV row of
    /// [`WorkerCheck::kv_row`](crate::WorkerCheck::kv_row) or a
    /// [`WorkerCheck::setup`](crate::WorkerCheck::setup) hook failed (its error is the
    /// detail), or the inputs could not be pushed. Such a failure happens before any
    /// fault is armed, so it is not shrunk.
    ///
    /// A check reports such a run as [`Verdict::could_not_run`], never as a
    /// counterexample.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_client, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked())
    ///     .setup(|_client| async move { Err("the catalogue is empty".into()) });
    /// let verdict = check.replay(Default::default()).await;
    /// assert!(verdict.counterexample.is_none());
    /// let why = verdict.could_not_run.expect("setup failed");
    /// assert!(why.cause.ends_with("setup hook 1 failed: the catalogue is empty"), "{why}");
    /// # }
    /// ```
    pub fn is_setup_failure(&self) -> bool {
        self.invariant == SETUP_FAILED
    }

    /// Whether this says the worker could not be judged, not that it broke an
    /// invariant: a setup failure ([`Violation::is_setup_failure`]), or a run the
    /// verifier itself could not carry out (a broker that did not come back after a
    /// restart, a final state it could not read).
    ///
    /// ```
    /// let v = queen_verify::Violation { invariant: "nothing dead-lettered".into(), detail: "order-3".into() };
    /// assert!(!v.is_could_not_run());
    /// ```
    pub fn is_could_not_run(&self) -> bool {
        self.is_setup_failure() || self.invariant == HARNESS_FAILED
    }
}

/// What a [`Verdict`] comes to, and the exit code a proof program answers for it.
///
/// ```
/// use queen_verify::Outcome;
/// assert_eq!(Outcome::Proven.code(), 0);
/// assert_eq!(Outcome::Counterexample.code(), 1);
/// assert_eq!(Outcome::CouldNotRun.code(), 2);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every schedule passed (exit code 0).
    Proven,
    /// A schedule broke an invariant (exit code 1).
    Counterexample,
    /// The worker could not be judged: its setup failed, or the verifier could not
    /// carry out a run (exit code 2).
    CouldNotRun,
}

impl Outcome {
    /// The exit code: 0 proven, 1 counterexample, 2 could not run.
    ///
    /// ```
    /// assert_eq!(queen_verify::Outcome::Proven.code(), 0);
    /// ```
    pub fn code(self) -> u8 {
        match self {
            Outcome::Proven => 0,
            Outcome::Counterexample => 1,
            Outcome::CouldNotRun => 2,
        }
    }
}

impl From<Outcome> for std::process::ExitCode {
    fn from(o: Outcome) -> Self {
        std::process::ExitCode::from(o.code())
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.invariant, self.detail)
    }
}

/// A call the broker received from a worker during a run.
///
/// ```
/// use queen_verify::{Fault, Route, TraceCall, TraceEntry};
/// let call = TraceEntry::Call(TraceCall {
///     broker_life: 0, replica: Some(1), method: "POST".into(), path: "/api/v1/transaction".into(),
///     route: Route::Transaction, nth: 2, fault: Some(Fault::CommitThenDrop), status: Some(200),
/// });
/// assert!(call.to_string().ends_with("-> 200  <- commit-then-drop"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceCall {
    /// Which life of the broker took it (0, then 1 after the first restart...).
    pub broker_life: u32,
    /// The worker replica that sent it (`None`: a client the verifier did not make).
    pub replica: Option<usize>,
    /// Its method.
    pub method: String,
    /// Its path.
    pub path: String,
    /// Its route.
    pub route: Route,
    /// Its ordinal on that route, from 1: what a schedule names.
    pub nth: u32,
    /// The schedule's fault done to it.
    pub fault: Option<Fault>,
    /// The status answered (`None`: it had not finished when the run ended).
    pub status: Option<u16>,
}

/// Something the verifier did during a run.
///
/// ```
/// use queen_verify::{Event, TraceEntry};
/// let jump = TraceEntry::Event(Event::ClockJump { secs: 61, why: "idle".into() });
/// assert_eq!(jump.to_string(), "-- clock +61 s: idle");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The run's initial state was written (before the inputs, before any fault; its
    /// calls are neither faulted nor counted).
    Setup {
        /// KV rows seeded with [`WorkerCheck::kv_row`](crate::WorkerCheck::kv_row).
        kv_rows: usize,
        /// Hooks run, given with [`WorkerCheck::setup`](crate::WorkerCheck::setup).
        hooks: usize,
        /// How long it took.
        took: Duration,
    },
    /// The broker's clock moved forward.
    ClockJump {
        /// By how many seconds.
        secs: u64,
        /// Why.
        why: String,
    },
    /// The broker was stopped and started again on the same file and address.
    BrokerRestart {
        /// How long it was away.
        took: Duration,
    },
    /// A worker replica was cancelled and started again.
    WorkerRestart {
        /// Which one.
        replica: usize,
    },
    /// A worker replica's closure ended.
    WorkerExit {
        /// Which one.
        replica: usize,
        /// How.
        outcome: String,
    },
    /// Against a broker URL: a call held past the lease before it is forwarded, so the
    /// lease lapses while the step is in flight (a lease expiry, in real time).
    Held {
        /// For how many seconds.
        secs: u64,
        /// Why.
        why: String,
    },
    /// Against a broker URL: a fault of the schedule that only an in-process broker
    /// can make was not done.
    Skipped {
        /// The fault and why it was not done.
        what: String,
    },
}

/// One line of a run's trace: a call, or an act of the verifier, in order.
///
/// ```
/// use queen_verify::{Event, TraceEntry};
/// let restart = TraceEntry::Event(Event::WorkerRestart { replica: 0 });
/// assert_eq!(restart.to_string(), "-- worker 0 cancelled and started again");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceEntry {
    /// A call from a worker.
    Call(TraceCall),
    /// An act of the verifier.
    Event(Event),
}

impl fmt::Display for TraceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TraceEntry::Call(c) => {
                let who = c.replica.map_or("?".into(), |r| format!("worker {r}"));
                let call = format!("{}#{}", c.route, c.nth);
                let fault = c.fault.map_or(String::new(), |x| format!("  <- {x}"));
                let status = c.status.map_or("(no answer yet)".into(), |s| s.to_string());
                write!(
                    f,
                    "{call:<15} {who:<9} {} {} -> {status}{fault}",
                    c.method, c.path
                )
            }
            TraceEntry::Event(Event::Setup {
                kv_rows,
                hooks,
                took,
            }) => write!(
                f,
                "-- set up before any fault ({kv_rows} KV row(s), {hooks} hook(s), {} ms; its calls not counted)",
                took.as_millis()
            ),
            TraceEntry::Event(Event::ClockJump { secs, why }) => {
                write!(f, "-- clock +{secs} s: {why}")
            }
            TraceEntry::Event(Event::BrokerRestart { took }) => write!(
                f,
                "-- broker crashed and restarted on the same file ({} ms away)",
                took.as_millis()
            ),
            TraceEntry::Event(Event::WorkerRestart { replica }) => {
                write!(f, "-- worker {replica} cancelled and started again")
            }
            TraceEntry::Event(Event::WorkerExit { replica, outcome }) => {
                write!(f, "-- worker {replica} {outcome}")
            }
            TraceEntry::Event(Event::Held { secs, why }) => {
                write!(f, "-- held {secs} s: {why}")
            }
            TraceEntry::Event(Event::Skipped { what }) => write!(f, "-- skipped: {what}"),
        }
    }
}

/// A schedule that breaks an invariant, shrunk to a minimal one.
///
/// Its `Display` is the report: the invariant and what was wrong, the seed, the
/// minimal schedule and the one call that replays it, and the calls around each fault.
///
/// ```
/// use queen_verify::{Counterexample, Violation};
/// let c = Counterexample {
///     seed: 7, case: 3, original: "pop#1:unavailable, transaction#1:lease-expiry".parse().unwrap(),
///     schedule: "transaction#1:lease-expiry".parse().unwrap(), shrink_runs: 2,
///     violation: Violation { invariant: "receipts once".into(), detail: "o-1 pushed 2 times".into() },
///     trace: vec![],
/// };
/// assert!(c.to_string().contains("minimal schedule: transaction#1:lease-expiry"));
/// ```
#[derive(Debug, Clone)]
pub struct Counterexample {
    /// The run's seed.
    pub seed: u64,
    /// Which schedule of the run failed first (from 1).
    pub case: usize,
    /// That schedule, as drawn.
    pub original: Schedule,
    /// The smallest schedule found that still breaks the same invariant.
    pub schedule: Schedule,
    /// Runs spent shrinking.
    pub shrink_runs: u32,
    /// What broke under the minimal schedule.
    pub violation: Violation,
    /// The minimal schedule's run: every call and act, in order.
    pub trace: Vec<TraceEntry>,
}

impl Counterexample {
    /// The trace lines around the faults (four either side of each, and the last
    /// lines of the run), with `...` where lines are left out.
    ///
    /// ```
    /// # let c = queen_verify::Counterexample {
    /// #     seed: 1, case: 1, original: Default::default(), schedule: Default::default(),
    /// #     shrink_runs: 0,
    /// #     violation: queen_verify::Violation { invariant: "i".into(), detail: "d".into() },
    /// #     trace: vec![],
    /// # };
    /// for line in c.trace_around_faults() {
    ///     println!("{line}");
    /// }
    /// ```
    pub fn trace_around_faults(&self) -> Vec<String> {
        const SIDE: usize = 4;
        let n = self.trace.len();
        let mut keep = vec![false; n];
        for (i, e) in self.trace.iter().enumerate() {
            let marked = match e {
                TraceEntry::Call(c) => c.fault.is_some(),
                TraceEntry::Event(_) => true,
            };
            if marked {
                for k in keep
                    .iter_mut()
                    .take((i + SIDE + 1).min(n))
                    .skip(i.saturating_sub(SIDE))
                {
                    *k = true;
                }
            }
        }
        for k in keep.iter_mut().skip(n.saturating_sub(SIDE)) {
            *k = true;
        }
        let mut out = Vec::new();
        let mut skipped = false;
        for (i, e) in self.trace.iter().enumerate() {
            if keep[i] {
                if skipped {
                    out.push("...".to_string());
                    skipped = false;
                }
                out.push(format!("{:>4}  {e}", i + 1));
            } else {
                skipped = true;
            }
        }
        out
    }
}

impl fmt::Display for Counterexample {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.violation.is_setup_failure() {
            writeln!(f, "the run could not be set up (the worker never started):")?;
            writeln!(f, "  {}", self.violation.detail)?;
            return writeln!(
                f,
                "seed {:#x}, schedule {} of the run: {} (not shrunk: the setup comes before any fault)",
                self.seed, self.case, self.original
            );
        }
        writeln!(f, "invariant broken: {}", self.violation.invariant)?;
        writeln!(f, "  {}", self.violation.detail)?;
        writeln!(
            f,
            "seed {:#x}, schedule {} of the run: {} ({} fault(s)), shrunk in {} run(s) to",
            self.seed,
            self.case,
            self.original,
            self.original.len(),
            self.shrink_runs
        )?;
        writeln!(f, "minimal schedule: {}", self.schedule)?;
        writeln!(
            f,
            "replay it with one call: check.replay(\"{}\".parse()?).await",
            self.schedule
        )?;
        writeln!(
            f,
            "calls around the faults ({} lines in all):",
            self.trace.len()
        )?;
        for line in self.trace_around_faults() {
            writeln!(f, "  {line}")?;
        }
        Ok(())
    }
}

/// Why a check could not judge its worker: it had nothing to judge by (no schedule,
/// no invariant, a bad setting), a run could not be set up (the broker did not start,
/// the initial state or the inputs could not be written), or the verifier could not
/// carry a run out (a broker that did not come back after a restart, a final state it
/// could not read). Never a counterexample: the worker was not caught doing anything.
///
/// ```
/// use queen_verify::{Invariant, WorkerCheck};
/// let verdict = WorkerCheck::new(|_c, stop| async move { stop.await })
///     .invariant(Invariant::inputs_acked())
///     .schedules(0)
///     .run_blocking();
/// let why = verdict.could_not_run.as_ref().expect("nothing ran");
/// assert!(why.cause.contains("no schedule"), "{why}");
/// assert_eq!(verdict.violations(), 0);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CouldNotRun {
    /// What stopped it, in one line.
    pub cause: String,
    /// The schedule it stopped at (its number in the run, from 1, and its faults), when
    /// a run had begun.
    pub at: Option<(usize, Schedule)>,
}

impl CouldNotRun {
    pub(crate) fn before_any_run(cause: impl Into<String>) -> Self {
        CouldNotRun {
            cause: cause.into(),
            at: None,
        }
    }

    /// The could-not-run `violation` of the run of `schedule`, numbered `case`.
    pub(crate) fn of(violation: &Violation, case: usize, schedule: Schedule) -> Self {
        let cause = if violation.is_setup_failure() {
            format!(
                "the run could not be set up (the worker never started): {}",
                violation.detail
            )
        } else {
            format!(
                "the verifier could not carry out the run: {}",
                violation.detail
            )
        };
        CouldNotRun {
            cause,
            at: Some((case, schedule)),
        }
    }
}

impl fmt::Display for CouldNotRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "could not run: {}", self.cause)?;
        if let Some((case, schedule)) = &self.at {
            write!(f, " (schedule {case} of the run: {schedule})")?;
        }
        Ok(())
    }
}

/// The answer of [`WorkerCheck::run`](crate::WorkerCheck::run) or
/// [`WorkerCheck::replay`](crate::WorkerCheck::replay).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// use queen_verify::{Invariant, WorkerCheck};
/// let idle = WorkerCheck::new(|_client, stop| async move { stop.await; Ok::<(), String>(()) })
///     .invariant(Invariant::inputs_acked());
/// let verdict = idle.replay("none".parse().unwrap()).await;
/// assert!(verdict.passed());
/// assert_eq!(verdict.violations(), 0);
/// println!("{verdict}");
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Verdict {
    /// The seed the schedules were drawn from.
    pub seed: u64,
    /// Schedules run before the verdict (shrinking runs not counted).
    pub schedules: usize,
    /// Faults done to calls, over every schedule run.
    pub faults_hit: usize,
    /// Wall time, shrinking included.
    pub elapsed: Duration,
    /// The first failing schedule, shrunk; `None` when every schedule run passed.
    pub counterexample: Option<Counterexample>,
    /// Why the worker could not be judged, if it could not: then nothing is proven and
    /// nothing was caught ([`Verdict::outcome`] is [`Outcome::CouldNotRun`]).
    pub could_not_run: Option<CouldNotRun>,
}

impl Verdict {
    /// Whether every schedule passed.
    ///
    /// ```
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked());
    /// assert!(check.replay_blocking(Default::default()).passed());
    /// ```
    pub fn passed(&self) -> bool {
        self.counterexample.is_none() && self.could_not_run.is_none()
    }

    /// Failing schedules found: 0 or 1 (a check stops at the first, then shrinks it).
    ///
    /// ```
    /// use queen_verify::{Invariant, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked());
    /// assert_eq!(check.replay_blocking(Default::default()).violations(), 0);
    /// ```
    pub fn violations(&self) -> usize {
        usize::from(self.counterexample.is_some())
    }

    /// Proven, a counterexample, or could not run: what a proof program's exit code
    /// says (`std::process::ExitCode::from(verdict.outcome())`).
    ///
    /// ```
    /// use queen_verify::{Invariant, Outcome, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked());
    /// assert_eq!(check.replay_blocking(Default::default()).outcome(), Outcome::Proven);
    /// let broken = check
    ///     .clone()
    ///     .setup(|_client| async move { Err("no catalogue".into()) });
    /// assert_eq!(broken.replay_blocking(Default::default()).outcome(), Outcome::CouldNotRun);
    /// ```
    pub fn outcome(&self) -> Outcome {
        match (&self.could_not_run, &self.counterexample) {
            (Some(_), _) => Outcome::CouldNotRun,
            (None, Some(c)) if c.violation.is_could_not_run() => Outcome::CouldNotRun,
            (None, Some(_)) => Outcome::Counterexample,
            (None, None) => Outcome::Proven,
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(why) = &self.could_not_run {
            return writeln!(
                f,
                "{why}\n{} schedule(s) begun from seed {:#x}, {:.1} s: nothing proven, nothing caught",
                self.schedules,
                self.seed,
                self.elapsed.as_secs_f64()
            );
        }
        writeln!(
            f,
            "{} schedule(s) from seed {:#x}, {} fault(s) injected, {:.1} s: {} violations",
            self.schedules,
            self.seed,
            self.faults_hit,
            self.elapsed.as_secs_f64(),
            self.violations()
        )?;
        if let Some(c) = &self.counterexample {
            write!(f, "{c}")?;
        }
        Ok(())
    }
}
