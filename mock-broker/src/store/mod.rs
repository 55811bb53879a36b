//! Storage: redb tables, their keys and values, and the per-command staging layer.
//!
//! Every table maps encoded keys ([`keys::Key`]) to encoded records ([`records`]). The
//! writer opens all tables once per group commit and hands each command a [`Tx`], which
//! stages the command's writes so that a command that fails or rolls back leaves no
//! trace in the batch it shares with others.

mod handle;
pub mod keys;
mod memory;
pub mod records;
pub mod reserve;
pub mod stream_keys;
mod tx;
pub mod wal;

use std::path::Path;

use redb::{
    Database, ReadTransaction, ReadableDatabase, ReadableTable, TableDefinition,
    backends::InMemoryBackend,
};

pub use handle::{DbHandle, Degradation, Health, Opener};
pub use memory::Memory;
pub use tx::{Change, Room, Tables, Tx};

/// A storage failure. Never the client's fault: it maps to a 5xx.
///
/// Non-exhaustive: new ways to fail (as [`StoreError::NoSpace`] was) are not breaking.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// redb failed (I/O, a full disk, a corrupt file).
    #[error("storage: {0}")]
    Redb(#[from] redb::Error),
    /// The write-ahead log could not be written or synced: the batch was not
    /// committed, and redb is as it was before it.
    #[error("write-ahead log: {0}")]
    Log(#[source] std::io::Error),
    /// A stored record could not be decoded.
    #[error("corrupt record: {0}")]
    Corrupt(String),
    /// A storage task ended without an answer (it panicked or was cancelled).
    #[error("storage task did not finish: {0}")]
    Task(String),
    /// The database is being reopened after an I/O error (HTTP 503 `retry`).
    #[error("storage unavailable: {0}")]
    Unavailable(String),
    /// The storage cap is reached: a command that adds data is refused (HTTP 507).
    #[error(
        "storage is full: {live_bytes} bytes stored, the cap is {cap}; delete or ack to free space"
    )]
    Full {
        /// Bytes of keys and values stored.
        live_bytes: u64,
        /// The configured cap.
        cap: u64,
    },
    /// The disk is full and the reserve is spent: a command that adds data is
    /// refused (HTTP 507) while those that only change or free rows go on.
    #[error(
        "the disk is full: commands that add data are refused until space returns; pops, acks and deletes go on"
    )]
    DiskFull,
    /// The disk is full and the database cannot be reopened for lack of space (there is
    /// no reserve to give back, or it is spent): every write is refused (HTTP 507) until
    /// space returns, and the next command tries again.
    #[error("the disk is full: nothing can be written until space returns ({0})")]
    NoSpace(String),
}

impl StoreError {
    /// Whether this is an I/O failure of the storage itself, and which: after one,
    /// redb refuses every call until the database is reopened.
    pub fn degradation(&self) -> Option<Degradation> {
        let e = match self {
            StoreError::Redb(e) => e,
            StoreError::Log(io) if is_no_space(io) => return Some(Degradation::StorageFull),
            StoreError::Log(_) => return Some(Degradation::IoError),
            _ => return None,
        };
        match e {
            redb::Error::Io(io) if is_no_space(io) => Some(Degradation::StorageFull),
            redb::Error::Io(_) | redb::Error::PreviousIo | redb::Error::Backend(_) => {
                Some(Degradation::IoError)
            }
            _ => None,
        }
    }
}

/// `ENOSPC` (or `EDQUOT`, a quota reached), however the platform reports it.
pub(crate) fn is_no_space(e: &std::io::Error) -> bool {
    const ENOSPC: i32 = 28;
    const EDQUOT: i32 = 122;
    e.kind() == std::io::ErrorKind::StorageFull
        || e.kind() == std::io::ErrorKind::QuotaExceeded
        || matches!(e.raw_os_error(), Some(ENOSPC | EDQUOT))
}

macro_rules! from_redb {
    ($($t:ty),*) => {$(
        impl From<$t> for StoreError {
            fn from(e: $t) -> Self { StoreError::Redb(e.into()) }
        }
    )*};
}
from_redb!(
    redb::StorageError,
    redb::TableError,
    redb::TransactionError,
    redb::CommitError,
    redb::DatabaseError
);

type Def = TableDefinition<'static, &'static [u8], &'static [u8]>;

/// The broker's tables. The discriminant indexes [`TABLES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum T {
    /// Per-tenant counters (`engine::queues::Counter`), the live byte count, the log's
    /// sequence.
    Meta = 0,
    /// (tenant, queue) -> QueueRecord
    Queues,
    /// (tenant, queue, partition) -> PartitionRecord
    Partitions,
    /// (tenant, partition id) -> PartitionRef
    PartitionIds,
    /// (tenant, partition id, offset) -> MessageRecord
    Messages,
    /// (tenant, partition id, transactionId) -> TxnRef
    TxnIndex,
    /// (tenant, partition id, group) -> ConsumerRecord
    Consumers,
    /// (tenant, queue, group) -> SubscriptionRecord
    Subscriptions,
    /// (tenant, lease id) -> LeaseRecord
    Leases,
    /// (tenant, partition id, group, offset) -> () : dead-lettered or dropped for a group
    Dead,
    /// (tenant, seq) -> DlqRecord
    Dlq,
    /// (tenant, ns, key) -> KvRow
    Kv,
    /// (tenant, queue, timerKey) -> TimerRecord
    Timers,
    /// (deliverAt as ordered u64, tenant, queue, timerKey) -> (): the firing order
    TimerDue,
    /// (request id, a UUIDv7 so keys sort by time) -> the recorded answer
    Requests,
    /// (tenant, query id or name) -> a registered stream query (`/streams/v1/queries`)
    StreamQueries,
    /// (tenant, query id, partition id, key) -> a stream's state cell
    StreamState,
    /// (tenant, trace key) -> a recorded trace event (`/api/v1/traces`)
    Traces,
}

impl T {
    /// Whether the table's records are fixed-shape and so stored compactly (see
    /// [`records::encode_compact`]); the others hold JSON values.
    pub fn compact(self) -> bool {
        !matches!(
            self,
            T::Queues
                | T::Messages
                | T::Dlq
                | T::Kv
                | T::Timers
                | T::Requests
                | T::StreamQueries
                | T::StreamState
                | T::Traces
        )
    }
}

/// Number of tables.
pub const TABLE_COUNT: usize = 18;

/// The table definitions, indexed by [`T`].
pub const TABLES: [Def; TABLE_COUNT] = [
    TableDefinition::new("meta"),
    TableDefinition::new("queues"),
    TableDefinition::new("partitions"),
    TableDefinition::new("partition_ids"),
    TableDefinition::new("messages"),
    TableDefinition::new("txn_index"),
    TableDefinition::new("consumers"),
    TableDefinition::new("subscriptions"),
    TableDefinition::new("leases"),
    TableDefinition::new("dead"),
    TableDefinition::new("dlq"),
    TableDefinition::new("kv"),
    TableDefinition::new("timers"),
    TableDefinition::new("timer_due"),
    TableDefinition::new("requests"),
    TableDefinition::new("stream_queries"),
    TableDefinition::new("stream_state"),
    TableDefinition::new("traces"),
];

/// redb's page cache when none is given: the pages a broker works on (partition
/// heads, cursors, leases, recent messages) fit many times over, while the resident
/// memory of a broker that has stored gigabytes stays bounded (redb's own default is
/// 1 GiB); pages beyond it are read back through the OS's page cache.
pub const DEFAULT_CACHE_BYTES: usize = 64 << 20;

/// Opens (creating if needed) the database file, or an in-memory one when `path` is
/// `None`, and makes sure every table exists so readers never see a missing table.
pub fn open(path: Option<&Path>) -> Result<Database, StoreError> {
    open_with_cache(path, DEFAULT_CACHE_BYTES)
}

/// Opens (creating it, and its folder, if missing) the file at `path` as a redb
/// backend, for a backend wrapped around the file (the harness's faults) and for the
/// write-ahead log. Answers whether the file was created. It takes no lock: redb
/// locks the database file when it opens it, which keeps a second broker away from
/// the log as well.
pub fn file_backend(
    path: &Path,
) -> Result<(std::sync::Arc<dyn redb::StorageBackend>, bool), StoreError> {
    let io = |e: std::io::Error| StoreError::Redb(e.into());
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(io)?;
    }
    let created = !path.exists();
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(io)?;
    Ok((
        std::sync::Arc::new(redb::backends::FileBackend::new(file)?),
        created,
    ))
}

/// [`open`] with a page cache of at most `cache_bytes`.
pub fn open_with_cache(path: Option<&Path>, cache_bytes: usize) -> Result<Database, StoreError> {
    let db = match path {
        Some(p) => {
            if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir).map_err(|e| StoreError::Redb(e.into()))?;
            }
            let mut builder = Database::builder();
            builder.set_cache_size(cache_bytes);
            builder.create(p)?
        }
        None => return open_backend(InMemoryBackend::new(), cache_bytes, true),
    };
    ensure_tables(&db)?;
    Ok(db)
}

/// Opens an existing database file again after an I/O error: no write is needed, so it
/// succeeds on a full disk and reads can go on.
pub fn reopen_file(path: &Path, cache_bytes: usize) -> Result<Database, StoreError> {
    let mut builder = Database::builder();
    builder.set_cache_size(cache_bytes);
    Ok(builder.create(path)?)
}

/// Opens a database on any redb backend (the harness's fault-injecting one, say).
/// `ensure_tables`: create any missing table in a first write transaction; a reopen
/// after an I/O error skips it, so that it needs no write to succeed.
pub fn open_backend(
    backend: impl redb::StorageBackend,
    cache_bytes: usize,
    ensure: bool,
) -> Result<Database, StoreError> {
    let mut builder = Database::builder();
    builder.set_cache_size(cache_bytes);
    let db = builder.create_with_backend(backend)?;
    if ensure {
        ensure_tables(&db)?;
    }
    Ok(db)
}

fn ensure_tables(db: &Database) -> Result<(), StoreError> {
    // A file opened again has them all: a read says so without a commit, whose fsync
    // was most of a test broker's start on a file.
    {
        let read = db.begin_read()?;
        if TABLES.iter().all(|def| read.open_table(*def).is_ok()) {
            return Ok(());
        }
    }
    let mut txn = db.begin_write()?;
    // Empty tables need no fsync of their own: the first durable commit carries them,
    // and a crash before it leaves a file the next open completes the same way.
    txn.set_durability(redb::Durability::None)
        .map_err(|e| StoreError::Redb(e.into()))?;
    for def in TABLES {
        txn.open_table(def)?;
    }
    txn.commit()?;
    Ok(())
}

/// The `meta` row holding the live byte count (see [`Tables::live_bytes`]).
pub(crate) const LIVE_BYTES_KEY: &[u8] = b"live_bytes";

/// Bytes of keys and values stored: the recorded count, or, for a database written
/// before counts were kept, the sum over every table (once; the next commit records it).
pub fn live_bytes(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read()?;
    let meta = txn.open_table(TABLES[T::Meta as usize])?;
    if let Some(v) = meta.get(LIVE_BYTES_KEY)? {
        return records::decode(v.value());
    }
    let mut total = 0u64;
    for def in TABLES {
        let table = txn.open_table(def)?;
        for row in table.iter()? {
            let (k, v) = row?;
            if k.value() != LIVE_BYTES_KEY && k.value() != wal::WAL_SEQ_KEY {
                total += (k.value().len() + v.value().len()) as u64;
            }
        }
    }
    Ok(total)
}

/// Visits the rows of `table` whose key starts with `prefix`, from `start` (which must
/// itself start with `prefix`), in key order, until `f` returns `false`.
pub fn scan<R: ReadableTable<&'static [u8], &'static [u8]>>(
    table: &R,
    start: &[u8],
    prefix: &[u8],
    mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
) -> Result<(), StoreError> {
    for row in table.range::<&[u8]>(start..)? {
        let (k, v) = row?;
        if !k.value().starts_with(prefix) || !f(k.value(), v.value())? {
            break;
        }
    }
    Ok(())
}

/// A scan's callback: gets each row's key and value, answers whether to go on.
pub type RowVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<bool, StoreError> + 'a;

/// What reads need of storage, whichever the source: a command's staged view ([`Tx`],
/// in the writer) or a snapshot of the last commit ([`Reader`], for reads that do not
/// wait on the writer). Read rules written once over `View` serve both.
pub trait View {
    /// The raw bytes at `key`.
    fn get_raw(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError>;

    /// Visits rows whose key starts with `prefix`, from `start`, in key order, until `f`
    /// returns `false`.
    fn scan_rows(
        &self,
        t: T,
        start: &[u8],
        prefix: &[u8],
        f: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError>;

    /// The decoded record at `key`.
    fn get_record<V: serde::de::DeserializeOwned>(
        &self,
        t: T,
        key: &[u8],
    ) -> Result<Option<V>, StoreError>
    where
        Self: Sized,
    {
        self.get_raw(t, key)?
            .map(|b| records::decode(&b))
            .transpose()
    }
}

impl View for Tx<'_, '_> {
    fn get_raw(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        Tx::get_raw(self, t, key)
    }

    fn scan_rows(
        &self,
        t: T,
        start: &[u8],
        prefix: &[u8],
        f: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.scan(t, start, prefix, f)
    }
}

impl View for Reader {
    fn get_raw(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.get(t, key)
    }

    fn scan_rows(
        &self,
        t: T,
        start: &[u8],
        prefix: &[u8],
        f: &mut RowVisitor<'_>,
    ) -> Result<(), StoreError> {
        self.scan(t, start, prefix, f)
    }
}

/// A read-only view for the paths that do not need the writer (listings).
pub struct Reader {
    txn: ReadTransaction,
}

impl Reader {
    /// Begins a read transaction: a consistent snapshot of the last commit.
    pub fn begin(db: &Database) -> Result<Self, StoreError> {
        Ok(Self {
            txn: db.begin_read()?,
        })
    }

    /// Point lookup.
    pub fn get(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        let table = self.txn.open_table(TABLES[t as usize])?;
        Ok(table.get(key)?.map(|v| v.value().to_vec()))
    }

    /// Prefix scan, see [`scan`].
    pub fn scan(
        &self,
        t: T,
        start: &[u8],
        prefix: &[u8],
        f: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let table = self.txn.open_table(TABLES[t as usize])?;
        scan(&table, start, prefix, f)
    }
}
