//! A seed replays exactly: two runs of one check print the same verdict, and the
//! printed minimal schedule, replayed, fails the same way with the same trace every
//! time — the cases that depended on the tokio scheduler's timing before (several
//! replicas, a lease expiry mid-step, a broker restart) included.

use queen_sdk::{Client, StartAt, Ttl};
use queen_verify::{Counterexample, Input, Invariant, Schedule, Stop, Verdict, WorkerCheck};
use serde_json::{Value, json};

/// Acks without the lease (a copy of the message with its lease id blanked) and adds
/// each order's total to a counter with no `once` gate: two replicas that both take a
/// message whose lease lapsed both count it.
async fn unfenced(
    client: Client,
    stop: Stop,
) -> Result<queen_sdk::Summary, queen_sdk::WorkerError> {
    let steps = client.clone();
    client
        .worker::<Value>("orders")
        .group("billing", StartAt::Beginning)
        .run(
            move |msg, _fenced| {
                let mut unleased = msg.message().clone();
                unleased.lease_id.clear();
                let total = msg.data["total"].as_i64().unwrap_or_default();
                let step = steps
                    .transaction()
                    .ack(&unleased)
                    .kv(|k| k.incr("revenue", "all", total, Ttl::Forever));
                async move { Ok::<_, String>(step) }
            },
            stop,
        )
        .await
}

fn check() -> WorkerCheck {
    WorkerCheck::new(unfenced)
        .group("billing")
        .inputs((1..=4).map(|n| {
            Input::new("orders", &json!({"orderId": n, "total": 10 * n}))
                .partition(format!("customer-{}", n % 2))
        }))
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::kv_equals("revenue", "all", json!(100)))
        .replicas(3)
        .seed(0x5EED)
        .schedules(200)
}

/// The report without its wall-clock figure.
fn printed(v: &Verdict) -> String {
    let text = v.to_string();
    let (head, rest) = text.split_once('\n').unwrap_or((&text, ""));
    let head = head.split(" s: ").last().unwrap_or_default();
    format!("{head}\n{rest}")
}

fn counterexample(v: &Verdict) -> &Counterexample {
    v.counterexample
        .as_ref()
        .unwrap_or_else(|| panic!("the unfenced worker was not caught: {v}"))
}

#[test]
fn the_same_seed_prints_the_same_verdict() {
    let check = check();
    let first = check.run_blocking();
    let second = check.run_blocking();
    counterexample(&first);
    assert_eq!(printed(&first), printed(&second));
    assert_eq!(first.faults_hit, second.faults_hit);
}

#[test]
fn a_printed_counterexample_replays_the_same_failure_20_times_out_of_20() {
    let check = check();
    let found = check.run_blocking();
    let c = counterexample(&found);
    // What the report prints, parsed back, as a user pastes it.
    let schedule: Schedule = c
        .schedule
        .to_string()
        .parse()
        .expect("a printed schedule parses");
    for n in 1..=20 {
        let replay = check.replay_blocking(schedule.clone());
        let r = replay
            .counterexample
            .as_ref()
            .unwrap_or_else(|| panic!("replay {n} of {} passed", c.schedule));
        assert_eq!(r.violation, c.violation, "replay {n}");
        assert_eq!(r.trace, c.trace, "replay {n}: the trace differs");
    }
}
