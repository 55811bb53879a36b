//! Time, read through one abstraction.
//!
//! Leases, TTLs, the dedup window, message visibility and timers all depend on time.
//! The engine never calls `SystemTime::now()` itself: it asks a [`Clock`], so a test can
//! use a [`ManualClock`] and move time forward instead of sleeping.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::sync::Notify;

/// Microseconds since the Unix epoch, UTC. The broker's one unit of time.
///
/// ```
/// use queen_mock_broker::clock::{Micros, format_iso};
/// let t: Micros = 1_790_000_000_000_000;
/// assert_eq!(format_iso(t), "2026-09-21T14:13:20.000000Z");
/// ```
pub type Micros = i64;

/// A source of the current time.
///
/// ```
/// use queen_mock_broker::{Clock, ManualClock};
/// let clock = ManualClock::starting_at(1_000_000);
/// clock.advance(std::time::Duration::from_secs(2));
/// assert_eq!(clock.now_micros(), 3_000_000);
/// ```
pub trait Clock: Send + Sync + fmt::Debug + 'static {
    /// The current time in microseconds since the Unix epoch.
    ///
    /// ```
    /// use queen_mock_broker::{Clock, ManualClock};
    /// assert_eq!(ManualClock::starting_at(42).now_micros(), 42);
    /// ```
    fn now_micros(&self) -> Micros;

    /// The [`Notify`] woken when the clock jumps (a [`ManualClock`] moved by hand), so
    /// waiters whose deadlines depend on broker time re-check. `None` (the default, and
    /// the system clock's answer): the clock never jumps, and waiters rely on their own
    /// timers.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::{Clock, ManualClock, SystemClock};
    /// assert!(SystemClock.jumped().is_none());
    /// let clock = ManualClock::new();
    /// let woken = clock.jumped().expect("a manual clock jumps").notified();
    /// clock.advance(Duration::from_secs(5));
    /// tokio::time::timeout(Duration::from_secs(1), woken).await?; // resolved by the jump
    /// # Ok(())
    /// # }
    /// ```
    fn jumped(&self) -> Option<&Notify> {
        None
    }

    /// This clock as a [`ManualClock`], when it is one (`None` by default).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use queen_mock_broker::{Clock, ManualClock, SystemClock};
    /// let clock: Arc<dyn Clock> = Arc::new(ManualClock::starting_at(0));
    /// clock.as_manual().expect("manual").advance(std::time::Duration::from_secs(1));
    /// assert_eq!(clock.now_micros(), 1_000_000);
    /// assert!(SystemClock.as_manual().is_none());
    /// ```
    fn as_manual(&self) -> Option<&ManualClock> {
        None
    }
}

/// The wall clock: the default of [`MockBrokerBuilder::clock`](crate::MockBrokerBuilder::clock).
///
/// ```
/// use std::time::{SystemTime, UNIX_EPOCH};
/// use queen_mock_broker::{Clock, SystemClock};
/// let wall = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_micros() as i64;
/// assert!((SystemClock.now_micros() - wall).abs() < 1_000_000);
/// ```
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_micros(&self) -> Micros {
        let d = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO);
        d.as_micros() as Micros
    }
}

/// A clock that only moves when told to. Cheap to clone; clones share one time.
///
/// ```
/// use queen_mock_broker::{Clock, ManualClock};
/// let clock = ManualClock::new();
/// let before = clock.now_micros();
/// clock.advance(std::time::Duration::from_millis(1500));
/// assert_eq!(clock.now_micros() - before, 1_500_000);
/// ```
#[derive(Debug, Clone)]
pub struct ManualClock {
    inner: Arc<ManualInner>,
}

#[derive(Debug)]
struct ManualInner {
    now: AtomicI64,
    jumped: Notify,
}

impl ManualClock {
    /// A manual clock starting at the current wall-clock time.
    ///
    /// ```
    /// use queen_mock_broker::{Clock, ManualClock, SystemClock};
    /// let clock = ManualClock::new();
    /// assert!(clock.now_micros() <= SystemClock.now_micros());
    /// ```
    pub fn new() -> Self {
        Self::starting_at(SystemClock.now_micros())
    }

    /// A manual clock starting at `micros` since the Unix epoch.
    ///
    /// ```
    /// use queen_mock_broker::clock::{format_iso, parse_iso};
    /// use queen_mock_broker::{Clock, ManualClock};
    /// let clock = ManualClock::starting_at(parse_iso("2026-10-02T09:00:00Z").unwrap());
    /// assert_eq!(format_iso(clock.now_micros()), "2026-10-02T09:00:00.000000Z");
    /// ```
    pub fn starting_at(micros: Micros) -> Self {
        Self {
            inner: Arc::new(ManualInner {
                now: AtomicI64::new(micros),
                jumped: Notify::new(),
            }),
        }
    }

    /// Moves time forward by `by` and wakes everything waiting on broker time: leases
    /// and TTLs lapse, timers fall due.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::{ManualClock, MockBroker};
    /// let clock = ManualClock::new();
    /// let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    /// let http = reqwest::Client::new();
    /// http.post(format!("{}/api/v1/kv", broker.url()))
    ///     .json(&serde_json::json!({"operations": [{"op": "put", "ns": "s", "key": "k", "value": 1, "ttlSeconds": 60}]}))
    ///     .send()
    ///     .await?;
    /// let get = || async {
    ///     let body: serde_json::Value = http.get(format!("{}/api/v1/kv/s/k", broker.url())).send().await?.json().await?;
    ///     anyhow::Ok(body["found"].clone())
    /// };
    /// assert_eq!(get().await?, true);
    /// clock.advance(Duration::from_secs(61)); // past the TTL, without sleeping
    /// assert_eq!(get().await?, false);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn advance(&self, by: Duration) {
        self.inner
            .now
            .fetch_add(by.as_micros() as Micros, Ordering::SeqCst);
        self.inner.jumped.notify_waiters();
    }

    /// Sets the time. Moving it backwards is allowed but leases and windows then behave
    /// as a real broker would after a clock step: use with care.
    ///
    /// ```
    /// use queen_mock_broker::{Clock, ManualClock};
    /// let clock = ManualClock::new();
    /// clock.set(1_790_000_000_000_000);
    /// assert_eq!(clock.now_micros(), 1_790_000_000_000_000);
    /// ```
    pub fn set(&self, micros: Micros) {
        self.inner.now.store(micros, Ordering::SeqCst);
        self.inner.jumped.notify_waiters();
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now_micros(&self) -> Micros {
        self.inner.now.load(Ordering::SeqCst)
    }

    fn jumped(&self) -> Option<&Notify> {
        Some(&self.inner.jumped)
    }

    fn as_manual(&self) -> Option<&ManualClock> {
        Some(self)
    }
}

/// Renders a time as ISO-8601 UTC with microseconds and `Z`: `2026-10-02T09:14:03.512887Z`.
///
/// ```
/// use queen_mock_broker::clock::format_iso;
/// assert_eq!(format_iso(0), "1970-01-01T00:00:00.000000Z");
/// assert_eq!(format_iso(1_500_000), "1970-01-01T00:00:01.500000Z");
/// assert_eq!(format_iso(i64::MAX), "9999-12-31T23:59:59.999999Z");
/// ```
pub fn format_iso(micros: Micros) -> String {
    // Clamped to years 1 through 9999, which RFC 3339 can write: a timer set a few
    // hundred thousand years away (the transaction's timers have no horizon) reads as
    // the last instant of 9999, not as a wrapped-around date.
    const FIRST: Micros = -62_135_596_800_000_000;
    const LAST: Micros = 253_402_300_799_999_999;
    let micros = micros.clamp(FIRST, LAST);
    let dt = OffsetDateTime::from_unix_timestamp_nanos(micros as i128 * 1000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    let fmt = time::macros::format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z"
    );
    dt.format(&fmt)
        .unwrap_or_else(|_| "1970-01-01T00:00:00.000000Z".into())
}

/// Parses an RFC 3339 time (`Z` or an offset such as `+00:00`) into microseconds;
/// `None` when it is not one.
///
/// ```
/// use queen_mock_broker::clock::parse_iso;
/// assert_eq!(parse_iso("1970-01-01T00:00:01.5Z"), Some(1_500_000));
/// assert_eq!(parse_iso("1970-01-01T02:00:01.5+02:00"), Some(1_500_000));
/// assert_eq!(parse_iso("yesterday"), None);
/// ```
pub fn parse_iso(s: &str) -> Option<Micros> {
    let dt = OffsetDateTime::parse(s, &Rfc3339).ok()?;
    i64::try_from(dt.unix_timestamp_nanos() / 1000).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_round_trips_with_microseconds() {
        let t = 1_790_000_000_123_456;
        let s = format_iso(t);
        assert!(s.ends_with('Z') && s.contains(".123456"), "{s}");
        assert_eq!(parse_iso(&s), Some(t));
        assert_eq!(parse_iso(&s.replace('Z', "+00:00")), Some(t));
        assert_eq!(parse_iso("yesterday"), None);
    }
}
