//! Two brokers in one process share nothing: not their faults, request logs, data, or
//! the writer's caches and hints (which once were thread-locals and a static).

use queen_mock_broker::MockBroker;
use queen_mock_broker::harness::Fault;
use serde_json::{Value, json};

async fn push(http: &reqwest::Client, b: &MockBroker, queue: &str, txn: &str) -> u16 {
    http.post(format!("{}/api/v1/push", b.url()))
        .json(&json!({"items": [{"queue": queue, "partition": "p", "transactionId": txn, "payload": 1}]}))
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

async fn pop(http: &reqwest::Client, b: &MockBroker, queue: &str) -> Vec<String> {
    let res = http
        .get(format!("{}/api/v1/pop/queue/{queue}?batch=10", b.url()))
        .send()
        .await
        .unwrap();
    if res.status() == 204 {
        return Vec::new();
    }
    let body: Value = res.json().await.unwrap();
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn two_brokers_in_one_process_with_different_faults_do_not_interfere() {
    let (a, b) = (
        MockBroker::start_in_memory().await.unwrap(),
        MockBroker::start_in_memory().await.unwrap(),
    );
    let http = reqwest::Client::new();
    a.faults().inject(Fault::unavailable().on("/api/v1/push"));
    assert_eq!(push(&http, &b, "q", "b-1").await, 201, "b has no fault");
    assert_eq!(
        push(&http, &a, "q", "a-1").await,
        503,
        "a's fault fires on a"
    );
    assert_eq!(a.faults().hits().len(), 1);
    assert!(b.faults().hits().is_empty());
    assert_eq!(a.requests().matching("/api/v1/push").len(), 1);
    assert_eq!(b.requests().matching("/api/v1/push").len(), 1);

    // The same queue name on both: each pop sees its own broker's messages, although
    // both writers noted a partition of "q" as fed.
    assert_eq!(push(&http, &a, "q", "a-2").await, 201);
    assert_eq!(pop(&http, &a, "q").await, ["a-2"]);
    assert_eq!(pop(&http, &b, "q").await, ["b-1"]);
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn a_broker_without_the_harness_serves_and_has_no_fault_table() {
    let broker = MockBroker::builder().harness(false).start().await.unwrap();
    let http = reqwest::Client::new();
    assert!(broker.harness().is_none());
    assert_eq!(push(&http, &broker, "q", "t").await, 201);
    assert_eq!(pop(&http, &broker, "q").await, ["t"]);
    let faults = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        broker.faults();
    }));
    assert!(
        faults.is_err(),
        "asking a harness-less broker for faults is a bug"
    );
    broker.shutdown().await;
}
