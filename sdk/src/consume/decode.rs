//! Each popped payload decoded on its own: one that does not fit the consumer's type
//! does not fail the messages around it.

use serde::de::DeserializeOwned;
use serde_json::Value;

use super::poll::RawMessage;
use crate::message::Message;

/// What a consumer does with a message whose payload does not decode as its type.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use futures::StreamExt;
/// use queen_sdk::{AckStatus, Error, PushItem, Undecodable};
/// client.push(vec![PushItem::new("jobs", &"not a number"), PushItem::new("jobs", &7)]).await?;
/// let mut jobs = client.consume::<u32>("jobs").undecodable(Undecodable::Yield).stream();
/// match jobs.next().await.expect("the stream never ends") {
///     Err(Error::Undecodable { delivery, reason }) => {
///         println!("{reason}");
///         client.ack(&delivery, AckStatus::Dlq).await?; // or fix it and complete it
///     }
///     other => panic!("expected the bad payload, got {other:?}"),
/// }
/// let next = jobs.next().await.expect("the stream never ends")?;
/// assert_eq!(next.data, 7); // the rest of the batch is delivered
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Undecodable {
    /// Dead-letter it (an ack `dlq` whose reason is the decoding error), log it, and go
    /// on with the next message. The default: a message that can never decode would
    /// otherwise come back after every lease and every restart.
    #[default]
    DeadLetter,
    /// Hand it over as [`crate::Error::Undecodable`], with its payload as JSON; it
    /// stays leased until you ack it.
    Yield,
}

/// The message with its payload decoded, or the message with its payload as JSON and
/// the decoding error.
#[allow(clippy::result_large_err)] // both sides are the message itself
pub(crate) fn decode<T: DeserializeOwned>(
    raw: RawMessage,
) -> Result<Message<T>, (Message<Value>, String)> {
    match serde_json::from_str::<T>(raw.data.get()) {
        Ok(data) => Ok(with_data(raw, data)),
        Err(e) => {
            // The broker sent JSON, so it parses as a tree whatever its shape.
            let tree = serde_json::from_str(raw.data.get()).unwrap_or(Value::Null);
            Err((with_data(raw, tree), e.to_string()))
        }
    }
}

/// `m` with `data` in place of its payload.
pub(crate) fn with_data<U, V>(m: Message<U>, data: V) -> Message<V> {
    Message {
        id: m.id,
        transaction_id: m.transaction_id,
        data,
        partition_id: m.partition_id,
        partition: m.partition,
        lease_id: m.lease_id,
        consumer_group: m.consumer_group,
        queue: m.queue,
        offset: m.offset,
        delivery_attempt: m.delivery_attempt,
        trace_id: m.trace_id,
        producer_sub: m.producer_sub,
        created_at: m.created_at,
    }
}
