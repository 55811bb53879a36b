//! The JSON shapes of the ephemeral routes (see `http/ephemeral.rs`), after
//! `queen-protocol` 1.5.0's `Ephemeral*` types: one queue per request (the identity
//! is on the envelope), a payload and nothing else per message, a closed list of
//! options (an unknown one is refused, since a silently ignored bound is a ring that
//! grows), ack statuses spelt as on durable acks.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::engine::ephemeral::{
    AckStatus, ENGINE_BUDGET_BYTES, Options, OptionsPatch, Outcome, Policy, QueueFigures,
    WindowBuffer,
};
use crate::engine::queues::check_name;
use crate::error::EngineError;

/// The queue every request names.
fn queue_name(q: Option<String>) -> Result<String, EngineError> {
    let q = q.ok_or_else(|| EngineError::bad("queue is required"))?;
    check_name("queue", &q)?;
    Ok(q)
}

/// `windowBuffer`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowBody {
    ms: Option<i64>,
    count: Option<i64>,
}

/// The options of `configure`: the closed list of seven.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct OptionsBody {
    max_bytes: Option<i64>,
    max_length: Option<i64>,
    policy: Option<String>,
    ttl_seconds: Option<i64>,
    lease_seconds: Option<i64>,
    retry_limit: Option<i64>,
    window_buffer: Option<WindowBody>,
}

fn within(name: &str, v: Option<i64>, min: i64, max: i64) -> Result<Option<u64>, EngineError> {
    match v {
        None => Ok(None),
        Some(n) if (min..=max).contains(&n) => Ok(Some(n as u64)),
        Some(n) => Err(EngineError::bad(format!(
            "{name} must be from {min} to {max}, got {n}"
        ))),
    }
}

impl OptionsBody {
    fn patch(self) -> Result<OptionsPatch, EngineError> {
        let policy = match self.policy.as_deref() {
            None => None,
            Some("reject") => Some(Policy::Reject),
            Some("dropOldest") => Some(Policy::DropOldest),
            Some(other) => {
                return Err(EngineError::bad(format!(
                    "policy must be reject or dropOldest, got {other:?}"
                )));
            }
        };
        let window_buffer = match self.window_buffer {
            None => None,
            Some(w) => Some(WindowBuffer {
                ms: within("windowBuffer.ms", w.ms, 0, 60_000)?.unwrap_or(0),
                count: within("windowBuffer.count", w.count, 0, 100_000)?.unwrap_or(0),
            }),
        };
        Ok(OptionsPatch {
            max_bytes: within("maxBytes", self.max_bytes, 1, ENGINE_BUDGET_BYTES as i64)?,
            max_length: within("maxLength", self.max_length, 1, 10_000_000)?,
            policy,
            ttl_seconds: within("ttlSeconds", self.ttl_seconds, 0, 30 * 86_400)?,
            lease_seconds: within("leaseSeconds", self.lease_seconds, 1, 86_400)?,
            retry_limit: within("retryLimit", self.retry_limit, 0, 1_000)?.map(|n| n as u32),
            window_buffer,
        })
    }
}

/// `POST /api/v1/ephemeral/configure`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigureBody {
    queue: Option<String>,
    #[serde(default)]
    options: Option<OptionsBody>,
}

impl ConfigureBody {
    /// The queue and the options to change.
    pub fn parse(self) -> Result<(String, OptionsPatch), EngineError> {
        let q = queue_name(self.queue)?;
        Ok((q, self.options.unwrap_or_default().patch()?))
    }
}

/// One message of a push: its payload, kept as the bytes sent.
#[derive(Debug, Deserialize)]
pub struct MessageBody {
    payload: Box<RawValue>,
}

/// `POST /api/v1/ephemeral/push`.
#[derive(Debug, Deserialize)]
pub struct PushBody {
    queue: Option<String>,
    partition: Option<String>,
    messages: Vec<MessageBody>,
}

/// A push, checked.
pub struct Push {
    /// The queue.
    pub queue: String,
    /// The partition; `None`: the default.
    pub partition: Option<String>,
    /// The payloads, in order.
    pub payloads: Vec<Box<RawValue>>,
}

impl PushBody {
    /// Checks the push.
    pub fn parse(self) -> Result<Push, EngineError> {
        let queue = queue_name(self.queue)?;
        if let Some(p) = &self.partition {
            check_name("partition", p)?;
        }
        if self.messages.is_empty() {
            return Err(EngineError::bad("messages must hold at least one message"));
        }
        Ok(Push {
            queue,
            partition: self.partition,
            payloads: self.messages.into_iter().map(|m| m.payload).collect(),
        })
    }
}

/// One ack.
#[derive(Debug, Deserialize)]
pub struct AckItem {
    id: String,
    status: Option<String>,
    /// Accepted and ignored: this class keeps no DLQ row to hold a reason.
    #[serde(default)]
    #[allow(dead_code)]
    error: Option<String>,
}

/// `POST /api/v1/ephemeral/ack`.
#[derive(Debug, Deserialize)]
pub struct AckBody {
    queue: Option<String>,
    group: Option<String>,
    acks: Vec<AckItem>,
}

/// An ack call, checked.
pub struct Acks {
    /// The queue.
    pub queue: String,
    /// The group; `None`: the groupless mode.
    pub group: Option<String>,
    /// Each id and what it asks for, in order.
    pub acks: Vec<(String, AckStatus)>,
}

/// Reads a status as durable acks do: absent, `completed`, `success`, `acked` and `ok`
/// complete; `retry` retries; anything else (case-sensitive) fails, so a typo cannot
/// retire a message.
pub fn ack_status(s: Option<&str>) -> AckStatus {
    match s {
        None | Some("completed" | "success" | "acked" | "ok") => AckStatus::Completed,
        Some("retry") => AckStatus::Retry,
        Some(_) => AckStatus::Failed,
    }
}

impl AckBody {
    /// Checks the call.
    pub fn parse(self) -> Result<Acks, EngineError> {
        let queue = queue_name(self.queue)?;
        if let Some(g) = &self.group {
            check_name("group", g)?;
        }
        if let Some(i) = self.acks.iter().position(|a| a.id.is_empty()) {
            return Err(EngineError::bad(format!("acks[{i}].id must not be empty")));
        }
        Ok(Acks {
            queue,
            group: self.group,
            acks: self
                .acks
                .into_iter()
                .map(|a| {
                    let s = ack_status(a.status.as_deref());
                    (a.id, s)
                })
                .collect(),
        })
    }
}

/// `POST /api/v1/ephemeral/reset`.
#[derive(Debug, Deserialize)]
pub struct ResetBody {
    queue: Option<String>,
}

impl ResetBody {
    /// The queue.
    pub fn parse(self) -> Result<String, EngineError> {
        queue_name(self.queue)
    }
}

/// `windowBuffer` as answered.
#[derive(Serialize)]
pub struct WindowOut {
    /// Milliseconds.
    pub ms: u64,
    /// Messages.
    pub count: u64,
}

/// Every option with its value.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OptionsOut {
    /// Most bytes held.
    pub max_bytes: u64,
    /// Most messages held.
    pub max_length: u64,
    /// `reject` or `dropOldest`.
    pub policy: &'static str,
    /// 0: no TTL.
    pub ttl_seconds: u64,
    /// Lease length.
    pub lease_seconds: u64,
    /// Redeliveries before a drop.
    pub retry_limit: u32,
    /// `null`: none.
    pub window_buffer: Option<WindowOut>,
}

impl From<&Options> for OptionsOut {
    fn from(o: &Options) -> Self {
        OptionsOut {
            max_bytes: o.max_bytes,
            max_length: o.max_length,
            policy: match o.policy {
                Policy::Reject => "reject",
                Policy::DropOldest => "dropOldest",
            },
            ttl_seconds: o.ttl_seconds,
            lease_seconds: o.lease_seconds,
            retry_limit: o.retry_limit,
            window_buffer: o.window_buffer.map(|w| WindowOut {
                ms: w.ms,
                count: w.count,
            }),
        }
    }
}

/// The answer to `configure`.
#[derive(Serialize)]
pub struct Configured<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Always true.
    pub declared: bool,
    /// Every option with its value.
    pub options: OptionsOut,
}

/// The answer to a push.
#[derive(Serialize)]
pub struct Pushed {
    /// Messages appended.
    pub pushed: u64,
}

/// A delivered message.
#[derive(Serialize)]
pub struct DeliveredOut<'a> {
    /// Opaque id.
    pub id: &'a str,
    /// Its partition.
    pub partition: &'a str,
    /// The bytes pushed.
    pub payload: &'a RawValue,
    /// Deliveries so far, from 1.
    pub attempts: u32,
}

/// The answer to a pop: `messages` is `[]` when nothing was ready.
#[derive(Serialize)]
pub struct Popped<'a> {
    /// The queue.
    pub queue: &'a str,
    /// In delivery order.
    pub messages: Vec<DeliveredOut<'a>>,
}

/// One ack's answer.
#[derive(Serialize)]
pub struct AckResult<'a> {
    /// The id acked.
    pub id: &'a str,
    /// `acked`, `redelivered`, `stale` or `unknown`.
    pub outcome: &'static str,
}

/// Renders an outcome.
pub fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Acked => "acked",
        Outcome::Redelivered => "redelivered",
        Outcome::Stale => "stale",
        Outcome::Unknown => "unknown",
    }
}

/// The answer to an ack call, one result per ack in order.
#[derive(Serialize)]
pub struct AckResults<'a> {
    /// The results.
    pub results: Vec<AckResult<'a>>,
}

/// The answer to a reset.
#[derive(Serialize)]
pub struct Reset<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Messages dropped (0 for a queue that is not there).
    pub dropped: u64,
}

/// The answer to a delete.
#[derive(Serialize)]
pub struct Deleted<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Whether there was a queue.
    pub deleted: bool,
    /// Whether a declaration went with it.
    pub declared: bool,
}

/// A ring's gauges.
#[derive(Serialize)]
pub struct RingOut<'a> {
    /// Its partition.
    pub partition: &'a str,
    /// Messages held.
    pub depth: u64,
    /// Bytes held.
    pub bytes: u64,
}

/// A group's gauges.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct GroupOut<'a> {
    /// Its name.
    pub group: &'a str,
    /// Messages it has not retired.
    pub pending: u64,
    /// Deliveries under a live lease.
    pub in_flight: u64,
}

/// Messages dropped, by cause.
#[derive(Serialize)]
pub struct DroppedOut {
    /// At the bounds (`dropOldest`).
    pub bounds: u64,
    /// Past the retry limit.
    pub retry: u64,
    /// By TTL.
    pub ttl: u64,
}

/// A queue's gauges (`queues` rows and `depth`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FiguresOut<'a> {
    /// The queue.
    pub queue: &'a str,
    /// Declared with `configure`.
    pub declared: bool,
    /// Messages held.
    pub depth: u64,
    /// Bytes held.
    pub bytes: u64,
    /// Per partition.
    pub partitions: Vec<RingOut<'a>>,
    /// Per group.
    pub groups: Vec<GroupOut<'a>>,
    /// Settings.
    pub options: OptionsOut,
    /// Pushed since made.
    pub pushed: u64,
    /// Deliveries made.
    pub delivered: u64,
    /// Retired by acks.
    pub acked: u64,
    /// Dropped, by cause.
    pub dropped: DroppedOut,
}

impl<'a> From<&'a QueueFigures> for FiguresOut<'a> {
    fn from(f: &'a QueueFigures) -> Self {
        FiguresOut {
            queue: &f.queue,
            declared: f.declared,
            depth: f.depth,
            bytes: f.bytes,
            partitions: f
                .partitions
                .iter()
                .map(|r| RingOut {
                    partition: &r.partition,
                    depth: r.depth,
                    bytes: r.bytes,
                })
                .collect(),
            groups: f
                .groups
                .iter()
                .map(|g| GroupOut {
                    group: &g.group,
                    pending: g.pending,
                    in_flight: g.in_flight,
                })
                .collect(),
            options: (&f.options).into(),
            pushed: f.pushed,
            delivered: f.delivered,
            acked: f.acked,
            dropped: DroppedOut {
                bounds: f.dropped_bounds,
                retry: f.dropped_retry,
                ttl: f.dropped_ttl,
            },
        }
    }
}

/// `GET /api/v1/ephemeral/queues`.
#[derive(Serialize)]
pub struct QueueList<'a> {
    /// In name order.
    pub queues: Vec<FiguresOut<'a>>,
}
