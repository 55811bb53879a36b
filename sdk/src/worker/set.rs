//! Several workers under one shutdown signal: each runs until the shared
//! [`CancellationToken`] is cancelled, and the first to stop with an error cancels it
//! for the others.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;

use serde::de::DeserializeOwned;
use tokio::task::{Id, JoinSet};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::consume::Delivery;
use crate::txn::TransactionBuilder;

use super::Worker;
use super::error::WorkerError;
use super::summary::Summary;

/// Workers that run together and stop together: one per queue (or per group), all
/// stopped by one [`CancellationToken`], and all stopped when one of them stops with an
/// error (the broker refused it for good, its settings cannot work). [`WorkerSet::join`]
/// answers every worker's [`Summary`] by name, or a [`WorkerSetError`] that names the
/// worker that failed and keeps what every worker did.
///
/// Each worker runs on a task of its own, as [`Worker::run`] with the token's
/// `cancelled_owned()` as its shutdown signal, so each drains as a lone worker does.
/// The set cancels the token it was given when a worker fails: give it a
/// [`child_token`](CancellationToken::child_token) to keep a failure from stopping
/// the rest of the program along with the workers.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{CancellationToken, PushItem, StartAt, WorkerSet};
/// client.push(vec![PushItem::new("orders", &"o-7"), PushItem::new("payments", &12.5)]).await?;
///
/// let shutdown = CancellationToken::new();
/// let mut workers = WorkerSet::new(shutdown.clone());
/// workers
///     .spawn(
///         "orders",
///         client.worker::<String>("orders").group("saga", StartAt::Beginning),
///         |order, step| async move { Ok::<_, String>(step.push("saga-log", |p| p.payload(&order.data))) },
///     )
///     .spawn(
///         "payments",
///         client.worker::<f64>("payments").group("saga", StartAt::Beginning),
///         |paid, step| async move { Ok::<_, String>(step.push("saga-log", |p| p.payload(&paid.data))) },
///     );
/// # broker.wait_for("both handled", std::time::Duration::from_secs(10), |i| {
/// #     Ok(i.messages("saga-log", queen_sdk::DEFAULT_PARTITION)?.len() == 2)
/// # }).await?;
/// // In a service: `tokio::signal::ctrl_c().await.ok();`
/// shutdown.cancel();
/// let summaries = workers.join().await?; // an Err names the worker that failed
/// let committed: Vec<(&str, u64)> = summaries.iter().map(|(name, s)| (name.as_str(), s.committed)).collect();
/// assert_eq!(committed, [("orders", 1), ("payments", 1)]);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[must_use = "workers in a set run until it is joined"]
pub struct WorkerSet {
    token: CancellationToken,
    names: Vec<String>,
    tasks: JoinSet<(usize, Result<Summary, WorkerError>)>,
    /// Which worker each task runs: a task that panicked answers only its id.
    ids: HashMap<Id, usize>,
}

impl fmt::Debug for WorkerSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerSet")
            .field("workers", &self.names)
            .field("cancelled", &self.token.is_cancelled())
            .finish_non_exhaustive()
    }
}

impl WorkerSet {
    /// An empty set whose workers stop when `token` is cancelled; the set cancels it
    /// when one of them stops with an error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_sdk::{CancellationToken, WorkerSet};
    /// let app = CancellationToken::new();
    /// // A worker's failure stops the workers, not the rest of the program.
    /// let workers = WorkerSet::new(app.child_token());
    /// assert!(workers.join().await.unwrap().is_empty());
    /// assert!(!app.is_cancelled());
    /// # }
    /// ```
    pub fn new(token: CancellationToken) -> WorkerSet {
        WorkerSet {
            token,
            names: Vec::new(),
            tasks: JoinSet::new(),
            ids: HashMap::new(),
        }
    }

    /// The token that stops the set (a clone: cancelling it stops every worker).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() {
    /// use queen_sdk::{CancellationToken, WorkerSet};
    /// let workers = WorkerSet::new(CancellationToken::new());
    /// let stop = workers.token();
    /// stop.cancel();
    /// assert!(workers.token().is_cancelled());
    /// # }
    /// ```
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Starts `worker` with `handler` (as [`Worker::run`] does) on a task of its own,
    /// under `name` (how [`WorkerSet::join`] and [`WorkerSetError`] name it). Must be
    /// called within a tokio runtime. A worker added after the token was cancelled stops
    /// at once, having popped nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{CancellationToken, WorkerSet};
    /// let stop = CancellationToken::new();
    /// let mut workers = WorkerSet::new(stop.clone());
    /// workers.spawn("jobs", client.worker::<u32>("jobs"), |_job, step| async move { Ok::<_, String>(step) });
    /// stop.cancel();
    /// let summaries = workers.join().await?;
    /// assert_eq!(summaries[0].0, "jobs");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn spawn<T, H, Fut, E>(
        &mut self,
        name: impl Into<String>,
        worker: Worker<T>,
        handler: H,
    ) -> &mut Self
    where
        T: DeserializeOwned + Send + 'static,
        H: Fn(Delivery<T>, TransactionBuilder) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<TransactionBuilder, E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let index = self.names.len();
        self.names.push(name.into());
        let stop = self.token.clone().cancelled_owned();
        let task = self
            .tasks
            .spawn(async move { (index, worker.run(handler, stop).await) }.in_current_span());
        self.ids.insert(task.id(), index);
        self
    }

    /// Waits for every worker to stop. `Ok` with each worker's name and [`Summary`], in
    /// the order they were added, when all stopped because the token was cancelled.
    /// When one stops with an error, the set cancels the token, waits for the others to
    /// drain, and answers a [`WorkerSetError`] naming the first to fail.
    ///
    /// A worker's task that panicked (a bug: a handler's panic is caught and its
    /// message acked `failed`) cancels the token too; once the others have drained, the
    /// panic is resumed here.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{CancellationToken, WorkerErrorKind, WorkerSet};
    /// let mut workers = WorkerSet::new(CancellationToken::new());
    /// workers
    ///     .spawn("jobs", client.worker::<u32>("jobs"), |_job, step| async move { Ok::<_, String>(step) })
    ///     // Settings that cannot work: this worker fails at once, and the set stops "jobs".
    ///     .spawn("broken", client.worker::<u32>("other").batch(0), |_job, step| async move { Ok::<_, String>(step) });
    /// let failed = workers.join().await.unwrap_err();
    /// assert_eq!(failed.failed(), "broken");
    /// assert_eq!(failed.error().kind(), WorkerErrorKind::Invalid);
    /// assert!(failed.results()[0].1.is_ok()); // "jobs" stopped as asked
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn join(mut self) -> Result<Vec<(String, Summary)>, WorkerSetError> {
        let mut results: Vec<Option<Result<Summary, WorkerError>>> =
            self.names.iter().map(|_| None).collect();
        let mut failed = None;
        let mut panicked = None;
        while let Some(joined) = self.tasks.join_next_with_id().await {
            match joined {
                Ok((_, (index, result))) => {
                    if let Err(e) = &result
                        && failed.is_none()
                    {
                        tracing::error!(worker = %self.names[index], error = %e, "a worker of the set failed: stopping the others");
                        failed = Some(index);
                        self.token.cancel();
                    }
                    results[index] = Some(result);
                }
                Err(e) => {
                    let name = self.ids.get(&e.id()).map(|&i| self.names[i].as_str());
                    tracing::error!(worker = ?name, error = %e, "a worker's task of the set ended without an answer: stopping the others");
                    self.token.cancel();
                    if e.is_panic() && panicked.is_none() {
                        panicked = Some(e.into_panic());
                    }
                }
            }
        }
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
        // Every task answered: a task that did not panicked, which resumed above.
        let named = self.names.into_iter().zip(results);
        let Some(failed) = failed else {
            return Ok(named
                .filter_map(|(name, r)| Some((name, r?.ok()?)))
                .collect());
        };
        Err(WorkerSetError {
            failed,
            results: named.filter_map(|(name, r)| Some((name, r?))).collect(),
        })
    }
}

/// A [`WorkerSet`] one of whose workers stopped with an error: which one (the first),
/// its [`WorkerError`], and how every worker of the set ended (the others stopped
/// because of it, each with its [`Summary`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{CancellationToken, WorkerSet};
/// let mut workers = WorkerSet::new(CancellationToken::new());
/// workers.spawn("broken", client.worker::<u32>("jobs").concurrency(0), |_job, step| async move { Ok::<_, String>(step) });
/// let e = workers.join().await.unwrap_err();
/// assert!(e.to_string().starts_with("worker `broken` failed"), "{e}");
/// let anyhow: anyhow::Error = e.into(); // a `main` that runs the set with `?` exits non-zero
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct WorkerSetError {
    failed: usize,
    results: Vec<(String, Result<Summary, WorkerError>)>,
}

impl WorkerSetError {
    /// The name of the worker that failed first.
    pub fn failed(&self) -> &str {
        &self.results[self.failed].0
    }

    /// Its error.
    pub fn error(&self) -> &WorkerError {
        match &self.results[self.failed].1 {
            Err(e) => e,
            Ok(_) => unreachable!("the failed worker's result is an error"),
        }
    }

    /// How each worker ended, by name, in the order they were added to the set.
    pub fn results(&self) -> &[(String, Result<Summary, WorkerError>)] {
        &self.results
    }

    /// How each worker ended, taken out.
    pub fn into_results(self) -> Vec<(String, Result<Summary, WorkerError>)> {
        self.results
    }
}

impl fmt::Display for WorkerSetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "worker `{}` failed: {}", self.failed(), self.error())?;
        let others = self.results.len() - 1;
        if others > 0 {
            let s = if others == 1 { "" } else { "s" };
            write!(f, "; {others} other worker{s} stopped with it")?;
        }
        Ok(())
    }
}

impl std::error::Error for WorkerSetError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(self.error())
    }
}
