//! One popped batch (one partition's run of messages under one lease), handled
//! strictly in order, one message at a time.
//!
//! Order is what makes the cursor rules safe (`wire.md` 4a): a `completed` or `dlq` ack
//! of a message commits the group's cursor past every earlier message of the batch, and
//! a `failed` or `retry` ack gives back the message and everything after it. So a lane
//! never starts a message before the one before it is settled, and after a nack, a lost
//! lease or an unknown outcome it stops: the rest comes back at a later pop.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};

use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::client::Client;
use crate::consume::lease::LeaseKeeper;
use crate::consume::poll::RawMessage;
use crate::consume::{Delivery, decode_payload};
use crate::message::{AckStatus, Message};
use crate::retry::RetryPolicy;
use crate::txn::{Gate, TransactionBuilder};

use super::backoff::{self, Pause, Retrying};
use super::horizon::{Horizon, PastWindow};
use super::settle::{self, Cause, Outcome, Role, Step};
use super::summary::{ErrorKind, Tally};

/// What a handler's future answers, its error type erased to its text.
pub(crate) type StepFuture =
    Pin<Box<dyn Future<Output = Result<TransactionBuilder, String>> + Send>>;

/// A handler's future with its error erased to its text (`{e:#}`: anyhow's chain too).
pub(crate) fn erased<Fut, E>(fut: Fut) -> StepFuture
where
    Fut: Future<Output = Result<TransactionBuilder, E>> + Send + 'static,
    E: std::fmt::Display + Send + 'static,
{
    Box::pin(async move { fut.await.map_err(|e| format!("{e:#}")) })
}

/// The handler: a delivery and its step (the fenced ack) in, the step to commit out.
pub(crate) type Handler<T> =
    Arc<dyn Fn(Delivery<T>, TransactionBuilder) -> StepFuture + Send + Sync>;

/// The handler of steps a gate refused ([`crate::Worker::on_refused`]).
pub(crate) type RefusedHandler<T> = Arc<dyn Fn(Delivery<T>, Gate) -> StepFuture + Send + Sync>;

/// The handler of payloads that do not decode ([`crate::Worker::on_undecodable`]).
pub(crate) type UndecodableHandler = Arc<
    dyn Fn(
            Delivery<serde_json::Value>,
            String,
        ) -> Pin<Box<dyn Future<Output = Result<TransactionBuilder, String>> + Send>>
        + Send
        + Sync,
>;

/// Told of each settlement ([`crate::Worker::on_settled`]).
pub(crate) type Observer = Arc<dyn Fn(&Message<()>, &Outcome) + Send + Sync>;

/// What every lane shares.
pub(crate) struct Lanes<T> {
    pub client: Client,
    pub handler: Handler<T>,
    /// `None`: undecodable payloads are dead-lettered.
    pub undecodable: Option<UndecodableHandler>,
    /// `None`: a refused step is acked `failed` with the gate as the reason.
    pub refused: Option<RefusedHandler<T>>,
    pub observer: Option<Observer>,
    /// The queue's dedup window, and what to do past it.
    pub horizon: Horizon,
    /// `Some`: a handler's error runs it again after a wait, as this policy says
    /// ([`crate::Worker::retry_handler`]), before the message is acked `failed`.
    pub retry: Option<RetryPolicy>,
    pub tally: Tally,
    /// `true` once the worker is stopping: no new message is started.
    pub stop: watch::Receiver<bool>,
    /// What cancelled lanes left behind.
    pub leftovers: Arc<Mutex<Vec<Leftover>>>,
}

/// What a cancelled lane leaves behind: the message whose handler was cut short, and
/// those not started. The worker gives them back with `retry` acks.
#[derive(Debug)]
pub(crate) struct Leftover {
    pub current: Option<Message<()>>,
    pub rest: Vec<Message<()>>,
}

/// A lane's messages not settled yet. Dropped with some left (the lane was cancelled
/// when the grace period ran out, or died), it hands them to the worker's leftovers.
struct Pending {
    current: Option<Message<()>>,
    rest: VecDeque<RawMessage>,
    leftovers: Arc<Mutex<Vec<Leftover>>>,
}

impl Pending {
    /// Forgets what is left: it has been counted and left to the lease.
    fn forget(&mut self) -> u64 {
        let n = self.rest.len() as u64;
        self.rest.clear();
        n
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if self.current.is_some() || !self.rest.is_empty() {
            let left = Leftover {
                current: self.current.take(),
                rest: self.rest.drain(..).map(|m| head_of(&m)).collect(),
            };
            self.leftovers
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(left);
        }
    }
}

/// Aborts the handler's task if the lane is cancelled while waiting for it.
struct AbortOnDrop<R>(JoinHandle<R>);

impl<R> Drop for AbortOnDrop<R> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Handles `batch` in order until it is done, the worker stops, or a message ends it.
pub(crate) async fn run<T: DeserializeOwned + Send + 'static>(
    lanes: Arc<Lanes<T>>,
    batch: Vec<RawMessage>,
    keeper: Arc<LeaseKeeper>,
) {
    let mut pending = Pending {
        current: None,
        rest: batch.into(),
        leftovers: Arc::clone(&lanes.leftovers),
    };
    while !pending.rest.is_empty() {
        if *lanes.stop.borrow() {
            release(&lanes, &mut pending).await;
            return;
        }
        if keeper.is_lost() {
            let n = pending.forget();
            tracing::warn!(
                lost = n,
                "lease lost: the rest of the batch is the lease holder's"
            );
            lanes.tally.add(|s| s.lease_lost += n);
            return;
        }
        let Some(raw) = pending.rest.pop_front() else {
            break;
        };
        pending.current = Some(head_of(&raw));
        let settled = one(&lanes, raw, &keeper).await;
        pending.current = None;
        match settled {
            // Settled: a refusal whose own step committed is settled as that step said.
            Outcome::Committed { .. }
            | Outcome::AlreadyDone { .. }
            | Outcome::DeadLettered { .. }
            | Outcome::Refused {
                transaction_id: Some(_),
                ..
            } => {}
            // The nack gave back this message and everything after it: they come again,
            // in order, at a later pop. Released explicitly too, for a broker that frees
            // a batch only once every message of it is acked.
            Outcome::Failed { .. }
            | Outcome::Refused {
                transaction_id: None,
                ..
            } => {
                release(&lanes, &mut pending).await;
                return;
            }
            Outcome::LeaseLost => {
                let n = pending.forget();
                lanes.tally.add(|s| s.lease_lost += n);
                return;
            }
            // Whether the step applied is unknown, so nothing after it may be acked
            // (a completion would commit the cursor past it): the rest waits for the
            // lease to lapse, and the redelivered step finds itself done or not.
            // Refused for good: the worker is stopping; the rest is left to the lease.
            Outcome::Unknown { .. } | Outcome::Stopped { .. } => {
                let n = pending.forget();
                lanes.tally.add(|s| s.abandoned += n);
                return;
            }
        }
    }
}

/// Gives what is left of the batch back with `retry` acks (no attempt counted), so
/// another worker gets it at once instead of after the lease.
async fn release<T>(lanes: &Lanes<T>, pending: &mut Pending) {
    let rest: Vec<Message<()>> = pending.rest.iter().map(head_of).collect();
    let n = rest.len() as u64;
    let given = give_back(&lanes.client, &rest).await;
    // Kept in `pending` until now: cancelled mid-call, they are leftovers still.
    pending.rest.clear();
    match given {
        Ok(()) => lanes.tally.add(|s| s.released += n),
        Err(e) => {
            lanes.tally.error(ErrorKind::of(&e));
            lanes.tally.add(|s| s.abandoned += n);
        }
    }
}

/// Sends one `retry` ack for each of `msgs`, in order, in one call. The first releases
/// the lease and, under the cursor rules, everything after it; the others matter to a
/// broker that frees a batch only once every message of it is acked.
pub(crate) async fn give_back(client: &Client, msgs: &[Message<()>]) -> crate::Result<()> {
    if msgs.is_empty() {
        return Ok(());
    }
    let acks: Vec<(&Message<()>, AckStatus)> = msgs.iter().map(|m| (m, AckStatus::Retry)).collect();
    match client.ack_batch(&acks).await {
        Ok(_) => {
            tracing::debug!(released = msgs.len(), "gave back messages not started");
            Ok(())
        }
        Err(e) => {
            tracing::warn!(error = %e, "giving back messages failed: they come back after the lease");
            Err(e)
        }
    }
}

/// Decodes, handles and settles one message.
async fn one<T: DeserializeOwned + Send + 'static>(
    lanes: &Lanes<T>,
    raw: RawMessage,
    keeper: &Arc<LeaseKeeper>,
) -> Outcome {
    let head = head_of(&raw);
    let span = tracing::info_span!(
        "queen.step",
        queue = %raw.queue,
        partition = %raw.partition,
        group = %raw.consumer_group,
        message_id = %raw.id,
        transaction_id = %raw.transaction_id,
        attempt = raw.delivery_attempt,
        step_txn = tracing::field::Empty,
        outcome = tracing::field::Empty,
    );
    let settled = async {
        if let Some((age, window)) = lanes.horizon.past(&lanes.client, &raw).await {
            lanes.tally.add(|s| s.past_dedup_window += 1);
            let (age_secs, window_secs, policy) =
                (age.as_secs(), window.as_secs(), lanes.horizon.policy);
            if lanes.horizon.first_past() {
                tracing::warn!(
                    age_secs,
                    window_secs,
                    ?policy,
                    "the message is older than its queue's dedup window: a derived push id no longer proves a second run a duplicate (said once; the summary counts them all)"
                );
            } else {
                tracing::debug!(age_secs, window_secs, ?policy, "older than the dedup window");
            }
            if lanes.horizon.policy == PastWindow::DeadLetter {
                let reason = format!(
                    "older ({} s) than the queue's dedup window ({} s): not processed, so that it cannot be processed twice",
                    age.as_secs(),
                    window.as_secs()
                );
                return settle::dead_letter(
                    &lanes.client,
                    &lanes.tally,
                    &raw,
                    keeper,
                    &reason,
                    Cause::PastWindow,
                )
                .await;
            }
        }
        // A refused step's handler, or a retried handler, gets the delivery again: keep
        // its payload for them.
        let again = (lanes.refused.is_some() || lanes.retry.is_some()).then(|| raw.clone());
        let started = tokio::time::Instant::now();
        let (task, decoded) = match decode_payload::<T>(raw) {
            Ok(msg) => {
                let delivery = Delivery {
                    msg,
                    keeper: Arc::clone(keeper),
                };
                let step = delivery.step();
                let task = tokio::spawn((lanes.handler)(delivery, step).in_current_span());
                (task, true)
            }
            Err((msg, reason)) => match &lanes.undecodable {
                None => {
                    return settle::dead_letter(
                        &lanes.client,
                        &lanes.tally,
                        &msg,
                        keeper,
                        &reason,
                        Cause::Undecodable,
                    )
                    .await;
                }
                Some(handler) => {
                    tracing::warn!(%reason, "payload does not decode: handing it over");
                    lanes.tally.error(ErrorKind::Undecodable);
                    let delivery = Delivery {
                        msg,
                        keeper: Arc::clone(keeper),
                    };
                    (
                        tokio::spawn(handler(delivery, reason).in_current_span()),
                        false,
                    )
                }
            },
        };
        lanes.tally.add(|s| s.processed += 1);
        let mut task = task;
        let mut retrying: Option<Retrying> = None;
        let step = loop {
            let failure = match handled(lanes, task).await {
                Ok(step) => break step,
                Err(failure) => failure,
            };
            // Only the main handler's errors are run again; a panic is a bug, which
            // running again at once would only repeat (it is acked `failed`, so the
            // queue's retry limit still applies).
            let next = match (&lanes.retry, &again, decoded, failure.panicked) {
                (Some(policy), Some(raw), true, false) => retrying
                    .get_or_insert_with(|| Retrying::new(policy, started))
                    .next_wait()
                    .map(|wait| (wait, raw)),
                _ => None,
            };
            let Some((wait, raw)) = next else {
                return settle::fail(&lanes.client, &lanes.tally, &head, keeper, &failure.text)
                    .await;
            };
            tracing::info!(error = %failure.text, ?wait, "handler failed: running it again after a wait");
            match backoff::pause(wait, keeper, &lanes.stop).await {
                Pause::Elapsed => {}
                // Acked `failed` now rather than given back (`retry`) or left to the
                // lease: the handler did fail, and only a `failed` ack counts it against
                // the queue's `retryLimit`. A message that always fails, met by workers
                // that restart often, would otherwise come back forever.
                Pause::Stopping => {
                    tracing::info!("the worker is stopping: no more runs; acking the message failed");
                    return settle::fail(&lanes.client, &lanes.tally, &head, keeper, &failure.text)
                        .await;
                }
                Pause::LeaseLost => {
                    tracing::warn!("lease lost while waiting to run the handler again: the lease holder has the message");
                    lanes.tally.add(|s| s.lease_lost += 1);
                    return Outcome::LeaseLost;
                }
            }
            let msg = match decode_payload::<T>(raw.clone()) {
                Ok(msg) => msg,
                // It decoded for the first run; should it not now, the failure stands.
                Err(_) => {
                    return settle::fail(&lanes.client, &lanes.tally, &head, keeper, &failure.text)
                        .await;
                }
            };
            lanes.tally.add(|s| s.retries += 1);
            let delivery = Delivery {
                msg,
                keeper: Arc::clone(keeper),
            };
            let step = delivery.step();
            task = tokio::spawn((lanes.handler)(delivery, step).in_current_span());
        };
        let gate = match settle::commit(
            &lanes.client,
            &lanes.tally,
            &head,
            keeper,
            step,
            Role::Handler,
        )
        .await
        {
            Step::Settled(outcome) => return outcome,
            Step::Refused(gate) => gate,
        };
        // A gate refused the step: the refusal handler decides, or it is acked failed.
        let (Some(on_refused), Some(raw), true) = (&lanes.refused, again, decoded) else {
            return settle::refuse(&lanes.client, &lanes.tally, &head, keeper, gate, None).await;
        };
        let msg = match decode_payload::<T>(raw) {
            Ok(msg) => msg,
            // It decoded a moment ago; should it not now, the refusal stands.
            Err(_) => {
                return settle::refuse(&lanes.client, &lanes.tally, &head, keeper, gate, None)
                    .await;
            }
        };
        let delivery = Delivery {
            msg,
            keeper: Arc::clone(keeper),
        };
        let task = tokio::spawn(on_refused(delivery, gate.clone()).in_current_span());
        let step = match handled(lanes, task).await {
            Ok(step) => step,
            // Its handler failed: still a refusal (acked `failed`), with why.
            Err(why) => {
                return settle::refuse(
                    &lanes.client,
                    &lanes.tally,
                    &head,
                    keeper,
                    gate,
                    Some(&why.text),
                )
                .await;
            }
        };
        match settle::commit(
            &lanes.client,
            &lanes.tally,
            &head,
            keeper,
            step,
            Role::Refusal(gate),
        )
        .await
        {
            Step::Settled(outcome) => outcome,
            // The refusal's own step refused too: no second round.
            Step::Refused(gate) => {
                settle::refuse(&lanes.client, &lanes.tally, &head, keeper, gate, None).await
            }
        }
    }
    .instrument(span.clone())
    .await;
    span.record("outcome", settled.name());
    if let Some(observe) = &lanes.observer {
        observe(&head, &settled);
    }
    settled
}

/// Why a handler gave no step: its error's text, or its panic's.
struct Failure {
    text: String,
    panicked: bool,
}

/// Waits for a handler's task: its step, or why the message is to be acked `failed`
/// (its error, or its panic), counted.
async fn handled<T>(
    lanes: &Lanes<T>,
    task: JoinHandle<Result<TransactionBuilder, String>>,
) -> Result<TransactionBuilder, Failure> {
    let mut task = AbortOnDrop(task);
    match (&mut task.0).await {
        Ok(Ok(step)) => Ok(step),
        Ok(Err(text)) => {
            lanes.tally.error(ErrorKind::Handler);
            tracing::warn!(error = %text, "handler failed");
            Err(Failure {
                text,
                panicked: false,
            })
        }
        Err(e) => {
            lanes.tally.error(ErrorKind::Panic);
            let text = panic_text(e);
            tracing::error!(panic = %text, "handler panicked");
            Err(Failure {
                text: format!("handler panicked: {text}"),
                panicked: true,
            })
        }
    }
}

/// What acking `msg` needs, without its payload.
fn head_of<T>(msg: &Message<T>) -> Message<()> {
    Message {
        id: msg.id.clone(),
        transaction_id: msg.transaction_id.clone(),
        data: (),
        partition_id: msg.partition_id.clone(),
        partition: msg.partition.clone(),
        lease_id: msg.lease_id.clone(),
        consumer_group: msg.consumer_group.clone(),
        queue: msg.queue.clone(),
        offset: msg.offset,
        delivery_attempt: msg.delivery_attempt,
        trace_id: None,
        producer_sub: None,
        created_at: String::new(),
    }
}

/// A panic's message, when it has one.
fn panic_text(e: tokio::task::JoinError) -> String {
    if !e.is_panic() {
        return "the handler's task was cancelled".into();
    }
    let payload = e.into_panic();
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}
