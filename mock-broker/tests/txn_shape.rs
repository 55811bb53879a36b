//! The transaction's shape checks and limits: each refusal is a 4xx before any work,
//! so nothing is written.

mod common;

use common::Harness;
use serde_json::{Value, json};

fn put(key: &str) -> Value {
    json!({"op": "put", "ns": "n", "key": key, "value": 1, "forever": true})
}

async fn refused(h: &Harness, body: Value, status: u16, code: &str) {
    let before = h.broker.stats().commits;
    let (s, b) = h.txn(body.clone()).await;
    assert_eq!(s.as_u16(), status, "{body} -> {b}");
    assert_eq!(b["code"], code, "{body} -> {b}");
    assert!(b["error"].as_str().is_some_and(|e| !e.is_empty()));
    assert_eq!(
        h.broker.stats().commits,
        before,
        "nothing written for {body}"
    );
}

#[tokio::test]
async fn every_part_empty_or_absent_is_400() {
    let h = Harness::new().await;
    for body in [
        json!({}),
        json!({"operations": [], "kv": [], "timers": [], "positions": []}),
        json!({"requiredLeases": ["x"]}),
        json!({"operations": null}),
    ] {
        refused(&h, body, 400, "bad_request").await;
    }
}

#[tokio::test]
async fn a_present_part_that_is_not_an_array_is_400() {
    let h = Harness::new().await;
    for part in ["operations", "requiredLeases", "kv", "timers", "positions"] {
        for bad in [json!({}), json!("x"), json!(1)] {
            let mut body = json!({"kv": [put("k")]});
            body[part] = bad;
            refused(&h, body, 400, "bad_request").await;
        }
    }
    refused(
        &h,
        json!({"kv": [put("k")], "requiredLeases": [1]}),
        400,
        "bad_request",
    )
    .await;
    refused(&h, json!([put("k")]), 400, "bad_request").await;
}

#[tokio::test]
async fn kv_or_timer_elements_inside_operations_and_unknown_types_are_400() {
    let h = Harness::new().await;
    refused(&h, json!({"operations": [put("k")]}), 400, "bad_request").await;
    refused(
        &h,
        json!({"operations": [{"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 1, "payload": "e30="}]}),
        400,
        "bad_request",
    )
    .await;
    refused(
        &h,
        json!({"operations": [{"type": "pull", "queue": "q"}]}),
        400,
        "bad_request",
    )
    .await;
    refused(
        &h,
        json!({"operations": [{"queue": "q"}]}),
        400,
        "bad_request",
    )
    .await;
    refused(
        &h,
        json!({"operations": [{"type": "push", "payload": 1}]}),
        400,
        "bad_request",
    )
    .await;
    refused(
        &h,
        json!({"operations": [{"type": "push", "items": {}}]}),
        400,
        "bad_request",
    )
    .await;
    // A valid operation beside an invalid one: still nothing written.
    refused(
        &h,
        json!({"operations": [{"type": "push", "queue": "q", "payload": 1}, {"type": "nope"}]}),
        400,
        "bad_request",
    )
    .await;
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
}

#[tokio::test]
async fn broker_owned_timer_fields_and_repeated_timer_keys_are_400() {
    let h = Harness::new().await;
    let timer =
        json!({"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 1, "payload": "e30="});
    for field in [
        "producerSub",
        "messageId",
        "deliverAt",
        "attempts",
        "delaySeconds",
        "_internal",
        "tenant",
    ] {
        let mut t = timer.clone();
        t[field] = json!("x");
        refused(&h, json!({"timers": [t]}), 400, "bad_request").await;
    }
    refused(
        &h,
        json!({"timers": [timer.clone(), timer.clone()]}),
        400,
        "bad_request",
    )
    .await;
    let mut other = timer.clone();
    other["op"] = "cancel".into();
    refused(
        &h,
        json!({"timers": [timer.clone(), other]}),
        400,
        "bad_request",
    )
    .await;
    refused(
        &h,
        json!({"timers": [{"op": "schedule", "queue": "q", "timerKey": "k", "payload": "e30="}]}),
        400,
        "bad_request",
    )
    .await;
    refused(&h, json!({"timers": [{"op": "schedule", "queue": "q", "timerKey": "k", "delayMs": 1, "payload": "%%%"}]}), 400, "bad_request").await;
}

#[tokio::test]
async fn kv_rules_inside_a_transaction_are_400() {
    let h = Harness::new().await;
    let cases = [
        // A key written twice.
        json!({"kv": [put("k"), put("k")]}),
        json!({"kv": [put("k"), {"op": "delete", "ns": "n", "key": "k"}]}),
        // getPrefix is not allowed in a transaction.
        json!({"kv": [{"op": "getPrefix", "ns": "n", "prefix": "a"}]}),
        // Invalid ns or key.
        json!({"kv": [{"op": "put", "ns": "Bad", "key": "k", "value": 1, "forever": true}]}),
        json!({"kv": [{"op": "put", "ns": ".n", "key": "k", "value": 1, "forever": true}]}),
        json!({"kv": [{"op": "put", "ns": "n".repeat(65), "key": "k", "value": 1, "forever": true}]}),
        json!({"kv": [{"op": "put", "ns": "n", "key": "", "value": 1, "forever": true}]}),
        json!({"kv": [{"op": "put", "ns": "n", "key": "k".repeat(513), "value": 1, "forever": true}]}),
        json!({"kv": [{"op": "put", "ns": "n", "key": "a\u{0}b", "value": 1, "forever": true}]}),
        // A missing or double expiry, a bad TTL.
        json!({"kv": [{"op": "put", "ns": "n", "key": "k", "value": 1}]}),
        json!({"kv": [{"op": "incr", "ns": "n", "key": "k"}]}),
        json!({"kv": [{"op": "put", "ns": "n", "key": "k", "value": 1, "ttlSeconds": 5, "forever": true}]}),
        json!({"kv": [{"op": "put", "ns": "n", "key": "k", "value": 1, "ttlSeconds": 0}]}),
        // An unknown op, a non-numeric delta, a bad expect.
        json!({"kv": [{"op": "upsert", "ns": "n", "key": "k"}]}),
        json!({"kv": [{"op": "incr", "ns": "n", "key": "k", "delta": "1", "forever": true}]}),
        json!({"kv": [{"op": "check", "ns": "n", "key": "k", "expect": -1}]}),
    ];
    for body in cases {
        refused(&h, body, 400, "bad_request").await;
    }
    // 512-byte keys and 64-char namespaces are within the rules.
    let ok = h
        .txn_ok(json!({"kv": [{"op": "put", "ns": "n".repeat(64), "key": "k".repeat(512), "value": 1, "forever": true}]}))
        .await;
    assert_eq!(ok["success"], true, "{ok}");
}

#[tokio::test]
async fn kv_limits_are_64_ops_and_256_keys() {
    let h = Harness::new().await;
    let ops: Vec<Value> = (0..65).map(|i| put(&format!("k{i}"))).collect();
    refused(&h, json!({"kv": ops}), 400, "bad_request").await;
    let ops: Vec<Value> = (0..64).map(|i| put(&format!("k{i}"))).collect();
    assert_eq!(h.txn_ok(json!({"kv": ops})).await["success"], true);
    let keys: Vec<String> = (0..257).map(|i| format!("g{i}")).collect();
    refused(
        &h,
        json!({"kv": [{"op": "getMany", "ns": "n", "keys": keys}]}),
        400,
        "bad_request",
    )
    .await;
    let keys: Vec<String> = (0..256).map(|i| format!("g{i}")).collect();
    let out = h
        .txn_ok(json!({"kv": [{"op": "getMany", "ns": "n", "keys": keys}]}))
        .await;
    assert_eq!(out["results"][0]["missing"].as_array().unwrap().len(), 256);
}

#[tokio::test]
async fn a_kv_value_over_64_kib_is_413() {
    let h = Harness::new().await;
    let big = "x".repeat(64 * 1024);
    refused(
        &h,
        json!({"kv": [{"op": "put", "ns": "n", "key": "k", "value": big, "forever": true}]}),
        413,
        "payload_too_large",
    )
    .await;
    let fits = "x".repeat(64 * 1024 - 2);
    let out = h
        .txn_ok(
            json!({"kv": [{"op": "put", "ns": "n", "key": "k", "value": fits, "forever": true}]}),
        )
        .await;
    assert_eq!(out["success"], true);
}

#[tokio::test]
async fn positions_are_limited_to_16384() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m", json!(1)).await;
    let pos = json!({"queue": "q", "consumerGroup": "g", "partition": "p", "offset": 0});
    refused(
        &h,
        json!({"positions": vec![pos.clone(); 16_385]}),
        400,
        "bad_request",
    )
    .await;
    let out = h
        .txn_ok(json!({"positions": vec![pos.clone(); 16_384]}))
        .await;
    assert_eq!(out["success"], true);
    assert_eq!(out["results"].as_array().unwrap().len(), 16_384);
    refused(
        &h,
        json!({"positions": [{"queue": "q", "partition": "p", "offset": -1}]}),
        400,
        "bad_request",
    )
    .await;
    refused(
        &h,
        json!({"positions": [{"queue": "q", "partition": "p"}]}),
        400,
        "bad_request",
    )
    .await;
}

#[tokio::test]
async fn transaction_id_and_name_limits() {
    let h = Harness::new().await;
    let long_id = "t".repeat(65_536);
    refused(&h, json!({"operations": [{"type": "push", "queue": "q", "transactionId": long_id, "payload": 1}]}), 400, "bad_request").await;
    let long_name = "q".repeat(1025);
    refused(
        &h,
        json!({"operations": [{"type": "push", "queue": long_name, "payload": 1}]}),
        413,
        "name_too_long",
    )
    .await;
    refused(&h, json!({"operations": [{"type": "push", "queue": "q", "partition": long_name, "payload": 1}]}), 413, "name_too_long").await;
    refused(
        &h,
        json!({"positions": [{"queue": "q", "partition": long_name, "offset": 0}]}),
        413,
        "name_too_long",
    )
    .await;
    let ok = h
        .txn_ok(json!({"operations": [{"type": "push", "queue": "q", "transactionId": "t".repeat(65_535), "payload": 1}]}))
        .await;
    assert_eq!(ok["success"], true);
}

#[tokio::test]
async fn a_transaction_timer_set_ages_away_reads_as_the_last_instant_iso_can_write() {
    // Transaction timers have no horizon (spec: the horizon is the standalone route's),
    // so a delay near i64::MAX is accepted; its deliverAt must not wrap to 1970.
    let h = Harness::new().await;
    let b = h
        .txn_ok(
            json!({"timers": [{"op": "schedule", "queue": "q", "timerKey": "far",
            "delayMs": i64::MAX, "txn": "far-1", "payload": "e30="}]}),
        )
        .await;
    assert_eq!(b["success"], true, "{b}");
    let (s, peek) = h.get("/api/v1/timers/q/far").await;
    assert_eq!(s, 200, "{peek}");
    assert_eq!(peek["deliverAt"], "9999-12-31T23:59:59.999999Z", "{peek}");
}
