//! Untimed set-up: the input queue's pre-fill, and the background data of
//! `--stored-messages`, `--stored-kv` and `--stored-timers`. Everything is written in
//! large chunks, several in flight, through an SDK client that retries (set-up, not
//! load); each chunk's items are built inside its own task, so the building is spread
//! over the runtime's threads too.

use std::future::Future;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use queen_sdk::{Client, Commit, Kv, KvBatch, KvOp, PushItem, Ttl};
use serde::Serialize;
use tokio::task::JoinSet;

use super::driver::Event;

/// Items per push of a pre-fill (a body of about 600 KiB). On the 2-core host, 200,000
/// messages took 6.7 s over 10,000 partitions in pushes of 4,000, eight in flight,
/// against 8.3 s in pushes of 1,000, four in flight (3.5 s and 3.9 s over 64).
const PUSH_CHUNK: u64 = 4000;
/// Pushes in flight while pre-filling.
const PUSH_IN_FLIGHT: usize = 8;
/// KV puts per call: the most `POST /api/v1/kv` takes (a transaction takes 64).
const KV_CHUNK: u64 = 256;
/// KV calls in flight.
const KV_IN_FLIGHT: usize = 8;
/// Timers per transaction (a transaction's `timers` array has no cap).
const TIMER_CHUNK: u64 = 1000;
/// Timer transactions in flight.
const TIMER_IN_FLIGHT: usize = 4;
/// How far ahead the stored timers fire: never during a run.
const TIMER_DELAY: Duration = Duration::from_secs(30 * 86_400);

/// Runs `make(from, to)` for the consecutive chunks of at most `chunk` numbers that
/// cover `first..first + count`, at most `in_flight` of them at once; the first error
/// ends it.
async fn chunked<F, Fut>(
    first: u64,
    count: u64,
    chunk: u64,
    in_flight: usize,
    mut make: F,
) -> anyhow::Result<()>
where
    F: FnMut(u64, u64) -> Fut,
    Fut: Future<Output = anyhow::Result<()>> + Send + 'static,
{
    let mut tasks = JoinSet::new();
    let (mut next, end) = (first, first + count);
    while next < end || !tasks.is_empty() {
        while next < end && tasks.len() < in_flight {
            let upto = (next + chunk).min(end);
            tasks.spawn(make(next, upto));
            next = upto;
        }
        if let Some(done) = tasks.join_next().await {
            done.context("a set-up task panicked")??;
        }
    }
    Ok(())
}

/// Pushes events `first..first + count` to `queue`, event `i` to partition
/// `p{i % partitions}` (round-robin: every partition gets its share, and a chunk of
/// 4,000 touches 4,000 partitions when there are that many) with the deterministic
/// `transactionId` `order-{i}-paid`.
pub(crate) async fn push_events(
    client: &Client,
    queue: &str,
    partitions: usize,
    first: u64,
    count: u64,
) -> anyhow::Result<()> {
    let partitions = partitions.max(1) as u64;
    chunked(first, count, PUSH_CHUNK, PUSH_IN_FLIGHT, |from, to| {
        let (c, queue) = (client.clone(), queue.to_string());
        async move {
            let items: Vec<PushItem> = (from..to)
                .map(|i| {
                    PushItem::new(&queue, &Event::new(&i.to_string(), i))
                        .partition(format!("p{}", i % partitions))
                        .transaction_id(format!("order-{i}-paid"))
                })
                .collect();
            let pushed = c
                .push(items)
                .await
                .with_context(|| format!("pushing to {queue}"))?;
            if let Some(bad) = pushed.iter().find(|p| p.status != "queued") {
                bail!("pushing to {queue}: an item came back {:?}", bad.status);
            }
            Ok(())
        }
    })
    .await
}

/// A stored KV row's value: about the size of `seed-step`'s order state.
#[derive(Serialize)]
struct StoredRow {
    status: &'static str,
    n: u64,
}

/// Puts `count` keys `k0..` into namespace `ns` (30-day expiry), 256 per call.
pub(crate) async fn put_keys(client: &Client, ns: &str, count: u64) -> anyhow::Result<()> {
    chunked(0, count, KV_CHUNK, KV_IN_FLIGHT, |from, to| {
        let (c, ns) = (client.clone(), ns.to_string());
        async move {
            let ops: Vec<KvOp> = (from..to)
                .map(|i| {
                    Kv.put(
                        &ns,
                        format!("k{i}"),
                        &StoredRow {
                            status: "paid",
                            n: i,
                        },
                        Ttl::days(30),
                    )
                    .into()
                })
                .collect();
            let sent = ops.len();
            match c.kv().batch(ops).await.context("putting stored KV keys")? {
                KvBatch::Applied { results, .. } => {
                    ensure!(
                        results.len() == sent && results.iter().all(|r| r.applied != Some(false)),
                        "putting stored KV keys: not every put applied"
                    );
                    Ok(())
                }
                KvBatch::Gated { gate, .. } => {
                    bail!("putting stored KV keys: gated ({gate})")
                }
            }
        }
    })
    .await
}

/// A stored timer's payload.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoredTimer {
    order_id: String,
}

/// Schedules `count` timers `t0..` on `queue`, 30 days ahead, 1,000 per transaction
/// (a schedule of the same key replaces it, so a resent transaction is harmless).
pub(crate) async fn schedule_timers(
    client: &Client,
    queue: &str,
    count: u64,
) -> anyhow::Result<()> {
    chunked(0, count, TIMER_CHUNK, TIMER_IN_FLIGHT, |from, to| {
        let (c, queue) = (client.clone(), queue.to_string());
        async move {
            let mut t = c.transaction().resend(queen_sdk::Resend::AsIs);
            for i in from..to {
                t = t.timer(&queue, format!("t{i}"), |t| {
                    t.after(TIMER_DELAY)
                        .txn(format!("stored-timer-{i}"))
                        .payload(&StoredTimer {
                            order_id: format!("order-{i}"),
                        })
                });
            }
            match t.commit().await.context("scheduling stored timers")? {
                Commit::Committed(done) => {
                    let timers: Vec<_> = done.timers().collect();
                    ensure!(
                        timers.len() == (to - from) as usize && timers.iter().all(|t| t.ok),
                        "scheduling stored timers: not every timer was scheduled"
                    );
                    Ok(())
                }
                Commit::Gated { gate, .. } => {
                    bail!("scheduling stored timers: gated ({gate})")
                }
            }
        }
    })
    .await
}
