//! `POST /api/v1/timers`, cancel, peek and list.

use axum::Json as AxumJson;
use serde_json::{Value, json};

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use crate::engine::timers::{self, DEFAULT_HORIZON_S};
use crate::error::EngineError;
use crate::fields;

fn bad(m: String) -> ApiError {
    EngineError::Coded {
        status: 400,
        code: "timers_bad_request",
        message: m,
        reason: None,
    }
    .into()
}

/// The standalone horizon: `QUEEN_TIMERS_MAX_HORIZON_S`, or 90 days.
fn horizon() -> i64 {
    std::env::var("QUEEN_TIMERS_MAX_HORIZON_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_HORIZON_S)
}

pub async fn timers(s: Caller, Json(body): Json<Value>) -> Result<AxumJson<Value>, ApiError> {
    let ops = fields::operations(&body).map_err(bad)?;
    if ops.len() > timers::MAX_OPS {
        return Err(bad(format!(
            "{} timer operations; the limit is {}",
            ops.len(),
            timers::MAX_OPS
        )));
    }
    let ops = ops
        .iter()
        .enumerate()
        .map(|(i, v)| timers::parse_op(v, &format!("operations[{i}]"), "timers_bad_request"))
        .collect::<Result<Vec<_>, _>>()?;
    timers::check_call(&ops, true, horizon())?;
    let results = s.engine.timers(s.tenant(), ops).await?;
    Ok(AxumJson(json!({ "results": results })))
}

pub async fn cancel(
    s: Caller,
    PathParams((queue, key)): PathParams<(String, String)>,
    params: Params,
) -> Result<AxumJson<Value>, ApiError> {
    let mut op = json!({"op": "cancel", "queue": queue, "timerKey": key});
    if let Some(txn) = params.get("txn") {
        op["txn"] = txn.into();
    }
    let op = timers::parse_op(&op, "request", "timers_bad_request")?;
    let mut results = s.engine.timers(s.tenant(), vec![op]).await?;
    let mut r = results.remove(0);
    if let Some(m) = r.as_object_mut() {
        m.remove("index");
    }
    Ok(AxumJson(r))
}

pub async fn peek(
    s: Caller,
    PathParams((queue, key)): PathParams<(String, String)>,
) -> Result<AxumJson<Value>, ApiError> {
    // The rules of an operation on the same key: a queue or key no call could schedule
    // is refused, not reported absent.
    let op = json!({"op": "cancel", "queue": queue, "timerKey": key});
    timers::parse_op(&op, "request", "timers_bad_request")?;
    let out = s
        .engine
        .timer_read(s.tenant(), &queue, Some(key), None, 0)
        .await?;
    Ok(AxumJson(out))
}

pub async fn list(
    s: Caller,
    PathParams(queue): PathParams<String>,
    params: Params,
) -> Result<AxumJson<Value>, ApiError> {
    let limit = params.int("limit", 100, 1, 1000)? as usize;
    let after = params.get("after").map(str::to_string);
    let out = s
        .engine
        .timer_read(s.tenant(), &queue, None, after, limit)
        .await?;
    Ok(AxumJson(out))
}
