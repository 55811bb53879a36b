//! Status, analytics and stats: the figures operators' dashboards read, counted from
//! the broker's own state and traffic (issue 16). Keys are those the official client's
//! live tests read (`admin.rs`, `coverage.rs` of `queen-mq` 2.7.0).

mod common;

use common::Harness;
use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role};
use queen_mock_broker::clock::{Clock, format_iso};
use serde_json::{Value, json};

/// Two partitions of `q`, three messages; a group pops two, completes one and nacks one.
async fn traffic(h: &Harness) {
    h.configure("q", json!({"retryLimit": 5})).await;
    h.push_one("q", "a", "a0", json!(0)).await;
    h.push_one("q", "a", "a1", json!(1)).await;
    h.push_one("q", "b", "b0", json!(2)).await;
    let p = h
        .pop("/api/v1/pop/queue/q/partition/a?batch=2&consumerGroup=g&subscriptionMode=all")
        .await
        .unwrap();
    h.ack_msg(&p["messages"][0], "completed").await;
    h.ack_msg(&p["messages"][1], "failed").await;
}

#[tokio::test]
async fn status_counts_stored_messages_and_the_traffic_of_its_range() {
    let h = Harness::new().await;
    traffic(&h).await;
    let (s, b) = h.get("/api/v1/status").await;
    assert_eq!(s, 200, "{b}");
    assert!(b["timeRange"]["from"].is_string(), "{b}");
    for key in ["bucketMinutes", "pointCount", "statsAge"] {
        assert!(b[key].is_i64(), "{key}: {b}");
    }
    assert_eq!(b["messages"]["total"], 3, "{b}");
    assert_eq!(b["messages"]["requests"]["push"], 3);
    assert_eq!(b["messages"]["requests"]["pop"], 1);
    assert_eq!(b["messages"]["requests"]["ack"], 2);
    assert_eq!(b["messages"]["failed"], 1, "the nack: {b}");
    assert_eq!(b["errors"]["ackFailed"], 1);
    assert_eq!(b["leases"]["totalAcked"], 1);
    let series = b["throughput"].as_array().unwrap();
    assert_eq!(series.len() as i64, b["pointCount"].as_i64().unwrap());
    let sum = |k: &str| series.iter().map(|p| p[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(
        (sum("ingested"), sum("popMessages"), sum("processed")),
        (3, 2, 1)
    );
    assert_eq!(b["queues"][0]["name"], "q");
    assert_eq!(b["queues"][0]["partitions"], 2);
    assert_eq!(b["queues"][0]["totalConsumed"], 1, "g committed a0: {b}");
    assert_eq!(b["workers"].as_array().unwrap().len(), 1);
    for key in ["leases", "deadLetterQueue", "errors"] {
        assert!(b[key].is_object(), "{key}: {b}");
    }
    // A filter that matches nothing counts nothing stored.
    let (_, none) = h.get("/api/v1/status?queue=nope").await;
    assert_eq!(none["messages"]["total"], 0, "{none}");
    assert_eq!(none["queues"], json!([]));
}

#[tokio::test]
async fn status_refuses_a_range_it_cannot_read() {
    let h = Harness::new().await;
    for q in [
        "from=yesterday",
        "to=1",
        "from=2026-01-02T00:00:00Z&to=2026-01-01T00:00:00Z",
    ] {
        let (s, b) = h.get(&format!("/api/v1/status?{q}")).await;
        assert_eq!(s, 400, "{q}: {b}");
        assert_eq!(b["code"], "bad_request", "{b}");
    }
    let (s, b) = h.get("/api/v1/status/analytics?interval=week").await;
    assert_eq!((s.as_u16(), b["code"].clone()), (400, json!("bad_request")));
    let (s, _) = h
        .get("/api/v1/status/analytics?interval=minute&from=2020-01-01T00:00:00Z")
        .await;
    assert_eq!(s, 400, "years of minutes is too many points");
    let (s, _) = h.get("/api/v1/status/queues?limit=0").await;
    assert_eq!(s, 400);
}

#[tokio::test]
async fn analytics_buckets_pushes_by_interval() {
    let h = Harness::new().await;
    let start = h.clock.now_micros();
    h.push_one("q", "p", "t0", json!(0)).await;
    h.advance(120);
    h.push_one("q", "p", "t1", json!(1)).await;
    h.push_one("other", "p", "t2", json!(2)).await;
    let from = format_iso(start - 60_000_000);
    let to = format_iso(h.clock.now_micros());
    let (s, b) = h
        .get(&format!(
            "/api/v1/status/analytics?interval=minute&from={from}&to={to}"
        ))
        .await;
    assert_eq!(s, 200, "{b}");
    for key in ["interval", "from", "to"] {
        assert!(b[key].is_string(), "{key}: {b}");
    }
    let counts: Vec<u64> = b["dataPoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["messages"].as_u64().unwrap())
        .collect();
    assert_eq!(counts.iter().sum::<u64>(), 3, "{counts:?}");
    assert!(counts.len() >= 3, "every minute of the range: {counts:?}");
    assert_eq!(*counts.last().unwrap(), 2, "the last minute's two pushes");
    let (_, one) = h
        .get(&format!(
            "/api/v1/status/analytics?interval=hour&queue=q&from={from}&to={to}"
        ))
        .await;
    let total: u64 = one["dataPoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["messages"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 2, "queue= narrows to q: {one}");
}

#[tokio::test]
async fn a_status_queue_detail_carries_its_config_and_a_missing_one_is_404() {
    let h = Harness::new().await;
    h.configure("q", json!({"retryDelay": 2500, "ttl": 4242}))
        .await;
    h.push_one("q", "p", "t", json!(1)).await;
    let (s, d) = h.get("/api/v1/status/queues/q").await;
    assert_eq!(s, 200, "{d}");
    assert_eq!(d["queue"]["config"]["retryDelay"], 2500, "{d}");
    assert_eq!(d["queue"]["config"]["ttl"], 4242);
    assert_eq!(d["queue"]["name"], "q");
    assert_eq!(d["partitions"][0]["messages"]["pending"], 1);
    assert_eq!(d["totals"]["messages"]["total"], 1);
    assert_eq!(d["totals"]["total"], 1);
    let (s, b) = h.get("/api/v1/status/queues/nope").await;
    assert_eq!((s.as_u16(), b["code"].clone()), (404, json!("not_found")));
}

/// A queue's detail carries a page of its partitions, 1,000 by default, however many
/// it has (issue 52: 100,000 partitions made one answer 43 MB); its totals and
/// `partitionsTotal` count them all, and `limit`/`offset` page on. Both details, the
/// status one and the resources one, page alike.
/// The listings of every queue and every group answer all of them by default, as
/// Queen 2 does (ignoring `limit`, as it does), and a page when asked with `pageSize`
/// and `pageOffset` (issue 52, item 4): a page's rows in the listing's order, `total`
/// counting them all; bad page parameters are 400.
#[tokio::test]
async fn the_listings_of_queues_and_groups_page_when_asked() {
    let h = Harness::new().await;
    for q in ["q0", "q1", "q2", "q3", "q4"] {
        h.push_one(q, "p", &format!("{q}-1"), json!(1)).await;
        for g in ["ga", "gb"] {
            h.pop(&format!(
                "/api/v1/pop/queue/{q}?consumerGroup={g}&subscriptionMode=all&autoAck=true"
            ))
            .await;
        }
    }
    let names = |rows: &Value, key: &str| -> Vec<String> {
        rows.as_array()
            .unwrap()
            .iter()
            .map(|r| r[key].as_str().unwrap().to_string())
            .collect()
    };

    let (s, all) = h.get("/api/v1/resources/queues").await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(
        names(&all["queues"], "name"),
        ["q0", "q1", "q2", "q3", "q4"]
    );
    assert_eq!(all["total"], 5);
    assert!(
        all.get("pagination").is_none(),
        "unpaged, as Queen 2: {all}"
    );
    let (_, limited) = h.get("/api/v1/resources/queues?limit=2").await;
    assert_eq!(
        limited["queues"], all["queues"],
        "`limit` is not ours to read"
    );
    assert_eq!(
        all["queues"][0]["partitions"], 1,
        "the count, without the rows"
    );
    let (s, page) = h
        .get("/api/v1/resources/queues?pageSize=2&pageOffset=1")
        .await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(names(&page["queues"], "name"), ["q1", "q2"]);
    assert_eq!(page["total"], 5);
    assert_eq!(page["pagination"], json!({"limit": 2, "offset": 1}));
    let (_, last) = h.get("/api/v1/resources/queues?pageOffset=4&limit=1").await;
    assert_eq!(names(&last["queues"], "name"), ["q4"]);

    let (s, groups) = h.get("/api/v1/consumer-groups").await;
    assert_eq!(s, 200, "{groups}");
    let rows = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{}/{}",
                    r["name"].as_str().unwrap(),
                    r["queueName"].as_str().unwrap()
                )
            })
            .collect()
    };
    let every = rows(&groups);
    assert_eq!(every.len(), 10, "{groups}");
    let (s, page) = h
        .get("/api/v1/consumer-groups?pageSize=3&pageOffset=4")
        .await;
    assert_eq!(s, 200, "{page}");
    assert_eq!(rows(&page), every[4..7], "a page of the same order");
    let (_, tail) = h
        .get("/api/v1/consumer-groups?pageSize=3&pageOffset=9")
        .await;
    assert_eq!(rows(&tail), every[9..], "a short page is the last");

    for route in ["/api/v1/resources/queues", "/api/v1/consumer-groups"] {
        for bad in [
            "pageSize=0",
            "pageSize=10001",
            "pageOffset=-1",
            "pageSize=many",
        ] {
            let (s, b) = h.get(&format!("{route}?{bad}")).await;
            assert_eq!(s, 400, "{route}?{bad}: {b}");
            assert_eq!(b["code"], "bad_request", "{route}?{bad}: {b}");
        }
        // Queen 2 ignores `limit` here, and the official client's tests send it.
        let (s, whole) = h.get(&format!("{route}?limit=2&offset=3")).await;
        assert_eq!(s, 200, "{whole}");
        let rows = whole.get("queues").unwrap_or(&whole);
        assert_eq!(
            rows.as_array().unwrap().len(),
            if route.contains("groups") { 10 } else { 5 },
            "{route}: every row"
        );
    }
}

#[tokio::test]
async fn a_queue_detail_pages_its_partitions_and_counts_them_all() {
    let h = Harness::new().await;
    let items: Vec<Value> = (0..1_005)
        .map(|i| json!({"queue": "wide", "partition": format!("p{i:04}"), "payload": i}))
        .collect();
    h.push(Value::Array(items)).await;
    for route in [
        "/api/v1/status/queues/wide",
        "/api/v1/resources/queues/wide",
    ] {
        let (s, d) = h.get(route).await;
        assert_eq!(s, 200, "{d}");
        let names = |d: &Value| -> Vec<String> {
            d["partitions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["name"].as_str().unwrap().to_string())
                .collect()
        };
        let first = names(&d);
        assert_eq!(first.len(), 1_000, "{route}: the default page");
        assert_eq!((first[0].as_str(), first[999].as_str()), ("p0000", "p0999"));
        assert_eq!(d["partitionsTotal"], 1_005, "{route}");
        assert_eq!(
            d["pagination"],
            json!({"limit": 1000, "offset": 0}),
            "{route}"
        );
        assert_eq!(
            d["totals"]["total"], 1_005,
            "{route}: totals count every partition"
        );

        let (_, rest) = h.get(&format!("{route}?offset=1000")).await;
        assert_eq!(
            names(&rest),
            ["p1000", "p1001", "p1002", "p1003", "p1004"],
            "{route}"
        );
        assert_eq!(rest["totals"]["total"], 1_005, "{route}");
        let (_, two) = h.get(&format!("{route}?limit=2&offset=3")).await;
        assert_eq!(names(&two), ["p0003", "p0004"], "{route}");
        assert_eq!(
            two["pagination"],
            json!({"limit": 2, "offset": 3}),
            "{route}"
        );
        for bad in ["limit=0", "limit=10001", "offset=-1", "limit=many"] {
            let (s, b) = h.get(&format!("{route}?{bad}")).await;
            assert_eq!(
                (s.as_u16(), b["code"].clone()),
                (400, json!("bad_request")),
                "{route}?{bad}: {b}"
            );
        }
    }
}

#[tokio::test]
async fn status_queues_filter_and_page() {
    let h = Harness::new().await;
    for q in [
        "shop.orders.in",
        "shop.orders.out",
        "shop.mail.out",
        "plain",
    ] {
        h.push_one(q, "p", "t", json!(1)).await;
    }
    let (_, b) = h
        .get("/api/v1/status/queues?namespace=shop&task=orders")
        .await;
    let names: Vec<&str> = b["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["shop.orders.in", "shop.orders.out"]);
    let (_, page) = h.get("/api/v1/status/queues?limit=2&offset=2").await;
    assert_eq!(page["queues"].as_array().unwrap().len(), 2);
    assert_eq!(page["total"], 4);
    assert_eq!(page["pagination"], json!({"limit": 2, "offset": 2}));
}

#[tokio::test]
async fn the_overview_reports_counts_and_backlog_age() {
    let h = Harness::new().await;
    h.push_one("ns.task.q", "a", "t0", json!(0)).await;
    h.push_one("ns.task.q", "b", "t1", json!(1)).await;
    h.advance(30);
    let (s, o) = h.get("/api/v1/resources/overview").await;
    assert_eq!(s, 200, "{o}");
    assert_eq!(
        (
            o["queues"].clone(),
            o["partitions"].clone(),
            o["namespaces"].clone(),
            o["tasks"].clone()
        ),
        (json!(1), json!(2), json!(1), json!(1))
    );
    assert_eq!(o["messages"]["pending"], 2);
    assert_eq!(
        o["lag"]["time"]["max"], 30.0,
        "the oldest unread message is 30 s old: {o}"
    );
    assert_eq!(o["lag"]["offset"]["max"], 1.0);
    assert!(o["throughput"]["ingestedPerSecond"].is_number());
}

#[tokio::test]
async fn worker_and_system_metrics_report_this_broker() {
    let h = Harness::new().await;
    traffic(&h).await;
    let (s, w) = h.get("/api/v1/analytics/worker-metrics").await;
    assert_eq!(s, 200, "{w}");
    assert_eq!(w["summary"]["totalPushMessages"], 3, "{w}");
    assert_eq!(w["summary"]["totalPopMessages"], 2);
    assert_eq!(w["summary"]["totalAckFailed"], 1);
    assert_eq!(w["queues"][0]["queueName"], "q");
    assert_eq!(w["queues"][0]["popCount"], 2);
    for key in ["timeSeries", "workers", "queues"] {
        assert!(w[key].is_array(), "{key}: {w}");
    }
    let (s, m) = h.get("/api/v1/analytics/system-metrics").await;
    assert_eq!(s, 200, "{m}");
    let series = m["replicas"][0]["timeSeries"].as_array().unwrap();
    assert!(!series.is_empty(), "{m}");
    assert!(series[0]["metrics"]["memory"]["rss_bytes"]["last"].is_u64());
    let (s, r) = h.post("/api/v1/stats/refresh", Value::Null).await;
    assert_eq!(s, 200, "{r}");
    assert_eq!(
        (r["success"].clone(), r["queues"].clone()),
        (json!(true), json!(1))
    );
    let (s, m) = h.get("/metrics").await;
    assert_eq!(s, 200, "{m}");
    for key in ["cpu", "memory", "messages", "requests", "uptime"] {
        assert!(m.get(key).is_some(), "{key}: {m}");
    }
    assert_eq!(m["messages"]["total"], 3);
}

#[tokio::test]
async fn every_figure_is_the_callers_tenants_own() {
    let auth = Auth::new().token("acme", Role::Admin, "acme", None).token(
        "globex",
        Role::Admin,
        "globex",
        None,
    );
    let b = MockBroker::builder().auth(auth).start().await.unwrap();
    let http = reqwest::Client::new();
    let call = |token: &'static str, path: &str| {
        http.get(format!("{}{path}", b.url()))
            .bearer_auth(token)
            .send()
    };
    let pushed = http
        .post(format!("{}/api/v1/push", b.url()))
        .bearer_auth("acme")
        .json(&json!({"items": [{"queue": "shop.orders.q", "payload": 1}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(pushed.status(), 201);
    for (path, key) in [
        ("/api/v1/status", "queues"),
        ("/api/v1/status/queues", "queues"),
        ("/api/v1/resources/namespaces", "namespaces"),
        ("/api/v1/resources/tasks", "tasks"),
        ("/api/v1/resources/partitions", "partitions"),
        ("/api/v1/analytics/worker-metrics", "queues"),
    ] {
        let mine: Value = call("acme", path).await.unwrap().json().await.unwrap();
        let theirs: Value = call("globex", path).await.unwrap().json().await.unwrap();
        assert_eq!(mine[key].as_array().unwrap().len(), 1, "{path}: {mine}");
        assert_eq!(theirs[key], json!([]), "{path}: {theirs}");
    }
    let theirs: Value = call("globex", "/api/v1/resources/overview")
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(theirs["queues"], 0, "{theirs}");
    let detail = call("globex", "/api/v1/status/queues/shop.orders.q")
        .await
        .unwrap();
    assert_eq!(detail.status(), 404);
    b.shutdown().await;
}

#[tokio::test]
async fn a_committed_transaction_counts_its_acks_and_pushes_and_a_rollback_nothing() {
    let h = Harness::new().await;
    h.push_one("in", "p", "a", json!(1)).await;
    let p = h.pop("/api/v1/pop/queue/in").await.unwrap();
    let m = &p["messages"][0];
    let rolled = h
        .txn_ok(json!({"operations": [
            {"type": "ack", "transactionId": "nope", "partitionId": m["partitionId"], "leaseId": m["leaseId"]},
            {"type": "push", "items": [{"queue": "out", "payload": 1}]}
        ]}))
        .await;
    assert_eq!(rolled["success"], false, "{rolled}");
    let done = h
        .txn_ok(json!({"operations": [
            {"type": "ack", "transactionId": "a", "partitionId": m["partitionId"], "leaseId": m["leaseId"]},
            {"type": "push", "items": [{"queue": "out", "payload": 1}, {"queue": "out", "payload": 2}]}
        ]}))
        .await;
    assert_eq!(done["success"], true, "{done}");
    let (_, w) = h.get("/api/v1/analytics/worker-metrics?queue=out").await;
    let s = &w["summary"];
    // One plain push and one pop of `in`, then the transaction's two pushes and one ack.
    assert_eq!(
        (
            s["totalPushMessages"].clone(),
            s["totalAckMessages"].clone(),
            s["totalPushRequests"].clone()
        ),
        (json!(3), json!(1), json!(2)),
        "{w}"
    );
    assert_eq!(
        w["queues"],
        json!([{"queueName": "out", "pushCount": 2, "popCount": 0, "avgLagMs": 0.0, "maxLagMs": 0}])
    );
}

#[tokio::test]
async fn the_cheap_status_counts_agree_with_the_full_scan_after_retention() {
    let h = Harness::new().await;
    h.configure(
        "q",
        json!({"retentionEnabled": true, "completedRetentionSeconds": 10}),
    )
    .await;
    for i in 0..6 {
        h.push_one("q", "a", &format!("a{i}"), json!(i)).await;
    }
    h.push_one("q", "b", "b0", json!(0)).await;
    let p = h
        .pop("/api/v1/pop/queue/q/partition/a?batch=3")
        .await
        .unwrap();
    h.ack_msg(&p["messages"][2], "completed").await;
    h.advance(20);
    // Retention removes a0..a2 from the head of a; the logs stay dense.
    let mut gone = false;
    for _ in 0..50 {
        let (_, d) = h.get("/api/v1/resources/queues/q").await;
        if d["totals"]["total"] == 4 {
            gone = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(gone, "retention ran");
    h.pop("/api/v1/pop/queue/q/partition/a?batch=1")
        .await
        .unwrap();
    let (_, full) = h.get("/api/v1/resources/queues").await;
    let (_, cheap) = h.get("/api/v1/status/queues").await;
    for k in ["total", "pending", "processing"] {
        assert_eq!(
            cheap["queues"][0]["messages"][k], full["queues"][0]["messages"][k],
            "{k}: {cheap} vs {full}"
        );
    }
    assert_eq!(cheap["queues"][0]["messages"]["total"], 4);
    assert_eq!(cheap["queues"][0]["messages"]["processing"], 1);
}
