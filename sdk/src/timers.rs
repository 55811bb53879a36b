//! Standalone timers (`/api/v1/timers`): a message pushed to a queue at a later time.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use reqwest::Method;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::client::{Client, Opts, Replay};
use crate::error::{Error, Result};
use crate::json::{Operations, render};
use crate::txn::{Timer, TimerAction, TimerResult, TimerWire};
use crate::validate;

/// Largest standalone timer payload, decoded.
pub(crate) const MAX_TIMER_PAYLOAD_BYTES: usize = 1024 * 1024;

/// The standalone timers API. Get it with [`Client::timers`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// use serde_json::json;
///
/// let timers = client.timers();
/// let set = timers
///     .schedule("reminders", "order-7", |t| {
///         t.after(Duration::from_secs(3600)).payload(&json!({"orderId": "order-7"}))
///     })
///     .await?;
/// println!("fires at {:?}", set.deliver_at);
/// if let Some(pending) = timers.peek("reminders", "order-7").await? {
///     println!("pending until {}", pending.deliver_at);
/// }
/// timers.cancel("reminders", "order-7").await?;
/// assert!(timers.peek("reminders", "order-7").await?.is_none());
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// Each schedule sends a `txn` (yours, or a new UUIDv7): the fired message's
/// `transactionId`. Scheduling is not retried after a 5xx or a lost connection (it ends
/// in [`crate::Error::OutcomeUnknown`]): a replay after the timer fired would schedule it
/// again. Cancelling, peeking and listing are retried.
#[derive(Debug, Clone)]
pub struct Timers {
    client: Client,
}

/// A pending timer, as [`Timers::peek`] and [`Timers::list`] answer it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// let timers = client.timers();
/// timers.schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60)).txn("remind-o-7")).await?;
/// let t = timers.peek("reminders", "o-7").await?.expect("pending");
/// assert_eq!((t.queue.as_str(), t.timer_key.as_str()), ("reminders", "o-7"));
/// assert_eq!((t.txn.as_deref(), t.attempts), (Some("remind-o-7"), 0));
/// assert!(t.deliver_at.ends_with('Z'));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct PendingTimer {
    /// The queue it pushes to.
    pub queue: String,
    /// Its key.
    pub timer_key: String,
    /// When it fires (ISO-8601).
    pub deliver_at: String,
    /// The fired message's `transactionId`.
    pub txn: Option<String>,
    /// The fired message's id.
    pub message_id: Option<String>,
    /// The partition it pushes to.
    pub partition: Option<String>,
    /// The payload bytes ([`Timers::peek`] only; `None` in a list).
    pub payload: Option<Vec<u8>>,
    /// Failed fire attempts.
    pub attempts: u64,
}

impl PendingTimer {
    fn parse(queue: &str, v: &Value) -> PendingTimer {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        PendingTimer {
            queue: s("queue").unwrap_or_else(|| queue.to_string()),
            timer_key: s("timerKey").unwrap_or_default(),
            deliver_at: s("deliverAt").unwrap_or_default(),
            txn: s("txn"),
            message_id: s("messageId"),
            partition: s("partition"),
            payload: v
                .get("payload")
                .and_then(Value::as_str)
                .and_then(|p| B64.decode(p).ok()),
            attempts: v.get("attempts").and_then(Value::as_u64).unwrap_or(0),
        }
    }

    /// The payload decoded from JSON, if there is one. A timer set without a payload
    /// has an empty one, which is not JSON: that is an error.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// #[derive(serde::Serialize, serde::Deserialize, Debug, PartialEq)]
    /// struct Reminder { order_id: String }
    /// let timers = client.timers();
    /// let reminder = Reminder { order_id: "o-7".into() };
    /// timers.schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60)).payload(&reminder)).await?;
    /// let pending = timers.peek("reminders", "o-7").await?.expect("pending");
    /// assert_eq!(pending.payload_json::<Reminder>()?, Some(reminder));
    ///
    /// timers.schedule("reminders", "o-8", |t| t.after(Duration::from_secs(60))).await?;
    /// let empty = timers.peek("reminders", "o-8").await?.expect("pending");
    /// assert!(empty.payload_json::<Reminder>().is_err());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn payload_json<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        self.payload
            .as_deref()
            .map(serde_json::from_slice)
            .transpose()
            .map_err(Error::from)
    }
}

/// One page of [`Timers::list`], in key order.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// for key in ["a", "b", "c"] {
///     client.timers().schedule("reminders", key, |t| t.after(Duration::from_secs(60))).await?;
/// }
/// let page = client.timers().list("reminders", None, 2).await?;
/// assert_eq!(page.rows.iter().map(|t| t.timer_key.as_str()).collect::<Vec<_>>(), ["a", "b"]);
/// assert_eq!(page.next_after.as_deref(), Some("b"));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct TimerPage {
    /// The pending timers.
    pub rows: Vec<PendingTimer>,
    /// Pass it as `after` for the next page; `None` on the last page.
    pub next_after: Option<String>,
}

impl Client {
    /// The standalone timers API; see [`Timers`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let r = client.timers().schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60))).await?;
    /// assert!(r.ok);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn timers(&self) -> Timers {
        Timers {
            client: self.clone(),
        }
    }
}

fn parse_result(v: &Value) -> TimerResult {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    TimerResult {
        index: v.get("index").and_then(Value::as_u64).unwrap_or(0) as usize,
        op_index: 0,
        status: s("status").unwrap_or_default(),
        ok: v.get("ok").and_then(Value::as_bool).unwrap_or(false),
        queue: s("queue").unwrap_or_default(),
        timer_key: s("timerKey").unwrap_or_default(),
        txn: s("txn"),
        message_id: s("messageId"),
        deliver_at: s("deliverAt"),
    }
}

impl Timers {
    async fn set(
        &self,
        queue: &str,
        key: &str,
        action: TimerAction,
        f: impl FnOnce(Timer) -> Timer,
    ) -> Result<TimerResult> {
        let mut t = f(Timer {
            queue: queue.to_string(),
            key: key.to_string(),
            ..Default::default()
        });
        t.action = action;
        if let Some(Ok(p)) = &t.payload
            && p.len() > MAX_TIMER_PAYLOAD_BYTES
        {
            return Err(Error::invalid(
                "timer",
                format!(
                    "the payload is {} bytes; the limit is {MAX_TIMER_PAYLOAD_BYTES}",
                    p.len()
                ),
            ));
        }
        let txn = t
            .txn
            .clone()
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let op = t.checked_wire("timer", Some(txn.as_str().into()))?;
        self.send(op, Replay::Unsafe).await
    }

    async fn send(&self, op: TimerWire<'_>, replay: Replay) -> Result<TimerResult> {
        let body = render(&Operations { operations: [op] })?;
        let answer = self.client.post("/api/v1/timers", body, replay).await?;
        answer
            .value()?
            .get("results")
            .and_then(|r| r.get(0))
            .map(parse_result)
            .ok_or_else(|| Error::Decode {
                message: "a timers answer without results".into(),
                body: answer.text(),
            })
    }

    /// Schedules the timer `queue/key`, configured by `f` (give it
    /// [`Timer::after`] or [`Timer::at`]); a pending timer of the key is replaced
    /// (`status: "rescheduled"`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let r = client
    ///     .timers()
    ///     .schedule("reminders", "order-7", |t| t.after(Duration::from_secs(60)).payload(&"ping"))
    ///     .await?;
    /// assert!(r.ok);
    /// assert_eq!(r.status, "scheduled");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule(
        &self,
        queue: &str,
        key: &str,
        f: impl FnOnce(Timer) -> Timer,
    ) -> Result<TimerResult> {
        self.set(queue, key, TimerAction::Schedule, f).await
    }

    /// Reschedules the timer `queue/key` (scheduling it when absent). Not retried after
    /// a 5xx or a lost connection, as [`Timers::schedule`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let timers = client.timers();
    /// timers.schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60))).await?;
    /// let r = timers.reschedule("reminders", "o-7", |t| t.after(Duration::from_secs(600))).await?;
    /// assert_eq!(r.status, "rescheduled");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reschedule(
        &self,
        queue: &str,
        key: &str,
        f: impl FnOnce(Timer) -> Timer,
    ) -> Result<TimerResult> {
        self.set(queue, key, TimerAction::Reschedule, f).await
    }

    /// Cancels the pending timer `queue/key`. `ok: false` with `status: "absent"` means
    /// there was none (it may have fired), `"too_late"` that firing had begun.
    ///
    /// Retried after a 5xx: cancelling twice has the effect of cancelling once, but a
    /// retry's answer may then be `absent`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let timers = client.timers();
    /// timers.schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60))).await?;
    /// let r = timers.cancel("reminders", "o-7").await?;
    /// assert_eq!((r.ok, r.status.as_str()), (true, "cancelled"));
    /// let again = timers.cancel("reminders", "o-7").await?;
    /// assert_eq!((again.ok, again.status.as_str()), (false, "absent"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(&self, queue: &str, key: &str) -> Result<TimerResult> {
        let t = Timer {
            queue: queue.to_string(),
            key: key.to_string(),
            action: TimerAction::Cancel,
            ..Default::default()
        };
        let op = t.checked_wire("timer", None)?;
        self.send(op, Replay::Safe).await
    }

    /// The pending timer `queue/key`, with its payload; `None` when there is none.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let timers = client.timers();
    /// timers.schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60)).payload(&"ping")).await?;
    /// let t = timers.peek("reminders", "o-7").await?.expect("pending");
    /// assert_eq!(t.payload.as_deref(), Some(&b"\"ping\""[..]));
    /// assert!(timers.peek("reminders", "o-8").await?.is_none());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn peek(&self, queue: &str, key: &str) -> Result<Option<PendingTimer>> {
        validate::name("timer", queue)?;
        let path = format!(
            "/api/v1/timers/{}/{}",
            validate::segment(queue),
            validate::segment(key)
        );
        let answer = self
            .client
            .call::<()>(Method::GET, &path, None, None, Opts::SAFE)
            .await?;
        let b = answer.value()?;
        if b.get("found").and_then(Value::as_bool) != Some(true) {
            return Ok(None);
        }
        Ok(Some(PendingTimer::parse(queue, &b)))
    }

    /// A page of at most `limit` (1 to 1,000) of `queue`'s pending timers in key order,
    /// starting after the key `after`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # for key in ["a", "b", "c"] {
    /// #     client.timers().schedule("reminders", key, |t| t.after(std::time::Duration::from_secs(60))).await?;
    /// # }
    /// let timers = client.timers();
    /// let mut after = None;
    /// loop {
    ///     let page = timers.list("reminders", after.as_deref(), 2).await?;
    ///     for t in &page.rows {
    ///         println!("{} at {}", t.timer_key, t.deliver_at);
    ///     }
    ///     match page.next_after {
    ///         Some(next) => after = Some(next),
    ///         None => break,
    ///     }
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn list(&self, queue: &str, after: Option<&str>, limit: u32) -> Result<TimerPage> {
        validate::name("timer", queue)?;
        let path = format!("/api/v1/timers/{}", validate::segment(queue));
        let mut params = vec![("limit", limit.clamp(1, 1000).to_string())];
        if let Some(a) = after {
            params.push(("after", a.to_string()));
        }
        let answer = self
            .client
            .call(Method::GET, &path, Some(&params), None, Opts::SAFE)
            .await?;
        let b = answer.value()?;
        let rows = b
            .get("rows")
            .and_then(Value::as_array)
            .map(|rs| rs.iter().map(|r| PendingTimer::parse(queue, r)).collect())
            .unwrap_or_default();
        let truncated = b.get("truncated").and_then(Value::as_bool).unwrap_or(false);
        let next_after = b
            .get("nextAfter")
            .and_then(Value::as_str)
            .filter(|_| truncated)
            .map(str::to_string);
        Ok(TimerPage { rows, next_after })
    }
}
