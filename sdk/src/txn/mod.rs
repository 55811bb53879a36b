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

mod gate;
mod ops;
pub(crate) mod results;
mod ttl;
mod wire;

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};

use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;

pub use gate::{Gate, GateKind, KvReason};
pub(crate) use ops::Position;
pub use ops::Push;
pub(crate) use results::gate_fields;
pub use results::{
    AckResult, Commit, Committed, KvResult, PositionResult, PushResult, StepResult, TimerResult,
    TimerStatus,
};
pub use ttl::Ttl;

use crate::client::{Client, Replay};
use crate::error::{Capability, Error, Result, RollbackReason};
use crate::ids::{derive_id, derive_push_id, earliest_v7};
use crate::kv::{Kv, KvOp, KvWire};
use crate::locks::LockGuard;
use crate::message::{AckStatus, Message};
use crate::timers::{TimerAction, TimerOp, TimerSpec, TimerStart, TimerWire};
use crate::validate;

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
    retry_unsafe: bool,
    /// Locks held until the commit answers ([`TransactionBuilder::hold`]).
    held: Vec<Held>,
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
            retry_unsafe: false,
            held: Vec::new(),
        }
    }
}

impl TransactionBuilder {
    /// Acks `msg` as completed, fenced by its lease (see [`TransactionBuilder::ack_with`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// let outcome = client.transaction().ack(&msg).commit().await?;
    /// assert!(outcome.is_committed());
    /// assert!(client.pop::<serde_json::Value>("orders").send().await?.is_empty()); // done
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ack<T>(self, msg: &Message<T>) -> Self {
        self.ack_with(msg, AckStatus::Completed)
    }

    /// Acks `msg` with a status, fenced by its lease. The lease goes on the ack and into
    /// `requiredLeases`, as every SDK does, so an expired or stolen lease rolls the
    /// whole step back instead of acking someone else's delivery.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// use queen_sdk::{AckStatus, Error, RollbackReason};
    /// let failed = AckStatus::Failed { error: "payment service down".into() };
    /// client.transaction().ack_with(&msg, failed.clone()).commit().await?.committed().unwrap();
    /// // The ack ended this delivery and released its lease: acking it again rolls back.
    /// let again = client.transaction().ack_with(&msg, failed).commit().await;
    /// assert!(matches!(again, Err(Error::RolledBack { reason: RollbackReason::RejectedAck, .. })));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ack_with<T>(mut self, msg: &Message<T>, status: AckStatus) -> Self {
        self.ops.push(Operation::Ack {
            message_id: msg.id.clone(),
            transaction_id: msg.transaction_id.clone(),
            partition_id: msg.partition_id.clone(),
            group: msg.consumer_group.clone(),
            lease_id: (!msg.lease_id.is_empty()).then(|| msg.lease_id.clone()),
            status,
        });
        self
    }

    /// Pushes one message to `queue`, configured by `f` (see [`Push`]). Without your own
    /// [`Push::transaction_id`], a push in a step that acks messages gets one derived from
    /// them, so a second run of the step names its push the same way and rolls back as
    /// `duplicate`; a step that acks nothing gets a new UUIDv7. A derived id is a UUIDv8
    /// that starts with the acked message's timestamp when the broker names messages
    /// with UUIDv7s (as Queen does), so derived ids sort by time as new ones do (a
    /// broker's duplicate index takes them at its edge), else a name-based UUIDv5.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// let step = client.transaction().ack(&msg).push("receipts", |p| p.payload(&"receipt for o-7"));
    /// let (a, b) = (step.to_body()?, step.to_body()?);
    /// let id = &a["operations"][1]["items"][0]["transactionId"];
    /// assert_eq!(id, &b["operations"][1]["items"][0]["transactionId"]); // derived, stable
    /// assert!(step.commit().await?.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn push(mut self, queue: impl Into<String>, f: impl FnOnce(Push) -> Push) -> Self {
        let p = f(Push {
            queue: queue.into(),
            ..Default::default()
        });
        self.ops.push(Operation::Push(p));
        self
    }

    /// Adds one KV operation built by `f` from [`Kv`] (any operation's builder: it
    /// converts into a [`KvOp`]). A write takes its expiry as an argument ([`Ttl`]); a
    /// key may be written once per transaction. A `required` operation is a gate: if it
    /// does not apply, the step answers [`Commit::Gated`] (kind
    /// [`GateKind::Condition`]) and writes nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let c = client
    ///     .transaction()
    ///     .kv(|k| k.put("carts", "c-1", &serde_json::json!({"items": 2}), Ttl::hours(1)))
    ///     .kv(|k| k.get("carts", "c-2"))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .expect("nothing required");
    /// let results: Vec<_> = c.kv().collect();
    /// assert_eq!(results[0].applied, Some(true));
    /// assert_eq!(results[1].found, Some(false));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn kv<O: Into<KvOp>>(mut self, f: impl FnOnce(Kv) -> O) -> Self {
        self.kv.push((f(Kv).into(), GateKind::Condition));
        self
    }

    /// Gates the step on a marker: `putIfAbsent` of `true` with `required`. A second
    /// run of the same step answers [`Commit::Gated`] (its [`Gate::already_done`]) and
    /// writes nothing. The broker names the first gate that fails in the order the KV
    /// operations were added, so put `once` before the step's other gates (a stock
    /// condition its first run changed would otherwise answer first, as a refusal).
    /// The marker's `ttl` is how long a second run is recognized as done: choose it
    /// longer than any redelivery or producer duplicate can arrive ([`Ttl::Forever`]
    /// for duplicates a producer may send at any time).
    /// What the broker checks before the KV operations fires first, though: a fenced
    /// ack whose lease is gone (`rejected_ack`) or a push whose `transactionId` is
    /// already stored (`duplicate`) rolls the step back as [`Error::RolledBack`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let step = client
    ///     .transaction()
    ///     .once("invoiced", "order-7", Ttl::days(7))
    ///     .push("invoices", |p| p.payload(&"order-7"));
    /// assert!(step.clone().commit().await?.is_committed());
    /// match step.commit().await? {
    ///     Commit::Gated { gate, .. } => assert!(gate.already_done()), // the marker exists
    ///     Commit::Committed(_) => panic!("the marker was set"),
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn once(
        mut self,
        ns: impl Into<String>,
        key: impl Into<String>,
        ttl: impl Into<Ttl>,
    ) -> Self {
        let marker = Kv.put_if_absent(ns, key, &true, ttl).required();
        self.kv.push((marker.into(), GateKind::Once));
        self
    }

    /// Adds a timer operation on the timer `key` of `queue`, made by `f` from a
    /// [`TimerStart`]: when it fires ([`TimerStart::after`], [`TimerStart::at`]: the
    /// [`Timer`](crate::Timer) then takes a payload, a partition, a `txn`), or
    /// [`TimerStart::cancel`]. When it fires, its payload is pushed to `queue`. A timer
    /// key may appear once per transaction.
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
    /// let timer = c.timers().next().unwrap();
    /// assert!(timer.ok && timer.deliver_at.is_some());
    /// assert_eq!(broker.inspect().timers("reminders")?[0].key, "order-7");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn timer<O: Into<TimerOp>>(
        mut self,
        queue: impl Into<String>,
        key: impl Into<String>,
        f: impl FnOnce(TimerStart) -> O,
    ) -> Self {
        let op = f(TimerStart::new(queue.into(), key.into())).into();
        self.timers.push(op.into_spec());
        self
    }

    /// How the step acks `msg` (the same message, in the same group), if it does.
    pub(crate) fn ack_status<T>(&self, msg: &Message<T>) -> Option<&AckStatus> {
        self.ops.iter().find_map(|op| match op {
            Operation::Ack {
                transaction_id,
                partition_id,
                group,
                status,
                ..
            } if *transaction_id == msg.transaction_id
                && *partition_id == msg.partition_id
                && *group == msg.consumer_group =>
            {
                Some(status)
            }
            _ => None,
        })
    }

    /// Sets the next offset `group` reads on a partition, by the partition's name (and
    /// releases the group's lease there). An offset past the partition's end rolls the step
    /// back (`rejected_position`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, SubscriptionMode};
    /// client.push((0..3).map(|n| PushItem::new("events", &n)).collect()).await?;
    /// // Have "audit" skip the first two events.
    /// let outcome = client.transaction().position("events", "audit", "Default", 2).commit().await?;
    /// assert!(outcome.is_committed());
    /// let next = client.pop::<u32>("events").group("audit").subscription(SubscriptionMode::All).send().await?;
    /// assert_eq!(next[0].data, 2);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn position(
        mut self,
        queue: impl Into<String>,
        group: impl Into<String>,
        partition: impl Into<String>,
        offset: u64,
    ) -> Self {
        self.positions.push(Position {
            queue: queue.into(),
            consumer_group: group.into(),
            partition: partition.into(),
            offset,
        });
        self
    }

    /// Commits only while `lock` is still held: a `required` check of the lock row's
    /// version, so a lost lock answers [`Commit::Gated`] and writes nothing.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// let outcome = client
    ///     .transaction()
    ///     .guard(&lock.guard())
    ///     .kv(|k| k.put("reports", "nightly", &"done", Ttl::days(1)))
    ///     .commit()
    ///     .await?;
    /// assert!(outcome.is_committed());
    /// let stale = lock.guard();
    /// lock.release().await?;
    /// let late = client.transaction().guard(&stale).kv(|k| k.delete("reports", "nightly")).commit().await?;
    /// assert!(!late.is_committed()); // gated: the lock is no longer held
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn guard(mut self, lock: &LockGuard) -> Self {
        let key = format!("{}#{}", lock.name, lock.slot);
        let check = Kv
            .check(crate::locks::NAMESPACE, key, lock.token)
            .required();
        self.kv.push((check.into(), GateKind::Guard));
        self
    }

    /// Gates the step on `lock` (as [`TransactionBuilder::guard`], with the lock's token
    /// as of the commit, after the step's other KV operations) and keeps the lock
    /// until the commit has answered, whatever it answered, then releases it: for a
    /// worker's handler that takes a lock for its step, so the lock is released after
    /// the step settles with no code after the commit (the handler returns the step
    /// before the runtime commits it). A step that is never committed (its handler
    /// failed after taking the lock, its lease was lost first) drops the lock unreleased:
    /// it stops renewing and lapses at its TTL.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{PushItem, StartAt, Ttl};
    /// client.kv().put("stock", "sku-1", &5, Ttl::Forever).await?;
    /// client.push(vec![PushItem::new("reservations", &"sku-1")]).await?;
    /// let summary = client
    ///     .worker::<String>("reservations")
    ///     .group("inventory", StartAt::Beginning)
    ///     .run_until_idle(|msg, step| async move {
    ///         let sku = msg.data.clone();
    ///         // One reservation per SKU at a time, across workers.
    ///         let Some(lock) = step.client().lock(format!("sku-{sku}")).acquire().await? else {
    ///             anyhow::bail!("sku-{sku} is busy: try again");
    ///         };
    ///         Ok(step.kv(|k| k.incr("stock", &sku, -1, Ttl::Forever).min(0).required()).hold(lock))
    ///     })
    ///     .await?;
    /// assert_eq!(summary.committed, 1);
    /// // Released once the step settled: free again.
    /// assert!(client.lock("sku-sku-1").acquire().await?.is_some());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn hold(mut self, lock: crate::Lock) -> Self {
        self.held
            .push(Held(std::sync::Arc::new(std::sync::Mutex::new(Some(lock)))));
        self
    }

    /// This step with the guards of its held locks as of now, after its own KV
    /// operations: taken when the step is rendered, not when `hold` was called, since a
    /// lock's renewal mints a new token.
    fn with_held_guards(&self) -> TransactionBuilder {
        let mut this = self.clone();
        this.held.clear();
        for guard in self.held.iter().filter_map(Held::guard) {
            this = this.guard(&guard);
        }
        this
    }

    /// The client this transaction is sent with: for a handler's other calls (a lock, a
    /// KV read) without a client of its own.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let step = client.transaction();
    /// assert!(step.client().kv().get::<u32>("stock", "sku-1").await?.is_none());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Retries this transaction after a 5xx or a lost connection even though it is not
    /// idempotent by construction (no fenced ack, no deterministic push, no gate).
    ///
    /// ```
    /// # use queen_sdk::Ttl;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_mock_broker::harness::Fault;
    /// use queen_sdk::Error;
    /// let count = || client.transaction().kv(|k| k.incr("stats", "visits", 1, Ttl::Forever));
    /// // The broker commits, then the answer is lost.
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// assert!(matches!(count().commit().await, Err(Error::OutcomeUnknown { .. })));
    /// // Opted in, the step is sent again (and here counts twice).
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// let c = count().retry_unsafe(true).commit().await?.committed().unwrap();
    /// assert!(c.retried);
    /// assert_eq!(c.kv().next().unwrap().value, Some(serde_json::json!(3)));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn retry_unsafe(mut self, yes: bool) -> Self {
        self.retry_unsafe = yes;
        self
    }

    /// An unleased (autoAck) message acked beside leased ones would be fenced by their
    /// lease (the spec's second lease-resolution rule) and roll the step back.
    fn check_ack_mix(&self) -> Result<()> {
        let (mut leased, mut unleased) = (false, false);
        for o in &self.ops {
            if let Operation::Ack { lease_id, .. } = o {
                if lease_id.is_some() {
                    leased = true;
                } else {
                    unleased = true;
                }
            }
        }
        if leased && unleased {
            return Err(Error::invalid(
                "ack",
                "an autoAck (unleased) message cannot be acked in the same transaction as leased ones: \
                 the broker would fence it with their lease",
            ));
        }
        Ok(())
    }

    /// Whether sending the body twice is harmless: a fenced ack, a required gate, or
    /// pushes whose ids are all deterministic make the second attempt roll back.
    fn replay(&self, pushes_deterministic: bool) -> Replay {
        let fenced = self.ops.iter().any(|o| {
            matches!(
                o,
                Operation::Ack {
                    lease_id: Some(_),
                    ..
                }
            )
        });
        let gated = self.kv.iter().any(|(k, _)| k.required());
        let has_push = self.ops.iter().any(|o| matches!(o, Operation::Push(_)));
        if self.retry_unsafe || fenced || gated || (has_push && pushes_deterministic) {
            Replay::Safe
        } else {
            Replay::Unsafe
        }
    }

    /// Checks every limit and renders the request body that
    /// [`TransactionBuilder::commit`] would send, without sending it; `Err` is the error
    /// `commit` would answer. A push that derives no id (its step acks nothing) gets a new
    /// UUIDv7 on every call.
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let body = client
    ///     .transaction()
    ///     .kv(|k| k.put("orders", "o-7", &"paid", Ttl::days(1)))
    ///     .to_body()?;
    /// assert_eq!(
    ///     body,
    ///     serde_json::json!({"kv": [{"op": "put", "ns": "orders", "key": "o-7", "value": "paid", "ttlSeconds": 86_400}]})
    /// );
    /// // A rule broken: nothing would be sent.
    /// assert!(client.transaction().to_body().is_err());
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn to_body(&self) -> Result<Value> {
        let (bytes, _) = self.render()?;
        serde_json::from_slice(&bytes).map_err(|e| Error::invalid("transaction", e.to_string()))
    }

    /// The body [`commit`](TransactionBuilder::commit) would send, as the bytes it
    /// sends, after the same checks as [`to_body`](TransactionBuilder::to_body).
    ///
    /// ```
    /// let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let bytes = client
    ///     .transaction()
    ///     .push("receipts", |p| p.transaction_id("receipt-o-7").payload(&"o-7"))
    ///     .to_bytes()?;
    /// assert_eq!(
    ///     std::str::from_utf8(&bytes).unwrap(),
    ///     r#"{"operations":[{"type":"push","items":[{"queue":"receipts","partition":"Default","transactionId":"receipt-o-7","payload":"o-7"}]}]}"#
    /// );
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn to_bytes(&self) -> Result<Vec<u8>> {
        self.render().map(|(b, _)| b.into())
    }

    fn render(&self) -> Result<(bytes::Bytes, bool)> {
        if !self.held.is_empty() {
            return self.with_held_guards().render();
        }
        if self.ops.is_empty()
            && self.kv.is_empty()
            && self.timers.is_empty()
            && self.positions.is_empty()
        {
            return Err(Error::invalid(
                "transaction",
                "at least one of acks, pushes, kv, timers and positions is needed",
            ));
        }
        // The acked messages name the step: derived ids come from each acked message,
        // the group that acks it and how (a fan-out group's step, or a `failed` step and
        // a later `completed` one, are different steps with different effects).
        let acked_owned: Vec<String> = {
            let mut v: Vec<String> = self
                .ops
                .iter()
                .filter_map(|o| match o {
                    Operation::Ack {
                        message_id,
                        group,
                        status,
                        ..
                    } => Some(ack_name(message_id, group, status.wire().0)),
                    Operation::Push(_) => None,
                })
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let acked: Vec<&str> = acked_owned.iter().map(String::as_str).collect();
        // A derived push id sorts by the time of the earliest acked message.
        let after = earliest_v7(self.ops.iter().filter_map(|o| match o {
            Operation::Ack { message_id, .. } => Some(message_id.as_str()),
            Operation::Push(_) => None,
        }));
        self.check_ack_mix()?;

        let mut leases = BTreeSet::new();
        let mut ops = Vec::with_capacity(self.ops.len());
        // A push without a payload sends `{}`.
        let empty: &RawValue = serde_json::from_str("{}").expect("{} is JSON");
        let mut deterministic = true;
        let mut push_no = 0usize;
        for (i, op) in self.ops.iter().enumerate() {
            match op {
                Operation::Ack {
                    transaction_id,
                    partition_id,
                    group,
                    lease_id,
                    status,
                    ..
                } => {
                    let (status, error) = status.wire();
                    if let Some(l) = lease_id {
                        leases.insert(l.as_str());
                    }
                    ops.push(wire::Op::Ack(wire::Ack {
                        transaction_id,
                        partition_id,
                        consumer_group: group,
                        status,
                        lease_id: lease_id.as_deref(),
                        error,
                    }));
                }
                Operation::Push(p) => {
                    let op_name = validate::Part {
                        list: "operations",
                        index: i,
                        kind: Some("push"),
                    };
                    validate::name(&op_name, &p.queue)?;
                    let partition = p.partition.as_deref().unwrap_or(crate::DEFAULT_PARTITION);
                    validate::name(&op_name, partition)?;
                    let txn = match &p.transaction_id {
                        Some(t) => t.clone(),
                        None if !acked.is_empty() => {
                            let mut parts = vec!["push"];
                            parts.extend(acked.iter().copied());
                            let mut digits = itoa::Buffer::new();
                            let n = digits.format(push_no);
                            parts.extend([p.queue.as_str(), partition, n]);
                            derive_push_id(after, &parts)
                        }
                        None => {
                            deterministic = false;
                            uuid::Uuid::now_v7().to_string()
                        }
                    };
                    validate::transaction_id(&op_name, &txn)?;
                    let payload = match &p.payload {
                        None => empty,
                        Some(Ok(v)) => v,
                        Some(Err(e)) => {
                            return Err(Error::invalid(op_name, format!("payload: {e}")));
                        }
                    };
                    ops.push(wire::Op::Push {
                        items: [wire::PushItem {
                            queue: &p.queue,
                            partition,
                            transaction_id: txn,
                            payload,
                            trace_id: p.trace_id.as_deref(),
                        }],
                    });
                    push_no += 1;
                }
            }
        }

        let kv = self.render_kv()?;
        let timers = self.render_timers(&acked)?;
        for (i, p) in self.positions.iter().enumerate() {
            let op = validate::Part {
                list: "positions",
                index: i,
                kind: None,
            };
            validate::name(&op, &p.queue)?;
            validate::name(&op, &p.partition)?;
        }
        if self.positions.len() > validate::MAX_POSITIONS {
            return Err(Error::invalid(
                "positions",
                format!(
                    "{} positions; the limit is {}",
                    self.positions.len(),
                    validate::MAX_POSITIONS
                ),
            ));
        }
        let body = wire::Body {
            operations: ops,
            required_leases: leases,
            kv,
            timers,
            positions: &self.positions,
        };
        Ok((
            crate::json::render_sized(&body, self.body_size_hint())?,
            deterministic,
        ))
    }

    /// About the length of the rendered body, so that it is written into one buffer
    /// instead of one that doubles its way up (8 moves for a seed step's 900 bytes).
    fn body_size_hint(&self) -> usize {
        let pushed: usize = self
            .ops
            .iter()
            .map(|op| match op {
                Operation::Push(Push {
                    payload: Some(Ok(p)),
                    ..
                }) => p.get().len(),
                _ => 0,
            })
            .sum();
        let values: usize = self.kv.iter().map(|(k, _)| k.value_len()).sum();
        let timed: usize = self
            .timers
            .iter()
            .map(|t| match &t.payload {
                Some(Ok(p)) => p.len().div_ceil(3) * 4,
                _ => 0,
            })
            .sum();
        let parts = self.ops.len() + self.kv.len() + self.timers.len() + self.positions.len();
        64 + 192 * parts + pushed + values + timed
    }

    fn render_kv(&self) -> Result<Vec<KvWire<'_>>> {
        if self.kv.len() > validate::MAX_KV_OPS {
            return Err(Error::invalid(
                "kv",
                format!(
                    "{} KV operations; the limit is {}",
                    self.kv.len(),
                    validate::MAX_KV_OPS
                ),
            ));
        }
        let keys: usize = self.kv.iter().map(|(k, _)| k.key_count()).sum();
        if keys > validate::MAX_KV_KEYS {
            return Err(Error::invalid(
                "kv",
                format!("{keys} KV keys; the limit is {}", validate::MAX_KV_KEYS),
            ));
        }
        let mut written = HashSet::new();
        let mut out = Vec::with_capacity(self.kv.len());
        for (i, (k, _)) in self.kv.iter().enumerate() {
            let op = validate::Part {
                list: "kv",
                index: i,
                kind: Some(k.name()),
            };
            let wire = k.checked_wire(&op)?;
            if let Some(key) = k.written_key()
                // One operation cannot repeat itself (and the set is not allocated).
                && self.kv.len() > 1
                && !written.insert((k.ns(), key))
            {
                return Err(Error::invalid(
                    op,
                    format!("{}/{key} is written twice in one transaction", k.ns()),
                ));
            }
            out.push(wire);
        }
        Ok(out)
    }

    fn render_timers(&self, acked: &[&str]) -> Result<Vec<TimerWire<'_>>> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(self.timers.len());
        for (i, t) in self.timers.iter().enumerate() {
            let op = validate::Part {
                list: "timers",
                index: i,
                kind: None,
            };
            if self.timers.len() > 1 && !seen.insert((t.queue.as_str(), t.key.as_str())) {
                return Err(Error::invalid(
                    op,
                    format!("{}/{} appears twice in one transaction", t.queue, t.key),
                ));
            }
            let txn = match &t.txn {
                Some(x) => Some(Cow::Borrowed(x.as_str())),
                None if t.action == TimerAction::Cancel => None,
                None if !acked.is_empty() => {
                    let mut parts = vec!["timer"];
                    parts.extend(acked.iter().copied());
                    parts.extend([t.queue.as_str(), t.key.as_str()]);
                    Some(Cow::Owned(derive_id(&parts)))
                }
                None => None,
            };
            out.push(t.checked_wire(&op, txn)?);
        }
        Ok(out)
    }

    /// Validates, sends, and decodes the outcome.
    ///
    /// A lost `required` gate is [`Commit::Gated`]; any other rollback is
    /// [`Error::RolledBack`]. A 5xx or a lost connection is retried when the step is
    /// idempotent by construction (see [`TransactionBuilder::retry_unsafe`]); when a
    /// retry then rolls back as `duplicate`, `rejected_ack` or `kv_precondition`, the
    /// outcome says `retried: true`: the first attempt most probably committed.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
    /// # let msg = client.pop::<serde_json::Value>("orders").send().await?.remove(0);
    /// use queen_mock_broker::harness::Fault;
    /// use queen_sdk::{AckStatus, Commit, Error};
    /// let step = client.transaction().ack(&msg).push("receipts", |p| p.payload(&"receipt for o-7"));
    /// // The broker commits the step, then the connection drops before the answer.
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// match step.commit().await {
    ///     Ok(Commit::Committed(c)) => println!("committed {}", c.transaction_id),
    ///     // Already done (a `once` marker exists): its ack rolled back with it; settle
    ///     // the message on its own.
    ///     Ok(Commit::Gated { gate, .. }) if gate.already_done() => {
    ///         client.ack(&msg, AckStatus::Completed).await?;
    ///     }
    ///     // Refused by another gate: nothing written and nothing done.
    ///     Ok(Commit::Gated { gate, .. }) => println!("refused: {gate}"),
    ///     // The fenced, deterministic step was retried, and the retry found it done
    ///     // (its first attempt's ack applied).
    ///     Err(Error::RolledBack { retried: true, reason, .. }) => println!("done before ({reason})"),
    ///     Err(e) => return Err(e.into()),
    /// }
    /// assert_eq!(broker.inspect().messages("receipts", "Default")?.len(), 1); // pushed once
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn commit(self) -> Result<Commit> {
        let outcome = self.send().await;
        // Held locks go once the commit has answered, whatever it answered.
        for held in &self.held {
            held.release().await;
        }
        outcome
    }

    async fn send(&self) -> Result<Commit> {
        if !self.held.is_empty() {
            // The held locks' guards as of now, named in a refusal like any other gate.
            return Box::pin(self.with_held_guards().send()).await;
        }
        let (body, deterministic) = self.render()?;
        let v2_part = self.v2_part();
        if let Some(capability) = v2_part
            && self.client.lacks_v2_parts()
        {
            return Err(Error::Unsupported {
                capability,
                committed: false,
            });
        }
        let answer = self
            .client
            .post("/api/v1/transaction", body, self.replay(deterministic))
            .await?;
        let commit = decode_commit(&answer, |slot, reason, version, value| {
            let index = slot.saturating_sub(self.ops.len());
            let op = self.kv.get(index).map(|(op, kind)| (op, *kind));
            Gate::of(slot, index, op, reason, version, value)
        })?;
        // A Queen v0 broker ignores `kv`, `timers` and `positions` and commits the rest:
        // its results then hold only the operations'. Say so instead of reporting a
        // commit of parts that were never applied, and refuse them from now on.
        if let (Some(capability), Commit::Committed(c)) = (v2_part, &commit)
            && !self.client.has_v2_parts()
        {
            if !c.has_v2_result() {
                self.client.learn_lacks_v2_parts();
                return Err(Error::Unsupported {
                    capability,
                    committed: true,
                });
            }
            self.client.learn_has_v2_parts();
        }
        Ok(commit)
    }

    /// The first Queen 2 part (KV, timers, positions) this transaction carries.
    fn v2_part(&self) -> Option<Capability> {
        if !self.kv.is_empty() {
            Some(Capability::Kv)
        } else if !self.timers.is_empty() {
            Some(Capability::Timers)
        } else if !self.positions.is_empty() {
            Some(Capability::Positions)
        } else {
            None
        }
    }
}

/// An acked message's part of the name its step's derived ids come from: its id, the
/// group that acks it and the status, NUL-separated. Written by hand, into one buffer
/// of the right size, rather than through the formatter on every step.
fn ack_name(message_id: &str, group: &str, status: &str) -> String {
    let mut s = String::with_capacity(message_id.len() + group.len() + status.len() + 2);
    s.push_str(message_id);
    s.push('\0');
    s.push_str(group);
    s.push('\0');
    s.push_str(status);
    s
}

/// A transaction answer's envelope, decoded from its bytes; the per-step results are
/// only checked to be a JSON array here, and decoded when first read
/// ([`Committed::results`]).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct CommitAnswer<'a> {
    transaction_id: Option<String>,
    success: Option<bool>,
    reason: Option<String>,
    error: Option<String>,
    #[serde(borrow, default, deserialize_with = "raw_array")]
    results: Option<&'a RawValue>,
    // A lost `required` gate (`kv_precondition`).
    failed_index: Option<u64>,
    kv_reason: Option<String>,
    version: Option<u64>,
    value: Option<Value>,
}

/// `results` as its text, refused (as a typed decode would) unless it is an array or
/// `null`.
fn raw_array<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    let raw = <&RawValue>::deserialize(d)?;
    match raw.get().as_bytes().first() {
        Some(b'[') => Ok(Some(raw)),
        Some(b'n') => Ok(None),
        _ => Err(serde::de::Error::custom("results is not an array")),
    }
}

/// Where `text` lies in `body`, if it is a slice of it.
fn span_in(body: &[u8], text: &str) -> Option<std::ops::Range<usize>> {
    let start = (text.as_ptr() as usize).wrapping_sub(body.as_ptr() as usize);
    let span = start..start.checked_add(text.len())?;
    let inner = body.get(span.clone())?;
    std::ptr::eq(inner.as_ptr(), text.as_ptr()).then_some(span)
}

/// Decodes a transaction answer; `gate` names the gate of a `kv_precondition` rollback
/// from its slot, reason, version and value.
pub(crate) fn decode_commit(
    answer: &crate::client::Answer,
    gate: impl FnOnce(usize, &str, Option<u64>, Option<Value>) -> Gate,
) -> Result<Commit> {
    let retried = answer.maybe_applied_before;
    let b: CommitAnswer<'_> = answer.decode_borrowed("transaction answer")?;
    let id = b.transaction_id.unwrap_or_default();
    match b.success {
        Some(true) => {
            // The results' place in the body they were borrowed from (`decode_borrowed`
            // reads the body in place); a copy of their text should they ever not be.
            let (body, span) = match b.results.map(RawValue::get) {
                None => (answer.body.clone(), 0..0),
                Some(text) => match span_in(&answer.body, text) {
                    Some(span) => (answer.body.clone(), span),
                    None => (
                        bytes::Bytes::copy_from_slice(text.as_bytes()),
                        0..text.len(),
                    ),
                },
            };
            Ok(Commit::Committed(Committed::from_answer(
                id, retried, body, span,
            )))
        }
        Some(false) => {
            // Queen v0 rolls back with an `error` text and no `reason`: classify the text.
            let reason = match b.reason.as_deref() {
                Some(r) => RollbackReason::parse(r),
                None => RollbackReason::from_error_text(b.error.as_deref().unwrap_or("")),
            };
            if reason == RollbackReason::KvPrecondition {
                let gate = gate(
                    b.failed_index.unwrap_or(0) as usize,
                    b.kv_reason.as_deref().unwrap_or_default(),
                    b.version,
                    b.value.filter(|v| !v.is_null()),
                );
                return Ok(Commit::Gated {
                    transaction_id: id,
                    gate,
                    retried,
                });
            }
            Err(Error::RolledBack {
                reason,
                error: b.error.unwrap_or_default(),
                retried,
            })
        }
        None => Err(Error::Decode {
            message: "a transaction answer without success".into(),
            body: answer.text(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::span_in;

    #[test]
    fn results_borrowed_from_the_body_are_found_where_they_lie_and_a_copy_is_not() {
        let body = br#"{"results":[1,2]}"#;
        let borrowed = std::str::from_utf8(&body[11..16]).unwrap();
        assert_eq!(borrowed, "[1,2]");
        assert_eq!(span_in(body, borrowed), Some(11..16));
        let copy = String::from(borrowed);
        assert_eq!(span_in(body, &copy), None);
        // A slice running past the body's end is not in it.
        let longer = br#"{"results":[1,2]} and more"#;
        let past = std::str::from_utf8(&longer[11..22]).unwrap();
        assert_eq!(span_in(&longer[..17], past), None);
    }
}
