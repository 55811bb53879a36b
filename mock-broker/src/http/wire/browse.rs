//! The JSON shapes of browse's routes (see `http/browse.rs`): the fetch and discovery
//! bodies and answers of `queen-protocol` 1.5.0 (`fetch.rs`, `partitions.rs`), the
//! message listing's rows, and the answers to handling a dead letter by hand.
//!
//! Requests are parsed into the engine's typed calls here, with every refusal a 400
//! that names the entry and field; answers are rendered from the engine's outcomes
//! with the payload spliced as stored, never re-parsed.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::clock::{Micros, format_iso, parse_iso};
use crate::engine::browse::{
    self, ChangedAnswer, ChangedPartition, ChangedQuery, ConsumerMode, Fetch, FetchEntry,
    FetchError, FetchedEntry, ListedMessage, MAX_CHANGED_PAGE, MAX_ENTRIES,
};
use crate::engine::queues::check_name;
use crate::engine::resources::MessageStatus;
use crate::error::EngineError;

/// The partition every route defaults to.
const DEFAULT_PARTITION: &str = "Default";

/// A partition named by a string or, as a Kafka facade sends it, a number (`3` names
/// the partition `"3"`); `null` or absent is the default partition.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum PartitionName {
    /// A name.
    Name(String),
    /// A number, read as its decimal name.
    Number(i64),
}

/// One entry of `POST /api/v1/fetch`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchEntryWire {
    queue: String,
    #[serde(default)]
    partition: Option<PartitionName>,
    offset: i64,
    #[serde(default)]
    max_bytes: Option<i64>,
}

/// `POST /api/v1/fetch` `{entries, maxBytes?, maxWaitMs?, minBytes?}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchBody {
    entries: Option<Vec<FetchEntryWire>>,
    #[serde(default)]
    max_bytes: Option<i64>,
    #[serde(default)]
    max_wait_ms: Option<i64>,
    #[serde(default)]
    min_bytes: Option<i64>,
}

fn bad(m: String) -> EngineError {
    EngineError::BadRequest(m)
}

/// A byte budget: absent takes `default`; below 1 is refused; above `max` is clamped
/// (the protocol's rule: the broker clamps to its own ceiling rather than refusing).
fn budget(v: Option<i64>, default: u64, max: u64, at: &str) -> Result<u64, EngineError> {
    match v {
        None => Ok(default),
        Some(n) if n < 1 => Err(bad(format!("{at} must be a positive byte count, got {n}"))),
        Some(n) => Ok((n as u64).min(max)),
    }
}

fn partition_of(p: Option<PartitionName>, at: &str) -> Result<String, EngineError> {
    let name = match p {
        None => DEFAULT_PARTITION.to_string(),
        Some(PartitionName::Name(s)) => s,
        Some(PartitionName::Number(n)) => n.to_string(),
    };
    if name.is_empty() {
        return Err(bad(format!("{at}.partition must not be empty")));
    }
    check_name("partition", &name)?;
    Ok(name)
}

impl FetchBody {
    /// The typed call, or the 400 (413 for an over-long name) of its first bad field.
    pub fn into_fetch(self) -> Result<Fetch, EngineError> {
        let entries = self.entries.ok_or_else(|| {
            bad("entries is required (an array of {queue, partition?, offset})".into())
        })?;
        if entries.len() > MAX_ENTRIES {
            return Err(bad(format!(
                "{} fetch entries; the limit is {MAX_ENTRIES}",
                entries.len()
            )));
        }
        let entries = entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                let at = format!("entries[{i}]");
                if e.queue.is_empty() {
                    return Err(bad(format!("{at}.queue must not be empty")));
                }
                check_name("queue", &e.queue)?;
                if e.offset < 0 {
                    return Err(bad(format!(
                        "{at}.offset must be an absolute offset (0 or more), got {}; the bounds \
                         are in every answer",
                        e.offset
                    )));
                }
                Ok(FetchEntry {
                    partition: partition_of(e.partition, &at)?,
                    queue: e.queue,
                    offset: e.offset as u64,
                    max_bytes: budget(
                        e.max_bytes,
                        browse::DEFAULT_ENTRY_BYTES,
                        browse::MAX_ENTRY_BYTES,
                        &format!("{at}.maxBytes"),
                    )?,
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        let max_wait_ms = match self.max_wait_ms {
            Some(n) if n < 0 => {
                return Err(bad(format!(
                    "maxWaitMs must be 0 or more milliseconds, got {n}"
                )));
            }
            n => n.unwrap_or(0) as u64,
        };
        let min_bytes = match self.min_bytes {
            Some(n) if n < 0 => {
                return Err(bad(format!("minBytes must be 0 or more, got {n}")));
            }
            n => n.unwrap_or(1) as u64,
        };
        Ok(Fetch {
            entries,
            max_bytes: budget(
                self.max_bytes,
                browse::MAX_CALL_BYTES,
                browse::MAX_CALL_BYTES,
                "maxBytes",
            )?,
            max_wait: std::time::Duration::from_millis(max_wait_ms),
            min_bytes,
        })
    }
}

/// One record of a fetch answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchRecordAnswer<'a> {
    offset: u64,
    transaction_id: &'a str,
    payload: &'a RawValue,
    ts: String,
}

/// One entry of a fetch answer (key order as the Queen server renders it).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FetchEntryAnswer<'a> {
    queue: &'a str,
    partition: &'a str,
    records: Vec<FetchRecordAnswer<'a>>,
    high_watermark: u64,
    log_start_offset: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'static str>,
}

/// A fetch answer.
#[derive(Serialize)]
pub struct FetchAnswer<'a> {
    entries: Vec<FetchEntryAnswer<'a>>,
}

/// Renders a fetch's outcome.
pub fn fetch_answer(out: &[FetchedEntry]) -> FetchAnswer<'_> {
    let entries = out
        .iter()
        .map(|e| FetchEntryAnswer {
            queue: &e.queue,
            partition: &e.partition,
            records: e
                .records
                .iter()
                .map(|(offset, m)| FetchRecordAnswer {
                    offset: *offset,
                    transaction_id: &m.txn,
                    payload: &m.data,
                    ts: format_iso(m.created_at),
                })
                .collect(),
            high_watermark: e.high_watermark,
            log_start_offset: e.log_start_offset,
            error: e.error.map(|err| match err {
                FetchError::OffsetOutOfRange => "OFFSET_OUT_OF_RANGE",
                FetchError::UnknownPartition => "UNKNOWN_TOPIC_OR_PARTITION",
            }),
        })
        .collect();
    FetchAnswer { entries }
}

/// One entry of `POST /api/v1/partitions/changed`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedEntryWire {
    queue: String,
    #[serde(default)]
    since: Option<String>,
    #[serde(default)]
    after: Option<String>,
    #[serde(default)]
    limit: Option<i64>,
}

/// `POST /api/v1/partitions/changed` `{entries}` (absent: none, a watermark-only call).
#[derive(Debug, Deserialize)]
pub struct ChangedBody {
    #[serde(default)]
    entries: Vec<ChangedEntryWire>,
}

/// A `since` as the protocol spells it: `YYYY-MM-DD`, optionally `THH:MM`, `:SS` and a
/// fraction, then `Z` or an offset; without a designator it is UTC.
pub fn parse_since(s: &str) -> Option<Micros> {
    if let Some(t) = parse_iso(s) {
        return Some(t);
    }
    // Every form below is ASCII; the byte cuts that fill in the seconds need it.
    if !s.is_ascii() {
        return None;
    }
    let designated = s.ends_with('Z')
        || s.ends_with('z')
        || s.get(10..)
            .is_some_and(|rest| rest.contains('+') || rest.contains('-'));
    let date_only = s.len() == 10;
    let filled = match (date_only, s.len()) {
        (true, _) => format!("{s}T00:00:00"),
        (false, 16) => format!("{s}:00"),
        _ => s.to_string(),
    };
    if designated {
        // `2026-09-04T10:00+02:00`: seconds missing before the offset.
        let (head, tail) = filled.split_at(16.min(filled.len()));
        return parse_iso(&format!("{head}:00{tail}"));
    }
    parse_iso(&format!("{filled}Z"))
}

impl ChangedBody {
    /// The typed queries, or the 400 of the first bad field.
    pub fn into_queries(self) -> Result<Vec<ChangedQuery>, EngineError> {
        if self.entries.len() > MAX_ENTRIES {
            return Err(bad(format!(
                "{} entries; the limit is {MAX_ENTRIES}",
                self.entries.len()
            )));
        }
        self.entries
            .into_iter()
            .enumerate()
            .map(|(i, e)| {
                if e.queue.is_empty() {
                    return Err(bad(format!("entries[{i}].queue must not be empty")));
                }
                check_name("queue", &e.queue)?;
                let since = match e.since.as_deref() {
                    None => None,
                    Some(s) => Some(parse_since(s).ok_or_else(|| {
                        bad(format!(
                            "entries[{i}].since must be an ISO-8601 time, got {s:?}"
                        ))
                    })?),
                };
                Ok(ChangedQuery {
                    queue: e.queue,
                    since,
                    after: e.after,
                    limit: e.limit.map_or(MAX_CHANGED_PAGE, |n| {
                        n.clamp(1, MAX_CHANGED_PAGE as i64) as usize
                    }),
                })
            })
            .collect()
    }
}

/// One partition of a discovery answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedPartitionAnswer<'a> {
    name: &'a str,
    id: String,
    last_offset: i64,
    log_start: u64,
    last_write_at: String,
}

impl<'a> From<&'a ChangedPartition> for ChangedPartitionAnswer<'a> {
    fn from(p: &'a ChangedPartition) -> Self {
        ChangedPartitionAnswer {
            name: &p.name,
            id: p.id.to_string(),
            last_offset: p.last_offset,
            log_start: p.log_start,
            last_write_at: format_iso(p.last_write_at),
        }
    }
}

/// One queue of a discovery answer: a page (`next` always present, `null` at the end
/// of the pass) or an error marker.
#[derive(Serialize)]
#[serde(untagged)]
pub enum ChangedEntryAnswer<'a> {
    /// A page.
    Page {
        /// The queue.
        queue: &'a str,
        /// The partitions.
        partitions: Vec<ChangedPartitionAnswer<'a>>,
        /// The next page's cursor.
        next: Option<&'a str>,
    },
    /// An error marker.
    Error {
        /// The queue.
        queue: &'a str,
        /// `UNKNOWN_TOPIC_OR_PARTITION` or `BAD_CURSOR`.
        error: &'static str,
    },
}

/// A discovery answer.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ChangedAnswerBody<'a> {
    entries: Vec<ChangedEntryAnswer<'a>>,
    safe_time: String,
    /// Always `false`: this broker's `safeTime` is exact.
    safe_time_degraded: bool,
}

/// Renders a discovery call's outcome.
pub fn changed_answer(c: &browse::Changed) -> ChangedAnswerBody<'_> {
    let entries = c
        .answers
        .iter()
        .map(|(queue, a)| match a {
            ChangedAnswer::UnknownQueue => ChangedEntryAnswer::Error {
                queue,
                error: "UNKNOWN_TOPIC_OR_PARTITION",
            },
            ChangedAnswer::BadCursor => ChangedEntryAnswer::Error {
                queue,
                error: "BAD_CURSOR",
            },
            ChangedAnswer::Page { partitions, next } => ChangedEntryAnswer::Page {
                queue,
                partitions: partitions.iter().map(Into::into).collect(),
                next: next.as_deref(),
            },
        })
        .collect();
    ChangedAnswerBody {
        entries,
        safe_time: format_iso(c.safe_time),
        safe_time_degraded: false,
    }
}

/// A message status in the listing's words.
pub fn status_str(s: MessageStatus) -> &'static str {
    match s {
        MessageStatus::Pending => "pending",
        MessageStatus::Processing => "processing",
        MessageStatus::Completed => "completed",
        MessageStatus::DeadLetter => "dead_letter",
    }
}

/// A `status` filter of the listing; `None` when it names no status.
pub fn parse_status(s: &str) -> Option<MessageStatus> {
    Some(match s {
        "pending" => MessageStatus::Pending,
        "processing" => MessageStatus::Processing,
        "completed" => MessageStatus::Completed,
        "dead_letter" => MessageStatus::DeadLetter,
        _ => return None,
    })
}

/// A stable 64-bit FNV-1a hash of a transaction id, as 16 hex digits: the listing's
/// `txnHash` (Queen 2 rows are keyed by such a hash; this broker also sends the id).
pub fn txn_hash(txn: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in txn.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// Where a listed message sits in the log.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SegmentAnswer {
    partition_id: String,
    offset: u64,
}

/// One row of `GET /api/v1/messages`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageRow<'a> {
    id: &'a str,
    transaction_id: &'a str,
    txn_hash: String,
    partition_id: String,
    queue_path: String,
    queue: &'a str,
    partition: &'a str,
    namespace: Option<&'a str>,
    task: Option<&'a str>,
    status: &'static str,
    offset: u64,
    segment: SegmentAnswer,
    trace_id: Option<&'a str>,
    producer_sub: Option<&'a str>,
    created_at: String,
    lease_expires_at: Option<String>,
}

impl<'a> From<&'a ListedMessage> for MessageRow<'a> {
    fn from(m: &'a ListedMessage) -> Self {
        MessageRow {
            id: &m.message.id,
            transaction_id: &m.message.txn,
            txn_hash: txn_hash(&m.message.txn),
            partition_id: m.partition_id.to_string(),
            queue_path: format!("{}/{}", m.queue, m.partition),
            queue: &m.queue,
            partition: &m.partition,
            namespace: m.namespace.as_deref(),
            task: m.task.as_deref(),
            status: status_str(m.status),
            offset: m.offset,
            segment: SegmentAnswer {
                partition_id: m.partition_id.to_string(),
                offset: m.offset,
            },
            trace_id: m.message.trace.as_deref(),
            producer_sub: m.message.producer_sub.as_deref(),
            created_at: format_iso(m.message.created_at),
            lease_expires_at: m.lease_expires_at.map(format_iso),
        }
    }
}

/// The listing's `mode` block: which kinds of consumer read the listed partitions.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ModeAnswer {
    has_queue_mode: bool,
    bus_groups_count: usize,
    /// `queue`, `bus` (named groups only), `hybrid` (both) or `none`.
    #[serde(rename = "type")]
    kind: &'static str,
}

impl From<ConsumerMode> for ModeAnswer {
    fn from(m: ConsumerMode) -> Self {
        ModeAnswer {
            has_queue_mode: m.has_queue_mode,
            bus_groups_count: m.bus_groups,
            kind: match (m.has_queue_mode, m.bus_groups > 0) {
                (true, false) => "queue",
                (false, true) => "bus",
                (true, true) => "hybrid",
                (false, false) => "none",
            },
        }
    }
}

/// `GET /api/v1/messages`: the page, `total` (the page's length, as the official
/// client's test says the route adds it), the page bounds, and the `mode` block.
#[derive(Serialize)]
pub struct MessageListAnswer<'a> {
    /// The page, newest first.
    pub messages: Vec<MessageRow<'a>>,
    /// The page's length.
    pub total: usize,
    /// The page size asked.
    pub limit: usize,
    /// The matches skipped.
    pub offset: usize,
    /// Which kinds of consumer read the listed partitions.
    pub mode: ModeAnswer,
}

/// The answer to deleting or replaying a dead letter by hand.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandledAnswer<'a> {
    /// Always `true`: a message with no dead letter is a 404.
    pub success: bool,
    /// The message's partition id, as addressed.
    pub partition_id: &'a str,
    /// Its transaction id, as addressed.
    pub transaction_id: &'a str,
    /// Its queue.
    pub queue: &'a str,
    /// Its partition's name.
    pub partition: &'a str,
    /// Dead-letter rows removed (one per group that dead-lettered it).
    pub dead_letters_removed: usize,
    /// A replay's new message id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message_id: Option<&'a str>,
    /// A replay's offset.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// What was done, for a person.
    pub message: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn since_reads_the_spellings_the_protocol_allows() {
        let t = parse_iso("2026-09-04T10:00:00Z").unwrap();
        for s in [
            "2026-09-04T10:00:00Z",
            "2026-09-04T10:00:00.000000Z",
            "2026-09-04T10:00:00",
            "2026-09-04T10:00",
            "2026-09-04T12:00:00+02:00",
            "2026-09-04T12:00+02:00",
        ] {
            assert_eq!(parse_since(s), Some(t), "{s}");
        }
        assert_eq!(parse_since("2026-09-04"), parse_iso("2026-09-04T00:00:00Z"));
        assert_eq!(parse_since("soon"), None);
        assert_eq!(parse_since(""), None);
    }

    #[test]
    fn the_txn_hash_is_stable() {
        assert_eq!(txn_hash(""), "cbf29ce484222325");
        assert_eq!(txn_hash("a"), "af63dc4c8601ec8c");
    }
}
