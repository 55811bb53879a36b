//! Waiting for stored state without a polling loop: a condition over an [`Inspector`],
//! checked at once and again after every batch of writes the broker commits (and when
//! its manual clock moves), until it holds or a timeout of real time passes.

use std::pin::pin;
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use tokio::sync::oneshot;

use super::inspect::{InspectError, Inspector};
use crate::MockBroker;

/// Why [`MockBroker::wait_for`] gave up.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
/// use queen_mock_broker::harness::WaitError;
/// let broker = MockBroker::start_in_memory().await?;
/// let waited = broker
///     .wait_for("a receipt", Duration::from_millis(50), |i| {
///         Ok(!i.messages("receipts", DEFAULT_PARTITION)?.is_empty())
///     })
///     .await;
/// match waited {
///     Err(WaitError::TimedOut { what, waited, checks }) => {
///         assert_eq!((what.as_str(), waited), ("a receipt", Duration::from_millis(50)));
///         assert_eq!(checks, 1); // at the start only: nothing was written since
///     }
///     other => panic!("expected a timeout, got {other:?}"),
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WaitError {
    /// The condition did not hold within the timeout.
    #[error("timed out after {waited:?} waiting for {what} ({})", checked(*.checks))]
    TimedOut {
        /// What was awaited, as the caller named it.
        what: String,
        /// The timeout, in real time.
        waited: Duration,
        /// How often the condition was checked: once at the start, then once per batch
        /// of writes (and per move of a manual clock). `1`: nothing was written.
        checks: u32,
    },
    /// The condition failed to read the broker's state.
    #[error("while waiting for {what}: {source}")]
    Inspect {
        /// What was awaited.
        what: String,
        /// The failed read.
        source: InspectError,
    },
}

/// How often a wait's condition was checked, for its timeout's message.
fn checked(checks: u32) -> String {
    match checks {
        1 => "checked once, at the start: nothing was written since".into(),
        n => format!("checked {n} times: at the start, then after writes or clock moves"),
    }
}

impl MockBroker {
    /// Waits until `condition` holds over the broker's stored state, or answers
    /// [`WaitError::TimedOut`] (naming `what`) once `timeout` of real time has passed.
    ///
    /// The condition is checked at once, then again after every batch of writes the
    /// broker commits (a push, an ack, a KV write, a timer firing, from any client) and
    /// whenever its [`ManualClock`](crate::ManualClock) moves; nothing else makes it
    /// true, so there is no polling interval to pick. It reads through an
    /// [`Inspector`] that sees every write answered so far; an error it returns ends the
    /// wait ([`WaitError::Inspect`]). The timeout is real time, kept by a thread of its
    /// own rather than tokio's timer, which a test on tokio's paused clock
    /// (`start_paused`) would see fire at once while its runtime idles.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
    /// let broker = MockBroker::start_in_memory().await?;
    /// // The worker under test, here a task that pushes two receipts a little later.
    /// let url = format!("{}/api/v1/push", broker.url());
    /// tokio::spawn(async move {
    ///     tokio::time::sleep(Duration::from_millis(50)).await;
    ///     let items = serde_json::json!({"items": [
    ///         {"queue": "receipts", "payload": {"order": 1}},
    ///         {"queue": "receipts", "payload": {"order": 2}},
    ///     ]});
    ///     reqwest::Client::new().post(url).json(&items).send().await
    /// });
    /// broker
    ///     .wait_for("two receipts", Duration::from_secs(5), |i| {
    ///         Ok(i.messages("receipts", DEFAULT_PARTITION)?.len() >= 2)
    ///     })
    ///     .await?;
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn wait_for<F>(
        &self,
        what: impl Into<String>,
        timeout: Duration,
        mut condition: F,
    ) -> Result<(), WaitError>
    where
        F: FnMut(&Inspector<'_>) -> Result<bool, InspectError>,
    {
        let what = what.into();
        // Watching before the first check: a batch committed after it wakes the wait.
        let written = self.engine().written().watch();
        let jumped = self.clock().jumped();
        let timer = RealTimer::start(timeout);
        let mut expired = pin!(timer.expired);
        let mut checks = 0u32;
        loop {
            // Both enabled before the check, so nothing between the check and the
            // `select!` is missed.
            let mut write = pin!(written.notified());
            write.as_mut().enable();
            let mut moved = pin!(jumped.map(|n| n.notified()));
            if let Some(moved) = moved.as_mut().as_pin_mut() {
                moved.enable();
            }
            checks += 1;
            match condition(&self.inspect()) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(source) => return Err(WaitError::Inspect { what, source }),
            }
            tokio::select! {
                biased;
                _ = write => {}
                _ = async {
                    match moved.as_mut().as_pin_mut() {
                        Some(moved) => moved.await,
                        None => std::future::pending().await,
                    }
                } => {}
                _ = &mut expired => {
                    return Err(WaitError::TimedOut { what, waited: timeout, checks });
                }
            }
        }
    }
}

/// A timeout of real time, on a thread of its own: tokio's timers follow its paused
/// clock, which jumps ahead whenever the test's runtime is idle (as it is while the
/// broker's writer thread works).
struct RealTimer {
    /// Resolves when the time is up.
    expired: oneshot::Receiver<()>,
    /// Dropped with the timer: ends the thread at once.
    _cancel: mpsc::Sender<()>,
}

impl RealTimer {
    fn start(after: Duration) -> Self {
        let (cancel, cancelled) = mpsc::channel::<()>();
        let (fire, expired) = oneshot::channel();
        thread::Builder::new()
            .name("queen-wait".into())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = cancelled.recv_timeout(after) {
                    let _ = fire.send(());
                }
            })
            .expect("spawn the wait's timer thread");
        RealTimer {
            expired,
            _cancel: cancel,
        }
    }
}
