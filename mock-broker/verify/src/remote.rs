//! A check against a broker by URL: this project's standalone broker, Queen 2 or Queen
//! v0, started by CI or by a test, shared by every schedule of the check.
//!
//! Each schedule's run resets what the worker touches ([`Resources`], always with the
//! inputs' queues and the check's group), gives the inputs' queues a short lease,
//! writes the initial state, pushes the inputs, and runs the worker's replicas against
//! an in-process fault proxy (`remote/proxy.rs`) in front of the broker. The verifier's
//! own client talks to the broker directly: its calls are neither faulted nor counted.
//! Once every input is acknowledged, the invariants are evaluated on a blocking thread
//! whose [`State`] reads through the broker's public API.
//!
//! Files: `remote/proxy.rs` the fault proxy, `remote/reset.rs` the reset between
//! schedules, `remote/reader.rs` the [`State`] backend by URL and the invariants'
//! evaluation.
//!
//! What cannot be done from outside the broker is not done: a broker restart is not
//! drawn, and skipped (a trace line says so) in a schedule that names it. A lease
//! expiry is made in real time: the proxy holds the call past the lease before it
//! forwards it, and a run waits for a lapsed lease instead of moving a clock, which is
//! why leases are short.

mod proxy;
mod reader;
mod reset;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use queen_sdk::{Client, QueueOptions};
use tokio::runtime::Handle;
use tokio::sync::mpsc;

use crate::check::WorkerCheck;
use crate::invariant::State;
use crate::replicas::{self, Replica};
use crate::report::Event;
use crate::run::{
    REPLICA_AGENT, RunOutcome, RunSpec, SETUP_AGENT, SetupStep, harness_failure, set_up,
    setup_failure,
};
use crate::schedule::Schedule;
use proxy::{Action, Control, IN_PROCESS_ONLY, Proxy, Upstream};
use reader::{RemoteReader, evaluate, probe, progress};
use reset::{KnownKeys, Resets, foreign, reset};

/// The lease a remote check gives the worker's batches by default.
const DEFAULT_LEASE: Duration = Duration::from_secs(2);

/// What a check resets on a shared broker before each schedule, so that every schedule
/// starts from the same state: the queues, KV namespaces, timers and consumer groups
/// your worker (and its setup) writes. The inputs' queues and the check's group are
/// always reset; list the rest.
///
/// A reset deletes each queue (`DELETE /api/v1/resources/queues/{queue}`: its messages,
/// cursors, leases and dead letters), each KV row of each namespace, each pending timer
/// of each timer queue, and each group's cursors (`DELETE
/// /api/v1/consumer-groups/{group}`).
///
/// It deletes only what it made. Before its first schedule a check reads what is there
/// under those names: a message in one of its queues, a row in one of its namespaces
/// (where the broker cannot list a namespace: one of the keys it knows of), a pending
/// timer, a group's cursor, that it did not make, and it refuses to run (could not
/// run, exit code 2) with one line naming each and what it holds, unless told it may
/// delete them ([`Broker::allow_reset`], `--allow-reset`). After its last schedule,
/// pass or fail, it deletes what it made, so that the next check on the same names
/// (in this process or another) finds them empty. A check stopped before that (killed,
/// or its process crashed) leaves its state, which the next one refuses until allowed.
/// What is pushed there by hand *while* a check runs is deleted with its own: point a
/// check at a broker (or a tenant) of its own.
///
/// An invariant that reads a queue, namespace or timer queue not reset would read the
/// previous schedule's state as this one's: such a check fails before its first
/// worker starts, as a setup failure that names what to add.
///
/// ```
/// use queen_verify::Resources;
/// let resets = Resources::new()
///     .queues(["receipts"])
///     .kv_namespaces(["stock", "reserved"])
///     .timer_queues(["reminders"])
///     .groups(["audit"]);
/// # let _ = resets;
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resources {
    queues: Vec<String>,
    kv_namespaces: Vec<String>,
    kv_keys: Vec<(String, String)>,
    timer_queues: Vec<String>,
    groups: Vec<String>,
}

fn names<S: Into<String>>(into: &mut Vec<String>, more: impl IntoIterator<Item = S>) {
    into.extend(more.into_iter().map(Into::into));
}

impl Resources {
    /// Only the inputs' queues and the check's group (always reset).
    ///
    /// ```
    /// let inputs_only = queen_verify::Resources::new();
    /// assert_eq!(inputs_only, queen_verify::Resources::default());
    /// ```
    pub fn new() -> Self {
        Self::default()
    }

    /// Also deletes these queues (the ones your worker pushes to).
    ///
    /// ```
    /// let r = queen_verify::Resources::new().queues(["receipts", "refunds"]);
    /// # let _ = r;
    /// ```
    pub fn queues<S: Into<String>>(mut self, queues: impl IntoIterator<Item = S>) -> Self {
        names(&mut self.queues, queues);
        self
    }

    /// Also deletes every row of these KV namespaces (`queen-locks` holds the locks).
    ///
    /// ```
    /// let r = queen_verify::Resources::new().kv_namespaces(["stock"]);
    /// # let _ = r;
    /// ```
    pub fn kv_namespaces<S: Into<String>>(mut self, ns: impl IntoIterator<Item = S>) -> Self {
        names(&mut self.kv_namespaces, ns);
        self
    }

    /// Also deletes these keys of `ns` (and resets `ns` as
    /// [`Resources::kv_namespaces`] does). Only needed on a broker that cannot list a
    /// namespace (Queen 2's engine refuses a `getPrefix` with an empty prefix): there a
    /// reset deletes the keys it knows of, the ones the worker wrote through the fault
    /// proxy, the setup's rows and the ones the invariants read, all in this process;
    /// name here what an earlier run may have left, such as a `once` marker no
    /// invariant reads.
    ///
    /// ```
    /// let r = queen_verify::Resources::new()
    ///     .kv_keys("paid", ["order-1-paid", "order-2-paid"]);
    /// # let _ = r;
    /// ```
    pub fn kv_keys<S: Into<String>>(
        mut self,
        ns: impl Into<String>,
        keys: impl IntoIterator<Item = S>,
    ) -> Self {
        let ns: String = ns.into();
        self.kv_keys
            .extend(keys.into_iter().map(|k| (ns.clone(), k.into())));
        if !self.kv_namespaces.contains(&ns) {
            self.kv_namespaces.push(ns);
        }
        self
    }

    /// Also cancels every pending timer of these queues.
    ///
    /// ```
    /// let r = queen_verify::Resources::new().timer_queues(["reminders"]);
    /// # let _ = r;
    /// ```
    pub fn timer_queues<S: Into<String>>(mut self, queues: impl IntoIterator<Item = S>) -> Self {
        names(&mut self.timer_queues, queues);
        self
    }

    /// Also deletes these consumer groups' cursors, on every queue.
    ///
    /// ```
    /// let r = queen_verify::Resources::new().groups(["audit"]);
    /// # let _ = r;
    /// ```
    pub fn groups<S: Into<String>>(mut self, groups: impl IntoIterator<Item = S>) -> Self {
        names(&mut self.groups, groups);
        self
    }
}

/// A broker by URL for [`WorkerCheck::against`], with what to reset on it between
/// schedules (a required argument: a shared broker keeps every schedule's state).
///
/// ```
/// use std::time::Duration;
/// use queen_verify::{Broker, Resources};
/// let broker = Broker::url("http://127.0.0.1:6632", Resources::new().queues(["receipts"]))
///     .token("a-token")
///     .lease(Duration::from_secs(3));
/// assert_eq!(broker.base_url(), "http://127.0.0.1:6632");
/// ```
///
/// Without the resources it does not build:
///
/// ```compile_fail
/// let broker = queen_verify::Broker::url("http://127.0.0.1:6632");
/// ```
#[derive(Debug, Clone)]
pub struct Broker {
    url: String,
    token: Option<String>,
    resets: Resources,
    lease: Duration,
    allow_reset: bool,
}

impl Broker {
    /// The broker at `url` (plain `http://`, as the fault proxy forwards plain HTTP),
    /// resetting `resets` (and always the inputs' queues and the check's group) before
    /// each schedule.
    ///
    /// ```
    /// use queen_verify::{Broker, Resources};
    /// let url = std::env::var("QUEEN_URL").unwrap_or_else(|_| "http://127.0.0.1:6632".into());
    /// let broker = Broker::url(url, Resources::new().queues(["receipts"]));
    /// # let _ = broker;
    /// ```
    pub fn url(url: impl Into<String>, resets: Resources) -> Self {
        Broker {
            url: url.into(),
            token: None,
            resets,
            lease: DEFAULT_LEASE,
            allow_reset: false,
        }
    }

    /// Sends this bearer token, from the verifier's own client and from the worker's
    /// replicas (it also names the tenant every call acts as).
    ///
    /// ```
    /// use queen_verify::{Broker, Resources};
    /// let broker = Broker::url("http://127.0.0.1:6632", Resources::new()).token("t0ken");
    /// # let _ = broker;
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.token = Some(token.into());
        self
    }

    /// The lease the worker's batches are held under (default 2 s, at least 1 s). A
    /// lapsed lease is waited for in real time: what a lost answer or a restarted
    /// replica leaves comes back after it. The inputs' queues are configured with it
    /// (`leaseTime`), and the proxy caps each pop's `leaseSeconds` and each lease
    /// extension's `seconds` at it, since the SDK's worker asks for its own (60 s by
    /// default). A step that takes longer than this loses its lease: a correct worker
    /// still passes, more slowly.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queen_verify::{Broker, Resources};
    /// let broker = Broker::url("http://127.0.0.1:6632", Resources::new()).lease(Duration::from_secs(5));
    /// # let _ = broker;
    /// ```
    pub fn lease(mut self, d: Duration) -> Self {
        self.lease = d.max(Duration::from_secs(1));
        self
    }

    /// Lets the check delete what it finds under the names it resets though it did not
    /// make it: messages in its queues, rows in its KV namespaces, pending timers, a
    /// group's cursors. Without it, a check whose first reset would delete such state
    /// could not run (exit code 2), with one line naming each queue, namespace, timer
    /// queue or group and what it holds; with it, the check prints that line as what
    /// it deletes, and goes on. `--allow-reset` on a [`Cli`](crate::Cli) program.
    ///
    /// ```
    /// use queen_verify::{Broker, Resources};
    /// // CI's own broker, where an earlier step left messages in `receipts`.
    /// let broker = Broker::url("http://127.0.0.1:6632", Resources::new().queues(["receipts"]))
    ///     .allow_reset();
    /// # let _ = broker;
    /// ```
    pub fn allow_reset(mut self) -> Self {
        self.allow_reset = true;
        self
    }

    /// The broker's URL.
    ///
    /// ```
    /// use queen_verify::{Broker, Resources};
    /// assert_eq!(Broker::url("http://queen:6632", Resources::new()).base_url(), "http://queen:6632");
    /// ```
    pub fn base_url(&self) -> &str {
        &self.url
    }
}

impl WorkerCheck {
    /// Runs every schedule against `broker` by URL instead of on a fresh in-process
    /// broker: the replicas' clients point at a fault proxy the check starts on a local
    /// ephemeral port, which forwards to the broker and does the schedule's faults;
    /// the invariants read the broker's state through its public API.
    ///
    /// The fault a proxy cannot make is left out of the fault plan (a broker restart
    /// needs the broker's process) and skipped in a schedule that names it; the check
    /// prints that once. A lease expiry is done in real time: the proxy holds the call
    /// past [`Broker::lease`] before forwarding it. Before each schedule the
    /// broker is reset ([`Resources`]) and the inputs' queues get the short lease of
    /// [`Broker::lease`] ([`WorkerCheck::lease`], [`WorkerCheck::idle`] and
    /// [`WorkerCheck::lease_expiry_hold`] move an in-process broker's clock: by URL
    /// they do nothing). Invariants that call [`State::inspect`] cannot run against a
    /// URL: use [`State::messages`], [`State::cursor`], [`State::kv_row`],
    /// [`State::timers`] and [`State::dead_letters`]. To find such an invariant, or one
    /// that reads what the check does not reset, before a worker starts, each run
    /// evaluates every invariant once before it resets the broker and ignores its
    /// verdict: keep invariants free of side effects.
    ///
    /// ```no_run
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_sdk::StartAt;
    /// use queen_verify::{Broker, Input, Invariant, Resources, WorkerCheck};
    /// use serde_json::json;
    ///
    /// let url = std::env::var("QUEEN_URL").unwrap_or_else(|_| "http://127.0.0.1:6632".into());
    /// let verdict = WorkerCheck::new(|client, stop| async move {
    ///     client
    ///         .worker::<serde_json::Value>("orders")
    ///         .group("billing", StartAt::Beginning)
    ///         .run(|order, step| async move {
    ///             Ok::<_, String>(step.push("receipts", |p| p.payload(&order.data)))
    ///         }, stop)
    ///         .await
    /// })
    /// .group("billing")
    /// .inputs((1..=3).map(|n| Input::new("orders", &json!({"orderId": n}))))
    /// .invariant(Invariant::inputs_acked())
    /// .invariant(Invariant::pushed_once("receipts", "orderId", (1..=3).map(|n| ("Default", n.to_string()))))
    /// .against(Broker::url(url, Resources::new().queues(["receipts"])))
    /// .schedules_from_env(8)
    /// .run()
    /// .await;
    /// assert!(verdict.passed(), "{verdict}");
    /// # }
    /// ```
    pub fn against(mut self, broker: Broker) -> Self {
        for (kind, _) in IN_PROCESS_ONLY {
            self.plan = self.plan.without(kind);
        }
        let keys = KnownKeys::of(&broker.url);
        for (ns, key) in &broker.resets.kv_keys {
            keys.add(ns, key);
        }
        self.remote = Some(Arc::new(Remote::new(broker, keys)));
        self
    }

    /// This check, allowed to delete what it did not make by URL
    /// ([`Broker::allow_reset`]); in process, unchanged.
    pub(crate) fn allowing_reset(mut self) -> Self {
        if let Some(r) = &self.remote {
            self.remote = Some(Arc::new(Remote::new(
                r.broker.clone().allow_reset(),
                Arc::clone(&r.keys),
            )));
        }
        self
    }
}

/// Where a remote check's broker is, shared by every schedule (and clone) of a check.
#[derive(Debug)]
pub(crate) struct Remote {
    /// The broker's base URL.
    pub url: String,
    broker: Broker,
    /// Whether the skipped fault kinds were printed (once per check).
    told: AtomicBool,
    /// The KV keys the reset deletes where the broker cannot list a namespace.
    keys: Arc<KnownKeys>,
    /// Whether what the check resets is its own: found empty (or allowed to be reset)
    /// before the first schedule of a verdict; cleared by [`clean_up`] after its last.
    claimed: AtomicBool,
}

impl Remote {
    /// A remote of `broker` that has printed nothing and claimed nothing yet.
    fn new(broker: Broker, keys: Arc<KnownKeys>) -> Remote {
        Remote {
            url: broker.url.clone(),
            broker,
            told: AtomicBool::new(false),
            keys,
            claimed: AtomicBool::new(false),
        }
    }

    fn client(&self, agent: &str, url: &str, spec: &RunSpec) -> Result<Client, String> {
        let mut b = Client::builder()
            .url(url)
            .user_agent(agent)
            .retry(spec.retry.clone());
        if let Some(t) = &self.broker.token {
            b = b.token(t.clone());
        }
        b.build().map_err(|e| format!("a client for {url}: {e}"))
    }

    /// Prints, once per check, which fault kinds a remote run leaves out.
    fn tell_skipped(&self) {
        if !self.told.swap(true, Ordering::SeqCst) {
            let kinds: Vec<&str> = IN_PROCESS_ONLY.iter().map(|(_, why)| *why).collect();
            eprintln!(
                "queen-verify: against {}: skipped against a URL: {}",
                self.url,
                kinds.join(", ")
            );
        }
    }
}

/// Whether the worker's group has acknowledged every input, read from the group's
/// progress on each of their partitions (`reader::progress`); a failed read is "not
/// yet".
async fn all_acked(admin: &Client, upstream: &Upstream, spec: &RunSpec) -> bool {
    let mut per: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for i in &spec.inputs {
        *per.entry((&i.queue, &i.partition)).or_default() += 1;
    }
    for ((q, p), n) in per {
        match progress(admin, upstream, q, p, &spec.group).await {
            Ok(Some(c)) if c.next_offset >= n => {}
            _ => return false,
        }
    }
    true
}

/// Before a check's first reset: what it would delete that it did not make refuses the
/// run (one line naming each, and `--allow-reset`), unless the check is allowed to
/// reset it, when the same line says what goes.
async fn claim(
    remote: &Remote,
    resets: &Resets,
    admin: &Client,
    upstream: &Upstream,
) -> Result<(), String> {
    let url = &remote.url;
    let found = foreign(resets, admin, upstream, &remote.keys)
        .await
        .map_err(|e| format!("reading what a reset would delete at {url}: {e}"))?;
    if found.is_empty() {
        return Ok(());
    }
    if remote.broker.allow_reset {
        eprintln!(
            "queen-verify: against {url}: allowed to reset (--allow-reset), deleting what \
             this check did not make: {}",
            found.join(", ")
        );
        return Ok(());
    }
    Err(format!(
        "refusing to reset what this check did not make at {url}: {}; a run deletes \
         these before each schedule: pass --allow-reset (Broker::allow_reset) to delete \
         them, or point the check at a broker of its own",
        found.join(", ")
    ))
}

/// After a verdict by URL: deletes what the check made (the reset it does before each
/// schedule), so that the broker is left as the check found it (empty under the names
/// it resets) and a later check, in this process or another, finds nothing that is not
/// its own. Nothing when the check never claimed the names (it could not run before).
pub(crate) async fn clean_up(spec: Arc<RunSpec>, remote: Arc<Remote>) -> Result<(), String> {
    if !remote.claimed.swap(false, Ordering::SeqCst) {
        return Ok(());
    }
    let url = remote.url.as_str();
    let admin = remote.client(SETUP_AGENT, url, &spec)?;
    let upstream = Upstream::new(url, remote.broker.token.clone())?;
    let resets = Resets::of(&spec, &remote.broker.resets);
    reset(&resets, &admin, &upstream, &remote.keys)
        .await
        .map_err(|e| format!("deleting what the check made at {url}: {e}"))
}

/// Runs one schedule against `remote`'s broker through a fault proxy.
pub(crate) async fn run_remote(
    spec: Arc<RunSpec>,
    schedule: Schedule,
    remote: Arc<Remote>,
) -> RunOutcome {
    remote.tell_skipped();
    let url = remote.url.as_str();
    let admin = match remote.client(SETUP_AGENT, url, &spec) {
        Ok(c) => c,
        Err(e) => return setup_failure(e),
    };
    let upstream = match Upstream::new(url, remote.broker.token.clone()) {
        Ok(u) => u,
        Err(e) => return setup_failure(e),
    };
    let resets = Resets::of(&spec, &remote.broker.resets);
    for step in &spec.setup {
        if let SetupStep::KvRow { ns, key, .. } = step {
            remote.keys.add(ns, key);
        }
    }
    let reader = RemoteReader {
        handle: Handle::current(),
        client: admin.clone(),
        upstream: upstream.clone(),
        resets,
        keys: Arc::clone(&remote.keys),
        unreset: Mutex::default(),
    };
    // The probe comes before the reset: besides finding an invariant that cannot run
    // here, it notes the KV keys the invariants read, which the reset then deletes on
    // a broker that cannot list a namespace (what an earlier process left included).
    let (reader, probed) = {
        let spec = Arc::clone(&spec);
        let url = url.to_string();
        match tokio::task::spawn_blocking(move || {
            let v = probe(&spec.invariants, &reader, &spec, &url);
            (reader, v)
        })
        .await
        {
            Ok(r) => r,
            Err(e) => return harness_failure(format!("probing the invariants: {e}")),
        }
    };
    if let Some(v) = probed {
        return RunOutcome {
            violation: Some(v),
            trace: Vec::new(),
            faults_hit: 0,
        };
    }
    if !remote.claimed.load(Ordering::SeqCst) {
        if let Err(refused) = claim(&remote, &reader.resets, &admin, &upstream).await {
            return setup_failure(refused);
        }
        remote.claimed.store(true, Ordering::SeqCst);
    }
    if let Err(e) = reset(&reader.resets, &admin, &upstream, &remote.keys).await {
        return setup_failure(format!("resetting the broker at {url} before the run: {e}"));
    }
    // Short leases: a lapsed one is waited for in real time.
    let input_queues: BTreeSet<&str> = spec.inputs.iter().map(|i| i.queue.as_str()).collect();
    for q in &input_queues {
        let options = QueueOptions::new().lease_time(remote.broker.lease);
        if let Err(e) = admin.configure(q, options).await {
            return setup_failure(format!("configuring the queue {q} at {url}: {e}"));
        }
    }
    let setup_event = match set_up(&spec, &admin).await {
        Ok(event) => event,
        Err(e) => return setup_failure(format!("{e} (at {url})")),
    };

    let (actions, mut requests) = mpsc::unbounded_channel();
    let control = Control::new(
        schedule,
        remote.broker.lease,
        actions,
        Arc::clone(&remote.keys),
    );
    if let Some(e) = setup_event {
        control.event(e);
    }
    let proxy = match Proxy::start(upstream.clone(), Arc::clone(&control)).await {
        Ok(p) => p,
        Err(e) => return setup_failure(format!("starting the fault proxy: {e}")),
    };
    let replica_client =
        |i: usize| remote.client(&format!("{REPLICA_AGENT}{i}"), proxy.url(), &spec);
    let mut replicas = Vec::new();
    for i in 0..spec.replicas.max(1) {
        match replica_client(i) {
            Ok(c) => replicas.push(Replica::start(&spec.worker, c, i)),
            Err(e) => return setup_failure(e),
        }
    }

    let started = Instant::now();
    let mut timed_out = false;
    loop {
        tokio::select! {
            Some(Action::RestartWorker(r)) = requests.recv() => {
                if let Some(rep) = replicas.iter_mut().find(|x| x.index == r) {
                    rep.cancel().await;
                    match replica_client(r) {
                        Ok(c) => *rep = Replica::start(&spec.worker, c, r),
                        Err(e) => {
                            replicas.iter().for_each(Replica::abort);
                            proxy.shutdown().await;
                            return harness_failure(format!("restarting worker {r}: {e}"));
                        }
                    }
                    control.event(Event::WorkerRestart { replica: r });
                }
            },
            () = tokio::time::sleep(Duration::from_millis(50)) => {}
        }
        replicas::note_exits(&mut replicas, |e| control.event(e)).await;
        if all_acked(&admin, &upstream, &spec).await {
            break;
        }
        if started.elapsed() > spec.run_timeout {
            timed_out = true;
            break;
        }
    }

    // Stop: no more faults; each replica drains; calls still in flight finish.
    control.disarm();
    replicas::stop(&mut replicas, |e| control.event(e)).await;
    let settle = Instant::now();
    while control.in_flight() > 0 && settle.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    proxy.shutdown().await;

    // The invariants, over the broker's state read through its API.
    let dead = match replicas::dead_letters(&admin, &spec).await {
        Ok(d) => d,
        Err(e) => return harness_failure(format!("{e} at {url}")),
    };
    let evaluated = {
        let spec = Arc::clone(&spec);
        let url = url.to_string();
        tokio::task::spawn_blocking(move || {
            let state = State {
                broker: &reader,
                inputs: &spec.inputs,
                group: &spec.group,
                dead: &dead,
            };
            evaluate(&spec.invariants, &state, &url)
        })
        .await
    };
    let mut violation = match evaluated {
        Ok(v) => v,
        Err(e) => return harness_failure(format!("evaluating the invariants: {e}")),
    };
    if violation.is_none() && timed_out {
        violation = Some(replicas::timed_out(&spec));
    }
    let (trace, faults_hit) = control.take();
    RunOutcome {
        violation,
        trace,
        faults_hit,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::FaultKind;

    #[test]
    fn a_remote_check_draws_no_broker_restart_but_does_draw_lease_expiries() {
        let check = WorkerCheck::new(|_client, stop| stop)
            .inputs((0..4).map(|n| crate::Input::new("orders", &n)))
            .against(Broker::url("http://127.0.0.1:1", Resources::new()));
        let drawn = check.drawn(200);
        let kinds: BTreeSet<FaultKind> = drawn
            .iter()
            .flat_map(|s| s.faults().iter().map(|f| f.fault.kind()))
            .collect();
        assert!(kinds.contains(&FaultKind::LeaseExpiry), "{kinds:?}");
        assert!(!kinds.contains(&FaultKind::BrokerRestart), "{kinds:?}");
        assert!(kinds.contains(&FaultKind::CommitThenDrop), "{kinds:?}");
    }

    #[test]
    fn a_reset_always_takes_the_inputs_queues_and_the_named_group() {
        let check = WorkerCheck::new(|_client, stop| stop)
            .group("billing")
            .input(crate::Input::new("orders", &1));
        let spec = check.spec();
        let r = Resets::of(
            &spec,
            &Resources::new().queues(["receipts"]).groups(["audit"]),
        );
        assert_eq!(r.queues.iter().collect::<Vec<_>>(), ["orders", "receipts"]);
        assert_eq!(r.groups.iter().collect::<Vec<_>>(), ["audit", "billing"]);
        let queue_mode = WorkerCheck::new(|_client, stop| stop).spec();
        assert!(Resets::of(&queue_mode, &Resources::new()).groups.is_empty());
    }
}
