//! The shape of a transaction request: every 400 and 413 of `transaction.md`, each
//! checked to write nothing of its body, and the v0 forms of a push (flat form, `data`,
//! the default `{}` payload, `traceId`) with the v0 answer shape.
//!
//! Every refused body carries a canary: a valid push (and, where it fits, a valid KV
//! write or timer) placed before the bad part, so a broker that applied the body in
//! order before judging it is caught by the canary's presence afterwards.

use serde_json::{Value, json};

use super::core::{
    expect_error, expect_exact_keys, expect_kv_absent, expect_no_messages, schedule, stored,
    timer_peek, txn_ids,
};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, Resp, expect, expect_eq, expect_status};

/// A valid part placed in a refused body, and the checks that it was not written.
struct Canary {
    /// The queue its push goes to.
    q: String,
    /// The namespace of its KV write.
    ns: String,
    /// The queue of its timer.
    tq: String,
}

impl Canary {
    fn new(cx: &Ctx) -> Self {
        Canary {
            q: cx.name("canary"),
            ns: cx.ns("canary"),
            tq: cx.name("canary-t"),
        }
    }

    /// A valid push operation.
    fn push(&self) -> Value {
        json!({"type": "push", "items": [
            {"queue": self.q, "partition": "p", "transactionId": "canary", "payload": {"canary": true}}
        ]})
    }

    /// A valid KV write.
    fn kv(&self) -> Value {
        json!({"op": "put", "ns": self.ns, "key": "canary", "value": 1, "forever": true})
    }

    /// A valid timer.
    fn timer(&self) -> Value {
        schedule(&self.tq, "canary", "canary", 3_600_000, &json!(1))
    }

    /// Fails unless the push is absent.
    async fn no_push(&self, cx: &Ctx) -> Result<(), Failure> {
        expect_no_messages(cx, &self.q).await
    }

    /// Fails unless the push and the KV write are absent.
    async fn no_push_no_kv(&self, cx: &Ctx) -> Result<(), Failure> {
        self.no_push(cx).await?;
        expect_kv_absent(cx, &self.ns, "canary").await
    }

    /// Fails unless the push and the timer are absent.
    async fn no_push_no_timer(&self, cx: &Ctx) -> Result<(), Failure> {
        self.no_push(cx).await?;
        let peek = timer_peek(cx, &self.tq, "canary").await?;
        expect_eq("canary timer found", false, &peek["found"])
    }
}

/// Posts `body` and fails unless it is refused with `status` (and an `error` text;
/// never a committed answer).
async fn refused(cx: &Ctx, body: Value, status: u16) -> Result<Resp, Failure> {
    let r = cx.post("/api/v1/transaction", body).await?;
    expect_status(&r, status)?;
    expect(
        r.body["error"].is_string() && r.body["success"] != true,
        "a refusal with an error text",
        r.body.to_string(),
    )?;
    Ok(r)
}

/// Sends each of `bad` as a KV op beside the canary's push and KV op: every one must be
/// refused 400, and none of the canary's writes may land.
async fn kv_ops_refused(
    cx: &Ctx,
    c: &Canary,
    bad: impl IntoIterator<Item = Value>,
) -> Result<(), Failure> {
    for bad in bad {
        refused(
            cx,
            json!({"operations": [c.push()], "kv": [c.kv(), bad]}),
            400,
        )
        .await?;
    }
    c.no_push_no_kv(cx).await
}

/// A transaction refused because of one broker-owned field on a timer op.
async fn broker_owned(cx: Ctx, field: &str, value: Value) -> Result<(), Failure> {
    let c = Canary::new(&cx);
    let mut bad = schedule(&cx.name("tq"), "k", "t", 60_000, &json!(1));
    bad[field] = value;
    refused(
        &cx,
        json!({"operations": [c.push()], "timers": [c.timer(), bad]}),
        400,
    )
    .await?;
    c.no_push_no_timer(&cx).await
}

/// A committed transaction's answer.
async fn commit(cx: &Ctx, body: Value) -> Result<Value, Failure> {
    let out = cx.txn(body).await?;
    expect_eq("success", true, &out["success"])?;
    Ok(out)
}

/// The one message stored in `q`.
async fn only_message(cx: &Ctx, q: &str) -> Result<Value, Failure> {
    let m = stored(cx, q).await?;
    expect(
        m.len() == 1,
        format!("one message in {q}"),
        format!("{:?}", txn_ids(&m)),
    )?;
    Ok(m[0].clone())
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut all = parts();
    all.extend(operations());
    all.extend(timers());
    all.extend(kv());
    all.extend(limits());
    all.extend(v0());
    all
}

fn parts() -> Vec<Case> {
    vec![
        case!(
            "txn.shape.empty.absent",
            Must,
            "At least one of operations, kv, timers and positions must be non-empty.",
            [Core],
            |cx: Ctx| async move {
                refused(&cx, json!({}), 400).await?;
                refused(
                    &cx,
                    json!({"requiredLeases": [uuid::Uuid::now_v7().to_string()]}),
                    400,
                )
                .await?;
                Ok(())
            }
        ),
        case!(
            "txn.shape.empty.all-empty",
            Must,
            "At least one of operations, kv, timers and positions must be non-empty.",
            [Core],
            |cx: Ctx| async move {
                refused(
                    &cx,
                    json!({"operations": [], "requiredLeases": [], "kv": [], "timers": [], "positions": []}),
                    400,
                )
                .await?;
                refused(&cx, json!({"operations": []}), 400).await?;
                Ok(())
            }
        ),
        case!(
            "txn.shape.not-array.operations",
            Must,
            "... and so is a top-level field that is present but not an array.",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                // The one operation, sent as an object rather than in an array.
                refused(&cx, json!({"operations": c.push()}), 400).await?;
                c.no_push(&cx).await
            }
        ),
        case!(
            "txn.shape.not-array.required-leases",
            Must,
            "... and so is a top-level field that is present but not an array.",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let lease = uuid::Uuid::now_v7().to_string();
                refused(
                    &cx,
                    json!({"operations": [c.push()], "requiredLeases": lease}),
                    400,
                )
                .await?;
                c.no_push(&cx).await
            }
        ),
        case!(
            "txn.shape.not-array.kv",
            Must,
            "... and so is a top-level field that is present but not an array.",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                refused(&cx, json!({"operations": [c.push()], "kv": c.kv()}), 400).await?;
                c.no_push_no_kv(&cx).await
            }
        ),
        case!(
            "txn.shape.not-array.timers",
            Must,
            "... and so is a top-level field that is present but not an array.",
            [Core, Timers],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                refused(
                    &cx,
                    json!({"operations": [c.push()], "timers": c.timer()}),
                    400,
                )
                .await?;
                c.no_push_no_timer(&cx).await
            }
        ),
        case!(
            "txn.shape.not-array.positions",
            Must,
            "... and so is a top-level field that is present but not an array.",
            [Core, Positions],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let q = cx.name("q");
                cx.push(&q, "p", "m0", json!(0)).await?;
                let pos = json!({"queue": q, "consumerGroup": cx.name("g"), "partition": "p", "offset": 1});
                refused(
                    &cx,
                    json!({"operations": [c.push()], "positions": pos}),
                    400,
                )
                .await?;
                c.no_push(&cx).await
            }
        ),
    ]
}

fn operations() -> Vec<Case> {
    vec![
        case!(
            "txn.shape.operations.kv-element",
            Must,
            "A kv or timer element inside operations is refused with 400",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                refused(&cx, json!({"operations": [c.push(), c.kv()]}), 400).await?;
                c.no_push(&cx).await
            }
        ),
        case!(
            "txn.shape.operations.timer-element",
            Must,
            "A kv or timer element inside operations is refused with 400",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                refused(&cx, json!({"operations": [c.push(), c.timer()]}), 400).await?;
                c.no_push(&cx).await
            }
        ),
        case!(
            "txn.shape.operations.unknown-type",
            Must,
            "Only two operation types exist: push and ack. Any other type fails the whole call with a 400 and nothing is written, including a type the broker does not recognise.",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                for ty in ["publish", "kv", "Push"] {
                    let other = json!({"type": ty, "queue": cx.name("other"), "payload": 1});
                    refused(&cx, json!({"operations": [c.push(), other]}), 400).await?;
                }
                c.no_push(&cx).await?;
                expect_no_messages(&cx, &cx.name("other")).await
            }
        ),
        case!(
            "txn.shape.push.missing-queue",
            Must,
            "names: a missing `queue` is 400",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let bad = json!({"type": "push", "items": [{"partition": "p", "transactionId": "x", "payload": 1}]});
                refused(&cx, json!({"operations": [c.push(), bad]}), 400).await?;
                c.no_push(&cx).await
            }
        ),
    ]
}

fn timers() -> Vec<Case> {
    vec![
        case!(
            "txn.shape.timer.broker-owned.producer-sub",
            Must,
            "The broker owns producerSub, messageId, deliverAt, attempts, the tenant fields and every field starting with _: a timer op that carries one is refused with 400.",
            [Core, Timers],
            |cx: Ctx| async move { broker_owned(cx, "producerSub", json!("someone")).await }
        ),
        case!(
            "txn.shape.timer.broker-owned.message-id",
            Must,
            "The broker owns producerSub, messageId, deliverAt, attempts, the tenant fields and every field starting with _: a timer op that carries one is refused with 400.",
            [Core, Timers],
            |cx: Ctx| async move {
                broker_owned(cx, "messageId", json!(uuid::Uuid::now_v7().to_string())).await
            }
        ),
        case!(
            "txn.shape.timer.broker-owned.deliver-at",
            Must,
            "The broker owns producerSub, messageId, deliverAt, attempts, the tenant fields and every field starting with _: a timer op that carries one is refused with 400.",
            [Core, Timers],
            |cx: Ctx| async move {
                broker_owned(cx, "deliverAt", json!("2030-01-01T00:00:00.000000Z")).await
            }
        ),
        case!(
            "txn.shape.timer.broker-owned.attempts",
            Must,
            "The broker owns producerSub, messageId, deliverAt, attempts, the tenant fields and every field starting with _: a timer op that carries one is refused with 400.",
            [Core, Timers],
            |cx: Ctx| async move { broker_owned(cx, "attempts", json!(0)).await }
        ),
        case!(
            "txn.shape.timer.broker-owned.underscore",
            Must,
            "The broker owns producerSub, messageId, deliverAt, attempts, the tenant fields and every field starting with _: a timer op that carries one is refused with 400.",
            [Core, Timers],
            |cx: Ctx| async move { broker_owned(cx, "_internal", json!(true)).await }
        ),
        case!(
            "txn.shape.timer.broker-owned.delay-seconds",
            Must,
            "Broker-owned fields (`producerSub`, `messageId`, `deliverAt`, `delaySeconds`, `attempts`, tenant fields, any field starting with `_`, …) in a request: 400.",
            [Core, Timers],
            |cx: Ctx| async move { broker_owned(cx, "delaySeconds", json!(5)).await }
        ),
        case!(
            "txn.shape.timer.key-twice",
            Must,
            "A (queue, timerKey) may appear once per call.",
            [Core, Timers],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let tq = cx.name("tq");
                refused(
                    &cx,
                    json!({"operations": [c.push()], "timers": [
                        c.timer(),
                        schedule(&tq, "k", "t-1", 60_000, &json!(1)),
                        {"op": "cancel", "queue": tq, "timerKey": "k"}
                    ]}),
                    400,
                )
                .await?;
                c.no_push_no_timer(&cx).await?;
                expect_eq(
                    "timer k found",
                    false,
                    &timer_peek(&cx, &tq, "k").await?["found"],
                )
            }
        ),
    ]
}

fn kv() -> Vec<Case> {
    vec![
        case!(
            "txn.shape.kv.key-written-twice",
            Must,
            "a key may be written once per call.",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                refused(
                    &cx,
                    json!({"operations": [c.push()], "kv": [
                        c.kv(),
                        {"op": "put", "ns": ns, "key": "k", "value": 1, "forever": true},
                        {"op": "incr", "ns": ns, "key": "k", "delta": 1, "forever": true}
                    ]}),
                    400,
                )
                .await?;
                c.no_push_no_kv(&cx).await?;
                expect_kv_absent(&cx, &ns, "k").await
            }
        ),
        case!(
            "txn.shape.kv.bad-ns",
            Must,
            "ns matches ^[a-z0-9][a-z0-9._-]{0,63}$",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let long = format!("a{}", "b".repeat(64));
                let bad_ns = [
                    "",
                    "Upper",
                    "-lead",
                    ".lead",
                    "sp ace",
                    "slash/ns",
                    long.as_str(),
                ];
                kv_ops_refused(
                    &cx,
                    &c,
                    bad_ns.map(|ns| json!({"op": "put", "ns": ns, "key": "k", "value": 1, "forever": true})),
                )
                .await?;
                // The longest valid namespace, 64 characters, is accepted.
                let mut ns64 = cx.ns("x");
                while ns64.len() < 64 {
                    ns64.push('z');
                }
                commit(
                    &cx,
                    json!({"kv": [{"op": "put", "ns": ns64, "key": "k", "value": 1, "forever": true}]}),
                )
                .await?;
                Ok(())
            }
        ),
        case!(
            "txn.shape.kv.bad-key",
            Must,
            "a key is 1 to 512 bytes with no NUL",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                let long = "k".repeat(513);
                kv_ops_refused(
                    &cx,
                    &c,
                    ["", long.as_str(), "nul\u{0}key"]
                        .map(|key| json!({"op": "put", "ns": ns, "key": key, "value": 1, "forever": true})),
                )
                .await?;
                // 512 bytes (256 two-byte characters) is accepted.
                let key512 = "é".repeat(256);
                commit(
                    &cx,
                    json!({"kv": [{"op": "put", "ns": ns, "key": key512, "value": 1, "forever": true}]}),
                )
                .await?;
                Ok(())
            }
        ),
        case!(
            "txn.shape.kv.expiry-missing",
            Must,
            "Every put, putIfAbsent and incr carries exactly one expiry: ttlSeconds (an integer greater than 0) or forever: true",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                kv_ops_refused(
                    &cx,
                    &c,
                    [
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1}),
                        json!({"op": "putIfAbsent", "ns": ns, "key": "k", "value": 1}),
                        json!({"op": "incr", "ns": ns, "key": "k", "delta": 1}),
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1, "forever": false}),
                    ],
                )
                .await?;
                expect_kv_absent(&cx, &ns, "k").await
            }
        ),
        case!(
            "txn.shape.kv.expiry-double",
            Must,
            "Every put, putIfAbsent and incr carries exactly one expiry: ttlSeconds (an integer greater than 0) or forever: true",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                kv_ops_refused(
                    &cx,
                    &c,
                    [
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1, "ttlSeconds": 60, "forever": true}),
                        json!({"op": "putIfAbsent", "ns": ns, "key": "k", "value": 1, "ttlSeconds": 60, "forever": true}),
                        json!({"op": "incr", "ns": ns, "key": "k", "delta": 1, "ttlSeconds": 60, "forever": true}),
                    ],
                )
                .await?;
                expect_kv_absent(&cx, &ns, "k").await
            }
        ),
        case!(
            "txn.shape.kv.ttl-not-positive",
            Must,
            "Every put, putIfAbsent and incr carries exactly one expiry: ttlSeconds (an integer greater than 0) or forever: true",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                kv_ops_refused(
                    &cx,
                    &c,
                    [json!(0), json!(-5), json!(1.5), json!("60")]
                        .map(|ttl| json!({"op": "put", "ns": ns, "key": "k", "value": 1, "ttlSeconds": ttl})),
                )
                .await?;
                expect_kv_absent(&cx, &ns, "k").await
            }
        ),
        case!(
            "txn.shape.kv.value-too-large",
            Must,
            "A value is any JSON value of at most QUEEN_KV_MAX_VALUE_BYTES (64 KiB) as compact JSON.",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                // A string of n characters is n + 2 bytes as JSON.
                let over = "v".repeat(64 * 1024 - 1);
                let bad =
                    json!({"op": "put", "ns": ns, "key": "k", "value": over, "forever": true});
                let r = refused(
                    &cx,
                    json!({"operations": [c.push()], "kv": [c.kv(), bad]}),
                    413,
                )
                .await?;
                expect_eq("code", "payload_too_large", &r.body["code"])?;
                c.no_push_no_kv(&cx).await?;
                let fits = "v".repeat(64 * 1024 - 2);
                commit(
                    &cx,
                    json!({"kv": [{"op": "put", "ns": ns, "key": "k", "value": fits, "forever": true}]}),
                )
                .await?;
                Ok(())
            }
        ),
    ]
}

fn limits() -> Vec<Case> {
    vec![
        case!(
            "txn.shape.kv.too-many-ops",
            Must,
            "A transaction carries at most 64 KV operations naming at most 256 keys.",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                let gets = |n: usize| -> Vec<Value> {
                    (0..n)
                        .map(|i| json!({"op": "get", "ns": ns, "key": format!("k{i}")}))
                        .collect()
                };
                let mut ops = vec![c.kv()];
                ops.extend(gets(64));
                refused(&cx, json!({"operations": [c.push()], "kv": ops}), 400).await?;
                c.no_push_no_kv(&cx).await?;
                let out = commit(&cx, json!({"kv": gets(64)})).await?;
                let n = out["results"].as_array().map_or(0, Vec::len);
                expect(n == 64, "64 KV operations commit", format!("{n} results"))
            }
        ),
        case!(
            "txn.shape.kv.too-many-keys",
            Must,
            "A transaction carries at most 64 KV operations naming at most 256 keys.",
            [Core, Kv],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let ns = cx.ns("kv");
                let many = |from: usize, n: usize| -> Value {
                    let keys: Vec<String> = (from..from + n).map(|i| format!("k{i}")).collect();
                    json!({"op": "getMany", "ns": ns, "keys": keys})
                };
                // 1 (canary) + 128 + 128 = 257 keys.
                refused(
                    &cx,
                    json!({"operations": [c.push()], "kv": [c.kv(), many(0, 128), many(128, 128)]}),
                    400,
                )
                .await?;
                c.no_push_no_kv(&cx).await?;
                commit(&cx, json!({"kv": [many(0, 128), many(128, 128)]})).await?;
                Ok(())
            }
        ),
        case!(
            "txn.shape.positions.too-many",
            Must,
            "Positions: … At most 16,384 per call.",
            [Core, Positions],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let q = cx.name("q");
                cx.push(&q, "p", "m0", json!(0)).await?;
                let positions = |n: usize| -> Vec<Value> {
                    (0..n)
                        .map(|i| json!({"queue": q, "consumerGroup": format!("g{i}"), "partition": "p", "offset": 1}))
                        .collect()
                };
                refused(
                    &cx,
                    json!({"operations": [c.push()], "positions": positions(16_385)}),
                    400,
                )
                .await?;
                c.no_push(&cx).await?;
                // 16,384 positions are not refused for their number (one group set
                // again and again keeps the commit quick).
                let same = json!({"queue": q, "consumerGroup": cx.name("g"), "partition": "p", "offset": 1});
                let r = cx
                    .post(
                        "/api/v1/transaction",
                        json!({"positions": vec![same; 16_384]}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("success", true, &r.body["success"])
            }
        ),
        case!(
            "txn.shape.transaction-id-too-long",
            Must,
            "Some failures use the engine's error body {\"error\", \"code\"} instead, with no reason: ... 400 bad_request (a transactionId over 65,535 bytes)",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let q = cx.name("q");
                let long = "t".repeat(65_536);
                let bad = json!({"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": long, "payload": 1}]});
                let r = cx
                    .post(
                        "/api/v1/transaction",
                        json!({"operations": [c.push(), bad]}),
                    )
                    .await?;
                expect_error(&r, 400, "bad_request")?;
                expect(
                    r.body.get("reason").is_none(),
                    "no reason",
                    r.body.to_string(),
                )?;
                c.no_push(&cx).await?;
                expect_no_messages(&cx, &q).await?;
                let fits = "t".repeat(65_535);
                commit(
                    &cx,
                    json!({"operations": [{"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": fits, "payload": 1}]}]}),
                )
                .await?;
                let m = only_message(&cx, &q).await?;
                expect(
                    m["transactionId"].as_str().map(str::len) == Some(65_535),
                    "the 65,535-byte transactionId kept",
                    "another transactionId",
                )
            }
        ),
        case!(
            "txn.shape.name-too-long.queue",
            Should,
            "413 name_too_long (a pushed queue or partition name over the key budget); names: over the key budget (take 1,024 bytes (ours)): 413 name_too_long.",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let mut q = cx.name("q");
                while q.len() < 1_025 {
                    q.push('x');
                }
                let bad = json!({"type": "push", "items": [{"queue": q, "partition": "p", "payload": 1}]});
                let r = cx
                    .post(
                        "/api/v1/transaction",
                        json!({"operations": [c.push(), bad]}),
                    )
                    .await?;
                expect_error(&r, 413, "name_too_long")?;
                expect(
                    r.body.get("reason").is_none(),
                    "no reason",
                    r.body.to_string(),
                )?;
                c.no_push(&cx).await?;
                q.pop();
                commit(
                    &cx,
                    json!({"operations": [{"type": "push", "items": [{"queue": q, "partition": "p", "payload": 1}]}]}),
                )
                .await?;
                Ok(())
            }
        ),
        case!(
            "txn.shape.name-too-long.partition",
            Should,
            "413 name_too_long (a pushed queue or partition name over the key budget); names: over the key budget (take 1,024 bytes (ours)): 413 name_too_long.",
            [Core],
            |cx: Ctx| async move {
                let c = Canary::new(&cx);
                let q = cx.name("q");
                let p = "p".repeat(1_025);
                let bad =
                    json!({"type": "push", "items": [{"queue": q, "partition": p, "payload": 1}]});
                let r = cx
                    .post(
                        "/api/v1/transaction",
                        json!({"operations": [c.push(), bad]}),
                    )
                    .await?;
                expect_error(&r, 413, "name_too_long")?;
                expect(
                    r.body.get("reason").is_none(),
                    "no reason",
                    r.body.to_string(),
                )?;
                c.no_push(&cx).await?;
                expect_no_messages(&cx, &q).await?;
                let p = "p".repeat(1_024);
                commit(
                    &cx,
                    json!({"operations": [{"type": "push", "items": [{"queue": q, "partition": p, "payload": 1}]}]}),
                )
                .await?;
                only_message(&cx, &q).await?;
                Ok(())
            }
        ),
    ]
}

fn v0() -> Vec<Case> {
    vec![
        case!(
            "txn.v0.push.flat",
            Must,
            "A push operation takes either the nested form with an items array, or a flat form where the operation object is the item",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let out = commit(
                    &cx,
                    json!({"operations": [{"type": "push", "queue": q, "partition": "p",
                        "transactionId": "flat-1", "payload": {"orderId": 8891}}]}),
                )
                .await?;
                let r = &out["results"][0];
                expect_eq("index", 0, &r["index"])?;
                expect_eq("type", "push", &r["type"])?;
                expect_eq("transactionId", "flat-1", &r["transactionId"])?;
                expect_eq("queueName", q.as_str(), &r["queueName"])?;
                let m = only_message(&cx, &q).await?;
                expect_eq("transactionId", "flat-1", &m["transactionId"])?;
                expect_eq("partition", "p", &m["partition"])?;
                expect_eq("id", r["messageId"].clone(), &m["id"])?;
                expect_eq("data", json!({"orderId": 8891}), &m["data"])
            }
        ),
        case!(
            "txn.v0.push.data-alias",
            Must,
            "`data` | any JSON value | an accepted alias for `payload`",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                commit(
                    &cx,
                    json!({"operations": [
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "a", "data": {"via": "items"}}]},
                        {"type": "push", "queue": q, "partition": "p", "transactionId": "b", "data": [1, 2]}
                    ]}),
                )
                .await?;
                let m = stored(&cx, &q).await?;
                expect_eq("stored", json!(["a", "b"]), &json!(txn_ids(&m)))?;
                expect_eq("data of a", json!({"via": "items"}), &m[0]["data"])?;
                expect_eq("data of b", json!([1, 2]), &m[1]["data"])
            }
        ),
        case!(
            "txn.v0.push.default-payload",
            Must,
            "`payload` | any JSON value | `{}` when neither `payload` nor `data` is present",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                commit(
                    &cx,
                    json!({"operations": [
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "a"}]},
                        {"type": "push", "queue": q, "partition": "p", "transactionId": "b"}
                    ]}),
                )
                .await?;
                let m = stored(&cx, &q).await?;
                expect_eq("stored", json!(["a", "b"]), &json!(txn_ids(&m)))?;
                expect_eq("data of a", json!({}), &m[0]["data"])?;
                expect_eq("data of b", json!({}), &m[1]["data"])
            }
        ),
        case!(
            "txn.v0.push.trace-id",
            Must,
            "`traceId` | string (UUID) | absent; this is the only write path that stores a trace id",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let trace = uuid::Uuid::now_v7().to_string();
                commit(
                    &cx,
                    json!({"operations": [
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "a", "payload": 1, "traceId": trace}]},
                        {"type": "push", "queue": q, "partition": "p", "transactionId": "b", "payload": 2}
                    ]}),
                )
                .await?;
                let m = stored(&cx, &q).await?;
                expect_eq("stored", json!(["a", "b"]), &json!(txn_ids(&m)))?;
                expect_eq("traceId of a", trace.as_str(), &m[0]["traceId"])?;
                expect_eq("traceId of b (none sent)", Value::Null, &m[1]["traceId"])
            }
        ),
        case!(
            "txn.v0.push.default-partition",
            Must,
            "`partition` | string | `\"Default\"`",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                commit(
                    &cx,
                    json!({"operations": [{"type": "push", "queue": q, "transactionId": "a", "payload": 1}]}),
                )
                .await?;
                let m = only_message(&cx, &q).await?;
                expect_eq("partition", "Default", &m["partition"])
            }
        ),
        case!(
            "txn.v0.answer-shape",
            Must,
            "A request that sends no kv, timers or positions gets exactly the v0 answer shape.",
            [Core],
            |cx: Ctx| async move {
                let (q, out_q) = (cx.name("q"), cx.name("out"));
                cx.push(&q, "p", "in-1", json!(1)).await?;
                let m = cx.pop_one(&q, "__QUEUE_MODE__").await?;
                let out = commit(
                    &cx,
                    json!({
                        "operations": [
                            {"type": "ack", "transactionId": "in-1", "partitionId": m["partitionId"],
                             "leaseId": m["leaseId"], "status": "completed"},
                            {"type": "push", "items": [{"queue": out_q, "partition": "p", "transactionId": "out-1", "payload": 2}]}
                        ],
                        "requiredLeases": [m["leaseId"]]
                    }),
                )
                .await?;
                expect_exact_keys("the answer", &out, &["transactionId", "success", "results"])?;
                let results = out["results"].as_array().cloned().unwrap_or_default();
                expect(results.len() == 2, "two results", out.to_string())?;
                expect_exact_keys(
                    "the ack result",
                    &results[0],
                    &["index", "type", "success", "transactionId", "error", "dlq"],
                )?;
                expect_exact_keys(
                    "the push result",
                    &results[1],
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
                    "ack",
                    json!({"index": 0, "type": "ack", "success": true,
                    "transactionId": "in-1", "error": null, "dlq": false}),
                    &results[0],
                )?;
                expect_eq("push type", "push", &results[1]["type"])?;
                expect_eq("push index", 1, &results[1]["index"])?;
                expect_eq("push transactionId", "out-1", &results[1]["transactionId"])?;
                expect_eq("push queueName", out_q.as_str(), &results[1]["queueName"])
            }
        ),
    ]
}
