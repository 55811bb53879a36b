//! Operator reads and hand actions: what a team's tooling, health checks and runbooks
//! ask a broker from code.
//!
//! - queues: [`Client::list_queues`], [`Client::queue_stats`] (options, totals and
//!   each partition's figures), [`Client::queue_depth`], [`Client::busiest_partitions`];
//! - consumer groups: [`Client::consumer_groups`], [`Client::consumer_group`] (lag per
//!   queue and partition), [`Client::lagging_groups`];
//! - messages: [`Client::message`] (one message and where it stands for each group),
//!   [`Client::messages`] (the listing), and for dead letters (listed by
//!   [`Client::dlq`]) [`Client::retry_message`] and [`Client::delete_message`].
//!
//! Every read is safe to retry. Names are checked before anything is sent
//! ([`crate::Error::Invalid`]); a queue or message the broker does not have is an
//! [`crate::Error::Api`] with status 404 ([`crate::Error::is_not_found`]). These answers
//! are report-shaped and grow with the broker: their structs are `#[non_exhaustive]`,
//! unknown keys are ignored, keys a broker may leave out are `Option`, and a figure
//! that comes as a float or a numeric string still reads.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
//! # let client = queen_sdk::Client::new(broker.url())?;
//! use queen_sdk::{AckStatus, DlqQuery, PushItem, QueueOptions};
//! client.configure("orders", QueueOptions::new().retry_limit(0)).await?;
//! client.push(vec![PushItem::new("orders", &"o-7")]).await?;
//! let msg = client.pop::<String>("orders").send().await?.remove(0);
//! client.ack(&msg, AckStatus::Failed { error: "card declined".into() }).await?;
//!
//! // The runbook: what is dead, why, and replay it once the cause is fixed.
//! assert_eq!(client.queue_stats("orders").await?.totals.dead_letter, 1);
//! for dead in client.dlq::<String>(DlqQuery::queue("orders")).await?.messages {
//!     println!("{} failed: {:?}", dead.transaction_id, dead.error_message);
//!     client.retry_message(&dead.partition_id, &dead.transaction_id).await?;
//! }
//! assert_eq!(client.queue_depth("orders", None).await?.pending, 1);
//! # broker.shutdown().await;
//! # Ok(())
//! # }
//! ```

#[cfg(doc)]
use crate::Client;

mod de;
mod groups;
mod messages;
mod queues;

pub use groups::{GroupDetail, GroupPartition, GroupState, GroupSummary, LaggingPartition};
pub use messages::{
    ConsumerMode, DeadLetterHandled, ListedMessage, MessageDetail, MessageGroup, MessagePage,
    MessageQuery, MessageStatus,
};
pub use queues::{
    MessageCounts, PartitionDepth, PartitionLoad, PartitionStats, QueueDepth, QueueDetail,
    QueueSummary,
};
