//! Consumer progress as Queen 2 does it (`wire.md` section 4a, "ack as commit"): a
//! group's progress on a partition is one cursor; a `completed` ack commits it past the
//! message (earlier messages of the batch with it), a `failed` or `retry` item clamps it
//! for the rest of its call, `dlq` moves it past, acks below it are no-ops or refused,
//! an unknown `transactionId` is unresolved, a dead lease is refused. Subscriptions are
//! per group, not per partition; `partitions=N` drains several partitions under one
//! lease; a long poll wakes for a message on any partition, a new one too.
//!
//! The cases need [`Capability::Cursor`](crate::case::Capability::Cursor): an older
//! broker that completes message by message, or reads `new` per partition, lacks it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::core::{ack, ack_of, configure, msgs, pop_path, push_ids, txn_ids};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq, expect_status};

/// 4a, the first bullet.
const COMMIT: &str = "A `completed` ack of the message at offset k (inside the leased batch) commits the cursor to k+1: every earlier message of the batch is completed with it, even if never acked one by one; later messages stay outstanding under the lease. When the cursor reaches the end of the batch, the lease is released. (Acking only the last message of a batch completes the whole batch.)";
/// 4a, the second bullet.
const CLAMP: &str = "The items of one call (`/ack/batch`, or the acks of a transaction) apply in order. A `failed` or `retry` item at offset k clamps the cursor at k for the rest of that call: completions after it in the same call do not move the cursor past k. The lease is then released, so k and every message after it in the batch are delivered again at the next pop. `failed` counts an attempt for k (then `retryLimit`, then the DLQ); `retry` does not.";
/// 4a, the third bullet.
const DLQ: &str =
    "`dlq` dead-letters k now and moves the cursor past it, like `completed` for the cursor.";
/// 4a, the fourth bullet.
const BELOW: &str = "An ack below the cursor: `completed` answers `success: true, noop: true` (a repeat is harmless and says so); `failed`, `retry` or `dlq` answers `success: false` with an error that says the message is already committed (the broker cannot honour it any more).";
/// 4a, the fifth bullet.
const UNRESOLVED: &str = "An ack naming a `transactionId` that is not in the partition answers `success: false` with an error that says it is unresolved; the cursor does not move.";
/// 4a, the sixth bullet.
const FENCED: &str = "A fenced ack whose lease is not the partition's live lease for the group answers `success: false` with the error `invalid or expired lease` (in a transaction: `rejected_ack`, as `transaction.md` says).";
/// 4a, the last bullet.
const SUBSCRIPTION: &str = "Subscription: the first pop of a named group on a queue fixes its starting point for the whole queue, once. In `new` mode that is the time of that pop: a partition created later is read from its first message. `subscriptionFrom` gives the time explicitly.";

/// Pops `q` (any partition) as `group` in its default subscription mode, plus `extra`.
fn pop_any(q: &str, group: &str, extra: &str) -> String {
    format!("/api/v1/pop/queue/{q}?consumerGroup={group}&wait=false{extra}")
}

/// POST /api/v1/ack/batch of `acks` for `group`; answers the result elements.
async fn ack_batch(cx: &Ctx, group: &str, acks: Vec<Value>) -> Result<Vec<Value>, Failure> {
    let n = acks.len();
    let r = cx
        .post(
            "/api/v1/ack/batch",
            json!({"acknowledgments": acks, "consumerGroup": group}),
        )
        .await?;
    expect_status(&r, 200)?;
    let out = r.body.as_array().cloned().unwrap_or_default();
    expect(
        out.len() == n,
        format!("{n} ack results"),
        r.body.to_string(),
    )?;
    Ok(out)
}

/// The items of an `/ack/batch` for `msgs` with one status each, fenced by their lease.
fn batch_items(msgs: &[Value], statuses: &[&str]) -> Vec<Value> {
    msgs.iter()
        .zip(statuses)
        .map(|(m, s)| {
            json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                   "leaseId": m["leaseId"], "status": s})
        })
        .collect()
}

/// An ack of `m` with `status` and no lease (unfenced).
fn unfenced(m: &Value, status: &str) -> Value {
    let mut a = ack_of(m, status);
    if let Some(o) = a.as_object_mut() {
        o.remove("leaseId");
    }
    a
}

/// A transaction ack of `m` with `status`, fenced by its lease unless `fenced` is false.
fn txn_ack(m: &Value, status: &str, fenced: bool) -> Value {
    let mut a = ack_of(m, status);
    a["type"] = json!("ack");
    if !fenced && let Some(o) = a.as_object_mut() {
        o.remove("leaseId");
    }
    a
}

/// Pushes `ids` to `q`/`p` and pops `n` of them as a new group from the beginning.
async fn leased(cx: &Ctx, q: &str, g: &str, ids: &[&str], n: usize) -> Result<Vec<Value>, Failure> {
    push_ids(cx, q, "p", ids).await?;
    let m = msgs(&cx.pop(&pop_path(q, g, &format!("&batch={n}"))).await?);
    let want: Vec<&str> = ids.iter().take(n).copied().collect();
    expect_eq("the leased batch", json!(want), &json!(txn_ids(&m)))?;
    Ok(m)
}

/// The next pop of `q` as `g`: its `transactionId`s (empty when nothing).
async fn next_ids(cx: &Ctx, q: &str, g: &str) -> Result<Value, Failure> {
    Ok(json!(txn_ids(&msgs(
        &cx.pop(&pop_path(q, g, "&batch=100")).await?
    ))))
}

/// Fails unless an ack result succeeded with `noop`.
fn expect_ack(what: &str, r: &Value, noop: bool) -> Result<(), Failure> {
    expect(
        r["success"] == json!(true) && r["noop"] == json!(noop),
        format!("{what}: success: true, noop: {noop}"),
        format!("{what}: {r}"),
    )
}

/// Fails unless an ack result was refused with an error text containing `word`.
fn expect_refused(what: &str, r: &Value, word: &str) -> Result<(), Failure> {
    let err = r["error"].as_str().unwrap_or_default().to_lowercase();
    expect(
        r["success"] == json!(false) && err.contains(word),
        format!("{what}: success: false, an error that says {word:?}"),
        format!("{what}: {r}"),
    )
}

/// GET /api/v1/dlq?queue=q: the dead letters' `transactionId`s.
async fn dead(cx: &Ctx, q: &str) -> Result<Value, Failure> {
    let r = cx.get(&format!("/api/v1/dlq?queue={q}&limit=1000")).await?;
    expect_status(&r, 200)?;
    let m = r.body["messages"].as_array().cloned().unwrap_or_default();
    Ok(json!(txn_ids(&m)))
}

/// Fails unless the transaction answer is a commit.
fn expect_commit(what: &str, out: &Value) -> Result<(), Failure> {
    expect(
        out["success"] == json!(true),
        format!("{what}: a commit (success: true)"),
        format!("{what}: {out}"),
    )
}

/// Fails unless the transaction answer is a rollback with `rejected_ack`.
fn expect_rejected(what: &str, out: &Value) -> Result<(), Failure> {
    let r = &out["reason"];
    expect(
        out["success"] == json!(false)
            && (r == &json!("rejected_ack") || r == &json!("ack_rejected")),
        format!("{what}: a rollback with reason rejected_ack"),
        format!("{what}: {out}"),
    )
}

/// Pops `q` as `g` (default mode) up to `rounds` times, acking each batch, until `want`
/// ids were seen; answers the ids seen, sorted.
async fn drain(
    cx: &Ctx,
    q: &str,
    g: &str,
    extra: &str,
    want: usize,
    rounds: usize,
) -> Result<Vec<String>, Failure> {
    let mut seen = Vec::new();
    for _ in 0..rounds {
        let got = msgs(
            &cx.pop(&pop_any(q, g, &format!("&batch=100{extra}")))
                .await?,
        );
        // Each message acked in order: the rule under test is the subscription.
        for m in &got {
            ack(cx, ack_of(m, "completed")).await?;
        }
        seen.extend(
            got.iter()
                .map(|m| m["transactionId"].as_str().unwrap_or_default().to_string()),
        );
        if seen.len() >= want {
            break;
        }
    }
    seen.sort();
    Ok(seen)
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut all = commit();
    all.extend(clamp());
    all.extend(refusals());
    all.extend(in_transactions());
    all.extend(subscription());
    all.extend(pops());
    all
}

fn commit() -> Vec<Case> {
    vec![
        case!(
            "core.cursor.commit.earlier-completed",
            Must,
            COMMIT,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2", "m3"], 3).await?;
                let r = ack(&cx, ack_of(&m[1], "completed")).await?;
                expect_ack("ack of m1 (the middle of the batch)", &r, false)?;
                expect_eq(
                    "ack of m1: leaseReleased (m2 still out)",
                    false,
                    &r["leaseReleased"],
                )?;
                let r = ack(&cx, ack_of(&m[0], "completed")).await?;
                expect_ack("ack of m0 after m1 (completed with m1: a repeat)", &r, true)?;
                let p = next_ids(&cx, &q, &g).await?;
                expect_eq("a pop while m2 is leased", json!([]), &p)?;
                let r = ack(&cx, ack_of(&m[2], "completed")).await?;
                expect_ack("ack of m2", &r, false)?;
                expect_eq("ack of m2: leaseReleased", true, &r["leaseReleased"])?;
                expect_eq("the next pop", json!(["m3"]), &next_ids(&cx, &q, &g).await?)
            }
        ),
        case!(
            "core.cursor.commit.last-completes-batch",
            Must,
            COMMIT,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2", "m3"], 3).await?;
                let r = ack(&cx, ack_of(&m[2], "completed")).await?;
                expect_ack("ack of only the last message m2", &r, false)?;
                expect_eq("leaseReleased", true, &r["leaseReleased"])?;
                expect_eq(
                    "the next pop (m0 and m1 completed with m2, the lease released)",
                    json!(["m3"]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                for (i, msg) in m.iter().take(2).enumerate() {
                    let r = ack(&cx, unfenced(msg, "completed")).await?;
                    expect_ack(
                        &format!("a lease-less ack of m{i} (below the cursor)"),
                        &r,
                        true,
                    )?;
                }
                Ok(())
            }
        ),
        case!(
            "core.cursor.commit.after-expiry",
            Must,
            COMMIT,
            [Core, Cursor, Time],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1", "m2"]).await?;
                let m = msgs(
                    &cx.pop(&pop_path(
                        &q,
                        &g,
                        &format!("&batch=3&leaseSeconds={}", cx.window_secs()),
                    ))
                    .await?,
                );
                expect_eq("the batch", json!(["m0", "m1", "m2"]), &json!(txn_ids(&m)))?;
                let r = ack(&cx, ack_of(&m[1], "completed")).await?;
                expect_ack("ack of m1", &r, false)?;
                let again = cx
                    .eventually(Duration::from_secs(8), || {
                        let path = pop_path(&q, &g, "&batch=10");
                        let cx = cx.clone();
                        async move { cx.pop(&path).await }
                    })
                    .await?;
                expect_eq(
                    "redelivered after the lease expired (m0 was completed with m1)",
                    json!(["m2"]),
                    &json!(txn_ids(&msgs(&again))),
                )
            }
        ),
        case!(
            "core.cursor.dlq-moves-cursor",
            Must,
            DLQ,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                let mut body = ack_of(&m[1], "dlq");
                body["error"] = json!("poison");
                let r = ack(&cx, body).await?;
                expect_eq("dlq of m1: success", true, &r["success"])?;
                expect_eq("dlq of m1: dlq", true, &r["dlq"])?;
                let r = ack(&cx, unfenced(&m[0], "completed")).await?;
                expect_ack(
                    "a lease-less ack of m0 (the cursor moved past m1)",
                    &r,
                    true,
                )?;
                expect_eq("dead letters", json!(["m1"]), &dead(&cx, &q).await?)?;
                expect_eq(
                    "a pop while m2 is leased",
                    json!([]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                let r = ack(&cx, ack_of(&m[2], "completed")).await?;
                expect_eq("ack of m2: leaseReleased", true, &r["leaseReleased"])?;
                expect_eq("the next pop", json!([]), &next_ids(&cx, &q, &g).await?)
            }
        ),
    ]
}

fn clamp() -> Vec<Case> {
    vec![
        case!(
            "core.cursor.batch.failed-clamps",
            Must,
            CLAMP,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                configure(&cx, &q, json!({"retryLimit": 5})).await?;
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2", "m3", "m4"], 5).await?;
                let out = ack_batch(
                    &cx,
                    &g,
                    batch_items(
                        &m,
                        &["completed", "failed", "completed", "completed", "completed"],
                    ),
                )
                .await?;
                expect_eq("results[0].success", true, &out[0]["success"])?;
                expect_eq("results[1].success (failed)", true, &out[1]["success"])?;
                expect_eq(
                    "the next pop, at once (m1 and everything after it, the lease released)",
                    json!(["m1", "m2", "m3", "m4"]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                expect_eq("dead letters", json!([]), &dead(&cx, &q).await?)
            }
        ),
        case!(
            "core.cursor.batch.retry-clamps",
            Must,
            CLAMP,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                configure(&cx, &q, json!({"retryLimit": 0})).await?;
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                ack_batch(
                    &cx,
                    &g,
                    batch_items(&m, &["completed", "retry", "completed"]),
                )
                .await?;
                expect_eq(
                    "the next pop, at once",
                    json!(["m1", "m2"]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                // retryLimit 0: a counted attempt would have dead-lettered m1.
                expect_eq(
                    "dead letters (retry counts no attempt)",
                    json!([]),
                    &dead(&cx, &q).await?,
                )
            }
        ),
        case!(
            "core.cursor.batch.failed-counts-attempt",
            Must,
            CLAMP,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                configure(&cx, &q, json!({"retryLimit": 1})).await?;
                let m = leased(&cx, &q, &g, &["m0", "m1"], 2).await?;
                let out = ack_batch(&cx, &g, batch_items(&m, &["completed", "failed"])).await?;
                expect_eq("first failure of m1: dlq", false, &out[1]["dlq"])?;
                let again = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq("redelivered", json!(["m1"]), &json!(txn_ids(&again)))?;
                let out = ack_batch(&cx, &g, batch_items(&again, &["failed"])).await?;
                expect_eq(
                    "second failure of m1 (retryLimit 1): dlq",
                    true,
                    &out[0]["dlq"],
                )?;
                expect_eq("dead letters", json!(["m1"]), &dead(&cx, &q).await?)?;
                expect_eq("the next pop", json!([]), &next_ids(&cx, &q, &g).await?)
            }
        ),
    ]
}

fn refusals() -> Vec<Case> {
    vec![
        case!(
            "core.cursor.below.nack-refused",
            Must,
            BELOW,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                expect_ack(
                    "ack of m1",
                    &ack(&cx, ack_of(&m[1], "completed")).await?,
                    false,
                )?;
                for status in ["failed", "retry", "dlq"] {
                    let r = ack(&cx, ack_of(&m[0], status)).await?;
                    expect_refused(
                        &format!("{status} of m0 (below the cursor)"),
                        &r,
                        "committed",
                    )?;
                }
                let r = ack(&cx, ack_of(&m[0], "completed")).await?;
                expect_ack("completed of m0 (below the cursor)", &r, true)?;
                expect_eq("dead letters", json!([]), &dead(&cx, &q).await?)?;
                // The refusals cost nothing: the lease still holds m2.
                let r = ack(&cx, ack_of(&m[2], "completed")).await?;
                expect_ack("ack of m2", &r, false)?;
                expect_eq("ack of m2: leaseReleased", true, &r["leaseReleased"])
            }
        ),
        case!(
            "core.cursor.unresolved",
            Must,
            UNRESOLVED,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                for status in ["completed", "failed"] {
                    let mut ghost = ack_of(&m[0], status);
                    ghost["transactionId"] = json!("never-pushed");
                    let r = ack(&cx, ghost).await?;
                    expect_refused(
                        &format!("a {status} ack of an unknown transactionId"),
                        &r,
                        "unresolv",
                    )?;
                }
                let out = ack_batch(
                    &cx,
                    &g,
                    batch_items(&m, &["completed", "completed", "completed"]),
                )
                .await?;
                expect_ack(
                    "ack of m0 afterwards (the cursor did not move)",
                    &out[0],
                    false,
                )?;
                for (i, r) in out.iter().enumerate().skip(1) {
                    expect_ack(&format!("ack of m{i}"), r, false)?;
                }
                expect_eq(
                    "the last ack: leaseReleased",
                    true,
                    &out[2]["leaseReleased"],
                )
            }
        ),
        case!(
            "core.cursor.fenced.dead-lease",
            Must,
            FENCED,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let first = leased(&cx, &q, &g, &["m0", "m1"], 1).await?;
                expect_ack(
                    "ack of m0",
                    &ack(&cx, ack_of(&first[0], "completed")).await?,
                    false,
                )?;
                let second = msgs(&cx.pop(&pop_path(&q, &g, "&batch=1")).await?);
                expect_eq("the next batch", json!(["m1"]), &json!(txn_ids(&second)))?;
                let unknown = uuid::Uuid::now_v7().to_string();
                for (what, lease) in [
                    ("the released lease", first[0]["leaseId"].clone()),
                    ("a lease never minted", json!(unknown)),
                ] {
                    let mut a = ack_of(&second[0], "completed");
                    a["leaseId"] = lease;
                    let r = ack(&cx, a).await?;
                    expect_refused(
                        &format!("an ack of m1 under {what}"),
                        &r,
                        "invalid or expired lease",
                    )?;
                }
                let r = ack(&cx, ack_of(&second[0], "completed")).await?;
                expect_ack("ack of m1 under its live lease", &r, false)
            }
        ),
    ]
}

fn in_transactions() -> Vec<Case> {
    vec![
        case!(
            "txn.cursor.commit.earlier-completed",
            Must,
            COMMIT,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2", "m3"], 3).await?;
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[1], "completed", true)]}))
                    .await?;
                expect_commit("ack of m1", &out)?;
                expect_eq(
                    "a pop while m2 is leased",
                    json!([]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                // m0 is below the cursor now: a repeat, whatever the status says.
                let r = ack(&cx, unfenced(&m[0], "completed")).await?;
                expect_ack("a lease-less ack of m0", &r, true)?;
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[2], "completed", true)]}))
                    .await?;
                expect_commit("ack of m2", &out)?;
                expect_eq("the next pop", json!(["m3"]), &next_ids(&cx, &q, &g).await?)
            }
        ),
        case!(
            "txn.cursor.commit.last-completes-batch",
            Must,
            COMMIT,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2", "m3"], 3).await?;
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[2], "completed", true)]}))
                    .await?;
                expect_commit("ack of only the last message m2", &out)?;
                expect_eq(
                    "the next pop (the batch completed, the lease released)",
                    json!(["m3"]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                // The released lease fences no more.
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[0], "completed", true)]}))
                    .await?;
                expect_rejected("a fenced ack under the released lease", &out)
            }
        ),
        case!(
            "txn.cursor.failed-clamps",
            Must,
            CLAMP,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                configure(&cx, &q, json!({"retryLimit": 5})).await?;
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2", "m3"], 4).await?;
                let out = cx
                    .txn(json!({"operations": [
                        txn_ack(&m[0], "completed", true),
                        txn_ack(&m[1], "failed", true),
                        txn_ack(&m[2], "completed", true),
                        txn_ack(&m[3], "completed", true),
                    ]}))
                    .await?;
                expect_commit("acks [completed, failed, completed, completed]", &out)?;
                expect_eq(
                    "the next pop, at once",
                    json!(["m1", "m2", "m3"]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                expect_eq("dead letters", json!([]), &dead(&cx, &q).await?)
            }
        ),
        case!(
            "txn.cursor.retry-clamps",
            Must,
            CLAMP,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                configure(&cx, &q, json!({"retryLimit": 0})).await?;
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                let out = cx
                    .txn(json!({"operations": [
                        txn_ack(&m[0], "completed", true),
                        txn_ack(&m[1], "retry", true),
                        txn_ack(&m[2], "completed", true),
                    ]}))
                    .await?;
                expect_commit("acks [completed, retry, completed]", &out)?;
                expect_eq(
                    "the next pop, at once",
                    json!(["m1", "m2"]),
                    &next_ids(&cx, &q, &g).await?,
                )?;
                expect_eq(
                    "dead letters (retry counts no attempt)",
                    json!([]),
                    &dead(&cx, &q).await?,
                )
            }
        ),
        case!(
            "txn.cursor.dlq-moves-cursor",
            Must,
            DLQ,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[1], "dlq", true)]}))
                    .await?;
                expect_commit("dlq of m1", &out)?;
                expect_eq("dead letters", json!(["m1"]), &dead(&cx, &q).await?)?;
                let r = ack(&cx, unfenced(&m[0], "completed")).await?;
                expect_ack(
                    "a lease-less ack of m0 (the cursor moved past m1)",
                    &r,
                    true,
                )?;
                expect_eq(
                    "a pop while m2 is leased",
                    json!([]),
                    &next_ids(&cx, &q, &g).await?,
                )
            }
        ),
        case!(
            "txn.cursor.below.nack-refused",
            Must,
            BELOW,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let out_q = cx.name("out");
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 3).await?;
                expect_commit(
                    "ack of m1",
                    &cx.txn(json!({"operations": [txn_ack(&m[1], "completed", true)]}))
                        .await?,
                )?;
                for status in ["failed", "retry", "dlq"] {
                    let out = cx
                        .txn(json!({"operations": [
                            txn_ack(&m[0], status, true),
                            {"type": "push", "items": [{"queue": out_q, "partition": "p", "transactionId": status, "payload": 1}]},
                        ]}))
                        .await?;
                    expect_rejected(&format!("{status} of m0 (below the cursor)"), &out)?;
                }
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[0], "completed", true)]}))
                    .await?;
                expect_commit("completed of m0 (below the cursor: a no-op)", &out)?;
                expect_eq(
                    "pushed next to the refused acks",
                    json!([]),
                    &next_ids(&cx, &out_q, &g).await?,
                )?;
                expect_eq("dead letters", json!([]), &dead(&cx, &q).await?)
            }
        ),
        case!(
            "txn.cursor.unresolved",
            Must,
            UNRESOLVED,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = leased(&cx, &q, &g, &["m0", "m1", "m2"], 2).await?;
                let mut ghost = txn_ack(&m[1], "completed", true);
                ghost["transactionId"] = json!("never-pushed");
                let out = cx.txn(json!({"operations": [ghost]})).await?;
                expect_rejected("an ack of an unknown transactionId", &out)?;
                // The cursor did not move: m0 is not a repeat yet, and the lease lives.
                let r = ack(&cx, ack_of(&m[0], "completed")).await?;
                expect_ack("ack of m0", &r, false)?;
                let out = cx
                    .txn(json!({"operations": [txn_ack(&m[1], "completed", true)]}))
                    .await?;
                expect_commit("ack of m1 under the batch's lease", &out)?;
                expect_eq("the next pop", json!(["m2"]), &next_ids(&cx, &q, &g).await?)
            }
        ),
        case!(
            "txn.cursor.fenced.dead-lease",
            Must,
            FENCED,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let first = leased(&cx, &q, &g, &["m0", "m1"], 1).await?;
                expect_commit(
                    "ack of m0",
                    &cx.txn(json!({"operations": [txn_ack(&first[0], "completed", true)]}))
                        .await?,
                )?;
                let second = msgs(&cx.pop(&pop_path(&q, &g, "&batch=1")).await?);
                expect_eq("the next batch", json!(["m1"]), &json!(txn_ids(&second)))?;
                let mut a = txn_ack(&second[0], "completed", true);
                a["leaseId"] = first[0]["leaseId"].clone();
                let out = cx.txn(json!({"operations": [a]})).await?;
                expect_rejected("an ack of m1 under the released lease", &out)?;
                let out = cx
                    .txn(json!({"operations": [txn_ack(&second[0], "completed", true)]}))
                    .await?;
                expect_commit("ack of m1 under its live lease", &out)
            }
        ),
    ]
}

fn subscription() -> Vec<Case> {
    vec![
        case!(
            "core.cursor.subscription.late-partition",
            Must,
            SUBSCRIPTION,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                configure(&cx, &q, json!({})).await?;
                let r = cx.get(&pop_any(&q, &g, "")).await?;
                expect_status(&r, 204)?;
                for (p, t) in [("p1", "a"), ("p2", "b"), ("p3", "c")] {
                    push_ids(&cx, &q, p, &[t]).await?;
                }
                let seen = drain(&cx, &q, &g, "", 3, 6).await?;
                expect_eq(
                    "delivered to the group that popped before p1, p2 and p3 existed",
                    json!(["a", "b", "c"]),
                    &json!(seen),
                )
            }
        ),
        case!(
            "core.cursor.subscription.new-is-per-group",
            Must,
            SUBSCRIPTION,
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p1", &["old"]).await?;
                let first = cx.pop(&pop_any(&q, &g, "&subscriptionMode=new")).await?;
                expect_eq(
                    "the first pop in new mode",
                    json!([]),
                    &json!(txn_ids(&msgs(&first))),
                )?;
                push_ids(&cx, &q, "p1", &["new-1"]).await?;
                push_ids(&cx, &q, "p2", &["new-2"]).await?;
                let seen = drain(&cx, &q, &g, "", 3, 5).await?;
                expect_eq(
                    "delivered (messages after the group's first pop, on an old and a new partition)",
                    json!(["new-1", "new-2"]),
                    &json!(seen),
                )
            }
        ),
        case!(
            "core.cursor.subscription.all",
            Must,
            "`subscriptionMode` | `new` | a named group's starting point, fixed the first time the group pops the queue (4a): `new` = the messages created from that moment on, on every partition, including partitions created later; `all` = from the beginning",
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p1", &["old"]).await?;
                let seen = drain(&cx, &q, &g, "&subscriptionMode=all", 1, 3).await?;
                expect_eq("delivered in all mode", json!(["old"]), &json!(seen))?;
                push_ids(&cx, &q, "p2", &["later"]).await?;
                let seen = drain(&cx, &q, &g, "", 1, 3).await?;
                expect_eq(
                    "delivered from a later partition",
                    json!(["later"]),
                    &json!(seen),
                )
            }
        ),
        case!(
            "core.cursor.subscription.from-beginning",
            Must,
            "`subscriptionMode` | `new` | … `all` = from the beginning. The Python client `queen-mq` 2.6.0 names it `from_beginning` (`subscription_mode(\"from_beginning\")`, sent as `subscriptionMode=from_beginning` with `autopilot=true`: `tests/test_consume.py` `test_consumer_group`, `test_consumer_group_with_partition`, `test_retries`, `test_retries_consumer_group`, `test_auto_renew_lease`): the same start as `all`, on the queue and the partition routes.",
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g, g2) = (cx.name("q"), cx.name("g"), cx.name("g2"));
                push_ids(&cx, &q, "p1", &["old"]).await?;
                let hint = "&subscriptionMode=from_beginning&autopilot=true";
                let seen = drain(&cx, &q, &g, hint, 1, 3).await?;
                expect_eq(
                    "delivered in from_beginning mode",
                    json!(["old"]),
                    &json!(seen),
                )?;
                push_ids(&cx, &q, "p2", &["later"]).await?;
                let seen = drain(&cx, &q, &g, "", 1, 3).await?;
                expect_eq(
                    "delivered from a later partition",
                    json!(["later"]),
                    &json!(seen),
                )?;
                // The partition route, as `consume()` of one partition sends it.
                let r = cx
                    .get(&format!(
                        "/api/v1/pop/queue/{q}/partition/p1?autopilot=true&batch=100&wait=false&timeout=30000&consumerGroup={g2}&subscriptionMode=from_beginning"
                    ))
                    .await?;
                expect_status(&r, 200)?;
                expect_eq(
                    "a second group's pop of p1 in from_beginning mode",
                    json!(["old"]),
                    &json!(txn_ids(&msgs(&Some(r.body)))),
                )
            }
        ),
        case!(
            "core.cursor.subscription.from",
            Must,
            SUBSCRIPTION,
            [Core, Cursor],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p1", &["before"]).await?;
                let probe = msgs(
                    &cx.pop(&pop_path(&q, &cx.name("probe"), "&autoAck=true"))
                        .await?,
                );
                let at = probe
                    .first()
                    .and_then(|m| m["createdAt"].as_str())
                    .and_then(super::core::iso_micros)
                    .ok_or_else(|| Failure::new("a createdAt time", format!("{probe:?}")))?;
                tokio::time::sleep(Duration::from_millis(300)).await;
                push_ids(&cx, &q, "p1", &["after"]).await?;
                push_ids(&cx, &q, "p2", &["after-2"]).await?;
                let from = iso(at + 150_000);
                let g = cx.name("g");
                let seen = drain(&cx, &q, &g, &format!("&subscriptionFrom={from}"), 2, 4).await?;
                expect_eq(
                    &format!("delivered with subscriptionFrom={from}"),
                    json!(["after", "after-2"]),
                    &json!(seen),
                )?;
                let g2 = cx.name("g2");
                let r = cx.get(&pop_any(&q, &g2, "&subscriptionFrom=now")).await?;
                expect_status(&r, 204)?;
                push_ids(&cx, &q, "p3", &["later"]).await?;
                let seen = drain(&cx, &q, &g2, "", 1, 3).await?;
                expect_eq(
                    "delivered after subscriptionFrom=now",
                    json!(["later"]),
                    &json!(seen),
                )
            }
        ),
        case!(
            "core.cursor.subscription.queue-mode-ignores",
            Must,
            "`subscriptionMode` | … | queue mode ignores the hint and always reads everything",
            [Core, Cursor],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p1", &["a", "b"]).await?;
                for hint in ["&subscriptionMode=new", "&subscriptionFrom=now"] {
                    let p = cx
                        .pop(&format!("/api/v1/pop/queue/{q}?batch=1{hint}"))
                        .await?;
                    let m = msgs(&p);
                    expect(
                        m.len() == 1,
                        format!("a message for a queue-mode pop with {hint}"),
                        format!("{:?}", txn_ids(&m)),
                    )?;
                    ack(&cx, ack_of(&m[0], "completed")).await?;
                }
                Ok(())
            }
        ),
    ]
}

fn pops() -> Vec<Case> {
    vec![
        case!(
            "core.cursor.pop.partitions-n",
            Must,
            "`partitions` | 1 | claim up to N partitions under one lease, sharing `batch`, and drain several of them in one answer (wildcard route only)",
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p1", &["a0", "a1"]).await?;
                push_ids(&cx, &q, "p2", &["b0"]).await?;
                push_ids(&cx, &q, "p3", &["c0"]).await?;
                let p = cx
                    .pop(&pop_path(&q, &g, "&batch=10&partitions=3"))
                    .await?
                    .ok_or_else(|| Failure::new("messages", "an empty pop"))?;
                let m = msgs(&Some(p.clone()));
                let mut ids: Vec<String> = m
                    .iter()
                    .map(|m| m["transactionId"].as_str().unwrap_or_default().to_string())
                    .collect();
                ids.sort();
                expect_eq(
                    "drained in one answer",
                    json!(["a0", "a1", "b0", "c0"]),
                    &json!(ids),
                )?;
                expect_eq("partitionsClaimed", 3, &p["partitionsClaimed"])?;
                for x in &m {
                    expect_eq(
                        "each message's leaseId (one lease)",
                        p["leaseId"].clone(),
                        &x["leaseId"],
                    )?;
                }
                let a: Vec<&Value> = m.iter().filter(|x| x["partition"] == json!("p1")).collect();
                expect(
                    a.len() == 2 && a[0]["transactionId"] == json!("a0"),
                    "p1's messages in order [a0, a1]",
                    format!("{a:?}"),
                )?;
                // Each partition's last message completes its part of the claim.
                let lasts: Vec<Value> = ["a1", "b0", "c0"]
                    .iter()
                    .filter_map(|t| m.iter().find(|x| x["transactionId"] == json!(t)).cloned())
                    .collect();
                let out = ack_batch(&cx, &g, batch_items(&lasts, &["completed"; 3])).await?;
                for r in &out {
                    expect_ack("an ack under the shared lease", r, false)?;
                }
                // batch is shared by the claimed partitions.
                let g2 = cx.name("g2");
                let p = cx.pop(&pop_path(&q, &g2, "&batch=2&partitions=3")).await?;
                expect_eq(
                    "messages of a pop with batch=2, partitions=3",
                    2,
                    &json!(msgs(&p).len()),
                )?;
                expect_eq(
                    "the next pop of the first group",
                    json!([]),
                    &next_ids(&cx, &q, &g).await?,
                )
            }
        ),
        case!(
            "core.cursor.pop.long-poll-wakes",
            Must,
            "A long-poll (`wait=true`) of a named group wakes as soon as a message it may read lands, on any partition of the queue, including one created while it waits.",
            [Core, Cursor],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                // The group subscribes (new mode) while the queue has no partition yet.
                configure(&cx, &q, json!({})).await?;
                let r = cx.get(&pop_any(&q, &g, "")).await?;
                expect_status(&r, 204)?;
                let path = format!(
                    "/api/v1/pop/queue/{q}?consumerGroup={g}&wait=true&timeout=10000&batch=10"
                );
                let poller = {
                    let cx = cx.clone();
                    tokio::spawn(async move {
                        let t0 = Instant::now();
                        let r = cx.get(&path).await;
                        (r, t0.elapsed())
                    })
                };
                tokio::time::sleep(Duration::from_millis(700)).await;
                push_ids(&cx, &q, "p-new", &["late"]).await?;
                let (r, waited) = poller
                    .await
                    .map_err(|e| Failure::new("the long poll to answer", e.to_string()))?;
                let r = r?;
                expect_status(&r, 200)?;
                expect_eq(
                    "delivered by the long poll",
                    json!(["late"]),
                    &json!(txn_ids(
                        &r.body["messages"].as_array().cloned().unwrap_or_default()
                    )),
                )?;
                expect(
                    waited < Duration::from_secs(6),
                    "woken by the push (after 0.7 s), well before the 10 s deadline",
                    format!("answered after {waited:?}"),
                )
            }
        ),
    ]
}

/// An ISO-8601 UTC time with microseconds and `Z`, from microseconds since the epoch.
fn iso(micros: i64) -> String {
    let secs = micros.div_euclid(1_000_000);
    let us = micros.rem_euclid(1_000_000);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{us:06}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn iso_round_trips_through_iso_micros() {
        for t in [
            0i64,
            1_764_547_200_123_456,
            951_782_400_000_001,
            4_107_542_400_999_999,
        ] {
            let s = super::iso(t);
            assert_eq!(super::super::core::iso_micros(&s), Some(t), "{s}");
        }
        assert_eq!(super::iso(0), "1970-01-01T00:00:00.000000Z");
    }
}
