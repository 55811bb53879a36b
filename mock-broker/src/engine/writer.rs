//! The single writer and its group commit.
//!
//! One durable redb commit costs milliseconds, whatever it carries, so one commit per
//! request would cap the broker at a few hundred writes a second. Every command that
//! writes goes through this one writer thread instead. It takes every command waiting
//! in its queue, applies each in its own staging view ([`Tx`]) so that a command's
//! rollback never disturbs its neighbours, commits the batch once with
//! `Durability::Immediate`, and only then answers each caller. No caller hears success
//! before its write is on disk. While one batch is being synced the next one gathers.
//!
//! On a file, "commits the batch" is cheaper than a durable redb commit: the batch's
//! rows are appended to the write-ahead log and synced ([`crate::store::wal`]), the
//! redb commit is made without a sync, and a durable redb commit (a checkpoint) follows
//! every few seconds (`Wal::checkpoint_due`), after the batch's callers are answered.
//!
//! While more commands queue behind a batch, its redb commit waits too: the batch
//! stays in the open write transaction (`Held`) and the next ones are applied on top
//! of it, so a page that every batch touches is copied once per redb commit rather
//! than once per batch. Its callers are answered all the same, since its record is
//! synced. Held batches are committed after `HOLD_FOR`, when the queue stays empty
//! (for `IDLE_GRACE` after concurrent callers, at once after a lone one), at a
//! checkpoint, or when a read asks ([`Writer::published`]): every read of the
//! database waits for that commit when something is held, so none misses an
//! answered write. A batch that fails drops the transaction and the batches held in
//! it, and the writer applies those again from the log (`restore_or_reopen`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redb::{Database, Durability, WriteTransaction};
use tokio::sync::{Notify, mpsc, oneshot};

use super::notify::Wakers;
use crate::clock::Clock;
use crate::error::EngineError;
use crate::store::wal::{MAX_RECORD, Wal};
use crate::store::{DbHandle, Degradation, Health, Memory, Room, StoreError, Tables, Tx};

/// Most commands applied in one commit; bounds the latency of the first in a batch.
const MAX_BATCH: usize = 1024;

/// How often, while the disk is full, the writer tries to take its storage reserve
/// again (a write of the reserve's size: cheap next to a second of refused writes).
const RESERVE_RETRY: Duration = Duration::from_secs(1);

/// The writer thread's name, as the OS shows it (`/proc/<pid>/task/*/comm`, `top -H`,
/// perf's `comm`): how a profile or a load generator finds the serial stage.
pub const WRITER_THREAD: &str = "queen-writer";

// Linux keeps 15 bytes of a thread's name: a longer one would show cut short, and
// nothing looking for this name would find the thread.
const _: () = assert!(WRITER_THREAD.len() <= 15);

/// Commands that may wait for the writer before callers are told to back off (429).
pub const QUEUE_CAPACITY: usize = 16_384;

/// A command: runs against a staging view and produces its answer.
trait Job: Send {
    /// Applies the command. `Err` means storage failed and the batch must be abandoned.
    fn apply(&mut self, tx: &mut Tx<'_, '_>) -> Result<(), Arc<StoreError>>;
    /// Delivers the answer once the batch's fate is known.
    fn finish(self: Box<Self>, committed: Result<(), EngineError>);
}

struct FnJob<F, R> {
    f: Option<F>,
    out: Option<Result<R, EngineError>>,
    reply: oneshot::Sender<Result<R, EngineError>>,
}

impl<F, R> Job for FnJob<F, R>
where
    F: FnOnce(&mut Tx<'_, '_>) -> Result<R, EngineError> + Send,
    R: Send,
{
    fn apply(&mut self, tx: &mut Tx<'_, '_>) -> Result<(), Arc<StoreError>> {
        let f = self.f.take().expect("a job runs once");
        let out = f(tx);
        match &out {
            Ok(_) => {
                tx.flush().map_err(Arc::new)?;
                // What it wrote feeds the writer's in-memory indexes.
                super::ready::observe(tx);
            }
            // The batch's write transaction is no longer trustworthy: abandon it all,
            // keeping the cause for every caller.
            Err(EngineError::Storage(e)) => return Err(e.clone()),
            Err(_) => tx.discard(),
        }
        self.out = Some(out);
        Ok(())
    }

    fn finish(self: Box<Self>, committed: Result<(), EngineError>) {
        let answer = match committed {
            Ok(()) => self.out.unwrap_or_else(|| {
                Err(StoreError::Task("the command was not applied".into()).into())
            }),
            Err(e) => Err(e),
        };
        // The caller may have gone away (a dropped connection); nothing to do then.
        let _ = self.reply.send(answer);
    }
}

/// Group-commit figures since start.
#[derive(Debug, Default)]
pub struct WriterStats {
    /// Callers were answered for writes that redb has not committed yet (they are
    /// durable in the log, held in the writer's open transaction): a read must ask
    /// for them first ([`Writer::published`]). Set before those answers, cleared
    /// after the commit.
    unpublished: AtomicBool,
    commits: AtomicU64,
    commands: AtomicU64,
    read_only_batches: AtomicU64,
    live_bytes: AtomicU64,
    /// Wakes the harness's waits after a batch that wrote.
    written: Written,
}

/// Wakes what waits for written state (the harness's
/// [`MockBroker::wait_for`](crate::MockBroker::wait_for)) once the callers of a batch
/// that wrote are answered. While nothing watches (always, in the binary: it has no
/// harness) it costs the writer one atomic load per batch.
#[derive(Debug, Default)]
pub(crate) struct Written {
    watchers: AtomicUsize,
    notify: Notify,
}

impl Written {
    /// After a batch that wrote: wakes the watchers, if any.
    fn signal(&self) {
        if self.watchers.load(Ordering::SeqCst) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// Starts watching: the writer wakes [`WriteWatch::notified`] until it is dropped.
    pub(crate) fn watch(&self) -> WriteWatch<'_> {
        self.watchers.fetch_add(1, Ordering::SeqCst);
        WriteWatch(self)
    }
}

/// A watcher of [`Written`]; the writer stops looking for it once every one is dropped.
pub(crate) struct WriteWatch<'a>(&'a Written);

impl WriteWatch<'_> {
    /// Resolves at the next batch that wrote after it is enabled (or first polled).
    pub(crate) fn notified(&self) -> tokio::sync::futures::Notified<'_> {
        self.0.notify.notified()
    }
}

impl Drop for WriteWatch<'_> {
    fn drop(&mut self) {
        self.0.watchers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A snapshot of [`WriterStats`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatsSnapshot {
    /// Durable commits made.
    pub commits: u64,
    /// Commands applied (in commits and in batches that wrote nothing).
    pub commands: u64,
    /// Batches that wrote nothing and so needed no commit.
    pub read_only_batches: u64,
    /// Bytes of keys and values stored as of the last commit: what the storage cap
    /// ([`crate::MockBrokerBuilder::storage_cap`]) is measured against.
    pub live_bytes: u64,
}

impl StatsSnapshot {
    /// Average commands per batch, over every batch.
    pub fn average_batch(&self) -> f64 {
        let batches = self.commits + self.read_only_batches;
        if batches == 0 {
            0.0
        } else {
            self.commands as f64 / batches as f64
        }
    }
}

impl WriterStats {
    /// Reads the counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            commits: self.commits.load(Ordering::Relaxed),
            commands: self.commands.load(Ordering::Relaxed),
            read_only_batches: self.read_only_batches.load(Ordering::Relaxed),
            live_bytes: self.live_bytes.load(Ordering::Relaxed),
        }
    }
}

/// The handle commands are submitted through. Cheap to clone.
#[derive(Clone)]
pub struct Writer {
    tx: mpsc::Sender<Box<dyn Job>>,
    stats: Arc<WriterStats>,
    /// `Some` in [`WriteMode::Lockstep`]: the submitting thread waits here.
    lockstep: Option<Arc<Lockstep>>,
}

/// How the writer takes commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriteMode {
    /// Group commit: the writer thread takes whatever has queued, applies it as one
    /// batch, and answers each caller when the batch is durable (the default).
    #[default]
    Grouped,
    /// One command at a time, and the thread that submits it waits (blocking) until it
    /// is durable and answered. A broker whose clients run on one current-thread
    /// runtime then behaves as a function of the order of their requests alone, not
    /// of the writer thread's timing: what a deterministic simulation needs (the
    /// verifier's replays, on a paused clock, see [`crate::MockBrokerBuilder::write_mode`]).
    /// It costs the broker its group commit: for tests only.
    Lockstep,
}

/// Where a lockstep submitter waits for its command (see [`WriteMode::Lockstep`]).
#[derive(Default)]
struct Lockstep {
    /// Commands submitted, and commands answered.
    counts: std::sync::Mutex<(u64, u64)>,
    answered: std::sync::Condvar,
}

impl Lockstep {
    /// Takes a ticket for a command about to be queued.
    fn ticket(&self) -> u64 {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.0 += 1;
        c.0
    }

    /// After a batch's callers are answered.
    fn answered(&self, n: u64) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        c.1 += n;
        self.answered.notify_all();
    }

    /// Blocks until command `ticket` is answered.
    fn wait(&self, ticket: u64) {
        let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
        while c.1 < ticket {
            c = self.answered.wait(c).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// Joins the writer thread once every handle is dropped.
pub struct WriterThread(Option<thread::JoinHandle<()>>);

impl WriterThread {
    /// Waits for the writer to apply and commit what it holds, then stop.
    pub fn join(mut self) {
        if let Some(h) = self.0.take() {
            let _ = h.join();
        }
    }
}

impl Writer {
    /// Starts the writer thread over `db`; past `cap` live bytes, commands that add
    /// data are refused (see [`Tx::ensure_room`]).
    pub fn start(
        db: Arc<DbHandle>,
        clock: Arc<dyn Clock>,
        wakers: Arc<Wakers>,
        cap: Option<u64>,
        mode: WriteMode,
    ) -> (Writer, WriterThread) {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>(QUEUE_CAPACITY);
        let lockstep = (mode == WriteMode::Lockstep).then(Arc::<Lockstep>::default);
        let thread_lockstep = lockstep.clone();
        let stats = Arc::new(WriterStats::default());
        // Counted before the writer starts, not on its thread: the broker's stats are
        // read as soon as `start` returns (a restarted broker's stored bytes were read
        // as 0 when the thread had not yet counted them).
        let live = count_live(&db);
        stats.live_bytes.store(live, Ordering::Relaxed);
        let thread_stats = stats.clone();
        let handle = thread::Builder::new()
            .name(WRITER_THREAD.into())
            .spawn(move || {
                run(
                    db,
                    clock,
                    wakers,
                    rx,
                    thread_stats,
                    Limits {
                        cap,
                        lockstep: thread_lockstep,
                    },
                    live,
                )
            })
            .expect("spawn the writer thread");
        (
            Writer {
                tx,
                stats,
                lockstep,
            },
            WriterThread(Some(handle)),
        )
    }

    /// Runs `f` in the next group commit and answers once the commit is durable.
    ///
    /// `f` sees the effects of every command before it in the batch. If it returns an
    /// error, its staged writes are dropped; if it wants to answer successfully while
    /// writing nothing (a rolled-back transaction), it calls [`Tx::discard`].
    pub async fn submit<F, R>(&self, f: F) -> Result<R, EngineError>
    where
        F: FnOnce(&mut Tx<'_, '_>) -> Result<R, EngineError> + Send + 'static,
        R: Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        let job = Box::new(FnJob {
            f: Some(f),
            out: None,
            reply,
        });
        let ticket = self.lockstep.as_ref().map(|l| l.ticket());
        self.tx.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => EngineError::Overloaded,
            mpsc::error::TrySendError::Closed(_) => EngineError::ShuttingDown,
        })?;
        if let (Some(lockstep), Some(ticket)) = (&self.lockstep, ticket) {
            // Blocks this thread (the runtime's, in a simulation) until the answer is
            // in: nothing else runs meanwhile, so nothing depends on the writer's pace.
            lockstep.wait(ticket);
        }
        answer.await.map_err(|_| EngineError::ShuttingDown)?
    }

    /// Waits until every write answered so far is committed to redb, so that a read
    /// of the database sees it. Free when nothing is held (the common case for a
    /// read that follows no write); otherwise one pass of the writer.
    pub async fn published(&self) -> Result<(), EngineError> {
        if !self.stats.unpublished.load(Ordering::SeqCst) {
            return Ok(());
        }
        self.submit(|tx| {
            tx.publish = true;
            Ok(())
        })
        .await
    }

    /// Whether commands run in [`WriteMode::Lockstep`].
    pub(crate) fn is_lockstep(&self) -> bool {
        self.lockstep.is_some()
    }

    /// Group-commit figures.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// What wakes waits for written state (see [`Written`]).
    pub(crate) fn written(&self) -> &Written {
        &self.stats.written
    }
}

/// The writer thread's settings besides its database.
struct Limits {
    /// The storage cap (see [`Tx::ensure_room`]).
    cap: Option<u64>,
    /// `Some` in [`WriteMode::Lockstep`].
    lockstep: Option<Arc<Lockstep>>,
}

fn run(
    db: Arc<DbHandle>,
    clock: Arc<dyn Clock>,
    wakers: Arc<Wakers>,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    stats: Arc<WriterStats>,
    limits: Limits,
    mut live: u64,
) {
    let Limits { cap, lockstep } = limits;
    // In lockstep nothing is held: each command is committed before it is answered.
    let hold = lockstep.is_none();
    // Caches and indexes of this writer alone (see `store::Memory`).
    let mut memory = Memory::default();
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    // `Some(t)`: the disk filled and the storage reserve was given back (or last
    // failed to be taken again) at `t`; until it is taken again, commands that add
    // data are refused and the rest commit into the reserve's space.
    let mut disk_full: Option<Instant> = None;
    // Batches durable in the log and answered, not yet committed to redb.
    let mut held: Option<Held> = None;
    // When a batch last carried more than one command: concurrent callers, so more
    // commands are likely to follow within moments.
    let mut concurrent_at: Option<Instant> = None;
    loop {
        let first = match rx.try_recv() {
            Ok(job) => job,
            Err(mpsc::error::TryRecvError::Disconnected) => break,
            Err(mpsc::error::TryRecvError::Empty) => {
                // Between two bursts of concurrent callers the queue empties for a
                // moment: what is held waits a little for the next command before it
                // is committed (a read meanwhile asks for the commit itself). A lone
                // caller's batch is committed at once, as it always was.
                let grace = held
                    .as_ref()
                    .filter(|_| concurrent_at.is_some_and(|t| t.elapsed() < HOLD_FOR))
                    .map(|h| IDLE_GRACE.min(HOLD_FOR.saturating_sub(h.since.elapsed())));
                if let Some(job) = grace.and_then(|g| next_within(&mut rx, g)) {
                    job
                } else {
                    // Idle: what is held becomes visible before the writer sleeps, so a
                    // lightly loaded broker commits every batch, as it always did.
                    if held.is_some() {
                        // Without a sync: it is in the log.
                        commit_or_reopen(
                            &db,
                            &mut held,
                            Durability::None,
                            &stats,
                            &mut live,
                            &mut memory,
                        );
                    }
                    match rx.blocking_recv() {
                        Some(job) => job,
                        None => break,
                    }
                }
            }
        };
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
        if n > 1 {
            concurrent_at = Some(Instant::now());
        }
        if let Some(since) = disk_full
            && since.elapsed() >= RESERVE_RETRY
        {
            match db.restore_reserve() {
                Ok(()) => {
                    tracing::info!("space is back: storage reserve restored, all writes resume");
                    disk_full = None;
                    db.set_health(Health::Healthy);
                }
                Err(_) => disk_full = Some(Instant::now()),
            }
        }
        let mut woken = Vec::new();
        let outcome = current_db(&db, &mut live, &mut memory).and_then(|d| {
            apply_batch(
                &d,
                db.wal().as_deref_mut(),
                clock.as_ref(),
                &memory,
                &mut batch,
                &mut woken,
                &mut live,
                Room {
                    cap,
                    disk_full: disk_full.is_some(),
                },
                &mut held,
                hold,
            )
        });
        match &outcome {
            Ok(Applied::Logged(e)) => {
                // Durable in the log, so its callers hear success; redb refuses every
                // call after a failed commit, and a reopen replays the batch into it.
                tracing::error!(error = %e, commands = n, "commit after the log failed; reopening");
                stats.commits.fetch_add(1, Ordering::Relaxed);
                stats.unpublished.store(false, Ordering::SeqCst);
                db.set_health(Health::Degraded(
                    e.degradation().unwrap_or(Degradation::IoError),
                ));
                let _ = reopen(&db, &mut live, &mut memory);
                stats.live_bytes.store(live, Ordering::Relaxed);
            }
            Ok(applied @ (Applied::Committed | Applied::Held)) => {
                db.set_health(match disk_full {
                    Some(_) => Health::Degraded(Degradation::StorageFull),
                    None => Health::Healthy,
                });
                stats.live_bytes.store(live, Ordering::Relaxed);
                stats.commits.fetch_add(1, Ordering::Relaxed);
                // Before the answers: a read that follows one must find the flag.
                stats
                    .unpublished
                    .store(matches!(applied, Applied::Held), Ordering::SeqCst);
            }
            Ok(Applied::Published) => {
                stats.read_only_batches.fetch_add(1, Ordering::Relaxed);
                stats.unpublished.store(false, Ordering::SeqCst);
            }
            Ok(Applied::ReadOnly) => {
                stats.read_only_batches.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                tracing::error!(error = %e, commands = n, "group commit failed; batch abandoned");
                // The indexes saw the batch's commands as applied: start them afresh.
                memory = Memory::default();
                if let Some(why) = e.degradation() {
                    // redb refuses every call after an I/O error: open the file again
                    // now, so reads go on and the next batch can commit.
                    db.set_health(Health::Degraded(why));
                    if why == Degradation::StorageFull
                        && disk_full.is_none()
                        && db.release_reserve()
                    {
                        tracing::warn!(
                            "the disk is full: storage reserve released; refusing writes that add data, serving pops, acks and deletes"
                        );
                        disk_full = Some(Instant::now());
                    }
                    // A failed append to the log leaves redb as it was (the batch's
                    // transaction was dropped): only a failed redb commit needs it.
                    if !matches!(**e, StoreError::Log(_)) {
                        let _ = reopen(&db, &mut live, &mut memory);
                    }
                }
                // The dropped transaction held earlier batches too, answered and in
                // the log: apply them again (nothing to do after a reopen, which
                // replays them, or when none was held).
                restore_or_reopen(&db, &mut live, &mut memory);
                stats.unpublished.store(false, Ordering::SeqCst);
            }
        }
        stats.commands.fetch_add(n, Ordering::Relaxed);
        let wrote = matches!(
            outcome,
            Ok(Applied::Committed | Applied::Held | Applied::Logged(_))
        );
        let committed = outcome.map(|_| ()).map_err(EngineError::from);
        if committed.is_ok() {
            for (tenant, queue) in woken.drain(..) {
                wakers.wake(&tenant, &queue);
            }
        }
        for job in batch.drain(..) {
            job.finish(committed.clone());
        }
        // After the answers, as a caller sees it: a read now finds the batch (it asks
        // for a held one's commit first, see `Writer::published`).
        if wrote {
            stats.written.signal();
        }
        if let Some(l) = &lockstep {
            l.answered(n);
        }
        // After the answers: the callers of this batch do not wait for it.
        if db.wal().is_some_and(|w| w.checkpoint_due()) {
            checkpoint_or_reopen(&db, &mut held, &stats, &mut live, &mut memory);
        }
    }
    // A clean stop leaves the log empty and everything in redb's file.
    if held.is_some() || db.wal().is_some_and(|w| w.holds_records()) {
        checkpoint_or_reopen(&db, &mut held, &stats, &mut live, &mut memory);
    }
    if let Some(mut wal) = db.wal() {
        wal.close();
    }
    tracing::debug!("writer stopped");
}

/// Makes every batch so far part of redb's file with one durable commit (see
/// [`Wal::checkpointed`]).
fn checkpoint_or_reopen(
    db: &DbHandle,
    held: &mut Option<Held>,
    stats: &WriterStats,
    live: &mut u64,
    memory: &mut Memory,
) {
    if commit_or_reopen(db, held, Durability::Immediate, stats, live, memory)
        && let Some(mut wal) = db.wal()
    {
        wal.checkpointed(false);
    }
}

/// Commits what the writer holds with `durability` (with nothing held: an empty
/// commit, which a durable one still makes worth it, as a checkpoint). Answers whether
/// it was made. A failure loses nothing: the log keeps every record since the last
/// checkpoint, and the reopen that a failed redb commit needs replays them.
fn commit_or_reopen(
    db: &DbHandle,
    held: &mut Option<Held>,
    durability: Durability,
    stats: &WriterStats,
    live: &mut u64,
    memory: &mut Memory,
) -> bool {
    let result = match held.take() {
        Some(h) => commit(h.txn, durability),
        None => db.get().and_then(|d| commit(d.begin_write()?, durability)),
    };
    stats.unpublished.store(false, Ordering::SeqCst);
    let Err(e) = result else { return true };
    tracing::error!(error = %e, ?durability, "commit failed; reopening (the log keeps every record)");
    if let Some(why) = e.degradation() {
        db.set_health(Health::Degraded(why));
    }
    let _ = reopen(db, live, memory);
    false
}

/// Commits `txn` with `durability`.
fn commit(mut txn: WriteTransaction, durability: Durability) -> Result<(), StoreError> {
    txn.set_durability(durability)
        .map_err(|e| StoreError::Redb(e.into()))?;
    txn.commit()?;
    Ok(())
}

/// After a batch failed and its transaction was dropped: applies again the earlier
/// batches that transaction held (answered, in the log), if any.
fn restore_or_reopen(db: &DbHandle, live: &mut u64, memory: &mut Memory) {
    let Ok(d) = db.get() else { return };
    let restored = match db.wal() {
        Some(mut wal) => wal.restore(&d),
        None => return,
    };
    match restored {
        Ok(0) => {}
        Ok(n) => {
            tracing::info!(records = n, "held batches applied again from the log");
            *live = count_live(db);
        }
        Err(e) => {
            tracing::error!(error = %e, "cannot apply held batches again; reopening");
            let _ = reopen(db, live, memory);
        }
    }
}

/// The database to commit to: the current one, or, while a reopen is pending, a new
/// attempt at it. A reopen that fails while the disk is full (the replay of the log
/// needs space too) answers [`StoreError::NoSpace`], a 507 like any write refused for a
/// full disk: a 503 "retry shortly" would send clients back for as long as the disk
/// stays full, and tell an operator nothing.
fn current_db(
    db: &DbHandle,
    live: &mut u64,
    memory: &mut Memory,
) -> Result<Arc<Database>, Arc<StoreError>> {
    let why = match db.get() {
        Ok(d) => return Ok(d),
        // On a full disk, tried moments ago: answer at once, as that attempt did. After
        // any other I/O error every command tries again, so writes resume with the
        // first one after the fault ends.
        Err(_) => match db
            .reopen_not_due()
            .filter(|_| db.health() == Health::Degraded(Degradation::StorageFull))
        {
            Some(why) => why,
            None => match reopen(db, live, memory) {
                Ok(d) => return Ok(d),
                Err(e) => e.to_string(),
            },
        },
    };
    Err(Arc::new(match db.health() {
        Health::Degraded(Degradation::StorageFull) => {
            StoreError::NoSpace(format!("the database cannot be reopened: {why}"))
        }
        _ => StoreError::Unavailable(format!(
            "the database is being reopened after an I/O error: {why}"
        )),
    }))
}

/// Opens the database again and rebuilds what the writer keeps in memory from it: the
/// live byte count from the file, the caches from nothing. What the file holds is the
/// last durable commit, so nothing acknowledged is lost and nothing of the failed
/// batch appears. A failure for lack of space marks the health `storage_full`, whatever
/// the first failure was.
fn reopen(db: &DbHandle, live: &mut u64, memory: &mut Memory) -> Result<Arc<Database>, StoreError> {
    match db.reopen() {
        Ok(d) => {
            *live = count_live(db);
            *memory = Memory::default();
            tracing::info!("database reopened after an I/O error");
            Ok(d)
        }
        Err(e) => {
            if let Some(why) = e.degradation() {
                db.set_health(Health::Degraded(why));
            }
            if let Some(failures) = db.note_reopen_failure(&e) {
                tracing::warn!(error = %e, failures, "reopening the database failed; the next batch tries again");
            }
            Err(e)
        }
    }
}

fn count_live(db: &DbHandle) -> u64 {
    db.get()
        .and_then(|d| crate::store::live_bytes(&d))
        .unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot count stored bytes; the storage cap counts from 0");
            0
        })
}

fn store_err(e: impl Into<StoreError>) -> Arc<StoreError> {
    Arc::new(e.into())
}

/// How long batches that are durable in the log may wait in the writer's open redb
/// transaction while more commands queue, before redb commits them. Why hold them at
/// all: a redb commit, even without a sync, copies every page the batch touched, and
/// the next batch copies most of them again; held, a page is copied once for all the
/// batches in the transaction. A read never sees less than what was answered: it asks
/// the writer to commit first ([`Writer::published`]), and an idle writer commits
/// before it sleeps.
const HOLD_FOR: Duration = Duration::from_millis(50);

/// ... or once their rows reach this many bytes.
const HOLD_BYTES: usize = 8 << 20;

/// How long a writer that holds batches for concurrent callers waits for a next
/// command once its queue is empty, before it commits them. Under load the queue
/// empties between bursts of answers (the callers are writing their next requests):
/// committing at every such gap made the redb commits 464 to 578 in a 5-second push+KV
/// run at 64 workers; waiting 2 ms made them 113 to 162, and the writer's CPU per
/// operation went from a median of 47 to 42 µs (5 alternating runs). A lone caller
/// (batches of one command) is not kept waiting: its batch is committed at once.
const IDLE_GRACE: Duration = Duration::from_millis(2);

/// How often it looks at the queue meanwhile: the queue's receiver has no blocking
/// receive with a timeout and this thread has no runtime, so it polls. A sleep asked
/// for 50 µs lasts about 135 µs on an idle 2-core host (the thread's 50 µs timer slack
/// and the VM's timer) and 344 µs on average under push-kv at 64 workers (`perf trace`
/// on this thread, 2026-12-03): a few wakeups per grace, not twenty. A 1 ns slack with
/// a 20 µs poll (wakeups about 46 µs apart when idle) changed no throughput in six
/// alternating pairs (0.90 to 1.11): the commands that arrive meanwhile are batched all
/// the same (examples/load/benchmarks-history.md, eleventh round).
const IDLE_POLL: Duration = Duration::from_micros(50);

/// The next command if one comes within `wait`; `None` at the end of it, or at once
/// when every sender is gone.
fn next_within(rx: &mut mpsc::Receiver<Box<dyn Job>>, wait: Duration) -> Option<Box<dyn Job>> {
    let until = Instant::now() + wait;
    loop {
        match rx.try_recv() {
            Ok(job) => return Some(job),
            Err(mpsc::error::TryRecvError::Empty) if Instant::now() < until => {
                thread::sleep(IDLE_POLL);
            }
            Err(_) => return None,
        }
    }
}

/// Batches synced in the log and answered, in a redb transaction not yet committed.
struct Held {
    txn: WriteTransaction,
    /// When the first of them was applied.
    since: Instant,
    /// The bytes of rows they logged.
    bytes: usize,
}

/// What a batch came to.
enum Applied {
    /// It wrote nothing, so it needed no commit.
    ReadOnly,
    /// It wrote nothing, and committed the batches held before it.
    Published,
    /// Committed: durably in redb, or synced in the log and committed to redb.
    Committed,
    /// Synced in the log and held in the writer's open transaction (see [`Held`]).
    Held,
    /// Synced in the log, so durable, but redb refused the commit: the database must be
    /// reopened, which replays the batch from the log.
    Logged(Arc<StoreError>),
}

/// Applies every job in one write transaction, over the batches [`Held`] before it,
/// and commits it: through `wal` when there is one (a database on a file: the record
/// is synced, then redb commits without a sync, or holds the batch while more
/// commands wait), else durably in redb. `live` is updated to the bytes now stored
/// once the batch is durable. On an error the transaction is dropped, held batches
/// with it (see [`restore_or_reopen`]).
#[allow(clippy::too_many_arguments)]
fn apply_batch(
    db: &Database,
    mut wal: Option<&mut Wal>,
    clock: &dyn Clock,
    memory: &Memory,
    batch: &mut [Box<dyn Job>],
    woken: &mut Vec<(String, String)>,
    live: &mut u64,
    room: Room,
    held: &mut Option<Held>,
    hold: bool,
) -> Result<Applied, Arc<StoreError>> {
    let (txn, since, held_bytes) = match held.take() {
        Some(h) => (h.txn, Some(h.since), h.bytes),
        None => (db.begin_write().map_err(store_err)?, None, 0),
    };
    let mut dirty = false;
    let mut publish = false;
    let logged;
    let (live_after, rows) = {
        let mut tables = Tables::open(&txn, *live, room)?;
        if let Some(w) = wal.as_deref_mut() {
            tables = tables.log_rows(w.spare_rows());
        }
        for job in batch.iter_mut() {
            let mut tx = Tx::new(&mut tables, clock.now_micros(), memory);
            job.apply(&mut tx)?;
            dirty |= tx.flushed_any();
            publish |= tx.publish;
            woken.append(&mut tx.woken);
        }
        if dirty && tables.live_bytes() != *live {
            tables.store_live_bytes()?;
        }
        // Through the log unless there is none or the record would be too large; the
        // rows kept only for a commit straight to redb are written in that case alone
        // (`Tx::put_unless_logged`), and the live count is stored again to count them.
        logged = tables.logged_len().is_some_and(|n| n <= MAX_RECORD);
        if dirty && !logged {
            tables.store_unlogged()?;
            if tables.live_bytes() != *live {
                tables.store_live_bytes()?;
            }
        }
        if dirty && let Some(w) = &wal {
            tables.store_wal_seq(w.next_seq())?;
        }
        (tables.live_bytes(), tables.take_log())
    };
    let due = |since: Instant, bytes: usize| {
        !hold || publish || since.elapsed() >= HOLD_FOR || bytes >= HOLD_BYTES
    };
    if !dirty {
        return match since {
            None => {
                txn.abort().map_err(store_err)?;
                Ok(Applied::ReadOnly)
            }
            Some(since) if due(since, held_bytes) => match commit(txn, Durability::None) {
                Ok(()) => Ok(Applied::Published),
                Err(e) => Ok(Applied::Logged(Arc::new(e))),
            },
            Some(since) => {
                *held = Some(Held {
                    txn,
                    since,
                    bytes: held_bytes,
                });
                Ok(Applied::ReadOnly)
            }
        };
    }
    match (wal, rows) {
        (Some(w), Some(rows)) if logged => {
            let bytes = held_bytes + rows.as_bytes().len();
            let appended = w.append(&rows);
            w.recycle(rows);
            // Dropping `txn` on an error aborts it: redb stays as it was before the
            // held batches, which the caller applies again.
            appended.map_err(Arc::new)?;
            *live = live_after;
            let since = since.unwrap_or_else(Instant::now);
            if due(since, bytes) {
                if let Err(e) = commit(txn, Durability::None) {
                    return Ok(Applied::Logged(Arc::new(e)));
                }
                return Ok(Applied::Committed);
            }
            *held = Some(Held { txn, since, bytes });
            Ok(Applied::Held)
        }
        (w, _) => {
            commit(txn, Durability::Immediate).map_err(Arc::new)?;
            *live = live_after;
            if let Some(w) = w {
                w.checkpointed(true);
            }
            Ok(Applied::Committed)
        }
    }
}

#[cfg(test)]
mod tests {
    use redb::ReadableDatabase;
    use redb::backends::InMemoryBackend;

    use super::*;
    use crate::clock::SystemClock;
    use crate::store::{T, TABLES};

    /// A command that does nothing, to fill the queue.
    struct Nothing;

    impl Job for Nothing {
        fn apply(&mut self, _: &mut Tx<'_, '_>) -> Result<(), Arc<StoreError>> {
            Ok(())
        }
        fn finish(self: Box<Self>, _: Result<(), EngineError>) {}
    }

    /// A command that writes `rows` ordinary rows of `size` bytes and one row kept only
    /// for a commit straight to redb, at `requests/retry`.
    fn staging(rows: usize, size: usize) -> Box<dyn Job> {
        let (reply, _) = oneshot::channel();
        Box::new(FnJob {
            f: Some(move |tx: &mut Tx<'_, '_>| {
                for i in 0..rows {
                    tx.put(T::Kv, format!("row-{i}").into_bytes(), &"x".repeat(size));
                }
                tx.put_unless_logged(T::Requests, b"retry".to_vec(), "answer".to_string());
                Ok(())
            }),
            out: None,
            reply,
        })
    }

    /// Applies one batch of `staging(rows, size)`, with a log or without, commits it,
    /// and says whether the row kept for a direct commit is in the database.
    fn keeps_the_retry_row(logged: bool, rows: usize, size: usize) -> bool {
        let db = crate::store::open(None).unwrap();
        let mut wal = logged.then(|| {
            let mut w = Wal::new(Arc::new(InMemoryBackend::new()), None);
            w.recover(&db).unwrap();
            w
        });
        let (mut held, mut live, mut woken) = (None, 0, Vec::new());
        let mut batch = vec![staging(rows, size)];
        apply_batch(
            &db,
            wal.as_mut(),
            &SystemClock,
            &Memory::default(),
            &mut batch,
            &mut woken,
            &mut live,
            Room::default(),
            &mut held,
            true,
        )
        .unwrap();
        if let Some(h) = held.take() {
            commit(h.txn, Durability::None).unwrap();
        }
        let read = db.begin_read().unwrap();
        let requests = read.open_table(TABLES[T::Requests as usize]).unwrap();
        assert!(live > (rows * size) as u64, "the rows are counted");
        requests.get(b"retry".as_slice()).unwrap().is_some()
    }

    #[test]
    fn a_row_kept_for_a_direct_commit_is_written_only_by_one() {
        // Through the log: a failed append leaves redb untouched, no retry could read it.
        assert!(!keeps_the_retry_row(true, 4, 100));
        // Straight to redb: without a log, or when the batch is too large for a record.
        assert!(keeps_the_retry_row(false, 4, 100));
        assert!(keeps_the_retry_row(true, 9, 1 << 20));
    }

    #[test]
    fn an_idle_writer_takes_a_command_that_comes_within_its_grace() {
        let (tx, mut rx) = mpsc::channel::<Box<dyn Job>>(4);
        let sender = thread::spawn(move || {
            thread::sleep(Duration::from_millis(2));
            let _ = tx.try_send(Box::new(Nothing));
            // Kept open until the command is taken, so it is not a disconnect.
            thread::sleep(Duration::from_millis(500));
        });
        let t = Instant::now();
        assert!(next_within(&mut rx, Duration::from_secs(5)).is_some());
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
        sender.join().unwrap();
    }

    #[test]
    fn an_idle_writer_stops_waiting_at_the_end_of_its_grace_or_at_a_disconnect() {
        let (tx, mut rx) = mpsc::channel::<Box<dyn Job>>(4);
        let t = Instant::now();
        assert!(next_within(&mut rx, Duration::from_millis(5)).is_none());
        assert!(t.elapsed() >= Duration::from_millis(5));
        drop(tx);
        let t = Instant::now();
        assert!(next_within(&mut rx, Duration::from_secs(5)).is_none());
        assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    }
}
