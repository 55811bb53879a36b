//! A read sees every write answered before it. On a file the writer may hold answered
//! batches (synced in the write-ahead log) in its open redb transaction while more
//! commands queue; reads must find them all the same.

mod common;

use std::sync::Arc;

use common::Harness;
use queen_mock_broker::{ManualClock, MockBroker};
use reqwest::StatusCode;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_concurrent_writes_a_read_right_after_an_answer_sees_the_write() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new();
    let broker = MockBroker::builder()
        .data_file(dir.path().join("queen.redb"))
        .clock(clock.clone())
        .start()
        .await
        .unwrap();
    let h = Arc::new(Harness::with(broker, clock));
    // Enough writers that the writer's queue is seldom empty after a batch: that is
    // when it holds batches instead of committing them to redb.
    let tasks: Vec<_> = (0..48)
        .map(|t| {
            let h = h.clone();
            tokio::spawn(async move {
                let partition = format!("p{t}");
                for i in 0..12u64 {
                    h.push_one("q", &partition, &format!("t{t}-{i}"), json!({"i": i}))
                        .await;
                    let (s, b) = h
                        .post(
                            "/api/v1/fetch",
                            json!({"entries": [{"queue": "q", "partition": partition, "offset": 0}]}),
                        )
                        .await;
                    assert_eq!(s, StatusCode::OK, "{b}");
                    assert_eq!(
                        b["entries"][0]["highWatermark"],
                        json!(i + 1),
                        "the fetch after push {i} of {partition} misses it: {b}"
                    );
                }
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap();
    }
    // The harness's own reads see everything too.
    let inspected = tokio::task::spawn_blocking({
        let h = h.clone();
        move || h.broker.inspect().messages("q", "p47").unwrap().len()
    })
    .await
    .unwrap();
    assert_eq!(inspected, 12);
}
