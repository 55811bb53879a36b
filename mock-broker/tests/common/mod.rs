//! Shared helpers for the broker's HTTP tests: an in-process broker with a manual
//! clock, and a thin JSON client.
#![allow(dead_code)]

use std::time::Duration;

use queen_mock_broker::{ManualClock, MockBroker};
use reqwest::StatusCode;
use serde_json::{Value, json};

/// An in-process broker, its manual clock, and an HTTP client.
pub struct Harness {
    pub broker: MockBroker,
    pub clock: ManualClock,
    pub http: reqwest::Client,
}

impl Harness {
    /// An in-memory broker on a free port whose time moves only when told.
    pub async fn new() -> Self {
        let clock = ManualClock::new();
        let broker = MockBroker::builder()
            .in_memory()
            .clock(clock.clone())
            .start()
            .await
            .expect("broker starts");
        Self::with(broker, clock)
    }

    /// A broker on the redb file `path` (created if missing), on `clock`: started again
    /// on the same path after a shutdown, it is a restart.
    pub async fn on_file(path: &std::path::Path, clock: &ManualClock) -> Self {
        let broker = MockBroker::builder()
            .data_file(path)
            .clock(clock.clone())
            .start()
            .await
            .expect("broker starts");
        Self::with(broker, clock.clone())
    }

    /// An in-memory broker whose answer budget (`--answer-budget`) is `bytes`, on a
    /// clock that moves only when told.
    pub async fn with_answer_budget(bytes: u64) -> Self {
        let clock = ManualClock::new();
        let broker = MockBroker::builder()
            .clock(clock.clone())
            .answer_budget(bytes)
            .start()
            .await
            .expect("broker starts");
        Self::with(broker, clock)
    }

    /// Pushes `count` messages of about 1 MiB each to `queue`/`partition`, with the
    /// transaction ids `m0`, `m1`...; answers the payload they carry.
    pub async fn push_mib(&self, queue: &str, partition: &str, count: usize) -> String {
        let big = "x".repeat((1 << 20) - 2);
        for i in 0..count {
            self.push_one(queue, partition, &format!("m{i}"), json!(big))
                .await;
        }
        big
    }

    /// Wraps an already started broker.
    pub fn with(broker: MockBroker, clock: ManualClock) -> Self {
        Harness {
            broker,
            clock,
            http: reqwest::Client::new(),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.broker.url(), path)
    }

    /// Moves broker time forward.
    pub fn advance(&self, secs: u64) {
        self.clock.advance(Duration::from_secs(secs));
    }

    async fn read(res: reqwest::Response) -> (StatusCode, Value) {
        let status = res.status();
        let text = res.text().await.expect("body");
        let body = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
        };
        (status, body)
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        let res = self
            .http
            .post(self.url(path))
            .json(&body)
            .send()
            .await
            .unwrap();
        Self::read(res).await
    }

    /// Posts raw bytes, for malformed bodies.
    pub async fn post_raw(
        &self,
        path: &str,
        body: impl Into<reqwest::Body>,
    ) -> (StatusCode, Value) {
        let res = self
            .http
            .post(self.url(path))
            .header("content-type", "application/json")
            .body(body)
            .send()
            .await
            .unwrap();
        Self::read(res).await
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        let res = self.http.get(self.url(path)).send().await.unwrap();
        Self::read(res).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        let res = self.http.delete(self.url(path)).send().await.unwrap();
        Self::read(res).await
    }

    pub async fn configure(&self, queue: &str, options: Value) {
        let (s, b) = self
            .post(
                "/api/v1/configure",
                json!({"queue": queue, "options": options}),
            )
            .await;
        assert_eq!(s, StatusCode::OK, "{b}");
        assert_eq!(b["configured"], true, "{b}");
    }

    /// Pushes items; asserts 201 and returns the result array.
    pub async fn push(&self, items: Value) -> Vec<Value> {
        let (s, b) = self.post("/api/v1/push", json!({ "items": items })).await;
        assert_eq!(s, StatusCode::CREATED, "{b}");
        b.as_array().expect("array").clone()
    }

    /// Pushes one message with a transaction id to a partition.
    pub async fn push_one(&self, queue: &str, partition: &str, txn: &str, payload: Value) -> Value {
        self.push(json!([{"queue": queue, "partition": partition, "transactionId": txn, "payload": payload}]))
            .await
            .remove(0)
    }

    /// Pops with a query string such as `/api/v1/pop/queue/q?batch=5`; `None` on 204.
    pub async fn pop(&self, path: &str) -> Option<Value> {
        let (s, b) = self.get(path).await;
        match s {
            StatusCode::NO_CONTENT => None,
            StatusCode::OK => {
                assert_eq!(b["success"], true, "{b}");
                Some(b)
            }
            other => panic!("pop answered {other}: {b}"),
        }
    }

    /// Acks one message; returns its result element.
    pub async fn ack(&self, body: Value) -> Value {
        let (s, b) = self.post("/api/v1/ack", body).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        b[0].clone()
    }

    /// Acks a popped message with a status, fenced by its lease.
    pub async fn ack_msg(&self, msg: &Value, status: &str) -> Value {
        self.ack(json!({
            "transactionId": msg["transactionId"],
            "partitionId": msg["partitionId"],
            "leaseId": msg["leaseId"],
            "consumerGroup": msg["consumerGroup"],
            "status": status,
        }))
        .await
    }
}

/// The `transactionId`s of a pop answer's messages, in order.
pub fn txns(pop: &Value) -> Vec<String> {
    pop["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["transactionId"].as_str().unwrap().to_string())
        .collect()
}

impl Harness {
    /// Sends a transaction; answers the status and body.
    pub async fn txn(&self, body: Value) -> (StatusCode, Value) {
        self.post("/api/v1/transaction", body).await
    }

    /// Sends a transaction that must answer 200 with a verdict; returns the body.
    pub async fn txn_ok(&self, body: Value) -> Value {
        let (s, b) = self.txn(body).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        b
    }

    /// Reads one KV row through the public API (`found`, `value`, `version`).
    pub async fn kv_get(&self, ns: &str, key: &str) -> Value {
        let (s, b) = self.get(&format!("/api/v1/kv/{ns}/{key}")).await;
        assert_eq!(s, StatusCode::OK, "{b}");
        b
    }
}
