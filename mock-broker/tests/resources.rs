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

    h.ack_msg(&p["messages"][0], "completed").await;
    assert_eq!(h.get(&path).await.1["status"], "completed");
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
