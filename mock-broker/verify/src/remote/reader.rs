//! The invariants of a check by URL: a [`State`] backend that reads the broker's public
//! API from sync invariant code, and their evaluation on a blocking thread, with the
//! probe that finds, before the worker starts, an invariant that cannot run by URL.
//!
//! Two reads have a second way for a broker that does not answer the first: Queen 2's
//! engine (`queen-engine` 1.3) lists a message with no `offset` but with its place in
//! the partition's log (`segment: {seq, frameIdx}`, the segment's base offset and the
//! frame's index in it: the offset is their sum), gives no per-partition `cursor` in a
//! group's detail, and says per message whether each group `consumed` it (its cursor
//! passed it). The messages are then read as plain JSON and the group's cursor is the
//! first offset it has not consumed. A broker that answers neither way is an
//! [`StateError::Unreadable`] naming what is missing, never a guess.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use hyper::Method;
#[cfg(feature = "in-process")]
use queen_mock_broker::harness::Inspector;
use queen_sdk::{Client, MessageQuery};
use serde_json::Value;
use tokio::runtime::Handle;

use super::proxy::Upstream;
use super::reset::{KnownKeys, Resets};
use crate::invariant::{
    Backend, GroupCursor, InProcessOnly, Invariant, KvEntry, State, StateError,
};
use crate::report::{SETUP_FAILED, Violation};
use crate::run::RunSpec;
use crate::stored::{StoredMessage, StoredTimer, parse_iso};

/// Reads a broker's state through its public API, from sync invariant code: each read
/// blocks this (blocking-pool) thread on the run's runtime.
pub(super) struct RemoteReader {
    pub(super) handle: Handle,
    pub(super) client: Client,
    /// Plain HTTP to the broker, for the reads the SDK's types cannot carry.
    pub(super) upstream: Upstream,
    pub(super) resets: Resets,
    /// The KV keys an invariant reads are noted for the next reset.
    pub(super) keys: Arc<KnownKeys>,
    /// What an invariant read that the check does not reset (see [`Resources`]).
    pub(super) unreset: Mutex<BTreeSet<String>>,
}

impl RemoteReader {
    fn note(&self, reset: bool, what: String) {
        if !reset {
            self.unreset
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(what);
        }
    }

    fn take_unreset(&self) -> BTreeSet<String> {
        std::mem::take(&mut *self.unreset.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn api(what: &str) -> impl FnOnce(queen_sdk::Error) -> StateError + '_ {
    move |source| StateError::Api {
        what: what.to_string(),
        source,
    }
}

impl Backend for RemoteReader {
    #[cfg(feature = "in-process")]
    fn inspector(&self) -> Option<Inspector<'_>> {
        None
    }

    fn messages(&self, queue: &str, partition: &str) -> Result<Vec<StoredMessage>, StateError> {
        self.note(
            self.resets.queues.contains(queue),
            format!("queue {queue:?} (add it with Resources::queues)"),
        );
        let what = format!("the messages of {queue}/{partition}");
        self.handle.block_on(async {
            const PAGE: u32 = 1000;
            let mut rows = Vec::new();
            loop {
                let page = self
                    .client
                    .messages(
                        MessageQuery::queue(queue)
                            .partition(partition)
                            .limit(PAGE)
                            .offset(rows.len() as u64),
                    )
                    .await
                    .map_err(api(&what))?;
                let n = page.messages.len();
                rows.extend(page.messages);
                if n < PAGE as usize {
                    break;
                }
            }
            if rows.iter().any(|r| r.offset.is_none()) {
                // No offsets in the listing: read the log positions as plain JSON.
                let listed = raw_messages(&self.upstream, queue, partition, None)
                    .await
                    .map_err(|why| StateError::Unreadable {
                        what: what.clone(),
                        why,
                    })?;
                return Ok(listed.into_iter().map(|m| m.message).collect());
            }
            // The listing has no payloads: each message's detail has it.
            let mut out = Vec::with_capacity(rows.len());
            for r in rows.into_iter().filter(|r| r.partition == partition) {
                let (Some(pid), Some(txn)) =
                    (r.partition_id.as_deref(), r.transaction_id.as_deref())
                else {
                    return Err(StateError::Unreadable {
                        what,
                        why: format!(
                            "the listing gives message {} no partitionId or transactionId",
                            r.id
                        ),
                    });
                };
                let d = self
                    .client
                    .message::<Value>(pid, txn)
                    .await
                    .map_err(api(&what))?;
                let Some(offset) = d.offset.or(r.offset) else {
                    return Err(StateError::Unreadable {
                        what,
                        why: format!("the broker gives message {} no offset", d.id),
                    });
                };
                out.push(StoredMessage::new(
                    offset,
                    d.id,
                    d.transaction_id,
                    d.data,
                    d.trace_id,
                    d.created_at.as_deref().and_then(parse_iso).unwrap_or(0),
                ));
            }
            out.sort_by_key(|m| m.offset);
            Ok(out)
        })
    }

    fn cursor(
        &self,
        queue: &str,
        partition: &str,
        group: &str,
    ) -> Result<Option<GroupCursor>, StateError> {
        self.note(
            self.resets.queues.contains(queue),
            format!("queue {queue:?} (add it with Resources::queues)"),
        );
        self.handle.block_on(progress(
            &self.client,
            &self.upstream,
            queue,
            partition,
            group,
        ))
    }

    fn kv_row(&self, ns: &str, key: &str) -> Result<Option<KvEntry>, StateError> {
        self.note(
            self.resets.kv_namespaces.contains(ns),
            format!("KV namespace {ns:?} (add it with Resources::kv_namespaces)"),
        );
        self.keys.add(ns, key);
        let what = format!("the KV row {ns}/{key}");
        let row = self
            .handle
            .block_on(self.client.kv().get::<Value>(ns, key))
            .map_err(api(&what))?;
        Ok(row.map(|r| KvEntry {
            value: r.value,
            version: r.version,
            expires_at: r.expires_at.as_deref().and_then(parse_iso),
        }))
    }

    fn timers(&self, queue: &str) -> Result<Vec<StoredTimer>, StateError> {
        self.note(
            self.resets.timer_queues.contains(queue),
            format!("the timers of {queue:?} (add it with Resources::timer_queues)"),
        );
        let what = format!("the timers of {queue}");
        self.handle.block_on(async {
            let timers = self.client.timers();
            let mut out = Vec::new();
            let mut after: Option<String> = None;
            loop {
                let page = timers
                    .list(queue, after.as_deref(), 1000)
                    .await
                    .map_err(api(&what))?;
                out.extend(page.rows.into_iter().map(|t| {
                    StoredTimer::new(
                        t.timer_key,
                        t.txn.unwrap_or_default(),
                        t.message_id.unwrap_or_default(),
                        parse_iso(&t.deliver_at).unwrap_or(0),
                    )
                }));
                match page.next_after {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
            Ok(out)
        })
    }

    fn now_micros(&self) -> i64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64)
    }
}

/// A message of a partition read as plain JSON, with whether the asked group consumed it.
struct RawMessage {
    message: StoredMessage,
    /// `Some` when a group was asked for: whether its cursor passed this message.
    consumed: Option<bool>,
}

/// `s` as a URL query value: unreserved characters as they are, the rest `%XX`.
fn query_value(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A listed message's offset: its own `offset`, or its segment's base offset plus its
/// frame index (`segment: {seq, frameIdx}`, Queen 2's engine).
fn offset_of(row: &Value) -> Option<u64> {
    row["offset"].as_u64().or_else(|| {
        let seg = &row["segment"];
        Some(seg["seq"].as_u64()? + seg["frameIdx"].as_u64()?)
    })
}

/// The messages of `queue`/`partition` in offset order, read as plain JSON (the
/// listing, then each message's detail for its payload and, when `group` is given,
/// whether that group consumed it).
async fn raw_messages(
    upstream: &Upstream,
    queue: &str,
    partition: &str,
    group: Option<&str>,
) -> Result<Vec<RawMessage>, String> {
    const PAGE: usize = 1000;
    let mut rows: Vec<Value> = Vec::new();
    loop {
        let path = format!(
            "/api/v1/messages?queue={}&partition={}&limit={PAGE}&offset={}",
            query_value(queue),
            query_value(partition),
            rows.len()
        );
        let page = upstream.json(Method::GET, &path, None).await?;
        let Some(listed) = page["messages"].as_array() else {
            return Err(format!("GET {path} answered no messages array: {page}"));
        };
        let n = listed.len();
        rows.extend(listed.iter().cloned());
        if n < PAGE {
            break;
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    for r in rows
        .iter()
        .filter(|r| r["partition"].as_str() == Some(partition))
    {
        let id = r["id"].as_str().unwrap_or_default().to_string();
        let Some(offset) = offset_of(r) else {
            return Err(format!(
                "the broker gives message {id} neither an offset nor a log position \
                 (segment.seq + segment.frameIdx)"
            ));
        };
        let (Some(pid), Some(txn)) = (r["partitionId"].as_str(), r["transactionId"].as_str())
        else {
            return Err(format!(
                "the listing gives message {id} no partitionId or transactionId"
            ));
        };
        let path = format!("/api/v1/messages/{}/{}", query_value(pid), query_value(txn));
        let d = upstream.json(Method::GET, &path, None).await?;
        let data = match (&d["data"], &d["payload"]) {
            (Value::Null, p) => p.clone(),
            (v, _) => v.clone(),
        };
        let consumed = match group {
            None => None,
            Some(g) => Some(consumed_by(&d, g).map_err(|why| {
                format!("message {txn} of {queue}/{partition} (GET {path}): {why}")
            })?),
        };
        out.push(RawMessage {
            message: StoredMessage::new(
                offset,
                id,
                txn.to_string(),
                data,
                d["traceId"].as_str().map(str::to_string),
                d["createdAt"].as_str().and_then(parse_iso).unwrap_or(0),
            ),
            consumed,
        });
    }
    out.sort_by_key(|m| m.message.offset);
    Ok(out)
}

/// Whether `group` consumed the message of detail `d`: its entry's `consumed` flag, or
/// its `cursor` past the message's offset. A group with no entry has not read it.
fn consumed_by(d: &Value, group: &str) -> Result<bool, String> {
    let entry = d["consumerGroups"].as_array().and_then(|gs| {
        gs.iter()
            .find(|g| g["name"].as_str() == Some(group) || g["group"].as_str() == Some(group))
    });
    let Some(entry) = entry else {
        return Ok(false);
    };
    if let Some(c) = entry["consumed"].as_bool() {
        return Ok(c);
    }
    match (entry["cursor"].as_u64(), d["offset"].as_u64()) {
        (Some(cursor), Some(offset)) => Ok(offset < cursor),
        _ => Err(format!(
            "the broker's detail gives group {group} neither a consumed flag nor a cursor"
        )),
    }
}

/// Group `group`'s progress on `queue`/`partition`: the `cursor` of the group's detail
/// where the broker gives one (this project's broker), else the first offset whose
/// message the group has not consumed, from each message's detail (Queen 2's engine).
/// `None` when the group has never read the partition.
pub(super) async fn progress(
    client: &Client,
    upstream: &Upstream,
    queue: &str,
    partition: &str,
    group: &str,
) -> Result<Option<GroupCursor>, StateError> {
    let what = format!("group {group}'s cursor on {queue}/{partition}");
    let detail = client.consumer_group(group).await.map_err(api(&what))?;
    let Some(p) = detail
        .partitions(queue)
        .iter()
        .find(|p| p.partition == partition)
        .cloned()
    else {
        return Ok(None);
    };
    if let Some(cursor) = p.cursor {
        return Ok(Some(GroupCursor {
            next_offset: cursor,
            lease_held: p.lease_active,
            lease_id: None,
        }));
    }
    let messages = raw_messages(upstream, queue, partition, Some(group))
        .await
        .map_err(|why| StateError::Unreadable {
            what: what.clone(),
            why: format!(
                "the group's detail (GET /api/v1/consumer-groups/{group}) gives no cursor, \
                 and the messages cannot tell it: {why}"
            ),
        })?;
    let next_offset = messages
        .iter()
        .find(|m| m.consumed == Some(false))
        .map_or_else(
            || messages.last().map_or(0, |m| m.message.offset + 1),
            |m| m.message.offset,
        );
    Ok(Some(GroupCursor {
        next_offset,
        lease_held: p.lease_active,
        lease_id: None,
    }))
}

/// Evaluates the invariants in order; the first that breaks, or that cannot run
/// against a URL, is the violation.
pub(super) fn evaluate(
    invariants: &[Invariant],
    state: &State<'_>,
    url: &str,
) -> Option<Violation> {
    for inv in invariants {
        match catch_unwind(AssertUnwindSafe(|| inv.check(state))) {
            Ok(Ok(())) => {}
            Ok(Err(detail)) => {
                return Some(Violation {
                    invariant: inv.name().to_string(),
                    detail,
                });
            }
            Err(p) if p.is::<InProcessOnly>() => return Some(needs_inspect(inv, url)),
            Err(p) => {
                let why = p
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| p.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic".into());
                return Some(Violation {
                    invariant: inv.name().to_string(),
                    detail: format!("the invariant panicked: {why}"),
                });
            }
        }
    }
    None
}

/// The run could not be carried out: an invariant reads an in-process broker's storage.
/// Reported as a setup failure, so that it is reported at once and not shrunk (every
/// schedule would fail the same way).
fn needs_inspect(inv: &Invariant, url: &str) -> Violation {
    Violation {
        invariant: SETUP_FAILED.into(),
        detail: format!(
            "could not run invariant {:?} against {url}: it calls State::inspect(), which \
             reads an in-process broker's storage; against a broker URL read with \
             State::messages, State::cursor, State::kv_row, State::timers and \
             State::dead_letters",
            inv.name()
        ),
    }
}

/// Before the reset, each invariant once over the state there (its verdict
/// does not matter): one that needs an in-process broker, or reads what the check does
/// not reset, makes the run one that cannot be carried out.
pub(super) fn probe(
    invariants: &[Invariant],
    reader: &RemoteReader,
    spec: &RunSpec,
    url: &str,
) -> Option<Violation> {
    let state = State {
        broker: reader,
        inputs: &spec.inputs,
        group: &spec.group,
        dead: &[],
    };
    for inv in invariants {
        match catch_unwind(AssertUnwindSafe(|| inv.check(&state))) {
            Err(p) if p.is::<InProcessOnly>() => return Some(needs_inspect(inv, url)),
            // Its verdict on the state before the run, or a panic over it, says nothing.
            _ => {}
        }
        let unreset = reader.take_unreset();
        if !unreset.is_empty() {
            return Some(Violation {
                invariant: SETUP_FAILED.into(),
                detail: format!(
                    "invariant {:?} reads {}, which the check does not reset between \
                     schedules against {url}: each schedule would read the one before's \
                     state as its own",
                    inv.name(),
                    unreset.into_iter().collect::<Vec<_>>().join(", ")
                ),
            });
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_offset_is_the_brokers_own_or_its_log_position() {
        assert_eq!(offset_of(&json!({"offset": 3})), Some(3));
        assert_eq!(
            offset_of(&json!({"segment": {"seq": 10, "frameIdx": 2}})),
            Some(12)
        );
        assert_eq!(offset_of(&json!({"id": "m"})), None);
    }

    #[test]
    fn consumed_is_the_groups_flag_or_its_cursor_past_the_message() {
        let d = json!({"offset": 4, "consumerGroups": [
            {"name": "billing", "consumed": true},
            {"group": "audit", "consumed": false},
            {"name": "ahead", "cursor": 5},
            {"name": "behind", "cursor": 4},
            {"name": "mute"}]});
        assert_eq!(consumed_by(&d, "billing"), Ok(true));
        assert_eq!(consumed_by(&d, "audit"), Ok(false));
        assert_eq!(consumed_by(&d, "ahead"), Ok(true));
        assert_eq!(consumed_by(&d, "behind"), Ok(false));
        assert!(consumed_by(&d, "mute").is_err());
        assert_eq!(consumed_by(&d, "never-read"), Ok(false));
    }
}
