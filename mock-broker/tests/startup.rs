//! A data file the broker cannot open (garbage, truncated) stops it at start with one
//! line that says what and what to do, and exit code 2: no panic, no backtrace.

use std::process::Command;

fn start_on(file: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_queen-mock-broker"))
        .arg("--data")
        .arg(file)
        .args(["--listen", "127.0.0.1:0", "--log", "error"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("the binary runs")
}

fn assert_refused(out: &std::process::Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{what}: {stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "{what}: one line, got {stderr}");
    assert!(
        lines[0].starts_with("queen-mock-broker: cannot open the data file"),
        "{stderr}"
    );
    assert!(
        lines[0].contains("move it away"),
        "names the way out: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_file_of_garbage_and_a_truncated_file_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let garbage = dir.path().join("garbage.redb");
    let bytes: Vec<u8> = (0..200_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    std::fs::write(&garbage, &bytes).unwrap();
    assert_refused(&start_on(&garbage), "garbage");

    // A real database, cut short.
    let good = dir.path().join("good.redb");
    drop(queen_mock_broker::store::open(Some(&good)).unwrap());
    let full = std::fs::read(&good).unwrap();
    for cut in [1_000, full.len() / 2] {
        let truncated = dir.path().join(format!("cut-{cut}.redb"));
        std::fs::write(&truncated, &full[..cut]).unwrap();
        assert_refused(
            &start_on(&truncated),
            &format!("truncated at {cut} of {}", full.len()),
        );
    }
}

#[test]
fn a_write_ahead_log_whose_database_is_gone_is_refused_not_replayed() {
    use queen_mock_broker::store::file_backend;
    use queen_mock_broker::store::wal::{RowLog, Wal, path_for};
    let dir = tempfile::tempdir().unwrap();
    // A crash leaves `queen.redb` and its log; the operator deletes the database alone.
    let data = dir.path().join("queen.redb");
    let db = queen_mock_broker::store::open(Some(&data)).unwrap();
    let (file, _) = file_backend(&path_for(&data)).unwrap();
    let mut wal = Wal::new(file, None);
    wal.recover(&db).unwrap();
    let mut rows = RowLog::default();
    rows.put(0, b"k", b"v");
    wal.append(&rows).unwrap();
    drop((wal, db));
    std::fs::remove_file(&data).unwrap();

    let out = start_on(&data);
    assert_refused(&out, "a log without its database");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("write-ahead log"), "{stderr}");
}
