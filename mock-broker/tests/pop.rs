//! Pop: leases, groups, redelivery, long-poll, autoAck, subscriptions.

mod common;

use std::time::{Duration, Instant};

use common::{Harness, txns};
use serde_json::json;

async fn fill(h: &Harness, queue: &str, partition: &str, n: usize) {
    let items: Vec<_> = (0..n)
        .map(|i| json!({"queue": queue, "partition": partition, "transactionId": format!("m{i}"), "payload": i}))
        .collect();
    h.push(json!(items)).await;
}

#[tokio::test]
async fn one_live_lease_per_partition_and_group() {
    let h = Harness::new().await;
    fill(&h, "q", "p", 4).await;
    let first = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    assert_eq!(txns(&first), ["m0", "m1"]);
    assert!(!first["leaseId"].as_str().unwrap().is_empty());
    // Same group, same partition: leased, so nothing for a competitor.
    assert!(h.pop("/api/v1/pop/queue/q?batch=2").await.is_none());
    assert!(
        h.pop("/api/v1/pop/queue/q/partition/p?batch=2")
            .await
            .is_none()
    );
    // Another group is not blocked by that lease.
    let other = h
        .pop("/api/v1/pop/queue/q?batch=2&consumerGroup=audit&subscriptionMode=all")
        .await
        .unwrap();
    assert_eq!(txns(&other), ["m0", "m1"]);
}

#[tokio::test]
async fn named_groups_fan_out_and_queue_mode_competes() {
    let h = Harness::new().await;
    // Two partitions so two competing consumers can both work.
    fill(&h, "q", "p1", 2).await;
    fill(&h, "q", "p2", 2).await;
    let a = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    let b = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_ne!(
        a["partition"], b["partition"],
        "competing consumers split the partitions"
    );
    assert!(h.pop("/api/v1/pop/queue/q?batch=10").await.is_none());

    for g in ["g1", "g2"] {
        let mut seen = Vec::new();
        while let Some(p) = h
            .pop(&format!(
                "/api/v1/pop/queue/q?batch=10&consumerGroup={g}&subscriptionMode=all"
            ))
            .await
        {
            for m in p["messages"].as_array().unwrap() {
                seen.push(format!(
                    "{}/{}",
                    m["partition"].as_str().unwrap(),
                    m["transactionId"].as_str().unwrap()
                ));
                h.ack_msg(m, "completed").await;
            }
        }
        seen.sort();
        assert_eq!(
            seen,
            ["p1/m0", "p1/m1", "p2/m0", "p2/m1"],
            "group {g} sees every message"
        );
    }
}

#[tokio::test]
async fn an_expired_lease_redelivers_the_unacked_in_order_with_the_attempt_counted() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 30})).await;
    fill(&h, "q", "p", 4).await;
    let first = h.pop("/api/v1/pop/queue/q?batch=3").await.unwrap();
    assert_eq!(txns(&first), ["m0", "m1", "m2"]);
    // m1 is acked, which commits the cursor past m0 too (wire.md 4a); m2 is not.
    h.ack_msg(&first["messages"][1], "completed").await;
    h.advance(29);
    assert!(
        h.pop("/api/v1/pop/queue/q?batch=3").await.is_none(),
        "lease still live"
    );
    h.advance(1);
    let again = h.pop("/api/v1/pop/queue/q?batch=3").await.unwrap();
    assert_eq!(txns(&again), ["m2", "m3"], "m0 and m1 are done; order kept");
    let attempts: Vec<_> = again["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["deliveryAttempt"].clone())
        .collect();
    assert_eq!(attempts, [2, 1]);
    assert_ne!(again["leaseId"], first["leaseId"]);
}

#[tokio::test]
async fn lease_seconds_overrides_the_queue_lease_time() {
    let h = Harness::new().await;
    fill(&h, "q", "p", 1).await;
    h.pop("/api/v1/pop/queue/q?leaseSeconds=5").await.unwrap();
    h.advance(4);
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());
    h.advance(1);
    assert!(h.pop("/api/v1/pop/queue/q").await.is_some());
}

#[tokio::test]
async fn a_waiting_pop_is_woken_by_a_push() {
    let h = Harness::new().await;
    let url = h.url("/api/v1/pop/queue/late?wait=true&timeout=10000");
    let http = h.http.clone();
    let started = Instant::now();
    let waiter = tokio::spawn(async move { http.get(url).send().await.unwrap() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !waiter.is_finished(),
        "the pop waits while the queue is empty"
    );
    h.push_one("late", "p", "x", json!(1)).await;
    let res = waiter.await.unwrap();
    assert_eq!(res.status(), 200);
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(txns(&body), ["x"]);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "woken by the push, not the timeout"
    );
}

#[tokio::test]
async fn a_waiting_pop_times_out_empty() {
    let h = Harness::new().await;
    let started = Instant::now();
    assert!(
        h.pop("/api/v1/pop/queue/none?wait=true&timeout=400")
            .await
            .is_none()
    );
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(390), "{took:?}");
}

#[tokio::test]
async fn auto_ack_moves_the_cursor_at_delivery() {
    let h = Harness::new().await;
    fill(&h, "q", "p", 3).await;
    let p = h
        .pop("/api/v1/pop/queue/q?batch=2&autoAck=true")
        .await
        .unwrap();
    assert_eq!(p["leaseId"], "");
    assert_eq!(p["messages"][0]["leaseId"], "");
    // No lease was taken: the next pop goes straight on, and nothing is redelivered.
    let next = h.pop("/api/v1/pop/queue/q?batch=2").await.unwrap();
    assert_eq!(txns(&next), ["m2"]);
    assert_eq!(
        h.ack_msg(&next["messages"][0], "completed").await["success"],
        true
    );
    h.advance(3600);
    assert!(h.pop("/api/v1/pop/queue/q?batch=10").await.is_none());
}

#[tokio::test]
async fn a_new_named_group_sees_only_what_arrives_after_it_subscribed() {
    let h = Harness::new().await;
    fill(&h, "q", "p", 2).await;
    h.advance(1);
    assert!(
        h.pop("/api/v1/pop/queue/q?consumerGroup=late")
            .await
            .is_none()
    );
    h.advance(1);
    h.push_one("q", "p", "after", json!(1)).await;
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=late")
        .await
        .unwrap();
    assert_eq!(txns(&p), ["after"]);
    // subscriptionMode=all starts another group at the beginning.
    let all = h
        .pop("/api/v1/pop/queue/q?consumerGroup=all&subscriptionMode=all&batch=10")
        .await
        .unwrap();
    assert_eq!(txns(&all), ["m0", "m1", "after"]);
    // Queue mode always starts at the beginning.
    let qm = h.pop("/api/v1/pop/queue/q?batch=10").await.unwrap();
    assert_eq!(txns(&qm), ["m0", "m1", "after"]);
}

/// queen-mq 2.6.0 `tests/test_consume.py` (`test_consumer_group`, `test_retries`, …)
/// consumes with `subscription_mode("from_beginning")` and, under pop autopilot, sends
/// `autopilot=true` without a `batch`: both are accepted, on every pop route.
#[tokio::test]
async fn from_beginning_is_all_and_autopilot_is_accepted_on_every_pop_route() {
    let h = Harness::new().await;
    fill(&h, "q", "p", 2).await;
    h.advance(1);
    for (group, path) in [
        ("a", "/api/v1/pop/queue/q"),
        ("b", "/api/v1/pop/queue/q/partition/p"),
    ] {
        let p = h
            .pop(&format!(
                "{path}?autopilot=true&wait=false&timeout=30000&consumerGroup={group}&subscriptionMode=from_beginning"
            ))
            .await
            .unwrap_or_else(|| panic!("{path}: nothing delivered"));
        assert_eq!(txns(&p), ["m0", "m1"], "{path}: from the beginning");
    }
    // The discovery route too (the queue's namespace).
    let (s, _) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "orders", "namespace": "shop"}),
        )
        .await;
    assert_eq!(s, 200);
    h.push_one("orders", "p", "o0", json!(1)).await;
    h.advance(1);
    let p = h
        .pop("/api/v1/pop?namespace=shop&consumerGroup=c&subscriptionMode=from_beginning&autopilot=true")
        .await
        .unwrap();
    assert_eq!(txns(&p), ["o0"]);
    // Queue mode ignores the hint, as it does `all`.
    let qm = h
        .pop("/api/v1/pop/queue/q?subscriptionMode=from_beginning&autopilot=true&batch=10")
        .await
        .unwrap();
    assert_eq!(txns(&qm), ["m0", "m1"]);
    // The alias is exact: other spellings are still refused, as is a non-boolean autopilot.
    for bad in [
        "subscriptionMode=FROM_BEGINNING",
        "subscriptionMode=beginning",
        "autopilot=yes",
    ] {
        let (status, body) = h.get(&format!("/api/v1/pop/queue/q?{bad}")).await;
        assert_eq!(status, 400, "{bad}: {body}");
        assert_eq!(body["code"], "bad_request", "{bad}: {body}");
    }
}

#[tokio::test]
async fn subscription_from_a_time_starts_there() {
    let h = Harness::new().await;
    h.push_one("q", "p", "old", json!(1)).await;
    h.advance(10);
    let cut = queen_mock_broker::clock::format_iso(queen_mock_broker::Clock::now_micros(&h.clock));
    h.push_one("q", "p", "new", json!(2)).await;
    let p = h
        .pop(&format!(
            "/api/v1/pop/queue/q?consumerGroup=g&subscriptionFrom={cut}"
        ))
        .await
        .unwrap();
    assert_eq!(txns(&p), ["new"]);
}

#[tokio::test]
async fn several_partitions_can_be_claimed_under_one_lease() {
    let h = Harness::new().await;
    for p in ["a", "b", "c"] {
        fill(&h, "q", p, 2).await;
    }
    let p = h
        .pop("/api/v1/pop/queue/q?batch=5&partitions=3")
        .await
        .unwrap();
    assert_eq!(p["partitionsClaimed"], 3);
    let msgs = p["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 5, "batch is shared across the claims");
    let lease = p["leaseId"].clone();
    assert!(msgs.iter().all(|m| m["leaseId"] == lease));
    // Every claimed partition is leased: nothing left for a competitor but the unclaimed rest.
    assert!(h.pop("/api/v1/pop/queue/q?batch=5").await.is_none());
    // Extending the one lease renews every claim.
    let (s, ext) = h
        .post(
            &format!("/api/v1/lease/{}/extend", lease.as_str().unwrap()),
            json!({"seconds": 10}),
        )
        .await;
    assert_eq!(s, 200);
    assert_eq!(ext["renewed"], 3, "{ext}");
}

#[tokio::test]
async fn discovery_pops_by_namespace_and_task() {
    let h = Harness::new().await;
    let (s, _) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "billing-in", "namespace": "billing", "task": "invoice"}),
        )
        .await;
    assert_eq!(s, 200);
    h.push_one("billing-in", "p", "x", json!(1)).await;
    h.push_one("other", "p", "y", json!(1)).await;
    assert!(h.pop("/api/v1/pop?namespace=shipping").await.is_none());
    let p = h
        .pop("/api/v1/pop?namespace=billing&task=invoice")
        .await
        .unwrap();
    assert_eq!(p["queue"], "billing-in");
    assert_eq!(txns(&p), ["x"]);
}

#[tokio::test]
async fn a_pop_of_an_unknown_queue_or_partition_is_empty() {
    let h = Harness::new().await;
    assert!(h.pop("/api/v1/pop/queue/nothing").await.is_none());
    h.push_one("q", "p", "x", json!(1)).await;
    assert!(h.pop("/api/v1/pop/queue/q/partition/nope").await.is_none());
}

/// Leases and long-polls are bounded whatever a caller asks (`--max-lease`,
/// `--max-wait`): a pop's `leaseSeconds` of a year, a queue's `leaseTime` of a year and
/// a lease extension of a year each get the broker's longest lease, and a long-poll of
/// an hour answers empty after the longest wait. A read-write token could otherwise
/// hold a partition for a year, or a connection for an hour.
#[tokio::test]
async fn leases_and_long_polls_are_clamped_to_the_brokers_bounds() {
    let clock = queen_mock_broker::ManualClock::new();
    let broker = queen_mock_broker::MockBroker::builder()
        .clock(clock.clone())
        .max_lease(Duration::from_secs(120))
        .max_wait(Duration::from_millis(300))
        .start()
        .await
        .unwrap();
    let h = Harness::with(broker, clock);
    let now = || queen_mock_broker::Clock::now_micros(&h.clock);
    let held_until = |queue: &str| {
        h.broker
            .inspect()
            .cursor(queue, "p", "__QUEUE_MODE__")
            .unwrap()
            .and_then(|c| c.lease_expires_at)
            .unwrap_or_else(|| panic!("{queue}: no lease"))
    };
    const YEAR: i64 = 31_536_000;

    fill(&h, "asks", "p", 1).await;
    let pop = h
        .pop(&format!("/api/v1/pop/queue/asks?leaseSeconds={YEAR}"))
        .await
        .unwrap();
    assert_eq!(held_until("asks"), now() + 120_000_000, "{pop}");
    // An extension of a year: the same bound, from now.
    h.advance(10);
    let lease = pop["leaseId"].as_str().unwrap();
    let (s, ext) = h
        .post(
            &format!("/api/v1/lease/{lease}/extend"),
            json!({"seconds": YEAR}),
        )
        .await;
    assert_eq!(s, 200, "{ext}");
    let at = ext["expiresAt"].as_str().unwrap_or_else(|| panic!("{ext}"));
    assert_eq!(
        queen_mock_broker::clock::parse_iso(at),
        Some(now() + 120_000_000),
        "{ext}"
    );
    assert_eq!(held_until("asks"), now() + 120_000_000);

    h.configure("long", json!({"leaseTime": YEAR})).await;
    fill(&h, "long", "p", 1).await;
    assert!(h.pop("/api/v1/pop/queue/long").await.is_some());
    assert_eq!(held_until("long"), now() + 120_000_000);

    // A long-poll of an hour on an empty queue ends after the longest wait.
    let started = Instant::now();
    let res = h
        .http
        .get(h.url("/api/v1/pop/queue/empty?wait=true&timeout=3600000"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(10),
        "{waited:?}"
    );
    h.broker.shutdown().await;
}

/// A pop's messages are charged to the broker's answer budget as it claims them (issue
/// 52, item 4): with the budget spent, it delivers fewer than its batch and leases only
/// those, so acking them frees the partition at once and the rest come next, first
/// delivery, nothing skipped.
#[tokio::test]
async fn a_pop_over_the_answer_budget_delivers_and_leases_only_what_fits() {
    let h = Harness::with_answer_budget(3 << 20).await;
    // Six messages of 1 MiB: each costs twice its size in the budget, so about one fits.
    h.push_mib("q", "p", 6).await;
    let mut seen = Vec::new();
    let mut rounds = 0;
    while seen.len() < 6 {
        let got = h
            .pop("/api/v1/pop/queue/q?batch=10")
            .await
            .expect("the rest is not leased: a pop after the acks gets it");
        let names = txns(&got);
        assert!(!names.is_empty() && names.len() < 6, "{names:?}");
        for m in got["messages"].as_array().unwrap() {
            assert_eq!(m["deliveryAttempt"], 1, "never delivered before");
            assert_eq!(h.ack_msg(m, "completed").await["success"], true);
        }
        seen.extend(names);
        rounds += 1;
    }
    let all: Vec<_> = (0..6).map(|i| format!("m{i}")).collect();
    assert_eq!(seen, all, "in order, none skipped, none twice");
    assert!(rounds >= 2, "{rounds} rounds");
    assert!(h.pop("/api/v1/pop/queue/q").await.is_none());

    // A budget smaller than one message: it comes alone, every time, and autoAck
    // commits only what was answered.
    let h = Harness::with_answer_budget(256 << 10).await;
    h.push_mib("q", "p", 3).await;
    for i in 0..3 {
        let got = h.pop("/api/v1/pop/queue/q?batch=10&autoAck=true").await;
        assert_eq!(
            txns(&got.unwrap()),
            [format!("m{i}")],
            "alone, room came back"
        );
    }
    assert!(h.pop("/api/v1/pop/queue/q?autoAck=true").await.is_none());
}
