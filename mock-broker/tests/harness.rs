//! The test harness as a test uses it: typed KV inspection and `MockBroker::wait_for`,
//! which wakes on the broker's writes (and its manual clock) rather than polling.

mod common;

use std::time::{Duration, Instant};

use common::Harness;
use queen_mock_broker::harness::{InspectError, WaitError};
use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
use reqwest::StatusCode;
use serde_json::{Value, json};

#[derive(Debug, PartialEq, serde::Deserialize)]
struct Cart {
    items: u32,
}

async fn put_kv(h: &Harness, ns: &str, key: &str, value: Value) {
    let (status, body) = h
        .post(
            "/api/v1/kv",
            json!({"operations": [{"op": "put", "ns": ns, "key": key, "value": value, "ttlSeconds": 60}]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
}

#[tokio::test]
async fn kv_reads_the_value_as_the_type_asked_for_and_kv_row_keeps_the_row() {
    let h = Harness::new().await;
    put_kv(&h, "carts", "c-1", json!({"items": 2})).await;
    let inspect = h.broker.inspect();

    assert_eq!(
        inspect.kv::<Cart>("carts", "c-1").unwrap(),
        Some(Cart { items: 2 })
    );
    assert_eq!(
        inspect.kv::<Value>("carts", "c-1").unwrap(),
        Some(json!({"items": 2}))
    );
    assert_eq!(inspect.kv::<Cart>("carts", "absent").unwrap(), None);

    let row = inspect.kv_row("carts", "c-1").unwrap().expect("written");
    assert_eq!(row.value, r#"{"items":2}"#);
    assert_eq!(row.expires_at, Some(row.updated_at + 60_000_000));
    assert!(inspect.kv_row("carts", "absent").unwrap().is_none());
}

#[tokio::test]
async fn a_value_of_another_type_is_a_decode_error_naming_the_row_and_the_type() {
    let h = Harness::new().await;
    put_kv(&h, "carts", "c-1", json!("not a cart")).await;
    let err = h.broker.inspect().kv::<Cart>("carts", "c-1").unwrap_err();
    let InspectError::Decode {
        ns, key, target, ..
    } = &err
    else {
        panic!("expected a decode error, got {err:?}");
    };
    assert_eq!((ns.as_str(), key.as_str()), ("carts", "c-1"));
    assert!(target.ends_with("Cart"), "{target}");
    assert!(
        err.to_string()
            .starts_with("kv carts/c-1 does not decode as "),
        "{err}"
    );
}

#[tokio::test]
async fn an_empty_partition_name_reads_the_default_partition() {
    let h = Harness::new().await;
    h.post(
        "/api/v1/push",
        json!({"items": [{"queue": "orders", "payload": 1}]}),
    )
    .await;
    let inspect = h.broker.inspect();
    assert_eq!(
        inspect.messages("orders", DEFAULT_PARTITION).unwrap().len(),
        1
    );
    assert_eq!(inspect.messages("orders", "").unwrap().len(), 1);
    let (status, _) = h
        .get("/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all")
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        inspect.cursor("orders", "", "billing").unwrap(),
        inspect
            .cursor("orders", DEFAULT_PARTITION, "billing")
            .unwrap()
    );
    assert!(inspect.cursor("orders", "", "billing").unwrap().is_some());
}

/// Pushes `n` messages to `queue` over HTTP after `delay`, from a task of its own.
fn push_later(broker: &MockBroker, queue: &str, n: usize, delay: Duration) {
    let url = format!("{}/api/v1/push", broker.url());
    let items: Vec<Value> = (0..n)
        .map(|i| json!({"queue": queue, "payload": {"n": i}}))
        .collect();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let res = reqwest::Client::new()
            .post(url)
            .json(&json!({"items": items}))
            .send()
            .await
            .expect("push");
        assert_eq!(res.status(), StatusCode::CREATED);
    });
}

#[tokio::test]
async fn a_wait_wakes_on_a_write_from_another_task() {
    let h = Harness::new().await;
    push_later(&h.broker, "receipts", 2, Duration::from_millis(200));
    let started = Instant::now();
    let waited = h
        .broker
        .wait_for("two receipts", Duration::from_secs(20), |i| {
            Ok(i.messages("receipts", DEFAULT_PARTITION)?.len() == 2)
        })
        .await;
    assert!(waited.is_ok(), "{waited:?}");
    assert!(started.elapsed() >= Duration::from_millis(200));
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "woken by the write, not the timeout"
    );
    assert_eq!(
        h.broker.inspect().messages("receipts", "").unwrap().len(),
        2
    );
}

#[tokio::test]
async fn a_wait_whose_condition_holds_returns_at_once() {
    let h = Harness::new().await;
    let started = Instant::now();
    h.broker
        .wait_for("nothing", Duration::from_secs(20), |_| Ok(true))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn a_wait_rechecks_after_writes_and_times_out_naming_what_it_awaited() {
    let h = Harness::new().await;
    // Writes come, but not the one awaited: each wakes the wait, none satisfies it.
    push_later(&h.broker, "other", 1, Duration::from_millis(50));
    let started = Instant::now();
    let err = h
        .broker
        .wait_for("a receipt", Duration::from_millis(400), |i| {
            Ok(!i.messages("receipts", DEFAULT_PARTITION)?.is_empty())
        })
        .await
        .unwrap_err();
    assert!(started.elapsed() >= Duration::from_millis(400));
    let WaitError::TimedOut {
        what,
        waited,
        checks,
    } = &err
    else {
        panic!("expected a timeout, got {err:?}");
    };
    assert_eq!(what, "a receipt");
    assert_eq!(*waited, Duration::from_millis(400));
    assert!(
        *checks >= 2,
        "checked again after the push to `other`: {checks}"
    );
    let shown = err.to_string();
    assert!(shown.contains("waiting for a receipt"), "{shown}");
    assert!(shown.contains("400ms"), "{shown}");
}

#[tokio::test]
async fn a_wait_with_nothing_written_times_out_after_one_check() {
    let h = Harness::new().await;
    let err = h
        .broker
        .wait_for("a receipt", Duration::from_millis(100), |i| {
            Ok(!i.messages("receipts", DEFAULT_PARTITION)?.is_empty())
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, WaitError::TimedOut { checks: 1, .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn a_wait_wakes_when_the_manual_clock_moves() {
    let h = Harness::new().await;
    h.post(
        "/api/v1/push",
        json!({"items": [{"queue": "orders", "payload": 1}]}),
    )
    .await;
    let (status, _) = h
        .get("/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all")
        .await;
    assert_eq!(status, StatusCode::OK);
    let clock = h.clock.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        clock.advance(Duration::from_secs(3600)); // far past the lease
    });
    let now = || h.broker.clock().now_micros();
    h.broker
        .wait_for("billing's lease to lapse", Duration::from_secs(20), |i| {
            let cursor = i.cursor("orders", DEFAULT_PARTITION, "billing")?;
            Ok(cursor
                .and_then(|c| c.lease_expires_at)
                .is_some_and(|t| t <= now()))
        })
        .await
        .unwrap();
}

#[tokio::test]
async fn a_failed_read_ends_the_wait_with_its_cause() {
    let h = Harness::new().await;
    put_kv(&h, "carts", "c-1", json!("not a cart")).await;
    let err = h
        .broker
        .wait_for("cart c-1", Duration::from_secs(20), |i| {
            Ok(i.kv::<Cart>("carts", "c-1")?.is_some())
        })
        .await
        .unwrap_err();
    assert!(
        matches!(
            &err,
            WaitError::Inspect { what, source: InspectError::Decode { .. } } if what == "cart c-1"
        ),
        "{err:?}"
    );
}
