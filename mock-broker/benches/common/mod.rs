//! What both benchmarks share: a durable engine in a temporary directory, unique ids, the
//! concurrency levels, the runtime and criterion's settings.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::Criterion;
use queen_mock_broker::clock::SystemClock;
use queen_mock_broker::engine::writer::WriterThread;
use queen_mock_broker::{Engine, store};
use tempfile::TempDir;
use tokio::runtime::Runtime;

/// The concurrency levels measured.
pub const CALLERS: [usize; 2] = [1, 64];

/// Partitions an input queue is spread over.
pub const PARTITIONS: usize = 64;

/// Messages per push command while pre-filling (one commit each, untimed).
pub const PREFILL_CHUNK: usize = 2048;

/// Source of unique ids (queue names, transaction ids) across the whole run.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// A new id, unique in this run.
pub fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

/// An engine over a fresh database file in a temporary directory.
pub struct Bed {
    pub engine: Engine,
    writer: WriterThread,
    _dir: TempDir,
}

impl Bed {
    pub fn new() -> Bed {
        let dir = tempfile::tempdir().expect("temporary directory");
        let db = store::open(Some(&dir.path().join("bench.redb"))).expect("open the database");
        let (engine, writer) = Engine::start(db, Arc::new(SystemClock));
        Bed {
            engine,
            writer,
            _dir: dir,
        }
    }

    /// Drops the engine and waits for the writer to finish its last batch.
    pub fn close(self) {
        let Bed {
            engine,
            writer,
            _dir,
        } = self;
        drop(engine);
        writer.join();
    }
}

/// A multi-thread tokio runtime.
pub fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Small samples, so a whole bench runs in a few minutes on two cores.
pub fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
}
