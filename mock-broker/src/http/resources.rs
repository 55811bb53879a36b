//! Operator reads: queues with their partitions' figures, and one message with where it
//! stands for each consumer group (`GET /api/v1/resources/queues[/{queue}]`,
//! `GET /api/v1/messages/{partitionId}/{transactionId}`), and the summaries by
//! namespace, task and partition and a queue's depth (routed in `http/status.rs`).
//! Shapes follow the official
//! client's live tests (`semantics.rs`, `admin.rs` of `queen-mq` 2.7.0): they read these
//! keys by name, so every key below is always present.

use axum::Json as AxumJson;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::value::RawValue;

use super::Caller;
use super::budgeted::json_holding;
use super::error::ApiError;
use super::extract::Params;
use super::extract::PathParams;
use super::wire::status::Pagination;
use crate::clock::format_iso;
use crate::engine::answers::Charged;
use crate::engine::resources::{
    Counts, GroupBy, GroupView, Measure, MessageDetail, MessageStatus, Page, PartitionStats,
    QueueScan, QueueStats, busiest_partitions, groupings,
};
use crate::engine::status::Filter;
use crate::store::records::QueueOptions;

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CountsBody {
    total: u64,
    pending: u64,
    processing: u64,
    completed: u64,
    dead_letter: u64,
}

impl From<&Counts> for CountsBody {
    fn from(c: &Counts) -> Self {
        CountsBody {
            total: c.total,
            pending: c.pending,
            processing: c.processing,
            completed: c.completed,
            dead_letter: c.dead_letter,
        }
    }
}

/// What the log holds: its message count and the partitions holding them.
#[derive(Serialize)]
struct SegmentsBody {
    messages: u64,
    partitions: usize,
}

/// A queue as listed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueueRow<'a> {
    /// Queues are known by name; `id` repeats it.
    id: &'a str,
    name: &'a str,
    namespace: Option<&'a str>,
    task: Option<&'a str>,
    partitions: usize,
    messages: CountsBody,
    segments: SegmentsBody,
    retained_bytes: u64,
    created_at: String,
}

impl<'a> QueueRow<'a> {
    fn of(q: &'a QueueStats) -> Self {
        QueueRow {
            id: &q.name,
            name: &q.name,
            namespace: q.record.namespace.as_deref(),
            task: q.record.task.as_deref(),
            partitions: q.partition_count,
            messages: (&q.totals).into(),
            segments: segments(q),
            retained_bytes: q.retained_bytes,
            created_at: format_iso(q.record.created_at),
        }
    }
}

fn segments(q: &QueueStats) -> SegmentsBody {
    SegmentsBody {
        messages: q.totals.total,
        partitions: q.partition_count,
    }
}

#[derive(Serialize)]
struct QueueList<'a> {
    queues: Vec<QueueRow<'a>>,
    /// Queues of the tenant **(ours)**: with a page, how many there are to page over.
    total: usize,
    /// The page, when the call asked for one **(ours)**.
    #[serde(skip_serializing_if = "Option::is_none")]
    pagination: Option<Pagination>,
}

/// The most queues one page of `GET /api/v1/resources/queues` carries.
pub const MAX_QUEUE_PAGE: i64 = 10_000;

/// The page a listing of every row asks for **(ours)**: `pageSize` (1 to `max`) and
/// `pageOffset`; `None` when it names neither, for every row. Not `limit`/`offset`:
/// Queen 2 answers these listings whole and ignores those, and the official client's
/// tests send `?limit=500` and then look for their queue among all of them.
pub(super) fn listing_page(p: &Params, max: i64) -> Result<Option<Page>, ApiError> {
    if p.get("pageSize").is_none() && p.get("pageOffset").is_none() {
        return Ok(None);
    }
    Ok(Some(Page {
        limit: p.int("pageSize", max, 1, max)? as usize,
        offset: p.int("pageOffset", 0, 0, i64::MAX)? as usize,
    }))
}

/// `GET /api/v1/resources/queues[?pageSize=&pageOffset=]`: the queues of the caller's
/// tenant, in name order; all of them, as Queen 2 answers (which ignores `limit`),
/// unless the call asks for a page ([`listing_page`]) **(ours)**; `total` counts them
/// all. The answer is charged to the broker's answer budget while it is built and
/// sent, so that many large listings at once wait for room (then 429) rather than
/// grow the broker's memory without bound.
pub async fn list(s: Caller, p: Params) -> Result<Response, ApiError> {
    let page = listing_page(&p, MAX_QUEUE_PAGE)?;
    let scan = QueueScan {
        measure: Measure::Full,
        filter: Filter::default(),
        page: page.unwrap_or(Page::ALL),
        partitions: Page::NONE,
    };
    let Charged {
        value: listing,
        held,
    } = s.engine.queue_listing(s.tenant(), scan).await?;
    let body = QueueList {
        queues: listing.rows.iter().map(QueueRow::of).collect(),
        total: listing.total,
        pagination: page.map(Into::into),
    };
    Ok(json_holding(&body, held))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct PartitionBody<'a> {
    id: String,
    name: &'a str,
    created_at: String,
    first_offset: u64,
    next_offset: u64,
    last_message_at: Option<String>,
    consumer_groups: usize,
    retained_bytes: u64,
    stats: CountsBody,
}

impl<'a> From<&'a PartitionStats> for PartitionBody<'a> {
    fn from(p: &'a PartitionStats) -> Self {
        PartitionBody {
            id: p.id.to_string(),
            name: &p.name,
            created_at: format_iso(p.created_at),
            first_offset: p.first_offset,
            next_offset: p.next_offset,
            last_message_at: p.last_message_at.map(format_iso),
            consumer_groups: p.groups,
            retained_bytes: p.retained_bytes,
            stats: (&p.counts).into(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct QueueDetailBody<'a> {
    id: &'a str,
    name: &'a str,
    namespace: Option<&'a str>,
    task: Option<&'a str>,
    created_at: String,
    config: &'a QueueOptions,
    totals: CountsBody,
    segments: SegmentsBody,
    retained_bytes: u64,
    /// A page of the partitions, in name order.
    partitions: Vec<PartitionBody<'a>>,
    /// Every partition of the queue.
    partitions_total: usize,
    /// The page.
    pagination: Pagination,
}

/// Partitions a queue's detail carries when the call names no `limit` **(ours)**:
/// Queen 2 answers them all, which made one `GET` of a queue with 100,000 partitions
/// 43 MB (issue 52); a page of 1,000 is 0.4 MB.
pub const DEFAULT_PARTITION_PAGE: i64 = 1_000;

/// The most partitions one page of a queue's detail carries.
pub const MAX_PARTITION_PAGE: i64 = 10_000;

/// The page of partitions a queue's detail asks for: `limit` (default
/// [`DEFAULT_PARTITION_PAGE`], at most [`MAX_PARTITION_PAGE`]) and `offset`.
pub(super) fn partition_page(p: &Params) -> Result<Page, ApiError> {
    Ok(Page {
        limit: p.int("limit", DEFAULT_PARTITION_PAGE, 1, MAX_PARTITION_PAGE)? as usize,
        offset: p.int("offset", 0, 0, i64::MAX)? as usize,
    })
}

/// `GET /api/v1/resources/queues/{queue}?limit=&offset=`: one queue, a page of its
/// partitions (the first 1,000 by default; `partitionsTotal` counts them all) and its
/// totals over all of them.
pub async fn detail(
    s: Caller,
    PathParams(queue): PathParams<String>,
    p: Params,
) -> Result<Response, ApiError> {
    let page = partition_page(&p)?;
    let Some(q) = s.engine.queue_detail(s.tenant(), &queue, page).await? else {
        return Err(not_found(format!("queue {queue:?} does not exist")));
    };
    let body = QueueDetailBody {
        id: &q.name,
        name: &q.name,
        namespace: q.record.namespace.as_deref(),
        task: q.record.task.as_deref(),
        created_at: format_iso(q.record.created_at),
        config: &q.record.options,
        totals: (&q.totals).into(),
        segments: segments(&q),
        retained_bytes: q.retained_bytes,
        partitions: q.partitions.iter().map(Into::into).collect(),
        partitions_total: q.partition_count,
        pagination: page.into(),
    };
    Ok(AxumJson(body).into_response())
}

fn status_str(s: MessageStatus) -> &'static str {
    match s {
        MessageStatus::Pending => "pending",
        MessageStatus::Processing => "processing",
        MessageStatus::Completed => "completed",
        MessageStatus::DeadLetter => "dead_letter",
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct GroupBody<'a> {
    name: &'a str,
    status: &'static str,
    /// The group's cursor is past the message (committed; queen-mq 2.6.0
    /// `tests/test_pop.py` `test_pop_with_commit_on_delivery_is_committed_at_delivery`).
    consumed: bool,
    cursor: u64,
    lease_id: Option<&'a str>,
    lease_expires_at: Option<String>,
    delivery_attempts: u32,
    failures: u32,
}

impl<'a> From<&'a GroupView> for GroupBody<'a> {
    fn from(g: &'a GroupView) -> Self {
        GroupBody {
            name: &g.name,
            status: status_str(g.status),
            consumed: g.consumed,
            cursor: g.cursor,
            lease_id: g.lease.as_ref().map(|(id, _)| id.as_str()),
            lease_expires_at: g.lease.as_ref().map(|(_, at)| format_iso(*at)),
            delivery_attempts: g.deliveries,
            failures: g.failures,
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MessageBody<'a> {
    id: &'a str,
    transaction_id: &'a str,
    partition_id: String,
    partition: &'a str,
    queue: &'a str,
    /// `queue/partition`.
    queue_path: String,
    namespace: Option<&'a str>,
    task: Option<&'a str>,
    offset: u64,
    status: &'static str,
    /// The payload; `payload` repeats it (SDKs read `data`, consoles `payload`).
    data: &'a RawValue,
    payload: &'a RawValue,
    trace_id: Option<&'a str>,
    producer_sub: Option<&'a str>,
    created_at: String,
    /// The most `failed` acks any group gave it.
    retry_count: u32,
    queue_config: &'a QueueOptions,
    consumer_groups: Vec<GroupBody<'a>>,
}

/// `GET /api/v1/messages/{partitionId}/{transactionId}`: one message and where it stands.
pub async fn message(
    s: Caller,
    PathParams((pid, txn)): PathParams<(String, String)>,
) -> Result<Response, ApiError> {
    let missing = || not_found(format!("no message {txn:?} in partition {pid:?}"));
    let Ok(id) = pid.parse::<u64>() else {
        return Err(missing());
    };
    let Charged { value: d, held } = s.engine.message_detail(s.tenant(), id, &txn).await?;
    let Some(d) = d else {
        return Err(missing());
    };
    let MessageDetail {
        queue,
        partition,
        partition_id,
        offset,
        message: m,
        queue_record,
        status,
        groups,
    } = &d;
    let body = MessageBody {
        id: &m.id,
        transaction_id: &m.txn,
        partition_id: partition_id.to_string(),
        partition,
        queue,
        queue_path: format!("{queue}/{partition}"),
        namespace: queue_record.namespace.as_deref(),
        task: queue_record.task.as_deref(),
        offset: *offset,
        status: status_str(*status),
        data: &m.data,
        payload: &m.data,
        trace_id: m.trace.as_deref(),
        producer_sub: m.producer_sub.as_deref(),
        created_at: format_iso(m.created_at),
        retry_count: groups.iter().map(|g| g.failures).max().unwrap_or(0),
        queue_config: &queue_record.options,
        consumer_groups: groups.iter().map(Into::into).collect(),
    };
    Ok(json_holding(&body, held))
}

/// A 404 `not_found`.
pub(crate) fn not_found(message: String) -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", message)
}

/// Stored and pending, as the namespace and task rows count them.
#[derive(Serialize)]
struct GroupCounts {
    total: u64,
    /// Not yet committed by the slowest group (pending and processing).
    pending: u64,
}

#[derive(Serialize)]
struct NamespaceRow<'a> {
    namespace: &'a str,
    queues: usize,
    partitions: usize,
    messages: GroupCounts,
}

#[derive(Serialize)]
struct TaskRow<'a> {
    task: &'a str,
    queues: usize,
    partitions: usize,
    messages: GroupCounts,
}

#[derive(Serialize)]
struct Namespaces<'a> {
    namespaces: Vec<NamespaceRow<'a>>,
}

#[derive(Serialize)]
struct Tasks<'a> {
    tasks: Vec<TaskRow<'a>>,
}

fn group_counts(c: &Counts) -> GroupCounts {
    GroupCounts {
        total: c.total,
        pending: c.pending + c.processing,
    }
}

/// `GET /api/v1/resources/namespaces`: every namespace in use (given at configure or
/// derived from a dotted queue name), with its queues' figures.
pub async fn namespaces(s: Caller) -> Result<Response, ApiError> {
    let Charged { value: snap, held } = s
        .engine
        .status_snapshot(s.tenant(), Filter::default())
        .await?;
    let groups = groupings(&snap.queues, GroupBy::Namespace);
    let body = Namespaces {
        namespaces: groups
            .iter()
            .map(|g| NamespaceRow {
                namespace: &g.name,
                queues: g.queues.len(),
                partitions: g.partitions,
                messages: group_counts(&g.counts),
            })
            .collect(),
    };
    Ok(json_holding(&body, held))
}

/// `GET /api/v1/resources/tasks`: every task in use, with its queues' figures.
pub async fn tasks(s: Caller) -> Result<Response, ApiError> {
    let Charged { value: snap, held } = s
        .engine
        .status_snapshot(s.tenant(), Filter::default())
        .await?;
    let groups = groupings(&snap.queues, GroupBy::Task);
    let body = Tasks {
        tasks: groups
            .iter()
            .map(|g| TaskRow {
                task: &g.name,
                queues: g.queues.len(),
                partitions: g.partitions,
                messages: group_counts(&g.counts),
            })
            .collect(),
    };
    Ok(json_holding(&body, held))
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct RankedRow<'a> {
    queue: &'a str,
    partition: &'a str,
    id: String,
    pending: u64,
    processing: u64,
    /// Age in seconds of the oldest message its slowest group has not committed;
    /// `null` when caught up.
    lag_seconds: Option<i64>,
}

#[derive(Serialize)]
struct Ranked<'a> {
    partitions: Vec<RankedRow<'a>>,
}

/// `GET /api/v1/resources/partitions?queue=&limit=610`: the partitions holding the
/// most pending first.
pub async fn partitions(s: Caller, p: Params) -> Result<Response, ApiError> {
    let limit = p.int("limit", 610, 1, 100_000)? as usize;
    let filter = Filter {
        queue: p.get("queue").map(str::to_string),
        ..Filter::default()
    };
    let Charged { value: snap, held } = s.engine.status_snapshot(s.tenant(), filter).await?;
    let now = s.engine.clock().now_micros();
    let body = Ranked {
        partitions: busiest_partitions(&snap.queues, limit)
            .into_iter()
            .map(|r| RankedRow {
                queue: r.queue,
                partition: &r.stats.name,
                id: r.stats.id.to_string(),
                pending: r.stats.counts.pending,
                processing: r.stats.counts.processing,
                lag_seconds: r
                    .stats
                    .oldest_unconsumed_at
                    .map(|at| (now - at).max(0) / 1_000_000),
            })
            .collect(),
    };
    Ok(json_holding(&body, held))
}

#[derive(Serialize)]
struct DepthPartition<'a> {
    partition: &'a str,
    pending: u64,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct DepthBody<'a> {
    queue: &'a str,
    group: Option<&'a str>,
    pending: u64,
    partitions_pending: u64,
    /// This broker has no conflating groups: always false.
    conflation: bool,
    /// Work left: without conflation, the same as `pending`.
    effective_pending: u64,
    partitions: Vec<DepthPartition<'a>>,
}

/// `GET /api/v1/resources/queues/{queue}/depth?group=`: a queue's backlog by
/// watermark arithmetic, for the slowest group or one group; 404 when the queue
/// does not exist.
pub async fn depth(
    s: Caller,
    PathParams(queue): PathParams<String>,
    p: Params,
) -> Result<Response, ApiError> {
    let group = p.get("group");
    let Some(d) = s.engine.queue_depth(s.tenant(), &queue, group).await? else {
        return Err(not_found(format!("queue {queue:?} does not exist")));
    };
    let body = DepthBody {
        queue: &d.queue,
        group: d.group.as_deref(),
        pending: d.pending,
        partitions_pending: d.partitions_pending,
        conflation: false,
        effective_pending: d.pending,
        partitions: d
            .partitions
            .iter()
            .map(|x| DepthPartition {
                partition: &x.partition,
                pending: x.pending,
            })
            .collect(),
    };
    Ok(AxumJson(body).into_response())
}
