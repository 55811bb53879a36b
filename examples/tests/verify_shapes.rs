//! Runs `verify-shapes` as a user would: every step shape proven exactly-once with the
//! answers of committed steps lost, the unsafe worker caught with a replay command that
//! reproduces it, and the runs that would prove nothing refused (exit code 2).
//! `QUEEN_VERIFY_SCHEDULES` raises the count; by default CI runs 40 per shape.

use std::process::{Command, Output, Stdio};

const CI_SCHEDULES: &str = "40";

fn verify_shapes(args: &[&str], schedules: &str) -> Output {
    Command::new(env!("CARGO_BIN_EXE_verify-shapes"))
        .args(args)
        .env("QUEEN_VERIFY_SCHEDULES", schedules)
        .env_remove("QUEEN_URL")
        .stdin(Stdio::null())
        .output()
        .expect("running verify-shapes")
}

#[test]
fn every_shape_is_proven_and_the_unsafe_one_caught() {
    let schedules =
        std::env::var("QUEEN_VERIFY_SCHEDULES").unwrap_or_else(|_| CI_SCHEDULES.to_string());
    let out = verify_shapes(&[], &schedules);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "verify-shapes failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    for shape in [
        "ack-incr",
        "ack-timer",
        "ack-push-own-id",
        "failed-ack",
        "required-decrement",
        "lock-guard",
        "expected-version",
    ] {
        let line = stdout
            .lines()
            .find(|l| l.starts_with(&format!("{shape}: ")))
            .unwrap_or_else(|| panic!("no line for {shape} in:\n{stdout}"));
        assert!(
            line.contains(&format!(" {schedules} schedules, ")),
            "{line}"
        );
        assert!(line.ends_with(": 0 violations"), "{line}");
        // Faults were injected: a proof under no fault proves nothing here.
        assert!(!line.contains(" 0 faults injected"), "{line}");
    }
    let caught = stdout
        .lines()
        .find(|l| l.starts_with("unsafe: caught at schedule"))
        .unwrap_or_else(|| panic!("the unsafe worker was not caught:\n{stdout}"));
    assert!(caught.contains("tally/steps"), "{caught}");

    // The printed replay reproduces the catch: exit code 1.
    let replay = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("replay it: verify-shapes "))
        .expect("a replay command");
    let schedule = replay
        .split_once("--replay '")
        .and_then(|(_, s)| s.strip_suffix('\''))
        .expect("a quoted schedule");
    let again = verify_shapes(
        &[
            "--shape",
            "unsafe",
            "--seed",
            "0x5eed0049",
            "--replay",
            schedule,
        ],
        &schedules,
    );
    assert_eq!(
        again.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&again.stdout)
    );
}

#[test]
fn a_run_that_would_prove_nothing_is_refused_with_exit_code_2() {
    let zero = verify_shapes(&["--shape", "ack-incr"], "0");
    let stdout = String::from_utf8_lossy(&zero.stdout);
    assert_eq!(zero.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.contains("could not run: no schedule to run"),
        "{stdout}"
    );
    assert!(!stdout.contains("0 violations"), "{stdout}");

    let bad = verify_shapes(&["--shape", "ack-incr"], "many");
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&bad.stderr).contains("is not a number of schedules"),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
}
