//! Ephemeral queues (`/api/v1/ephemeral/*`): rings of messages held in the broker's
//! memory, with their own push, pop and ack.
//!
//! The class trades durability for speed on purpose (the official client's
//! `ephemeral` module and `queen-protocol`'s types are the contract): contents
//! survive nothing, not even a restart, so nothing here touches redb or the writer.
//! What the class does promise is kept:
//!
//! - FIFO per `(queue, partition)`; consumption semantics come from the group, as on
//!   durable queues: one group competes, another group fans out with its own cursor,
//!   no group is the groupless queue mode.
//! - Explicit ack is at least once for the life of this engine: an unacked message is
//!   delivered again when its lease lapses, `attempts` one higher, until the queue's
//!   `retryLimit`; past it the message is dropped and counted (there is no DLQ).
//!   `autoAck` commits at delivery (at most once).
//! - Ids are `e:<epoch>:<partition>:<seq>`; the epoch names this engine instance, so
//!   an ack of an id minted by another instance (a restart) answers `stale`; `seq`
//!   counts the tenant's messages (per tenant, so it tells nothing of another's).
//! - Bounds: `maxLength`/`maxBytes` refuse a push (429 `queue_full`) or drop the
//!   oldest (`policy: dropOldest`); `ttlSeconds` drops unconsumed messages by age;
//!   every queue of the engine shares one byte budget (503 `ephemeral_unavailable`).
//!
//! The state belongs to the [`Engine`] instance ([`Rings`]), never to a global: two
//! brokers in one process share nothing.
//!
//! One difference from Queen 2, on purpose for now: Queen 2 keeps a *declared*
//! queue's options in its replicated log, so the queue comes back after a restart
//! declared and empty. Here a declaration lives as long as the engine, like the
//! contents; after a restart a queue comes back implicitly, with the defaults, at its
//! first push or pop.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::Duration;

use serde_json::value::RawValue;

use super::{Engine, QUEUE_MODE};
use crate::clock::Micros;
use crate::error::EngineError;

/// The partition a push or pop means when it names none.
pub const DEFAULT_PARTITION: &str = "Default";

/// Bytes every ephemeral queue of one engine may hold together.
pub const ENGINE_BUDGET_BYTES: u64 = 256 << 20;

/// Queues one engine keeps at most (declared and implicit).
pub const MAX_QUEUES: usize = 10_000;

/// How long an implicit queue stays after it is empty and idle.
const IDLE_COLLECT: Micros = 60_000_000;

/// How often a waiting pop looks again for leases that lapsed.
const REPOLL: Duration = Duration::from_millis(250);

/// What a push does at a queue's bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Refuse the push: 429 `queue_full`.
    Reject,
    /// Take the push and drop the oldest messages until the bounds hold.
    DropOldest,
}

/// A waiting pop's batching: return once `count` messages are ready or `ms` have
/// passed since the first one was seen.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowBuffer {
    /// Milliseconds to wait for more after the first message.
    pub ms: u64,
    /// Messages that end the wait at once.
    pub count: u64,
}

/// A queue's bounds and delivery settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// Most bytes of payload held.
    pub max_bytes: u64,
    /// Most messages held.
    pub max_length: u64,
    /// What a push beyond the bounds does.
    pub policy: Policy,
    /// Unconsumed messages older than this are dropped; 0: never.
    pub ttl_seconds: u64,
    /// How long a delivery stays leased.
    pub lease_seconds: u64,
    /// Deliveries after the first that a message may take before it is dropped.
    pub retry_limit: u32,
    /// A waiting pop's batching; `None`: answer as soon as anything is ready.
    pub window_buffer: Option<WindowBuffer>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            max_bytes: 16 << 20,
            max_length: 100_000,
            policy: Policy::Reject,
            ttl_seconds: 0,
            lease_seconds: 30,
            retry_limit: 3,
            window_buffer: None,
        }
    }
}

/// A `configure` call's changes: an absent option keeps its value.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OptionsPatch {
    /// New `maxBytes`.
    pub max_bytes: Option<u64>,
    /// New `maxLength`.
    pub max_length: Option<u64>,
    /// New `policy`.
    pub policy: Option<Policy>,
    /// New `ttlSeconds`.
    pub ttl_seconds: Option<u64>,
    /// New `leaseSeconds`.
    pub lease_seconds: Option<u64>,
    /// New `retryLimit`.
    pub retry_limit: Option<u32>,
    /// New `windowBuffer`.
    pub window_buffer: Option<WindowBuffer>,
}

impl OptionsPatch {
    fn apply(&self, o: &mut Options) {
        if let Some(v) = self.max_bytes {
            o.max_bytes = v;
        }
        if let Some(v) = self.max_length {
            o.max_length = v;
        }
        if let Some(v) = self.policy {
            o.policy = v;
        }
        if let Some(v) = self.ttl_seconds {
            o.ttl_seconds = v;
        }
        if let Some(v) = self.lease_seconds {
            o.lease_seconds = v;
        }
        if let Some(v) = self.retry_limit {
            o.retry_limit = v;
        }
        if let Some(v) = self.window_buffer {
            o.window_buffer = (v.ms > 0 || v.count > 0).then_some(v);
        }
    }
}

/// What an ack asks for (the wire's spellings are read at the edge).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// Retire the message for the group.
    Completed,
    /// Deliver it again (one attempt more), or drop it past the retry limit.
    Failed,
    /// The same as `Failed` on this class.
    Retry,
}

/// The answer to one ack (`queen-protocol`'s closed vocabulary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Applied; the message is retired (or dropped past its retry limit).
    Acked,
    /// Applied; the message comes back.
    Redelivered,
    /// The id was minted by another broker instance.
    Stale,
    /// Not this consumer's to settle: already acked, lapsed, reset, or never minted.
    Unknown,
}

/// One delivered message.
#[derive(Debug, Clone)]
pub struct Delivered {
    /// Its id (`e:<epoch>:<partition>:<seq>`).
    pub id: String,
    /// Its partition.
    pub partition: String,
    /// Its payload, the bytes pushed.
    pub payload: Box<RawValue>,
    /// Deliveries so far, from 1.
    pub attempts: u32,
}

/// A pop's request.
#[derive(Debug, Clone)]
pub struct PopRequest {
    /// The queue.
    pub queue: String,
    /// One partition; `None`: any with work.
    pub partition: Option<String>,
    /// Most messages.
    pub batch: usize,
    /// The group; `None`: the groupless queue mode.
    pub group: Option<String>,
    /// Commit at delivery.
    pub auto_ack: bool,
    /// Long-poll for this long.
    pub wait: Option<Duration>,
}

/// Figures of one partition ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RingFigures {
    /// Its name.
    pub partition: String,
    /// Messages held.
    pub depth: u64,
    /// Bytes of payload held.
    pub bytes: u64,
}

/// Figures of one group on a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupFigures {
    /// Its name (`__QUEUE_MODE__` for the groupless mode).
    pub group: String,
    /// Messages it has not retired, on every partition.
    pub pending: u64,
    /// Deliveries it holds under a live lease.
    pub in_flight: u64,
}

/// A queue's gauges.
#[derive(Debug, Clone, PartialEq)]
pub struct QueueFigures {
    /// Its name.
    pub queue: String,
    /// Whether it was declared with `configure` (otherwise a push or pop made it).
    pub declared: bool,
    /// Its settings.
    pub options: Options,
    /// Messages held.
    pub depth: u64,
    /// Bytes of payload held.
    pub bytes: u64,
    /// Per partition, in name order.
    pub partitions: Vec<RingFigures>,
    /// Per group, in name order.
    pub groups: Vec<GroupFigures>,
    /// Messages pushed since the queue was made.
    pub pushed: u64,
    /// Deliveries made.
    pub delivered: u64,
    /// Messages retired by acks (or at delivery with `autoAck`).
    pub acked: u64,
    /// Messages dropped at the bounds (`dropOldest`).
    pub dropped_bounds: u64,
    /// Messages dropped past their retry limit.
    pub dropped_retry: u64,
    /// Messages dropped by `ttlSeconds`.
    pub dropped_ttl: u64,
}

struct Msg {
    seq: u64,
    payload: Box<RawValue>,
    at: Micros,
}

/// A group's progress on one ring.
#[derive(Default)]
struct Cursor {
    /// The first seq never delivered to the group.
    next: u64,
    /// Delivered under a lease: seq -> (lease end, deliveries so far).
    in_flight: BTreeMap<u64, (Micros, u32)>,
    /// Given back (nacked or lapsed), to deliver again first: seq -> deliveries so far.
    again: BTreeMap<u64, u32>,
}

impl Cursor {
    /// The lowest seq the group still needs.
    fn low(&self) -> u64 {
        let mut low = self.next;
        if let Some((&s, _)) = self.in_flight.iter().next() {
            low = low.min(s);
        }
        if let Some((&s, _)) = self.again.iter().next() {
            low = low.min(s);
        }
        low
    }
}

#[derive(Default)]
struct Ring {
    msgs: VecDeque<Msg>,
    bytes: u64,
    groups: BTreeMap<String, Cursor>,
}

impl Ring {
    fn head(&self) -> Option<u64> {
        self.msgs.front().map(|m| m.seq)
    }

    fn find(&self, seq: u64) -> Option<&Msg> {
        // Seqs increase along a ring (not densely: one counter serves the engine).
        let i = self.msgs.binary_search_by_key(&seq, |m| m.seq).ok()?;
        self.msgs.get(i)
    }

    /// Drops the head message; answers its size.
    fn pop_head(&mut self) -> Option<u64> {
        let m = self.msgs.pop_front()?;
        let n = m.payload.get().len() as u64;
        self.bytes -= n;
        Some(n)
    }

    /// Forgets, for every group, what is older than the ring's head.
    fn forget_below_head(&mut self) {
        let head = self.head().unwrap_or(u64::MAX);
        for c in self.groups.values_mut() {
            c.in_flight.retain(|&s, _| s >= head);
            c.again.retain(|&s, _| s >= head);
        }
    }

    /// Messages the group may be given now.
    fn ready(&self, c: &Cursor, now: Micros) -> u64 {
        let fresh = self
            .msgs
            .iter()
            .rev()
            .take_while(|m| m.seq >= c.next)
            .count() as u64;
        let lapsed = c.in_flight.values().filter(|(end, _)| *end <= now).count() as u64;
        fresh + c.again.len() as u64 + lapsed
    }
}

struct Queue {
    declared: bool,
    options: Options,
    rings: BTreeMap<String, Ring>,
    rotation: usize,
    last_used: Micros,
    pushed: u64,
    delivered: u64,
    acked: u64,
    dropped_bounds: u64,
    dropped_retry: u64,
    dropped_ttl: u64,
}

impl Queue {
    fn new(declared: bool, options: Options, now: Micros) -> Self {
        Queue {
            declared,
            options,
            rings: BTreeMap::new(),
            rotation: 0,
            last_used: now,
            pushed: 0,
            delivered: 0,
            acked: 0,
            dropped_bounds: 0,
            dropped_retry: 0,
            dropped_ttl: 0,
        }
    }

    fn depth(&self) -> u64 {
        self.rings.values().map(|r| r.msgs.len() as u64).sum()
    }

    fn bytes(&self) -> u64 {
        self.rings.values().map(|r| r.bytes).sum()
    }

    fn idle(&self) -> bool {
        self.rings
            .values()
            .all(|r| r.msgs.is_empty() && r.groups.values().all(|c| c.in_flight.is_empty()))
    }

    /// Drops what `ttlSeconds` has aged out; answers the bytes freed.
    fn expire(&mut self, now: Micros) -> u64 {
        if self.options.ttl_seconds == 0 {
            return 0;
        }
        let oldest = now - (self.options.ttl_seconds as i64).saturating_mul(1_000_000);
        let mut freed = 0;
        for r in self.rings.values_mut() {
            let before = r.msgs.len();
            while r.msgs.front().is_some_and(|m| m.at <= oldest) {
                freed += r.pop_head().unwrap_or(0);
            }
            let gone = before - r.msgs.len();
            if gone > 0 {
                self.dropped_ttl += gone as u64;
                r.forget_below_head();
            }
        }
        freed
    }

    /// Moves lapsed leases back for redelivery (or drops messages past their retry
    /// limit) on one ring for one group.
    fn reclaim(&mut self, partition: &str, group: &str, now: Micros) {
        let limit = self.options.retry_limit;
        let Some(r) = self.rings.get_mut(partition) else {
            return;
        };
        let Some(c) = r.groups.get_mut(group) else {
            return;
        };
        let lapsed: Vec<(u64, u32)> = c
            .in_flight
            .iter()
            .filter(|(_, (end, _))| *end <= now)
            .map(|(&s, &(_, n))| (s, n))
            .collect();
        for (seq, deliveries) in lapsed {
            c.in_flight.remove(&seq);
            if deliveries > limit {
                self.dropped_retry += 1;
            } else {
                c.again.insert(seq, deliveries);
            }
        }
    }

    /// Drops every message below the lowest need of the ring's groups; answers the
    /// bytes freed. A ring nobody has read keeps its messages (until bounds or TTL).
    fn trim(&mut self, partition: &str) -> u64 {
        let Some(r) = self.rings.get_mut(partition) else {
            return 0;
        };
        let Some(low) = r.groups.values().map(Cursor::low).min() else {
            return 0;
        };
        let mut freed = 0;
        while r.msgs.front().is_some_and(|m| m.seq < low) {
            freed += r.pop_head().unwrap_or(0);
        }
        freed
    }

    fn figures(&self, name: &str, now: Micros) -> QueueFigures {
        let mut groups: BTreeMap<&str, GroupFigures> = BTreeMap::new();
        for r in self.rings.values() {
            for (g, c) in &r.groups {
                let f = groups.entry(g).or_insert_with(|| GroupFigures {
                    group: g.clone(),
                    pending: 0,
                    in_flight: 0,
                });
                f.pending += r.msgs.iter().rev().take_while(|m| m.seq >= c.next).count() as u64
                    + c.again.len() as u64
                    + c.in_flight.len() as u64;
                f.in_flight += c.in_flight.values().filter(|(end, _)| *end > now).count() as u64;
            }
        }
        QueueFigures {
            queue: name.to_string(),
            declared: self.declared,
            options: self.options,
            depth: self.depth(),
            bytes: self.bytes(),
            partitions: self
                .rings
                .iter()
                .map(|(p, r)| RingFigures {
                    partition: p.clone(),
                    depth: r.msgs.len() as u64,
                    bytes: r.bytes,
                })
                .collect(),
            groups: groups.into_values().collect(),
            pushed: self.pushed,
            delivered: self.delivered,
            acked: self.acked,
            dropped_bounds: self.dropped_bounds,
            dropped_retry: self.dropped_retry,
            dropped_ttl: self.dropped_ttl,
        }
    }
}

type QueueKey = (String, String);

#[derive(Default)]
struct State {
    queues: HashMap<QueueKey, Queue>,
    bytes: u64,
    /// The next message seq of each tenant. Per tenant, so that the seqs in a tenant's
    /// ids say nothing of another's traffic; never reset (a queue deleted and made
    /// again goes on counting), so an id of a message gone never names a new one.
    seqs: HashMap<String, u64>,
}

impl State {
    /// The queue, made implicitly (with the defaults) when it does not exist.
    fn queue(&mut self, key: &QueueKey, now: Micros) -> Result<&mut Queue, EngineError> {
        if !self.queues.contains_key(key) {
            if self.queues.len() >= MAX_QUEUES {
                // The table is the engine's, so at its bound every tenant's idle
                // implicit queues go (an empty queue forgotten loses only its counts).
                self.collect(now, None);
            }
            if self.queues.len() >= MAX_QUEUES {
                return Err(EngineError::EphemeralUnavailable(format!(
                    "this broker holds {MAX_QUEUES} ephemeral queues, its most; delete some"
                )));
            }
            self.queues
                .insert(key.clone(), Queue::new(false, Options::default(), now));
        }
        let q = self.queues.get_mut(key).expect("inserted above");
        q.last_used = now;
        let freed = q.expire(now);
        self.bytes -= freed;
        Ok(self.queues.get_mut(key).expect("present"))
    }

    /// Forgets implicit queues that are empty and have been idle a while: the tenant's,
    /// or every tenant's with `None`.
    fn collect(&mut self, now: Micros, tenant: Option<&str>) {
        self.queues.retain(|(t, _), q| {
            tenant.is_some_and(|tenant| tenant != t)
                || q.declared
                || !q.idle()
                || now - q.last_used < IDLE_COLLECT
        });
    }
}

/// The ephemeral queues of one engine.
pub struct Rings {
    epoch: String,
    state: Mutex<State>,
    arrived: tokio::sync::Notify,
}

impl Default for Rings {
    fn default() -> Self {
        Rings {
            epoch: format!("{:x}", uuid::Uuid::new_v4().as_u128() as u32),
            state: Mutex::default(),
            arrived: tokio::sync::Notify::new(),
        }
    }
}

/// Reads `e:<epoch>:<partition>:<seq>`.
fn parse_id(id: &str) -> Option<(&str, &str, u64)> {
    let rest = id.strip_prefix("e:")?;
    let (epoch, rest) = rest.split_once(':')?;
    let (partition, seq) = rest.rsplit_once(':')?;
    Some((epoch, partition, seq.parse().ok()?))
}

impl Rings {
    fn with<R>(&self, f: impl FnOnce(&mut State) -> R) -> R {
        let mut g = self.state.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut g)
    }

    fn key(tenant: &str, queue: &str) -> QueueKey {
        (tenant.to_string(), queue.to_string())
    }

    /// Declares a queue (or changes a declared one's options); answers its options.
    pub fn configure(
        &self,
        tenant: &str,
        queue: &str,
        patch: &OptionsPatch,
        now: Micros,
    ) -> Result<Options, EngineError> {
        let mut o = self.with(|s| {
            s.queues
                .get(&Self::key(tenant, queue))
                .map(|q| q.options)
                .unwrap_or_default()
        });
        patch.apply(&mut o);
        if o.max_bytes > ENGINE_BUDGET_BYTES {
            return Err(EngineError::bad(format!(
                "maxBytes is at most {ENGINE_BUDGET_BYTES} on this broker"
            )));
        }
        self.with(|s| {
            let q = s.queue(&Self::key(tenant, queue), now)?;
            q.declared = true;
            q.options = o;
            Ok(o)
        })
    }

    /// Appends `payloads` to one ring, all or nothing; answers how many.
    pub fn push(
        &self,
        tenant: &str,
        queue: &str,
        partition: Option<&str>,
        payloads: Vec<Box<RawValue>>,
        now: Micros,
    ) -> Result<u64, EngineError> {
        let partition = partition.unwrap_or(DEFAULT_PARTITION);
        let n = payloads.len() as u64;
        let size: u64 = payloads.iter().map(|p| p.get().len() as u64).sum();
        let key = Self::key(tenant, queue);
        self.with(|s| {
            s.queue(&key, now)?;
            let total = s.bytes;
            let q = s.queues.get_mut(&key).expect("made above");
            let o = q.options;
            if size > o.max_bytes || n > o.max_length {
                return Err(EngineError::PayloadTooLarge(format!(
                    "this push holds {n} messages of {size} bytes; the queue holds at most {} messages and {} bytes",
                    o.max_length, o.max_bytes
                )));
            }
            let (depth, bytes) = (q.depth(), q.bytes());
            if o.policy == Policy::Reject && (depth + n > o.max_length || bytes + size > o.max_bytes)
            {
                return Err(EngineError::QueueFull(format!(
                    "the ephemeral queue {queue:?} is at its maxBytes/maxLength ({depth} messages, {bytes} bytes) and its policy is reject"
                )));
            }
            let mut freed = 0;
            if o.policy == Policy::DropOldest {
                // Make room, oldest first across the queue's rings.
                while q.depth() + n > o.max_length || q.bytes() + size > o.max_bytes {
                    let oldest = q
                        .rings
                        .iter()
                        .filter_map(|(p, r)| r.msgs.front().map(|m| (m.at, m.seq, p.clone())))
                        .min();
                    let Some((_, _, p)) = oldest else { break };
                    let r = q.rings.get_mut(&p).expect("listed above");
                    freed += r.pop_head().unwrap_or(0);
                    r.forget_below_head();
                    q.dropped_bounds += 1;
                }
            }
            if total - freed + size > ENGINE_BUDGET_BYTES {
                // What dropOldest dropped stays dropped: that is the queue's own bound.
                s.bytes -= freed;
                return Err(EngineError::EphemeralUnavailable(format!(
                    "the ephemeral queues of this broker hold {} bytes, their budget is {ENGINE_BUDGET_BYTES}",
                    total - freed
                )));
            }
            if !s.seqs.contains_key(tenant) {
                s.seqs.insert(tenant.to_string(), 1);
            }
            let next = s.seqs.get_mut(tenant).expect("inserted above");
            let first = *next;
            *next += n;
            let r = q.rings.entry(partition.to_string()).or_default();
            for (seq, payload) in (first..).zip(payloads) {
                r.bytes += payload.get().len() as u64;
                r.msgs.push_back(Msg {
                    seq,
                    payload,
                    at: now,
                });
            }
            q.pushed += n;
            s.bytes = total - freed + size;
            Ok(n)
        })
        .inspect(|_| self.arrived.notify_waiters())
    }

    /// Delivers what is ready now, without waiting.
    fn take(
        &self,
        tenant: &str,
        req: &PopRequest,
        now: Micros,
    ) -> Result<Vec<Delivered>, EngineError> {
        let key = Self::key(tenant, &req.queue);
        let group = req.group.as_deref().unwrap_or(QUEUE_MODE);
        self.with(|s| {
            let q = s.queue(&key, now)?;
            let names: Vec<String> = match &req.partition {
                Some(p) => vec![p.clone()],
                None => {
                    let all: Vec<String> = q.rings.keys().cloned().collect();
                    let n = all.len().max(1);
                    let start = q.rotation % n;
                    q.rotation = q.rotation.wrapping_add(1);
                    all.iter()
                        .cycle()
                        .skip(start)
                        .take(all.len())
                        .cloned()
                        .collect()
                }
            };
            let mut out = Vec::new();
            let mut freed = 0;
            for p in names {
                if out.len() >= req.batch {
                    break;
                }
                if !q.rings.contains_key(&p) {
                    continue;
                }
                {
                    let r = q.rings.get_mut(&p).expect("checked");
                    let head = r.head();
                    r.groups.entry(group.to_string()).or_insert_with(|| Cursor {
                        next: head.unwrap_or(0),
                        ..Cursor::default()
                    });
                }
                q.reclaim(&p, group, now);
                let lease_end = now + (q.options.lease_seconds as i64).saturating_mul(1_000_000);
                let r = q.rings.get_mut(&p).expect("checked");
                let c = r.groups.get_mut(group).expect("made above");
                let mut picked: Vec<(u64, u32)> = Vec::new();
                while picked.len() + out.len() < req.batch {
                    let Some((seq, n)) = c.again.pop_first() else {
                        break;
                    };
                    picked.push((seq, n + 1));
                }
                for m in r.msgs.iter().filter(|m| m.seq >= c.next) {
                    if picked.len() + out.len() >= req.batch {
                        break;
                    }
                    picked.push((m.seq, 1));
                }
                for &(seq, attempts) in &picked {
                    c.next = c.next.max(seq + 1);
                    if !req.auto_ack {
                        c.in_flight.insert(seq, (lease_end, attempts));
                    }
                }
                let delivered: Vec<Delivered> = picked
                    .iter()
                    .filter_map(|&(seq, attempts)| {
                        r.find(seq).map(|m| Delivered {
                            id: format!("e:{}:{p}:{seq}", self.epoch),
                            partition: p.clone(),
                            payload: m.payload.clone(),
                            attempts,
                        })
                    })
                    .collect();
                q.delivered += delivered.len() as u64;
                if req.auto_ack {
                    q.acked += delivered.len() as u64;
                }
                out.extend(delivered);
                freed += q.trim(&p);
            }
            s.bytes -= freed;
            Ok(out)
        })
    }

    /// Messages a pop of `req` could take now.
    fn ready(&self, tenant: &str, req: &PopRequest, now: Micros) -> u64 {
        let group = req.group.as_deref().unwrap_or(QUEUE_MODE);
        self.with(|s| {
            let Some(q) = s.queues.get(&Self::key(tenant, &req.queue)) else {
                return 0;
            };
            q.rings
                .iter()
                .filter(|(p, _)| req.partition.as_deref().is_none_or(|x| x == p.as_str()))
                .map(|(_, r)| match r.groups.get(group) {
                    Some(c) => r.ready(c, now),
                    None => r.msgs.len() as u64,
                })
                .sum()
        })
    }

    /// Settles deliveries of one group, in order.
    pub fn ack(
        &self,
        tenant: &str,
        queue: &str,
        group: Option<&str>,
        acks: &[(String, AckStatus)],
        now: Micros,
    ) -> Vec<Outcome> {
        let group = group.unwrap_or(QUEUE_MODE);
        let key = Self::key(tenant, queue);
        let mut again = false;
        let out = self.with(|s| {
            let mut freed = 0;
            let out = acks
                .iter()
                .map(|(id, status)| {
                    let Some((epoch, partition, seq)) = parse_id(id) else {
                        return Outcome::Unknown;
                    };
                    if epoch != self.epoch {
                        return Outcome::Stale;
                    }
                    let Some(q) = s.queues.get_mut(&key) else {
                        return Outcome::Unknown;
                    };
                    q.last_used = now;
                    let limit = q.options.retry_limit;
                    let Some(c) = q
                        .rings
                        .get_mut(partition)
                        .and_then(|r| r.groups.get_mut(group))
                    else {
                        return Outcome::Unknown;
                    };
                    match c.in_flight.get(&seq) {
                        Some(&(end, deliveries)) if end > now => {
                            c.in_flight.remove(&seq);
                            let outcome = match status {
                                AckStatus::Completed => {
                                    q.acked += 1;
                                    Outcome::Acked
                                }
                                AckStatus::Failed | AckStatus::Retry if deliveries > limit => {
                                    q.dropped_retry += 1;
                                    Outcome::Acked
                                }
                                AckStatus::Failed | AckStatus::Retry => {
                                    c.again.insert(seq, deliveries);
                                    again = true;
                                    Outcome::Redelivered
                                }
                            };
                            freed += q.trim(partition);
                            outcome
                        }
                        _ => Outcome::Unknown,
                    }
                })
                .collect();
            s.bytes -= freed;
            out
        });
        if again {
            self.arrived.notify_waiters();
        }
        out
    }

    /// Empties a queue: its messages, leases and cursors; answers the messages dropped.
    pub fn reset(&self, tenant: &str, queue: &str) -> u64 {
        self.with(|s| {
            let Some(q) = s.queues.get_mut(&Self::key(tenant, queue)) else {
                return 0;
            };
            let (n, b) = (q.depth(), q.bytes());
            q.rings.clear();
            s.bytes -= b;
            n
        })
    }

    /// Removes a queue and its declaration; answers (existed, was declared).
    pub fn delete(&self, tenant: &str, queue: &str) -> (bool, bool) {
        self.with(|s| match s.queues.remove(&Self::key(tenant, queue)) {
            Some(q) => {
                s.bytes -= q.bytes();
                (true, q.declared)
            }
            None => (false, false),
        })
    }

    /// One queue's gauges; `None` when there is no such queue.
    pub fn figures(&self, tenant: &str, queue: &str, now: Micros) -> Option<QueueFigures> {
        self.with(|s| {
            let key = Self::key(tenant, queue);
            let q = s.queues.get_mut(&key)?;
            let freed = q.expire(now);
            let f = q.figures(queue, now);
            s.bytes -= freed;
            Some(f)
        })
    }

    /// Every queue of `tenant`, in name order.
    pub fn list(&self, tenant: &str, now: Micros) -> Vec<QueueFigures> {
        self.with(|s| {
            // Only the caller's: a listing must not change what another tenant sees.
            s.collect(now, Some(tenant));
            let mut names: Vec<String> = s
                .queues
                .keys()
                .filter(|(t, _)| t == tenant)
                .map(|(_, q)| q.clone())
                .collect();
            names.sort();
            let mut out = Vec::with_capacity(names.len());
            for name in names {
                let q = s
                    .queues
                    .get_mut(&(tenant.to_string(), name.clone()))
                    .expect("listed");
                let freed = q.expire(now);
                out.push(q.figures(&name, now));
                s.bytes -= freed;
            }
            out
        })
    }
}

impl Engine {
    /// The ephemeral queues of this engine.
    pub fn ephemeral(&self) -> &Rings {
        &self.shared.ephemeral
    }

    /// Pops from an ephemeral queue; with `wait`, long-polls until something is ready,
    /// the time passes or the broker stops. A queue with a `windowBuffer` makes a
    /// waiting pop hold on until `count` messages are ready or `ms` have passed since
    /// the first, within the pop's own deadline.
    pub async fn ephemeral_pop(
        &self,
        tenant: &str,
        req: PopRequest,
    ) -> Result<Vec<Delivered>, EngineError> {
        let rings = &self.shared.ephemeral;
        let max_wait = self.limits().max_wait;
        let deadline = req
            .wait
            .map(|w| tokio::time::Instant::now() + w.min(max_wait));
        let mut first_seen: Option<tokio::time::Instant> = None;
        loop {
            let arrived = rings.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            let closed = self.shared.closing.notify.notified();
            tokio::pin!(closed);
            closed.as_mut().enable();
            let now = self.clock().now_micros();
            let Some(deadline) = deadline else {
                return rings.take(tenant, &req, now);
            };
            let t = tokio::time::Instant::now();
            let window = rings.with(|s| {
                s.queues
                    .get(&Rings::key(tenant, &req.queue))
                    .and_then(|q| q.options.window_buffer)
            });
            let ready = rings.ready(tenant, &req, now);
            let hold = match window {
                Some(w) if ready > 0 && !self.is_closing() && t < deadline => {
                    let seen = *first_seen.get_or_insert(t);
                    let want = if w.count == 0 {
                        req.batch as u64
                    } else {
                        w.count
                    };
                    ready < want.min(req.batch as u64) && t < seen + Duration::from_millis(w.ms)
                }
                _ => false,
            };
            if !hold {
                let got = rings.take(tenant, &req, now)?;
                if !got.is_empty() || self.is_closing() || t >= deadline {
                    return Ok(got);
                }
            }
            let mut wake = (t + REPOLL).min(deadline);
            if let (Some(w), Some(seen)) = (window, first_seen) {
                wake = wake.min(seen + Duration::from_millis(w.ms));
            }
            tokio::select! {
                _ = &mut arrived => {}
                _ = &mut closed => {}
                _ = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.to_string()).unwrap()
    }

    fn pop(group: Option<&str>, batch: usize) -> PopRequest {
        PopRequest {
            queue: "q".into(),
            partition: None,
            batch,
            group: group.map(str::to_string),
            auto_ack: false,
            wait: None,
        }
    }

    #[test]
    fn ids_read_back_even_with_colons_in_the_partition() {
        assert_eq!(parse_id("e:9f1:room:7:12"), Some(("9f1", "room:7", 12)));
        assert_eq!(parse_id("e:9f1:x"), None);
        assert_eq!(parse_id("x:9f1:p:1"), None);
    }

    #[test]
    fn groups_compete_and_fan_out() {
        let r = Rings::default();
        r.push("t", "q", None, vec![raw("1"), raw("2")], 0).unwrap();
        let a = r.take("t", &pop(Some("g"), 1), 0).unwrap();
        let b = r.take("t", &pop(Some("g"), 1), 0).unwrap();
        assert_eq!((a[0].payload.get(), b[0].payload.get()), ("1", "2"));
        let other = r.take("t", &pop(Some("h"), 10), 0).unwrap();
        assert_eq!(other.len(), 2, "another group reads its own copy");
        assert!(r.take("t", &pop(Some("g"), 1), 0).unwrap().is_empty());
    }

    #[test]
    fn a_lapsed_lease_redelivers_until_the_retry_limit() {
        let r = Rings::default();
        r.configure(
            "t",
            "q",
            &OptionsPatch {
                lease_seconds: Some(1),
                retry_limit: Some(1),
                ..Default::default()
            },
            0,
        )
        .unwrap();
        r.push("t", "q", None, vec![raw("1")], 0).unwrap();
        let first = r.take("t", &pop(None, 1), 0).unwrap();
        assert_eq!(first[0].attempts, 1);
        let again = r.take("t", &pop(None, 1), 2_000_000).unwrap();
        assert_eq!(again[0].attempts, 2);
        assert_eq!(again[0].id, first[0].id);
        // The second lapse is past retryLimit 1: dropped and counted.
        assert!(r.take("t", &pop(None, 1), 4_000_000).unwrap().is_empty());
        let f = r.figures("t", "q", 4_000_000).unwrap();
        assert_eq!((f.dropped_retry, f.depth), (1, 0));
    }

    #[test]
    fn acks_answer_in_the_closed_vocabulary() {
        let r = Rings::default();
        r.push("t", "q", None, vec![raw("1"), raw("2")], 0).unwrap();
        let got = r.take("t", &pop(None, 2), 0).unwrap();
        let acks = vec![
            (got[0].id.clone(), AckStatus::Completed),
            (got[1].id.clone(), AckStatus::Failed),
            (got[0].id.clone(), AckStatus::Completed),
            ("e:other:Default:1".to_string(), AckStatus::Completed),
        ];
        assert_eq!(
            r.ack("t", "q", None, &acks, 0),
            vec![
                Outcome::Acked,
                Outcome::Redelivered,
                Outcome::Unknown,
                Outcome::Stale
            ]
        );
        let back = r.take("t", &pop(None, 5), 0).unwrap();
        assert_eq!((back.len(), back[0].attempts), (1, 2));
    }

    #[test]
    fn bounds_refuse_or_drop_the_oldest() {
        let r = Rings::default();
        let cap = OptionsPatch {
            max_length: Some(2),
            ..Default::default()
        };
        r.configure("t", "q", &cap, 0).unwrap();
        r.push("t", "q", None, vec![raw("1"), raw("2")], 0).unwrap();
        let full = r.push("t", "q", None, vec![raw("3")], 0).unwrap_err();
        assert!(matches!(full, EngineError::QueueFull(_)), "{full:?}");
        let drop = OptionsPatch {
            policy: Some(Policy::DropOldest),
            ..Default::default()
        };
        r.configure("t", "q", &drop, 0).unwrap();
        r.push("t", "q", None, vec![raw("3")], 0).unwrap();
        let got = r.take("t", &pop(None, 10), 0).unwrap();
        let payloads: Vec<&str> = got.iter().map(|d| d.payload.get()).collect();
        assert_eq!(payloads, vec!["2", "3"]);
        assert_eq!(r.figures("t", "q", 0).unwrap().dropped_bounds, 1);
    }

    #[test]
    fn tenants_and_queues_share_nothing() {
        let r = Rings::default();
        r.push("a", "q", None, vec![raw("1")], 0).unwrap();
        assert!(r.take("b", &pop(None, 1), 0).unwrap().is_empty());
        assert_eq!(r.list("b", 0).len(), 1, "the pop made b's queue, empty");
        assert_eq!(r.list("a", 0)[0].depth, 1);
    }
}
