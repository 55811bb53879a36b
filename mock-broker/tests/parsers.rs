//! Every parser under test (issue 43): each route's body, query string and path
//! parameters, and the whole router with any method, path, query, headers and body.
//!
//! The cargo-fuzz targets of `fuzz/` (`route_body`, `route_query`, `route_path`,
//! `router`) need nightly and cargo-fuzz; this file runs the same checks on stable in
//! every `cargo test`. It includes the targets' own harness, `fuzz/src/lib.rs`: the
//! same in-process broker (the real router, an in-memory engine, auth on, a fixed
//! clock), the same decoders from bytes to a request, the same judge (a 2xx, or a 4xx
//! with `{"error", "code"}` that committed nothing; never a 5xx). In place of the
//! fuzzer's coverage guidance, proptest mutates the targets' seeds (one valid request
//! per route) with random edits and tokens of the fuzz dictionary.
//!
//! `QUEEN_PARSERS_CASES` sets the mutated inputs per target (default 300);
//! `QUEEN_PARSERS_SEED` replays a run. `QUEEN_FUZZ_WRITE_SEEDS=1` rewrites the seed
//! files and the dictionary from the route table (`seeds_and_dictionary_are_current`
//! fails while they are stale).

#[path = "../fuzz/src/lib.rs"]
mod fuzzing;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use fuzzing::{Broker, Call, Outcome, ROUTES, Route};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use serde_json::Value;

/// A request the broker has not answered in this long (real time) is a hang.
const HANG: Duration = Duration::from_secs(30);

/// A fuzz target's decoder: an input's bytes to a request.
type Decoder = fn(&[u8]) -> Call;

/// The fuzz targets that go through the router, with their decoders.
const TARGETS: &[(&str, Decoder)] = &[
    ("route_body", fuzzing::decode_body),
    ("route_query", fuzzing::decode_query),
    ("route_path", fuzzing::decode_path),
    ("router", fuzzing::decode_request),
];

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz")
}

// ---------------------------------------------------------------------------------
// The table against the router.
// ---------------------------------------------------------------------------------

/// A pattern with every parameter as `{}`: axum's names (`{partition_id}`, `{*key}`)
/// and the docs' (`{partitionId}`, `{timerKey}`) differ.
fn shape(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|s| if s.starts_with('{') { "{}" } else { s })
        .collect::<Vec<_>>()
        .join("/")
}

/// Every `METHOD pattern` the router serves, read from the `.route(..)` calls of the
/// files that build it (`http::router` and the `routes()` it merges).
fn routes_in_the_source() -> BTreeSet<String> {
    let files = [
        include_str!("../src/http/mod.rs"),
        include_str!("../src/http/groups.rs"),
        include_str!("../src/http/browse.rs"),
        include_str!("../src/http/ephemeral.rs"),
        include_str!("../src/http/status.rs"),
        include_str!("../src/http/streams.rs"),
        include_str!("../src/http/traces.rs"),
        include_str!("../src/http/console.rs"),
    ];
    // The console's files and its redirects take no input to parse (and answer HTML,
    // not JSON): the table holds the console's one route with data, `/console/whoami`.
    const FILES: [&str; 5] = [
        "/",
        "/console",
        "/console/",
        "/console/app.js",
        "/console/app.css",
    ];
    let mut out = BTreeSet::new();
    for src in files {
        for chunk in src.split(".route(").skip(1) {
            // The call's text: up to the parenthesis that closes `.route(`.
            let mut depth = 1;
            let end = chunk
                .char_indices()
                .find(|&(_, c)| {
                    depth += match c {
                        '(' => 1,
                        ')' => -1,
                        _ => 0,
                    };
                    depth == 0
                })
                .map(|(i, _)| i)
                .expect("a closed .route( call");
            let call = &chunk[..end];
            let pattern = call.split('"').nth(1).expect("a path literal");
            if FILES.contains(&pattern) {
                continue;
            }
            for method in ["get", "post", "put", "delete", "patch"] {
                let needle = format!("{method}(");
                let named = call.match_indices(&needle).any(|(i, _)| {
                    i == 0
                        || !call.as_bytes()[i - 1].is_ascii_alphanumeric()
                            && call.as_bytes()[i - 1] != b'_'
                });
                if named {
                    out.insert(format!("{} {}", method.to_uppercase(), shape(pattern)));
                }
            }
        }
    }
    out
}

/// The routes ROUTES.md's section headings name, as `METHOD pattern`.
fn routes_in_routes_md() -> BTreeSet<String> {
    let page = include_str!("../ROUTES.md");
    let mut out = BTreeSet::new();
    for line in page.lines().filter(|l| l.starts_with("### ")) {
        for part in line.split('`').skip(1).step_by(2) {
            if let Some((method, path)) = part.split_once(' ')
                && ["GET", "POST", "PUT", "DELETE"].contains(&method)
            {
                out.insert(format!(
                    "{method} {}",
                    shape(path.split('?').next().unwrap())
                ));
            }
        }
    }
    out
}

#[test]
fn the_table_holds_every_route_the_router_serves() {
    let table: BTreeSet<String> = ROUTES
        .iter()
        .map(|r| format!("{} {}", r.method, shape(r.pattern)))
        .collect();
    assert_eq!(table.len(), ROUTES.len(), "a route twice in the table");
    for r in ROUTES {
        assert_eq!(
            r.seeded_segs().len(),
            r.params().len(),
            "{}: seeded segments",
            r.key()
        );
    }
    let source = routes_in_the_source();
    assert!(
        source.len() >= 60,
        "the router's source was not read: {source:?}"
    );
    assert_eq!(
        table, source,
        "the fuzz table (fuzz/src/lib.rs ROUTES) and the router differ"
    );
    let documented = routes_in_routes_md();
    assert!(
        documented.len() >= 40,
        "ROUTES.md was not read: {documented:?}"
    );
    let missing: Vec<_> = documented.difference(&table).collect();
    assert!(
        missing.is_empty(),
        "ROUTES.md routes not in the table: {missing:?}"
    );
}

/// Each route's seeded request, as the `router` target's text.
fn seeded_request(r: &Route, headers: &str) -> Vec<u8> {
    let mut out = format!("{} ", r.method).into_bytes();
    out.extend_from_slice(&r.path(&[]));
    if !r.query.is_empty() {
        out.push(b'?');
        out.extend_from_slice(r.query.as_bytes());
    }
    out.push(b'\n');
    out.extend_from_slice(headers.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(r.body.unwrap_or("").as_bytes());
    out
}

#[test]
fn every_routes_seeded_request_is_accepted_on_a_fresh_broker() {
    // A fresh broker per route: some seeds use up the state others need (an ack takes
    // the lease, a DELETE removes the queue).
    let mut failures = Vec::new();
    for r in ROUTES {
        let mut b = Broker::new();
        let call = fuzzing::decode_request(&seeded_request(r, "content-type: application/json\n"));
        match b.send(&call) {
            Ok(Outcome::Answered(s)) if (200..300).contains(&s) => {}
            other => {
                let answer = b
                    .exchange(&call)
                    .map(|(s, body)| (s, String::from_utf8_lossy(&body).into_owned()));
                failures.push(format!("{}: {other:?}, again: {answer:?}", r.key()));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "seeds refused:\n{}",
        failures.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// Seeds and the dictionary, generated from the table.
// ---------------------------------------------------------------------------------

/// A file name for a route: `post-api-v1-ack`.
fn slug(r: &Route) -> String {
    let mut s = r.method.to_ascii_lowercase();
    for c in r.pattern.chars() {
        if c.is_ascii_alphanumeric() {
            s.push(c);
        } else if !s.ends_with('-') {
            s.push('-');
        }
    }
    s.trim_end_matches('-').to_string()
}

/// Every seed file of the four router targets: `(target, file name, bytes)`.
fn seed_files() -> Vec<(&'static str, String, Vec<u8>)> {
    let mut out = Vec::new();
    for r in ROUTES {
        let key = r.key();
        if let Some(body) = r.body {
            out.push(("route_body", slug(r), format!("{key}\n{body}").into_bytes()));
        }
        if !r.query.is_empty() {
            out.push((
                "route_query",
                slug(r),
                format!("{key}\n{}", r.query).into_bytes(),
            ));
        }
        let segs = r.seeded_segs();
        if !segs.is_empty() {
            out.push((
                "route_path",
                slug(r),
                format!("{key}\n{}", segs.join("\n")).into_bytes(),
            ));
        }
        out.push((
            "router",
            slug(r),
            seeded_request(r, "content-type: application/json\n"),
        ));
    }
    // The router's other doors: each role and kind of token, a body that is not JSON
    // by its Content-Type, HEAD, an unknown route, a method no route takes.
    let push = ROUTES
        .iter()
        .find(|r| r.key() == "POST /api/v1/push")
        .unwrap();
    let lease = ROUTES
        .iter()
        .find(|r| r.key() == "POST /api/v1/lease/{lease}/extend")
        .unwrap();
    let kv = ROUTES
        .iter()
        .find(|r| r.key() == "GET /api/v1/kv/{ns}/{key}")
        .unwrap();
    let jwt = format!("authorization: Bearer {}\n", fuzzing::admin_jwt());
    let reader = format!("authorization: Bearer {}\n", fuzzing::READ_TOKEN);
    let extra: Vec<(&str, Vec<u8>)> = vec![
        (
            "x-jwt-push",
            seeded_request(push, &format!("content-type: application/json\n{jwt}")),
        ),
        (
            "x-read-only-push",
            seeded_request(push, &format!("content-type: application/json\n{reader}")),
        ),
        (
            "x-no-token",
            seeded_request(kv, "authorization: Basic Zm9vOmJhcg==\n"),
        ),
        (
            "x-text-body",
            seeded_request(push, "content-type: text/plain; charset=utf-8\n"),
        ),
        ("x-no-content-type-lease", seeded_request(lease, "")),
        ("x-head-kv", b"HEAD /api/v1/kv/fz/k0\n\n".to_vec()),
        ("x-no-route", b"GET /api/v2/nothing?x=%zz\n\n".to_vec()),
        (
            "x-odd-method",
            b"PATCH /api/v1/push\ncontent-type: application/json\n\n{}".to_vec(),
        ),
    ];
    for (name, bytes) in extra {
        out.push(("router", name.to_string(), bytes));
    }
    out
}

/// Every JSON object key in `v`.
fn keys(v: &Value, out: &mut BTreeSet<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                out.insert(k.clone());
                keys(v, out);
            }
        }
        Value::Array(a) => a.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

/// Tokens that are out of some field's domain somewhere, or break JSON, escapes or
/// names: what a mutation should try in any place.
const HOSTILE_TOKENS: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-1",
    "1.5",
    "1e400",
    "-1e400",
    "18446744073709551616",
    "-9223372036854775809",
    "9223372036854775807",
    "\"\"",
    "[]",
    "{}",
    "[[[[[[[[",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"a\":1,\"a\":2",
    "\u{0}",
    "\u{ff}",
    "\u{feff}",
    "%",
    "%zz",
    "%FF",
    "%00",
    "%C3%28",
    "%2F",
    "%2e%2e",
    "..",
    "//",
    "&",
    "=",
    "?",
    "#",
    "\r\n",
    "0x1F",
    "NaN",
    "$LEASE",
    "$PID",
    "$DPID",
    "$QID",
    "fz",
    "p0",
    "g0",
    "m1",
    "k0",
    "t0",
    "efz",
    "__QUEUE_MODE__",
    "2026-12-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "0000-01-01T00:00:00Z",
    "2026-02-30",
    "+01:00",
    "completed",
    "failed",
    "dlq",
    "retry",
    "upsert",
    "delete",
    "acquire",
    "renew",
    "release",
    "schedule",
    "reschedule",
    "cancel",
    "getPrefix",
    "putIfAbsent",
    "incr",
    "check",
    "content-type: ",
    "application/json",
    "authorization: Bearer ",
    "content-length: ",
    "transfer-encoding: chunked",
    "GET ",
    "POST ",
    "PUT ",
    "DELETE ",
    "HEAD ",
    "OPTIONS ",
];

/// The dictionary of the fuzz runs: every JSON key of the seeds' bodies, every query
/// parameter name, every literal path segment, and [`HOSTILE_TOKENS`].
fn dictionary_tokens() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for r in ROUTES {
        if let Some(body) = r.body {
            keys(
                &serde_json::from_str(body).expect("a JSON seed body"),
                &mut out,
            );
        }
        for pair in r.query.split('&').filter(|p| !p.is_empty()) {
            out.insert(format!("{}=", pair.split('=').next().unwrap()));
        }
        for seg in r
            .pattern
            .split('/')
            .filter(|s| !s.is_empty() && !s.starts_with('{'))
        {
            out.insert(format!("/{seg}"));
        }
    }
    out.extend(HOSTILE_TOKENS.iter().map(|t| t.to_string()));
    out
}

/// The dictionary as libFuzzer reads it: one quoted token a line, `\xNN` escapes.
fn dictionary_file() -> String {
    let mut out = String::from(
        "# Generated by mock-broker/tests/parsers.rs from the route table (fuzz/src/lib.rs):\n\
         # QUEEN_FUZZ_WRITE_SEEDS=1 cargo test -p queen-mock-broker --test parsers\n",
    );
    for t in dictionary_tokens() {
        out.push('"');
        for b in t.bytes() {
            match b {
                b'"' | b'\\' => out.push_str(&format!("\\{}", b as char)),
                0x20..=0x7e => out.push(b as char),
                _ => out.push_str(&format!("\\x{b:02X}")),
            }
        }
        out.push_str("\"\n");
    }
    out
}

#[test]
fn seeds_and_dictionary_are_current() {
    let dir = fuzz_dir();
    let write = std::env::var_os("QUEEN_FUZZ_WRITE_SEEDS").is_some();
    let want = seed_files();
    let mut stale = Vec::new();
    for target in ["route_body", "route_query", "route_path", "router"] {
        let sub = dir.join("seeds").join(target);
        let expected: BTreeSet<String> = want
            .iter()
            .filter(|(t, ..)| *t == target)
            .map(|(_, n, _)| n.clone())
            .collect();
        if write {
            let _ = std::fs::remove_dir_all(&sub);
            std::fs::create_dir_all(&sub).unwrap();
        }
        let present: BTreeSet<String> = std::fs::read_dir(&sub)
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        if !write && present != expected {
            stale.push(format!("{target}: files {present:?}, want {expected:?}"));
        }
    }
    for (target, name, bytes) in &want {
        let path = dir.join("seeds").join(target).join(name);
        if write {
            std::fs::write(&path, bytes).unwrap();
        } else if std::fs::read(&path).ok().as_ref() != Some(bytes) {
            stale.push(format!("{}", path.display()));
        }
    }
    let dict = dir.join("queen.dict");
    if write {
        std::fs::write(&dict, dictionary_file()).unwrap();
    } else if std::fs::read_to_string(&dict).ok() != Some(dictionary_file()) {
        stale.push(format!("{}", dict.display()));
    }
    assert!(
        stale.is_empty(),
        "stale (rewrite with QUEEN_FUZZ_WRITE_SEEDS=1 cargo test -p queen-mock-broker --test parsers):\n{}",
        stale.join("\n")
    );
}

// ---------------------------------------------------------------------------------
// The property: mutated seeds through each decoder, judged as the fuzzer judges.
// ---------------------------------------------------------------------------------

/// One edit of an input.
#[derive(Debug, Clone)]
enum Edit {
    /// Random bytes at a place.
    Insert(prop::sample::Index, Vec<u8>),
    /// A dictionary token at a place.
    Token(prop::sample::Index, prop::sample::Index),
    /// Some bytes removed.
    Delete(prop::sample::Index, usize),
    /// One byte changed.
    Flip(prop::sample::Index, u8),
    /// A slice of the input copied to another place (a repeated field, a deep nest).
    Repeat(prop::sample::Index, usize, prop::sample::Index, usize),
    /// The input cut short.
    Truncate(prop::sample::Index),
}

fn edit() -> impl Strategy<Value = Edit> {
    let at = any::<prop::sample::Index>;
    prop_oneof![
        2 => (at(), prop::collection::vec(any::<u8>(), 1..8)).prop_map(|(i, b)| Edit::Insert(i, b)),
        // Tokens most: a dictionary word in the wrong place is what finds parser edges.
        6 => (at(), at()).prop_map(|(i, t)| Edit::Token(i, t)),
        2 => (at(), 1usize..16).prop_map(|(i, n)| Edit::Delete(i, n)),
        2 => (at(), any::<u8>()).prop_map(|(i, b)| Edit::Flip(i, b)),
        1 => (at(), 1usize..32, at(), 1usize..50).prop_map(|(a, n, b, k)| Edit::Repeat(a, n, b, k)),
        1 => at().prop_map(Edit::Truncate),
    ]
}

fn apply(input: &mut Vec<u8>, e: &Edit, tokens: &[Vec<u8>]) {
    let at = |i: &prop::sample::Index, len: usize| i.index(len + 1);
    match e {
        Edit::Insert(i, b) => {
            let p = at(i, input.len());
            input.splice(p..p, b.iter().copied());
        }
        Edit::Token(i, t) => {
            let p = at(i, input.len());
            input.splice(p..p, t.get(tokens).iter().copied());
        }
        Edit::Delete(i, n) => {
            let p = at(i, input.len());
            let end = (p + n).min(input.len());
            input.drain(p..end);
        }
        Edit::Flip(i, b) if !input.is_empty() => {
            let p = i.index(input.len());
            input[p] = *b;
        }
        Edit::Flip(..) => {}
        Edit::Repeat(a, n, b, k) => {
            let from = at(a, input.len());
            let slice = input[from..(from + n).min(input.len())].to_vec();
            let to = at(b, input.len());
            let copies: Vec<u8> = slice
                .iter()
                .copied()
                .cycle()
                .take(slice.len() * k)
                .collect();
            input.splice(to..to, copies);
        }
        Edit::Truncate(i) => {
            let p = at(i, input.len());
            input.truncate(p);
        }
    }
}

/// Panics anywhere in the process: a handler's (the broker catches it and answers
/// 500, which the judge sees too), the writer thread's, the harness's.
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            previous(info);
        }));
    });
}

/// The broker on a thread of its own, so that the test can time each request in real
/// time: paused tokio time ends every legitimate wait at once, so a request still
/// unanswered after [`HANG`] never ends.
struct Watched {
    calls: mpsc::Sender<Call>,
    answers: mpsc::Receiver<Result<Outcome, String>>,
    figures: mpsc::Receiver<(u64, u64)>,
    thread: std::thread::JoinHandle<()>,
}

impl Watched {
    fn start() -> Watched {
        let (calls, inbox) = mpsc::channel::<Call>();
        let (reply, answers) = mpsc::channel();
        let (report, figures) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let mut b = Broker::new();
            for call in inbox {
                if reply.send(b.send(&call)).is_err() {
                    break;
                }
            }
            let _ = report.send((b.sent, b.accepted));
        });
        Watched {
            calls,
            answers,
            figures,
            thread,
        }
    }

    fn send(&self, call: Call) -> Result<Outcome, String> {
        self.calls.send(call).expect("the broker's thread is alive");
        match self.answers.recv_timeout(HANG) {
            Ok(out) => out,
            Err(_) => Err(format!("no answer within {HANG:?}: a hang")),
        }
    }

    /// Requests sent and how many were accepted (2xx).
    fn finish(self) -> (u64, u64) {
        drop(self.calls);
        let figures = self.figures.recv().unwrap_or_default();
        let _ = self.thread.join();
        figures
    }
}

fn cases() -> u32 {
    std::env::var("QUEEN_PARSERS_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300)
}

#[test]
fn mutated_requests_through_every_decoder_get_a_2xx_or_a_4xx_with_error_and_code() {
    count_panics();
    let started = Instant::now();
    let seed = std::env::var("QUEEN_PARSERS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let cases = cases();
    println!(
        "parsers: seed {seed} (QUEEN_PARSERS_SEED), {cases} cases per target (QUEEN_PARSERS_CASES)"
    );
    let seeds = seed_files();
    let tokens: Vec<Vec<u8>> = dictionary_tokens()
        .into_iter()
        .map(String::into_bytes)
        .collect();
    let mut failures = Vec::new();
    for (n, (target, decode)) in TARGETS.iter().enumerate() {
        let inputs: Vec<Vec<u8>> = seeds
            .iter()
            .filter(|(t, ..)| t == target)
            .map(|(.., b)| b.clone())
            .collect();
        let broker = Watched::start();
        let panics = PANICS.load(Ordering::SeqCst);
        let mut runner = TestRunner::new(Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 256,
            rng_seed: RngSeed::Fixed(seed.wrapping_add(n as u64)),
            ..Config::default()
        });
        let strategy = (
            prop::sample::select(inputs),
            prop::collection::vec(edit(), 0..6),
        );
        let result = runner.run(&strategy, |(input, edits)| {
            let mut input = input;
            for e in &edits {
                apply(&mut input, e, &tokens);
            }
            let shown = String::from_utf8_lossy(&input[..input.len().min(600)]).into_owned();
            broker
                .send(decode(&input))
                .map(drop)
                .map_err(|f| TestCaseError::fail(format!("{f}\n    input: {shown:?}")))
        });
        let (sent, accepted) = broker.finish();
        let panicked = PANICS.load(Ordering::SeqCst) - panics;
        println!(
            "{target:<12} {sent:>6} requests, {accepted:>5} 2xx, {:>5} 4xx, {panicked} panics",
            sent - accepted
        );
        if let Err(e) = result {
            failures.push(format!("{target}: {e}"));
        }
        if panicked > 0 {
            failures.push(format!("{target}: {panicked} panic(s)"));
        }
    }
    println!("({:.1} s)", started.elapsed().as_secs_f64());
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The decoders' own edges: inputs that are empty, a lone line, or not a request at all
/// still become a call (or are skipped as unsendable), never a panic.
#[test]
fn the_decoders_take_any_bytes() {
    let mut b = Broker::new();
    let odd: &[&[u8]] = &[
        b"",
        b"\n",
        b"\n\n\n",
        b"GET",
        b"GET \n\n",
        b"\xff\xfe \xff\n\xff: \xff\n\n\xff",
        b"G\0T /health\n\n",
        b"GET /health\nx-a: b\r\n\r\nbody",
        b"POST /api/v1/push\ncontent-type: application/json",
        b"GET http://example.com/health\n\n",
        b"GET *\n\n",
    ];
    for input in odd {
        for (target, decode) in TARGETS {
            let out = b.send(&decode(input));
            assert!(out.is_ok(), "{target} {input:?}: {out:?}");
        }
    }
    // A method that is no token cannot be sent; the decoder keeps it for `http` to refuse.
    assert_eq!(
        b.send(&fuzzing::decode_request(b"G\0T /health\n\n")),
        Ok(Outcome::Unsendable)
    );
}

/// The judge refuses every answer the fuzz targets must report, and only those.
#[test]
fn the_judge_reports_5xx_bare_4xx_commits_on_refusal_and_non_json() {
    use fuzzing::judge;
    let error = br#"{"error":"bad","code":"bad_request"}"#;
    let api = b"/api/v1/push";
    assert_eq!(judge(b"GET", api, 200, b"{}", 1), Ok(()));
    assert_eq!(judge(b"GET", api, 204, b"", 0), Ok(()));
    assert_eq!(judge(b"POST", api, 400, error, 0), Ok(()));
    assert_eq!(
        judge(b"HEAD", api, 404, b"", 0),
        Ok(()),
        "an answer to HEAD has no body"
    );
    // The console's files are pages, and `/` redirects to them; nothing else does.
    assert_eq!(
        judge(b"GET", b"/console", 200, b"<!doctype html>", 0),
        Ok(())
    );
    assert_eq!(judge(b"GET", b"/?x=1", 303, b"", 0), Ok(()));
    assert!(judge(b"GET", b"/console/whoami", 200, b"<!doctype html>", 0).is_err());
    assert!(judge(b"GET", b"/console", 500, b"", 0).is_err());
    assert!(judge(b"GET", b"/console", 200, b"<!doctype html>", 1).is_err());
    let findings: &[(u16, &[u8], u64)] = &[
        (500, br#"{"error":"internal error","code":"internal"}"#, 0),
        (503, br#"{"error":"retry","code":"retry"}"#, 0),
        (302, b"", 0),
        (400, br#"{"error":"bad"}"#, 0),
        (400, br#"{"error":"","code":"bad_request"}"#, 0),
        (400, b"", 0),
        (413, b"payload too large", 0),
        (400, error, 1),
        (200, b"not json", 0),
    ];
    for (status, body, wrote) in findings {
        assert!(
            judge(b"POST", api, *status, body, *wrote).is_err(),
            "{status} {:?} wrote {wrote}",
            String::from_utf8_lossy(body)
        );
    }
}

// ---------------------------------------------------------------------------------
// The corpora of a fuzz run, replayed over real sockets.
// ---------------------------------------------------------------------------------

/// Headers that frame the request on the wire: an input's own would desynchronise the
/// connection (a `Transfer-Encoding: chunked` over a plain body), so the replay sets
/// them itself. In process they frame nothing and the targets keep them.
const FRAMING: &[&str] = &["content-length", "transfer-encoding", "connection", "host"];

/// One call as raw HTTP/1.1 bytes, or `None` when `http` refuses its method, target or
/// every header (the targets skip such a call as unsendable).
fn wire_request(call: &Call) -> Option<Vec<u8>> {
    use axum::http::{HeaderName, HeaderValue, Method, Uri};
    Method::from_bytes(&call.method).ok()?;
    let target = fuzzing::uri_safe(&call.target);
    Uri::try_from(target.clone()).ok()?;
    let mut out = call.method.clone();
    out.push(b' ');
    out.extend_from_slice(&target);
    out.extend_from_slice(b" HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: close\r\n");
    let mut authorized = false;
    for (name, value) in &call.headers {
        let (Ok(n), Ok(_)) = (HeaderName::from_bytes(name), HeaderValue::from_bytes(value)) else {
            continue;
        };
        if FRAMING.contains(&n.as_str()) {
            continue;
        }
        authorized |= n == axum::http::header::AUTHORIZATION;
        out.extend_from_slice(n.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    if !authorized {
        out.extend_from_slice(
            format!("authorization: Bearer {}\r\n", fuzzing::ADMIN_TOKEN).as_bytes(),
        );
    }
    out.extend_from_slice(format!("content-length: {}\r\n\r\n", call.body.len()).as_bytes());
    out.extend_from_slice(&call.body);
    Some(out)
}

/// Sends raw bytes and reads the answer until the broker closes: `(status, body)`, or
/// `None` when nothing came back within `wait`.
fn wire_exchange(addr: &str, request: &[u8], wait: Duration) -> Option<(u16, Vec<u8>)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect to the broker");
    s.set_read_timeout(Some(wait)).unwrap();
    s.write_all(request).ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&raw[..split]).to_ascii_lowercase();
    let status = head.get(9..12)?.parse().ok()?;
    let mut body = raw[split + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        let mut rest = &body[..];
        let mut out = Vec::new();
        while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
            let size =
                usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?.trim(), 16).ok()?;
            rest = &rest[eol + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(rest.get(..size)?);
            rest = rest.get(size + 2..)?;
        }
        body = out;
    }
    Some((status, body))
}

/// Replays the corpora a fuzz run left (`fuzz/corpus/<target>` of the four router
/// targets) against a running broker over real sockets, hyper's parsing included, and
/// judges each answer as the targets do (but for commits, which a remote broker does not
/// report). Then run the conformance suite against the same broker. The broker must
/// know the harness's tokens:
///
/// ```sh
/// echo '{"fuzz-admin": {"role": "admin", "tenant": "fuzz", "sub": "fuzzer"},
///        "fuzz-reader": {"role": "read-only", "tenant": "fuzz"}}' > /tmp/fuzz-tokens.json
/// cargo run --release -p queen-mock-broker -- --in-memory --listen 127.0.0.1:6699 \
///     --token-file /tmp/fuzz-tokens.json --jwt-secret fuzz-jwt-secret-of-32-bytes-or-more &
/// QUEEN_REPLAY_URL=127.0.0.1:6699 cargo test -p queen-mock-broker --test parsers replay -- --ignored --nocapture
/// cargo run --release -p queen-conformance -- --url http://127.0.0.1:6699 --token fuzz-admin
/// ```
///
/// A long-poll waits in real time here: an answer that has not come within 3 s is
/// counted as still waiting, not judged.
#[test]
#[ignore = "needs a running broker (QUEEN_REPLAY_URL) and a fuzz run's corpora"]
fn replay_the_fuzz_corpora_against_a_running_broker() {
    let addr = std::env::var("QUEEN_REPLAY_URL").expect("QUEEN_REPLAY_URL=host:port");
    let addr = addr
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let wait = Duration::from_secs(3);
    let mut failures = Vec::new();
    for (target, decode) in TARGETS {
        let dir = fuzz_dir().join("corpus").join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        files.sort();
        let (mut sent, mut unsendable, mut waiting, mut c2xx, mut c4xx) = (0, 0, 0, 0, 0);
        // Eight at a time: most answers take a millisecond, a long-poll takes `wait`.
        for chunk in files.chunks(8) {
            let answers: Vec<_> = std::thread::scope(|s| {
                let handles: Vec<_> = chunk
                    .iter()
                    .map(|f| {
                        let addr = &addr;
                        s.spawn(move || {
                            let call = decode(&std::fs::read(f).unwrap());
                            let raw = wire_request(&call)?;
                            Some((
                                f.clone(),
                                (call.method.clone(), call.target.clone()),
                                wire_exchange(addr, &raw, wait),
                            ))
                        })
                    })
                    .collect();
                handles.into_iter().map(|h| h.join().unwrap()).collect()
            });
            for answer in answers {
                let Some((file, (method, target_path), answer)) = answer else {
                    unsendable += 1;
                    continue;
                };
                sent += 1;
                let Some((status, body)) = answer else {
                    waiting += 1;
                    continue;
                };
                match status {
                    200..=299 => c2xx += 1,
                    400..=499 => c4xx += 1,
                    _ => {}
                }
                if let Err(e) = fuzzing::judge(&method, &target_path, status, &body, 0) {
                    failures.push(format!("{target} {}: {e}", file.display()));
                }
            }
        }
        println!(
            "{target:<12} {} inputs: {sent} sent ({c2xx} 2xx, {c4xx} 4xx, {waiting} still waiting after {wait:?}), {unsendable} unsendable",
            files.len()
        );
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let (status, body) = wire_exchange(
        &addr,
        b"GET /health HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n",
        wait,
    )
    .expect("the broker answers /health");
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
}
