//! The MUSTs of `transaction-v0-postgres.md` (the PostgreSQL broker's page) that the
//! Queen 2 cases do not already state in the page's own terms: the 400s, the push and ack
//! defaults, how an ack finds its lease, each rollback cause with the answer it gives
//! (`success: false`, an `error` text, `results: []`, HTTP 200), first-wins duplicates in
//! one bundle, and the retry of a committed transaction.
//!
//! Why a module of its own: the `v0` profile judges a broker by that page, and skips the
//! Queen 2 cases that check conventions the page never promised (see
//! [`crate::profile::V0_WAIVED`]). These cases check only what the page says, so they
//! hold on Queen 2 too (where the two pages agree) and run in every profile; the page's
//! error texts (`QDUP`, `QTXN`) are checked by prefix only, as the page quotes them.
//!
//! One MUST, one case: a rollback case checks that the call rolled back (`success:
//! false`, an `error` text, HTTP 200, nothing written) and the text the page gives for
//! that cause; that `results` is empty on failure is its own case
//! (`txn.v0.rollback.results-empty`), so a broker that echoes the results of a
//! rolled-back bundle fails that one rule once, not every rollback case. The page's
//! rules no case can check from outside are left out: a foreign partition (needs a
//! multi-tenant deployment), the 403 (needs auth on), the 413 (a 64 MiB body) and the
//! 500 (no database connection).

use serde_json::{Value, json};

use std::time::Duration;

use super::core::{configure, expect_keys, expect_no_messages, stored, txn_ids};
use super::txn_acks::{QM, ack_of, dlq_ids, expect_commit, push_all, take};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq, expect_status};

/// A valid push of one message, `canary`, to `q`/`p`: placed in a body that must write
/// nothing, it is looked for afterwards.
fn canary(q: &str) -> Value {
    json!({"type": "push", "items": [
        {"queue": q, "partition": "p", "transactionId": "canary", "payload": {"canary": true}}
    ]})
}

/// Fails unless `out` is the page's rollback: `success: false` with an `error` text, in
/// the same shape as a commit (`transactionId`, `success`, `error`, `results`); the
/// status, 200, is checked by [`Ctx::txn`]. That `results` is empty is
/// `txn.v0.rollback.results-empty`'s rule, not checked here.
fn expect_v0_rollback(out: &Value) -> Result<String, Failure> {
    expect(
        out["success"] == json!(false) && out["error"].is_string(),
        "a rollback: success false with an error text",
        out.to_string(),
    )?;
    expect_keys(
        "the rollback",
        out,
        &["transactionId", "success", "error", "results"],
    )?;
    expect(
        out["results"].is_array(),
        "results: an array",
        out["results"].to_string(),
    )?;
    Ok(out["error"].as_str().unwrap_or_default().to_string())
}

/// Fails unless `error` starts with `prefix` (the page's `QDUP`, `QTXN`).
fn expect_prefix(error: &str, prefix: &str) -> Result<(), Failure> {
    expect(
        error.starts_with(prefix),
        format!("an error starting with {prefix}"),
        error.to_string(),
    )
}

/// Fails unless `q`/`p` has nothing left for the default group (the ack advanced it).
async fn expect_consumed(cx: &Ctx, q: &str) -> Result<(), Failure> {
    let left = super::txn_acks::pop_batch(cx, q, "p", QM, 10, None).await?;
    expect(
        left.is_none(),
        format!("nothing left to pop from {q}/p (the ack advanced the cursor)"),
        format!("{:?}", left.map(|b| b.ids())),
    )
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut all = shape();
    all.extend(acks());
    all.extend(rollbacks());
    all
}

fn shape() -> Vec<Case> {
    vec![
        case!(
            "txn.v0.shape.operations-required",
            Must,
            "`operations` | array | yes | the operations, in order; a missing or non-array value is a `400`",
            [Core],
            |cx: Ctx| async move {
                for body in [
                    json!({}),
                    json!({"operations": {}}),
                    json!({"operations": "ack"}),
                ] {
                    let r = cx.post("/api/v1/transaction", body).await?;
                    expect_status(&r, 400)?;
                }
                Ok(())
            }
        ),
        case!(
            "txn.v0.shape.unknown-type",
            Must,
            "Any other `type` fails the whole call with a `400` and nothing is written, including a type the broker does not recognise. The check runs before any database work.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let r = cx
                    .post(
                        "/api/v1/transaction",
                        json!({"operations": [canary(&q), {"type": "bogus", "queue": q}]}),
                    )
                    .await?;
                expect_status(&r, 400)?;
                expect_no_messages(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.push.minted-transaction-id",
            Must,
            "`transactionId` | string | the message id the broker mints",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let out = cx
                    .txn(json!({"operations": [{"type": "push", "items": [{"queue": q, "partition": "p", "payload": 1}]}]}))
                    .await?;
                expect_commit(&out)?;
                let minted = out["results"][0]["transactionId"].clone();
                expect(
                    minted.as_str().is_some_and(|s| !s.is_empty()),
                    "the push result's transactionId: a minted id",
                    out.to_string(),
                )?;
                let m = stored(&cx, &q).await?;
                expect_eq(
                    "stored transactionIds",
                    json!([minted]),
                    &json!(txn_ids(&m)),
                )
            }
        ),
        case!(
            "txn.v0.push.duplicate-in-bundle",
            Must,
            "two push items with the same `transactionId` in the same `(queue, partition)` inside one transaction are first-wins. The second is echoed as a result with `duplicate: true`, produces no frame, and does not roll the transaction back",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let out = cx
                    .txn(json!({"operations": [{"type": "push", "items": [
                        {"queue": q, "partition": "p", "transactionId": "d", "payload": "first"},
                        {"queue": q, "partition": "p", "transactionId": "d", "payload": "second"}
                    ]}]}))
                    .await?;
                expect_commit(&out)?;
                expect_eq(
                    "duplicate of the second result",
                    true,
                    &out["results"][1]["duplicate"],
                )?;
                let m = stored(&cx, &q).await?;
                expect_eq("stored transactionIds", json!(["d"]), &json!(txn_ids(&m)))?;
                expect_eq("the stored payload (first wins)", "first", &m[0]["data"])
            }
        ),
        case!(
            "txn.v0.answer.transaction-id-per-call",
            Must,
            "`transactionId` | string | an id the broker mints for this call; it is not any message's deduplication key",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let mut ids = Vec::new();
                for t in ["a", "b"] {
                    let out = cx
                        .txn(json!({"operations": [{"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": t, "payload": 1}]}]}))
                        .await?;
                    expect_commit(&out)?;
                    ids.push(out["transactionId"].clone());
                }
                expect(
                    ids.iter().all(|i| {
                        i.as_str()
                            .is_some_and(|s| !s.is_empty() && s != "a" && s != "b")
                    }) && ids[0] != ids[1],
                    "two calls, two minted ids, neither a message's transactionId",
                    format!("{ids:?}"),
                )
            }
        ),
        case!(
            "txn.v0.answer.result-keys",
            Must,
            "Push results carry `index`, `type: \"push\"`, `success`, `transactionId` (the deduplication key used), `messageId` and `queueName` [...] Ack results carry `index`, `type: \"ack\"`, `success`, `transactionId`, `error` and `dlq`. [...] every element of a successful `results` array says `success: true`",
            [Core],
            |cx: Ctx| async move {
                let (q, out_q) = (cx.name("q"), cx.name("out"));
                push_all(&cx, &q, "p", &["in-1"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(json!({
                        "operations": [
                            {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                             "consumerGroup": QM, "status": "completed"},
                            {"type": "push", "items": [{"queue": out_q, "partition": "p", "transactionId": "out-1", "payload": 2}]}
                        ],
                        "requiredLeases": [b.lease]
                    }))
                    .await?;
                expect_commit(&out)?;
                expect_keys("the answer", &out, &["transactionId", "success", "results"])?;
                let (ack, push) = (&out["results"][0], &out["results"][1]);
                expect_keys(
                    "the ack result",
                    ack,
                    &["index", "type", "success", "transactionId", "error", "dlq"],
                )?;
                expect_keys(
                    "the push result",
                    push,
                    &[
                        "index",
                        "type",
                        "success",
                        "transactionId",
                        "messageId",
                        "queueName",
                    ],
                )?;
                expect_eq(
                    "the ack result",
                    json!([0, "ack", true, "in-1", null, false]),
                    &json!([
                        ack["index"],
                        ack["type"],
                        ack["success"],
                        ack["transactionId"],
                        ack["error"],
                        ack["dlq"]
                    ]),
                )?;
                expect_eq(
                    "the push result",
                    json!([1, "push", true, "out-1", out_q]),
                    &json!([
                        push["index"],
                        push["type"],
                        push["success"],
                        push["transactionId"],
                        push["queueName"]
                    ]),
                )?;
                let stored = stored(&cx, &out_q).await?;
                expect_eq("the messageId", push["messageId"].clone(), &stored[0]["id"])
            }
        ),
    ]
}

fn acks() -> Vec<Case> {
    vec![
        case!(
            "txn.v0.ack.lease-less",
            Must,
            "If no lease information appears anywhere in the request, every ack is treated as a lease-less ack: the lease check is skipped and the cursor still advances",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"], "consumerGroup": QM, "status": "completed"}]}))
                    .await?;
                expect_commit(&out)?;
                expect_consumed(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.ack.required-leases",
            Must,
            "The broker resolves each ack group's lease in this order: 1. a `leaseId` on the operation itself; 2. the current lease holder for that `(partition, consumerGroup)`; 3. the single unambiguous entry in `requiredLeases`",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(json!({
                        "operations": [{"type": "ack", "transactionId": m["transactionId"],
                            "partitionId": m["partitionId"], "consumerGroup": QM}],
                        "requiredLeases": [b.lease]
                    }))
                    .await?;
                expect_commit(&out)?;
                expect_consumed(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.ack.default-status",
            Must,
            "`status` | string | `completed`",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(
                        json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"], "leaseId": b.lease}]}),
                    )
                    .await?;
                expect_commit(&out)?;
                expect_eq("dlq of the ack result", false, &out["results"][0]["dlq"])?;
                expect_consumed(&cx, &q).await?;
                let dead = dlq_ids(&cx, &q).await?;
                expect(dead.is_empty(), "no dead letter", format!("{dead:?}"))
            }
        ),
        case!(
            "txn.v0.ack.dlq",
            Must,
            "`status` is normalised exactly as on the ack route: `completed`, `retry` and `dlq` survive to SQL [...] `retry` and `dlq` behave identically inside a transaction: they are not collapsed to a boolean (here: `dlq` dead-letters the message)",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(
                        json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"], "consumerGroup": QM, "leaseId": b.lease,
                        "status": "dlq", "error": "poison"}]}),
                    )
                    .await?;
                expect_commit(&out)?;
                expect_eq("dlq of the ack result", true, &out["results"][0]["dlq"])?;
                expect_eq(
                    "dead letters",
                    json!(["m"]),
                    &json!(dlq_ids(&cx, &q).await?),
                )
            }
        ),
        case!(
            "txn.v0.ack.retry",
            Must,
            "`status` is normalised exactly as on the ack route: `completed`, `retry` and `dlq` survive to SQL [...] `retry` and `dlq` behave identically inside a transaction (here: `retry` commits and the message is delivered again)",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(
                        json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"], "consumerGroup": QM, "leaseId": b.lease,
                        "status": "retry"}]}),
                    )
                    .await?;
                expect_commit(&out)?;
                let again = cx
                    .eventually(std::time::Duration::from_secs(5), || {
                        super::txn_acks::pop_batch(&cx, &q, "p", QM, 1, None)
                    })
                    .await?;
                expect(
                    again.as_ref().is_some_and(|b| b.ids() == ["m"]),
                    "m delivered again",
                    format!("{:?}", again.map(|b| b.ids())),
                )
            }
        ),
        case!(
            "txn.v0.ack.unrecognised-status",
            Must,
            "`status` is normalised exactly as on the ack route: [...] anything unrecognised becomes `failed`",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(
                        json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"], "consumerGroup": QM, "leaseId": b.lease,
                        "status": "finished-ish"}]}),
                    )
                    .await?;
                expect_commit(&out)?;
                expect_eq(
                    "success of the ack result",
                    true,
                    &out["results"][0]["success"],
                )
            }
        ),
        case!(
            "txn.v0.ack.error-recorded",
            Must,
            "`error` | string | absent; the reason recorded if this ack dead-letters",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let out = cx
                    .txn(
                        json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                        "partitionId": m["partitionId"], "consumerGroup": QM, "leaseId": b.lease,
                        "status": "dlq", "error": "card declined"}]}),
                    )
                    .await?;
                expect_commit(&out)?;
                let r = cx.get(&format!("/api/v1/dlq?queue={q}&limit=1000")).await?;
                crate::ctx::expect_status(&r, 200)?;
                expect_eq(
                    "the dead letter's errorMessage",
                    "card declined",
                    &r.body["messages"][0]["errorMessage"],
                )
            }
        ),
        case!(
            "txn.v0.retry.ack-alone",
            Must,
            "The ack side of the retry is safe on its own: a second attempt at the same ack resolves at or below the cursor and is reported as already committed rather than double-committing",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["m", "n"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let body = json!({"operations": [{"type": "ack", "transactionId": m["transactionId"],
                    "partitionId": m["partitionId"], "consumerGroup": QM, "status": "completed"}]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                let again = cx.txn(body).await?;
                expect_commit(&again)?;
                expect_eq(
                    "success of the repeated ack",
                    true,
                    &again["results"][0]["success"],
                )?;
                // Not double-committed: the next message is still there, once.
                let next = take(&cx, &q, "p", QM, 10, None).await?;
                expect_eq("what is left", json!(["n"]), &json!(next.ids()))
            }
        ),
    ]
}

fn rollbacks() -> Vec<Case> {
    vec![
        case!(
            "txn.v0.rollback.duplicate-push",
            Must,
            "a duplicate push: any pushed `transactionId` that already exists in its partition inside the deduplication window aborts the bundle with a `QDUP` error [...] A rolled-back transaction is a `200`. [...] Failure keeps the same shape, with the reason at the top level (`success: false`, `error`, `results: []`)",
            [Core],
            |cx: Ctx| async move {
                let (q, out_q) = (cx.name("q"), cx.name("out"));
                push_all(&cx, &out_q, "p", &["receipt"]).await?;
                let r = cx
                    .txn(json!({"operations": [
                        canary(&q),
                        {"type": "push", "items": [{"queue": out_q, "partition": "p", "transactionId": "receipt", "payload": 2}]}
                    ]}))
                    .await?;
                let error = expect_v0_rollback(&r)?;
                expect_prefix(&error, "QDUP")?;
                expect_no_messages(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.rollback.unknown-ack",
            Must,
            "an ack the broker cannot resolve: [...] one that does not fails the call with `QTXN ack references unknown transactionId; transaction rolled back` before the writing transaction runs at all, so nothing is written",
            [Core],
            |cx: Ctx| async move {
                let (q, src) = (cx.name("q"), cx.name("src"));
                push_all(&cx, &src, "p", &["m"]).await?;
                let b = take(&cx, &src, "p", QM, 1, None).await?;
                let r = cx
                    .txn(json!({"operations": [
                        canary(&q),
                        {"type": "ack", "transactionId": "no-such-message",
                         "partitionId": b.first()["partitionId"], "consumerGroup": QM}
                    ]}))
                    .await?;
                let error = expect_v0_rollback(&r)?;
                // The page's text is `QTXN ...`; Queen 2 says `QACK ...` with `reason:
                // "rejected_ack"` (transaction.md wins where the pages differ), so the
                // prefix is checked only of an answer in the page's shape, without `reason`.
                if r.get("reason").is_none() {
                    expect_prefix(&error, "QTXN")?;
                }
                expect_no_messages(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.rollback.wrong-lease",
            Must,
            "If you did supply a lease and it is expired or wrong, the ack fails and the transaction rolls back (a rejected ack: an invalid or expired lease)",
            [Core],
            |cx: Ctx| async move {
                let (q, src) = (cx.name("q"), cx.name("src"));
                push_all(&cx, &src, "p", &["m"]).await?;
                let b = take(&cx, &src, "p", QM, 1, None).await?;
                let m = b.first();
                let r = cx
                    .txn(json!({"operations": [
                        canary(&q),
                        {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                         "consumerGroup": QM, "leaseId": uuid::Uuid::now_v7().to_string()}
                    ]}))
                    .await?;
                expect_v0_rollback(&r)?;
                expect_no_messages(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.retry.qdup",
            Must,
            "a retry of an already-committed transaction comes back `success: false` with a `QDUP` error [...] The ack side of the retry is safe on its own: a second attempt at the same ack resolves at or below the cursor and is reported as already committed rather than double-committing",
            [Core],
            |cx: Ctx| async move {
                let (q, out_q) = (cx.name("q"), cx.name("out"));
                push_all(&cx, &q, "p", &["m"]).await?;
                let b = take(&cx, &q, "p", QM, 1, None).await?;
                let m = b.first();
                let body = json!({"operations": [
                    {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                     "consumerGroup": QM, "status": "completed"},
                    {"type": "push", "items": [{"queue": out_q, "partition": "p", "transactionId": "next-of-m", "payload": 1}]}
                ]});
                expect_commit(&cx.txn(body.clone()).await?)?;
                let again = cx.txn(body).await?;
                let error = expect_v0_rollback(&again)?;
                expect_prefix(&error, "QDUP")?;
                let m = stored(&cx, &out_q).await?;
                expect_eq("stored", json!(["next-of-m"]), &json!(txn_ids(&m)))
            }
        ),
        case!(
            "txn.v0.rollback.results-empty",
            Must,
            "`results` | array | one element per flattened operation, indexed in request order; empty on failure [...] Failure keeps the same shape, with the reason at the top level (`\"results\": []`)",
            [Core],
            |cx: Ctx| async move {
                let (q, src) = (cx.name("q"), cx.name("src"));
                push_all(&cx, &src, "p", &["m"]).await?;
                let b = take(&cx, &src, "p", QM, 1, None).await?;
                let m = b.first();
                let r = cx
                    .txn(json!({"operations": [
                        canary(&q),
                        {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                         "consumerGroup": QM, "leaseId": uuid::Uuid::now_v7().to_string()}
                    ]}))
                    .await?;
                expect_v0_rollback(&r)?;
                expect_eq("results of a rollback", json!([]), &r["results"])
            }
        ),
        case!(
            "txn.v0.rollback.expired-lease",
            Must,
            "If you did supply a lease and it is expired or wrong, the ack fails and the transaction rolls back (here: expired; the queue's `leaseTime` is 1 s)",
            [Core, Time],
            |cx: Ctx| async move {
                let (q, src) = (cx.name("q"), cx.name("src"));
                let w = cx.window_secs();
                configure(&cx, &src, json!({"leaseTime": w})).await?;
                push_all(&cx, &src, "p", &["m"]).await?;
                let b = take(&cx, &src, "p", QM, 1, Some(w as u32)).await?;
                tokio::time::sleep(cx.window() + Duration::from_millis(1500)).await;
                let m = b.first();
                let r = cx
                    .txn(json!({"operations": [
                        canary(&q),
                        {"type": "ack", "transactionId": m["transactionId"], "partitionId": m["partitionId"],
                         "consumerGroup": QM, "leaseId": b.lease}
                    ]}))
                    .await?;
                expect_v0_rollback(&r)?;
                expect_no_messages(&cx, &q).await
            }
        ),
        case!(
            "txn.v0.rollback.beyond-batch",
            Must,
            "A transaction rolls back when: [...] a rejected ack: an invalid or expired lease, or a position beyond the leased batch (here: the lease covers m1 only, and the ack names m2)",
            [Core],
            |cx: Ctx| async move {
                let (q, src) = (cx.name("q"), cx.name("src"));
                push_all(&cx, &src, "p", &["m1", "m2"]).await?;
                let b = take(&cx, &src, "p", QM, 1, None).await?;
                expect_eq("the leased batch", json!(["m1"]), &json!(b.ids()))?;
                let r = cx
                    .txn(json!({"operations": [
                        canary(&q),
                        ack_of("m2", &b.first()["partitionId"], Some(b.lease.as_str()))
                    ]}))
                    .await?;
                expect_v0_rollback(&r)?;
                expect_no_messages(&cx, &q).await
            }
        ),
    ]
}
