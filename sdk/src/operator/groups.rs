//! Consumer groups: the list, one group's lag per queue and partition, and the
//! partitions where a group has fallen behind.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use hyper::Method;
use serde::Deserialize;

use super::de;
use crate::client::{Client, Opts};
use crate::error::{Error, Result};
use crate::validate;

/// How a group stands on a queue, as [`Client::consumer_groups`] classifies it.
///
/// ```
/// use queen_sdk::GroupState;
/// assert_eq!(GroupState::from("Lagging".to_string()), GroupState::Lagging);
/// assert_eq!(GroupState::from("Rebalancing".to_string()), GroupState::Other("Rebalancing".into()));
/// assert_eq!(GroupState::Stable.to_string(), "Stable");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, Deserialize)]
#[serde(from = "String")]
#[non_exhaustive]
pub enum GroupState {
    /// It reads and keeps up.
    Stable,
    /// Its oldest unread message is older than the broker's threshold (300 s on the
    /// reference broker and the Queen server).
    Lagging,
    /// It has a subscription but has read no partition yet.
    Dead,
    /// A state this SDK does not know, kept verbatim.
    Other(String),
}

impl From<String> for GroupState {
    fn from(s: String) -> Self {
        match s.as_str() {
            "Stable" => Self::Stable,
            "Lagging" => Self::Lagging,
            "Dead" => Self::Dead,
            _ => Self::Other(s),
        }
    }
}

impl GroupState {
    /// The wire spelling.
    ///
    /// ```
    /// assert_eq!(queen_sdk::GroupState::Dead.as_str(), "Dead");
    /// ```
    pub fn as_str(&self) -> &str {
        match self {
            Self::Stable => "Stable",
            Self::Lagging => "Lagging",
            Self::Dead => "Dead",
            Self::Other(s) => s,
        }
    }
}

impl fmt::Display for GroupState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One (group, queue) of [`Client::consumer_groups`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{AckStatus, GroupState, PushItem, SubscriptionMode};
/// client.push((0..3).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// let got = client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(1).send().await?;
/// client.ack(&got[0], AckStatus::Completed).await?;
/// let g = client.consumer_groups().await?.into_iter().find(|g| g.name == "billing").unwrap();
/// assert_eq!((g.queue_name.as_str(), g.members, g.total_lag), ("orders", 1, 2));
/// assert_eq!(g.state, GroupState::Stable);
/// assert_eq!(g.subscription_mode.as_deref(), Some("all"));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct GroupSummary {
    /// The group.
    pub name: String,
    /// The queue.
    #[serde(default)]
    pub queue_name: String,
    /// Partitions the group has a cursor on.
    #[serde(default, deserialize_with = "de::count")]
    pub members: u64,
    /// Of those, partitions with messages left to read.
    #[serde(default, deserialize_with = "de::count")]
    pub partitions_with_lag: u64,
    /// Messages left to read over those partitions.
    #[serde(default, deserialize_with = "de::count")]
    pub total_lag: u64,
    /// The largest time lag of those partitions, in seconds (the age of the oldest
    /// unread message).
    #[serde(default, rename = "maxTimeLag", deserialize_with = "de::count")]
    pub max_time_lag_seconds: u64,
    /// How it stands.
    pub state: GroupState,
    /// `all` or `new`: where it started reading.
    #[serde(default)]
    pub subscription_mode: Option<String>,
    /// The time a `new` subscription started from (ISO-8601).
    #[serde(default)]
    pub subscription_timestamp: Option<String>,
    /// When the subscription was made, when the broker keeps it.
    #[serde(default)]
    pub subscription_created_at: Option<String>,
}

impl GroupSummary {
    /// [`GroupSummary::max_time_lag_seconds`] as a duration.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SubscriptionMode};
    /// client.push(vec![PushItem::new("orders", &1)]).await?;
    /// client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).send().await?;
    /// let g = &client.consumer_groups().await?[0];
    /// assert!(g.max_time_lag() < std::time::Duration::from_secs(60));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn max_time_lag(&self) -> Duration {
        Duration::from_secs(self.max_time_lag_seconds)
    }
}

/// One partition of a [`GroupDetail`]: where the group's cursor stands there.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{PushItem, SubscriptionMode};
/// client.push((0..2).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(1).send().await?;
/// let detail = client.consumer_group("billing").await?;
/// let p = &detail.partitions("orders")[0];
/// assert_eq!((p.partition.as_str(), p.cursor, p.offset_lag), ("Default", Some(0), 2));
/// assert!(p.lease_active); // the popped message is still leased
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct GroupPartition {
    /// The partition's name.
    pub partition: String,
    /// Its opaque id.
    #[serde(default, deserialize_with = "de::text")]
    pub partition_id: String,
    /// The worker holding it, when the broker tracks workers.
    #[serde(default)]
    pub worker_id: Option<String>,
    /// When the group last consumed there, when the broker keeps it.
    #[serde(default)]
    pub last_consumed_at: Option<String>,
    /// Offsets the group has committed there.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub total_consumed: Option<u64>,
    /// The next offset the group will read.
    #[serde(default, deserialize_with = "de::opt_count")]
    pub cursor: Option<u64>,
    /// Messages left to read.
    #[serde(default, deserialize_with = "de::count")]
    pub offset_lag: u64,
    /// Age in seconds of the oldest unread message (0 when caught up).
    #[serde(default, deserialize_with = "de::count")]
    pub time_lag_seconds: u64,
    /// Whether a lease is held there now.
    #[serde(default, deserialize_with = "de::flag")]
    pub lease_active: bool,
    /// When that lease ends (ISO-8601).
    #[serde(default)]
    pub lease_expires_at: Option<String>,
}

/// One group's positions on every queue it reads ([`Client::consumer_group`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{PushItem, SubscriptionMode};
/// client.push(vec![PushItem::new("orders", &1), PushItem::new("refunds", &2)]).await?;
/// for q in ["orders", "refunds"] {
///     client.pop::<u32>(q).group("audit").subscription(SubscriptionMode::All).auto_ack().send().await?;
/// }
/// let d = client.consumer_group("audit").await?;
/// assert_eq!(d.queues.keys().collect::<Vec<_>>(), ["orders", "refunds"]);
/// assert_eq!(d.total_lag(), 0); // auto-acked: nothing left
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct GroupDetail {
    /// The group.
    pub group: String,
    /// Its partitions, by queue name.
    pub queues: BTreeMap<String, Vec<GroupPartition>>,
}

impl GroupDetail {
    /// The group's partitions on `queue` (empty when it has no cursor there).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let d = client.consumer_group("nobody").await?;
    /// assert!(d.partitions("orders").is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn partitions(&self, queue: &str) -> &[GroupPartition] {
        self.queues.get(queue).map_or(&[], Vec::as_slice)
    }

    /// Messages left to read, over every queue and partition.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SubscriptionMode};
    /// client.push((0..5).map(|n| PushItem::new("orders", &n)).collect()).await?;
    /// client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(2).auto_ack().send().await?;
    /// assert_eq!(client.consumer_group("billing").await?.total_lag(), 3);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn total_lag(&self) -> u64 {
        self.queues.values().flatten().map(|p| p.offset_lag).sum()
    }
}

/// One partition where a group has fallen behind ([`Client::lagging_groups`]).
/// The wire rows are snake_case, unlike the other operator reads.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use queen_mock_broker::{ManualClock, MockBroker};
/// use queen_sdk::{PushItem, SubscriptionMode};
/// let clock = ManualClock::new();
/// let broker = MockBroker::builder().clock(clock.clone()).start().await?;
/// let client = queen_sdk::Client::new(broker.url())?;
/// client.push((0..2).map(|n| PushItem::new("orders", &n)).collect()).await?;
/// client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(1).auto_ack().send().await?;
/// clock.advance(Duration::from_secs(7200));
/// let row = &client.lagging_groups(Duration::from_secs(3600)).await?[0];
/// assert_eq!((row.consumer_group.as_str(), row.queue_name.as_str(), row.offset_lag), ("billing", "orders", 1));
/// assert_eq!((row.time_lag_seconds, row.lag_hours), (7200, Some(2.0)));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[non_exhaustive]
pub struct LaggingPartition {
    /// The group.
    pub consumer_group: String,
    /// The queue.
    pub queue_name: String,
    /// The partition's name.
    #[serde(default)]
    pub partition_name: String,
    /// Its opaque id.
    #[serde(default, deserialize_with = "de::text")]
    pub partition_id: String,
    /// The worker holding it, when the broker tracks workers.
    #[serde(default)]
    pub worker_id: Option<String>,
    /// Messages left to read.
    #[serde(default, deserialize_with = "de::count")]
    pub offset_lag: u64,
    /// Age in seconds of the oldest unread message.
    #[serde(default, deserialize_with = "de::count")]
    pub time_lag_seconds: u64,
    /// The same in hours, as the broker rounds it.
    #[serde(default, deserialize_with = "de::opt_f64")]
    pub lag_hours: Option<f64>,
    /// When the oldest unread message was stored (ISO-8601).
    #[serde(default)]
    pub oldest_unconsumed_at: Option<String>,
    /// When the group last consumed there, when the broker keeps it.
    #[serde(default)]
    pub last_consumed_at: Option<String>,
}

/// `lagging` is a route of its own: `GET /api/v1/consumer-groups/lagging` is never a
/// group's detail, on this broker or on the Queen server.
const LAGGING_SEGMENT: &str = "lagging";

impl Client {
    /// Every (group, queue) with its lag (`GET /api/v1/consumer-groups`). The
    /// competing-consumers group (`__QUEUE_MODE__`) is not listed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SubscriptionMode};
    /// client.push(vec![PushItem::new("orders", &1)]).await?;
    /// for g in ["billing", "audit"] {
    ///     client.pop::<u32>("orders").group(g).subscription(SubscriptionMode::All).send().await?;
    /// }
    /// let mut names: Vec<String> = client.consumer_groups().await?.into_iter().map(|g| g.name).collect();
    /// names.sort();
    /// assert_eq!(names, ["audit", "billing"]);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn consumer_groups(&self) -> Result<Vec<GroupSummary>> {
        let answer = self
            .call::<()>(
                Method::GET,
                "/api/v1/consumer-groups",
                None,
                None,
                Opts::SAFE,
            )
            .await?;
        // A bare array (the Queen server's shape); an empty body is no group.
        Ok(answer
            .decode::<Option<Vec<GroupSummary>>>("consumer group list")?
            .unwrap_or_default())
    }

    /// One group's position and lag on every partition of every queue it reads
    /// (`GET /api/v1/consumer-groups/{group}`). A group unknown to the broker has no
    /// queues. The name `lagging` is refused before sending: that path is
    /// [`Client::lagging_groups`]'s route.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{AckStatus, PushItem, SubscriptionMode};
    /// client.push((0..3).map(|n| PushItem::new("orders", &n).partition("eu")).collect()).await?;
    /// let got = client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(2).send().await?;
    /// client.ack(&got[1], AckStatus::Completed).await?;
    /// let detail = client.consumer_group("billing").await?;
    /// let p = &detail.partitions("orders")[0];
    /// assert_eq!((p.partition.as_str(), p.cursor, p.offset_lag, p.lease_active), ("eu", Some(2), 1, false));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn consumer_group(&self, group: &str) -> Result<GroupDetail> {
        validate::name("consumer_group", group)?;
        if group == LAGGING_SEGMENT {
            return Err(Error::invalid(
                "consumer_group",
                "a group named \"lagging\" has no detail route (that path lists lagging groups)",
            ));
        }
        #[derive(Deserialize)]
        struct Lanes {
            #[serde(default)]
            partitions: Vec<GroupPartition>,
        }
        let path = format!("/api/v1/consumer-groups/{}", validate::segment(group));
        let answer = self
            .call::<()>(Method::GET, &path, None, None, Opts::SAFE)
            .await?;
        let by_queue = answer
            .decode::<Option<BTreeMap<String, Lanes>>>("consumer group detail")?
            .unwrap_or_default();
        Ok(GroupDetail {
            group: group.to_string(),
            queues: by_queue
                .into_iter()
                .map(|(q, l)| (q, l.partitions))
                .collect(),
        })
    }

    /// Every partition where a group's oldest unread message is more than `min_lag`
    /// old, the oldest first (`GET /api/v1/consumer-groups/lagging?minLagSeconds=`;
    /// `min_lag` is sent in whole seconds, rounded down). Partitions with nothing left
    /// to read are never listed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::{ManualClock, MockBroker};
    /// use queen_sdk::{PushItem, SubscriptionMode};
    /// let clock = ManualClock::new();
    /// let broker = MockBroker::builder().clock(clock.clone()).start().await?;
    /// let client = queen_sdk::Client::new(broker.url())?;
    /// client.push(vec![PushItem::new("orders", &1)]).await?;
    /// // The group subscribes, but does not read the message.
    /// client.pop::<u32>("orders").group("billing").subscription(SubscriptionMode::All).batch(1).send().await?;
    /// clock.advance(Duration::from_secs(90));
    /// assert_eq!(client.lagging_groups(Duration::from_secs(60)).await?.len(), 1);
    /// assert!(client.lagging_groups(Duration::from_secs(3600)).await?.is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn lagging_groups(&self, min_lag: Duration) -> Result<Vec<LaggingPartition>> {
        // The broker reads a signed 64-bit number of seconds.
        let secs = min_lag.as_secs().min(i64::MAX as u64);
        let params = [("minLagSeconds", secs.to_string())];
        let answer = self
            .call(
                Method::GET,
                "/api/v1/consumer-groups/lagging",
                Some(&params),
                None,
                Opts::SAFE,
            )
            .await?;
        Ok(answer
            .decode::<Option<Vec<LaggingPartition>>>("lagging groups")?
            .unwrap_or_default())
    }
}
