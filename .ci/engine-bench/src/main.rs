//! The order worker's steps per second on one broker, through `queen-sdk`'s worker and
//! through the official Queen 2 client's (`queen-mq` 2.7.0) consume loop, one after the
//! other in one process, and their ratio.
//!
//! The step is the order worker's (`examples/src/bin/order-worker.rs`, as
//! `spec/transaction.md` writes it): one transaction that acks the event, pushes a
//! receipt to the customer's partition, puts the order's state in KV (30 days), sets the
//! `paid` marker with a required `putIfAbsent` (1 day) and schedules a reminder a day
//! out. Each client gets a queue of its own, pre-filled (untimed) with `--messages`
//! events over `--partitions` partitions, and consumes it as group `billing` from the
//! beginning with `--concurrency` loops and pops of up to `--batch` messages; the clock
//! runs from the consumer's start to its last committed step.
//!
//! A step that does not commit stops the run (exit 1) with the broker's answer: on
//! queen-engine 1.3 with its defaults the KV quota (`QUEEN_KV_WRITE_RATE` 100 writes a
//! second per tenant, burst 200) refuses the step's riders as `rate_limited` within a
//! second, so `.ci/queen-engine.sh bench` is run with the quota raised to measure
//! the clients rather than the quota.
//!
//! Exit codes: 0 both measured; 1 a client failed a step or stopped early; 2 the
//! command line is wrong or the broker could not be reached.
//!
//! ```sh
//! engine-bench --url http://127.0.0.1:6632 --messages 2000 --concurrency 4
//! ```

use std::convert::Infallible;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use queen_sdk::{Client, PushItem, StartAt, TransactionBuilder, Ttl};
use serde::Deserialize;
use serde_json::json;
use tokio::sync::Notify;

/// The event, as the order worker reads it.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
struct OrderPaid {
    order_id: String,
    customer: String,
    total: f64,
}

const GROUP: &str = "billing";
const MONTH: u64 = 30 * 86_400;
const DAY: u64 = 86_400;

struct Args {
    url: String,
    messages: u64,
    partitions: u64,
    concurrency: usize,
    batch: u32,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        url: std::env::var("QUEEN_URL").unwrap_or_else(|_| "http://127.0.0.1:6632".into()),
        messages: 2000,
        partitions: 16,
        concurrency: 4,
        batch: 10,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().ok_or(format!("{flag} needs a value"))?;
        let n = || v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--url" => a.url = v.clone(),
            "--messages" => a.messages = n()?.max(1),
            "--partitions" => a.partitions = n()?.max(1),
            "--concurrency" => a.concurrency = n()?.max(1) as usize,
            "--batch" => a.batch = n()?.clamp(1, 1000) as u32,
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    Ok(a)
}

/// The names of one client's run: fresh, so neither sees the other's state.
struct Names {
    orders: String,
    receipts: String,
    reminders: String,
    state: String,
    paid: String,
}

impl Names {
    fn new(client: &str, run: u128) -> Names {
        let n = |what: &str| format!("bench-{run}-{client}-{what}");
        Names {
            orders: n("orders"),
            receipts: n("receipts"),
            reminders: n("reminders"),
            state: n("state"),
            paid: n("paid"),
        }
    }
}

/// Pushes the events (untimed), 500 a call.
async fn prefill(sdk: &Client, names: &Names, a: &Args) -> Result<(), String> {
    let items: Vec<PushItem> = (0..a.messages)
        .map(|i| {
            let customer = format!("customer-{}", i % a.partitions);
            PushItem::new(
                &names.orders,
                &json!({"orderId": format!("order-{i}"), "customer": customer, "total": i}),
            )
            .partition(&customer)
            .transaction_id(format!("order-{i}-paid"))
        })
        .collect();
    for chunk in items.chunks(500) {
        sdk.push(chunk.to_vec())
            .await
            .map_err(|e| format!("pre-filling {}: {e}", names.orders))?;
    }
    Ok(())
}

/// The order worker's step on `queen-sdk` (ids of the receipt and the timer derived
/// from the acked event, as the SDK does).
fn sdk_step(ack: TransactionBuilder, names: &Names, o: &OrderPaid) -> TransactionBuilder {
    ack.push(&names.receipts, |p| {
        p.partition(&o.customer)
            .payload(&json!({"orderId": o.order_id, "total": o.total}))
    })
    .kv(|k| {
        k.put(
            &names.state,
            &o.order_id,
            &json!({"status": "paid"}),
            Ttl::days(30),
        )
    })
    .once(&names.paid, format!("{}-paid", o.order_id), Ttl::days(1))
    .timer(&names.reminders, &o.order_id, |t| {
        t.after(Duration::from_secs(DAY))
            .payload(&json!({"orderId": o.order_id}))
    })
}

/// Runs the SDK's worker until `n` steps committed; answers the seconds that took.
async fn run_sdk(url: &str, names: Arc<Names>, a: &Args) -> Result<f64, String> {
    let client = Client::new(url).map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicU64::new(0));
    let all_done = Arc::new(Notify::new());
    let n = a.messages;
    let (d, nd) = (Arc::clone(&done), Arc::clone(&all_done));
    // The clock stops at the last committed step, not when the worker has drained.
    let finished: Arc<OnceLock<Instant>> = Arc::default();
    let fin = Arc::clone(&finished);
    let failure: Arc<OnceLock<String>> = Arc::default();
    let first_failure = Arc::clone(&failure);
    let stop = {
        let nd = Arc::clone(&all_done);
        async move { nd.notified().await }
    };
    let started = Instant::now();
    let in_steps = Arc::clone(&names);
    let summary = client
        .worker::<OrderPaid>(&names.orders)
        .group(GROUP, StartAt::Beginning)
        .concurrency(a.concurrency)
        .batch(a.batch)
        .on_settled(move |msg, outcome| {
            if outcome.name() != "committed" {
                // A step that did not commit (the engine's KV quota answers
                // rate_limited) makes this no measure of the client: stop, say why.
                let why = match outcome {
                    queen_sdk::Outcome::Failed { error, .. } => error.to_string(),
                    queen_sdk::Outcome::Unknown { error } => error.to_string(),
                    _ => String::new(),
                };
                let _ = first_failure.set(format!(
                    "{} settled {} {why}",
                    msg.transaction_id,
                    outcome.name()
                ));
                nd.notify_one();
            } else if d.fetch_add(1, Ordering::SeqCst) + 1 == n {
                let _ = fin.set(Instant::now());
                nd.notify_one();
            }
        })
        .run(
            move |msg, ack| {
                let step = sdk_step(ack, &in_steps, &msg.data);
                async move { Ok::<_, Infallible>(step) }
            },
            stop,
        )
        .await
        .map_err(|e| format!("the SDK's worker stopped: {e}"))?;
    let secs = finished
        .get()
        .map_or(f64::NAN, |t| t.duration_since(started).as_secs_f64());
    let committed = done.load(Ordering::SeqCst);
    if let Some(why) = failure.get() {
        return Err(format!("a step did not commit: {why} ({summary})"));
    }
    if committed < n {
        return Err(format!(
            "the SDK's worker committed {committed} of {n} steps: {summary}"
        ));
    }
    Ok(secs)
}

/// Runs the official client's consume loop until `n` steps committed; answers the
/// seconds that took. The handler commits the step itself (`auto_ack(false)`: the ack
/// is in the transaction) and fails on a step that did not commit.
async fn run_official(url: &str, names: Arc<Names>, a: &Args) -> Result<f64, String> {
    use queen_mq::{Cancel, Config, Expiry, Queen, SubscriptionMode};
    let queen = Queen::connect(Config::new(url)).map_err(|e| e.to_string())?;
    let done = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let cancel = Cancel::new();
    let n = a.messages;
    let finished: Arc<OnceLock<Instant>> = Arc::default();
    let started = Instant::now();
    let handler = {
        let (queen, names) = (queen.clone(), Arc::clone(&names));
        let (done, failed, cancel) = (Arc::clone(&done), Arc::clone(&failed), cancel.clone());
        let finished = Arc::clone(&finished);
        move |msg: queen_mq::Message| {
            let (queen, names) = (queen.clone(), Arc::clone(&names));
            let (done, failed, cancel) = (Arc::clone(&done), Arc::clone(&failed), cancel.clone());
            let finished = Arc::clone(&finished);
            async move {
                let o: OrderPaid = serde_json::from_value(msg.data.clone())
                    .map_err(|e| format!("decoding {}: {e}", msg.transaction_id))?;
                let payload = serde_json::to_vec(&json!({"orderId": o.order_id}))
                    .map_err(|e| e.to_string())?;
                let step = queen
                    .transaction()
                    .ack(&msg)
                    .push_to(
                        names.receipts.as_str(),
                        o.customer.as_str(),
                        json!({"orderId": o.order_id, "total": o.total}),
                    )
                    .and_then(|t| {
                        t.kv_put(
                            &names.state,
                            &o.order_id,
                            json!({"status": "paid"}),
                            Expiry::seconds(MONTH as i64),
                        )
                    })
                    .and_then(|t| {
                        t.kv_put_if_absent(
                            &names.paid,
                            &format!("{}-paid", o.order_id),
                            json!(true),
                            Expiry::seconds(DAY as i64),
                        )
                    })
                    .map_err(|e| e.to_string())?
                    .schedule(
                        &names.reminders,
                        &o.order_id,
                        Duration::from_secs(DAY),
                        payload,
                    );
                let answer = step.commit().await.map_err(|e| e.to_string())?;
                if !answer.success {
                    if failed.fetch_add(1, Ordering::SeqCst) == 0 {
                        eprintln!(
                            "queen-mq consume: step of {} did not commit: {answer:?}",
                            o.order_id
                        );
                    }
                    cancel.cancel();
                    return Err(format!("step of {} did not commit", o.order_id));
                }
                if done.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    let _ = finished.set(Instant::now());
                    cancel.cancel();
                }
                Ok::<_, String>(())
            }
        }
    };
    queen
        .queue(names.orders.as_str())
        .group(GROUP)
        .subscription_mode(SubscriptionMode::All)
        .concurrency(a.concurrency)
        .batch(a.batch as i32)
        .auto_ack(false)
        // An idle long-poll ends within a second, so the loop sees the cancel soon
        // after the last step (the clock has stopped by then).
        .poll_timeout(Duration::from_secs(1))
        .cancel(cancel.clone())
        .consume(handler)
        .await
        .map_err(|e| format!("the official consume loop stopped: {e}"))?;
    let secs = finished
        .get()
        .map_or(f64::NAN, |t| t.duration_since(started).as_secs_f64());
    let committed = done.load(Ordering::SeqCst);
    if committed < n || failed.load(Ordering::SeqCst) > 0 {
        return Err(format!(
            "the official consume loop committed {committed} of {n} steps ({} failed)",
            failed.load(Ordering::SeqCst)
        ));
    }
    Ok(secs)
}

#[tokio::main]
async fn main() -> ExitCode {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!(
                "engine-bench: {e}\nusage: engine-bench [--url URL] [--messages N] [--partitions P] [--concurrency C] [--batch B]"
            );
            return ExitCode::from(2);
        }
    };
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let sdk = match Client::new(&a.url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("engine-bench: {e}");
            return ExitCode::from(2);
        }
    };
    let (ours, theirs) = (
        Arc::new(Names::new("sdk", run)),
        Arc::new(Names::new("official", run)),
    );
    for names in [&ours, &theirs] {
        if let Err(e) = prefill(&sdk, names, &a).await {
            eprintln!("engine-bench: could not run: {e}");
            return ExitCode::from(2);
        }
    }
    println!(
        "engine-bench: {} events over {} partitions per client, concurrency {}, batch {}, against {}",
        a.messages, a.partitions, a.concurrency, a.batch, a.url
    );
    let mut rates = Vec::new();
    for label in ["queen-sdk worker", "queen-mq 2.7.0 consume"] {
        let result = if rates.is_empty() {
            run_sdk(&a.url, Arc::clone(&ours), &a).await
        } else {
            run_official(&a.url, Arc::clone(&theirs), &a).await
        };
        match result {
            Ok(secs) => {
                let rate = a.messages as f64 / secs;
                println!(
                    "{label}: {} steps in {secs:.2} s: {rate:.0} steps/s",
                    a.messages
                );
                rates.push(rate);
            }
            Err(e) => {
                println!("{label}: FAILED: {e}");
                return ExitCode::from(1);
            }
        }
    }
    println!("ratio queen-sdk / queen-mq: {:.2}", rates[0] / rates[1]);
    ExitCode::SUCCESS
}
