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

use super::lane::{self, Handler, Lanes, Observer, UndecodableHandler};
use super::summary::{ErrorKind, Stopped, Summary, Tally};

type Polling = Pin<Box<dyn Future<Output = (Box<Poller>, Polled)> + Send>>;

/// Runs until `shutdown` fires or a pop is refused for good; answers what it did.
pub(crate) async fn run<T: DeserializeOwned + Send + 'static>(
    client: Client,
    spec: PollSpec,
    concurrency: usize,
    grace: Duration,
    handlers: (Handler<T>, Option<UndecodableHandler>),
    observer: Option<Observer>,
    shutdown: impl Future<Output = ()> + Send,
) -> Summary {
    let (handler, undecodable) = handlers;
    let lease = spec.lease;
    let queue = spec.queue.clone();
    let tally = Tally::default();
    let (stop, stopping) = watch::channel(false);
    let shared = Arc::new(Lanes {
        client: client.clone(),
        handler,
        undecodable,
        observer,
        tally: tally.clone(),
        stop: stopping,
        leftovers: Arc::default(),
    });
    let mut poller = Some(Box::new(Poller::new(client.clone(), spec)));
    let mut polling: Option<Polling> = None;
    let mut lanes = JoinSet::new();
    let mut shutdown = pin!(shutdown);
    let mut stopped = Stopped::Shutdown;
    tracing::info!(%queue, concurrency, "worker started");
    loop {
        // One pop at a time, and only with room for the batch it brings.
        if polling.is_none()
            && lanes.len() < concurrency
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
            Some(joined) = lanes.join_next(), if !lanes.is_empty() => {
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
                    Polled::Batch(batch) => {
                        if let Some(first) = batch.first() {
                            let keeper = Arc::new(LeaseKeeper::start(
                                client.clone(),
                                first.lease_id.clone(),
                                lease,
                            ));
                            lanes.spawn(
                                lane::run(Arc::clone(&shared), batch, keeper).in_current_span(),
                            );
                        }
                    }
                    Polled::Failed(e) => tally.error(ErrorKind::of(&e)),
                    Polled::Refused(e) => {
                        tally.error(ErrorKind::of(&e));
                        stopped = Stopped::Refused(e);
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
    summary.stopped = stopped;
    tracing::info!(%queue, %summary, "worker stopped");
    summary
}

/// The poll in flight, or never.
async fn next(polling: &mut Option<Polling>) -> (Box<Poller>, Polled) {
    match polling {
        Some(p) => p.await,
        None => std::future::pending().await,
    }
}
