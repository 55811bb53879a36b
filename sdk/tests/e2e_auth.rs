//! The client's bearer token against a broker with authentication on.

use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role};
use queen_sdk::{Client, Error, PushItem};
use serde_json::json;

#[tokio::test]
async fn the_token_names_the_callers_role_and_tenant() {
    let auth = Auth::new()
        .token("writer", Role::ReadWrite, "acme", Some("svc"))
        .token("reader", Role::ReadOnly, "acme", None);
    let broker = MockBroker::builder().auth(auth).start().await.unwrap();
    let writer = Client::builder()
        .url(broker.url())
        .token("writer")
        .build()
        .unwrap();
    writer
        .push(vec![PushItem::new("q", &json!(1)).transaction_id("t")])
        .await
        .unwrap();
    let msgs = writer.pop::<serde_json::Value>("q").send().await.unwrap();
    assert_eq!(msgs[0].producer_sub.as_deref(), Some("svc"));

    let reader = Client::builder()
        .url(broker.url())
        .token("reader")
        .build()
        .unwrap();
    let err = reader
        .push(vec![PushItem::new("q", &json!(2))])
        .await
        .unwrap_err();
    assert!(matches!(&err, Error::Api { status: 403, .. }), "{err:?}");
    assert_eq!(err.code(), Some("forbidden"));

    let anonymous = Client::new(broker.url()).unwrap();
    let err = anonymous
        .pop::<serde_json::Value>("q")
        .send()
        .await
        .unwrap_err();
    assert_eq!(
        (err.status(), err.code()),
        (Some(401), Some("unauthorized"))
    );
    broker.shutdown().await;
}
