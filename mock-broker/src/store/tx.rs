//! The staging layer between one command and the batch's redb write transaction.
//!
//! Commands of one group commit share a redb write transaction, but each must be
//! isolated: a command that rolls back (a transaction verdict) or fails (bad input found
//! late) must leave nothing behind. A [`Tx`] stages every write of the command in an
//! ordered overlay; reads see the overlay first, then the batch's table. The writer
//! flushes the overlay into the tables when the command succeeds and drops it when it
//! does not. This is cheaper than a redb savepoint per command and needs no undo log.

use std::cell::OnceCell;
use std::collections::BTreeMap;
use std::ops::Bound;

use redb::{ReadableTable, Table, WriteTransaction};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::memory::Memory;
use super::records::{decode, encode, encode_compact};
use super::wal::{RowLog, WAL_SEQ_KEY};
use super::{LIVE_BYTES_KEY, StoreError, T, TABLE_COUNT, TABLES};
use crate::clock::Micros;

type RawTable<'t> = Table<'t, &'static [u8], &'static [u8]>;

/// When commands that add data are refused (HTTP 507), while the rest go on.
#[derive(Debug, Clone, Copy, Default)]
pub struct Room {
    /// Past this many live bytes (the configured storage cap).
    pub cap: Option<u64>,
    /// Always: the disk is full and the storage reserve is spent.
    pub disk_full: bool,
}

/// A row whose value is encoded only if it is written (see [`Tx::put_unless_logged`]).
type Unlogged = (T, Vec<u8>, Box<dyn FnOnce() -> Vec<u8>>);

/// The tables of one group commit, each opened the first time a command of the batch
/// uses it, and the storage budget they are held to.
///
/// Opening all eighteen for every batch was 3.8% of the writer thread's time under
/// ack-push (perf), for a batch that uses six to ten of them.
pub struct Tables<'t> {
    txn: &'t WriteTransaction,
    tables: [OnceCell<RawTable<'t>>; TABLE_COUNT],
    /// Bytes of keys and values stored, kept exact as rows are flushed.
    live_bytes: u64,
    /// When commands that add data are refused.
    room: Room,
    /// Every row flushed, for the write-ahead log (`None`: the batch commits to redb
    /// durably and needs no log).
    log: Option<RowLog>,
    /// Rows of the commands flushed so far that only a batch committed straight to
    /// redb writes ([`Tx::put_unless_logged`]).
    unlogged: Vec<Unlogged>,
}

impl<'t> Tables<'t> {
    /// The tables of `txn` (opened when first used); `live_bytes` is what the database
    /// held before it.
    pub fn open(
        txn: &'t WriteTransaction,
        live_bytes: u64,
        room: Room,
    ) -> Result<Self, StoreError> {
        Ok(Self {
            txn,
            tables: Default::default(),
            live_bytes,
            room,
            log: None,
            unlogged: Vec::new(),
        })
    }

    /// Records every row flushed from now on into `rows` (emptied first), for the
    /// write-ahead log.
    pub fn log_rows(mut self, mut rows: RowLog) -> Self {
        rows.clear();
        self.log = Some(rows);
        self
    }

    /// Table `t`, opened if this batch has not used it yet.
    fn table(&self, t: usize) -> Result<&RawTable<'t>, StoreError> {
        let cell = &self.tables[t];
        if let Some(table) = cell.get() {
            return Ok(table);
        }
        let table = self.txn.open_table(TABLES[t])?;
        Ok(cell.get_or_init(|| table))
    }

    /// Table `t` to write, opened if this batch has not used it yet.
    fn table_mut(&mut self, t: usize) -> Result<&mut RawTable<'t>, StoreError> {
        open_mut(self.txn, &mut self.tables[t], t)
    }

    /// The rows recorded since [`Tables::log_rows`].
    pub(crate) fn take_log(&mut self) -> Option<RowLog> {
        self.log.take()
    }

    /// Bytes of the log record this batch would append so far (`None`: no log).
    pub(crate) fn logged_len(&self) -> Option<usize> {
        self.log.as_ref().map(|l| l.as_bytes().len())
    }

    /// Writes the rows staged with [`Tx::put_unless_logged`]: the batch commits
    /// straight to redb. Counted in the live bytes like any row; not logged.
    pub(crate) fn store_unlogged(&mut self) -> Result<(), StoreError> {
        let (mut added, mut freed) = (0u64, 0u64);
        for (t, key, encode) in self.unlogged.drain(..) {
            let value = encode();
            added += (key.len() + value.len()) as u64;
            let table = open_mut(self.txn, &mut self.tables[t as usize], t as usize)?;
            if let Some(old) = table.insert(key.as_slice(), value.as_slice())? {
                freed += (key.len() + old.value().len()) as u64;
            }
        }
        self.live_bytes = (self.live_bytes + added).saturating_sub(freed);
        Ok(())
    }

    /// Records in the batch the sequence number of the log record that will carry it
    /// (see [`super::wal`]). Not itself logged: a replay writes it anew.
    pub(crate) fn store_wal_seq(&mut self, seq: u64) -> Result<(), StoreError> {
        self.table_mut(T::Meta as usize)?
            .insert(WAL_SEQ_KEY, seq.to_be_bytes().as_slice())?;
        Ok(())
    }

    /// Bytes of keys and values stored, counting every command flushed so far.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Records the live byte count in the batch itself, so it is as durable as the
    /// rows it counts and a restart need not scan the database. Not counted itself.
    pub(crate) fn store_live_bytes(&mut self) -> Result<(), StoreError> {
        let value = encode(&self.live_bytes);
        if let Some(log) = &mut self.log {
            log.put(T::Meta as usize, LIVE_BYTES_KEY, &value);
        }
        self.table_mut(T::Meta as usize)?
            .insert(LIVE_BYTES_KEY, value.as_slice())?;
        Ok(())
    }
}

/// The table `t` of `txn` held in `cell`, opened if it is not yet.
fn open_mut<'a, 't>(
    txn: &'t WriteTransaction,
    cell: &'a mut OnceCell<RawTable<'t>>,
    t: usize,
) -> Result<&'a mut RawTable<'t>, StoreError> {
    if cell.get().is_none() {
        let _ = cell.set(txn.open_table(TABLES[t])?);
    }
    Ok(cell.get_mut().expect("opened just above"))
}

/// One command's view of storage: staged writes over the batch's tables.
pub struct Tx<'a, 't> {
    tables: &'a mut Tables<'t>,
    overlay: [BTreeMap<Vec<u8>, Option<Vec<u8>>>; TABLE_COUNT],
    /// The time this command runs at, read once so every rule of one command agrees.
    pub now: Micros,
    /// Queues that received messages: long-polls to wake after the commit.
    pub(crate) woken: Vec<(String, String)>,
    flushed: bool,
    /// The command asks that every write answered so far be committed to redb at the
    /// end of its batch, for the reads that follow (see `Writer::published`).
    pub(crate) publish: bool,
    memory: &'a Memory,
    /// Rows of the tables the engine indexes in memory that [`Tx::flush`] wrote.
    changes: Vec<Change>,
    /// Staged with [`Tx::put_unless_logged`].
    unlogged: Vec<Unlogged>,
}

/// A row a command wrote, as `Tx::flush` hands it on: the writes to the tables the
/// engine keeps in-memory indexes of (which partitions a pop may claim from).
#[derive(Debug)]
pub enum Change {
    /// A message was stored at this `messages` key.
    Message {
        /// (tenant, partition id, offset)
        key: Vec<u8>,
    },
    /// A consumer group's row on a partition was written (`Some`) or removed (`None`).
    Consumer {
        /// (tenant, partition id, group)
        key: Vec<u8>,
        /// The encoded [`super::records::ConsumerRecord`].
        row: Option<Vec<u8>>,
    },
}

impl<'a, 't> Tx<'a, 't> {
    /// A fresh view at time `now`, with the writer's [`Memory`].
    pub fn new(tables: &'a mut Tables<'t>, now: Micros, memory: &'a Memory) -> Self {
        Self {
            tables,
            overlay: Default::default(),
            now,
            woken: Vec::new(),
            flushed: false,
            publish: false,
            memory,
            changes: Vec::new(),
            unlogged: Vec::new(),
        }
    }

    /// Runs `f` on the writer's state of type `S` (see [`Memory`]). What is kept there
    /// is a cache or an index, never data: a command that rolls back leaves it as it is,
    /// so what a command changes there must hold whether or not it commits (an index
    /// learns of committed writes through `Tx::take_changes` instead).
    pub fn with_memory<S: Default + 'static, R>(&self, f: impl FnOnce(&mut S) -> R) -> R {
        self.memory.with(f)
    }

    /// `f` of the bytes at `key` where they lie (this command's overlay, else redb's
    /// page), or `None` when there is no row.
    fn read<R>(
        &self,
        t: T,
        key: &[u8],
        f: impl FnOnce(&[u8]) -> R,
    ) -> Result<Option<R>, StoreError> {
        if let Some(staged) = self.overlay[t as usize].get(key) {
            return Ok(staged.as_deref().map(f));
        }
        Ok(self
            .tables
            .table(t as usize)?
            .get(key)?
            .map(|v| f(v.value())))
    }

    /// The raw bytes at `key`, seeing this command's own writes.
    pub fn get_raw(&self, t: T, key: &[u8]) -> Result<Option<Vec<u8>>, StoreError> {
        self.read(t, key, <[u8]>::to_vec)
    }

    /// The decoded record at `key`, decoded from where it lies, not from a copy: a push
    /// reads three records and a KV put one, and each copy was an allocation of the
    /// writer thread's.
    pub fn get<V: DeserializeOwned>(&self, t: T, key: &[u8]) -> Result<Option<V>, StoreError> {
        self.read(t, key, decode)?.transpose()
    }

    /// Stages a write of `value` at `key`.
    pub fn put<V: Serialize>(&mut self, t: T, key: Vec<u8>, value: &V) {
        let bytes = if t.compact() {
            encode_compact(value)
        } else {
            encode(value)
        };
        self.overlay[t as usize].insert(key, Some(bytes));
    }

    /// Stages a write of `value` at `key` that only a batch committed straight to redb
    /// keeps; a batch that goes through the write-ahead log drops it unencoded.
    ///
    /// For a row that matters only if this batch's commit can fail after it reached the
    /// disk: a record that lets a retry of the same call find its answer. Through the
    /// log, a batch whose append fails never reaches redb, so a retry finds nothing
    /// either way and the row would be written for no reader; straight to redb, a
    /// failed commit may still have landed. Such a record of every transaction was a
    /// JSON encode, a redb insert of about 400 bytes and its log bytes per call, and a
    /// delete two minutes later; on `push-kv` at 64 connections, leaving it out took a
    /// median 10% off the writer thread's CPU per call (six alternating pairs).
    ///
    /// Not visible to this command's own reads, and not seen by [`Tx::is_dirty`].
    pub fn put_unless_logged<V: Serialize + 'static>(&mut self, t: T, key: Vec<u8>, value: V) {
        if self.tables.log.is_none() {
            self.put(t, key, &value);
            return;
        }
        let compact = t.compact();
        let encode = move || {
            if compact {
                encode_compact(&value)
            } else {
                encode(&value)
            }
        };
        self.unlogged.push((t, key, Box::new(encode)));
    }

    /// Stages a delete of `key`.
    pub fn delete(&mut self, t: T, key: Vec<u8>) {
        self.overlay[t as usize].insert(key, None);
    }

    /// Visits rows whose key starts with `prefix`, from `start`, in key order, merging
    /// this command's staged writes, until `f` returns `false`.
    pub fn scan(
        &self,
        t: T,
        start: &[u8],
        prefix: &[u8],
        mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, StoreError>,
    ) -> Result<(), StoreError> {
        let overlay = &self.overlay[t as usize];
        let mut staged = overlay
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .peekable();
        let mut base = self.tables.table(t as usize)?.range::<&[u8]>(start..)?;
        let mut next_base = base.next().transpose()?;
        loop {
            let base_key = next_base.as_ref().map(|(k, _)| k.value());
            let staged_key = staged.peek().map(|(k, _)| k.as_slice());
            // Pick the smaller key; on a tie the staged write shadows the stored row.
            let take_staged = match (base_key, staged_key) {
                (None, None) => return Ok(()),
                (Some(_), None) => false,
                (None, Some(_)) => true,
                (Some(b), Some(s)) => s <= b,
            };
            if take_staged {
                let (k, v) = staged.next().expect("peeked");
                if base_key == Some(k.as_slice()) {
                    next_base = base.next().transpose()?;
                }
                if !k.starts_with(prefix) {
                    return Ok(());
                }
                if let Some(v) = v
                    && !f(k, v)?
                {
                    return Ok(());
                }
            } else {
                let (k, v) = next_base.take().expect("base key present");
                if !k.value().starts_with(prefix) {
                    return Ok(());
                }
                if !f(k.value(), v.value())? {
                    return Ok(());
                }
                next_base = base.next().transpose()?;
            }
        }
    }

    /// Stages deletes of every row whose key starts with `prefix`.
    pub fn delete_prefix(&mut self, t: T, prefix: &[u8]) -> Result<usize, StoreError> {
        let mut keys = Vec::new();
        self.scan(t, prefix, prefix, |k, _| {
            keys.push(k.to_vec());
            Ok(true)
        })?;
        let n = keys.len();
        for k in keys {
            self.delete(t, k);
        }
        Ok(n)
    }

    /// Refuses a command that would add data once the storage cap is reached, so the
    /// broker keeps serving reads, acks and deletes (which free space) instead of
    /// filling the disk. The check is made before the command writes: a batch can
    /// overshoot the cap by what its commands add, never more.
    pub fn ensure_room(&self) -> Result<(), StoreError> {
        if self.tables.room.disk_full {
            return Err(StoreError::DiskFull);
        }
        match self.tables.room.cap {
            Some(cap) if self.tables.live_bytes >= cap => Err(StoreError::Full {
                live_bytes: self.tables.live_bytes,
                cap,
            }),
            _ => Ok(()),
        }
    }

    /// Whether this command staged any write.
    pub fn is_dirty(&self) -> bool {
        self.overlay.iter().any(|m| !m.is_empty())
    }

    /// Whether [`Tx::flush`] wrote anything into the tables.
    pub(crate) fn flushed_any(&self) -> bool {
        self.flushed
    }

    /// Drops every staged write: the command leaves no trace.
    pub fn discard(&mut self) {
        for m in &mut self.overlay {
            m.clear();
        }
        self.unlogged.clear();
        self.woken.clear();
    }

    /// Takes the rows of indexed tables written by [`Tx::flush`] (see [`Change`]).
    pub(crate) fn take_changes(&mut self) -> Vec<Change> {
        std::mem::take(&mut self.changes)
    }

    /// Writes the staged rows into the batch's tables.
    ///
    /// Keeps the live byte count exact from what redb hands back: the row each insert
    /// replaced and each remove took out. The rows written to `messages` and
    /// `consumers` are kept as [`Change`]s (moved, not copied) for the engine's
    /// in-memory indexes: only what a command that succeeded wrote reaches them.
    pub(crate) fn flush(&mut self) -> Result<(), StoreError> {
        let (mut added, mut freed) = (0u64, 0u64);
        for (i, m) in self.overlay.iter_mut().enumerate() {
            if m.is_empty() {
                continue;
            }
            self.flushed = true;
            let table = open_mut(self.tables.txn, &mut self.tables.tables[i], i)?;
            let log = &mut self.tables.log;
            for (k, v) in std::mem::take(m) {
                if let Some(log) = log.as_mut() {
                    match &v {
                        Some(v) => log.put(i, &k, v),
                        None => log.delete(i, &k),
                    }
                }
                let old = match &v {
                    Some(v) => {
                        added += (k.len() + v.len()) as u64;
                        table.insert(k.as_slice(), v.as_slice())?
                    }
                    None => table.remove(k.as_slice())?,
                };
                if let Some(old) = old {
                    freed += (k.len() + old.value().len()) as u64;
                }
                if i == T::Messages as usize {
                    if v.is_some() {
                        self.changes.push(Change::Message { key: k });
                    }
                } else if i == T::Consumers as usize {
                    self.changes.push(Change::Consumer { key: k, row: v });
                }
            }
        }
        self.tables.live_bytes = (self.tables.live_bytes + added).saturating_sub(freed);
        self.tables.unlogged.append(&mut self.unlogged);
        Ok(())
    }
}
