//! The semantics: pure functions over a storage view and the time, plus [`Engine`],
//! which runs them through the group-commit writer.
//!
//! Each submodule holds one concern: `queues` (options, creation, deletion), `push`
//! (appending with dedup), `pop` (claiming under leases), `ack` (fencing, statuses, dead
//! letters), `lease` (extension), `groups` (seek, forgetting a group), `dlq` (listing).
//! No HTTP types appear here.

pub mod ack;
pub mod answers;
pub mod browse;
pub mod consumers;
pub mod dlq;
pub mod ephemeral;
pub mod groups;
pub(crate) mod ids;
pub mod kv;
pub mod lease;
pub mod locks;
pub(crate) mod notify;
pub mod pop;
pub mod push;
pub mod queues;
pub mod ready;
pub mod requests;
pub mod resources;
pub mod retention;
pub mod stamp;
pub mod status;
pub mod streams;
pub mod timer_log;
pub mod timers;
pub mod traces;
pub mod txn;
pub mod txn_log;
pub mod writer;

use std::sync::Arc;
use std::time::Duration;

use redb::Database;

use crate::clock::Clock;
use crate::error::EngineError;
use crate::store::DbHandle;
use crate::store::records::QueueRecord;
use notify::Wakers;
use writer::{StatsSnapshot, WriteMode, Writer, WriterThread};

/// Applies one operation of a standalone call and answers its typed result.
type ApplyOp<O, R> = fn(&mut crate::store::Tx, &str, &O) -> Result<R, crate::store::StoreError>;

/// The competing-consumers group: one shared cursor per partition.
pub const QUEUE_MODE: &str = "__QUEUE_MODE__";

/// The tenant every call acts as until authentication names another.
pub const DEFAULT_TENANT: &str = "default";

/// How many times a whole read ([`Engine::read_whole`]) reads before it is refused: the
/// first read finds the room it needs, the second reads holding it, a third covers an
/// answer that grew in between.
const WHOLE_READ_TRIES: usize = 3;

/// How often a waiting pop looks again for work that time alone makes available
/// (a lapsed lease, a delayed message coming due).
const REPOLL: Duration = Duration::from_millis(250);

/// How long a transaction call keeps retrying a commit whose outcome it could not
/// observe (`QUEEN_STMT_TIMEOUT_MS`).
const TRANSACTION_DEADLINE: Duration = Duration::from_secs(30);

/// How often the scheduler looks for due timers (and at once when a manual clock moves).
const TIMER_TICK: Duration = Duration::from_millis(100);

/// Sweeps between purges of old request records.
const PURGE_EVERY: u64 = 100;

/// Sweeps between retention passes (and one at once when a manual clock moves).
const RETENTION_EVERY: u64 = 10;

/// The broker's semantics over one database. Cheap to clone: one reference count, as
/// every request clones it (into the handler's state and through each middleware).
#[derive(Clone)]
pub struct Engine {
    shared: Arc<Shared>,
}

/// What every [`Engine`] clone points to.
struct Shared {
    db: Arc<DbHandle>,
    writer: Writer,
    clock: Arc<dyn Clock>,
    wakers: Arc<Wakers>,
    closing: Arc<Closing>,
    /// Push, pop and ack counts per minute ([`status`]).
    activity: status::Activity,
    /// The in-memory ephemeral queues ([`ephemeral`]).
    ephemeral: ephemeral::Rings,
    /// Each tenant's recent transaction calls ([`txn_log`]), in memory.
    txn_log: txn_log::TxnLog,
    /// Each tenant's recently fired and cancelled timers ([`timer_log`]), in memory.
    timer_log: timer_log::TimerLog,
    /// [`Limits::max_lease`], in seconds (set once at start; atomic so that setting
    /// it needs no lock on every pop's path).
    max_lease_secs: std::sync::atomic::AtomicU64,
    /// [`Limits::max_wait`], in milliseconds.
    max_wait_ms: std::sync::atomic::AtomicU64,
    /// [`Limits::answer_budget`]: replaced whole when it changes (answers in flight
    /// keep their room in the one they charged).
    answers: std::sync::RwLock<answers::AnswerBudget>,
    /// [`Limits::body_budget`], replaced whole as `answers` is.
    bodies: std::sync::RwLock<answers::AnswerBudget>,
    /// Reads of the last commit running at once ([`Engine::read`]): at most
    /// [`concurrent_reads`].
    reads: Arc<tokio::sync::Semaphore>,
}

/// How many reads of the last commit run at once: twice the cores, at least 4. A read
/// charges what it keeps to the answer budget once it has decoded it, so each running
/// read holds besides its charge at most the record it is looking at (stored and
/// decoded); bounding the reads bounds that (issue 52: 48 reads at once of a 30 MiB
/// message's detail each held 60 MiB before they could charge it, and took the broker
/// from 190 to 2,150 MiB). The reads are short (no read waits inside), so a few run
/// the cores full.
pub fn concurrent_reads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| (2 * n.get()).max(4))
}

/// Bounds on what one call may hold or wait for, whatever it asks: a lease (a pop's
/// `leaseSeconds` or its queue's `leaseTime`, a lease extension, a stream claim, an
/// ephemeral queue's lease) lasts at most `max_lease`, and a long-poll (a pop's
/// `timeout`, an ephemeral pop's, a fetch's `maxWaitMs`) waits at most `max_wait`.
/// A longer ask is clamped, not refused, so a client that asks for more keeps working,
/// for less time: the answer's `leaseExpiresAt` says when its lease lapses, and a pop
/// that waited its bound answers empty as any timed-out long-poll does. Large read
/// answers together hold at most `answer_budget` bytes, and request bodies being read
/// and handled `body_budget` ([`answers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Longest lease (the binary's `--max-lease`, 1 hour by default).
    pub max_lease: Duration,
    /// Longest long-poll (the binary's `--max-wait`, 60 s by default).
    pub max_wait: Duration,
    /// Bytes that fetch answers being built and sent may hold at once, broker-wide
    /// (the binary's `--answer-budget`, [`answers::DEFAULT_BYTES`] by default).
    pub answer_budget: u64,
    /// Bytes that request bodies being read and handled may hold at once, broker-wide,
    /// each charged [`answers::body_cost`] (the binary's `--body-budget`,
    /// [`answers::DEFAULT_BODY_BYTES`] by default).
    pub body_budget: u64,
}

impl Limits {
    /// The default longest lease: an hour, twelve times a queue's default `leaseTime`.
    pub const MAX_LEASE: Duration = Duration::from_secs(3600);
    /// The default longest long-poll: a minute, twice the clients' usual 30 s.
    pub const MAX_WAIT: Duration = Duration::from_secs(60);

    /// [`Limits::max_lease`] in whole seconds, at least 1.
    pub fn max_lease_secs(&self) -> i64 {
        i64::try_from(self.max_lease.as_secs())
            .unwrap_or(i64::MAX)
            .max(1)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_lease: Self::MAX_LEASE,
            max_wait: Self::MAX_WAIT,
            answer_budget: answers::DEFAULT_BYTES,
            body_budget: answers::DEFAULT_BODY_BYTES,
        }
    }
}

/// What a pop claimed ([`Engine::pop`]) and the room its messages hold in the broker's
/// answer budget: keep `held` until the answer has been sent.
#[derive(Debug)]
pub struct Popped {
    /// The messages and their lease.
    pub outcome: pop::PopOutcome,
    /// The room the messages hold ([`answers::Held`]).
    pub held: answers::Held,
}

/// Set when the broker stops, so waiting pops answer at once instead of holding
/// the graceful shutdown for their full timeout.
#[derive(Default)]
struct Closing {
    closed: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Engine {
    /// Starts the writer over `db`. The returned thread handle finishes the last batch
    /// when every `Engine` clone has been dropped.
    pub fn start(db: Database, clock: Arc<dyn Clock>) -> (Engine, WriterThread) {
        Self::start_capped(db, clock, None)
    }

    /// [`Engine::start`] with a storage cap: once `cap` bytes of keys and values are
    /// stored, pushes, KV writes and timers are refused with
    /// [`EngineError::StorageFull`] while reads, pops, acks and deletes go on.
    pub fn start_capped(
        db: Database,
        clock: Arc<dyn Clock>,
        cap: Option<u64>,
    ) -> (Engine, WriterThread) {
        Self::start_on(Arc::new(DbHandle::new(db, None)), clock, cap)
    }

    /// [`Engine::start_capped`] over a reopenable database: after an I/O error the
    /// writer opens it again through `db` and serves writes once a commit succeeds.
    pub fn start_on(
        db: Arc<DbHandle>,
        clock: Arc<dyn Clock>,
        cap: Option<u64>,
    ) -> (Engine, WriterThread) {
        Self::start_with(db, clock, cap, WriteMode::Grouped)
    }

    /// [`Engine::start_on`] with the writer taking commands as `mode` says.
    pub fn start_with(
        db: Arc<DbHandle>,
        clock: Arc<dyn Clock>,
        cap: Option<u64>,
        mode: WriteMode,
    ) -> (Engine, WriterThread) {
        let wakers = Arc::new(Wakers::default());
        let (writer, thread) = Writer::start(db.clone(), clock.clone(), wakers.clone(), cap, mode);
        let activity = status::Activity::new(clock.now_micros());
        (
            Engine {
                shared: Arc::new(Shared {
                    db,
                    writer,
                    clock,
                    wakers,
                    closing: Arc::default(),
                    activity,
                    ephemeral: ephemeral::Rings::default(),
                    txn_log: txn_log::TxnLog::default(),
                    timer_log: timer_log::TimerLog::default(),
                    max_lease_secs: Limits::MAX_LEASE.as_secs().into(),
                    max_wait_ms: (Limits::MAX_WAIT.as_millis() as u64).into(),
                    answers: std::sync::RwLock::default(),
                    bodies: std::sync::RwLock::new(answers::AnswerBudget::for_bodies(
                        answers::DEFAULT_BODY_BYTES,
                    )),
                    reads: Arc::new(tokio::sync::Semaphore::new(concurrent_reads())),
                }),
            },
            thread,
        )
    }

    /// Sets the bounds on leases and long-polls ([`Limits`]); [`Limits::default`]
    /// until called.
    pub fn set_limits(&self, limits: Limits) {
        use std::sync::atomic::Ordering::Relaxed;
        let secs = u64::try_from(limits.max_lease_secs()).unwrap_or(u64::MAX);
        self.shared.max_lease_secs.store(secs, Relaxed);
        let ms = u64::try_from(limits.max_wait.as_millis()).unwrap_or(u64::MAX);
        self.shared.max_wait_ms.store(ms, Relaxed);
        let mut answers = self
            .shared
            .answers
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if answers.bytes() != answers::AnswerBudget::new(limits.answer_budget).bytes() {
            *answers = answers::AnswerBudget::new(limits.answer_budget);
        }
        drop(answers);
        let mut bodies = self
            .shared
            .bodies
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let wanted = answers::AnswerBudget::for_bodies(limits.body_budget);
        if bodies.bytes() != wanted.bytes() {
            *bodies = wanted;
        }
    }

    /// The budget request bodies charge ([`answers::body_cost`]); its
    /// [`available`](answers::AnswerBudget::available) bytes say how much room the
    /// bodies being read and handled leave.
    pub fn body_budget(&self) -> answers::AnswerBudget {
        self.shared
            .bodies
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The budget large read answers charge ([`answers`]).
    pub(crate) fn answer_budget(&self) -> answers::AnswerBudget {
        self.shared
            .answers
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The bounds on leases and long-polls in force.
    pub fn limits(&self) -> Limits {
        use std::sync::atomic::Ordering::Relaxed;
        Limits {
            max_lease: Duration::from_secs(self.shared.max_lease_secs.load(Relaxed)),
            max_wait: Duration::from_millis(self.shared.max_wait_ms.load(Relaxed)),
            answer_budget: self.answer_budget().bytes(),
            body_budget: self.body_budget().bytes(),
        }
    }

    /// Ends every waiting pop (they answer empty) and makes new ones not wait.
    pub fn close(&self) {
        use std::sync::atomic::Ordering;
        self.shared.closing.closed.store(true, Ordering::SeqCst);
        self.shared.closing.notify.notify_waiters();
    }

    /// Whether the broker is stopping (see [`Engine::close`]).
    pub(crate) fn is_closing(&self) -> bool {
        self.shared
            .closing
            .closed
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The current database, for read-only inspection, once it holds every write
    /// answered so far (this waits for the writer when it holds some: call it off the
    /// writer's thread).
    pub(crate) fn db(&self) -> Result<Arc<Database>, crate::store::StoreError> {
        futures::executor::block_on(self.shared.writer.published())
            .map_err(|e| crate::store::StoreError::Unavailable(e.to_string()))?;
        self.shared.db.get()
    }

    /// Whether writes are going through: degraded (with why) after a failed commit,
    /// healthy again after the next one that succeeds.
    pub fn storage_health(&self) -> crate::store::Health {
        self.shared.db.health()
    }

    /// The clock the engine reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.shared.clock
    }

    /// Group-commit figures.
    pub fn stats(&self) -> StatsSnapshot {
        self.shared.writer.stats()
    }

    /// What wakes the harness's waits after each batch that wrote.
    pub(crate) fn written(&self) -> &writer::Written {
        self.shared.writer.written()
    }

    /// Creates or updates a queue.
    pub async fn configure(
        &self,
        tenant: &str,
        req: queues::Configure,
    ) -> Result<QueueRecord, EngineError> {
        let tenant = tenant.to_string();
        self.shared
            .writer
            .submit(move |tx| queues::configure(tx, &tenant, req))
            .await
    }

    /// Deletes a queue and everything in it.
    pub async fn delete_queue(&self, tenant: &str, queue: &str) -> Result<bool, EngineError> {
        let (tenant, queue) = (tenant.to_string(), queue.to_string());
        self.shared
            .writer
            .submit(move |tx| Ok(queues::delete_queue(tx, &tenant, &queue)?))
            .await
    }

    /// Appends messages.
    pub async fn push(
        &self,
        tenant: &str,
        items: Vec<push::NewMessage>,
    ) -> Result<Vec<(String, push::Appended)>, EngineError> {
        let t = tenant.to_string();
        let out = self
            .shared
            .writer
            .submit(move |tx| {
                tx.ensure_room()?;
                push::push(tx, &t, items)
            })
            .await?;
        self.note_push(tenant, &out);
        Ok(out)
    }

    /// Claims messages; with `wait`, long-polls until some arrive or it passes. The
    /// messages are charged to the broker's answer budget as they are claimed
    /// ([`pop::pop_within`]): when it is spent the pop delivers (and leases) fewer than
    /// its batch; when not even one message fits, the call waits for room
    /// ([`answers::AnswerBudget::acquire`]) and is refused with
    /// [`EngineError::AnswersBusy`] if none comes.
    pub async fn pop(
        &self,
        tenant: &str,
        req: pop::PopRequest,
        wait: Option<Duration>,
    ) -> Result<Popped, EngineError> {
        let limits = self.limits();
        let cap = limits.max_lease_secs();
        let deadline = wait.map(|w| tokio::time::Instant::now() + w.min(limits.max_wait));
        let waker = match &req.target {
            pop::Target::Queue(q) | pop::Target::Partition(q, _) => {
                self.shared.wakers.queue(tenant, q)
            }
            pop::Target::Discovery { .. } => self.shared.wakers.tenant(tenant),
        };
        let answers = self.answer_budget();
        let mut room = answers.empty();
        loop {
            // Register before looking, so a push committed in between still wakes us.
            let pushed = waker.notified();
            tokio::pin!(pushed);
            pushed.as_mut().enable();
            let closed = self.shared.closing.notify.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            let (t, r) = (tenant.to_string(), req.clone());
            let mut held = std::mem::replace(&mut room, answers.empty());
            let (out, starved, held) = self
                .shared
                .writer
                .submit(move |tx| {
                    pop::pop_within(tx, &t, &r, cap, &mut held)
                        .map(|(out, starved)| (out, starved, held))
                })
                .await?;
            if let Some(cost) = starved {
                drop(held);
                room = answers.acquire(cost).await?;
                continue;
            }
            let popped = Popped { outcome: out, held };
            let Some(deadline) = deadline else {
                self.note_pop(tenant, &popped.outcome);
                return Ok(popped);
            };
            if !popped.outcome.messages.is_empty()
                || self.is_closing()
                || tokio::time::Instant::now() >= deadline
            {
                self.note_pop(tenant, &popped.outcome);
                return Ok(popped);
            }
            drop(popped);
            let recheck = (tokio::time::Instant::now() + REPOLL).min(deadline);
            let jumped = async {
                match self.shared.clock.jumped() {
                    Some(n) => n.notified().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut pushed => {}
                _ = &mut closed => {}
                _ = jumped => {}
                _ = tokio::time::sleep_until(recheck) => {}
            }
        }
    }

    /// Applies the acks of one call in order; each has its own verdict, and a nack
    /// clamps its partition's cursor for the rest of the call (`wire.md` 4a).
    pub async fn ack(
        &self,
        tenant: &str,
        acks: Vec<ack::Ack>,
    ) -> Result<Vec<ack::AckOutcome>, EngineError> {
        let t = tenant.to_string();
        let acks = Arc::new(acks);
        let applied = acks.clone();
        let out = self
            .shared
            .writer
            .submit(move |tx| {
                let mut call = ack::AckCall::new();
                let mut out = Vec::with_capacity(applied.len());
                for a in applied.iter() {
                    out.push(ack::ack(tx, &t, a, &mut call)?);
                }
                call.finish(tx, &t)?;
                Ok(out)
            })
            .await?;
        self.note_ack(tenant, &acks, &out);
        Ok(out)
    }

    /// Extends a lease.
    pub async fn extend_lease(
        &self,
        tenant: &str,
        lease_id: &str,
        seconds: i64,
    ) -> Result<lease::Extended, EngineError> {
        let (tenant, lease_id) = (tenant.to_string(), lease_id.to_string());
        let seconds = seconds.min(self.limits().max_lease_secs());
        self.shared
            .writer
            .submit(move |tx| Ok(lease::extend(tx, &tenant, &lease_id, seconds)?))
            .await
    }

    /// Moves a group's cursor on a queue (or one partition of it).
    pub async fn seek(
        &self,
        tenant: &str,
        group: &str,
        queue: &str,
        partition: Option<&str>,
        to: groups::SeekTo,
    ) -> Result<usize, EngineError> {
        let (tenant, group, queue) = (tenant.to_string(), group.to_string(), queue.to_string());
        let partition = partition.map(str::to_string);
        self.shared
            .writer
            .submit(move |tx| groups::seek(tx, &tenant, &group, &queue, partition.as_deref(), to))
            .await
    }

    /// Forgets a consumer group.
    pub async fn delete_group(
        &self,
        tenant: &str,
        group: &str,
        metadata: bool,
    ) -> Result<usize, EngineError> {
        let (tenant, group) = (tenant.to_string(), group.to_string());
        self.shared
            .writer
            .submit(move |tx| Ok(groups::delete_group(tx, &tenant, &group, metadata)?))
            .await
    }

    /// Runs a transaction and answers its commit or rollback body.
    ///
    /// The call gets an internal request id whose answer is recorded in the same commit
    /// as its effects. When the commit's outcome cannot be observed (a storage error),
    /// the call is submitted again under the same id: a commit that did happen is then
    /// answered from its record and never applied twice.
    pub async fn transaction(
        &self,
        tenant: &str,
        t: txn::Transaction,
    ) -> Result<txn::TxnOutcome, EngineError> {
        self.run_transaction(tenant, requests::new_id(), true, t)
            .await
    }

    /// [`Engine::transaction`] under a given request id: a call whose id already has a
    /// recorded answer is answered from it and applies nothing. Request ids are
    /// internal (UUIDv7, see [`requests::new_id`]); this is the seam the retry loop and
    /// fault-injecting tests use.
    pub async fn transaction_as(
        &self,
        tenant: &str,
        request_id: &str,
        t: txn::Transaction,
    ) -> Result<txn::TxnOutcome, EngineError> {
        self.run_transaction(tenant, request_id.to_string(), false, t)
            .await
    }

    /// The submit-and-retry loop of both. `fresh`: the id was minted for this call, so
    /// its first attempt has no record to find and skips the lookup, and its record is
    /// kept only where a retry can find it ([`requests::record_for_retry`]).
    async fn run_transaction(
        &self,
        tenant: &str,
        request_id: String,
        fresh: bool,
        t: txn::Transaction,
    ) -> Result<txn::TxnOutcome, EngineError> {
        let txn_id = ids::transaction_id();
        let t = Arc::new(t);
        let deadline = tokio::time::Instant::now() + TRANSACTION_DEADLINE;
        let mut look = !fresh;
        loop {
            let (who, call, rid, tid) = (
                tenant.to_string(),
                t.clone(),
                request_id.clone(),
                txn_id.clone(),
            );
            let out = self
                .shared
                .writer
                .submit(move |tx| {
                    if look && let Some(answer) = requests::recorded(tx, &rid)? {
                        return Ok(answer);
                    }
                    if call.adds_data() {
                        tx.ensure_room()?;
                    }
                    let answer = txn::run(tx, &who, &call, &tid)?;
                    if fresh {
                        requests::record_for_retry(tx, &rid, answer.clone());
                    } else {
                        requests::record(tx, &rid, &answer);
                    }
                    Ok(answer)
                })
                .await;
            match out {
                Err(EngineError::Storage(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(error = %e, request = %request_id, "transaction commit failed; retrying under the same request id");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    look = true;
                }
                other => {
                    if let Ok(done) = &other {
                        self.note_txn(tenant, &t, done);
                        if let txn::TxnOutcome::Committed { results, .. } = done {
                            self.note_cancelled(
                                tenant,
                                results.iter().filter_map(|r| match r {
                                    txn::StepResult::Timer { result, .. } => Some(result),
                                    _ => None,
                                }),
                            );
                        }
                    }
                    return other;
                }
            }
        }
    }

    /// Runs a standalone KV call.
    pub async fn kv(&self, tenant: &str, ops: Vec<kv::KvOp>) -> Result<kv::KvCall, EngineError> {
        let tenant = tenant.to_string();
        self.shared
            .writer
            .submit(move |tx| {
                if ops.iter().any(|op| op.kind().adds_data()) {
                    tx.ensure_room()?;
                }
                Ok(kv::run_standalone(tx, &tenant, &ops)?)
            })
            .await
    }

    /// Runs a standalone timers call: one result per operation, in order.
    pub async fn timers(
        &self,
        tenant: &str,
        ops: Vec<timers::TimerOp>,
    ) -> Result<Vec<timers::TimerResult>, EngineError> {
        let adds = ops.iter().any(timers::TimerOp::adds_data);
        let out = self.each(tenant, ops, adds, timers::apply).await?;
        self.note_cancelled(tenant, &out);
        Ok(out)
    }

    /// Records the timers `results` cancelled in the timer log ([`timer_log`]): called
    /// once their write is committed.
    fn note_cancelled<'a>(
        &self,
        tenant: &str,
        results: impl IntoIterator<Item = &'a timers::TimerResult>,
    ) {
        let now = self.shared.clock.now_micros();
        let ended = results
            .into_iter()
            .filter_map(|r| match (&r.status, &r.record) {
                (timers::TimerStatus::Cancelled, Some(rec)) => Some(timer_log::Ended::new(
                    timer_log::TimerEnd::Cancelled,
                    now,
                    &r.queue,
                    &r.timer_key,
                    rec,
                )),
                _ => None,
            });
        self.shared.timer_log.record(tenant, ended);
    }

    /// The tenant's last `limit` fired and cancelled timers (of `queue`, when given),
    /// newest first ([`timer_log`]: in memory, the last [`timer_log::KEPT`]).
    pub fn ended_timers(
        &self,
        tenant: &str,
        queue: Option<&str>,
        limit: usize,
    ) -> Vec<timer_log::Ended> {
        self.shared.timer_log.recent(tenant, queue, limit)
    }

    /// Reads pending timers: one by key (`key`), or a page of a queue's.
    pub async fn timer_read(
        &self,
        tenant: &str,
        queue: &str,
        key: Option<String>,
        after: Option<String>,
        limit: usize,
    ) -> Result<timers::TimerRead, EngineError> {
        let (tenant, queue) = (tenant.to_string(), queue.to_string());
        self.shared
            .writer
            .submit(move |tx| {
                Ok(match key {
                    Some(k) => timers::TimerRead::One(timers::get(tx, &tenant, &queue, &k)?),
                    None => timers::TimerRead::Page(timers::list(
                        tx,
                        &tenant,
                        &queue,
                        after.as_deref(),
                        limit,
                    )?),
                })
            })
            .await
    }

    /// The tenant's KV namespaces with live keys ([`kv::namespaces`]), from the last
    /// commit, without a turn of the writer.
    pub async fn kv_namespaces(&self, tenant: &str) -> Result<Vec<kv::Namespace>, EngineError> {
        let tenant = tenant.to_string();
        self.read(move |db, now| kv::namespaces(&crate::store::Reader::begin(db)?, now, &tenant))
            .await
    }

    /// A page of a namespace's live rows ([`kv::prefix_page`], the `getPrefix`
    /// operation's rule), from the last commit, without a turn of the writer.
    pub async fn kv_page(
        &self,
        tenant: &str,
        ns: &str,
        page: kv::PrefixQuery,
    ) -> Result<answers::Charged<kv::KvResult>, EngineError> {
        let (tenant, ns) = (tenant.to_string(), ns.to_string());
        self.read_whole(move |db, now, held| {
            let view = crate::store::Reader::begin(db)?;
            kv::prefix_page(&view, now, &tenant, &ns, &page, &mut |n| {
                held.charge_whole(n)
            })
        })
        .await
    }

    /// The tenant's timer queues with pending timers ([`timers::queues`]), from the
    /// last commit.
    pub async fn timer_queues(&self, tenant: &str) -> Result<Vec<timers::TimerQueue>, EngineError> {
        let tenant = tenant.to_string();
        self.read(move |db, _| timers::queues(&crate::store::Reader::begin(db)?, &tenant))
            .await
    }

    /// The transaction log ([`txn_log`]): the HTTP handler records each call in it.
    pub fn txn_log(&self) -> &txn_log::TxnLog {
        &self.shared.txn_log
    }

    /// The tenant's last `limit` transaction calls, newest first, with the queue and
    /// partition of every partition id their acks name, as the tenant's own (another
    /// tenant's id, or one gone since, resolves to nothing).
    pub async fn recent_transactions(
        &self,
        tenant: &str,
        limit: usize,
    ) -> Result<txn_log::Recent, EngineError> {
        let entries = self.shared.txn_log.recent(tenant, limit);
        let pids: std::collections::BTreeSet<u64> = entries
            .iter()
            .flat_map(|e| &e.parts.acks.items)
            .filter_map(|a| a.partition_id.parse().ok())
            .collect();
        if pids.is_empty() {
            return Ok(txn_log::Recent {
                entries,
                partitions: Default::default(),
            });
        }
        let tenant = tenant.to_string();
        let partitions = self
            .read(move |db, _| {
                txn_log::partitions(&crate::store::Reader::begin(db)?, &tenant, pids)
            })
            .await?;
        Ok(txn_log::Recent {
            entries,
            partitions,
        })
    }

    /// Runs a locks call: one result per operation, in order.
    pub async fn locks(
        &self,
        tenant: &str,
        ops: Vec<locks::LockOp>,
    ) -> Result<Vec<locks::LockResult>, EngineError> {
        // Locks are small and short-lived, and a worker may need one to drain: no cap.
        self.each(tenant, ops, false, locks::apply).await
    }

    /// Applies every op in one command and answers one result per op, in order.
    /// `adds_data`: the ops store new data, so the storage cap applies.
    async fn each<O: Send + Sync + 'static, R: Send + 'static>(
        &self,
        tenant: &str,
        ops: Vec<O>,
        adds_data: bool,
        apply: ApplyOp<O, R>,
    ) -> Result<Vec<R>, EngineError> {
        let tenant = tenant.to_string();
        self.shared
            .writer
            .submit(move |tx| {
                if adds_data {
                    tx.ensure_room()?;
                }
                let mut out = Vec::with_capacity(ops.len());
                for op in &ops {
                    out.push(apply(tx, &tenant, op)?);
                }
                Ok(out)
            })
            .await
    }

    /// Starts the timer scheduler: fires due timers as pushes through the writer (at
    /// least once, never early; pending timers are in the database, so they survive a
    /// restart), purges old request records and applies queues' retention
    /// ([`retention`]). It stops when the engine closes.
    pub fn spawn_scheduler(&self) -> tokio::task::JoinHandle<()> {
        let engine = self.clone();
        tokio::spawn(async move {
            let mut sweeps: u64 = 0;
            while !engine.is_closing() {
                let closed = engine.shared.closing.notify.notified();
                let jumped = async {
                    match engine.shared.clock.jumped() {
                        Some(n) => n.notified().await,
                        None => std::future::pending().await,
                    }
                };
                let moved = tokio::select! {
                    _ = tokio::time::sleep(TIMER_TICK) => false,
                    _ = jumped => true,
                    _ = closed => break,
                };
                sweeps += 1;
                let purge = sweeps.is_multiple_of(PURGE_EVERY);
                let retain = moved || sweeps.is_multiple_of(RETENTION_EVERY);
                let fired = engine
                    .shared
                    .writer
                    .submit(move |tx| {
                        let fired = timers::fire_due(tx)?;
                        if purge {
                            requests::purge(tx)?;
                        }
                        if retain {
                            let gone = retention::sweep(tx, retention::SWEEP_BUDGET)?;
                            if gone > 0 {
                                tracing::debug!(deleted = gone, "retention");
                            }
                        }
                        Ok(fired)
                    })
                    .await;
                match fired {
                    Ok(fired) if !fired.is_empty() => {
                        tracing::debug!(fired = fired.len(), "timers fired");
                        // Committed: the log may say so now.
                        for (tenant, ended) in fired {
                            engine.shared.timer_log.record(&tenant, [ended]);
                        }
                    }
                    Ok(_) => {}
                    Err(EngineError::ShuttingDown) => break,
                    Err(e) => tracing::warn!(error = %e, "timer sweep failed; will retry"),
                }
            }
        })
    }

    /// Runs a read of the last commit on the blocking pool. It sees every write
    /// answered before it: the writer first commits what it holds, if anything (see
    /// [`writer::Writer::published`]). In [`WriteMode::Lockstep`] it runs on the
    /// calling thread instead, as a write does there: a read finished by another
    /// thread at its own pace would let a simulation's workers go on in another order
    /// (a worker reading its queue's detail as it starts reordered the verifier's
    /// replays).
    async fn read<R: Send + 'static>(
        &self,
        f: impl FnOnce(&Database, crate::clock::Micros) -> Result<R, crate::store::StoreError>
        + Send
        + 'static,
    ) -> Result<R, EngineError> {
        self.shared.writer.published().await?;
        let handle = self.shared.db.clone();
        let now = self.shared.clock.now_micros();
        if self.shared.writer.is_lockstep() {
            return f(&*handle.get()?, now).map_err(EngineError::from);
        }
        // The semaphore is never closed: a permit always comes.
        let permit = self.shared.reads.clone().acquire_owned().await.ok();
        tokio::task::spawn_blocking(move || {
            let _running = permit;
            f(&*handle.get()?, now)
        })
        .await
        .map_err(|e| crate::store::StoreError::Task(e.to_string()))?
        .map_err(EngineError::from)
    }

    /// A read whose answer is sent whole or not at all (a listing, a message's
    /// detail, a state read), charging what it holds to the broker's answer budget as
    /// it reads ([`answers::Held::charge_whole`]). When the budget has no room now, the
    /// read is given up, the call waits for the room it found it needs
    /// ([`answers::AnswerBudget::acquire`]) and reads again, holding that room; a read
    /// that still finds too little (what it reads grew meanwhile) tries
    /// [`WHOLE_READ_TRIES`] times in all, then is refused with
    /// [`EngineError::AnswersBusy`], as is one that waits past
    /// [`answers::AnswerBudget::WAIT`]. The answer keeps the room until it is sent.
    pub(crate) async fn read_whole<R: Send + 'static>(
        &self,
        f: impl Fn(
            &Database,
            crate::clock::Micros,
            &mut answers::Held,
        ) -> Result<Result<R, answers::Starved>, crate::store::StoreError>
        + Send
        + Sync
        + 'static,
    ) -> Result<answers::Charged<R>, EngineError> {
        let f = std::sync::Arc::new(f);
        let answers = self.answer_budget();
        let mut room = answers.empty();
        for _ in 0..WHOLE_READ_TRIES {
            let (read, mut held) = (f.clone(), std::mem::replace(&mut room, answers.empty()));
            let (found, held) = self
                .read(move |db, now| read(db, now, &mut held).map(|r| (r, held)))
                .await?;
            match found {
                Ok(value) => return Ok(answers::Charged { value, held }),
                Err(answers::Starved(needs)) => {
                    drop(held);
                    room = answers.acquire(needs).await?;
                }
            }
        }
        Err(answers.busy())
    }

    /// One queue with a page of its partitions' figures (its totals count them
    /// all); `None` when it does not exist.
    pub async fn queue_detail(
        &self,
        tenant: &str,
        queue: &str,
        page: resources::Page,
    ) -> Result<Option<resources::QueueStats>, EngineError> {
        let (tenant, queue) = (tenant.to_string(), queue.to_string());
        self.read(move |db, now| resources::queue_page(db, &tenant, &queue, now, page))
            .await
    }

    /// One message and where it stands for each group; `None` when unknown. With the
    /// room it holds in the answer budget ([whole reads](answers#whole-answers); its payload, read
    /// and rendered twice, and a row per group): keep it until the answer has been sent.
    pub async fn message_detail(
        &self,
        tenant: &str,
        partition_id: u64,
        transaction_id: &str,
    ) -> Result<answers::Charged<Option<resources::MessageDetail>>, EngineError> {
        let (tenant, txn) = (tenant.to_string(), transaction_id.to_string());
        self.read_whole(move |db, now, held| {
            let found = resources::message(db, &tenant, partition_id, &txn, now)?;
            // The payload is read once and rendered twice (`data` and `payload`).
            let cost = found.as_ref().map_or(0, |d| {
                let len = d.message.data.get().len();
                answers::record_cost(len) + len as u64 + 256 * d.groups.len() as u64
            });
            Ok(held.charge_whole(cost).map(|()| found))
        })
        .await
    }

    /// Lists dead letters from the last commit, without waiting on the writer. The
    /// page's records are charged to the broker's answer budget ([`dlq::list`]), and
    /// the page is answered whole ([whole reads](answers#whole-answers)): keep `held`
    /// until the answer has been sent.
    pub async fn dlq(
        &self,
        tenant: &str,
        q: dlq::DlqQuery,
    ) -> Result<answers::Charged<dlq::DlqPage>, EngineError> {
        let tenant = tenant.to_string();
        self.read_whole(move |db, _, held| dlq::list(db, &tenant, &q, held))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::resources::{Measure, Page, QueueScan};
    use super::status::Filter;
    use crate::MockBroker;

    /// A listing finds the answer budget spent, waits for room rather than growing
    /// past it, and reads again once the room comes: its answer is whole.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_whole_read_waits_for_room_and_reads_again() {
        let broker = MockBroker::builder()
            .answer_budget(1 << 20)
            .start()
            .await
            .expect("an in-memory broker");
        let engine = broker.engine().clone();
        let push = reqwest::Client::new();
        let items: Vec<_> = (0..2_000)
            .map(|i| serde_json::json!({"queue": format!("q{i:04}"), "payload": i}))
            .collect();
        let res = push
            .post(format!("{}/api/v1/push", broker.url()))
            .json(&serde_json::json!({ "items": items }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201);

        let all = engine
            .answer_budget()
            .acquire(u64::MAX)
            .await
            .expect("an idle budget");
        let scan = QueueScan {
            measure: Measure::Watermarks,
            filter: Filter::default(),
            page: Page::ALL,
            partitions: Page::ALL,
        };
        let listing = tokio::spawn({
            let engine = engine.clone();
            async move { engine.queue_listing("default", scan).await }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert!(
            !listing.is_finished(),
            "2,000 queues with their partitions need more room than the budget has free"
        );
        drop(all);
        let read = tokio::time::timeout(Duration::from_secs(5), listing)
            .await
            .expect("the listing goes on once room comes")
            .unwrap()
            .expect("a listing");
        assert_eq!(read.value.total, 2_000);
        assert_eq!(read.value.rows.len(), 2_000, "whole, not cut");
        assert!(
            read.held.bytes() > 2_000 * 1_024,
            "it holds what it read: {} bytes",
            read.held.bytes()
        );
        drop(read);
        assert_eq!(
            engine.answer_budget().available(),
            1 << 20,
            "all given back"
        );
    }
}
