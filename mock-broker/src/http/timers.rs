//! `POST /api/v1/timers`, cancel, peek and list, and the console's reads: a tenant's
//! timer queues (`GET /api/v1/timers`) and its recently fired and cancelled timers
//! (`GET /api/v1/timer-log`, [`crate::engine::timer_log`]).

use axum::Json as AxumJson;
use axum::response::{IntoResponse, Response};

use super::Caller;
use super::error::ApiError;
use super::extract::{Body, Params, PathParams, parse_body_with};
use super::wire::kv::At;
use super::wire::timers::{self as wire, TimerOpWire, TimersAnswer, TimersBody};
use crate::clock::format_iso;
use crate::engine::timer_log::{self, Ended};
use crate::engine::timers::{self, DEFAULT_HORIZON_S, TimerRead};
use crate::error::EngineError;

fn bad(m: String) -> EngineError {
    EngineError::TimersBadRequest(m)
}

/// The standalone horizon: `QUEEN_TIMERS_MAX_HORIZON_S`, or 90 days.
fn horizon() -> i64 {
    std::env::var("QUEEN_TIMERS_MAX_HORIZON_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_HORIZON_S)
}

pub async fn timers(s: Caller, Body(bytes): Body) -> Result<Response, ApiError> {
    let body: TimersBody = parse_body_with(&bytes, |m| bad(m).into())?;
    let ops = body
        .operations
        .ok_or_else(|| bad("operations is required".to_string()))?;
    if ops.len() > timers::MAX_OPS {
        return Err(bad(format!(
            "{} timer operations; the limit is {}",
            ops.len(),
            timers::MAX_OPS
        ))
        .into());
    }
    let ops = ops
        .into_iter()
        .enumerate()
        .map(|(i, op)| op.into_op(At("operations", Some(i)), bad))
        .collect::<Result<Vec<_>, _>>()?;
    timers::check_call(&ops, true, horizon())?;
    let out = s.engine.timers(s.tenant(), ops).await?;
    let results = out
        .iter()
        .enumerate()
        .map(|(i, r)| wire::result(r).at(i))
        .collect();
    Ok(AxumJson(TimersAnswer { results }).into_response())
}

pub async fn cancel(
    s: Caller,
    PathParams((queue, key)): PathParams<(String, String)>,
    params: Params,
) -> Result<Response, ApiError> {
    let txn = params.get("txn").map(str::to_string);
    let op = TimerOpWire::cancel(queue, key, txn).into_op(At("request", None), bad)?;
    let out = s.engine.timers(s.tenant(), vec![op]).await?;
    Ok(AxumJson(wire::result(&out[0])).into_response())
}

pub async fn peek(
    s: Caller,
    PathParams((queue, key)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    // The rules of an operation on the same key: a queue or key no call could schedule
    // is refused, not reported absent.
    TimerOpWire::cancel(queue.clone(), key.clone(), None).into_op(At("request", None), bad)?;
    let out = s
        .engine
        .timer_read(s.tenant(), &queue, Some(key.clone()), None, 0)
        .await?;
    let rec = match &out {
        TimerRead::One(rec) => rec.as_ref(),
        TimerRead::Page(_) => None,
    };
    Ok(AxumJson(wire::peek(&queue, &key, rec)).into_response())
}

pub async fn list(
    s: Caller,
    PathParams(queue): PathParams<String>,
    params: Params,
) -> Result<Response, ApiError> {
    let limit = params.int("limit", 100, 1, 1000)? as usize;
    let after = params.get("after").map(str::to_string);
    let out = s
        .engine
        .timer_read(s.tenant(), &queue, None, after, limit)
        .await?;
    let page = match out {
        TimerRead::Page(p) => p,
        TimerRead::One(_) => Default::default(),
    };
    Ok(AxumJson(wire::page(&page)).into_response())
}

/// `GET /api/v1/timers`: the tenant's queues with pending timers, in name order, with
/// their count and earliest `deliverAt`, read from the last commit. It reads no
/// parameter.
pub async fn queues(s: Caller) -> Result<Response, ApiError> {
    let list = s.engine.timer_queues(s.tenant()).await?;
    Ok(AxumJson(wire::queues(&list)).into_response())
}

/// One ended timer of `GET /api/v1/timer-log`.
#[derive(serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct EndedWire<'a> {
    at: String,
    deliver_at: String,
    end: &'static str,
    message_id: &'a str,
    partition: &'a str,
    queue: &'a str,
    seq: u64,
    timer_key: &'a str,
    txn: &'a str,
}

impl<'a> From<&'a Ended> for EndedWire<'a> {
    fn from(e: &'a Ended) -> Self {
        EndedWire {
            at: format_iso(e.at),
            deliver_at: format_iso(e.deliver_at),
            end: e.end.as_str(),
            message_id: &e.message_id,
            partition: &e.partition,
            queue: &e.queue,
            seq: e.seq,
            timer_key: &e.timer_key,
            txn: &e.txn,
        }
    }
}

/// `GET /api/v1/timer-log?queue=Q&limit=N`: the tenant's recently fired and cancelled
/// timers, newest first (`{"timers": [...], "kept": 256}`); of one queue when `queue`
/// is given. A read of the broker's memory: the last [`timer_log::KEPT`] per tenant,
/// forgotten at a restart.
pub async fn log(s: Caller, params: Params) -> Result<Response, ApiError> {
    let limit = params.int("limit", 100, 1, timer_log::KEPT as i64)? as usize;
    let queue = params.get("queue").filter(|q| !q.is_empty());
    let ended = s.engine.ended_timers(s.tenant(), queue, limit);
    let timers: Vec<EndedWire<'_>> = ended.iter().map(EndedWire::from).collect();
    Ok(AxumJson(serde_json::json!({"timers": timers, "kept": timer_log::KEPT})).into_response())
}
