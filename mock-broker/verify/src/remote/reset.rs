//! What a check by URL resets before each schedule, and how: the broker is shared by
//! every schedule, so each starts by deleting what the worker (and its setup) wrote.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use hyper::Method;
use queen_sdk::{Client, MessageQuery, QUEUE_MODE};
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
    keys: &KnownKeys,
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
        clear_namespace(ns, upstream, keys).await?;
    }
    Ok(())
}

/// What a reset would delete that this check did not make, each named with what it
/// holds ("the queue receipts (3 messages)"): read once, before a check's first reset,
/// when nothing there can be the check's yet (it deletes what it made after its last
/// schedule, [`super::clean_up`]). Empty: the names are free, or hold nothing.
pub(super) async fn foreign(
    resets: &Resets,
    admin: &Client,
    upstream: &Upstream,
    keys: &KnownKeys,
) -> Result<Vec<String>, String> {
    // At most this many of each are read: enough to say "1000+" and be refused.
    const PAGE: u32 = 1000;
    let many = |n: usize, one: &str, more: &str| match n {
        1 => format!("1 {one}"),
        n if n >= PAGE as usize => format!("{n}+ {more}"),
        n => format!("{n} {more}"),
    };
    let mut found = Vec::new();
    for q in &resets.queues {
        let page = admin
            .messages(MessageQuery::queue(q.clone()).limit(PAGE))
            .await
            .map_err(|e| format!("listing the messages of {q}: {e}"))?;
        let n = page.messages.len();
        if n > 0 {
            found.push(format!(
                "the queue {q} ({})",
                many(n, "message", "messages")
            ));
        }
    }
    for q in &resets.timer_queues {
        let page = admin
            .timers()
            .list(q, None, PAGE)
            .await
            .map_err(|e| format!("listing the timers of {q}: {e}"))?;
        if !page.rows.is_empty() {
            let n = page.rows.len();
            found.push(format!(
                "the timer queue {q} ({})",
                many(n, "pending timer", "pending timers")
            ));
        }
    }
    for g in &resets.groups {
        let queues: Vec<String> = match admin.consumer_group(g).await {
            Ok(d) => d
                .queues
                .into_iter()
                .filter(|(_, parts)| !parts.is_empty())
                .map(|(q, _)| q)
                .collect(),
            Err(e) if e.is_not_found() => Vec::new(),
            Err(e) => return Err(format!("reading the consumer group {g}: {e}")),
        };
        if !queues.is_empty() {
            found.push(format!(
                "the consumer group {g} (its cursors on {})",
                queues.join(", ")
            ));
        }
    }
    for ns in &resets.kv_namespaces {
        let n = kv_rows(ns, admin, upstream, keys, PAGE).await?;
        if n > 0 {
            found.push(format!(
                "the KV namespace {ns} ({})",
                many(n, "row", "rows")
            ));
        }
    }
    Ok(found)
}

/// How many rows `ns` holds (up to `limit`): listed where the broker lists a namespace,
/// else those of the keys the check knows of that are there.
async fn kv_rows(
    ns: &str,
    admin: &Client,
    upstream: &Upstream,
    keys: &KnownKeys,
    limit: u32,
) -> Result<usize, String> {
    if !keys.unlisted.load(Ordering::SeqCst) {
        let read = json!({"operations": [
            {"op": "getPrefix", "ns": ns, "prefix": "", "keysOnly": true, "limit": limit}
        ]});
        match upstream.json(Method::POST, "/api/v1/kv", Some(&read)).await {
            Ok(a) => return Ok(a["results"][0]["rows"].as_array().map_or(0, Vec::len)),
            Err(e) if e.contains("kv_prefix_required") => {
                keys.unlisted.store(true, Ordering::SeqCst);
            }
            Err(e) => return Err(format!("listing the KV rows of {ns}: {e}")),
        }
    }
    let mut n = 0;
    for key in keys.of_namespace(ns) {
        let row = admin
            .kv()
            .get::<Value>(ns, &key)
            .await
            .map_err(|e| format!("reading the KV row {ns}/{key}: {e}"))?;
        n += usize::from(row.is_some());
    }
    Ok(n)
}

/// The KV keys this process knows were (or may have been) written on one broker, by
/// namespace: what a reset deletes on a broker that cannot list a namespace (Queen 2's
/// engine refuses `getPrefix` with an empty prefix: 400 `kv_prefix_required`). Filled
/// from the keys the worker's replicas write through the fault proxy, the setup's
/// `kv_row`s, the keys the invariants read and [`Resources::kv_keys`].
///
/// One per broker URL for the whole process ([`KnownKeys::of`]), not per check: a
/// program that runs several checks one after the other against the same broker (as
/// `verify-worker --url` does) leaves the keys of one in the namespaces of the next.
#[derive(Debug, Default)]
pub(crate) struct KnownKeys {
    keys: Mutex<BTreeMap<String, BTreeSet<String>>>,
    /// Whether the broker refused to list a namespace by an empty prefix (asked again
    /// until it does: one refusal settles it for the process).
    unlisted: AtomicBool,
    /// Whether the one line saying that the broker cannot list was printed.
    told: AtomicBool,
}

impl KnownKeys {
    /// The keys known for the broker at `url`, shared by every check of this process.
    pub(crate) fn of(url: &str) -> Arc<KnownKeys> {
        static BY_URL: OnceLock<Mutex<HashMap<String, Arc<KnownKeys>>>> = OnceLock::new();
        let mut map = BY_URL
            .get_or_init(Mutex::default)
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        Arc::clone(
            map.entry(url.trim_end_matches('/').to_string())
                .or_default(),
        )
    }

    /// Notes that `ns`/`key` may hold a row written by the check.
    pub(crate) fn add(&self, ns: &str, key: &str) {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(ns.to_string())
            .or_default()
            .insert(key.to_string());
    }

    fn of_namespace(&self, ns: &str) -> Vec<String> {
        self.keys
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(ns)
            .map(|k| k.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Notes the keys a replica's call writes: the KV operations of a transaction
    /// (`kv`) or of `POST /api/v1/kv` (`operations`, or a bare array), and the key of
    /// a `PUT /api/v1/kv/{ns}/{key}`. Reads are not noted; a body that is not JSON
    /// writes nothing the broker would keep.
    pub(crate) fn note_call(&self, method: &Method, path: &str, body: &[u8]) {
        if let Some(rest) = path.strip_prefix("/api/v1/kv/") {
            if *method == Method::PUT
                && let Some((ns, key)) = rest.split_once('/')
            {
                self.add(&percent_decode(ns), &percent_decode(key));
            }
            return;
        }
        if *method != Method::POST || !(path == "/api/v1/kv" || path == "/api/v1/transaction") {
            return;
        }
        let Ok(v) = serde_json::from_slice::<Value>(body) else {
            return;
        };
        let ops = match &v {
            Value::Array(ops) => ops.iter().collect::<Vec<_>>(),
            Value::Object(o) => ["kv", "operations"]
                .iter()
                .filter_map(|k| o.get(*k).and_then(Value::as_array))
                .flatten()
                .collect(),
            _ => Vec::new(),
        };
        for op in ops {
            let reads = matches!(
                op["op"].as_str(),
                Some("get" | "getMany" | "getPrefix" | "check")
            );
            if let (false, Some(ns), Some(key)) = (reads, op["ns"].as_str(), op["key"].as_str()) {
                self.add(ns, key);
            }
        }
    }
}

/// A path segment with its `%XX` escapes decoded (the SDK escapes KV keys in paths).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2]))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Deletes the rows of a KV namespace: every row, found by a `getPrefix` with an empty
/// prefix (the SDK has no prefix read, so as plain HTTP), where the broker lists one;
/// where it refuses that (`kv_prefix_required`), the keys the check knows of
/// ([`KnownKeys`]), said once.
async fn clear_namespace(ns: &str, upstream: &Upstream, keys: &KnownKeys) -> Result<(), String> {
    if !keys.unlisted.load(Ordering::SeqCst) {
        loop {
            let read = json!({"operations": [
                {"op": "getPrefix", "ns": ns, "prefix": "", "keysOnly": true, "limit": 1000}
            ]});
            let answer = match upstream.json(Method::POST, "/api/v1/kv", Some(&read)).await {
                Ok(a) => a,
                Err(e) if e.contains("kv_prefix_required") => {
                    keys.unlisted.store(true, Ordering::SeqCst);
                    break;
                }
                Err(e) => return Err(format!("listing the KV rows of {ns}: {e}")),
            };
            let listed: Vec<String> = answer["results"][0]["rows"]
                .as_array()
                .map(|rows| {
                    rows.iter()
                        .filter_map(|r| r["key"].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            if listed.is_empty() {
                return Ok(());
            }
            delete_keys(ns, &listed, upstream).await?;
        }
    }
    if !keys.told.swap(true, Ordering::SeqCst) {
        eprintln!(
            "queen-verify: against {}: the broker lists no KV namespace (a getPrefix with an \
             empty prefix answered 400 kv_prefix_required): before each schedule the reset \
             deletes only the keys it knows of in the namespaces it resets: those the worker \
             wrote through the fault proxy, the setup's kv_row rows, those the invariants \
             read, and those named with Resources::kv_keys (name there what an earlier \
             process may have left)",
            upstream.base()
        );
    }
    delete_keys(ns, &keys.of_namespace(ns), upstream).await
}

/// Deletes `keys` of `ns`, at most 256 operations a call (a key not there is no error).
async fn delete_keys(ns: &str, keys: &[String], upstream: &Upstream) -> Result<(), String> {
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replica_call_notes_the_keys_it_writes_and_not_those_it_reads() {
        let k = KnownKeys::default();
        k.note_call(
            &Method::POST,
            "/api/v1/transaction",
            br#"{"operations": [], "kv": [
                {"op": "put", "ns": "orders", "key": "o-1"},
                {"op": "get", "ns": "orders", "key": "o-2"},
                {"op": "putIfAbsent", "ns": "paid", "key": "o-1-paid"}]}"#,
        );
        k.note_call(
            &Method::POST,
            "/api/v1/kv",
            br#"{"operations": [{"op": "incr", "ns": "revenue", "key": "c-1"}]}"#,
        );
        k.note_call(&Method::PUT, "/api/v1/kv/stock/sku%2F1", b"{}");
        k.note_call(&Method::GET, "/api/v1/kv/stock/sku-2", b"");
        k.note_call(
            &Method::POST,
            "/api/v1/push",
            br#"{"items": [{"ns": "x", "key": "y"}]}"#,
        );
        assert_eq!(k.of_namespace("orders"), ["o-1"]);
        assert_eq!(k.of_namespace("paid"), ["o-1-paid"]);
        assert_eq!(k.of_namespace("revenue"), ["c-1"]);
        assert_eq!(k.of_namespace("stock"), ["sku/1"]);
        assert!(k.of_namespace("x").is_empty());
    }

    #[test]
    fn the_known_keys_are_one_set_per_broker_url() {
        let a = KnownKeys::of("http://127.0.0.1:1/");
        a.add("ns", "k");
        assert_eq!(
            KnownKeys::of("http://127.0.0.1:1").of_namespace("ns"),
            ["k"]
        );
        assert!(
            KnownKeys::of("http://127.0.0.1:2")
                .of_namespace("ns")
                .is_empty()
        );
    }
}
