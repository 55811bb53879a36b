//! The figures behind status, analytics and stats (`/api/v1/status*`,
//! `/api/v1/analytics/*`, `/api/v1/stats/refresh`, `/api/v1/resources/overview`,
//! `/metrics`).
//!
//! Two sources, chosen by what each figure costs:
//!
//! - **Stored state** (queues, partitions, counts, backlog age, live leases, dead
//!   letters) is read from the last commit, like the resources reads
//!   ([`super::resources`]): always exact, never a cache that could drift.
//! - **Activity** (pushes, pops, acks, lag at delivery, per minute) cannot be read
//!   back from storage without scanning every message, so the engine counts it as it
//!   happens in an [`Activity`] of its own: per tenant, per minute, for the last
//!   [`WINDOW_MINUTES`]. It is memory of this broker instance (two brokers in one
//!   process count separately) and starts empty at every start, which is what a
//!   throughput chart means on a single node.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use redb::Database;

use super::Engine;
use super::ack::{Ack, AckOutcome};
use super::answers::{Charged, Held, Starved};
use super::pop::PopOutcome;
use super::push::Appended;
use super::resources::{self, Counts, Listing, Measure, Page, QueueScan, QueueStats};
use super::txn::{StepResult, Transaction, TxnOp, TxnOutcome};
use crate::clock::Micros;
use crate::error::EngineError;
use crate::store::keys::Key;
use crate::store::records::{AckMark, DlqRecord, LeaseRecord, QueueRecord, decode};
use crate::store::{Reader, StoreError, T};

/// How much activity is kept: one day of minutes.
pub const WINDOW_MINUTES: i64 = 24 * 60;

/// Microseconds in a minute.
pub const MICROS_PER_MINUTE: i64 = 60_000_000;

/// Lag at delivery: how long messages waited between their push and a pop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Lag {
    /// Messages measured.
    pub count: u64,
    /// Their waits added up, in ms.
    pub sum_ms: u64,
    /// The longest wait, in ms.
    pub max_ms: u64,
}

impl Lag {
    fn add(&mut self, ms: u64) {
        self.count += 1;
        self.sum_ms += ms;
        self.max_ms = self.max_ms.max(ms);
    }

    fn merge(&mut self, o: &Lag) {
        self.count += o.count;
        self.sum_ms += o.sum_ms;
        self.max_ms = self.max_ms.max(o.max_ms);
    }

    /// The average wait in ms; 0 when nothing was measured.
    pub fn avg_ms(&self) -> f64 {
        if self.count == 0 {
            0.0
        } else {
            self.sum_ms as f64 / self.count as f64
        }
    }
}

/// What happened in one minute (or, summed, over any span).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Bucket {
    /// Push calls.
    pub push_requests: u64,
    /// Messages stored by pushes (duplicates excluded).
    pub push_messages: u64,
    /// Pushed items found in the dedup window (nothing stored).
    pub duplicates: u64,
    /// Pop calls (empty ones included).
    pub pop_requests: u64,
    /// Messages delivered.
    pub pop_messages: u64,
    /// Ack calls.
    pub ack_requests: u64,
    /// Acks in them.
    pub ack_messages: u64,
    /// `completed` acks applied.
    pub ack_success: u64,
    /// Acks that were nacks (`failed`, `retry`) or refused.
    pub ack_failed: u64,
    /// Messages dead-lettered by acks.
    pub dlq: u64,
    /// Lag at delivery.
    pub lag: Lag,
}

impl Bucket {
    /// Adds `o` in.
    pub fn merge(&mut self, o: &Bucket) {
        self.push_requests += o.push_requests;
        self.push_messages += o.push_messages;
        self.duplicates += o.duplicates;
        self.pop_requests += o.pop_requests;
        self.pop_messages += o.pop_messages;
        self.ack_requests += o.ack_requests;
        self.ack_messages += o.ack_messages;
        self.ack_success += o.ack_success;
        self.ack_failed += o.ack_failed;
        self.dlq += o.dlq;
        self.lag.merge(&o.lag);
    }
}

/// One queue's activity in one minute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueueBucket {
    /// Messages stored.
    pub pushed: u64,
    /// Messages delivered.
    pub popped: u64,
    /// Lag at delivery.
    pub lag: Lag,
}

impl QueueBucket {
    fn merge(&mut self, o: &QueueBucket) {
        self.pushed += o.pushed;
        self.popped += o.popped;
        self.lag.merge(&o.lag);
    }
}

/// One minute of a tenant's activity.
#[derive(Debug, Clone, Default)]
pub struct Minute {
    /// Everything.
    pub all: Bucket,
    /// Per queue.
    pub queues: HashMap<String, QueueBucket>,
}

/// The process as sampled once in a minute.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ProcessSample {
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Virtual memory, bytes.
    pub virtual_bytes: u64,
    /// CPU time in user mode since start, µs.
    pub cpu_user_us: u64,
    /// CPU time in kernel mode since start, µs.
    pub cpu_system_us: u64,
    /// Durable commits so far.
    pub commits: u64,
    /// Commands applied so far.
    pub commands: u64,
    /// Bytes stored as of the last commit.
    pub live_bytes: u64,
}

/// Reads the process's memory and CPU from `/proc/self` (Linux); zeros elsewhere.
fn read_process() -> (u64, u64, u64, u64) {
    const PAGE: u64 = 4096;
    // The kernel reports CPU times in clock ticks, 100 a second on Linux.
    const TICK_US: u64 = 10_000;
    let (mut vsz, mut rss) = (0, 0);
    if let Ok(s) = std::fs::read_to_string("/proc/self/statm") {
        let mut it = s.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
        vsz = it.next().unwrap_or(0) * PAGE;
        rss = it.next().unwrap_or(0) * PAGE;
    }
    let (mut user, mut sys) = (0, 0);
    if let Ok(s) = std::fs::read_to_string("/proc/self/stat") {
        // The command name (field 2) may hold spaces: count fields after its `)`.
        if let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            // Fields 14 and 15 of the line; 3 is the first after the `)`.
            user = f.get(11).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * TICK_US;
            sys = f.get(12).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0) * TICK_US;
        }
    }
    (rss, vsz, user, sys)
}

#[derive(Default)]
struct TenantActivity {
    minutes: BTreeMap<i64, Minute>,
    totals: Bucket,
}

#[derive(Default)]
struct Inner {
    tenants: HashMap<String, TenantActivity>,
    samples: BTreeMap<i64, ProcessSample>,
    requests: u64,
}

/// The activity counters of one engine (see the module docs).
pub struct Activity {
    started_at: Micros,
    inner: Mutex<Inner>,
}

impl Activity {
    /// Empty counters for an engine started at `now`.
    pub fn new(now: Micros) -> Self {
        Activity {
            started_at: now,
            inner: Mutex::default(),
        }
    }

    /// When counting began (the engine's start).
    pub fn started_at(&self) -> Micros {
        self.started_at
    }

    fn with<R>(&self, f: impl FnOnce(&mut Inner) -> R) -> R {
        f(&mut self.lock())
    }

    /// The counters, whatever a panicking holder left (they are counts, never torn).
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn record(
        &self,
        tenant: &str,
        now: Micros,
        sample: impl FnOnce() -> ProcessSample,
        f: impl FnOnce(&mut Minute),
    ) {
        let minute = now.div_euclid(MICROS_PER_MINUTE);
        // What this call adds is counted outside the lock, and so is the once-a-minute
        // process sample (it reads /proc).
        let mut add = Minute::default();
        f(&mut add);
        let mut g = self.lock();
        if !g.samples.contains_key(&minute) {
            drop(g);
            let s = sample();
            g = self.lock();
            if let std::collections::btree_map::Entry::Vacant(e) = g.samples.entry(minute) {
                e.insert(s);
                g.samples = g.samples.split_off(&(minute - WINDOW_MINUTES));
            }
        }
        let inner = &mut *g;
        inner.requests += 1;
        // Keys are allocated only the first time a tenant or a queue is seen in a
        // minute: this runs on every call, under a lock every handler shares.
        if !inner.tenants.contains_key(tenant) {
            inner
                .tenants
                .insert(tenant.to_string(), TenantActivity::default());
        }
        let t = inner.tenants.get_mut(tenant).expect("inserted above");
        if !t.minutes.contains_key(&minute) {
            t.minutes = t.minutes.split_off(&(minute - WINDOW_MINUTES));
        }
        let m = t.minutes.entry(minute).or_default();
        m.all.merge(&add.all);
        for (q, qb) in add.queues {
            match m.queues.get_mut(&q) {
                Some(b) => b.merge(&qb),
                None => {
                    m.queues.insert(q, qb);
                }
            }
        }
        t.totals.merge(&add.all);
    }

    /// Minutes of `tenant` from `from` to `to` (inclusive, µs), oldest first, with
    /// every minute of the span present (an idle one is empty; minutes older than the
    /// window are left out). `queue` narrows to
    /// one queue's pushes, pops and lag.
    pub fn minutes(
        &self,
        tenant: &str,
        from: Micros,
        to: Micros,
        queue: Option<&str>,
    ) -> Vec<(Micros, Bucket)> {
        let (a, b) = (
            from.div_euclid(MICROS_PER_MINUTE),
            to.div_euclid(MICROS_PER_MINUTE),
        );
        // Only the window is kept: a longer span is cut at its old end.
        let a = a.max(b - WINDOW_MINUTES);
        self.with(|inner| {
            let t = inner.tenants.get(tenant);
            (a..=b)
                .map(|m| {
                    let got = t.and_then(|t| t.minutes.get(&m));
                    let bucket = match (got, queue) {
                        (None, _) => Bucket::default(),
                        (Some(x), None) => x.all,
                        (Some(x), Some(q)) => {
                            let qb = x.queues.get(q).copied().unwrap_or_default();
                            Bucket {
                                push_messages: qb.pushed,
                                pop_messages: qb.popped,
                                lag: qb.lag,
                                ..Bucket::default()
                            }
                        }
                    };
                    (m * MICROS_PER_MINUTE, bucket)
                })
                .collect()
        })
    }

    /// Per-queue activity of `tenant` between `from` and `to`, by queue name.
    pub fn queues(&self, tenant: &str, from: Micros, to: Micros) -> BTreeMap<String, QueueBucket> {
        let (a, b) = (
            from.div_euclid(MICROS_PER_MINUTE),
            to.div_euclid(MICROS_PER_MINUTE),
        );
        self.with(|inner| {
            let mut out: BTreeMap<String, QueueBucket> = BTreeMap::new();
            if let Some(t) = inner.tenants.get(tenant) {
                for (_, m) in t.minutes.range(a..=b) {
                    for (q, qb) in &m.queues {
                        out.entry(q.clone()).or_default().merge(qb);
                    }
                }
            }
            out
        })
    }

    /// Everything `tenant` did since the engine started.
    pub fn totals(&self, tenant: &str) -> Bucket {
        self.with(|inner| {
            inner
                .tenants
                .get(tenant)
                .map(|t| t.totals)
                .unwrap_or_default()
        })
    }

    /// When `tenant` last did anything counted.
    pub fn last_seen(&self, tenant: &str) -> Option<Micros> {
        self.with(|inner| {
            inner
                .tenants
                .get(tenant)
                .and_then(|t| t.minutes.keys().next_back())
                .map(|m| m * MICROS_PER_MINUTE)
        })
    }

    /// Process samples between `from` and `to`, oldest first.
    pub fn samples(&self, from: Micros, to: Micros) -> Vec<(Micros, ProcessSample)> {
        let (a, b) = (
            from.div_euclid(MICROS_PER_MINUTE),
            to.div_euclid(MICROS_PER_MINUTE),
        );
        self.with(|inner| {
            inner
                .samples
                .range(a..=b)
                .map(|(m, s)| (m * MICROS_PER_MINUTE, *s))
                .collect()
        })
    }

    /// Calls counted (pushes, pops, acks), every tenant.
    pub fn requests(&self) -> u64 {
        self.with(|inner| inner.requests)
    }
}

/// What the stored state says, for status and the overview.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// The tenant's queues (narrowed by the filter), with their figures.
    pub queues: Vec<QueueStats>,
    /// Their counts added up.
    pub totals: Counts,
    /// Live leases.
    pub leases: LeaseFigures,
    /// Dead letters.
    pub dlq: DlqFigures,
}

/// Live leases of a tenant.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LeaseFigures {
    /// Leases not yet lapsed.
    pub active: u64,
    /// Partitions they claim.
    pub partitions: u64,
}

/// Dead letters of a tenant.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DlqFigures {
    /// Rows.
    pub total: u64,
    /// Partitions with at least one.
    pub partitions: u64,
    /// The commonest reasons, most frequent first (at most five).
    pub top_errors: Vec<(String, u64)>,
}

/// Which queues a status read covers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// One queue.
    pub queue: Option<String>,
    /// Queues of one namespace.
    pub namespace: Option<String>,
    /// Queues of one task.
    pub task: Option<String>,
}

impl Filter {
    /// Whether the queue `name` (its record `q`) is covered.
    pub fn covers(&self, name: &str, q: &QueueRecord) -> bool {
        self.queue.as_deref().is_none_or(|n| n == name)
            && self
                .namespace
                .as_deref()
                .is_none_or(|n| q.namespace.as_deref() == Some(n))
            && self
                .task
                .as_deref()
                .is_none_or(|t| q.task.as_deref() == Some(t))
    }
}

/// Reads the stored figures of `tenant` covered by `filter`, by watermarks
/// ([`Measure::Watermarks`]: a few key reads per partition, no message scan), every
/// covered queue with every partition, charged to `held`
/// ([`resources::queues_measured`]; each distinct dead-letter reason too).
pub fn snapshot(
    db: &Database,
    tenant: &str,
    filter: &Filter,
    now: Micros,
    held: &mut Held,
) -> Result<Result<Snapshot, Starved>, StoreError> {
    let scan = QueueScan {
        measure: Measure::Watermarks,
        filter: filter.clone(),
        page: Page::ALL,
        partitions: Page::ALL,
    };
    let queues = match resources::queues_measured(db, tenant, now, &scan, held)? {
        Ok(listing) => listing.rows,
        Err(s) => return Ok(Err(s)),
    };
    let mut totals = Counts::default();
    for q in &queues {
        totals.total += q.totals.total;
        totals.pending += q.totals.pending;
        totals.processing += q.totals.processing;
        totals.completed += q.totals.completed;
        totals.dead_letter += q.totals.dead_letter;
    }
    let names: std::collections::HashSet<&str> = queues.iter().map(|q| q.name.as_str()).collect();
    let r = Reader::begin(db)?;
    let prefix = Key::tenant(tenant).into_bytes();
    let mut leases = LeaseFigures::default();
    r.scan(T::Leases, &prefix, &prefix, |_, v| {
        let l: LeaseRecord = decode(v)?;
        if l.expires_at > now && names.contains(l.queue.as_str()) {
            leases.active += 1;
            leases.partitions += l.claims.len() as u64;
        }
        Ok(true)
    })?;
    let mut dlq = DlqFigures::default();
    let mut parts = std::collections::HashSet::new();
    let mut reasons: HashMap<String, u64> = HashMap::new();
    let mut starved = None;
    r.scan(T::Dlq, &prefix, &prefix, |_, v| {
        let d: DlqRecord = decode(v)?;
        if names.contains(d.queue.as_str()) {
            dlq.total += 1;
            if parts.insert(d.partition_id)
                && let Err(s) = held.charge_whole(32)
            {
                starved = Some(s);
                return Ok(false);
            }
            let why = d.error.unwrap_or_else(|| "(no reason given)".into());
            if !reasons.contains_key(&why) {
                // A reason is kept once, with its count and the map's share.
                if let Err(s) = held.charge_whole(why.len() as u64 + 64) {
                    starved = Some(s);
                    return Ok(false);
                }
            }
            *reasons.entry(why).or_default() += 1;
        }
        Ok(true)
    })?;
    if let Some(s) = starved {
        return Ok(Err(s));
    }
    dlq.partitions = parts.len() as u64;
    let mut top: Vec<(String, u64)> = reasons.into_iter().collect();
    top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    top.truncate(5);
    dlq.top_errors = top;
    Ok(Ok(Snapshot {
        queues,
        totals,
        leases,
        dlq,
    }))
}

/// Spread of a set of figures.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Spread {
    /// Average.
    pub avg: f64,
    /// Median.
    pub median: f64,
    /// Smallest.
    pub min: f64,
    /// Largest.
    pub max: f64,
}

impl Spread {
    /// The spread of `v`; all zeros when empty.
    pub fn of(mut v: Vec<f64>) -> Self {
        if v.is_empty() {
            return Spread::default();
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 {
            v[n / 2]
        } else {
            (v[n / 2 - 1] + v[n / 2]) / 2.0
        };
        Spread {
            avg: v.iter().sum::<f64>() / n as f64,
            median,
            min: v[0],
            max: v[n - 1],
        }
    }
}

/// The backlog of `queues`: its age in seconds (the oldest uncommitted message of
/// each partition that has one) and its size in messages (every partition).
pub fn backlog(queues: &[QueueStats], now: Micros) -> (Spread, Spread) {
    let mut ages = Vec::new();
    let mut sizes = Vec::new();
    for p in queues.iter().flat_map(|q| &q.partitions) {
        sizes.push(p.backlog() as f64);
        if let Some(at) = p.oldest_unconsumed_at {
            ages.push(((now - at).max(0) / 1_000_000) as f64);
        }
    }
    (Spread::of(ages), Spread::of(sizes))
}

impl Engine {
    /// The activity counters of this engine.
    pub fn activity(&self) -> &Activity {
        &self.shared.activity
    }

    fn sample(&self) -> ProcessSample {
        let (rss_bytes, virtual_bytes, cpu_user_us, cpu_system_us) = read_process();
        let s = self.stats();
        ProcessSample {
            rss_bytes,
            virtual_bytes,
            cpu_user_us,
            cpu_system_us,
            commits: s.commits,
            commands: s.commands,
            live_bytes: s.live_bytes,
        }
    }

    /// The process now, sampled outside the minute series.
    pub fn process_now(&self) -> ProcessSample {
        self.sample()
    }

    /// Counts a push call and what it stored.
    pub(crate) fn note_push(&self, tenant: &str, out: &[(String, Appended)]) {
        let now = self.clock().now_micros();
        self.shared.activity.record(
            tenant,
            now,
            || self.sample(),
            |m| {
                m.all.push_requests += 1;
                for (queue, a) in out {
                    if a.duplicate {
                        m.all.duplicates += 1;
                    } else {
                        m.all.push_messages += 1;
                        m.queues.entry(queue.clone()).or_default().pushed += 1;
                    }
                }
            },
        );
    }

    /// Counts a pop call, what it delivered and how long that waited.
    pub(crate) fn note_pop(&self, tenant: &str, out: &PopOutcome) {
        let now = self.clock().now_micros();
        self.shared.activity.record(
            tenant,
            now,
            || self.sample(),
            |m| {
                m.all.pop_requests += 1;
                for d in &out.messages {
                    let waited = ((now - d.message.created_at).max(0) / 1000) as u64;
                    m.all.pop_messages += 1;
                    m.all.lag.add(waited);
                    let q = m.queues.entry(d.queue.clone()).or_default();
                    q.popped += 1;
                    q.lag.add(waited);
                }
            },
        );
    }

    /// Counts an ack call and its verdicts.
    pub(crate) fn note_ack(&self, tenant: &str, acks: &[Ack], out: &[AckOutcome]) {
        let now = self.clock().now_micros();
        self.shared.activity.record(
            tenant,
            now,
            || self.sample(),
            |m| {
                m.all.ack_requests += 1;
                for (a, o) in acks.iter().zip(out) {
                    m.all.ack_messages += 1;
                    let nack = matches!(a.status, AckMark::Failed | AckMark::Retry);
                    if !o.success || nack {
                        m.all.ack_failed += 1;
                    } else {
                        m.all.ack_success += 1;
                    }
                    m.all.dlq += u64::from(o.dlq);
                }
            },
        );
    }

    /// Counts a committed transaction's acks and pushes (one call of each kind it
    /// holds); a rolled-back one did nothing and counts nothing.
    pub(crate) fn note_txn(&self, tenant: &str, t: &Transaction, out: &TxnOutcome) {
        let TxnOutcome::Committed { results, .. } = out else {
            return;
        };
        let now = self.clock().now_micros();
        let statuses = t.ops.iter().filter_map(|op| match op {
            TxnOp::Ack(a) => Some(a.status),
            TxnOp::Push(_) => None,
        });
        let acked = results.iter().filter_map(|r| match r {
            StepResult::Ack { dlq, .. } => Some(*dlq),
            _ => None,
        });
        let acks: Vec<(AckMark, bool)> = statuses.zip(acked).collect();
        self.shared.activity.record(
            tenant,
            now,
            || self.sample(),
            |m| {
                let mut pushed = false;
                for r in results {
                    if let StepResult::Push {
                        queue, duplicate, ..
                    } = r
                    {
                        pushed = true;
                        if *duplicate {
                            m.all.duplicates += 1;
                        } else {
                            m.all.push_messages += 1;
                            m.queues.entry(queue.clone()).or_default().pushed += 1;
                        }
                    }
                }
                m.all.push_requests += u64::from(pushed);
                m.all.ack_requests += u64::from(!acks.is_empty());
                for (status, dlq) in &acks {
                    m.all.ack_messages += 1;
                    if matches!(status, AckMark::Failed | AckMark::Retry) {
                        m.all.ack_failed += 1;
                    } else {
                        m.all.ack_success += 1;
                    }
                    m.all.dlq += u64::from(*dlq);
                }
            },
        );
    }

    /// The stored figures of `tenant` covered by `filter` ([`snapshot`]), with the
    /// room they hold in the answer budget ([whole reads](crate::engine::answers#whole-answers)): keep it until the
    /// answer built from them has been sent.
    pub async fn status_snapshot(
        &self,
        tenant: &str,
        filter: Filter,
    ) -> Result<Charged<Snapshot>, EngineError> {
        let tenant = tenant.to_string();
        self.read_whole(move |db, now, held| snapshot(db, &tenant, &filter, now, held))
            .await
    }

    /// A page of the covered queues of `tenant` with their figures
    /// ([`resources::queues_measured`]), with the room they hold in the answer budget
    /// ([whole reads](crate::engine::answers#whole-answers)): keep it until the answer has been sent.
    pub async fn queue_listing(
        &self,
        tenant: &str,
        scan: QueueScan,
    ) -> Result<Charged<Listing<QueueStats>>, EngineError> {
        let tenant = tenant.to_string();
        self.read_whole(move |db, now, held| {
            resources::queues_measured(db, &tenant, now, &scan, held)
        })
        .await
    }

    /// A queue's backlog ([`resources::depth`]); `None` when it does not exist.
    pub async fn queue_depth(
        &self,
        tenant: &str,
        queue: &str,
        group: Option<&str>,
    ) -> Result<Option<resources::Depth>, EngineError> {
        let (tenant, queue) = (tenant.to_string(), queue.to_string());
        let group = group.map(str::to_string);
        self.read(move |db, _| resources::depth(db, &tenant, &queue, group.as_deref()))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_keeps_minutes_and_totals() {
        let a = Activity::new(0);
        let sample = ProcessSample::default;
        a.record("t", 10 * MICROS_PER_MINUTE + 5, sample, |m| {
            m.all.push_messages += 3;
            m.all.lag.add(40);
        });
        a.record("t", 12 * MICROS_PER_MINUTE, sample, |m| {
            m.all.push_messages += 2;
            m.all.lag.add(10);
        });
        a.record("other", 12 * MICROS_PER_MINUTE, sample, |m| {
            m.all.push_messages += 100;
        });
        let mins = a.minutes("t", 10 * MICROS_PER_MINUTE, 12 * MICROS_PER_MINUTE, None);
        let pushed: Vec<u64> = mins.iter().map(|(_, b)| b.push_messages).collect();
        assert_eq!(
            pushed,
            vec![3, 0, 2],
            "every minute of the span, idle ones empty"
        );
        let t = a.totals("t");
        assert_eq!(t.push_messages, 5);
        assert_eq!((t.lag.count, t.lag.sum_ms, t.lag.max_ms), (2, 50, 40));
        // A day later the old minutes are gone; the totals stay.
        a.record(
            "t",
            (12 + WINDOW_MINUTES + 1) * MICROS_PER_MINUTE,
            sample,
            |m| {
                m.all.push_messages += 1;
            },
        );
        let old = a.minutes("t", 10 * MICROS_PER_MINUTE, 12 * MICROS_PER_MINUTE, None);
        assert!(old.iter().all(|(_, b)| b.push_messages == 0));
        assert_eq!(a.totals("t").push_messages, 6);
    }

    #[test]
    fn spread_has_a_median() {
        let s = Spread::of(vec![4.0, 1.0, 3.0, 2.0]);
        assert_eq!((s.avg, s.median, s.min, s.max), (2.5, 2.5, 1.0, 4.0));
        assert_eq!(Spread::of(vec![]), Spread::default());
    }
}
