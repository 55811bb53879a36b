//! The transaction builder: a worker's whole step as one atomic call.
//!
//! ```no_run
//! # async fn demo(client: queen_sdk::Client, msg: queen_sdk::Message) -> queen_sdk::Result<()> {
//! use std::time::Duration;
//! use queen_sdk::{Commit, Ttl};
//! use serde_json::json;
//!
//! let outcome = client
//!     .transaction()
//!     .ack(&msg)
//!     .push("receipts", |p| p.partition("customer-123").payload(&json!({"orderId": "order-7"})))
//!     .kv(|k| k.put("orders", "order-7", &json!({"status": "paid"})).ttl(Ttl::days(30)))
//!     .once("paid", "order-7-paid", Ttl::days(1))
//!     .timer("reminders", |t| t.key("order-7").after(Duration::from_secs(86_400)).payload(&json!({"orderId": "order-7"})))
//!     .commit()
//!     .await?;
//! match outcome {
//!     Commit::Committed(c) => println!("receipt {}", c.pushes().next().unwrap().message_id),
//!     Commit::Gated { kv_reason, .. } => println!("already paid ({kv_reason})"),
//! }
//! # Ok(()) }
//! ```

mod ops;
pub(crate) mod results;
mod ttl;

use std::collections::{BTreeSet, HashSet};

use reqwest::Method;
use serde_json::{Value, json};

pub use ops::{Kv, KvOp, Push, Timer, TimerAction};
pub(crate) use results::gate_fields;
pub use results::{
    AckResult, Commit, Committed, KvResult, PositionResult, PushResult, StepResult, TimerResult,
};
pub use ttl::Ttl;

use crate::client::{Client, Opts, Replay};
use crate::error::{Error, Result, RollbackReason};
use crate::ids::derive_id;
use crate::message::{AckStatus, Message};
use crate::validate;

/// A held lock's identity, whose guard gates a transaction on still holding it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGuard {
    /// The lock's name.
    pub name: String,
    /// The held slot.
    pub slot: u64,
    /// The holder's token (the lock row's KV version).
    pub token: u64,
}

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

/// Builds one transaction. Start it with [`Client::transaction`].
#[derive(Debug, Clone)]
#[must_use = "a transaction does nothing until committed"]
pub struct TransactionBuilder {
    client: Client,
    ops: Vec<Operation>,
    kv: Vec<KvOp>,
    timers: Vec<Timer>,
    positions: Vec<Value>,
    retry_unsafe: bool,
}

impl Client {
    /// Starts a transaction.
    pub fn transaction(&self) -> TransactionBuilder {
        TransactionBuilder {
            client: self.clone(),
            ops: Vec::new(),
            kv: Vec::new(),
            timers: Vec::new(),
            positions: Vec::new(),
            retry_unsafe: false,
        }
    }
}

impl TransactionBuilder {
    /// Acks `msg` as completed, fenced by its lease.
    pub fn ack<T>(self, msg: &Message<T>) -> Self {
        self.ack_with(msg, AckStatus::Completed)
    }

    /// Acks `msg` with a status, fenced by its lease. The lease goes on the ack and into
    /// `requiredLeases`, as every SDK does, so an expired or stolen lease rolls the
    /// whole step back instead of acking someone else's delivery.
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

    /// Pushes one message to `queue`, configured by `f`.
    pub fn push(mut self, queue: impl Into<String>, f: impl FnOnce(Push) -> Push) -> Self {
        let p = f(Push {
            queue: queue.into(),
            ..Default::default()
        });
        self.ops.push(Operation::Push(p));
        self
    }

    /// Adds one KV operation built by `f`.
    pub fn kv(mut self, f: impl FnOnce(Kv) -> KvOp) -> Self {
        self.kv.push(f(Kv));
        self
    }

    /// Gates the step on a marker: `putIfAbsent` of `true` with `required`. A second
    /// run of the same step answers [`Commit::Gated`] and writes nothing.
    pub fn once(self, ns: &str, key: &str, ttl: impl Into<Ttl>) -> Self {
        let ttl = ttl.into();
        self.kv(|k| k.put_if_absent(ns, key, &true).ttl(ttl).required())
    }

    /// Adds a timer operation on `queue`, configured by `f`.
    pub fn timer(mut self, queue: impl Into<String>, f: impl FnOnce(Timer) -> Timer) -> Self {
        self.timers.push(f(Timer {
            queue: queue.into(),
            ..Default::default()
        }));
        self
    }

    /// Sets the next offset `group` reads on a partition (and releases its lease there).
    pub fn position(mut self, queue: &str, group: &str, partition: &str, offset: u64) -> Self {
        self.positions.push(json!({
            "queue": queue, "consumerGroup": group, "partition": partition, "offset": offset,
        }));
        self
    }

    /// Commits only while `lock` is still held.
    pub fn guard(self, lock: &LockGuard) -> Self {
        let key = format!("{}#{}", lock.name, lock.slot);
        let token = lock.token;
        self.kv(|k| k.check(crate::locks::NAMESPACE, &key, token).required())
    }

    /// Retries this transaction after a 5xx or a lost connection even though it is not
    /// idempotent by construction (no fenced ack, no deterministic push, no gate).
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
        let gated = self.kv.iter().any(|k| k.required);
        let has_push = self.ops.iter().any(|o| matches!(o, Operation::Push(_)));
        if self.retry_unsafe || fenced || gated || (has_push && pushes_deterministic) {
            Replay::Safe
        } else {
            Replay::Unsafe
        }
    }

    /// Checks every limit and renders the request body; `Err` means nothing is sent.
    /// Answers the body and whether every push id is deterministic.
    pub fn to_body(&self) -> Result<Value> {
        self.render().map(|(b, _)| b)
    }

    fn render(&self) -> Result<(Value, bool)> {
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
                    } => Some(format!("{message_id}\u{0}{group}\u{0}{}", status.wire().0)),
                    Operation::Push(_) => None,
                })
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let acked: Vec<&str> = acked_owned.iter().map(String::as_str).collect();
        self.check_ack_mix()?;

        let mut leases = BTreeSet::new();
        let mut ops = Vec::with_capacity(self.ops.len());
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
                    let mut a = json!({"type": "ack", "transactionId": transaction_id,
                        "partitionId": partition_id, "consumerGroup": group, "status": status});
                    if let Some(l) = lease_id {
                        a["leaseId"] = l.clone().into();
                        leases.insert(l.clone());
                    }
                    if let Some(e) = error {
                        a["error"] = e.into();
                    }
                    ops.push(a);
                }
                Operation::Push(p) => {
                    let op_name = format!("operations[{i}] (push)");
                    validate::name(&op_name, &p.queue)?;
                    let partition = p.partition.as_deref().unwrap_or("Default");
                    validate::name(&op_name, partition)?;
                    let txn = match &p.transaction_id {
                        Some(t) => t.clone(),
                        None if !acked.is_empty() => {
                            let mut parts = vec!["push"];
                            parts.extend(acked.iter().copied());
                            let n = push_no.to_string();
                            parts.extend([p.queue.as_str(), partition, n.as_str()]);
                            derive_id(&parts)
                        }
                        None => {
                            deterministic = false;
                            uuid::Uuid::now_v7().to_string()
                        }
                    };
                    validate::transaction_id(&op_name, &txn)?;
                    let payload = match &p.payload {
                        None => json!({}),
                        Some(Ok(v)) => v.clone(),
                        Some(Err(e)) => {
                            return Err(Error::invalid(op_name, format!("payload: {e}")));
                        }
                    };
                    let mut item = json!({"queue": p.queue, "partition": partition,
                        "transactionId": txn, "payload": payload});
                    if let Some(t) = &p.trace_id {
                        item["traceId"] = t.clone().into();
                    }
                    ops.push(json!({"type": "push", "items": [item]}));
                    push_no += 1;
                }
            }
        }

        let kv = self.render_kv()?;
        let timers = self.render_timers(&acked)?;
        for (i, p) in self.positions.iter().enumerate() {
            let op = format!("positions[{i}]");
            for field in ["queue", "partition"] {
                validate::name(&op, p[field].as_str().unwrap_or_default())?;
            }
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
        let mut body = serde_json::Map::new();
        if !ops.is_empty() {
            body.insert("operations".into(), ops.into());
        }
        if !leases.is_empty() {
            body.insert(
                "requiredLeases".into(),
                leases.into_iter().collect::<Vec<_>>().into(),
            );
        }
        if !kv.is_empty() {
            body.insert("kv".into(), kv.into());
        }
        if !timers.is_empty() {
            body.insert("timers".into(), timers.into());
        }
        if !self.positions.is_empty() {
            body.insert("positions".into(), self.positions.clone().into());
        }
        Ok((Value::Object(body), deterministic))
    }

    fn render_kv(&self) -> Result<Vec<Value>> {
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
        let keys: usize = self
            .kv
            .iter()
            .map(|k| if k.op == "getMany" { k.keys.len() } else { 1 })
            .sum();
        if keys > validate::MAX_KV_KEYS {
            return Err(Error::invalid(
                "kv",
                format!("{keys} KV keys; the limit is {}", validate::MAX_KV_KEYS),
            ));
        }
        let mut written = HashSet::new();
        let mut out = Vec::with_capacity(self.kv.len());
        for (i, k) in self.kv.iter().enumerate() {
            let op = format!("kv[{i}] ({})", k.op);
            let wire = k.checked_wire(&op)?;
            if k.writes() && !written.insert((k.ns.as_str(), k.key.as_str())) {
                return Err(Error::invalid(
                    op,
                    format!("{}/{} is written twice in one transaction", k.ns, k.key),
                ));
            }
            out.push(wire);
        }
        Ok(out)
    }

    fn render_timers(&self, acked: &[&str]) -> Result<Vec<Value>> {
        let mut seen = HashSet::new();
        let mut out = Vec::with_capacity(self.timers.len());
        for (i, t) in self.timers.iter().enumerate() {
            let op = format!("timers[{i}]");
            if !seen.insert((t.queue.as_str(), t.key.as_str())) {
                return Err(Error::invalid(
                    op,
                    format!("{}/{} appears twice in one transaction", t.queue, t.key),
                ));
            }
            let txn = match &t.txn {
                Some(x) => Some(x.clone()),
                None if t.action == TimerAction::Cancel => None,
                None if !acked.is_empty() => {
                    let mut parts = vec!["timer"];
                    parts.extend(acked.iter().copied());
                    parts.extend([t.queue.as_str(), t.key.as_str()]);
                    Some(derive_id(&parts))
                }
                None => None,
            };
            out.push(t.checked_wire(&op, txn.as_deref())?);
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
    pub async fn commit(self) -> Result<Commit> {
        let (body, deterministic) = self.render()?;
        let opts = Opts {
            replay: self.replay(deterministic),
            timeout: None,
        };
        let answer = self
            .client
            .call::<()>(Method::POST, "/api/v1/transaction", None, Some(&body), opts)
            .await?;
        decode_commit(&answer.body, answer.maybe_applied_before)
    }
}

/// Decodes a transaction answer.
pub(crate) fn decode_commit(b: &Value, retried: bool) -> Result<Commit> {
    let id = b
        .get("transactionId")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    match b.get("success").and_then(Value::as_bool) {
        Some(true) => Ok(Commit::Committed(Committed {
            transaction_id: id,
            results: b
                .get("results")
                .and_then(Value::as_array)
                .map(|r| r.iter().map(StepResult::parse).collect())
                .unwrap_or_default(),
            retried,
        })),
        Some(false) => {
            let reason =
                RollbackReason::parse(b.get("reason").and_then(Value::as_str).unwrap_or(""));
            if reason == RollbackReason::KvPrecondition {
                let (failed_index, kv_reason, version, value) = results::gate_fields(b);
                return Ok(Commit::Gated {
                    transaction_id: id,
                    failed_index,
                    kv_reason,
                    version,
                    value,
                    retried,
                });
            }
            Err(Error::RolledBack {
                reason,
                error: b
                    .get("error")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                retried,
            })
        }
        None => Err(Error::Decode {
            message: "a transaction answer without success".into(),
            body: b.to_string(),
        }),
    }
}
