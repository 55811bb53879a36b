//! The transaction builder: a worker's whole step as one atomic call.
//!
//! ```no_run
//! # async fn demo(client: queen_sdk::Client, msg: queen_sdk::Message) -> queen_sdk::Result<()> {
//! use std::time::Duration;
//! use queen_sdk::{AckStatus, Commit, Ttl};
//! use serde_json::json;
//!
//! let outcome = client
//!     .transaction()
//!     .ack(&msg)
//!     .push("receipts", |p| p.partition("customer-123").payload(&json!({"orderId": "order-7"})))
//!     .kv(|k| k.put("orders", "order-7", &json!({"status": "paid"}), Ttl::days(30)))
//!     .once("paid", "order-7-paid", Ttl::days(1))
//!     .timer("reminders", "order-7", |t| t.after(Duration::from_secs(86_400)).payload(&json!({"orderId": "order-7"})))
//!     .commit()
//!     .await?;
//! match outcome {
//!     Commit::Committed(c) => println!("receipt {}", c.pushes().next().unwrap().message_id),
//!     // Already paid: the step's ack rolled back with it, so ack the message on its
//!     // own, or it comes back at every lease expiry (`Client::worker` does this for you).
//!     Commit::Gated { gate, .. } if gate.already_done() => {
//!         println!("already paid ({gate})");
//!         client.ack(&msg, AckStatus::Completed).await?;
//!     }
//!     // Another gate refused it: nothing was written, and it was not done.
//!     Commit::Gated { gate, .. } => println!("refused: {gate}"),
//! }
//! # Ok(()) }
//! ```

mod commit;
mod gate;
mod ops;
mod parts;
mod render;
mod resend;
pub(crate) mod results;
mod ttl;
mod wire;

pub use gate::{Gate, GateKind, KvReason};
pub(crate) use ops::Position;
pub use ops::Push;
pub use resend::{Resend, STEP_MARKER_NS};
pub(crate) use results::gate_fields;
pub use results::{
    AckResult, Commit, Committed, KvResult, PositionResult, PushResult, StepResult, TimerResult,
    TimerStatus,
};
pub use ttl::Ttl;

use crate::client::Client;
use crate::epoch::Epoch;
use crate::kv::KvOp;
use crate::locks::LockGuard;
use crate::message::AckStatus;
use crate::timers::TimerSpec;

#[derive(Debug, Clone)]
enum Operation {
    Ack {
        message_id: String,
        transaction_id: String,
        partition_id: String,
        group: String,
        lease_id: Option<String>,
        status: AckStatus,
    },
    Push(Push),
}

/// Builds one transaction. Start it with [`Client::transaction`], add its parts, then
/// [`TransactionBuilder::commit`]: everything applies, or nothing does. Nothing is sent
/// before `commit`, and a builder can be cloned to send the same step again.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
/// use std::time::Duration;
/// use queen_sdk::{Commit, Ttl};
/// use serde_json::json;
///
/// let outcome = client
///     .transaction()
///     .ack(&msg)
///     .push("receipts", |p| p.partition("customer-1").payload(&json!({"orderId": "o-7"})))
///     .kv(|k| k.put("orders", "o-7", &json!({"status": "paid"}), Ttl::days(30)))
///     .once("paid", "o-7-paid", Ttl::days(1))
///     .timer("reminders", "o-7", |t| t.after(Duration::from_secs(86_400)).payload(&"o-7"))
///     .commit()
///     .await?;
/// let Commit::Committed(c) = outcome else { panic!("not gated: the marker was new") };
/// assert_eq!(c.pushes().count(), 1);
/// assert_eq!(c.kv().count(), 2);
/// assert_eq!(c.timers().next().unwrap().status, queen_sdk::TimerStatus::Scheduled);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a transaction does nothing until committed"]
pub struct TransactionBuilder {
    client: Client,
    ops: Vec<Operation>,
    /// Each KV operation with the call that made it (a gate's kind).
    kv: Vec<(KvOp, GateKind)>,
    timers: Vec<TimerSpec>,
    positions: Vec<Position>,
    /// How a step nothing else guards is resent.
    resend: Resend,
    /// Locks held until the commit answers ([`TransactionBuilder::hold`]).
    held: Vec<Held>,
    /// The generation of processing its derived ids and `once` markers belong to.
    epoch: Option<Epoch>,
}

/// A lock a step holds until its commit has answered, then releases. Shared by the
/// builder's clones: the first commit to answer releases it.
#[derive(Debug, Clone)]
struct Held(std::sync::Arc<std::sync::Mutex<Option<crate::Lock>>>);

impl Held {
    /// The lock's guard as of now (a renewal mints a new token), if it is still held.
    fn guard(&self) -> Option<LockGuard> {
        let held = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        held.as_ref().map(crate::Lock::guard)
    }

    async fn release(&self) {
        let taken = self
            .0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        let Some(lock) = taken else {
            return;
        };
        let name = lock.name().to_string();
        match lock.release().await {
            Ok(released) => {
                tracing::debug!(lock = %name, released, "lock released after the commit")
            }
            // It lapses at its TTL; renewal stopped when the handle was dropped.
            Err(e) => {
                tracing::warn!(lock = %name, error = %e, "releasing the lock failed: it lapses at its TTL")
            }
        }
    }
}

impl Client {
    /// Starts a transaction; see [`TransactionBuilder`].
    ///
    /// ```
    /// # use queen_sdk::Ttl;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let outcome = client
    ///     .transaction()
    ///     .kv(|k| k.incr("stats", "orders", 1, Ttl::Forever))
    ///     .commit()
    ///     .await?;
    /// assert!(outcome.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn transaction(&self) -> TransactionBuilder {
        TransactionBuilder {
            client: self.clone(),
            ops: Vec::new(),
            kv: Vec::new(),
            timers: Vec::new(),
            positions: Vec::new(),
            resend: Resend::Marked,
            held: Vec::new(),
            epoch: None,
        }
    }
}
