//! HTTP for status, analytics and stats (`/api/v1/status*`, `/api/v1/analytics/*`,
//! `/api/v1/stats/refresh`, `/metrics`), and the resources reads that summarise
//! (`/api/v1/resources/{overview,namespaces,tasks,partitions}` and a queue's
//! `/depth`, whose handlers are in `http/resources.rs`).
//!
//! Every figure is real: stored state is read from the last commit, activity comes
//! from the engine's own per-minute counters ([`crate::engine::status`]). The shapes
//! are in `http/wire/status.rs`. Nothing here writes: `stats/refresh` only recomputes
//! (the figures are never cached, so there is nothing to refresh).

use axum::Json as AxumJson;
use axum::Router;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::budgeted::json_holding;
use super::error::ApiError;
use super::extract::{Params, PathParams};
use super::wire::status::*;
use super::{AppState, Caller, resources};
use crate::clock::{Micros, format_iso, parse_iso};
use crate::engine::answers::Charged;
use crate::engine::resources::{GroupBy, Measure, Page, QueueScan, QueueStats, groupings};
use crate::engine::status::{Bucket, Filter, MICROS_PER_MINUTE, ProcessSample, Snapshot, backlog};
use crate::store::Health;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/status", get(status))
        .route("/api/v1/status/queues", get(status_queues))
        .route("/api/v1/status/queues/{queue}", get(status_queue))
        .route("/api/v1/status/analytics", get(analytics))
        .route("/api/v1/analytics/system-metrics", get(system_metrics))
        .route("/api/v1/analytics/worker-metrics", get(worker_metrics))
        .route("/api/v1/stats/refresh", post(refresh))
        .route("/metrics", get(metrics))
        .route("/api/v1/resources/overview", get(overview))
        .route("/api/v1/resources/namespaces", get(resources::namespaces))
        .route("/api/v1/resources/tasks", get(resources::tasks))
        .route("/api/v1/resources/partitions", get(resources::partitions))
        .route(
            "/api/v1/resources/queues/{queue}/depth",
            get(resources::depth),
        )
}

/// The range a series covers: `from` and `to` (ISO-8601), by default the last
/// `default_minutes` up to now.
fn range(p: &Params, now: Micros, default_minutes: i64) -> Result<(Micros, Micros), ApiError> {
    let time = |name: &str| -> Result<Option<Micros>, ApiError> {
        p.get(name)
            .map(|v| {
                parse_iso(v).ok_or_else(|| {
                    ApiError::bad_request(format!("{name} must be an ISO-8601 time, got {v:?}"))
                })
            })
            .transpose()
    };
    let to = time("to")?.unwrap_or(now);
    let from = time("from")?.unwrap_or(to - default_minutes * MICROS_PER_MINUTE);
    if from > to {
        return Err(ApiError::bad_request("from must not be after to"));
    }
    Ok((from, to))
}

/// The queues a read covers: `queue`, `namespace`, `task`.
fn filter(p: &Params, with_queue: bool) -> Filter {
    Filter {
        queue: with_queue
            .then(|| p.get("queue").map(str::to_string))
            .flatten(),
        namespace: p.get("namespace").map(str::to_string),
        task: p.get("task").map(str::to_string),
    }
}

/// Adds minutes up into buckets of `width` µs, aligned to multiples of it from the
/// epoch (UTC), oldest first, every bucket of `from..=to` present.
fn buckets(
    minutes: &[(Micros, Bucket)],
    from: Micros,
    to: Micros,
    width: Micros,
) -> Vec<(Micros, Bucket)> {
    let first = from.div_euclid(width);
    let last = to.div_euclid(width);
    let mut out: Vec<(Micros, Bucket)> = (first..=last)
        .map(|i| (i * width, Bucket::default()))
        .collect();
    for (at, b) in minutes {
        let i = at.div_euclid(width) - first;
        if let Some((_, slot)) = usize::try_from(i).ok().and_then(|i| out.get_mut(i)) {
            slot.merge(b);
        }
    }
    out
}

/// Most points a series may have.
const MAX_POINTS: i64 = 2_000;

/// Minutes per point so that a range of `span` µs gives about 60 points.
fn bucket_minutes(from: Micros, to: Micros) -> i64 {
    ((to - from) / MICROS_PER_MINUTE / 60).max(1)
}

fn host() -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into())
}

fn worker_id() -> String {
    format!("queen-mock-broker-{}", std::process::id())
}

fn worker_row(s: &Caller) -> WorkerRow {
    let totals = s.engine.activity().totals(s.tenant());
    let stats = s.engine.stats();
    // Where the broker runs (its host's name, its process id) is an operator's
    // business: only an admin sees it, as the process-wide figures.
    let admin = s.sees_process();
    WorkerRow {
        hostname: admin.then(host),
        worker_id: admin.then(worker_id),
        messages_processed: totals.pop_messages,
        messages_ingested: totals.push_messages,
        last_seen: s.engine.activity().last_seen(s.tenant()).map(format_iso),
        commands: s.sees_process().then_some(stats.commands),
        commits: s.sees_process().then_some(stats.commits),
    }
}

fn span(s: &Caller, from: Micros, to: Micros, queue: Option<&str>) -> Bucket {
    let mut total = Bucket::default();
    for (_, b) in s.engine.activity().minutes(s.tenant(), from, to, queue) {
        total.merge(&b);
    }
    total
}

fn per_call(messages: u64, calls: u64) -> f64 {
    if calls == 0 {
        0.0
    } else {
        round2(messages as f64 / calls as f64)
    }
}

fn now(s: &Caller) -> Micros {
    s.engine.clock().now_micros()
}

/// `GET /api/v1/status`: the dashboard's front page over a range (default: the last
/// hour) and the queues covered by `queue`/`namespace`/`task`.
pub async fn status(s: Caller, p: Params) -> Result<Response, ApiError> {
    let now = now(&s);
    let (from, to) = range(&p, now, 60)?;
    let f = filter(&p, true);
    let Charged { value: snap, held } = s.engine.status_snapshot(s.tenant(), f.clone()).await?;
    let width = bucket_minutes(from, to) * MICROS_PER_MINUTE;
    let minutes = s
        .engine
        .activity()
        .minutes(s.tenant(), from, to, f.queue.as_deref());
    let mut throughput: Vec<ThroughputPoint> = buckets(&minutes, from, to, width)
        .iter()
        .map(|(at, b)| ThroughputPoint::of(format_iso(*at), b, (width / 1_000_000) as f64))
        .collect();
    throughput.reverse();
    let all = span(&s, from, to, f.queue.as_deref());
    let Snapshot {
        queues,
        totals,
        leases,
        dlq,
    } = &snap;
    let body = Status {
        time_range: TimeRange {
            from: format_iso(from),
            to: format_iso(to),
        },
        bucket_minutes: width / MICROS_PER_MINUTE,
        point_count: throughput.len(),
        stats_age: 0,
        throughput,
        workers: vec![worker_row(&s)],
        queues: queues
            .iter()
            .map(|q| StatusQueue {
                id: &q.name,
                name: &q.name,
                namespace: q.record.namespace.as_deref(),
                task: q.record.task.as_deref(),
                partitions: q.partitions.len(),
                total_consumed: q.partitions.iter().map(|p| p.consumed).sum(),
            })
            .collect(),
        messages: StatusMessages {
            counts: MessageCounts::of(totals, all.ack_failed),
            requests: PerKind {
                push: all.push_requests,
                pop: all.pop_requests,
                ack: all.ack_requests,
            },
            batch_efficiency: PerKind {
                push: per_call(all.push_messages, all.push_requests),
                pop: per_call(all.pop_messages, all.pop_requests),
                ack: per_call(all.ack_messages, all.ack_requests),
            },
        },
        leases: StatusLeases {
            active: leases.active,
            partitions_with_leases: leases.partitions,
            total_acked: all.ack_success,
            total_batch_size: totals.processing,
        },
        dead_letter_queue: StatusDlq {
            total_messages: dlq.total,
            affected_partitions: dlq.partitions,
            top_errors: dlq
                .top_errors
                .iter()
                .map(|(error, count)| TopError {
                    error: error.clone(),
                    count: *count,
                })
                .collect(),
        },
        errors: StatusErrors {
            ack_failed: all.ack_failed,
            db_errors: 0,
            dlq_messages: all.dlq,
        },
    };
    Ok(json_holding(&body, held))
}

/// `GET /api/v1/status/queues?namespace=&task=&limit=100&offset=0`: the queues, in
/// name order, a page at a time.
pub async fn status_queues(s: Caller, p: Params) -> Result<Response, ApiError> {
    let limit = p.int("limit", 100, 1, 10_000)? as usize;
    let offset = p.int("offset", 0, 0, i64::MAX)? as usize;
    let scan = QueueScan {
        measure: Measure::Watermarks,
        filter: filter(&p, false),
        page: Page { offset, limit },
        partitions: Page::NONE,
    };
    let Charged {
        value: listing,
        held,
    } = s.engine.queue_listing(s.tenant(), scan).await?;
    let rows = listing
        .rows
        .iter()
        .map(|q| StatusQueueRow {
            id: &q.name,
            name: &q.name,
            namespace: q.record.namespace.as_deref(),
            task: q.record.task.as_deref(),
            created_at: format_iso(q.record.created_at),
            partitions: q.partition_count,
            messages: ShortCounts {
                total: q.totals.total,
                pending: q.totals.pending,
                processing: q.totals.processing,
            },
        })
        .collect();
    let body = StatusQueues {
        queues: rows,
        total: listing.total,
        pagination: Pagination { limit, offset },
    };
    Ok(json_holding(&body, held))
}

/// `GET /api/v1/status/queues/{queue}?limit=&offset=`: one queue with its
/// configuration and a page of its partitions (the first 1,000 by default;
/// `partitionsTotal` counts them all); 404 when it does not exist.
pub async fn status_queue(
    s: Caller,
    PathParams(queue): PathParams<String>,
    p: Params,
) -> Result<Response, ApiError> {
    let page = resources::partition_page(&p)?;
    let Some(q) = s.engine.queue_detail(s.tenant(), &queue, page).await? else {
        return Err(resources::not_found(format!(
            "queue {queue:?} does not exist"
        )));
    };
    let QueueStats {
        name,
        record,
        partitions,
        totals,
        ..
    } = &q;
    let body = StatusQueueDetail {
        queue: DetailQueue {
            id: name,
            name,
            namespace: record.namespace.as_deref(),
            task: record.task.as_deref(),
            priority: record.options.priority,
            created_at: format_iso(record.created_at),
            config: &record.options,
        },
        partitions: partitions
            .iter()
            .map(|p| DetailPartition {
                id: p.id.to_string(),
                name: &p.name,
                created_at: format_iso(p.created_at),
                messages: MessageCounts::of(&p.counts, 0),
                stats: MessageCounts::of(&p.counts, 0),
                cursor: CursorBody {
                    total_consumed: p.consumed,
                    consumer_groups: p.groups,
                },
                last_activity: p.last_message_at.map(format_iso),
                oldest_message: p.oldest_unconsumed_at.map(format_iso),
                newest_message: p.last_message_at.map(format_iso),
            })
            .collect(),
        partitions_total: q.partition_count,
        pagination: page.into(),
        totals: DetailTotals {
            messages: MessageCounts::of(totals, 0),
            flat: MessageCounts::of(totals, 0),
        },
    };
    Ok(AxumJson(body).into_response())
}

/// `GET /api/v1/status/analytics?from=&to=&interval=hour&queue=`: messages stored,
/// delivered and committed per `minute`, `hour` or `day` (default: the last 24 hours
/// by hour). Activity is kept for [`crate::engine::status::WINDOW_MINUTES`]; older
/// buckets are empty.
pub async fn analytics(s: Caller, p: Params) -> Result<Response, ApiError> {
    let now = now(&s);
    let (from, to) = range(&p, now, 24 * 60)?;
    let (interval, width) = match p.get("interval").unwrap_or("hour") {
        "minute" => ("minute", MICROS_PER_MINUTE),
        "hour" => ("hour", 60 * MICROS_PER_MINUTE),
        "day" => ("day", 24 * 60 * MICROS_PER_MINUTE),
        other => {
            return Err(ApiError::bad_request(format!(
                "interval must be minute, hour or day, got {other:?}"
            )));
        }
    };
    if (to - from) / width > MAX_POINTS {
        return Err(ApiError::bad_request(format!(
            "the range holds more than {MAX_POINTS} {interval}s: narrow it or use a longer interval"
        )));
    }
    let queue = p.get("queue");
    let minutes = s.engine.activity().minutes(s.tenant(), from, to, queue);
    let data_points = buckets(&minutes, from, to, width)
        .iter()
        .map(|(at, b)| AnalyticsPoint {
            timestamp: format_iso(*at),
            messages: b.push_messages,
            delivered: b.pop_messages,
            completed: b.ack_success,
            avg_lag_ms: round2(b.lag.avg_ms()),
        })
        .collect();
    let body = Analytics {
        data_points,
        interval,
        from: format_iso(from),
        to: format_iso(to),
    };
    Ok(AxumJson(body).into_response())
}

fn sample_point(at: Micros, s: &ProcessSample, prev: Option<&ProcessSample>) -> SamplePoint {
    // CPU and commits are counters: a minute shows what it used since the sample before.
    let d = |now: u64, before: Option<u64>| now.saturating_sub(before.unwrap_or(now));
    SamplePoint {
        timestamp: format_iso(at),
        sample_count: 1,
        metrics: MetricsBody {
            cpu: CpuBody {
                user_us: Sampled::one(d(s.cpu_user_us, prev.map(|p| p.cpu_user_us))),
                system_us: Sampled::one(d(s.cpu_system_us, prev.map(|p| p.cpu_system_us))),
            },
            memory: MemoryBody {
                rss_bytes: Sampled::one(s.rss_bytes),
                virtual_bytes: Sampled::one(s.virtual_bytes),
            },
            database: StorageBody {
                commits: Sampled::one(d(s.commits, prev.map(|p| p.commits))),
                commands: Sampled::one(d(s.commands, prev.map(|p| p.commands))),
                live_bytes: Sampled::one(s.live_bytes),
            },
        },
    }
}

/// `GET /api/v1/analytics/system-metrics?from=&to=`: this process, one sample per
/// minute with activity (default: the last hour), and one for now.
pub async fn system_metrics(s: Caller, p: Params) -> Result<Response, ApiError> {
    let now = now(&s);
    let (from, to) = range(&p, now, 60)?;
    let mut samples = s.engine.activity().samples(from, to);
    let this_minute = now.div_euclid(MICROS_PER_MINUTE) * MICROS_PER_MINUTE;
    if to >= now && samples.last().is_none_or(|(at, _)| *at < this_minute) {
        samples.push((this_minute, s.engine.process_now()));
    }
    let series: Vec<SamplePoint> = samples
        .iter()
        .enumerate()
        .map(|(i, (at, smp))| sample_point(*at, smp, i.checked_sub(1).map(|j| &samples[j].1)))
        .collect();
    let body = SystemMetrics {
        time_range: TimeRange {
            from: format_iso(from),
            to: format_iso(to),
        },
        bucket_minutes: 1,
        point_count: series.len(),
        replica_count: 1,
        replicas: vec![Replica {
            hostname: host(),
            port: None,
            worker_id: worker_id(),
            time_series: series,
        }],
    };
    Ok(AxumJson(body).into_response())
}

/// `GET /api/v1/analytics/worker-metrics?from=&to=&queue=`: push, pop and ack traffic
/// per bucket (default: the last hour), per queue over the range, and totals since
/// the broker started.
pub async fn worker_metrics(s: Caller, p: Params) -> Result<Response, ApiError> {
    let now = now(&s);
    let (from, to) = range(&p, now, 60)?;
    let width = bucket_minutes(from, to) * MICROS_PER_MINUTE;
    let queue = p.get("queue");
    let minutes = s.engine.activity().minutes(s.tenant(), from, to, queue);
    let seconds = (width / 1_000_000) as f64;
    let series: Vec<WorkerPoint> = buckets(&minutes, from, to, width)
        .iter()
        .map(|(at, b)| WorkerPoint::of(format_iso(*at), b, seconds))
        .collect();
    let queues = s
        .engine
        .activity()
        .queues(s.tenant(), from, to)
        .into_iter()
        .filter(|(name, _)| queue.is_none_or(|q| q == name))
        .map(|(queue_name, q)| WorkerQueue {
            queue_name,
            push_count: q.pushed,
            pop_count: q.popped,
            avg_lag_ms: round2(q.lag.avg_ms()),
            max_lag_ms: q.lag.max_ms,
        })
        .collect();
    let t = s.engine.activity().totals(s.tenant());
    let body = WorkerMetrics {
        time_range: TimeRange {
            from: format_iso(from),
            to: format_iso(to),
        },
        bucket_minutes: width / MICROS_PER_MINUTE,
        point_count: series.len(),
        time_series: series,
        workers: vec![worker_row(&s)],
        queues,
        summary: WorkerSummary {
            total_push_messages: t.push_messages,
            total_pop_messages: t.pop_messages,
            total_ack_messages: t.ack_messages,
            total_push_requests: t.push_requests,
            total_pop_requests: t.pop_requests,
            total_ack_requests: t.ack_requests,
            total_db_errors: 0,
            total_ack_failed: t.ack_failed,
            total_dlq: t.dlq,
            pending_messages: t.push_messages.saturating_sub(t.pop_messages),
        },
    };
    Ok(AxumJson(body).into_response())
}

/// `POST /api/v1/stats/refresh`: recomputes the figures and answers them. This broker
/// keeps no stats tables that could lag (every read computes from the last commit),
/// so a refresh is only a read.
pub async fn refresh(s: Caller) -> Result<Response, ApiError> {
    let Charged { value: snap, held } = s
        .engine
        .status_snapshot(s.tenant(), Filter::default())
        .await?;
    let failed = s.engine.activity().totals(s.tenant()).ack_failed;
    let body = Refreshed {
        success: true,
        refreshed_at: format_iso(now(&s)),
        queues: snap.queues.len(),
        partitions: snap.queues.iter().map(|q| q.partitions.len()).sum(),
        messages: MessageCounts::of(&snap.totals, failed),
    };
    Ok(json_holding(&body, held))
}

/// `GET /api/v1/resources/overview`: counts of queues, partitions, namespaces, tasks
/// and messages, the backlog's age and size, and the last five minutes' rates.
pub async fn overview(s: Caller) -> Result<Response, ApiError> {
    let now = now(&s);
    let Charged { value: snap, held } = s
        .engine
        .status_snapshot(s.tenant(), Filter::default())
        .await?;
    let (age, size) = backlog(&snap.queues, now);
    let recent = span(&s, now - 5 * MICROS_PER_MINUTE, now, None);
    let failed = s.engine.activity().totals(s.tenant()).ack_failed;
    let body = Overview {
        queues: snap.queues.len(),
        partitions: snap.queues.iter().map(|q| q.partitions.len()).sum(),
        namespaces: groupings(&snap.queues, GroupBy::Namespace).len(),
        tasks: groupings(&snap.queues, GroupBy::Task).len(),
        messages: MessageCounts::of(&snap.totals, failed),
        lag: LagBody {
            time: age.into(),
            offset: size.into(),
        },
        throughput: RateBody {
            ingested_per_second: round2(recent.push_messages as f64 / 300.0),
            processed_per_second: round2(recent.pop_messages as f64 / 300.0),
        },
        timestamp: format_iso(now),
        stats_age: 0,
    };
    Ok(json_holding(&body, held))
}

/// `GET /metrics`: the process (uptime, memory, CPU, storage) and the caller's traffic
/// since start, as JSON (the official client reads this route as JSON; a Prometheus
/// exposition is not served).
pub async fn metrics(s: Caller) -> Result<Response, ApiError> {
    let now = now(&s);
    let uptime_us = (now - s.engine.activity().started_at()).max(0);
    let uptime = (uptime_us / 1_000_000) as u64;
    let t = s.engine.activity().totals(s.tenant());
    let rate = |n: u64| {
        if uptime_us == 0 {
            0.0
        } else {
            round2(n as f64 / (uptime_us as f64 / 1e6))
        }
    };
    let calls = t.push_requests + t.pop_requests + t.ack_requests;
    let p = s.engine.process_now();
    let shown = |figure: u64| s.sees_process().then_some(figure);
    let body = Metrics {
        uptime,
        requests: TotalRate {
            total: calls,
            rate: rate(calls),
        },
        messages: TotalRate {
            total: t.push_messages,
            rate: rate(t.push_messages),
        },
        database: MetricsDatabase {
            status: match s.engine.storage_health() {
                Health::Healthy => "healthy",
                Health::Degraded(_) => "degraded",
            },
            commits: shown(p.commits),
            commands: shown(p.commands),
            live_bytes: shown(p.live_bytes),
        },
        memory: MetricsMemory {
            rss: shown(p.rss_bytes),
            virtual_bytes: shown(p.virtual_bytes),
        },
        cpu: MetricsCpu {
            user: shown(p.cpu_user_us),
            system: shown(p.cpu_system_us),
        },
    };
    Ok(AxumJson(body).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minutes_add_up_into_aligned_buckets() {
        let m = |i: i64, n: u64| {
            (
                i * MICROS_PER_MINUTE,
                Bucket {
                    push_messages: n,
                    ..Bucket::default()
                },
            )
        };
        let hour = 60 * MICROS_PER_MINUTE;
        let got = buckets(
            &[m(59, 1), m(60, 2), m(61, 3)],
            30 * MICROS_PER_MINUTE,
            2 * hour,
            hour,
        );
        let counts: Vec<(Micros, u64)> = got.iter().map(|(at, b)| (*at, b.push_messages)).collect();
        assert_eq!(counts, vec![(0, 1), (hour, 5), (2 * hour, 0)]);
    }
}
