//! Storage faults: a redb backend that fails writes on demand, so a test can fill the
//! disk or break an fsync under a running broker without root, a small filesystem or
//! luck ([`StorageFaults`], given to [`crate::MockBrokerBuilder::storage_faults`]).
//!
//! A full disk is modelled as what it is to a database file: the file cannot grow.
//! Writes inside its current length still land (redb reuses freed pages, and a real
//! full disk keeps the blocks a file already has), so small commits that need no new
//! page may still succeed, as they would on a real full disk. An I/O error fails every
//! write and every fsync.

use std::fmt;
use std::ops::Bound;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

use redb::{BackendError, StorageBackend};

use crate::store::reserve::Reserve;

/// Which fault the storage shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StorageFault {
    /// `ENOSPC`: the file cannot grow.
    NoSpace,
    /// `EIO`: every write and every fsync fails.
    Io,
}

/// A switch for the faults of a broker's storage. Clones share it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::MockBroker;
/// use queen_mock_broker::harness::{StorageFault, StorageFaults};
/// let faults = StorageFaults::default();
/// let dir = tempfile::tempdir()?;
/// let broker = MockBroker::builder()
///     .data_file(dir.path().join("queen.redb"))
///     .storage_faults(faults.clone())
///     .start()
///     .await?;
/// let push = || {
///     reqwest::Client::new()
///         .post(format!("{}/api/v1/push", broker.url()))
///         .json(&serde_json::json!({"items": [{"queue": "q", "payload": "x".repeat(65536)}]}))
///         .send()
/// };
/// faults.inject(StorageFault::NoSpace);
/// assert_eq!(push().await?.status(), 507); // storage_full, nothing applied
/// faults.heal();
/// assert_eq!(push().await?.status(), 201); // no restart needed
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub struct StorageFaults {
    state: Arc<State>,
}

#[derive(Default)]
struct State {
    /// 0: none; 1: no space; 2: I/O error.
    mode: AtomicU8,
    /// Writes and syncs refused so far.
    hits: AtomicU64,
    /// Bytes the file may still grow by on a full disk: the storage reserve's space,
    /// once the broker gives it back (see [`Reserve`]).
    allowance: AtomicU64,
}

impl fmt::Debug for StorageFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageFaults")
            .field("fault", &self.fault())
            .field("hits", &self.hits())
            .finish()
    }
}

impl StorageFaults {
    /// Makes the storage fail from now on, until [`StorageFaults::heal`].
    pub fn inject(&self, fault: StorageFault) {
        let mode = match fault {
            StorageFault::NoSpace => 1,
            StorageFault::Io => 2,
        };
        self.state.mode.store(mode, Ordering::SeqCst);
    }

    /// Lifts the fault: space is back, the disk works.
    pub fn heal(&self) {
        self.state.mode.store(0, Ordering::SeqCst);
    }

    /// The fault in force, if any.
    pub fn fault(&self) -> Option<StorageFault> {
        match self.state.mode.load(Ordering::SeqCst) {
            1 => Some(StorageFault::NoSpace),
            2 => Some(StorageFault::Io),
            _ => None,
        }
    }

    /// How many writes and syncs the fault refused.
    pub fn hits(&self) -> u64 {
        self.state.hits.load(Ordering::SeqCst)
    }

    /// The storage reserve of a broker on this storage, `bytes` large: on a full disk,
    /// giving it back lets the file grow by that much; taking it again succeeds once
    /// the fault is healed.
    pub(crate) fn reserve(&self, bytes: u64) -> HarnessReserve {
        HarnessReserve {
            faults: self.clone(),
            bytes,
            released: AtomicBool::new(false),
        }
    }

    /// Whether the file may grow by `by` bytes on a full disk (taking it from the
    /// allowance if so).
    fn take_allowance(&self, by: u64) -> bool {
        self.state
            .allowance
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |a| a.checked_sub(by))
            .is_ok()
    }

    fn refuse(&self, fault: StorageFault) -> std::io::Error {
        self.state.hits.fetch_add(1, Ordering::SeqCst);
        match fault {
            StorageFault::NoSpace => std::io::Error::from_raw_os_error(28),
            StorageFault::Io => std::io::Error::from_raw_os_error(5),
        }
    }
}

/// The storage reserve as the harness models it: space the full disk gives back.
pub(crate) struct HarnessReserve {
    faults: StorageFaults,
    bytes: u64,
    released: AtomicBool,
}

impl Reserve for HarnessReserve {
    fn release(&self) -> std::io::Result<bool> {
        if self.released.swap(true, Ordering::SeqCst) {
            return Ok(false);
        }
        self.faults
            .state
            .allowance
            .fetch_add(self.bytes, Ordering::SeqCst);
        Ok(true)
    }

    fn restore(&self) -> std::io::Result<()> {
        if self.faults.fault() == Some(StorageFault::NoSpace) {
            return Err(std::io::Error::from_raw_os_error(28));
        }
        self.faults.state.allowance.store(0, Ordering::SeqCst);
        self.released.store(false, Ordering::SeqCst);
        Ok(())
    }
}

/// A backend that passes everything to `inner` unless a fault is injected.
#[derive(Debug)]
pub(crate) struct FaultyBackend {
    inner: Arc<dyn StorageBackend>,
    faults: StorageFaults,
}

impl FaultyBackend {
    /// Wraps `inner` (shared, so an in-memory backend survives a reopen).
    pub(crate) fn new(inner: Arc<dyn StorageBackend>, faults: StorageFaults) -> Self {
        Self { inner, faults }
    }

    /// Whether writing up to `end` needs space the full disk does not have.
    fn grows(&self, end: u64) -> Result<bool, std::io::Error> {
        let len = self.inner.len()?;
        Ok(end > len && !self.faults.take_allowance(end - len))
    }
}

impl StorageBackend for FaultyBackend {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        match self.faults.fault() {
            Some(f @ StorageFault::NoSpace) if self.grows(len)? => Err(self.faults.refuse(f)),
            Some(f @ StorageFault::Io) => Err(self.faults.refuse(f)),
            _ => self.inner.set_len(len),
        }
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        match self.faults.fault() {
            Some(f @ StorageFault::Io) => Err(self.faults.refuse(f)),
            _ => self.inner.sync_data(),
        }
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        let end = offset.saturating_add(data.len() as u64);
        match self.faults.fault() {
            Some(f @ StorageFault::NoSpace) if self.grows(end)? => Err(self.faults.refuse(f)),
            Some(f @ StorageFault::Io) => Err(self.faults.refuse(f)),
            _ => self.inner.write(offset, data),
        }
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }

    fn try_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.try_lock_range(start, end)
    }

    fn try_lock_shared_range(
        &self,
        start: Bound<u64>,
        end: Bound<u64>,
    ) -> Result<bool, BackendError> {
        self.inner.try_lock_shared_range(start, end)
    }

    fn lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_range(start, end)
    }

    fn lock_shared_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.lock_shared_range(start, end)
    }

    fn unlock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<(), BackendError> {
        self.inner.unlock_range(start, end)
    }

    fn query_lock_range(&self, start: Bound<u64>, end: Bound<u64>) -> Result<bool, BackendError> {
        self.inner.query_lock_range(start, end)
    }
}
