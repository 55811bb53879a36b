//! Proves a worker of every step shape exactly-once when a commit's answer is lost, and
//! shows an unsafe one caught (`queen-verify`).
//!
//! Each worker pops batches of 5 (so most of its acks are mid-batch: the batch's lease
//! stays held by the rest of it, and an ack alone does not stop a resend) and counts
//! each step it applies with a KV `incr`, the observable of a step applied twice. Every
//! schedule loses the answers of some of its `POST /api/v1/transaction` calls after the
//! broker committed them (the connection dropped, or a 503), so the SDK sends those
//! steps again. The shapes:
//!
//! - `ack-incr`: an ack and an `incr`, nothing else;
//! - `ack-timer`: an ack, a timer per message and the `incr`;
//! - `ack-push-own-id`: an ack, a push under the worker's own transaction id, the `incr`;
//! - `failed-ack`: acks `failed` the first delivery of each partition's first input
//!   (counted apart), then completes it;
//! - `required-decrement`: an ack and a `required` decrement of a stock, `min(0)`;
//! - `lock-guard`: an ack and the `incr`, gated on a lock the handler takes and holds;
//! - `expected-version`: an ack, a write that requires the key to be absent
//!   (`expect(0)`), and the `incr`;
//! - `unsafe`: the `ack-incr` step sent with `resend(Resend::AsIs)`, which resends it as
//!   it is: caught counting a step twice.
//!
//! Each runs on fresh in-process brokers, on a paused clock (the same seed prints the
//! same report every time), or with `--url` against a broker by URL through a fault
//! proxy, resetting what the workers write there before each schedule. Exit codes: 0 when every shape is proven and the unsafe one
//! caught (or, with `--shape`, when that one does what it should); 1 when not; 2 when a
//! check could not run or the command line is wrong.
//!
//! ```sh
//! cargo run --release -p queen-examples --bin verify-shapes          # 100 schedules each
//! cargo run -p queen-examples --bin verify-shapes -- --shape ack-incr --schedules 20
//! cargo run -p queen-examples --bin verify-shapes -- --url http://127.0.0.1:6632 \
//!     --shape ack-incr,required-decrement,unsafe                     # a broker by URL
//! ```

use std::process::ExitCode;
use std::time::Instant;

use queen_examples::proof::{Proof, usage_error};
use queen_sdk::{AckStatus, Client, Delivery, Resend, StartAt, TransactionBuilder, Ttl};
use queen_verify::{
    FaultKind, FaultPlan, Input, Invariant, Outcome, ReplayCommand, Resources, Route, State, Stop,
    Verdict, WorkerCheck,
};
use serde_json::json;

/// Inputs per partition: one batch of 5 takes them all, so every ack but the last of a
/// partition is mid-batch.
const PER_PARTITION: usize = 4;
const PARTITIONS: [&str; 2] = ["p1", "p2"];
const GROUP: &str = "shapes";
const SEED: u64 = 0x5EED_0049;
const STOCK: i64 = 100;

fn inputs() -> Vec<Input> {
    PARTITIONS
        .iter()
        .flat_map(|p| {
            (0..PER_PARTITION).map(move |i| {
                Input::new("events", &json!({"id": format!("{p}-{i}")}))
                    .partition(*p)
                    .transaction_id(format!("{p}-{i}"))
            })
        })
        .collect()
}

fn total() -> i64 {
    (PARTITIONS.len() * PER_PARTITION) as i64
}

/// A step shape this program proves, or the unsafe one it catches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    AckIncr,
    AckTimer,
    AckPushOwnId,
    FailedAck,
    RequiredDecrement,
    LockGuard,
    ExpectedVersion,
    Unsafe,
}

impl Shape {
    const ALL: [Shape; 8] = [
        Shape::AckIncr,
        Shape::AckTimer,
        Shape::AckPushOwnId,
        Shape::FailedAck,
        Shape::RequiredDecrement,
        Shape::LockGuard,
        Shape::ExpectedVersion,
        Shape::Unsafe,
    ];

    fn name(self) -> &'static str {
        match self {
            Shape::AckIncr => "ack-incr",
            Shape::AckTimer => "ack-timer",
            Shape::AckPushOwnId => "ack-push-own-id",
            Shape::FailedAck => "failed-ack",
            Shape::RequiredDecrement => "required-decrement",
            Shape::LockGuard => "lock-guard",
            Shape::ExpectedVersion => "expected-version",
            Shape::Unsafe => "unsafe",
        }
    }

    fn parse(s: &str) -> Option<Shape> {
        Shape::ALL.into_iter().find(|w| w.name() == s)
    }

    /// The step for `msg`, on top of `ack` (the runner's `completed` ack of it).
    async fn step(
        self,
        msg: Delivery<serde_json::Value>,
        ack: TransactionBuilder,
    ) -> anyhow::Result<TransactionBuilder> {
        let id = msg.data["id"].as_str().unwrap_or_default().to_string();
        let count = |t: TransactionBuilder| t.kv(|k| k.incr("tally", "steps", 1, Ttl::Forever));
        Ok(match self {
            Shape::AckIncr => count(ack),
            Shape::AckTimer => count(ack.timer("reminders", &id, |t| {
                t.after(std::time::Duration::from_secs(86_400)).payload(&id)
            })),
            Shape::AckPushOwnId => count(ack.push("receipts", |p| {
                p.transaction_id(format!("receipt-{id}"))
                    .payload(&json!({"id": id}))
            })),
            // Each partition's first input fails once (counted apart; the step also
            // records that it failed), then completes. Read from the broker, not from
            // the delivery's attempt count, which not every broker sends.
            Shape::FailedAck => {
                let failed_before = ack
                    .client()
                    .kv()
                    .get::<bool>("failed-once", &id)
                    .await?
                    .is_some();
                if id.ends_with("-0") && !failed_before {
                    msg.step_with(AckStatus::Failed {
                        error: "the first attempt fails".into(),
                    })
                    .kv(|k| k.put("failed-once", &id, &true, Ttl::Forever))
                    .kv(|k| k.incr("tally", "failures", 1, Ttl::Forever))
                } else {
                    count(ack)
                }
            }
            Shape::RequiredDecrement => {
                ack.kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required())
            }
            Shape::LockGuard => {
                let Some(lock) = ack.client().lock(format!("event-{id}")).acquire().await? else {
                    anyhow::bail!("event-{id} is locked: try again");
                };
                count(ack).hold(lock)
            }
            Shape::ExpectedVersion => {
                count(ack.kv(|k| k.put("seen", &id, &true, Ttl::Forever).expect(0).required()))
            }
            Shape::Unsafe => count(ack).resend(Resend::AsIs),
        })
    }

    /// What a run against a broker URL resets before each schedule besides the inputs'
    /// queue and the group: what the worker writes (the step markers need no reset:
    /// their keys are new for each lease).
    fn resources(self) -> Resources {
        let ids: Vec<String> = inputs().iter().map(|i| i.transaction_id.clone()).collect();
        let r = Resources::new().kv_keys("tally", ["steps", "failures"]);
        let first: Vec<String> = PARTITIONS.iter().map(|p| format!("{p}-0")).collect();
        match self {
            Shape::AckTimer => r.timer_queues(["reminders"]),
            Shape::AckPushOwnId => r.queues(["receipts"]),
            Shape::RequiredDecrement => r.kv_keys("stock", ["sku-1"]),
            Shape::ExpectedVersion => r.kv_keys("seen", ids),
            Shape::FailedAck => r.kv_keys("failed-once", first),
            _ => r,
        }
    }

    fn check(self, schedules: usize) -> WorkerCheck {
        let check = WorkerCheck::new(move |client: Client, stop: Stop| async move {
            client
                .worker::<serde_json::Value>("events")
                .group(GROUP, StartAt::Beginning)
                .batch(5)
                .run(move |msg, ack| self.step(msg, ack), stop)
                .await
        })
        .group(GROUP)
        .inputs(inputs())
        .replicas(2)
        .seed(SEED)
        .schedules(schedules)
        // Answers lost after the commit, on steps only: what a resend must survive.
        .faults(
            FaultPlan::only([FaultKind::CommitThenDrop, FaultKind::CommitThenUnavailable])
                .route(Route::Pop, 0)
                .route(Route::Ack, 0)
                .route(Route::Push, 0),
        )
        .invariant(Invariant::inputs_acked());
        let steps = total();
        match self {
            Shape::FailedAck => check
                .invariant(Invariant::kv_equals("tally", "steps", json!(steps)))
                .invariant(Invariant::kv_equals(
                    "tally",
                    "failures",
                    json!(PARTITIONS.len()),
                )),
            Shape::RequiredDecrement => check
                .kv_row("stock", "sku-1", &STOCK, Ttl::Forever)
                .invariant(Invariant::kv_equals(
                    "stock",
                    "sku-1",
                    json!(STOCK - total()),
                )),
            Shape::AckTimer => check
                .invariant(Invariant::kv_equals("tally", "steps", json!(steps)))
                .invariant(Invariant::new("one timer per input", |s: &State<'_>| {
                    let n = s.timers("reminders").map_err(|e| e.to_string())?.len() as i64;
                    if n == total() {
                        Ok(())
                    } else {
                        Err(format!("{n} timers"))
                    }
                })),
            Shape::AckPushOwnId => check
                .invariant(Invariant::kv_equals("tally", "steps", json!(steps)))
                .invariant(Invariant::pushed_once(
                    "receipts",
                    "id",
                    inputs()
                        .iter()
                        .map(|i| ("Default".to_string(), i.transaction_id.clone())),
                )),
            _ => check.invariant(Invariant::kv_equals("tally", "steps", json!(steps))),
        }
    }
}

fn report(shape: Shape, verdict: &Verdict, check: &WorkerCheck, program: &str) -> bool {
    let name = shape.name();
    if let Some(why) = &verdict.could_not_run {
        println!("{name}: {why}");
        return false;
    }
    match (shape, &verdict.counterexample) {
        (Shape::Unsafe, Some(c)) => {
            println!(
                "{name}: caught at schedule {} of {} ({} faults injected, {:.1} s): {}",
                c.case,
                verdict.schedules,
                verdict.faults_hit,
                verdict.elapsed.as_secs_f64(),
                c.violation
            );
            println!("  minimal schedule: {}", c.schedule);
            println!("  {}", ReplayCommand::new(program, check, &c.schedule));
            true
        }
        (Shape::Unsafe, None) => {
            println!("{name}: NOT caught in {} schedules", verdict.schedules);
            false
        }
        (_, None) => {
            println!(
                "{name}: {} schedules, {} faults injected, {:.1} s: 0 violations",
                verdict.schedules,
                verdict.faults_hit,
                verdict.elapsed.as_secs_f64()
            );
            true
        }
        (_, Some(c)) => {
            print!("{name}: {c}");
            println!("  {}", ReplayCommand::new(program, check, &c.schedule));
            false
        }
    }
}

const USAGE: &str = "usage: verify-shapes [--shape NAME[,NAME...]] [--url URL] [--seed N] [--schedules N] [--replay SCHEDULE]
  --shape NAMES  run these checks: ack-incr, ack-timer, ack-push-own-id, failed-ack,
                 required-decrement, lock-guard, expected-version, unsafe (default: all)
  --url URL      run against the broker at URL through a fault proxy (QUEEN_TOKEN: its
                 token); before each schedule it resets what the workers write there, and
                 refuses (exit 2) if it finds there what it did not make (--allow-reset)";

/// Schedules against a URL by default: each takes real time.
const URL_SCHEDULES: usize = 10;

fn main() -> ExitCode {
    let Proof {
        cli,
        args,
        schedules,
    } = match Proof::from_env(USAGE, "--shape", Shape::parse, 100, URL_SCHEDULES) {
        Ok(p) => p,
        Err(code) => return code,
    };
    let usage = |e: &dyn std::fmt::Display| usage_error(USAGE, e);
    let target = |shape: Shape, check: WorkerCheck| args.target(check, shape.resources());
    let program = |shape: Shape| args.program("verify-shapes", "--shape", shape.name());
    if let Some(schedule) = &cli.replay {
        let shape = match args.one("--shape") {
            Ok(s) => *s,
            Err(e) => return usage(&e),
        };
        let verdict = cli.verdict(&cli.configure(target(shape, shape.check(1))));
        println!("{}: replay of {schedule}", shape.name());
        print!("{verdict}");
        return verdict.outcome().into();
    }
    let started = Instant::now();
    println!(
        "verify-shapes: {} inputs in batches of 5, 2 replicas, answers of committed steps lost; {schedules} schedules from seed {:#x}, {}",
        total(),
        cli.seed.unwrap_or(SEED),
        args.where_()
    );
    let mut outcome = Outcome::Proven;
    for shape in Shape::ALL.into_iter().filter(|s| args.runs(s)) {
        let check = cli.configure(target(shape, shape.check(schedules)));
        let verdict = cli.verdict(&check);
        let as_expected = report(shape, &verdict, &check, &program(shape));
        if verdict.could_not_run.is_some() {
            outcome = Outcome::CouldNotRun;
        } else if !as_expected && outcome == Outcome::Proven {
            outcome = Outcome::Counterexample;
        }
    }
    println!(
        "{} ({:.1} s in all)",
        match (outcome, &args.only) {
            (Outcome::Proven, None) => "result: every shape proven; the unsafe one caught",
            (Outcome::Proven, Some(_)) => "result: as expected",
            _ => "result: FAILED",
        },
        started.elapsed().as_secs_f64()
    );
    outcome.into()
}
