//! The parts a step is made of: the builder's calls that add acks, pushes, KV
//! operations, gates, timers and positions.

use super::{GateKind, Held, Operation, Position, Push, Resend, TransactionBuilder, Ttl};
use crate::client::Client;
use crate::kv::{Kv, KvOp};
use crate::locks::LockGuard;
use crate::message::{AckStatus, Message};
use crate::timers::{TimerOp, TimerStart};

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
    /// `duplicate` (within the queue's dedup window, default 3600 s: see
    /// [`Push::transaction_id`]); a step that acks nothing gets a new UUIDv7. A derived id is a UUIDv8
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
    /// does not apply, the step answers [`Commit::Gated`](crate::Commit::Gated) (kind
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
    /// run of the same step answers [`Commit::Gated`](crate::Commit::Gated) (its [`Gate::already_done`](crate::Gate::already_done)) and
    /// writes nothing. The broker names the first gate that fails in the order the KV
    /// operations were added, so put `once` before the step's other gates (a stock
    /// condition its first run changed would otherwise answer first, as a refusal).
    /// The marker's `ttl` is how long a second run is recognized as done: choose it
    /// longer than any redelivery or producer duplicate can arrive ([`Ttl::Forever`]
    /// for duplicates a producer may send at any time); a second run after it has
    /// expired runs again. Replaying on purpose: an [`Epoch`](crate::Epoch) gives the
    /// marker a new key (`key@epoch`).
    /// What the broker checks before the KV operations fires first, though: a fenced
    /// ack whose lease is gone (`rejected_ack`) or a push whose `transactionId` is
    /// already stored (`duplicate`) rolls the step back as [`Error::RolledBack`](crate::Error::RolledBack).
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

    /// A [`once`](TransactionBuilder::once) marker that stores which outcome set it:
    /// `outcome` (a small JSON value, such as `"paid"` or `"timed-out"`). When steps of
    /// different outcomes race to one marker (a payment result and a saga's timeout),
    /// the loser's gate names the winner: [`Gate::lost_to`](crate::Gate::lost_to)
    /// answers the stored outcome, and the gate is not
    /// [`already_done`](crate::Gate::already_done) (its own work was not done), so
    /// [`Client::worker`](crate::Client::worker) hands it to
    /// [`Worker::on_refused`](crate::Worker::on_refused) to act on (refund the late
    /// payment, say). A second run of the winning step itself finds its own outcome: it
    /// is already done, as with `once`.
    ///
    /// A plain `once` claims no outcome (it stores `true`, and an outcome of `true` is
    /// the same as `once`): it is already done whatever the marker holds.
    ///
    /// The broker answers the stored value with the refusal; Queen 2's engine leaves it
    /// out when the refusal's details pass 4 KiB, and then the gate cannot tell, and
    /// answers already done: keep outcomes small.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let settle = |outcome: &'static str| {
    ///     client.transaction().once_as("saga-outcome", "order-7", &outcome, Ttl::days(30))
    ///         .kv(|k| k.put("orders", "order-7", &outcome, Ttl::days(30)))
    /// };
    /// assert!(settle("timed-out").commit().await?.is_committed()); // the timeout fires first
    /// let Commit::Gated { gate, .. } = settle("paid").commit().await? else { panic!("decided") };
    /// assert_eq!(gate.lost_to(), Some(&serde_json::json!("timed-out"))); // refund it
    /// assert!(!gate.already_done());
    /// let Commit::Gated { gate, .. } = settle("timed-out").commit().await? else { panic!("decided") };
    /// assert!(gate.already_done()); // the winner, run again
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn once_as<V: serde::Serialize + ?Sized>(
        mut self,
        ns: impl Into<String>,
        key: impl Into<String>,
        outcome: &V,
        ttl: impl Into<Ttl>,
    ) -> Self {
        let marker = Kv.put_if_absent(ns, key, outcome, ttl).required();
        self.kv.push((marker.into(), GateKind::Once));
        self
    }

    /// Runs the step in `epoch`: its derived push and timer ids and its `once`
    /// markers' keys carry the epoch's name, so a step done in an earlier epoch runs
    /// again, once (see [`Epoch`](crate::Epoch)). It applies to the whole step, the
    /// markers added before it included. [`Worker::epoch`](crate::Worker::epoch) sets
    /// it on every step of a worker.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Epoch, Ttl};
    /// let fix = Epoch::new("fix-1")?;
    /// let body = client.transaction().once("invoiced", "order-7", Ttl::days(7)).epoch(&fix).to_body()?;
    /// assert_eq!(body["kv"][0]["key"], "order-7@fix-1");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn epoch(mut self, epoch: &crate::Epoch) -> Self {
        self.epoch = Some(epoch.clone());
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
    /// version, so a lost lock answers [`Commit::Gated`](crate::Commit::Gated) and writes nothing.
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
    pub(super) fn with_held_guards(&self) -> TransactionBuilder {
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

    /// How this step is sent again after a failure that may have applied it, when
    /// nothing it writes guards the resend (see [`Resend`] and
    /// [`TransactionBuilder::commit`]): with the SDK's step marker (the default), not
    /// at all, or as it is.
    ///
    /// ```
    /// # use queen_sdk::Ttl;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_mock_broker::harness::Fault;
    /// use queen_sdk::{Commit, Error, GateKind, Resend};
    /// let count = || client.transaction().kv(|k| k.incr("stats", "visits", 1, Ttl::Forever));
    /// // The broker commits, then the answer is lost: the resend finds the step marker.
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// let Commit::Gated { gate, retried: true, .. } = count().commit().await? else { panic!() };
    /// assert_eq!(gate.kind, GateKind::Step); // committed once
    /// // Sent again as it is, it counts twice.
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// let c = count().resend(Resend::AsIs).commit().await?.committed().unwrap();
    /// assert!(c.retried);
    /// assert_eq!(c.kv().next().unwrap().value, Some(serde_json::json!(3)));
    /// // Not sent again: the caller is told the outcome is unknown (it applied: 4).
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/transaction"));
    /// assert!(matches!(count().resend(Resend::Never).commit().await, Err(Error::OutcomeUnknown { .. })));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn resend(mut self, policy: Resend) -> Self {
        self.resend = policy;
        self
    }

    /// `resend(Resend::AsIs)` when `yes`, else the default [`Resend::Marked`].
    ///
    /// ```
    /// let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// let step = client.transaction().kv(|k| k.incr("stats", "n", 1, queen_sdk::Ttl::Forever));
    /// # #[allow(deprecated)]
    /// let step = step.retry_unsafe(true); // = .resend(Resend::AsIs)
    /// # let _ = step;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    #[deprecated(
        since = "0.2.0",
        note = "use `resend(Resend::AsIs)`, or `Resend::Never` to not resend at all"
    )]
    pub fn retry_unsafe(self, yes: bool) -> Self {
        self.resend(if yes { Resend::AsIs } else { Resend::Marked })
    }
}
