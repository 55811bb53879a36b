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
use std::sync::Arc;

use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument;

use crate::client::Client;
use crate::consume::lease::LeaseKeeper;
use crate::consume::poll::RawMessage;
use crate::consume::{Delivery, decode_payload};
use crate::message::{AckStatus, Message};
use crate::txn::TransactionBuilder;

use super::settle::{self, Outcome};
use super::summary::{ErrorKind, Tally};

/// The handler, its error type erased to its text.
pub(crate) type Handler<T> = Arc<
    dyn Fn(Delivery<T>) -> Pin<Box<dyn Future<Output = Result<TransactionBuilder, String>> + Send>>
        + Send
        + Sync,
>;

/// Told of each settlement ([`crate::Worker::on_settled`]).
pub(crate) type Observer = Arc<dyn Fn(&Message<()>, &Outcome) + Send + Sync>;

/// What every lane shares.
pub(crate) struct Lanes<T> {
    pub client: Client,
    pub handler: Handler<T>,
    pub observer: Option<Observer>,
    pub tally: Tally,
    /// `true` once the worker is stopping: no new message is started.
    pub stop: watch::Receiver<bool>,
}

/// Messages of a lane not settled yet: if the lane is cancelled (the grace period ran
/// out) or dies, they are counted as abandoned to their lease's expiry.
struct Unsettled {
    n: u64,
    tally: Tally,
}

impl Drop for Unsettled {
    fn drop(&mut self) {
        if self.n > 0 {
            let n = self.n;
            self.tally.add(|s| s.abandoned += n);
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
    let mut rest: VecDeque<RawMessage> = batch.into();
    let mut unsettled = Unsettled {
        n: rest.len() as u64,
        tally: lanes.tally.clone(),
    };
    while let Some(raw) = rest.pop_front() {
        if *lanes.stop.borrow() {
            rest.push_front(raw);
            release(&lanes, &mut unsettled, rest).await;
            return;
        }
        if keeper.is_lost() {
            let n = rest.len() as u64 + 1;
            tracing::warn!(
                lost = n,
                "lease lost: the rest of the batch is the lease holder's"
            );
            lanes.tally.add(|s| s.lease_lost += n);
            unsettled.n = 0;
            return;
        }
        let settled = one(&lanes, raw, &keeper).await;
        unsettled.n -= 1;
        match settled {
            Outcome::Committed { .. }
            | Outcome::AlreadyDone { .. }
            | Outcome::DeadLettered { .. } => {}
            // The nack gave back this message and everything after it: they come again,
            // in order, at a later pop. Released explicitly too, for a broker that frees
            // a batch only once every message of it is acked.
            Outcome::Failed { .. } => {
                release(&lanes, &mut unsettled, rest).await;
                return;
            }
            Outcome::LeaseLost => {
                let n = rest.len() as u64;
                lanes.tally.add(|s| s.lease_lost += n);
                unsettled.n = 0;
                return;
            }
            // Whether the step applied is unknown, so nothing after it may be acked
            // (a completion would commit the cursor past it): the rest waits for the
            // lease to lapse, and the redelivered step finds itself done or not.
            Outcome::Unknown { .. } => return,
        }
    }
}

/// Gives `rest` back with `retry` acks (no attempt counted), so another worker gets
/// them at once instead of after the lease.
async fn release<T>(lanes: &Lanes<T>, unsettled: &mut Unsettled, rest: VecDeque<RawMessage>) {
    if rest.is_empty() {
        return;
    }
    let acks: Vec<(&RawMessage, AckStatus)> = rest.iter().map(|m| (m, AckStatus::Retry)).collect();
    match lanes.client.ack_batch(&acks).await {
        Ok(_) => {
            let n = rest.len() as u64;
            tracing::debug!(released = n, "released messages not started");
            lanes.tally.add(|s| s.released += n);
            unsettled.n = 0;
        }
        // Left in `unsettled`: abandoned to the lease's expiry.
        Err(e) => {
            tracing::warn!(error = %e, "releasing messages not started failed: they come back after the lease");
            lanes.tally.error(ErrorKind::of(&e));
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
        let msg = match decode_payload::<T>(raw) {
            Ok(msg) => msg,
            Err((msg, reason)) => {
                return settle::dead_letter(&lanes.client, &lanes.tally, &msg, keeper, &reason)
                    .await;
            }
        };
        lanes.tally.add(|s| s.processed += 1);
        let delivery = Delivery {
            msg,
            keeper: Arc::clone(keeper),
        };
        let task = tokio::spawn((lanes.handler)(delivery).in_current_span());
        let mut task = AbortOnDrop(task);
        let why = match (&mut task.0).await {
            Ok(Ok(step)) => {
                return settle::commit(&lanes.client, &lanes.tally, &head, keeper, step).await;
            }
            Ok(Err(text)) => {
                lanes.tally.error(ErrorKind::Handler);
                tracing::warn!(error = %text, "handler failed");
                text
            }
            Err(e) => {
                lanes.tally.error(ErrorKind::Panic);
                let text = panic_text(e);
                tracing::error!(panic = %text, "handler panicked");
                format!("handler panicked: {text}")
            }
        };
        settle::fail(&lanes.client, &lanes.tally, &head, keeper, &why).await
    }
    .instrument(span.clone())
    .await;
    span.record("outcome", settled.name());
    if let Some(observe) = &lanes.observer {
        observe(&head, &settled);
    }
    settled
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
