//! The broker under fuzzing: one in-process broker (the real axum router over an
//! in-memory engine), the table of every route it serves, the decoders that turn an
//! input's bytes into a request, and the judge of each answer.
//!
//! Shared by the cargo-fuzz targets of this crate (`fuzz_targets/route_*.rs`,
//! `router.rs`) and by the broker's stable property test `tests/parsers.rs`, which
//! includes this very file with `#[path]`: both feed the same decoders and judge the
//! same way, so a CI machine without nightly still checks what the fuzzer checks. The
//! file therefore names nothing of its own crate (`crate::`) and uses only what the
//! broker's tests can reach: `queen-mock-broker`, its dependencies, and tokio's
//! `test-util`.
//!
//! A finding is any answer that is not a 2xx or a 4xx (a caught handler panic is a 500
//! `internal`, so it shows here too), a 4xx without `{"error", "code"}`, a 4xx that
//! committed, or a 2xx whose body is not JSON; but the console's own files (`/console`,
//! its script and style, and the redirects to it) are pages, not JSON: for those an HTML,
//! JavaScript or CSS 200 and a bodiless 303 are right, and nothing may be written. A panic anywhere aborts a fuzz target
//! (libfuzzer-sys's panic hook) and is counted by the property test; a hang is caught
//! by libFuzzer's `-timeout` and by the property test's watchdog.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Method, Request, Uri, header};
use hyper::service::Service as _;
use hyper_util::service::TowerToHyperService;
use queen_mock_broker::auth::{Auth, Role, sign_jwt};
use queen_mock_broker::engine::writer::WriterThread;
use queen_mock_broker::{Engine, ManualClock, store};
use serde_json::{Value, json};

/// The bearer token every decoded request carries unless it sends its own
/// `Authorization` (an admin, so every route is reachable).
pub const ADMIN_TOKEN: &str = "fuzz-admin";
/// A read-only token: a fuzzed `Authorization` may name it, to reach the 403 paths.
pub const READ_TOKEN: &str = "fuzz-reader";
/// The HS256 secret the broker accepts JWTs under.
/// At least 32 bytes: the broker binary refuses a shorter `--jwt-secret`.
pub const JWT_SECRET: &[u8] = b"fuzz-jwt-secret-of-32-bytes-or-more";
/// The broker's clock: fixed (a `ManualClock` nobody moves), so an input answers the
/// same on every run: leases never lapse, timers never fall due.
pub const NOW_MICROS: i64 = 1_796_083_200_000_000; // 2026-12-01T00:00:00Z

/// A fresh broker answers this many requests, then is rebuilt from scratch: accepted
/// writes pile up in memory otherwise (a long run would reach libFuzzer's RSS limit),
/// and a request that deletes the seeded queue would leave later ones nothing to hit.
pub const REQUESTS_PER_BROKER: u64 = 2_000;

/// One route of the broker: a method, its path pattern (axum's syntax), a query and a
/// body it accepts on a fresh broker (the seeds; `$NAME` placeholders are filled with
/// the seeded state's ids, see [`Broker::fill`]).
#[derive(Debug)]
pub struct Route {
    /// The HTTP method.
    pub method: &'static str,
    /// The path, with `{param}` segments.
    pub pattern: &'static str,
    /// A query the route accepts; empty when the route reads none.
    pub query: &'static str,
    /// A body the route accepts; `None` when it reads none.
    pub body: Option<&'static str>,
    /// The seeded path parameters where they are not [`seeded_segment`]'s (a route on
    /// the dead letter, or on the ephemeral queue).
    pub segs: &'static [&'static str],
}

impl Route {
    /// `METHOD PATTERN`: the first line of a `route_*` input.
    pub fn key(&self) -> String {
        format!("{} {}", self.method, self.pattern)
    }

    /// The names of the path parameters, in order.
    pub fn params(&self) -> Vec<&'static str> {
        self.pattern
            .split('/')
            .filter_map(|s| s.strip_prefix('{')?.strip_suffix('}'))
            .map(|p| p.trim_start_matches('*'))
            .collect()
    }

    /// The seeded value of each path parameter, in order.
    pub fn seeded_segs(&self) -> Vec<&'static str> {
        if self.segs.is_empty() {
            self.params().into_iter().map(seeded_segment).collect()
        } else {
            self.segs.to_vec()
        }
    }

    /// The path with each parameter replaced by `segs[i]` (or its seeded value when
    /// `segs` has no `i`).
    pub fn path(&self, segs: &[Vec<u8>]) -> Vec<u8> {
        let seeded = self.seeded_segs();
        let mut out = Vec::new();
        let mut i = 0;
        for (n, part) in self.pattern.split('/').enumerate() {
            if n > 0 {
                out.push(b'/');
            }
            match part.strip_prefix('{').and_then(|p| p.strip_suffix('}')) {
                Some(_) => {
                    match segs.get(i) {
                        Some(s) => out.extend_from_slice(s),
                        None => out.extend_from_slice(seeded[i].as_bytes()),
                    }
                    i += 1;
                }
                None => out.extend_from_slice(part.as_bytes()),
            }
        }
        out
    }
}

/// The seeded state's value of a path parameter (placeholders filled at send time),
/// unless the route names its own ([`Route::segs`]).
pub fn seeded_segment(param: &str) -> &'static str {
    match param {
        "queue" => "fz",
        "partition" => "p0",
        "group" => "g0",
        "lease" => "$LEASE",
        "ns" => "fz",
        "key" => "k0",
        "partition_id" => "$PID",
        "transaction_id" => "m1",
        "name" => "t1",
        other => panic!("no seeded value for path parameter {other}"),
    }
}

const fn r(
    method: &'static str,
    pattern: &'static str,
    query: &'static str,
    body: Option<&'static str>,
) -> Route {
    Route {
        method,
        pattern,
        query,
        body,
        segs: &[],
    }
}

/// [`r`] on other seeded path parameters.
const fn at(route: Route, segs: &'static [&'static str]) -> Route {
    Route { segs, ..route }
}

/// Every route of the broker (`http::router` and the `routes()` of `http/*.rs`; the
/// property test checks this table against `ROUTES.md` and `wire.md`), each with a query
/// and a body it accepts.
#[rustfmt::skip]
pub const ROUTES: &[Route] = &[
    r("GET", "/health", "", None),
    r("POST", "/api/v1/configure", "", Some(r#"{"queue":"fz-cfg","namespace":"fns","task":"ft","options":{"leaseTime":60,"retryLimit":2,"deadLetterQueue":true,"delayedProcessing":0,"dedupWindowSeconds":10,"priority":1},"mode":"merge"}"#)),
    r("GET", "/api/v1/resources/queues", "", None),
    r("GET", "/api/v1/resources/queues/{queue}", "", None),
    r("DELETE", "/api/v1/resources/queues/{queue}", "", None),
    r("GET", "/api/v1/resources/queues/{queue}/depth", "group=g0", None),
    r("GET", "/api/v1/resources/namespaces", "", None),
    r("GET", "/api/v1/resources/tasks", "", None),
    r("GET", "/api/v1/resources/partitions", "queue=fz&limit=10", None),
    r("GET", "/api/v1/resources/overview", "", None),
    r("GET", "/api/v1/messages/{partition_id}/{transaction_id}", "", None),
    at(r("DELETE", "/api/v1/messages/{partition_id}/{transaction_id}", "", None), &["$DPID", "m9"]),
    at(r("POST", "/api/v1/messages/{partition_id}/{transaction_id}/retry", "", None), &["$DPID", "m9"]),
    r("GET", "/api/v1/messages", "queue=fz&partition=p0&ns=fns&task=ft&status=pending&from=2026-01-01T00:00:00Z&to=2027-01-01T00:00:00Z&limit=10&offset=0", None),
    r("POST", "/api/v1/push", "", Some(r#"{"items":[{"queue":"fz","partition":"p0","transactionId":"m7","payload":{"n":7}},{"queue":"fz-2","payload":null}]}"#)),
    r("GET", "/api/v1/pop", "namespace=fns&task=ft&batch=2&consumerGroup=g1&subscriptionMode=all&autoAck=false&leaseSeconds=30&partitions=2&autopilot=false", None),
    r("GET", "/api/v1/pop/queue/{queue}", "batch=2&wait=true&timeout=1000&consumerGroup=g1&subscriptionMode=from_beginning&autoAck=true", None),
    r("GET", "/api/v1/pop/queue/{queue}/partition/{partition}", "batch=1&consumerGroup=g1&subscriptionFrom=2026-01-01T00:00:00Z&leaseSeconds=60", None),
    r("POST", "/api/v1/ack", "", Some(r#"{"transactionId":"m1","partitionId":"$PID","consumerGroup":"g0","leaseId":"$LEASE","status":"completed"}"#)),
    r("POST", "/api/v1/ack/batch", "", Some(r#"{"acknowledgments":[{"transactionId":"m1","partitionId":"$PID","leaseId":"$LEASE","status":"failed","error":"boom"}],"consumerGroup":"g0"}"#)),
    r("POST", "/api/v1/lease/{lease}/extend", "", Some(r#"{"seconds":120}"#)),
    r("POST", "/api/v1/transaction", "", Some(r#"{"operations":[{"type":"ack","transactionId":"m1","partitionId":"$PID","consumerGroup":"g0","leaseId":"$LEASE","status":"completed"},{"type":"push","items":[{"queue":"fz-out","partition":"p0","transactionId":"r1","payload":{"n":1}}]}],"requiredLeases":["$LEASE"],"kv":[{"op":"put","ns":"fz","key":"k1","value":{"v":1},"ttlSeconds":60},{"op":"incr","ns":"fz","key":"c","delta":2,"forever":true}],"timers":[{"op":"schedule","queue":"fz","timerKey":"t9","payload":"aGk=","delayMs":1000}],"positions":[{"queue":"fz","partition":"p1","consumerGroup":"g2","offset":0}]}"#)),
    r("GET", "/api/v1/transactions", "limit=10", None),
    r("GET", "/api/v1/timer-log", "queue=fz&limit=10", None),
    r("GET", "/console/whoami", "", None),
    r("POST", "/api/v1/kv", "", Some(r#"{"operations":[{"op":"put","ns":"fz","key":"k2","value":[1,"a",null],"ttlSeconds":60,"expect":0},{"op":"getMany","ns":"fz","keys":["k0","k2"]},{"op":"getPrefix","ns":"fz","prefix":"k","limit":10,"keysOnly":false},{"op":"check","ns":"fz","key":"k0","expect":1}]}"#)),
    r("GET", "/api/v1/kv", "", None),
    r("GET", "/api/v1/kv/{ns}", "prefix=k&after=a&limit=10", None),
    r("GET", "/api/v1/kv/{ns}/{key}", "", None),
    r("PUT", "/api/v1/kv/{ns}/{key}", "", Some(r#"{"value":{"v":2},"ttlSeconds":60,"required":false}"#)),
    r("DELETE", "/api/v1/kv/{ns}/{key}", "expect=1", None),
    r("POST", "/api/v1/timers", "", Some(r#"{"operations":[{"op":"schedule","queue":"fz","timerKey":"t2","payload":"aGVsbG8=","delayMs":5000,"txn":"x1","partition":"p0"},{"op":"reschedule","queue":"fz","timerKey":"t0","payload":"aGk=","delayMs":9000}]}"#)),
    r("GET", "/api/v1/timers", "", None),
    r("GET", "/api/v1/timers/{queue}", "limit=10&after=a", None),
    r("GET", "/api/v1/timers/{queue}/{*key}", "", None),
    r("DELETE", "/api/v1/timers/{queue}/{*key}", "txn=x0", None),
    r("POST", "/api/v1/locks", "", Some(r#"{"operations":[{"op":"acquire","name":"l1","ttlSeconds":60,"owner":"me","limit":2},{"op":"get","name":"l0"}]}"#)),
    r("GET", "/api/v1/consumer-groups", "", None),
    r("GET", "/api/v1/consumer-groups/lagging", "minLagSeconds=0", None),
    r("GET", "/api/v1/consumer-groups/{group}", "", None),
    r("DELETE", "/api/v1/consumer-groups/{group}", "deleteMetadata=false", None),
    r("POST", "/api/v1/consumer-groups/{group}/subscription", "", Some(r#"{"subscriptionTimestamp":"2026-11-30T00:00:00Z"}"#)),
    r("DELETE", "/api/v1/consumer-groups/{group}/queues/{queue}", "deleteMetadata=true", None),
    r("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", "", Some(r#"{"toEnd":true}"#)),
    r("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", "", Some(r#"{"timestamp":"2026-11-30T12:00:00.5+01:00"}"#)),
    r("GET", "/api/v1/dlq", "queue=fz&consumerGroup=__QUEUE_MODE__&limit=10&offset=0", None),
    r("POST", "/api/v1/fetch", "", Some(r#"{"entries":[{"queue":"fz","partition":"p0","offset":0,"maxBytes":1000},{"queue":"fz","partition":7,"offset":0}],"maxBytes":4096,"maxWaitMs":10,"minBytes":1}"#)),
    r("POST", "/api/v1/partitions/changed", "", Some(r#"{"entries":[{"queue":"fz","since":"2026-01-01T10:00","after":"","limit":5}]}"#)),
    r("POST", "/api/v1/traces", "", Some(r#"{"transactionId":"m2","partitionId":"$PID","consumerGroup":"g0","traceNames":["t1","t2"],"eventType":"info","data":{"step":1}}"#)),
    r("GET", "/api/v1/traces/names", "limit=10&offset=0", None),
    r("GET", "/api/v1/traces/by-name/{name}", "limit=10&offset=0", None),
    r("GET", "/api/v1/traces/{partition_id}/{transaction_id}", "", None),
    r("GET", "/api/v1/status", "from=2026-11-30T23:00:00Z&to=2026-12-01T00:00:00Z&queue=fz&namespace=fns&task=ft", None),
    r("GET", "/api/v1/status/queues", "namespace=fns&task=ft&limit=10&offset=0", None),
    r("GET", "/api/v1/status/queues/{queue}", "", None),
    r("GET", "/api/v1/status/analytics", "from=2026-11-30T00:00:00Z&to=2026-12-01T00:00:00Z&interval=minute&queue=fz", None),
    r("GET", "/api/v1/analytics/system-metrics", "from=2026-11-30T23:00:00Z&to=2026-12-01T00:00:00Z", None),
    r("GET", "/api/v1/analytics/worker-metrics", "from=2026-11-30T23:00:00Z&to=2026-12-01T00:00:00Z&queue=fz", None),
    r("POST", "/api/v1/stats/refresh", "", None),
    r("GET", "/metrics", "", None),
    r("POST", "/api/v1/ephemeral/configure", "", Some(r#"{"queue":"efz-2","options":{"maxBytes":65536,"maxLength":100,"policy":"dropOldest","ttlSeconds":60,"leaseSeconds":10,"retryLimit":1,"windowBuffer":{"ms":10,"count":2}}}"#)),
    r("POST", "/api/v1/ephemeral/push", "", Some(r#"{"queue":"efz","partition":"room:7","messages":[{"payload":{"a":1}},{"payload":null}]}"#)),
    r("GET", "/api/v1/ephemeral/pop", "queue=efz&batch=2&wait=true&timeout=100&group=eg&autoAck=false", None),
    r("POST", "/api/v1/ephemeral/ack", "", Some(r#"{"queue":"efz","group":"eg","acks":[{"id":"e:0:Default:1","status":"failed","error":"boom"},{"id":"garbage"}]}"#)),
    r("POST", "/api/v1/ephemeral/reset", "", Some(r#"{"queue":"efz"}"#)),
    at(r("DELETE", "/api/v1/ephemeral/queue/{queue}", "", None), &["efz"]),
    r("GET", "/api/v1/ephemeral/queues", "", None),
    at(r("GET", "/api/v1/ephemeral/queues/{queue}/depth", "", None), &["efz"]),
    r("POST", "/streams/v1/queries", "", Some(r#"{"name":"sq2","source_queue":"fz","sink_queue":"fz-out","config_hash":"h1","reset":false}"#)),
    r("POST", "/streams/v1/cycle", "", Some(r#"{"query_id":"$QID","partition_id":"$PID","consumer_group":"streams.sq","state_ops":[{"type":"upsert","key":"w1","value":{"acc":1,"windowEnd":1000}},{"type":"delete","key":"w0"}],"push_items":[{"queue":"fz-out","partition":"","payload":{"a":1},"messageId":"0190a8f0-0000-7000-8000-000000000001"},{"queue":"","data":1}],"release_lease":true}"#)),
    r("POST", "/streams/v1/claim", "", Some(r#"{"query_id":"$QID","partition_ids":["$PID","999","x"],"consumer_group":"streams.sq","lease_seconds":30}"#)),
    r("POST", "/streams/v1/state/get", "", Some(r#"{"query_id":"$QID","partition_id":"$PID","keys":["w0","w1"],"key_prefix":"w","ripe_at_or_before":2000}"#)),
    r("POST", "/streams/v1/state/partitions", "", Some(r#"{"query_id":"$QID","untouched_for_ms":0,"after":"","limit":10}"#)),
];

/// A request as decoded from an input, before it is made a valid `http::Request`.
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// The method's bytes (an extension method is fine; an invalid token is skipped).
    pub method: Vec<u8>,
    /// Path and query, raw: bytes a URI cannot hold are percent-encoded at send time.
    pub target: Vec<u8>,
    /// Header lines; a name or value `http` refuses is dropped.
    pub headers: Vec<(Vec<u8>, Vec<u8>)>,
    /// The body, as is.
    pub body: Vec<u8>,
}

/// What happened to a call that is no finding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The broker answered this status (2xx or 4xx).
    Answered(u16),
    /// The input decodes to no request `http` can represent (a method that is not a
    /// token, a target that is not a URI even once escaped): nothing was sent. A real
    /// server never sees such a request either; hyper answers it with its own 400.
    Unsendable,
}

/// Splits at the first `\n`: (the line, the rest).
pub fn first_line(input: &[u8]) -> (&[u8], &[u8]) {
    match input.iter().position(|&b| b == b'\n') {
        Some(i) => (&input[..i], &input[i + 1..]),
        None => (input, &[]),
    }
}

/// The route a `METHOD PATTERN` line names among those `keep` selects; any other line
/// picks one by its hash, so every input reaches some route.
pub fn route_for(line: &[u8], keep: fn(&Route) -> bool) -> &'static Route {
    let routes: Vec<&'static Route> = ROUTES.iter().filter(|r| keep(r)).collect();
    if let Some(r) = routes.iter().find(|r| r.key().as_bytes() == line) {
        return r;
    }
    // FNV-1a: stable across runs and builds, so a saved input replays on its route.
    let h = line.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    routes[(h % routes.len() as u64) as usize]
}

/// Routes that read a body.
pub fn takes_body(r: &Route) -> bool {
    r.body.is_some()
}

/// Routes that read a query string.
pub fn takes_query(r: &Route) -> bool {
    !r.query.is_empty()
}

/// Routes with path parameters.
pub fn takes_path(r: &Route) -> bool {
    r.pattern.contains('{')
}

fn target(path: &[u8], query: &[u8]) -> Vec<u8> {
    let mut t = path.to_vec();
    if !query.is_empty() {
        t.push(b'?');
        t.extend_from_slice(query);
    }
    t
}

fn json_ctype() -> Vec<(Vec<u8>, Vec<u8>)> {
    vec![(b"content-type".to_vec(), b"application/json".to_vec())]
}

/// `route_body`: `METHOD PATTERN\n<body>`. The route's seeded path and query, the
/// input's bytes as its JSON body.
pub fn decode_body(input: &[u8]) -> Call {
    let (line, body) = first_line(input);
    let r = route_for(line, takes_body);
    Call {
        method: r.method.as_bytes().to_vec(),
        target: target(&r.path(&[]), r.query.as_bytes()),
        headers: json_ctype(),
        body: body.to_vec(),
    }
}

/// `route_query`: `METHOD PATTERN\n<query string>`. The route's seeded path and body,
/// the input's bytes as its query string.
pub fn decode_query(input: &[u8]) -> Call {
    let (line, query) = first_line(input);
    let r = route_for(line, takes_query);
    Call {
        method: r.method.as_bytes().to_vec(),
        target: target(&r.path(&[]), query),
        headers: json_ctype(),
        body: r.body.unwrap_or("").as_bytes().to_vec(),
    }
}

/// `route_path`: `METHOD PATTERN\n<segment>\n<segment>...`. Each line is one path
/// parameter, in order (missing ones take the seeded value); the route's query and
/// body as seeded. A `?` or `#` in a segment is escaped so it stays in the path.
pub fn decode_path(input: &[u8]) -> Call {
    let (line, rest) = first_line(input);
    let r = route_for(line, takes_path);
    let segs: Vec<Vec<u8>> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split(|&b| b == b'\n')
            .map(|s| {
                let mut out = Vec::with_capacity(s.len());
                for &b in s {
                    match b {
                        b'?' => out.extend_from_slice(b"%3F"),
                        b'#' => out.extend_from_slice(b"%23"),
                        _ => out.push(b),
                    }
                }
                out
            })
            .collect()
    };
    Call {
        method: r.method.as_bytes().to_vec(),
        target: target(&r.path(&segs), r.query.as_bytes()),
        headers: json_ctype(),
        body: r.body.unwrap_or("").as_bytes().to_vec(),
    }
}

/// `router`: a request as text, HTTP/1 style: `METHOD TARGET` on the first line, then
/// `Name: value` header lines up to an empty line, then the body. Nothing is pinned:
/// method, path, query, headers (the `Authorization` too) and body are the input's.
pub fn decode_request(input: &[u8]) -> Call {
    let (line, mut rest) = first_line(input);
    let (method, target) = match line.iter().position(|&b| b == b' ') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &b"/"[..]),
    };
    // Header lines up to an empty one (the body follows it); without one, every
    // remaining line is a header and the body is empty.
    let mut headers = Vec::new();
    while !rest.is_empty() {
        let (h, after) = first_line(rest);
        rest = after;
        if h.is_empty() || h == b"\r" {
            break;
        }
        push_header(&mut headers, h);
    }
    Call {
        method: method.to_vec(),
        target: target.to_vec(),
        headers,
        body: rest.to_vec(),
    }
}

fn push_header(headers: &mut Vec<(Vec<u8>, Vec<u8>)>, line: &[u8]) {
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let (name, value) = match line.iter().position(|&b| b == b':') {
        Some(i) => (&line[..i], &line[i + 1..]),
        None => (line, &b""[..]),
    };
    let value = value.strip_prefix(b" ").unwrap_or(value);
    headers.push((name.to_vec(), value.to_vec()));
}

/// Makes `target` a URI `http` accepts while keeping what the broker must judge: a
/// leading `/` is added when missing, and every byte outside RFC 3986's unreserved,
/// sub-delims, `:@/?` and `%` is percent-encoded. `%` stays raw, so malformed escapes
/// (`%zz`, a lone `%`, `%FF`) reach the broker's own checks.
pub fn uri_safe(target: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(target.len() + 1);
    if target.first() != Some(&b'/') {
        out.push(b'/');
    }
    for &b in target {
        if b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:@/?%".contains(&b) {
            out.push(b);
        } else {
            out.extend_from_slice(format!("%{b:02X}").as_bytes());
        }
    }
    out
}

fn replace_all(hay: &[u8], from: &[u8], to: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(hay.len());
    let mut i = 0;
    while i < hay.len() {
        if hay[i..].starts_with(from) {
            out.extend_from_slice(to);
            i += from.len();
        } else {
            out.push(hay[i]);
            i += 1;
        }
    }
    out
}

/// The ids a fresh broker's seeded state was given, for the `$NAME` placeholders.
#[derive(Debug, Clone, Default)]
pub struct Seeded {
    /// `$LEASE`: the live lease of group `g0` on `fz`/`p0` (holding `m1`).
    pub lease: String,
    /// `$PID`: the partition id of `fz`/`p0`.
    pub pid: String,
    /// `$DPID`: the partition id of `fz`/`p1`, holding the dead letter `m9`.
    pub dpid: String,
    /// `$QID`: the stream query `sq` (source `fz`).
    pub qid: String,
}

/// A broker in this process: the real router (with authentication on: tokens and
/// HS256 JWTs) over an in-memory engine on a fixed clock, driven on a current-thread
/// tokio runtime whose time is paused. Paused time auto-advances whenever the broker
/// only waits on a timer, so a long-poll (`wait=true&timeout=3600000`) ends at once in
/// tokio's time instead of holding the input for an hour, while a request that never
/// ends stays stuck in real time, where the hang detectors see it.
pub struct Broker {
    rt: tokio::runtime::Runtime,
    live: Option<Live>,
    served: u64,
    /// Requests answered by every broker of this value, and how many were 2xx.
    pub sent: u64,
    /// Of [`Broker::sent`], the 2xx answers.
    pub accepted: u64,
}

struct Live {
    engine: Engine,
    service: TowerToHyperService<axum::Router>,
    writer: WriterThread,
    seeded: Seeded,
}

impl Default for Broker {
    fn default() -> Self {
        Self::new()
    }
}

impl Broker {
    /// A broker with its seeded state (see [`Broker::seed`]).
    pub fn new() -> Broker {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a tokio runtime");
        let mut b = Broker {
            rt,
            live: None,
            served: 0,
            sent: 0,
            accepted: 0,
        };
        b.restart();
        b
    }

    /// The ids of the current broker's seeded state.
    pub fn seeded(&self) -> &Seeded {
        &self.live.as_ref().expect("a live broker").seeded
    }

    /// Drops the current broker (its writer finishes and stops) and starts a fresh one.
    pub fn restart(&mut self) {
        if let Some(old) = self.live.take() {
            old.engine.close();
            let Live {
                engine,
                service,
                writer,
                ..
            } = old;
            drop((engine, service));
            writer.join();
        }
        let db = store::open(None).expect("an in-memory database");
        let clock = Arc::new(ManualClock::starting_at(NOW_MICROS));
        let (engine, writer) = Engine::start(db, clock);
        let auth = Auth::new()
            .token(ADMIN_TOKEN, Role::Admin, "fuzz", Some("fuzzer"))
            .token(READ_TOKEN, Role::ReadOnly, "fuzz", None)
            .jwt_secret(JWT_SECRET.to_vec());
        let router = queen_mock_broker::http::router(engine.clone(), Some(auth));
        self.live = Some(Live {
            engine,
            service: TowerToHyperService::new(router),
            writer,
            seeded: Seeded::default(),
        });
        self.served = 0;
        self.seed();
    }

    /// A small valid state every route can act on: a configured queue `fz` (namespace
    /// `fns`, task `ft`) with `m1..m3` on `p0`, `m1` leased to group `g0`, a dead
    /// letter `m9` on `p1`, a KV row `fz/k0`, a timer `fz/t0`, a held lock `l0`, a trace
    /// named `t1` on `m1`, an ephemeral queue `efz` with two messages, and a stream
    /// query `sq` with a state cell on `p0`.
    fn seed(&mut self) {
        let ok = |b: &mut Broker, method: &str, target: &str, body: Value| -> Value {
            let call = Call {
                method: method.as_bytes().to_vec(),
                target: target.as_bytes().to_vec(),
                headers: json_ctype(),
                body: if body.is_null() {
                    Vec::new()
                } else {
                    body.to_string().into_bytes()
                },
            };
            let (status, bytes) = b.exchange(&call).expect("a seeding request is sendable");
            assert!(
                (200..300).contains(&status),
                "seeding {method} {target}: {status} {}",
                String::from_utf8_lossy(&bytes)
            );
            serde_json::from_slice(&bytes).unwrap_or(Value::Null)
        };
        ok(
            self,
            "POST",
            "/api/v1/configure",
            json!({"queue": "fz", "namespace": "fns", "task": "ft", "options": {"leaseTime": 3600, "retryLimit": 2}}),
        );
        let pushed = ok(
            self,
            "POST",
            "/api/v1/push",
            json!({"items": [
                {"queue": "fz", "partition": "p0", "transactionId": "m1", "payload": {"n": 1}},
                {"queue": "fz", "partition": "p0", "transactionId": "m2", "payload": {"n": 2}},
                {"queue": "fz", "partition": "p0", "transactionId": "m3", "payload": {"n": 3}},
                {"queue": "fz", "partition": "p1", "transactionId": "m9", "payload": {"n": 9}},
            ]}),
        );
        assert_eq!(pushed.as_array().map(Vec::len), Some(4), "{pushed}");
        let popped = ok(
            self,
            "GET",
            "/api/v1/pop/queue/fz/partition/p0?batch=1&consumerGroup=g0&subscriptionMode=all",
            Value::Null,
        );
        let lease = popped["leaseId"].as_str().expect("a lease").to_string();
        let pid = popped["partitionId"]
            .as_str()
            .expect("a partition id")
            .to_string();
        let dead = ok(
            self,
            "GET",
            "/api/v1/pop/queue/fz/partition/p1?batch=1",
            Value::Null,
        );
        let dpid = dead["partitionId"]
            .as_str()
            .expect("a partition id")
            .to_string();
        let dlease = dead["leaseId"].as_str().expect("a lease").to_string();
        let dl = ok(
            self,
            "POST",
            "/api/v1/ack",
            json!({"transactionId": "m9", "partitionId": dpid, "leaseId": dlease, "status": "dlq"}),
        );
        assert_eq!(dl[0]["dlq"], true, "{dl}");
        ok(
            self,
            "POST",
            "/api/v1/kv",
            json!({"operations": [{"op": "put", "ns": "fz", "key": "k0", "value": {"n": 0}, "forever": true}]}),
        );
        ok(
            self,
            "POST",
            "/api/v1/timers",
            json!({"operations": [{"op": "schedule", "queue": "fz", "timerKey": "t0", "payload": "aGk=", "delayMs": 86_400_000}]}),
        );
        ok(
            self,
            "POST",
            "/api/v1/locks",
            json!({"operations": [{"op": "acquire", "name": "l0", "ttlSeconds": 3600}]}),
        );
        ok(
            self,
            "POST",
            "/api/v1/traces",
            json!({"transactionId": "m1", "partitionId": pid, "traceNames": ["t1"], "data": {"step": 0}}),
        );
        ok(
            self,
            "POST",
            "/api/v1/ephemeral/push",
            json!({"queue": "efz", "messages": [{"payload": 1}, {"payload": 2}]}),
        );
        let q = ok(
            self,
            "POST",
            "/streams/v1/queries",
            json!({"name": "sq", "source_queue": "fz", "config_hash": "h0"}),
        );
        let qid = q["query_id"].as_str().expect("a query id").to_string();
        ok(
            self,
            "POST",
            "/streams/v1/cycle",
            json!({"query_id": qid, "partition_id": pid, "state_ops": [{"type": "upsert", "key": "w0", "value": {"windowEnd": 500}}]}),
        );
        self.live.as_mut().expect("a live broker").seeded = Seeded {
            lease,
            pid,
            dpid,
            qid,
        };
    }

    /// Fills the `$NAME` placeholders with the current broker's ids.
    pub fn fill(&self, bytes: &[u8]) -> Vec<u8> {
        if !bytes.contains(&b'$') {
            return bytes.to_vec();
        }
        let s = self.seeded();
        let mut out = bytes.to_vec();
        for (name, v) in [
            ("$LEASE", &s.lease),
            ("$DPID", &s.dpid),
            ("$PID", &s.pid),
            ("$QID", &s.qid),
        ] {
            out = replace_all(&out, name.as_bytes(), v.as_bytes());
        }
        out
    }

    /// Builds the request: placeholders filled, the target made a URI, the admin token
    /// added unless the call sends its own `Authorization`. `None`: not representable.
    fn request(&self, call: &Call) -> Option<Request<Body>> {
        let method = Method::from_bytes(&call.method).ok()?;
        let uri = Uri::try_from(uri_safe(&self.fill(&call.target))).ok()?;
        let mut req = Request::builder().method(method).uri(uri);
        let mut authorized = false;
        for (name, value) in &call.headers {
            let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name),
                HeaderValue::from_bytes(&self.fill(value)),
            ) else {
                continue;
            };
            authorized |= name == header::AUTHORIZATION;
            req = req.header(name, value);
        }
        if !authorized {
            req = req.header(header::AUTHORIZATION, format!("Bearer {ADMIN_TOKEN}"));
        }
        req.body(Body::from(self.fill(&call.body))).ok()
    }

    /// Sends a call and returns the status and body, without judging them. `None`:
    /// the call is not representable as a request (see [`Outcome::Unsendable`]).
    pub fn exchange(&mut self, call: &Call) -> Option<(u16, Vec<u8>)> {
        let req = self.request(call)?;
        let live = self.live.as_ref().expect("a live broker");
        let answer = self.rt.block_on(async {
            let res = live.service.call(req).await.unwrap_or_else(|e| match e {});
            let status = res.status().as_u16();
            let body = axum::body::to_bytes(res.into_body(), usize::MAX)
                .await
                .map(|b| b.to_vec())
                .unwrap_or_else(|e| format!("<the answer's body failed: {e}>").into_bytes());
            (status, body)
        });
        Some(answer)
    }

    /// Sends a call and judges the answer (see the module's text). A broker is rebuilt
    /// every [`REQUESTS_PER_BROKER`] calls.
    pub fn send(&mut self, call: &Call) -> Result<Outcome, String> {
        if self.served >= REQUESTS_PER_BROKER {
            self.restart();
        }
        self.served += 1;
        let commits = self
            .live
            .as_ref()
            .expect("a live broker")
            .engine
            .stats()
            .commits;
        let Some((status, body)) = self.exchange(call) else {
            return Ok(Outcome::Unsendable);
        };
        let wrote = self
            .live
            .as_ref()
            .expect("a live broker")
            .engine
            .stats()
            .commits
            - commits;
        self.sent += 1;
        judge(&call.method, &call.target, status, &body, wrote)?;
        if (200..300).contains(&status) {
            self.accepted += 1;
        }
        Ok(Outcome::Answered(status))
    }
}

/// Whether `target` (a request's path and query) names one of the console's files or
/// its redirects: answered without a token, as a page, not as JSON.
pub fn is_console_file(target: &[u8]) -> bool {
    // An empty target is sent as `/` (a request line needs a path).
    let path = target.split(|&b| b == b'?').next().unwrap_or_default();
    matches!(
        path,
        b"" | b"/" | b"/console" | b"/console/" | b"/console/app.js" | b"/console/app.css"
    )
}

/// The rules every answer keeps (see the module's text). `target`: the request's path
/// and query. `wrote`: commits the call made.
pub fn judge(
    method: &[u8],
    target: &[u8],
    status: u16,
    body: &[u8],
    wrote: u64,
) -> Result<(), String> {
    let text = || String::from_utf8_lossy(&body[..body.len().min(500)]).into_owned();
    if is_console_file(target) && (status == 200 || status == 303 && body.is_empty()) {
        return if wrote == 0 {
            Ok(())
        } else {
            Err(format!("a console file made {wrote} commit(s)"))
        };
    }
    match status {
        200..=299 => {
            if !body.is_empty() && serde_json::from_slice::<serde::de::IgnoredAny>(body).is_err() {
                return Err(format!(
                    "answered {status} with a body that is not JSON: {}",
                    text()
                ));
            }
            Ok(())
        }
        400..=499 => {
            if wrote > 0 {
                return Err(format!(
                    "answered {status} but made {wrote} commit(s): {}",
                    text()
                ));
            }
            if method == b"HEAD" {
                return Ok(()); // an answer to HEAD carries no body
            }
            let v: Value = serde_json::from_slice(body).map_err(|e| {
                format!(
                    "answered {status} with a body that is not JSON ({e}): {}",
                    text()
                )
            })?;
            if v["error"].as_str().is_none_or(str::is_empty) || !v["code"].is_string() {
                return Err(format!(
                    "answered {status} without {{error, code}}: {}",
                    text()
                ));
            }
            Ok(())
        }
        _ => Err(format!("answered {status}: {}", text())),
    }
}

/// A JWT the broker accepts (admin of tenant `fuzz`, expiring in 2100), for seeds.
pub fn admin_jwt() -> String {
    sign_jwt(
        JWT_SECRET,
        &json!({"role": "admin", "tenant": "fuzz", "sub": "jwt-fuzzer", "exp": 4_102_444_800_i64}),
    )
}
