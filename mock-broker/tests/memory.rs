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

/// How one request of a storm was answered.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// A refusal carries `Retry-After`.
    retry_after: bool,
    /// The body's length, read and dropped a chunk at a time.
    len: u64,
}

async fn answer(mut res: reqwest::Response) -> Answer {
    let status = res.status().as_u16();
    let retry_after = res.headers().contains_key("retry-after");
    let mut len = 0;
    while let Some(chunk) = res.chunk().await.expect("the body arrives") {
        len += chunk.len() as u64;
    }
    Answer {
        status,
        retry_after,
        len,
    }
}

/// A count from the environment (`name`), or `default`.
fn count_from_env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(default)
}

/// A size from the environment (`name`, `192MiB`), or `default`: its text, for the
/// broker's flag, and its bytes.
fn size_from_env(name: &str, default: &str) -> (String, u64) {
    let text = std::env::var(name).unwrap_or_else(|_| default.into());
    let bytes = parse_size(&text);
    (text, bytes)
}

/// The binary on a data file in a fresh folder, with `flag` set to `value`; the
/// folder (kept while the broker runs), the process and its URL.
async fn broker_with(flag: &str, value: &str) -> (tempfile::TempDir, Child, String) {
    if !std::path::Path::new("/proc/self/status").exists() {
        panic!("this test reads /proc/<pid>/status: run it on Linux");
    }
    let dir = tempfile::tempdir().unwrap();
    let (child, url) = start(&dir.path().join("queen.redb"), &[flag, value]).await;
    (dir, child, url)
}

/// `count` requests sent at once and the broker's resident set around them.
struct Storm {
    answers: Vec<Answer>,
    before: u64,
    peak: u64,
    after: u64,
    took: Duration,
}

impl Storm {
    /// Sends `count` requests made by `request` at once and waits for every answer.
    async fn run<F, Fut>(broker: &Child, count: usize, request: F) -> Storm
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Answer> + Send + 'static,
    {
        let pid = broker.id().expect("a running broker");
        let before = status_bytes(pid, "VmRSS:");
        let started = Instant::now();
        let all: Vec<_> = (0..count).map(|_| tokio::spawn(request())).collect();
        let mut answers = Vec::new();
        for a in all {
            answers.push(a.await.unwrap());
        }
        Storm {
            answers,
            took: started.elapsed(),
            peak: status_bytes(pid, "VmHWM:"),
            after: status_bytes(pid, "VmRSS:"),
            before,
        }
    }

    /// Prints the run and checks it: every answer is `served` or 429 with
    /// `Retry-After`, some are served, and the peak is within the resident set before
    /// plus `allowed` (named by `terms`, for the failure's text).
    fn judge(&self, what: &str, served: impl Fn(&Answer) -> bool, allowed: u64, terms: &str) {
        let ok = self.answers.iter().filter(|a| served(a)).count();
        let refused = self
            .answers
            .iter()
            .filter(|a| a.status == 429 && a.retry_after)
            .count();
        let sent: u64 = self.answers.iter().map(|a| a.len).sum();
        let bound = self.before + allowed;
        println!(
            "{what}: {ok} served, {refused} 429 with Retry-After, {:.0} MiB sent in {:.1} s; \
             broker RSS {:.0} MiB before, peak {:.0} MiB (bound {:.0} MiB), {:.0} MiB after",
            mib(sent),
            self.took.as_secs_f64(),
            mib(self.before),
            mib(self.peak),
            mib(bound),
            mib(self.after),
        );
        assert_eq!(
            ok + refused,
            self.answers.len(),
            "every request is served, or refused 429 with Retry-After: {:?}",
            self.answers
        );
        assert!(ok > 0, "some requests are served");
        assert!(
            self.peak <= bound,
            "peak RSS {:.0} MiB is over before + {terms} = {:.0} MiB",
            mib(self.peak),
            mib(bound)
        );
    }
}

/// One fetch of 64 MiB.
async fn fetch(http: reqwest::Client, url: String) -> Answer {
    let entries: Vec<_> = (0..ENTRIES)
        .map(|_| serde_json::json!({"queue": "big", "partition": "p", "offset": 0, "maxBytes": 8 << 20}))
        .collect();
    let res = http
        .post(format!("{url}/api/v1/fetch"))
        .json(&serde_json::json!({"entries": entries, "maxBytes": 64 << 20}))
        .send()
        .await
        .expect("the broker answers");
    answer(res).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_fetches_stay_within_the_answer_budget() {
    let fetches = count_from_env("QUEEN_MEMORY_FETCHES", 48);
    let (budget_text, budget) = size_from_env("QUEEN_MEMORY_BUDGET", "192MiB");
    let (_dir, child, url) = broker_with("--answer-budget", &budget_text).await;
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
    let alone = fetch(http.clone(), url.clone()).await;
    assert_eq!(alone.status, 200);
    assert!(
        alone.len > (ENTRIES * RECORDS * RECORD) as u64,
        "{} bytes",
        alone.len
    );

    let storm = Storm::run(&child, fetches, || fetch(http.clone(), url.clone())).await;
    storm.judge(
        &format!("{fetches} fetches of 64 MiB, answer budget {budget_text}"),
        |a| a.status == 200,
        budget + CACHE + SLACK,
        "budget + cache + slack",
    );
}

/// The size of each large body: under the broker's 64 MiB limit, as an attacker's
/// would be.
const BODY: usize = 60 << 20;

/// One read-only fetch whose body is `body`.
async fn send_body(http: reqwest::Client, url: String, body: axum::body::Bytes) -> Answer {
    let res = http
        .post(format!("{url}/api/v1/fetch"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("the broker answers");
    answer(res).await
}

/// The other half of the probe's memory: request bodies. Each is read whole before it
/// is parsed, so 48 bodies of 60 MiB arriving at once held 48 × 60 MiB; under the
/// body budget (`--body-budget`) only what fits is read at a time, and the others wait
/// for room (or are answered 429 with `Retry-After`). `QUEEN_MEMORY_BODIES` (48) and
/// `QUEEN_MEMORY_BODY_BUDGET` (`192MiB`) change the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_bodies_stay_within_the_body_budget() {
    let bodies = count_from_env("QUEEN_MEMORY_BODIES", 48);
    let (budget_text, budget) = size_from_env("QUEEN_MEMORY_BODY_BUDGET", "192MiB");
    let (_dir, child, url) = broker_with("--body-budget", &budget_text).await;
    let http = reqwest::Client::new();

    // 60 MiB that the broker reads whole and then refuses (400: the body is not a JSON
    // object), so that the run measures the bodies, not their parse: one buffer shared
    // by every request of the test.
    let mut body = b"[".to_vec();
    body.resize(BODY, b' ');
    let body = axum::body::Bytes::from(body);
    let alone = send_body(http.clone(), url.clone(), body.clone()).await;
    assert_eq!(alone.status, 400, "a large body alone is read and judged");

    let storm = Storm::run(&child, bodies, || {
        send_body(http.clone(), url.clone(), body.clone())
    })
    .await;
    storm.judge(
        &format!(
            "{bodies} fetches with a {} MiB body, body budget {budget_text} (served: read and answered 400)",
            BODY >> 20
        ),
        |a| a.status == 400,
        budget + CACHE + SLACK,
        "body budget + cache + slack",
    );
}

/// The size of the large message whose detail is read.
const DETAIL: usize = 30 << 20;

/// One `GET` of a message's detail.
async fn detail(http: reqwest::Client, url: String) -> Answer {
    answer(http.get(url).send().await.expect("the broker answers")).await
}

/// The answers that are sent whole (listings, a message's detail, a state read) share
/// the answer budget too: a message's detail holds its payload as read and twice in
/// its JSON (`data` and `payload`), so 48 reads at once of a 30 MiB message held about
/// 48 × 90 MiB; under the budget they wait for room (or are answered 429 with
/// `Retry-After`). Before a read has charged the message it holds it once stored and
/// once decoded, so the bound has a term for the reads running at once
/// (`engine::concurrent_reads`): before the budget covered details this run took the
/// broker from 187 to 4,331 MiB, with it but without that limit to 2,150 MiB; with both
/// the peak was 538 to 630 MiB over four runs. `QUEEN_MEMORY_DETAILS` (48) and
/// `QUEEN_MEMORY_BUDGET` (`192MiB`) change the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_large_message_details_stay_within_the_answer_budget() {
    let reads = count_from_env("QUEEN_MEMORY_DETAILS", 48);
    let (budget_text, budget) = size_from_env("QUEEN_MEMORY_BUDGET", "192MiB");
    let (_dir, child, url) = broker_with("--answer-budget", &budget_text).await;
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
    let alone = detail(http.clone(), target.clone()).await;
    assert_eq!(alone.status, 200);
    assert!(alone.len > 2 * DETAIL as u64, "{} bytes", alone.len);

    let storm = Storm::run(&child, reads, || detail(http.clone(), target.clone())).await;
    // Each read running holds the message it is looking at (stored and decoded) before
    // it can charge it: README's bound has that term, at most `concurrent_reads` of them.
    let looking = queen_mock_broker::engine::concurrent_reads() as u64 * 2 * DETAIL as u64;
    storm.judge(
        &format!(
            "{reads} reads of a {} MiB message's detail, answer budget {budget_text} (served: 200, whole)",
            DETAIL >> 20
        ),
        |a| a.status == 200 && a.len == alone.len,
        budget + looking + CACHE + SLACK,
        "budget + reads in flight + cache + slack",
    );
}
