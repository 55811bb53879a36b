//! Where a consumer group that has never read a queue starts: stated by the caller of
//! [`crate::Worker::group`] and [`crate::Consume::group`], never inherited.
//!
//! Queen's own default for a new named group is "new messages only" (`wire.md` 4a): a
//! worker deployed after its producers would silently skip the backlog. The runtime
//! therefore takes the start as an argument and always sends it; the broker fixes it
//! at the group's first pop and ignores it afterwards, so sending it again is harmless.

use std::time::{SystemTime, UNIX_EPOCH};

/// Where a consumer group starts reading a queue it has never read (a group that has
/// read it goes on from its cursor, whatever this says).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use futures::StreamExt;
/// use queen_sdk::{PushItem, StartAt};
/// client.push(vec![PushItem::new("orders", &"the backlog")]).await?;
/// // A new group that starts at the beginning reads what was there before it.
/// let mut billing = client.consume::<String>("orders").group("billing", StartAt::Beginning).stream();
/// let first = billing.next().await.expect("the stream never ends")?;
/// assert_eq!(first.data, "the backlog");
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StartAt {
    /// Every message still stored, from the first (`subscriptionMode=all`; Queen 2's
    /// clients call it `from_beginning`): a worker deployed after its producers
    /// processes their backlog.
    Beginning,
    /// Only messages that arrive after the group's first pop (`subscriptionMode=new`):
    /// the backlog is skipped, on purpose.
    New,
    /// Messages created at or after this time (`subscriptionFrom`).
    Time(SystemTime),
}

impl StartAt {
    /// The pop's query parameter that says it.
    pub(crate) fn param(self) -> (&'static str, String) {
        match self {
            StartAt::Beginning => ("subscriptionMode", "all".into()),
            StartAt::New => ("subscriptionMode", "new".into()),
            StartAt::Time(t) => ("subscriptionFrom", rfc3339(t)),
        }
    }
}

/// `t` as an RFC 3339 UTC time with milliseconds (`2026-12-04T15:35:51.123Z`); a time
/// before 1970 is sent as the epoch.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn times_render_as_rfc3339_utc() {
        let at = |s: u64, ms: u64| UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms);
        assert_eq!(rfc3339(at(0, 0)), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day of a year divisible by 400), 12:34:56.789.
        assert_eq!(rfc3339(at(951_827_696, 789)), "2000-02-29T12:34:56.789Z");
        assert_eq!(rfc3339(at(1_796_398_551, 5)), "2026-12-04T15:35:51.005Z");
        // Before the epoch: the epoch.
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn each_start_names_its_parameter() {
        assert_eq!(
            StartAt::Beginning.param(),
            ("subscriptionMode", "all".into())
        );
        assert_eq!(StartAt::New.param(), ("subscriptionMode", "new".into()));
        let (k, v) = StartAt::Time(UNIX_EPOCH).param();
        assert_eq!(
            (k, v.as_str()),
            ("subscriptionFrom", "1970-01-01T00:00:00.000Z")
        );
    }
}
