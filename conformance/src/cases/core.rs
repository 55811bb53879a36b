//! The core rules of `wire.md` the transaction stands on: push and deduplication, pop
//! and leases, acks, standalone KV and timers, error bodies and health.
//!
//! The small helpers at the top are shared with the transaction modules.

use std::time::Duration;

use serde_json::{Value, json};

use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, Resp, expect, expect_eq, expect_status};

// ---------------------------------------------------------------------------------
// Helpers (also used by `txn_shape` and `txn_parts`).
// ---------------------------------------------------------------------------------

/// `/api/v1/pop/queue/{q}` as `group`, from the beginning, plus `extra` query text
/// (starting with `&`).
pub(super) fn pop_path(q: &str, group: &str, extra: &str) -> String {
    format!("/api/v1/pop/queue/{q}?consumerGroup={group}&subscriptionMode=all{extra}")
}

/// `/api/v1/pop/queue/{q}/partition/{p}` as `group`, from the beginning, plus `extra`.
pub(super) fn pop_part_path(q: &str, p: &str, group: &str, extra: &str) -> String {
    format!("/api/v1/pop/queue/{q}/partition/{p}?consumerGroup={group}&subscriptionMode=all{extra}")
}

/// The messages of a pop (none when it was empty).
pub(super) fn msgs(pop: &Option<Value>) -> Vec<Value> {
    pop.as_ref()
        .and_then(|p| p["messages"].as_array().cloned())
        .unwrap_or_default()
}

/// The `transactionId`s of `msgs`, in order.
pub(super) fn txn_ids(msgs: &[Value]) -> Vec<Value> {
    msgs.iter().map(|m| m["transactionId"].clone()).collect()
}

/// Every message of `q` as a group that never read it sees them (up to 1,000 of them,
/// over up to 1,000 partitions): what the queue stores.
pub(super) async fn stored(cx: &Ctx, q: &str) -> Result<Vec<Value>, Failure> {
    let g = cx.name(&format!("probe-{}", uuid::Uuid::now_v7().simple()));
    let p = cx
        .pop(&pop_path(q, &g, "&batch=1000&partitions=1000"))
        .await?;
    Ok(msgs(&p))
}

/// Every message of partition `p` of `q`, as a group that never read it sees them.
pub(super) async fn stored_in(cx: &Ctx, q: &str, p: &str) -> Result<Vec<Value>, Failure> {
    let g = cx.name(&format!("probe-{}", uuid::Uuid::now_v7().simple()));
    let pop = cx.pop(&pop_part_path(q, p, &g, "&batch=1000")).await?;
    Ok(msgs(&pop))
}

/// Fails unless `q` stores no message.
pub(super) async fn expect_no_messages(cx: &Ctx, q: &str) -> Result<(), Failure> {
    let m = stored(cx, q).await?;
    expect(
        m.is_empty(),
        format!("nothing stored in {q}"),
        format!("{} message(s): {:?}", m.len(), txn_ids(&m)),
    )
}

/// POST /api/v1/configure with `options`.
pub(super) async fn configure(cx: &Ctx, q: &str, options: Value) -> Result<(), Failure> {
    let r = cx
        .post("/api/v1/configure", json!({"queue": q, "options": options}))
        .await?;
    expect_status(&r, 200)?;
    expect_eq("configured", true, &r.body["configured"])
}

/// Pushes one message per id to `q`/`p` in one call (payload: the index); answers the
/// result elements.
pub(super) async fn push_ids(
    cx: &Ctx,
    q: &str,
    p: &str,
    ids: &[&str],
) -> Result<Vec<Value>, Failure> {
    let items: Vec<Value> = ids
        .iter()
        .enumerate()
        .map(|(i, t)| json!({"queue": q, "partition": p, "transactionId": t, "payload": i}))
        .collect();
    let r = cx.post("/api/v1/push", json!({ "items": items })).await?;
    expect(
        (200..300).contains(&r.status),
        "a 2xx push",
        format!("HTTP {}: {}", r.status, r.body),
    )?;
    let out = r.body.as_array().cloned().unwrap_or_default();
    expect(
        out.len() == ids.len(),
        format!("{} push results", ids.len()),
        r.body.to_string(),
    )?;
    Ok(out)
}

/// An ack of a popped message with `status`, fenced by the message's own lease.
pub(super) fn ack_of(m: &Value, status: &str) -> Value {
    json!({
        "transactionId": m["transactionId"],
        "partitionId": m["partitionId"],
        "consumerGroup": m["consumerGroup"],
        "leaseId": m["leaseId"],
        "status": status,
    })
}

/// POST /api/v1/ack; answers the one result element.
pub(super) async fn ack(cx: &Ctx, body: Value) -> Result<Value, Failure> {
    let r = cx.post("/api/v1/ack", body).await?;
    expect_status(&r, 200)?;
    let arr = r.body.as_array().cloned().unwrap_or_default();
    expect(
        arr.len() == 1,
        "an array of one ack result",
        r.body.to_string(),
    )?;
    Ok(arr[0].clone())
}

/// POST /api/v1/kv with `ops`; answers the whole body after a 200.
pub(super) async fn kv(cx: &Ctx, ops: Value) -> Result<Value, Failure> {
    let r = cx.post("/api/v1/kv", json!({ "operations": ops })).await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

/// A standalone `get`; answers its result element.
pub(super) async fn kv_get(cx: &Ctx, ns: &str, key: &str) -> Result<Value, Failure> {
    let out = kv(cx, json!([{"op": "get", "ns": ns, "key": key}])).await?;
    Ok(out["results"][0].clone())
}

/// Fails unless `(ns, key)` is absent.
pub(super) async fn expect_kv_absent(cx: &Ctx, ns: &str, key: &str) -> Result<(), Failure> {
    let r = kv_get(cx, ns, key).await?;
    expect_eq(&format!("get {ns}/{key} found"), false, &r["found"])
}

/// A standalone `put` forever; answers the new version.
pub(super) async fn kv_put(cx: &Ctx, ns: &str, key: &str, value: Value) -> Result<u64, Failure> {
    let out = kv(
        cx,
        json!([{"op": "put", "ns": ns, "key": key, "value": value, "forever": true}]),
    )
    .await?;
    let r = &out["results"][0];
    expect_eq("applied", true, &r["applied"])?;
    r["version"]
        .as_u64()
        .ok_or_else(|| Failure::new("a numeric version", r.to_string()))
}

/// GET /api/v1/timers/{q}/{key}.
pub(super) async fn timer_peek(cx: &Ctx, q: &str, key: &str) -> Result<Value, Failure> {
    let r = cx.get(&format!("/api/v1/timers/{q}/{key}")).await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

/// A timer `schedule` op of `queue`/`key` with a JSON payload, `delay_ms` ahead.
pub(super) fn schedule(q: &str, key: &str, txn: &str, delay_ms: i64, payload: &Value) -> Value {
    json!({
        "op": "schedule", "queue": q, "timerKey": key, "txn": txn, "delayMs": delay_ms,
        "payload": b64(payload.to_string().as_bytes()),
    })
}

/// Fails unless the answer is the engine's error body `{error, code}` with `status`
/// and `code`.
pub(super) fn expect_error(r: &Resp, status: u16, code: &str) -> Result<(), Failure> {
    expect_status(r, status)?;
    expect(
        r.body["error"].is_string(),
        "an error body with a string `error`",
        r.body.to_string(),
    )?;
    expect_eq("code", code, &r.body["code"])
}

/// Fails unless every key of `keys` is present in `v`.
pub(super) fn expect_keys(what: &str, v: &Value, keys: &[&str]) -> Result<(), Failure> {
    let missing: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| v.get(k).is_none())
        .collect();
    expect(
        missing.is_empty() && v.is_object(),
        format!("{what} with keys {keys:?}"),
        format!("missing {missing:?} in {v}"),
    )
}

/// Fails unless every field of the object `want` has the same value in `v` (other
/// fields of `v` are not judged).
pub(super) fn expect_fields(what: &str, want: &Value, v: &Value) -> Result<(), Failure> {
    for (k, w) in want.as_object().into_iter().flatten() {
        expect_eq(&format!("{what}.{k}"), w.clone(), &v[k.as_str()])?;
    }
    Ok(())
}

/// Fails unless `v`'s keys are exactly `keys`.
pub(super) fn expect_exact_keys(what: &str, v: &Value, keys: &[&str]) -> Result<(), Failure> {
    let mut have: Vec<&str> = v
        .as_object()
        .map(|m| m.keys().map(String::as_str).collect())
        .unwrap_or_default();
    let mut want = keys.to_vec();
    have.sort_unstable();
    want.sort_unstable();
    expect(
        have == want,
        format!("{what} with exactly the keys {want:?}"),
        format!("keys {have:?} in {v}"),
    )
}

/// Standard base64 with padding.
pub(super) fn b64(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for c in bytes.chunks(3) {
        let n = (u32::from(c[0]) << 16)
            | (u32::from(*c.get(1).unwrap_or(&0)) << 8)
            | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            if i <= c.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Microseconds since the epoch of an ISO-8601 UTC time (`Z` or `+00:00`).
pub(super) fn iso_micros(s: &str) -> Option<i64> {
    let s = s.strip_suffix('Z').or_else(|| s.strip_suffix("+00:00"))?;
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-').map(|x| x.parse::<i64>().ok());
    let (y, m, dd) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut t = hms.split(':').map(|x| x.parse::<i64>().ok());
    let (h, mi, se) = (t.next()??, t.next()??, t.next()??);
    let mut micros = 0i64;
    for (i, c) in frac.chars().take(6).enumerate() {
        micros += i64::from(c.to_digit(10)?) * 10i64.pow(5 - i as u32);
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + dd - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some((((days * 24 + h) * 60 + mi) * 60 + se) * 1_000_000 + micros)
}

/// Fails unless `v` is a UUIDv7 string.
pub(super) fn expect_uuid7(what: &str, v: &Value) -> Result<(), Failure> {
    let ok = v
        .as_str()
        .and_then(|s| uuid::Uuid::parse_str(s).ok())
        .is_some_and(|u| u.get_version_num() == 7);
    expect(
        ok,
        format!("{what} a UUIDv7 string"),
        format!("{what} = {v}"),
    )
}

/// The seven keys of an ack result.
const ACK_KEYS: [&str; 7] = [
    "index",
    "transactionId",
    "success",
    "error",
    "leaseReleased",
    "dlq",
    "noop",
];

/// Pops one message of `q` in queue mode; fails when empty.
async fn pop_queue_mode(cx: &Ctx, q: &str) -> Result<Value, Failure> {
    cx.pop_one(q, "__QUEUE_MODE__").await
}

/// GET /api/v1/dlq?queue=q.
async fn dlq(cx: &Ctx, q: &str) -> Result<Value, Failure> {
    let r = cx.get(&format!("/api/v1/dlq?queue={q}")).await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

// ---------------------------------------------------------------------------------
// Cases.
// ---------------------------------------------------------------------------------

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut all = vec![];
    all.extend(misc());
    all.extend(push());
    all.extend(pop());
    all.extend(leases());
    all.extend(acks());
    all.extend(kv_cases());
    all.extend(timer_cases());
    all
}

fn misc() -> Vec<Case> {
    vec![
        case!(
            "core.health",
            Must,
            "GET /health answers 200 {status: \"healthy\", version}.",
            [Core],
            |cx: Ctx| async move {
                let r = cx.get("/health").await?;
                expect_status(&r, 200)?;
                expect_eq("status", "healthy", &r.body["status"])?;
                expect(
                    r.body["version"].is_string(),
                    "a version string",
                    r.body.to_string(),
                )
            }
        ),
        case!(
            "core.errors.no-such-route",
            Must,
            "errors: {\"error\": \"<text>\", \"code\": \"<code>\"}: 400 bad_request, 401/403, 404 no_such_route, …",
            [Core],
            |cx: Ctx| async move {
                let r = cx.get(&format!("/api/v1/{}", cx.name("nowhere"))).await?;
                expect_error(&r, 404, "no_such_route")?;
                let r = cx
                    .post(&format!("/api/v1/{}", cx.name("nowhere")), json!({}))
                    .await?;
                expect_error(&r, 404, "no_such_route")
            }
        ),
        case!(
            "core.errors.missing-queue",
            Must,
            "a missing `queue` is 400",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let r = cx
                    .post(
                        "/api/v1/push",
                        json!({"items": [
                            {"queue": q, "partition": "p", "transactionId": "ok", "payload": 1},
                            {"partition": "p", "transactionId": "no-queue", "payload": 2}
                        ]}),
                    )
                    .await?;
                expect_error(&r, 400, "bad_request")?;
                expect_no_messages(&cx, &q).await
            }
        ),
    ]
}

fn push() -> Vec<Case> {
    vec![
        case!(
            "core.push.result-shape",
            Must,
            "POST /api/v1/push {items: [...]} answers 201 (clients accept any 2xx) with an array, one element per item in order: {index, message_id, transaction_id, queueName, status: \"queued\" | \"duplicate\" | \"error\", offset}",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let out = push_ids(&cx, &q, "p", &["a", "b"]).await?;
                for (i, r) in out.iter().enumerate() {
                    expect_keys(
                        "a push result",
                        r,
                        &[
                            "index",
                            "message_id",
                            "transaction_id",
                            "queueName",
                            "status",
                            "offset",
                        ],
                    )?;
                    expect_eq("index", i, &r["index"])?;
                    expect_eq("status", "queued", &r["status"])?;
                    expect_eq("queueName", q.as_str(), &r["queueName"])?;
                    expect_uuid7("message_id", &r["message_id"])?;
                }
                expect_eq("transaction_id", "a", &out[0]["transaction_id"])?;
                expect_eq("transaction_id", "b", &out[1]["transaction_id"])
            }
        ),
        case!(
            "core.push.dedup.across-calls",
            Must,
            "an item whose (queue, partition, transactionId) is already in the partition's dedup window ... is `duplicate` and carries the `message_id` and `offset` of the stored original. Nothing new is stored.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let first = push_ids(&cx, &q, "p", &["x", "y"]).await?;
                let again = push_ids(&cx, &q, "p", &["y"]).await?;
                expect_eq("status", "duplicate", &again[0]["status"])?;
                expect_eq(
                    "message_id",
                    first[1]["message_id"].clone(),
                    &again[0]["message_id"],
                )?;
                expect_eq("offset", first[1]["offset"].clone(), &again[0]["offset"])?;
                let m = stored(&cx, &q).await?;
                expect_eq(
                    "stored transactionIds",
                    json!(["x", "y"]),
                    &json!(txn_ids(&m)),
                )
            }
        ),
        case!(
            "core.push.dedup.in-call",
            Must,
            "Deduplication: an item whose (queue, partition, transactionId) ... repeats an earlier item of the same call, is `duplicate` and carries the `message_id` and `offset` of the stored original. Nothing new is stored.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let out = push_ids(&cx, &q, "p", &["x", "x", "z"]).await?;
                expect_eq("status[0]", "queued", &out[0]["status"])?;
                expect_eq("status[1]", "duplicate", &out[1]["status"])?;
                expect_eq(
                    "message_id",
                    out[0]["message_id"].clone(),
                    &out[1]["message_id"],
                )?;
                expect_eq("offset", out[0]["offset"].clone(), &out[1]["offset"])?;
                expect_eq("offset of the next new item", 1, &out[2]["offset"])?;
                let m = stored(&cx, &q).await?;
                expect_eq(
                    "stored transactionIds",
                    json!(["x", "z"]),
                    &json!(txn_ids(&m)),
                )?;
                expect_eq("stored payload of x (the first item)", 0, &m[0]["data"])
            }
        ),
        case!(
            "core.push.offsets-dense",
            Must,
            "Each partition is an ordered log: a message's `offset` is its position, from 0, dense.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let a = push_ids(&cx, &q, "p", &["a0", "a1", "a2"]).await?;
                let b = push_ids(&cx, &q, "other", &["b0"]).await?;
                let c = push_ids(&cx, &q, "p", &["a3", "a4"]).await?;
                let offs: Vec<Value> = a.iter().chain(&c).map(|r| r["offset"].clone()).collect();
                expect_eq(
                    "offsets in partition p",
                    json!([0, 1, 2, 3, 4]),
                    &json!(offs),
                )?;
                expect_eq("first offset in another partition", 0, &b[0]["offset"])
            }
        ),
        case!(
            "core.push.trace-id-ignored",
            Must,
            "`traceId` is ignored here (the message pops with `traceId: null`); a transaction's push keeps it.",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let r = cx
                    .post(
                        "/api/v1/push",
                        json!({"items": [{"queue": q, "partition": "p", "transactionId": "t", "payload": 1,
                            "traceId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c11"}]}),
                    )
                    .await?;
                expect(
                    (200..300).contains(&r.status),
                    "a 2xx push",
                    format!("HTTP {}", r.status),
                )?;
                let m = pop_queue_mode(&cx, &q).await?;
                expect(
                    m.get("traceId").is_some(),
                    "a traceId key on the message",
                    m.to_string(),
                )?;
                expect_eq("traceId", Value::Null, &m["traceId"])
            }
        ),
    ]
}

fn pop() -> Vec<Case> {
    vec![
        case!(
            "core.pop.shape",
            Must,
            "Otherwise 200: {success: true, queue, partition, partitionId, leaseId, consumerGroup, messages: [msg…], partitionsClaimed}. Each msg is {id, transactionId, traceId, data, producerSub, createdAt, partitionId, partition, leaseId, consumerGroup}, all keys present (data is the payload; only traceId, producerSub may be null)",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0"]).await?;
                let p = cx
                    .pop(&pop_path(&q, &g, "&batch=5"))
                    .await?
                    .ok_or_else(|| Failure::new("a message", "an empty pop"))?;
                expect_keys(
                    "a pop answer",
                    &p,
                    &[
                        "success",
                        "queue",
                        "partition",
                        "partitionId",
                        "leaseId",
                        "consumerGroup",
                        "messages",
                        "partitionsClaimed",
                    ],
                )?;
                expect_eq("success", true, &p["success"])?;
                expect_eq("queue", q.as_str(), &p["queue"])?;
                expect_eq("partition", "p", &p["partition"])?;
                expect_eq("consumerGroup", g.as_str(), &p["consumerGroup"])?;
                expect_uuid7("leaseId", &p["leaseId"])?;
                let m = &p["messages"][0];
                let keys = [
                    "id",
                    "transactionId",
                    "traceId",
                    "data",
                    "producerSub",
                    "createdAt",
                    "partitionId",
                    "partition",
                    "leaseId",
                    "consumerGroup",
                ];
                expect_keys("a message", m, &keys)?;
                for k in keys {
                    if k != "traceId" && k != "producerSub" {
                        expect(!m[k].is_null(), format!("{k} not null"), m.to_string())?;
                    }
                }
                expect_uuid7("id", &m["id"])?;
                expect_eq("transactionId", "m0", &m["transactionId"])?;
                expect_eq("data", 0, &m["data"])?;
                expect_eq("leaseId", p["leaseId"].clone(), &m["leaseId"])?;
                expect_eq("partitionId", p["partitionId"].clone(), &m["partitionId"])?;
                expect(
                    m["partitionId"].is_string(),
                    "partitionId a string",
                    m["partitionId"].to_string(),
                )?;
                let created = m["createdAt"].as_str().unwrap_or("");
                expect(
                    created.ends_with('Z') && iso_micros(created).is_some(),
                    "createdAt an ISO-8601 UTC time with Z",
                    created.to_string(),
                )
            }
        ),
        case!(
            "core.pop.shape.ours",
            Should,
            "Each msg is {id, transactionId, traceId, data, producerSub, createdAt, partitionId, partition, leaseId, consumerGroup}, all keys present (data is the payload; only traceId, producerSub may be null), plus queue, offset, deliveryAttempt (ours).",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let m = msgs(&cx.pop(&pop_path(&q, &g, "&batch=5")).await?);
                expect(m.len() == 2, "two messages", format!("{m:?}"))?;
                for (i, m) in m.iter().enumerate() {
                    expect_eq("queue", q.as_str(), &m["queue"])?;
                    expect_eq("offset", i, &m["offset"])?;
                    expect_eq("deliveryAttempt", 1, &m["deliveryAttempt"])?;
                }
                Ok(())
            }
        ),
        case!(
            "core.pop.fifo",
            Must,
            "Order within a partition is strict: a message is never delivered before an earlier one of the same partition and group has been acked or dead-lettered.",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                push_ids(&cx, &q, "p", &["m2"]).await?;
                push_ids(&cx, &q, "p", &["m3", "m4"]).await?;
                let first = msgs(&cx.pop(&pop_path(&q, &g, "&batch=2")).await?);
                expect_eq("first batch", json!(["m0", "m1"]), &json!(txn_ids(&first)))?;
                let none = cx.pop(&pop_path(&q, &g, "&batch=10")).await?;
                expect(
                    none.is_none(),
                    "no later message while m0 and m1 are unacked",
                    format!("{:?}", txn_ids(&msgs(&none))),
                )?;
                for m in &first {
                    expect_eq(
                        "ack success",
                        true,
                        &ack(&cx, ack_of(m, "completed")).await?["success"],
                    )?;
                }
                let rest = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq(
                    "next batch",
                    json!(["m2", "m3", "m4"]),
                    &json!(txn_ids(&rest)),
                )
            }
        ),
        case!(
            "core.pop.one-live-lease",
            Must,
            "One live lease per (partition, consumerGroup): a partition leased to one worker is not served to another of the same group until the lease ends (ack of the whole batch, release, expiry, or a position set).",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let path = format!("/api/v1/pop/queue/{q}/partition/p?batch=1");
                let a = msgs(&cx.pop(&path).await?);
                expect_eq("worker A gets", json!(["m0"]), &json!(txn_ids(&a)))?;
                let b = cx.pop(&path).await?;
                expect(
                    b.is_none(),
                    "worker B gets nothing while A's lease lives",
                    format!("{:?}", txn_ids(&msgs(&b))),
                )?;
                let r = ack(&cx, ack_of(&a[0], "completed")).await?;
                expect_eq("leaseReleased", true, &r["leaseReleased"])?;
                let b = msgs(&cx.pop(&path).await?);
                expect_eq("worker B then gets", json!(["m1"]), &json!(txn_ids(&b)))
            }
        ),
        case!(
            "core.pop.groups-fan-out",
            Must,
            "Named groups each have their own cursor and see every message (fan-out)",
            [Core],
            |cx: Ctx| async move {
                let (q, g1, g2) = (cx.name("q"), cx.name("g1"), cx.name("g2"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let a = msgs(&cx.pop(&pop_path(&q, &g1, "&batch=10")).await?);
                let b = msgs(&cx.pop(&pop_path(&q, &g2, "&batch=10")).await?);
                expect_eq("group 1 sees", json!(["m0", "m1"]), &json!(txn_ids(&a)))?;
                expect_eq("group 2 sees", json!(["m0", "m1"]), &json!(txn_ids(&b)))
            }
        ),
        case!(
            "core.pop.queue-mode-competes",
            Must,
            "`__QUEUE_MODE__` is one shared group (competing consumers).",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p1", &["a"]).await?;
                push_ids(&cx, &q, "p2", &["b"]).await?;
                let path = format!("/api/v1/pop/queue/{q}?batch=10");
                let w1 = msgs(&cx.pop(&path).await?);
                let w2 = msgs(&cx.pop(&path).await?);
                let w3 = msgs(&cx.pop(&path).await?);
                let mut got: Vec<String> = w1
                    .iter()
                    .chain(&w2)
                    .chain(&w3)
                    .map(|m| m["transactionId"].as_str().unwrap_or("").to_string())
                    .collect();
                got.sort();
                expect_eq(
                    "messages handed out, each once",
                    json!(["a", "b"]),
                    &json!(got),
                )?;
                expect(
                    w3.is_empty(),
                    "a third worker gets nothing",
                    format!("{:?}", txn_ids(&w3)),
                )
            }
        ),
        case!(
            "core.pop.empty-204",
            Must,
            "Empty: 204 with no body",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                let r = cx.get(&format!("/api/v1/pop/queue/{q}")).await?;
                expect_status(&r, 204)?;
                expect_eq("body", Value::Null, &r.body)?;
                push_ids(&cx, &q, "p", &["m0"]).await?;
                let m = pop_queue_mode(&cx, &q).await?;
                ack(&cx, ack_of(&m, "completed")).await?;
                let r = cx.get(&format!("/api/v1/pop/queue/{q}")).await?;
                expect_status(&r, 204)?;
                expect_eq("body", Value::Null, &r.body)
            }
        ),
        case!(
            "core.pop.auto-ack",
            Must,
            "`autoAck` ... commit at delivery: the cursor moves now, no lease (`leaseId: \"\"`)",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let p = cx
                    .pop(&pop_path(&q, &g, "&batch=1&autoAck=true"))
                    .await?
                    .ok_or_else(|| Failure::new("a message", "an empty pop"))?;
                expect_eq("leaseId", "", &p["leaseId"])?;
                expect_eq("message leaseId", "", &p["messages"][0]["leaseId"])?;
                expect_eq("transactionId", "m0", &p["messages"][0]["transactionId"])?;
                let next = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq(
                    "the next pop (m0 committed, no lease held)",
                    json!(["m1"]),
                    &json!(txn_ids(&next)),
                )
            }
        ),
        case!(
            "core.pop.autopilot",
            Must,
            "`autopilot` | — | `true`: size the omitted `batch`/`partitions` (a broker may apply the defaults). The Python client `queen-mq` 2.6.0 sends `autopilot=true` on every pop and consume that leaves `batch` or `partitions` unset (`queen/utils/autopilot.py`; every consume of its `tests/test_consume.py`).",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1", "m2"]).await?;
                // What the client sends with nothing sized: no batch, no partitions.
                let p = cx
                    .get(&format!(
                        "/api/v1/pop/queue/{q}?autopilot=true&wait=false&timeout=30000"
                    ))
                    .await?;
                expect_status(&p, 200)?;
                let got = txn_ids(&msgs(&Some(p.body.clone())));
                expect(
                    !got.is_empty()
                        && got[..] == [json!("m0"), json!("m1"), json!("m2")][..got.len()],
                    "a queue-mode pop with autopilot=true and no batch: the first messages, in order",
                    format!("{got:?}"),
                )?;
                // A pinned batch is the user's and is kept.
                let pinned = msgs(
                    &cx.pop(&pop_path(&q, &g, "&autopilot=true&batch=2&wait=false"))
                        .await?,
                );
                expect_eq(
                    "a named group's pop with autopilot=true&batch=2",
                    json!(["m0", "m1"]),
                    &json!(txn_ids(&pinned)),
                )
            }
        ),
        case!(
            "core.pop.lease-expiry-redelivers",
            Must,
            "A batch is the contiguous run of offsets delivered under a lease. When a lease expires, its unacked messages are delivered again, in order",
            [Core, Time],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1", "m2"]).await?;
                let first = msgs(
                    &cx.pop(&pop_path(
                        &q,
                        &g,
                        &format!("&batch=3&leaseSeconds={}", cx.window_secs()),
                    ))
                    .await?,
                );
                expect_eq(
                    "first delivery",
                    json!(["m0", "m1", "m2"]),
                    &json!(txn_ids(&first)),
                )?;
                let r = ack(&cx, ack_of(&first[0], "completed")).await?;
                expect_eq("ack m0", true, &r["success"])?;
                let again = cx
                    .eventually(Duration::from_secs(8), || {
                        let path = pop_path(&q, &g, "&batch=10");
                        let cx = cx.clone();
                        async move { cx.pop(&path).await }
                    })
                    .await?;
                let again = msgs(&again);
                expect_eq(
                    "redelivered after expiry",
                    json!(["m1", "m2"]),
                    &json!(txn_ids(&again)),
                )
            }
        ),
        // SHOULD: `deliveryAttempt` is one of wire.md's (ours) message fields.
        case!(
            "core.pop.lease-expiry-attempt",
            Should,
            "When a lease expires, its unacked messages are delivered again, in order, with `deliveryAttempt` incremented.",
            [Core, Time],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let first = msgs(
                    &cx.pop(&pop_path(
                        &q,
                        &g,
                        &format!("&batch=2&leaseSeconds={}", cx.window_secs()),
                    ))
                    .await?,
                );
                for m in &first {
                    expect_eq("deliveryAttempt", 1, &m["deliveryAttempt"])?;
                }
                cx.lapse().await;
                let again = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq("redelivered", json!(["m0", "m1"]), &json!(txn_ids(&again)))?;
                for m in &again {
                    expect_eq("deliveryAttempt", 2, &m["deliveryAttempt"])?;
                }
                Ok(())
            }
        ),
    ]
}

fn leases() -> Vec<Case> {
    vec![
        case!(
            "core.lease.extend-renews",
            Must,
            "POST /api/v1/lease/{leaseId}/extend {seconds?} (default 60) always answers 200 {leaseId, success, renewed, newExpiresAt, expiresAt, lease_expires_at}: renewed counts the partition claims extended; the three expiry keys hold the same time",
            [Core, Time],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                let p = msgs(
                    &cx.pop(&pop_path(
                        &q,
                        &g,
                        &format!("&batch=1&leaseSeconds={}", cx.window_secs()),
                    ))
                    .await?,
                );
                expect(p.len() == 1, "one message", format!("{p:?}"))?;
                let lease = p[0]["leaseId"].as_str().unwrap_or("").to_string();
                let r = cx
                    .post(
                        &format!("/api/v1/lease/{lease}/extend"),
                        json!({"seconds": 30}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("leaseId", lease.as_str(), &r.body["leaseId"])?;
                expect_eq("success", true, &r.body["success"])?;
                expect_eq("renewed", 1, &r.body["renewed"])?;
                expect(
                    r.body["newExpiresAt"]
                        .as_str()
                        .and_then(iso_micros)
                        .is_some(),
                    "newExpiresAt a time",
                    r.body.to_string(),
                )?;
                expect_eq(
                    "expiresAt",
                    r.body["newExpiresAt"].clone(),
                    &r.body["expiresAt"],
                )?;
                expect_eq(
                    "lease_expires_at",
                    r.body["newExpiresAt"].clone(),
                    &r.body["lease_expires_at"],
                )?;
                cx.lapse().await;
                let other = cx.pop(&pop_path(&q, &g, "&batch=10")).await?;
                expect(
                    other.is_none(),
                    "the extended lease still holds the partition",
                    format!("{:?}", txn_ids(&msgs(&other))),
                )?;
                let a = ack(&cx, ack_of(&p[0], "completed")).await?;
                expect_eq("ack under the extended lease", true, &a["success"])
            }
        ),
        case!(
            "core.lease.extend-never-revives",
            Must,
            "the three expiry keys hold the same time, `null` with `success: false` (unknown or expired lease). A lease is never revived after it expired.",
            [Core, Time],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0"]).await?;
                let p = msgs(
                    &cx.pop(&pop_path(
                        &q,
                        &g,
                        &format!("&batch=1&leaseSeconds={}", cx.window_secs()),
                    ))
                    .await?,
                );
                expect(p.len() == 1, "one message", format!("{p:?}"))?;
                let lease = p[0]["leaseId"].as_str().unwrap_or("").to_string();
                cx.lapse().await;
                let r = cx
                    .post(&format!("/api/v1/lease/{lease}/extend"), json!({}))
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("success", false, &r.body["success"])?;
                expect_eq("renewed", 0, &r.body["renewed"])?;
                for k in ["newExpiresAt", "expiresAt", "lease_expires_at"] {
                    expect(
                        r.body.get(k).is_some_and(Value::is_null),
                        format!("{k}: null"),
                        r.body.to_string(),
                    )?;
                }
                let a = ack(&cx, ack_of(&p[0], "completed")).await?;
                expect_eq("ack under the expired lease", false, &a["success"])?;
                let again = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq("redelivered", json!(["m0"]), &json!(txn_ids(&again)))
            }
        ),
        case!(
            "core.lease.extend-unknown",
            Must,
            "the three expiry keys hold the same time, `null` with `success: false` (unknown or expired lease).",
            [Core],
            |cx: Ctx| async move {
                let lease = uuid::Uuid::now_v7().to_string();
                let r = cx
                    .post(&format!("/api/v1/lease/{lease}/extend"), json!({}))
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("success", false, &r.body["success"])?;
                expect_eq("renewed", 0, &r.body["renewed"])?;
                expect_eq("newExpiresAt", Value::Null, &r.body["newExpiresAt"])
            }
        ),
    ]
}

fn acks() -> Vec<Case> {
    vec![
        case!(
            "core.ack.shape",
            Must,
            "POST /api/v1/ack ... answer 200 with an array, one element per ack: {index, transactionId, success, error, leaseReleased, dlq, noop}, all seven keys always present (`error: null` unless refused).",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p", &["m0"]).await?;
                let m = pop_queue_mode(&cx, &q).await?;
                let r = ack(&cx, ack_of(&m, "completed")).await?;
                expect_keys("an ack result", &r, &ACK_KEYS)?;
                expect_eq("index", 0, &r["index"])?;
                expect_eq("transactionId", "m0", &r["transactionId"])?;
                expect_eq("success", true, &r["success"])?;
                expect_eq("error", Value::Null, &r["error"])?;
                expect_eq("leaseReleased", true, &r["leaseReleased"])?;
                expect_eq("dlq", false, &r["dlq"])?;
                expect_eq("noop", false, &r["noop"])?;
                // A refused ack keeps the seven keys and says why.
                let mut bad = ack_of(&m, "completed");
                bad["transactionId"] = json!("no-such-message");
                let r = ack(&cx, bad).await?;
                expect_keys("a refused ack result", &r, &ACK_KEYS)?;
                expect_eq("success", false, &r["success"])?;
                expect(r["error"].is_string(), "an error text", r.to_string())
            }
        ),
        case!(
            "core.ack.batch-shape",
            Must,
            "POST /api/v1/ack/batch {acknowledgments: [...], consumerGroup?} answer 200 with an array, one element per ack: {index, transactionId, success, error, leaseReleased, dlq, noop}, all seven keys always present",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1", "m2"]).await?;
                let m = msgs(&cx.pop(&pop_path(&q, &g, "&batch=3")).await?);
                expect(m.len() == 3, "three messages", format!("{m:?}"))?;
                let acks: Vec<Value> = m
                    .iter()
                    .map(|m| {
                        json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                               "leaseId": m["leaseId"], "status": "completed"})
                    })
                    .collect();
                let r = cx
                    .post(
                        "/api/v1/ack/batch",
                        json!({"acknowledgments": acks, "consumerGroup": g}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                let out = r.body.as_array().cloned().unwrap_or_default();
                expect(out.len() == 3, "three results", r.body.to_string())?;
                for (i, a) in out.iter().enumerate() {
                    expect_keys("an ack result", a, &ACK_KEYS)?;
                    expect_eq("index", i, &a["index"])?;
                    expect_eq(
                        "transactionId",
                        m[i]["transactionId"].clone(),
                        &a["transactionId"],
                    )?;
                    expect_eq("success", true, &a["success"])?;
                    expect_eq("leaseReleased", i == 2, &a["leaseReleased"])?;
                }
                let p = cx.pop(&pop_path(&q, &g, "&batch=10")).await?;
                expect(
                    p.is_none(),
                    "nothing left for the group",
                    format!("{:?}", txn_ids(&msgs(&p))),
                )
            }
        ),
        case!(
            "core.ack.completed-aliases",
            Must,
            "`completed` (default; also `success`, `acked`, `ok`) | commits the group's cursor past this message: it and every earlier message of the batch are done (4a); when the cursor reaches the batch end the lease is released",
            [Core],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                push_ids(&cx, &q, "p", &["m0", "m1", "m2", "m3"]).await?;
                let m = msgs(&cx.pop(&pop_path(&q, &g, "&batch=4")).await?);
                expect(m.len() == 4, "four messages", format!("{m:?}"))?;
                for (i, status) in ["success", "acked", "ok"].iter().enumerate() {
                    let r = ack(&cx, ack_of(&m[i], status)).await?;
                    expect_eq(&format!("{status}: success"), true, &r["success"])?;
                    expect_eq(&format!("{status}: dlq"), false, &r["dlq"])?;
                    expect_eq(
                        &format!("{status}: leaseReleased"),
                        false,
                        &r["leaseReleased"],
                    )?;
                }
                let mut last = ack_of(&m[3], "completed");
                last.as_object_mut().map(|o| o.remove("status"));
                let r = ack(&cx, last).await?;
                expect_eq("default status: leaseReleased", true, &r["leaseReleased"])?;
                for msg in &m {
                    let mut again = ack_of(msg, "completed");
                    again.as_object_mut().map(|o| o.remove("leaseId"));
                    let r = ack(&cx, again).await?;
                    expect_eq("a repeat of a completed ack: noop", true, &r["noop"])?;
                    expect_eq("success", true, &r["success"])?;
                }
                let p = cx.pop(&pop_path(&q, &g, "&batch=10")).await?;
                expect(
                    p.is_none(),
                    "nothing redelivered",
                    format!("{:?}", txn_ids(&msgs(&p))),
                )
            }
        ),
        case!(
            "core.ack.failed-retry-limit",
            Must,
            "`failed` | counts one attempt and clamps the cursor before this message for the rest of the call (4a): it and the rest of its batch are delivered again, while attempts stay within `retryLimit`, then it is dead-lettered (or dropped with `deadLetterQueue: false`); `error` is kept as the reason",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 1})).await?;
                push_ids(&cx, &q, "p", &["m"]).await?;
                for attempt in 1..=2 {
                    let m = pop_queue_mode(&cx, &q).await?;
                    expect_eq("transactionId", "m", &m["transactionId"])?;
                    let mut body = ack_of(&m, "failed");
                    body["error"] = json!(format!("boom {attempt}"));
                    let r = ack(&cx, body).await?;
                    expect_eq("success", true, &r["success"])?;
                    expect_eq(
                        &format!("dlq after failure {attempt}"),
                        attempt == 2,
                        &r["dlq"],
                    )?;
                }
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}")).await?;
                expect(
                    p.is_none(),
                    "no redelivery after the dead letter",
                    format!("{:?}", txn_ids(&msgs(&p))),
                )?;
                let d = dlq(&cx, &q).await?;
                expect_eq("dlq total", 1, &d["total"])?;
                expect_eq(
                    "dead letter transactionId",
                    "m",
                    &d["messages"][0]["transactionId"],
                )?;
                expect_eq(
                    "dead letter errorMessage",
                    "boom 2",
                    &d["messages"][0]["errorMessage"],
                )
            }
        ),
        case!(
            "core.ack.failed-dropped-without-dlq",
            Must,
            "`deadLetterQueue` | true | `false`: an exhausted or `dlq` message is dropped instead of dead-lettered",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 0, "deadLetterQueue": false})).await?;
                push_ids(&cx, &q, "p", &["m"]).await?;
                let m = pop_queue_mode(&cx, &q).await?;
                let r = ack(&cx, ack_of(&m, "failed")).await?;
                expect_eq("success", true, &r["success"])?;
                expect_eq("dlq", false, &r["dlq"])?;
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}")).await?;
                expect(
                    p.is_none(),
                    "dropped, not redelivered",
                    format!("{:?}", txn_ids(&msgs(&p))),
                )?;
                expect_eq("dlq total", 0, &dlq(&cx, &q).await?["total"])
            }
        ),
        case!(
            "core.ack.retry-counts-nothing",
            Must,
            "`retry` | the same clamp without counting an attempt",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 0})).await?;
                push_ids(&cx, &q, "p", &["m"]).await?;
                for _ in 0..2 {
                    let m = pop_queue_mode(&cx, &q).await?;
                    let r = ack(&cx, ack_of(&m, "retry")).await?;
                    expect_eq("retry: success", true, &r["success"])?;
                    expect_eq("retry: dlq", false, &r["dlq"])?;
                }
                let m = pop_queue_mode(&cx, &q).await?;
                let r = ack(&cx, ack_of(&m, "failed")).await?;
                expect_eq(
                    "the first counted failure (retryLimit 0) dead-letters: dlq",
                    true,
                    &r["dlq"],
                )
            }
        ),
        case!(
            "core.ack.dlq-now",
            Must,
            "`dlq` | dead-lettered now",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                push_ids(&cx, &q, "p", &["m"]).await?;
                let m = pop_queue_mode(&cx, &q).await?;
                let mut body = ack_of(&m, "dlq");
                body["error"] = json!("poison");
                let r = ack(&cx, body).await?;
                expect_eq("success", true, &r["success"])?;
                expect_eq("dlq", true, &r["dlq"])?;
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}")).await?;
                expect(
                    p.is_none(),
                    "not redelivered",
                    format!("{:?}", txn_ids(&msgs(&p))),
                )?;
                let d = dlq(&cx, &q).await?;
                expect_eq("dlq total", 1, &d["total"])?;
                expect_eq("errorMessage", "poison", &d["messages"][0]["errorMessage"])
            }
        ),
        case!(
            "core.ack.unknown-status-is-failed",
            Must,
            "anything else (case-sensitive) | treated as `failed`",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                configure(&cx, &q, json!({"retryLimit": 0})).await?;
                push_ids(&cx, &q, "p", &["m0", "m1"]).await?;
                for status in ["Completed", "done"] {
                    let m = pop_queue_mode(&cx, &q).await?;
                    let r = ack(&cx, ack_of(&m, status)).await?;
                    expect_eq(&format!("{status}: success"), true, &r["success"])?;
                    expect_eq(
                        &format!("{status} counted as failed (retryLimit 0): dlq"),
                        true,
                        &r["dlq"],
                    )?;
                }
                expect_eq("dlq total", 2, &dlq(&cx, &q).await?["total"])
            }
        ),
    ]
}

fn kv_cases() -> Vec<Case> {
    vec![
        case!(
            "core.kv.put-get",
            Must,
            "`get` | `ns, key` | `found`, `key`, `value`, `version`, `expiresAt`, `updatedAt`; a miss is `found: false`, no `value`",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let out = kv(
                    &cx,
                    json!([{"op": "put", "ns": ns, "key": "k", "value": {"a": [1, 2]}, "ttlSeconds": 3600}]),
                )
                .await?;
                let put = &out["results"][0];
                expect_eq("index", 0, &put["index"])?;
                expect_eq("op", "put", &put["op"])?;
                expect_eq("applied", true, &put["applied"])?;
                expect_eq("key", "k", &put["key"])?;
                expect_eq("value", json!({"a": [1, 2]}), &put["value"])?;
                let got = kv_get(&cx, &ns, "k").await?;
                expect_keys(
                    "a get hit",
                    &got,
                    &["found", "key", "value", "version", "expiresAt", "updatedAt"],
                )?;
                expect_eq("found", true, &got["found"])?;
                expect_eq("value", json!({"a": [1, 2]}), &got["value"])?;
                expect_eq("version", put["version"].clone(), &got["version"])?;
                expect(
                    got["expiresAt"].as_str().and_then(iso_micros).is_some(),
                    "expiresAt a time (ttlSeconds given)",
                    got.to_string(),
                )?;
                let miss = kv_get(&cx, &ns, "nope").await?;
                expect_eq("found", false, &miss["found"])?;
                expect(
                    miss.get("value").is_none(),
                    "no value on a miss",
                    miss.to_string(),
                )
            }
        ),
        case!(
            "core.kv.put-if-absent",
            Must,
            "`putIfAbsent` | ... | same; the loser gets `reason: \"exists\"` and the winner's `value` and `version`",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let op = |v: i64| json!([{"op": "putIfAbsent", "ns": ns, "key": "k", "value": v, "forever": true}]);
                let win = kv(&cx, op(1)).await?["results"][0].clone();
                expect_eq("winner applied", true, &win["applied"])?;
                let lose = kv(&cx, op(2)).await?["results"][0].clone();
                expect(
                    lose["op"] == "putIfAbsent" || lose["op"] == "put",
                    "op putIfAbsent (or put)",
                    lose.to_string(),
                )?;
                expect_eq("loser applied", false, &lose["applied"])?;
                expect_eq("reason", "exists", &lose["reason"])?;
                expect_eq("value (the winner's)", 1, &lose["value"])?;
                expect_eq(
                    "version (the winner's)",
                    win["version"].clone(),
                    &lose["version"],
                )
            }
        ),
        case!(
            "core.kv.incr",
            Must,
            "`incr` | ... | `applied`, `value`, `version`; a bound refuses with `reason: \"limit\"`, a non-number with `reason: \"type\"`; an absent or expired key counts from 0",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let incr = |d: i64| json!({"op": "incr", "ns": ns, "key": "n", "delta": d, "max": 10, "forever": true});
                let r = kv(&cx, json!([incr(4)])).await?["results"][0].clone();
                expect_eq("applied", true, &r["applied"])?;
                expect_eq("value (from 0)", 4, &r["value"])?;
                let r = kv(&cx, json!([incr(5)])).await?["results"][0].clone();
                expect_eq("value", 9, &r["value"])?;
                let r = kv(&cx, json!([incr(2)])).await?["results"][0].clone();
                expect_eq("applied past max", false, &r["applied"])?;
                expect_eq("reason", "limit", &r["reason"])?;
                expect_eq("stored value", 9, &kv_get(&cx, &ns, "n").await?["value"])?;
                kv_put(&cx, &ns, "s", json!("text")).await?;
                let r = kv(
                    &cx,
                    json!([{"op": "incr", "ns": ns, "key": "s", "delta": 1, "forever": true}]),
                )
                .await?["results"][0]
                    .clone();
                expect_eq("applied on a string", false, &r["applied"])?;
                expect_eq("reason", "type", &r["reason"])
            }
        ),
        case!(
            "core.kv.incr-ttl-create-only",
            Must,
            "`incr` | `ns, key, delta, min?, max?, ttlSeconds` or `forever`: the expiry of an incr is create-only, it applies when the incr creates the key and never extends a live key, so a fixed-window limiter's window closes under load (queen-mq 2.6.0 (Python) `tests/test_kv.py` `test_incr_does_not_extend_a_live_ttl`: incr with `ttl_seconds=2`, then with 3600: `expiresAt` unchanged)",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let incr = |expiry: Value| {
                    let mut op = json!({"op": "incr", "ns": ns, "key": "limit:window", "delta": 1});
                    let field = if expiry.is_boolean() {
                        "forever"
                    } else {
                        "ttlSeconds"
                    };
                    op[field] = expiry;
                    json!([op])
                };
                let r = kv(&cx, incr(json!(2))).await?["results"][0].clone();
                expect_eq("the first incr: applied", true, &r["applied"])?;
                let first = kv_get(&cx, &ns, "limit:window").await?;
                expect(
                    first["expiresAt"].as_str().and_then(iso_micros).is_some(),
                    "expiresAt a time (the incr created the key with ttlSeconds: 2)",
                    first.to_string(),
                )?;
                for (what, expiry, value) in [
                    ("ttlSeconds: 3600", json!(3600), 2),
                    ("forever: true", json!(true), 3),
                ] {
                    let r = kv(&cx, incr(expiry)).await?["results"][0].clone();
                    expect_eq(
                        &format!("an incr with {what}: applied"),
                        true,
                        &r["applied"],
                    )?;
                    let now = kv_get(&cx, &ns, "limit:window").await?;
                    expect_eq(
                        &format!("the value after the incr with {what}"),
                        value,
                        &now["value"],
                    )?;
                    expect_eq(
                        &format!("expiresAt after an incr with {what} (a live key keeps its own)"),
                        first["expiresAt"].clone(),
                        &now["expiresAt"],
                    )?;
                }
                Ok(())
            }
        ),
        case!(
            "core.kv.incr-ttl-recreates",
            Must,
            "`incr` | … | an absent or expired key counts from 0: an incr that re-creates a key whose expiry lapsed applies its own `ttlSeconds` (the expiry of an incr is create-only; queen-mq 2.6.0 (Python) `tests/test_kv.py` `test_incr_does_not_extend_a_live_ttl`)",
            [Core, Kv, Time],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let incr = |ttl: i64| json!([{"op": "incr", "ns": ns, "key": "n", "delta": 1, "ttlSeconds": ttl}]);
                kv(&cx, incr(cx.window_secs() as i64)).await?;
                let first = kv_get(&cx, &ns, "n").await?["expiresAt"].clone();
                cx.lapse().await;
                let r = kv(&cx, incr(3600)).await?["results"][0].clone();
                expect_eq("an incr after the key lapsed: applied", true, &r["applied"])?;
                expect_eq("its value (from 0)", 1, &r["value"])?;
                let again = kv_get(&cx, &ns, "n").await?["expiresAt"].clone();
                let (a, b) = (
                    first.as_str().and_then(iso_micros),
                    again.as_str().and_then(iso_micros),
                );
                expect(
                    matches!((a, b), (Some(a), Some(b)) if b - a > 3_000_000_000),
                    "the re-created key expires about 3600 s after the incr (its ttlSeconds applies)",
                    format!("expiresAt {first} then {again}"),
                )
            }
        ),
        case!(
            "core.kv.absent-version-zero",
            Must,
            "`expect: N` means its current version must be N (it never creates); a result about an absent key answers `version: 0`, the version `expect` calls \"must not exist\" (queen-mq 2.6.0 (Python) `tests/test_kv.py` `test_expect_on_an_absent_key_creates_nothing`: `applied` false, `reason` \"absent\", `version` 0, and a get finds nothing)",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let put = json!({"op": "put", "ns": ns, "key": "fence:absent",
                                 "value": {"compensate": true}, "ttlSeconds": 60, "expect": 42});
                let r = kv(&cx, json!([put])).await?["results"][0].clone();
                expect_eq("applied", false, &r["applied"])?;
                expect_eq("reason", "absent", &r["reason"])?;
                expect_eq("version", 0, &r["version"])?;
                expect_kv_absent(&cx, &ns, "fence:absent")
                    .await
                    .map_err(|f| {
                        Failure::new("an expect that matched nothing creates nothing", f.actual)
                    })?;
                let d = kv(
                    &cx,
                    json!([{"op": "delete", "ns": ns, "key": "fence:absent"}]),
                )
                .await?["results"][0]
                    .clone();
                expect_eq("a delete of the absent key: reason", "absent", &d["reason"])?;
                expect_eq("a delete of the absent key: version", 0, &d["version"])
            }
        ),
        case!(
            "core.kv.incr-default-delta",
            Should,
            "`incr` | `ns, key, delta (a missing one counts as 1 (ours))`",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let op = json!([{"op": "incr", "ns": ns, "key": "n", "forever": true}]);
                kv(&cx, op.clone()).await?;
                let r = kv(&cx, op).await?["results"][0].clone();
                expect_eq("value after two incrs without delta", 2, &r["value"])
            }
        ),
        case!(
            "core.kv.required-writes-nothing",
            Must,
            "A standalone call with a lost `required` op writes nothing of the call and answers {ok: false, reason: \"kv_precondition\", failedIndex, kvReason, version, value, results: []}.",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let v = kv_put(&cx, &ns, "marker", json!("taken")).await?;
                let out = kv(
                    &cx,
                    json!([
                        {"op": "put", "ns": ns, "key": "a", "value": 1, "forever": true},
                        {"op": "putIfAbsent", "ns": ns, "key": "marker", "value": "mine", "forever": true, "required": true},
                        {"op": "put", "ns": ns, "key": "b", "value": 2, "forever": true}
                    ]),
                )
                .await?;
                expect_eq("ok", false, &out["ok"])?;
                expect_eq("reason", "kv_precondition", &out["reason"])?;
                expect_eq("failedIndex", 1, &out["failedIndex"])?;
                expect_eq("kvReason", "exists", &out["kvReason"])?;
                expect_eq("version", v, &out["version"])?;
                expect_eq("value", "taken", &out["value"])?;
                expect_eq("results", json!([]), &out["results"])?;
                expect_kv_absent(&cx, &ns, "a").await?;
                expect_kv_absent(&cx, &ns, "b").await
            }
        ),
        case!(
            "core.kv.expiry-refusals",
            Must,
            "Refusals: 400 `kv_bad_request` with a `reason` (e.g. `kv_expiry_not_specified`, `kv_bad_ttl`, `kv_bad_expect`); a write needs exactly one expiry",
            [Core, Kv],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                let cases = [
                    (
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1}),
                        Some("kv_expiry_not_specified"),
                    ),
                    (
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1, "ttlSeconds": 60, "forever": true}),
                        None,
                    ),
                    (
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1, "ttlSeconds": 0}),
                        None,
                    ),
                    (
                        json!({"op": "put", "ns": ns, "key": "k", "value": 1, "forever": true, "expect": "one"}),
                        None,
                    ),
                ];
                for (op, reason) in cases {
                    let r = cx.post("/api/v1/kv", json!({"operations": [op]})).await?;
                    expect_error(&r, 400, "kv_bad_request")?;
                    expect(r.body["reason"].is_string(), "a reason", r.body.to_string())?;
                    if let Some(reason) = reason {
                        expect_eq("reason", reason, &r.body["reason"])?;
                    }
                }
                expect_kv_absent(&cx, &ns, "k").await
            }
        ),
        case!(
            "core.kv.expired-is-absent",
            Must,
            "An expired key behaves as absent everywhere.",
            [Core, Kv, Time],
            |cx: Ctx| async move {
                let ns = cx.ns("kv");
                kv(
                    &cx,
                    json!([{"op": "put", "ns": ns, "key": "k", "value": 1, "ttlSeconds": cx.window_secs()}]),
                )
                .await?;
                cx.lapse().await;
                expect_kv_absent(&cx, &ns, "k").await?;
                let r = kv(
                    &cx,
                    json!([{"op": "putIfAbsent", "ns": ns, "key": "k", "value": 2, "forever": true}]),
                )
                .await?["results"][0]
                    .clone();
                expect_eq(
                    "putIfAbsent over an expired key: applied",
                    true,
                    &r["applied"],
                )
            }
        ),
    ]
}

fn timer_cases() -> Vec<Case> {
    vec![
        case!(
            "core.timers.schedule-cancel",
            Must,
            "Results: {ok: true, status: \"scheduled\" | \"rescheduled\", queue, timerKey, txn, messageId, deliverAt}, {ok: true, status: \"cancelled\", …}, {ok: false, status: \"absent\", …}",
            [Core, Timers],
            |cx: Ctx| async move {
                let q = cx.name("tq");
                let r = cx
                    .post(
                        "/api/v1/timers",
                        json!({"operations": [schedule(&q, "k", "t-1", 3_600_000, &json!({"n": 1}))]}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                let s = &r.body["results"][0];
                expect_eq("ok", true, &s["ok"])?;
                expect_eq("status", "scheduled", &s["status"])?;
                expect_eq("queue", q.as_str(), &s["queue"])?;
                expect_eq("timerKey", "k", &s["timerKey"])?;
                expect_eq("txn", "t-1", &s["txn"])?;
                expect_uuid7("messageId", &s["messageId"])?;
                expect(
                    s["deliverAt"].as_str().and_then(iso_micros).is_some(),
                    "deliverAt a time",
                    s.to_string(),
                )?;
                let peek = timer_peek(&cx, &q, "k").await?;
                expect_eq("peek found", true, &peek["found"])?;
                expect_eq("peek txn", "t-1", &peek["txn"])?;
                let r = cx
                    .post(
                        "/api/v1/timers",
                        json!({"operations": [{"op": "cancel", "queue": q, "timerKey": "k"}]}),
                    )
                    .await?;
                expect_status(&r, 200)?;
                expect_eq("ok", true, &r.body["results"][0]["ok"])?;
                expect_eq("status", "cancelled", &r.body["results"][0]["status"])?;
                let r = cx.delete(&format!("/api/v1/timers/{q}/k")).await?;
                expect_status(&r, 200)?;
                expect_eq("ok", false, &r.body["ok"])?;
                expect_eq("status", "absent", &r.body["status"])?;
                expect_eq(
                    "peek found",
                    false,
                    &timer_peek(&cx, &q, "k").await?["found"],
                )
            }
        ),
        case!(
            "core.timers.horizon",
            Must,
            "Standalone limits: ... horizon 90 days (`QUEEN_TIMERS_MAX_HORIZON_S`, 403 `timer_horizon_exceeded`)",
            [Core, Timers],
            |cx: Ctx| async move {
                let q = cx.name("tq");
                let days91 = 91i64 * 24 * 3600 * 1000;
                let r = cx
                    .post(
                        "/api/v1/timers",
                        json!({"operations": [
                            schedule(&q, "ok", "t-ok", 60_000, &json!(1)),
                            schedule(&q, "far", "t-far", days91, &json!(2))
                        ]}),
                    )
                    .await?;
                expect_error(&r, 403, "timer_horizon_exceeded")?;
                expect_eq(
                    "peek found (far)",
                    false,
                    &timer_peek(&cx, &q, "far").await?["found"],
                )?;
                expect_eq(
                    "peek found (the other op of the call)",
                    false,
                    &timer_peek(&cx, &q, "ok").await?["found"],
                )
            }
        ),
        case!(
            "core.timers.key-twice",
            Must,
            "one `(queue, timerKey)` per call (400 `timers_bad_request`)",
            [Core, Timers],
            |cx: Ctx| async move {
                let q = cx.name("tq");
                let r = cx
                    .post(
                        "/api/v1/timers",
                        json!({"operations": [
                            schedule(&q, "k", "t-1", 60_000, &json!(1)),
                            schedule(&q, "k", "t-2", 60_000, &json!(2))
                        ]}),
                    )
                    .await?;
                expect_error(&r, 400, "timers_bad_request")?;
                expect_eq(
                    "peek found",
                    false,
                    &timer_peek(&cx, &q, "k").await?["found"],
                )
            }
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::{b64, iso_micros};

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(b64(b""), "");
        assert_eq!(b64(b"f"), "Zg==");
        assert_eq!(b64(b"fo"), "Zm8=");
        assert_eq!(b64(b"foo"), "Zm9v");
        assert_eq!(
            b64(br#"{"orderId":"order-7"}"#),
            "eyJvcmRlcklkIjoib3JkZXItNyJ9"
        );
    }

    #[test]
    fn iso_times_parse_to_epoch_micros() {
        assert_eq!(iso_micros("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(iso_micros("1970-01-02T00:00:01.5Z"), Some(86_401_500_000));
        assert_eq!(
            iso_micros("2026-10-02T09:14:03.512887Z"),
            iso_micros("2026-10-02T09:14:03.512887+00:00")
        );
        assert_eq!(
            iso_micros("2000-03-01T00:00:00Z"),
            Some(951_868_800_000_000)
        );
        assert_eq!(iso_micros("nonsense"), None);
    }
}
