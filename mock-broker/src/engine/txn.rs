//! `POST /api/v1/transaction`: a worker's whole step as one atomic write.
//!
//! The parts are checked and parsed before anything runs (400s), then applied in the
//! order of the spec's rollback reasons (acks, pushes, positions, KV, timers) in one
//! staging view. The first guard that fires discards everything staged and answers the
//! rollback; otherwise every result is placed at its slot of the one index space
//! (operations, then kv, then timers, then positions).

use std::collections::{BTreeSet, HashMap};

use serde_json::value::RawValue;
use serde_json::{Value, json};

use super::QUEUE_MODE;
use super::ack::{self, Ack, parse_status};
use super::groups::set_position;
use super::kv::{self, KvOp};
use super::push::{NewMessage, append};
use super::queues::{DEFAULT_PARTITION, PartitionEntry, check_name, partition_key};
use super::timers::{self, TimerOp};
use crate::error::EngineError;
use crate::fields::Obj;
// The transaction's body is still parsed here; its KV elements already go through the
// wire types of `http` until the transaction itself moves there.
use crate::http::wire;
use crate::store::records::PartitionRecord;
use crate::store::{StoreError, T, Tx};
use serde::Deserialize;

/// Most positions in one call.
pub const MAX_POSITIONS: usize = 16_384;

/// One element of `operations`.
#[derive(Debug, Clone)]
pub enum TxnOp {
    /// An ack; its `lease_id` is the one it carries itself, if any.
    Ack(Ack),
    /// A push of one or more items.
    Push(Vec<NewMessage>),
}

/// One element of `positions`.
#[derive(Debug, Clone)]
pub struct Position {
    /// The queue.
    pub queue: String,
    /// The group whose cursor moves.
    pub group: String,
    /// The partition.
    pub partition: String,
    /// The next offset the group reads.
    pub offset: u64,
}

/// A parsed transaction.
#[derive(Debug, Clone, Default)]
pub struct Transaction {
    /// `operations`, in order.
    pub ops: Vec<TxnOp>,
    /// `requiredLeases`.
    pub required_leases: Vec<String>,
    /// `kv`.
    pub kv: Vec<KvOp>,
    /// `timers`.
    pub timers: Vec<TimerOp>,
    /// `positions`.
    pub positions: Vec<Position>,
}

impl Transaction {
    /// Whether applying it may store new data (pushes, KV writes, timers), so the
    /// storage cap applies; acks and positions alone always go through.
    pub fn adds_data(&self) -> bool {
        self.ops.iter().any(|op| matches!(op, TxnOp::Push(_)))
            || self.kv.iter().any(|op| op.kind().adds_data())
            || self.timers.iter().any(|op| op.kind.adds_data())
    }

    /// Stamps the caller's subject on every pushed message (`producerSub` comes from the
    /// token, never from the request).
    pub fn stamp_producer(&mut self, sub: Option<&str>) {
        for op in &mut self.ops {
            if let TxnOp::Push(items) = op {
                for item in items {
                    item.producer_sub = sub.map(str::to_string);
                }
            }
        }
    }
}

fn bad(m: impl Into<String>) -> EngineError {
    EngineError::BadRequest(m.into())
}

fn kv_refusal(r: kv::KvRefusal) -> EngineError {
    if r.too_large {
        EngineError::PayloadTooLarge(r.message)
    } else {
        bad(r.message)
    }
}

/// Checks the body's shape and parses it. Every refusal here is a 400 (or a 413 for a
/// name over the key budget or a KV value over its cap) and nothing has run.
pub fn parse(body: &Value) -> Result<Transaction, EngineError> {
    let o = Obj::of(body, "body").map_err(bad)?;
    let ops = o.array("operations").map_err(bad)?;
    let leases = o.strings("requiredLeases").map_err(bad)?;
    let kv = o.array("kv").map_err(bad)?;
    let timers = o.array("timers").map_err(bad)?;
    let positions = o.array("positions").map_err(bad)?;
    let empty = |a: Option<&Vec<Value>>| a.is_none_or(|a| a.is_empty());
    if empty(ops) && empty(kv) && empty(timers) && empty(positions) {
        return Err(bad(
            "a transaction needs at least one of operations, kv, timers and positions",
        ));
    }
    let mut t = Transaction {
        required_leases: leases.unwrap_or_default(),
        ..Default::default()
    };
    for (i, v) in ops.into_iter().flatten().enumerate() {
        t.ops.push(parse_operation(v, i)?);
    }
    for (i, v) in kv.into_iter().flatten().enumerate() {
        let op = wire::kv::KvOpWire::deserialize(v).map_err(|e| bad(format!("kv[{i}]: {e}")))?;
        t.kv.push(
            op.into_op(wire::kv::At("kv", Some(i)))
                .map_err(kv_refusal)?,
        );
    }
    kv::check_limits(&t.kv, kv::TRANSACTION).map_err(kv_refusal)?;
    for (i, v) in timers.into_iter().flatten().enumerate() {
        let op = wire::timers::TimerOpWire::deserialize(v)
            .map_err(|e| bad(format!("timers[{i}]: {e}")))?;
        t.timers
            .push(op.into_op(wire::kv::At("timers", Some(i)), EngineError::BadRequest)?);
    }
    timers::check_call(&t.timers, false, 0)?;
    let positions = positions.map(Vec::as_slice).unwrap_or_default();
    if positions.len() > MAX_POSITIONS {
        return Err(bad(format!(
            "{} positions; the limit is {MAX_POSITIONS}",
            positions.len()
        )));
    }
    for (i, v) in positions.iter().enumerate() {
        t.positions.push(parse_position(v, i)?);
    }
    Ok(t)
}

fn parse_operation(v: &Value, i: usize) -> Result<TxnOp, EngineError> {
    let path = format!("operations[{i}]");
    let o = Obj::of(v, &path).map_err(bad)?;
    let Some(ty) = o.str("type").map_err(bad)? else {
        if o.has("op") {
            return Err(bad(format!(
                "{path} is a kv or timer element: put it in the kv or timers array, not in operations"
            )));
        }
        return Err(bad(format!("{path}.type is required (ack or push)")));
    };
    match ty {
        "ack" => {
            let s = |name| o.str(name).map_err(bad);
            Ok(TxnOp::Ack(Ack {
                transaction_id: s("transactionId")?.unwrap_or("").to_string(),
                partition_id: s("partitionId")?.unwrap_or("").to_string(),
                status: parse_status(s("status")?),
                group: s("consumerGroup")?.unwrap_or(QUEUE_MODE).to_string(),
                lease_id: s("leaseId")?.filter(|l| !l.is_empty()).map(str::to_string),
                error: s("error")?.map(str::to_string),
            }))
        }
        "push" => {
            let items = match o.get("items") {
                None => vec![parse_item(&o, &path)?],
                Some(Value::Array(items)) => items
                    .iter()
                    .enumerate()
                    .map(|(j, it)| {
                        let p = format!("{path}.items[{j}]");
                        parse_item(&Obj::of(it, &p).map_err(bad)?, &p)
                    })
                    .collect::<Result<_, _>>()?,
                Some(_) => return Err(bad(format!("{path}.items must be an array"))),
            };
            Ok(TxnOp::Push(items))
        }
        other => Err(bad(format!(
            "{path}.type {other:?} is not an operation type (ack or push)"
        ))),
    }
}

fn parse_item(o: &Obj, path: &str) -> Result<NewMessage, EngineError> {
    let queue = o
        .str("queue")
        .map_err(bad)?
        .ok_or_else(|| bad(format!("{path}.queue is required")))?;
    // `data` is an alias of `payload`; neither means `{}` (v0).
    let payload = o.map.get("payload").or_else(|| o.map.get("data"));
    let payload = match payload {
        Some(v) => RawValue::from_string(v.to_string()).expect("a Value is JSON"),
        None => RawValue::from_string("{}".into()).expect("{} is JSON"),
    };
    let msg = NewMessage {
        queue: queue.to_string(),
        partition: o
            .str("partition")
            .map_err(bad)?
            .unwrap_or(DEFAULT_PARTITION)
            .to_string(),
        payload,
        transaction_id: o.str("transactionId").map_err(bad)?.map(str::to_string),
        trace_id: o.str("traceId").map_err(bad)?.map(str::to_string),
        producer_sub: None,
        message_id: None,
    };
    msg.validate()?;
    Ok(msg)
}

fn parse_position(v: &Value, i: usize) -> Result<Position, EngineError> {
    let path = format!("positions[{i}]");
    let o = Obj::of(v, &path).map_err(bad)?;
    let queue = o.req_str("queue").map_err(bad)?.to_string();
    check_name("queue", &queue)?;
    let partition = o
        .str("partition")
        .map_err(bad)?
        .unwrap_or(DEFAULT_PARTITION)
        .to_string();
    check_name("partition", &partition)?;
    let offset = o
        .get("offset")
        .ok_or_else(|| bad(format!("{path}.offset is required")))?;
    let offset = offset.as_u64().ok_or_else(|| {
        bad(format!(
            "{path}.offset must be a non-negative integer, got {offset}"
        ))
    })?;
    Ok(Position {
        queue,
        group: o
            .str("consumerGroup")
            .map_err(bad)?
            .unwrap_or(QUEUE_MODE)
            .to_string(),
        partition,
        offset,
    })
}

/// The answer of a rolled-back transaction.
fn rollback(tx: &mut Tx, id: &str, reason: &str, error: String, extra: Option<Value>) -> Value {
    tx.discard();
    let mut body = json!({
        "transactionId": id,
        "success": false,
        "reason": reason,
        "error": error,
        "results": [],
    });
    if let (Some(Value::Object(extra)), Value::Object(b)) = (extra, &mut body) {
        for (k, v) in extra {
            if k != "results" && k != "reason" {
                b.insert(k, v);
            }
        }
    }
    body
}

/// Finds each ack's lease: its own, else the single lease named by `requiredLeases`
/// and the other acks together, else none (unfenced).
fn resolve_leases(t: &Transaction) -> Vec<Option<String>> {
    let acks: Vec<&Ack> = t
        .ops
        .iter()
        .filter_map(|o| match o {
            TxnOp::Ack(a) => Some(a),
            TxnOp::Push(_) => None,
        })
        .collect();
    acks.iter()
        .enumerate()
        .map(|(i, a)| {
            if let Some(own) = &a.lease_id {
                return Some(own.clone());
            }
            let named: BTreeSet<&str> = t
                .required_leases
                .iter()
                .map(String::as_str)
                .filter(|l| !l.is_empty())
                .chain(
                    acks.iter()
                        .enumerate()
                        .filter(|(j, _)| *j != i)
                        .filter_map(|(_, o)| o.lease_id.as_deref()),
                )
                .collect();
            (named.len() == 1).then(|| named.into_iter().next().unwrap().to_string())
        })
        .collect()
}

/// Applies the transaction; answers the commit or the rollback body.
pub fn run(tx: &mut Tx, tenant: &str, t: &Transaction, id: &str) -> Result<Value, StoreError> {
    // Slots of the one index space: operations (a push takes one per item), kv,
    // timers, positions.
    let mut op_slot = Vec::with_capacity(t.ops.len());
    let mut next = 0;
    for op in &t.ops {
        op_slot.push(next);
        next += match op {
            TxnOp::Ack(_) => 1,
            TxnOp::Push(items) => items.len(),
        };
    }
    let kv_base = next;
    let timer_base = kv_base + t.kv.len();
    let pos_base = timer_base + t.timers.len();
    let mut results: Vec<Value> = vec![Value::Null; pos_base + t.positions.len()];

    // 1. Acks.
    let leases = resolve_leases(t);
    let mut call = ack::AckCall::new();
    let mut ack_no = 0;
    for (op, &slot) in t.ops.iter().zip(&op_slot) {
        let TxnOp::Ack(a) = op else { continue };
        let resolved = Ack {
            lease_id: leases[ack_no].clone(),
            ..a.clone()
        };
        ack_no += 1;
        let out = ack::ack(tx, tenant, &resolved, &mut call)?;
        if !out.success {
            let why = out.error.unwrap_or_default();
            let error = format!(
                "QACK the ack of {} in partition {} was rejected ({why}); the transaction rolled back",
                a.transaction_id, a.partition_id
            );
            return Ok(rollback(tx, id, "rejected_ack", error, None));
        }
        results[slot] = json!({
            "index": slot, "type": "ack", "success": true,
            "transactionId": a.transaction_id, "error": null, "dlq": out.dlq,
        });
    }

    call.finish(tx, tenant)?;

    // 2. Pushes. A repeat inside the call is first-wins; a key already in the
    // partition's window rolls everything back.
    let mut seen: HashMap<(String, String, String), String> = HashMap::new();
    for (op, &slot) in t.ops.iter().zip(&op_slot) {
        let TxnOp::Push(items) = op else { continue };
        for (j, item) in items.iter().enumerate() {
            let slot = slot + j;
            if let Some(txn) = &item.transaction_id
                && let Some(mid) =
                    seen.get(&(item.queue.clone(), item.partition.clone(), txn.clone()))
            {
                results[slot] = json!({
                    "index": slot, "type": "push", "success": true, "transactionId": txn,
                    "messageId": mid, "queueName": item.queue, "duplicate": true,
                });
                continue;
            }
            let a = append(tx, tenant, item.clone())?;
            if a.duplicate {
                let error = format!(
                    "QDUP a pushed message to {}/{} is a duplicate (original offset {}); the transaction rolled back",
                    item.queue, item.partition, a.offset
                );
                return Ok(rollback(tx, id, "duplicate", error, None));
            }
            seen.insert(
                (
                    item.queue.clone(),
                    item.partition.clone(),
                    a.transaction_id.clone(),
                ),
                a.message_id.clone(),
            );
            results[slot] = json!({
                "index": slot, "type": "push", "success": true, "transactionId": a.transaction_id,
                "messageId": a.message_id, "queueName": item.queue,
            });
        }
    }

    // 3. Positions.
    for (i, p) in t.positions.iter().enumerate() {
        let slot = pos_base + i;
        let key = partition_key(tenant, &p.queue, &p.partition);
        let part = tx.get::<PartitionRecord>(T::Partitions, &key)?;
        let Some(rec) = part.filter(|r| p.offset <= r.next_offset) else {
            let error = format!(
                "QPOS position {} on {}/{} for {} is not in the partition; the transaction rolled back",
                p.offset, p.queue, p.partition, p.group
            );
            return Ok(rollback(tx, id, "rejected_position", error, None));
        };
        let entry = PartitionEntry {
            name: p.partition.clone(),
            rec,
        };
        set_position(tx, tenant, &p.queue, &entry, &p.group, p.offset)?;
        results[slot] = json!({
            "index": slot, "type": "position", "opIndex": i, "queue": p.queue,
            "consumerGroup": p.group, "partition": p.partition, "offset": p.offset,
        });
    }

    // 4. KV.
    for (i, op) in t.kv.iter().enumerate() {
        let slot = kv_base + i;
        let a = kv::apply(tx, tenant, op)?;
        if let (Some(lost), true) = (a.lost(), op.required()) {
            let error = "QKV a required KV precondition failed; the transaction rolled back";
            let mut extra =
                serde_json::to_value(wire::kv::PreconditionWire::new(slot, lost)).expect("renders");
            extra["ok"] = false.into();
            return Ok(rollback(
                tx,
                id,
                "kv_precondition",
                error.into(),
                Some(extra),
            ));
        }
        let rendered = wire::kv::result(op.kind(), &a).in_transaction(slot, i);
        results[slot] = serde_json::to_value(rendered).expect("renders");
    }

    // 5. Timers.
    for (i, op) in t.timers.iter().enumerate() {
        let slot = timer_base + i;
        let r = timers::apply(tx, tenant, op)?;
        let rendered = wire::timers::result(&r).in_transaction(slot, i);
        results[slot] = serde_json::to_value(rendered).expect("renders");
    }

    Ok(json!({ "transactionId": id, "success": true, "results": results }))
}
