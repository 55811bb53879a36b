//! Consumer groups: seek, delete (on one queue or all), the subscription time, the
//! operator's reads (list, one group's detail, lagging partitions), and the dead-letter
//! listing.
//!
//! The read shapes follow the official client's live tests (`admin.rs` of `queen-mq`
//! 2.7.0) and the Queen server they describe: the list and the lagging rows are bare
//! arrays, the detail is an object keyed by queue name, and the lagging rows are
//! snake_case where the detail is camelCase. This broker keeps no worker ids and no
//! last-consumed times: those keys are always present and `null`.

use axum::Json as AxumJson;
use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::BTreeMap;

use super::budgeted::json_holding;
use super::error::ApiError;
use super::extract::{Json, Params, PathParams};
use super::{AppState, Caller};
use crate::clock::{Micros, format_iso, parse_iso};
use crate::engine::answers::Charged;
use crate::engine::dlq::DlqQuery;
use crate::engine::groups::{GroupOnQueue, SeekTo, SubscriptionMode};
use crate::engine::resources::Page;

/// This module's routes, merged into [`super::router`]. The static `lagging` segment
/// takes precedence over `{group}` (as on the Queen server, a group named `lagging`
/// has no detail route).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/consumer-groups", get(list))
        .route("/api/v1/consumer-groups/lagging", get(lagging))
        .route(
            "/api/v1/consumer-groups/{group}",
            get(detail).delete(delete_group),
        )
        .route(
            "/api/v1/consumer-groups/{group}/subscription",
            post(subscription),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}",
            delete(delete_group_on_queue),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/seek",
            post(seek_queue),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
            post(seek_partition),
        )
        .route("/api/v1/dlq", get(dlq))
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SeekBody {
    to_end: Option<bool>,
    timestamp: Option<String>,
}

fn seek_target(b: &SeekBody) -> Result<SeekTo, ApiError> {
    match (b.to_end, b.timestamp.as_deref()) {
        (Some(true), None) => Ok(SeekTo::End),
        (None | Some(false), Some(t)) => parse_iso(t).map(SeekTo::Time).ok_or_else(|| {
            ApiError::bad_request(format!("timestamp must be an ISO-8601 time, got {t:?}"))
        }),
        _ => Err(ApiError::bad_request(
            "send exactly one of {\"toEnd\": true} or {\"timestamp\": \"<ISO time>\"}",
        )),
    }
}

async fn seek(
    s: Caller,
    group: String,
    queue: String,
    partition: Option<String>,
    body: SeekBody,
) -> Result<AxumJson<Value>, ApiError> {
    let to = seek_target(&body)?;
    let n = s
        .engine
        .seek(s.tenant(), &group, &queue, partition.as_deref(), to)
        .await?;
    Ok(AxumJson(json!({
        "success": true,
        "consumerGroup": group,
        "queueName": queue,
        "partitionsUpdated": n,
    })))
}

pub async fn seek_queue(
    s: Caller,
    PathParams((group, queue)): PathParams<(String, String)>,
    Json(body): Json<SeekBody>,
) -> Result<AxumJson<Value>, ApiError> {
    seek(s, group, queue, None, body).await
}

pub async fn seek_partition(
    s: Caller,
    PathParams((group, queue, partition)): PathParams<(String, String, String)>,
    Json(body): Json<SeekBody>,
) -> Result<AxumJson<Value>, ApiError> {
    seek(s, group, queue, Some(partition), body).await
}

/// The answer to a group's deletion, as the official client's tests read it
/// (`deletedPartitions`, `metadataDeleted`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeletedBody {
    success: bool,
    consumer_group: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    queue_name: Option<String>,
    /// Partition cursors removed.
    deleted_partitions: usize,
    metadata_deleted: bool,
}

/// `DELETE /api/v1/consumer-groups/{group}?deleteMetadata=`: the group on every queue
/// it subscribed to.
pub async fn delete_group(
    s: Caller,
    PathParams(group): PathParams<String>,
    params: Params,
) -> Result<Response, ApiError> {
    let metadata = params.bool("deleteMetadata", true)?;
    let n = s
        .engine
        .delete_group_on(s.tenant(), &group, None, metadata)
        .await?;
    Ok(AxumJson(DeletedBody {
        success: true,
        consumer_group: group,
        queue_name: None,
        deleted_partitions: n,
        metadata_deleted: metadata,
    })
    .into_response())
}

/// `DELETE /api/v1/consumer-groups/{group}/queues/{queue}?deleteMetadata=`: the group
/// on one queue; its other queues keep their cursors.
pub async fn delete_group_on_queue(
    s: Caller,
    PathParams((group, queue)): PathParams<(String, String)>,
    params: Params,
) -> Result<Response, ApiError> {
    let metadata = params.bool("deleteMetadata", true)?;
    let n = s
        .engine
        .delete_group_on(s.tenant(), &group, Some(&queue), metadata)
        .await?;
    Ok(AxumJson(DeletedBody {
        success: true,
        consumer_group: group,
        queue_name: Some(queue),
        deleted_partitions: n,
        metadata_deleted: metadata,
    })
    .into_response())
}

/// `POST /api/v1/consumer-groups/{group}/subscription`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionBody {
    subscription_timestamp: Option<String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SubscriptionAnswer {
    success: bool,
    consumer_group: String,
    /// The time as sent.
    new_timestamp: String,
    /// Subscriptions moved (one per queue); 0 for a group that never subscribed.
    rows_updated: usize,
}

/// Moves the group's subscription time on every queue: partitions it has not read yet
/// are read from that time on.
pub async fn subscription(
    s: Caller,
    PathParams(group): PathParams<String>,
    Json(body): Json<SubscriptionBody>,
) -> Result<Response, ApiError> {
    let Some(sent) = body.subscription_timestamp else {
        return Err(ApiError::bad_request(
            "subscriptionTimestamp is required (an ISO-8601 time)",
        ));
    };
    let at = parse_iso(&sent).ok_or_else(|| {
        ApiError::bad_request(format!(
            "subscriptionTimestamp must be an ISO-8601 time, got {sent:?}"
        ))
    })?;
    let n = s.engine.set_subscription(s.tenant(), &group, at).await?;
    Ok(AxumJson(SubscriptionAnswer {
        success: true,
        consumer_group: group,
        new_timestamp: sent,
        rows_updated: n,
    })
    .into_response())
}

fn mode_str(m: SubscriptionMode) -> &'static str {
    match m {
        SubscriptionMode::All => "all",
        SubscriptionMode::New => "new",
    }
}

/// A time lag above this many seconds marks a group `Lagging` in the list (the Queen
/// server's threshold).
const LAGGING_AFTER_SECONDS: i64 = 300;

/// One (group, queue) of the list.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupRow<'a> {
    name: &'a str,
    topics: [&'a str; 1],
    queue_name: &'a str,
    /// Partitions the group has a cursor on.
    members: usize,
    partitions_with_lag: usize,
    /// Messages left to read over those partitions.
    total_lag: u64,
    /// The largest time lag of those partitions, in seconds.
    max_time_lag: i64,
    /// `Lagging` (a time lag over 300 s), `Stable` (it has read), `Dead` (it has not).
    state: &'static str,
    subscription_mode: &'static str,
    subscription_timestamp: Option<String>,
    subscription_created_at: Option<String>,
}

fn group_row(g: &GroupOnQueue, now: Micros) -> GroupRow<'_> {
    let max_time_lag = g
        .partitions
        .iter()
        .map(|p| p.time_lag_seconds(now))
        .max()
        .unwrap_or(0);
    let state = if max_time_lag > LAGGING_AFTER_SECONDS {
        "Lagging"
    } else if g.partitions.is_empty() {
        "Dead"
    } else {
        "Stable"
    };
    let sub = &g.subscription;
    let mode = sub.mode();
    GroupRow {
        name: &sub.group,
        topics: [&sub.queue],
        queue_name: &sub.queue,
        members: g.partitions.len(),
        partitions_with_lag: g.partitions.iter().filter(|p| p.offset_lag > 0).count(),
        total_lag: g.partitions.iter().map(|p| p.offset_lag).sum(),
        max_time_lag,
        state,
        subscription_mode: mode_str(mode),
        subscription_timestamp: (mode == SubscriptionMode::New).then(|| format_iso(sub.from)),
        subscription_created_at: None,
    }
}

/// The most rows one page of `GET /api/v1/consumer-groups` carries.
pub const MAX_GROUP_PAGE: i64 = 10_000;

/// `GET /api/v1/consumer-groups[?pageSize=&pageOffset=]`: every (group, queue), a bare
/// array; all of them, as Queen 2 answers, unless the call asks for a page
/// ([`super::resources::listing_page`]; a page shorter than `pageSize` is the last)
/// **(ours)**. Charged to the broker's answer budget while built and sent.
pub async fn list(s: Caller, params: Params) -> Result<Response, ApiError> {
    let page = super::resources::listing_page(&params, MAX_GROUP_PAGE)?.unwrap_or(Page::ALL);
    let Charged {
        value: (groups, now),
        held,
    } = s.engine.group_overview(s.tenant(), None, page).await?;
    let rows: Vec<GroupRow> = groups.rows.iter().map(|g| group_row(g, now)).collect();
    Ok(json_holding(&rows, held))
}

/// One partition of a group's detail.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DetailPartition<'a> {
    partition: &'a str,
    partition_id: String,
    worker_id: Option<&'a str>,
    last_consumed_at: Option<String>,
    /// Offsets below the cursor: what the group has committed there (a group that
    /// subscribed after messages were written counts the offsets it skipped too; this
    /// broker keeps no separate count).
    total_consumed: u64,
    cursor: u64,
    offset_lag: u64,
    time_lag_seconds: i64,
    lease_active: bool,
    lease_expires_at: Option<String>,
}

#[derive(Serialize)]
struct DetailQueue<'a> {
    partitions: Vec<DetailPartition<'a>>,
}

/// `GET /api/v1/consumer-groups/{group}`: `{queue: {partitions: [...]}}` for every
/// queue where the group has a cursor; `{}` for a group unknown here.
pub async fn detail(
    s: Caller,
    PathParams(group): PathParams<String>,
) -> Result<Response, ApiError> {
    let Charged {
        value: (groups, now),
        held,
    } = s
        .engine
        .group_overview(s.tenant(), Some(&group), Page::ALL)
        .await?;
    let mut out = BTreeMap::new();
    for g in groups.rows.iter().filter(|g| !g.partitions.is_empty()) {
        let partitions = g
            .partitions
            .iter()
            .map(|p| DetailPartition {
                partition: &p.partition,
                partition_id: p.partition_id.to_string(),
                worker_id: None,
                last_consumed_at: None,
                total_consumed: p.cursor,
                cursor: p.cursor,
                offset_lag: p.offset_lag,
                time_lag_seconds: p.time_lag_seconds(now),
                lease_active: p.lease_expires_at.is_some(),
                lease_expires_at: p.lease_expires_at.map(format_iso),
            })
            .collect();
        out.insert(g.subscription.queue.as_str(), DetailQueue { partitions });
    }
    Ok(json_holding(&out, held))
}

/// One lagging partition (snake_case, as the Queen server answers it).
#[derive(Serialize)]
struct LaggingRow<'a> {
    consumer_group: &'a str,
    queue_name: &'a str,
    partition_name: &'a str,
    partition_id: String,
    worker_id: Option<&'a str>,
    offset_lag: u64,
    time_lag_seconds: i64,
    lag_hours: f64,
    oldest_unconsumed_at: Option<String>,
    last_consumed_at: Option<String>,
}

/// `GET /api/v1/consumer-groups/lagging?minLagSeconds=N` (default 3600): every
/// partition where a group's oldest unread message is more than N seconds old, the
/// oldest first, as a bare array.
pub async fn lagging(s: Caller, params: Params) -> Result<Response, ApiError> {
    let min = params.int("minLagSeconds", 3600, 0, i64::MAX)?;
    let Charged {
        value: (groups, now),
        held,
    } = s.engine.group_overview(s.tenant(), None, Page::ALL).await?;
    let mut rows: Vec<LaggingRow> = groups
        .rows
        .iter()
        .flat_map(|g| g.partitions.iter().map(move |p| (g, p)))
        .filter(|(_, p)| p.offset_lag > 0 && p.time_lag_seconds(now) > min)
        .map(|(g, p)| {
            let lag = p.time_lag_seconds(now);
            LaggingRow {
                consumer_group: &g.subscription.group,
                queue_name: &g.subscription.queue,
                partition_name: &p.partition,
                partition_id: p.partition_id.to_string(),
                worker_id: None,
                offset_lag: p.offset_lag,
                time_lag_seconds: lag,
                lag_hours: (lag as f64 / 36.0).round() / 100.0,
                oldest_unconsumed_at: p.oldest_unconsumed_at.map(format_iso),
                last_consumed_at: None,
            }
        })
        .collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.time_lag_seconds));
    Ok(json_holding(&rows, held))
}

/// One dead letter as listed. `data` is serialised as the stored raw text: building a
/// `serde_json::Value` from it (as `json!` does) re-parses it under serde_json's depth
/// limit, and a payload nested deeper than that (stored before pushes checked depth, or
/// by a timer) made the listing panic.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DeadLetterBody<'a> {
    id: &'a str,
    transaction_id: &'a str,
    partition_id: String,
    queue: &'a str,
    partition: &'a str,
    consumer_group: &'a str,
    data: &'a RawValue,
    error_message: Option<&'a str>,
    retry_count: u32,
    producer_sub: Option<&'a str>,
    created_at: String,
    failed_at: String,
}

#[derive(Serialize)]
struct DlqBody<'a> {
    messages: Vec<DeadLetterBody<'a>>,
    pagination: Value,
    total: usize,
}

pub async fn dlq(s: Caller, params: Params) -> Result<Response, ApiError> {
    let q = DlqQuery {
        queue: params.get("queue").map(str::to_string),
        group: params.get("consumerGroup").map(str::to_string),
        limit: params.int("limit", 100, 1, 1_000)? as usize,
        offset: params.int("offset", 0, 0, i64::MAX)? as usize,
    };
    let (limit, offset) = (q.limit, q.offset);
    let Charged { value: page, held } = s.engine.dlq(s.tenant(), q).await?;
    let messages = page
        .records
        .iter()
        .map(|r| DeadLetterBody {
            id: &r.message.id,
            transaction_id: &r.message.txn,
            partition_id: r.partition_id.to_string(),
            queue: &r.queue,
            partition: &r.partition,
            consumer_group: &r.group,
            data: &r.message.data,
            error_message: r.error.as_deref(),
            retry_count: r.retry_count,
            producer_sub: r.message.producer_sub.as_deref(),
            created_at: format_iso(r.message.created_at),
            failed_at: format_iso(r.failed_at),
        })
        .collect();
    // The records' room in the answer budget is held until the body has been sent.
    let answer = DlqBody {
        messages,
        pagination: json!({ "limit": limit, "offset": offset }),
        total: page.total,
    };
    Ok(super::budgeted::json_holding(&answer, held))
}
