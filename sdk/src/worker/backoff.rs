//! Running a failed handler again in process ([`crate::Worker::retry_handler`]): the
//! waits of the worker's [`RetryPolicy`], each cut short by the lease's loss or the
//! worker's stop.
//!
//! Why in process: Queen 2 redelivers a message acked `failed` at once (its queue option
//! `retryDelay` is stored but not applied; see `conformance/spec/wire.md#core-ack`), so a
//! handler that fails for a moment (the row it needs not written yet) spends the queue's
//! whole `retryLimit` in well under a second and is dead-lettered. Waiting here, with the
//! lease renewed, is the only place a backoff can live.

use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use crate::consume::lease::LeaseKeeper;
use crate::retry::RetryPolicy;

/// One message's runs of the handler: the waits left before each further run.
pub(crate) struct Retrying {
    delays: Box<dyn Iterator<Item = Duration> + Send>,
    /// No wait ends past it: the policy's deadline, from the first run's start.
    deadline: Instant,
}

impl Retrying {
    /// The waits of `policy` for a message whose handler first started at `started`.
    pub(crate) fn new(policy: &RetryPolicy, started: Instant) -> Retrying {
        Retrying {
            delays: Box::new(policy.delays()),
            deadline: started + policy.overall_deadline(),
        }
    }

    /// The wait before the next run, or `None` once the attempts are used or the wait
    /// would end past the deadline.
    pub(crate) fn next_wait(&mut self) -> Option<Duration> {
        let wait = self.delays.next()?;
        (Instant::now() + wait <= self.deadline).then_some(wait)
    }
}

/// How a wait between two runs ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pause {
    /// Waited in full: run the handler again.
    Elapsed,
    /// The worker is stopping.
    Stopping,
    /// The lease can no longer be renewed: the message is not ours to settle.
    LeaseLost,
}

/// Waits `wait`, unless the worker starts stopping or the lease is lost first. The
/// lease keeper renews the lease meanwhile (every third of it), so a wait longer than
/// the lease is safe while the renewals succeed, and ends as soon as they stop doing so.
pub(crate) async fn pause(
    wait: Duration,
    keeper: &LeaseKeeper,
    stop: &watch::Receiver<bool>,
) -> Pause {
    let mut stop = stop.clone();
    tokio::select! {
        biased;
        // A closed channel: the worker is gone, which is a stop too.
        _ = stop.wait_for(|stopping| *stopping) => Pause::Stopping,
        () = keeper.lost() => Pause::LeaseLost,
        () = tokio::time::sleep(wait) => Pause::Elapsed,
    }
}
