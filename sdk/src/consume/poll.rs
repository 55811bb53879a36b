//! The consumer's long-poll loop: one pop at a time, each with its own timeout (its
//! wait plus a margin), never bounded by the retry policy's overall deadline; failures
//! back off with capped, jittered exponential delays and are reported, and only a
//! terminal refusal ends it.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use serde_json::value::RawValue;

use crate::client::Client;
use crate::epoch::Epoch;
use crate::error::Error;
use crate::message::Message;

use super::StartAt;

/// A message as popped, its payload not decoded yet: each is decoded on its own, so
/// one bad payload does not fail its batch.
pub(crate) type RawMessage = Message<Box<RawValue>>;

/// The longest pause between failed polls.
pub(crate) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What to pop.
#[derive(Debug, Clone)]
pub(crate) struct PollSpec {
    pub queue: String,
    pub partition: Option<String>,
    pub group: Option<String>,
    pub batch: u32,
    pub wait: Duration,
    pub lease: Duration,
    /// Where a new group starts; sent with every pop of a named group.
    pub start: Option<StartAt>,
    /// The epoch each delivery's step runs in.
    pub epoch: Option<Epoch>,
}

/// What one poll came to.
#[derive(Debug)]
pub(crate) enum Polled {
    /// A batch (empty after a long-poll that found nothing).
    Batch(Vec<RawMessage>),
    /// A failure worth polling again after (a 5xx, a 429, a timeout, a lost
    /// connection): the next poll waits out a backoff first.
    Failed(Error),
    /// A refusal that polling again cannot change (401, 403, 404, a request the SDK
    /// or the broker finds invalid): the consumer ends.
    Refused(Error),
}

/// Pops batch after batch; owns the backoff between failures.
#[derive(Debug)]
pub(crate) struct Poller {
    client: Client,
    spec: PollSpec,
    backoff: Option<ExponentialBackoff>,
    /// How long the next poll pauses first.
    pause: Option<Duration>,
}

/// Whether `e` ends a consumer: a refusal that the same request meets again.
pub(crate) fn is_terminal(e: &Error) -> bool {
    match e {
        // 408 and 429 are the broker's load, not a verdict on the request.
        Error::Api { status, .. } => (400..500).contains(status) && !matches!(status, 408 | 429),
        Error::Invalid { .. } | Error::Token { .. } | Error::Serialize(_) => true,
        _ => false,
    }
}

impl Poller {
    pub(crate) fn new(client: Client, spec: PollSpec) -> Self {
        Poller {
            client,
            spec,
            backoff: None,
            pause: None,
        }
    }

    pub(crate) fn client(&self) -> &Client {
        &self.client
    }

    /// Pauses if the last poll failed, then long-polls once.
    pub(crate) async fn poll(&mut self) -> Polled {
        if let Some(d) = self.pause.take() {
            tokio::time::sleep(d).await;
        }
        let s = &self.spec;
        let mut p = self
            .client
            .pop::<Box<RawValue>>(s.queue.clone())
            .batch(s.batch)
            .lease(s.lease)
            .single_attempt();
        // A zero wait answers at once (a worker run until idle asks whether anything is left).
        if !s.wait.is_zero() {
            p = p.wait(s.wait);
        }
        if let Some(g) = &s.group {
            p = p.group(g.clone());
        }
        if let Some(part) = &s.partition {
            p = p.partition(part.clone());
        }
        if let (Some(start), Some(_)) = (s.start, &s.group) {
            p = p.start_at(start);
        }
        match p.send().await {
            Ok(msgs) => {
                self.backoff = None;
                Polled::Batch(msgs)
            }
            Err(e) if is_terminal(&e) => {
                tracing::error!(queue = %s.queue, error = %e, "pop refused: the consumer stops");
                Polled::Refused(e)
            }
            Err(e) => {
                let policy = self.client.retry_policy();
                let delay = self
                    .backoff
                    .get_or_insert_with(|| {
                        // Jittered unless the policy says not to (`jitter(false)`: a
                        // test, or a simulation that replays the same delays).
                        let b = ExponentialBuilder::default()
                            .with_min_delay(policy.first_delay())
                            .with_max_delay(MAX_BACKOFF)
                            .without_max_times();
                        if policy.jittered() {
                            b.with_jitter()
                        } else {
                            b
                        }
                        .build()
                    })
                    .next()
                    .unwrap_or(MAX_BACKOFF);
                let delay = e.retry_after().map_or(delay, |ra| ra.max(delay));
                tracing::warn!(queue = %s.queue, error = %e, ?delay, "pop failed; polling again after a pause");
                self.pause = Some(delay);
                Polled::Failed(e)
            }
        }
    }
}
