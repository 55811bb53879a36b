//! Locks and semaphores (`wire.md` section 11): acquire, renew, release, get, TTL
//! lapses, and the guard that gates a transaction on holding the lock.

mod common;

use common::Harness;
use queen_mock_broker::Clock;
use reqwest::StatusCode;
use serde_json::{Value, json};

/// Sends `POST /api/v1/locks`; asserts 200 and returns the results.
async fn locks(h: &Harness, ops: Value) -> Vec<Value> {
    let (s, b) = h.post("/api/v1/locks", json!({ "operations": ops })).await;
    assert_eq!(s, StatusCode::OK, "{b}");
    let r = b["results"].as_array().unwrap_or_else(|| panic!("{b}"));
    r.clone()
}

/// Runs one lock op; checks the `index`, `op` and `name` every result carries.
async fn one(h: &Harness, op: Value) -> Value {
    let mut r = locks(h, json!([op.clone()])).await;
    assert_eq!(r.len(), 1);
    let x = r.remove(0);
    assert_eq!(x["index"], 0, "{x}");
    assert_eq!(x["op"], op["op"], "{x}");
    assert_eq!(x["name"], op["name"], "{x}");
    x
}

async fn acquire(h: &Harness, name: &str, owner: &str, ttl: u64, limit: u64) -> Value {
    one(
        h,
        json!({"op": "acquire", "name": name, "owner": owner, "ttlSeconds": ttl, "limit": limit}),
    )
    .await
}

async fn get(h: &Harness, name: &str) -> Value {
    one(h, json!({"op": "get", "name": name})).await
}

fn token(r: &Value) -> u64 {
    r["token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no token: {r}"))
}

fn micros(iso: &Value) -> i64 {
    let s = iso.as_str().unwrap_or_else(|| panic!("not a time: {iso}"));
    assert!(s.ends_with('Z'), "{s}");
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{s}: {e}"));
    (t.unix_timestamp_nanos() / 1000) as i64
}

const SEC: i64 = 1_000_000;

/// A transaction gated by `guard` that puts `app/k = value`.
async fn guarded_put(h: &Harness, guard: &Value, value: i64) -> Value {
    let (s, b) = h
        .post(
            "/api/v1/transaction",
            json!({"kv": [guard, {"op": "put", "ns": "app", "key": "k", "value": value, "forever": true}]}),
        )
        .await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

async fn app_k(h: &Harness) -> Value {
    let (s, b) = h.get("/api/v1/kv/app/k").await;
    assert_eq!(s, StatusCode::OK, "{b}");
    b
}

// ---------------------------------------------------------------- acquire

#[tokio::test]
async fn acquire_gives_a_slot_a_token_the_owner_and_a_guard_on_the_slot_row() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "worker-1", 30, 1).await;
    assert_eq!(a["acquired"], true, "{a}");
    assert_eq!(a["slot"], 0);
    assert_eq!(a["owner"], "worker-1");
    let t = token(&a);
    assert_eq!(
        a["guard"],
        json!({"op": "check", "ns": "queen-locks", "key": "job#0", "expect": t, "required": true})
    );
    assert!(
        a.get("already").is_none_or(|v| v == false),
        "a fresh acquire is not `already`: {a}"
    );
    // The token is the version of the lock's KV row.
    let (_, row) = h.get("/api/v1/kv/queen-locks/job%230").await;
    assert_eq!(row["found"], true, "{row}");
    assert_eq!(row["version"], t);
}

#[tokio::test]
async fn a_second_acquire_of_a_held_lock_is_refused_with_held_and_the_holders() {
    let h = Harness::new().await;
    acquire(&h, "job", "worker-1", 30, 1).await;
    let b = acquire(&h, "job", "worker-2", 30, 1).await;
    assert_eq!(b["acquired"], false, "{b}");
    assert_eq!(b["reason"], "held");
    assert_eq!(b["holders"], json!([{"slot": 0, "owner": "worker-1"}]));
    // Without an owner too.
    let c = one(
        &h,
        json!({"op": "acquire", "name": "job", "ttlSeconds": 30}),
    )
    .await;
    assert_eq!(c["acquired"], false, "{c}");
    assert_eq!(c["reason"], "held");
    // Another name is another lock.
    assert_eq!(
        acquire(&h, "job2", "worker-2", 30, 1).await["acquired"],
        true
    );
}

#[tokio::test]
async fn a_semaphore_of_limit_2_gives_two_slots_then_contended() {
    let h = Harness::new().await;
    let a = acquire(&h, "pool", "a", 30, 2).await;
    let b = acquire(&h, "pool", "b", 30, 2).await;
    assert_eq!(a["acquired"], true, "{a}");
    assert_eq!(b["acquired"], true, "{b}");
    let mut slots = [a["slot"].as_u64().unwrap(), b["slot"].as_u64().unwrap()];
    slots.sort();
    assert_eq!(slots, [0, 1]);
    assert_ne!(token(&a), token(&b));
    assert_eq!(b["guard"]["key"], format!("pool#{}", b["slot"]));

    let c = acquire(&h, "pool", "c", 30, 2).await;
    assert_eq!(c["acquired"], false, "{c}");
    assert_eq!(c["reason"], "contended");
    let mut holders = c["holders"].as_array().unwrap().clone();
    holders.sort_by_key(|x| x["slot"].as_u64());
    assert_eq!(
        holders,
        [
            json!({"slot": a["slot"], "owner": "a"}),
            json!({"slot": b["slot"], "owner": "b"})
        ]
    );

    // A released slot is free for the next one.
    let r = one(
        &h,
        json!({"op": "release", "name": "pool", "token": token(&a), "slot": a["slot"]}),
    )
    .await;
    assert_eq!(r["released"], true, "{r}");
    let c = acquire(&h, "pool", "c", 30, 2).await;
    assert_eq!(c["acquired"], true, "{c}");
    assert_eq!(c["slot"], a["slot"]);
}

#[tokio::test]
async fn acquire_by_the_current_owner_answers_already_with_its_slot_and_token() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "worker-1", 30, 1).await;
    let again = acquire(&h, "job", "worker-1", 30, 1).await;
    assert_eq!(again["acquired"], true, "{again}");
    assert_eq!(again["already"], true);
    assert_eq!(again["slot"], a["slot"]);
    assert_eq!(again["token"], a["token"]);
    assert_eq!(again["owner"], "worker-1");
    assert_eq!(again["guard"], a["guard"]);
    // In a semaphore the owner keeps its one slot instead of taking a second.
    let s = acquire(&h, "pool", "x", 30, 3).await;
    let s2 = acquire(&h, "pool", "x", 30, 3).await;
    assert_eq!(s2["already"], true, "{s2}");
    assert_eq!(s2["slot"], s["slot"]);
    assert_eq!(
        get(&h, "pool").await["holders"].as_array().unwrap().len(),
        1
    );
}

#[tokio::test]
async fn a_semaphore_takes_up_to_1024_slots_and_a_bad_op_is_400() {
    let h = Harness::new().await;
    let before = h.broker.stats().commits;
    for op in [
        json!({"op": "acquire", "name": "job", "ttlSeconds": 30, "limit": 0}),
        json!({"op": "acquire", "name": "job", "ttlSeconds": 30, "limit": 1025}),
        json!({"op": "acquire", "name": "job"}),
        json!({"op": "acquire", "name": "job", "ttlSeconds": 0}),
        json!({"op": "acquire", "ttlSeconds": 30}),
        json!({"op": "renew", "name": "job", "ttlSeconds": 30}),
        json!({"op": "release", "name": "job"}),
        json!({"op": "steal", "name": "job"}),
    ] {
        let (s, b) = h
            .post(
                "/api/v1/locks",
                json!({"operations": [{"op": "acquire", "name": "witness", "ttlSeconds": 30}, op]}),
            )
            .await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert_eq!(h.broker.stats().commits, before, "{b}");
    }
    assert_eq!(get(&h, "witness").await["held"], false);

    let a = acquire(&h, "wide", "a", 30, 1024).await;
    assert_eq!(a["acquired"], true, "{a}");
}

// ---------------------------------------------------------------- renew and release

#[tokio::test]
async fn renew_with_the_right_token_gives_a_new_token_and_extends_the_lock() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w", 10, 1).await;
    let t0 = token(&a);
    h.advance(8);
    let r = one(
        &h,
        json!({"op": "renew", "name": "job", "token": t0, "ttlSeconds": 10}),
    )
    .await;
    assert_eq!(r["renewed"], true, "{r}");
    assert_eq!(r["slot"], 0);
    let t1 = token(&r);
    assert_ne!(t1, t0, "a renewal gives a new token");
    assert_eq!(
        r["guard"],
        json!({"op": "check", "ns": "queen-locks", "key": "job#0", "expect": t1, "required": true})
    );
    // The old expiry passes: still held by w.
    h.advance(5);
    let g = get(&h, "job").await;
    assert_eq!(g["held"], true, "{g}");
    assert_eq!(g["holders"][0]["token"], t1);
    let b = acquire(&h, "job", "other", 10, 1).await;
    assert_eq!(b["acquired"], false, "{b}");
    // Renewing again with the new token works, with the slot named too.
    let r2 = one(
        &h,
        json!({"op": "renew", "name": "job", "token": t1, "slot": 0, "ttlSeconds": 10}),
    )
    .await;
    assert_eq!(r2["renewed"], true, "{r2}");
}

#[tokio::test]
async fn renew_or_release_with_a_stale_token_is_lost() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w", 30, 1).await;
    let t0 = token(&a);
    let r = one(
        &h,
        json!({"op": "renew", "name": "job", "token": t0, "ttlSeconds": 30}),
    )
    .await;
    let t1 = token(&r);

    let before = h.broker.stats().commits;
    let stale = one(
        &h,
        json!({"op": "renew", "name": "job", "token": t0, "ttlSeconds": 30}),
    )
    .await;
    assert_eq!(stale["renewed"], false, "{stale}");
    assert_eq!(stale["reason"], "lost");
    assert_eq!(stale["holders"], json!([{"slot": 0, "owner": "w"}]));
    let stale = one(&h, json!({"op": "release", "name": "job", "token": t0})).await;
    assert_eq!(stale["released"], false, "{stale}");
    assert_eq!(stale["reason"], "lost");
    // A right token on the wrong slot is lost too.
    let wrong_slot = one(
        &h,
        json!({"op": "release", "name": "job", "token": t1, "slot": 1}),
    )
    .await;
    assert_eq!(wrong_slot["released"], false, "{wrong_slot}");
    assert_eq!(wrong_slot["reason"], "lost");
    assert_eq!(h.broker.stats().commits, before, "a lost op writes nothing");
    assert_eq!(get(&h, "job").await["holders"][0]["token"], t1);

    let ok = one(&h, json!({"op": "release", "name": "job", "token": t1})).await;
    assert_eq!(ok["released"], true, "{ok}");
    assert_eq!(ok["slot"], 0);
    assert_eq!(get(&h, "job").await["held"], false);
    // Releasing twice: the second is lost.
    let again = one(&h, json!({"op": "release", "name": "job", "token": t1})).await;
    assert_eq!(again["released"], false);
    assert_eq!(again["reason"], "lost");
}

#[tokio::test]
async fn a_renew_sent_again_by_its_owner_with_the_old_token_still_renews() {
    // The official client's `a_call_sent_again_by_its_owner_is_the_same_permit`: a
    // renew whose answer was lost is sent again with the token it replaced.
    let h = Harness::new().await;
    let a = acquire(&h, "job", "me", 30, 1).await;
    let again = acquire(&h, "job", "me", 30, 1).await;
    assert_eq!(
        (again["already"].clone(), token(&again)),
        (json!(true), token(&a))
    );
    let t0 = token(&a);
    let renew = json!({"op": "renew", "name": "job", "token": t0, "ttlSeconds": 30, "owner": "me"});
    let first = one(&h, renew.clone()).await;
    let resent = one(&h, renew).await;
    assert_eq!(
        (first["renewed"].clone(), resent["renewed"].clone()),
        (json!(true), json!(true))
    );
    assert!(token(&resent) > token(&first), "{first} {resent}");
    let stranger = one(
        &h,
        json!({"op": "renew", "name": "job", "token": t0, "ttlSeconds": 30, "owner": "somebody-else"}),
    )
    .await;
    assert_eq!(stranger["renewed"], false, "{stranger}");
    assert_eq!(stranger["holders"][0]["owner"], "me");
    // The old token still releases nothing: only a renew is forgiven.
    let release = one(&h, json!({"op": "release", "name": "job", "token": t0})).await;
    assert_eq!(release["released"], false);
    assert_eq!(get(&h, "job").await["holders"][0]["token"], token(&resent));
}

#[tokio::test]
async fn release_frees_the_lock_for_another_owner() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w1", 30, 1).await;
    one(
        &h,
        json!({"op": "release", "name": "job", "token": token(&a)}),
    )
    .await;
    let b = acquire(&h, "job", "w2", 30, 1).await;
    assert_eq!(b["acquired"], true, "{b}");
    assert_eq!(b["owner"], "w2");
    assert!(token(&b) > token(&a), "the new holder's token is newer");
}

#[tokio::test]
async fn a_lapsed_lock_can_be_acquired_by_someone_else() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w1", 10, 1).await;
    h.advance(9);
    assert_eq!(
        acquire(&h, "job", "w2", 10, 1).await["acquired"],
        false,
        "still held before its TTL"
    );
    h.advance(2);
    let g = get(&h, "job").await;
    assert_eq!(g["held"], false, "{g}");
    assert_eq!(g["holders"], json!([]));
    let b = acquire(&h, "job", "w2", 10, 1).await;
    assert_eq!(b["acquired"], true, "{b}");
    assert_eq!(b["slot"], 0);
    assert_ne!(token(&b), token(&a));
    // The lapsed holder has lost it.
    let r = one(
        &h,
        json!({"op": "renew", "name": "job", "token": token(&a), "ttlSeconds": 10}),
    )
    .await;
    assert_eq!(r["renewed"], false, "{r}");
    assert_eq!(r["reason"], "lost");
    assert_eq!(r["holders"], json!([{"slot": 0, "owner": "w2"}]));
    let r = one(
        &h,
        json!({"op": "release", "name": "job", "token": token(&a)}),
    )
    .await;
    assert_eq!(r["released"], false);
    assert_eq!(r["reason"], "lost");
    assert_eq!(get(&h, "job").await["holders"][0]["owner"], "w2");
}

// ---------------------------------------------------------------- get

#[tokio::test]
async fn get_lists_holders_with_slot_owner_token_since_expires_at_and_renewed_at() {
    let h = Harness::new().await;
    let g = get(&h, "pool").await;
    assert_eq!(g["held"], false, "{g}");
    assert_eq!(g["holders"], json!([]));

    let t_a = h.clock.now_micros();
    let a = acquire(&h, "pool", "a", 30, 2).await;
    h.advance(5);
    let t_b = h.clock.now_micros();
    let b = acquire(&h, "pool", "b", 60, 2).await;
    h.advance(5);
    let t_renew = h.clock.now_micros();
    let r = one(
        &h,
        json!({"op": "renew", "name": "pool", "token": token(&a), "ttlSeconds": 100}),
    )
    .await;

    let g = get(&h, "pool").await;
    assert_eq!(g["held"], true, "{g}");
    let mut holders = g["holders"].as_array().unwrap().clone();
    holders.sort_by_key(|x| x["slot"].as_u64());
    assert_eq!(holders.len(), 2, "{g}");
    let (ha, hb) = (&holders[0], &holders[1]);
    assert_eq!(ha["slot"], a["slot"]);
    assert_eq!(ha["owner"], "a");
    assert_eq!(ha["token"], r["token"], "the renewed token");
    assert_eq!(micros(&ha["since"]), t_a, "since: when it was acquired");
    assert_eq!(micros(&ha["renewedAt"]), t_renew);
    assert_eq!(micros(&ha["expiresAt"]), t_renew + 100 * SEC);
    assert_eq!(hb["slot"], b["slot"]);
    assert_eq!(hb["owner"], "b");
    assert_eq!(hb["token"], b["token"]);
    assert_eq!(micros(&hb["since"]), t_b);
    assert_eq!(micros(&hb["renewedAt"]), t_b);
    assert_eq!(micros(&hb["expiresAt"]), t_b + 60 * SEC);
}

// ---------------------------------------------------------------- the guard

#[tokio::test]
async fn the_guard_commits_a_transaction_while_the_lock_is_held() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w", 30, 1).await;
    let b = guarded_put(&h, &a["guard"], 1).await;
    assert_eq!(b["success"], true, "{b}");
    assert_eq!(b["results"][0]["op"], "check");
    assert_eq!(b["results"][0]["applied"], true);
    assert_eq!(b["results"][1]["applied"], true);
    assert_eq!(app_k(&h).await["value"], 1);
    // Still held after the check (it wrote nothing): the guard works again.
    h.advance(20);
    let b = guarded_put(&h, &a["guard"], 2).await;
    assert_eq!(b["success"], true, "{b}");
    assert_eq!(app_k(&h).await["value"], 2);
}

#[tokio::test]
async fn the_guard_rolls_a_transaction_back_after_the_lock_was_released() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w", 30, 1).await;
    assert_eq!(guarded_put(&h, &a["guard"], 1).await["success"], true);
    one(
        &h,
        json!({"op": "release", "name": "job", "token": token(&a)}),
    )
    .await;

    let b = guarded_put(&h, &a["guard"], 2).await;
    assert_eq!(b["success"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["failedIndex"], 0);
    assert_eq!(b["kvReason"], "absent");
    assert_eq!(b["results"], json!([]));
    assert_eq!(
        app_k(&h).await["value"],
        1,
        "the rolled-back put wrote nothing"
    );

    // Taken by someone else since: still refused.
    acquire(&h, "job", "other", 30, 1).await;
    let b = guarded_put(&h, &a["guard"], 3).await;
    assert_eq!(b["success"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["kvReason"], "version");
    assert_eq!(app_k(&h).await["value"], 1);
}

#[tokio::test]
async fn the_guard_rolls_a_transaction_back_after_the_lock_lapsed() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w", 10, 1).await;
    h.advance(11);
    let b = guarded_put(&h, &a["guard"], 1).await;
    assert_eq!(b["success"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["failedIndex"], 0);
    assert_eq!(b["results"], json!([]));
    assert_eq!(app_k(&h).await["found"], false, "nothing was written");
}

#[tokio::test]
async fn a_renewed_locks_old_guard_no_longer_commits() {
    let h = Harness::new().await;
    let a = acquire(&h, "job", "w", 30, 1).await;
    let r = one(
        &h,
        json!({"op": "renew", "name": "job", "token": token(&a), "ttlSeconds": 30}),
    )
    .await;
    let b = guarded_put(&h, &a["guard"], 1).await;
    assert_eq!(b["success"], false, "{b}");
    assert_eq!(b["reason"], "kv_precondition");
    assert_eq!(b["kvReason"], "version");
    assert_eq!(app_k(&h).await["found"], false);
    let b = guarded_put(&h, &r["guard"], 2).await;
    assert_eq!(b["success"], true, "{b}");
    assert_eq!(app_k(&h).await["value"], 2);
}
