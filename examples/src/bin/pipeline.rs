//! A three-stage pipeline: `ingest` -> `enrich` -> `publish`.
//!
//! Each stage is a worker loop: pop one message from its input queue, add its part, and
//! in one transaction ack the input and push the result to the next queue. The hand-off
//! is atomic, so a message is never lost between stages nor passed on twice.
//!
//! With the embedded broker, the middle stage's third step meets an injected fault: the
//! broker commits the step, then drops the connection before the answer arrives. The SDK
//! retries (the step is safe to resend: its ack is fenced by the lease and its push id is
//! derived from the acked message); the retry rolls back and writes nothing, and the SDK
//! reports `retried: true`, which says the first attempt most probably committed. At the
//! end every message has passed every stage exactly once.
//!
//! ```sh
//! cargo run -p queen-examples --bin pipeline                        # embedded broker, with the fault
//! QUEEN_URL=http://127.0.0.1:6632 cargo run -p queen-examples --bin pipeline   # no fault injection
//! ```

use std::collections::BTreeSet;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use queen_examples::{Env, EnvOptions, TRANSACTION_ROUTE, URL_VAR, read_all};
use queen_mock_broker::harness::Fault;
use queen_sdk::{Commit, Error, PushItem, QueueOptions, RetryPolicy};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;

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
    /// Steps whose effects are committed (each exactly once).
    committed: usize,
    /// Of those, steps whose answer was lost and whose retry rolled back harmlessly.
    confirmed_by_retry: usize,
}

/// A stage's worker loop: runs until it has handed `expected` messages on.
///
/// `gate` is only for the demo's fault: the broker applies an injected fault to the next
/// transaction call it receives, whoever sends it, so while the faulty stage commits the
/// step meant to meet it, the other stages hold their commits back. A real worker has no
/// such lock.
async fn run_stage(
    env: &Env,
    gate: &RwLock<()>,
    stage: &Stage,
    expected: usize,
) -> anyhow::Result<Report> {
    let client = env.client();
    let mut report = Report::default();
    while report.committed < expected {
        let batch = client
            .pop::<Item>(&stage.input)
            .batch(1)
            .wait(Duration::from_millis(500))
            .send()
            .await
            .with_context(|| format!("{} popping {}", stage.name, stage.input))?;
        for msg in batch {
            let mut item = msg.data.clone();
            item.stages.push(stage.name.to_string());
            if stage.name == "enrich" {
                item.text = format!("{} (enriched: {} chars)", item.text, item.text.len());
            }
            let step = client
                .transaction()
                .ack(&msg)
                .push(&stage.output, |p| p.payload(&item));

            let fault_here = env
                .broker()
                .filter(|_| stage.name == FAULTY_STAGE && report.committed + 1 == FAULTY_STEP);
            let outcome = match fault_here {
                Some(broker) => {
                    let _alone = gate.write().await;
                    broker
                        .faults()
                        .inject(Fault::commit_then_drop().on(TRANSACTION_ROUTE));
                    println!(
                        "[{}] {}: injected fault: the broker will commit this step, then drop the connection before answering",
                        stage.name, item.id
                    );
                    step.commit().await
                }
                None => {
                    let _shared = gate.read().await;
                    step.commit().await
                }
            };
            match outcome {
                Ok(Commit::Committed(c)) => println!(
                    "[{}] {} -> {}{}",
                    stage.name,
                    item.id,
                    stage.output,
                    if c.retried { " (after a retry)" } else { "" }
                ),
                Err(Error::RolledBack {
                    reason,
                    retried: true,
                    ..
                }) => {
                    println!(
                        "[{}] {}: the answer was lost; the SDK retried and the retry rolled back harmlessly ({reason}, retried: true): the first attempt had committed",
                        stage.name, item.id
                    );
                    report.confirmed_by_retry += 1;
                }
                Ok(Commit::Gated { kv_reason, .. }) => {
                    bail!(
                        "[{}] {}: unexpectedly gated ({kv_reason})",
                        stage.name,
                        item.id
                    )
                }
                Err(e) => {
                    return Err(e).with_context(|| format!("[{}] {}", stage.name, item.id));
                }
            }
            report.committed += 1;
        }
    }
    Ok(report)
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

    let gate = RwLock::new(());
    let (ingest, enrich, publish) = tokio::try_join!(
        run_stage(env, &gate, &stages[0], MESSAGES),
        run_stage(env, &gate, &stages[1], MESSAGES),
        run_stage(env, &gate, &stages[2], MESSAGES),
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
