//! The parts of a transaction: push items, KV operations, timers, positions.

use std::time::{Duration, SystemTime};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::Serialize;
use serde_json::{Map, Value, json};

use super::ttl::Ttl;

/// One pushed item. Configure it in [`crate::TransactionBuilder::push`].
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Push {
    pub(crate) queue: String,
    pub(crate) partition: Option<String>,
    pub(crate) payload: Option<Result<Value, String>>,
    pub(crate) transaction_id: Option<String>,
    pub(crate) trace_id: Option<String>,
}

impl Push {
    /// The partition (default `Default`).
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The payload (default `{}`).
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        self.payload = Some(serde_json::to_value(payload).map_err(|e| e.to_string()));
        self
    }

    /// The dedup key. Without one, a step that acks messages gets one derived from
    /// them (the same on every run of the step); see [`crate::derive_id`].
    pub fn transaction_id(mut self, id: impl Into<String>) -> Self {
        self.transaction_id = Some(id.into());
        self
    }

    /// A trace id kept on the message.
    pub fn trace_id(mut self, id: impl Into<String>) -> Self {
        self.trace_id = Some(id.into());
        self
    }
}

/// Builds KV operations for [`crate::TransactionBuilder::kv`].
#[derive(Debug, Clone, Copy, Default)]
pub struct Kv;

/// One KV operation, with its modifiers.
#[derive(Debug, Clone)]
#[must_use]
pub struct KvOp {
    pub(crate) op: &'static str,
    pub(crate) ns: String,
    pub(crate) key: String,
    pub(crate) keys: Vec<String>,
    pub(crate) value: Option<Result<Value, String>>,
    pub(crate) ttl: Option<Ttl>,
    pub(crate) expect: Option<u64>,
    pub(crate) required: bool,
    pub(crate) delta: Option<Value>,
    pub(crate) min: Option<Value>,
    pub(crate) max: Option<Value>,
}

impl Kv {
    fn op(self, op: &'static str, ns: &str, key: &str) -> KvOp {
        KvOp {
            op,
            ns: ns.to_string(),
            key: key.to_string(),
            keys: Vec::new(),
            value: None,
            ttl: None,
            expect: None,
            required: false,
            delta: None,
            min: None,
            max: None,
        }
    }

    /// Writes `value` (give it a [`KvOp::ttl`] or [`KvOp::forever`]).
    pub fn put<T: Serialize + ?Sized>(self, ns: &str, key: &str, value: &T) -> KvOp {
        let mut op = self.op("put", ns, key);
        op.value = Some(serde_json::to_value(value).map_err(|e| e.to_string()));
        op
    }

    /// Writes `value` only if the key is absent; the loser learns the winner's value.
    pub fn put_if_absent<T: Serialize + ?Sized>(self, ns: &str, key: &str, value: &T) -> KvOp {
        let mut op = self.put(ns, key, value);
        op.op = "putIfAbsent";
        op
    }

    /// Removes a key.
    pub fn delete(self, ns: &str, key: &str) -> KvOp {
        self.op("delete", ns, key)
    }

    /// Asserts the key's version without writing (`0`: it must not exist).
    pub fn check(self, ns: &str, key: &str, expect: u64) -> KvOp {
        self.op("check", ns, key).expect(expect)
    }

    /// Adds `delta` to a number (an absent key counts from 0).
    pub fn incr(self, ns: &str, key: &str, delta: i64) -> KvOp {
        let mut op = self.op("incr", ns, key);
        op.delta = Some(delta.into());
        op
    }

    /// Reads one key.
    pub fn get(self, ns: &str, key: &str) -> KvOp {
        self.op("get", ns, key)
    }

    /// Reads several keys.
    pub fn get_many<I: IntoIterator<Item = S>, S: Into<String>>(self, ns: &str, keys: I) -> KvOp {
        let mut op = self.op("getMany", ns, "");
        op.keys = keys.into_iter().map(Into::into).collect();
        op
    }
}

impl KvOp {
    /// Requires the current version to be `version` (`0`: the key must not exist).
    pub fn expect(mut self, version: u64) -> Self {
        self.expect = Some(version);
        self
    }

    /// Makes the operation a gate: if its precondition loses, the whole transaction
    /// rolls back (answered as [`crate::Commit::Gated`]).
    pub fn required(mut self) -> Self {
        self.required = true;
        self
    }

    /// The row's lifetime.
    pub fn ttl(mut self, ttl: impl Into<Ttl>) -> Self {
        self.ttl = Some(ttl.into());
        self
    }

    /// The row never lapses.
    pub fn forever(self) -> Self {
        self.ttl(Ttl::Forever)
    }

    /// `incr`: the lowest allowed result.
    pub fn min(mut self, min: i64) -> Self {
        self.min = Some(min.into());
        self
    }

    /// `incr`: the highest allowed result.
    pub fn max(mut self, max: i64) -> Self {
        self.max = Some(max.into());
        self
    }

    /// Whether the operation writes its key.
    pub(crate) fn writes(&self) -> bool {
        matches!(self.op, "put" | "putIfAbsent" | "delete" | "incr")
    }

    pub(crate) fn needs_expiry(&self) -> bool {
        matches!(self.op, "put" | "putIfAbsent" | "incr")
    }

    /// The wire form (the value already checked).
    pub(crate) fn to_wire(&self, value: Option<Value>) -> Value {
        let mut m = Map::new();
        m.insert("op".into(), self.op.into());
        m.insert("ns".into(), self.ns.clone().into());
        if self.op == "getMany" {
            m.insert("keys".into(), self.keys.clone().into());
        } else {
            m.insert("key".into(), self.key.clone().into());
        }
        if let Some(v) = value {
            m.insert("value".into(), v);
        }
        match self.ttl {
            Some(Ttl::Seconds(s)) => {
                m.insert("ttlSeconds".into(), s.into());
            }
            Some(Ttl::Forever) => {
                m.insert("forever".into(), true.into());
            }
            None => {}
        }
        if let Some(e) = self.expect {
            m.insert("expect".into(), e.into());
        }
        if self.required {
            m.insert("required".into(), true.into());
        }
        for (k, v) in [
            ("delta", &self.delta),
            ("min", &self.min),
            ("max", &self.max),
        ] {
            if let Some(v) = v {
                m.insert(k.into(), v.clone());
            }
        }
        Value::Object(m)
    }
}

/// What a timer operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TimerAction {
    /// Set it, replacing a pending timer of the key.
    #[default]
    Schedule,
    /// Replace it (scheduling it when absent).
    Reschedule,
    /// Remove the pending timer.
    Cancel,
}

/// One timer operation. Configure it in [`crate::TransactionBuilder::timer`].
#[derive(Debug, Clone, Default)]
#[must_use]
pub struct Timer {
    pub(crate) queue: String,
    pub(crate) key: String,
    pub(crate) action: TimerAction,
    pub(crate) delay: Option<Result<Duration, String>>,
    pub(crate) partition: Option<String>,
    pub(crate) txn: Option<String>,
    pub(crate) payload: Option<Result<Vec<u8>, String>>,
}

impl Timer {
    /// The timer's key within its queue.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = key.into();
        self
    }

    /// Fires `delay` from the commit.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(Ok(delay));
        self
    }

    /// Fires at `at` (measured against this machine's clock now).
    pub fn at(mut self, at: SystemTime) -> Self {
        self.delay = Some(Ok(at.duration_since(SystemTime::now()).unwrap_or_default()));
        self
    }

    /// The partition of the message it pushes.
    pub fn partition(mut self, p: impl Into<String>) -> Self {
        self.partition = Some(p.into());
        self
    }

    /// The pushed message's `transactionId`. Without one, a step that acks messages
    /// gets one derived from them and the timer key.
    pub fn txn(mut self, txn: impl Into<String>) -> Self {
        self.txn = Some(txn.into());
        self
    }

    /// A payload serialised as JSON (delivered as JSON).
    pub fn payload<T: Serialize + ?Sized>(mut self, payload: &T) -> Self {
        self.payload = Some(serde_json::to_vec(payload).map_err(|e| e.to_string()));
        self
    }

    /// Raw payload bytes.
    pub fn payload_bytes(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.payload = Some(Ok(bytes.into()));
        self
    }

    /// Schedule it (the default).
    pub fn schedule(mut self) -> Self {
        self.action = TimerAction::Schedule;
        self
    }

    /// Reschedule it.
    pub fn reschedule(mut self) -> Self {
        self.action = TimerAction::Reschedule;
        self
    }

    /// Cancel it.
    pub fn cancel(mut self) -> Self {
        self.action = TimerAction::Cancel;
        self
    }

    /// The wire form, with the resolved `txn`.
    pub(crate) fn to_wire(
        &self,
        txn: Option<&str>,
        delay_ms: u64,
        payload: Option<&[u8]>,
    ) -> Value {
        let op = match self.action {
            TimerAction::Schedule => "schedule",
            TimerAction::Reschedule => "reschedule",
            TimerAction::Cancel => "cancel",
        };
        let mut v = json!({"op": op, "queue": self.queue, "timerKey": self.key});
        if self.action != TimerAction::Cancel {
            v["delayMs"] = delay_ms.into();
            v["payload"] = B64.encode(payload.unwrap_or_default()).into();
            if let Some(p) = &self.partition {
                v["partition"] = p.clone().into();
            }
        }
        if let Some(t) = txn {
            v["txn"] = t.into();
        }
        v
    }
}

impl KvOp {
    /// Checks the operation's own rules (namespace, key, expiry, value size) and renders
    /// it, for calls outside a transaction (the standalone KV handle).
    pub(crate) fn checked_wire(&self, op: &str) -> crate::Result<Value> {
        use crate::{Error, validate};
        validate::ns(op, &self.ns)?;
        if self.op == "getMany" {
            for key in &self.keys {
                validate::key(op, key)?;
            }
        } else {
            validate::key(op, &self.key)?;
        }
        if self.needs_expiry() && self.ttl.is_none() {
            return Err(Error::invalid(
                op,
                "needs exactly one expiry: .ttl(..) or .forever()",
            ));
        }
        if let Some(Ttl::Seconds(0)) = self.ttl {
            return Err(Error::invalid(op, "a TTL must be at least 1 second"));
        }
        let value = match &self.value {
            None => None,
            Some(Err(e)) => return Err(Error::invalid(op, format!("value: {e}"))),
            Some(Ok(v)) => {
                let len = serde_json::to_string(v).map(|s| s.len()).unwrap_or(0);
                if len > validate::MAX_VALUE_BYTES {
                    return Err(Error::invalid(
                        op,
                        format!(
                            "the value is {len} bytes as JSON; the limit is {}",
                            validate::MAX_VALUE_BYTES
                        ),
                    ));
                }
                Some(v.clone())
            }
        };
        Ok(self.to_wire(value))
    }
}

impl Timer {
    /// Checks the timer's own rules (queue, key, delay, payload) and renders it with
    /// `txn`, for calls outside a transaction (the standalone timers handle).
    pub(crate) fn checked_wire(&self, op: &str, txn: Option<&str>) -> crate::Result<Value> {
        use crate::{Error, validate};
        validate::name(op, &self.queue)?;
        if self.key.is_empty() {
            return Err(Error::invalid(op, "a timer needs a key: .key(..)"));
        }
        if self.key.len() > 1024 {
            return Err(Error::invalid(op, "a timer key is at most 1,024 bytes"));
        }
        if let Some(p) = &self.partition {
            validate::name(op, p)?;
        }
        if let Some(t) = txn {
            validate::transaction_id(op, t)?;
        }
        let delay = match &self.delay {
            Some(Ok(d)) => d.as_millis() as u64,
            Some(Err(e)) => return Err(Error::invalid(op, e.clone())),
            None if self.action == TimerAction::Cancel => 0,
            None => return Err(Error::invalid(op, "a timer needs .after(..) or .at(..)")),
        };
        let payload = match &self.payload {
            Some(Ok(b)) => Some(b.as_slice()),
            Some(Err(e)) => return Err(Error::invalid(op, format!("payload: {e}"))),
            None => None,
        };
        Ok(self.to_wire(txn, delay, payload))
    }
}
