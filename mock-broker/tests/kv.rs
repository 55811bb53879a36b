//! KV (`wire.md` section 9): every operation, versions, `expect`, TTLs, `required`,
//! the single-key shorthands, and the refusals (each of which writes nothing).

mod common;

use common::Harness;
use queen_mock_broker::Clock;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Sends `POST /api/v1/kv`; asserts 200 and returns the body.
async fn kv(h: &Harness, ops: Value) -> Value {
    let (s, b) = h.post("/api/v1/kv", json!({ "operations": ops })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

/// Sends a KV call that must commit; returns its `results`.
async fn results(h: &Harness, ops: Value) -> Vec<Value> {
    let b = kv(h, ops).await;
    let r = b["results"].as_array().unwrap_or_else(|| panic!("{b}"));
    r.clone()
}

/// Runs one operation; returns its result element.
async fn one(h: &Harness, op: Value) -> Value {
    let mut r = results(h, json!([op])).await;
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["index"], 0, "{}", r[0]);
    r.remove(0)
}

async fn put_forever(h: &Harness, ns: &str, key: &str, value: Value) -> u64 {
    let r = one(
        h,
        json!({"op": "put", "ns": ns, "key": key, "value": value, "forever": true}),
    )
    .await;
    assert_eq!(r["applied"], true, "{r}");
    r["version"].as_u64().expect("a version")
}

async fn get(h: &Harness, ns: &str, key: &str) -> Value {
    one(h, json!({"op": "get", "ns": ns, "key": key})).await
}

/// Asserts a refusal's status, `code` and (for 400s) `reason`, and that nothing was
/// committed since `before`.
fn assert_refused(
    h: &Harness,
    before: u64,
    res: (StatusCode, Value),
    status: u16,
    code: &str,
    reason: Option<&str>,
) {
    let (s, b) = res;
    assert_eq!(s.as_u16(), status, "{b}");
    assert_eq!(b["code"], code, "{b}");
    assert!(b["error"].as_str().is_some_and(|e| !e.is_empty()), "{b}");
    if status == 400 {
        assert!(b["reason"].is_string(), "a KV 400 carries a reason: {b}");
    }
    if let Some(r) = reason {
        assert_eq!(b["reason"], r, "{b}");
    }
    assert_eq!(h.broker.stats().commits, before, "a refusal writes nothing");
}

/// Microseconds since the epoch of an ISO-8601 time.
fn micros(iso: &Value) -> i64 {
    let s = iso.as_str().unwrap_or_else(|| panic!("not a time: {iso}"));
    assert!(s.ends_with('Z'), "{s}");
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{s}: {e}"));
    (t.unix_timestamp_nanos() / 1000) as i64
}

const SEC: i64 = 1_000_000;

// ---------------------------------------------------------------- reads

#[tokio::test]
async fn get_hit_answers_value_version_expiry_and_update_time_and_a_miss_is_found_false() {
    let h = Harness::new().await;
    let t0 = h.clock.now_micros();
    let v1 = put_forever(&h, "app", "forever", json!({"a": [1, 2]})).await;
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "ttl", "value": "x", "ttlSeconds": 30}),
    )
    .await;
    let v2 = r["version"].as_u64().unwrap();

    let g = get(&h, "app", "forever").await;
    assert_eq!(g["op"], "get");
    assert_eq!(g["found"], true, "{g}");
    assert_eq!(g["key"], "forever");
    assert_eq!(g["value"], json!({"a": [1, 2]}));
    assert_eq!(g["version"], v1);
    assert_eq!(g["expiresAt"], Value::Null, "forever has no expiry: {g}");
    assert_eq!(micros(&g["updatedAt"]), t0);

    h.advance(5);
    let g = get(&h, "app", "ttl").await;
    assert_eq!(g["found"], true);
    assert_eq!(g["value"], "x");
    assert_eq!(g["version"], v2);
    assert_eq!(micros(&g["updatedAt"]), t0);
    assert_eq!(micros(&g["expiresAt"]), t0 + 30 * SEC);

    let miss = get(&h, "app", "nope").await;
    assert_eq!(miss["found"], false, "{miss}");
    assert_eq!(miss["key"], "nope");
    assert!(
        miss.get("value").is_none(),
        "a miss carries no value: {miss}"
    );
    // The same key in another namespace is another key.
    assert_eq!(get(&h, "other", "forever").await["found"], false);
}

#[tokio::test]
async fn get_many_answers_the_rows_found_and_lists_the_missing_keys() {
    let h = Harness::new().await;
    let va = put_forever(&h, "app", "a", json!(1)).await;
    let vc = put_forever(&h, "app", "c", json!("three")).await;
    let r = one(
        &h,
        json!({"op": "getMany", "ns": "app", "keys": ["a", "b", "c", "d"]}),
    )
    .await;
    assert_eq!(r["op"], "getMany");
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{r}");
    assert_eq!(rows[0]["key"], "a");
    assert_eq!(rows[0]["value"], 1);
    assert_eq!(rows[0]["version"], va);
    assert_eq!(rows[0]["expiresAt"], Value::Null);
    assert_eq!(micros(&rows[0]["updatedAt"]), h.clock.now_micros());
    assert_eq!(rows[1]["key"], "c");
    assert_eq!(rows[1]["value"], "three");
    assert_eq!(rows[1]["version"], vc);
    assert_eq!(r["missing"], json!(["b", "d"]));
}

#[tokio::test]
async fn get_prefix_pages_with_after_limit_truncated_and_next_after() {
    let h = Harness::new().await;
    for k in ["user/a", "user/b", "user/c", "users", "admin/x"] {
        put_forever(&h, "app", k, json!(k)).await;
    }
    put_forever(&h, "other", "user/z", json!(0)).await;

    let p1 = one(
        &h,
        json!({"op": "getPrefix", "ns": "app", "prefix": "user/", "limit": 2}),
    )
    .await;
    assert_eq!(p1["op"], "getPrefix");
    let keys = |p: &Value| -> Vec<String> {
        p["rows"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["key"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(keys(&p1), ["user/a", "user/b"]);
    assert_eq!(p1["truncated"], true);
    assert_eq!(p1["nextAfter"], "user/b");
    assert_eq!(p1["rows"][0]["value"], "user/a");
    assert!(p1["rows"][0]["version"].is_u64());
    assert!(p1["rows"][0].get("updatedAt").is_some());
    assert!(p1["rows"][0].get("expiresAt").is_some());

    let p2 = one(
        &h,
        json!({"op": "getPrefix", "ns": "app", "prefix": "user/", "limit": 2, "after": p1["nextAfter"]}),
    )
    .await;
    assert_eq!(keys(&p2), ["user/c"]);
    assert_eq!(p2["truncated"], false);
    assert_eq!(p2["nextAfter"], Value::Null);

    // A page that ends exactly at the last key is not truncated.
    let exact = one(
        &h,
        json!({"op": "getPrefix", "ns": "app", "prefix": "user/", "limit": 2, "after": "user/a"}),
    )
    .await;
    assert_eq!(keys(&exact), ["user/b", "user/c"]);
    assert_eq!(exact["truncated"], false);
    assert_eq!(exact["nextAfter"], Value::Null);

    // keysOnly leaves the values out.
    let ko = one(
        &h,
        json!({"op": "getPrefix", "ns": "app", "prefix": "user", "keysOnly": true}),
    )
    .await;
    assert_eq!(keys(&ko), ["user/a", "user/b", "user/c", "users"]);
    for row in ko["rows"].as_array().unwrap() {
        assert!(row.get("value").is_none(), "keysOnly: {row}");
    }

    // No prefix: the whole namespace.
    let all = one(&h, json!({"op": "getPrefix", "ns": "app", "prefix": ""})).await;
    assert_eq!(
        keys(&all),
        ["admin/x", "user/a", "user/b", "user/c", "users"]
    );
}

#[tokio::test]
async fn get_prefix_defaults_to_100_rows_and_gives_at_most_1000() {
    let h = Harness::new().await;
    let keys: Vec<String> = (0..1001).map(|i| format!("k{i:04}")).collect();
    for chunk in keys.chunks(250) {
        let ops: Vec<Value> = chunk
            .iter()
            .map(|k| json!({"op": "put", "ns": "n", "key": k, "value": 0, "forever": true}))
            .collect();
        results(&h, json!(ops)).await;
    }
    let p = one(&h, json!({"op": "getPrefix", "ns": "n", "prefix": "k"})).await;
    assert_eq!(p["rows"].as_array().unwrap().len(), 100);
    assert_eq!(p["truncated"], true);
    assert_eq!(p["nextAfter"], "k0099");
    let p = one(
        &h,
        json!({"op": "getPrefix", "ns": "n", "prefix": "k", "limit": 1000}),
    )
    .await;
    assert_eq!(p["rows"].as_array().unwrap().len(), 1000);
    assert_eq!(p["truncated"], true);
    assert_eq!(p["nextAfter"], "k0999");

    // Over the maximum: refused, or served as at most 1,000 rows.
    let before = h.broker.stats().commits;
    let (s, b) = h
        .post(
            "/api/v1/kv",
            json!({"operations": [{"op": "getPrefix", "ns": "n", "prefix": "k", "limit": 1001}]}),
        )
        .await;
    if s == StatusCode::OK {
        assert!(
            b["results"][0]["rows"].as_array().unwrap().len() <= 1000,
            "{b}"
        );
        assert_eq!(b["results"][0]["truncated"], true);
    } else {
        assert_refused(&h, before, (s, b), 400, "kv_bad_request", None);
    }
}

// ---------------------------------------------------------------- writes

#[tokio::test]
async fn put_writes_and_overwrites_with_a_new_version() {
    let h = Harness::new().await;
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": {"n": 1}, "forever": true}),
    )
    .await;
    assert_eq!(r["op"], "put");
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(r["key"], "k");
    assert_eq!(r["value"], json!({"n": 1}));
    let v1 = r["version"].as_u64().unwrap();
    assert!(r.get("reason").is_none_or(Value::is_null), "{r}");

    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": [true, null], "ttlSeconds": 60}),
    )
    .await;
    assert_eq!(r["applied"], true);
    let v2 = r["version"].as_u64().unwrap();
    assert!(v2 > v1, "a write gets a new version: {v1} then {v2}");
    let g = get(&h, "app", "k").await;
    assert_eq!(g["value"], json!([true, null]));
    assert_eq!(g["version"], v2);
    assert!(g["expiresAt"].is_string(), "the new expiry applies: {g}");
}

#[tokio::test]
async fn put_if_absent_loser_gets_exists_with_the_winners_value_and_version() {
    let h = Harness::new().await;
    let w = one(
        &h,
        json!({"op": "putIfAbsent", "ns": "app", "key": "once", "value": "winner", "forever": true}),
    )
    .await;
    assert!(
        w["op"] == "putIfAbsent" || w["op"] == "put",
        "either spelling: {w}"
    );
    assert_eq!(w["applied"], true, "{w}");
    assert_eq!(w["value"], "winner");
    let wv = w["version"].clone();

    let before = h.broker.stats().commits;
    let l = one(
        &h,
        json!({"op": "putIfAbsent", "ns": "app", "key": "once", "value": "loser", "ttlSeconds": 5}),
    )
    .await;
    assert_eq!(l["applied"], false, "{l}");
    assert_eq!(l["reason"], "exists");
    assert_eq!(l["key"], "once");
    assert_eq!(l["value"], "winner");
    assert_eq!(l["version"], wv);
    assert_eq!(h.broker.stats().commits, before, "the loser wrote nothing");
    let g = get(&h, "app", "once").await;
    assert_eq!(g["value"], "winner");
    assert_eq!(g["version"], wv);
    assert_eq!(g["expiresAt"], Value::Null);
}

#[tokio::test]
async fn delete_removes_a_key_and_a_missing_key_answers_absent() {
    let h = Harness::new().await;
    put_forever(&h, "app", "k", json!(1)).await;
    let d = one(&h, json!({"op": "delete", "ns": "app", "key": "k"})).await;
    assert_eq!(d["op"], "delete");
    assert_eq!(d["applied"], true, "{d}");
    assert_eq!(get(&h, "app", "k").await["found"], false);

    let before = h.broker.stats().commits;
    let d = one(&h, json!({"op": "delete", "ns": "app", "key": "k"})).await;
    assert_eq!(d["applied"], false, "{d}");
    assert_eq!(d["reason"], "absent");
    let d = one(&h, json!({"op": "delete", "ns": "app", "key": "never"})).await;
    assert_eq!(d["applied"], false);
    assert_eq!(d["reason"], "absent");
    assert_eq!(h.broker.stats().commits, before);
}

#[tokio::test]
async fn check_reports_whether_expect_held_and_writes_nothing() {
    let h = Harness::new().await;
    let v = put_forever(&h, "app", "k", json!({"s": "on"})).await;
    let before = h.broker.stats().commits;

    let held = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "k", "expect": v}),
    )
    .await;
    assert_eq!(held["op"], "check");
    assert_eq!(held["applied"], true, "{held}");
    assert_eq!(held["version"], v);

    let lost = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "k", "expect": v + 1000}),
    )
    .await;
    assert_eq!(lost["applied"], false, "{lost}");
    assert_eq!(lost["reason"], "version");
    assert_eq!(lost["value"], json!({"s": "on"}));
    assert_eq!(lost["version"], v);

    let exists = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "k", "expect": 0}),
    )
    .await;
    assert_eq!(exists["applied"], false);
    assert_eq!(exists["reason"], "exists");
    assert_eq!(exists["value"], json!({"s": "on"}));

    let absent = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "none", "expect": v}),
    )
    .await;
    assert_eq!(absent["applied"], false);
    assert_eq!(absent["reason"], "absent");
    assert!(absent.get("value").is_none_or(Value::is_null), "{absent}");
    assert_eq!(
        absent["version"], 0,
        "an absent key's version is 0: {absent}"
    );

    let not_there = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "none", "expect": 0}),
    )
    .await;
    assert_eq!(not_there["applied"], true, "{not_there}");
    assert_eq!(not_there["version"], 0, "{not_there}");

    assert_eq!(h.broker.stats().commits, before, "check writes nothing");
    assert_eq!(get(&h, "app", "k").await["version"], v);
    assert_eq!(get(&h, "app", "none").await["found"], false);
}

#[tokio::test]
async fn incr_counts_from_zero_and_a_missing_delta_counts_one() {
    let h = Harness::new().await;
    let r = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": 5, "forever": true}),
    )
    .await;
    assert_eq!(r["op"], "incr");
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(r["value"], 5, "an absent key counts from 0");
    let v1 = r["version"].as_u64().unwrap();

    let r = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "forever": true}),
    )
    .await;
    assert_eq!(r["value"], 6, "a missing delta counts 1: {r}");
    assert!(r["version"].as_u64().unwrap() > v1);

    let r = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": -10, "forever": true}),
    )
    .await;
    assert_eq!(r["value"], -4);

    let g = get(&h, "app", "n").await;
    assert_eq!(g["value"], -4);
    assert_eq!(g["version"], r["version"]);

    // A missing delta on an absent key gives 1.
    let r = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "fresh", "ttlSeconds": 10}),
    )
    .await;
    assert_eq!(r["value"], 1);
}

/// The counter, the expiry it reads, and that of the row after each incr, through
/// `POST /api/v1/kv` (`in_txn: false`) or a transaction's `kv` array.
async fn incr_expiry(h: &Harness, in_txn: bool, key: &str, expiry: Value) -> (Value, Value) {
    let mut op = json!({"op": "incr", "ns": "app", "key": key});
    for (k, v) in expiry.as_object().unwrap() {
        op[k] = v.clone();
    }
    let r = if in_txn {
        let b = h.txn_ok(json!({ "kv": [op] })).await;
        assert_eq!(b["success"], true, "{b}");
        b["results"][0].clone()
    } else {
        one(h, op).await
    };
    assert_eq!(r["applied"], true, "{r}");
    (
        r["value"].clone(),
        get(h, "app", key).await["expiresAt"].clone(),
    )
}

/// The TTL of an incr is create-only (queen-mq 2.6.0 `tests/test_kv.py`
/// `test_incr_does_not_extend_a_live_ttl`): it applies when the incr creates the key,
/// an absent one or one whose expiry lapsed, and never moves a live key's expiry, so a
/// fixed-window limiter's window closes under load. In the standalone route and in a
/// transaction alike.
async fn incr_ttl_is_create_only(h: &Harness, in_txn: bool) {
    let key = if in_txn { "window-txn" } else { "window" };
    let t0 = h.clock.now_micros();
    let (n, first) = incr_expiry(h, in_txn, key, json!({"ttlSeconds": 2})).await;
    assert_eq!(n, 1);
    assert_eq!(
        micros(&first),
        t0 + 2 * SEC,
        "it created the key: its ttl applies"
    );

    h.advance(1);
    let (n, again) = incr_expiry(h, in_txn, key, json!({"ttlSeconds": 3600})).await;
    assert_eq!(n, 2);
    assert_eq!(
        again, first,
        "a live key keeps its expiry (in_txn: {in_txn})"
    );
    let (n, again) = incr_expiry(h, in_txn, key, json!({"forever": true})).await;
    assert_eq!(n, 3);
    assert_eq!(again, first, "forever does not extend a live key either");

    // The window closes at its own time, and the next incr opens a new one.
    h.advance(1);
    assert_eq!(get(h, "app", key).await["found"], false, "lapsed");
    let t2 = h.clock.now_micros();
    let (n, reopened) = incr_expiry(h, in_txn, key, json!({"ttlSeconds": 60})).await;
    assert_eq!(n, 1, "a lapsed key counts from 0");
    assert_eq!(
        micros(&reopened),
        t2 + 60 * SEC,
        "re-created: the new ttl applies"
    );
    // A forever key stays forever under a TTL'd incr.
    let forever = format!("{key}-forever");
    let (_, none) = incr_expiry(h, in_txn, &forever, json!({"forever": true})).await;
    assert_eq!(none, Value::Null);
    let (n, none) = incr_expiry(h, in_txn, &forever, json!({"ttlSeconds": 5})).await;
    assert_eq!((n, none), (json!(2), Value::Null));
    // A put still sets the expiry it names (it replaces the row).
    let r = one(
        h,
        json!({"op": "put", "ns": "app", "key": key, "value": 7, "ttlSeconds": 600}),
    )
    .await;
    assert_eq!(r["applied"], true);
    let g = get(h, "app", key).await;
    assert_eq!(micros(&g["expiresAt"]), t2 + 600 * SEC);
}

#[tokio::test]
async fn incr_ttl_is_create_only_in_the_standalone_route() {
    incr_ttl_is_create_only(&Harness::new().await, false).await;
}

#[tokio::test]
async fn incr_ttl_is_create_only_in_a_transaction() {
    incr_ttl_is_create_only(&Harness::new().await, true).await;
}

#[tokio::test]
async fn incr_ttl_is_create_only_on_a_file_across_a_restart() {
    use queen_mock_broker::ManualClock;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("queen.redb");
    let clock = ManualClock::new();
    let h = Harness::on_file(&path, &clock).await;
    incr_ttl_is_create_only(&h, false).await;
    let t0 = clock.now_micros();
    let (_, first) = incr_expiry(&h, true, "kept", json!({"ttlSeconds": 30})).await;
    assert_eq!(micros(&first), t0 + 30 * SEC);
    h.broker.shutdown().await;

    let h = Harness::on_file(&path, &clock).await;
    h.advance(10);
    let (n, again) = incr_expiry(&h, false, "kept", json!({"ttlSeconds": 3600})).await;
    assert_eq!((n, &again), (json!(2), &first), "the stored expiry is kept");
    h.broker.shutdown().await;
}

#[tokio::test]
async fn incr_past_min_or_max_is_refused_with_limit_and_writes_nothing() {
    let h = Harness::new().await;
    let r = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": 4, "forever": true}),
    )
    .await;
    let v = r["version"].clone();
    let before = h.broker.stats().commits;

    let over = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": 7, "max": 10, "forever": true}),
    )
    .await;
    assert_eq!(over["applied"], false, "{over}");
    assert_eq!(over["reason"], "limit");
    let under = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": -5, "min": 0, "forever": true}),
    )
    .await;
    assert_eq!(under["applied"], false, "{under}");
    assert_eq!(under["reason"], "limit");
    // A bound on an absent key applies to 0 + delta.
    let fresh = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "fresh", "delta": 3, "max": 2, "forever": true}),
    )
    .await;
    assert_eq!(fresh["reason"], "limit", "{fresh}");
    assert_eq!(h.broker.stats().commits, before);
    let g = get(&h, "app", "n").await;
    assert_eq!(g["value"], 4);
    assert_eq!(g["version"], v);
    assert_eq!(get(&h, "app", "fresh").await["found"], false);

    // Reaching a bound exactly is allowed.
    let at_max = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": 6, "max": 10, "forever": true}),
    )
    .await;
    assert_eq!(at_max["applied"], true, "{at_max}");
    assert_eq!(at_max["value"], 10);
    let at_min = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "n", "delta": -10, "min": 0, "forever": true}),
    )
    .await;
    assert_eq!(at_min["applied"], true, "{at_min}");
    assert_eq!(at_min["value"], 0);
}

#[tokio::test]
async fn incr_of_a_non_number_is_refused_with_type() {
    let h = Harness::new().await;
    let v = put_forever(&h, "app", "s", json!("hello")).await;
    put_forever(&h, "app", "o", json!({"n": 1})).await;
    let before = h.broker.stats().commits;
    for key in ["s", "o"] {
        let r = one(
            &h,
            json!({"op": "incr", "ns": "app", "key": key, "delta": 1, "forever": true}),
        )
        .await;
        assert_eq!(r["applied"], false, "{r}");
        assert_eq!(r["reason"], "type");
    }
    assert_eq!(h.broker.stats().commits, before);
    let g = get(&h, "app", "s").await;
    assert_eq!(g["value"], "hello");
    assert_eq!(g["version"], v);
}

#[tokio::test]
async fn versions_strictly_increase_broker_wide_across_keys_and_namespaces() {
    let h = Harness::new().await;
    let mut seen = Vec::new();
    let r = results(
        &h,
        json!([
            {"op": "put", "ns": "a", "key": "x", "value": 1, "forever": true},
            {"op": "put", "ns": "b", "key": "x", "value": 1, "forever": true},
            {"op": "incr", "ns": "a", "key": "n", "ttlSeconds": 60},
            {"op": "putIfAbsent", "ns": "a", "key": "y", "value": 1, "forever": true},
            {"op": "put", "ns": "a", "key": "x", "value": 2, "forever": true},
        ]),
    )
    .await;
    for x in &r {
        seen.push(x["version"].as_u64().unwrap_or_else(|| panic!("{x}")));
    }
    // Across calls, the shorthand, and after a delete.
    seen.push(put_forever(&h, "c", "z", json!(0)).await);
    one(&h, json!({"op": "delete", "ns": "a", "key": "x"})).await;
    seen.push(put_forever(&h, "a", "x", json!(3)).await);
    let (s, p) = put_route(&h, "/api/v1/kv/b/x", json!({"value": 9, "forever": true})).await;
    assert_eq!(s, StatusCode::OK, "{p}");
    seen.push(p["version"].as_u64().unwrap());
    assert!(
        seen.windows(2).all(|w| w[0] < w[1]),
        "versions strictly increase: {seen:?}"
    );
}

// ---------------------------------------------------------------- expect

#[tokio::test]
async fn expect_zero_means_the_key_must_not_exist() {
    let h = Harness::new().await;
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": 1, "forever": true, "expect": 0}),
    )
    .await;
    assert_eq!(r["applied"], true, "{r}");
    let v = r["version"].clone();
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": 2, "forever": true, "expect": 0}),
    )
    .await;
    assert_eq!(r["applied"], false, "{r}");
    assert_eq!(r["reason"], "exists");
    assert_eq!(r["value"], 1);
    assert_eq!(r["version"], v);
    assert_eq!(get(&h, "app", "k").await["value"], 1);
}

#[tokio::test]
async fn expect_n_must_match_the_current_version_and_never_creates() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": 1, "forever": true, "expect": 7}),
    )
    .await;
    assert_eq!(r["applied"], false, "{r}");
    assert_eq!(r["reason"], "absent");
    assert_eq!(h.broker.stats().commits, before, "expect N never creates");
    assert_eq!(get(&h, "app", "k").await["found"], false);

    let v1 = put_forever(&h, "app", "k", json!(1)).await;
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": 2, "forever": true, "expect": v1}),
    )
    .await;
    assert_eq!(r["applied"], true, "{r}");
    let v2 = r["version"].as_u64().unwrap();
    assert!(v2 > v1);

    // The old version no longer matches, for put and for delete.
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "k", "value": 3, "forever": true, "expect": v1}),
    )
    .await;
    assert_eq!(r["applied"], false);
    assert_eq!(r["reason"], "version");
    assert_eq!(r["value"], 2);
    assert_eq!(r["version"], v2);
    let r = one(
        &h,
        json!({"op": "delete", "ns": "app", "key": "k", "expect": v1}),
    )
    .await;
    assert_eq!(r["applied"], false);
    assert_eq!(r["reason"], "version");
    assert_eq!(get(&h, "app", "k").await["value"], 2);

    let r = one(
        &h,
        json!({"op": "delete", "ns": "app", "key": "k", "expect": v2}),
    )
    .await;
    assert_eq!(r["applied"], true, "{r}");
    assert_eq!(get(&h, "app", "k").await["found"], false);
}

/// An `expect` that finds no key loses with `reason: "absent"` and `version: 0` (the
/// version `expect` calls "must not exist"), and creates nothing: queen-mq 2.6.0
/// `tests/test_kv.py` `test_expect_on_an_absent_key_creates_nothing`. The same answer
/// from the batch route, the `PUT` shorthand, a transaction's `kv` array, and for a key
/// that has lapsed; a delete of an absent key too.
#[tokio::test]
async fn a_lost_op_on_an_absent_key_answers_version_0() {
    let h = Harness::new().await;
    let op = json!({"op": "put", "ns": "app", "key": "fence", "value": {"compensate": true},
                    "ttlSeconds": 60, "expect": 42});
    let before = h.broker.stats().commits;
    let batch = one(&h, op.clone()).await;
    let (s, shorthand) = put_route(
        &h,
        "/api/v1/kv/app/fence",
        json!({"value": {"compensate": true}, "ttlSeconds": 60, "expect": 42}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{shorthand}");
    assert_eq!(h.broker.stats().commits, before, "nothing was written");
    let b = h.txn_ok(json!({ "kv": [op] })).await;
    assert_eq!(b["success"], true, "not required: the rest commits: {b}");
    let in_txn = b["results"][0].clone();
    for (what, r) in [
        ("batch", &batch),
        ("shorthand", &shorthand),
        ("transaction", &in_txn),
    ] {
        assert_eq!(r["applied"], false, "{what}: {r}");
        assert_eq!(r["reason"], "absent", "{what}: {r}");
        assert_eq!(r["version"], 0, "{what}: {r}");
    }
    assert_eq!(
        get(&h, "app", "fence").await["found"],
        false,
        "nothing created"
    );

    let d = one(&h, json!({"op": "delete", "ns": "app", "key": "fence"})).await;
    assert_eq!(
        (&d["reason"], &d["version"]),
        (&json!("absent"), &json!(0)),
        "{d}"
    );

    // A lapsed key is absent: version 0, not the lapsed row's.
    one(
        &h,
        json!({"op": "put", "ns": "app", "key": "brief", "value": 1, "ttlSeconds": 1}),
    )
    .await;
    h.advance(2);
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "brief", "value": 2, "ttlSeconds": 1, "expect": 5}),
    )
    .await;
    assert_eq!(
        (&r["reason"], &r["version"]),
        (&json!("absent"), &json!(0)),
        "{r}"
    );
}

// ---------------------------------------------------------------- expiry

#[tokio::test]
async fn an_expired_key_is_absent_everywhere() {
    let h = Harness::new().await;
    let r = results(
        &h,
        json!([
            {"op": "put", "ns": "app", "key": "p/k", "value": "v", "ttlSeconds": 10},
            {"op": "put", "ns": "app", "key": "p/n", "value": 41, "ttlSeconds": 10},
            {"op": "put", "ns": "app", "key": "p/d", "value": 0, "ttlSeconds": 10},
            {"op": "put", "ns": "app", "key": "p/live", "value": 0, "forever": true},
        ]),
    )
    .await;
    let v = r[0]["version"].as_u64().unwrap();
    h.advance(9);
    assert_eq!(
        get(&h, "app", "p/k").await["found"],
        true,
        "alive before its TTL"
    );

    h.advance(2);
    assert_eq!(get(&h, "app", "p/k").await["found"], false);
    let m = one(
        &h,
        json!({"op": "getMany", "ns": "app", "keys": ["p/k", "p/live"]}),
    )
    .await;
    assert_eq!(m["missing"], json!(["p/k"]), "{m}");
    assert_eq!(m["rows"].as_array().unwrap().len(), 1);
    let p = one(&h, json!({"op": "getPrefix", "ns": "app", "prefix": "p/"})).await;
    assert_eq!(p["rows"].as_array().unwrap().len(), 1, "{p}");
    assert_eq!(p["rows"][0]["key"], "p/live");

    let c = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "p/k", "expect": v}),
    )
    .await;
    assert_eq!(c["applied"], false);
    assert_eq!(c["reason"], "absent", "{c}");
    let c = one(
        &h,
        json!({"op": "check", "ns": "app", "key": "p/k", "expect": 0}),
    )
    .await;
    assert_eq!(c["applied"], true, "{c}");
    let d = one(&h, json!({"op": "delete", "ns": "app", "key": "p/d"})).await;
    assert_eq!(d["applied"], false);
    assert_eq!(d["reason"], "absent", "{d}");
    let i = one(
        &h,
        json!({"op": "incr", "ns": "app", "key": "p/n", "delta": 2, "forever": true}),
    )
    .await;
    assert_eq!(i["value"], 2, "an expired key counts from 0: {i}");
    let w = one(
        &h,
        json!({"op": "putIfAbsent", "ns": "app", "key": "p/k", "value": "new", "forever": true}),
    )
    .await;
    assert_eq!(w["applied"], true, "{w}");
    assert!(w["version"].as_u64().unwrap() > v);
    let (_, g) = h.get("/api/v1/kv/app/p%2Fk").await;
    assert_eq!(g["value"], "new", "{g}");
}

#[tokio::test]
async fn a_forever_key_never_expires() {
    let h = Harness::new().await;
    let v = put_forever(&h, "app", "k", json!("kept")).await;
    h.advance(100 * 365 * 24 * 3600);
    let g = get(&h, "app", "k").await;
    assert_eq!(g["found"], true, "{g}");
    assert_eq!(g["value"], "kept");
    assert_eq!(g["version"], v);
    assert_eq!(g["expiresAt"], Value::Null);
}

// ---------------------------------------------------------------- required

#[tokio::test]
async fn a_lost_required_op_writes_nothing_of_the_call() {
    let h = Harness::new().await;
    let taken = put_forever(&h, "app", "taken", json!({"by": "first"})).await;
    put_forever(&h, "app", "counter", json!(10)).await;
    let before = h.broker.stats().commits;

    let b = kv(
        &h,
        json!([
            {"op": "put", "ns": "app", "key": "a", "value": 1, "forever": true},
            {"op": "incr", "ns": "app", "key": "counter", "forever": true},
            {"op": "putIfAbsent", "ns": "app", "key": "taken", "value": {"by": "second"},
             "forever": true, "required": true},
            {"op": "put", "ns": "app", "key": "c", "value": 3, "forever": true},
        ]),
    )
    .await;
    assert_eq!(b["ok"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["failedIndex"], 2);
    assert_eq!(b["kvReason"], "exists");
    assert_eq!(b["version"], taken);
    assert_eq!(b["value"], json!({"by": "first"}));
    assert_eq!(b["results"], json!([]));

    assert_eq!(h.broker.stats().commits, before, "nothing was committed");
    assert_eq!(get(&h, "app", "a").await["found"], false);
    assert_eq!(get(&h, "app", "c").await["found"], false);
    assert_eq!(get(&h, "app", "counter").await["value"], 10);
    assert_eq!(
        get(&h, "app", "taken").await["value"],
        json!({"by": "first"})
    );
}

#[tokio::test]
async fn a_lost_required_op_on_an_absent_key_answers_null_version_and_value() {
    let h = Harness::new().await;
    let b = kv(
        &h,
        json!([
            {"op": "put", "ns": "app", "key": "a", "value": 1, "forever": true},
            {"op": "check", "ns": "app", "key": "gate", "expect": 5, "required": true},
        ]),
    )
    .await;
    assert_eq!(b["ok"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["failedIndex"], 1);
    assert_eq!(b["kvReason"], "absent");
    let o = b.as_object().unwrap();
    assert!(o.contains_key("version") && b["version"].is_null(), "{b}");
    assert!(o.contains_key("value") && b["value"].is_null(), "{b}");
    assert_eq!(b["results"], json!([]));
    assert_eq!(get(&h, "app", "a").await["found"], false);

    // Each losing reason gates: limit and type too.
    put_forever(&h, "app", "s", json!("text")).await;
    for (op, reason) in [
        (
            json!({"op": "incr", "ns": "app", "key": "n", "delta": 5, "max": 1, "forever": true, "required": true}),
            "limit",
        ),
        (
            json!({"op": "incr", "ns": "app", "key": "s", "forever": true, "required": true}),
            "type",
        ),
        (
            json!({"op": "delete", "ns": "app", "key": "missing", "required": true}),
            "absent",
        ),
    ] {
        let b = kv(
            &h,
            json!([{"op": "put", "ns": "app", "key": "a", "value": 1, "forever": true}, op]),
        )
        .await;
        assert_eq!(b["reason"], "kv_precondition", "{b}");
        assert_eq!(b["kvReason"], reason, "{b}");
        assert_eq!(b["failedIndex"], 1);
        assert_eq!(get(&h, "app", "a").await["found"], false);
    }
}

#[tokio::test]
async fn without_required_a_lost_op_is_applied_false_and_the_rest_commits() {
    let h = Harness::new().await;
    let taken = put_forever(&h, "app", "taken", json!("first")).await;
    let r = results(
        &h,
        json!([
            {"op": "put", "ns": "app", "key": "a", "value": 1, "forever": true},
            {"op": "putIfAbsent", "ns": "app", "key": "taken", "value": "second", "forever": true},
            {"op": "check", "ns": "app", "key": "taken", "expect": 0},
            {"op": "put", "ns": "app", "key": "c", "value": 3, "forever": true},
        ]),
    )
    .await;
    assert_eq!(r.len(), 4);
    for (i, x) in r.iter().enumerate() {
        assert_eq!(x["index"], i, "{x}");
    }
    assert_eq!(r[0]["applied"], true);
    assert_eq!(r[1]["applied"], false);
    assert_eq!(r[1]["reason"], "exists");
    assert_eq!(r[1]["version"], taken);
    assert_eq!(r[2]["applied"], false);
    assert_eq!(r[2]["reason"], "exists");
    assert_eq!(r[3]["applied"], true);
    assert_eq!(get(&h, "app", "a").await["value"], 1);
    assert_eq!(get(&h, "app", "c").await["value"], 3);
    assert_eq!(get(&h, "app", "taken").await["value"], "first");
}

// ---------------------------------------------------------------- shorthands

async fn put_route(h: &Harness, path: &str, body: Value) -> (StatusCode, Value) {
    let res = h.http.put(h.url(path)).json(&body).send().await.unwrap();
    let s = res.status();
    let text = res.text().await.unwrap();
    (s, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[tokio::test]
async fn shorthand_routes_get_put_and_delete_one_key_with_a_bare_result() {
    let h = Harness::new().await;
    let (s, p) = put_route(
        &h,
        "/api/v1/kv/app/k",
        json!({"value": {"a": 1}, "ttlSeconds": 60}),
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{p}");
    assert_eq!(p["applied"], true, "a bare result: {p}");
    assert_eq!(p["key"], "k");
    assert_eq!(p["value"], json!({"a": 1}));
    let v = p["version"].as_u64().unwrap();

    let (s, g) = h.get("/api/v1/kv/app/k").await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(g["found"], true, "{g}");
    assert_eq!(g["value"], json!({"a": 1}));
    assert_eq!(g["version"], v);
    assert_eq!(
        micros(&g["expiresAt"]),
        h.clock.now_micros() + 60 * SEC,
        "{g}"
    );

    // expect on the shorthand.
    let (_, p) = put_route(
        &h,
        "/api/v1/kv/app/k",
        json!({"value": 2, "forever": true, "expect": v + 100}),
    )
    .await;
    assert_eq!(p["applied"], false, "{p}");
    assert_eq!(p["reason"], "version");
    let (_, p) = put_route(
        &h,
        "/api/v1/kv/app/k",
        json!({"value": 2, "forever": true, "expect": v + 100, "required": true}),
    )
    .await;
    assert_eq!(p["ok"], false, "{p}");
    assert_eq!(p["reason"], "kv_precondition");
    assert_eq!(p["kvReason"], "version");
    assert_eq!(p["failedIndex"], 0);
    assert_eq!(p["version"], v);

    let (_, d) = h
        .delete(&format!("/api/v1/kv/app/k?expect={}", v + 1))
        .await;
    assert_eq!(d["applied"], false, "{d}");
    assert_eq!(d["reason"], "version");
    let (s, d) = h.delete(&format!("/api/v1/kv/app/k?expect={v}")).await;
    assert_eq!(s, StatusCode::OK);
    assert_eq!(d["applied"], true, "{d}");
    let (_, d) = h.delete("/api/v1/kv/app/k").await;
    assert_eq!(d["applied"], false);
    assert_eq!(d["reason"], "absent");
    let (_, g) = h.get("/api/v1/kv/app/k").await;
    assert_eq!(g["found"], false, "{g}");
}

#[tokio::test]
async fn shorthand_put_keeps_the_refusals_of_the_batch_route() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let res = put_route(&h, "/api/v1/kv/app/k", json!({"value": 1})).await;
    assert_refused(
        &h,
        before,
        res,
        400,
        "kv_bad_request",
        Some("kv_expiry_not_specified"),
    );
    let res = put_route(&h, "/api/v1/kv/app/k", json!({"value": 1, "ttlSeconds": 0})).await;
    assert_refused(&h, before, res, 400, "kv_bad_request", Some("kv_bad_ttl"));
    let res = put_route(&h, "/api/v1/kv/Bad/k", json!({"value": 1, "forever": true})).await;
    assert_refused(&h, before, res, 400, "kv_bad_request", None);
    let res = put_route(
        &h,
        "/api/v1/kv/app/k",
        json!({"value": "x".repeat(64 * 1024), "forever": true}),
    )
    .await;
    assert_refused(&h, before, res, 413, "payload_too_large", None);
    let (_, g) = h.get("/api/v1/kv/app/k").await;
    assert_eq!(g["found"], false);
}

#[tokio::test]
async fn shorthand_get_and_delete_refuse_a_bad_namespace_or_key() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    let long = "k".repeat(513);
    for path in [
        "/api/v1/kv/Bad/k".to_string(),
        "/api/v1/kv/-x/k".to_string(),
        format!("/api/v1/kv/app/{long}"),
        "/api/v1/kv/app/a%00b".to_string(),
    ] {
        let res = h.get(&path).await;
        assert_refused(&h, before, res, 400, "kv_bad_request", None);
        let res = h.delete(&path).await;
        assert_refused(&h, before, res, 400, "kv_bad_request", None);
    }
}

#[tokio::test]
async fn shorthand_delete_with_a_bad_expect_is_refused_with_kv_bad_expect() {
    let h = Harness::new().await;
    let v = put_forever(&h, "app", "k", json!(1)).await;
    let before = h.broker.stats().commits;
    for expect in ["-1", "abc", "1.5"] {
        let res = h.delete(&format!("/api/v1/kv/app/k?expect={expect}")).await;
        assert_refused(
            &h,
            before,
            res,
            400,
            "kv_bad_request",
            Some("kv_bad_expect"),
        );
    }
    assert_eq!(get(&h, "app", "k").await["version"], v);
}

// ---------------------------------------------------------------- refusals

/// Posts `ops` next to a valid put of `app/witness`; asserts the refusal and that the
/// witness was not written.
async fn refused_call(h: &Harness, op: Value, status: u16, code: &str, reason: Option<&str>) {
    let before = h.broker.stats().commits;
    let res = h
        .post(
            "/api/v1/kv",
            json!({"operations": [
                {"op": "put", "ns": "app", "key": "witness", "value": 1, "forever": true},
                op,
            ]}),
        )
        .await;
    let shown = res.1.clone();
    assert_refused(h, before, res, status, code, reason);
    assert_eq!(
        get(h, "app", "witness").await["found"],
        false,
        "nothing of the refused call was written: {shown}"
    );
}

#[tokio::test]
async fn a_write_needs_exactly_one_expiry() {
    let h = Harness::new().await;
    for op in ["put", "putIfAbsent", "incr"] {
        refused_call(
            &h,
            json!({"op": op, "ns": "app", "key": "k", "value": 1}),
            400,
            "kv_bad_request",
            Some("kv_expiry_not_specified"),
        )
        .await;
        refused_call(
            &h,
            json!({"op": op, "ns": "app", "key": "k", "value": 1, "forever": false}),
            400,
            "kv_bad_request",
            Some("kv_expiry_not_specified"),
        )
        .await;
        refused_call(
            &h,
            json!({"op": op, "ns": "app", "key": "k", "value": 1, "ttlSeconds": 10, "forever": true}),
            400,
            "kv_bad_request",
            Some("kv_bad_ttl"),
        )
        .await;
    }
    for ttl in [json!(0), json!(-5), json!("10"), json!(1.5)] {
        refused_call(
            &h,
            json!({"op": "put", "ns": "app", "key": "k", "value": 1, "ttlSeconds": ttl}),
            400,
            "kv_bad_request",
            Some("kv_bad_ttl"),
        )
        .await;
    }
}

#[tokio::test]
async fn a_bad_expect_is_refused_with_kv_bad_expect() {
    let h = Harness::new().await;
    for expect in [json!(-1), json!("3"), json!(1.5), json!(true)] {
        refused_call(
            &h,
            json!({"op": "put", "ns": "app", "key": "k", "value": 1, "forever": true, "expect": expect}),
            400,
            "kv_bad_request",
            Some("kv_bad_expect"),
        )
        .await;
        refused_call(
            &h,
            json!({"op": "check", "ns": "app", "key": "k", "expect": expect}),
            400,
            "kv_bad_request",
            Some("kv_bad_expect"),
        )
        .await;
    }
    // check needs an expect.
    refused_call(
        &h,
        json!({"op": "check", "ns": "app", "key": "k"}),
        400,
        "kv_bad_request",
        Some("kv_bad_expect"),
    )
    .await;
}

#[tokio::test]
async fn a_namespace_outside_the_pattern_is_refused() {
    let h = Harness::new().await;
    for ns in [
        String::new(),
        "App".into(),
        "-app".into(),
        ".app".into(),
        "_app".into(),
        "a b".into(),
        "a/b".into(),
        "añ".into(),
        "a".repeat(65),
    ] {
        refused_call(
            &h,
            json!({"op": "get", "ns": ns, "key": "k"}),
            400,
            "kv_bad_request",
            None,
        )
        .await;
    }
    // The edges of the pattern are accepted.
    for ns in ["a".repeat(64), "0a.b_c-d".into(), "9".into()] {
        let r = one(
            &h,
            json!({"op": "put", "ns": ns, "key": "k", "value": 1, "forever": true}),
        )
        .await;
        assert_eq!(r["applied"], true, "{ns}: {r}");
    }
}

#[tokio::test]
async fn a_key_of_0_or_over_512_bytes_or_with_nul_is_refused() {
    let h = Harness::new().await;
    for key in [
        String::new(),
        "k".repeat(513),
        "a\0b".into(),
        "é".repeat(257),
    ] {
        refused_call(
            &h,
            json!({"op": "put", "ns": "app", "key": key, "value": 1, "forever": true}),
            400,
            "kv_bad_request",
            None,
        )
        .await;
        refused_call(
            &h,
            json!({"op": "getMany", "ns": "app", "keys": ["ok", key]}),
            400,
            "kv_bad_request",
            None,
        )
        .await;
    }
    // 512 bytes, in one- or two-byte characters, is within the limit.
    for key in ["k".repeat(512), "é".repeat(256)] {
        let r = one(
            &h,
            json!({"op": "put", "ns": "app", "key": key, "value": 1, "forever": true}),
        )
        .await;
        assert_eq!(r["applied"], true, "{r}");
        assert_eq!(get(&h, "app", &key).await["found"], true);
    }
}

#[tokio::test]
async fn a_non_numeric_delta_is_refused() {
    let h = Harness::new().await;
    for delta in [json!("1"), json!(true), json!([1]), json!({"n": 1})] {
        refused_call(
            &h,
            json!({"op": "incr", "ns": "app", "key": "n", "delta": delta, "forever": true}),
            400,
            "kv_bad_request",
            None,
        )
        .await;
    }
    assert_eq!(get(&h, "app", "n").await["found"], false);
}

#[tokio::test]
async fn more_than_256_ops_is_refused() {
    let h = Harness::new().await;
    let gets = |n: usize| -> Vec<Value> {
        (0..n)
            .map(|i| json!({"op": "get", "ns": "app", "key": format!("k{i}")}))
            .collect()
    };
    let mut ops = gets(256);
    ops[0] = json!({"op": "put", "ns": "app", "key": "witness", "value": 1, "forever": true});
    let before = h.broker.stats().commits;
    let mut over = ops.clone();
    over.push(json!({"op": "get", "ns": "app", "key": "x"}));
    let res = h.post("/api/v1/kv", json!({ "operations": over })).await;
    assert_refused(&h, before, res, 400, "kv_bad_request", None);
    assert_eq!(get(&h, "app", "witness").await["found"], false);

    let r = results(&h, json!(ops)).await;
    assert_eq!(r.len(), 256, "256 ops are accepted");
}

#[tokio::test]
async fn more_than_1024_keys_is_refused() {
    let h = Harness::new().await;
    let keys = |n: usize| -> Vec<String> { (0..n).map(|i| format!("k{i}")).collect() };
    let witness = json!({"op": "put", "ns": "app", "key": "witness", "value": 1, "forever": true});
    let before = h.broker.stats().commits;
    for ops in [
        json!([witness.clone(), {"op": "getMany", "ns": "app", "keys": keys(1024)}]),
        json!([{"op": "getMany", "ns": "app", "keys": keys(1025)}]),
        json!([
            {"op": "getMany", "ns": "app", "keys": keys(600)},
            {"op": "getMany", "ns": "app", "keys": keys(424)},
            witness.clone(),
        ]),
    ] {
        let res = h.post("/api/v1/kv", json!({ "operations": ops })).await;
        assert_refused(&h, before, res, 400, "kv_bad_request", None);
    }
    assert_eq!(get(&h, "app", "witness").await["found"], false);

    // Exactly 1,024 keys, counting the single-key ops, are accepted.
    let r = results(
        &h,
        json!([witness, {"op": "getMany", "ns": "app", "keys": keys(1023)}]),
    )
    .await;
    assert_eq!(r[1]["missing"].as_array().unwrap().len(), 1023);
}

#[tokio::test]
async fn a_value_over_64_kib_as_compact_json_is_413() {
    let h = Harness::new().await;
    // A JSON string of n characters is n + 2 bytes of compact JSON.
    let exact = "x".repeat(64 * 1024 - 2);
    let over = "x".repeat(64 * 1024 - 1);
    for op in ["put", "putIfAbsent"] {
        refused_call(
            &h,
            json!({"op": op, "ns": "app", "key": "big", "value": over, "forever": true}),
            413,
            "payload_too_large",
            None,
        )
        .await;
    }
    assert_eq!(get(&h, "app", "big").await["found"], false);
    let r = one(
        &h,
        json!({"op": "put", "ns": "app", "key": "big", "value": exact, "forever": true}),
    )
    .await;
    assert_eq!(r["applied"], true, "64 KiB exactly is accepted");

    // The size is measured as compact JSON: whitespace in the request does not count.
    let items = vec!["1"; 30_000].join(" ,\n   ");
    let raw = format!(
        r#"{{"operations": [{{"op": "put", "ns": "app", "key": "spaced", "forever": true, "value": [{items}]}}]}}"#
    );
    assert!(raw.len() > 64 * 1024);
    let (s, b) = h.post_raw("/api/v1/kv", raw).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["results"][0]["applied"], true, "{b}");
}

// ---------------------------------------------------------------- in a transaction

#[tokio::test]
async fn in_a_transaction_a_lost_required_kv_op_rolls_back_with_failed_index_after_the_pushes() {
    let h = Harness::new().await;
    let taken = put_forever(&h, "app", "taken", json!(true)).await;
    let (s, b) = h
        .post(
            "/api/v1/transaction",
            json!({
                "operations": [{"type": "push", "items": [
                    {"queue": "q", "transactionId": "t1", "payload": 1},
                    {"queue": "q", "transactionId": "t2", "payload": 2},
                ]}],
                "kv": [
                    {"op": "put", "ns": "app", "key": "x", "value": 1, "forever": true},
                    {"op": "putIfAbsent", "ns": "app", "key": "taken", "value": false,
                     "forever": true, "required": true},
                ],
            }),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["success"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["failedIndex"], 3, "two push slots, then kv[1]");
    assert_eq!(b["kvReason"], "exists");
    assert_eq!(b["version"], taken);
    assert_eq!(b["value"], true);
    assert_eq!(b["results"], json!([]));
    assert_eq!(get(&h, "app", "x").await["found"], false);
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
}

#[tokio::test]
async fn in_a_transaction_kv_keeps_its_rules_and_limits() {
    let h = Harness::new().await;
    let txn = |kv: Value| json!({"kv": kv});
    let put = |k: &str| json!({"op": "put", "ns": "app", "key": k, "value": 1, "forever": true});
    let before = h.broker.stats().commits;
    let refusals = [
        // getPrefix is not allowed.
        txn(json!([{"op": "getPrefix", "ns": "app", "prefix": ""}])),
        // A key may be written once per call.
        txn(json!([put("k"), put("k")])),
        // At most 64 ops and 256 keys.
        txn(json!(
            (0..65).map(|i| put(&format!("k{i}"))).collect::<Vec<_>>()
        )),
        txn(json!([{"op": "getMany", "ns": "app", "keys":
            (0..257).map(|i| format!("k{i}")).collect::<Vec<_>>()}])),
        // The same per-op refusals as standalone.
        txn(json!([{"op": "put", "ns": "app", "key": "k", "value": 1}])),
        txn(json!([{"op": "put", "ns": "App", "key": "k", "value": 1, "forever": true}])),
        txn(json!([{"op": "incr", "ns": "app", "key": "k", "delta": "2", "forever": true}])),
    ];
    for body in refusals {
        let (s, b) = h.post("/api/v1/transaction", body.clone()).await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{body} -> {b}");
        assert_eq!(h.broker.stats().commits, before, "{body}");
    }
    let (s, b) = h
        .post(
            "/api/v1/transaction",
            txn(
                json!([{"op": "put", "ns": "app", "key": "big", "forever": true,
                        "value": "x".repeat(64 * 1024)}]),
            ),
        )
        .await;
    assert_eq!(s, StatusCode::PAYLOAD_TOO_LARGE, "{b}");
    assert_eq!(h.broker.stats().commits, before);

    // 64 ops commit, and a non-required loss is applied: false.
    let mut ops: Vec<Value> = (0..63).map(|i| put(&format!("k{i}"))).collect();
    ops.push(json!({"op": "check", "ns": "app", "key": "nope", "expect": 3}));
    let (s, b) = h.post("/api/v1/transaction", txn(json!(ops))).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    assert_eq!(b["success"], true, "{b}");
    assert_eq!(b["results"][63]["applied"], false);
    assert_eq!(b["results"][63]["reason"], "absent");
    assert_eq!(b["results"][63]["type"], "kv");
    assert_eq!(b["results"][63]["opIndex"], 63);
    assert_eq!(get(&h, "app", "k62").await["value"], 1);
}
