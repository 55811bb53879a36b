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

/// A token provider is asked before every request, so a refreshed token takes effect
/// without rebuilding the client.
#[tokio::test]
async fn a_token_provider_refreshes_the_token_without_a_new_client() {
    use std::sync::{Arc, Mutex};
    let auth = Auth::new()
        .token("old", Role::ReadOnly, "acme", None)
        .token("new", Role::ReadWrite, "acme", None);
    let broker = MockBroker::builder().auth(auth).start().await.unwrap();
    let current = Arc::new(Mutex::new("old".to_string()));
    let source = current.clone();
    let client = Client::builder()
        .url(broker.url())
        .token_provider(move || {
            let token = source.lock().unwrap().clone();
            async move { Ok::<_, queen_sdk::TokenError>(token) }
        })
        .build()
        .unwrap();
    let push = || client.push(vec![PushItem::new("q", &json!(1))]);
    let err = push().await.unwrap_err();
    assert_eq!(err.status(), Some(403), "the old token may only read");
    *current.lock().unwrap() = "new".to_string(); // the JWT was refreshed
    push().await.unwrap();

    let failing = Client::builder()
        .url(broker.url())
        .token_provider(|| async { Err::<String, queen_sdk::TokenError>("the IdP is down".into()) })
        .build()
        .unwrap();
    let err = failing.health().await.unwrap_err();
    assert!(
        matches!(&err, Error::Token { message } if message.contains("IdP")),
        "{err:?}"
    );
    broker.shutdown().await;
}
