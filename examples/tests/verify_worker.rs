//! Runs `verify-worker` as a user would, with a bounded schedule count: the order worker
//! must pass every schedule and both broken workers must be caught, each with a minimal
//! schedule printed. `QUEEN_VERIFY_SCHEDULES` raises the count (a nightly run); by
//! default CI runs 24.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The schedules CI runs when `QUEEN_VERIFY_SCHEDULES` is not set.
const CI_SCHEDULES: &str = "24";

#[test]
fn verify_worker_passes_the_order_worker_and_catches_both_broken_ones() {
    let schedules =
        std::env::var("QUEEN_VERIFY_SCHEDULES").unwrap_or_else(|_| CI_SCHEDULES.to_string());
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_verify-worker"))
        .env("QUEEN_VERIFY_SCHEDULES", &schedules)
        .env_remove("QUEEN_URL")
        .stdin(Stdio::null())
        .output()
        .expect("running verify-worker");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "verify-worker failed ({:?}) after {took:?}:\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = |prefix: &str| {
        stdout
            .lines()
            .find(|l| l.starts_with(prefix))
            .unwrap_or_else(|| panic!("no line starting with {prefix:?} in:\n{stdout}"))
            .to_string()
    };
    let good = line("order worker (spec/transaction.md):");
    assert!(good.ends_with(": 0 violations"), "{good}");
    assert!(good.contains(&format!("{schedules} schedules")), "{good}");
    for broken in ["broken worker 1", "broken worker 2"] {
        assert!(line(broken).contains(": caught at schedule"), "{stdout}");
    }
    assert_eq!(
        stdout.matches("  minimal schedule: ").count(),
        2,
        "each broken worker's minimal schedule is printed:\n{stdout}"
    );
    assert!(stdout.contains("replay it with one call: check.replay("));
    assert!(
        took < Duration::from_secs(240),
        "verify-worker took {took:?} for {schedules} schedules"
    );
}
