//! What the shape of `transactionId`s costs a push: every push is looked up in, and
//! added to, its partition's index of `transactionId`s (the dedup window), a B-tree.
//! Ids that sort by time (as a UUIDv7, or the SDK's derived ids since 2026-12-03) land
//! at its edge; hashed ones (a UUIDv4 or UUIDv5) anywhere in it, each on a page of its
//! own once the index outgrows a few pages.
//!
//! Two durable engines in temporary directories, one per kind of id, grow side by side:
//! in each round, 64 callers push `PER_CALLER` messages each (one per command, caller
//! `i` into partition `p{i}`) into one engine and then into the other, the order
//! alternating from round to round so that neither always runs first. Each round prints
//! both rates and their ratio; the end, the median ratio over the rounds after the
//! first two (which fill the indexes past their first pages).
//!
//! Run with `cargo bench -p queen-mock-broker --bench dedup_ids` (about 40 s);
//! `ROUNDS=24` for larger indexes.

use std::sync::Arc;
use std::time::{Duration, Instant};

use queen_mock_broker::clock::SystemClock;
use queen_mock_broker::engine::DEFAULT_TENANT;
use queen_mock_broker::engine::push::NewMessage;
use queen_mock_broker::{Engine, store};
use serde_json::value::RawValue;

/// Concurrent callers, each with a partition of its own.
const CALLERS: u64 = 64;

/// Pushes per caller per round.
const PER_CALLER: u64 = 300;

/// How a round's ids are made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ids {
    /// Increasing within a partition, as time-ordered ids are.
    Ordered,
    /// Spread evenly over the key space, as hashed or random ids are.
    Hashed,
}

impl Ids {
    fn name(self) -> &'static str {
        match self {
            Ids::Ordered => "ordered",
            Ids::Hashed => "hashed",
        }
    }

    /// The id of push `n` of `caller` in `round`: 36 characters either way, as a UUID.
    fn id(self, round: u64, caller: u64, n: u64) -> String {
        let seq = round * PER_CALLER + n;
        match self {
            Ids::Ordered => format!("{seq:016x}-{caller:04x}-{:014x}", mix(seq)),
            Ids::Hashed => format!("{:016x}-{caller:04x}-{:014x}", mix(seq), mix(!seq) >> 8),
        }
    }
}

/// SplitMix64's finaliser: a fixed, evenly spread function of `z`.
fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// One round of pushes into `engine`; its wall time.
async fn round(engine: &Engine, ids: Ids, round: u64) -> Duration {
    let start = Instant::now();
    let callers: Vec<_> = (0..CALLERS)
        .map(|caller| {
            let engine = engine.clone();
            tokio::spawn(async move {
                for n in 0..PER_CALLER {
                    let message = NewMessage {
                        queue: "orders".into(),
                        partition: format!("p{caller}"),
                        payload: RawValue::from_string(format!(r#"{{"n":{n},"total":42.5}}"#))
                            .expect("valid JSON"),
                        transaction_id: Some(ids.id(round, caller, n)),
                        trace_id: None,
                        producer_sub: None,
                        message_id: None,
                    };
                    let out = engine
                        .push(DEFAULT_TENANT, vec![message])
                        .await
                        .expect("push");
                    assert!(!out[0].1.duplicate, "every id is new");
                }
            })
        })
        .collect();
    for c in callers {
        c.await.expect("caller");
    }
    start.elapsed()
}

fn main() {
    let rounds: u64 = std::env::var("ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(12)
        .max(3);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let dir = tempfile::tempdir().expect("temporary directory");
    let beds: Vec<_> = [Ids::Ordered, Ids::Hashed]
        .into_iter()
        .map(|ids| {
            let path = dir.path().join(format!("{}.redb", ids.name()));
            let db = store::open(Some(&path)).expect("open the database");
            let (engine, writer) = Engine::start(db, Arc::new(SystemClock));
            (ids, engine, writer)
        })
        .collect();
    let per_round = (CALLERS * PER_CALLER) as f64;
    let mut ratios = Vec::new();
    for r in 0..rounds {
        let order: Vec<usize> = if r % 2 == 0 { vec![0, 1] } else { vec![1, 0] };
        let mut rate = [0.0; 2];
        for i in order {
            let (ids, engine, _) = &beds[i];
            rate[i] = per_round / rt.block_on(round(engine, *ids, r)).as_secs_f64();
        }
        let ratio = rate[1] / rate[0];
        println!(
            "round {r:>2} ({:>7} ids each): ordered {:>6.0}/s, hashed {:>6.0}/s, hashed/ordered {ratio:.2}",
            (r + 1) * CALLERS * PER_CALLER,
            rate[0],
            rate[1]
        );
        if r >= 2 {
            ratios.push(ratio);
        }
    }
    ratios.sort_by(f64::total_cmp);
    println!(
        "hashed/ordered push rate: median {:.2} over {} rounds (min {:.2}, max {:.2})",
        ratios[ratios.len() / 2],
        ratios.len(),
        ratios[0],
        ratios[ratios.len() - 1]
    );
    for (_, engine, writer) in beds {
        drop(engine);
        writer.join();
    }
}
