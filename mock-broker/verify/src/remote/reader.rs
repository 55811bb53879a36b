//! The invariants of a check by URL: a [`State`] backend that reads the broker's public
//! API from sync invariant code, and their evaluation on a blocking thread, with the
//! probe that finds, before the worker starts, an invariant that cannot run by URL.

use std::collections::BTreeSet;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use queen_mock_broker::clock::parse_iso;
use queen_mock_broker::harness::{InspectedMessage, InspectedTimer, Inspector};
use queen_sdk::{Client, MessageQuery};
use serde_json::Value;
use tokio::runtime::Handle;

use super::reset::Resets;
use crate::invariant::{
    Backend, GroupCursor, InProcessOnly, Invariant, KvEntry, State, StateError,
};
use crate::report::{SETUP_FAILED, Violation};
use crate::run::RunSpec;

/// Reads a broker's state through its public API, from sync invariant code: each read
/// blocks this (blocking-pool) thread on the run's runtime.
pub(super) struct RemoteReader {
    pub(super) handle: Handle,
    pub(super) client: Client,
    pub(super) resets: Resets,
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
    fn inspector(&self) -> Option<Inspector<'_>> {
        None
    }

    fn messages(&self, queue: &str, partition: &str) -> Result<Vec<InspectedMessage>, StateError> {
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
                out.push(InspectedMessage {
                    offset,
                    id: d.id,
                    transaction_id: d.transaction_id,
                    data: d.data,
                    trace_id: d.trace_id,
                    created_at: d.created_at.as_deref().and_then(parse_iso).unwrap_or(0),
                });
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
        let what = format!("group {group}'s cursor on {queue}/{partition}");
        let detail = self
            .handle
            .block_on(self.client.consumer_group(group))
            .map_err(api(&what))?;
        Ok(detail
            .partitions(queue)
            .iter()
            .find(|p| p.partition == partition)
            .map(|p| GroupCursor {
                next_offset: p.cursor.unwrap_or(0),
                lease_held: p.lease_active,
                lease_id: None,
            }))
    }

    fn kv_row(&self, ns: &str, key: &str) -> Result<Option<KvEntry>, StateError> {
        self.note(
            self.resets.kv_namespaces.contains(ns),
            format!("KV namespace {ns:?} (add it with Resources::kv_namespaces)"),
        );
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

    fn timers(&self, queue: &str) -> Result<Vec<InspectedTimer>, StateError> {
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
                out.extend(page.rows.into_iter().map(|t| InspectedTimer {
                    key: t.timer_key,
                    txn: t.txn.unwrap_or_default(),
                    message_id: t.message_id.unwrap_or_default(),
                    deliver_at: parse_iso(&t.deliver_at).unwrap_or(0),
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

/// Before the worker starts, each invariant once over the fresh state (its verdict
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
