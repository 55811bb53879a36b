//! The acks of `POST /api/v1/transaction`: how an ack finds its lease, fenced and
//! unfenced acks, and what each ack status does. Also the small helpers the rollback
//! cases share (popping a partition, building acks, reading a partition or the DLQ).

// `Failure` (with its exchange) is the crate-wide error of every check.

use std::time::Duration;

use serde_json::{Value, json};

use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq};

/// The default consumer group (competing consumers).
pub(super) const QM: &str = "__QUEUE_MODE__";

/// How long a case waits for a released message to come back. A broker that releases
/// a resolved batch at once answers at the first poll; one that keeps the lease until
/// it expires answers once the short lease of [`SHORT_LEASE`] has run out.
const REDELIVERY: Duration = Duration::from_secs(5);

/// Lease seconds for pops whose message must come back after a verdict.
const SHORT_LEASE: u32 = 2;

/// A popped batch: its lease and its messages.
pub(super) struct Batch {
    /// The batch's `leaseId`.
    pub lease: String,
    /// The messages, in order.
    pub msgs: Vec<Value>,
}

impl Batch {
    /// The `transactionId`s of the messages.
    pub fn ids(&self) -> Vec<String> {
        txn_ids(&self.msgs)
    }

    /// The first message.
    pub fn first(&self) -> &Value {
        &self.msgs[0]
    }
}

/// The `transactionId`s of `msgs`.
fn txn_ids(msgs: &[Value]) -> Vec<String> {
    msgs.iter()
        .map(|m| m["transactionId"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Pops up to `batch` messages from one partition as `group` (a new group starts at the
/// beginning), with a lease of `lease` seconds when given; `None` when empty.
pub(super) async fn pop_batch(
    cx: &Ctx,
    q: &str,
    p: &str,
    group: &str,
    batch: usize,
    lease: Option<u32>,
) -> Result<Option<Batch>, Failure> {
    let mut path = format!(
        "/api/v1/pop/queue/{q}/partition/{p}?batch={batch}&consumerGroup={group}&subscriptionMode=all"
    );
    if let Some(s) = lease {
        path.push_str(&format!("&leaseSeconds={s}"));
    }
    Ok(cx.pop(&path).await?.map(|b| Batch {
        lease: b["leaseId"].as_str().unwrap_or_default().to_string(),
        msgs: b["messages"].as_array().cloned().unwrap_or_default(),
    }))
}

/// As [`pop_batch`], failing when the partition has nothing for the group.
pub(super) async fn take(
    cx: &Ctx,
    q: &str,
    p: &str,
    group: &str,
    batch: usize,
    lease: Option<u32>,
) -> Result<Batch, Failure> {
    pop_batch(cx, q, p, group, batch, lease)
        .await?
        .ok_or_else(|| Failure::new(format!("a message from {q}/{p}"), "an empty pop"))
}

/// Polls [`pop_batch`] until it delivers, failing after [`REDELIVERY`].
async fn take_eventually(
    cx: &Ctx,
    q: &str,
    p: &str,
    batch: usize,
    lease: Option<u32>,
) -> Result<Batch, Failure> {
    cx.eventually(REDELIVERY, || pop_batch(cx, q, p, QM, batch, lease))
        .await?
        .ok_or_else(|| {
            Failure::new(
                format!("a message from {q}/{p} within {REDELIVERY:?}"),
                "nothing was delivered",
            )
        })
}

/// An ack operation for a popped message, fenced by `lease` when given.
pub(super) fn ack_op(m: &Value, lease: Option<&str>, status: &str) -> Value {
    let mut op = json!({
        "type": "ack",
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "consumerGroup": m["consumerGroup"],
        "status": status,
    });
    if let Some(l) = lease {
        op["leaseId"] = json!(l);
    }
    op
}

/// An ack operation for a message known by its `transactionId` and `partitionId`.
pub(super) fn ack_of(txn: &str, partition_id: &Value, lease: Option<&str>) -> Value {
    ack_op(
        &json!({"transactionId": txn, "partitionId": partition_id, "consumerGroup": QM}),
        lease,
        "completed",
    )
}

/// Pushes `ids` to `q`/`p`, in order, each with a small payload.
pub(super) async fn push_all(cx: &Ctx, q: &str, p: &str, ids: &[&str]) -> Result<(), Failure> {
    for id in ids {
        let r = cx.push(q, p, id, json!({"id": id})).await?;
        expect_eq(&format!("push status of {id}"), "queued", &r["status"])?;
    }
    Ok(())
}

/// Fails unless the transaction committed.
pub(super) fn expect_commit(out: &Value) -> Result<(), Failure> {
    expect(
        out["success"] == json!(true),
        "a commit (success: true)",
        format!("{out}"),
    )
}

/// Whether `reason` is `want`; `rejected_ack` and `ack_rejected` are the same reason
/// (wire.md, Compatibility notes).
pub(super) fn same_reason(reason: &Value, want: &str) -> bool {
    match want {
        "rejected_ack" | "ack_rejected" => {
            reason == &json!("rejected_ack") || reason == &json!("ack_rejected")
        }
        _ => reason == &json!(want),
    }
}

/// Fails unless the transaction rolled back with `reason` and no results.
pub(super) fn expect_rollback(out: &Value, reason: &str) -> Result<(), Failure> {
    expect(
        out["success"] == json!(false) && same_reason(&out["reason"], reason),
        format!("a rollback (success: false, reason: {reason:?})"),
        format!("{out}"),
    )?;
    expect_eq("results", json!([]), &out["results"])
}

/// Every message of `q`/`p`, read through a new group (autoAck, from the beginning)
/// so no other group's cursor or lease is touched; their `transactionId`s.
pub(super) async fn peek_ids(cx: &Ctx, q: &str, p: &str) -> Result<Vec<String>, Failure> {
    let group = cx.name(&format!("peek-{}", uuid::Uuid::new_v4().simple()));
    let path = format!(
        "/api/v1/pop/queue/{q}/partition/{p}?batch=1000&consumerGroup={group}&subscriptionMode=all&autoAck=true"
    );
    Ok(cx
        .pop(&path)
        .await?
        .map(|b| txn_ids(b["messages"].as_array().map_or(&[], Vec::as_slice)))
        .unwrap_or_default())
}

/// The `transactionId`s of `q`'s dead letters.
pub(super) async fn dlq_ids(cx: &Ctx, q: &str) -> Result<Vec<String>, Failure> {
    let r = cx.get(&format!("/api/v1/dlq?queue={q}&limit=1000")).await?;
    crate::ctx::expect_status(&r, 200)?;
    Ok(txn_ids(
        r.body["messages"].as_array().map_or(&[], Vec::as_slice),
    ))
}

/// Creates `q` with `options` (POST /api/v1/configure).
pub(super) async fn configure(cx: &Ctx, q: &str, options: Value) -> Result<(), Failure> {
    let r = cx
        .post("/api/v1/configure", json!({"queue": q, "options": options}))
        .await?;
    crate::ctx::expect_status(&r, 200)?;
    expect_eq("configured", true, &r.body["configured"])
}

/// Sends a transaction that acks `m` under `lease` with `status` and expects it to commit.
async fn ack_commits(cx: &Ctx, m: &Value, lease: &str, status: &str) -> Result<(), Failure> {
    let out = cx
        .txn(json!({"operations": [ack_op(m, Some(lease), status)]}))
        .await?;
    expect_commit(&out)
}

/// Fails unless `got` is `want`, naming what was popped.
fn expect_ids(what: &str, want: &[&str], got: &[String]) -> Result<(), Failure> {
    expect(
        got.iter().map(String::as_str).eq(want.iter().copied()),
        format!("{what}: {want:?}"),
        format!("{what}: {got:?}"),
    )
}

/// Pops one message from a fresh queue and answers it with its lease.
async fn one_leased(cx: &Ctx, what: &str, ids: &[&str], batch: usize) -> Result<Batch, Failure> {
    let q = cx.name(what);
    push_all(cx, &q, "p", ids).await?;
    take(cx, &q, "p", QM, batch, None).await
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        // How an ack finds its lease.
        case!(
            "txn.ack.lease.own-first",
            Must,
            "Each ack gets at most one lease, found in this order: 1. its own leaseId;",
            [Core],
            |cx: Ctx| async move {
                let a = one_leased(&cx, "qa", &["a-1"], 1).await?;
                let b = one_leased(&cx, "qb", &["b-1"], 1).await?;
                // Its own (wrong) lease wins over the right one in requiredLeases.
                let out = cx
                    .txn(json!({
                        "operations": [ack_op(a.first(), Some(&b.lease), "completed")],
                        "requiredLeases": [a.lease],
                    }))
                    .await?;
                expect_rollback(&out, "rejected_ack")?;
                // Its own (right) lease wins over a wrong one in requiredLeases.
                let out = cx
                    .txn(json!({
                        "operations": [ack_op(a.first(), Some(&a.lease), "completed")],
                        "requiredLeases": [b.lease],
                    }))
                    .await?;
                expect_commit(&out)
            }
        ),
        case!(
            "txn.ack.lease.required-leases",
            Must,
            "2. otherwise the one lease named by requiredLeases and the other acks' leaseIds together, when they all name the same lease;",
            [Core],
            |cx: Ctx| async move {
                let a = one_leased(&cx, "qa", &["a-1"], 1).await?;
                let b = one_leased(&cx, "qb", &["b-1"], 1).await?;
                // No leaseId of its own: requiredLeases supplies one, and it is the wrong one.
                for leases in [json!([b.lease]), json!([b.lease, b.lease])] {
                    let out = cx
                        .txn(json!({
                            "operations": [ack_op(a.first(), None, "completed")],
                            "requiredLeases": leases,
                        }))
                        .await?;
                    expect_rollback(&out, "rejected_ack")?;
                }
                let out = cx
                    .txn(json!({
                        "operations": [ack_op(a.first(), None, "completed")],
                        "requiredLeases": [a.lease],
                    }))
                    .await?;
                expect_commit(&out)
            }
        ),
        case!(
            "txn.ack.lease.other-acks",
            Must,
            "2. otherwise the one lease named by requiredLeases and the other acks' leaseIds together, when they all name the same lease;",
            [Core],
            |cx: Ctx| async move {
                let a = one_leased(&cx, "qa", &["a-1", "a-2"], 2).await?;
                let b = one_leased(&cx, "qb", &["b-1"], 1).await?;
                // a-1 takes b-1's lease from the other ack, alone and with requiredLeases.
                for leases in [json!([]), json!([b.lease])] {
                    let out = cx
                        .txn(json!({
                            "operations": [
                                ack_op(b.first(), Some(&b.lease), "completed"),
                                ack_op(a.first(), None, "completed"),
                            ],
                            "requiredLeases": leases,
                        }))
                        .await?;
                    expect_rollback(&out, "rejected_ack")?;
                }
                // a-2 takes a-1's lease, the right one.
                let out = cx
                    .txn(json!({"operations": [
                        ack_op(&a.msgs[0], Some(&a.lease), "completed"),
                        ack_op(&a.msgs[1], None, "completed"),
                    ]}))
                    .await?;
                expect_commit(&out)
            }
        ),
        case!(
            "txn.ack.lease.several-named-unfenced",
            Must,
            "3. otherwise none.",
            [Core],
            |cx: Ctx| async move {
                let a = one_leased(&cx, "qa", &["a-1", "a-2"], 2).await?;
                let b = one_leased(&cx, "qb", &["b-1"], 1).await?;
                let c = one_leased(&cx, "qc", &["c-1"], 1).await?;
                // requiredLeases names two leases, neither a-1's: no lease, unfenced.
                let out = cx
                    .txn(json!({
                        "operations": [ack_op(&a.msgs[0], None, "completed")],
                        "requiredLeases": [b.lease, c.lease],
                    }))
                    .await?;
                expect_commit(&out)?;
                // requiredLeases and another ack's leaseId together name two leases.
                let out = cx
                    .txn(json!({
                        "operations": [
                            ack_op(b.first(), Some(&b.lease), "completed"),
                            ack_op(&a.msgs[1], None, "completed"),
                        ],
                        "requiredLeases": [c.lease],
                    }))
                    .await?;
                expect_commit(&out)
            }
        ),
        case!(
            "txn.ack.lease.required-leases-alone",
            Must,
            "requiredLeases fences nothing on its own: it only supplies the lease of the acks in the same body.",
            [Core],
            |cx: Ctx| async move {
                let out_q = cx.name("out");
                // A lease the broker no longer holds (its batch was acked), and one it
                // never minted.
                let b = one_leased(&cx, "qb", &["b-1"], 1).await?;
                ack_commits(&cx, b.first(), &b.lease, "completed").await?;
                let unknown = uuid::Uuid::now_v7().to_string();
                for (i, lease) in [&b.lease, &unknown].into_iter().enumerate() {
                    let out = cx
                        .txn(json!({
                            "operations": [{"type": "push", "items": [
                                {"queue": out_q, "partition": "p", "transactionId": format!("o-{i}"), "payload": i}
                            ]}],
                            "requiredLeases": [lease],
                        }))
                        .await?;
                    expect_commit(&out)?;
                }
                // An ack with its own live lease is not stopped by a dead one beside it.
                let a = one_leased(&cx, "qa", &["a-1"], 1).await?;
                let out = cx
                    .txn(json!({
                        "operations": [ack_op(a.first(), Some(&a.lease), "completed")],
                        "requiredLeases": [b.lease, unknown],
                    }))
                    .await?;
                expect_commit(&out)?;
                let got = peek_ids(&cx, &out_q, "p").await?;
                expect_ids("pushed messages", &["o-0", "o-1"], &got)
            }
        ),
        // Fenced acks.
        case!(
            "txn.ack.fenced.expired-lease",
            Must,
            "If not (the lease expired, the message went to another worker, an earlier commit already acked it and released the lease), the whole transaction rolls back with reason: \"rejected_ack\".",
            [Core, Time],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["e-1"]).await?;
                let a = take(&cx, &q, "p", QM, 1, Some(cx.window_secs() as u32)).await?;
                tokio::time::sleep(cx.window() + Duration::from_millis(200)).await;
                let out = cx
                    .txn(json!({"operations": [ack_op(a.first(), Some(&a.lease), "completed")]}))
                    .await?;
                expect_rollback(&out, "rejected_ack")
            }
        ),
        case!(
            "txn.ack.fenced.other-worker",
            Must,
            "If not (the lease expired, the message went to another worker, an earlier commit already acked it and released the lease), the whole transaction rolls back with reason: \"rejected_ack\".",
            [Core, Time],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["w-1"]).await?;
                let first = take(&cx, &q, "p", QM, 1, Some(cx.window_secs() as u32)).await?;
                tokio::time::sleep(cx.window() + Duration::from_millis(200)).await;
                let second = take(&cx, &q, "p", QM, 1, None).await?;
                expect_ids("redelivered", &["w-1"], &second.ids())?;
                expect(
                    second.lease != first.lease,
                    "a new lease for the second worker",
                    format!("the same lease {}", first.lease),
                )?;
                let out = cx
                    .txn(json!({"operations": [ack_op(first.first(), Some(&first.lease), "completed")]}))
                    .await?;
                expect_rollback(&out, "rejected_ack")?;
                // The worker that holds it now acks it.
                let out = cx
                    .txn(json!({"operations": [ack_op(second.first(), Some(&second.lease), "completed")]}))
                    .await?;
                expect_commit(&out)
            }
        ),
        case!(
            "txn.ack.fenced.already-acked",
            Must,
            "If not (the lease expired, the message went to another worker, an earlier commit already acked it and released the lease), the whole transaction rolls back with reason: \"rejected_ack\".",
            [Core],
            |cx: Ctx| async move {
                let a = one_leased(&cx, "q", &["k-1"], 1).await?;
                ack_commits(&cx, a.first(), &a.lease, "completed").await?;
                let out = cx
                    .txn(json!({"operations": [ack_op(a.first(), Some(&a.lease), "completed")]}))
                    .await?;
                expect_rollback(&out, "rejected_ack")
            }
        ),
        case!(
            "txn.ack.fenced.outside-batch",
            Must,
            "The lease must be the one the partition holds for that group, not expired, and the message must be inside the leased batch.",
            [Core],
            |cx: Ctx| async move {
                // The partition holds o-1 and o-2; the lease covers o-1 only.
                let a = one_leased(&cx, "q", &["o-1", "o-2"], 1).await?;
                expect_ids("leased batch", &["o-1"], &a.ids())?;
                let out = cx
                    .txn(json!({"operations": [
                        ack_of("o-2", &a.first()["partitionId"], Some(&a.lease))
                    ]}))
                    .await?;
                expect_rollback(&out, "rejected_ack")?;
                // The message inside the batch acks under the same lease.
                ack_commits(&cx, a.first(), &a.lease, "completed").await
            }
        ),
        // Unfenced acks.
        case!(
            "txn.ack.unfenced.held-by-another",
            Must,
            "The broker skips the lease check: it acks the message even if another worker holds it.",
            [Core, Time],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["h-1", "h-2"]).await?;
                // Another worker holds h-1 (for a second).
                let a = take(&cx, &q, "p", QM, 1, Some(cx.window_secs() as u32)).await?;
                expect_ids("held batch", &["h-1"], &a.ids())?;
                let out = cx
                    .txn(json!({"operations": [ack_op(a.first(), None, "completed")]}))
                    .await?;
                expect_commit(&out)?;
                // Once that lease is over, h-1 is not delivered again: it was acked.
                tokio::time::sleep(cx.window() + Duration::from_millis(200)).await;
                let next = take(&cx, &q, "p", QM, 1, None).await?;
                expect_ids("next delivery", &["h-2"], &next.ids())
            }
        ),
        case!(
            "txn.ack.unfenced.not-found",
            Must,
            "It still rolls back with rejected_ack when the message is not found after the group's cursor, or was already acked with a failed, retry or dlq status.",
            [Core],
            |cx: Ctx| async move {
                let a = one_leased(&cx, "q", &["n-1"], 1).await?;
                let out = cx
                    .txn(json!({"operations": [
                        ack_of("no-such-message", &a.first()["partitionId"], None)
                    ]}))
                    .await?;
                expect_rollback(&out, "rejected_ack")
            }
        ),
        case!(
            "txn.ack.unfenced.after-failed",
            Must,
            "It still rolls back with rejected_ack when the message is not found after the group's cursor, or was already acked with a failed, retry or dlq status.",
            [Core],
            |cx: Ctx| async move { unfenced_after(&cx, "failed").await }
        ),
        case!(
            "txn.ack.unfenced.after-retry",
            Must,
            "It still rolls back with rejected_ack when the message is not found after the group's cursor, or was already acked with a failed, retry or dlq status.",
            [Core],
            |cx: Ctx| async move { unfenced_after(&cx, "retry").await }
        ),
        case!(
            "txn.ack.unfenced.after-dlq",
            Must,
            "It still rolls back with rejected_ack when the message is not found after the group's cursor, or was already acked with a failed, retry or dlq status.",
            [Core],
            |cx: Ctx| async move { unfenced_after(&cx, "dlq").await }
        ),
        case!(
            "txn.ack.unfenced.completed-twice-noop",
            Must,
            "A completed ack of a message that was already acked is a no-op, and the rest of the transaction commits.",
            [Core],
            |cx: Ctx| async move {
                let out_q = cx.name("out");
                let a = one_leased(&cx, "q", &["c-1"], 1).await?;
                ack_commits(&cx, a.first(), &a.lease, "completed").await?;
                let out = cx
                    .txn(json!({"operations": [
                        ack_op(a.first(), None, "completed"),
                        {"type": "push", "items": [{"queue": out_q, "partition": "p", "transactionId": "after", "payload": 1}]},
                    ]}))
                    .await?;
                expect_commit(&out)?;
                expect_eq("results[0].success", true, &out["results"][0]["success"])?;
                let got = peek_ids(&cx, &out_q, "p").await?;
                expect_ids("pushed messages", &["after"], &got)
            }
        ),
        // Ack statuses.
        case!(
            "txn.ack.status.failed-counts-attempt",
            Must,
            "failed counts one attempt: the message is redelivered while the queue's retryLimit lasts, then dead-lettered (or dropped with deadLetterQueue: false).",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let retry_limit = 2;
                configure(&cx, &q, json!({"retryLimit": retry_limit})).await?;
                push_all(&cx, &q, "p", &["f-1", "f-2"]).await?;
                // retryLimit + 1 deliveries of f-1, each acked failed.
                for n in 1..=retry_limit + 1 {
                    let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                    expect_ids(&format!("delivery {n}"), &["f-1"], &b.ids())?;
                    let mut op = ack_op(b.first(), Some(&b.lease), "failed");
                    op["error"] = json!("boom");
                    expect_commit(&cx.txn(json!({"operations": [op]})).await?)?;
                }
                let dead = dlq_ids(&cx, &q).await?;
                expect_ids("dead letters", &["f-1"], &dead)?;
                // Not delivered again: the next delivery is f-2.
                let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                expect_ids("next delivery", &["f-2"], &b.ids())
            }
        ),
        case!(
            "txn.ack.status.failed-no-dlq-drops",
            Must,
            "failed counts one attempt: the message is redelivered while the queue's retryLimit lasts, then dead-lettered (or dropped with deadLetterQueue: false).",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 0, "deadLetterQueue": false})).await?;
                push_all(&cx, &q, "p", &["d-1", "d-2"]).await?;
                let b = take(&cx, &q, "p", QM, 1, Some(SHORT_LEASE)).await?;
                ack_commits(&cx, b.first(), &b.lease, "failed").await?;
                let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                expect_ids("next delivery", &["d-2"], &b.ids())?;
                let dead = dlq_ids(&cx, &q).await?;
                expect_ids("dead letters", &[], &dead)
            }
        ),
        case!(
            "txn.ack.status.retry-not-counted",
            Must,
            "retry releases it for redelivery without counting an attempt.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 1})).await?;
                push_all(&cx, &q, "p", &["r-1", "r-2"]).await?;
                // Two retries, then one failed: with retryLimit 1 it still comes back.
                for (n, status) in ["retry", "retry", "failed"].into_iter().enumerate() {
                    let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                    expect_ids(&format!("delivery {}", n + 1), &["r-1"], &b.ids())?;
                    ack_commits(&cx, b.first(), &b.lease, status).await?;
                }
                let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                expect_ids(
                    "delivery after two retries and one failure",
                    &["r-1"],
                    &b.ids(),
                )?;
                let dead = dlq_ids(&cx, &q).await?;
                expect_ids("dead letters", &[], &dead)
            }
        ),
        case!(
            "txn.ack.status.dlq-now",
            Must,
            "dlq dead-letters it now.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["x-1", "x-2"]).await?;
                let b = take(&cx, &q, "p", QM, 1, Some(SHORT_LEASE)).await?;
                ack_commits(&cx, b.first(), &b.lease, "dlq").await?;
                let dead = dlq_ids(&cx, &q).await?;
                expect_ids("dead letters", &["x-1"], &dead)?;
                let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                expect_ids("next delivery", &["x-2"], &b.ids())
            }
        ),
        case!(
            "txn.ack.status.unknown-is-failed",
            Must,
            "Ack status: anything else (case-sensitive) is treated as failed. (wire.md section 5)",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 1})).await?;
                push_all(&cx, &q, "p", &["u-1", "u-2"]).await?;
                // An unknown status counts one attempt: within retryLimit 1, u-1 comes back
                // (so it was neither completed nor dead-lettered) ...
                let b = take(&cx, &q, "p", QM, 1, Some(SHORT_LEASE)).await?;
                ack_commits(&cx, b.first(), &b.lease, "bogus").await?;
                let b = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                expect_ids("delivery after an unknown status", &["u-1"], &b.ids())?;
                expect_ids("dead letters", &[], &dlq_ids(&cx, &q).await?)?;
                // ... and a second one exhausts it (so it was not a retry). Case matters.
                ack_commits(&cx, b.first(), &b.lease, "Completed").await?;
                let dead = dlq_ids(&cx, &q).await?;
                expect_ids("dead letters after \"Completed\"", &["u-1"], &dead)
            }
        ),
        case!(
            "txn.ack.status.completed-aliases",
            Must,
            "Ack status completed (default; also success, acked, ok): the message is done for this group. (wire.md section 5)",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_all(&cx, &q, "p", &["s-1", "s-2", "s-3", "s-4"]).await?;
                let b = take(&cx, &q, "p", QM, 3, Some(SHORT_LEASE)).await?;
                expect_ids("leased batch", &["s-1", "s-2", "s-3"], &b.ids())?;
                let out = cx
                    .txn(json!({"operations": [
                        ack_op(&b.msgs[0], Some(&b.lease), "success"),
                        ack_op(&b.msgs[1], Some(&b.lease), "acked"),
                        ack_op(&b.msgs[2], Some(&b.lease), "ok"),
                    ]}))
                    .await?;
                expect_commit(&out)?;
                // None of them comes back (strict order would put a failed one first),
                // and none was dead-lettered.
                let next = take_eventually(&cx, &q, "p", 1, Some(SHORT_LEASE)).await?;
                expect_ids("next delivery", &["s-4"], &next.ids())?;
                let dead = dlq_ids(&cx, &q).await?;
                expect_ids("dead letters", &[], &dead)
            }
        ),
    ]
}

/// A message acked (fenced) with `status` is then acked `completed` without a lease:
/// the second rolls back with `rejected_ack`.
async fn unfenced_after(cx: &Ctx, status: &str) -> Result<(), Failure> {
    let a = one_leased(cx, "q", &["m-1"], 1).await?;
    ack_commits(cx, a.first(), &a.lease, status).await?;
    let out = cx
        .txn(json!({"operations": [ack_op(a.first(), None, "completed")]}))
        .await?;
    expect_rollback(&out, "rejected_ack")
}
