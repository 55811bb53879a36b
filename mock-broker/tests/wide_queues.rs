//! Wildcard pops on queues of many partitions: every partition with work is reached,
//! whatever made it claimable (a push, a lapsed lease, a delay running out, an ack), for
//! every group. These go through the writer's index of candidates (`engine::ready`);
//! debug builds also check, at every wildcard pop that finds nothing, that no partition
//! was claimable.

mod common;

use std::collections::BTreeSet;

use common::{Harness, txns};
use serde_json::json;

/// One message in each of `n` partitions `p0..`, transaction ids `m{i}`.
async fn spread(h: &Harness, queue: &str, n: usize) {
    let items: Vec<_> = (0..n)
        .map(|i| json!({"queue": queue, "partition": format!("p{i}"), "transactionId": format!("m{i}"), "payload": i}))
        .collect();
    for chunk in items.chunks(500) {
        h.push(json!(chunk)).await;
    }
}

#[tokio::test]
async fn every_partition_of_a_wide_queue_is_reached_exactly_once() {
    let h = Harness::new().await;
    spread(&h, "wide", 1_000).await;
    let mut seen = BTreeSet::new();
    while let Some(p) = h.pop("/api/v1/pop/queue/wide?autoAck=true").await {
        for t in txns(&p) {
            assert!(seen.insert(t.clone()), "{t} delivered twice");
        }
    }
    assert_eq!(seen.len(), 1_000, "every message, then an empty pop");
    // Work arriving later in any partition is found at once.
    h.push_one("wide", "p734", "late", json!(0)).await;
    let p = h.pop("/api/v1/pop/queue/wide?autoAck=true").await.unwrap();
    assert_eq!(txns(&p), ["late"]);
    assert!(h.pop("/api/v1/pop/queue/wide?autoAck=true").await.is_none());
}

#[tokio::test]
async fn a_lapsed_lease_among_many_is_found_again_and_an_ack_frees_nothing_more() {
    let h = Harness::new().await;
    h.configure("wide", json!({"leaseTime": 30})).await;
    spread(&h, "wide", 300).await;
    let mut held = Vec::new();
    while let Some(p) = h.pop("/api/v1/pop/queue/wide").await {
        held.push(p["messages"][0].clone());
    }
    assert_eq!(held.len(), 300, "one lease per partition");
    let kept = held.remove(150);
    for m in &held {
        h.ack_msg(m, "completed").await;
    }
    assert!(
        h.pop("/api/v1/pop/queue/wide").await.is_none(),
        "the one left is still leased"
    );
    h.advance(31);
    let again = h.pop("/api/v1/pop/queue/wide").await.unwrap();
    assert_eq!(again["messages"][0]["transactionId"], kept["transactionId"]);
    assert_eq!(again["messages"][0]["deliveryAttempt"], 2);
    h.ack_msg(&again["messages"][0], "completed").await;
    assert!(h.pop("/api/v1/pop/queue/wide").await.is_none());
}

#[tokio::test]
async fn a_nack_among_many_partitions_is_delivered_again() {
    let h = Harness::new().await;
    spread(&h, "wide", 200).await;
    let mut first = None;
    for _ in 0..200 {
        let p = h.pop("/api/v1/pop/queue/wide").await.unwrap();
        let m = p["messages"][0].clone();
        if first.is_none() {
            first = Some(m);
        } else {
            h.ack_msg(&m, "completed").await;
        }
    }
    let first = first.unwrap();
    h.ack_msg(&first, "failed").await;
    let again = h.pop("/api/v1/pop/queue/wide").await.unwrap();
    assert_eq!(
        again["messages"][0]["transactionId"],
        first["transactionId"]
    );
}

#[tokio::test]
async fn a_delayed_message_in_a_wide_queue_is_claimable_when_due() {
    let h = Harness::new().await;
    h.configure("slow", json!({"delayedProcessing": 10})).await;
    spread(&h, "slow", 100).await;
    assert!(h.pop("/api/v1/pop/queue/slow?autoAck=true").await.is_none());
    h.advance(11);
    let mut n = 0;
    while h.pop("/api/v1/pop/queue/slow?autoAck=true").await.is_some() {
        n += 1;
    }
    assert_eq!(n, 100);
}

#[tokio::test]
async fn each_group_reads_a_wide_queue_whole_and_a_seek_rewinds_it() {
    let h = Harness::new().await;
    spread(&h, "wide", 150).await;
    for g in ["a", "b", "c"] {
        let mut seen = BTreeSet::new();
        while let Some(p) = h
            .pop(&format!(
                "/api/v1/pop/queue/wide?autoAck=true&consumerGroup={g}&subscriptionMode=all"
            ))
            .await
        {
            seen.extend(txns(&p));
        }
        assert_eq!(seen.len(), 150, "group {g}");
    }
    let (s, b) = h
        .post(
            "/api/v1/consumer-groups/b/queues/wide/seek",
            json!({"timestamp": "1970-01-01T00:00:00Z"}),
        )
        .await;
    assert_eq!(s, 200, "{b}");
    let mut again = 0;
    while h
        .pop("/api/v1/pop/queue/wide?autoAck=true&consumerGroup=b")
        .await
        .is_some()
    {
        again += 1;
    }
    assert_eq!(
        again, 150,
        "the seek made every partition readable again for b"
    );
    assert!(
        h.pop("/api/v1/pop/queue/wide?autoAck=true&consumerGroup=a")
            .await
            .is_none(),
        "and for b alone"
    );
}
