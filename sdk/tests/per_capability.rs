//! A broker that lacks one Queen 2 part, as Queen 2's own engine (queen-engine 1.3 on
//! PostgreSQL) lacks positions and locks: the SDK never reports a part it dropped as
//! committed, refuses that part (and only that part) afterwards, names a missing
//! feature's route as `Error::Unsupported`, and gives every transaction timer a `txn`.
//! A wiremock broker answers as that engine was seen to (issue 50): a committed step
//! with `positions` comes back with the KV results and none for the positions.

use queen_sdk::{Capability, Client, Error, RetryPolicy, Ttl};
use serde_json::{Value, json};
use wiremock::matchers::{method, path, path_regex};
use wiremock::{Mock, MockServer, ResponseTemplate};

mod common;
use common::Commits;

async fn engine() -> (MockServer, Client) {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/api/v1/transaction"))
        .respond_with(Commits { positions: false })
        .mount(&server)
        .await;
    Mock::given(path_regex("^/api/v1/locks"))
        .respond_with(
            ResponseTemplate::new(404)
                .set_body_json(json!({"error": "no such route", "code": "no_such_route"})),
        )
        .mount(&server)
        .await;
    let client = Client::builder()
        .url(server.uri())
        .retry(RetryPolicy::none())
        .build()
        .unwrap();
    (server, client)
}

async fn sent(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/api/v1/transaction")
        .map(|r| r.body_json().unwrap())
        .collect()
}

#[tokio::test]
async fn a_step_whose_positions_were_dropped_is_an_error_not_a_commit() {
    let (server, client) = engine().await;
    let out = client
        .transaction()
        .kv(|k| k.put("orders", "o-7", &"paid", Ttl::days(1)))
        .position("events", "audit", "Default", 3)
        .commit()
        .await;
    match out {
        Err(
            e @ Error::Unsupported {
                capability: Capability::Positions,
                committed: true,
            },
        ) => {
            let text = e.to_string();
            assert!(
                text.contains("positions") && text.contains("committed the rest"),
                "{text}"
            );
        }
        other => panic!("expected Unsupported positions (committed), got {other:?}"),
    }
    // The next step with positions is refused before it is sent...
    let again = client
        .transaction()
        .position("events", "audit", "Default", 4)
        .commit()
        .await;
    assert!(
        matches!(
            again,
            Err(Error::Unsupported {
                capability: Capability::Positions,
                committed: false
            })
        ),
        "{again:?}"
    );
    assert_eq!(sent(&server).await.len(), 1);
    // ... and only it: the broker has KV, and KV steps go on.
    let kv = client
        .transaction()
        .kv(|k| k.incr("stats", "n", 1, Ttl::Forever))
        .commit()
        .await
        .expect("a KV step is not refused for the positions' sake");
    assert!(kv.is_committed());
    let with_once = client
        .transaction()
        .once("paid", "o-8", Ttl::days(1))
        .commit()
        .await
        .expect("nor is a once marker");
    assert!(with_once.is_committed());
    assert_eq!(sent(&server).await.len(), 3);
}

#[tokio::test]
async fn a_lock_on_a_broker_without_locks_is_unsupported() {
    let (_server, client) = engine().await;
    let out = client.lock("nightly").acquire().await;
    assert!(
        matches!(
            out,
            Err(Error::Unsupported {
                capability: Capability::Locks,
                committed: false
            })
        ),
        "{out:?}"
    );
}

#[tokio::test]
async fn a_transaction_timer_always_carries_a_txn() {
    let (server, client) = engine().await;
    let out = client
        .transaction()
        .timer("reminders", "o-7", |t| {
            t.after(std::time::Duration::from_secs(60)).payload(&"o-7")
        })
        .commit()
        .await
        .unwrap();
    assert!(out.is_committed());
    let body = &sent(&server).await[0];
    let txn = body["timers"][0]["txn"].as_str().expect("a txn");
    assert!(!txn.is_empty());
}
