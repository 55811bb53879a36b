//! An order-fulfilment saga, the kind of worker that runs for months.
//!
//! Each order starts a saga: a KV row, a payment request and a 30-minute timeout timer,
//! in one step. Payment results and the fired timeout race to one outcome through a
//! `once_as` marker that stores which outcome won; the loser learns the winner
//! (`Gate::lost_to`), so a payment captured after the timeout is refunded. A payment
//! result that arrives before its saga's row is a transient failure, run again with a
//! backoff (`Worker::retry_handler`) instead of spending the queue's retry limit in a
//! second. The three workers run in one `WorkerSet` and stop together on one token.
//! Afterwards a receipts worker with a bug is fixed and its group replayed in a new
//! `Epoch`: each receipt is produced again, once.
//!
//! ```sh
//! cargo run -p queen-examples --bin saga                                   # embedded broker; its clock fires the timeout
//! QUEEN_URL=http://127.0.0.1:6632 cargo run -p queen-examples --bin saga   # a 3 s timeout instead of 30 min
//! ```

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use queen_examples::{Env, EnvOptions};
use queen_sdk::{
    CancellationToken, Client, Delivery, Epoch, GateKind, MessageQuery, PushItem, RetryPolicy,
    SeekTo, StartAt, TransactionBuilder, Ttl, WorkerSet,
};
use serde::{Deserialize, Serialize};
use tokio::sync::Notify;

/// What a saga handler answers: the step to commit, or why not yet.
type Step = Pin<Box<dyn Future<Output = Result<TransactionBuilder, String>> + Send>>;

/// The consumer group every saga worker reads with.
const GROUP: &str = "saga";
/// The whole run's bound.
const DEADLINE: Duration = Duration::from_secs(60);

/// The queues and namespaces of one run (suffixed against an external broker).
#[derive(Clone)]
struct Names {
    orders: String,
    payment_results: String,
    timeouts: String,
    outcomes: String,
    payment_requests: String,
    refunds: String,
    receipts: String,
    sagas: String,
    outcome_marker: String,
    started_marker: String,
}

impl Names {
    fn new(env: &Env) -> Names {
        Names {
            orders: env.name("saga-orders"),
            payment_results: env.name("saga-payment-results"),
            timeouts: env.name("saga-timeouts"),
            outcomes: env.name("saga-outcomes"),
            payment_requests: env.name("saga-payment-requests"),
            refunds: env.name("saga-refunds"),
            receipts: env.name("saga-receipts"),
            sagas: env.name("sagas"),
            outcome_marker: env.name("saga-outcome"),
            started_marker: env.name("saga-started"),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Order {
    id: String,
    cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct PaymentResult {
    order: String,
    cents: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct Outcome {
    order: String,
    /// `paid` or `timed-out`.
    outcome: String,
    cents: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = Env::connect(EnvOptions::default().manual_clock()).await?;
    println!("broker: {}", env.describe());
    let result = tokio::time::timeout(DEADLINE, run(&env)).await;
    env.shutdown().await;
    result.context("the saga did not finish in time")?
}

/// Pushes a payment result of `cents` for `order`.
async fn pay(client: &Client, n: &Names, order: &str, cents: u64) -> anyhow::Result<()> {
    client
        .push(vec![PushItem::new(
            &n.payment_results,
            &PaymentResult {
                order: order.into(),
                cents,
            },
        )])
        .await?;
    Ok(())
}

async fn run(env: &Env) -> anyhow::Result<()> {
    let client = env.client().clone();
    let n = Names::new(env);
    // Embedded, the broker's clock is moved past the timeout; a real broker waits it out.
    let timeout = match env.clock() {
        Some(_) => Duration::from_secs(30 * 60),
        None => Duration::from_secs(3),
    };

    // o-1's payment result arrives before its order: its saga row is not there yet.
    pay(&client, &n, "o-1", 1250).await?;
    let shutdown = CancellationToken::new();
    let early = Arc::new(Notify::new());
    let mut workers = WorkerSet::new(shutdown.child_token());
    workers
        .spawn(
            "start",
            start_worker(&client, &n),
            start_step(n.clone(), timeout),
        )
        .spawn(
            "payments",
            payments_worker(&client, &n),
            payment_step(n.clone(), early.clone()),
        )
        .spawn(
            "timeouts",
            timeouts_worker(&client, &n),
            timeout_step(n.clone()),
        );

    // The orders arrive once the early result has met its missing saga row.
    early.notified().await;
    client
        .push(
            [("o-1", 1250), ("o-2", 990), ("o-3", 4000)]
                .into_iter()
                .map(|(id, cents)| {
                    PushItem::new(
                        &n.orders,
                        &Order {
                            id: id.into(),
                            cents,
                        },
                    )
                })
                .collect(),
        )
        .await?;
    // o-2 is paid in time.
    pay(&client, &n, "o-2", 990).await?;
    // o-3 first: against a real broker its timeout fires 3 s after its saga starts,
    // and o-1's retried payment may take longer than that.
    wait_for_state(&client, &n, "o-3", "awaiting-payment").await?;
    wait_for_state(&client, &n, "o-1", "paid").await?;
    wait_for_state(&client, &n, "o-2", "paid").await?;
    println!(
        "sagas: o-1 paid (its payment result came first and was retried), o-2 paid, o-3 awaiting payment"
    );

    // o-3's payment never comes: the timeout fires.
    if let Some(clock) = env.clock() {
        clock.advance(timeout + Duration::from_secs(60));
    }
    wait_for_state(&client, &n, "o-3", "timed-out").await?;
    // ...and then it does: the payment lost the race and is refunded.
    pay(&client, &n, "o-3", 4000).await?;
    wait_for_count(&client, &n.refunds, 1).await?;
    println!("sagas: o-3 timed out; its late payment lost to the timeout and was refunded");

    shutdown.cancel();
    let summaries = workers.join().await.context("a saga worker failed")?;
    for (name, summary) in &summaries {
        println!("worker {name}: {summary}");
    }
    let payments = &summaries
        .iter()
        .find(|(name, _)| name == "payments")
        .context("the payments worker")?
        .1;
    ensure!(
        payments.retries >= 1,
        "o-1's early result was run again: {payments}"
    );
    ensure!(
        (payments.committed, payments.refused, payments.dead_lettered) == (2, 1, 0),
        "two payments settled, one refunded, none dead-lettered: {payments}"
    );
    ensure!(
        count(&client, &n.payment_requests).await? == 3,
        "one payment request per order"
    );

    replay_receipts(&client, &n).await
}

/// The receipts worker shipped with a bug (euros printed as cents); after the fix its
/// group is replayed in a new epoch, and each receipt is produced again, once.
async fn replay_receipts(client: &Client, n: &Names) -> anyhow::Result<()> {
    let receipts = |fixed: bool| {
        let queue = n.receipts.clone();
        client
            .worker::<Outcome>(&n.outcomes)
            .group("receipts", StartAt::Beginning)
            .run_until_idle(move |o, step| {
                let queue = queue.clone();
                async move {
                    if o.data.outcome != "paid" {
                        return Ok::<_, String>(step);
                    }
                    let amount = if fixed {
                        format!("{}.{:02} EUR", o.data.cents / 100, o.data.cents % 100)
                    } else {
                        format!("{} EUR", o.data.cents) // the bug
                    };
                    let text = format!("receipt {}: {amount}", o.data.order);
                    Ok(step.push(&queue, |p| p.payload(&text)))
                }
            })
    };
    let first = receipts(false).await?;
    println!("receipts v1: {first}");
    client
        .seek("receipts", &n.outcomes, SeekTo::Beginning)
        .await?;
    let plain = receipts(true).await?;
    println!("receipts v2, replayed without an epoch: {plain}");
    ensure!(
        plain.already_done == 2 && count(client, &n.receipts).await? == 2,
        "a replay without an epoch finds each receipt pushed: {plain}"
    );

    client
        .seek("receipts", &n.outcomes, SeekTo::Beginning)
        .await?;
    let fixed = client
        .worker::<Outcome>(&n.outcomes)
        .group("receipts", StartAt::Beginning)
        .epoch(Epoch::new("fix-1")?);
    let queue = n.receipts.clone();
    let replay = fixed
        .run_until_idle(move |o, step| {
            let queue = queue.clone();
            async move {
                if o.data.outcome != "paid" {
                    return Ok::<_, String>(step);
                }
                let text = format!(
                    "receipt {}: {}.{:02} EUR",
                    o.data.order,
                    o.data.cents / 100,
                    o.data.cents % 100
                );
                Ok(step.push(&queue, |p| p.payload(&text)))
            }
        })
        .await?;
    println!("receipts v2, replayed in epoch fix-1: {replay}");
    let stored = count(client, &n.receipts).await?;
    ensure!(
        stored == 4,
        "2 receipts of v1 and 2 of the fix, got {stored}"
    );
    println!("receipts: {stored} (2 from the buggy version, 2 from the fix, each once)");
    Ok(())
}

fn start_worker(client: &Client, n: &Names) -> queen_sdk::Worker<Order> {
    client
        .worker::<Order>(&n.orders)
        .group(GROUP, StartAt::Beginning)
}

/// An order starts its saga: the row, the payment request and the timeout, at once.
fn start_step(
    n: Names,
    timeout: Duration,
) -> impl Fn(Delivery<Order>, TransactionBuilder) -> Step + Send + Sync + 'static {
    move |order, step| {
        let o = &order.data;
        Box::pin(std::future::ready(Ok(step
            .once(&n.started_marker, &o.id, Ttl::days(30))
            .kv(|k| k.put(&n.sagas, &o.id, &"awaiting-payment", Ttl::days(30)))
            .push(&n.payment_requests, |p| p.payload(o))
            .timer(&n.timeouts, &o.id, |t| t.after(timeout).payload(&o.id)))))
    }
}

fn payments_worker(client: &Client, n: &Names) -> queen_sdk::Worker<PaymentResult> {
    let refunds = n.refunds.clone();
    client
        .worker::<PaymentResult>(&n.payment_results)
        .group(GROUP, StartAt::Beginning)
        // The saga's row may not be there yet: run the handler again, with a backoff,
        // before acking `failed` (which would spend the queue's retry limit at once).
        .retry_handler(
            RetryPolicy::default()
                .max_attempts(20)
                .min_delay(Duration::from_millis(50))
                .max_delay(Duration::from_millis(500))
                .deadline(Duration::from_secs(20)),
        )
        .on_refused(move |msg, gate| {
            let refunds = refunds.clone();
            async move {
                match (gate.kind, gate.lost_to()) {
                    // The timeout won: the captured payment goes back.
                    (GateKind::Once, Some(winner)) if winner == "timed-out" => {
                        Ok(msg.step().push(&refunds, |p| p.payload(&msg.data)))
                    }
                    _ => Err(format!("unexpected refusal: {gate}")),
                }
            }
        })
}

/// A payment result settles the saga as paid, unless the timeout won first.
fn payment_step(
    n: Names,
    early: Arc<Notify>,
) -> impl Fn(Delivery<PaymentResult>, TransactionBuilder) -> Step + Send + Sync + 'static {
    move |paid, step| {
        let (n, early) = (n.clone(), early.clone());
        Box::pin(async move {
            let p = &paid.data;
            let row = step
                .client()
                .kv()
                .get::<String>(&n.sagas, &p.order)
                .await
                .map_err(|e| e.to_string())?;
            if row.is_none() {
                early.notify_one();
                return Err(format!("saga {} not started yet", p.order));
            }
            let outcome = Outcome {
                order: p.order.clone(),
                outcome: "paid".into(),
                cents: p.cents,
            };
            Ok(step
                .once_as(&n.outcome_marker, &p.order, "paid", Ttl::days(30))
                .kv(|k| k.put(&n.sagas, &p.order, &"paid", Ttl::days(30)))
                .timer(&n.timeouts, &p.order, |t| t.cancel())
                .push(&n.outcomes, |m| m.payload(&outcome)))
        })
    }
}

fn timeouts_worker(client: &Client, n: &Names) -> queen_sdk::Worker<String> {
    client
        .worker::<String>(&n.timeouts)
        .group(GROUP, StartAt::Beginning)
        // A timeout that lost to the payment has nothing left to do.
        .on_refused(|msg, gate| async move {
            match gate.lost_to() {
                Some(_) => Ok(msg.step()),
                None => Err(format!("unexpected refusal: {gate}")),
            }
        })
}

/// The fired timeout settles the saga as timed out, unless the payment won first.
fn timeout_step(
    n: Names,
) -> impl Fn(Delivery<String>, TransactionBuilder) -> Step + Send + Sync + 'static {
    move |fired, step| {
        let order = fired.data.clone();
        let outcome = Outcome {
            order: order.clone(),
            outcome: "timed-out".into(),
            cents: 0,
        };
        Box::pin(std::future::ready(Ok(step
            .once_as(&n.outcome_marker, &order, "timed-out", Ttl::days(30))
            .kv(|k| k.put(&n.sagas, &order, &"timed-out", Ttl::days(30)))
            .push(&n.outcomes, |m| m.payload(&outcome)))))
    }
}

/// Waits until the saga row of `order` reads `state`.
async fn wait_for_state(
    client: &Client,
    n: &Names,
    order: &str,
    state: &str,
) -> anyhow::Result<()> {
    loop {
        let row = client.kv().get::<String>(&n.sagas, order).await?;
        if row.as_ref().map(|r| r.value.as_str()) == Some(state) {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// How many messages `queue` holds (a few here: one page of the broker's listing).
async fn count(client: &Client, queue: &str) -> anyhow::Result<usize> {
    let page = client.messages(MessageQuery::queue(queue)).await?;
    Ok(page.messages.len())
}

/// Waits until `queue` holds `n` messages.
async fn wait_for_count(client: &Client, queue: &str, n: usize) -> anyhow::Result<()> {
    while count(client, queue).await? < n {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}
