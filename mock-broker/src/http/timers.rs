//! `POST /api/v1/timers`, cancel, peek and list, and the console's listing of a
//! tenant's timer queues (`GET /api/v1/timers`).

use axum::Json as AxumJson;
use axum::response::{IntoResponse, Response};

use super::Caller;
use super::error::ApiError;
use super::extract::{Body, Params, PathParams, parse_body_with};
use super::wire::kv::At;
use super::wire::timers::{self as wire, TimerOpWire, TimersAnswer, TimersBody};
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
