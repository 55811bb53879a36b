//! The step as the bytes `commit()` sends: every limit checked, derived ids named,
//! the body written in one pass.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashSet};

use serde_json::Value;
use serde_json::value::RawValue;

use super::{GateKind, Operation, Push, TransactionBuilder, wire};
use crate::error::{Error, Result};
use crate::ids::{derive_id, derive_push_id, earliest_v7};
use crate::kv::{KvOp, KvWire};
use crate::timers::{TimerAction, TimerWire};
use crate::validate;

impl TransactionBuilder {
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
        let bytes = self.render(None)?;
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
        self.render(None).map(Into::into)
    }

    /// The body, with `marker` (the SDK's step marker, [`super::resend`]) first among
    /// the KV operations when there is one.
    pub(super) fn render(&self, marker: Option<&KvOp>) -> Result<bytes::Bytes> {
        if !self.held.is_empty() {
            return self.with_held_guards().render(marker);
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
        let mut acked: Vec<&str> = acked_owned.iter().map(String::as_str).collect();
        // An epoch is one more part of every name derived from the acks.
        if let Some(e) = &self.epoch
            && !acked.is_empty()
        {
            acked.splice(0..0, [e.part(), e.as_str()]);
        }
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
                        None => uuid::Uuid::now_v7().to_string(),
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

        // In an epoch, each `once` marker is stored under its epoch's key.
        let once_keys: Vec<Option<String>> = match &self.epoch {
            Some(e) => self
                .kv
                .iter()
                .map(|(k, kind)| {
                    (*kind == GateKind::Once).then(|| e.marker_key(k.key().unwrap_or_default()))
                })
                .collect(),
            None => Vec::new(),
        };
        let kv = self.render_kv(marker, &once_keys)?;
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
        crate::json::render_sized(&body, self.body_size_hint())
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

    fn render_kv<'a>(
        &'a self,
        marker: Option<&'a KvOp>,
        once_keys: &'a [Option<String>],
    ) -> Result<Vec<KvWire<'a>>> {
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
        let mut out = Vec::with_capacity(self.kv.len() + 1);
        if let Some(m) = marker {
            out.push(m.checked_wire(&"step marker")?);
        }
        for (i, (k, _)) in self.kv.iter().enumerate() {
            let op = validate::Part {
                list: "kv",
                index: i,
                kind: Some(k.name()),
            };
            let mut wire = k.checked_wire(&op)?;
            // In an epoch a `once` marker writes its epoch's key: that key is the one
            // no other operation of the call may write.
            let epoch_key = once_keys.get(i).and_then(Option::as_deref);
            if let Some(key) = epoch_key {
                validate::key(&op, key)?;
                wire = wire.with_key(key);
            }
            if let Some(key) = epoch_key.or(k.written_key())
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
                // Nothing to derive from: an id minted for this call, the same in its
                // resends (Queen 2's engine refuses a scheduled timer without one).
                None => Some(Cow::Owned(uuid::Uuid::now_v7().to_string())),
            };
            out.push(t.checked_wire(&op, txn)?);
        }
        Ok(out)
    }
}

/// An acked message's part of the name its step's derived ids come from: its id, the
/// group that acks it and the status, NUL-separated. Written by hand, into one buffer
/// of the right size, rather than through the formatter on every step.
pub(super) fn ack_name(message_id: &str, group: &str, status: &str) -> String {
    let mut s = String::with_capacity(message_id.len() + group.len() + status.len() + 2);
    s.push_str(message_id);
    s.push('\0');
    s.push_str(group);
    s.push('\0');
    s.push_str(status);
    s
}
