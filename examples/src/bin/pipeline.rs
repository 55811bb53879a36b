//! A three-stage pipeline: `ingest` -> `enrich` -> `publish`.
//!
//! Each stage is a worker on the SDK's runtime (`Client::worker`): for each message of
//! its input queue the handler adds its part and returns the step, one transaction that
//! acks the input and pushes the result to the next queue. The hand-off is atomic, so a
//! message is never lost between stages nor passed on twice.
//!
//! With the embedded broker, the middle stage's third step meets an injected fault: the
//! broker commits the step, then drops the connection before the answer arrives. The SDK
//! retries (the step is safe to resend: its ack is fenced by the lease and its push id is
//! derived from the acked message); the retry rolls back as a duplicate and writes
//! nothing, which says the first attempt most probably committed, and the worker settles
//! the message as already done (acked on its own, so it does not come back). At the end
//! every message has passed every stage exactly once.
//!
//! ```sh
//! cargo run -p queen-examples --bin pipeline                        # embedded broker, with the fault
//! QUEEN_URL=http://127.0.0.1:6632 cargo run -p queen-examples --bin pipeline   # no fault injection
//! ```

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, ensure};
use queen_examples::{Env, EnvOptions, TRANSACTION_ROUTE, URL_VAR, read_all};
use queen_mock_broker::harness::Fault;
use queen_sdk::{Outcome, PushItem, QueueOptions, RetryPolicy};
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock, mpsc, oneshot};

/// The work item handed from stage to stage.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Item {
    id: String,
    text: String,
    /// The stages it went through, in order.
    #[serde(default)]
    stages: Vec<String>,
}

/// How many messages go through.
const MESSAGES: usize = 5;
/// The stage whose commit meets the lost answer, and at which of its steps.
const FAULTY_STAGE: &str = "enrich";
const FAULTY_STEP: usize = 3;
/// The whole run's bound.
const DEADLINE: Duration = Duration::from_secs(30);

/// One stage: its name and the queues it reads and writes.
struct Stage {
    name: &'static str,
    input: String,
    output: String,
}

/// What a stage did.
#[derive(Debug, Default)]
struct Report {
    /// Messages whose step is committed (each exactly once).
    committed: usize,
    /// Of those, steps whose answer was lost and whose retry rolled back harmlessly.
    confirmed_by_retry: usize,
}

/// A hold on the demo's gate, from a handler's return until its step is settled.
enum Hold {
    Shared(#[allow(dead_code)] OwnedRwLockReadGuard<()>),
    Alone(#[allow(dead_code)] OwnedRwLockWriteGuard<()>),
}

/// A stage's worker: runs until it has handed `expected` messages on.
///
/// `gate` is only for the demo's fault: the broker applies an injected fault to the next
/// transaction call it receives, whoever sends it, so while the faulty stage commits the
/// step meant to meet it, the other stages hold their commits back (each handler holds
/// the gate until its step is settled). A real worker has no such lock.
async fn run_stage(
    env: &Env,
    gate: Arc<RwLock<()>>,
    stage: &Stage,
    expected: usize,
) -> anyhow::Result<Report> {
    let name = stage.name;
    let output = stage.output.clone();
    let inject_fault = env.is_embedded() && name == FAULTY_STAGE;
    // Handler -> the injector below, which can reach the embedded broker's harness.
    let (want_fault, mut fault_wanted) = mpsc::channel::<oneshot::Sender<()>>(1);
    let items: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let held: Arc<Mutex<HashMap<String, Hold>>> = Arc::default();
    let handled = Arc::new(AtomicUsize::new(0));
    let (committed, confirmed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let all_done = Arc::new(Notify::new());

    let handler = {
        let (items, held, output) = (items.clone(), held.clone(), output.clone());
        move |msg: queen_sdk::Delivery<Item>, ack: queen_sdk::TransactionBuilder| {
            let mut item = msg.data.clone();
            item.stages.push(name.to_string());
            if name == "enrich" {
                item.text = format!("{} (enriched: {} chars)", item.text, item.text.len());
            }
            items
                .lock()
                .unwrap()
                .insert(msg.id.clone(), item.id.clone());
            let step = ack.push(&output, |p| p.payload(&item));
            let faulty = inject_fault && handled.fetch_add(1, Ordering::SeqCst) + 1 == FAULTY_STEP;
            let (gate, held, want_fault) = (gate.clone(), held.clone(), want_fault.clone());
            async move {
                let hold = if faulty {
                    let alone = gate.write_owned().await;
                    let (injected, done) = oneshot::channel();
                    want_fault.send(injected).await?;
                    done.await?;
                    println!(
                        "[{name}] {}: injected fault: the broker will commit this step, then drop the connection before answering",
                        item.id
                    );
                    Hold::Alone(alone)
                } else {
                    Hold::Shared(gate.read_owned().await)
                };
                held.lock().unwrap().insert(msg.id.clone(), hold);
                Ok::<_, anyhow::Error>(step)
            }
        }
    };
    let on_settled = {
        let (committed, confirmed, all_done) =
            (committed.clone(), confirmed.clone(), all_done.clone());
        move |msg: &queen_sdk::Message<()>, outcome: &Outcome| {
            held.lock().unwrap().remove(&msg.id);
            let id = items
                .lock()
                .unwrap()
                .get(&msg.id)
                .cloned()
                .unwrap_or_else(|| msg.id.clone());
            match outcome {
                Outcome::Committed { retried, .. } => println!(
                    "[{name}] {id} -> {output}{}",
                    if *retried { " (after a retry)" } else { "" }
                ),
                Outcome::AlreadyDone { retried: true } => {
                    println!(
                        "[{name}] {id}: the answer was lost; the SDK retried and the retry rolled back harmlessly (already done, retried: true): the first attempt had committed; the worker settled the message as already done"
                    );
                    confirmed.fetch_add(1, Ordering::SeqCst);
                }
                other => println!("[{name}] {id}: {other:?}"),
            }
            if matches!(
                outcome,
                Outcome::Committed { .. } | Outcome::AlreadyDone { .. }
            ) && committed.fetch_add(1, Ordering::SeqCst) + 1 == expected
            {
                all_done.notify_one();
            }
        }
    };
    // Injects the fault when the faulty step asks (the harness is borrowed from `env`,
    // which a worker's handler cannot hold).
    let injector = async {
        while let Some(injected) = fault_wanted.recv().await {
            if let Some(broker) = env.broker() {
                broker
                    .faults()
                    .inject(Fault::commit_then_drop().on(TRANSACTION_ROUTE));
            }
            let _ = injected.send(());
        }
    };
    let worker = env
        .client()
        .worker::<Item>(&stage.input)
        .wait(Duration::from_millis(500))
        .on_settled(on_settled)
        .run(handler, async move { all_done.notified().await });
    // The injector ends when the worker is done with its handler (and its sender).
    let (summary, ()) = tokio::join!(worker, injector);
    let summary = summary.with_context(|| format!("{name} worker"))?;
    ensure!(
        summary.failed == 0 && summary.lease_lost == 0 && summary.unknown == 0,
        "[{name}] not every message went through: {summary}"
    );
    Ok(Report {
        committed: committed.load(Ordering::SeqCst),
        confirmed_by_retry: confirmed.load(Ordering::SeqCst),
    })
}

async fn run(env: &Env) -> anyhow::Result<()> {
    let client = env.client();
    let queues = ["raw", "ingested", "enriched", "published"].map(|q| env.name(q));
    let stages =
        [("ingest", 0, 1), ("enrich", 1, 2), ("publish", 2, 3)].map(|(name, i, o)| Stage {
            name,
            input: queues[i].clone(),
            output: queues[o].clone(),
        });
    for q in &queues {
        client.configure(q, QueueOptions::new()).await?;
    }
    if env.is_embedded() {
        println!(
            "fault plan: the {FAULTY_STAGE} stage's step {FAULTY_STEP} loses its answer after the commit"
        );
    } else {
        println!(
            "fault plan: none: {URL_VAR} is set, and fault injection needs the embedded broker's harness, so it is skipped"
        );
    }

    let items: Vec<PushItem> = (1..=MESSAGES)
        .map(|i| {
            let item = Item {
                id: format!("msg-{i}"),
                text: format!("reading #{i}"),
                stages: Vec::new(),
            };
            PushItem::new(&queues[0], &item).transaction_id(&item.id)
        })
        .collect();
    client.push(items).await?;
    println!("pushed {MESSAGES} messages to {}", queues[0]);

    let gate = Arc::new(RwLock::new(()));
    let (ingest, enrich, publish) = tokio::try_join!(
        run_stage(env, gate.clone(), &stages[0], MESSAGES),
        run_stage(env, gate.clone(), &stages[1], MESSAGES),
        run_stage(env, gate.clone(), &stages[2], MESSAGES),
    )?;

    // Every output queue, read from its beginning: each message once.
    println!("summary:");
    for (stage, report) in stages.iter().zip([&ingest, &enrich, &publish]) {
        let stored: Vec<Item> = read_all(client, &stage.output, None, "audit").await?;
        let distinct: BTreeSet<&str> = stored.iter().map(|i| i.id.as_str()).collect();
        println!(
            "  {}: {} committed ({} confirmed by a retry that rolled back); {} holds {} messages, {} distinct",
            stage.name,
            report.committed,
            report.confirmed_by_retry,
            stage.output,
            stored.len(),
            distinct.len()
        );
        ensure!(
            report.committed == MESSAGES && stored.len() == MESSAGES && distinct.len() == MESSAGES,
            "{} did not pass every message on exactly once",
            stage.name
        );
        if stage.name == "publish" {
            let complete = stored
                .iter()
                .filter(|i| i.stages == ["ingest", "enrich", "publish"])
                .count();
            println!(
                "  end of the line: {complete} of {MESSAGES} messages went through ingest, enrich and publish, each exactly once"
            );
            ensure!(
                complete == MESSAGES,
                "a message skipped or repeated a stage"
            );
        }
    }
    if let Some(broker) = env.broker() {
        let sent = broker.requests().matching(TRANSACTION_ROUTE).len();
        let faults = broker.faults().hits();
        println!(
            "  transactions sent: {sent} ({} steps + {} retry after the lost answer); injected faults hit: {}",
            3 * MESSAGES,
            sent.saturating_sub(3 * MESSAGES),
            faults.len()
        );
        ensure!(
            enrich.confirmed_by_retry == 1 && faults.len() == 1,
            "the injected fault did not meet the enrich stage"
        );
    }
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Quick retries, so the lost answer is retried within milliseconds.
    let retry = RetryPolicy::default()
        .min_delay(Duration::from_millis(20))
        .max_delay(Duration::from_millis(200));
    let env = Env::connect(EnvOptions::default().retry(retry)).await?;
    println!("broker: {}", env.describe());
    let outcome = match tokio::time::timeout(DEADLINE, run(&env)).await {
        Ok(r) => r,
        Err(_) => Err(anyhow::anyhow!(
            "the pipeline did not finish within {DEADLINE:?}"
        )),
    };
    env.shutdown().await;
    outcome
}
