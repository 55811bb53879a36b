//! Rollback reasons of `POST /api/v1/transaction`, their order, "a rolled-back
//! transaction wrote nothing", the "Retries" section, and the per-call transactionId.

// `Failure` (with its exchange) is the crate-wide error of every check.

use std::time::Duration;

use serde_json::{Value, json};

use super::txn_acks::{
    QM, ack_of, ack_op, expect_commit, expect_rollback, peek_ids, pop_batch, push_all, same_reason,
    take,
};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq, expect_status};

/// A timer payload: `{"a":1}`, base64.
const TIMER_PAYLOAD: &str = "eyJhIjoxfQ==";

/// An hour, in ms: a timer that will not fire during a run.
const HOUR_MS: u64 = 3_600_000;

/// Fails unless `out` is the rollback envelope `{transactionId, success: false, reason,
/// error, results: []}` with `reason`.
fn expect_envelope(out: &Value, reason: &str) -> Result<(), Failure> {
    expect_rollback(out, reason)?;
    expect(
        out["transactionId"].as_str().is_some_and(|s| !s.is_empty()),
        "transactionId: a non-empty string",
        format!("transactionId: {}", out["transactionId"]),
    )?;
    expect(
        out["error"].as_str().is_some_and(|s| !s.is_empty()),
        "error: a non-empty string",
        format!("error: {}", out["error"]),
    )
}

/// Runs standalone KV ops (POST /api/v1/kv); answers their results.
async fn kv(cx: &Ctx, ops: Value) -> Result<Vec<Value>, Failure> {
    let r = cx.post("/api/v1/kv", json!({"operations": ops})).await?;
    expect_status(&r, 200)?;
    Ok(r.body["results"].as_array().cloned().unwrap_or_default())
}

/// `PUT`s a value forever; answers its version.
async fn kv_put(cx: &Ctx, ns: &str, key: &str, value: Value) -> Result<Value, Failure> {
    let r = kv(
        cx,
        json!([{"op": "put", "ns": ns, "key": key, "value": value, "forever": true}]),
    )
    .await?;
    expect_eq(&format!("put {key}: applied"), true, &r[0]["applied"])?;
    Ok(r[0]["version"].clone())
}

/// GET /api/v1/kv/{ns}/{key}: the bare result.
async fn kv_get(cx: &Ctx, ns: &str, key: &str) -> Result<Value, Failure> {
    let r = cx.get(&format!("/api/v1/kv/{ns}/{key}")).await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

/// A timer schedule op.
fn schedule(q: &str, key: &str, delay_ms: u64) -> Value {
    json!({"op": "schedule", "queue": q, "partition": "p", "timerKey": key, "delayMs": delay_ms,
           "txn": format!("timer-{key}"), "payload": TIMER_PAYLOAD})
}

/// A push operation of one item to `q`/`p`, with `txn` as its transactionId when given.
fn push_op(q: &str, txn: Option<&str>, payload: Value) -> Value {
    let mut item = json!({"queue": q, "partition": "p", "payload": payload});
    if let Some(t) = txn {
        item["transactionId"] = json!(t);
    }
    json!({"type": "push", "items": [item]})
}

/// An ack whose guard fires: a popped message acked under a lease the broker never minted.
async fn bad_ack(cx: &Ctx) -> Result<Value, Failure> {
    let q = cx.name("held");
    push_all(cx, &q, "p", &["held-1"]).await?;
    let b = take(cx, &q, "p", QM, 1, None).await?;
    Ok(ack_op(
        b.first(),
        Some(&uuid::Uuid::now_v7().to_string()),
        "completed",
    ))
}

/// A push whose guard fires: its transactionId is already in the partition.
async fn dup_push(cx: &Ctx) -> Result<Value, Failure> {
    let q = cx.name("dupq");
    push_all(cx, &q, "p", &["dup"]).await?;
    Ok(push_op(&q, Some("dup"), json!(2)))
}

/// A KV op whose guard fires: a required putIfAbsent of a key that exists.
async fn lost_kv(cx: &Ctx) -> Result<Value, Failure> {
    let ns = cx.ns("gate");
    kv_put(cx, &ns, "marker", json!(true)).await?;
    Ok(
        json!({"op": "putIfAbsent", "ns": ns, "key": "marker", "value": true, "forever": true, "required": true}),
    )
}

/// A position whose guard (we expect) fires: far past the end of its partition.
async fn bad_position(cx: &Ctx) -> Result<Value, Failure> {
    let q = cx.name("posq");
    push_all(cx, &q, "p", &["pos-1"]).await?;
    Ok(json!({"queue": q, "consumerGroup": cx.name("g"), "partition": "p", "offset": 1_000_000}))
}

/// The guard that makes a "wrote nothing" transaction roll back.
#[derive(Clone, Copy)]
enum Trigger {
    RejectedAck,
    Duplicate,
    KvPrecondition,
}

/// Sends a transaction that acks, pushes and (with `full`) writes KV, schedules a
/// timer and sets a position, with one guard that fires last in its part; then reads
/// every kind of state back and checks that none of it changed.
async fn wrote_nothing(cx: &Ctx, trigger: Trigger, full: bool) -> Result<(), Failure> {
    let (qa, qo) = (cx.name("in"), cx.name("out"));
    push_all(cx, &qa, "p", &["w-1", "w-2"]).await?;
    let a = take(cx, &qa, "p", QM, 1, None).await?;
    let pid = a.first()["partitionId"].clone();
    let mut ops = vec![
        ack_op(a.first(), Some(&a.lease), "completed"),
        push_op(&qo, Some("fresh-1"), json!({"n": 1})),
    ];
    let mut before_out = vec![];
    let reason = match trigger {
        Trigger::RejectedAck => {
            // w-2 is outside the leased batch.
            ops.push(ack_of("w-2", &pid, Some(&a.lease)));
            "rejected_ack"
        }
        Trigger::Duplicate => {
            push_all(cx, &qo, "p", &["seen"]).await?;
            before_out.push("seen".to_string());
            ops.push(push_op(&qo, Some("seen"), json!({"n": 2})));
            "duplicate"
        }
        Trigger::KvPrecondition => "kv_precondition",
    };
    let mut body = json!({"operations": ops});

    let (ns, qt, qc, group) = (cx.ns("kv"), cx.name("tq"), cx.name("cq"), cx.name("g"));
    let mut row_version = Value::Null;
    let auto_pop = format!(
        "/api/v1/pop/queue/{qc}/partition/p?batch=1&consumerGroup={group}&subscriptionMode=all&autoAck=true"
    );
    if full {
        row_version = kv_put(cx, &ns, "row", json!("before")).await?;
        let mut kv_ops = vec![
            json!({"op": "put", "ns": ns, "key": "row", "value": "after", "forever": true}),
            json!({"op": "incr", "ns": ns, "key": "cnt", "delta": 1, "forever": true}),
        ];
        if let Trigger::KvPrecondition = trigger {
            kv_put(cx, &ns, "gate", json!(true)).await?;
            kv_ops.push(json!({"op": "putIfAbsent", "ns": ns, "key": "gate", "value": 1, "forever": true, "required": true}));
        }
        body["kv"] = json!(kv_ops);
        body["timers"] = json!([schedule(&qt, "tk", HOUR_MS)]);
        // The group has read c-1; the position would skip c-2.
        push_all(cx, &qc, "p", &["c-1", "c-2", "c-3"]).await?;
        let first = cx
            .pop(&auto_pop)
            .await?
            .ok_or_else(|| Failure::new("c-1", "an empty pop"))?;
        expect_eq("first read", "c-1", &first["messages"][0]["transactionId"])?;
        body["positions"] =
            json!([{"queue": qc, "consumerGroup": group, "partition": "p", "offset": 2}]);
    }

    let out = cx.txn(body).await?;
    expect_rollback(&out, reason)?;

    // The acked message is still leased: its partition is not served to anyone else.
    let again = pop_batch(cx, &qa, "p", QM, 1, None).await?;
    expect(
        again.is_none(),
        format!("{qa}/p still leased (an empty pop)"),
        format!("delivered {:?}", again.map(|b| b.ids()).unwrap_or_default()),
    )?;
    // No pushed message, and its id is no dedup entry.
    let got = peek_ids(cx, &qo, "p").await?;
    expect(
        got == before_out,
        format!("{qo}/p holds {before_out:?}"),
        format!("{qo}/p holds {got:?}"),
    )?;
    let r = cx.push(&qo, "p", "fresh-1", json!({"n": 3})).await?;
    expect_eq("a later push of fresh-1: status", "queued", &r["status"])?;
    if full {
        let row = kv_get(cx, &ns, "row").await?;
        expect_eq("row value", "before", &row["value"])?;
        expect_eq("row version", row_version, &row["version"])?;
        let cnt = kv_get(cx, &ns, "cnt").await?;
        expect_eq("cnt found", false, &cnt["found"])?;
        let t = cx.get(&format!("/api/v1/timers/{qt}/tk")).await?;
        expect_eq("timer found", false, &t.body["found"])?;
        let next = cx
            .pop(&auto_pop)
            .await?
            .ok_or_else(|| Failure::new("c-2 (cursor unchanged)", "an empty pop"))?;
        expect_eq(
            "next read (cursor unchanged)",
            "c-2",
            &next["messages"][0]["transactionId"],
        )?;
    }
    // Last: w-1 is still unacked under its lease.
    let r = cx
        .post(
            "/api/v1/ack",
            json!({"transactionId": "w-1", "partitionId": pid, "consumerGroup": QM, "leaseId": a.lease}),
        )
        .await?;
    expect_status(&r, 200)?;
    expect(
        r.body[0]["success"] == json!(true) && r.body[0]["noop"] != json!(true),
        "w-1 acks under its lease (success: true, noop: false)",
        format!("{}", r.body),
    )
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "txn.push.duplicate.in-window",
            Must,
            "An item whose transactionId is already in the partition's dedup window rolls the whole transaction back with reason: \"duplicate\".",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                cx.push(&q, "p", "dup-1", json!(1)).await?;
                let out = cx
                    .txn(json!({"operations": [
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "dup-1", "payload": 2}]},
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "fresh", "payload": 3}]}
                    ]}))
                    .await?;
                expect_eq("success", false, &out["success"])?;
                expect_eq("reason", "duplicate", &out["reason"])?;
                expect_eq("results", json!([]), &out["results"])?;
                // Nothing written: the fresh item is not there.
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}?batch=10")).await?;
                let n = p
                    .as_ref()
                    .map_or(0, |p| p["messages"].as_array().map_or(0, Vec::len));
                expect(n == 1, "only the original message", format!("{n} messages"))
            }
        ),
        case!(
            "txn.kv.precondition.failed-index",
            Must,
            "A lost required KV operation rolls back with reason: \"kv_precondition\", and failedIndex is in the same index space as results.",
            [Core, Kv],
            |cx: Ctx| async move {
                let (q, ns) = (cx.name("q"), cx.ns("gate"));
                let out = cx
                    .txn(json!({"kv": [{"op": "putIfAbsent", "ns": ns, "key": "m", "value": true, "forever": true}]}))
                    .await?;
                expect_eq("success", true, &out["success"])?;
                let out = cx
                    .txn(json!({
                        "operations": [{"type": "push", "items": [{"queue": q, "payload": 1}, {"queue": q, "payload": 2}]}],
                        "kv": [
                            {"op": "get", "ns": ns, "key": "other"},
                            {"op": "putIfAbsent", "ns": ns, "key": "m", "value": true, "forever": true, "required": true}
                        ]
                    }))
                    .await?;
                expect_eq("reason", "kv_precondition", &out["reason"])?;
                expect_eq("failedIndex", 3, &out["failedIndex"])?;
                expect_eq("kvReason", "exists", &out["kvReason"])?;
                expect_eq("value", true, &out["value"])?;
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}")).await?;
                expect(p.is_none(), "no pushed message", "a message was stored")
            }
        ),
        // Rollback reasons and the body.
        case!(
            "txn.rollback.body.envelope",
            Must,
            "The body is {transactionId, success: false, reason, error, results: []}.",
            [Core],
            |cx: Ctx| async move {
                let out = cx.txn(json!({"operations": [bad_ack(&cx).await?]})).await?;
                expect_envelope(&out, "rejected_ack")?;
                let out = cx
                    .txn(json!({"operations": [dup_push(&cx).await?]}))
                    .await?;
                expect_envelope(&out, "duplicate")
            }
        ),
        case!(
            "txn.rollback.kv-precondition.body",
            Must,
            "A lost required KV operation adds the operation that lost: {transactionId, success: false, reason: \"kv_precondition\", error, results: [], ok: false, failedIndex, kvReason, version, value}.",
            [Core, Kv],
            |cx: Ctx| async move {
                let (q, ns) = (cx.name("q"), cx.ns("gate"));
                let out = cx
                    .txn(json!({"kv": [{"op": "putIfAbsent", "ns": ns, "key": "m", "value": {"by": "first"}, "forever": true}]}))
                    .await?;
                expect_commit(&out)?;
                let version = out["results"][0]["version"].clone();
                expect(
                    version.is_u64() || version.is_i64(),
                    "the winner's version (a number)",
                    format!("{version}"),
                )?;
                let out = cx
                    .txn(json!({
                        "operations": [push_op(&q, Some("i-1"), json!(1))],
                        "kv": [
                            {"op": "put", "ns": ns, "key": "other", "value": 1, "forever": true},
                            {"op": "putIfAbsent", "ns": ns, "key": "m", "value": {"by": "second"}, "forever": true, "required": true}
                        ]
                    }))
                    .await?;
                expect_envelope(&out, "kv_precondition")?;
                expect_eq("ok", false, &out["ok"])?;
                expect_eq("failedIndex", 2, &out["failedIndex"])?;
                expect_eq("kvReason", "exists", &out["kvReason"])?;
                expect_eq("version", version, &out["version"])?;
                expect_eq("value", json!({"by": "first"}), &out["value"])?;
                let other = kv_get(&cx, &ns, "other").await?;
                expect_eq("other found", false, &other["found"])
            }
        ),
        // The order of reasons when several guards fire. serde_json writes keys in
        // alphabetical order, so "kv" and "positions" already come before
        // "operations" and the pushes are written before the acks.
        case!(
            "txn.rollback.order.ack-before-push",
            Must,
            "When several guards would fire, the reason is the first in this order: the acks (rejected_ack), the pushes (duplicate), the positions, the KV operations (kv_precondition), the timers.",
            [Core],
            |cx: Ctx| async move {
                let (push, ack) = (dup_push(&cx).await?, bad_ack(&cx).await?);
                let out = cx.txn(json!({"operations": [push, ack]})).await?;
                expect_rollback(&out, "rejected_ack")
            }
        ),
        case!(
            "txn.rollback.order.ack-before-kv",
            Must,
            "When several guards would fire, the reason is the first in this order: the acks (rejected_ack), the pushes (duplicate), the positions, the KV operations (kv_precondition), the timers.",
            [Core, Kv],
            |cx: Ctx| async move {
                let (kv_op, ack) = (lost_kv(&cx).await?, bad_ack(&cx).await?);
                let out = cx.txn(json!({"kv": [kv_op], "operations": [ack]})).await?;
                expect_rollback(&out, "rejected_ack")
            }
        ),
        case!(
            "txn.rollback.order.push-before-kv",
            Must,
            "When several guards would fire, the reason is the first in this order: the acks (rejected_ack), the pushes (duplicate), the positions, the KV operations (kv_precondition), the timers.",
            [Core, Kv],
            |cx: Ctx| async move {
                let (kv_op, push) = (lost_kv(&cx).await?, dup_push(&cx).await?);
                let out = cx.txn(json!({"kv": [kv_op], "operations": [push]})).await?;
                expect_rollback(&out, "duplicate")
            }
        ),
        case!(
            "txn.rollback.order.positions",
            Should,
            "When several guards would fire, the reason is the first in this order: the acks (rejected_ack), the pushes (duplicate), the positions, the KV operations (kv_precondition), the timers. (The spec names no positions reason; a position past the end of its partition is expected to roll back.)",
            [Core, Kv, Positions],
            |cx: Ctx| async move {
                let pos = bad_position(&cx).await?;
                let out = cx.txn(json!({"positions": [pos]})).await?;
                expect(
                    out["success"] == json!(false)
                        && out["reason"].as_str().is_some_and(|r| !r.is_empty()),
                    "a position past the end rolls back with a reason",
                    format!("{out}"),
                )?;
                let out = cx
                    .txn(json!({"positions": [pos], "operations": [bad_ack(&cx).await?]}))
                    .await?;
                expect_rollback(&out, "rejected_ack")?;
                let out = cx
                    .txn(json!({"positions": [pos], "operations": [dup_push(&cx).await?]}))
                    .await?;
                expect_rollback(&out, "duplicate")?;
                let out = cx
                    .txn(json!({"kv": [lost_kv(&cx).await?], "positions": [pos]}))
                    .await?;
                expect(
                    out["success"] == json!(false)
                        && out["reason"].as_str().is_some_and(|r| !r.is_empty())
                        && !same_reason(&out["reason"], "kv_precondition"),
                    "the positions' reason, not kv_precondition",
                    format!("{out}"),
                )
            }
        ),
        // A rolled-back transaction wrote nothing.
        case!(
            "txn.rollback.wrote-nothing.core",
            Must,
            "A rolled-back transaction wrote nothing.",
            [Core],
            |cx: Ctx| async move { wrote_nothing(&cx, Trigger::RejectedAck, false).await }
        ),
        case!(
            "txn.rollback.wrote-nothing.rejected-ack",
            Must,
            "A rolled-back transaction wrote nothing.",
            [Core, Kv, Timers, Positions],
            |cx: Ctx| async move { wrote_nothing(&cx, Trigger::RejectedAck, true).await }
        ),
        case!(
            "txn.rollback.wrote-nothing.duplicate",
            Must,
            "A rolled-back transaction wrote nothing.",
            [Core, Kv, Timers, Positions],
            |cx: Ctx| async move { wrote_nothing(&cx, Trigger::Duplicate, true).await }
        ),
        case!(
            "txn.rollback.wrote-nothing.kv-precondition",
            Must,
            "A rolled-back transaction wrote nothing.",
            [Core, Kv, Timers, Positions],
            |cx: Ctx| async move { wrote_nothing(&cx, Trigger::KvPrecondition, true).await }
        ),
        // Retries: the same body sent again.
        case!(
            "txn.retry.fenced-ack.rejected",
            Must,
            "If it did, the retry rolls back and writes nothing only because of what the body carries: a fenced ack whose lease the first commit released (rejected_ack), a pushed transactionId already in the partition (duplicate), or a required marker (kv_precondition).",
            [Core],
            |cx: Ctx| async move {
                let (qi, qo) = (cx.name("in"), cx.name("out"));
                push_all(&cx, &qi, "p", &["r-1"]).await?;
                let a = take(&cx, &qi, "p", QM, 1, None).await?;
                // The pushed item has no transactionId: only the fenced ack stops a retry.
                let body = json!({"operations": [
                    ack_op(a.first(), Some(&a.lease), "completed"),
                    push_op(&qo, None, json!({"n": 1})),
                ]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                expect_rollback(&cx.txn(body).await?, "rejected_ack")?;
                let got = peek_ids(&cx, &qo, "p").await?;
                expect(got.len() == 1, "one pushed message", format!("{got:?}"))
            }
        ),
        case!(
            "txn.retry.push-id.duplicate",
            Must,
            "If it did, the retry rolls back and writes nothing only because of what the body carries: a fenced ack whose lease the first commit released (rejected_ack), a pushed transactionId already in the partition (duplicate), or a required marker (kv_precondition).",
            [Core],
            |cx: Ctx| async move {
                let qo = cx.name("out");
                let body =
                    json!({"operations": [push_op(&qo, Some("receipt-1"), json!({"n": 1}))]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                expect_rollback(&cx.txn(body).await?, "duplicate")?;
                let got = peek_ids(&cx, &qo, "p").await?;
                expect_eq("pushed messages", json!(["receipt-1"]), &json!(got))
            }
        ),
        case!(
            "txn.retry.required-marker.kv-precondition",
            Must,
            "If it did, the retry rolls back and writes nothing only because of what the body carries: a fenced ack whose lease the first commit released (rejected_ack), a pushed transactionId already in the partition (duplicate), or a required marker (kv_precondition).",
            [Core, Kv],
            |cx: Ctx| async move {
                let (qo, ns) = (cx.name("out"), cx.ns("step"));
                let body = json!({
                    "operations": [push_op(&qo, None, json!({"n": 1}))],
                    "kv": [
                        {"op": "putIfAbsent", "ns": ns, "key": "done", "value": true, "forever": true, "required": true},
                        {"op": "incr", "ns": ns, "key": "count", "delta": 1, "forever": true},
                    ],
                });
                expect_commit(&cx.txn(body.clone()).await?)?;
                expect_rollback(&cx.txn(body).await?, "kv_precondition")?;
                let count = kv_get(&cx, &ns, "count").await?;
                expect_eq("count", 1, &count["value"])?;
                let got = peek_ids(&cx, &qo, "p").await?;
                expect(got.len() == 1, "one pushed message", format!("{got:?}"))
            }
        ),
        case!(
            "txn.retry.unfenced-ack.commits-again",
            Must,
            "An ack with no lease does not stop it, because acking a message twice is a no-op.",
            [Core],
            |cx: Ctx| async move {
                let (qi, qo) = (cx.name("in"), cx.name("out"));
                push_all(&cx, &qi, "p", &["r-1"]).await?;
                let a = take(&cx, &qi, "p", QM, 1, None).await?;
                let body = json!({"operations": [
                    ack_op(a.first(), None, "completed"),
                    push_op(&qo, None, json!({"n": 1})),
                ]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                expect_commit(&cx.txn(body).await?)?;
                let got = peek_ids(&cx, &qo, "p").await?;
                expect(
                    got.len() == 2,
                    "two pushed messages (the retry ran again)",
                    format!("{got:?}"),
                )
            }
        ),
        case!(
            "txn.retry.kv-only.incr-twice",
            Must,
            "A transaction made only of KV writes and timers, with no gate, runs again when retried: an incr counts twice, and a timer that already fired is scheduled again.",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("ctr");
                let body = json!({"kv": [{"op": "incr", "ns": ns, "key": "c", "delta": 1, "forever": true}]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                let out = cx.txn(body).await?;
                expect_commit(&out)?;
                expect_eq("second incr's value", 2, &out["results"][0]["value"])?;
                let c = kv_get(&cx, &ns, "c").await?;
                expect_eq("c", 2, &c["value"])
            }
        ),
        case!(
            "txn.retry.timer-only.rescheduled",
            Must,
            "schedule of an existing key replaces it and answers rescheduled. (A transaction made only of KV writes and timers, with no gate, runs again when retried.)",
            [Core, Timers],
            |cx: Ctx| async move {
                let qt = cx.name("tq");
                let body = json!({"timers": [schedule(&qt, "tk", HOUR_MS)]});
                let first = cx.txn(body.clone()).await?;
                expect_commit(&first)?;
                expect_eq("first status", "scheduled", &first["results"][0]["status"])?;
                let second = cx.txn(body).await?;
                expect_commit(&second)?;
                let checked = expect_eq(
                    "second status",
                    "rescheduled",
                    &second["results"][0]["status"],
                );
                let peek = cx.get(&format!("/api/v1/timers/{qt}/tk")).await?;
                let found = expect_eq("timer found", true, &peek.body["found"]);
                cx.delete(&format!("/api/v1/timers/{qt}/tk")).await?;
                checked.and(found)
            }
        ),
        case!(
            "txn.retry.timer-only.fired",
            Must,
            "A transaction made only of KV writes and timers, with no gate, runs again when retried: an incr counts twice, and a timer that already fired is scheduled again.",
            [Core, Timers, Time],
            |cx: Ctx| async move {
                let qt = cx.name("tq");
                let body = json!({"timers": [schedule(&qt, "tk", 0)]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                let fired = cx
                    .eventually(Duration::from_secs(5), || {
                        let (cx, qt) = (&cx, &qt);
                        async move {
                            let got = peek_ids(cx, qt, "p").await?;
                            Ok((!got.is_empty()).then_some(got))
                        }
                    })
                    .await?;
                expect(fired.is_some(), "the timer fires within 5 s", "it did not")?;
                let out = cx.txn(body).await?;
                expect_commit(&out)?;
                expect_eq("ok", true, &out["results"][0]["ok"])?;
                expect_eq("status", "scheduled", &out["results"][0]["status"])
            }
        ),
        case!(
            "txn.retry.transaction-id.per-call",
            Must,
            "The top-level transactionId is minted for this call; it is not a dedup key.",
            [Core],
            |cx: Ctx| async move {
                let qo = cx.name("out");
                let body = json!({"operations": [push_op(&qo, None, json!({"n": 1}))]});
                let first = cx.txn(body.clone()).await?;
                expect_commit(&first)?;
                let second = cx.txn(body).await?;
                expect_commit(&second)?;
                let (a, b) = (&first["transactionId"], &second["transactionId"]);
                expect(
                    a.as_str().is_some_and(|s| !s.is_empty())
                        && b.as_str().is_some_and(|s| !s.is_empty())
                        && a != b,
                    "two calls, two non-empty transactionIds",
                    format!("{a} and {b}"),
                )?;
                let got = peek_ids(&cx, &qo, "p").await?;
                expect(got.len() == 2, "two pushed messages", format!("{got:?}"))?;
                // Not a dedup key: a message may carry it as its own transactionId.
                let id = a.as_str().unwrap_or_default();
                let r = cx.push(&qo, "p", id, json!({"n": 2})).await?;
                expect_eq(
                    "push with the call's transactionId: status",
                    "queued",
                    &r["status"],
                )
            }
        ),
    ]
}
