//! Proves the order worker of `spec/transaction.md` exactly-once under faults, and shows
//! two broken workers caught, each with its minimal fault schedule (`queen-verify`).
//!
//! 1. The order worker (ack the event, push a receipt, put the order's state, set the
//!    `once` marker, schedule a reminder: one transaction, fenced by the lease, the
//!    receipt's id derived from the event) runs under N seeded fault schedules (default
//!    500): 503s, commits whose answers are lost, delays, 429s, lease expiries mid-step,
//!    broker crashes and restarts on the same file, worker restarts. Every run must end
//!    with every order acknowledged, one receipt per order, the order's state and its
//!    marker written, one reminder per order, nothing dead-lettered.
//! 2. A worker that pushes its receipt in a call of its own under a fresh transaction
//!    id, then commits the rest: a step that runs twice pushes a second receipt.
//! 3. A worker that acks without the lease and adds to a revenue counter without a
//!    gate: two replicas that both take a message whose lease lapsed both count it.
//!
//! It needs no broker (each schedule runs on a fresh in-process one, on a paused clock;
//! `QUEEN_URL` is not read). The same seed prints the same report on every run, the
//! durations aside.
//!
//! Exit codes: 0 when the order worker passes and both broken ones are caught (or, with
//! `--worker`, when that one does what it should); 1 when not; 2 when a check could not
//! run or the command line is wrong. `--replay` runs one printed schedule of one worker
//! and exits with its outcome: 0 it passed, 1 it broke an invariant, 2 it could not run.
//!
//! ```sh
//! cargo run --release -p queen-examples --bin verify-worker              # 500 schedules
//! cargo run -p queen-examples --bin verify-worker -- --schedules 50 --seed 7
//! cargo run -p queen-examples --bin verify-worker -- --worker unfenced \
//!     --replay 'transaction#1:lease-expiry'                               # exits 1
//! ```

use std::convert::Infallible;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use queen_examples::proof::{Proof, usage_error};
use queen_sdk::{Client, Message, PushItem, StartAt, TransactionBuilder, Ttl};
use queen_verify::{
    Input, Invariant, Outcome, ReplayCommand, Resources, State, Stop, Verdict, WorkerCheck,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

/// The event a payment service publishes.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct OrderPaid {
    order_id: String,
    customer: String,
    total: i64,
}

const ORDERS: [(&str, &str, i64); 4] = [
    ("order-1", "customer-1", 120),
    ("order-2", "customer-1", 80),
    ("order-3", "customer-2", 45),
    ("order-4", "customer-2", 60),
];
const GROUP: &str = "billing";
const SEED: u64 = 0x5EED_0019;
/// Copies of each worker running at once: with two partitions, one of three is free to
/// take a message whose lease lapsed while another copy's step was in flight.
const REPLICAS: usize = 3;
/// The most schedules drawn for a broken worker: its check stops at the first failure,
/// so this only bounds the search (a caught worker costs a few schedules).
const BROKEN_SCHEDULES: usize = 200;

fn inputs() -> Vec<Input> {
    ORDERS
        .iter()
        .map(|(order, customer, total)| {
            Input::new(
                "orders",
                &OrderPaid {
                    order_id: order.to_string(),
                    customer: customer.to_string(),
                    total: *total,
                },
            )
            .partition(*customer)
            .transaction_id(format!("{order}-paid"))
        })
        .collect()
}

/// The order worker's step, as `spec/transaction.md` writes it.
fn order_step(ack: TransactionBuilder, msg: &Message<OrderPaid>) -> TransactionBuilder {
    let o = &msg.data;
    let step = ack.push("receipts", |p| {
        p.partition(&o.customer)
            .payload(&json!({"orderId": o.order_id, "total": o.total}))
    });
    order_state(step, o)
}

/// The rest of the step: the order's state, its `once` marker, its reminder.
fn order_state(step: TransactionBuilder, o: &OrderPaid) -> TransactionBuilder {
    step.kv(|k| {
        k.put(
            "orders",
            &o.order_id,
            &json!({"status": "paid"}),
            Ttl::days(30),
        )
    })
    .once("paid", format!("{}-paid", o.order_id), Ttl::days(1))
    .timer("reminders", &o.order_id, |t| {
        t.after(Duration::from_secs(86_400))
            .payload(&json!({"orderId": o.order_id}))
    })
}

/// Runs `handler` as the SDK's worker on `orders` until `stop`.
async fn serve<F>(
    client: Client,
    stop: Stop,
    handler: F,
) -> Result<queen_sdk::Summary, queen_sdk::WorkerError>
where
    F: Fn(TransactionBuilder, queen_sdk::Delivery<OrderPaid>) -> TransactionBuilder
        + Send
        + Sync
        + 'static,
{
    client
        .worker::<OrderPaid>("orders")
        .group(GROUP, StartAt::Beginning)
        .run(
            move |msg, ack| {
                let step = handler(ack, msg);
                async move { Ok::<_, Infallible>(step) }
            },
            stop,
        )
        .await
}

fn order_invariants(check: WorkerCheck) -> WorkerCheck {
    let receipts = ORDERS.map(|(order, customer, _)| (customer, order));
    let mut check = check
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::pushed_once("receipts", "orderId", receipts))
        .invariant(Invariant::no_dead_letters());
    for (order, _, _) in ORDERS {
        check = check.invariant(Invariant::kv_equals(
            "orders",
            order,
            json!({"status": "paid"}),
        ));
    }
    check.invariant(Invariant::new("one reminder per order", |s: &State<'_>| {
        let mut keys: Vec<String> = s
            .timers("reminders")
            .map_err(|e| e.to_string())?
            .into_iter()
            .map(|t| t.key)
            .collect();
        keys.sort();
        let want: Vec<String> = ORDERS.iter().map(|(o, _, _)| o.to_string()).collect();
        if keys == want {
            Ok(())
        } else {
            Err(format!("reminders pending: {keys:?}"))
        }
    }))
}

/// 1. The order worker of `spec/transaction.md`.
fn good(schedules: usize) -> WorkerCheck {
    let check =
        WorkerCheck::new(|client, stop| serve(client, stop, |ack, msg| order_step(ack, &msg)));
    order_invariants(check)
        .group(GROUP)
        .inputs(inputs())
        .replicas(REPLICAS)
        .seed(SEED)
        .schedules(schedules)
}

/// 2. Pushes its receipt in a call of its own, under a fresh transaction id per attempt, and
///    only then commits the step (ack, state, marker, reminder).
fn fresh_ids(schedules: usize) -> WorkerCheck {
    // A fresh id on every attempt, as a random one is; counted rather than drawn so
    // that this program prints the same report on every run (the verifier replays
    // its own choices exactly, not a worker's randomness).
    let attempts = Arc::new(AtomicU64::new(0));
    let check = WorkerCheck::new(move |client, stop| {
        let attempts = Arc::clone(&attempts);
        async move {
            let pushes = client.clone();
            let attempts = Arc::clone(&attempts);
            client
                .worker::<OrderPaid>("orders")
                .group(GROUP, StartAt::Beginning)
                .run(
                    move |msg, ack| {
                        let client = pushes.clone();
                        let attempts = Arc::clone(&attempts);
                        async move {
                            let o = &msg.data;
                            client
                                .push(vec![
                                    PushItem::new(
                                        "receipts",
                                        &json!({"orderId": o.order_id, "total": o.total}),
                                    )
                                    .partition(&o.customer)
                                    .transaction_id(format!(
                                        "receipt-attempt-{}",
                                        attempts.fetch_add(1, Ordering::Relaxed)
                                    )),
                                ])
                                .await?;
                            Ok::<_, queen_sdk::Error>(order_state(ack, o))
                        }
                    },
                    stop,
                )
                .await
        }
    });
    order_invariants(check)
        .group(GROUP)
        .inputs(inputs())
        .replicas(REPLICAS)
        .seed(SEED)
        .schedules(schedules)
}

/// 3. Acks without the lease (a copy of the message with its lease id blanked) and adds
///    the order's total to its customer's revenue with no `once` gate.
fn unfenced(schedules: usize) -> WorkerCheck {
    let check = WorkerCheck::new(|client, stop| {
        serve(client.clone(), stop, move |_fenced, msg| {
            let mut unleased = msg.message().clone();
            unleased.lease_id.clear();
            let o = &msg.data;
            client
                .transaction()
                .ack(&unleased)
                .kv(|k| {
                    k.put(
                        "orders",
                        &o.order_id,
                        &json!({"status": "paid"}),
                        Ttl::days(30),
                    )
                })
                .kv(|k| k.incr("revenue", &o.customer, o.total, Ttl::Forever))
        })
    });
    let mut check = check
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::no_dead_letters());
    for customer in ["customer-1", "customer-2"] {
        let sum: i64 = ORDERS
            .iter()
            .filter(|(_, c, _)| *c == customer)
            .map(|(_, _, t)| t)
            .sum();
        check = check.invariant(Invariant::kv_equals("revenue", customer, json!(sum)));
    }
    check
        .group(GROUP)
        .inputs(inputs())
        .replicas(REPLICAS)
        .seed(SEED)
        .schedules(schedules)
}

fn caught(which: Which, program: &str, check: &WorkerCheck, verdict: &Verdict) -> bool {
    let name = which.title();
    // A check that could not run caught nothing, whatever stopped it.
    if let Some(why) = &verdict.could_not_run {
        println!("{name}: {why}");
        return false;
    }
    match &verdict.counterexample {
        Some(c) => {
            println!(
                "{name}: caught at schedule {} of {} ({} faults injected, {:.1} s)",
                c.case,
                verdict.schedules,
                verdict.faults_hit,
                verdict.elapsed.as_secs_f64()
            );
            println!("  minimal schedule: {}", c.schedule);
            for line in c.to_string().lines() {
                println!("  | {line}");
            }
            println!("  {}", ReplayCommand::new(program, check, &c.schedule));
            true
        }
        None => {
            println!(
                "{name}: NOT caught in {} schedules ({:.1} s)",
                verdict.schedules,
                verdict.elapsed.as_secs_f64()
            );
            false
        }
    }
}

/// The checks this program runs, by the name `--worker` takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    Order,
    FreshIds,
    Unfenced,
}

impl Which {
    const ALL: [Which; 3] = [Which::Order, Which::FreshIds, Which::Unfenced];

    fn parse(s: &str) -> Option<Which> {
        Which::ALL.into_iter().find(|w| w.flag() == s)
    }

    fn flag(self) -> &'static str {
        match self {
            Which::Order => "order",
            Which::FreshIds => "fresh-ids",
            Which::Unfenced => "unfenced",
        }
    }

    /// The check, before the command line's seed and count.
    fn check(self, schedules: usize) -> WorkerCheck {
        match self {
            Which::Order => good(schedules),
            Which::FreshIds => fresh_ids(schedules.max(BROKEN_SCHEDULES)),
            Which::Unfenced => unfenced(schedules.max(BROKEN_SCHEDULES)),
        }
    }

    /// What a run against a broker URL resets before each schedule: what the worker
    /// writes besides the inputs' queue and the group. The keys are named too: Queen
    /// 2's engine cannot list a KV namespace, and a `paid` marker an earlier run left
    /// would gate every step of this one.
    fn resources(self) -> Resources {
        let orders = ORDERS.map(|(order, _, _)| order);
        match self {
            Which::Order | Which::FreshIds => Resources::new()
                .queues(["receipts"])
                .kv_keys("orders", orders)
                .kv_keys("paid", orders.map(|o| format!("{o}-paid")))
                .timer_queues(["reminders"]),
            Which::Unfenced => Resources::new()
                .kv_keys("orders", orders)
                .kv_keys("revenue", ["customer-1", "customer-2"]),
        }
    }

    fn title(self) -> &'static str {
        match self {
            Which::Order => "order worker (spec/transaction.md)",
            Which::FreshIds => {
                "broken worker 1 (receipt pushed on its own under a fresh transaction id per attempt)"
            }
            Which::Unfenced => {
                "broken worker 2 (ack without the lease, revenue incr without a gate)"
            }
        }
    }
}

const USAGE: &str = "usage: verify-worker [--worker order|fresh-ids|unfenced] [--url URL] [--seed N] [--schedules N] [--replay SCHEDULE]
  --worker NAMES      run these checks, comma-separated (default: all three)
  --url URL           run against the broker at URL through a fault proxy (QUEEN_TOKEN: its
                      token); before each schedule it resets what the workers write there, and
                      refuses (exit 2) if it finds there what it did not make (--allow-reset)";

/// Schedules against a URL by default: each takes real time (a lapsed lease is waited for).
const URL_SCHEDULES: usize = 20;

fn main() -> ExitCode {
    let Proof {
        cli,
        args,
        schedules,
    } = match Proof::from_env(USAGE, "--worker", Which::parse, 500, URL_SCHEDULES) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let usage = |e: &dyn std::fmt::Display| usage_error(USAGE, e);
    let target = |which: Which, check: WorkerCheck| args.target(check, which.resources());
    // The command that replays one of this run's schedules.
    let program = |which: Which| args.program("verify-worker", "--worker", which.flag());
    let started = Instant::now();

    // One schedule, as a report printed it: its run and its outcome (1: it failed).
    if let Some(schedule) = &cli.replay {
        let which = match args.one("--worker") {
            Ok(w) => *w,
            Err(e) => return usage(&e),
        };
        let verdict = cli.verdict(&cli.configure(target(which, which.check(1))));
        println!("{}: replay of {schedule}", which.title());
        print!("{verdict}");
        return verdict.outcome().into();
    }

    println!(
        "verify-worker: {} orders, {REPLICAS} worker replicas, {schedules} fault schedules from seed {:#x}, {}",
        ORDERS.len(),
        cli.seed.unwrap_or(SEED),
        args.where_()
    );
    let mut outcome = Outcome::Proven;
    for which in Which::ALL.into_iter().filter(|w| args.runs(w)) {
        let check = cli.configure(target(which, which.check(schedules)));
        let check = match (which, cli.schedules) {
            // A broken worker's count only bounds the search for it.
            (Which::FreshIds | Which::Unfenced, None) => {
                check.schedules(schedules.max(BROKEN_SCHEDULES))
            }
            _ => check,
        };
        let verdict = cli.verdict(&check);
        let as_expected = match which {
            Which::Order => {
                println!(
                    "{}: {} schedules, {} faults injected, {:.1} s: {} violations",
                    which.title(),
                    verdict.schedules,
                    verdict.faults_hit,
                    verdict.elapsed.as_secs_f64(),
                    verdict.violations()
                );
                if let Some(why) = &verdict.could_not_run {
                    println!("  {why}");
                }
                if let Some(c) = &verdict.counterexample {
                    println!("{c}");
                    println!(
                        "  {}",
                        ReplayCommand::new(&program(which), &check, &c.schedule)
                    );
                }
                verdict.passed()
            }
            Which::FreshIds | Which::Unfenced => caught(which, &program(which), &check, &verdict),
        };
        if verdict.outcome() == Outcome::CouldNotRun {
            outcome = Outcome::CouldNotRun;
        } else if !as_expected && outcome == Outcome::Proven {
            outcome = Outcome::Counterexample;
        }
    }
    println!(
        "{} ({:.1} s in all)",
        match (outcome, &args.only) {
            (Outcome::Proven, None) =>
                "result: the order worker passed; both broken workers were caught",
            (Outcome::Proven, Some(_)) => "result: as expected",
            _ => "result: FAILED",
        },
        started.elapsed().as_secs_f64()
    );
    outcome.into()
}
