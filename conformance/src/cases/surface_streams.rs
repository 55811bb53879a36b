//! The stream runner's routes (`mock-broker/ROUTES.md` 9, spoken by the official
//! clients' `Stream::run`; `queen-mq` 2.7.0 `tests/streams.rs`): a query registered by
//! name, the atomic cycle (state, emitted messages and the source ack in one commit or
//! not at all), claims of idle partitions, and the state read back.
//!
//! Every case names the stream's consumer group itself (`consumer_group`), so its
//! pops and its cycles act for the same group. The cases need
//! [`Capability::Streams`](crate::case::Capability::Streams).

use serde_json::{Value, json};

use super::core::{msgs, pop_path, push_ids, stored, txn_ids};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, Resp, expect, expect_eq, expect_status};

/// Registration.
const REGISTER: &str = "POST /streams/v1/queries registers a query by name or finds it: the same name answers the same `query_id` (minted once, not the name itself), `fresh: true` only the first time; another name is another query.";
/// A changed chain.
const CHAIN: &str = "The same name with another `config_hash` (a changed operator chain) is refused with 409 `config_hash_mismatch` and wipes nothing; with `reset: true` the new chain is accepted under the same `query_id` and the old chain's state is wiped.";
/// The cycle.
const CYCLE: &str = "POST /streams/v1/cycle applies its state ops, the messages it emits and the ack of what it read in one commit: after a `completed` ack of the batch's last message the state reads back, the emitted messages are in their queue, the batch is consumed and its lease released.";
/// A refused cycle.
const REFUSED: &str = "The cycle's ack comes first, and when it is refused nothing else lands: a cycle whose ack names a lease that is not the partition's live lease for the group (a forged one, a claim already released, a claim that lapsed) answers `success: false` with `invalid or expired lease`, and writes neither its state ops, nor its messages, nor its ack.";
/// State.
const STATE: &str = "State is per (query, partition) and durable: an upsert stays until a later cycle deletes it, a cycle that does not name a key leaves it, a runner registering the same chain again (a restart, or a peer joining with `reset: true`) reads it back, and another query over the same queue has its own. `state/get` answers rows in key order, filtered by `keys` (absent keys skipped) and `key_prefix`.";
/// The partitions listing.
const PARTITIONS: &str = "POST /streams/v1/state/partitions lists the partitions holding the query's state (`partition_id`, `partition`, `queue`); a partition whose last cell is deleted leaves the listing.";
/// Claims.
const CLAIM: &str = "POST /streams/v1/claim leases an idle partition to the group with an empty batch only when nobody of the group holds it and the group has read all of it: `busy` while held, `backlog` while messages wait for the group, `missing` for an id that is not a partition of the source queue, else `claimed`; while claimed the group's pops get nothing from it.";
/// An unknown query.
const UNKNOWN: &str = "An unknown `query_id` is a verdict, HTTP 200 with `success: false`, never a 404 (the official runner reads a 404 on claim or state/partitions as \"this broker has no claims\" and stops claiming for good).";
/// Bad input.
const BAD_INPUT: &str =
    "Bad input is 400 `bad_request` naming the field, before anything is written.";

/// A registered query over a source and a sink queue of the case's own.
struct Query {
    id: String,
    src: String,
    sink: String,
    group: String,
}

/// POST /streams/v1/queries.
async fn register(
    cx: &Ctx,
    name: &str,
    src: &str,
    hash: &str,
    reset: bool,
) -> Result<Resp, Failure> {
    cx.post(
        "/streams/v1/queries",
        json!({"name": name, "source_queue": src, "sink_queue": cx.name("sink"),
               "config_hash": hash, "reset": reset}),
    )
    .await
}

/// Registers the case's query `query` (chain `h1`) and answers it.
async fn query(cx: &Ctx) -> Result<Query, Failure> {
    let src = cx.name("src");
    let r = register(cx, &cx.name("query"), &src, "h1", false).await?;
    expect_status(&r, 200)?;
    let id = r.body["query_id"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Failure::new("a query_id", r.body.to_string()))?
        .to_string();
    Ok(Query {
        id,
        src,
        sink: cx.name("sink"),
        group: cx.name("g"),
    })
}

/// Pushes `ids` to the source's partition `p` and pops them as the stream's group.
async fn batch(cx: &Ctx, s: &Query, ids: &[&str]) -> Result<Vec<Value>, Failure> {
    push_ids(cx, &s.src, "p", ids).await?;
    let m = msgs(
        &cx.pop(&pop_path(
            &s.src,
            &s.group,
            &format!("&batch={}", ids.len()),
        ))
        .await?,
    );
    expect_eq("the leased batch", json!(ids), &json!(txn_ids(&m)))?;
    Ok(m)
}

/// The group's next pop of the source: its `transactionId`s.
async fn next(cx: &Ctx, s: &Query) -> Result<Value, Failure> {
    Ok(json!(txn_ids(&msgs(
        &cx.pop(&pop_path(&s.src, &s.group, "&batch=100")).await?
    ))))
}

/// The cycle a runner commits after folding the whole batch `m`.
fn full_cycle(s: &Query, m: &[Value], ops: Value, push: Value) -> Value {
    let last = m.last().cloned().unwrap_or(Value::Null);
    json!({
        "query_id": s.id,
        "partition_id": last["partitionId"],
        "consumer_group": s.group,
        "state_ops": ops,
        "push_items": push,
        "ack": {"transactionId": last["transactionId"], "leaseId": last["leaseId"],
                "status": "completed", "count": m.len()},
        "release_lease": true,
    })
}

/// A cycle without an ack (a flush) on partition `pid`.
fn flush(s: &Query, pid: &Value, ops: Value) -> Value {
    json!({"query_id": s.id, "partition_id": pid, "consumer_group": s.group,
           "state_ops": ops, "release_lease": true})
}

/// The close of a claimed partition: `ops`, `push`, and the empty batch's ack.
fn close(s: &Query, pid: &Value, lease: &Value, ops: Value, push: Value) -> Value {
    json!({
        "query_id": s.id, "partition_id": pid, "consumer_group": s.group,
        "state_ops": ops, "push_items": push,
        "ack": {"transactionId": "", "leaseId": lease, "status": "completed", "count": 0},
        "release_lease": true,
    })
}

/// POST /streams/v1/cycle; answers the 200 body.
async fn cycle(cx: &Ctx, body: Value) -> Result<Value, Failure> {
    let r = cx.post("/streams/v1/cycle", body).await?;
    expect_status(&r, 200)?;
    Ok(r.body)
}

/// A registered query whose one message `m0` was folded with `ops` by a committed
/// cycle (so its partition is fully read and idle): the query and that partition's id.
async fn folded(cx: &Ctx, ops: Value) -> Result<(Query, Value), Failure> {
    let s = query(cx).await?;
    let m = batch(cx, &s, &["m0"]).await?;
    let pid = m[0]["partitionId"].clone();
    committed(cx, "the fold", full_cycle(&s, &m, ops, json!([]))).await?;
    Ok((s, pid))
}

/// A cycle that must commit.
async fn committed(cx: &Ctx, what: &str, body: Value) -> Result<Value, Failure> {
    let out = cycle(cx, body).await?;
    expect(
        out["success"] == json!(true),
        format!("{what}: success: true"),
        format!("{what}: {out}"),
    )?;
    Ok(out)
}

/// A cycle that must be refused for its lease, with nothing applied.
async fn refused(cx: &Ctx, what: &str, body: Value) -> Result<(), Failure> {
    let out = cycle(cx, body).await?;
    let err = out["error"].as_str().unwrap_or_default().to_lowercase();
    expect(
        out["success"] == json!(false)
            && err.contains("invalid or expired lease")
            && out["ack_result"].is_null()
            && out["push_results"].as_array().is_none_or(Vec::is_empty),
        format!(
            "{what}: success: false, error \"invalid or expired lease\", no ack_result, no push_results"
        ),
        format!("{what}: {out}"),
    )
}

/// The state rows of `pid` (every key), by `state/get`.
async fn state(cx: &Ctx, qid: &str, pid: &Value, extra: Value) -> Result<Vec<Value>, Failure> {
    let mut body = json!({"query_id": qid, "partition_id": pid});
    for (k, v) in extra.as_object().into_iter().flatten() {
        body[k.as_str()] = v.clone();
    }
    let r = cx.post("/streams/v1/state/get", body).await?;
    expect_status(&r, 200)?;
    expect_eq("state/get success", true, &r.body["success"])?;
    Ok(r.body["rows"].as_array().cloned().unwrap_or_default())
}

/// The keys of state rows.
fn keys(rows: &[Value]) -> Value {
    json!(rows.iter().map(|r| r["key"].clone()).collect::<Vec<_>>())
}

/// POST /streams/v1/claim of `pids` for the group; answers the 200 body.
async fn claim(cx: &Ctx, s: &Query, pids: Value, lease_seconds: u64) -> Result<Value, Failure> {
    let r = cx
        .post(
            "/streams/v1/claim",
            json!({"query_id": s.id, "partition_ids": pids, "consumer_group": s.group,
                   "lease_seconds": lease_seconds}),
        )
        .await?;
    expect_status(&r, 200)?;
    expect_eq("claim success", true, &r.body["success"])?;
    Ok(r.body)
}

/// The per-partition statuses of a claim.
fn statuses(c: &Value) -> Value {
    json!(
        c["partitions"]
            .as_array()
            .map(|p| p.iter().map(|x| x["status"].clone()).collect::<Vec<_>>())
    )
}

/// The payloads of what the sink queue stores.
async fn emitted(cx: &Ctx, s: &Query) -> Result<Value, Failure> {
    let m = stored(cx, &s.sink).await?;
    Ok(json!(
        m.iter().map(|x| x["data"].clone()).collect::<Vec<_>>()
    ))
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    let mut all = registration();
    all.extend(cycles());
    all.extend(reads());
    all
}

fn registration() -> Vec<Case> {
    vec![
        case!(
            "surface.streams.register.stable-id",
            Must,
            REGISTER,
            [Core, Streams],
            |cx: Ctx| async move {
                let (name, src) = (cx.name("query"), cx.name("src"));
                let first = register(&cx, &name, &src, "h1", false).await?;
                expect_status(&first, 200)?;
                expect_eq("first: success", true, &first.body["success"])?;
                expect_eq("first: fresh", true, &first.body["fresh"])?;
                let id = first.body["query_id"].clone();
                expect(
                    id.as_str().is_some_and(|s| !s.is_empty() && s != name),
                    "a query_id minted for the name (not the name itself)",
                    first.body.to_string(),
                )?;
                let again = register(&cx, &name, &src, "h1", false).await?;
                expect_status(&again, 200)?;
                expect_eq("again: query_id", id.clone(), &again.body["query_id"])?;
                expect_eq("again: fresh", false, &again.body["fresh"])?;
                let other = register(&cx, &cx.name("other"), &src, "h1", false).await?;
                expect_status(&other, 200)?;
                expect_eq("another name: fresh", true, &other.body["fresh"])?;
                expect(
                    other.body["query_id"].is_string() && other.body["query_id"] != id,
                    "another name: another query_id",
                    other.body.to_string(),
                )
            }
        ),
        case!(
            "surface.streams.register.changed-chain",
            Must,
            CHAIN,
            [Core, Streams],
            |cx: Ctx| async move {
                let (s, pid) = folded(
                    &cx,
                    json!([{"type": "upsert", "key": "k", "value": {"acc": 1}}]),
                )
                .await?;
                let name = cx.name("query");
                let r = register(&cx, &name, &s.src, "h2", false).await?;
                expect_status(&r, 409)?;
                expect_eq("refused: success", false, &r.body["success"])?;
                expect_eq("refused: code", "config_hash_mismatch", &r.body["code"])?;
                expect_eq("refused: query_id", s.id.clone(), &r.body["query_id"])?;
                expect_eq(
                    "state keys after the refusal",
                    json!(["k"]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )?;
                let r = register(&cx, &name, &s.src, "h2", true).await?;
                expect_status(&r, 200)?;
                expect_eq("reset: success", true, &r.body["success"])?;
                expect_eq("reset: reset", true, &r.body["reset"])?;
                expect_eq("reset: query_id", s.id.clone(), &r.body["query_id"])?;
                expect_eq(
                    "state keys after the reset",
                    json!([]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )?;
                let r = register(&cx, &name, &s.src, "h2", false).await?;
                expect_status(&r, 200).map_err(|f| Failure {
                    expected: format!("the new chain on record: {}", f.expected),
                    ..f
                })
            }
        ),
    ]
}

fn cycles() -> Vec<Case> {
    vec![
        case!(
            "surface.streams.cycle.commits-together",
            Must,
            CYCLE,
            [Core, Streams],
            |cx: Ctx| async move {
                let s = query(&cx).await?;
                let m = batch(&cx, &s, &["m0", "m1", "m2"]).await?;
                let pid = m[0]["partitionId"].clone();
                let ops = json!([
                    {"type": "upsert", "key": "w:a", "value": {"acc": 3, "windowEnd": 2000}},
                    {"type": "upsert", "key": "w:b", "value": 7},
                    {"type": "delete", "key": "never-there"},
                ]);
                let push = json!([{"queue": s.sink, "partition": "p", "payload": {"sum": 3}}]);
                let out = committed(&cx, "the cycle", full_cycle(&s, &m, ops, push)).await?;
                expect_eq("state_ops_applied", 3, &out["state_ops_applied"])?;
                expect_eq(
                    "push_results",
                    1,
                    &json!(out["push_results"].as_array().map_or(0, Vec::len)),
                )?;
                expect_eq("ack_result.success", true, &out["ack_result"]["success"])?;
                expect_eq(
                    "ack_result.lease_released",
                    true,
                    &out["ack_result"]["lease_released"],
                )?;
                let rows = state(&cx, &s.id, &pid, json!({})).await?;
                expect_eq("state keys", json!(["w:a", "w:b"]), &keys(&rows))?;
                expect_eq(
                    "state values",
                    json!([{"acc": 3, "windowEnd": 2000}, 7]),
                    &json!(rows.iter().map(|r| r["value"].clone()).collect::<Vec<_>>()),
                )?;
                expect_eq(
                    "what the sink stores",
                    json!([{"sum": 3}]),
                    &emitted(&cx, &s).await?,
                )?;
                expect_eq(
                    "the group's next pop (the batch consumed)",
                    json!([]),
                    &next(&cx, &s).await?,
                )?;
                push_ids(&cx, &s.src, "p", &["m3"]).await?;
                expect_eq(
                    "the pop after one more push (the cursor past m2, the lease released)",
                    json!(["m3"]),
                    &next(&cx, &s).await?,
                )
            }
        ),
        case!(
            "surface.streams.cycle.refused.forged-lease",
            Must,
            REFUSED,
            [Core, Streams],
            |cx: Ctx| async move {
                let s = query(&cx).await?;
                let m = batch(&cx, &s, &["m0", "m1"]).await?;
                let pid = m[0]["partitionId"].clone();
                let ops = json!([{"type": "upsert", "key": "k", "value": 1}]);
                let push = json!([{"queue": s.sink, "payload": {"n": 1}}]);
                let mut forged = full_cycle(&s, &m, ops.clone(), push.clone());
                forged["ack"]["leaseId"] = json!(uuid::Uuid::now_v7().to_string());
                refused(&cx, "a cycle under a forged lease", forged).await?;
                expect_eq(
                    "state after the refused cycle",
                    json!([]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )?;
                expect_eq(
                    "what the sink stores after the refused cycle",
                    json!([]),
                    &emitted(&cx, &s).await?,
                )?;
                expect_eq(
                    "the group's pop (the batch still under its own lease)",
                    json!([]),
                    &next(&cx, &s).await?,
                )?;
                // The ack did not land: the batch's own cycle can still commit it.
                committed(
                    &cx,
                    "the cycle under the batch's own lease",
                    full_cycle(&s, &m, ops, push),
                )
                .await?;
                expect_eq(
                    "state after it",
                    json!(["k"]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )
            }
        ),
        case!(
            "surface.streams.cycle.refused.stale-claim",
            Must,
            REFUSED,
            [Core, Streams],
            |cx: Ctx| async move {
                let (s, pid) = folded(
                    &cx,
                    json!([{"type": "upsert", "key": "k", "value": {"acc": 1}}]),
                )
                .await?;
                let c = claim(&cx, &s, json!([pid]), 30).await?;
                expect_eq("the claim", json!(["claimed"]), &statuses(&c))?;
                let lease = c["lease_id"].clone();
                let out = committed(
                    &cx,
                    "the close under the claim",
                    close(
                        &s,
                        &pid,
                        &lease,
                        json!([{"type": "delete", "key": "k"}]),
                        json!([{"queue": s.sink, "payload": {"count": 1}}]),
                    ),
                )
                .await?;
                expect_eq(
                    "the close: ack_result.lease_released",
                    true,
                    &out["ack_result"]["lease_released"],
                )?;
                // The same claim again, now released.
                refused(
                    &cx,
                    "a second close under the released claim",
                    close(
                        &s,
                        &pid,
                        &lease,
                        json!([{"type": "upsert", "key": "again", "value": 1}]),
                        json!([{"queue": s.sink, "payload": {"count": 2}}]),
                    ),
                )
                .await?;
                expect_eq(
                    "state after the stale close",
                    json!([]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )?;
                expect_eq(
                    "what the sink stores (the first close only)",
                    json!([{"count": 1}]),
                    &emitted(&cx, &s).await?,
                )
            }
        ),
        case!(
            "surface.streams.cycle.refused.expired-claim",
            Must,
            REFUSED,
            [Core, Streams, Time],
            |cx: Ctx| async move {
                let (s, pid) = folded(&cx, json!([])).await?;
                let c = claim(&cx, &s, json!([pid]), cx.window_secs()).await?;
                expect_eq("the claim", json!(["claimed"]), &statuses(&c))?;
                // Past the claim's window (with room for whole-second clocks).
                cx.lapse().await;
                refused(
                    &cx,
                    "a close under the lapsed claim",
                    close(
                        &s,
                        &pid,
                        &c["lease_id"],
                        json!([{"type": "upsert", "key": "late", "value": 1}]),
                        json!([{"queue": s.sink, "payload": {"late": true}}]),
                    ),
                )
                .await?;
                expect_eq(
                    "state after it",
                    json!([]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )?;
                expect_eq("what the sink stores", json!([]), &emitted(&cx, &s).await?)?;
                let again = claim(&cx, &s, json!([pid]), 30).await?;
                expect_eq(
                    "a claim after the lapse",
                    json!(["claimed"]),
                    &statuses(&again),
                )
            }
        ),
    ]
}

fn reads() -> Vec<Case> {
    vec![
        case!(
            "surface.streams.state.survives",
            Must,
            STATE,
            [Core, Streams],
            |cx: Ctx| async move {
                let s = query(&cx).await?;
                let m = batch(&cx, &s, &["m0"]).await?;
                let pid = m[0]["partitionId"].clone();
                let ops = json!([
                    {"type": "upsert", "key": "b", "value": {"x": 1}},
                    {"type": "upsert", "key": "a", "value": 1},
                ]);
                committed(&cx, "the fold", full_cycle(&s, &m, ops, json!([]))).await?;
                committed(
                    &cx,
                    "a flush that writes c only",
                    flush(
                        &s,
                        &pid,
                        json!([{"type": "upsert", "key": "c", "value": 3}]),
                    ),
                )
                .await?;
                let name = cx.name("query");
                for (reset, what) in [(false, "a restart"), (true, "a peer joining (reset: true)")]
                {
                    let r = register(&cx, &name, &s.src, "h1", reset).await?;
                    expect_status(&r, 200)?;
                    expect_eq(
                        &format!("{what}: query_id"),
                        s.id.clone(),
                        &r.body["query_id"],
                    )?;
                    let rows = state(&cx, &s.id, &pid, json!({})).await?;
                    expect_eq(
                        &format!("state keys after {what}"),
                        json!(["a", "b", "c"]),
                        &keys(&rows),
                    )?;
                    expect_eq(
                        &format!("state values after {what}"),
                        json!([1, {"x": 1}, 3]),
                        &json!(rows.iter().map(|r| r["value"].clone()).collect::<Vec<_>>()),
                    )?;
                }
                let picked = state(&cx, &s.id, &pid, json!({"keys": ["b", "absent"]})).await?;
                expect_eq("keys [b, absent]", json!(["b"]), &keys(&picked))?;
                let prefixed = state(&cx, &s.id, &pid, json!({"key_prefix": "a"})).await?;
                expect_eq("key_prefix a", json!(["a"]), &keys(&prefixed))?;
                let other = register(&cx, &cx.name("other"), &s.src, "h1", false).await?;
                expect_status(&other, 200)?;
                let oid = other.body["query_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                expect_eq(
                    "another query's state on the same partition",
                    json!([]),
                    &keys(&state(&cx, &oid, &pid, json!({})).await?),
                )
            }
        ),
        case!(
            "surface.streams.state.partitions",
            Must,
            PARTITIONS,
            [Core, Streams],
            |cx: Ctx| async move {
                let s = query(&cx).await?;
                let m = batch(&cx, &s, &["m0"]).await?;
                let pid = m[0]["partitionId"].clone();
                let list = |cx: Ctx, qid: String| async move {
                    let r = cx
                        .post("/streams/v1/state/partitions", json!({"query_id": qid}))
                        .await?;
                    expect_status(&r, 200)?;
                    expect_eq("state/partitions success", true, &r.body["success"])?;
                    Ok::<Value, Failure>(r.body["partitions"].clone())
                };
                expect_eq(
                    "the listing before any state",
                    json!([]),
                    &list(cx.clone(), s.id.clone()).await?,
                )?;
                let ops = json!([{"type": "upsert", "key": "k", "value": 1}]);
                committed(&cx, "the fold", full_cycle(&s, &m, ops, json!([]))).await?;
                let listed = list(cx.clone(), s.id.clone()).await?;
                expect_eq(
                    "listed partitions",
                    1,
                    &json!(listed.as_array().map_or(0, Vec::len)),
                )?;
                expect_eq("its partition_id", pid.clone(), &listed[0]["partition_id"])?;
                expect_eq("its partition", "p", &listed[0]["partition"])?;
                expect_eq("its queue", s.src.clone(), &listed[0]["queue"])?;
                committed(
                    &cx,
                    "a flush deleting the last key",
                    flush(&s, &pid, json!([{"type": "delete", "key": "k"}])),
                )
                .await?;
                expect_eq(
                    "the listing after the last delete",
                    json!([]),
                    &list(cx.clone(), s.id.clone()).await?,
                )
            }
        ),
        case!(
            "surface.streams.claim.statuses",
            Must,
            CLAIM,
            [Core, Streams],
            |cx: Ctx| async move {
                let s = query(&cx).await?;
                let m = batch(&cx, &s, &["m0"]).await?;
                let pid = m[0]["partitionId"].clone();
                // A partition of another queue is not one of the source's.
                let other = cx.name("other");
                push_ids(&cx, &other, "p", &["x"]).await?;
                let foreign = msgs(&cx.pop(&pop_path(&other, &s.group, "")).await?);
                let foreign_pid = foreign
                    .first()
                    .map(|x| x["partitionId"].clone())
                    .ok_or_else(|| Failure::new("a message of the other queue", "none"))?;
                let c = claim(&cx, &s, json!([pid, foreign_pid, "nope"]), 30).await?;
                expect_eq(
                    "while the group's pop holds it; another queue's partition; a bad id",
                    json!(["busy", "missing", "missing"]),
                    &statuses(&c),
                )?;
                committed(&cx, "the fold", full_cycle(&s, &m, json!([]), json!([]))).await?;
                push_ids(&cx, &s.src, "p", &["waiting"]).await?;
                let c = claim(&cx, &s, json!([pid]), 30).await?;
                expect_eq("with a message waiting", json!(["backlog"]), &statuses(&c))?;
                let w = batch_of_next(&cx, &s).await?;
                committed(&cx, "its fold", full_cycle(&s, &w, json!([]), json!([]))).await?;
                let c = claim(&cx, &s, json!([pid]), 30).await?;
                expect_eq("fully read and idle", json!(["claimed"]), &statuses(&c))?;
                expect(
                    c["lease_id"].as_str().is_some_and(|l| !l.is_empty()),
                    "a lease_id for the claimed partition",
                    c.to_string(),
                )?;
                let again = claim(&cx, &s, json!([pid]), 30).await?;
                expect_eq(
                    "claimed again while held",
                    json!(["busy"]),
                    &statuses(&again),
                )?;
                push_ids(&cx, &s.src, "p", &["late"]).await?;
                expect_eq(
                    "the group's pop while the claim holds the partition",
                    json!([]),
                    &next(&cx, &s).await?,
                )
            }
        ),
        case!(
            "surface.streams.unknown-query",
            Must,
            UNKNOWN,
            [Core, Streams],
            |cx: Ctx| async move {
                let nope = uuid::Uuid::now_v7().to_string();
                for (path, body) in [
                    (
                        "/streams/v1/claim",
                        json!({"query_id": nope, "partition_ids": ["1"]}),
                    ),
                    ("/streams/v1/state/partitions", json!({"query_id": nope})),
                    (
                        "/streams/v1/state/get",
                        json!({"query_id": nope, "partition_id": "1"}),
                    ),
                    (
                        "/streams/v1/cycle",
                        json!({"query_id": nope, "partition_id": "1", "release_lease": true}),
                    ),
                ] {
                    let r = cx.post(path, body).await?;
                    expect(
                        r.status == 200 && r.body["success"] == json!(false),
                        format!("{path} of an unknown query: HTTP 200 with success: false"),
                        format!("HTTP {}: {}", r.status, r.body),
                    )?;
                }
                Ok(())
            }
        ),
        case!(
            "surface.streams.bad-input",
            Must,
            BAD_INPUT,
            [Core, Streams],
            |cx: Ctx| async move {
                let s = query(&cx).await?;
                let m = batch(&cx, &s, &["m0"]).await?;
                let (pid, lease) = (m[0]["partitionId"].clone(), m[0]["leaseId"].clone());
                let fresh = cx.name("fresh");
                let k = json!([{"type": "upsert", "key": "k", "value": 1}]);
                for (path, body, field) in [
                    (
                        "/streams/v1/queries",
                        json!({"source_queue": s.src, "config_hash": "h"}),
                        "name",
                    ),
                    (
                        "/streams/v1/queries",
                        json!({"name": fresh, "config_hash": "h"}),
                        "source_queue",
                    ),
                    (
                        "/streams/v1/queries",
                        json!({"name": fresh, "source_queue": s.src, "config_hash": ""}),
                        "config_hash",
                    ),
                    (
                        "/streams/v1/cycle",
                        json!({"partition_id": pid, "state_ops": k}),
                        "query_id",
                    ),
                    (
                        "/streams/v1/cycle",
                        json!({"query_id": s.id, "partition_id": pid,
                               "state_ops": [{"type": "merge", "key": "k", "value": 1}]}),
                        "state_ops[0]",
                    ),
                    (
                        "/streams/v1/cycle",
                        json!({"query_id": s.id, "partition_id": pid,
                               "state_ops": [{"type": "upsert", "key": "k", "value": 1},
                                             {"type": "upsert", "key": "k2"}]}),
                        "state_ops[1].value",
                    ),
                    (
                        "/streams/v1/cycle",
                        json!({"query_id": s.id, "partition_id": pid, "state_ops": k,
                               "ack": {"transactionId": "m0", "leaseId": lease, "count": -1}}),
                        "ack.count",
                    ),
                    (
                        "/streams/v1/cycle",
                        json!({"query_id": s.id, "partition_id": pid, "state_ops": k,
                               "ack": {"transactionId": "m0", "count": 1}}),
                        "ack.leaseId",
                    ),
                    (
                        "/streams/v1/claim",
                        json!({"query_id": s.id}),
                        "partition_ids",
                    ),
                    (
                        "/streams/v1/claim",
                        json!({"query_id": s.id, "partition_ids": [pid], "lease_seconds": 601}),
                        "lease_seconds",
                    ),
                    (
                        "/streams/v1/state/get",
                        json!({"query_id": s.id}),
                        "partition_id",
                    ),
                    (
                        "/streams/v1/state/partitions",
                        json!({"query_id": s.id, "limit": 0}),
                        "limit",
                    ),
                ] {
                    let r = cx.post(path, body.clone()).await?;
                    let err = r.body["error"].as_str().unwrap_or_default();
                    expect(
                        r.status == 400
                            && r.body["code"] == json!("bad_request")
                            && err.contains(field),
                        format!("{path} {body}: 400 bad_request naming {field:?}"),
                        format!("HTTP {}: {}", r.status, r.body),
                    )?;
                }
                // Nothing landed: no state, the name of the refused registrations
                // is still new, the batch is still under its lease and unacked.
                expect_eq(
                    "state after the refusals",
                    json!([]),
                    &keys(&state(&cx, &s.id, &pid, json!({})).await?),
                )?;
                let r = register(&cx, &fresh, &s.src, "h", false).await?;
                expect_status(&r, 200)?;
                expect_eq(
                    "the refused name registered now: fresh",
                    true,
                    &r.body["fresh"],
                )?;
                committed(
                    &cx,
                    "the batch's own cycle after the refusals",
                    full_cycle(&s, &m, json!([]), json!([])),
                )
                .await
                .map(|_| ())
            }
        ),
    ]
}

/// The group's next pop of the source, which must not be empty.
async fn batch_of_next(cx: &Ctx, s: &Query) -> Result<Vec<Value>, Failure> {
    let m = msgs(&cx.pop(&pop_path(&s.src, &s.group, "&batch=100")).await?);
    expect(!m.is_empty(), "a message for the group", "an empty pop")?;
    Ok(m)
}
