//! The transaction-only parts: push items and positions. KV operations are built in
//! [`crate::kv`] (beside `KvStore`), timer operations in [`crate::timers`] (beside `Timers`).

use serde::Serialize;
use serde_json::value::RawValue;

/// One pushed item. Configure it in [`crate::TransactionBuilder::push`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let c = client
///     .transaction()
///     .push("receipts", |p| p.partition("customer-1").payload(&"receipt 1"))
///     .push("receipts", |p| p.partition("customer-2").payload(&"receipt 2"))
///     .commit()
///     .await?
///     .committed()
///     .unwrap();
/// assert_eq!(c.pushes().count(), 2);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Push {
    pub(crate) queue: String,
    pub(crate) partition: Option<String>,
    /// Rendered once, when set: the body embeds the text (no tree is kept or walked).
    pub(crate) payload: Option<Result<Box<RawValue>, String>>,
    pub(crate) transaction_id: Option<String>,
    pub(crate) trace_id: Option<String>,
}

impl Push {
    /// The partition (default `Default`).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let body = client.transaction().push("receipts", |p| p.partition("customer-1")).to_body()?;
    /// assert_eq!(body["operations"][0]["items"][0]["partition"], "customer-1");
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The payload (default `{}`). One that does not serialise fails the transaction
    /// with [`crate::Error::Invalid`] before anything is sent.
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// #[derive(serde::Serialize)]
    /// struct Receipt { order_id: String, total: f64 }
    /// let receipt = Receipt { order_id: "o-7".into(), total: 12.5 };
    /// let body = client.transaction().push("receipts", |p| p.payload(&receipt)).to_body()?;
    /// assert_eq!(body["operations"][0]["items"][0]["payload"]["total"], 12.5);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        self.payload = Some(serde_json::value::to_raw_value(payload).map_err(|e| e.to_string()));
        self
    }

    /// The dedup key. Without one, a step that acks messages gets one derived from
    /// them (the same on every run of the step); see [`crate::derive_id`]. The broker
    /// recognises a second push of it only within the queue's dedup window
    /// (`dedupWindowSeconds`, default 3600 s, counted from the first push;
    /// [`QueueOptions::dedup_window`](crate::QueueOptions::dedup_window)): a step run
    /// again later than that pushes again. A worker counts deliveries older than the
    /// window ([`Worker::past_dedup_window`](crate::Worker::past_dedup_window)).
    ///
    /// ```
    /// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// use queen_sdk::derive_id;
    /// let id = derive_id(&["invoice", "order-7"]);
    /// let body = client.transaction().push("invoices", |p| p.transaction_id(&id)).to_body()?;
    /// assert_eq!(body["operations"][0]["items"][0]["transactionId"], id.as_str());
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = Some(id.into());
        self
    }

    /// A trace id kept on the message.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// client.transaction().push("receipts", |p| p.trace_id("trace-42")).commit().await?.committed().unwrap();
    /// let msgs = client.pop::<serde_json::Value>("receipts").send().await?;
    /// assert_eq!(msgs[0].trace_id.as_deref(), Some("trace-42"));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn trace_id(mut self, id: impl Into<String>) -> Self {
        self.trace_id = Some(id.into());
        self
    }
}

/// A consumer group's next offset on a partition, set by
/// [`crate::TransactionBuilder::position`]; its wire form is an entry of `positions`
/// (the fields in the order the JSON tree used to send them, by name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Position {
    pub(crate) consumer_group: String,
    pub(crate) offset: u64,
    pub(crate) partition: String,
    pub(crate) queue: String,
}
