//! Consumer-group administration (`mock-broker/ROUTES.md` 4.4 and 4.5; `wire.md` 4a
//! leaves them to the official client's routes and its live tests, `queen-mq` 2.7.0
//! `tests/admin.rs`): moving a group's subscription time, and forgetting a group on
//! one queue or on every queue.
//!
//! The cases need [`Capability::Admin`](crate::case::Capability::Admin) and the
//! consumer rules of [`Capability::Cursor`](crate::case::Capability::Cursor).

use std::time::Duration;

use serde_json::{Value, json};

use super::core::{
    ack, ack_of, expect_error, expect_fields, msgs, pop_part_path, pop_path, push_ids, txn_ids,
};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq, expect_status};

/// Moving the subscription time.
const SUBSCRIPTION: &str = "POST /api/v1/consumer-groups/{group}/subscription `{subscriptionTimestamp}` moves the start of every subscription of the group to that time: a partition the group has not read yet is read from the first message created at or after it, while cursors it already has stay. The answer is `{success: true, consumerGroup, newTimestamp (the time as sent), rowsUpdated}`; it updates and never creates (`rowsUpdated: 0` for a group that never subscribed); a missing or unparsable time is 400.";
/// Deleting on one queue.
const DELETE_ONE: &str = "DELETE /api/v1/consumer-groups/{group}/queues/{queue} forgets the group on that queue only: its cursors there go (the next pop replays the queue from its start), its cursor on any other queue stays. The answer is `{success: true, consumerGroup, queueName, deletedPartitions, metadataDeleted}`.";
/// Deleting everywhere.
const DELETE_ALL: &str = "DELETE /api/v1/consumer-groups/{group} forgets the group on every queue at once: `deletedPartitions` counts every cursor removed (one per queue here), `metadataDeleted: true`, and each queue replays from its start.";
/// Deleting releases the lease.
const DELETE_LEASE: &str = "Forgetting a group releases its lease on each partition: the batch it held is delivered again at once, and an ack under the old lease is refused.";
/// `deleteMetadata=false`.
const KEEP_METADATA: &str = "With `deleteMetadata=false` the group's subscription is kept: the group re-reads each partition from its subscription's start (in `new` mode the time it first subscribed), not from the beginning; the answer says `metadataDeleted: false`.";

/// Pushes `ids` to `q`/`p` and has `g` (mode all) pop and complete them all.
async fn consume(cx: &Ctx, q: &str, g: &str, ids: &[&str]) -> Result<(), Failure> {
    push_ids(cx, q, "p", ids).await?;
    let m = msgs(&cx.pop(&pop_path(q, g, "&batch=100")).await?);
    expect_eq(&format!("{g} reads {q}"), json!(ids), &json!(txn_ids(&m)))?;
    let r = ack(cx, ack_of(&m[m.len() - 1], "completed")).await?;
    expect_eq("the ack of the batch's last message", true, &r["success"])
}

/// The next pop of `q` by `g` (mode all unless it has a subscription): its ids.
async fn replay(cx: &Ctx, q: &str, g: &str) -> Result<Value, Failure> {
    Ok(json!(txn_ids(&msgs(
        &cx.pop(&pop_path(q, g, "&batch=100")).await?
    ))))
}

/// DELETE `path`; answers the 200 body.
async fn delete(cx: &Ctx, path: &str) -> Result<Value, Failure> {
    let r = cx.delete(path).await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "surface.groups.subscription.moves-start",
            Must,
            SUBSCRIPTION,
            [Core, Cursor, Admin],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                // The group subscribes (mode all) by reading partition a.
                push_ids(&cx, &q, "a", &["a0"]).await?;
                let m = msgs(&cx.pop(&pop_part_path(&q, "a", &g, "")).await?);
                expect_eq("g reads a", json!(["a0"]), &json!(txn_ids(&m)))?;
                ack(&cx, ack_of(&m[0], "completed")).await?;
                push_ids(&cx, &q, "b", &["old"]).await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                push_ids(&cx, &q, "b", &["new"]).await?;
                // The time of "new", as another group sees it.
                let seen = msgs(
                    &cx.pop(&pop_part_path(&q, "b", &cx.name("reader"), "&batch=10"))
                        .await?,
                );
                expect_eq(
                    "another group's pop of b",
                    json!(["old", "new"]),
                    &json!(txn_ids(&seen)),
                )?;
                let at = seen[1]["createdAt"].clone();
                expect(
                    at.is_string() && seen[0]["createdAt"] != at,
                    "two different createdAt times for old and new",
                    format!("{} and {at}", seen[0]["createdAt"]),
                )?;
                let r = cx
                    .post(
                        &format!("/api/v1/consumer-groups/{g}/subscription"),
                        json!({"subscriptionTimestamp": at}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("success", true, &r.body["success"])?;
                expect_eq("consumerGroup", g.clone(), &r.body["consumerGroup"])?;
                expect_eq("newTimestamp", at.clone(), &r.body["newTimestamp"])?;
                expect(
                    r.body["rowsUpdated"].as_u64().is_some_and(|n| n >= 1),
                    "rowsUpdated at least 1 (the group's subscription of the queue)",
                    r.body.to_string(),
                )?;
                let b = msgs(
                    &cx.pop(&format!(
                        "/api/v1/pop/queue/{q}/partition/b?consumerGroup={g}&batch=10"
                    ))
                    .await?,
                );
                expect_eq(
                    "g's first pop of b (never read): from the new time",
                    json!(["new"]),
                    &json!(txn_ids(&b)),
                )?;
                let r = cx
                    .post(
                        &format!("/api/v1/consumer-groups/{}/subscription", cx.name("nobody")),
                        json!({"subscriptionTimestamp": at}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                expect_eq(
                    "a group that never subscribed: rowsUpdated",
                    0,
                    &r.body["rowsUpdated"],
                )?;
                for body in [json!({}), json!({"subscriptionTimestamp": "soon"})] {
                    let r = cx
                        .post(&format!("/api/v1/consumer-groups/{g}/subscription"), body)
                        .await?;
                    expect_error(&r, 400, "bad_request")?;
                }
                Ok(())
            }
        ),
        case!(
            "surface.groups.delete.one-queue",
            Must,
            DELETE_ONE,
            [Core, Cursor, Admin],
            |cx: Ctx| async move {
                let (q, r, g) = (cx.name("q"), cx.name("r"), cx.name("g"));
                consume(&cx, &q, &g, &["q0", "q1"]).await?;
                consume(&cx, &r, &g, &["r0", "r1"]).await?;
                let out = delete(
                    &cx,
                    &format!("/api/v1/consumer-groups/{g}/queues/{q}?deleteMetadata=true"),
                )
                .await?;
                expect_fields(
                    "the answer",
                    &json!({"success": true, "consumerGroup": g, "queueName": q,
                            "deletedPartitions": 1, "metadataDeleted": true}),
                    &out,
                )?;
                expect_eq(
                    "g's pop of q (forgotten)",
                    json!(["q0", "q1"]),
                    &replay(&cx, &q, &g).await?,
                )?;
                expect_eq(
                    "g's pop of r (its cursor kept)",
                    json!([]),
                    &replay(&cx, &r, &g).await?,
                )?;
                let none = delete(
                    &cx,
                    &format!("/api/v1/consumer-groups/{g}/queues/{}", cx.name("ghost")),
                )
                .await?;
                expect_eq(
                    "a queue the group never read: deletedPartitions",
                    0,
                    &none["deletedPartitions"],
                )
            }
        ),
        case!(
            "surface.groups.delete.everywhere",
            Must,
            DELETE_ALL,
            [Core, Cursor, Admin],
            |cx: Ctx| async move {
                let (q, r, g) = (cx.name("q"), cx.name("r"), cx.name("g"));
                consume(&cx, &q, &g, &["q0", "q1"]).await?;
                consume(&cx, &r, &g, &["r0", "r1"]).await?;
                let out = delete(&cx, &format!("/api/v1/consumer-groups/{g}")).await?;
                expect_eq("success", true, &out["success"])?;
                expect_eq("consumerGroup", g.clone(), &out["consumerGroup"])?;
                expect(
                    out["deletedPartitions"].as_u64().is_some_and(|n| n >= 2),
                    "deletedPartitions at least 2 (one cursor per queue)",
                    out.to_string(),
                )?;
                expect_eq("metadataDeleted", true, &out["metadataDeleted"])?;
                expect_eq(
                    "g's pop of q",
                    json!(["q0", "q1"]),
                    &replay(&cx, &q, &g).await?,
                )?;
                expect_eq(
                    "g's pop of r",
                    json!(["r0", "r1"]),
                    &replay(&cx, &r, &g).await?,
                )
            }
        ),
        case!(
            "surface.groups.delete.releases-lease",
            Must,
            DELETE_LEASE,
            [Core, Cursor, Admin],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let held = msgs(&cx.pop(&pop_path(&q, &g, "&batch=2")).await?);
                expect_eq(
                    "the leased batch",
                    json!(["m0", "m1"]),
                    &json!(txn_ids(&held)),
                )?;
                let out = delete(&cx, &format!("/api/v1/consumer-groups/{g}/queues/{q}")).await?;
                expect_eq("deletedPartitions", 1, &out["deletedPartitions"])?;
                expect_eq(
                    "g's pop right after (the lease released)",
                    json!(["m0", "m1"]),
                    &replay(&cx, &q, &g).await?,
                )?;
                let r = ack(&cx, ack_of(&held[1], "completed")).await?;
                expect(
                    r["success"] == json!(false),
                    "an ack under the forgotten lease: success: false",
                    r.to_string(),
                )
            }
        ),
        case!(
            "surface.groups.delete.keep-metadata",
            Should,
            KEEP_METADATA,
            [Core, Cursor, Admin],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["before"]).await?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                let new_mode = format!(
                    "/api/v1/pop/queue/{q}?consumerGroup={g}&subscriptionMode=new&batch=10"
                );
                let first = msgs(&cx.pop(&new_mode).await?);
                expect_eq(
                    "g's first pop (mode new)",
                    json!([]),
                    &json!(txn_ids(&first)),
                )?;
                tokio::time::sleep(Duration::from_millis(20)).await;
                push_ids(&cx, &q, "p", &["after"]).await?;
                let m = msgs(&cx.pop(&new_mode).await?);
                expect_eq("g's next pop", json!(["after"]), &json!(txn_ids(&m)))?;
                ack(&cx, ack_of(&m[0], "completed")).await?;
                let out = delete(
                    &cx,
                    &format!("/api/v1/consumer-groups/{g}?deleteMetadata=false"),
                )
                .await?;
                expect_eq("deletedPartitions", 1, &out["deletedPartitions"])?;
                expect_eq("metadataDeleted", false, &out["metadataDeleted"])?;
                expect_eq(
                    "g's pop after (its subscription kept: from its time)",
                    json!(["after"]),
                    &replay(&cx, &q, &g).await?,
                )
            }
        ),
    ]
}
