//! End to end against the in-process reference broker: locks, their guards, and the
//! handle's background renewal.

use std::time::Duration;

use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{Client, Commit, Error, Ttl};

async fn setup() -> (MockBroker, Client) {
    let broker = MockBroker::start_in_memory().await.unwrap();
    let client = Client::new(broker.url()).unwrap();
    (broker, client)
}

fn guarded_put(
    client: &Client,
    lock: &queen_sdk::Lock,
    value: &str,
) -> queen_sdk::TransactionBuilder {
    client
        .transaction()
        .guard(&lock.guard())
        .kv(|k| k.put("reports", "nightly", &value, Ttl::days(1)))
}

#[tokio::test]
async fn a_held_lock_refuses_a_second_holder_and_its_guard_gates_transactions() {
    let (_broker, client) = setup().await;
    let lock = client
        .lock("nightly-report")
        .ttl(Duration::from_secs(30))
        .owner("worker-a")
        .acquire()
        .await
        .unwrap()
        .expect("acquired");
    assert_eq!(lock.name(), "nightly-report");
    assert_eq!(lock.slot(), 0);
    assert_eq!(lock.owner(), "worker-a");
    assert!(!lock.was_already_held());
    assert!(!lock.is_lost());

    let second = client
        .lock("nightly-report")
        .owner("worker-b")
        .acquire()
        .await
        .unwrap();
    assert!(second.is_none(), "held by worker-a");

    // The guard lets a transaction commit while the lock is held.
    let held = guarded_put(&client, &lock, "first").commit().await.unwrap();
    assert!(held.is_committed(), "{held:?}");

    let stale = guarded_put(&client, &lock, "second");
    assert!(lock.release().await.unwrap(), "released");

    // After release the same guard gates the transaction: nothing is written.
    match stale.commit().await.unwrap() {
        Commit::Gated { .. } => {}
        other => panic!("expected gated after release, got {other:?}"),
    }
    let row = client
        .kv()
        .get::<String>("reports", "nightly")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.value, "first");

    // Free again.
    let again = client.lock("nightly-report").acquire().await.unwrap();
    assert!(again.is_some());
}

#[tokio::test]
async fn a_semaphore_hands_out_limit_slots_and_an_owner_reacquires_its_own() {
    let (_broker, client) = setup().await;
    let a = client
        .lock("exports")
        .limit(2)
        .owner("a")
        .acquire()
        .await
        .unwrap()
        .unwrap();
    let b = client
        .lock("exports")
        .limit(2)
        .owner("b")
        .acquire()
        .await
        .unwrap()
        .unwrap();
    assert_ne!(a.slot(), b.slot());
    let c = client
        .lock("exports")
        .limit(2)
        .owner("c")
        .acquire()
        .await
        .unwrap();
    assert!(c.is_none(), "contended");

    let a2 = client
        .lock("exports")
        .limit(2)
        .owner("a")
        .acquire()
        .await
        .unwrap()
        .unwrap();
    assert!(a2.was_already_held());
    assert_eq!(a2.guard(), a.guard());
    drop(a2);

    let err = client.lock("exports").limit(0).acquire().await.unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
}

#[tokio::test]
async fn background_renewal_keeps_the_lock_past_its_ttl() {
    // Real time: a 2 s TTL renews about every 0.67 s.
    let (_broker, client) = setup().await;
    let lock = client
        .lock("renewed")
        .ttl(Duration::from_secs(2))
        .acquire()
        .await
        .unwrap()
        .unwrap();
    let first = lock.guard();
    tokio::time::sleep(Duration::from_millis(3_000)).await;

    assert!(!lock.is_lost());
    let now = lock.guard();
    assert!(now.token > first.token, "renewals mint new tokens");
    let other = client.lock("renewed").acquire().await.unwrap();
    assert!(other.is_none(), "still held past the first TTL");
    let held = guarded_put(&client, &lock, "renewed")
        .commit()
        .await
        .unwrap();
    assert!(held.is_committed(), "{held:?}");
    // The first token is stale.
    let stale = client
        .transaction()
        .guard(&first)
        .kv(|k| k.put("reports", "x", &1, Ttl::days(1)))
        .commit()
        .await
        .unwrap();
    assert!(!stale.is_committed());
}

#[tokio::test]
async fn a_lock_whose_hold_lapsed_reports_lost() {
    // Broker time moves past the TTL between two renewals: the next renewal finds the
    // hold gone and `lost()` resolves.
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .in_memory()
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let client = Client::new(broker.url()).unwrap();
    let lock = client
        .lock("lapsing")
        .ttl(Duration::from_secs(1))
        .acquire()
        .await
        .unwrap()
        .unwrap();
    clock.advance(Duration::from_secs(5));
    // Someone else takes it meanwhile.
    let thief = client.lock("lapsing").acquire().await.unwrap();
    assert!(thief.is_some());
    tokio::time::timeout(Duration::from_secs(2), lock.lost())
        .await
        .expect("lost within 2 s");
    assert!(lock.is_lost());
    assert!(!lock.release().await.unwrap(), "nothing to release");
    drop(thief);
}
