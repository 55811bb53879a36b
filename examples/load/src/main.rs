//! The load generator: throughput, latency percentiles, errors and rollbacks of one
//! shape (`push`, `ack-push`, `seed-step`, `pop`, `pop-ack`) through the SDK or bare
//! HTTP, against an embedded durable broker (with its group commit's figures), a broker
//! at `--url`, or the no-op baseline server. See [`queen_load`] for every option.
//!
//! ```sh
//! cargo run --release -p queen-load -- --shape ack-push --concurrency 64 --duration 5
//! cargo run --release -p queen-load -- --shape seed-step --mode raw --json
//! bash examples/load/run-all.sh     # every shape at 1, 64 and 256 workers, with ratios
//! ```

use clap::Parser as _;
use queen_load::Args;

/// The broker and the load generator share this process's two cores; glibc's malloc
/// spent a quarter of them under contention (perf, ack-push at 64 workers).
#[cfg(all(feature = "mimalloc", not(feature = "count-allocs")))]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `count-allocs`: the same allocator, counted (see `queen_load::allocs`).
#[cfg(all(feature = "mimalloc", feature = "count-allocs"))]
#[global_allocator]
static GLOBAL: queen_load::allocs::Counting<mimalloc::MiMalloc> =
    queen_load::allocs::Counting(mimalloc::MiMalloc);

#[cfg(all(not(feature = "mimalloc"), feature = "count-allocs"))]
#[global_allocator]
static GLOBAL: queen_load::allocs::Counting<std::alloc::System> =
    queen_load::allocs::Counting(std::alloc::System);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    queen_load::main(Args::parse()).await
}
