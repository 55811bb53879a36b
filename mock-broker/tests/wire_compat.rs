//! Wire compatibility with the official clients: requests built with the published
//! `queen-protocol` types are accepted, and every answer decodes into its types.

mod common;

use common::Harness;
use queen_protocol::{
    AckBatchItem, AckBatchRequest, AckRequest, AckResult, AckStatus, ConfigureRequest,
    ConfigureResponse, DlqParams, DlqResponse, PopParams, PopResponse, PushItem, PushRequest,
    PushResult, PushStatus, QueueOptions, RenewLeaseRequest, RenewLeaseResponse, SubscriptionMode,
};

async fn post<T: serde::Serialize, R: serde::de::DeserializeOwned>(
    h: &Harness,
    path: &str,
    body: &T,
) -> R {
    let res = h.http.post(h.url(path)).json(body).send().await.unwrap();
    assert!(res.status().is_success(), "{path}: {}", res.status());
    let text = res.text().await.unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}: {text}"))
}

async fn pop(h: &Harness, queue: &str, params: &PopParams) -> Option<PopResponse> {
    let res = h
        .http
        .get(h.url(&format!("/api/v1/pop/queue/{queue}")))
        .query(&params.to_pairs())
        .send()
        .await
        .unwrap();
    if res.status() == 204 {
        return None;
    }
    assert_eq!(res.status(), 200);
    Some(res.json().await.unwrap())
}

#[tokio::test]
async fn the_official_types_drive_a_whole_worker_loop() {
    let h = Harness::new().await;
    let cfg = ConfigureRequest::new("orders").options(QueueOptions {
        lease_time: Some(60),
        retry_limit: Some(0),
        ..Default::default()
    });
    let configured: ConfigureResponse = post(&h, "/api/v1/configure", &cfg).await;
    assert!(configured.configured);
    assert_eq!(configured.queue.as_deref(), Some("orders"));

    let push = PushRequest::new(vec![
        PushItem::new("orders", serde_json::json!({"n": 1}))
            .partition("eu")
            .transaction_id("o-1"),
        PushItem::new("orders", serde_json::json!({"n": 1}))
            .partition("eu")
            .transaction_id("o-1"),
        PushItem::new("orders", serde_json::json!({"n": 2}))
            .partition("eu")
            .transaction_id("o-2"),
    ]);
    let pushed: Vec<PushResult> = post(&h, "/api/v1/push", &push).await;
    assert_eq!(
        pushed.iter().map(|p| p.status).collect::<Vec<_>>(),
        [
            PushStatus::Queued,
            PushStatus::Duplicate,
            PushStatus::Queued
        ]
    );
    assert_eq!(pushed[1].offset, Some(0));
    assert_eq!(pushed[2].offset, Some(1));

    let params = PopParams {
        batch: Some(2),
        consumer_group: Some("billing".into()),
        subscription_mode: Some(SubscriptionMode::All),
        lease_seconds: Some(30),
        ..Default::default()
    };
    let popped = pop(&h, "orders", &params).await.expect("messages");
    assert!(popped.success);
    assert_eq!(popped.messages.len(), 2);
    assert_eq!(popped.partition, "eu");
    assert_eq!(popped.consumer_group, "billing");
    assert_eq!(popped.partitions_claimed, Some(1));
    let m = &popped.messages[0];
    assert!(m.is_leased());
    assert_eq!(m.lease_id, popped.lease_id);
    assert_eq!(m.data, serde_json::json!({"n": 1}));

    let renewed: RenewLeaseResponse = post(
        &h,
        &format!("/api/v1/lease/{}/extend", popped.lease_id),
        &RenewLeaseRequest { seconds: Some(90) },
    )
    .await;
    assert!(renewed.success);
    assert_eq!(renewed.renewed, 1);
    assert!(renewed.expires_at().is_some());

    let single = AckRequest {
        transaction_id: m.transaction_id.clone(),
        partition_id: m.partition_id.clone(),
        status: AckStatus::Completed,
        consumer_group: Some("billing".into()),
        lease_id: Some(m.lease_id.clone()),
        error: None,
    };
    let acked: Vec<AckResult> = post(&h, "/api/v1/ack", &single).await;
    assert!(acked[0].success && !acked[0].noop && !acked[0].lease_released);

    let m2 = &popped.messages[1];
    let batch = AckBatchRequest {
        acknowledgments: vec![AckBatchItem {
            transaction_id: m2.transaction_id.clone(),
            partition_id: m2.partition_id.clone(),
            status: AckStatus::Failed,
            lease_id: Some(m2.lease_id.clone()),
            error: Some("no stock".into()),
        }],
        consumer_group: Some("billing".into()),
    };
    let acked: Vec<AckResult> = post(&h, "/api/v1/ack/batch", &batch).await;
    assert!(
        acked[0].success && acked[0].dlq && acked[0].lease_released,
        "{acked:?}"
    );

    let dlq_params = DlqParams {
        queue: Some("orders".into()),
        consumer_group: Some("billing".into()),
        ..Default::default()
    };
    let res = h
        .http
        .get(h.url("/api/v1/dlq"))
        .query(&dlq_params.to_pairs())
        .send()
        .await
        .unwrap();
    let dlq: DlqResponse = res.json().await.unwrap();
    assert_eq!(dlq.total, 1);
    assert_eq!(dlq.messages[0].error.as_deref(), Some("no stock"));
    assert_eq!(dlq.messages[0].transaction_id.as_deref(), Some("o-2"));
    assert_eq!(dlq.messages[0].partition.as_deref(), Some("eu"));
}

#[tokio::test]
async fn an_auto_ack_pop_decodes_as_unleased() {
    let h = Harness::new().await;
    let _: Vec<PushResult> = post(
        &h,
        "/api/v1/push",
        &PushRequest::new(vec![PushItem::new("q", serde_json::json!(null))]),
    )
    .await;
    let params = PopParams {
        auto_ack: Some(true),
        ..Default::default()
    };
    let popped = pop(&h, "q", &params).await.expect("a message");
    assert!(!popped.messages[0].is_leased());
    assert_eq!(popped.messages[0].data, serde_json::Value::Null);
    assert!(pop(&h, "q", &PopParams::default()).await.is_none());
}
