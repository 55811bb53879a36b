//! The JSON shapes of the status, analytics, stats and overview routes (see
//! `http/status.rs`).
//!
//! The official client hands these bodies through untyped (they feed dashboards), and
//! its live tests (`admin.rs`, `coverage.rs` of `queen-mq` 2.7.0) read keys by name:
//! every key below is always present, `null` where a figure does not exist yet. Key
//! names follow the public Queen server's answers (camelCase, as its dashboard reads
//! them).

use serde::Serialize;

use crate::engine::resources::Counts;
use crate::engine::status::{Bucket, Spread};

/// `{from, to}` of a series.
#[derive(Serialize)]
pub struct TimeRange {
    /// Start, ISO-8601.
    pub from: String,
    /// End, ISO-8601.
    pub to: String,
}

/// Message counts with the `failed` column the dashboard expects (nacks counted by
/// activity; stored counts have no such state).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageCounts {
    /// Stored.
    pub total: u64,
    /// Not yet delivered to the slowest group.
    pub pending: u64,
    /// Under a live lease.
    pub processing: u64,
    /// Committed by every group.
    pub completed: u64,
    /// Nacks counted since the broker started.
    pub failed: u64,
    /// Dead letters.
    pub dead_letter: u64,
}

impl MessageCounts {
    /// Stored counts plus counted nacks.
    pub fn of(c: &Counts, failed: u64) -> Self {
        MessageCounts {
            total: c.total,
            pending: c.pending,
            processing: c.processing,
            completed: c.completed,
            failed,
            dead_letter: c.dead_letter,
        }
    }
}

/// `{avg, median, min, max}`.
#[derive(Serialize)]
pub struct SpreadBody {
    /// Average.
    pub avg: f64,
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl From<Spread> for SpreadBody {
    fn from(s: Spread) -> Self {
        SpreadBody {
            avg: s.avg,
            median: s.median,
            min: s.min,
            max: s.max,
        }
    }
}

/// The backlog's age (seconds) and size (messages) across partitions.
#[derive(Serialize)]
pub struct LagBody {
    /// Age of the oldest uncommitted message, per partition with a backlog.
    pub time: SpreadBody,
    /// Uncommitted messages, per partition.
    pub offset: SpreadBody,
}

/// Messages per second over a recent span.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RateBody {
    /// Messages stored per second.
    pub ingested_per_second: f64,
    /// Messages delivered per second.
    pub processed_per_second: f64,
}

/// `GET /api/v1/resources/overview`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Overview {
    /// Queues.
    pub queues: usize,
    /// Partitions.
    pub partitions: usize,
    /// Distinct namespaces.
    pub namespaces: usize,
    /// Distinct tasks.
    pub tasks: usize,
    /// Counts over every queue.
    pub messages: MessageCounts,
    /// Backlog age and size.
    pub lag: LagBody,
    /// The last five minutes' rates.
    pub throughput: RateBody,
    /// When computed.
    pub timestamp: String,
    /// Seconds since the figures were computed (they are computed per call: 0).
    pub stats_age: i64,
}

/// One point of a throughput series.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ThroughputPoint {
    /// Start of the bucket.
    pub timestamp: String,
    /// Messages stored.
    pub ingested: u64,
    /// Per second over the bucket.
    pub ingested_per_second: f64,
    /// Messages delivered.
    pub pop_messages: u64,
    /// Per second over the bucket.
    pub pop_per_second: f64,
    /// Messages committed (`completed` acks).
    pub processed: u64,
    /// Per second over the bucket.
    pub processed_per_second: f64,
    /// Nacks and refused acks.
    pub ack_failed: u64,
    /// Dead-lettered by acks.
    pub dlq_count: u64,
    /// Average wait between push and delivery.
    pub avg_lag_ms: f64,
    /// Longest wait between push and delivery.
    pub max_lag_ms: u64,
    /// Storage failures (none are counted per bucket: 0).
    pub db_errors: u64,
}

impl ThroughputPoint {
    /// A point from one bucket of `seconds`.
    pub fn of(timestamp: String, b: &Bucket, seconds: f64) -> Self {
        let per = |n: u64| round2(n as f64 / seconds);
        ThroughputPoint {
            timestamp,
            ingested: b.push_messages,
            ingested_per_second: per(b.push_messages),
            pop_messages: b.pop_messages,
            pop_per_second: per(b.pop_messages),
            processed: b.ack_success,
            processed_per_second: per(b.ack_success),
            ack_failed: b.ack_failed,
            dlq_count: b.dlq,
            avg_lag_ms: round2(b.lag.avg_ms()),
            max_lag_ms: b.lag.max_ms,
            db_errors: 0,
        }
    }
}

/// Rounds to two decimals, as the dashboard shows rates.
pub fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// This broker process, as a worker of the cluster the dashboard expects.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerRow {
    /// The host's name (`null` but for an admin).
    pub hostname: Option<String>,
    /// This process, by its id (`null` but for an admin).
    pub worker_id: Option<String>,
    /// Messages delivered since start.
    pub messages_processed: u64,
    /// Messages stored since start.
    pub messages_ingested: u64,
    /// The last minute with activity.
    pub last_seen: Option<String>,
    /// Writer commands applied since start (process-wide: `null` but for an admin).
    pub commands: Option<u64>,
    /// Durable commits since start (process-wide: `null` but for an admin).
    pub commits: Option<u64>,
}

/// A queue in the status summary.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusQueue<'a> {
    /// Queues are known by name; `id` repeats it.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: Option<&'a str>,
    /// Its task.
    pub task: Option<&'a str>,
    /// Its partitions.
    pub partitions: usize,
    /// Messages committed, summed over its groups.
    pub total_consumed: u64,
}

/// Request counts or per-request sizes per kind.
#[derive(Serialize)]
pub struct PerKind<T> {
    /// Pushes.
    pub push: T,
    /// Pops.
    pub pop: T,
    /// Acks.
    pub ack: T,
}

/// The status's messages block.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusMessages {
    /// Counts over the covered queues.
    #[serde(flatten)]
    pub counts: MessageCounts,
    /// Calls over the range.
    pub requests: PerKind<u64>,
    /// Messages per call over the range.
    pub batch_efficiency: PerKind<f64>,
}

/// The status's leases block.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusLeases {
    /// Live leases.
    pub active: u64,
    /// Partitions they claim.
    pub partitions_with_leases: u64,
    /// `completed` acks over the range.
    pub total_acked: u64,
    /// Messages under live leases.
    pub total_batch_size: u64,
}

/// One common dead-letter reason.
#[derive(Serialize)]
pub struct TopError {
    /// The reason.
    pub error: String,
    /// Dead letters giving it.
    pub count: u64,
}

/// The status's dead-letter block.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusDlq {
    /// Rows.
    pub total_messages: u64,
    /// Partitions with one.
    pub affected_partitions: u64,
    /// The commonest reasons.
    pub top_errors: Vec<TopError>,
}

/// The status's errors block.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusErrors {
    /// Nacks and refused acks over the range.
    pub ack_failed: u64,
    /// Storage failures (the health says whether storage is degraded now).
    pub db_errors: u64,
    /// Dead-lettered by acks over the range.
    pub dlq_messages: u64,
}

/// `GET /api/v1/status`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Status<'a> {
    /// The range of the series.
    pub time_range: TimeRange,
    /// Minutes per point.
    pub bucket_minutes: i64,
    /// Points in the series.
    pub point_count: usize,
    /// Seconds since the figures were computed (per call: 0).
    pub stats_age: i64,
    /// Throughput, newest first.
    pub throughput: Vec<ThroughputPoint>,
    /// This broker.
    pub workers: Vec<WorkerRow>,
    /// The covered queues.
    pub queues: Vec<StatusQueue<'a>>,
    /// Counts and calls.
    pub messages: StatusMessages,
    /// Live leases.
    pub leases: StatusLeases,
    /// Dead letters.
    pub dead_letter_queue: StatusDlq,
    /// Failures.
    pub errors: StatusErrors,
}

/// `{limit, offset}`.
#[derive(Serialize)]
pub struct Pagination {
    /// Most rows.
    pub limit: usize,
    /// Rows skipped.
    pub offset: usize,
}

impl From<crate::engine::resources::Page> for Pagination {
    fn from(p: crate::engine::resources::Page) -> Self {
        Pagination {
            limit: p.limit,
            offset: p.offset,
        }
    }
}

/// Short counts of a queue row.
#[derive(Serialize)]
pub struct ShortCounts {
    /// Stored.
    pub total: u64,
    /// Not yet delivered to the slowest group.
    pub pending: u64,
    /// Under a live lease.
    pub processing: u64,
}

/// A row of `GET /api/v1/status/queues`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusQueueRow<'a> {
    /// Queues are known by name; `id` repeats it.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: Option<&'a str>,
    /// Its task.
    pub task: Option<&'a str>,
    /// When created.
    pub created_at: String,
    /// Its partitions.
    pub partitions: usize,
    /// Its counts.
    pub messages: ShortCounts,
}

/// `GET /api/v1/status/queues`.
#[derive(Serialize)]
pub struct StatusQueues<'a> {
    /// A page of queues, in name order.
    pub queues: Vec<StatusQueueRow<'a>>,
    /// Every covered queue.
    pub total: usize,
    /// The page.
    pub pagination: Pagination,
}

/// A partition's consumption.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CursorBody {
    /// Messages committed, summed over its groups.
    pub total_consumed: u64,
    /// Groups that read it.
    pub consumer_groups: usize,
}

/// A partition of `GET /api/v1/status/queues/{queue}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailPartition<'a> {
    /// Its broker-wide id.
    pub id: String,
    /// Its name.
    pub name: &'a str,
    /// When created.
    pub created_at: String,
    /// Its counts (the dashboard reads `messages`; `stats` repeats them).
    pub messages: MessageCounts,
    /// The same counts.
    pub stats: MessageCounts,
    /// Its consumption.
    pub cursor: CursorBody,
    /// When its newest message was stored.
    pub last_activity: Option<String>,
    /// When its oldest uncommitted message was stored.
    pub oldest_message: Option<String>,
    /// When its newest message was stored.
    pub newest_message: Option<String>,
}

/// The queue of `GET /api/v1/status/queues/{queue}`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DetailQueue<'a> {
    /// Queues are known by name; `id` repeats it.
    pub id: &'a str,
    /// Its name.
    pub name: &'a str,
    /// Its namespace.
    pub namespace: Option<&'a str>,
    /// Its task.
    pub task: Option<&'a str>,
    /// Its `priority` option.
    pub priority: i64,
    /// When created.
    pub created_at: String,
    /// Every option with its value.
    pub config: &'a crate::store::records::QueueOptions,
}

/// Totals of the queue detail: nested under `messages` and flat.
#[derive(Serialize)]
pub struct DetailTotals {
    /// The counts.
    pub messages: MessageCounts,
    /// The same counts, flat.
    #[serde(flatten)]
    pub flat: MessageCounts,
}

/// `GET /api/v1/status/queues/{queue}`.
#[derive(Serialize)]
pub struct StatusQueueDetail<'a> {
    /// The queue and its configuration (a coverage test reads `queue.config`).
    pub queue: DetailQueue<'a>,
    /// A page of its partitions, in name order.
    pub partitions: Vec<DetailPartition<'a>>,
    /// Every partition of the queue.
    #[serde(rename = "partitionsTotal")]
    pub partitions_total: usize,
    /// The page.
    pub pagination: Pagination,
    /// The counts of every partition added up.
    pub totals: DetailTotals,
}

/// One point of `GET /api/v1/status/analytics`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AnalyticsPoint {
    /// Start of the bucket.
    pub timestamp: String,
    /// Messages stored.
    pub messages: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// Messages committed.
    pub completed: u64,
    /// Average wait between push and delivery.
    pub avg_lag_ms: f64,
}

/// `GET /api/v1/status/analytics`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Analytics {
    /// Oldest first, every bucket of the range.
    pub data_points: Vec<AnalyticsPoint>,
    /// `minute`, `hour` or `day`.
    pub interval: &'static str,
    /// Start, ISO-8601.
    pub from: String,
    /// End, ISO-8601.
    pub to: String,
}

/// `{avg, last, max, min}` of a sampled figure.
#[derive(Serialize)]
pub struct Sampled {
    /// Average.
    pub avg: f64,
    /// Last.
    pub last: u64,
    /// Largest.
    pub max: u64,
    /// Smallest.
    pub min: u64,
}

impl Sampled {
    /// One sample.
    pub fn one(v: u64) -> Self {
        Sampled {
            avg: v as f64,
            last: v,
            max: v,
            min: v,
        }
    }
}

/// CPU used in a minute.
#[derive(Serialize)]
pub struct CpuBody {
    /// User time, µs.
    pub user_us: Sampled,
    /// Kernel time, µs.
    pub system_us: Sampled,
}

/// Memory at the sample.
#[derive(Serialize)]
pub struct MemoryBody {
    /// Resident.
    pub rss_bytes: Sampled,
    /// Virtual.
    pub virtual_bytes: Sampled,
}

/// Storage at the sample.
#[derive(Serialize)]
pub struct StorageBody {
    /// Durable commits in the minute.
    pub commits: Sampled,
    /// Commands applied in the minute.
    pub commands: Sampled,
    /// Bytes stored.
    pub live_bytes: Sampled,
}

/// A sample's metrics.
#[derive(Serialize)]
pub struct MetricsBody {
    /// CPU.
    pub cpu: CpuBody,
    /// Memory.
    pub memory: MemoryBody,
    /// Storage.
    pub database: StorageBody,
}

/// One sampled minute.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SamplePoint {
    /// The minute.
    pub timestamp: String,
    /// Samples in it.
    pub sample_count: u64,
    /// The figures.
    pub metrics: MetricsBody,
}

/// This broker as a replica.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Replica {
    /// The host.
    pub hostname: String,
    /// The listening port (not known to the engine: `null`).
    pub port: Option<u16>,
    /// This process.
    pub worker_id: String,
    /// Its samples, oldest first.
    pub time_series: Vec<SamplePoint>,
}

/// `GET /api/v1/analytics/system-metrics`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SystemMetrics {
    /// The range.
    pub time_range: TimeRange,
    /// Minutes per point.
    pub bucket_minutes: i64,
    /// Points, over every replica.
    pub point_count: usize,
    /// Replicas (this broker).
    pub replica_count: usize,
    /// Per replica.
    pub replicas: Vec<Replica>,
}

/// One point of the worker-metrics series.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerPoint {
    /// Start of the bucket.
    pub timestamp: String,
    /// Messages stored.
    pub push_messages: u64,
    /// Messages delivered.
    pub pop_messages: u64,
    /// Acks.
    pub ack_messages: u64,
    /// Push calls.
    pub push_requests: u64,
    /// Pop calls.
    pub pop_requests: u64,
    /// Ack calls.
    pub ack_requests: u64,
    /// Per second.
    pub push_per_second: f64,
    /// Per second.
    pub pop_per_second: f64,
    /// Per second.
    pub ack_per_second: f64,
    /// Average wait between push and delivery.
    pub avg_lag_ms: f64,
    /// Longest wait.
    pub max_lag_ms: u64,
    /// Deliveries measured.
    pub lag_count: u64,
    /// `completed` acks.
    pub ack_success: u64,
    /// Nacks and refused acks.
    pub ack_failed: u64,
    /// Dead-lettered by acks.
    pub dlq_count: u64,
    /// Storage failures (0).
    pub db_errors: u64,
}

impl WorkerPoint {
    /// A point from one bucket of `seconds`.
    pub fn of(timestamp: String, b: &Bucket, seconds: f64) -> Self {
        let per = |n: u64| round2(n as f64 / seconds);
        WorkerPoint {
            timestamp,
            push_messages: b.push_messages,
            pop_messages: b.pop_messages,
            ack_messages: b.ack_messages,
            push_requests: b.push_requests,
            pop_requests: b.pop_requests,
            ack_requests: b.ack_requests,
            push_per_second: per(b.push_messages),
            pop_per_second: per(b.pop_messages),
            ack_per_second: per(b.ack_messages),
            avg_lag_ms: round2(b.lag.avg_ms()),
            max_lag_ms: b.lag.max_ms,
            lag_count: b.lag.count,
            ack_success: b.ack_success,
            ack_failed: b.ack_failed,
            dlq_count: b.dlq,
            db_errors: 0,
        }
    }
}

/// A queue's activity over the range.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerQueue {
    /// The queue.
    pub queue_name: String,
    /// Messages stored.
    pub push_count: u64,
    /// Messages delivered.
    pub pop_count: u64,
    /// Average wait.
    pub avg_lag_ms: f64,
    /// Longest wait.
    pub max_lag_ms: u64,
}

/// Totals since the broker started.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerSummary {
    /// Messages stored.
    pub total_push_messages: u64,
    /// Messages delivered.
    pub total_pop_messages: u64,
    /// Acks.
    pub total_ack_messages: u64,
    /// Push calls.
    pub total_push_requests: u64,
    /// Pop calls.
    pub total_pop_requests: u64,
    /// Ack calls.
    pub total_ack_requests: u64,
    /// Storage failures (0).
    pub total_db_errors: u64,
    /// Nacks and refused acks.
    pub total_ack_failed: u64,
    /// Dead-lettered by acks.
    pub total_dlq: u64,
    /// Stored and not yet delivered, by the counters (never below 0).
    pub pending_messages: u64,
}

/// `GET /api/v1/analytics/worker-metrics`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct WorkerMetrics {
    /// The range.
    pub time_range: TimeRange,
    /// Minutes per point.
    pub bucket_minutes: i64,
    /// Points.
    pub point_count: usize,
    /// Oldest first.
    pub time_series: Vec<WorkerPoint>,
    /// This broker.
    pub workers: Vec<WorkerRow>,
    /// Per queue.
    pub queues: Vec<WorkerQueue>,
    /// Since start.
    pub summary: WorkerSummary,
}

/// `POST /api/v1/stats/refresh`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Refreshed {
    /// Always true: the figures are computed from the last commit on every read.
    pub success: bool,
    /// When.
    pub refreshed_at: String,
    /// Queues.
    pub queues: usize,
    /// Partitions.
    pub partitions: usize,
    /// Counts.
    pub messages: MessageCounts,
}

/// Per-call totals of `/metrics`.
#[derive(Serialize)]
pub struct TotalRate {
    /// Since start.
    pub total: u64,
    /// Per second since start.
    pub rate: f64,
}

/// `GET /metrics`: the process and its traffic, as JSON.
#[derive(Serialize)]
pub struct Metrics {
    /// Seconds since start.
    pub uptime: u64,
    /// Push, pop and ack calls.
    pub requests: TotalRate,
    /// Messages stored.
    pub messages: TotalRate,
    /// Storage.
    pub database: MetricsDatabase,
    /// Memory.
    pub memory: MetricsMemory,
    /// CPU since start.
    pub cpu: MetricsCpu,
}

/// Storage in `/metrics`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MetricsDatabase {
    /// `healthy` or `degraded`.
    pub status: &'static str,
    /// Durable commits (process-wide, like every figure below: `null` but for an admin).
    pub commits: Option<u64>,
    /// Commands applied.
    pub commands: Option<u64>,
    /// Bytes stored.
    pub live_bytes: Option<u64>,
}

/// Memory in `/metrics`.
#[derive(Serialize)]
pub struct MetricsMemory {
    /// Resident bytes (`null` but for an admin).
    pub rss: Option<u64>,
    /// Virtual bytes (`null` but for an admin).
    pub virtual_bytes: Option<u64>,
}

/// CPU in `/metrics`.
#[derive(Serialize)]
pub struct MetricsCpu {
    /// User time, µs (`null` but for an admin).
    pub user: Option<u64>,
    /// Kernel time, µs (`null` but for an admin).
    pub system: Option<u64>,
}
