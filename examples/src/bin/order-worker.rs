//! The seed's order worker (the Example of `spec/transaction.md`).
//!
//! An `order-paid` event is popped as consumer group `billing`, and the worker's whole
//! step is one transaction: ack the event, push a receipt to `receipts/customer-123`, put
//! the order's state in KV `orders/order-7`, set the `once("paid", "order-7-paid")` marker
//! and schedule a reminder. Then the group is seeked back, the same event comes again
//! under a new lease, the same step runs again, and it rolls back as `duplicate`: the SDK
//! derived the receipt's `transactionId` from the acked event, so the second run names
//! the same receipt. There is still exactly one receipt, and the redelivered event is
//! acked on its own (its ack rolled back with the step), so it does not come back again.
//!
//! With `QUEEN_URL` set it is a long-lived worker instead: the same step for every
//! `order-paid` event on the queue `orders`, run by the SDK's worker runtime
//! (`Client::worker`): concurrent partitions, renewed leases, every outcome settled (an
//! event whose order is already paid is acked as already done), until Ctrl-C or SIGTERM,
//! which drains it and prints its summary.
//!
//! ```sh
//! cargo run -p queen-examples --bin order-worker                        # one-shot demo, embedded broker
//! QUEEN_URL=http://127.0.0.1:6632 cargo run -p queen-examples --bin order-worker   # a worker; Ctrl-C stops it
//! ```

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, bail, ensure};
use queen_examples::{Env, EnvOptions, URL_VAR, read_all, shutdown_signal};
use queen_sdk::{
    AckStatus, Client, Commit, Committed, Error, Message, Outcome, PushItem, RollbackReason,
    SeekTo, StartAt, StepResult, SubscriptionMode, TransactionBuilder, Ttl,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The event a payment service publishes: `{"orderId": "order-7", "customer":
/// "customer-123", "total": 120.5}`, as the README's `curl` pushes it (without a
/// `customer`, the message's partition names the customer).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderPaid {
    order_id: String,
    #[serde(default)]
    customer: String,
    #[serde(default)]
    total: f64,
}

/// What the worker writes where (suffixed per run against `QUEEN_URL`).
struct Names {
    orders: String,
    receipts: String,
    reminders: String,
    orders_ns: String,
    paid_ns: String,
}

const GROUP: &str = "billing";

/// The parts of the step the broker has. Queen v0 (the PostgreSQL broker) has acks,
/// pushes and the ack + push transaction, but no KV store and no timers: the SDK says
/// so with a typed [`Error::Unsupported`], and the step is built without them.
#[derive(Debug, Clone, Copy)]
struct Parts {
    /// The order's state in KV and the `once` marker.
    kv: bool,
    /// The reminder timer.
    timers: bool,
}

impl Parts {
    /// Asks the broker through harmless reads (a KV key and a timer list no one uses);
    /// a missing feature answers [`Error::Unsupported`], which is printed as the reason
    /// its part of the step is skipped.
    async fn of(client: &Client, n: &Names) -> anyhow::Result<Parts> {
        let kv = match client
            .kv()
            .get::<serde_json::Value>(&n.orders_ns, "order-worker-probe")
            .await
        {
            Ok(_) => true,
            Err(e @ Error::Unsupported { .. }) => {
                println!(
                    "skipping the order's KV state and the once() marker: {e} (the receipt's derived transactionId still makes a second run a duplicate)"
                );
                false
            }
            Err(e) => return Err(e).context("reading the KV store"),
        };
        let timers = match client.timers().list(&n.reminders, None, 1).await {
            Ok(_) => true,
            Err(e @ Error::Unsupported { .. }) => {
                println!("skipping the reminder timer: {e}");
                false
            }
            Err(e) => return Err(e).context("listing timers"),
        };
        Ok(Parts { kv, timers })
    }
}

impl Names {
    /// The long-lived worker's names: the same on every run, so it picks up where the
    /// last run stopped.
    fn fixed() -> Names {
        Names {
            orders: "orders".into(),
            receipts: "receipts".into(),
            reminders: "reminders".into(),
            orders_ns: "orders".into(),
            paid_ns: "paid".into(),
        }
    }
}

/// The long-lived worker (with `QUEEN_URL`): the step for every event until a shutdown
/// signal, then a drain and the summary.
async fn serve(env: &Env) -> anyhow::Result<()> {
    let names = Arc::new(Names::fixed());
    let client = env.client().clone();
    let parts = Parts::of(&client, &names).await?;
    println!(
        "order-worker: consuming {} as group {GROUP}; Ctrl-C drains and stops",
        names.orders
    );
    let names_in_steps = Arc::clone(&names);
    // `?`: a worker the broker refused for good (401, 403, the queue gone) is an error,
    // and `main` exits non-zero with it.
    let summary = env
        .client()
        .worker::<OrderPaid>(&names.orders)
        .group(GROUP, StartAt::Beginning)
        .concurrency(4)
        .on_settled(|msg, outcome| {
            let detail = match outcome {
                Outcome::Committed { transaction_id, .. } => {
                    format!(" (transaction {transaction_id})")
                }
                Outcome::Failed { error, .. } => format!(" ({error})"),
                Outcome::Unknown { error } => format!(" ({error})"),
                _ => String::new(),
            };
            println!(
                "settled {} from {}/{}: {}{detail}",
                msg.transaction_id,
                msg.queue,
                msg.partition,
                outcome.name()
            );
        })
        .run(
            move |msg, ack| {
                let step = step(ack, &names_in_steps, parts, &msg);
                async move { Ok::<_, std::convert::Infallible>(step) }
            },
            shutdown_signal(),
        )
        .await?;
    println!("stopped: {summary}");
    Ok(())
}

/// The worker's step for one event, added to `ack` (the transaction that acks it). The
/// same event always yields the same step: the receipt's `transactionId` and the
/// timer's `txn` are derived from the acked message. The parts the broker lacks
/// (`parts`) are left out.
fn step(
    ack: TransactionBuilder,
    n: &Names,
    parts: Parts,
    msg: &Message<OrderPaid>,
) -> TransactionBuilder {
    let o = &msg.data;
    let customer = if o.customer.is_empty() {
        &msg.partition
    } else {
        &o.customer
    };
    let mut step = ack.push(&n.receipts, |p| {
        p.partition(customer)
            .payload(&json!({"orderId": o.order_id, "total": o.total}))
    });
    if parts.kv {
        step = step
            .kv(|k| {
                k.put(
                    &n.orders_ns,
                    &o.order_id,
                    &json!({"status": "paid"}),
                    Ttl::days(30),
                )
            })
            .once(&n.paid_ns, format!("{}-paid", o.order_id), Ttl::days(1));
    }
    if parts.timers {
        step = step.timer(&n.reminders, &o.order_id, |t| {
            t.after(Duration::from_secs(86_400))
                .payload(&json!({"orderId": o.order_id}))
        });
    }
    step
}

async fn pop_one(client: &Client, n: &Names) -> anyhow::Result<Message<OrderPaid>> {
    let mut batch = client
        .pop::<OrderPaid>(&n.orders)
        .group(GROUP)
        .subscription(SubscriptionMode::All)
        .batch(1)
        .wait(Duration::from_secs(2))
        .send()
        .await?;
    ensure!(!batch.is_empty(), "nothing to pop from {}", n.orders);
    Ok(batch.remove(0))
}

fn print_committed(c: &Committed, n: &Names, customer: &str) {
    println!("step committed (transaction {}):", c.transaction_id);
    let kv_ns = [&n.orders_ns, &n.paid_ns];
    for r in c.results() {
        match r {
            StepResult::Ack(a) => println!("  ack    {} as group {GROUP}", a.transaction_id),
            StepResult::Push(p) => println!(
                "  push   receipt to {}/{customer}, transactionId {} (derived from the acked event)",
                p.queue, p.transaction_id
            ),
            StepResult::Kv(k) => println!(
                "  kv     {} {}/{} = {} (applied: {}, version {})",
                k.op,
                kv_ns.get(k.op_index).map_or("?", |s| s.as_str()),
                k.key.as_deref().unwrap_or("?"),
                k.value.as_ref().map_or("-".into(), |v| v.to_string()),
                k.applied.unwrap_or(false),
                k.version.map_or("-".into(), |v| v.to_string()),
            ),
            StepResult::Timer(t) => println!(
                "  timer  {}/{} {}, fires at {}",
                t.queue,
                t.timer_key,
                t.status,
                t.deliver_at.as_deref().unwrap_or("?")
            ),
            other => println!("  {other:?}"),
        }
    }
}

async fn run(env: &Env) -> anyhow::Result<()> {
    let client = env.client();
    let n = Names {
        orders: env.name("orders"),
        receipts: env.name("receipts"),
        reminders: env.name("reminders"),
        orders_ns: env.name("orders"),
        paid_ns: env.name("paid"),
    };
    let parts = Parts::of(client, &n).await?;
    let event = OrderPaid {
        order_id: "order-7".into(),
        customer: "customer-123".into(),
        total: 120.5,
    };

    // 1. The payment service publishes the event.
    client
        .push(vec![
            PushItem::new(&n.orders, &event)
                .partition(&event.customer)
                .transaction_id("order-7-paid"),
        ])
        .await
        .context("pushing the order-paid event")?;
    println!(
        "pushed order-paid event for {} to {}/{} (transactionId order-7-paid)",
        event.order_id, n.orders, event.customer
    );

    // 2. The worker pops it and commits its step.
    let msg = pop_one(client, &n).await?;
    println!(
        "popped {} as group {GROUP} (delivery attempt {}, lease {})",
        msg.transaction_id,
        msg.delivery_attempt.unwrap_or(1),
        msg.lease_id
    );
    let first = match step(client.transaction().ack(&msg), &n, parts, &msg)
        .commit()
        .await?
    {
        Commit::Committed(c) => c,
        Commit::Gated { gate, .. } => {
            bail!("the first run was gated ({gate}): was the marker left by an earlier run?")
        }
    };
    print_committed(&first, &n, &event.customer);

    // 3. A redelivery: the group is rewound (an operator replays the queue, or a worker
    //    crashed after committing but its cursor was restored), and the event comes back.
    let rewound = client
        .seek(GROUP, &n.orders, SeekTo::Beginning)
        .await
        .context("seeking the group back")?;
    println!(
        "redelivery: group {GROUP} seeked back to the start of {} ({rewound} partition(s) rewound)",
        n.orders
    );
    let again = pop_one(client, &n).await?;
    ensure!(
        again.lease_id != msg.lease_id,
        "the redelivery reused the first lease"
    );
    println!(
        "popped {} again under a new lease {}: running the same step",
        again.transaction_id, again.lease_id
    );
    match step(client.transaction().ack(&again), &n, parts, &again)
        .commit()
        .await
    {
        Err(Error::RolledBack {
            reason: RollbackReason::Duplicate,
            retried,
            ..
        }) => {
            println!(
                "second run rolled back as a duplicate: the receipt's transactionId is already in {}/{}; nothing was written (retried: {retried})",
                n.receipts, event.customer
            );
        }
        Ok(Commit::Gated { gate, .. }) => {
            println!(
                "second run gated: the once() marker {}/order-7-paid is set ({}); nothing was written",
                n.paid_ns, gate.reason
            );
        }
        Ok(Commit::Committed(_)) => bail!("the redelivered step committed a second time"),
        Err(e) => return Err(e).context("running the step again"),
    }
    // The step was already done: settle the redelivery on its own, so it does not come
    // back a third time.
    let acked = client.ack(&again, AckStatus::Completed).await?;
    println!(
        "acked the redelivered event on its own (success: {}): the step was already done",
        acked.success
    );

    // 4. What is stored.
    let receipts: Vec<serde_json::Value> =
        read_all(client, &n.receipts, Some(&event.customer), "audit").await?;
    if parts.kv {
        let state = client
            .kv()
            .get::<serde_json::Value>(&n.orders_ns, &event.order_id)
            .await?
            .context("the order's state is missing")?;
        println!(
            "{}/{} = {} (version {})",
            n.orders_ns, event.order_id, state.value, state.version
        );
    }
    let reminders = if parts.timers {
        let rows = client.timers().list(&n.reminders, None, 100).await?.rows;
        println!("reminders pending: {}", rows.len());
        Some(rows.len())
    } else {
        None
    };
    println!("receipts: {}", receipts.len());
    ensure!(receipts.len() == 1, "expected exactly one receipt");
    ensure!(
        reminders.is_none_or(|r| r == 1),
        "expected exactly one reminder"
    );
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let env = Env::connect(EnvOptions::default()).await?;
    if env.is_embedded() {
        println!("broker: {}", env.describe());
    } else {
        // The long-lived worker keeps fixed names, so a restart picks up where it stopped.
        println!("broker: {} {}", URL_VAR, env.url());
    }
    let outcome = if env.is_embedded() {
        run(&env).await
    } else {
        serve(&env).await
    };
    env.shutdown().await;
    outcome
}
