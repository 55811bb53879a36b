//! The write-ahead log: how a batch is made durable with one sequential append.
//!
//! A durable redb commit writes every page the batch touched, copied on write, and the
//! branches above them. A group of 31 transactions of one push and one KV put lands on
//! leaves of its own in `messages`, `txn_index` and `kv`: about 150 pages of 4 KiB in
//! scattered places, measured at 5 to 13 ms per commit on this project's 2-core host
//! (2026-12-02), where an `fdatasync` after appending 20 KiB to a file takes 0.6 ms.
//! So on a file the writer appends each batch's rows here as one record, syncs it, and
//! only then commits the batch to redb with `Durability::None`: visible to every later
//! read, on disk at the next checkpoint. No caller hears success before its record is
//! synced. A checkpoint is a durable redb commit, made every [`CHECKPOINT_EVERY`] or
//! once the log holds [`CHECKPOINT_BYTES`] (see [`Wal::checkpoint_due`]); after it the log starts
//! again from its first byte, so the file stops growing at its largest generation and
//! later appends need no new blocks (a full disk still takes records that fit).
//!
//! Recovery ([`Wal::recover`]): redb's file holds the last durable commit, which
//! records the sequence number of the last record it contains (`meta`/`wal_seq`). The
//! records that follow it are applied again, row by row, in one non-durable commit.
//! The log ends at the first record that is torn (its checksum fails), stale (its
//! sequence number is not the next one: a record of an earlier generation beyond the
//! current one's end) or absent.
//!
//! A record: `magic u32 | salt u64 | seq u64 | len u32 | crc32 u32 | payload[len]`,
//! integers big-endian, the checksum over `salt`, `seq`, `len` and the payload. The
//! salt is drawn at random for each generation of the log: a record must carry the
//! salt of the log's first record, so that neither a record of an earlier generation
//! nor bytes inside a record's payload (which clients choose) can pass for the next
//! record. The payload is the
//! batch's rows: `table u8 | op u8 (0 delete, 1 put) | key len u32 | key`, and for a
//! put `value len u32 | value`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{Database, Durability, ReadableDatabase, StorageBackend};

use super::{StoreError, T, TABLE_COUNT, TABLES};

/// The `meta` row holding the sequence number of the last log record the database
/// contains. Stored as 8 big-endian bytes; not counted in the live bytes.
pub(crate) const WAL_SEQ_KEY: &[u8] = b"wal_seq";

/// A checkpoint once the log holds this much, whatever the time: bounds the log's
/// file and what a restart replays.
pub const CHECKPOINT_BYTES: u64 = 32 << 20;

/// A checkpoint at most this long after the last one, by default, while writes go on
/// (see [`Wal::checkpoint_every`]). Each costs a durable redb commit of every page
/// changed since the last, and its fsync holds the writer: every caller waiting then
/// waits for it. Measured (examples/load/benchmarks-history.md, fourth round: push-kv at
/// 64 workers): once a second, the transaction call's p99 was 84 ms, as about 1% of
/// calls met a stall; every 10 s it was 17 ms, each stall longer (p999 220 ms) but met
/// by few calls.
pub const CHECKPOINT_EVERY: Duration = Duration::from_secs(10);

/// A batch whose record would be larger than this commits straight to redb durably:
/// its pages are many and mostly new, so the log would only write them twice.
pub const MAX_RECORD: usize = 8 << 20;

/// The largest row buffer kept from one batch for the next (see [`Wal::recycle`]).
const KEEP_ROWS: usize = 1 << 20;

/// The log's file grows ahead of its appends by at least this much (see [`Wal::grow`]).
const GROW_MIN: u64 = 64 << 10;
/// ... and at most this much at a time: each step's zeros are flushed by the next
/// record's sync, a stall for the batch behind it. Measured (ack-push, 64 workers,
/// three alternating runs): write-call p99 17 to 18 ms with 4 MiB steps, 14 to 17 ms
/// with 1 MiB, 14 to 17 ms before the log grew ahead at all.
const GROW_MAX: u64 = 1 << 20;

const MAGIC: u32 = 0x5157_414c; // "QWAL"
const HEADER: usize = 4 + 8 + 8 + 4 + 4;
const OP_DELETE: u8 = 0;
const OP_PUT: u8 = 1;

/// The rows one batch wrote, encoded as a record's payload.
#[derive(Debug, Default)]
pub struct RowLog {
    bytes: Vec<u8>,
}

impl RowLog {
    /// Records a put of `value` at `key` in `table`.
    pub fn put(&mut self, table: usize, key: &[u8], value: &[u8]) {
        self.head(table, OP_PUT, key);
        self.bytes
            .extend_from_slice(&(value.len() as u32).to_be_bytes());
        self.bytes.extend_from_slice(value);
    }

    /// Records a delete of `key` in `table`.
    pub fn delete(&mut self, table: usize, key: &[u8]) {
        self.head(table, OP_DELETE, key);
    }

    fn head(&mut self, table: usize, op: u8, key: &[u8]) {
        self.bytes.push(table as u8);
        self.bytes.push(op);
        self.bytes
            .extend_from_slice(&(key.len() as u32).to_be_bytes());
        self.bytes.extend_from_slice(key);
    }

    /// The encoded rows.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Whether no row was recorded.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// Forgets every row, keeping the allocation.
    pub fn clear(&mut self) {
        self.bytes.clear();
    }
}

/// One decoded row of a payload: `(table, key, value)`, `None` for a delete.
type Row<'a> = (usize, &'a [u8], Option<&'a [u8]>);

/// Decodes a payload's rows; `None` when it is malformed.
fn rows(mut payload: &[u8]) -> Option<Vec<Row<'_>>> {
    fn take<'a>(b: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
        let (head, rest) = b.split_at_checked(n)?;
        *b = rest;
        Some(head)
    }
    fn len(b: &mut &[u8]) -> Option<usize> {
        Some(u32::from_be_bytes(take(b, 4)?.try_into().ok()?) as usize)
    }
    let mut out = Vec::new();
    while !payload.is_empty() {
        let head = take(&mut payload, 2)?;
        let (table, op) = (head[0] as usize, head[1]);
        if table >= TABLE_COUNT {
            return None;
        }
        let n = len(&mut payload)?;
        let key = take(&mut payload, n)?;
        let value = match op {
            OP_PUT => {
                let n = len(&mut payload)?;
                Some(take(&mut payload, n)?)
            }
            OP_DELETE => None,
            _ => return None,
        };
        out.push((table, key, value));
    }
    Some(out)
}

/// The log of one database file, owned by the writer.
pub struct Wal {
    file: Arc<dyn StorageBackend>,
    /// Where the next record goes: the current generation's records fill `0..pos`.
    pos: u64,
    /// The next record's sequence number.
    next_seq: u64,
    /// This generation's salt.
    salt: u64,
    /// The file's length: it only grows, to fit the largest generation.
    len: u64,
    /// When the last checkpoint was made (or the log opened).
    checkpointed_at: Instant,
    /// The longest time between checkpoints while the log holds records.
    every: Duration,
    /// The folder to sync once before the first record is relied on, when the log's
    /// file was created by this open (its name must survive a crash too).
    unsynced_dir: Option<PathBuf>,
    /// The record being written, kept to reuse its allocation.
    buf: Vec<u8>,
    /// The last batch's rows, kept to reuse their allocation (see [`Wal::recycle`]):
    /// a fresh buffer grew by doubling in every batch, and its reallocations and page
    /// faults were 4% of the writer thread's time in a push-kv profile.
    spare: RowLog,
    /// The database file was created by this open: a log with records belongs to
    /// another database (see [`Wal::for_new_database`]).
    new_database: bool,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("pos", &self.pos)
            .field("next_seq", &self.next_seq)
            .finish()
    }
}

/// The log's file beside a database file: `<data>.wal`.
pub fn path_for(data: &std::path::Path) -> PathBuf {
    let mut p = data.as_os_str().to_owned();
    p.push(".wal");
    PathBuf::from(p)
}

impl Wal {
    /// The log in `file`; [`Wal::recover`] must run before the first append. When the
    /// file was just created, `dir` is synced before the first record counts.
    pub fn new(file: Arc<dyn StorageBackend>, dir: Option<PathBuf>) -> Self {
        Self {
            file,
            pos: 0,
            next_seq: 1,
            salt: fresh_salt(),
            len: 0,
            checkpointed_at: Instant::now(),
            every: CHECKPOINT_EVERY,
            unsynced_dir: dir,
            buf: Vec::new(),
            spare: RowLog::default(),
            new_database: false,
        }
    }

    /// A checkpoint at most `every` after the last one ([`CHECKPOINT_EVERY`] by
    /// default); zero makes one after every batch, so the data file alone is always
    /// whole (at the cost of a durable redb commit per batch).
    pub fn checkpoint_every(mut self, every: Duration) -> Self {
        self.every = every;
        self
    }

    /// Marks the database as created by this open. Records in the log then belong to a
    /// database whose file is gone (deleted to start afresh, say): replaying them
    /// would rebuild a fragment of it, so [`Wal::recover`] refuses instead.
    pub fn for_new_database(mut self, new: bool) -> Self {
        self.new_database = new;
        self
    }

    /// Applies to `db` the records it lacks, in one non-durable commit, and places the
    /// next append after them. Answers how many records were applied.
    pub fn recover(&mut self, db: &Database) -> Result<u64, StoreError> {
        self.replay(db, last_seq(db)?, u64::MAX)
    }

    /// After a failed append, while the database is open: applies to `db` the records
    /// it lost with the writer's held transaction (see `engine::writer`), the last
    /// synced one included, and places the next append after them, over the failed
    /// record. Answers how many records were applied.
    pub fn restore(&mut self, db: &Database) -> Result<u64, StoreError> {
        let last_synced = self.next_seq - 1;
        let durable = last_seq(db)?;
        if durable >= last_synced {
            return Ok(0);
        }
        self.replay(db, durable, last_synced)
    }

    /// Applies the records after `durable` (the last one `db` contains), up to `until`.
    fn replay(&mut self, db: &Database, durable: u64, until: u64) -> Result<u64, StoreError> {
        let len = self.file.len().map_err(StoreError::Log)?;
        self.len = len;
        let mut off = 0u64;
        let mut expect: Option<(u64, u64)> = None;
        let mut pending: Vec<(u64, Vec<u8>)> = Vec::new();
        while let Some((salt, seq, payload)) = self.read_record(off, len)? {
            if expect.is_some_and(|e| e != (salt, seq)) || seq > until {
                break;
            }
            if self.new_database {
                return Err(StoreError::Corrupt(
                    "its write-ahead log (the `.wal` file beside it) holds records, but the \
                     database file is new: the log belongs to a database that is gone"
                        .into(),
                ));
            }
            expect = Some((salt, seq + 1));
            off += (HEADER + payload.len()) as u64;
            if seq > durable {
                if pending.is_empty() && seq != durable + 1 {
                    return Err(StoreError::Corrupt(format!(
                        "its write-ahead log (the `.wal` file beside it) goes on from record \
                         {seq}, but the database ends at record {durable}: the log belongs to \
                         another copy of the database, or records are missing"
                    )));
                }
                pending.push((seq, payload));
            }
        }
        let applied = pending.len() as u64;
        let last = pending.last().map_or(durable, |(s, _)| *s);
        if let Some((salt, _)) = expect.filter(|_| !pending.is_empty()) {
            // Appends go on in this generation, after its last record.
            self.salt = salt;
            let mut txn = db.begin_write()?;
            txn.set_durability(Durability::None)
                .map_err(|e| StoreError::Redb(e.into()))?;
            {
                let mut tables = Vec::with_capacity(TABLE_COUNT);
                for def in TABLES {
                    tables.push(txn.open_table(def)?);
                }
                for (seq, payload) in &pending {
                    let rows = rows(payload).ok_or_else(|| {
                        StoreError::Corrupt(format!("write-ahead log record {seq} is malformed"))
                    })?;
                    for (t, k, v) in rows {
                        match v {
                            Some(v) => tables[t].insert(k, v)?,
                            None => tables[t].remove(k)?,
                        };
                    }
                }
                tables[T::Meta as usize].insert(WAL_SEQ_KEY, last.to_be_bytes().as_slice())?;
            }
            txn.commit()?;
            // Those records are the only durable copy until the next checkpoint.
            self.pos = off;
        } else {
            self.pos = 0;
            self.salt = fresh_salt();
        }
        self.next_seq = last + 1;
        self.checkpointed_at = Instant::now();
        // From here the log's records are this database's own.
        self.new_database = false;
        Ok(applied)
    }

    /// The record at `off`, if a whole and valid one is there.
    fn read_record(&self, off: u64, len: u64) -> Result<Option<(u64, u64, Vec<u8>)>, StoreError> {
        if off + HEADER as u64 > len {
            return Ok(None);
        }
        let mut head = [0u8; HEADER];
        self.file
            .read(off, &mut head)
            .map_err(|e| StoreError::Redb(e.into()))?;
        let magic = u32::from_be_bytes(head[0..4].try_into().expect("4 bytes"));
        let salt = u64::from_be_bytes(head[4..12].try_into().expect("8 bytes"));
        let seq = u64::from_be_bytes(head[12..20].try_into().expect("8 bytes"));
        let n = u32::from_be_bytes(head[20..24].try_into().expect("4 bytes")) as u64;
        let crc = u32::from_be_bytes(head[24..28].try_into().expect("4 bytes"));
        if magic != MAGIC || off + HEADER as u64 + n > len {
            return Ok(None);
        }
        let mut payload = vec![0u8; n as usize];
        self.file
            .read(off + HEADER as u64, &mut payload)
            .map_err(|e| StoreError::Redb(e.into()))?;
        if checksum(&head[4..24], &payload) != crc {
            return Ok(None);
        }
        Ok(Some((salt, seq, payload)))
    }

    /// An empty row buffer for the next batch, with the capacity of the last one given
    /// back by [`Wal::recycle`].
    pub fn spare_rows(&mut self) -> RowLog {
        std::mem::take(&mut self.spare)
    }

    /// Keeps `rows`' allocation for the next batch, unless it grew past `KEEP_ROWS`
    /// (a rare large batch should not hold its memory for good).
    pub fn recycle(&mut self, rows: RowLog) {
        if rows.bytes.capacity() <= KEEP_ROWS {
            self.spare = rows;
        }
    }

    /// The sequence number the next record will carry; the batch writes it to
    /// `meta`/`wal_seq` so the database knows which records it contains.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Appends the batch's rows as the next record and syncs it. On an error nothing
    /// counts as written: the next record goes to the same place.
    pub fn append(&mut self, rows: &RowLog) -> Result<(), StoreError> {
        let payload = rows.as_bytes();
        let seq = self.next_seq;
        self.buf.clear();
        self.buf.extend_from_slice(&MAGIC.to_be_bytes());
        self.buf.extend_from_slice(&self.salt.to_be_bytes());
        self.buf.extend_from_slice(&seq.to_be_bytes());
        self.buf
            .extend_from_slice(&(payload.len() as u32).to_be_bytes());
        let crc = checksum(&self.buf[4..24], payload);
        self.buf.extend_from_slice(&crc.to_be_bytes());
        self.buf.extend_from_slice(payload);
        let io = StoreError::Log;
        let end = self.pos + self.buf.len() as u64;
        if end > self.len {
            self.grow(end).map_err(io)?;
        }
        self.file.write(self.pos, &self.buf).map_err(io)?;
        self.file.sync_data().map_err(io)?;
        if let Some(dir) = self.unsynced_dir.take()
            && let Err(e) = std::fs::File::open(&dir).and_then(|d| d.sync_all())
        {
            self.unsynced_dir = Some(dir);
            return Err(io(e));
        }
        self.pos += self.buf.len() as u64;
        self.next_seq += 1;
        Ok(())
    }

    /// Makes the file at least `end` long, ahead by a zero-filled step when the disk
    /// allows. Why zeros rather than `set_len`: an append into blocks the file already
    /// has is a pure data write, so its `fdatasync` has no size or extent to record.
    /// Measured on this project's 2-core host (2026-12-02, 20 KiB appends): 250 µs and
    /// 65 µs of CPU per append and sync into written blocks, against 450 to 660 µs and
    /// 120 to 200 µs of CPU into a file grown by `set_len`. Zeros also read as the end
    /// of the log. The step doubles with the file, from [`GROW_MIN`] to [`GROW_MAX`],
    /// so a small log (a test's broker) writes little ahead.
    fn grow(&mut self, end: u64) -> std::io::Result<()> {
        let step = self.len.clamp(GROW_MIN, GROW_MAX);
        let target = end.max(self.len + step).next_multiple_of(GROW_MIN);
        // A backend need not grow on a write past its end (redb's contract): set the
        // length first, then write the zeros that give the new range its blocks.
        match self
            .file
            .set_len(target)
            .and_then(|()| self.fill_zeros(self.len, target))
        {
            Ok(()) => self.len = target,
            Err(e) => {
                // A full disk may still take the record itself: grow by what it needs.
                tracing::debug!(error = %e, "cannot write the log ahead; growing it to fit");
                self.file.set_len(end)?;
                self.len = end;
            }
        }
        Ok(())
    }

    fn fill_zeros(&self, from: u64, to: u64) -> std::io::Result<()> {
        let zeros = vec![0u8; (to - from).min(GROW_MIN) as usize];
        let mut off = from;
        while off < to {
            let n = (to - off).min(zeros.len() as u64) as usize;
            self.file.write(off, &zeros[..n])?;
            off += n as u64;
        }
        Ok(())
    }

    /// Whether a checkpoint is due: the log holds [`CHECKPOINT_BYTES`], or it holds
    /// anything and the interval has passed since the last one.
    pub fn checkpoint_due(&self) -> bool {
        self.pos >= CHECKPOINT_BYTES
            || (self.pos > 0 && self.checkpointed_at.elapsed() >= self.every)
    }

    /// Whether the log holds records the database's file does not.
    pub fn holds_records(&self) -> bool {
        self.pos > 0
    }

    /// A durable commit has made every record so far part of the database file: the
    /// next record starts the log again from its first byte. (A batch committed
    /// durably itself takes a sequence number too, so that the database records it.)
    pub fn checkpointed(&mut self, took_seq: bool) {
        if took_seq {
            self.next_seq += 1;
        }
        self.pos = 0;
        self.salt = fresh_salt();
        self.checkpointed_at = Instant::now();
    }

    /// At a clean shutdown, after the last checkpoint: empties the file, so the next
    /// start reads nothing.
    pub fn close(&mut self) {
        if self.pos > 0 {
            return;
        }
        match self.file.set_len(0) {
            Ok(()) => self.len = 0,
            Err(e) => tracing::warn!(error = %e, "cannot empty the write-ahead log at shutdown"),
        }
    }
}

/// A salt no earlier generation is likely to share, and no client can know.
fn fresh_salt() -> u64 {
    u64::from_be_bytes(
        uuid::Uuid::new_v4().as_bytes()[..8]
            .try_into()
            .expect("8 bytes"),
    )
}

fn checksum(head: &[u8], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(head);
    h.update(payload);
    h.finalize()
}

/// The sequence number of the last log record `db` contains (0: none).
pub(crate) fn last_seq(db: &Database) -> Result<u64, StoreError> {
    let txn = db.begin_read()?;
    let meta = match txn.open_table(TABLES[T::Meta as usize]) {
        Ok(t) => t,
        Err(redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(e.into()),
    };
    Ok(match meta.get(WAL_SEQ_KEY)? {
        Some(v) => u64::from_be_bytes(
            v.value()
                .try_into()
                .map_err(|_| StoreError::Corrupt("meta/wal_seq is not 8 bytes".into()))?,
        ),
        None => 0,
    })
}

#[cfg(test)]
mod tests {
    use redb::backends::InMemoryBackend;

    use super::*;

    fn db() -> Database {
        super::super::open(None).unwrap()
    }

    fn log() -> Arc<dyn StorageBackend> {
        Arc::new(InMemoryBackend::new())
    }

    fn rows(key: &str, value: &str) -> RowLog {
        let mut r = RowLog::default();
        r.put(T::Kv as usize, key.as_bytes(), value.as_bytes());
        r
    }

    fn get(db: &Database, key: &str) -> Option<String> {
        let txn = db.begin_read().unwrap();
        let t = txn.open_table(TABLES[T::Kv as usize]).unwrap();
        t.get(key.as_bytes())
            .unwrap()
            .map(|v| String::from_utf8(v.value().to_vec()).unwrap())
    }

    /// A log whose records were appended and never checkpointed.
    fn written(file: &Arc<dyn StorageBackend>, n: usize) -> Wal {
        let mut wal = Wal::new(file.clone(), None);
        wal.recover(&db()).unwrap();
        for i in 0..n {
            wal.append(&rows(&format!("k{i}"), &format!("v{i}")))
                .unwrap();
        }
        wal
    }

    #[test]
    fn records_not_in_the_database_are_replayed_in_order_once() {
        let file = log();
        let mut first = written(&file, 3);
        let mut del = RowLog::default();
        del.delete(T::Kv as usize, b"k1");
        first.append(&del).unwrap();

        let db = db();
        let mut wal = Wal::new(file.clone(), None);
        assert_eq!(wal.recover(&db).unwrap(), 4);
        assert_eq!(get(&db, "k0").as_deref(), Some("v0"));
        assert_eq!(get(&db, "k1"), None, "the delete came after the put");
        assert_eq!(get(&db, "k2").as_deref(), Some("v2"));
        assert_eq!(last_seq(&db).unwrap(), 4);
        // Appends go on after them, and a second recovery applies only what is new.
        wal.append(&rows("k9", "v9")).unwrap();
        let mut again = Wal::new(file, None);
        assert_eq!(again.recover(&db).unwrap(), 1);
        assert_eq!(get(&db, "k9").as_deref(), Some("v9"));
    }

    #[test]
    fn a_torn_last_record_ends_the_log() {
        let file = log();
        let wal = written(&file, 3);
        // The file runs on in zeros past the last record (see `Wal::grow`).
        assert!(file.len().unwrap() > wal.pos);
        file.set_len(wal.pos - 3).unwrap();
        let db = db();
        assert_eq!(Wal::new(file, None).recover(&db).unwrap(), 2);
        assert_eq!(get(&db, "k2"), None);
        assert_eq!(get(&db, "k1").as_deref(), Some("v1"));
    }

    #[test]
    fn the_file_grows_ahead_in_zeros_which_end_the_log() {
        let file = log();
        let mut wal = written(&file, 2);
        assert_eq!(file.len().unwrap(), GROW_MIN, "a first step of GROW_MIN");
        let mut tail = vec![1u8; (GROW_MIN - wal.pos) as usize];
        file.read(wal.pos, &mut tail).unwrap();
        assert!(tail.iter().all(|b| *b == 0), "zeros past the last record");
        // The next step is as large as the file (doubling it), and always fits the
        // record that needs it.
        let mut big = RowLog::default();
        big.put(T::Kv as usize, b"big", &vec![7u8; GROW_MIN as usize]);
        wal.append(&big).unwrap();
        assert_eq!(file.len().unwrap(), 2 * GROW_MIN);
        let mut bigger = RowLog::default();
        bigger.put(T::Kv as usize, b"bigger", &vec![7u8; 3 * GROW_MIN as usize]);
        wal.append(&bigger).unwrap();
        let grown = file.len().unwrap();
        assert!(
            grown >= wal.pos && grown.is_multiple_of(GROW_MIN),
            "{grown}"
        );
        let db = db();
        assert_eq!(Wal::new(file, None).recover(&db).unwrap(), 4);
        assert_eq!(get(&db, "k1").as_deref(), Some("v1"));
        assert_eq!(
            get(&db, "bigger").map(|v| v.len()),
            Some(3 * GROW_MIN as usize)
        );
    }

    /// A file on a disk that holds `cap` bytes.
    #[derive(Debug)]
    struct SmallDisk {
        inner: InMemoryBackend,
        cap: u64,
    }

    impl StorageBackend for SmallDisk {
        fn len(&self) -> std::io::Result<u64> {
            self.inner.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            self.inner.read(offset, out)
        }
        fn set_len(&self, len: u64) -> std::io::Result<()> {
            if len > self.cap {
                return Err(std::io::Error::from(std::io::ErrorKind::StorageFull));
            }
            self.inner.set_len(len)
        }
        fn sync_data(&self) -> std::io::Result<()> {
            self.inner.sync_data()
        }
        fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
            self.inner.write(offset, data)
        }
    }

    #[test]
    fn a_disk_too_full_for_a_step_still_takes_a_record_that_fits() {
        let record = (HEADER + rows("k0", "v0").as_bytes().len()) as u64;
        let file: Arc<dyn StorageBackend> = Arc::new(SmallDisk {
            inner: InMemoryBackend::new(),
            cap: 2 * record,
        });
        let wal = written(&file, 2);
        assert_eq!(
            file.len().unwrap(),
            2 * record,
            "grown by what each record needs"
        );
        drop(wal);
        let mut wal = Wal::new(file.clone(), None);
        wal.recover(&db()).unwrap();
        assert!(matches!(
            wal.append(&rows("k2", "v2")),
            Err(StoreError::Log(e)) if e.kind() == std::io::ErrorKind::StorageFull
        ));
        let db = db();
        assert_eq!(Wal::new(file, None).recover(&db).unwrap(), 2);
    }

    #[test]
    fn a_flipped_byte_ends_the_log_at_its_record() {
        let file = log();
        written(&file, 3);
        // The second record's payload starts after the first record.
        let first = (HEADER + rows("k0", "v0").as_bytes().len()) as u64;
        let mut b = [0u8; 1];
        file.read(first + HEADER as u64 + 3, &mut b).unwrap();
        file.write(first + HEADER as u64 + 3, &[b[0] ^ 0x40])
            .unwrap();
        let db = db();
        assert_eq!(Wal::new(file, None).recover(&db).unwrap(), 1);
    }

    #[test]
    fn after_a_checkpoint_older_records_are_not_replayed() {
        let file = log();
        let db = db();
        let mut wal = Wal::new(file.clone(), None);
        wal.recover(&db).unwrap();
        for i in 0..3 {
            // As the writer does: the batch records its sequence number, then appends.
            let seq = wal.next_seq();
            put_seq(&db, seq);
            wal.append(&rows(&format!("old{i}"), "x")).unwrap();
        }
        wal.checkpointed(false);
        // One short record of the new generation, over the first of the old.
        let seq = wal.next_seq();
        put_seq(&db, seq - 1);
        wal.append(&rows("n", "y")).unwrap();

        let fresh = super::super::open(None).unwrap();
        put_seq(&fresh, 3);
        assert_eq!(Wal::new(file, None).recover(&fresh).unwrap(), 1);
        assert_eq!(get(&fresh, "n").as_deref(), Some("y"));
        assert_eq!(
            get(&fresh, "old1"),
            None,
            "a stale record is not the next one"
        );
    }

    #[test]
    fn a_record_forged_inside_a_payload_is_not_replayed() {
        // A client chooses payload bytes. An append that failed to sync leaves its
        // bytes behind, and the retry in its place may be shorter: the log's end then
        // falls inside the old payload, where a forged record waits. Without the
        // generation's salt it does not pass for the next record.
        let file = log();
        let retry = rows("a", "");
        let mut forged = RowLog::default();
        forged.put(T::Kv as usize, b"evil", b"1");
        let mut record = Vec::new();
        record.extend_from_slice(&MAGIC.to_be_bytes());
        record.extend_from_slice(&0u64.to_be_bytes()); // a salt the client guessed
        record.extend_from_slice(&2u64.to_be_bytes());
        record.extend_from_slice(&(forged.as_bytes().len() as u32).to_be_bytes());
        let crc = checksum(&record[4..24], forged.as_bytes());
        record.extend_from_slice(&crc.to_be_bytes());
        record.extend_from_slice(forged.as_bytes());
        // The value of a put of key "a" starts exactly where the retry's record ends.
        let mut failed = RowLog::default();
        failed.put(T::Kv as usize, b"a", &record);
        assert_eq!(
            HEADER + failed.as_bytes().len() - record.len(),
            HEADER + retry.as_bytes().len()
        );

        let mut wal = Wal::new(file.clone(), None);
        wal.recover(&db()).unwrap();
        let salt = wal.salt;
        wal.append(&failed).unwrap();
        // As after the failed sync: the same place, the same sequence number.
        let mut wal = Wal::new(file.clone(), None);
        (wal.salt, wal.len) = (salt, file.len().unwrap());
        wal.append(&retry).unwrap();

        let db = db();
        assert_eq!(Wal::new(file, None).recover(&db).unwrap(), 1);
        assert_eq!(get(&db, "evil"), None);
        assert_eq!(get(&db, "a").as_deref(), Some(""));
    }

    #[test]
    fn a_log_that_starts_past_the_database_is_refused() {
        let file = log();
        written(&file, 2);
        // Records 1 and 2 are there; a database at 5 has them (a checkpoint came
        // after): nothing to replay, and not an error.
        let db = db();
        put_seq(&db, 5);
        assert_eq!(Wal::new(file.clone(), None).recover(&db).unwrap(), 0);
        // A database that is behind the log's first record misses records.
        let other = log();
        let mut wal = Wal::new(other.clone(), None);
        wal.next_seq = 7;
        wal.append(&rows("k", "v")).unwrap();
        let behind = super::super::open(None).unwrap();
        put_seq(&behind, 3);
        assert!(matches!(
            Wal::new(other, None).recover(&behind),
            Err(StoreError::Corrupt(_))
        ));
    }

    #[test]
    fn a_checkpoint_is_due_by_size_or_by_time_only_while_records_wait() {
        let file = log();
        let mut wal = Wal::new(file.clone(), None).checkpoint_every(Duration::ZERO);
        wal.recover(&db()).unwrap();
        assert!(!wal.checkpoint_due(), "an empty log needs none");
        wal.append(&rows("k", "v")).unwrap();
        assert!(wal.checkpoint_due(), "interval zero: after every batch");
        wal.checkpointed(false);
        assert!(!wal.checkpoint_due() && !wal.holds_records());

        let mut wal = Wal::new(file, None);
        wal.recover(&db()).unwrap();
        wal.append(&rows("k", "v")).unwrap();
        assert!(!wal.checkpoint_due(), "the default interval has not passed");
        let mut big = RowLog::default();
        big.put(
            T::Kv as usize,
            b"big",
            &vec![7u8; CHECKPOINT_BYTES as usize],
        );
        wal.append(&big).unwrap();
        assert!(wal.checkpoint_due(), "the log holds CHECKPOINT_BYTES");
    }

    fn put_seq(db: &Database, seq: u64) {
        let txn = db.begin_write().unwrap();
        txn.open_table(TABLES[T::Meta as usize])
            .unwrap()
            .insert(WAL_SEQ_KEY, seq.to_be_bytes().as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
}
