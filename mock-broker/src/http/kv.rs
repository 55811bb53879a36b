//! `POST /api/v1/kv`, its single-key shorthands, and the console's reads of a tenant's
//! namespaces (`GET /api/v1/kv`) and of a namespace's rows (`GET /api/v1/kv/{ns}`).

use axum::Json as AxumJson;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::Caller;
use super::error::ApiError;
use super::extract::{Body, Params, PathParams, parse_body_with};
use super::wire::kv::{self as wire, At, KvBody, KvOpWire, KvResultWire, PreconditionBody, result};
use super::wire::loose::{self, Loose};
use crate::engine::kv::{self, KvCall, KvOp, KvRefusal, PREFIX_LIMIT};
use crate::error::EngineError;

fn refused(r: KvRefusal) -> ApiError {
    EngineError::KvRefusal(r).into()
}

fn bad(m: String) -> ApiError {
    refused(kv::refuse("kv_bad_request", m))
}

/// `{"results": [...]}` of a standalone call.
#[derive(serde::Serialize)]
struct Results<'a> {
    results: Vec<KvResultWire<'a>>,
}

pub async fn kv(s: Caller, Body(bytes): Body) -> Result<Response, ApiError> {
    let body: KvBody = parse_body_with(&bytes, bad)?;
    let ops = body
        .operations
        .ok_or_else(|| bad("operations is required".to_string()))?;
    let ops = ops
        .into_iter()
        .enumerate()
        .map(|(i, op)| op.into_op(At("operations", Some(i))))
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused)?;
    kv::check_limits(&ops, kv::STANDALONE).map_err(refused)?;
    let kinds: Vec<_> = ops.iter().map(KvOp::kind).collect();
    Ok(match s.engine.kv(s.tenant(), ops).await? {
        KvCall::Done(rs) => {
            let results = rs
                .iter()
                .zip(kinds)
                .enumerate()
                .map(|(i, (r, kind))| result(kind, r).at(i))
                .collect();
            AxumJson(Results { results }).into_response()
        }
        KvCall::Failed { failed_index, lost } => {
            AxumJson(PreconditionBody::new(failed_index, &lost)).into_response()
        }
    })
}

/// Runs one op built from the path and answers its bare result (or the precondition
/// body when a `required` op lost).
async fn single(s: Caller, op: KvOpWire) -> Result<Response, ApiError> {
    let op = op.into_op(At("body", None)).map_err(refused)?;
    let kind = op.kind();
    Ok(match s.engine.kv(s.tenant(), vec![op]).await? {
        KvCall::Done(rs) => AxumJson(result(kind, &rs[0])).into_response(),
        KvCall::Failed { failed_index, lost } => {
            AxumJson(PreconditionBody::new(failed_index, &lost)).into_response()
        }
    })
}

pub async fn get_one(
    s: Caller,
    PathParams((ns, key)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    single(s, KvOpWire::single("get", ns, key)).await
}

/// The body of `PUT /api/v1/kv/{ns}/{key}`: the fields of a `put` the path leaves out.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PutOne {
    #[serde(default, deserialize_with = "loose::present")]
    value: Option<Value>,
    ttl_seconds: Option<Loose<i64>>,
    forever: Option<bool>,
    expect: Option<Loose<u64>>,
    required: Option<bool>,
}

pub async fn put_one(
    s: Caller,
    PathParams((ns, key)): PathParams<(String, String)>,
    Body(bytes): Body,
) -> Result<Response, ApiError> {
    let body: PutOne = parse_body_with(&bytes, bad)?;
    let op = KvOpWire {
        value: body.value,
        ttl_seconds: body.ttl_seconds,
        forever: body.forever,
        expect: body.expect,
        required: body.required,
        ..KvOpWire::single("put", ns, key)
    };
    single(s, op).await
}

pub async fn delete_one(
    s: Caller,
    PathParams((ns, key)): PathParams<(String, String)>,
    params: Params,
) -> Result<Response, ApiError> {
    // The KV rules judge the value, so a bad one is `kv_bad_expect` as in the batch route.
    let expect = params.get("expect").map(|e| {
        Loose::of(
            e.parse::<i64>()
                .map_or_else(|_| Value::from(e), Value::from),
        )
    });
    let op = KvOpWire {
        expect,
        ..KvOpWire::single("delete", ns, key)
    };
    single(s, op).await
}

/// `GET /api/v1/kv`: the tenant's namespaces with live keys, in name order, read from
/// the last commit (no turn of the writer). It reads no parameter.
pub async fn namespaces(s: Caller) -> Result<Response, ApiError> {
    let list = s.engine.kv_namespaces(s.tenant()).await?;
    Ok(AxumJson(wire::namespaces(&list)).into_response())
}

/// `GET /api/v1/kv/{ns}?prefix=&after=&limit=`: a page of the namespace's live rows in
/// key order. The query is checked as a `getPrefix` operation with the same fields
/// (so a bad namespace is the same `kv_bad_request`), and read by the operation's own
/// rule ([`kv::prefix_page`]) from the last commit, charged to the broker's answer
/// budget while built and sent. `limit` is a query integer (default 100, 1 to 1,000,
/// else 400).
pub async fn rows(
    s: Caller,
    PathParams(ns): PathParams<String>,
    params: Params,
) -> Result<Response, ApiError> {
    let limit = params.int("limit", PREFIX_LIMIT.0 as i64, 1, PREFIX_LIMIT.1 as i64)?;
    let op = KvOpWire {
        op: Some("getPrefix".to_string()),
        ns: Some(ns),
        prefix: params.get("prefix").map(str::to_string),
        after: params.get("after").map(str::to_string),
        limit: Some(limit),
        ..Default::default()
    }
    .into_op(At("query", None))
    .map_err(refused)?;
    let KvOp::GetPrefix { ns, page } = op else {
        unreachable!("a getPrefix operation was built")
    };
    let out = s.engine.kv_page(s.tenant(), &ns, page).await?;
    Ok(super::budgeted::json_holding(
        &wire::page(&out.value),
        out.held,
    ))
}
