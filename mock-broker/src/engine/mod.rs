//! The semantics: pure functions over a storage view and the time, plus [`Engine`],
//! which runs them through the group-commit writer.
//!
//! Each submodule holds one concern: `queues` (options, creation, deletion), `push`
//! (appending with dedup), `pop` (claiming under leases), `ack` (fencing, statuses, dead
//! letters), `lease` (extension), `groups` (seek, forgetting a group), `dlq` (listing).
//! No HTTP types appear here.

pub mod ack;
pub mod consumers;
pub mod dlq;
pub mod groups;
pub(crate) mod ids;
pub mod lease;
pub(crate) mod notify;
pub mod pop;
pub mod push;
pub mod queues;

use std::sync::Arc;
use std::time::Duration;

use redb::Database;

use crate::clock::Clock;
use crate::error::EngineError;
use crate::store::records::QueueRecord;
use crate::writer::{StatsSnapshot, Writer, WriterThread};
use notify::Wakers;

/// The competing-consumers group: one shared cursor per partition.
pub const QUEUE_MODE: &str = "__QUEUE_MODE__";

/// The tenant every call acts as until authentication names another.
pub const DEFAULT_TENANT: &str = "default";

/// How often a waiting pop looks again for work that time alone makes available
/// (a lapsed lease, a delayed message coming due).
const REPOLL: Duration = Duration::from_millis(250);

/// The broker's semantics over one database. Cheap to clone.
#[derive(Clone)]
pub struct Engine {
    db: Arc<Database>,
    writer: Writer,
    clock: Arc<dyn Clock>,
    wakers: Arc<Wakers>,
    closing: Arc<Closing>,
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
        let db = Arc::new(db);
        let wakers = Arc::new(Wakers::default());
        let (writer, thread) = Writer::start(db.clone(), clock.clone(), wakers.clone());
        (
            Engine {
                db,
                writer,
                clock,
                wakers,
                closing: Arc::default(),
            },
            thread,
        )
    }

    /// Ends every waiting pop (they answer empty) and makes new ones not wait.
    pub fn close(&self) {
        use std::sync::atomic::Ordering;
        self.closing.closed.store(true, Ordering::SeqCst);
        self.closing.notify.notify_waiters();
    }

    fn is_closing(&self) -> bool {
        self.closing
            .closed
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The clock the engine reads.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    /// Group-commit figures.
    pub fn stats(&self) -> StatsSnapshot {
        self.writer.stats()
    }

    /// Creates or updates a queue.
    pub async fn configure(
        &self,
        tenant: &str,
        req: queues::Configure,
    ) -> Result<QueueRecord, EngineError> {
        let tenant = tenant.to_string();
        self.writer
            .submit(move |tx| queues::configure(tx, &tenant, req))
            .await
    }

    /// Deletes a queue and everything in it.
    pub async fn delete_queue(&self, tenant: &str, queue: &str) -> Result<bool, EngineError> {
        let (tenant, queue) = (tenant.to_string(), queue.to_string());
        self.writer
            .submit(move |tx| Ok(queues::delete_queue(tx, &tenant, &queue)?))
            .await
    }

    /// Appends messages.
    pub async fn push(
        &self,
        tenant: &str,
        items: Vec<push::NewMessage>,
    ) -> Result<Vec<(String, push::Appended)>, EngineError> {
        let tenant = tenant.to_string();
        self.writer
            .submit(move |tx| push::push(tx, &tenant, items))
            .await
    }

    /// Claims messages; with `wait`, long-polls until some arrive or it passes.
    pub async fn pop(
        &self,
        tenant: &str,
        req: pop::PopRequest,
        wait: Option<Duration>,
    ) -> Result<pop::PopOutcome, EngineError> {
        let deadline = wait.map(|w| tokio::time::Instant::now() + w);
        let waker = match &req.target {
            pop::Target::Queue(q) | pop::Target::Partition(q, _) => self.wakers.queue(tenant, q),
            pop::Target::Discovery { .. } => self.wakers.tenant(tenant),
        };
        loop {
            // Register before looking, so a push committed in between still wakes us.
            let pushed = waker.notified();
            tokio::pin!(pushed);
            pushed.as_mut().enable();
            let closed = self.closing.notify.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            let (t, r) = (tenant.to_string(), req.clone());
            let out = self.writer.submit(move |tx| pop::pop(tx, &t, &r)).await?;
            let Some(deadline) = deadline else {
                return Ok(out);
            };
            if !out.messages.is_empty()
                || self.is_closing()
                || tokio::time::Instant::now() >= deadline
            {
                return Ok(out);
            }
            let recheck = (tokio::time::Instant::now() + REPOLL).min(deadline);
            let jumped = async {
                match self.clock.jumped() {
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

    /// Applies acks one by one; each has its own verdict.
    pub async fn ack(
        &self,
        tenant: &str,
        acks: Vec<ack::Ack>,
    ) -> Result<Vec<ack::AckOutcome>, EngineError> {
        let tenant = tenant.to_string();
        self.writer
            .submit(move |tx| {
                let mut out = Vec::with_capacity(acks.len());
                for a in &acks {
                    out.push(ack::ack(tx, &tenant, a)?);
                }
                Ok(out)
            })
            .await
    }

    /// Extends a lease.
    pub async fn extend_lease(
        &self,
        tenant: &str,
        lease_id: &str,
        seconds: i64,
    ) -> Result<lease::Extended, EngineError> {
        let (tenant, lease_id) = (tenant.to_string(), lease_id.to_string());
        self.writer
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
        self.writer
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
        self.writer
            .submit(move |tx| Ok(groups::delete_group(tx, &tenant, &group, metadata)?))
            .await
    }

    /// Lists dead letters from the last commit, without waiting on the writer.
    pub async fn dlq(&self, tenant: &str, q: dlq::DlqQuery) -> Result<dlq::DlqPage, EngineError> {
        let db = self.db.clone();
        let tenant = tenant.to_string();
        tokio::task::spawn_blocking(move || dlq::list(&db, &tenant, &q))
            .await
            .map_err(|e| EngineError::Storage(e.to_string()))?
            .map_err(EngineError::from)
    }
}
