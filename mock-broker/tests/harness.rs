//! The test harness as a test uses it: inspection by the default partition's name.

mod common;

use common::Harness;
use queen_mock_broker::DEFAULT_PARTITION;
use reqwest::StatusCode;
use serde_json::json;

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
