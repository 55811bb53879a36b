//! The broker's resident memory stays within what the README says bounds it while many
//! large reads run at once (issue 52, item 4): the attack of the probe, 48 concurrent
//! read-only `POST /api/v1/fetch` of 64 MiB each, against the `queen-mock-broker`
//! binary on a data file, its peak resident set read from `/proc/<pid>/status`.
//!
//! Without the answer budget each fetch held its records and their JSON text at once,
//! and the probe saw 1.06 GiB grow to 6.3 GiB. `QUEEN_MEMORY_FETCHES` (48) and
//! `QUEEN_MEMORY_BUDGET` (`192MiB`, the broker's `--answer-budget` for this run) change
//! the run; a budget far above the fetches' total (`64GiB`) shows the unbounded figure.

use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

/// The largest fetch the broker answers: 8 entries of 8 MiB (`MAX_ENTRY_BYTES`), which
/// is `MAX_CALL_BYTES`.
const ENTRIES: usize = 8;
const RECORD: usize = 1 << 20;
const RECORDS: usize = 8;
/// What the peak may exceed the resident set before the fetches by, beyond the answer
/// budget and the page cache: hyper's write buffers (up to about 400 KiB per
/// connection), the runtime's threads, the allocator's slack (freed answers are not
/// all reused at once across its arenas). Measured on a 2-core host (debug build,
/// 192 MiB budget): the peak rose 190 to 300 MiB over five runs; before the budget, 48
/// fetches took the release broker from 153 to 5,945 MiB.
const SLACK: u64 = 320 << 20;
const CACHE: u64 = 16 << 20;

/// A line of `/proc/<pid>/status` in bytes (`VmRSS`, `VmHWM`).
fn status_bytes(pid: u32, field: &str) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("a Linux /proc");
    let line = text
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("{field} in /proc/{pid}/status"));
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .expect("a figure in kB");
    kib << 10
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / f64::from(1 << 20)
}

fn parse_size(s: &str) -> u64 {
    let (n, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: u64 = n.parse().expect("a size");
    n << match unit {
        "" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        other => panic!("unit {other}: use KiB, MiB or GiB"),
    }
}

/// The broker binary on a data file in `data`, with the test's cache and `args`; its
/// process and its URL.
async fn start(data: &std::path::Path, args: &[&str]) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_queen-mock-broker"))
        .args(["--listen", "127.0.0.1:0", "--log", "warn"])
        .arg("--data")
        .arg(data)
        .args(["--cache-size", &format!("{}MiB", CACHE >> 20)])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("spawn queen-mock-broker");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let url = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await.expect("stdout") {
            if let Some(url) = line.split("listening on ").nth(1) {
                return url.trim().to_string();
            }
        }
        panic!("the broker exited before listening");
    })
    .await
    .expect("the broker listens within 60 s");
    // Keep draining stdout so the broker never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    (child, url)
}

/// One fetch of 64 MiB, its body read and dropped a chunk at a time; its status, its
/// `Retry-After` when refused, and the body's length.
async fn fetch(http: reqwest::Client, url: String) -> (u16, bool, u64) {
    let entries: Vec<_> = (0..ENTRIES)
        .map(|_| serde_json::json!({"queue": "big", "partition": "p", "offset": 0, "maxBytes": 8 << 20}))
        .collect();
    let mut res = http
        .post(format!("{url}/api/v1/fetch"))
        .json(&serde_json::json!({"entries": entries, "maxBytes": 64 << 20}))
        .send()
        .await
        .expect("the broker answers");
    let status = res.status().as_u16();
    let retry_after = res.headers().contains_key("retry-after");
    let mut len = 0;
    while let Some(chunk) = res.chunk().await.expect("the body arrives") {
        len += chunk.len() as u64;
    }
    (status, retry_after, len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_fetches_stay_within_the_answer_budget() {
    if !std::path::Path::new("/proc/self/status").exists() {
        panic!("this test reads /proc/<pid>/status: run it on Linux");
    }
    let fetches: usize = std::env::var("QUEEN_MEMORY_FETCHES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48);
    let budget_text = std::env::var("QUEEN_MEMORY_BUDGET").unwrap_or_else(|_| "192MiB".into());
    let budget = parse_size(&budget_text);
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(
        &dir.path().join("queen.redb"),
        &["--answer-budget", &budget_text],
    )
    .await;
    let pid = child.id().expect("a running broker");
    let http = reqwest::Client::new();

    // 8 records of 1 MiB in one partition: each entry of a fetch reads all of them,
    // so a fetch of 8 entries answers 64 MiB of records.
    let payload = "x".repeat(RECORD - 2);
    for _ in 0..RECORDS {
        let res = http
            .post(format!("{url}/api/v1/push"))
            .json(&serde_json::json!({"items": [{"queue": "big", "partition": "p", "payload": payload}]}))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    }
    // One fetch alone answers all 64 MiB: the budget does not shrink a lone answer.
    let (status, _, alone) = fetch(http.clone(), url.clone()).await;
    assert_eq!(status, 200);
    assert!(alone > (ENTRIES * RECORDS * RECORD) as u64, "{alone} bytes");

    let before = status_bytes(pid, "VmRSS:");
    let started = Instant::now();
    let all: Vec<_> = (0..fetches)
        .map(|_| tokio::spawn(fetch(http.clone(), url.clone())))
        .collect();
    let mut answered = Vec::new();
    for f in all {
        answered.push(f.await.unwrap());
    }
    let took = started.elapsed();
    let peak = status_bytes(pid, "VmHWM:");
    let after = status_bytes(pid, "VmRSS:");
    let ok = answered.iter().filter(|(s, _, _)| *s == 200).count();
    let refused = answered
        .iter()
        .filter(|(s, ra, _)| *s == 429 && *ra)
        .count();
    let sent: u64 = answered.iter().map(|(_, _, n)| n).sum();
    let bound = before + budget + CACHE + SLACK;
    println!(
        "{fetches} fetches of 64 MiB, answer budget {budget_text}: {ok} answered 200, {refused} \
         429 with Retry-After, {:.0} MiB sent in {:.1} s; broker RSS {:.0} MiB before, peak \
         {:.0} MiB (bound {:.0} MiB), {:.0} MiB after",
        mib(sent),
        took.as_secs_f64(),
        mib(before),
        mib(peak),
        mib(bound),
        mib(after),
    );
    assert_eq!(
        ok + refused,
        fetches,
        "every fetch is answered 200, or 429 with Retry-After: {answered:?}"
    );
    assert!(ok > 0, "some fetches are answered");
    assert!(
        peak <= bound,
        "peak RSS {:.0} MiB is over before + budget + cache + slack = {:.0} MiB",
        mib(peak),
        mib(bound)
    );
    drop(child);
}

/// The size of each large body: under the broker's 64 MiB limit, as an attacker's
/// would be.
const BODY: usize = 60 << 20;

/// One read-only fetch whose body is `body`; its status and whether a refusal carries
/// `Retry-After`.
async fn send_body(http: reqwest::Client, url: String, body: axum::body::Bytes) -> (u16, bool) {
    let res = http
        .post(format!("{url}/api/v1/fetch"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the broker answers");
    let status = res.status().as_u16();
    let retry_after = res.headers().contains_key("retry-after");
    res.bytes().await.expect("the body arrives");
    (status, retry_after)
}

/// The other half of the probe's memory: request bodies. Each is read whole before it
/// is parsed, so 48 bodies of 60 MiB arriving at once held 48 × 60 MiB; under the
/// body budget (`--body-budget`) only what fits is read at a time, and the others wait
/// for room (or are answered 429 with `Retry-After`). `QUEEN_MEMORY_BODIES` (48) and
/// `QUEEN_MEMORY_BODY_BUDGET` (`192MiB`) change the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_bodies_stay_within_the_body_budget() {
    if !std::path::Path::new("/proc/self/status").exists() {
        panic!("this test reads /proc/<pid>/status: run it on Linux");
    }
    let bodies: usize = std::env::var("QUEEN_MEMORY_BODIES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48);
    let budget_text = std::env::var("QUEEN_MEMORY_BODY_BUDGET").unwrap_or_else(|_| "192MiB".into());
    let budget = parse_size(&budget_text);
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(
        &dir.path().join("queen.redb"),
        &["--body-budget", &budget_text],
    )
    .await;
    let pid = child.id().expect("a running broker");
    let http = reqwest::Client::new();

    // 60 MiB that the broker reads whole and then refuses (400: the body is not a JSON
    // object), so that the run measures the bodies, not their parse: one buffer shared
    // by every request of the test.
    let mut body = b"[".to_vec();
    body.resize(BODY, b' ');
    let body = axum::body::Bytes::from(body);
    let (status, _) = send_body(http.clone(), url.clone(), body.clone()).await;
    assert_eq!(status, 400, "a large body alone is read and judged");

    let before = status_bytes(pid, "VmRSS:");
    let started = Instant::now();
    let all: Vec<_> = (0..bodies)
        .map(|_| tokio::spawn(send_body(http.clone(), url.clone(), body.clone())))
        .collect();
    let mut answered = Vec::new();
    for f in all {
        answered.push(f.await.unwrap());
    }
    let took = started.elapsed();
    let peak = status_bytes(pid, "VmHWM:");
    let after = status_bytes(pid, "VmRSS:");
    let ok = answered.iter().filter(|(s, _)| *s == 400).count();
    let refused = answered.iter().filter(|(s, ra)| *s == 429 && *ra).count();
    let bound = before + budget + CACHE + SLACK;
    println!(
        "{bodies} fetches with a {} MiB body, body budget {budget_text}: {ok} read and answered 400, \
         {refused} 429 with Retry-After, in {:.1} s; broker RSS {:.0} MiB before, peak {:.0} \
         MiB (bound {:.0} MiB), {:.0} MiB after",
        BODY >> 20,
        took.as_secs_f64(),
        mib(before),
        mib(peak),
        mib(bound),
        mib(after),
    );
    assert_eq!(
        ok + refused,
        bodies,
        "every body is read and judged (400), or refused 429 with Retry-After: {answered:?}"
    );
    assert!(ok > 0, "some bodies are read");
    assert!(
        peak <= bound,
        "peak RSS {:.0} MiB is over before + body budget + cache + slack = {:.0} MiB",
        mib(peak),
        mib(bound)
    );
    drop(child);
}

/// The size of the large message whose detail is read.
const DETAIL: usize = 30 << 20;

/// One `GET` of a message's detail; its status, whether a refusal carries
/// `Retry-After`, and the answer's length.
async fn detail(http: reqwest::Client, url: String) -> (u16, bool, u64) {
    let res = http.get(url).send().await.expect("the broker answers");
    let status = res.status().as_u16();
    let retry_after = res.headers().contains_key("retry-after");
    let body = res.bytes().await.expect("the body arrives");
    (status, retry_after, body.len() as u64)
}

/// The answers that are sent whole (listings, a message's detail, a state read) share
/// the answer budget too: a message's detail holds its payload as read and twice in
/// its JSON (`data` and `payload`), so 48 reads at once of a 30 MiB message held about
/// 48 × 90 MiB; under the budget they wait for room (or are answered 429 with
/// `Retry-After`). Before a read has charged the message it holds it once stored and
/// once decoded, so the bound has a term for the reads running at once
/// (`engine::concurrent_reads`): without that limit this run took the broker from 190 to
/// 2,150 MiB; with it the peak was 539 and 630 MiB in two runs. `QUEEN_MEMORY_DETAILS`
/// (48) and `QUEEN_MEMORY_BUDGET` (`192MiB`) change the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_message_details_stay_within_the_answer_budget() {
    if !std::path::Path::new("/proc/self/status").exists() {
        panic!("this test reads /proc/<pid>/status: run it on Linux");
    }
    let reads: usize = std::env::var("QUEEN_MEMORY_DETAILS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(48);
    let budget_text = std::env::var("QUEEN_MEMORY_BUDGET").unwrap_or_else(|_| "192MiB".into());
    let budget = parse_size(&budget_text);
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(
        &dir.path().join("queen.redb"),
        &["--answer-budget", &budget_text],
    )
    .await;
    let pid = child.id().expect("a running broker");
    let http = reqwest::Client::new();

    let payload = "x".repeat(DETAIL - 2);
    let res = http
        .post(format!("{url}/api/v1/push"))
        .json(&serde_json::json!({"items": [{"queue": "big", "partition": "p", "payload": payload, "transactionId": "large-1"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    drop(payload);
    let queue: serde_json::Value = http
        .get(format!("{url}/api/v1/resources/queues/big"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let partition = queue["partitions"][0]["id"]
        .as_str()
        .expect("the partition's id")
        .to_string();
    let target = format!("{url}/api/v1/messages/{partition}/large-1");
    // One read alone answers the payload twice, whatever the budget.
    let (status, _, alone) = detail(http.clone(), target.clone()).await;
    assert_eq!(status, 200);
    assert!(alone > 2 * DETAIL as u64, "{alone} bytes");

    let before = status_bytes(pid, "VmRSS:");
    let started = Instant::now();
    let all: Vec<_> = (0..reads)
        .map(|_| tokio::spawn(detail(http.clone(), target.clone())))
        .collect();
    let mut answered = Vec::new();
    for f in all {
        answered.push(f.await.unwrap());
    }
    let took = started.elapsed();
    let peak = status_bytes(pid, "VmHWM:");
    let after = status_bytes(pid, "VmRSS:");
    let ok = answered
        .iter()
        .filter(|(s, _, n)| *s == 200 && *n == alone)
        .count();
    let refused = answered
        .iter()
        .filter(|(s, ra, _)| *s == 429 && *ra)
        .count();
    // Each read running holds the message it is looking at (stored and decoded) before
    // it can charge it: README's bound has that term, at most `concurrent_reads` of them.
    let looking = queen_mock_broker::engine::concurrent_reads() as u64 * 2 * DETAIL as u64;
    let bound = before + budget + looking + CACHE + SLACK;
    println!(
        "{reads} reads of a {} MiB message's detail, answer budget {budget_text}: {ok} answered \
         200 whole, {refused} 429 with Retry-After, in {:.1} s; broker RSS {:.0} MiB before, \
         peak {:.0} MiB (bound {:.0} MiB), {:.0} MiB after",
        DETAIL >> 20,
        took.as_secs_f64(),
        mib(before),
        mib(peak),
        mib(bound),
        mib(after),
    );
    assert_eq!(
        ok + refused,
        reads,
        "every read is answered whole, or refused 429 with Retry-After: {answered:?}"
    );
    assert!(ok > 0, "some reads are answered");
    assert!(
        peak <= bound,
        "peak RSS {:.0} MiB is over before + budget + reads in flight + cache + slack = {:.0} MiB",
        mib(peak),
        mib(bound)
    );
    drop(child);
}
