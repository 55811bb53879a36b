//! Fault schedules: which call gets which fault.
//!
//! A schedule names calls by their route and their ordinal on that route ("the 2nd
//! transaction", "the 1st pop"), not by their global position, because a worker's calls
//! on one route come in a stable order while the interleaving of routes (a lease renewal
//! on a timer, a long-poll) depends on timing. That keeps a schedule meaningful when it
//! is replayed, and lets proptest shrink it: fewer faults, earlier calls, simpler kinds.
//!
//! A schedule prints as text and parses back ([`Schedule`]'s `Display` and `FromStr`),
//! so a failing one can be pasted into a replay.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use proptest::prelude::*;
use proptest::strategy::{Union, ValueTree};
use proptest::test_runner::TestRunner;

/// The route a call goes to, as a schedule names it.
///
/// ```
/// use queen_verify::Route;
/// assert_eq!(Route::of("/api/v1/pop/queue/orders"), Route::Pop);
/// assert_eq!(Route::Transaction.to_string(), "transaction");
/// assert_eq!("ack".parse::<Route>(), Ok(Route::Ack));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Route {
    /// `POST /api/v1/transaction`: a worker's step.
    Transaction,
    /// `GET /api/v1/pop/...`: taking a batch under a lease.
    Pop,
    /// `POST /api/v1/ack` and `/api/v1/ack/batch`: settling on its own.
    Ack,
    /// `POST /api/v1/push`: pushing outside a transaction.
    Push,
    /// `POST /api/v1/lease/{id}/extend`: renewing a lease.
    LeaseExtend,
    /// `/api/v1/kv...`: standalone KV calls.
    Kv,
    /// Anything else (timers, locks, administration, health).
    Other,
}

impl Route {
    /// Every route, in the order used for parsing and listing.
    ///
    /// ```
    /// assert_eq!(queen_verify::Route::ALL[0], queen_verify::Route::Transaction);
    /// ```
    pub const ALL: [Route; 7] = [
        Route::Transaction,
        Route::Pop,
        Route::Ack,
        Route::Push,
        Route::LeaseExtend,
        Route::Kv,
        Route::Other,
    ];

    /// The route of a request path.
    ///
    /// ```
    /// use queen_verify::Route;
    /// assert_eq!(Route::of("/api/v1/transaction"), Route::Transaction);
    /// assert_eq!(Route::of("/api/v1/ack/batch"), Route::Ack);
    /// assert_eq!(Route::of("/api/v1/lease/abc/extend"), Route::LeaseExtend);
    /// assert_eq!(Route::of("/health"), Route::Other);
    /// ```
    pub fn of(path: &str) -> Route {
        let p = path.strip_prefix("/api/v1/").unwrap_or("");
        let first = p.split('/').next().unwrap_or("");
        match first {
            "transaction" => Route::Transaction,
            "pop" => Route::Pop,
            "ack" => Route::Ack,
            "push" => Route::Push,
            "lease" => Route::LeaseExtend,
            "kv" => Route::Kv,
            _ => Route::Other,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Route::Transaction => "transaction",
            Route::Pop => "pop",
            Route::Ack => "ack",
            Route::Push => "push",
            Route::LeaseExtend => "lease",
            Route::Kv => "kv",
            Route::Other => "other",
        }
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Route {
    type Err = ParseScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Route::ALL
            .into_iter()
            .find(|r| r.name() == s.trim())
            .ok_or_else(|| ParseScheduleError(format!("unknown route {s:?}")))
    }
}

/// What kind of fault: the fieldless twin of [`Fault`], for saying which kinds a
/// [`FaultPlan`] draws and how often.
///
/// ```
/// use queen_verify::{Fault, FaultKind};
/// assert_eq!(Fault::CommitThenDrop.kind(), FaultKind::CommitThenDrop);
/// assert_eq!(FaultKind::ALL.len(), 8);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FaultKind {
    /// See [`Fault::Unavailable`].
    Unavailable,
    /// See [`Fault::CommitThenUnavailable`].
    CommitThenUnavailable,
    /// See [`Fault::CommitThenDrop`].
    CommitThenDrop,
    /// See [`Fault::Delay`].
    Delay,
    /// See [`Fault::Overloaded`].
    Overloaded,
    /// See [`Fault::LeaseExpiry`].
    LeaseExpiry,
    /// See [`Fault::BrokerRestart`].
    BrokerRestart,
    /// See [`Fault::WorkerRestart`].
    WorkerRestart,
}

impl FaultKind {
    /// Every kind, simplest first (shrinking moves towards the front).
    ///
    /// ```
    /// assert_eq!(queen_verify::FaultKind::ALL[0], queen_verify::FaultKind::Delay);
    /// ```
    pub const ALL: [FaultKind; 8] = [
        FaultKind::Delay,
        FaultKind::Overloaded,
        FaultKind::Unavailable,
        FaultKind::CommitThenUnavailable,
        FaultKind::CommitThenDrop,
        FaultKind::WorkerRestart,
        FaultKind::LeaseExpiry,
        FaultKind::BrokerRestart,
    ];
}

/// One fault, done to one call.
///
/// The first five are HTTP faults of the broker's harness
/// ([`queen_mock_broker::harness::FaultKind`]); the last three act on the world around
/// the call: the broker's clock, the broker process, the worker process.
///
/// ```
/// use std::time::Duration;
/// use queen_verify::Fault;
/// assert_eq!(Fault::Delay(Duration::from_millis(50)).to_string(), "delay-50ms");
/// assert_eq!("overloaded-1s".parse::<Fault>(), Ok(Fault::Overloaded { retry_after_secs: 1 }));
/// assert_eq!("lease-expiry".parse::<Fault>(), Ok(Fault::LeaseExpiry));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// 503 `retry` with `Retry-After: 1`, before applying: nothing was written.
    Unavailable,
    /// Applied and committed, then answered 503: the caller thinks it failed.
    CommitThenUnavailable,
    /// Applied and committed, then the connection dropped: the answer is lost.
    CommitThenDrop,
    /// Held this long, then handled normally.
    Delay(Duration),
    /// 429 `overloaded` with `Retry-After` (seconds), before applying.
    Overloaded {
        /// The `Retry-After` header, in seconds (the SDK waits at least this long).
        retry_after_secs: u64,
    },
    /// While the call is in flight (it has reached the broker, not yet applied), the
    /// broker's manual clock jumps past the worker's lease, and the call is held a
    /// moment so another worker can take the message; then it is handled. A fenced
    /// step then rolls back (`rejected_ack`); an unfenced one applies.
    LeaseExpiry,
    /// The call is handled, then the broker goes down and starts again on the same
    /// data file and address before it takes another call: calls meanwhile find no
    /// broker (refused connections), long-polls end, leases and everything committed
    /// survive. The harness stops it as its `shutdown` does (calls already inside finish
    /// first), which is what a crash looks like to a worker of a broker that answers
    /// only what is on disk; torn writes are the storage-fault tests' business.
    BrokerRestart,
    /// The call is applied, its answer is lost (the connection drops), and the worker
    /// replica that sent it is cancelled (whatever it was doing, its batch and leases
    /// abandoned) and started again.
    WorkerRestart,
}

impl Fault {
    /// Its kind.
    ///
    /// ```
    /// use queen_verify::{Fault, FaultKind};
    /// assert_eq!(Fault::Overloaded { retry_after_secs: 1 }.kind(), FaultKind::Overloaded);
    /// ```
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Unavailable => FaultKind::Unavailable,
            Fault::CommitThenUnavailable => FaultKind::CommitThenUnavailable,
            Fault::CommitThenDrop => FaultKind::CommitThenDrop,
            Fault::Delay(_) => FaultKind::Delay,
            Fault::Overloaded { .. } => FaultKind::Overloaded,
            Fault::LeaseExpiry => FaultKind::LeaseExpiry,
            Fault::BrokerRestart => FaultKind::BrokerRestart,
            Fault::WorkerRestart => FaultKind::WorkerRestart,
        }
    }
}

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Unavailable => f.write_str("unavailable"),
            Fault::CommitThenUnavailable => f.write_str("commit-then-unavailable"),
            Fault::CommitThenDrop => f.write_str("commit-then-drop"),
            Fault::Delay(d) => write!(f, "delay-{}ms", d.as_millis()),
            Fault::Overloaded { retry_after_secs } => write!(f, "overloaded-{retry_after_secs}s"),
            Fault::LeaseExpiry => f.write_str("lease-expiry"),
            Fault::BrokerRestart => f.write_str("broker-restart"),
            Fault::WorkerRestart => f.write_str("worker-restart"),
        }
    }
}

impl FromStr for Fault {
    type Err = ParseScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        let bad = || ParseScheduleError(format!("unknown fault {s:?}"));
        Ok(match s {
            "unavailable" => Fault::Unavailable,
            "commit-then-unavailable" => Fault::CommitThenUnavailable,
            "commit-then-drop" => Fault::CommitThenDrop,
            "lease-expiry" => Fault::LeaseExpiry,
            "broker-restart" => Fault::BrokerRestart,
            "worker-restart" => Fault::WorkerRestart,
            _ => {
                if let Some(ms) = s.strip_prefix("delay-").and_then(|r| r.strip_suffix("ms")) {
                    Fault::Delay(Duration::from_millis(ms.parse().map_err(|_| bad())?))
                } else if let Some(secs) = s
                    .strip_prefix("overloaded-")
                    .and_then(|r| r.strip_suffix('s'))
                {
                    Fault::Overloaded {
                        retry_after_secs: secs.parse().map_err(|_| bad())?,
                    }
                } else {
                    return Err(bad());
                }
            }
        })
    }
}

/// One entry of a schedule: the `nth` call (from 1) to `route` gets `fault`.
///
/// ```
/// use queen_verify::{Fault, Route, ScheduledFault};
/// let f = ScheduledFault::new(Route::Transaction, 2, Fault::CommitThenDrop);
/// assert_eq!(f.to_string(), "transaction#2:commit-then-drop");
/// assert_eq!("transaction#2:commit-then-drop".parse(), Ok(f));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScheduledFault {
    /// The route of the call.
    pub route: Route,
    /// Its ordinal on that route, from 1 (over every worker replica, and across broker
    /// restarts).
    pub nth: u32,
    /// What is done to it.
    pub fault: Fault,
}

impl ScheduledFault {
    /// The `nth` call to `route` gets `fault`.
    ///
    /// ```
    /// use queen_verify::{Fault, Route, ScheduledFault};
    /// let f = ScheduledFault::new(Route::Pop, 1, Fault::LeaseExpiry);
    /// assert_eq!((f.route, f.nth), (Route::Pop, 1));
    /// ```
    pub fn new(route: Route, nth: u32, fault: Fault) -> Self {
        ScheduledFault { route, nth, fault }
    }
}

impl fmt::Display for ScheduledFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}:{}", self.route, self.nth, self.fault)
    }
}

impl FromStr for ScheduledFault {
    type Err = ParseScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseScheduleError(format!("expected route#n:fault, got {s:?}"));
        let (call, fault) = s.trim().split_once(':').ok_or_else(bad)?;
        let (route, nth) = call.split_once('#').ok_or_else(bad)?;
        let nth: u32 = nth.parse().map_err(|_| bad())?;
        if nth == 0 {
            return Err(ParseScheduleError("call ordinals start at 1".into()));
        }
        Ok(ScheduledFault {
            route: route.parse()?,
            nth,
            fault: fault.parse()?,
        })
    }
}

/// A fault schedule: the faults of one run, each tied to one call. The empty schedule
/// is the happy path.
///
/// It prints as `route#n:fault` entries separated by `, ` (`none` when empty) and parses
/// back, so a failing schedule can be replayed from its printed form:
///
/// ```
/// use queen_verify::{Fault, Route, Schedule};
/// let s = Schedule::new()
///     .with(Route::Transaction, 1, Fault::LeaseExpiry)
///     .with(Route::Pop, 2, Fault::CommitThenDrop);
/// assert_eq!(s.to_string(), "transaction#1:lease-expiry, pop#2:commit-then-drop");
/// assert_eq!(s.to_string().parse::<Schedule>(), Ok(s));
/// assert_eq!("none".parse::<Schedule>(), Ok(Schedule::new()));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Schedule {
    faults: Vec<ScheduledFault>,
}

impl Schedule {
    /// The empty schedule: no faults.
    ///
    /// ```
    /// assert!(queen_verify::Schedule::new().is_empty());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds: the `nth` call to `route` gets `fault`.
    ///
    /// ```
    /// use queen_verify::{Fault, Route, Schedule};
    /// let s = Schedule::new().with(Route::Ack, 1, Fault::Unavailable);
    /// assert_eq!(s.len(), 1);
    /// ```
    pub fn with(mut self, route: Route, nth: u32, fault: Fault) -> Self {
        self.faults
            .push(ScheduledFault::new(route, nth.max(1), fault));
        self
    }

    /// The faults, in the order given.
    ///
    /// ```
    /// use queen_verify::{Fault, Route, Schedule};
    /// let s = Schedule::new().with(Route::Pop, 1, Fault::Unavailable);
    /// assert_eq!(s.faults()[0].route, Route::Pop);
    /// ```
    pub fn faults(&self) -> &[ScheduledFault] {
        &self.faults
    }

    /// How many faults.
    ///
    /// ```
    /// assert_eq!(queen_verify::Schedule::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.faults.len()
    }

    /// Whether it has no faults.
    ///
    /// ```
    /// assert!("none".parse::<queen_verify::Schedule>().unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.faults.is_empty()
    }

    /// The fault for the `nth` call to `route`: the first entry naming it.
    ///
    /// ```
    /// use queen_verify::{Fault, Route, Schedule};
    /// let s = Schedule::new().with(Route::Pop, 2, Fault::Unavailable);
    /// assert_eq!(s.fault_for(Route::Pop, 2), Some(Fault::Unavailable));
    /// assert_eq!(s.fault_for(Route::Pop, 1), None);
    /// ```
    pub fn fault_for(&self, route: Route, nth: u32) -> Option<Fault> {
        self.faults
            .iter()
            .find(|f| f.route == route && f.nth == nth)
            .map(|f| f.fault)
    }

    /// A proptest strategy drawing schedules as `plan` says: use it in your own
    /// `proptest!` blocks, or let [`crate::WorkerCheck`] drive it.
    ///
    /// ```
    /// use proptest::strategy::{Strategy, ValueTree};
    /// use proptest::test_runner::TestRunner;
    /// use queen_verify::{FaultPlan, Schedule};
    /// let mut runner = TestRunner::deterministic();
    /// let tree = Schedule::strategy(&FaultPlan::default()).new_tree(&mut runner).unwrap();
    /// assert!(tree.current().len() <= FaultPlan::default().max_faults_per_schedule());
    /// ```
    pub fn strategy(plan: &FaultPlan) -> BoxedStrategy<Schedule> {
        let kinds: Vec<(u32, BoxedStrategy<Fault>)> = FaultKind::ALL
            .into_iter()
            .filter_map(|k| {
                let w = plan.weight_of(k);
                (w > 0).then(|| (w, fault_strategy(k, plan)))
            })
            .collect();
        let routes: Vec<(u32, BoxedStrategy<Route>)> = plan
            .routes
            .iter()
            .filter(|(_, w)| *w > 0)
            .map(|(r, w)| (*w, Just(*r).boxed()))
            .collect();
        if kinds.is_empty() || routes.is_empty() || plan.max_faults == 0 {
            return Just(Schedule::new()).boxed();
        }
        let step = (
            Union::new_weighted(routes),
            1..=plan.max_nth.max(1),
            Union::new_weighted(kinds),
        )
            .prop_map(|(route, nth, fault)| ScheduledFault { route, nth, fault });
        proptest::collection::vec(step, 0..=plan.max_faults)
            .prop_map(|faults| Schedule { faults })
            .boxed()
    }

    /// One schedule drawn by a runner (used to list what a seed would run).
    pub(crate) fn draw(
        strategy: &BoxedStrategy<Schedule>,
        runner: &mut TestRunner,
    ) -> Box<dyn ValueTree<Value = Schedule>> {
        strategy
            .new_tree(runner)
            .expect("a schedule strategy does not reject")
    }
}

fn fault_strategy(kind: FaultKind, plan: &FaultPlan) -> BoxedStrategy<Fault> {
    match kind {
        FaultKind::Unavailable => Just(Fault::Unavailable).boxed(),
        FaultKind::CommitThenUnavailable => Just(Fault::CommitThenUnavailable).boxed(),
        FaultKind::CommitThenDrop => Just(Fault::CommitThenDrop).boxed(),
        FaultKind::Delay => {
            let (lo, hi) = plan.delay_ms;
            (lo..=hi.max(lo))
                .prop_map(|ms| Fault::Delay(Duration::from_millis(ms)))
                .boxed()
        }
        FaultKind::Overloaded => (0..=plan.max_retry_after_secs)
            .prop_map(|s| Fault::Overloaded {
                retry_after_secs: s,
            })
            .boxed(),
        FaultKind::LeaseExpiry => Just(Fault::LeaseExpiry).boxed(),
        FaultKind::BrokerRestart => Just(Fault::BrokerRestart).boxed(),
        FaultKind::WorkerRestart => Just(Fault::WorkerRestart).boxed(),
    }
}

impl From<Vec<ScheduledFault>> for Schedule {
    fn from(faults: Vec<ScheduledFault>) -> Self {
        Schedule { faults }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.faults.is_empty() {
            return f.write_str("none");
        }
        for (i, x) in self.faults.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

impl FromStr for Schedule {
    type Err = ParseScheduleError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.trim();
        if s.is_empty() || s == "none" {
            return Ok(Schedule::new());
        }
        let faults = s
            .split(',')
            .map(str::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Schedule { faults })
    }
}

/// A schedule's text that does not parse.
///
/// ```
/// let err = "transaction#0:lease-expiry".parse::<queen_verify::Schedule>().unwrap_err();
/// assert!(err.to_string().contains("start at 1"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad fault schedule: {0}")]
pub struct ParseScheduleError(String);

/// Which faults a run draws, on which routes, and how often: the kinds' relative
/// weights (0 turns a kind off), the routes' weights, at most how many faults per
/// schedule, and up to which call ordinal.
///
/// The default plan faults transactions, pops, and standalone acks and pushes; not
/// [`Route::Other`] (timers, locks, administration, health): a worker that takes locks
/// or calls other routes adds `.route(Route::Other, n)` to be proven under their faults
/// too (all of them share one call counter, `other#N`).
///
/// Each schedule draws 0 to [`FaultPlan::max_faults`] faults; each fault picks a
/// route and a kind by weight and a call ordinal from 1 to [`FaultPlan::max_nth`]
/// (by default the number of inputs plus 2, so most faults land on calls that
/// happen).
///
/// ```
/// use queen_verify::{FaultKind, FaultPlan, Route};
/// let plan = FaultPlan::default()
///     .weight(FaultKind::LeaseExpiry, 4)       // four times as often as a weight of 1
///     .without(FaultKind::BrokerRestart)       // never
///     .route(Route::Push, 1)                   // also fault standalone pushes
///     .max_faults(3);
/// assert_eq!(plan.weight_of(FaultKind::BrokerRestart), 0);
/// assert_eq!(plan.max_faults_per_schedule(), 3);
/// ```
#[derive(Debug, Clone)]
pub struct FaultPlan {
    weights: Vec<(FaultKind, u32)>,
    routes: Vec<(Route, u32)>,
    max_faults: usize,
    pub(crate) max_nth: u32,
    pub(crate) nth_set: bool,
    delay_ms: (u64, u64),
    max_retry_after_secs: u64,
}

impl Default for FaultPlan {
    /// Every kind at weight 2 but lease expiries (3: the fault that finds unfenced
    /// steps) and the costly restarts and 429s (1); faults on
    /// transactions (weight 4), pops (2) and standalone acks and pushes (1); up to 3
    /// faults per schedule; delays of 10 to 150 ms; `Retry-After` of 0 or 1 s.
    fn default() -> Self {
        FaultPlan {
            weights: vec![
                (FaultKind::Delay, 2),
                (FaultKind::Overloaded, 1),
                (FaultKind::Unavailable, 2),
                (FaultKind::CommitThenUnavailable, 2),
                (FaultKind::CommitThenDrop, 2),
                (FaultKind::WorkerRestart, 1),
                (FaultKind::LeaseExpiry, 3),
                (FaultKind::BrokerRestart, 1),
            ],
            routes: vec![
                (Route::Transaction, 4),
                (Route::Pop, 2),
                (Route::Ack, 1),
                (Route::Push, 1),
            ],
            max_faults: 3,
            max_nth: 4,
            nth_set: false,
            delay_ms: (10, 150),
            max_retry_after_secs: 1,
        }
    }
}

impl FaultPlan {
    /// Only these kinds, each at weight 1.
    ///
    /// ```
    /// use queen_verify::{FaultKind, FaultPlan};
    /// let plan = FaultPlan::only([FaultKind::CommitThenDrop, FaultKind::LeaseExpiry]);
    /// assert_eq!(plan.weight_of(FaultKind::Delay), 0);
    /// assert_eq!(plan.weight_of(FaultKind::LeaseExpiry), 1);
    /// ```
    pub fn only(kinds: impl IntoIterator<Item = FaultKind>) -> Self {
        FaultPlan {
            weights: kinds.into_iter().map(|k| (k, 1)).collect(),
            ..FaultPlan::default()
        }
    }

    /// Draws `kind` with relative weight `w` (0: never).
    ///
    /// ```
    /// use queen_verify::{FaultKind, FaultPlan};
    /// assert_eq!(FaultPlan::default().weight(FaultKind::Delay, 7).weight_of(FaultKind::Delay), 7);
    /// ```
    pub fn weight(mut self, kind: FaultKind, w: u32) -> Self {
        self.weights.retain(|(k, _)| *k != kind);
        self.weights.push((kind, w));
        self
    }

    /// Never draws `kind`.
    ///
    /// ```
    /// use queen_verify::{FaultKind, FaultPlan};
    /// assert_eq!(FaultPlan::default().without(FaultKind::Delay).weight_of(FaultKind::Delay), 0);
    /// ```
    pub fn without(self, kind: FaultKind) -> Self {
        self.weight(kind, 0)
    }

    /// The weight of `kind`.
    ///
    /// ```
    /// use queen_verify::{FaultKind, FaultPlan};
    /// assert_eq!(FaultPlan::default().weight_of(FaultKind::LeaseExpiry), 3);
    /// ```
    pub fn weight_of(&self, kind: FaultKind) -> u32 {
        self.weights
            .iter()
            .find(|(k, _)| *k == kind)
            .map_or(0, |(_, w)| *w)
    }

    /// Faults calls to `route` with relative weight `w` (0: never).
    ///
    /// ```
    /// use queen_verify::{FaultPlan, Route};
    /// let plan = FaultPlan::default().route(Route::Pop, 0); // leave pops alone
    /// # let _ = plan;
    /// ```
    pub fn route(mut self, route: Route, w: u32) -> Self {
        self.routes.retain(|(r, _)| *r != route);
        self.routes.push((route, w));
        self
    }

    /// At most `n` faults per schedule (default 3).
    ///
    /// ```
    /// use queen_verify::FaultPlan;
    /// assert_eq!(FaultPlan::default().max_faults(5).max_faults_per_schedule(), 5);
    /// ```
    pub fn max_faults(mut self, n: usize) -> Self {
        self.max_faults = n;
        self
    }

    /// The most faults a schedule holds.
    ///
    /// ```
    /// assert_eq!(queen_verify::FaultPlan::default().max_faults_per_schedule(), 3);
    /// ```
    pub fn max_faults_per_schedule(&self) -> usize {
        self.max_faults
    }

    /// Faults land on call ordinals 1 to `n` of their route (default: the number of
    /// inputs plus 2).
    ///
    /// ```
    /// let plan = queen_verify::FaultPlan::default().max_nth(10);
    /// # let _ = plan;
    /// ```
    pub fn max_nth(mut self, n: u32) -> Self {
        self.max_nth = n.max(1);
        self.nth_set = true;
        self
    }

    /// Delays last `min..=max` (default 10 to 150 ms).
    ///
    /// ```
    /// use std::time::Duration;
    /// let plan = queen_verify::FaultPlan::default().delays(Duration::from_millis(1), Duration::from_millis(20));
    /// # let _ = plan;
    /// ```
    pub fn delays(mut self, min: Duration, max: Duration) -> Self {
        self.delay_ms = (min.as_millis() as u64, max.as_millis() as u64);
        self
    }

    /// 429s carry a `Retry-After` of 0 to `secs` seconds (default 1; the SDK waits
    /// it in real time, so larger values make runs slower).
    ///
    /// ```
    /// let plan = queen_verify::FaultPlan::default().max_retry_after(2);
    /// # let _ = plan;
    /// ```
    pub fn max_retry_after(mut self, secs: u64) -> Self {
        self.max_retry_after_secs = secs;
        self
    }
}
