//! Two workers contend for one lock; only the holder's guarded writes commit.
//!
//! `worker-a` takes the lock `nightly-report` and writes under its guard
//! (`transaction().guard(&lock.guard())`): the transaction commits only while the lock
//! is still held. `worker-b` is refused the lock. Then worker-a loses the lock mid-way:
//! it stalls past the lock's TTL, and worker-b takes it. worker-a's next guarded write is
//! refused (`Commit::Gated`) and writes nothing, while worker-b's commits.
//!
//! With the embedded broker the stall is made by moving its manual clock past the TTL
//! (worker-a's handle then notices on its next renewal and reports the lock lost).
//! Against `QUEEN_URL`, worker-a's renewals are stopped and the TTL lapses in real time.
//!
//! ```sh
//! cargo run -p queen-examples --bin locks                        # embedded broker, manual clock
//! QUEEN_URL=http://127.0.0.1:6632 cargo run -p queen-examples --bin locks
//! ```

use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use queen_examples::{Env, EnvOptions};
use queen_sdk::{Client, Commit, LockGuard, Ttl};

/// The lock's TTL: short, so a lapse is quick to show. The handle renews about every
/// third of it.
const TTL: Duration = Duration::from_secs(3);

/// A write under the lock: commits only while `guard` is still the lock's current hold.
async fn guarded_write(
    client: &Client,
    guard: &LockGuard,
    ns: &str,
    value: &str,
) -> queen_sdk::Result<Commit> {
    client
        .transaction()
        .guard(guard)
        .kv(|k| k.put(ns, "nightly", value, Ttl::days(1)))
        .commit()
        .await
}

async fn report_row(client: &Client, ns: &str) -> anyhow::Result<(String, u64)> {
    let row = client
        .kv()
        .get::<String>(ns, "nightly")
        .await?
        .context("the report row is missing")?;
    Ok((row.value, row.version))
}

async fn run(env: &Env) -> anyhow::Result<()> {
    let client = env.client();
    let lock_name = env.name("nightly-report");
    let ns = env.name("reports");

    // 1. Both workers want the lock; worker-a is first.
    let lock_a = client
        .lock(&lock_name)
        .owner("worker-a")
        .ttl(TTL)
        .acquire()
        .await?
        .context("worker-a could not take a free lock")?;
    println!(
        "worker-a: acquired lock {lock_name} (slot {}, token {}, ttl {}s; it renews itself about every {}s)",
        lock_a.slot(),
        lock_a.guard().token,
        TTL.as_secs(),
        TTL.as_secs() / 3
    );
    let refused = client
        .lock(&lock_name)
        .owner("worker-b")
        .ttl(TTL)
        .acquire()
        .await?;
    ensure!(refused.is_none(), "worker-b took a held lock");
    println!("worker-b: lock {lock_name} is held by another worker: not acquired");

    // 2. The holder writes under its guard.
    let first = "part 1 by worker-a";
    match guarded_write(client, &lock_a.guard(), &ns, first).await? {
        Commit::Committed(_) => {
            println!("worker-a: guarded transaction committed: {ns}/nightly = \"{first}\"")
        }
        Commit::Gated { gate, .. } => {
            bail!("worker-a's guarded write was gated ({gate})")
        }
    }

    // 3. worker-a loses the lock mid-way.
    let (lock_a, a_guard) = match env.clock() {
        Some(clock) => {
            let by = TTL + Duration::from_secs(1);
            clock.advance(by);
            println!(
                "clock: broker time moved {}s forward, past the lock's {}s TTL, before worker-a's next renewal (as if worker-a stalled)",
                by.as_secs(),
                TTL.as_secs()
            );
            (Some(lock_a), None)
        }
        None => {
            // Keep the last guard worker-a had, and stop its renewals.
            let last = lock_a.guard();
            drop(lock_a);
            let wait = TTL + Duration::from_secs(1);
            println!(
                "worker-a stalls: its renewals stop; waiting {:.1}s for the {}s TTL to lapse",
                wait.as_secs_f64(),
                TTL.as_secs()
            );
            tokio::time::sleep(wait).await;
            (None, Some(last))
        }
    };
    let lock_b = client
        .lock(&lock_name)
        .owner("worker-b")
        .ttl(TTL)
        .acquire()
        .await?
        .context("worker-b could not take the lapsed lock")?;
    println!(
        "worker-b: acquired lock {lock_name} (slot {}, token {})",
        lock_b.slot(),
        lock_b.guard().token
    );

    // 4. worker-a, unaware, writes under the guard it holds: refused, nothing written.
    let a_guard = match (&lock_a, a_guard) {
        (Some(l), _) => l.guard(),
        (None, Some(g)) => g,
        (None, None) => unreachable!("worker-a has a guard either way"),
    };
    let stale = "part 2 by worker-a (stale)";
    match guarded_write(client, &a_guard, &ns, stale).await? {
        Commit::Gated { gate, .. } => println!(
            "worker-a: guarded transaction refused: Commit::Gated ({gate}): nothing written"
        ),
        Commit::Committed(_) => bail!("worker-a's stale guarded write committed"),
    }
    let (value, version) = report_row(client, &ns).await?;
    println!("{ns}/nightly = \"{value}\" (version {version}): unchanged by the refused write");
    ensure!(value == first, "the refused write changed the row");

    // 5. The new holder's guarded write commits.
    let second = "part 2 by worker-b";
    match guarded_write(client, &lock_b.guard(), &ns, second).await? {
        Commit::Committed(_) => {
            println!("worker-b: guarded transaction committed: {ns}/nightly = \"{second}\"")
        }
        Commit::Gated { gate, .. } => {
            bail!("worker-b's guarded write was gated ({gate})")
        }
    }

    // 6. worker-a's handle finds out on its next renewal.
    if let Some(lock_a) = lock_a {
        tokio::time::timeout(TTL, lock_a.lost())
            .await
            .context("worker-a's handle did not notice the loss")?;
        println!(
            "worker-a: its lock handle reports the lock lost (is_lost: {})",
            lock_a.is_lost()
        );
        ensure!(
            !lock_a.release().await?,
            "worker-a released a lock it had lost"
        );
        println!("worker-a: release answered false: there was nothing left to give back");
    }
    let released = lock_b.release().await?;
    println!("worker-b: released the lock (released: {released})");
    let (value, _) = report_row(client, &ns).await?;
    println!("final: {ns}/nightly = \"{value}\"");
    ensure!(value == second, "worker-b's write is not the last one");
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = Env::connect(EnvOptions::default().manual_clock()).await?;
    println!("broker: {}", env.describe());
    let outcome = run(&env).await;
    env.shutdown().await;
    outcome
}
