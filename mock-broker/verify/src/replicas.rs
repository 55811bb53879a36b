//! What a run in process (`run`) and a run by URL (`remote`) do alike around the
//! worker: its running copies (started with a client and a stop signal, their ends
//! written in the trace, stopped at the end of the run), and the end-of-run reads (the
//! inputs' dead letters; the timeout as a violation).

use std::collections::BTreeSet;
use std::time::Duration;

use queen_sdk::{Client, DeadLetter, DlqQuery};
use serde_json::Value;
use tokio::task::JoinHandle;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::report::{Event, Violation};
use crate::run::{RunSpec, Stop, WorkerFn};

/// How long a stopped replica may take to drain before it is cancelled.
const DRAIN: Duration = Duration::from_secs(10);

/// One running copy of the worker.
pub(crate) struct Replica {
    pub index: usize,
    handle: JoinHandle<Result<(), String>>,
    /// Fires its [`Stop`] when told to, or when the replica is dropped (the verifier is
    /// gone).
    stop: Option<DropGuard>,
    /// Its end is in the trace already.
    reported: bool,
}

impl Replica {
    /// Starts the worker with `client` as replica `index`.
    pub(crate) fn start(worker: &WorkerFn, client: Client, index: usize) -> Replica {
        let token = CancellationToken::new();
        let stop = token.clone().drop_guard();
        let handle = tokio::spawn(worker(client, Stop::new(token)));
        Replica {
            index,
            handle,
            stop: Some(stop),
            reported: false,
        }
    }

    /// Cancels it (a worker restart): it is started again in its place.
    pub(crate) async fn cancel(&mut self) {
        self.handle.abort();
        let _ = (&mut self.handle).await;
    }

    /// Cancels it without waiting (the run is being abandoned).
    pub(crate) fn abort(&self) {
        self.handle.abort();
    }
}

/// Writes in the trace, once, each replica whose closure ended on its own.
pub(crate) async fn note_exits(replicas: &mut [Replica], event: impl Fn(Event)) {
    for r in replicas {
        if !r.reported && r.handle.is_finished() {
            r.reported = true;
            let outcome = match (&mut r.handle).await {
                Ok(Ok(())) => "returned".to_string(),
                Ok(Err(e)) => format!("failed: {e}"),
                Err(e) => format!("panicked: {e}"),
            };
            event(Event::WorkerExit {
                replica: r.index,
                outcome,
            });
        }
    }
}

/// Tells every replica to stop, then waits for each to drain (cancelling one that takes
/// longer than 10 s), writing how each ended in the trace.
pub(crate) async fn stop(replicas: &mut [Replica], event: impl Fn(Event)) {
    for r in replicas.iter_mut() {
        if let Some(stop) = r.stop.take() {
            stop.disarm().cancel();
        }
    }
    for r in replicas {
        match tokio::time::timeout(DRAIN, &mut r.handle).await {
            Ok(res) if !r.reported => {
                let outcome = match res {
                    Ok(Ok(())) => "stopped".to_string(),
                    Ok(Err(e)) => format!("stopped with an error: {e}"),
                    Err(e) => format!("panicked: {e}"),
                };
                event(Event::WorkerExit {
                    replica: r.index,
                    outcome,
                });
            }
            Ok(_) => {}
            Err(_) => {
                r.handle.abort();
                event(Event::WorkerExit {
                    replica: r.index,
                    outcome: format!("did not stop within {DRAIN:?}: cancelled"),
                });
            }
        }
    }
}

/// The dead letters of the inputs' queues, read with the verifier's own client.
pub(crate) async fn dead_letters(
    admin: &Client,
    spec: &RunSpec,
) -> Result<Vec<DeadLetter>, String> {
    let queues: BTreeSet<&str> = spec.inputs.iter().map(|i| i.queue.as_str()).collect();
    let mut dead = Vec::new();
    for q in queues {
        let page = admin
            .dlq::<Value>(DlqQuery {
                limit: Some(1000),
                ..DlqQuery::queue(q)
            })
            .await
            .map_err(|e| format!("reading the dead letters of {q}: {e}"))?;
        dead.extend(page.messages);
    }
    Ok(dead)
}

/// A run that ended on its timeout, as the violation it is when no invariant broke.
pub(crate) fn timed_out(spec: &RunSpec) -> Violation {
    Violation {
        invariant: "every input acknowledged".into(),
        detail: format!(
            "the worker had not acknowledged every input after {:?}",
            spec.run_timeout
        ),
    }
}
