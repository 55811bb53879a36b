//! The worker's dispatcher: polls while it has room for another batch, gives each
//! batch its own lane, and on shutdown drains the lanes within the grace period.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tracing::Instrument;

use crate::client::Client;
use crate::consume::lease::LeaseKeeper;
use crate::consume::poll::{PollSpec, Polled, Poller};

use super::error::{WorkerError, WorkerErrorKind};
use super::horizon::Horizon;
use super::lane::{self, Handler, Lanes, Observer, RefusedHandler, UndecodableHandler};
use super::summary::{ErrorKind, Stopped, Summary, Tally};

/// The handlers a worker runs, and the policies it settles deliveries by.
pub(crate) struct Handlers<T> {
    pub step: Handler<T>,
    pub undecodable: Option<UndecodableHandler>,
    pub refused: Option<RefusedHandler<T>>,
    pub observer: Option<Observer>,
    pub horizon: Horizon,
    pub retry: Option<crate::retry::RetryPolicy>,
}

/// When a worker stops of its own accord.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Until {
    /// Only when its shutdown signal fires (or the broker refuses it).
    Shutdown,
    /// Also when a pop finds nothing while nothing is in hand.
    Idle,
}

type Polling = Pin<Box<dyn Future<Output = (Box<Poller>, Polled)> + Send>>;

/// Runs until `shutdown` fires, the queue is idle (with [`Until::Idle`]) or a pop is
/// refused for good; answers what it did, or the refusal with what it did before.
#[allow(clippy::too_many_arguments)]
pub(crate) async fn run<T: DeserializeOwned + Send + 'static>(
    client: Client,
    spec: PollSpec,
    concurrency: usize,
    grace: Duration,
    handlers: Handlers<T>,
    until: Until,
    shutdown: impl Future<Output = ()> + Send,
) -> Result<Summary, WorkerError> {
    let lease = spec.lease;
    let epoch = spec.epoch.clone();
    let queue = spec.queue.clone();
    let tally = Tally::default();
    let (stop, stopping) = watch::channel(false);
    let shared = Arc::new(Lanes {
        client: client.clone(),
        handler: handlers.step,
        undecodable: handlers.undecodable,
        refused: handlers.refused,
        observer: handlers.observer,
        horizon: handlers.horizon,
        retry: handlers.retry,
        tally: tally.clone(),
        stop: stopping,
        leftovers: Arc::default(),
    });
    let mut poller = Some(Box::new(Poller::new(client.clone(), spec)));
    let mut polling: Option<Polling> = None;
    let mut lanes = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    let mut stopped = Ok(Stopped::Shutdown);
    // Until idle: a pop found nothing while lanes ran; pop again once one ends.
    let mut await_lane = false;
    // The first call to the broker (the queue's dedup window): a worker told to stop
    // meanwhile stops without waiting for a slow or absent broker's answer.
    let learned = tokio::select! {
        biased;
        () = &mut shutdown => false,
        () = shared.horizon.learn(&client, &queue) => true,
    };
    if learned {
        tracing::info!(%queue, concurrency, "worker started");
    }
    loop {
        if !learned {
            break;
        }
        // One pop at a time, and only with room for the batch it brings.
        if polling.is_none()
            && lanes.len() < concurrency
            && !await_lane
            && let Some(mut p) = poller.take()
        {
            polling = Some(Box::pin(async move {
                let polled = p.poll().await;
                (p, polled)
            }));
        }
        tokio::select! {
            biased;
            () = &mut shutdown => break,
            // A step or an ack refused for good (401, 403): as a refused pop.
            e = tally.refused() => {
                stopped = Err(e);
                break;
            }
            Some(joined) = lanes.join_next(), if !lanes.is_empty() => {
                await_lane = false;
                if let Err(e) = joined
                    && e.is_panic()
                {
                    tracing::error!("a worker lane panicked");
                    tally.error(ErrorKind::Panic);
                }
            }
            (p, polled) = next(&mut polling) => {
                polling = None;
                poller = Some(p);
                match polled {
                    Polled::Batch(batch) if batch.is_empty() && until == Until::Idle => {
                        if lanes.is_empty() {
                            tracing::info!(%queue, "nothing left to pop: the worker is idle");
                            stopped = Ok(Stopped::Idle);
                            break;
                        }
                        await_lane = true;
                    }
                    Polled::Batch(batch) => {
                        if let Some(first) = batch.first() {
                            let keeper = Arc::new(
                                LeaseKeeper::start(client.clone(), first.lease_id.clone(), lease)
                                    .in_epoch(epoch.clone()),
                            );
                            lanes.spawn(
                                lane::run(Arc::clone(&shared), batch, keeper).in_current_span(),
                            );
                        }
                    }
                    Polled::Failed(e) => tally.error(ErrorKind::of(&e)),
                    Polled::Refused(e) => {
                        tally.error(ErrorKind::of(&e));
                        stopped = Err(e);
                        break;
                    }
                }
            }
        }
    }

    // Stop polling: a long-poll in flight is cancelled.
    drop(polling);
    stop.send_replace(true);
    tracing::info!(%queue, in_flight = lanes.len(), ?grace, "worker stopping: draining");
    let drained =
        tokio::time::timeout(grace, async { while lanes.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(%queue, cancelled = lanes.len(), "grace period over: cancelling handlers still running");
        lanes.shutdown().await;
    }
    // Cancelled lanes' messages: given back too. The one whose handler was cut short
    // may have committed its step or not; a `retry` of it is refused if it did, and
    // otherwise hands it straight to the next worker (whose step finds itself done
    // or not) instead of after the lease.
    let leftovers = std::mem::take(
        &mut *shared
            .leftovers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    );
    for left in leftovers {
        let cut = u64::from(left.current.is_some());
        let rest = left.rest.len() as u64;
        let msgs: Vec<_> = left.current.into_iter().chain(left.rest).collect();
        match lane::give_back(&client, &msgs).await {
            Ok(()) => tally.add(|s| {
                s.abandoned += cut;
                s.released += rest;
            }),
            Err(e) => {
                tally.error(ErrorKind::of(&e));
                tally.add(|s| s.abandoned += cut + rest);
            }
        }
    }
    // Every lane, and with it every lease keeper, is gone: renewal has stopped.
    drop(shared);
    let mut summary = tally.take();
    match stopped {
        Ok(how) => {
            summary.stopped = how;
            tracing::info!(%queue, %summary, "worker stopped");
            Ok(summary)
        }
        Err(e) => {
            tracing::error!(%queue, %summary, error = %e, "worker stopped by a refusal");
            Err(WorkerError::new(WorkerErrorKind::Refused, e, summary))
        }
    }
}

/// The poll in flight, or never.
async fn next(polling: &mut Option<Polling>) -> (Box<Poller>, Polled) {
    match polling {
        Some(p) => p.await,
        None => std::future::pending().await,
    }
}
