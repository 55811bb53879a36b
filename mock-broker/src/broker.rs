//! [`MockBroker`]: the reference broker as a value a program or a test owns.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::auth::Auth;
use crate::clock::{Clock, ManualClock, SystemClock};
use crate::engine::writer::{StatsSnapshot, WriteMode, WriterThread};
use crate::engine::{Engine, Limits};
use crate::harness::{Faults, FaultyBackend, Harness, Inspector, RequestLog, StorageFaults};
use crate::http::browser::BrowserPolicy;
use crate::http::serve::ServeOptions;
use crate::store;
use crate::store::wal::{self, Wal};

/// Where the broker keeps its data; chosen with [`MockBrokerBuilder::in_memory`] and
/// [`MockBrokerBuilder::data_file`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::{MockBroker, Storage};
/// let storage = match std::env::var_os("QUEEN_DATA") {
///     Some(path) => Storage::File(path.into()),
///     None => Storage::InMemory,
/// };
/// let builder = match storage {
///     Storage::InMemory => MockBroker::builder().in_memory(),
///     Storage::File(path) => MockBroker::builder().data_file(path),
/// };
/// let broker = builder.start().await?;
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub enum Storage {
    /// A throwaway database in memory.
    InMemory,
    /// A redb file, created if missing; data survives restarts.
    File(PathBuf),
}

/// Why a broker did not start.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::{MockBroker, StartError};
/// let first = MockBroker::start_in_memory().await?;
/// // The port is taken: the second broker cannot listen there.
/// let second = MockBroker::builder().listen(first.addr()).start().await;
/// assert!(matches!(second, Err(StartError::Bind { .. })));
/// first.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The database could not be opened (locked by another broker, unreadable, ...).
    #[error("cannot open the database: {0}")]
    Storage(#[from] store::StoreError),
    /// The listen address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

/// Configures a [`MockBroker`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::MockBroker;
/// let broker = MockBroker::builder().in_memory().start().await?;
/// assert!(broker.url().starts_with("http://127.0.0.1:"));
/// broker.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MockBrokerBuilder {
    storage: Storage,
    listen: SocketAddr,
    clock: Arc<dyn Clock>,
    auth: Option<Auth>,
    storage_cap: Option<u64>,
    cache_bytes: usize,
    serve: ServeOptions,
    drain: Duration,
    harness: bool,
    storage_faults: Option<StorageFaults>,
    storage_reserve: u64,
    checkpoint_every: Duration,
    write_mode: WriteMode,
    console: bool,
    limits: Limits,
    browser: BrowserPolicy,
}

impl Default for MockBrokerBuilder {
    fn default() -> Self {
        Self {
            storage: Storage::InMemory,
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            clock: Arc::new(SystemClock),
            auth: None,
            storage_cap: None,
            cache_bytes: store::DEFAULT_CACHE_BYTES,
            serve: ServeOptions::default(),
            drain: Duration::ZERO,
            harness: true,
            storage_faults: None,
            storage_reserve: 0,
            checkpoint_every: store::wal::CHECKPOINT_EVERY,
            write_mode: WriteMode::Grouped,
            console: true,
            limits: Limits::default(),
            browser: BrowserPolicy::default(),
        }
    }
}

impl MockBrokerBuilder {
    /// Keeps data in memory (the default): it is gone when the broker stops.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().in_memory().start().await?;
    /// assert!(broker.inspect().queues()?.is_empty());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn in_memory(mut self) -> Self {
        self.storage = Storage::InMemory;
        self
    }

    /// Keeps data in a redb file at `path`, created if missing: it survives a restart.
    /// Only one broker at a time can open a file.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
    /// let dir = tempfile::tempdir()?;
    /// let path = dir.path().join("queen.redb");
    /// let broker = MockBroker::builder().data_file(&path).start().await?;
    /// reqwest::Client::new()
    ///     .post(format!("{}/api/v1/push", broker.url()))
    ///     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": 1}]}))
    ///     .send()
    ///     .await?;
    /// broker.shutdown().await;
    /// let again = MockBroker::builder().data_file(&path).start().await?;
    /// assert_eq!(again.inspect().messages("orders", DEFAULT_PARTITION)?.len(), 1);
    /// again.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn data_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.storage = Storage::File(path.into());
        self
    }

    /// Listens on `addr` (default `127.0.0.1:0`, a free port).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::net::SocketAddr;
    /// use queen_mock_broker::MockBroker;
    /// let addr: SocketAddr = "127.0.0.1:0".parse()?;
    /// let broker = MockBroker::builder().listen(addr).start().await?;
    /// assert_ne!(broker.addr().port(), 0); // the port it was given
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn listen(mut self, addr: SocketAddr) -> Self {
        self.listen = addr;
        self
    }

    /// Reads time from `clock` (default: the system clock). Keep a clone of a
    /// [`ManualClock`] to move it, or reach it with [`MockBroker::manual_clock`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{ManualClock, MockBroker};
    /// let clock = ManualClock::starting_at(1_000_000);
    /// let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    /// assert_eq!(broker.clock().now_micros(), 1_000_000);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clock(mut self, clock: impl Clock) -> Self {
        self.clock = Arc::new(clock);
        self
    }

    /// Turns authentication on: every route but `GET /health` needs a bearer token
    /// of `auth`, with the role the route needs, and acts as the token's tenant.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::auth::{Auth, Role};
    /// let auth = Auth::new().token("t0k", Role::ReadOnly, "acme", None);
    /// let broker = MockBroker::builder().auth(auth).start().await?;
    /// let http = reqwest::Client::new();
    /// let url = format!("{}/api/v1/dlq", broker.url());
    /// assert_eq!(http.get(&url).send().await?.status(), 401);
    /// assert_eq!(http.get(&url).bearer_auth("t0k").send().await?.status(), 200);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn auth(mut self, auth: Auth) -> Self {
        self.auth = Some(auth);
        self
    }

    /// Caps the data the broker keeps at `bytes` of stored keys and values (see
    /// [`StatsSnapshot::live_bytes`]; the file itself is larger by redb's page
    /// overhead). At the cap, calls that add data (pushes, transactions that push,
    /// KV writes, timers) answer 507 `storage_full`, while reads, pops, acks and
    /// deletes go on, so consumers can drain the broker back under its cap.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().storage_cap(1).start().await?;
    /// let http = reqwest::Client::new();
    /// let push = serde_json::json!({"items": [{"queue": "q", "payload": 1}]});
    /// let url = format!("{}/api/v1/push", broker.url());
    /// // The first push goes through (the cap is checked before a write) ...
    /// assert_eq!(http.post(&url).json(&push).send().await?.status(), 201);
    /// // ... and fills the broker past its cap of one byte.
    /// let full = http.post(&url).json(&push).send().await?;
    /// assert_eq!(full.status(), 507);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn storage_cap(mut self, bytes: u64) -> Self {
        self.storage_cap = Some(bytes);
        self
    }

    /// Keeps at most `bytes` of database pages in memory (default
    /// [`DEFAULT_CACHE_BYTES`](crate::store::DEFAULT_CACHE_BYTES), 64 MiB): what stored
    /// data costs in resident memory whatever the broker stores; a larger cache serves
    /// a working set that outgrows it from memory instead of the OS's page cache.
    /// Large answers and request bodies come on top, within [`Self::answer_budget`] and
    /// [`Self::body_budget`] (the crate's README says what else bounds the broker's
    /// memory).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().cache_size(16 << 20).start().await?;
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn cache_size(mut self, bytes: usize) -> Self {
        self.cache_bytes = bytes;
        self
    }

    /// Serves at most `n` connections at once (default 4,096). Past that, new
    /// connections wait in the kernel's backlog until one closes, so a flood of sockets
    /// costs the broker no more than `n` tasks and descriptors.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().max_connections(256).start().await?;
    /// # broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn max_connections(mut self, n: usize) -> Self {
        self.serve.max_connections = n;
        self
    }

    /// Closes a connection whose client takes longer than `d` to send a request's
    /// head, or to start the next request on a kept-alive connection (default 60 s),
    /// and answers 408 `request_timeout` to a request whose body takes longer than `d`.
    /// Handlers are not bounded by it: a long-poll may wait its whole timeout.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder()
    ///     .header_read_timeout(Duration::from_secs(10))
    ///     .start()
    ///     .await?;
    /// # broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn header_read_timeout(mut self, d: Duration) -> Self {
        self.serve.header_read_timeout = d;
        self
    }

    /// On shutdown, keeps the port open for `d`, answering every new request 503
    /// `retry` with `Retry-After` (and `/health` too, so a load balancer takes the
    /// broker out), before it stops accepting and drains what is in flight. Default:
    /// no wait.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().drain_period(Duration::from_millis(300)).start().await?;
    /// let health = format!("{}/health", broker.url());
    /// let stopping = tokio::spawn(broker.shutdown());
    /// tokio::time::sleep(Duration::from_millis(100)).await;
    /// assert_eq!(reqwest::get(&health).await?.status(), 503);
    /// stopping.await?;
    /// # Ok(()) }
    /// ```
    pub fn drain_period(mut self, d: Duration) -> Self {
        self.drain = d;
        self
    }

    /// Whether the test harness (injected faults and the request log, see
    /// [`crate::harness`]) sits in front of every route. On by default, since this
    /// builder is first of all the in-process test broker; the `queen-mock-broker`
    /// binary turns it off, so its requests take neither the fault table's lock nor the
    /// log's, and allocate nothing for them. Without it, [`MockBroker::faults`] and
    /// [`MockBroker::requests`] panic: there is nothing to inject into or read.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().harness(false).start().await?;
    /// assert!(broker.harness().is_none());
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert!(res.status().is_success());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn harness(mut self, on: bool) -> Self {
        self.harness = on;
        self
    }

    /// Puts the database on a storage layer whose writes fail on demand (a full disk,
    /// an I/O error): see [`StorageFaults`]. For tests; off by default, and then the
    /// database sits on redb's own file (or memory) backend.
    pub fn storage_faults(mut self, faults: StorageFaults) -> Self {
        self.storage_faults = Some(faults);
        self
    }

    /// Holds `bytes` of disk back for a full disk (default 0: none): when a commit
    /// fails for lack of space, the broker gives the reserve back and goes on serving
    /// pops, acks, lease extensions and deletes into it, refusing only what adds data
    /// (507 `storage_full`), until the reserve can be taken again (see
    /// [`store::reserve`]). With a data file the reserve is a file beside it
    /// (`<data>.reserve`); under [`Self::storage_faults`] the simulated full disk gives
    /// that much room back; an in-memory broker without faults has no disk to fill.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let dir = tempfile::tempdir()?;
    /// let broker = MockBroker::builder()
    ///     .data_file(dir.path().join("queen.redb"))
    ///     .storage_reserve(4 << 20)
    ///     .start()
    ///     .await?;
    /// assert_eq!(std::fs::metadata(dir.path().join("queen.redb.reserve"))?.len(), 4 << 20);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn storage_reserve(mut self, bytes: u64) -> Self {
        self.storage_reserve = bytes;
        self
    }

    /// The longest time between checkpoints of a database on a file (default
    /// [`store::wal::CHECKPOINT_EVERY`]): each batch is durable once its record is
    /// synced in the write-ahead log (`<data>.wal`), and a checkpoint, a durable redb
    /// commit, then makes the log's records part of the data file. Rarer checkpoints
    /// stall the writer less often but for longer, and leave more for a restart to
    /// replay; zero makes one after every batch. Ignored in memory.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::MockBroker;
    /// let dir = tempfile::tempdir()?;
    /// let broker = MockBroker::builder()
    ///     .data_file(dir.path().join("queen.redb"))
    ///     .checkpoint_every(Duration::ZERO)
    ///     .start()
    ///     .await?;
    /// let pushed = reqwest::Client::new()
    ///     .post(format!("{}/api/v1/push", broker.url()))
    ///     .json(&serde_json::json!({"items": [{"queue": "q", "payload": 1}]}))
    ///     .send()
    ///     .await?;
    /// assert_eq!(pushed.status(), 201); // on disk: synced in the log, then checkpointed
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn checkpoint_every(mut self, every: Duration) -> Self {
        self.checkpoint_every = every;
        self
    }

    /// How the writer takes commands (default [`WriteMode::Grouped`], group commit).
    /// [`WriteMode::Lockstep`] makes each write run alone while the thread that sent
    /// it waits: with every client on one current-thread runtime, on a paused tokio
    /// clock and this broker's [`ManualClock`], a run then depends
    /// on nothing but its inputs, and replays exactly (as `queen-verify` runs it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread", start_paused = true)]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{MockBroker, WriteMode};
    /// let broker = MockBroker::builder().write_mode(WriteMode::Lockstep).start().await?;
    /// let pushed = reqwest::Client::new()
    ///     .post(format!("{}/api/v1/push", broker.url()))
    ///     .json(&serde_json::json!({"items": [{"queue": "q", "payload": 1}]}))
    ///     .send()
    ///     .await?;
    /// assert_eq!(pushed.status(), 201);
    /// assert_eq!(broker.inspect().messages("q", "Default")?.len(), 1);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn write_mode(mut self, mode: WriteMode) -> Self {
        self.write_mode = mode;
        self
    }

    /// Serves the web console at `/console` (default on): a page that reads the API
    /// with the visitor's token, so it shows what that token may see (see the
    /// crate's README). `false` answers 404 there, as for any unknown route.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let on = MockBroker::builder().start().await?;
    /// assert_eq!(reqwest::get(format!("{}/console", on.url())).await?.status(), 200);
    /// let off = MockBroker::builder().console(false).start().await?;
    /// assert_eq!(reqwest::get(format!("{}/console", off.url())).await?.status(), 404);
    /// # Ok(()) }
    /// ```
    pub fn console(mut self, on: bool) -> Self {
        self.console = on;
        self
    }

    /// The longest lease a call may take (default [`Limits::MAX_LEASE`], an hour): a
    /// pop's `leaseSeconds` or its queue's `leaseTime`, a lease extension, a stream
    /// claim or an ephemeral queue's lease asking for more gets this long (the
    /// answer's `leaseExpiresAt` says so). The binary's `--max-lease`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().max_lease(Duration::from_secs(60)).start().await?;
    /// assert_eq!(broker.engine().limits().max_lease, Duration::from_secs(60));
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn max_lease(mut self, d: Duration) -> Self {
        self.limits.max_lease = d;
        self
    }

    /// The longest a long-poll waits (default [`Limits::MAX_WAIT`], a minute): a pop
    /// with `wait=true&timeout=...`, an ephemeral pop or a fetch asking for longer
    /// answers (empty) after this long. The binary's `--max-wait`.
    pub fn max_wait(mut self, d: Duration) -> Self {
        self.limits.max_wait = d;
        self
    }

    /// The most bytes that fetch answers being read, rendered and sent may hold at
    /// once, broker-wide (default
    /// [`DEFAULT_BYTES`](crate::engine::answers::DEFAULT_BYTES), 512 MiB; see
    /// [`crate::engine::answers`]). Each record of a fetch is charged while it is read
    /// ([`record_cost`](crate::engine::answers::record_cost): twice its stored size, as
    /// it exists both read and rendered) and the answer keeps its room until its body
    /// has been sent. With the budget spent, a fetch answers the records that fitted
    /// (the client reads on from the next offset); one with none waits for room up to
    /// [`AnswerBudget::WAIT`](crate::engine::answers::AnswerBudget::WAIT), then is
    /// answered 429 `overloaded` with `Retry-After`. The binary's `--answer-budget`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().answer_budget(64 << 20).start().await?;
    /// assert_eq!(broker.engine().limits().answer_budget, 64 << 20);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn answer_budget(mut self, bytes: u64) -> Self {
        self.limits.answer_budget = bytes;
        self
    }

    /// The most bytes that request bodies being read and handled may hold at once,
    /// broker-wide (default
    /// [`DEFAULT_BODY_BYTES`](crate::engine::answers::DEFAULT_BODY_BYTES), 512 MiB).
    /// Each body is charged [`body_cost`](crate::engine::answers::body_cost) (twice its
    /// length: read, then parsed) before its first byte is read (its `Content-Length`;
    /// a chunked body as its chunks arrive) until its handler is done. With the budget
    /// spent, a request waits for room up to
    /// [`AnswerBudget::WAIT`](crate::engine::answers::AnswerBudget::WAIT), then is
    /// answered 429 `overloaded` with `Retry-After`; a body larger than the whole
    /// budget is read alone. Each body keeps its own limit of 64 MiB. The binary's
    /// `--body-budget`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().body_budget(128 << 20).start().await?;
    /// assert_eq!(broker.engine().limits().body_budget, 128 << 20);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn body_budget(mut self, bytes: u64) -> Self {
        self.limits.body_budget = bytes;
        self
    }

    /// Lets pages of `origin` (`http://localhost:3000`, as a browser sends it in
    /// `Origin`; `*` for any page) call the API, with CORS answers; call it once per
    /// origin. Without it, a request from a browser page that is not the broker's own
    /// (the console) is refused, 403 `origin_not_allowed` (SECURITY.md). The binary's
    /// `--allow-origin`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().allow_origin("http://localhost:3000").start().await?;
    /// let http = reqwest::Client::new();
    /// let ask = |origin: &'static str| {
    ///     http.get(format!("{}/api/v1/resources/queues", broker.url()))
    ///         .header("origin", origin)
    ///         .send()
    /// };
    /// assert_eq!(ask("http://localhost:3000").await?.status(), 200);
    /// assert_eq!(ask("http://attacker.example").await?.status(), 403);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn allow_origin(mut self, origin: &str) -> Self {
        self.browser = self.browser.allow_origin(origin);
        self
    }

    /// Answers requests naming `host` (`queen.internal`; without a port) while the
    /// broker listens on a loopback address, where by default only loopback names
    /// (`localhost`, `127.x.y.z`, `[::1]`) are answered and any other `Host` is refused,
    /// 403 `host_not_allowed` (a name rebound to 127.0.0.1 by its owner's DNS would
    /// otherwise make their page same-origin with the broker). The binary's
    /// `--allow-host`.
    pub fn allow_host(mut self, host: &str) -> Self {
        self.browser = self.browser.allow_host(host);
        self
    }

    /// Opens storage, binds, and starts serving (the timer scheduler included).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::builder().start().await?;
    /// let health = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert!(health.status().is_success());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start(self) -> Result<MockBroker, StartError> {
        let (storage, cache, faults, reserve, every) = (
            self.storage.clone(),
            self.cache_bytes,
            self.storage_faults.clone(),
            self.storage_reserve,
            self.checkpoint_every,
        );
        let db = tokio::task::spawn_blocking(move || {
            with_reserve(
                open_handle(storage.clone(), cache, faults.clone(), every)?,
                &storage,
                faults,
                reserve,
            )
        })
        .await
        .expect("open task")?;
        let listener = TcpListener::bind(self.listen)
            .await
            .map_err(|source| StartError::Bind {
                addr: self.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| StartError::Bind {
            addr: self.listen,
            source,
        })?;
        let clock = self.clock.clone();
        let (engine, writer) =
            Engine::start_with(Arc::new(db), self.clock, self.storage_cap, self.write_mode);
        engine.set_limits(self.limits);
        engine.spawn_scheduler();
        let harness = self.harness.then(Harness::default);
        let app = crate::http::router_with(
            engine.clone(),
            self.auth.clone(),
            harness.clone(),
            self.console,
            self.browser.clone().listening_on(addr.ip()),
        )
        // A body must arrive whole within the same bound as a head: a client that
        // trickles bytes cannot hold a connection and a buffer for ever.
        .layer(tower_http::timeout::RequestBodyDeadlineLayer::new(
            self.serve.header_read_timeout,
        ));
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let closing = engine.clone();
        let (serve_opts, drain) = (self.serve, self.drain);
        let server = tokio::spawn(async move {
            let stopped = async move {
                let _ = stop_rx.await;
                // From here new requests answer 503 and waiting pops end; after the
                // drain period the listener closes.
                closing.close();
                // Not even a zero sleep without a drain period: tokio's timer rounds
                // it up to its next 1 ms tick, half of an in-memory broker's stop.
                if !drain.is_zero() {
                    tokio::time::sleep(drain).await;
                }
            };
            crate::http::serve::serve(listener, app, serve_opts, stopped).await;
        });
        tracing::info!(%addr, "queen mock broker listening");
        Ok(MockBroker {
            addr,
            clock,
            harness,
            engine: Some(engine),
            stop: Some(stop_tx),
            server: Some(server),
            writer: Some(writer),
        })
    }
}

/// Gives the opened database its storage reserve of `bytes` (none when 0).
fn with_reserve(
    db: store::DbHandle,
    storage: &Storage,
    faults: Option<StorageFaults>,
    bytes: u64,
) -> Result<store::DbHandle, store::StoreError> {
    if bytes == 0 {
        return Ok(db);
    }
    Ok(match (faults, storage) {
        (Some(faults), _) => db.with_reserve(Box::new(faults.reserve(bytes))),
        (None, Storage::File(path)) => {
            let mut file = path.clone().into_os_string();
            file.push(".reserve");
            // Starting with a smaller reserve, or none, beats not starting on a tight
            // disk; the line says which, so an operator can size the disk.
            match store::reserve::FileReserve::create_within(file.into(), bytes) {
                Ok(Some(reserve)) if reserve.bytes() == bytes => db.with_reserve(Box::new(reserve)),
                Ok(Some(reserve)) => {
                    tracing::warn!(
                        asked = bytes,
                        held = reserve.bytes(),
                        "storage reserve sized down: the asked size does not fit on the disk; holding half of the largest size that fits"
                    );
                    db.with_reserve(Box::new(reserve))
                }
                Ok(None) => {
                    tracing::warn!(
                        asked = bytes,
                        "no storage reserve: not even 1 MiB fits on the disk; a full disk will refuse every write (507) until space returns"
                    );
                    db
                }
                Err(e) => {
                    tracing::warn!(error = %e, "no storage reserve: cannot write it; a full disk will refuse every write (507) until space returns");
                    db
                }
            }
        }
        (None, Storage::InMemory) => db,
    })
}

/// Opens the database where `storage` says, with a way to open it again after an I/O
/// error (the same file, or the same in-memory backend under `faults`).
fn open_handle(
    storage: Storage,
    cache: usize,
    faults: Option<StorageFaults>,
    every: Duration,
) -> Result<store::DbHandle, store::StoreError> {
    use std::sync::Arc as A;
    match (storage, faults) {
        (Storage::InMemory, None) => Ok(store::DbHandle::new(
            store::open_with_cache(None, cache)?,
            None,
        )),
        (Storage::File(path), None) => {
            let new = !path.exists();
            let db = store::open_with_cache(Some(&path), cache)?;
            let (log, created) = store::file_backend(&wal::path_for(&path))?;
            let wal = Wal::new(log, created.then(|| folder_of(&path)))
                .for_new_database(new)
                .checkpoint_every(every);
            let opener: store::Opener = Box::new(move || store::reopen_file(&path, cache));
            store::DbHandle::with_wal(db, Some(opener), wal)
        }
        (Storage::InMemory, Some(faults)) => {
            let memory: A<dyn redb::StorageBackend> =
                A::new(redb::backends::InMemoryBackend::new());
            let backend = FaultyBackend::new(memory.clone(), faults.clone());
            let db = store::open_backend(backend, cache, true)?;
            let opener: store::Opener = Box::new(move || {
                store::open_backend(
                    FaultyBackend::new(memory.clone(), faults.clone()),
                    cache,
                    false,
                )
            });
            Ok(store::DbHandle::new(db, Some(opener)))
        }
        (Storage::File(path), Some(faults)) => {
            let file_backend = |path: &std::path::Path| store::file_backend(path).map(|(f, _)| f);
            let new = !path.exists();
            let db = store::open_backend(
                FaultyBackend::new(file_backend(&path)?, faults.clone()),
                cache,
                true,
            )?;
            let (log, created) = store::file_backend(&wal::path_for(&path))?;
            let wal = Wal::new(
                A::new(FaultyBackend::new(log, faults.clone())),
                created.then(|| folder_of(&path)),
            )
            .for_new_database(new)
            .checkpoint_every(every);
            let opener: store::Opener = Box::new(move || {
                store::open_backend(
                    FaultyBackend::new(file_backend(&path)?, faults.clone()),
                    cache,
                    false,
                )
            });
            store::DbHandle::with_wal(db, Some(opener), wal)
        }
    }
}

/// The folder holding `file` (its name is an entry there, synced like data).
fn folder_of(file: &std::path::Path) -> std::path::PathBuf {
    match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => std::path::PathBuf::from("."),
    }
}

/// A running reference broker.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::MockBroker;
/// let broker = MockBroker::start_in_memory().await?;
/// let health = reqwest::get(format!("{}/health", broker.url())).await?;
/// assert!(health.status().is_success());
/// broker.shutdown().await;
/// # Ok(()) }
/// ```
pub struct MockBroker {
    addr: SocketAddr,
    clock: Arc<dyn Clock>,
    harness: Option<Harness>,
    engine: Option<Engine>,
    stop: Option<oneshot::Sender<()>>,
    server: Option<JoinHandle<()>>,
    writer: Option<WriterThread>,
}

impl MockBroker {
    /// A builder with defaults: in memory, a free loopback port, the system clock.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{ManualClock, MockBroker};
    /// let broker = MockBroker::builder().clock(ManualClock::new()).start().await?;
    /// assert!(broker.manual_clock().is_some());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn builder() -> MockBrokerBuilder {
        MockBrokerBuilder::default()
    }

    /// Starts an in-memory broker on a free loopback port, with the system clock.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// assert!(broker.addr().ip().is_loopback());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start_in_memory() -> Result<MockBroker, StartError> {
        Self::builder().start().await
    }

    /// The base URL, such as `http://127.0.0.1:40123` (no trailing `/`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// assert_eq!(broker.url(), format!("http://{}", broker.addr()));
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert!(res.status().is_success());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The bound address.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// let addr = broker.addr();
    /// assert_eq!(addr.ip().to_string(), "127.0.0.1");
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The broker's clock.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{Clock, MockBroker, SystemClock};
    /// let broker = MockBroker::start_in_memory().await?;
    /// let skew = (broker.clock().now_micros() - SystemClock.now_micros()).abs();
    /// assert!(skew < 1_000_000); // the system clock by default
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// The broker's clock when it is a [`ManualClock`] (set with
    /// [`MockBrokerBuilder::clock`]): move it to make leases lapse and timers fire.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{Clock, ManualClock, MockBroker};
    /// let broker = MockBroker::builder().clock(ManualClock::new()).start().await?;
    /// let clock = broker.manual_clock().expect("a manual clock");
    /// let before = clock.now_micros();
    /// clock.advance(std::time::Duration::from_secs(300));
    /// assert_eq!(broker.clock().now_micros() - before, 300_000_000);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    pub fn manual_clock(&self) -> Option<&ManualClock> {
        self.clock.as_manual()
    }

    /// Fault injection: make the next calls of a route fail in chosen ways.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().on("/health"));
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert_eq!(res.status(), 503);
    /// assert_eq!(broker.faults().hits().len(), 1);
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// If the broker was built with [`MockBrokerBuilder::harness`]`(false)`.
    pub fn faults(&self) -> &Faults {
        &self.expect_harness().faults
    }

    /// The requests received so far.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// reqwest::get(format!("{}/health", broker.url())).await?;
    /// let log = broker.requests().matching("/health");
    /// assert_eq!((log[0].method.as_str(), log[0].status), ("GET", 200));
    /// broker.shutdown().await;
    /// # Ok(()) }
    /// ```
    ///
    /// # Panics
    /// If the broker was built with [`MockBrokerBuilder::harness`]`(false)`.
    pub fn requests(&self) -> &RequestLog {
        &self.expect_harness().log
    }

    /// The harness (faults and request log), when the broker was built with one.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// assert!(broker.harness().is_some(), "on by default");
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn harness(&self) -> Option<&Harness> {
        self.harness.as_ref()
    }

    fn expect_harness(&self) -> &Harness {
        self.harness
            .as_ref()
            .expect("this broker was built with .harness(false): it has no faults or request log")
    }

    /// Reads stored state directly (messages, cursors, leases, KV rows, timers); see
    /// [`Inspector`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// reqwest::Client::new()
    ///     .post(format!("{}/api/v1/push", broker.url()))
    ///     .json(&serde_json::json!({"items": [{"queue": "orders", "partition": "p1", "payload": 1}]}))
    ///     .send()
    ///     .await?;
    /// assert_eq!(broker.inspect().queues()?, ["orders"]);
    /// assert_eq!(broker.inspect().messages("orders", "p1")?.len(), 1);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn inspect(&self) -> Inspector<'_> {
        Inspector::new(self.engine())
    }

    /// Group-commit figures since start.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// reqwest::Client::new()
    ///     .post(format!("{}/api/v1/push", broker.url()))
    ///     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": 1}]}))
    ///     .send()
    ///     .await?;
    /// let stats = broker.stats();
    /// assert!(stats.commits >= 1 && stats.commands >= 1);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn stats(&self) -> StatsSnapshot {
        self.engine.as_ref().map(Engine::stats).unwrap_or_default()
    }

    /// The engine, for in-process use without HTTP (benchmarks, inspection).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// let engine = broker.engine();
    /// assert_eq!(engine.stats(), broker.stats());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("engine present until shutdown")
    }

    /// Stops taking connections, lets in-flight requests finish (waiting pops return
    /// empty), commits what the writer holds, and closes the database. Dropping the
    /// broker starts the same shutdown without waiting for it.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::MockBroker;
    /// let broker = MockBroker::start_in_memory().await?;
    /// let url = format!("{}/api/v1/pop/queue/orders?wait=true&timeout=30000", broker.url());
    /// let waiting = tokio::spawn(async move { reqwest::get(url).await });
    /// // Give the long-poll time to reach the broker (generously: CI hosts are busy).
    /// tokio::time::sleep(Duration::from_millis(500)).await;
    /// broker.shutdown().await;
    /// assert_eq!(waiting.await??.status(), 204); // the long-poll ended empty
    /// # Ok(())
    /// # }
    /// ```
    pub async fn shutdown(mut self) {
        self.stop_now().await;
    }

    async fn stop_now(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(server) = self.server.take() {
            let _ = server.await;
        }
        // The last engine handle closes the writer's queue; it then drains and exits.
        self.engine.take();
        if let Some(writer) = self.writer.take() {
            let _ = tokio::task::spawn_blocking(move || writer.join()).await;
        }
    }
}

impl Drop for MockBroker {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
