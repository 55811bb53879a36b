//! Where a consumer group that has never read a queue starts: stated by the caller of
//! [`crate::Worker::group`] and [`crate::Consume::group`], never inherited.
//!
//! Queen's own default for a new named group is "new messages only" (`wire.md` 4a): a
//! worker deployed after its producers would silently skip the backlog. The runtime
//! therefore takes the start as an argument and always sends it; the broker fixes it
//! at the group's first pop and ignores it afterwards, so sending it again is harmless.

use std::time::SystemTime;

use crate::time::rfc3339;

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

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

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
