//! The stream runner's routes (`/streams/v1/*`) through HTTP: registration and its
//! chain guard, the atomic cycle (state, emitted messages and the source ack, all or
//! nothing), claims of idle partitions, state reads and the partitions listing, state
//! across a restart, refusals of bad input, roles and tenants.

mod common;

use common::*;
use queen_mock_broker::auth::{Auth, Role};
use queen_mock_broker::{ManualClock, MockBroker};
use reqwest::StatusCode;
use serde_json::{Value, json};

const GROUP: &str = "streams.q1";

/// Registers `name` over `source` with `hash`; answers the status and body.
async fn register(
    h: &Harness,
    name: &str,
    source: &str,
    hash: &str,
    reset: bool,
) -> (StatusCode, Value) {
    h.post(
        "/streams/v1/queries",
        json!({"name": name, "source_queue": source, "sink_queue": "out", "config_hash": hash, "reset": reset}),
    )
    .await
}

/// Registers `q1` over `src` and answers its query id.
async fn query(h: &Harness) -> String {
    let (s, b) = register(h, "q1", "src", "h1", false).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b["query_id"].as_str().unwrap().to_string()
}

/// Pushes `n` messages `m0..` to `src/p` and pops them all under the stream's group.
async fn pop_batch(h: &Harness, n: usize) -> Value {
    for i in 0..n {
        h.push_one("src", "p", &format!("m{i}"), json!({"i": i}))
            .await;
    }
    h.pop(&format!(
        "/api/v1/pop/queue/src?batch={n}&consumerGroup={GROUP}&subscriptionMode=all"
    ))
    .await
    .expect("the batch")
}

async fn cycle(h: &Harness, body: Value) -> Value {
    let (s, b) = h.post("/streams/v1/cycle", body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

async fn state(h: &Harness, body: Value) -> Vec<Value> {
    let (s, b) = h.post("/streams/v1/state/get", body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["success"], true, "{b}");
    b["rows"].as_array().unwrap().clone()
}

async fn state_of(h: &Harness, qid: &str, pid: &Value) -> Vec<Value> {
    state(h, json!({"query_id": qid, "partition_id": pid, "keys": []})).await
}

async fn claim(h: &Harness, qid: &str, pids: Value) -> Value {
    let (s, b) = h
        .post(
            "/streams/v1/claim",
            json!({"query_id": qid, "partition_ids": pids, "consumer_group": GROUP, "lease_seconds": 30}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["success"], true, "{b}");
    b
}

fn statuses(claim: &Value) -> Vec<&str> {
    claim["partitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect()
}

/// The cycle a windowed runner commits after folding a whole batch.
fn full_cycle(qid: &str, batch: &Value, state_ops: Value, push_items: Value) -> Value {
    let msgs = batch["messages"].as_array().unwrap();
    let last = msgs.last().unwrap();
    json!({
        "query_id": qid,
        "partition_id": batch["partitionId"],
        "consumer_group": GROUP,
        "state_ops": state_ops,
        "push_items": push_items,
        "ack": {"transactionId": last["transactionId"], "leaseId": batch["leaseId"], "status": "completed", "count": msgs.len()},
        "release_lease": true,
    })
}

async fn list(h: &Harness, body: Value) -> Value {
    let (s, b) = h.post("/streams/v1/state/partitions", body).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

/// What the sink queue received since the last look (each look consumes).
async fn sink(h: &Harness) -> Vec<Value> {
    match h.pop("/api/v1/pop/queue/out?batch=100&consumerGroup=reader&subscriptionMode=all&autoAck=true").await {
        Some(b) => b["messages"].as_array().unwrap().clone(),
        None => Vec::new(),
    }
}

fn pop_group(extra: &str) -> String {
    format!("/api/v1/pop/queue/src?batch=10&consumerGroup={GROUP}{extra}")
}

// ----------------------------------------------------------------- register

#[tokio::test]
async fn a_name_keeps_its_id_and_a_changed_chain_is_refused_until_reset() {
    let h = Harness::new().await;
    let (s, first) = register(&h, "q1", "src", "h1", false).await;
    assert_eq!(s, StatusCode::OK, "{first}");
    assert_eq!(
        (first["success"].clone(), first["fresh"].clone()),
        (json!(true), json!(true))
    );
    let qid = first["query_id"].as_str().unwrap().to_string();
    assert!(
        !qid.is_empty() && qid != "q1",
        "the id is minted, not the name: {first}"
    );

    let (_, again) = register(&h, "q1", "src", "h1", false).await;
    assert_eq!(again["query_id"], qid.as_str(), "one name, one query");
    assert_eq!(again["fresh"], false);

    // State computed by chain h1.
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    let ops = json!([{"type": "upsert", "key": "k", "value": {"acc": 1}}]);
    assert_eq!(
        cycle(&h, full_cycle(&qid, &batch, ops, json!([]))).await["success"],
        true
    );

    let (s, refused) = register(&h, "q1", "src", "h2", false).await;
    assert_eq!(s, StatusCode::CONFLICT, "{refused}");
    assert_eq!(refused["success"], false);
    assert_eq!(refused["code"], "config_hash_mismatch");
    assert_eq!(refused["query_id"], qid.as_str());
    assert!(
        refused["error"].as_str().unwrap().contains("reset"),
        "{refused}"
    );
    assert_eq!(
        state_of(&h, &qid, &pid).await.len(),
        1,
        "a refusal wipes nothing"
    );

    // `reset` with the same chain is a runner joining: its peers' state stays.
    let (s, joined) = register(&h, "q1", "src", "h1", true).await;
    assert_eq!((s, joined["reset"].clone()), (StatusCode::OK, json!(false)));
    assert_eq!(state_of(&h, &qid, &pid).await.len(), 1);

    let (s, reset) = register(&h, "q1", "src", "h2", true).await;
    assert_eq!(s, StatusCode::OK, "{reset}");
    assert_eq!(
        (reset["reset"].clone(), reset["query_id"].clone()),
        (json!(true), json!(qid))
    );
    assert!(
        state_of(&h, &qid, &pid).await.is_empty(),
        "the old chain's state is gone"
    );
    // The new chain is the one on record now.
    assert_eq!(
        register(&h, "q1", "src", "h2", false).await.0,
        StatusCode::OK
    );
    // The group's cursor is not state: the consumed message stays consumed.
    assert!(h.pop(&pop_group("")).await.is_none());
}

// -------------------------------------------------------------------- cycle

#[tokio::test]
async fn a_cycle_commits_state_output_and_the_ack_together() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 3).await;
    let pid = batch["partitionId"].clone();
    let ops = json!([
        {"type": "upsert", "key": "w\u{1f}a", "value": {"acc": 3, "windowEnd": 2000}},
        {"type": "upsert", "key": "w\u{1f}b", "value": 7},
        {"type": "delete", "key": "never-there"},
    ]);
    let push = json!([
        {"queue": "out", "partition": "p", "payload": {"sum": 3}},
        {"queue": "", "payload": {"dropped": true}},
    ]);
    let out = cycle(&h, full_cycle(&qid, &batch, ops, push)).await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["queueName"], "src");
    assert_eq!(out["state_ops_applied"], 3);
    assert_eq!(
        out["push_results"].as_array().unwrap().len(),
        1,
        "a queue-less item is dropped: {out}"
    );
    assert_eq!(out["ack_result"]["count"], 3);
    assert_eq!(out["ack_result"]["lease_released"], true);

    let rows = state_of(&h, &qid, &pid).await;
    let keys: Vec<&str> = rows.iter().map(|r| r["key"].as_str().unwrap()).collect();
    assert_eq!(keys, ["w\u{1f}a", "w\u{1f}b"], "in key order");
    assert_eq!(rows[0]["value"], json!({"acc": 3, "windowEnd": 2000}));
    assert_eq!(rows[1]["value"], 7);
    assert!(rows[0]["updated_at"].as_str().unwrap().ends_with('Z'));

    let emitted = sink(&h).await;
    assert_eq!(emitted.len(), 1);
    assert_eq!(emitted[0]["data"], json!({"sum": 3}));
    assert_eq!(emitted[0]["partition"], "p");

    // The whole batch is consumed and its lease released: nothing comes back.
    h.advance(600);
    assert!(h.pop(&pop_group("")).await.is_none());
}

#[tokio::test]
async fn a_cycle_whose_lease_is_gone_is_refused_whole() {
    let h = Harness::new().await;
    h.configure("src", json!({"leaseTime": 10})).await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 2).await;
    let pid = batch["partitionId"].clone();
    h.advance(11);

    let ops = json!([{"type": "upsert", "key": "k", "value": 1}]);
    let push = json!([{"queue": "out", "payload": {"n": 1}}]);
    let out = cycle(&h, full_cycle(&qid, &batch, ops.clone(), push.clone())).await;
    assert_eq!(out["success"], false, "{out}");
    assert_eq!(out["error"], "invalid or expired lease");
    assert_eq!(out["ack_result"], Value::Null);
    assert!(
        state_of(&h, &qid, &pid).await.is_empty(),
        "no state of a refused cycle"
    );
    assert!(sink(&h).await.is_empty(), "no output of a refused cycle");

    // The batch is delivered again; its own cycle commits.
    let again = h.pop(&pop_group("")).await.expect("redelivered");
    assert_eq!(txns(&again), ["m0", "m1"]);
    assert_eq!(
        cycle(&h, full_cycle(&qid, &again, ops, push)).await["success"],
        true
    );
    assert_eq!(state_of(&h, &qid, &pid).await.len(), 1);

    // A lease that is live but another worker's is no better.
    h.push_one("src", "p", "m2", json!({})).await;
    let third = h.pop(&pop_group("")).await.unwrap();
    let mut forged = full_cycle(&qid, &third, json!([]), json!([]));
    forged["ack"]["leaseId"] = json!("0198f0aa-0000-7000-8000-00000000dead");
    assert_eq!(cycle(&h, forged).await["error"], "invalid or expired lease");
}

#[tokio::test]
async fn a_kept_lease_holds_the_unacked_tail_until_it_lapses_then_redelivers_it_in_order() {
    let h = Harness::new().await;
    h.configure("src", json!({"leaseTime": 10})).await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 4).await;
    // A gate allowed the first two messages.
    let body = json!({
        "query_id": qid,
        "partition_id": batch["partitionId"],
        "consumer_group": GROUP,
        "push_items": [{"queue": "out", "payload": {"i": 0}}, {"queue": "out", "payload": {"i": 1}}],
        "ack": {"transactionId": "m1", "leaseId": batch["leaseId"], "status": "completed", "count": 2},
        "release_lease": false,
    });
    let out = cycle(&h, body).await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["ack_result"]["lease_released"], false);
    assert!(
        h.pop(&pop_group("")).await.is_none(),
        "the tail is held under the lease"
    );
    h.advance(11);
    let tail = h.pop(&pop_group("")).await.expect("the tail comes back");
    assert_eq!(
        txns(&tail),
        ["m2", "m3"],
        "from where the ack stopped, in order"
    );
}

#[tokio::test]
async fn a_cycle_without_an_ack_moves_no_cursor_and_the_last_delete_forgets_the_partition() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    let flush = |ops: Value| json!({"query_id": qid, "partition_id": pid, "consumer_group": GROUP, "state_ops": ops, "ack": null, "release_lease": true});
    let out = cycle(
        &h,
        flush(json!([{"type": "upsert", "key": "k", "value": 1}])),
    )
    .await;
    assert_eq!(
        (out["success"].clone(), out["ack_result"].clone()),
        (json!(true), Value::Null)
    );
    let listed = h
        .post("/streams/v1/state/partitions", json!({"query_id": qid}))
        .await
        .1;
    assert_eq!(listed["partitions"][0]["partition_id"], pid);
    assert_eq!(listed["partitions"][0]["partition"], "p");
    assert_eq!(listed["partitions"][0]["queue"], "src");

    cycle(&h, flush(json!([{"type": "delete", "key": "k"}]))).await;
    let listed = h
        .post("/streams/v1/state/partitions", json!({"query_id": qid}))
        .await
        .1;
    assert_eq!(
        listed["partitions"],
        json!([]),
        "no state, nothing to sweep"
    );
    // The popped message is still leased to the group, unacked.
    h.advance(400);
    assert_eq!(txns(&h.pop(&pop_group("")).await.unwrap()), ["m0"]);
}

#[tokio::test]
async fn a_nacking_cycle_is_applied_as_a_plain_nack_would_be() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 2).await;
    let nack = |batch: &Value, status: &str| {
        let mut body = full_cycle(&qid, batch, json!([]), json!([]));
        body["ack"]["transactionId"] = json!("m0");
        body["ack"]["status"] = json!(status);
        body["ack"]["count"] = json!(1);
        body
    };
    let out = cycle(&h, nack(&batch, "retry")).await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["ack_result"]["lease_released"], true);
    assert_eq!(out["ack_result"]["dlq"], false);
    let again = h.pop(&pop_group("")).await.expect("the batch comes back");
    assert_eq!(txns(&again), ["m0", "m1"], "from the nacked message on");

    let out = cycle(&h, nack(&again, "dlq")).await;
    assert_eq!(out["ack_result"]["dlq"], true, "{out}");
    let (_, dlq) = h.get("/api/v1/dlq?queue=src").await;
    assert_eq!(dlq["total"], 1, "{dlq}");
    assert_eq!(dlq["messages"][0]["transactionId"], "m0");
}

// -------------------------------------------------------------------- claim

#[tokio::test]
async fn a_claim_leases_a_fully_read_idle_partition_with_an_empty_batch() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();

    // The group holds the partition under its pop's lease.
    assert_eq!(
        statuses(&claim(&h, &qid, json!([pid, "999999", "nope"])).await),
        ["busy", "missing", "missing"]
    );
    cycle(
        &h,
        full_cycle(
            &qid,
            &batch,
            json!([{"type": "upsert", "key": "k", "value": {"acc": 1}}]),
            json!([]),
        ),
    )
    .await;

    let c = claim(&h, &qid, json!([pid])).await;
    assert_eq!(statuses(&c), ["claimed"]);
    assert_eq!(c["partitions"][0]["partition"], "p");
    assert_eq!(c["lease_seconds"], 30);
    assert!(c["now_ms"].as_i64().unwrap() > 0);
    let lease = c["lease_id"].as_str().unwrap().to_string();
    assert!(!lease.is_empty());
    // One holder at a time: another runner's claim and the group's pops wait.
    assert_eq!(statuses(&claim(&h, &qid, json!([pid])).await), ["busy"]);
    h.push_one("src", "p", "late", json!({})).await;
    assert!(
        h.pop(&pop_group("")).await.is_none(),
        "the claim holds the partition"
    );

    // The close: the window's state goes, its result is emitted, the claim is released.
    let close = json!({
        "query_id": qid, "partition_id": pid, "consumer_group": GROUP,
        "state_ops": [{"type": "delete", "key": "k"}],
        "push_items": [{"queue": "out", "payload": {"count": 1}}],
        "ack": {"transactionId": "", "leaseId": lease, "status": "completed", "count": 0},
        "release_lease": true,
    });
    let out = cycle(&h, close.clone()).await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["ack_result"]["lease_released"], true);
    assert_eq!(sink(&h).await.len(), 1);
    // The cursor did not move: the message that arrived meanwhile is delivered now.
    assert_eq!(txns(&h.pop(&pop_group("")).await.unwrap()), ["late"]);
    // Closing again under the released claim is refused, and emits nothing twice.
    let again = cycle(&h, close).await;
    assert_eq!(again["success"], false, "{again}");
    assert!(sink(&h).await.is_empty());
}

#[tokio::test]
async fn a_claim_and_a_cycle_that_name_no_group_both_act_for_streams_dot_the_query() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    // GROUP is `streams.q1`, the default for the query `q1`.
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    let mut fold = full_cycle(&qid, &batch, json!([]), json!([]));
    fold.as_object_mut().unwrap().remove("consumer_group");
    let out = cycle(&h, fold).await;
    assert_eq!(
        out["success"], true,
        "the ack lands on the stream's group: {out}"
    );

    let (s, c) = h
        .post(
            "/streams/v1/claim",
            json!({"query_id": qid, "partition_ids": [pid], "lease_seconds": 30}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{c}");
    assert_eq!(statuses(&c), ["claimed"], "{c}");
    let close = json!({
        "query_id": qid, "partition_id": pid,
        "ack": {"transactionId": "", "leaseId": c["lease_id"], "status": "completed", "count": 0},
        "release_lease": true,
    });
    let out = cycle(&h, close).await;
    assert_eq!(out["success"], true, "{out}");
    assert_eq!(out["ack_result"]["lease_released"], true, "{out}");
}

#[tokio::test]
async fn a_claim_is_not_granted_while_the_group_has_unread_messages_and_lapses_on_its_own() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    cycle(&h, full_cycle(&qid, &batch, json!([]), json!([]))).await;
    h.push_one("src", "p", "waiting", json!({})).await;
    assert_eq!(statuses(&claim(&h, &qid, json!([pid])).await), ["backlog"]);
    let next = h.pop(&pop_group("")).await.unwrap();
    cycle(&h, full_cycle(&qid, &next, json!([]), json!([]))).await;

    let c = claim(&h, &qid, json!([pid])).await;
    assert_eq!(statuses(&c), ["claimed"]);
    h.advance(31);
    // A close under the lapsed claim is refused whole...
    let late = cycle(
        &h,
        json!({
            "query_id": qid, "partition_id": pid, "consumer_group": GROUP,
            "state_ops": [{"type": "upsert", "key": "k", "value": 1}],
            "ack": {"transactionId": "", "leaseId": c["lease_id"], "status": "completed", "count": 0},
            "release_lease": true,
        }),
    )
    .await;
    assert_eq!(late["error"], "invalid or expired lease");
    assert!(state_of(&h, &qid, &pid).await.is_empty());
    // ...and the partition can be claimed again.
    assert_eq!(statuses(&claim(&h, &qid, json!([pid])).await), ["claimed"]);
}

// -------------------------------------------------------------------- state

#[tokio::test]
async fn state_reads_filter_by_keys_prefix_and_ripeness() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    let ops = json!([
        {"type": "upsert", "key": "tumb:2\u{1f}w1\u{1f}u", "value": {"acc": 1, "windowEnd": 1000}},
        {"type": "upsert", "key": "tumb:2\u{1f}w2\u{1f}u", "value": {"acc": 2, "windowEnd": 3000}},
        {"type": "upsert", "key": "sess:3\u{1f}open\u{1f}u", "value": {"acc": 3, "windowEnd": 500}},
        {"type": "upsert", "key": "__wm__", "value": 900},
    ]);
    cycle(&h, full_cycle(&qid, &batch, ops, json!([]))).await;
    let keys = |rows: Vec<Value>| -> Vec<String> {
        rows.iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect()
    };

    assert_eq!(state_of(&h, &qid, &pid).await.len(), 4);
    let prefixed = state(
        &h,
        json!({"query_id": qid, "partition_id": pid, "key_prefix": "tumb:2\u{1f}"}),
    )
    .await;
    assert_eq!(
        keys(prefixed),
        ["tumb:2\u{1f}w1\u{1f}u", "tumb:2\u{1f}w2\u{1f}u"]
    );
    let ripe = state(
        &h,
        json!({"query_id": qid, "partition_id": pid, "key_prefix": "tumb:2\u{1f}", "ripe_at_or_before": 1000}),
    )
    .await;
    assert_eq!(
        keys(ripe),
        ["tumb:2\u{1f}w1\u{1f}u"],
        "windowEnd at or before, prefix too"
    );
    let ripe_all = state(
        &h,
        json!({"query_id": qid, "partition_id": pid, "ripe_at_or_before": 1000}),
    )
    .await;
    assert_eq!(
        keys(ripe_all),
        ["sess:3\u{1f}open\u{1f}u", "tumb:2\u{1f}w1\u{1f}u"],
        "a value without a numeric windowEnd is never ripe"
    );
    let picked = state(
        &h,
        json!({"query_id": qid, "partition_id": pid, "keys": ["__wm__", "absent"]}),
    )
    .await;
    assert_eq!(keys(picked.clone()), ["__wm__"]);
    assert_eq!(picked[0]["value"], 900);

    // Another query, another partition, an id this broker never minted: no rows.
    let (_, other) = register(&h, "q2", "src", "h1", false).await;
    assert!(
        state_of(&h, other["query_id"].as_str().unwrap(), &pid)
            .await
            .is_empty()
    );
    assert!(state_of(&h, &qid, &json!("999")).await.is_empty());
    assert!(state_of(&h, &qid, &json!("not-an-id")).await.is_empty());
}

#[tokio::test]
async fn the_partitions_listing_pages_and_skips_partitions_touched_recently() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let mut pids = Vec::new();
    for lane in ["a", "b", "c"] {
        h.push_one("src", lane, &format!("{lane}-0"), json!({}))
            .await;
        let b = h
            .pop(&format!(
                "/api/v1/pop/queue/src/partition/{lane}?consumerGroup={GROUP}&subscriptionMode=all"
            ))
            .await
            .unwrap();
        pids.push(b["partitionId"].as_str().unwrap().to_string());
        cycle(
            &h,
            full_cycle(
                &qid,
                &b,
                json!([{"type": "upsert", "key": "k", "value": 1}]),
                json!([]),
            ),
        )
        .await;
        h.advance(10);
    }
    pids.sort_by_key(|p| p.parse::<u64>().unwrap());
    let ids = |b: &Value| -> Vec<String> {
        b["partitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["partition_id"].as_str().unwrap().to_string())
            .collect()
    };

    let first = list(&h, json!({"query_id": qid, "limit": 2})).await;
    assert_eq!(ids(&first), pids[..2]);
    assert_eq!(first["next"], pids[1].as_str());
    let second = list(
        &h,
        json!({"query_id": qid, "limit": 2, "after": first["next"]}),
    )
    .await;
    assert_eq!(ids(&second), pids[2..]);
    assert!(second.get("next").is_none(), "the end: {second}");

    // Written 30 s, 20 s and 10 s ago: only the first two are 15 s untouched.
    let quiet = list(&h, json!({"query_id": qid, "untouched_for_ms": 15_000})).await;
    assert_eq!(ids(&quiet), pids[..2]);
    let none = list(&h, json!({"query_id": qid, "untouched_for_ms": 60_000})).await;
    assert_eq!(none["partitions"], json!([]));
}

#[tokio::test]
async fn state_and_queries_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let clock = ManualClock::new();
    let start = |clock: ManualClock| {
        let file = file.clone();
        async move {
            MockBroker::builder()
                .data_file(file)
                .clock(clock)
                .start()
                .await
                .unwrap()
        }
    };
    let h = Harness::with(start(clock.clone()).await, clock.clone());
    let qid = query(&h).await;
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    let ops = json!([{"type": "upsert", "key": "w", "value": {"acc": 3}}]);
    cycle(&h, full_cycle(&qid, &batch, ops, json!([]))).await;
    h.broker.shutdown().await;

    let h = Harness::with(start(clock.clone()).await, clock.clone());
    let (s, again) = register(&h, "q1", "src", "h1", false).await;
    assert_eq!(
        (s, again["query_id"].clone(), again["fresh"].clone()),
        (StatusCode::OK, json!(qid), json!(false))
    );
    let rows = state_of(&h, &qid, &pid).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["value"], json!({"acc": 3}));
    let listed = h
        .post("/streams/v1/state/partitions", json!({"query_id": qid}))
        .await
        .1;
    assert_eq!(listed["partitions"][0]["partition_id"], pid);
    h.broker.shutdown().await;
}

// ---------------------------------------------------------------- refusals

#[tokio::test]
async fn bad_input_is_a_400_naming_the_field_and_writes_nothing() {
    let h = Harness::new().await;
    let qid = query(&h).await;
    let batch = pop_batch(&h, 1).await;
    let pid = batch["partitionId"].clone();
    let lease = batch["leaseId"].clone();
    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "/streams/v1/queries",
            json!({"source_queue": "src", "config_hash": "h"}),
            "name",
        ),
        (
            "/streams/v1/queries",
            json!({"name": "n", "config_hash": "h"}),
            "source_queue",
        ),
        (
            "/streams/v1/queries",
            json!({"name": "n", "source_queue": "src", "config_hash": ""}),
            "config_hash",
        ),
        (
            "/streams/v1/queries",
            json!({"name": "n", "source_queue": "src", "config_hash": "h", "reset": "yes"}),
            "reset",
        ),
        (
            "/streams/v1/cycle",
            json!({"partition_id": pid, "release_lease": true}),
            "query_id",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "merge", "key": "k", "value": 1}]}),
            "state_ops[0]",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "upsert", "key": "k", "value": 1}, {"type": "upsert", "key": "k2"}]}),
            "state_ops[1].value",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "delete", "key": ""}]}),
            "state_ops[0].key",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "upsert", "key": "k", "value": 1}], "ack": {"transactionId": "m0", "leaseId": lease, "count": -1}}),
            "ack.count",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "ack": {"transactionId": "m0", "count": 1}}),
            "ack.leaseId",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "ack": {"leaseId": lease, "count": 1}}),
            "ack.transactionId",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "push_items": [{"queue": "out", "messageId": "x"}]}),
            "messageId",
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "release_lease": "no"}),
            "release_lease",
        ),
        (
            "/streams/v1/claim",
            json!({"query_id": qid}),
            "partition_ids",
        ),
        (
            "/streams/v1/claim",
            json!({"query_id": qid, "partition_ids": [pid], "lease_seconds": 601}),
            "lease_seconds",
        ),
        (
            "/streams/v1/claim",
            json!({"query_id": qid, "partition_ids": [1]}),
            "partition_ids[0]",
        ),
        (
            "/streams/v1/state/get",
            json!({"query_id": qid}),
            "partition_id",
        ),
        (
            "/streams/v1/state/get",
            json!({"query_id": qid, "partition_id": pid, "ripe_at_or_before": "1000"}),
            "ripe_at_or_before",
        ),
        (
            "/streams/v1/state/partitions",
            json!({"query_id": qid, "after": "p-7"}),
            "after",
        ),
        (
            "/streams/v1/state/partitions",
            json!({"query_id": qid, "limit": 0}),
            "limit",
        ),
        (
            "/streams/v1/state/partitions",
            json!({"query_id": qid, "untouched_for_ms": -1}),
            "untouched_for_ms",
        ),
    ];
    for (path, body, field) in cases {
        let (s, b) = h.post(path, body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{path} {body}: {b}");
        assert_eq!(b["code"], "bad_request", "{path} {body}: {b}");
        assert!(
            b["error"].as_str().unwrap().contains(field),
            "{path} {body}: {b}"
        );
    }
    let (s, b) = h.post_raw("/streams/v1/cycle", "[1]").await;
    assert_eq!(
        (s, b["code"].clone()),
        (StatusCode::BAD_REQUEST, json!("bad_request"))
    );
    let (s, b) = h
        .post(
            "/streams/v1/queries",
            json!({"name": "n".repeat(2000), "source_queue": "src", "config_hash": "h"}),
        )
        .await;
    assert_eq!(
        (s, b["code"].clone()),
        (StatusCode::PAYLOAD_TOO_LARGE, json!("name_too_long"))
    );

    // Nothing of any refused body landed: no state, the batch still leased and unacked.
    assert!(state_of(&h, &qid, &pid).await.is_empty());
    assert_eq!(
        register(&h, "n", "src", "other", false).await.1["fresh"],
        true
    );
    let ok = cycle(&h, full_cycle(&qid, &batch, json!([]), json!([]))).await;
    assert_eq!(ok["success"], true, "the lease was untouched: {ok}");
}

#[tokio::test]
async fn an_unknown_query_is_a_verdict_not_a_404() {
    // The official runner reads a 404 from `claim` or `state/partitions` as "this
    // broker has no claims" and stops closing idle windows for good.
    let h = Harness::new().await;
    for (path, body) in [
        (
            "/streams/v1/claim",
            json!({"query_id": "nope", "partition_ids": ["1"]}),
        ),
        ("/streams/v1/state/partitions", json!({"query_id": "nope"})),
        (
            "/streams/v1/state/get",
            json!({"query_id": "nope", "partition_id": "1"}),
        ),
        (
            "/streams/v1/cycle",
            json!({"query_id": "nope", "partition_id": "1", "release_lease": true}),
        ),
    ] {
        let (s, b) = h.post(path, body).await;
        assert_eq!(s, StatusCode::OK, "{path}: {b}");
        assert_eq!(b["success"], false, "{path}: {b}");
        assert!(b["error"].as_str().unwrap().contains("nope"), "{path}: {b}");
    }
}

// ------------------------------------------------------------ roles, tenants

async fn authed() -> (MockBroker, reqwest::Client) {
    let auth = Auth::new()
        .token("ro", Role::ReadOnly, "acme", None)
        .token("rw", Role::ReadWrite, "acme", None)
        .token("other", Role::Admin, "globex", None);
    let b = MockBroker::builder()
        .in_memory()
        .auth(auth)
        .start()
        .await
        .unwrap();
    (b, reqwest::Client::new())
}

async fn send(
    b: &MockBroker,
    http: &reqwest::Client,
    token: &str,
    path: &str,
    body: Value,
) -> (StatusCode, Value) {
    let res = http
        .post(format!("{}{path}", b.url()))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (res.status(), res.json().await.unwrap_or(Value::Null))
}

#[tokio::test]
async fn state_reads_need_read_only_and_writes_read_write() {
    let (b, http) = authed().await;
    let reg = json!({"name": "q", "source_queue": "src", "config_hash": "h"});
    assert_eq!(
        send(&b, &http, "ro", "/streams/v1/queries", reg.clone())
            .await
            .0,
        StatusCode::FORBIDDEN
    );
    let (s, r) = send(&b, &http, "rw", "/streams/v1/queries", reg).await;
    assert_eq!(s, StatusCode::OK, "{r}");
    let qid = r["query_id"].clone();
    for path in ["/streams/v1/cycle", "/streams/v1/claim"] {
        let body = json!({"query_id": qid, "partition_id": "1", "partition_ids": ["1"]});
        assert_eq!(
            send(&b, &http, "ro", path, body).await.0,
            StatusCode::FORBIDDEN,
            "{path}"
        );
    }
    for (path, body) in [
        (
            "/streams/v1/state/get",
            json!({"query_id": qid, "partition_id": "1"}),
        ),
        ("/streams/v1/state/partitions", json!({"query_id": qid})),
    ] {
        let (s, r) = send(&b, &http, "ro", path, body).await;
        assert_eq!(
            (s, r["success"].clone()),
            (StatusCode::OK, json!(true)),
            "{path}: {r}"
        );
    }
    b.shutdown().await;
}

#[tokio::test]
async fn another_tenant_neither_sees_nor_shares_a_query() {
    let (b, http) = authed().await;
    let reg = json!({"name": "q", "source_queue": "src", "config_hash": "h"});
    let (_, mine) = send(&b, &http, "rw", "/streams/v1/queries", reg.clone()).await;
    let qid = mine["query_id"].clone();
    // The same name in another tenant is another query, whatever its chain.
    let (s, theirs) = send(
        &b,
        &http,
        "other",
        "/streams/v1/queries",
        json!({"name": "q", "source_queue": "src", "config_hash": "other-chain"}),
    )
    .await;
    assert_eq!(
        (s, theirs["fresh"].clone()),
        (StatusCode::OK, json!(true)),
        "{theirs}"
    );
    assert_ne!(theirs["query_id"], qid);
    // Our id means nothing to them.
    let (_, r) = send(
        &b,
        &http,
        "other",
        "/streams/v1/state/partitions",
        json!({"query_id": qid}),
    )
    .await;
    assert_eq!(r["success"], false, "{r}");
    let (_, r) = send(
        &b,
        &http,
        "other",
        "/streams/v1/claim",
        json!({"query_id": qid, "partition_ids": ["1"]}),
    )
    .await;
    assert_eq!(r["success"], false, "{r}");
    b.shutdown().await;
}
