//! `POST /api/v1/kv` and its single-key shorthands.

use axum::Json as AxumJson;
use serde_json::{Map, Value};

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use crate::engine::kv::{self, KvRefusal};
use crate::error::EngineError;
use crate::fields;

fn refused(r: KvRefusal) -> ApiError {
    if r.too_large {
        EngineError::PayloadTooLarge(r.message).into()
    } else {
        EngineError::Coded {
            status: 400,
            code: "kv_bad_request",
            message: r.message,
            reason: Some(r.reason),
        }
        .into()
    }
}

fn bad(m: String) -> ApiError {
    refused(KvRefusal {
        reason: "kv_bad_request",
        message: m,
        too_large: false,
    })
}

pub async fn kv(s: Caller, Json(body): Json<Value>) -> Result<AxumJson<Value>, ApiError> {
    let ops = fields::operations(&body).map_err(bad)?;
    let ops = ops
        .iter()
        .enumerate()
        .map(|(i, v)| kv::parse_op(v, &format!("operations[{i}]")))
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused)?;
    kv::check_limits(&ops, kv::STANDALONE).map_err(refused)?;
    Ok(AxumJson(s.engine.kv(s.tenant(), ops).await?))
}

/// Runs one op built from the path and returns its bare result (or the precondition
/// body when a `required` op lost).
async fn single(s: Caller, op: Map<String, Value>) -> Result<AxumJson<Value>, ApiError> {
    let parsed = kv::parse_op(&Value::Object(op), "body").map_err(refused)?;
    let out = s.engine.kv(s.tenant(), vec![parsed]).await?;
    Ok(AxumJson(match out.get("results").and_then(|r| r.get(0)) {
        Some(Value::Object(r)) => {
            let mut r = r.clone();
            r.remove("index");
            Value::Object(r)
        }
        _ => out,
    }))
}

fn base(op: &str, ns: String, key: String) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("op".into(), op.into());
    m.insert("ns".into(), ns.into());
    m.insert("key".into(), key.into());
    m
}

pub async fn get_one(
    s: Caller,
    PathParams((ns, key)): PathParams<(String, String)>,
) -> Result<AxumJson<Value>, ApiError> {
    single(s, base("get", ns, key)).await
}

pub async fn put_one(
    s: Caller,
    PathParams((ns, key)): PathParams<(String, String)>,
    Json(body): Json<Map<String, Value>>,
) -> Result<AxumJson<Value>, ApiError> {
    let mut op = base("put", ns, key);
    for field in ["value", "ttlSeconds", "forever", "expect", "required"] {
        if let Some(v) = body.get(field) {
            op.insert(field.into(), v.clone());
        }
    }
    single(s, op).await
}

pub async fn delete_one(
    s: Caller,
    PathParams((ns, key)): PathParams<(String, String)>,
    params: Params,
) -> Result<AxumJson<Value>, ApiError> {
    let mut op = base("delete", ns, key);
    // The KV rules judge the value, so a bad one is `kv_bad_expect` as in the batch route.
    if let Some(e) = params.get("expect") {
        let v = e
            .parse::<i64>()
            .map_or_else(|_| Value::from(e), Value::from);
        op.insert("expect".into(), v);
    }
    single(s, op).await
}
