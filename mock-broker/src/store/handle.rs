//! The database as the engine holds it: reopenable after an I/O error, with a health.
//!
//! After a failed write, redb refuses every later call, reads included ("Previous I/O
//! error occurred. Please close and re-open the database"), until the [`Database`] is
//! dropped and opened again. So nothing keeps a `Database` for long: the writer and the
//! readers take the current one from a [`DbHandle`] per batch or per read, and the
//! writer, after a failed commit, drops it and opens the file again. What is on disk is
//! the last durable commit and the write-ahead log after it ([`Wal`], replayed by
//! every open), so a reopened database holds every acknowledged write and nothing of
//! the failed batch.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use redb::Database;

use super::StoreError;
use super::reserve::Reserve;
use super::wal::Wal;

/// Opens the database again (the same file, or the same backend).
pub type Opener = Box<dyn Fn() -> Result<Database, StoreError> + Send + Sync>;

/// Why writes are failing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Degradation {
    /// The disk is full: writes answer 507 `storage_full` until space returns.
    StorageFull,
    /// Another I/O error (a failed fsync, a failing disk): writes answer 503 `retry`.
    IoError,
}

impl Degradation {
    /// The wire name (`/health`'s `reason`).
    pub fn as_str(self) -> &'static str {
        match self {
            Degradation::StorageFull => "storage_full",
            Degradation::IoError => "io_error",
        }
    }
}

/// Whether the last commit went through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Writes are committing.
    Healthy,
    /// The last commit failed; healthy again after the next one that succeeds.
    Degraded(Degradation),
}

/// The current database, reopenable. Cheap to share behind an `Arc`.
pub struct DbHandle {
    current: RwLock<Option<Arc<Database>>>,
    opener: Option<Opener>,
    health: Mutex<Health>,
    reserve: Option<Box<dyn Reserve>>,
    /// The write-ahead log of a database on a file; only the writer appends to it.
    wal: Option<Mutex<Wal>>,
    /// Reopens that failed since the last one that worked.
    reopen_failures: AtomicU64,
    /// When the last reopen failed, and why: the next is tried only [`REOPEN_RETRY`]
    /// later.
    reopen_failed: Mutex<Option<(Instant, String)>>,
}

/// How long after a reopen failed on a full disk the next is tried (after other I/O
/// errors every command tries). A reopen on a full disk opens the file and replays the
/// log, which fails only after seconds of work on a large file: tried for every
/// command, it made each 507 wait that long (one answer every 2.3 s, measured on a
/// 24 MiB tmpfs).
pub const REOPEN_RETRY: Duration = Duration::from_secs(1);

/// How long a reopen waits for reads still holding the old database.
const READERS_GRACE: Duration = Duration::from_secs(2);

impl DbHandle {
    /// Holds `db`; `opener` opens it again after an I/O error (`None`: an in-memory
    /// database, which has no file to go back to).
    pub fn new(db: Database, opener: Option<Opener>) -> Self {
        Self {
            current: RwLock::new(Some(Arc::new(db))),
            opener,
            health: Mutex::new(Health::Healthy),
            reserve: None,
            wal: None,
            reopen_failures: AtomicU64::new(0),
            reopen_failed: Mutex::new(None),
        }
    }

    /// Holds `db` with its write-ahead log: replays into `db` the records its file
    /// lacks (see [`Wal::recover`]), and does so again at every reopen.
    pub fn with_wal(
        db: Database,
        opener: Option<Opener>,
        mut wal: Wal,
    ) -> Result<Self, StoreError> {
        let replayed = wal.recover(&db)?;
        if replayed > 0 {
            tracing::info!(records = replayed, "write-ahead log replayed");
        }
        let mut handle = Self::new(db, opener);
        handle.wal = Some(Mutex::new(wal));
        Ok(handle)
    }

    /// The write-ahead log, if the database has one (a file does; memory does not).
    pub(crate) fn wal(&self) -> Option<std::sync::MutexGuard<'_, Wal>> {
        self.wal
            .as_ref()
            .map(|w| w.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Holds `reserve` back for a full disk (see [`super::reserve`]).
    pub fn with_reserve(mut self, reserve: Box<dyn Reserve>) -> Self {
        self.reserve = Some(reserve);
        self
    }

    /// Gives the reserve's space back; answers whether there was one to give.
    pub(crate) fn release_reserve(&self) -> bool {
        let Some(r) = &self.reserve else { return false };
        r.release().unwrap_or_else(|e| {
            tracing::error!(error = %e, "cannot release the storage reserve");
            false
        })
    }

    /// Takes the reserve's space again: `Ok` once space has returned.
    pub(crate) fn restore_reserve(&self) -> std::io::Result<()> {
        match &self.reserve {
            Some(r) => r.restore(),
            None => Ok(()),
        }
    }

    /// The current database; [`StoreError::Unavailable`] while it is being reopened.
    pub fn get(&self) -> Result<Arc<Database>, StoreError> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
            .ok_or_else(|| StoreError::Unavailable("the database is being reopened".into()))
    }

    /// Whether writes are going through.
    pub fn health(&self) -> Health {
        *self.health.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records the outcome of a commit.
    pub(crate) fn set_health(&self, h: Health) {
        *self.health.lock().unwrap_or_else(|e| e.into_inner()) = h;
    }

    /// Counts a failed reopen; answers the count when it is worth a line in the log (the
    /// 1st, 10th, 100th, ...): on a full disk every command tries again, and a line for
    /// each would bury the cause.
    pub(crate) fn note_reopen_failure(&self, why: &StoreError) -> Option<u64> {
        *self.reopen_failed.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), why.to_string()));
        let n = self.reopen_failures.fetch_add(1, Ordering::Relaxed) + 1;
        let mut p = 1;
        while p < n {
            p = p.saturating_mul(10);
        }
        (p == n).then_some(n)
    }

    /// Why the last reopen failed, while the next is not yet due ([`REOPEN_RETRY`]).
    pub(crate) fn reopen_not_due(&self) -> Option<String> {
        let failed = self.reopen_failed.lock().unwrap_or_else(|e| e.into_inner());
        let (at, why) = failed.as_ref()?;
        (at.elapsed() < REOPEN_RETRY).then(|| why.clone())
    }

    /// Drops the current database and opens it again. Reads that still hold the old
    /// one get [`READERS_GRACE`] to finish (a file can be open once at a time); if
    /// they do not, or the open fails, the handle is left without a database (reads
    /// answer unavailable) and the next call tries again.
    pub(crate) fn reopen(&self) -> Result<Arc<Database>, StoreError> {
        let Some(opener) = &self.opener else {
            return Err(StoreError::Unavailable(
                "an in-memory database cannot be reopened".into(),
            ));
        };
        let old = self
            .current
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(old) = old {
            let until = Instant::now() + READERS_GRACE;
            while Arc::strong_count(&old) > 1 && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(5));
            }
            if Arc::strong_count(&old) > 1 {
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(old);
                return Err(StoreError::Unavailable(
                    "reads still hold the database; reopening later".into(),
                ));
            }
            drop(old);
        }
        let db = opener()?;
        // The writer calls this holding no guard of the log.
        if let Some(mut wal) = self.wal() {
            let replayed = wal.recover(&db)?;
            tracing::info!(records = replayed, "write-ahead log replayed at reopen");
        }
        let db = Arc::new(db);
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(db.clone());
        self.reopen_failures.store(0, Ordering::Relaxed);
        *self.reopen_failed.lock().unwrap_or_else(|e| e.into_inner()) = None;
        Ok(db)
    }
}
