//! Storage faults under a running broker (`harness::StorageFaults`): a full disk is
//! 507, an I/O error is 503, nothing of a failed batch is applied, reads go on,
//! `/health` says degraded, writes come back without a restart, and a restart finds
//! every acknowledged write and nothing else.

use std::path::Path;

use queen_mock_broker::MockBroker;
use queen_mock_broker::harness::{StorageFault, StorageFaults};
use reqwest::StatusCode;
use serde_json::{Value, json};

struct Client {
    http: reqwest::Client,
    url: String,
}

impl Client {
    fn of(b: &MockBroker) -> Self {
        Client {
            http: reqwest::Client::new(),
            url: b.url(),
        }
    }

    async fn send(&self, req: reqwest::RequestBuilder) -> (StatusCode, Value, Option<String>) {
        let res = req.send().await.unwrap();
        let status = res.status();
        let retry = res
            .headers()
            .get("retry-after")
            .map(|v| v.to_str().unwrap().to_string());
        let text = res.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::Null),
            retry,
        )
    }

    /// Pushes a message of about `kb` KiB.
    async fn push(&self, txn: &str, kb: usize) -> (StatusCode, Value, Option<String>) {
        let body = json!({"items": [{"queue": "q", "partition": "p", "transactionId": txn,
            "payload": {"blob": "x".repeat(kb * 1024)}}]});
        self.send(
            self.http
                .post(format!("{}/api/v1/push", self.url))
                .json(&body),
        )
        .await
    }

    async fn get(&self, path: &str) -> (StatusCode, Value, Option<String>) {
        self.send(self.http.get(format!("{}{path}", self.url)))
            .await
    }

    async fn kv_put(&self, key: &str) -> StatusCode {
        let body = json!({"operations": [{"op": "put", "ns": "app", "key": key, "value": key, "forever": true}]});
        self.send(
            self.http
                .post(format!("{}/api/v1/kv", self.url))
                .json(&body),
        )
        .await
        .0
    }
}

async fn start(file: &Path, faults: &StorageFaults) -> MockBroker {
    MockBroker::builder()
        .data_file(file)
        .storage_faults(faults.clone())
        .start()
        .await
        .unwrap()
}

/// The transaction ids stored in `q`/`p`, in order.
fn stored(b: &MockBroker) -> Vec<String> {
    b.inspect()
        .messages("q", "p")
        .unwrap()
        .into_iter()
        .map(|m| m.transaction_id)
        .collect()
}

#[tokio::test]
async fn a_full_disk_is_507_reads_go_on_health_degrades_and_writes_return_without_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let faults = StorageFaults::default();
    let broker = start(&file, &faults).await;
    let c = Client::of(&broker);
    let mut acked = Vec::new();
    for i in 0..3 {
        let txn = format!("before-{i}");
        assert_eq!(c.push(&txn, 8).await.0, StatusCode::CREATED);
        acked.push(txn);
    }
    assert_eq!(c.kv_put("k1").await, StatusCode::OK);

    faults.inject(StorageFault::NoSpace);
    // Pushes that grow the file fail: 507 with Retry-After, nothing applied.
    let mut refused = 0;
    for i in 0..5 {
        let (s, b, retry) = c.push(&format!("full-{i}"), 256).await;
        if s == StatusCode::CREATED {
            acked.push(format!("full-{i}"));
            continue;
        }
        assert_eq!(s, StatusCode::INSUFFICIENT_STORAGE, "{b}");
        assert_eq!(b["code"], "storage_full", "{b}");
        assert!(retry.is_some(), "507 carries Retry-After");
        refused += 1;
    }
    assert!(refused > 0 && faults.hits() > 0, "the fault was met");
    let (s, h, _) = c.get("/health").await;
    assert_eq!(
        (s, h["status"].clone(), h["reason"].clone()),
        (
            StatusCode::SERVICE_UNAVAILABLE,
            json!("degraded"),
            json!("storage_full")
        ),
        "{h}"
    );
    // Reads go on from the last commit.
    let (s, kv, _) = c.get("/api/v1/kv/app/k1").await;
    assert_eq!(
        (s, kv["found"].clone()),
        (StatusCode::OK, json!(true)),
        "{kv}"
    );
    let (s, q, _) = c.get("/api/v1/resources/queues/q").await;
    assert_eq!(s, StatusCode::OK, "{q}");
    assert_eq!(q["totals"]["total"], acked.len(), "{q}");
    let (s, _, _) = c.get("/api/v1/dlq?queue=q").await;
    assert_eq!(s, StatusCode::OK);
    // A pop writes a lease: it goes through when the commit fits in the pages the file
    // already has, and is refused like any write (507, nothing applied) when it does
    // not. Either way a clear answer, never a 500.
    let (s, p, _) = c.get("/api/v1/pop/queue/q?batch=1").await;
    eprintln!("pop while full: {s} {p}");
    assert!(
        [StatusCode::OK, StatusCode::INSUFFICIENT_STORAGE].contains(&s),
        "{s}: {p}"
    );
    let popped = s == StatusCode::OK;

    faults.heal();
    if !popped {
        let (s, p, _) = c.get("/api/v1/pop/queue/q?batch=1").await;
        assert_eq!(s, StatusCode::OK, "{p}");
    }
    assert_eq!(
        c.push("after", 8).await.0,
        StatusCode::CREATED,
        "writes are back"
    );
    acked.push("after".into());
    let (s, h, _) = c.get("/health").await;
    assert_eq!(
        (s, h["status"].clone()),
        (StatusCode::OK, json!("healthy")),
        "{h}"
    );
    assert_eq!(stored(&broker), acked);
    broker.shutdown().await;

    // After a restart: every acknowledged write, and nothing that was refused.
    let broker = start(&file, &StorageFaults::default()).await;
    assert_eq!(stored(&broker), acked);
    let c = Client::of(&broker);
    assert_eq!(c.get("/api/v1/kv/app/k1").await.1["found"], true);
    broker.shutdown().await;
}

#[tokio::test]
async fn an_io_error_mid_commit_is_503_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let faults = StorageFaults::default();
    let broker = start(&file, &faults).await;
    let c = Client::of(&broker);
    assert_eq!(c.push("a", 1).await.0, StatusCode::CREATED);

    faults.inject(StorageFault::Io);
    let (s, b, retry) = c.push("b", 1).await;
    assert_eq!(
        (s, b["code"].clone()),
        (StatusCode::SERVICE_UNAVAILABLE, json!("retry")),
        "{b}"
    );
    assert!(retry.is_some());
    assert_eq!(c.kv_put("k").await, StatusCode::SERVICE_UNAVAILABLE);
    let (_, h, _) = c.get("/health").await;
    assert_eq!(h["reason"], "io_error", "{h}");

    faults.heal();
    // The client retries what failed; it lands once.
    assert_eq!(c.push("b", 1).await.0, StatusCode::CREATED);
    assert_eq!(c.get("/health").await.1["status"], "healthy");
    assert_eq!(stored(&broker), ["a", "b"]);
    broker.shutdown().await;

    let broker = start(&file, &StorageFaults::default()).await;
    assert_eq!(stored(&broker), ["a", "b"], "none lost, none partial");
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_io_error_under_concurrent_writes_loses_no_acknowledged_one() {
    // With writers queued behind each batch, the writer holds answered batches in its
    // open redb transaction (they are synced in the log). A failed append drops that
    // transaction: the held batches must come back from the log, now and after a
    // restart.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let faults = StorageFaults::default();
    let broker = start(&file, &faults).await;
    let c = std::sync::Arc::new(Client::of(&broker));
    let writers: Vec<_> = (0..32)
        .map(|t| {
            let c = c.clone();
            tokio::spawn(async move {
                let mut acked = Vec::new();
                for i in 0..40 {
                    let txn = format!("t{t}-{i}");
                    if c.push(&txn, 1).await.0 == StatusCode::CREATED {
                        acked.push(txn);
                    }
                }
                acked
            })
        })
        .collect();
    tokio::time::sleep(std::time::Duration::from_millis(40)).await;
    faults.inject(StorageFault::Io);
    tokio::time::sleep(std::time::Duration::from_millis(30)).await;
    faults.heal();
    let mut acked = Vec::new();
    for w in writers {
        acked.extend(w.await.unwrap());
    }
    assert!(faults.hits() > 0, "the fault met a write");
    assert!(acked.len() < 32 * 40, "some pushes were refused");
    let missing = |stored: Vec<String>| {
        let stored: std::collections::HashSet<_> = stored.into_iter().collect();
        acked
            .iter()
            .filter(|t| !stored.contains(*t))
            .cloned()
            .collect::<Vec<_>>()
    };
    let before = tokio::task::block_in_place(|| stored(&broker));
    assert_eq!(
        missing(before),
        Vec::<String>::new(),
        "acknowledged, then lost"
    );
    broker.shutdown().await;

    let broker = start(&file, &StorageFaults::default()).await;
    let after = tokio::task::block_in_place(|| stored(&broker));
    assert_eq!(missing(after), Vec::<String>::new(), "lost at the restart");
    broker.shutdown().await;
}

#[tokio::test]
async fn with_a_storage_reserve_a_full_disk_still_serves_pops_and_acks() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let faults = StorageFaults::default();
    let broker = MockBroker::builder()
        .data_file(&file)
        .storage_faults(faults.clone())
        .storage_reserve(8 << 20)
        .start()
        .await
        .unwrap();
    let c = Client::of(&broker);
    for i in 0..3 {
        assert_eq!(c.push(&format!("m-{i}"), 8).await.0, StatusCode::CREATED);
    }

    faults.inject(StorageFault::NoSpace);
    // The first write that needs space fails and gives the reserve back; from then on
    // every write that adds data is refused up front, small or large.
    assert_eq!(c.push("big", 512).await.0, StatusCode::INSUFFICIENT_STORAGE);
    let (s, b, retry) = c.push("small", 1).await;
    assert_eq!(
        (s, b["code"].clone()),
        (StatusCode::INSUFFICIENT_STORAGE, json!("storage_full")),
        "{b}"
    );
    assert!(retry.is_some());
    assert_eq!(c.kv_put("k").await, StatusCode::INSUFFICIENT_STORAGE);
    // Consumers go on: a pop leases, an ack commits.
    for i in 0..3 {
        let (s, p, _) = c.get("/api/v1/pop/queue/q?batch=1").await;
        assert_eq!(s, StatusCode::OK, "{p}");
        let m = &p["messages"][0];
        assert_eq!(m["transactionId"], format!("m-{i}"));
        let ack = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
            "leaseId": p["leaseId"].as_str().or(m["leaseId"].as_str()), "status": "completed"});
        let (s, a, _) = c
            .send(c.http.post(format!("{}/api/v1/ack", c.url)).json(&ack))
            .await;
        assert_eq!(s, StatusCode::OK, "{a}");
    }
    let (s, h, _) = c.get("/health").await;
    assert_eq!(
        (s, h["reason"].clone()),
        (StatusCode::SERVICE_UNAVAILABLE, json!("storage_full")),
        "degraded while the reserve is spent: {h}"
    );

    // Space returns: within about a second the reserve is taken again and writes of
    // every kind resume.
    faults.heal();
    let mut healthy = false;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if c.get("/health").await.0 == StatusCode::OK {
            healthy = true;
            break;
        }
    }
    assert!(healthy, "health comes back without a restart");
    assert_eq!(c.push("after", 8).await.0, StatusCode::CREATED);
    assert_eq!(stored(&broker), ["m-0", "m-1", "m-2", "after"]);
    broker.shutdown().await;
}

#[tokio::test]
async fn a_checkpoint_that_fails_loses_nothing_the_log_holds() {
    // On a file, a batch is durable once its record is synced in the write-ahead log;
    // the durable redb commit (the checkpoint) comes later. One that fails, here the
    // one at shutdown, must leave every acknowledged write to the log's replay.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let faults = StorageFaults::default();
    let broker = start(&file, &faults).await;
    let c = Client::of(&broker);
    assert_eq!(c.push("a", 1).await.0, StatusCode::CREATED);
    assert_eq!(c.kv_put("k").await, StatusCode::OK);
    assert_eq!(c.push("b", 1).await.0, StatusCode::CREATED);
    faults.inject(StorageFault::Io);
    broker.shutdown().await;
    assert!(faults.hits() > 0, "the checkpoint met the fault");
    let log = std::fs::metadata(dir.path().join("queen.redb.wal")).unwrap();
    assert!(log.len() > 0, "the log keeps its records");

    faults.heal();
    let broker = start(&file, &StorageFaults::default()).await;
    assert_eq!(stored(&broker), ["a", "b"]);
    let c = Client::of(&broker);
    assert_eq!(c.get("/api/v1/kv/app/k").await.1["found"], true);
    broker.shutdown().await;
    // A clean stop empties the log: everything is in the data file.
    let log = std::fs::metadata(dir.path().join("queen.redb.wal")).unwrap();
    assert_eq!(log.len(), 0);
}

#[tokio::test]
async fn a_transaction_refused_for_an_io_error_applied_nothing_and_lands_once_when_sent_again() {
    // Its step holds a push and an ungated counter, so a step applied twice, or half
    // applied, shows in what is stored: now, and after a restart.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queen.redb");
    let faults = StorageFaults::default();
    let broker = start(&file, &faults).await;
    let c = Client::of(&broker);
    assert_eq!(c.push("a", 1).await.0, StatusCode::CREATED);
    let step = || {
        let body = json!({
            "operations": [{"type": "push", "items": [
                {"queue": "q", "partition": "p", "transactionId": "step", "payload": 1}]}],
            "kv": [{"op": "incr", "ns": "app", "key": "n", "forever": true}]
        });
        c.send(
            c.http
                .post(format!("{}/api/v1/transaction", c.url))
                .json(&body),
        )
    };
    // The counter's KV answer on `b`.
    let counter = |b: &MockBroker| {
        let c = Client::of(b);
        async move { c.get("/api/v1/kv/app/n").await.1 }
    };

    faults.inject(StorageFault::Io);
    let (s, b, retry) = step().await;
    assert_eq!(
        (s, b["code"].clone()),
        (StatusCode::SERVICE_UNAVAILABLE, json!("retry")),
        "{b}"
    );
    assert!(retry.is_some());
    faults.heal();
    assert_eq!(counter(&broker).await["found"], false, "nothing applied");
    assert_eq!(stored(&broker), ["a"]);

    let (s, b, _) = step().await;
    assert_eq!(
        (s, b["success"].clone()),
        (StatusCode::OK, json!(true)),
        "{b}"
    );
    assert_eq!(counter(&broker).await["value"], 1);
    assert_eq!(stored(&broker), ["a", "step"]);
    broker.shutdown().await;

    let broker = start(&file, &StorageFaults::default()).await;
    assert_eq!(counter(&broker).await["value"], 1, "applied once");
    assert_eq!(stored(&broker), ["a", "step"]);
    broker.shutdown().await;
}
