//! The test harness as a test uses it: typed KV inspection, inspection by the default
//! partition's name.

mod common;

use common::Harness;
use queen_mock_broker::DEFAULT_PARTITION;
use queen_mock_broker::harness::InspectError;
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
