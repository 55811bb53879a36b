//! The dedup horizon: how far back the broker's duplicate check reaches, and what the
//! worker does with a delivery older than that.
//!
//! A step's derived push ids make its second run a `duplicate` only while the broker
//! remembers the first run's ids: the queue's `dedupWindowSeconds` (Queen's default
//! 3600 s). A message older than the window may have been processed more than a window
//! ago (a replay, a long outage, a lease that kept expiring), and a second run of it
//! would then push again. The worker cannot know whether it was; it can say that the
//! guarantee no longer holds, and let the user choose.

use std::time::{Duration, SystemTime};

use tokio::sync::OnceCell;

use crate::client::Client;
use crate::message::Message;
use crate::time::parse_rfc3339;

/// Queen's default dedup window, assumed when the broker does not state the queue's.
pub(crate) const DEFAULT_DEDUP_WINDOW: Duration = Duration::from_secs(3600);

/// What a worker does with a delivery whose message is older than its queue's dedup
/// window ([`Worker::past_dedup_window`](crate::Worker::past_dedup_window)). Either way
/// it is counted in [`Summary::past_dedup_window`](crate::Summary::past_dedup_window)
/// and logged (a `warn` event with the message's age and the window).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PastWindow {
    /// Process it as any other (the default): right for a replay in a new
    /// [`Epoch`](crate::Epoch), whose ids are new, and for steps guarded by `once`
    /// markers that live longer than the message's age.
    #[default]
    Process,
    /// Dead-letter it unprocessed, with the reason, for a person to decide: right for
    /// steps whose only guard is their derived push ids.
    DeadLetter,
}

/// The worker's view of its queue's window, learned once.
#[derive(Debug, Default)]
pub(crate) struct Horizon {
    /// The window the user declared ([`crate::Worker::dedup_window`]).
    declared: Option<Duration>,
    pub(crate) policy: PastWindow,
    /// The window as the broker states it, asked when the worker starts.
    learned: OnceCell<Option<Duration>>,
    /// Whether a delivery past the window was logged at `warn` yet: once per worker,
    /// then at `debug` (a replay of a million old messages is expected to meet it a
    /// million times; [`crate::Summary::past_dedup_window`] counts them).
    warned: std::sync::atomic::AtomicBool,
}

impl Horizon {
    pub(crate) fn new(declared: Option<Duration>, policy: PastWindow) -> Horizon {
        Horizon {
            declared,
            policy,
            learned: OnceCell::new(),
            warned: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Whether this is the first delivery past the window the worker met.
    pub(crate) fn first_past(&self) -> bool {
        !self.warned.swap(true, std::sync::atomic::Ordering::Relaxed)
    }

    /// The queue's window: declared, or as the broker's queue detail states it, or
    /// Queen's default (Queen 2's engine does not state it; a queue not found yet has
    /// the default). `None`: deduplication is off (a window of zero).
    async fn window(&self, client: &Client, queue: &str) -> Option<Duration> {
        if let Some(w) = self.declared {
            return (!w.is_zero()).then_some(w);
        }
        *self
            .learned
            .get_or_init(|| async {
                let stated = match client.queue_stats(queue).await {
                    Ok(detail) => detail.config.dedup_window,
                    Err(e) => {
                        tracing::debug!(%queue, error = %e, "queue detail not read: assuming the default dedup window");
                        None
                    }
                };
                let w = stated.unwrap_or(DEFAULT_DEDUP_WINDOW);
                if w.is_zero() {
                    tracing::warn!(%queue, "the queue's dedup window is 0: derived push ids do not deduplicate; only once markers guard a redelivered step");
                    return None;
                }
                tracing::debug!(%queue, window_secs = w.as_secs(), stated = stated.is_some(), "dedup window");
                Some(w)
            })
            .await
    }

    /// Learns the queue's window before the first pop, unless it was declared: one
    /// call at a fixed place in the worker's life, so that a seeded proof
    /// (`queen-verify`) meets it at the same point of every run.
    pub(crate) async fn learn(&self, client: &Client, queue: &str) {
        self.window(client, queue).await;
    }

    /// How old `msg` is, if it is older than the queue's window (with the window).
    pub(crate) async fn past<T>(
        &self,
        client: &Client,
        msg: &Message<T>,
    ) -> Option<(Duration, Duration)> {
        let created = parse_rfc3339(&msg.created_at)?;
        let age = SystemTime::now().duration_since(created).ok()?;
        // Younger than any window there can be: no need to learn the queue's.
        if age < Duration::from_secs(1) {
            return None;
        }
        let window = self.window(client, &msg.queue).await?;
        (age > window).then_some((age, window))
    }
}
