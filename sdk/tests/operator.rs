//! End to end against the in-process reference broker: the operator reads (queues,
//! partitions, depth, consumer groups and their lag, message detail and listing) and
//! the hand actions on dead letters (retry, delete), with real figures.

use std::time::Duration;

use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{
    AckStatus, Client, DlqQuery, Error, GroupState, MessageQuery, MessageStatus, PushItem,
    QueueOptions, SubscriptionMode,
};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Order {
    id: u32,
}

async fn broker_with_clock() -> (MockBroker, Client, ManualClock) {
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

async fn push(client: &Client, queue: &str, partition: &str, ids: std::ops::Range<u32>) {
    let items = ids
        .map(|id| {
            PushItem::new(queue, &Order { id })
                .partition(partition)
                .transaction_id(format!("{queue}-{partition}-{id}"))
        })
        .collect();
    client.push(items).await.unwrap();
}

#[tokio::test]
async fn queue_stats_count_each_partition_by_where_its_messages_stand() {
    let (broker, client, _clock) = broker_with_clock().await;
    client
        .configure(
            "orders",
            QueueOptions::new().retry_limit(0).namespace("shop"),
        )
        .await
        .unwrap();
    push(&client, "orders", "a", 0..5).await;
    push(&client, "orders", "b", 0..1).await;
    // On a: 0 and 1 completed, 2 dead-lettered (retryLimit 0), 3 leased, 4 pending.
    let two = client
        .pop::<Order>("orders")
        .partition("a")
        .batch(2)
        .send()
        .await
        .unwrap();
    client.ack(&two[1], AckStatus::Completed).await.unwrap();
    let third = client
        .pop::<Order>("orders")
        .partition("a")
        .batch(1)
        .send()
        .await
        .unwrap()
        .remove(0);
    let out = client
        .ack(
            &third,
            AckStatus::Failed {
                error: "declined".into(),
            },
        )
        .await
        .unwrap();
    assert!(out.dlq, "{out:?}");
    client
        .pop::<Order>("orders")
        .partition("a")
        .batch(1)
        .send()
        .await
        .unwrap();

    let q = client.queue_stats("orders").await.unwrap();
    assert_eq!(q.name, "orders");
    assert_eq!(q.namespace.as_deref(), Some("shop"));
    assert_eq!(q.config.retry_limit, Some(0));
    assert_eq!(q.partitions.len(), 2);
    let a = q.partition("a").unwrap();
    assert_eq!(
        (
            a.stats.total,
            a.stats.pending,
            a.stats.processing,
            a.stats.completed,
            a.stats.dead_letter
        ),
        (5, 1, 1, 3, 1),
        "{a:?}"
    );
    assert_eq!((a.first_offset, a.next_offset), (Some(0), Some(5)));
    assert_eq!(a.id, third.partition_id);
    assert!(a.retained_bytes.unwrap() > 0);
    let b = q.partition("b").unwrap();
    assert_eq!(
        (b.stats.total, b.stats.pending, b.stats.completed),
        (1, 1, 0)
    );
    assert_eq!((q.totals.total, q.totals.dead_letter), (6, 1));

    let listed = client.list_queues().await.unwrap();
    assert_eq!(listed.len(), 1);
    let row = &listed[0];
    assert_eq!((row.name.as_str(), row.partitions), ("orders", 2));
    assert_eq!(row.messages, q.totals, "the list counts as the detail does");

    // Queue level: 3 and 4 on a (3 is leased, not yet read), and all of b.
    let depth = client.queue_depth("orders", None).await.unwrap();
    assert_eq!(depth.group, None);
    let by_partition: Vec<(&str, u64)> = depth
        .partitions
        .iter()
        .map(|p| (p.partition.as_str(), p.pending))
        .collect();
    assert_eq!(by_partition, [("a", 2), ("b", 1)], "{depth:?}");
    assert_eq!((depth.pending, depth.partitions_pending), (3, Some(2)));
    assert_eq!(depth.effective_pending, Some(3));

    let ranked = client
        .busiest_partitions(Some("orders"), None)
        .await
        .unwrap();
    let names: Vec<&str> = ranked.iter().map(|r| r.partition.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert_eq!((ranked[0].pending, ranked[0].processing), (1, 1));

    let missing = client.queue_stats("nope").await.unwrap_err();
    assert!(missing.is_not_found(), "{missing}");
    assert_eq!(missing.code(), Some("not_found"));
    assert!(
        client
            .queue_depth("nope", None)
            .await
            .unwrap_err()
            .is_not_found()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn a_dead_letter_is_read_back_replayed_and_deleted_by_hand() {
    let (broker, client, _clock) = broker_with_clock().await;
    client
        .configure("payments", QueueOptions::new().retry_limit(1))
        .await
        .unwrap();
    push(&client, "payments", "p", 0..2).await;
    let group = "billing";
    let pop = || {
        client
            .pop::<Order>("payments")
            .group(group)
            .subscription(SubscriptionMode::All)
            .batch(1)
    };
    // Two failed attempts at a retry limit of 1: the second dead-letters it.
    for attempt in 1..=2 {
        let msg = pop().send().await.unwrap().remove(0);
        assert_eq!(msg.data, Order { id: 0 });
        assert_eq!(msg.delivery_attempt, Some(attempt));
        let d = client
            .message::<Order>(&msg.partition_id, &msg.transaction_id)
            .await
            .unwrap();
        assert_eq!(d.status, MessageStatus::Processing);
        let g = &d.consumer_groups[0];
        assert_eq!(g.lease_id.as_deref(), Some(msg.lease_id.as_str()));
        assert_eq!(
            (g.delivery_attempts, g.failures, d.retry_count),
            (
                u64::from(attempt),
                u64::from(attempt) - 1,
                u64::from(attempt) - 1
            )
        );
        let out = client
            .ack(
                &msg,
                AckStatus::Failed {
                    error: format!("card declined #{attempt}"),
                },
            )
            .await
            .unwrap();
        assert_eq!(out.dlq, attempt == 2, "{out:?}");
    }
    let page = client
        .dlq::<Order>(DlqQuery::queue("payments"))
        .await
        .unwrap();
    assert_eq!(page.total, 1);
    let dead = page.messages[0].clone();
    assert_eq!(dead.transaction_id, "payments-p-0");

    // The message's detail: dead for the group, with both failures counted.
    let d = client
        .message::<Order>(&dead.partition_id, &dead.transaction_id)
        .await
        .unwrap();
    assert_eq!(d.id, dead.id);
    assert_eq!(d.data, Order { id: 0 });
    assert_eq!(
        (d.queue.as_str(), d.partition.as_str(), d.offset),
        ("payments", "p", Some(0))
    );
    assert_eq!(d.status, MessageStatus::DeadLetter);
    assert_eq!(d.queue_config.as_ref().unwrap().retry_limit, Some(1));
    let g = &d.consumer_groups[0];
    assert_eq!(
        (g.name.as_str(), &g.status),
        (group, &MessageStatus::DeadLetter)
    );
    assert_eq!((g.cursor, g.lease_id.as_deref()), (Some(1), None));
    // The DLQ row keeps the failures and the last reason; the detail agrees.
    assert_eq!(dead.retry_count, 2);
    assert_eq!((d.retry_count, g.failures), (2, 2));
    assert_eq!(dead.error_message.as_deref(), Some("card declined #2"));

    // The listing shows it dead, with the live one pending.
    let listed = client
        .messages(MessageQuery::queue("payments"))
        .await
        .unwrap();
    let rows: Vec<(Option<&str>, &MessageStatus, Option<u64>)> = listed
        .messages
        .iter()
        .map(|m| (m.transaction_id.as_deref(), &m.status, m.offset))
        .collect();
    assert_eq!(
        rows,
        [
            (Some("payments-p-1"), &MessageStatus::Pending, Some(1)),
            (Some("payments-p-0"), &MessageStatus::DeadLetter, Some(0)),
        ]
    );
    assert_eq!(
        listed.messages[1].partition_id.as_deref(),
        Some(dead.partition_id.as_str())
    );
    assert_eq!(listed.mode.as_ref().map(|m| m.kind.as_str()), Some("bus"));
    let only_dead = client
        .messages(MessageQuery::all().status(MessageStatus::DeadLetter))
        .await
        .unwrap();
    assert_eq!(only_dead.messages.len(), 1);

    // A live message is neither replayed nor deleted: 404, typed.
    let live = pop().send().await.unwrap().remove(0);
    assert_eq!(live.transaction_id, "payments-p-1");
    for err in [
        client
            .retry_message(&live.partition_id, &live.transaction_id)
            .await
            .unwrap_err(),
        client
            .delete_message(&live.partition_id, &live.transaction_id)
            .await
            .unwrap_err(),
    ] {
        assert!(err.is_not_found(), "{err}");
        assert_eq!(err.status(), Some(404));
    }
    client.ack(&live, AckStatus::Completed).await.unwrap();

    // Replay: appended to the partition, out of the DLQ, delivered again.
    let replay = client
        .retry_message(&dead.partition_id, &dead.transaction_id)
        .await
        .unwrap();
    assert_eq!(replay.transaction_id, dead.transaction_id);
    assert_eq!(replay.partition_id, dead.partition_id);
    assert_eq!(
        (replay.queue.as_deref(), replay.partition.as_deref()),
        (Some("payments"), Some("p"))
    );
    assert_eq!(
        (replay.offset, replay.dead_letters_removed),
        (Some(2), Some(1))
    );
    let new_id = replay.message_id.clone().unwrap();
    assert_ne!(new_id, dead.id);
    assert_eq!(
        client
            .dlq::<Order>(DlqQuery::queue("payments"))
            .await
            .unwrap()
            .total,
        0
    );
    let again = pop().send().await.unwrap().remove(0);
    assert_eq!(
        (again.id.as_str(), &again.data),
        (new_id.as_str(), &Order { id: 0 })
    );
    assert_eq!(again.offset, Some(2));
    // A second replay finds no dead letter.
    assert!(
        client
            .retry_message(&dead.partition_id, &dead.transaction_id)
            .await
            .unwrap_err()
            .is_not_found()
    );

    // Dead-letter the replay and delete it by hand this time.
    client.ack(&again, AckStatus::Dlq).await.unwrap();
    assert_eq!(
        client
            .dlq::<Order>(DlqQuery::queue("payments"))
            .await
            .unwrap()
            .total,
        1
    );
    let deleted = client
        .delete_message(&again.partition_id, &again.transaction_id)
        .await
        .unwrap();
    assert_eq!(deleted.dead_letters_removed, Some(1));
    assert_eq!((deleted.message_id, deleted.offset), (None, None));
    assert_eq!(
        client
            .dlq::<Order>(DlqQuery::queue("payments"))
            .await
            .unwrap()
            .total,
        0
    );
    assert!(
        client
            .delete_message(&again.partition_id, &again.transaction_id)
            .await
            .unwrap_err()
            .is_not_found()
    );
    // The log is not edited: the replay is still there (its address now names it),
    // and with its dead letter gone the group's cursor past it counts it completed.
    let d = client
        .message::<Order>(&again.partition_id, &again.transaction_id)
        .await
        .unwrap();
    assert_eq!((d.id.as_str(), d.offset), (new_id.as_str(), Some(2)));
    assert_eq!(d.status, MessageStatus::Completed);
    assert_eq!(
        client.queue_stats("payments").await.unwrap().totals.total,
        3
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn consumer_groups_show_their_lag_and_the_lagging_read_filters_by_age() {
    let (broker, client, clock) = broker_with_clock().await;
    push(&client, "orders", "eu", 0..3).await;
    push(&client, "refunds", "eu", 0..1).await;
    // billing: 2 of 3 done on orders; all of refunds.
    let got = client
        .pop::<Order>("orders")
        .group("billing")
        .subscription(SubscriptionMode::All)
        .batch(2)
        .send()
        .await
        .unwrap();
    client.ack(&got[1], AckStatus::Completed).await.unwrap();
    client
        .pop::<Order>("refunds")
        .group("billing")
        .subscription(SubscriptionMode::All)
        .auto_ack()
        .send()
        .await
        .unwrap();
    // audit holds one of orders under a lease.
    let held = client
        .pop::<Order>("orders")
        .group("audit")
        .subscription(SubscriptionMode::All)
        .lease(Duration::from_secs(3600))
        .batch(1)
        .send()
        .await
        .unwrap();
    clock.advance(Duration::from_secs(600));

    let groups = client.consumer_groups().await.unwrap();
    let find = |name: &str, queue: &str| {
        groups
            .iter()
            .find(|g| g.name == name && g.queue_name == queue)
            .unwrap_or_else(|| panic!("{name} on {queue}: {groups:?}"))
    };
    let billing = find("billing", "orders");
    assert_eq!(
        (
            billing.members,
            billing.partitions_with_lag,
            billing.total_lag
        ),
        (1, 1, 1)
    );
    assert_eq!(billing.max_time_lag_seconds, 600);
    assert_eq!(billing.max_time_lag(), Duration::from_secs(600));
    assert_eq!(billing.state, GroupState::Lagging, "over 300 s behind");
    assert_eq!(billing.subscription_mode.as_deref(), Some("all"));
    let refunds = find("billing", "refunds");
    assert_eq!(
        (refunds.total_lag, &refunds.state),
        (0, &GroupState::Stable)
    );
    assert_eq!(find("audit", "orders").total_lag, 3);
    assert!(
        groups.iter().all(|g| g.name != queen_sdk::QUEUE_MODE),
        "{groups:?}"
    );

    let detail = client.consumer_group("billing").await.unwrap();
    assert_eq!(detail.group, "billing");
    assert_eq!(
        detail.queues.keys().map(String::as_str).collect::<Vec<_>>(),
        ["orders", "refunds"]
    );
    let p = &detail.partitions("orders")[0];
    assert_eq!(p.partition, "eu");
    assert_eq!(p.partition_id, got[0].partition_id);
    assert_eq!(
        (p.cursor, p.total_consumed, p.offset_lag),
        (Some(2), Some(2), 1)
    );
    assert_eq!((p.time_lag_seconds, p.lease_active), (600, false));
    assert_eq!(detail.partitions("refunds")[0].offset_lag, 0);
    assert_eq!(detail.total_lag(), 1);
    let audit = client.consumer_group("audit").await.unwrap();
    let a = &audit.partitions("orders")[0];
    assert_eq!((a.cursor, a.offset_lag, a.lease_active), (Some(0), 3, true));
    assert!(a.lease_expires_at.is_some());
    drop(held);
    let nobody = client.consumer_group("nobody").await.unwrap();
    assert!(nobody.queues.is_empty());
    assert_eq!(nobody.total_lag(), 0);

    // Lagging: both groups are 600 s behind on orders; nothing on refunds.
    let lagging = client
        .lagging_groups(Duration::from_secs(300))
        .await
        .unwrap();
    let mut rows: Vec<(&str, &str, &str, u64, u64)> = lagging
        .iter()
        .map(|r| {
            (
                r.consumer_group.as_str(),
                r.queue_name.as_str(),
                r.partition_name.as_str(),
                r.offset_lag,
                r.time_lag_seconds,
            )
        })
        .collect();
    rows.sort();
    assert_eq!(
        rows,
        [
            ("audit", "orders", "eu", 3, 600),
            ("billing", "orders", "eu", 1, 600)
        ]
    );
    assert!(lagging.iter().all(|r| r.lag_hours == Some(0.17)));
    assert!(lagging.iter().all(|r| r.oldest_unconsumed_at.is_some()));
    assert!(
        client
            .lagging_groups(Duration::from_secs(600))
            .await
            .unwrap()
            .is_empty(),
        "the threshold is strict: 600 s is not more than 600 s"
    );
    // The default a dashboard uses is an hour.
    assert!(
        client
            .lagging_groups(Duration::from_secs(3600))
            .await
            .unwrap()
            .is_empty()
    );
    broker.shutdown().await;
}

#[tokio::test]
async fn ids_with_slashes_and_spaces_are_escaped_in_the_path() {
    let (broker, client, _clock) = broker_with_clock().await;
    let txn = "orders/2026 10/o-7?x=1#frag";
    client
        .push(vec![
            PushItem::new("orders", &Order { id: 7 }).transaction_id(txn),
        ])
        .await
        .unwrap();
    let msg = client
        .pop::<Order>("orders")
        .send()
        .await
        .unwrap()
        .remove(0);
    let d = client
        .message::<Order>(&msg.partition_id, txn)
        .await
        .unwrap();
    assert_eq!(
        (d.transaction_id.as_str(), d.status),
        (txn, MessageStatus::Processing)
    );
    client.ack(&msg, AckStatus::Dlq).await.unwrap();
    let replay = client.retry_message(&msg.partition_id, txn).await.unwrap();
    assert_eq!(replay.transaction_id, txn);
    // A partition id the broker never minted names no message.
    let foreign = client
        .message::<Order>("not-a-partition", txn)
        .await
        .unwrap_err();
    assert!(foreign.is_not_found(), "{foreign}");
    broker.shutdown().await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    let (broker, client, _clock) = broker_with_clock().await;
    let long = "q".repeat(1025);
    let invalid = |r: Result<(), Error>, want: &str| match r {
        Err(Error::Invalid { op, rule }) => assert_eq!(op, want, "{rule}"),
        other => panic!("{want}: expected Invalid, got {other:?}"),
    };
    invalid(client.queue_stats("").await.map(drop), "queue_stats");
    invalid(client.queue_stats(&long).await.map(drop), "queue_stats");
    invalid(client.queue_depth("", None).await.map(drop), "queue_depth");
    invalid(
        client.queue_depth("orders", Some("")).await.map(drop),
        "queue_depth",
    );
    invalid(
        client.busiest_partitions(Some(""), None).await.map(drop),
        "busiest_partitions",
    );
    invalid(
        client.busiest_partitions(None, Some(0)).await.map(drop),
        "busiest_partitions",
    );
    invalid(client.consumer_group("").await.map(drop), "consumer_group");
    invalid(
        client.consumer_group("lagging").await.map(drop),
        "consumer_group",
    );
    invalid(client.message::<Order>("", "t").await.map(drop), "message");
    invalid(client.message::<Order>("1", "").await.map(drop), "message");
    invalid(
        client
            .message::<Order>("1", &"t".repeat(65_536))
            .await
            .map(drop),
        "message",
    );
    invalid(
        client.retry_message("", "t").await.map(drop),
        "retry_message",
    );
    invalid(
        client.retry_message("1", "").await.map(drop),
        "retry_message",
    );
    invalid(
        client.delete_message("", "t").await.map(drop),
        "delete_message",
    );
    invalid(
        client.delete_message("1", "").await.map(drop),
        "delete_message",
    );
    invalid(
        client.messages(MessageQuery::queue("")).await.map(drop),
        "messages",
    );
    invalid(
        client
            .messages(MessageQuery::queue("orders").partition(""))
            .await
            .map(drop),
        "messages",
    );
    for limit in [0, 1001] {
        invalid(
            client
                .messages(MessageQuery::all().limit(limit))
                .await
                .map(drop),
            "messages",
        );
    }
    assert!(
        broker.requests().entries().is_empty(),
        "nothing may reach the broker: {:?}",
        broker.requests().entries()
    );
    // The boundaries are sent.
    client
        .messages(MessageQuery::all().limit(1000))
        .await
        .unwrap();
    client.busiest_partitions(None, Some(1)).await.unwrap();
    assert_eq!(broker.requests().entries().len(), 2);
    broker.shutdown().await;
}

#[tokio::test]
async fn an_empty_broker_answers_empty_reads() {
    let (broker, client, _clock) = broker_with_clock().await;
    assert!(client.list_queues().await.unwrap().is_empty());
    assert!(client.consumer_groups().await.unwrap().is_empty());
    assert!(
        client
            .lagging_groups(Duration::ZERO)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        client
            .busiest_partitions(None, None)
            .await
            .unwrap()
            .is_empty()
    );
    let page = client.messages(MessageQuery::all()).await.unwrap();
    assert!(page.messages.is_empty());
    assert_eq!((page.limit, page.offset), (Some(200), Some(0)));
    broker.shutdown().await;
}

/// The Queen server's shapes differ from the reference broker's in ways these reads
/// must survive: rows keyed by a transaction-id hash with the partition in `segment`,
/// figures as numeric strings, keys left out, a payload sent only as `payload`, unknown
/// keys, and a 404 `no_such_route` that is not a missing queue.
#[tokio::test]
async fn answers_shaped_by_another_broker_still_decode() {
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let client = Client::builder()
        .url(server.uri())
        .retry(queen_sdk::RetryPolicy::none())
        .build()
        .unwrap();
    let answer = |m: &str, p: &str, status: u16, body: serde_json::Value| {
        Mock::given(method(m))
            .and(path(p.to_string()))
            .respond_with(ResponseTemplate::new(status).set_body_json(body))
    };
    answer(
        "GET",
        "/api/v1/messages",
        200,
        json!({"messages": [{"id": "m1", "txnHash": "ab12", "queue": "q", "partition": "p",
                "status": "archived", "segment": {"partitionId": 42, "offset": "7"}, "extra": true}],
               "total": 1}),
    )
    .mount(&server)
    .await;
    answer(
        "GET",
        "/api/v1/resources/queues/q",
        200,
        json!({"name": "q", "totals": {"total": "12", "pending": 3.0, "deadLetter": null},
               "partitions": [{"id": 42, "name": "p", "stats": {"total": 12}}], "shinyNewKey": {}}),
    )
    .mount(&server)
    .await;
    answer(
        "GET",
        "/api/v1/messages/42/t-1",
        200,
        json!({"id": "m1", "transactionId": "t-1", "partitionId": 42, "status": "completed",
               "payload": {"n": 1}}),
    )
    .mount(&server)
    .await;
    answer(
        "GET",
        "/api/v1/consumer-groups",
        200,
        json!([{"name": "g", "queueName": "q", "state": "Rebalancing", "maxTimeLag": 12.5,
                "totalLag": "4"}]),
    )
    .mount(&server)
    .await;
    answer(
        "GET",
        "/api/v1/resources/queues/old/depth",
        404,
        json!({"error": "no such route", "code": "no_such_route"}),
    )
    .mount(&server)
    .await;

    let page = client.messages(MessageQuery::all()).await.unwrap();
    let row = &page.messages[0];
    assert_eq!(
        (row.transaction_id.as_deref(), row.txn_hash.as_deref()),
        (None, Some("ab12"))
    );
    assert_eq!(
        (row.partition_id.as_deref(), row.offset),
        (Some("42"), Some(7))
    );
    assert_eq!(row.status, MessageStatus::Other("archived".into()));
    assert_eq!((page.limit, page.mode.is_none()), (None, true));

    let q = client.queue_stats("q").await.unwrap();
    assert_eq!(
        (q.totals.total, q.totals.pending, q.totals.dead_letter),
        (12, 3, 0)
    );
    assert_eq!(
        (q.partitions[0].id.as_str(), q.partitions[0].first_offset),
        ("42", None)
    );
    assert_eq!(q.config, queen_sdk::QueueSettings::default());

    let d = client
        .message::<serde_json::Value>("42", "t-1")
        .await
        .unwrap();
    assert_eq!(
        (d.partition_id.as_str(), d.data["n"].as_u64()),
        ("42", Some(1))
    );
    assert!(d.consumer_groups.is_empty() && d.queue_config.is_none());

    let g = &client.consumer_groups().await.unwrap()[0];
    assert_eq!(g.state, GroupState::Other("Rebalancing".into()));
    assert_eq!((g.max_time_lag_seconds, g.total_lag, g.members), (12, 4, 0));

    let err = client.queue_depth("old", None).await.unwrap_err();
    assert_eq!(err.status(), Some(404));
    assert!(
        !err.is_not_found(),
        "a missing route is not a missing queue"
    );
}
