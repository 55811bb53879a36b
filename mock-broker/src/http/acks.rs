//! Acks and lease extension.

use axum::Json as AxumJson;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, OptionalJson, PathParams};
use crate::clock::format_iso;
use crate::engine::QUEUE_MODE;
use crate::engine::ack::{Ack, AckOutcome, parse_status};

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckBody {
    transaction_id: String,
    partition_id: String,
    status: Option<String>,
    consumer_group: Option<String>,
    lease_id: Option<String>,
    error: Option<String>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AckBatchBody {
    acknowledgments: Vec<AckBody>,
    consumer_group: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AckResultBody {
    index: usize,
    transaction_id: String,
    success: bool,
    error: Option<String>,
    lease_released: bool,
    dlq: bool,
    noop: bool,
}

fn to_ack(b: AckBody, group: Option<&str>) -> Ack {
    Ack {
        status: parse_status(b.status.as_deref()),
        group: b
            .consumer_group
            .or(group.map(str::to_string))
            .unwrap_or_else(|| QUEUE_MODE.into()),
        // An autoAck pop hands out `leaseId: ""`: that is no lease.
        lease_id: b.lease_id.filter(|l| !l.is_empty()),
        transaction_id: b.transaction_id,
        partition_id: b.partition_id,
        error: b.error,
    }
}

async fn run(s: Caller, acks: Vec<Ack>) -> Result<AxumJson<Vec<AckResultBody>>, ApiError> {
    let ids: Vec<String> = acks.iter().map(|a| a.transaction_id.clone()).collect();
    let outcomes = s.engine.ack(s.tenant(), acks).await?;
    Ok(AxumJson(
        outcomes
            .into_iter()
            .zip(ids)
            .enumerate()
            .map(
                |(index, (o, transaction_id)): (usize, (AckOutcome, String))| AckResultBody {
                    index,
                    transaction_id,
                    success: o.success,
                    error: o.error,
                    lease_released: o.lease_released,
                    dlq: o.dlq,
                    noop: o.noop,
                },
            )
            .collect(),
    ))
}

pub async fn ack(
    s: Caller,
    Json(body): Json<AckBody>,
) -> Result<AxumJson<Vec<AckResultBody>>, ApiError> {
    let a = to_ack(body, None);
    run(s, vec![a]).await
}

pub async fn ack_batch(
    s: Caller,
    Json(body): Json<AckBatchBody>,
) -> Result<AxumJson<Vec<AckResultBody>>, ApiError> {
    let group = body.consumer_group;
    let acks = body
        .acknowledgments
        .into_iter()
        .map(|b| to_ack(b, group.as_deref()))
        .collect();
    run(s, acks).await
}

#[derive(Deserialize)]
pub struct ExtendBody {
    seconds: Option<i64>,
}

pub async fn extend(
    s: Caller,
    PathParams(lease): PathParams<String>,
    OptionalJson(body): OptionalJson<ExtendBody>,
) -> Result<AxumJson<Value>, ApiError> {
    let seconds = body.and_then(|b| b.seconds).unwrap_or(60);
    if !(1..=31_536_000).contains(&seconds) {
        return Err(ApiError::bad_request(format!(
            "seconds must be from 1 to 31536000, got {seconds}"
        )));
    }
    let out = s.engine.extend_lease(s.tenant(), &lease, seconds).await?;
    let at = out.expires_at.map(format_iso);
    Ok(AxumJson(json!({
        "leaseId": lease,
        "success": out.renewed > 0,
        "renewed": out.renewed,
        "newExpiresAt": at,
        "expiresAt": at,
        "lease_expires_at": at,
    })))
}
