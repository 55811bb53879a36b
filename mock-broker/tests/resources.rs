//! Operator reads: the queue list, a queue's partitions and figures, a message's detail.

mod common;

use common::Harness;
use serde_json::{Value, json};

#[tokio::test]
async fn a_pushed_dotted_queue_is_listed_with_its_derived_namespace_and_task_and_discoverable() {
    let h = Harness::new().await;
    h.push_one("billing.invoices.q", "p", "t1", json!(1)).await;
    h.push_one("plain", "p", "t2", json!(2)).await;
    let (s, b) = h.get("/api/v1/resources/queues").await;
    assert_eq!(s, 200, "{b}");
    let rows = b["queues"].as_array().unwrap();
    let row = |name: &str| rows.iter().find(|r| r["name"] == name).cloned().unwrap();
    let dotted = row("billing.invoices.q");
    assert_eq!(
        (dotted["namespace"].clone(), dotted["task"].clone()),
        (json!("billing"), json!("invoices"))
    );
    assert_eq!(row("plain")["namespace"], Value::Null);
    for key in [
        "id",
        "partitions",
        "messages",
        "segments",
        "retainedBytes",
        "createdAt",
    ] {
        assert!(dotted.get(key).is_some(), "{key}: {dotted}");
    }
    assert_eq!(dotted["messages"]["total"], 1);
    assert_eq!(dotted["segments"]["messages"], 1);
    assert!(dotted["retainedBytes"].as_u64().unwrap() > 0);
    let p = h
        .pop("/api/v1/pop?namespace=billing&batch=5")
        .await
        .unwrap();
    assert_eq!(p["messages"][0]["transactionId"], "t1");
}

#[tokio::test]
async fn a_queue_detail_counts_what_its_slowest_group_has_done() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryLimit": 0})).await;
    for i in 0..5 {
        h.push_one("q", "a", &format!("a{i}"), json!(i)).await;
    }
    h.push_one("q", "b", "b0", json!(0)).await;
    // On a: m0 and m1 completed, m2 dead-lettered (retryLimit 0), m3 leased, m4 pending.
    let p = h
        .pop("/api/v1/pop/queue/q/partition/a?batch=2")
        .await
        .unwrap();
    h.ack_msg(&p["messages"][1], "completed").await;
    let p = h
        .pop("/api/v1/pop/queue/q/partition/a?batch=1")
        .await
        .unwrap();
    assert_eq!(h.ack_msg(&p["messages"][0], "failed").await["dlq"], true);
    h.pop("/api/v1/pop/queue/q/partition/a?batch=1")
        .await
        .unwrap();

    let (s, d) = h.get("/api/v1/resources/queues/q").await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["name"], "q");
    let parts = d["partitions"].as_array().unwrap();
    let a = parts.iter().find(|p| p["name"] == "a").unwrap();
    assert_eq!(
        a["stats"],
        json!({"total": 5, "pending": 1, "processing": 1, "completed": 3, "deadLetter": 1}),
        "{a}"
    );
    let b = parts.iter().find(|p| p["name"] == "b").unwrap();
    assert_eq!(b["stats"]["pending"], 1, "nobody read b: {b}");
    assert_eq!(b["stats"]["completed"], 0);
    assert_eq!(d["totals"]["total"], 6);
    assert_eq!(d["config"]["retryLimit"], 0);
    let (s, e) = h.get("/api/v1/resources/queues/nope").await;
    assert_eq!((s.as_u16(), e["code"].clone()), (404, json!("not_found")));
}

#[tokio::test]
async fn a_dead_lettered_message_keeps_its_failures_in_its_detail() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 30, "retryLimit": 1}))
        .await;
    h.push_one("q", "p", "m0", json!({"poison": true})).await;
    let mut pid = String::new();
    for _ in 0..2 {
        let p = h.pop("/api/v1/pop/queue/q").await.unwrap();
        pid = p["partitionId"].as_str().unwrap().to_string();
        h.ack_msg(&p["messages"][0], "failed").await;
    }
    let (_, dlq) = h.get("/api/v1/dlq?queue=q").await;
    assert_eq!(dlq["total"], 1, "{dlq}");
    let retries = dlq["messages"][0]["retryCount"].clone();
    assert_eq!(retries, 2, "{dlq}");

    // The cursor has passed it, so its pending entry is gone: the counts come from
    // its dead-letter row and agree with the DLQ listing.
    let (s, d) = h.get(&format!("/api/v1/messages/{pid}/m0")).await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["status"], "dead_letter", "{d}");
    assert_eq!(d["retryCount"], retries, "{d}");
    let g = &d["consumerGroups"][0];
    assert_eq!(
        (&g["failures"], &g["deliveryAttempts"]),
        (&json!(2), &json!(2)),
        "{d}"
    );
}

#[tokio::test]
async fn a_message_detail_says_where_it_stands_for_each_group() {
    let h = Harness::new().await;
    h.configure("q", json!({"leaseTime": 30})).await;
    h.push_one("q", "p", "m0", json!({"n": 1})).await;
    let p = h
        .pop("/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all")
        .await
        .unwrap();
    let pid = p["partitionId"].as_str().unwrap().to_string();
    let path = format!("/api/v1/messages/{pid}/m0");
    let (s, d) = h.get(&path).await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["status"], "processing");
    assert_eq!(
        (d["data"].clone(), d["payload"].clone()),
        (json!({"n": 1}), json!({"n": 1}))
    );
    assert_eq!(d["queuePath"], "q/p");
    assert_eq!(d["queueConfig"]["leaseTime"], 30);
    let groups = d["consumerGroups"].as_array().unwrap();
    assert_eq!(groups[0]["name"], "g");
    assert_eq!(groups[0]["leaseId"], p["leaseId"]);
    assert_eq!(groups[0]["consumed"], false, "leased, not committed");

    h.ack_msg(&p["messages"][0], "completed").await;
    let (_, d) = h.get(&path).await;
    assert_eq!(d["status"], "completed");
    assert_eq!(d["consumerGroups"][0]["consumed"], true, "{d}");
    // A group that subscribes later in `new` mode starts past it: nothing to do there.
    h.advance(1);
    h.pop("/api/v1/pop/queue/q?consumerGroup=late&subscriptionMode=new")
        .await;
    let (_, d) = h.get(&path).await;
    assert_eq!(d["status"], "completed", "{d}");
    assert_eq!(d["consumerGroups"][1]["name"], "late");
    assert_eq!(d["consumerGroups"][1]["cursor"], 1);
    // One that reads everything has it pending until it pops it.
    h.pop("/api/v1/pop/queue/q/partition/other?consumerGroup=all&subscriptionMode=all")
        .await;
    h.push_one("q", "p", "m1", json!(2)).await;
    let (_, d) = h.get(&path).await;
    assert_eq!(
        d["status"], "completed",
        "a group without a row on p is not counted: {d}"
    );

    for bad in [
        format!("/api/v1/messages/{pid}/nope"),
        "/api/v1/messages/x/m0".to_string(),
    ] {
        let (s, e) = h.get(&bad).await;
        assert_eq!(
            (s.as_u16(), e["code"].clone()),
            (404, json!("not_found")),
            "{bad}"
        );
    }
}

/// queen-mq 2.6.0 `tests/test_pop.py`
/// `test_pop_with_commit_on_delivery_is_committed_at_delivery`: a pop with
/// `autoAck=true` holds no lease and commits at delivery, so the message detail's one
/// group row reads `consumed: true` with no lease; a message not yet popped, or popped
/// under a lease, is not consumed.
#[tokio::test]
async fn a_message_popped_with_auto_ack_is_consumed_in_its_detail() {
    let h = Harness::new().await;
    h.push_one("q", "p", "m0", json!({"message": "Hello"}))
        .await;
    h.push_one("q", "p", "m1", json!(2)).await;
    let p = h
        .pop("/api/v1/pop/queue/q?batch=1&wait=true&timeout=30000&autoAck=true")
        .await
        .unwrap();
    assert_eq!(p["messages"][0]["leaseId"], "", "no lease: {p}");
    let pid = p["messages"][0]["partitionId"]
        .as_str()
        .unwrap()
        .to_string();
    let (s, d) = h.get(&format!("/api/v1/messages/{pid}/m0")).await;
    assert_eq!(s, 200, "{d}");
    let groups = d["consumerGroups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{d}");
    assert_eq!(groups[0]["consumed"], true, "committed at delivery: {d}");
    assert_eq!(groups[0]["leaseExpiresAt"], Value::Null, "{d}");
    assert_eq!(groups[0]["status"], "completed", "{d}");

    let (_, d) = h.get(&format!("/api/v1/messages/{pid}/m1")).await;
    assert_eq!(
        d["consumerGroups"][0]["consumed"], false,
        "not popped yet: {d}"
    );
    h.pop("/api/v1/pop/queue/q?batch=1").await.unwrap();
    let (_, d) = h.get(&format!("/api/v1/messages/{pid}/m1")).await;
    assert_eq!(d["consumerGroups"][0]["consumed"], false, "leased: {d}");
    assert!(d["consumerGroups"][0]["leaseExpiresAt"].is_string(), "{d}");
}

#[tokio::test]
async fn a_queues_depth_is_its_backlog_by_group_and_by_slowest_group() {
    let h = Harness::new().await;
    for i in 0..3 {
        h.push_one("q", "a", &format!("a{i}"), json!(i)).await;
    }
    h.push_one("q", "b", "b0", json!(0)).await;
    let p = h
        .pop("/api/v1/pop/queue/q/partition/a?batch=2&consumerGroup=fast&subscriptionMode=all")
        .await
        .unwrap();
    h.ack_msg(&p["messages"][1], "completed").await;
    let (s, d) = h.get("/api/v1/resources/queues/q/depth?group=fast").await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(
        d["pending"], 2,
        "a2 on a, b0 on b (no cursor there: all of it): {d}"
    );
    assert_eq!(d["partitionsPending"], 2);
    assert_eq!(d["effectivePending"], d["pending"]);
    assert_eq!(d["conflation"], false);
    assert_eq!(
        d["partitions"],
        json!([{"partition": "a", "pending": 1}, {"partition": "b", "pending": 1}])
    );
    // Queue level: the slowest reader; nobody read b, so all of it.
    let (_, all) = h.get("/api/v1/resources/queues/q/depth").await;
    assert_eq!(
        (all["pending"].clone(), all["group"].clone()),
        (json!(2), Value::Null)
    );
    let (_, other) = h.get("/api/v1/resources/queues/q/depth?group=never").await;
    assert_eq!(
        other["pending"], 4,
        "a group with no cursor owes everything"
    );
    let (s, b) = h.get("/api/v1/resources/queues/nope/depth").await;
    assert_eq!((s.as_u16(), b["code"].clone()), (404, json!("not_found")));
}

#[tokio::test]
async fn the_partitions_resource_ranks_by_pending_with_lag() {
    let h = Harness::new().await;
    for i in 0..3 {
        h.push_one("q", "busy", &format!("b{i}"), json!(i)).await;
    }
    h.push_one("q", "quiet", "q0", json!(0)).await;
    h.push_one("other", "x", "x0", json!(0)).await;
    h.advance(5);
    let (s, b) = h.get("/api/v1/resources/partitions?queue=q").await;
    assert_eq!(s, 200, "{b}");
    let rows = b["partitions"].as_array().unwrap();
    assert_eq!(rows.len(), 2, "{b}");
    assert_eq!(
        (rows[0]["partition"].clone(), rows[0]["pending"].clone()),
        (json!("busy"), json!(3))
    );
    assert_eq!(rows[0]["lagSeconds"], 5);
    assert_eq!(rows[1]["partition"], "quiet");
    assert!(
        rows.iter()
            .all(|r| r["queue"] == "q" && r["id"].is_string() && r["processing"] == 0)
    );
    let (_, all) = h.get("/api/v1/resources/partitions?limit=1").await;
    assert_eq!(all["partitions"].as_array().unwrap().len(), 1);
    let (s, _) = h.get("/api/v1/resources/partitions?limit=zero").await;
    assert_eq!(s, 400);
    // Caught up: no lag.
    let p = h.pop("/api/v1/pop/queue/q/partition/quiet").await.unwrap();
    h.ack_msg(&p["messages"][0], "completed").await;
    let (_, b) = h.get("/api/v1/resources/partitions?queue=q").await;
    assert_eq!(b["partitions"][1]["lagSeconds"], Value::Null, "{b}");
}

#[tokio::test]
async fn namespaces_and_tasks_are_listed_from_configure_and_dotted_names() {
    let h = Harness::new().await;
    let (s, b) = h
        .post(
            "/api/v1/configure",
            json!({"queue": "given", "namespace": "crm", "task": "sync"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    h.push_one("crm.import.q", "p", "t", json!(1)).await;
    h.push_one("plain", "p", "t", json!(1)).await;
    let (_, ns) = h.get("/api/v1/resources/namespaces").await;
    assert_eq!(
        ns["namespaces"],
        json!([{"namespace": "crm", "queues": 2, "partitions": 1, "messages": {"total": 1, "pending": 1}}])
    );
    let (_, tasks) = h.get("/api/v1/resources/tasks").await;
    let names: Vec<&str> = tasks["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["import", "sync"]);
}
