//! A transaction body on the wire, parsed in one pass into the engine's
//! [`Transaction`]: `operations` (acks and pushes), `requiredLeases`, `kv`, `timers` and
//! `positions`, each element with its own rules and the path of its refusals.

use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

use super::kv::{At, KvOpWire, KvResultWire, PreconditionWire};
use super::loose::{self, Loose};
use super::timers::{TimerOpWire, TimerResultWire};
use crate::clock::format_iso;
use crate::engine::QUEUE_MODE;
use crate::engine::ack::{Ack, parse_status};
use crate::engine::kv::{self, KvRefusal};
use crate::engine::push::NewMessage;
use crate::engine::queues::{DEFAULT_PARTITION, check_name};
use crate::engine::timers;
use crate::engine::txn::{MAX_POSITIONS, Position, StepResult, Transaction, TxnOp, TxnOutcome};
use crate::engine::txn_log::{Entry, Outcome, Part, Recent};
use crate::error::EngineError;
use crate::http::error::ApiError;
use crate::store::records::AckMark;

/// The body of `POST /api/v1/transaction`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TxnBody {
    operations: Option<Vec<TxnOpWire>>,
    required_leases: Option<Vec<String>>,
    kv: Option<Vec<KvOpWire>>,
    timers: Option<Vec<TimerOpWire>>,
    positions: Option<Vec<PositionWire>>,
}

/// One element of `operations`: an ack, or a push of one message (its fields inline)
/// or of several (`items`).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TxnOpWire {
    #[serde(rename = "type")]
    ty: Option<String>,
    /// Present on a KV or timer element put in the wrong array.
    op: Option<IgnoredAny>,
    transaction_id: Option<String>,
    partition_id: Option<String>,
    status: Option<String>,
    consumer_group: Option<String>,
    lease_id: Option<String>,
    error: Option<String>,
    items: Option<Vec<ItemWire>>,
    queue: Option<String>,
    partition: Option<String>,
    #[serde(default, deserialize_with = "loose::present")]
    payload: Option<Value>,
    #[serde(default, deserialize_with = "loose::present")]
    data: Option<Value>,
    trace_id: Option<String>,
}

/// A pushed message as sent (an element of `items`, or the fields of a push element
/// without `items`). Read without `#[serde(flatten)]`, which would buffer every field.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct ItemWire {
    transaction_id: Option<String>,
    queue: Option<String>,
    partition: Option<String>,
    /// The message body; `null` is a body.
    #[serde(default, deserialize_with = "loose::present")]
    payload: Option<Value>,
    /// An alias of `payload`.
    #[serde(default, deserialize_with = "loose::present")]
    data: Option<Value>,
    trace_id: Option<String>,
}

/// One element of `positions`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct PositionWire {
    queue: Option<String>,
    partition: Option<String>,
    consumer_group: Option<String>,
    offset: Option<Loose<u64>>,
}

fn bad(m: impl Into<String>) -> EngineError {
    EngineError::BadRequest(m.into())
}

/// Inside a transaction a KV refusal is a plain 400 (or a 413 for a value over its cap).
fn kv_refusal(r: KvRefusal) -> EngineError {
    if r.too_large {
        EngineError::PayloadTooLarge(r.message)
    } else {
        bad(r.message)
    }
}

impl TxnBody {
    /// Checks every part's rules and builds the command. Every refusal here is a 400 (or
    /// a 413 for a name over the key budget or a KV value over its cap) and nothing has
    /// run.
    pub fn into_transaction(self) -> Result<Transaction, EngineError> {
        let empty = |n: Option<usize>| n.is_none_or(|n| n == 0);
        if empty(self.operations.as_ref().map(Vec::len))
            && empty(self.kv.as_ref().map(Vec::len))
            && empty(self.timers.as_ref().map(Vec::len))
            && empty(self.positions.as_ref().map(Vec::len))
        {
            return Err(bad(
                "a transaction needs at least one of operations, kv, timers and positions",
            ));
        }
        let mut t = Transaction {
            required_leases: self.required_leases.unwrap_or_default(),
            ..Default::default()
        };
        for (i, op) in self.operations.into_iter().flatten().enumerate() {
            t.ops.push(op.into_op(i)?);
        }
        for (i, op) in self.kv.into_iter().flatten().enumerate() {
            t.kv.push(op.into_op(At("kv", Some(i))).map_err(kv_refusal)?);
        }
        kv::check_limits(&t.kv, kv::TRANSACTION).map_err(kv_refusal)?;
        for (i, op) in self.timers.into_iter().flatten().enumerate() {
            t.timers
                .push(op.into_op(At("timers", Some(i)), EngineError::BadRequest)?);
        }
        timers::check_call(&t.timers, false, 0)?;
        let positions = self.positions.unwrap_or_default();
        if positions.len() > MAX_POSITIONS {
            return Err(bad(format!(
                "{} positions; the limit is {MAX_POSITIONS}",
                positions.len()
            )));
        }
        for (i, p) in positions.into_iter().enumerate() {
            t.positions.push(p.into_position(i)?);
        }
        Ok(t)
    }
}

impl TxnOpWire {
    fn into_op(self, i: usize) -> Result<TxnOp, EngineError> {
        let at = At("operations", Some(i));
        let Some(ty) = self.ty else {
            if self.op.is_some() {
                return Err(bad(format!(
                    "{at} is a kv or timer element: put it in the kv or timers array, not in operations"
                )));
            }
            return Err(bad(format!("{at}.type is required (ack or push)")));
        };
        match ty.as_str() {
            "ack" => Ok(TxnOp::Ack(Ack {
                transaction_id: self.transaction_id.unwrap_or_default(),
                partition_id: self.partition_id.unwrap_or_default(),
                status: parse_status(self.status.as_deref()),
                group: self
                    .consumer_group
                    .unwrap_or_else(|| QUEUE_MODE.to_string()),
                lease_id: self.lease_id.filter(|l| !l.is_empty()),
                error: self.error,
            })),
            "push" => Ok(TxnOp::Push(match self.items {
                None => vec![
                    ItemWire {
                        transaction_id: self.transaction_id,
                        queue: self.queue,
                        partition: self.partition,
                        payload: self.payload,
                        data: self.data,
                        trace_id: self.trace_id,
                    }
                    .into_message(&at)?,
                ],
                Some(items) => items
                    .into_iter()
                    .enumerate()
                    .map(|(j, it)| {
                        let p = format!("{at}.items[{j}]");
                        it.into_message(&p)
                    })
                    .collect::<Result<_, _>>()?,
            })),
            other => Err(bad(format!(
                "{at}.type {other:?} is not an operation type (ack or push)"
            ))),
        }
    }
}

impl ItemWire {
    fn into_message(self, at: &dyn std::fmt::Display) -> Result<NewMessage, EngineError> {
        let queue = self
            .queue
            .ok_or_else(|| bad(format!("{at}.queue is required")))?;
        // `data` is an alias of `payload`; neither means `{}` (v0). The body is kept as
        // compact JSON, as it has always been stored.
        let payload = match self.payload.or(self.data) {
            Some(v) => RawValue::from_string(v.to_string()).expect("a Value is JSON"),
            None => RawValue::from_string("{}".into()).expect("{} is JSON"),
        };
        let msg = NewMessage {
            queue,
            partition: self
                .partition
                .unwrap_or_else(|| DEFAULT_PARTITION.to_string()),
            payload,
            transaction_id: self.transaction_id,
            trace_id: self.trace_id,
            producer_sub: None,
            message_id: None,
        };
        msg.validate()?;
        Ok(msg)
    }
}

impl PositionWire {
    fn into_position(self, i: usize) -> Result<Position, EngineError> {
        let at = At("positions", Some(i));
        let queue = self
            .queue
            .ok_or_else(|| bad(format!("{at}.queue is required")))?;
        check_name("queue", &queue)?;
        let partition = self
            .partition
            .unwrap_or_else(|| DEFAULT_PARTITION.to_string());
        check_name("partition", &partition)?;
        let offset = match self.offset {
            None => return Err(bad(format!("{at}.offset is required"))),
            Some(Loose::Ok(o)) => o,
            Some(Loose::Bad(v)) => {
                return Err(bad(format!(
                    "{at}.offset must be a non-negative integer, got {v}"
                )));
            }
        };
        Ok(Position {
            queue,
            group: self
                .consumer_group
                .unwrap_or_else(|| QUEUE_MODE.to_string()),
            partition,
            offset,
        })
    }
}

/// A committed ack, as answered.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckWire<'a> {
    dlq: bool,
    error: Option<&'a str>,
    index: usize,
    success: bool,
    transaction_id: &'a str,
    #[serde(rename = "type")]
    ty: &'static str,
}

/// A committed push, as answered.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PushWire<'a> {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    duplicate: bool,
    index: usize,
    message_id: &'a str,
    queue_name: &'a str,
    success: bool,
    transaction_id: &'a str,
    #[serde(rename = "type")]
    ty: &'static str,
}

/// A committed position, as answered.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PositionResultWire<'a> {
    consumer_group: &'a str,
    index: usize,
    offset: u64,
    op_index: usize,
    partition: &'a str,
    queue: &'a str,
    #[serde(rename = "type")]
    ty: &'static str,
}

/// One slot of a committed transaction's `results`.
#[derive(Serialize)]
#[serde(untagged)]
enum StepWire<'a> {
    Ack(AckWire<'a>),
    Push(PushWire<'a>),
    Position(PositionResultWire<'a>),
    Kv(KvResultWire<'a>),
    Timer(TimerResultWire<'a>),
}

fn step(index: usize, r: &StepResult) -> StepWire<'_> {
    match r {
        StepResult::Ack {
            transaction_id,
            dlq,
        } => StepWire::Ack(AckWire {
            dlq: *dlq,
            error: None,
            index,
            success: true,
            transaction_id,
            ty: "ack",
        }),
        StepResult::Push {
            transaction_id,
            message_id,
            queue,
            duplicate,
            ..
        } => StepWire::Push(PushWire {
            duplicate: *duplicate,
            index,
            message_id,
            queue_name: queue,
            success: true,
            transaction_id,
            ty: "push",
        }),
        StepResult::Position { op_index, position } => StepWire::Position(PositionResultWire {
            consumer_group: &position.group,
            index,
            offset: position.offset,
            op_index: *op_index,
            partition: &position.partition,
            queue: &position.queue,
            ty: "position",
        }),
        StepResult::Kv {
            op_index,
            kind,
            result,
        } => StepWire::Kv(super::kv::result(*kind, result).in_transaction(index, *op_index)),
        StepResult::Timer { op_index, result } => {
            StepWire::Timer(super::timers::result(result).in_transaction(index, *op_index))
        }
    }
}

/// A transaction's answer, fields in name order. A rollback has no results; a lost KV
/// precondition adds its fields (`failedIndex`, `kvReason`, `ok`, `value`, `version`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TxnAnswer<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kv_reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ok: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    results: Vec<StepWire<'a>>,
    success: bool,
    transaction_id: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<Option<&'a RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<Option<u64>>,
}

/// Renders a transaction's outcome.
pub fn answer(o: &TxnOutcome) -> TxnAnswer<'_> {
    match o {
        TxnOutcome::Committed { id, results } => TxnAnswer {
            error: None,
            failed_index: None,
            kv_reason: None,
            ok: None,
            reason: None,
            results: results
                .iter()
                .enumerate()
                .map(|(i, r)| step(i, r))
                .collect(),
            success: true,
            transaction_id: id,
            value: None,
            version: None,
        },
        TxnOutcome::RolledBack {
            id,
            reason,
            error,
            kv,
        } => {
            let p = kv
                .as_ref()
                .map(|(slot, lost)| PreconditionWire::new(*slot, lost));
            TxnAnswer {
                error: Some(error),
                failed_index: p.as_ref().map(|p| p.failed_index),
                kv_reason: p.as_ref().map(|p| p.kv_reason),
                ok: p.as_ref().map(|_| false),
                reason: Some(reason.as_str()),
                results: Vec::new(),
                success: false,
                transaction_id: id,
                value: p.as_ref().map(|p| p.value),
                version: p.as_ref().map(|p| p.version),
            }
        }
    }
}

/// A list of a logged call: the elements kept and how many were left out.
#[derive(Serialize)]
struct PartWire<I> {
    items: Vec<I>,
    more: usize,
}

impl<I> PartWire<I> {
    fn of<'a, S>(p: &'a Part<S>, f: impl Fn(&'a S) -> I) -> Self {
        PartWire {
            items: p.items.iter().map(f).collect(),
            more: p.more,
        }
    }
}

/// An ack of a logged call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct AckLogWire<'a> {
    consumer_group: &'a str,
    dlq: Option<bool>,
    partition: Option<&'a str>,
    partition_id: &'a str,
    queue: Option<&'a str>,
    status: &'static str,
    transaction_id: &'a str,
}

/// A pushed item of a logged call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PushLogWire<'a> {
    duplicate: bool,
    offset: Option<u64>,
    partition: &'a str,
    partition_id: Option<String>,
    queue: &'a str,
    transaction_id: Option<&'a str>,
}

/// A KV operation of a logged call.
#[derive(Serialize)]
struct KvLogWire<'a> {
    key: Option<&'a str>,
    ns: &'a str,
    op: &'static str,
}

/// A timer operation of a logged call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct TimerLogWire<'a> {
    op: &'static str,
    queue: &'a str,
    timer_key: &'a str,
}

/// A position of a logged call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PositionLogWire<'a> {
    consumer_group: &'a str,
    offset: u64,
    partition: &'a str,
    queue: &'a str,
}

/// How a logged call ended: `status` and the fields of that status (a rollback always
/// carries `failedIndex` and `kvReason`, `null` but for a lost KV precondition).
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct OutcomeWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    code: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    failed_index: Option<Option<usize>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    http_status: Option<u16>,
    #[serde(skip_serializing_if = "Option::is_none")]
    kv_reason: Option<Option<&'static str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    status: &'static str,
}

/// One call of `GET /api/v1/transactions`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct EntryWire<'a> {
    acks: PartWire<AckLogWire<'a>>,
    at: String,
    id: Option<&'a str>,
    kv: PartWire<KvLogWire<'a>>,
    outcome: OutcomeWire<'a>,
    positions: PartWire<PositionLogWire<'a>>,
    pushes: PartWire<PushLogWire<'a>>,
    seq: u64,
    timers: PartWire<TimerLogWire<'a>>,
    user_agent: Option<&'a str>,
}

/// `GET /api/v1/transactions`: the tenant's recent calls, newest first.
#[derive(Serialize)]
pub struct LogWire<'a> {
    transactions: Vec<EntryWire<'a>>,
}

fn mark(m: AckMark) -> &'static str {
    match m {
        AckMark::Completed => "completed",
        AckMark::Failed => "failed",
        AckMark::Retry => "retry",
        AckMark::Dlq => "dlq",
    }
}

fn outcome(o: &Outcome) -> OutcomeWire<'_> {
    match o {
        Outcome::Committed => OutcomeWire {
            status: "committed",
            ..Default::default()
        },
        Outcome::RolledBack {
            reason,
            error,
            failed_index,
            kv_reason,
        } => OutcomeWire {
            error: Some(error),
            failed_index: Some(*failed_index),
            kv_reason: Some(kv_reason.map(|r| r.as_str())),
            reason: Some(reason.as_str()),
            status: "rolled_back",
            ..Default::default()
        },
        Outcome::Refused { refusal, error } => OutcomeWire {
            code: Some(ApiError::status_of(*refusal).1),
            error: Some(error),
            http_status: Some(ApiError::status_of(*refusal).0.as_u16()),
            status: "refused",
            ..Default::default()
        },
    }
}

fn entry<'a>(e: &'a Entry, r: &'a Recent) -> EntryWire<'a> {
    let p = &e.parts;
    EntryWire {
        acks: PartWire::of(&p.acks, |a| {
            let named = a
                .partition_id
                .parse::<u64>()
                .ok()
                .and_then(|pid| r.partitions.get(&pid));
            AckLogWire {
                consumer_group: &a.group,
                dlq: a.dlq,
                partition: named.map(|n| n.partition.as_str()),
                partition_id: &a.partition_id,
                queue: named.map(|n| n.queue.as_str()),
                status: mark(a.status),
                transaction_id: &a.transaction_id,
            }
        }),
        at: format_iso(e.at),
        id: e.id.as_deref(),
        kv: PartWire::of(&p.kv, |k| KvLogWire {
            key: k.key.as_deref(),
            ns: &k.ns,
            op: k.op.name(),
        }),
        outcome: outcome(&e.outcome),
        positions: PartWire::of(&p.positions, |x| PositionLogWire {
            consumer_group: &x.group,
            offset: x.offset,
            partition: &x.partition,
            queue: &x.queue,
        }),
        pushes: PartWire::of(&p.pushes, |m| PushLogWire {
            duplicate: m.duplicate,
            offset: m.offset,
            partition: &m.partition,
            partition_id: m.partition_id.map(|id| id.to_string()),
            queue: &m.queue,
            transaction_id: m.transaction_id.as_deref(),
        }),
        seq: e.seq,
        timers: PartWire::of(&p.timers, |t| TimerLogWire {
            op: t.op,
            queue: &t.queue,
            timer_key: &t.timer_key,
        }),
        user_agent: e.user_agent.as_deref(),
    }
}

/// Renders a read of the transaction log.
pub fn log(r: &Recent) -> LogWire<'_> {
    LogWire {
        transactions: r.entries.iter().map(|e| entry(e, r)).collect(),
    }
}
