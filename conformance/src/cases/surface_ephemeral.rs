//! Ephemeral queues, `/api/v1/ephemeral/*` (`mock-broker/ROUTES.md` 8, after
//! `queen-protocol` 1.5.0's `Ephemeral*` types and the official client's `ephemeral`
//! module): rings in memory with their own push, pop and ack, a nack that gives the
//! message back, groups that compete or fan out, the depth gauges and a reset.
//!
//! The cases need [`Capability::Ephemeral`](crate::case::Capability::Ephemeral).

use serde_json::{Value, json};

use super::core::expect_error;
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq, expect_status};

/// Push, pop, ack.
const ROUND_TRIP: &str = "POST /api/v1/ephemeral/push appends to the ring all or nothing (201 `{pushed: n}`); GET /api/v1/ephemeral/pop delivers in push order (FIFO per partition) with the payloads as pushed, `attempts: 1` at the first delivery; an ack settles (`outcome: acked`); an empty pop is 200 with `messages: []`, never 204; an id already settled is `unknown` to the next ack.";
/// A nack.
const NACK: &str = "An ack with a status other than completed (`failed`, `retry`, …) gives the message back: `outcome: redelivered`, and the next pop delivers it first, the same id with `attempts` one higher.";
/// Groups.
const GROUPS: &str = "Consumption comes from the group: the pops of one group compete (each message goes to one of them), another group fans out with its own cursor over the same ring.";
/// Depth.
const DEPTH: &str = "GET /api/v1/ephemeral/queues/{queue}/depth answers the queue's gauges: `depth` the messages held, per group `inFlight` those under a live lease; a message every group settled is no longer held. An ephemeral queue that does not exist is 404 `ephemeral_queue_not_found`.";
/// Reset.
const RESET: &str = "POST /api/v1/ephemeral/reset drops every message, lease and cursor of the queue and keeps its declaration: it answers `{queue, dropped: n}` (0 for a queue that is not there), the next pop is empty, the declared options stay, and the queue takes pushes again.";
/// Bad input.
const BAD_INPUT: &str = "Bad input to the ephemeral routes (an unknown or out-of-range option, no queue, no messages, a message without `payload`, an empty ack id, a pop with `batch=0`) is 400 `bad_request` and changes nothing: no queue is made.";

/// POST /api/v1/ephemeral/push of `payloads` to `q` (its default partition); 201.
async fn push(cx: &Ctx, q: &str, payloads: &[Value]) -> Result<Value, Failure> {
    let messages: Vec<Value> = payloads.iter().map(|p| json!({"payload": p})).collect();
    let r = cx
        .post(
            "/api/v1/ephemeral/push",
            json!({"queue": q, "messages": messages}),
        )
        .await?;
    expect_status(&r, 201)?;
    Ok(r.body)
}

/// GET /api/v1/ephemeral/pop?queue=q&{query}; answers the messages after a 200.
async fn pop(cx: &Ctx, q: &str, query: &str) -> Result<Vec<Value>, Failure> {
    let r = cx
        .get(&format!("/api/v1/ephemeral/pop?queue={q}{query}"))
        .await?;
    expect_status(&r, 200)?;
    r.body["messages"]
        .as_array()
        .cloned()
        .ok_or_else(|| Failure::new("a `messages` array", r.body.to_string()))
}

/// POST /api/v1/ephemeral/ack; answers the outcomes.
async fn ack(cx: &Ctx, body: Value) -> Result<Value, Failure> {
    let r = cx.post("/api/v1/ephemeral/ack", body).await?;
    expect_status(&r, 200)?;
    Ok(json!(r.body["results"].as_array().map(|a| {
        a.iter().map(|x| x["outcome"].clone()).collect::<Vec<_>>()
    })))
}

/// The acks of `m` with `status` (none: completed).
fn acks(m: &[Value], status: Option<&str>) -> Value {
    json!(
        m.iter()
            .map(|x| match status {
                Some(s) => json!({"id": x["id"], "status": s}),
                None => json!({"id": x["id"]}),
            })
            .collect::<Vec<_>>()
    )
}

/// `m[*][key]`.
fn field(m: &[Value], key: &str) -> Value {
    json!(m.iter().map(|x| x[key].clone()).collect::<Vec<_>>())
}

/// The depth gauges of `q` (200).
async fn depth(cx: &Ctx, q: &str) -> Result<Value, Failure> {
    let r = cx
        .get(&format!("/api/v1/ephemeral/queues/{q}/depth"))
        .await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

/// The in-flight count of the one group the gauges show.
fn in_flight(d: &Value) -> Value {
    json!(
        d["groups"]
            .as_array()
            .map(|g| g.iter().map(|x| x["inFlight"].clone()).collect::<Vec<_>>())
    )
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "surface.ephemeral.round-trip",
            Must,
            ROUND_TRIP,
            [Ephemeral],
            |cx: Ctx| async move {
                let q = cx.name("e");
                let payloads = [json!({"b": 1, "a": [2, "x"]}), json!(2), json!("three")];
                let b = push(&cx, &q, &payloads).await?;
                expect_eq("the push answer", json!({"pushed": 3}), &b)?;
                let m = pop(&cx, &q, "&batch=10").await?;
                expect_eq(
                    "the payloads, in order",
                    json!(payloads),
                    &field(&m, "payload"),
                )?;
                expect_eq("attempts", json!([1, 1, 1]), &field(&m, "attempts"))?;
                let out = ack(&cx, json!({"queue": q, "acks": acks(&m, None)})).await?;
                expect_eq("the ack outcomes", json!(["acked", "acked", "acked"]), &out)?;
                let r = cx.get(&format!("/api/v1/ephemeral/pop?queue={q}")).await?;
                expect_status(&r, 200)?;
                expect_eq("an empty pop: messages", json!([]), &r.body["messages"])?;
                let out = ack(&cx, json!({"queue": q, "acks": acks(&m[..1], None)})).await?;
                expect_eq("the same id acked again", json!(["unknown"]), &out)
            }
        ),
        case!(
            "surface.ephemeral.nack-redelivers",
            Must,
            NACK,
            [Ephemeral],
            |cx: Ctx| async move {
                let q = cx.name("e");
                push(&cx, &q, &[json!("m0"), json!("m1")]).await?;
                let first = pop(&cx, &q, "").await?;
                expect_eq("the first pop", json!(["m0"]), &field(&first, "payload"))?;
                let out = ack(
                    &cx,
                    json!({"queue": q, "acks": acks(&first, Some("failed"))}),
                )
                .await?;
                expect_eq("a failed ack", json!(["redelivered"]), &out)?;
                let again = pop(&cx, &q, "").await?;
                expect_eq("the next pop", json!(["m0"]), &field(&again, "payload"))?;
                expect_eq("its id", field(&first, "id"), &field(&again, "id"))?;
                expect_eq("its attempts", json!([2]), &field(&again, "attempts"))
            }
        ),
        case!(
            "surface.ephemeral.groups",
            Must,
            GROUPS,
            [Ephemeral],
            |cx: Ctx| async move {
                let q = cx.name("e");
                push(&cx, &q, &[json!(1), json!(2)]).await?;
                let a = pop(&cx, &q, "&group=workers").await?;
                let b = pop(&cx, &q, "&group=workers").await?;
                expect_eq(
                    "two pops of one group",
                    json!([[1], [2]]),
                    &json!([field(&a, "payload"), field(&b, "payload")]),
                )?;
                let c = pop(&cx, &q, "&group=workers").await?;
                expect_eq(
                    "a third pop of that group",
                    json!([]),
                    &field(&c, "payload"),
                )?;
                let audit = pop(&cx, &q, "&group=audit&batch=10").await?;
                expect_eq(
                    "another group's pop",
                    json!([1, 2]),
                    &field(&audit, "payload"),
                )
            }
        ),
        case!(
            "surface.ephemeral.depth",
            Must,
            DEPTH,
            [Ephemeral],
            |cx: Ctx| async move {
                let q = cx.name("e");
                push(&cx, &q, &[json!("m0"), json!("m1")]).await?;
                let d = depth(&cx, &q).await?;
                expect_eq("depth after two pushes", 2, &d["depth"])?;
                expect_eq("queue", q.clone(), &d["queue"])?;
                let m = pop(&cx, &q, "").await?;
                let d = depth(&cx, &q).await?;
                expect_eq("depth while one is leased", 2, &d["depth"])?;
                expect_eq("inFlight while one is leased", json!([1]), &in_flight(&d))?;
                ack(&cx, json!({"queue": q, "acks": acks(&m, None)})).await?;
                let d = depth(&cx, &q).await?;
                expect_eq("depth after its ack", 1, &d["depth"])?;
                expect_eq("inFlight after its ack", json!([0]), &in_flight(&d))?;
                let r = cx
                    .get(&format!(
                        "/api/v1/ephemeral/queues/{}/depth",
                        cx.name("never")
                    ))
                    .await?;
                expect_error(&r, 404, "ephemeral_queue_not_found")
            }
        ),
        case!(
            "surface.ephemeral.reset",
            Must,
            RESET,
            [Ephemeral],
            |cx: Ctx| async move {
                let q = cx.name("e");
                let r = cx
                    .post(
                        "/api/v1/ephemeral/configure",
                        json!({"queue": q, "options": {"maxLength": 50}}),
                    )
                    .await?;
                expect_status(&r, 201)?;
                expect_eq("configure: declared", true, &r.body["declared"])?;
                push(&cx, &q, &[json!("m0"), json!("m1")]).await?;
                pop(&cx, &q, "").await?;
                let r = cx
                    .post("/api/v1/ephemeral/reset", json!({"queue": q}))
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("the reset", json!({"queue": q, "dropped": 2}), &r.body)?;
                expect_eq(
                    "a pop after the reset",
                    json!([]),
                    &json!(pop(&cx, &q, "").await?),
                )?;
                let d = depth(&cx, &q).await?;
                expect_eq("depth after the reset", 0, &d["depth"])?;
                expect_eq("declared after the reset", true, &d["declared"])?;
                expect_eq(
                    "options.maxLength after the reset",
                    50,
                    &d["options"]["maxLength"],
                )?;
                push(&cx, &q, &[json!("m2")]).await?;
                let m = pop(&cx, &q, "&batch=10").await?;
                expect_eq(
                    "a push and pop after the reset",
                    json!(["m2"]),
                    &field(&m, "payload"),
                )?;
                let never = cx.name("never");
                let r = cx
                    .post("/api/v1/ephemeral/reset", json!({"queue": never}))
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("a reset of no queue: dropped", 0, &r.body["dropped"])
            }
        ),
        case!(
            "surface.ephemeral.bad-input",
            Must,
            BAD_INPUT,
            [Ephemeral],
            |cx: Ctx| async move {
                let q = cx.name("e");
                for (path, body) in [
                    (
                        "/api/v1/ephemeral/configure",
                        json!({"queue": q, "options": {"ttlSecond": 5}}),
                    ),
                    (
                        "/api/v1/ephemeral/configure",
                        json!({"queue": q, "options": {"retryLimit": -1}}),
                    ),
                    (
                        "/api/v1/ephemeral/configure",
                        json!({"queue": q, "options": {"policy": "drop"}}),
                    ),
                    ("/api/v1/ephemeral/configure", json!({"options": {}})),
                    (
                        "/api/v1/ephemeral/push",
                        json!({"queue": q, "messages": []}),
                    ),
                    (
                        "/api/v1/ephemeral/push",
                        json!({"queue": q, "messages": [{"data": 1}]}),
                    ),
                    (
                        "/api/v1/ephemeral/push",
                        json!({"queue": "", "messages": [{"payload": 1}]}),
                    ),
                    (
                        "/api/v1/ephemeral/ack",
                        json!({"queue": q, "acks": [{"id": ""}]}),
                    ),
                    ("/api/v1/ephemeral/ack", json!({"queue": q, "acks": {}})),
                    ("/api/v1/ephemeral/reset", json!({})),
                ] {
                    let r = cx.post(path, body.clone()).await?;
                    expect_error(&r, 400, "bad_request").map_err(|f| Failure {
                        expected: format!("{path} {body}: {}", f.expected),
                        ..f
                    })?;
                }
                let r = cx
                    .get(&format!("/api/v1/ephemeral/pop?queue={q}&batch=0"))
                    .await?;
                expect_error(&r, 400, "bad_request")?;
                let r = cx
                    .get(&format!("/api/v1/ephemeral/queues/{q}/depth"))
                    .await?;
                expect(
                    r.status == 404,
                    "no queue made by the refused calls (its depth 404)",
                    format!("HTTP {}: {}", r.status, r.body),
                )
            }
        ),
    ]
}
