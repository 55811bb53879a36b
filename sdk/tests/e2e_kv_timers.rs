//! End to end against the in-process reference broker: standalone KV and timers.

use std::time::Duration;

use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{Client, Error, Kv, KvBatch, KvOp, KvReason, Ttl};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Cart {
    items: u32,
}

async fn setup() -> (MockBroker, Client, ManualClock) {
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .in_memory()
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let client = Client::new(broker.url()).unwrap();
    (broker, client, clock)
}

#[tokio::test]
async fn kv_round_trip() {
    let (_broker, client, clock) = setup().await;
    let kv = client.kv();

    assert_eq!(kv.get::<Cart>("carts", "c-1").await.unwrap(), None);
    let w = kv
        .put("carts", "c-1", &Cart { items: 2 }, Ttl::seconds(60))
        .await
        .unwrap();
    assert!(w.applied);
    let v1 = w.version.expect("a version");

    let row = kv
        .get::<Cart>("carts", "c-1")
        .await
        .unwrap()
        .expect("found");
    assert_eq!(row.value, Cart { items: 2 });
    assert_eq!(row.version, v1);
    assert_eq!(row.key, "c-1");
    assert!(row.expires_at.is_some());

    let w = kv
        .put("carts", "c-1", &Cart { items: 3 }, Ttl::Forever)
        .await
        .unwrap();
    assert!(w.version.unwrap() > v1, "a new version on every write");
    let row = kv.get::<Cart>("carts", "c-1").await.unwrap().unwrap();
    assert_eq!(row.value.items, 3);
    assert_eq!(row.expires_at, None);

    assert!(kv.delete("carts", "c-1").await.unwrap());
    assert!(!kv.delete("carts", "c-1").await.unwrap(), "already gone");
    assert_eq!(kv.get::<Cart>("carts", "c-1").await.unwrap(), None);

    // A TTL lapses with broker time.
    kv.put("carts", "c-2", &Cart { items: 1 }, Ttl::seconds(5))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(6));
    assert_eq!(kv.get::<Cart>("carts", "c-2").await.unwrap(), None);
}

#[tokio::test]
async fn put_if_absent_loser_learns_the_winner() {
    let (_broker, client, _clock) = setup().await;
    let kv = client.kv();
    let win = kv
        .put_if_absent("claims", "job-9", &"worker-a", Ttl::minutes(5))
        .await
        .unwrap();
    assert!(win.applied);
    let lose = kv
        .put_if_absent("claims", "job-9", &"worker-b", Ttl::minutes(5))
        .await
        .unwrap();
    assert!(!lose.applied);
    assert_eq!(lose.reason, Some(KvReason::Exists));
    assert_eq!(
        lose.value_as::<String>().unwrap().as_deref(),
        Some("worker-a")
    );
    assert_eq!(lose.version, win.version);
}

#[tokio::test]
async fn incr_counts_and_batch_gates() {
    let (_broker, client, _clock) = setup().await;
    let kv = client.kv();
    let a = kv.incr("stats", "orders", 2, Ttl::Forever).await.unwrap();
    let b = kv.incr("stats", "orders", 3, Ttl::Forever).await.unwrap();
    assert!(a.applied && b.applied);
    assert_eq!(b.value_as::<i64>().unwrap(), Some(5));

    let count_once = || {
        vec![
            KvOp::from(
                Kv.put_if_absent("seen", "evt-1", &true, Ttl::days(1))
                    .required(),
            ),
            Kv.incr("stats", "events", 1, Ttl::Forever).into(),
            Kv.get("stats", "orders").into(),
        ]
    };
    let first = kv.batch(count_once()).await.unwrap();
    let KvBatch::Applied { results, retried } = first else {
        panic!("expected applied, got {first:?}");
    };
    assert!(!retried);
    assert_eq!(results.len(), 3);
    assert_eq!(results[1].value, Some(json!(1)));
    assert_eq!(results[2].found, Some(true));
    assert_eq!(results[2].value, Some(json!(5)));

    match kv.batch(count_once()).await.unwrap() {
        KvBatch::Gated { gate, .. } => {
            assert_eq!((gate.index, gate.slot), (0, 0));
            assert_eq!(gate.reason, KvReason::Exists);
            assert_eq!(gate.value, Some(json!(true)));
        }
        other => panic!("expected gated, got {other:?}"),
    }
    let events = kv.get::<i64>("stats", "events").await.unwrap().unwrap();
    assert_eq!(events.value, 1, "the gated batch wrote nothing");

    // Limits are checked before sending.
    let err = kv
        .batch(vec![Kv.put("Bad NS", "k", &1, Ttl::Forever)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    let err = kv
        .batch(vec![Kv.put("ok", "k", &1, Ttl::seconds(0))])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "a zero TTL: {err:?}");
}

#[tokio::test]
async fn a_timer_fires_when_broker_time_comes() {
    let (_broker, client, clock) = setup().await;
    let timers = client.timers();
    let set = timers
        .schedule("reminders", "order-7", |t| {
            t.after(Duration::from_secs(60))
                .partition("p")
                .txn("remind-order-7")
                .payload(&json!({"orderId": "order-7"}))
        })
        .await
        .unwrap();
    assert!(set.ok, "{set:?}");
    assert_eq!(set.status, queen_sdk::TimerStatus::Scheduled);
    assert_eq!(set.txn.as_deref(), Some("remind-order-7"));
    let message_id = set.message_id.clone().expect("a message id");

    let pending = timers
        .peek("reminders", "order-7")
        .await
        .unwrap()
        .expect("pending");
    assert_eq!(pending.txn.as_deref(), Some("remind-order-7"));
    assert_eq!(
        pending.payload_json::<Value>().unwrap(),
        Some(json!({"orderId": "order-7"}))
    );
    let page = timers.list("reminders", None, 10).await.unwrap();
    assert_eq!(page.rows.len(), 1);
    assert_eq!(page.rows[0].timer_key, "order-7");
    assert_eq!(page.next_after, None);

    // Not before its time.
    let early = client.pop::<Value>("reminders").send().await.unwrap();
    assert!(early.is_empty());

    clock.advance(Duration::from_secs(61));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let fired = loop {
        let got = client.pop::<Value>("reminders").send().await.unwrap();
        if !got.is_empty() {
            break got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the timer did not fire within 2 s"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(fired.len(), 1);
    assert_eq!(fired[0].id, message_id);
    assert_eq!(fired[0].transaction_id, "remind-order-7");
    assert_eq!(fired[0].partition, "p");
    assert_eq!(fired[0].data, json!({"orderId": "order-7"}));
    assert_eq!(timers.peek("reminders", "order-7").await.unwrap(), None);
}

#[tokio::test]
async fn timers_reschedule_cancel_and_page() {
    let (_broker, client, _clock) = setup().await;
    let timers = client.timers();
    for key in ["a", "b", "c"] {
        let r = timers
            .schedule("later", key, |t| {
                t.after(Duration::from_secs(3600)).payload(&key)
            })
            .await
            .unwrap();
        assert_eq!(r.status, queen_sdk::TimerStatus::Scheduled);
        assert!(r.txn.is_some(), "the SDK always sends a txn");
    }
    let r = timers
        .reschedule("later", "a", |t| t.after(Duration::from_secs(7200)))
        .await
        .unwrap();
    assert_eq!(r.status, queen_sdk::TimerStatus::Rescheduled);
    let r = timers
        .reschedule("later", "d", |t| t.after(Duration::from_secs(10)))
        .await
        .unwrap();
    assert_eq!(
        r.status,
        queen_sdk::TimerStatus::Scheduled,
        "an absent key is scheduled"
    );

    let c = timers.cancel("later", "b").await.unwrap();
    assert!(c.ok);
    assert_eq!(c.status, queen_sdk::TimerStatus::Cancelled);
    let c = timers.cancel("later", "b").await.unwrap();
    assert!(!c.ok);
    assert_eq!(c.status, queen_sdk::TimerStatus::Absent);

    let first = timers.list("later", None, 2).await.unwrap();
    let keys: Vec<_> = first.rows.iter().map(|r| r.timer_key.as_str()).collect();
    assert_eq!(keys, ["a", "c"]);
    let after = first.next_after.expect("more");
    let second = timers.list("later", Some(&after), 2).await.unwrap();
    let keys: Vec<_> = second.rows.iter().map(|r| r.timer_key.as_str()).collect();
    assert_eq!(keys, ["d"]);
    assert_eq!(second.next_after, None);

    // An empty key is refused before sending (a timer without a delay does not compile).
    let err = timers
        .schedule("later", "", |t| t.after(Duration::from_secs(1)))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
}
