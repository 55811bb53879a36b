//! Runs `verify-worker` as a user would, with a bounded schedule count: the order worker
//! must pass every schedule and both broken workers must be caught, each with a minimal
//! schedule printed; the same seed must print the same report twice; and the replay
//! command a report prints must reproduce its failure, with exit code 1.
//! `QUEEN_VERIFY_SCHEDULES` raises the count (a nightly run); by default CI runs 200.

use std::process::{Command, Output, Stdio};

/// The schedules CI runs when `QUEEN_VERIFY_SCHEDULES` is not set.
const CI_SCHEDULES: &str = "200";

fn verify_worker(args: &[&str], schedules: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verify-worker"))
        .args(args)
        .env("QUEEN_VERIFY_SCHEDULES", schedules)
        .env_remove("QUEEN_URL")
        .stdin(Stdio::null())
        .output()
        .expect("running verify-worker")
}

/// The report without its durations (`0.4 s`), which are wall time.
fn without_durations(out: &str) -> String {
    out.split(' ')
        .map(|w| {
            let number = w.trim_matches(['(', ',', ')', ':']);
            if number.contains('.') && number.parse::<f64>().is_ok() {
                "<secs>"
            } else {
                w
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn verify_worker_passes_the_order_worker_and_catches_both_broken_ones() {
    let schedules =
        std::env::var("QUEEN_VERIFY_SCHEDULES").unwrap_or_else(|_| CI_SCHEDULES.to_string());
    let out = verify_worker(&[], &schedules);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "verify-worker failed ({:?}):\n{stdout}\n{}",
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

    // The same seed, the same report.
    let again = verify_worker(&[], &schedules);
    assert_eq!(
        without_durations(&stdout),
        without_durations(&String::from_utf8_lossy(&again.stdout)),
        "a second run printed another report"
    );

    // Each printed replay command reproduces its failure: exit code 1, same invariant.
    let replays: Vec<&str> = stdout
        .lines()
        .filter_map(|l| l.trim().strip_prefix("replay it: verify-worker "))
        .collect();
    assert_eq!(replays.len(), 2, "{stdout}");
    for replay in replays {
        let args: Vec<&str> = replay
            .split(" --")
            .flat_map(|part| {
                let part = part.trim_start_matches("--");
                let (flag, value) = part.split_once(' ').expect("a flag and its value");
                [flag, value]
            })
            .collect();
        let args: Vec<String> = args
            .chunks(2)
            .flat_map(|fv| [format!("--{}", fv[0]), fv[1].trim_matches('\'').to_string()])
            .collect();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = verify_worker(&args, &schedules);
        let replayed = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{replay}:\n{replayed}");
        assert!(
            replayed.contains("invariant broken: "),
            "{replay}:\n{replayed}"
        );
    }
}

#[test]
fn a_wrong_command_line_exits_2() {
    let out = verify_worker(&["--worker", "nobody"], "1");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--worker: no check named \"nobody\""));
    let out = verify_worker(&["--replay", "transaction#1:lease-expiry"], "1");
    assert_eq!(out.status.code(), Some(2), "a replay needs --worker");
}
