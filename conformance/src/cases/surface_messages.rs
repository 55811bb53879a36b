//! Messages handled by hand (`mock-broker/ROUTES.md` 3.3 and 3.4; `wire.md` says
//! nothing of these routes, the official client's live tests pin them: `queen-mq`
//! 2.7.0 `tests/admin.rs` `a_dead_letter_row_can_be_deleted_and_a_live_message_cannot`,
//! `tests/coverage.rs` `a_message_can_be_inspected_retried_and_dead_lettered_by_hand`):
//! a dead letter retried (pushed again) or deleted; a live message is "not found" for
//! both.
//!
//! The message detail (`ROUTES.md` 3.2) says for each group whether it `consumed` the
//! message, as the Python client's test of a pop committed at delivery reads it
//! (`queen-mq` 2.6.0 (Python) `tests/test_pop.py`
//! `test_pop_with_commit_on_delivery_is_committed_at_delivery`).
//!
//! The cases need [`Capability::Admin`](crate::case::Capability::Admin).

use serde_json::{Value, json};

use super::core::{ack, ack_of, msgs, pop_path, push_ids, stored, txn_ids};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, Resp, expect, expect_eq, expect_status};

/// Retry.
const RETRY: &str = "POST /api/v1/messages/{partitionId}/{transactionId}/retry replays a dead letter: the message (payload, transactionId) is pushed again to its partition as a new message at the next offset, its dead-letter rows are removed, and acks by its transactionId then reach the replay. Retry acts on dead letters only: for a live message it is 404 and pushes nothing.";
/// Delete.
const DELETE: &str = "DELETE /api/v1/messages/{partitionId}/{transactionId} removes the message's dead-letter rows (`{success: true, transactionId, deadLettersRemoved}`) and delivers nothing again; a second delete finds nothing (404), and a live message is 404 too: only dead letters can be deleted by hand.";

/// Consumed.
const CONSUMED: &str = "GET /api/v1/messages/{partitionId}/{transactionId} gives each group of `consumerGroups` a `consumed` flag: `true` once the group's cursor is past the message, so a pop with `autoAck=true` (the client's `commit_on_delivery()`) holds no lease (`leaseId` empty) and its message reads `consumed: true` with `leaseExpiresAt: null` at once; a message not popped yet, or popped under a lease, is not consumed.";

/// `/api/v1/messages/{partitionId}/{transactionId}` of a popped message.
fn address(m: &Value) -> String {
    format!(
        "/api/v1/messages/{}/{}",
        m["partitionId"].as_str().unwrap_or_default(),
        m["transactionId"].as_str().unwrap_or_default()
    )
}

/// Fails unless the answer is a 404 error body about the message, not about the route
/// (`code` is an open set, `wire.md` section 1; `no_such_route` says the route is
/// missing).
fn expect_not_found(what: &str, r: &Resp) -> Result<(), Failure> {
    expect(
        r.status == 404 && r.body["error"].is_string() && r.body["code"] != json!("no_such_route"),
        format!("{what}: HTTP 404 with an error body (not `no_such_route`)"),
        format!("{what}: HTTP {}: {}", r.status, r.body),
    )
}

/// GET /api/v1/dlq?queue=q: the dead letters' `transactionId`s.
async fn dead(cx: &Ctx, q: &str) -> Result<Value, Failure> {
    let r = cx.get(&format!("/api/v1/dlq?queue={q}&limit=1000")).await?;
    expect_status(&r, 200)?;
    let m = r.body["messages"].as_array().cloned().unwrap_or_default();
    Ok(json!(txn_ids(&m)))
}

/// Pushes `live` and `poison` to `q`/`p`; `g` pops both, completes `live`, dead-letters
/// `poison`; answers the two popped messages.
async fn dead_letter(cx: &Ctx, q: &str, g: &str) -> Result<Vec<Value>, Failure> {
    push_ids(cx, q, "p", &["live", "poison"]).await?;
    let m = msgs(&cx.pop(&pop_path(q, g, "&batch=1")).await?);
    expect_eq("g's first pop", json!(["live"]), &json!(txn_ids(&m)))?;
    for (what, path) in [
        ("a retry", format!("{}/retry", address(&m[0]))),
        ("a delete", address(&m[0])),
    ] {
        let r = if what == "a retry" {
            cx.post(&path, json!({})).await?
        } else {
            cx.delete(&path).await?
        };
        expect_not_found(&format!("{what} of a live (leased) message"), &r)?;
    }
    ack(cx, ack_of(&m[0], "completed")).await?;
    let p = msgs(&cx.pop(&pop_path(q, g, "&batch=1")).await?);
    expect_eq("g's second pop", json!(["poison"]), &json!(txn_ids(&p)))?;
    let r = ack(cx, ack_of(&p[0], "dlq")).await?;
    expect_eq("the dlq ack: dlq", true, &r["dlq"])?;
    expect_eq("the DLQ", json!(["poison"]), &dead(cx, q).await?)?;
    Ok(vec![m[0].clone(), p[0].clone()])
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "surface.messages.detail.consumed",
            Must,
            CONSUMED,
            [Core, Admin],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p", &["hello", "next"]).await?;
                // What `pop()` with `commit_on_delivery()` and `batch(1)`, `wait(True)` sends.
                let p = cx
                    .pop(&format!(
                        "/api/v1/pop/queue/{q}?batch=1&wait=true&timeout=30000&autoAck=true"
                    ))
                    .await?;
                let m = msgs(&p);
                expect_eq("the pop", json!(["hello"]), &json!(txn_ids(&m)))?;
                expect(
                    m[0]["leaseId"].as_str().is_none_or(str::is_empty),
                    "no lease on a pop committed at delivery",
                    format!("leaseId {}", m[0]["leaseId"]),
                )?;
                let r = cx.get(&address(&m[0])).await?;
                expect_status(&r, 200)?;
                let groups = r.body["consumerGroups"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                expect(
                    groups.len() == 1,
                    "one row in consumerGroups (the queue-mode consumer)",
                    r.body["consumerGroups"].to_string(),
                )?;
                expect_eq("consumerGroups[0].consumed", true, &groups[0]["consumed"])?;
                expect_eq(
                    "consumerGroups[0].leaseExpiresAt",
                    Value::Null,
                    &groups[0]["leaseExpiresAt"],
                )?;
                // The next one, popped under a lease: not consumed until acked.
                let n = msgs(&cx.pop(&format!("/api/v1/pop/queue/{q}?batch=1")).await?);
                expect_eq("the second pop", json!(["next"]), &json!(txn_ids(&n)))?;
                let r = cx.get(&address(&n[0])).await?;
                expect_status(&r, 200)?;
                expect_eq(
                    "consumerGroups[0].consumed of a leased message",
                    false,
                    &r.body["consumerGroups"][0]["consumed"],
                )?;
                ack(&cx, ack_of(&n[0], "completed")).await?;
                let r = cx.get(&address(&n[0])).await?;
                expect_eq(
                    "consumerGroups[0].consumed once acked",
                    true,
                    &r.body["consumerGroups"][0]["consumed"],
                )
            }
        ),
        case!(
            "surface.messages.retry.dead-letter",
            Must,
            RETRY,
            [Core, Admin],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = dead_letter(&cx, &q, &g).await?;
                expect_eq(
                    "stored before the retry",
                    2,
                    &json!(stored(&cx, &q).await?.len()),
                )?;
                let r = cx
                    .post(&format!("{}/retry", address(&m[1])), json!({}))
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("success", true, &r.body["success"])?;
                expect_eq("transactionId", "poison", &r.body["transactionId"])?;
                expect_eq("offset (the next one)", 2, &r.body["offset"])?;
                expect_eq("the DLQ after the retry", json!([]), &dead(&cx, &q).await?)?;
                let again = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq(
                    "g's pop after the retry",
                    json!(["poison"]),
                    &json!(txn_ids(&again)),
                )?;
                expect_eq(
                    "the replay's payload",
                    m[1]["data"].clone(),
                    &again[0]["data"],
                )?;
                let r = ack(&cx, ack_of(&again[0], "completed")).await?;
                expect(
                    r["success"] == json!(true),
                    "an ack of the replay by its transactionId: success: true",
                    r.to_string(),
                )?;
                // The live message was not pushed again by its refused retry.
                let all = stored(&cx, &q).await?;
                expect_eq(
                    "what the queue stores",
                    json!(["live", "poison", "poison"]),
                    &json!(txn_ids(&all)),
                )
            }
        ),
        case!(
            "surface.messages.delete.dead-letter",
            Must,
            DELETE,
            [Core, Admin],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                let m = dead_letter(&cx, &q, &g).await?;
                let r = cx.delete(&address(&m[1])).await?;
                expect_status(&r, 200)?;
                expect_eq("success", true, &r.body["success"])?;
                expect_eq("transactionId", "poison", &r.body["transactionId"])?;
                expect_eq("deadLettersRemoved", 1, &r.body["deadLettersRemoved"])?;
                expect_eq("the DLQ after the delete", json!([]), &dead(&cx, &q).await?)?;
                let r = cx.delete(&address(&m[1])).await?;
                expect_not_found("a second delete", &r)?;
                expect_eq(
                    "g's pop after the delete (nothing delivered again)",
                    json!([]),
                    &json!(txn_ids(&msgs(
                        &cx.pop(&pop_path(&q, &g, "&batch=10")).await?
                    ))),
                )
            }
        ),
    ]
}
