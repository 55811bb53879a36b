//! The single writer and its group commit.
//!
//! One durable redb commit costs milliseconds, whatever it carries, so one commit per
//! request would cap the broker at a few hundred writes a second. Every command that
//! writes goes through this one writer thread instead. It takes every command waiting
//! in its queue, applies each in its own staging view ([`Tx`]) so that a command's
//! rollback never disturbs its neighbours, commits the batch once with
//! `Durability::Immediate`, and only then answers each caller. No caller hears success
//! before its write is on disk. While one batch is being synced the next one gathers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use redb::Database;
use tokio::sync::{mpsc, oneshot};

use super::notify::Wakers;
use crate::clock::Clock;
use crate::error::EngineError;
use crate::store::{DbHandle, Degradation, Health, Memory, Room, StoreError, Tables, Tx};

/// Most commands applied in one commit; bounds the latency of the first in a batch.
const MAX_BATCH: usize = 1024;

/// How often, while the disk is full, the writer tries to take its storage reserve
/// again (a write of the reserve's size: cheap next to a second of refused writes).
const RESERVE_RETRY: Duration = Duration::from_secs(1);

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
    commits: AtomicU64,
    commands: AtomicU64,
    read_only_batches: AtomicU64,
    live_bytes: AtomicU64,
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
    ) -> (Writer, WriterThread) {
        let (tx, rx) = mpsc::channel::<Box<dyn Job>>(QUEUE_CAPACITY);
        let stats = Arc::new(WriterStats::default());
        let thread_stats = stats.clone();
        let handle = thread::Builder::new()
            .name("queen-writer".into())
            .spawn(move || run(db, clock, wakers, rx, thread_stats, cap))
            .expect("spawn the writer thread");
        (Writer { tx, stats }, WriterThread(Some(handle)))
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
        self.tx.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => EngineError::Overloaded,
            mpsc::error::TrySendError::Closed(_) => EngineError::ShuttingDown,
        })?;
        answer.await.map_err(|_| EngineError::ShuttingDown)?
    }

    /// Group-commit figures.
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }
}

fn run(
    db: Arc<DbHandle>,
    clock: Arc<dyn Clock>,
    wakers: Arc<Wakers>,
    mut rx: mpsc::Receiver<Box<dyn Job>>,
    stats: Arc<WriterStats>,
    cap: Option<u64>,
) {
    let mut live = count_live(&db);
    stats.live_bytes.store(live, Ordering::Relaxed);
    // Caches and indexes of this writer alone (see `store::Memory`).
    let mut memory = Memory::default();
    let mut batch: Vec<Box<dyn Job>> = Vec::with_capacity(MAX_BATCH);
    // `Some(t)`: the disk filled and the storage reserve was given back (or last
    // failed to be taken again) at `t`; until it is taken again, commands that add
    // data are refused and the rest commit into the reserve's space.
    let mut disk_full: Option<Instant> = None;
    while let Some(first) = rx.blocking_recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let n = batch.len() as u64;
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
                clock.as_ref(),
                &memory,
                &mut batch,
                &mut woken,
                &mut live,
                Room {
                    cap,
                    disk_full: disk_full.is_some(),
                },
            )
        });
        match &outcome {
            Ok(true) => {
                db.set_health(match disk_full {
                    Some(_) => Health::Degraded(Degradation::StorageFull),
                    None => Health::Healthy,
                });
                stats.live_bytes.store(live, Ordering::Relaxed);
                stats.commits.fetch_add(1, Ordering::Relaxed);
            }
            Ok(false) => {
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
                    reopen(&db, &mut live, &mut memory);
                }
            }
        }
        stats.commands.fetch_add(n, Ordering::Relaxed);
        let committed = outcome.map(|_| ()).map_err(EngineError::from);
        if committed.is_ok() {
            for (tenant, queue) in woken.drain(..) {
                wakers.wake(&tenant, &queue);
            }
        }
        for job in batch.drain(..) {
            job.finish(committed.clone());
        }
    }
    tracing::debug!("writer stopped");
}

/// The database to commit to: the current one, or, while a reopen is pending, a new
/// attempt at it.
fn current_db(
    db: &DbHandle,
    live: &mut u64,
    memory: &mut Memory,
) -> Result<Arc<Database>, Arc<StoreError>> {
    match db.get() {
        Ok(d) => Ok(d),
        Err(_) => reopen(db, live, memory).ok_or_else(|| {
            Arc::new(StoreError::Unavailable(
                "the database is being reopened after an I/O error".into(),
            ))
        }),
    }
}

/// Opens the database again and rebuilds what the writer keeps in memory from it: the
/// live byte count from the file, the caches from nothing. What the file holds is the
/// last durable commit, so nothing acknowledged is lost and nothing of the failed
/// batch appears.
fn reopen(db: &DbHandle, live: &mut u64, memory: &mut Memory) -> Option<Arc<Database>> {
    match db.reopen() {
        Ok(d) => {
            *live = count_live(db);
            *memory = Memory::default();
            tracing::info!("database reopened after an I/O error");
            Some(d)
        }
        Err(e) => {
            tracing::warn!(error = %e, "reopening the database failed; the next batch tries again");
            None
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

/// Applies every job in one write transaction. `Ok(true)`: committed durably, and
/// `live` updated to the bytes now stored; `Ok(false)`: nothing was written, so no
/// commit was needed.
fn apply_batch(
    db: &Database,
    clock: &dyn Clock,
    memory: &Memory,
    batch: &mut [Box<dyn Job>],
    woken: &mut Vec<(String, String)>,
    live: &mut u64,
    room: Room,
) -> Result<bool, Arc<StoreError>> {
    let txn = db.begin_write().map_err(store_err)?;
    let mut dirty = false;
    let live_after;
    {
        let mut tables = Tables::open(&txn, *live, room)?;
        for job in batch.iter_mut() {
            let mut tx = Tx::new(&mut tables, clock.now_micros(), memory);
            job.apply(&mut tx)?;
            dirty |= tx.flushed_any();
            woken.append(&mut tx.woken);
        }
        live_after = tables.live_bytes();
        if dirty && live_after != *live {
            tables.store_live_bytes()?;
        }
    }
    if dirty {
        txn.commit().map_err(store_err)?;
        *live = live_after;
    } else {
        txn.abort().map_err(store_err)?;
    }
    Ok(dirty)
}
