//! A check that cannot judge its worker says so (exit code 2), and never reports a
//! proof or a catch: no schedule, no invariant, a run that could not be set up. And a
//! worker that gives up on every input is not proven by "every input acknowledged".

use queen_sdk::{AckStatus, Client, StartAt};
use queen_verify::{Input, Invariant, Outcome, Schedule, Stop, WorkerCheck};
use serde_json::{Value, json};

/// Dead-letters every order it takes: each is "acknowledged", none is handled.
async fn gives_up(
    client: Client,
    stop: Stop,
) -> Result<queen_sdk::Summary, queen_sdk::WorkerError> {
    client
        .worker::<Value>("orders")
        .group("billing", StartAt::Beginning)
        .run(
            move |msg, _step| async move { Ok::<_, String>(msg.step_with(AckStatus::Dlq)) },
            stop,
        )
        .await
}

fn orders(check: WorkerCheck) -> WorkerCheck {
    check
        .group("billing")
        .inputs((1..=3).map(|n| Input::new("orders", &json!({"orderId": n}))))
        .schedules(4)
}

#[test]
fn no_invariant_could_not_run() {
    let verdict = orders(WorkerCheck::new(gives_up)).run_blocking();
    assert_eq!(verdict.outcome(), Outcome::CouldNotRun, "{verdict}");
    assert!(!verdict.passed());
    assert_eq!((verdict.schedules, verdict.violations()), (0, 0));
    let why = verdict.could_not_run.as_ref().unwrap();
    assert!(why.cause.starts_with("no invariant"), "{why}");
    // Replaying a schedule of it cannot judge anything either.
    let replay = orders(WorkerCheck::new(gives_up)).replay_blocking(Schedule::new());
    assert_eq!(replay.outcome(), Outcome::CouldNotRun, "{replay}");
}

#[test]
fn zero_schedules_could_not_run() {
    let verdict = orders(WorkerCheck::new(gives_up))
        .invariant(Invariant::inputs_acked())
        .schedules(0)
        .run_blocking();
    assert_eq!(verdict.outcome(), Outcome::CouldNotRun, "{verdict}");
    let report = verdict.to_string();
    assert!(
        report.starts_with("could not run: no schedule to run"),
        "{report}"
    );
    assert!(!report.contains("violations"), "{report}");
}

#[test]
fn inputs_ending_dead_lettered_are_a_violation_unless_allowed() {
    let check = orders(WorkerCheck::new(gives_up)).invariant(Invariant::inputs_acked());
    let verdict = check.run_blocking();
    assert_eq!(verdict.outcome(), Outcome::Counterexample, "{verdict}");
    let c = verdict.counterexample.as_ref().unwrap();
    assert!(
        c.violation.invariant.starts_with("no input dead-lettered"),
        "{c}"
    );
    assert_eq!(c.schedule, Schedule::new(), "no fault is needed: {c}");

    // Allowed, or expected by name: proven.
    let allowed = check.clone().allow_dead_letters().run_blocking();
    assert!(allowed.passed(), "{allowed}");
    let expected = orders(WorkerCheck::new(gives_up))
        .invariant(Invariant::inputs_acked())
        .invariant(Invariant::dead_letters(["input-0", "input-1", "input-2"]))
        .run_blocking();
    assert!(expected.passed(), "{expected}");
}
