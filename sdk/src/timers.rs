//! Standalone timers (`/api/v1/timers`): a message pushed to a queue at a later time.

use std::borrow::Cow;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hyper::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::client::{Client, Opts, Replay};
use crate::error::{Error, Result};
use crate::json::{Operations, render};
use crate::txn::TimerResult;
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
        status: crate::TimerStatus::parse(&s("status").unwrap_or_default()),
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
        f: impl FnOnce(TimerStart) -> Timer,
    ) -> Result<TimerResult> {
        let mut t = f(TimerStart::new(queue.to_string(), key.to_string())).spec;
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

    /// Schedules the timer `queue/key`, configured by `f` (which says when it fires:
    /// [`TimerStart::after`] or [`TimerStart::at`]); a pending timer of the key is replaced
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
    /// assert_eq!(r.status, queen_sdk::TimerStatus::Scheduled);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn schedule(
        &self,
        queue: &str,
        key: &str,
        f: impl FnOnce(TimerStart) -> Timer,
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
    /// assert_eq!(r.status, queen_sdk::TimerStatus::Rescheduled);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn reschedule(
        &self,
        queue: &str,
        key: &str,
        f: impl FnOnce(TimerStart) -> Timer,
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
    /// assert_eq!((r.ok, r.status), (true, queen_sdk::TimerStatus::Cancelled));
    /// let again = timers.cancel("reminders", "o-7").await?;
    /// assert_eq!((again.ok, again.status), (false, queen_sdk::TimerStatus::Absent));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn cancel(&self, queue: &str, key: &str) -> Result<TimerResult> {
        let t = TimerStart::new(queue.to_string(), key.to_string())
            .cancel()
            .spec;
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

/// What a timer operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum TimerAction {
    /// Set it, replacing a pending timer of the key.
    #[default]
    Schedule,
    /// Replace it (scheduling it when absent).
    Reschedule,
    /// Remove the pending timer.
    Cancel,
}

/// One timer operation as the SDK keeps it until it is sent.
#[derive(Debug, Clone, Default)]
pub(crate) struct TimerSpec {
    pub(crate) queue: String,
    pub(crate) key: String,
    pub(crate) action: TimerAction,
    /// `None` for a cancellation.
    pub(crate) delay: Option<Duration>,
    pub(crate) partition: Option<String>,
    pub(crate) txn: Option<String>,
    pub(crate) payload: Option<Result<Vec<u8>, String>>,
}

/// The start of a timer operation, handed to the closure of
/// [`TransactionBuilder::timer`](crate::TransactionBuilder::timer) and
/// [`Timers::schedule`]: say when the timer fires ([`TimerStart::after`],
/// [`TimerStart::at`]), which answers the [`Timer`] to configure, or cancel it
/// ([`TimerStart::cancel`]). A timer without a time does not compile:
///
/// ```compile_fail,E0277
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// // No `.after(..)` or `.at(..)`: a TimerStart is no timer operation.
/// let step = client.transaction().timer("reminders", "o-7", |t| t);
/// # Ok::<(), queen_sdk::Error>(())
/// ```
///
/// ```compile_fail,E0599
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// // A payload is set on the timer a time made, not before.
/// let step = client.transaction().timer("reminders", "o-7", |t| t.payload(&"o-7"));
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug)]
#[must_use]
pub struct TimerStart {
    spec: TimerSpec,
}

impl TimerStart {
    pub(crate) fn new(queue: String, key: String) -> TimerStart {
        TimerStart {
            spec: TimerSpec {
                queue,
                key,
                ..Default::default()
            },
        }
    }

    /// Fires `delay` from the commit (sent in whole milliseconds), replacing a pending
    /// timer of the key.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client.transaction().timer("reminders", "o-7", |t| t.after(Duration::from_secs(90))).to_body()?;
    /// assert_eq!(body["timers"][0]["timerKey"], "o-7");
    /// assert_eq!(body["timers"][0]["delayMs"], 90_000);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn after(mut self, delay: Duration) -> Timer {
        self.spec.delay = Some(delay);
        Timer { spec: self.spec }
    }

    /// Fires at `at`: the delay from now by this machine's clock (a time in the past
    /// fires at once).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::{Duration, SystemTime};
    /// let tomorrow = SystemTime::now() + Duration::from_secs(86_400);
    /// let body = client.transaction().timer("reminders", "o-7", |t| t.at(tomorrow)).to_body()?;
    /// assert!(body["timers"][0]["delayMs"].as_u64().unwrap() > 86_000_000);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn at(self, at: SystemTime) -> Timer {
        self.after(at.duration_since(SystemTime::now()).unwrap_or_default())
    }

    /// Cancels the pending timer of the key: `ok: false`, status
    /// [`TimerStatus::Absent`](crate::TimerStatus::Absent) when none is pending.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::TimerStatus;
    /// client.timers().schedule("reminders", "o-7", |t| t.after(Duration::from_secs(60))).await?;
    /// let c = client.transaction().timer("reminders", "o-7", |t| t.cancel()).commit().await?.committed().unwrap();
    /// assert_eq!(c.timers().next().unwrap().status, TimerStatus::Cancelled);
    /// assert!(broker.inspect().timers("reminders")?.is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn cancel(mut self) -> CancelTimer {
        self.spec.action = TimerAction::Cancel;
        CancelTimer { spec: self.spec }
    }
}

/// A timer that fires: when it fires is set ([`TimerStart::after`],
/// [`TimerStart::at`]); its payload, partition and `txn` are optional.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// let c = client
///     .transaction()
///     .timer("reminders", "order-7", |t| t.after(Duration::from_secs(3600)).payload(&"order-7"))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// assert_eq!(c.timers().next().unwrap().timer_key, "order-7");
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Timer {
    spec: TimerSpec,
}

/// A cancellation of a pending timer, from [`TimerStart::cancel`].
///
/// ```
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().timer("reminders", "o-7", |t| t.cancel()).to_body()?;
/// assert_eq!(body["timers"][0]["op"], "cancel");
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct CancelTimer {
    spec: TimerSpec,
}

/// One timer operation of a transaction: a [`Timer`] to set or a [`CancelTimer`], what
/// the closure of [`TransactionBuilder::timer`](crate::TransactionBuilder::timer)
/// answers.
///
/// ```
/// use std::time::Duration;
/// use queen_sdk::TimerOp;
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client
///     .transaction()
///     .timer("reminders", "o-7", |t| t.cancel())
///     .timer("reminders", "o-8", |t| t.after(Duration::from_secs(60)).reschedule())
///     .to_body()?;
/// assert_eq!(body["timers"][0]["op"], "cancel");
/// assert_eq!(body["timers"][1]["op"], "reschedule");
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum TimerOp {
    /// Set a timer ([`TimerStart::after`], [`TimerStart::at`]).
    Set(Timer),
    /// Cancel one ([`TimerStart::cancel`]).
    Cancel(CancelTimer),
}

impl From<Timer> for TimerOp {
    fn from(t: Timer) -> TimerOp {
        TimerOp::Set(t)
    }
}

impl From<CancelTimer> for TimerOp {
    fn from(t: CancelTimer) -> TimerOp {
        TimerOp::Cancel(t)
    }
}

impl TimerOp {
    pub(crate) fn into_spec(self) -> TimerSpec {
        match self {
            TimerOp::Set(t) => t.spec,
            TimerOp::Cancel(c) => c.spec,
        }
    }
}

impl CancelTimer {
    /// A `txn` sent with the cancel (`wire.md`: optional), echoed in its result.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let body = client.transaction().timer("reminders", "o-7", |t| t.cancel().txn("cancel-o-7")).to_body()?;
    /// assert_eq!(body["timers"][0]["txn"], "cancel-o-7");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn txn(mut self, txn: impl Into<String>) -> Self {
        self.spec.txn = Some(txn.into());
        self
    }
}

impl Timer {
    /// The partition of the message it pushes.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client
    ///     .transaction()
    ///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(60)).partition("customer-1"))
    ///     .to_body()?;
    /// assert_eq!(body["timers"][0]["partition"], "customer-1");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.spec.partition = Some(p.into());
        self
    }

    /// The pushed message's `transactionId`. Without one, a step that acks messages
    /// gets one derived from them, the queue and the timer key; otherwise the broker
    /// mints one.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client
    ///     .transaction()
    ///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(60)).txn("reminder-o-7"))
    ///     .to_body()?;
    /// assert_eq!(body["timers"][0]["txn"], "reminder-o-7");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn txn(mut self, txn: impl Into<String>) -> Self {
        self.spec.txn = Some(txn.into());
        self
    }

    /// A payload serialised as JSON (delivered as JSON). Without a payload, the timer's
    /// is empty and its message's data is `""`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::{ManualClock, MockBroker};
    /// let clock = ManualClock::new();
    /// let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    /// let client = queen_sdk::Client::new(broker.url())?;
    /// let reminder = serde_json::json!({"orderId": "o-7"});
    /// client
    ///     .transaction()
    ///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(60)).payload(&reminder))
    ///     .timer("reminders", "o-8", |t| t.after(Duration::from_secs(60)))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .expect("no gate");
    /// clock.advance(Duration::from_secs(61)); // the timer falls due
    /// let fired = client.pop::<serde_json::Value>("reminders").wait(Duration::from_secs(5)).send().await?;
    /// assert_eq!(fired[0].data, reminder);
    /// assert_eq!(fired[1].data, ""); // o-8 had no payload
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        self.spec.payload = Some(serde_json::to_vec(payload).map_err(|e| e.to_string()));
        self
    }

    /// Raw payload bytes (sent base64-encoded; bytes that are not JSON are delivered as
    /// their base64 text).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use std::time::Duration;
    /// let body = client
    ///     .transaction()
    ///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(60)).payload_bytes(b"{}".to_vec()))
    ///     .to_body()?;
    /// assert_eq!(body["timers"][0]["payload"], "e30="); // base64 of "{}"
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn payload_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.spec.payload = Some(Ok(bytes.into()));
        self
    }

    /// Sends it as a `reschedule` instead of a `schedule`: the same effect on a pending
    /// timer of the key (replaced) and on an absent one (set), answered
    /// [`TimerStatus::Rescheduled`](crate::TimerStatus::Rescheduled) or `Scheduled`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// use queen_sdk::TimerStatus;
    /// let set = |secs| client.transaction().timer("reminders", "o-7", move |t| t.after(Duration::from_secs(secs)).reschedule());
    /// let first = set(60).commit().await?.committed().unwrap();
    /// let again = set(120).commit().await?.committed().unwrap();
    /// assert_eq!(first.timers().next().unwrap().status, TimerStatus::Scheduled);
    /// assert_eq!(again.timers().next().unwrap().status, TimerStatus::Rescheduled);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn reschedule(mut self) -> Self {
        self.spec.action = TimerAction::Reschedule;
        self
    }
}

impl TimerSpec {
    /// Checks the timer's own rules (queue, key, delay, payload) and renders it with
    /// `txn`, for calls outside a transaction (the standalone timers handle).
    pub(crate) fn checked_wire<'a>(
        &'a self,
        op: &(impl std::fmt::Display + ?Sized),
        txn: Option<Cow<'a, str>>,
    ) -> crate::Result<TimerWire<'a>> {
        validate::name(op, &self.queue)?;
        if self.key.is_empty() {
            return Err(Error::invalid(op, "a timer key must not be empty"));
        }
        if self.key.len() > 1024 {
            return Err(Error::invalid(op, "a timer key is at most 1,024 bytes"));
        }
        if let Some(p) = &self.partition {
            validate::name(op, p)?;
        }
        if let Some(t) = &txn {
            validate::transaction_id(op, t)?;
        }
        // A cancellation has no delay; a timer that fires always has one (its type).
        let delay = self.delay.map_or(0, |d| d.as_millis() as u64);
        let payload = match &self.payload {
            Some(Ok(b)) => Some(b.as_slice()),
            Some(Err(e)) => return Err(Error::invalid(op, format!("payload: {e}"))),
            None => None,
        };
        Ok(self.to_wire(txn, delay, payload))
    }

    /// The wire form, with the resolved `txn`.
    pub(crate) fn to_wire<'a>(
        &'a self,
        txn: Option<Cow<'a, str>>,
        delay_ms: u64,
        payload: Option<&[u8]>,
    ) -> TimerWire<'a> {
        let op = match self.action {
            TimerAction::Schedule => "schedule",
            TimerAction::Reschedule => "reschedule",
            TimerAction::Cancel => "cancel",
        };
        let scheduled = self.action != TimerAction::Cancel;
        TimerWire {
            op,
            queue: &self.queue,
            timer_key: &self.key,
            delay_ms: scheduled.then_some(delay_ms),
            payload: scheduled.then(|| B64.encode(payload.unwrap_or_default())),
            partition: self.partition.as_deref().filter(|_| scheduled),
            txn,
        }
    }
}

/// A timer operation as the broker reads it, borrowed from its [`TimerSpec`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct TimerWire<'a> {
    op: &'static str,
    queue: &'a str,
    timer_key: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay_ms: Option<u64>,
    /// Base64 of the payload's bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    partition: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    txn: Option<Cow<'a, str>>,
}
