//! What a check by URL resets before each schedule, and how: the broker is shared by
//! every schedule, so each starts by deleting what the worker (and its setup) wrote.

use std::collections::BTreeSet;

use hyper::Method;
use queen_sdk::{Client, QUEUE_MODE};
use serde_json::{Value, json};

use super::Resources;
use super::proxy::Upstream;
use crate::run::RunSpec;

/// What one run resets: the check's resources with the inputs' queues and its group.
pub(super) struct Resets {
    pub(super) queues: BTreeSet<String>,
    pub(super) kv_namespaces: BTreeSet<String>,
    pub(super) timer_queues: BTreeSet<String>,
    pub(super) groups: BTreeSet<String>,
}

impl Resets {
    pub(super) fn of(spec: &RunSpec, r: &Resources) -> Resets {
        let mut queues: BTreeSet<String> = r.queues.iter().cloned().collect();
        queues.extend(spec.inputs.iter().map(|i| i.queue.clone()));
        let mut groups: BTreeSet<String> = r.groups.iter().cloned().collect();
        groups.insert(spec.group.clone());
        // The competing consumers' cursors go with their queues; the group itself is
        // the broker's, not ours to delete.
        groups.remove(QUEUE_MODE);
        Resets {
            queues,
            kv_namespaces: r.kv_namespaces.iter().cloned().collect(),
            timer_queues: r.timer_queues.iter().cloned().collect(),
            groups,
        }
    }
}

/// Empties the broker of what the check resets.
pub(super) async fn reset(
    resets: &Resets,
    admin: &Client,
    upstream: &Upstream,
) -> Result<(), String> {
    // Timers first: one firing into a queue just deleted would create it again.
    for q in &resets.timer_queues {
        let timers = admin.timers();
        loop {
            let page = timers
                .list(q, None, 1000)
                .await
                .map_err(|e| format!("listing the timers of {q}: {e}"))?;
            if page.rows.is_empty() {
                break;
            }
            for t in &page.rows {
                timers
                    .cancel(q, &t.timer_key)
                    .await
                    .map_err(|e| format!("cancelling the timer {q}/{}: {e}", t.timer_key))?;
            }
        }
    }
    for q in &resets.queues {
        admin
            .delete_queue(q)
            .await
            .map_err(|e| format!("deleting the queue {q}: {e}"))?;
    }
    for g in &resets.groups {
        match admin.delete_group(g).await {
            Ok(_) => {}
            // A group that never read anything is not there to delete.
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(format!("deleting the consumer group {g}: {e}")),
        }
    }
    for ns in &resets.kv_namespaces {
        clear_namespace(ns, upstream).await?;
    }
    Ok(())
}

/// Deletes every row of a KV namespace: the SDK has no prefix read, so a `getPrefix`
/// with an empty prefix and then `delete`s, as plain HTTP.
async fn clear_namespace(ns: &str, upstream: &Upstream) -> Result<(), String> {
    loop {
        let read = json!({"operations": [
            {"op": "getPrefix", "ns": ns, "prefix": "", "keysOnly": true, "limit": 1000}
        ]});
        let answer = upstream
            .json(Method::POST, "/api/v1/kv", Some(&read))
            .await
            .map_err(|e| format!("listing the KV rows of {ns}: {e}"))?;
        let keys: Vec<String> = answer["results"][0]["rows"]
            .as_array()
            .map(|rows| {
                rows.iter()
                    .filter_map(|r| r["key"].as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        if keys.is_empty() {
            return Ok(());
        }
        // At most 256 operations a call.
        for chunk in keys.chunks(256) {
            let ops: Vec<Value> = chunk
                .iter()
                .map(|k| json!({"op": "delete", "ns": ns, "key": k}))
                .collect();
            upstream
                .json(
                    Method::POST,
                    "/api/v1/kv",
                    Some(&json!({"operations": ops})),
                )
                .await
                .map_err(|e| format!("deleting the KV rows of {ns}: {e}"))?;
        }
    }
}
