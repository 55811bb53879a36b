//! One schedule's run in process: a fresh durable broker on a temporary file and a
//! manual clock, the inputs pushed, the worker's replicas started, the schedule's
//! faults done to the calls they name, time moved when the worker waits on a lease,
//! and, once every input is acknowledged (or the run's time is up), the worker stopped
//! and the invariants checked against the stored state.
//!
//! The faults are driven by a [`RequestHook`] on the broker's harness (the controller
//! below): it sees each call arrive, counts it on its route, applies the schedule's
//! fault for that ordinal, and records the call and its status in the trace that a
//! report prints. Acts that cannot happen inside a request (restarting the broker or a
//! worker) are sent to the run's loop, which owns both. The setup client's calls
//! (`SETUP_AGENT`) go through untouched and uncounted.

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use queen_mock_broker::harness::{CallInfo, FaultKind as HttpFault, HookFuture, RequestHook};
use queen_mock_broker::{ManualClock, MockBroker, WriteMode};
use queen_sdk::Client;
use tokio::sync::{Notify, mpsc};
use tokio::time::Instant;

use super::{
    REPLICA_AGENT, RunOutcome, RunSpec, SETUP_AGENT, harness_failure, is_background, set_up,
    setup_failure,
};
use crate::invariant::State;
use crate::replicas::{self, Replica};
use crate::report::{Event, TraceCall, TraceEntry, Violation};
use crate::schedule::{Fault, Route, Schedule};

/// A request to the run's loop from inside a call.
enum Action {
    RestartBroker,
    RestartWorker(usize),
}

#[derive(Default)]
struct Book {
    counts: HashMap<Route, u32>,
    trace: Vec<TraceEntry>,
    open: HashMap<(u32, u64), usize>,
    in_flight: usize,
    faults_hit: usize,
    last_progress: Option<Instant>,
    /// The ids met in paths, numbered in the order first seen (see [`stable_path`]).
    ids: HashMap<String, usize>,
    /// Virtual time already added to the broker's clock (see [`Control::sync_clock`]).
    synced: Duration,
}

/// The hook's shared state: the schedule, the clock, the trace.
struct Control {
    schedule: Schedule,
    clock: ManualClock,
    jump: Duration,
    hold: Duration,
    armed: AtomicBool,
    book: Mutex<Book>,
    actions: mpsc::UnboundedSender<Action>,
    /// When the run started, on the runtime's (paused) clock.
    started: Instant,
    /// Woken (a permit kept) whenever a call ends: the run's loop looks again.
    progress: Notify,
}

impl Control {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn event(&self, e: Event) {
        self.book().trace.push(TraceEntry::Event(e));
    }

    fn touch(&self) {
        self.book().last_progress = Some(Instant::now());
    }

    fn idle_for(&self) -> Duration {
        self.book()
            .last_progress
            .map_or(Duration::ZERO, |t| t.elapsed())
    }

    fn in_flight(&self) -> usize {
        self.book().in_flight
    }

    /// Moves the broker's clock by the virtual time that passed since the last sync,
    /// so the broker's time runs with the runtime's: a worker's backoff or a delay
    /// fault of two seconds is two seconds on the broker's clock too, on top of the
    /// jumps the run makes.
    fn sync_clock(&self) {
        let now = self.started.elapsed();
        let mut book = self.book();
        if now > book.synced {
            self.clock.advance(now - book.synced);
            book.synced = now;
        }
    }
}

/// `path` with each id in it (a lease's, a message's) replaced by its number in the
/// order this run first met it (`/api/v1/lease/<id-1>/extend`): the broker mints ids
/// at random, and a trace must read the same on every replay.
fn stable_path(path: &str, ids: &mut HashMap<String, usize>) -> String {
    fn is_id(s: &str) -> bool {
        s.len() == 36
            && s.char_indices().all(|(i, c)| match i {
                8 | 13 | 18 | 23 => c == '-',
                _ => c.is_ascii_hexdigit(),
            })
    }
    let (route, query) = match path.split_once('?') {
        Some((r, q)) => (r, Some(q)),
        None => (path, None),
    };
    let mut out: Vec<String> = Vec::new();
    for seg in route.split('/') {
        if is_id(seg) {
            let next = ids.len() + 1;
            let n = *ids.entry(seg.to_string()).or_insert(next);
            out.push(format!("<id-{n}>"));
        } else {
            out.push(seg.to_string());
        }
    }
    let mut s = out.join("/");
    if let Some(q) = query {
        s.push('?');
        s.push_str(q);
    }
    s
}

/// The hook set on one life of the broker (`epoch` counts restarts).
struct EpochHook {
    epoch: u32,
    control: Arc<Control>,
}

fn replica_of(call: &CallInfo) -> Option<Option<usize>> {
    match call.user_agent.as_deref() {
        Some(SETUP_AGENT) => None,
        Some(ua) => Some(ua.strip_prefix(REPLICA_AGENT).and_then(|n| n.parse().ok())),
        None => Some(None),
    }
}

impl RequestHook for EpochHook {
    fn before(&self, call: &CallInfo) -> HookFuture {
        let c = &self.control;
        let Some(replica) = replica_of(call) else {
            return Box::pin(async { None });
        };
        let route = Route::of(&call.path);
        c.sync_clock();
        let mut book = c.book();
        let n = {
            let n = book.counts.entry(route).or_default();
            *n += 1;
            *n
        };
        let fault = if c.armed.load(Ordering::SeqCst) {
            c.schedule.fault_for(route, n)
        } else {
            None
        };
        if fault.is_some() {
            book.faults_hit += 1;
        }
        let idx = book.trace.len();
        let path = stable_path(&call.path, &mut book.ids);
        book.trace.push(TraceEntry::Call(TraceCall {
            broker_life: self.epoch,
            replica,
            method: call.method.clone(),
            path,
            route,
            nth: n,
            fault,
            status: None,
        }));
        book.open.insert((self.epoch, call.seq), idx);
        if !is_background(route) {
            book.in_flight += 1;
        }
        drop(book);
        let http = |k: HttpFault| -> HookFuture { Box::pin(async move { Some(k) }) };
        match fault {
            None => Box::pin(async { None }),
            Some(Fault::Unavailable) => http(HttpFault::Unavailable("retry")),
            Some(Fault::CommitThenUnavailable) => http(HttpFault::CommitThenUnavailable),
            Some(Fault::CommitThenDrop) => http(HttpFault::CommitThenDrop),
            Some(Fault::Delay(d)) => http(HttpFault::Delay(d)),
            Some(Fault::Overloaded { retry_after_secs }) => http(HttpFault::Overloaded {
                retry_after: retry_after_secs,
            }),
            Some(Fault::LeaseExpiry) => {
                c.clock.advance(c.jump);
                c.event(Event::ClockJump {
                    secs: c.jump.as_secs(),
                    why: format!("lease expiry while {route}#{n} is in flight"),
                });
                let hold = c.hold;
                Box::pin(async move {
                    tokio::time::sleep(hold).await;
                    None
                })
            }
            Some(Fault::BrokerRestart) => {
                let _ = c.actions.send(Action::RestartBroker);
                Box::pin(async { None })
            }
            // The call applies and its answer is lost (the connection drops); once it
            // has, the replica that sent it is cancelled and started again (`after`).
            Some(Fault::WorkerRestart) => http(HttpFault::CommitThenDrop),
        }
    }

    fn after(&self, call: &CallInfo, status: u16, _fault: Option<HttpFault>) {
        let mut book = self.control.book();
        let Some(idx) = book.open.remove(&(self.epoch, call.seq)) else {
            return;
        };
        let mut route = Route::Other;
        if let Some(TraceEntry::Call(c)) = book.trace.get_mut(idx) {
            c.status = Some(status);
            route = c.route;
            if let (Some(Fault::WorkerRestart), Some(r)) = (c.fault, c.replica) {
                let _ = self.control.actions.send(Action::RestartWorker(r));
            }
        }
        if !is_background(route) {
            book.in_flight = book.in_flight.saturating_sub(1);
        }
        let progress = (200..300).contains(&status)
            && route != Route::LeaseExtend
            && !(route == Route::Pop && status == 204);
        if progress {
            book.last_progress = Some(Instant::now());
        }
        drop(book);
        self.control.progress.notify_one();
    }
}

/// A client for replica `index` of the in-process broker at `url`.
fn replica_client(spec: &RunSpec, url: &str, index: usize) -> Client {
    Client::builder()
        .url(url)
        .user_agent(format!("{REPLICA_AGENT}{index}"))
        .retry(spec.retry.clone())
        .build()
        .expect("a client for the in-process broker")
}

async fn start_broker(
    path: &Path,
    clock: &ManualClock,
    addr: Option<SocketAddr>,
) -> Result<MockBroker, String> {
    let mut tries = 0;
    loop {
        let mut b = MockBroker::builder()
            .data_file(path)
            .clock(clock.clone())
            .write_mode(WriteMode::Lockstep);
        if let Some(a) = addr {
            b = b.listen(a);
        }
        match b.start().await {
            Ok(broker) => return Ok(broker),
            // The old broker's port or file may take a moment to be free.
            Err(_) if tries < 100 => {
                tries += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(format!("starting the broker: {e}")),
        }
    }
}

fn set_hook(broker: &MockBroker, epoch: u32, control: &Arc<Control>) {
    if let Some(h) = broker.harness() {
        h.hooks.set(Arc::new(EpochHook {
            epoch,
            control: Arc::clone(control),
        }));
    }
}

/// Whether the worker's group has acknowledged every input.
fn all_acked(broker: &MockBroker, spec: &RunSpec) -> bool {
    let mut per: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    for i in &spec.inputs {
        *per.entry((&i.queue, &i.partition)).or_default() += 1;
    }
    per.into_iter().all(|((q, p), n)| {
        broker
            .inspect()
            .cursor(q, p, &spec.group)
            .ok()
            .flatten()
            .is_some_and(|c| c.next_offset >= n)
    })
}

/// The broker's clock at the start of every run: 2026-01-01T00:00:00Z.
const START_MICROS: i64 = 1_767_225_600_000_000;

/// A fresh directory for a run's data file: in `/dev/shm` where there is one, since
/// every commit syncs and a sync to memory costs nothing, while the file, the log and
/// a restart's recovery from them are the same code as on a disk.
fn scratch_dir() -> std::io::Result<tempfile::TempDir> {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::Builder::new()
            .prefix("queen-verify-")
            .tempdir_in(shm)
    {
        return Ok(d);
    }
    tempfile::tempdir()
}

/// Runs the worker under `schedule` on a fresh broker and checks the invariants.
pub(crate) async fn run_one(spec: Arc<RunSpec>, schedule: Schedule) -> RunOutcome {
    let dir = match scratch_dir() {
        Ok(d) => d,
        Err(e) => return setup_failure(format!("a temporary directory: {e}")),
    };
    let path = dir.path().join("queen.redb");
    // The same time on every run: nothing the broker stamps depends on when it ran.
    let clock = ManualClock::starting_at(START_MICROS);
    let mut broker = match start_broker(&path, &clock, None).await {
        Ok(b) => b,
        Err(e) => return setup_failure(e),
    };
    let addr = broker.addr();
    let url = broker.url();
    let admin = match Client::builder()
        .url(&url)
        .user_agent(SETUP_AGENT)
        .retry(spec.retry.clone())
        .build()
    {
        Ok(c) => c,
        Err(e) => return setup_failure(e.to_string()),
    };
    // The initial state and the inputs, before any fault can be done.
    let setup_event = match set_up(&spec, &admin).await {
        Ok(event) => event,
        Err(e) => {
            broker.shutdown().await;
            return setup_failure(e);
        }
    };

    let (actions, mut requests) = mpsc::unbounded_channel();
    let control = Arc::new(Control {
        schedule,
        clock: clock.clone(),
        jump: spec.lease + Duration::from_secs(1),
        hold: spec.hold,
        armed: AtomicBool::new(true),
        book: Mutex::default(),
        actions,
        started: Instant::now(),
        progress: Notify::new(),
    });
    if let Some(e) = setup_event {
        control.event(e);
    }
    let mut epoch = 0;
    set_hook(&broker, epoch, &control);
    control.touch();
    let mut replicas: Vec<Replica> = (0..spec.replicas.max(1))
        .map(|i| Replica::start(&spec.worker, replica_client(&spec, &url, i), i))
        .collect();

    let started = Instant::now();
    // A worker that spins without ever waiting on a timer moves no virtual time: the
    // run's timeout is also kept in real time.
    let started_real = std::time::Instant::now();
    let mut timed_out = false;
    loop {
        // Woken by a call's end, by an act a call asked for, or when the worker has
        // been idle for the idle window (all on the paused clock: free to wait).
        let idle_at = control
            .book()
            .last_progress
            .map_or_else(Instant::now, |t| t + spec.idle);
        tokio::select! {
            biased;
            Some(action) = requests.recv() => match action {
                Action::RestartWorker(r) => {
                    if let Some(rep) = replicas.iter_mut().find(|x| x.index == r) {
                        rep.cancel().await;
                        *rep = Replica::start(&spec.worker, replica_client(&spec, &url, r), r);
                        control.event(Event::WorkerRestart { replica: r });
                    }
                }
                Action::RestartBroker => {
                    let t = Instant::now();
                    broker.shutdown().await;
                    broker = match start_broker(&path, &clock, Some(addr)).await {
                        Ok(b) => b,
                        Err(e) => {
                            replicas.iter().for_each(Replica::abort);
                            return harness_failure(format!("restarting the broker: {e}"));
                        }
                    };
                    epoch += 1;
                    set_hook(&broker, epoch, &control);
                    control.event(Event::BrokerRestart { took: t.elapsed() });
                }
            },
            () = control.progress.notified() => {}
            () = tokio::time::sleep_until(idle_at.max(Instant::now() + Duration::from_millis(1))) => {}
        }
        control.sync_clock();
        replicas::note_exits(&mut replicas, |e| control.event(e)).await;
        if all_acked(&broker, &spec) {
            break;
        }
        if started.elapsed() > spec.run_timeout || started_real.elapsed() > spec.run_timeout {
            timed_out = true;
            break;
        }
        // The worker waits on something only time brings (a lease to lapse after a
        // lost answer or a killed worker): move the broker's clock past the lease.
        if control.idle_for() >= spec.idle && control.in_flight() == 0 {
            clock.advance(spec.lease + Duration::from_secs(1));
            control.event(Event::ClockJump {
                secs: spec.lease.as_secs() + 1,
                why: "the worker is idle with inputs unacknowledged".into(),
            });
            control.touch();
        }
    }

    // Stop: no more faults; each replica drains; calls still in flight finish.
    control.armed.store(false, Ordering::SeqCst);
    replicas::stop(&mut replicas, |e| control.event(e)).await;
    let settle = Instant::now();
    while control.in_flight() > 0 && settle.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }

    // The invariants, over the stored state.
    let dead = match replicas::dead_letters(&admin, &spec).await {
        Ok(d) => d,
        Err(e) => return harness_failure(e),
    };
    let state = State {
        broker: &broker,
        inputs: &spec.inputs,
        group: &spec.group,
        dead: &dead,
    };
    let mut violation = spec.invariants.iter().find_map(|inv| {
        inv.check(&state).err().map(|detail| Violation {
            invariant: inv.name().to_string(),
            detail,
        })
    });
    if violation.is_none() && timed_out {
        violation = Some(replicas::timed_out(&spec));
    }
    broker.shutdown().await;
    drop(dir);
    let book = std::mem::take(&mut *control.book());
    RunOutcome {
        violation,
        trace: book.trace,
        faults_hit: book.faults_hit,
    }
}
