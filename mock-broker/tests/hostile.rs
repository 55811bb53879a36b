//! Hostile input (issue #8, item 5): generated malformed and hostile requests to every
//! route of the broker.
//!
//! One in-memory broker holds a small valid state (a queue with a leased message, a KV
//! row, a pending timer, a held lock, a dead letter), so every route has something to
//! refuse against. For every route of `http/mod.rs` (and for paths and methods that are
//! no route) proptest then builds requests that are invalid by construction: each
//! carries at least one poison (a body field of the wrong type or out of its domain,
//! JSON that is malformed, too deep, not UTF-8, with duplicate keys or out-of-range
//! numbers, an enormous array ending in a bad element, a path parameter that is not
//! UTF-8, badly percent-encoded or over its budget, a query parameter out of range),
//! next to legal-but-hostile decorations (NUL, control characters and very long strings
//! in names, junk query parameters, wrong content types). Each must answer a 4xx whose
//! body is `{"error": <string>, "code": <string>}`, with no commit and no panic.
//!
//! A smaller share of requests is legal on purpose (odd but valid names in paths: NUL,
//! `..`, control characters): those may answer 2xx or 4xx, never a 5xx, and must leave
//! the valid state alone.
//!
//! The figures (requests per route, 4xx, 2xx, 5xx, panics) are printed at the end; run
//! with `-- --nocapture` to see them. `QUEEN_HOSTILE_CASES` sets the generated cases per
//! route (default 48) on top of the fixed sweep of every category; `QUEEN_HOSTILE_SEED`
//! replays a run.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use proptest::prelude::*;
use proptest::sample::select;
use proptest::strategy::{BoxedStrategy, Union, ValueTree};
use proptest::test_runner::{Config, RngSeed, TestCaseError, TestRunner};
use queen_mock_broker::engine::DEFAULT_TENANT;
use queen_mock_broker::engine::push::NewMessage;
use queen_mock_broker::{ManualClock, MockBroker};
use serde_json::value::RawValue;
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------
// A raw HTTP/1.1 client: the request line, headers and body are sent exactly as built,
// so paths like `/..`, `%zz` or `%FF` reach the broker unnormalised.
// ---------------------------------------------------------------------------------

/// One answer.
#[derive(Debug)]
struct Answer {
    status: u16,
    body: Vec<u8>,
}

fn exchange(
    addr: SocketAddr,
    method: &str,
    target: &str,
    ctype: Option<&str>,
    body: &[u8],
) -> Answer {
    let mut req = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    if let Some(ct) = ctype {
        req.push_str(&format!("Content-Type: {ct}\r\n"));
    }
    req.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = req.into_bytes();
    bytes.extend_from_slice(body);
    let mut s = TcpStream::connect(addr).expect("connect to the broker");
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // One write: head and body arrive together, so a route that answers without
    // reading a small body leaves nothing unread in the socket.
    s.write_all(&bytes).expect("send the request");
    let mut out = Vec::new();
    s.read_to_end(&mut out).expect("read the answer");
    parse_answer(&out).unwrap_or_else(|| {
        panic!(
            "not an HTTP answer: {:?}",
            String::from_utf8_lossy(&out[..out.len().min(300)])
        )
    })
}

fn parse_answer(raw: &[u8]) -> Option<Answer> {
    let split = raw.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(&raw[..split]).ok()?;
    let rest = &raw[split + 4..];
    let status = head.get(9..12)?.parse().ok()?;
    let chunked = head.lines().any(|l| {
        let l = l.to_ascii_lowercase();
        l.starts_with("transfer-encoding:") && l.contains("chunked")
    });
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Some(Answer { status, body })
}

fn dechunk(mut rest: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = rest.windows(2).position(|w| w == b"\r\n")?;
        let size =
            usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?.trim(), 16).ok()?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        out.extend_from_slice(rest.get(..size)?);
        rest = rest.get(size + 2..)?;
    }
}

/// Percent-encodes everything but RFC 3986's unreserved characters.
fn enc(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

// ---------------------------------------------------------------------------------
// JSON built as bytes, so that it can be wrong on purpose (bad UTF-8, duplicate keys,
// 1e400, 10,000 levels of nesting).
// ---------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum J {
    /// Literal JSON text, possibly invalid.
    Raw(Vec<u8>),
    /// Keys as encoded JSON strings (quotes included).
    Obj(Vec<(Vec<u8>, J)>),
    Arr(Vec<J>),
}

impl J {
    fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        self.write(&mut out);
        out
    }

    fn write(&self, out: &mut Vec<u8>) {
        match self {
            J::Raw(b) => out.extend_from_slice(b),
            J::Obj(fields) => {
                out.push(b'{');
                for (i, (k, v)) in fields.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    out.extend_from_slice(k);
                    out.push(b':');
                    v.write(out);
                }
                out.push(b'}');
            }
            J::Arr(items) => {
                out.push(b'[');
                for (i, v) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(b',');
                    }
                    v.write(out);
                }
                out.push(b']');
            }
        }
    }
}

fn key(name: &str) -> Vec<u8> {
    serde_json::to_vec(name).unwrap()
}

fn jstr(s: &str) -> J {
    J::Raw(serde_json::to_vec(s).unwrap())
}

fn jraw(s: impl AsRef<[u8]>) -> J {
    J::Raw(s.as_ref().to_vec())
}

// ---------------------------------------------------------------------------------
// Body schemas: each route's valid body, field by field, with each field's domain. A
// poison is a field moved out of its domain; everything else stays valid.
// ---------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Ty {
    /// A string of `min..=max` bytes; `nul`: may hold NUL.
    Str {
        min: usize,
        max: usize,
        nul: bool,
        sample: &'static str,
    },
    /// A KV namespace: `^[a-z0-9][a-z0-9._-]{0,63}$`.
    Ns(&'static str),
    /// An integer from `min` to `max`.
    Int {
        min: i64,
        max: i64,
        sample: i64,
    },
    /// A non-negative integer.
    UInt(u64),
    /// Any JSON number.
    Num,
    Bool(bool),
    /// One string of `all` (`sample` is the one in the valid body).
    Enum {
        sample: &'static str,
        all: &'static [&'static str],
    },
    /// Any JSON value (a payload): only JSON that is not portable is refused.
    Any,
    /// A KV value: any JSON of at most 64 KiB.
    KvValue,
    /// Base64 text.
    B64,
    /// An ISO-8601 time.
    Iso,
    Obj(&'static [Field]),
    /// An array of the element type, holding one sample element.
    Arr(&'static Ty),
}

#[derive(Clone, Copy, Debug)]
struct Field {
    name: &'static str,
    ty: Ty,
    /// Removing the field makes the body invalid.
    req: bool,
    /// `null` is valid (treated as absent, or a JSON null value).
    null_ok: bool,
}

/// An optional field (`null` counts as absent).
const fn opt(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        req: false,
        null_ok: true,
    }
}

/// A required field.
const fn req(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        req: true,
        null_ok: false,
    }
}

/// A required field whose value may be JSON `null` (a payload, a KV value).
const fn req_value(name: &'static str, ty: Ty) -> Field {
    Field {
        name,
        ty,
        req: true,
        null_ok: true,
    }
}

const fn text(min: usize, max: usize, nul: bool, sample: &'static str) -> Ty {
    Ty::Str {
        min,
        max,
        nul,
        sample,
    }
}

const fn any_str(sample: &'static str) -> Ty {
    text(0, usize::MAX, true, sample)
}

/// A queue or partition name: 1 to 1,024 bytes (`wire.md` section 1).
const fn name(sample: &'static str) -> Ty {
    text(1, 1024, true, sample)
}

const fn int(min: i64, max: i64, sample: i64) -> Ty {
    Ty::Int { min, max, sample }
}

const fn one_of(sample: &'static str, all: &'static [&'static str]) -> Ty {
    Ty::Enum { sample, all }
}

const I32: i64 = i32::MAX as i64;
const TXN_ID: Ty = text(0, 65_535, true, "hostile-txn");
const KV_KEY: Ty = text(1, 512, false, "hk");
const TIMER_KEY: Ty = text(1, 1024, true, "htk");
const LOCK_NAME: Ty = text(1, 400, false, "hostile-lock");
const TTL: Ty = int(1, i64::MAX, 60);
const KV_OPS: &[&str] = &[
    "get",
    "getMany",
    "getPrefix",
    "put",
    "putIfAbsent",
    "delete",
    "check",
    "incr",
];
const TIMER_OPS: &[&str] = &["schedule", "reschedule", "cancel"];
const LOCK_OPS: &[&str] = &["acquire", "renew", "release", "get"];
const OP_TYPES: &[&str] = &["push", "ack"];

#[rustfmt::skip]
const CONFIGURE: &[Field] = &[
    req("queue", name("hostile-cfg")),
    opt("namespace", any_str("hns")),
    opt("task", any_str("ht")),
    opt("options", Ty::Obj(&[
        opt("leaseTime", int(1, I32, 60)),
        opt("retryLimit", int(0, I32, 2)),
        opt("deadLetterQueue", Ty::Bool(true)),
        opt("delayedProcessing", int(0, I32, 0)),
        opt("dedupWindowSeconds", int(0, I32, 10)),
        opt("priority", int(i32::MIN as i64, I32, 1)),
        opt("retentionSinkHold", any_str("hold")),
        opt("namespace", any_str("ns")),
    ])),
    opt("mode", one_of("merge", &["merge", "replace"])),
];

#[rustfmt::skip]
const PUSH: &[Field] = &[req("items", Ty::Arr(&Ty::Obj(&[
    req("queue", name("hostile-push")),
    opt("partition", name("hp")),
    req_value("payload", Ty::Any),
    opt("transactionId", TXN_ID),
])))];

#[rustfmt::skip]
const ACK: &[Field] = &[
    req("transactionId", any_str("m1")),
    req("partitionId", any_str("1")),
    opt("status", any_str("completed")),
    opt("consumerGroup", any_str("g9")),
    opt("leaseId", any_str("no-such-lease")),
    opt("error", any_str("boom")),
];

#[rustfmt::skip]
const ACK_BATCH: &[Field] = &[
    req("acknowledgments", Ty::Arr(&Ty::Obj(&[
        req("transactionId", any_str("m1")),
        req("partitionId", any_str("1")),
        opt("status", any_str("failed")),
        opt("leaseId", any_str("no-such-lease")),
        opt("error", any_str("boom")),
    ]))),
    opt("consumerGroup", any_str("g9")),
];

const EXTEND: &[Field] = &[opt("seconds", int(1, 31_536_000, 30))];
const SEEK: &[Field] = &[req("toEnd", Ty::Bool(true))];
const SEEK_TIME: &[Field] = &[req("timestamp", Ty::Iso)];

#[rustfmt::skip]
const TXN_PUSH_OP: &[Field] = &[
    req("type", one_of("push", OP_TYPES)),
    opt("items", Ty::Arr(&Ty::Obj(&[
        req("queue", name("hostile-txq")),
        opt("partition", name("hp")),
        opt("payload", Ty::Any),
        opt("transactionId", TXN_ID),
        opt("traceId", any_str("trace")),
    ]))),
];

#[rustfmt::skip]
const TXN_ACK_OP: &[Field] = &[
    req("type", one_of("ack", OP_TYPES)),
    opt("transactionId", any_str("m1")),
    opt("partitionId", any_str("1")),
    opt("status", any_str("completed")),
    opt("consumerGroup", any_str("g9")),
    opt("leaseId", any_str("no-such-lease")),
    opt("error", any_str("boom")),
];

#[rustfmt::skip]
const KV_PUT: &[Field] = &[
    req("op", one_of("put", KV_OPS)),
    req("ns", Ty::Ns("hostile-ns")),
    req("key", KV_KEY),
    req_value("value", Ty::KvValue),
    req("ttlSeconds", TTL),
    opt("expect", Ty::UInt(0)),
    opt("required", Ty::Bool(false)),
];

#[rustfmt::skip]
const KV_INCR: &[Field] = &[
    req("op", one_of("incr", KV_OPS)),
    req("ns", Ty::Ns("hostile-ns")),
    req("key", KV_KEY),
    opt("delta", Ty::Num),
    opt("min", Ty::Num),
    opt("max", Ty::Num),
    req("forever", Ty::Bool(true)),
];

#[rustfmt::skip]
const KV_CHECK: &[Field] = &[
    req("op", one_of("check", KV_OPS)),
    req("ns", Ty::Ns("hostile-ns")),
    req("key", KV_KEY),
    req("expect", Ty::UInt(3)),
    opt("required", Ty::Bool(true)),
];

#[rustfmt::skip]
const KV_GET_MANY: &[Field] = &[
    req("op", one_of("getMany", KV_OPS)),
    req("ns", Ty::Ns("hostile-ns")),
    req("keys", Ty::Arr(&KV_KEY)),
];

#[rustfmt::skip]
const KV_GET_PREFIX: &[Field] = &[
    req("op", one_of("getPrefix", KV_OPS)),
    req("ns", Ty::Ns("hostile-ns")),
    opt("prefix", any_str("h")),
    opt("after", any_str("h")),
    opt("limit", int(1, 1000, 10)),
    opt("keysOnly", Ty::Bool(true)),
];

/// A timer `schedule` whose `delayMs` may reach `horizon_ms` (a transaction's are not
/// held to the standalone 90-day horizon).
macro_rules! timer_schedule {
    ($horizon_ms:expr) => {
        &[
            req("op", one_of("schedule", TIMER_OPS)),
            req("queue", name("hostile-tq")),
            req("timerKey", TIMER_KEY),
            req("payload", Ty::B64),
            req("delayMs", int(i64::MIN, $horizon_ms, 1000)),
            opt("txn", TXN_ID),
            opt("partition", name("hp")),
            opt("payloadZstd", Ty::Bool(false)),
            opt("encrypted", Ty::Bool(false)),
        ]
    };
}
const TIMER_SCHEDULE: &[Field] = timer_schedule!(i64::MAX);
const TIMER_SCHEDULE_STANDALONE: &[Field] = timer_schedule!(90 * 24 * 3600 * 1000);

#[rustfmt::skip]
const TIMER_CANCEL: &[Field] = &[
    req("op", one_of("cancel", TIMER_OPS)),
    req("queue", name("hostile-tq")),
    req("timerKey", TIMER_KEY),
    opt("txn", TXN_ID),
];

#[rustfmt::skip]
const TXN_FULL: &[Field] = &[
    opt("operations", Ty::Arr(&Ty::Obj(TXN_PUSH_OP))),
    opt("requiredLeases", Ty::Arr(&any_str("no-such-lease"))),
    opt("kv", Ty::Arr(&Ty::Obj(KV_PUT))),
    opt("timers", Ty::Arr(&Ty::Obj(TIMER_SCHEDULE))),
    opt("positions", Ty::Arr(&Ty::Obj(&[
        req("queue", name("hostile-txq")),
        opt("partition", any_str("hp")),
        opt("consumerGroup", any_str("g9")),
        req("offset", Ty::UInt(0)),
    ]))),
];
const TXN_ACKS: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(TXN_ACK_OP)))];
#[rustfmt::skip]
const TXN_KV: &[Field] = &[
    opt("kv", Ty::Arr(&Ty::Obj(KV_INCR))),
    opt("timers", Ty::Arr(&Ty::Obj(TIMER_CANCEL))),
];
const TXN_CHECK: &[Field] = &[req("kv", Ty::Arr(&Ty::Obj(KV_CHECK)))];

const KV_STANDALONE_PUT: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(KV_PUT)))];
const KV_STANDALONE_MANY: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(KV_GET_MANY)))];
const KV_STANDALONE_PREFIX: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(KV_GET_PREFIX)))];

#[rustfmt::skip]
const KV_PUT_ONE: &[Field] = &[
    req_value("value", Ty::KvValue),
    req("ttlSeconds", TTL),
    opt("expect", Ty::UInt(0)),
    opt("required", Ty::Bool(false)),
];

const TIMERS_SCHEDULE: &[Field] = &[req(
    "operations",
    Ty::Arr(&Ty::Obj(TIMER_SCHEDULE_STANDALONE)),
)];
const TIMERS_CANCEL: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(TIMER_CANCEL)))];

#[rustfmt::skip]
const LOCKS_ACQUIRE: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(&[
    req("op", one_of("acquire", LOCK_OPS)),
    req("name", LOCK_NAME),
    req("ttlSeconds", TTL),
    opt("owner", any_str("me")),
    opt("limit", int(1, 1024, 2)),
])))];

#[rustfmt::skip]
const LOCKS_RELEASE: &[Field] = &[req("operations", Ty::Arr(&Ty::Obj(&[
    req("op", one_of("release", LOCK_OPS)),
    req("name", LOCK_NAME),
    req("token", Ty::UInt(99)),
    opt("slot", Ty::UInt(0)),
])))];

/// The valid JSON of a type.
fn sample(ty: &Ty) -> J {
    match *ty {
        Ty::Str { sample, .. } => jstr(sample),
        Ty::Ns(s) => jstr(s),
        Ty::Int { sample, .. } => jraw(sample.to_string()),
        Ty::UInt(n) => jraw(n.to_string()),
        Ty::Num => jraw("2.5"),
        Ty::Bool(b) => jraw(b.to_string()),
        Ty::Enum { sample, .. } => jstr(sample),
        Ty::Any | Ty::KvValue => jraw(r#"{"orderId":"o-7","total":120.5,"tags":["a",null]}"#),
        Ty::B64 => jstr("aGVsbG8="),
        Ty::Iso => jstr("2026-01-02T03:04:05Z"),
        Ty::Obj(fields) => J::Obj(
            fields
                .iter()
                .map(|f| (key(f.name), sample(&f.ty)))
                .collect(),
        ),
        Ty::Arr(elem) => J::Arr(vec![sample(elem)]),
    }
}

/// Where a field sits in a body: object keys and array indexes.
#[derive(Clone, Debug)]
enum Step {
    Key(&'static str),
    Idx,
}

/// The name of the pseudo-field that stands for an element of an array of scalars.
const ELEMENT: &str = "[0]";

/// Every field of a schema, with its path.
fn field_paths(fields: &'static [Field], prefix: Vec<Step>, out: &mut Vec<(Vec<Step>, Field)>) {
    for f in fields {
        let mut p = prefix.clone();
        p.push(Step::Key(f.name));
        out.push((p.clone(), *f));
        let mut ty = f.ty;
        while let Ty::Arr(elem) = ty {
            p.push(Step::Idx);
            ty = *elem;
            if !matches!(ty, Ty::Obj(_)) {
                out.push((
                    p.clone(),
                    Field {
                        name: ELEMENT,
                        ty,
                        req: false,
                        null_ok: false,
                    },
                ));
            }
        }
        if let Ty::Obj(inner) = ty {
            field_paths(inner, p, out);
        }
    }
}

/// What a poison does to the field at its path.
#[derive(Clone, Debug)]
enum Edit {
    Set(J),
    Remove,
    /// Adds the same key again, with this value, after the original.
    Dup(J),
}

fn apply(body: &mut J, path: &[Step], edit: &Edit) {
    let (last, parents) = path.split_last().expect("a path");
    let mut at = body;
    for step in parents {
        at = match (step, at) {
            (Step::Key(k), J::Obj(fields)) => {
                let kb = key(k);
                &mut fields
                    .iter_mut()
                    .find(|(fk, _)| *fk == kb)
                    .expect("field in the sample")
                    .1
            }
            (Step::Idx, J::Arr(items)) => &mut items[0],
            other => panic!("path does not match the sample: {other:?}"),
        };
    }
    match (last, at) {
        (Step::Key(k), J::Obj(fields)) => {
            let kb = key(k);
            let i = fields
                .iter()
                .position(|(fk, _)| *fk == kb)
                .expect("field in the sample");
            match edit {
                Edit::Set(v) => fields[i].1 = v.clone(),
                Edit::Remove => {
                    fields.remove(i);
                }
                Edit::Dup(v) => fields.insert(i + 1, (kb, v.clone())),
            }
        }
        (Step::Idx, J::Arr(items)) => match edit {
            Edit::Set(v) => items[0] = v.clone(),
            Edit::Remove => items.clear(),
            Edit::Dup(v) => items.push(v.clone()),
        },
        other => panic!("path does not match the sample: {other:?}"),
    }
}

// ---------------------------------------------------------------------------------
// Value generators.
// ---------------------------------------------------------------------------------

/// One of these JSON texts.
fn raws(texts: &'static [&'static str]) -> BoxedStrategy<J> {
    select(texts).prop_map(jraw).boxed()
}

/// One of these strings, as JSON strings.
fn strs(texts: &'static [&'static str]) -> BoxedStrategy<J> {
    select(texts).prop_map(jstr).boxed()
}

/// Strings that are valid JSON strings but hostile as names: NUL, control characters,
/// odd Unicode, path tricks, and very long ones.
fn hostile_text() -> BoxedStrategy<String> {
    #[rustfmt::skip]
    const ODD: &[&str] = &[
        "\0", "a\0b", "..", "../../etc/passwd", "\u{1}\u{7f}\r\n\t", "\u{202e}evil\u{feff}",
        "%00%zz%FF", "💣💣💣", "\\u0000", "null",
    ];
    prop_oneof![
        select(ODD).prop_map(str::to_string),
        "[\\x00-\\x1f]{1,16}",
        "\\PC{1,24}",
        (1usize..70_000).prop_map(|n| "x".repeat(n)),
    ]
    .boxed()
}

/// A string that fits `min..=max` bytes (NUL removed when not allowed), or `None`.
fn fit(s: &str, min: usize, max: usize, nul: bool) -> Option<String> {
    let mut s: String = if nul {
        s.to_string()
    } else {
        s.replace('\0', "")
    };
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    (s.len() >= min).then_some(s)
}

/// JSON that no route can take anywhere: too deep, out of range, not UTF-8, a lone
/// surrogate, a duplicate key, or not JSON at all.
fn exotic() -> BoxedStrategy<J> {
    // Not UTF-8: a bad byte, an overlong NUL, an encoded surrogate, a cut sequence.
    #[rustfmt::skip]
    const NOT_UTF8: &[&[u8]] = &[b"\"\xff\xfe\"", b"\"a\xc0\x80b\"", b"\"\xed\xa0\x80\"", b"\"\xe2\x82\""];
    #[rustfmt::skip]
    const TEXTS: &[&str] = &[
        "1e400", "-1e400", "123456789e999999999", "\"\\ud800\"", "\"x\\udc00y\"",
        r#"{"a":1,"a":2}"#, r#"[{"k":{"x":true,"x":true}}]"#, "\"a\u{0}b\"", "\"tab\tinside\"",
        "NaN", "Infinity", "'single'", "0x1F", "01", "+1", ".5", "tru", "[1,]", "{\"a\":1,}",
        "\"\\x41\"",
    ];
    prop_oneof![
        (129usize..10_001).prop_map(|n| jraw(format!("{}1{}", "[".repeat(n), "]".repeat(n)))),
        (129usize..10_001).prop_map(|n| jraw(format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n)))),
        (1usize..10_001).prop_map(|n| jraw("[".repeat(n))),
        select(NOT_UTF8).prop_map(jraw),
        raws(TEXTS),
    ]
    .boxed()
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Str,
    Int,
    Float,
    Bool,
    Arr,
    Obj,
}

fn of_kind(k: Kind) -> BoxedStrategy<J> {
    match k {
        Kind::Str => prop_oneof![
            strs(&["5", "true", ""]),
            hostile_text().prop_map(|s| jstr(&s))
        ]
        .boxed(),
        Kind::Int => prop_oneof![
            any::<i64>().prop_map(|n| jraw(n.to_string())),
            raws(&[
                "18446744073709551615",
                "18446744073709551616",
                "-9223372036854775809",
                "99999999999999999999999999999999",
            ]),
        ]
        .boxed(),
        Kind::Float => raws(&[
            "1.5",
            "1e2",
            "0.0",
            "-0.0",
            "1e308",
            "-1.7976931348623157e308",
            "5e-324",
        ]),
        Kind::Bool => raws(&["true", "false"]),
        Kind::Arr => prop_oneof![
            raws(&["[]", "[1,\"x\",null]", "[[[[]]]]"]),
            (1usize..2_000).prop_map(|n| jraw(format!("[{}0]", "0,".repeat(n)))),
        ]
        .boxed(),
        Kind::Obj => raws(&["{}", r#"{"a":{"b":[]}}"#, r#"{"queue":"q","payload":1}"#]),
    }
}

/// A value of any JSON kind but these.
fn wrong_kind(not: &[Kind]) -> BoxedStrategy<J> {
    let all = [
        Kind::Str,
        Kind::Int,
        Kind::Float,
        Kind::Bool,
        Kind::Arr,
        Kind::Obj,
    ];
    let kinds: Vec<Kind> = all.into_iter().filter(|k| !not.contains(k)).collect();
    select(kinds).prop_flat_map(of_kind).boxed()
}

/// Values outside a field's domain (never `null` or absence: those are separate).
fn out_of_domain(ty: &Ty) -> BoxedStrategy<J> {
    match *ty {
        Ty::Str { min, max, nul, .. } => {
            let mut bad = vec![wrong_kind(&[Kind::Str])];
            if min > 0 {
                bad.push(strs(&[""]));
            }
            if max < usize::MAX {
                bad.push(
                    (1usize..4_096)
                        .prop_map(move |extra| jstr(&"n".repeat(max + extra)))
                        .boxed(),
                );
                bad.push(
                    (1usize..64)
                        .prop_map(move |extra| jstr(&"é".repeat((max + extra) / 2 + 1)))
                        .boxed(),
                );
            }
            if !nul {
                bad.push(strs(&["a\0b", "\0"]));
            }
            Union::new(bad).boxed()
        }
        Ty::Ns(_) => prop_oneof![
            wrong_kind(&[Kind::Str]),
            strs(&[
                "",
                "Upper",
                "-lead",
                ".lead",
                "has space",
                "slash/inside",
                "nul\0",
                "é"
            ]),
            (65usize..300).prop_map(|n| jstr(&"a".repeat(n))),
        ]
        .boxed(),
        Ty::Int { min, max, .. } => {
            let mut bad = vec![
                wrong_kind(&[Kind::Int]),
                raws(&[
                    "18446744073709551616",
                    "99999999999999999999999999999999",
                    "-9223372036854775809",
                ]),
            ];
            if min > i64::MIN {
                bad.push(
                    select(vec![min - 1, i64::MIN])
                        .prop_map(|n| jraw(n.to_string()))
                        .boxed(),
                );
                bad.push((i64::MIN..min).prop_map(|n| jraw(n.to_string())).boxed());
            }
            if max < i64::MAX {
                bad.push(
                    select(vec![max as i128 + 1, i64::MAX as i128, u64::MAX as i128])
                        .prop_map(|n| jraw(n.to_string()))
                        .boxed(),
                );
                bad.push(
                    (max + 1..=i64::MAX)
                        .prop_map(|n| jraw(n.to_string()))
                        .boxed(),
                );
            }
            Union::new(bad).boxed()
        }
        Ty::UInt(_) => prop_oneof![
            wrong_kind(&[Kind::Int]),
            raws(&["-1", "-9223372036854775808", "18446744073709551616"]),
            (i64::MIN..0).prop_map(|n| jraw(n.to_string())),
        ]
        .boxed(),
        Ty::Num => wrong_kind(&[Kind::Int, Kind::Float]),
        Ty::Bool(_) => {
            prop_oneof![wrong_kind(&[Kind::Bool]), raws(&["0", "1", "\"true\""])].boxed()
        }
        Ty::Enum { all, .. } => prop_oneof![
            wrong_kind(&[Kind::Str]),
            hostile_text()
                .prop_filter("not a valid value", move |s| !all.contains(&s.as_str()))
                .prop_map(|s| jstr(&s)),
            select(all).prop_map(|s| jstr(&s.to_uppercase())),
            select(all).prop_map(|s| jstr(&format!("{s} "))),
            select(all).prop_map(|s| jstr(&format!("{s}\0"))),
        ]
        .boxed(),
        Ty::Any => exotic(),
        Ty::KvValue => prop_oneof![
            exotic(),
            (1usize..4_096).prop_map(|extra| jstr(&"v".repeat(64 * 1024 + extra))),
        ]
        .boxed(),
        Ty::B64 => prop_oneof![
            wrong_kind(&[Kind::Str]),
            strs(&["!!!!", "aGk", "a", "====", "aGVs\nbG8=", "aGVsbG8=\0"]),
        ]
        .boxed(),
        Ty::Iso => prop_oneof![
            wrong_kind(&[Kind::Str]),
            strs(&[
                "yesterday",
                "2026-13-45T00:00:00Z",
                "2026-01-02",
                "",
                "+999999-01-01T00:00:00Z"
            ]),
        ]
        .boxed(),
        Ty::Obj(_) => wrong_kind(&[Kind::Obj]),
        Ty::Arr(_) => wrong_kind(&[Kind::Arr]),
    }
}

/// Poisons for one field: out of its domain, `null` when that is not allowed, removed
/// when required, exotic JSON, or its key given twice.
fn poison_field(f: Field) -> BoxedStrategy<Edit> {
    let mut edits: Vec<BoxedStrategy<Edit>> = vec![
        out_of_domain(&f.ty).prop_map(Edit::Set).boxed(),
        out_of_domain(&f.ty).prop_map(Edit::Set).boxed(),
        exotic().prop_map(Edit::Set).boxed(),
    ];
    if f.name != ELEMENT {
        // A duplicate key, even with the same valid value, is refused: a proxy and the
        // broker must never read two different bodies out of one request. (A repeated
        // array element is no such thing.)
        edits.push(Just(Edit::Dup(sample(&f.ty))).boxed());
    }
    if !f.null_ok {
        edits.push(Just(Edit::Set(jraw("null"))).boxed());
    }
    if f.req {
        edits.push(Just(Edit::Remove).boxed());
    }
    Union::new(edits).boxed()
}

/// A legal value set at a path, or nothing.
type Decoration = Option<(Vec<Step>, J)>;

/// Legal but hostile replacement for a string field, when its domain allows one.
fn decoration(f: Field) -> Option<BoxedStrategy<J>> {
    match f.ty {
        Ty::Str { min, max, nul, .. } => Some(
            hostile_text()
                .prop_filter_map("fits the domain", move |s| fit(&s, min.max(1), max, nul))
                .prop_map(|s| jstr(&s))
                .boxed(),
        ),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------
// Requests.
// ---------------------------------------------------------------------------------

/// How the broker must treat a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Class {
    /// The base state's own names: valid.
    Valid,
    /// Odd but valid: 2xx or 4xx, never 5xx.
    Legal,
    /// Invalid: a 4xx with `{error, code}` and nothing written.
    Refuse,
}

#[derive(Clone, Debug)]
struct Part {
    text: Vec<u8>,
    class: Class,
    what: String,
}

impl Part {
    fn new(text: impl Into<Vec<u8>>, class: Class, what: impl Into<String>) -> Part {
        Part {
            text: text.into(),
            class,
            what: what.into(),
        }
    }
}

#[derive(Clone, Debug)]
struct Case {
    method: &'static str,
    target: String,
    ctype: Option<&'static str>,
    body: Vec<u8>,
    class: Class,
    what: String,
}

impl Case {
    fn describe(&self) -> String {
        let body = String::from_utf8_lossy(&self.body[..self.body.len().min(400)]).to_string();
        let target: String = self.target.chars().take(300).collect();
        format!(
            "{} {} [{} body bytes: {:?}{}] content-type {:?}, {:?} because {}",
            self.method,
            target,
            self.body.len(),
            body,
            if self.body.len() > 400 { "…" } else { "" },
            self.ctype,
            self.class,
            self.what
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum P {
    Queue,
    Partition,
    Group,
    Lease,
    Ns,
    Key,
    TimerKey,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Q {
    /// The route reads no query string.
    None,
    Pop,
    Dlq,
    DeleteGroup,
    KvDelete,
    TimerList,
    TimerCancel,
}

#[derive(Clone, Copy)]
enum B {
    /// The route reads no body.
    None,
    /// A JSON object is required; these are its valid bodies.
    Json(&'static [&'static [Field]]),
    /// No body, or a JSON object (lease extension).
    Optional(&'static [&'static [Field]]),
}

struct Route {
    method: &'static str,
    pattern: &'static str,
    params: &'static [P],
    query: Q,
    body: B,
    /// Bodies invalid for a rule across fields, that no single-field poison covers.
    extra: &'static [&'static str],
    /// Legal requests (odd names, no query) are safe to send: they touch no base state.
    legal: bool,
}

const fn route(
    method: &'static str,
    pattern: &'static str,
    params: &'static [P],
    query: Q,
    body: B,
) -> Route {
    Route {
        method,
        pattern,
        params,
        query,
        body,
        extra: &[],
        legal: false,
    }
}

impl Route {
    /// Legal requests (odd names, no query) may be sent.
    const fn legal(self) -> Route {
        Route {
            legal: true,
            ..self
        }
    }

    /// Bodies invalid for a rule across fields.
    const fn extra(self, extra: &'static [&'static str]) -> Route {
        Route { extra, ..self }
    }
}

/// Every route of `http/mod.rs`.
#[rustfmt::skip]
fn routes() -> Vec<Route> {
    use P::*;
    vec![
        route("GET", "/health", &[], Q::None, B::None).legal(),
        route("POST", "/api/v1/configure", &[], Q::None, B::Json(&[CONFIGURE])).extra(&[
            r#"{"queue":"hostile-cfg","mode":"Replace"}"#,
            r#"{"queue":"hostile-cfg","options":{"task":7}}"#,
        ]),
        route("DELETE", "/api/v1/resources/queues/{queue}", &[Queue], Q::None, B::None).legal(),
        route("POST", "/api/v1/push", &[], Q::None, B::Json(&[PUSH])).extra(&[
            r#"{"items":[{"queue":"hostile-push","payload":1},{"queue":"hostile-push"}]}"#,
            r#"{"items":[{"queue":"hostile-push","payload":1},{"payload":1}]}"#,
            r#"{"items":[{"queue":"hostile-push","partition":"","payload":1}]}"#,
        ]),
        route("GET", "/api/v1/pop", &[], Q::Pop, B::None),
        route("GET", "/api/v1/pop/queue/{queue}", &[Queue], Q::Pop, B::None).legal(),
        route("GET", "/api/v1/pop/queue/{queue}/partition/{partition}", &[Queue, Partition], Q::Pop, B::None)
            .legal(),
        route("POST", "/api/v1/ack", &[], Q::None, B::Json(&[ACK])),
        route("POST", "/api/v1/ack/batch", &[], Q::None, B::Json(&[ACK_BATCH])).extra(&[
            r#"{"acknowledgments":[{"transactionId":"m1","partitionId":"1"},{"transactionId":"m2"}]}"#,
        ]),
        route("POST", "/api/v1/lease/{lease}/extend", &[Lease], Q::None, B::Optional(&[EXTEND]))
            .extra(&[r#"{"seconds":0}"#, r#"{"seconds":-60}"#, r#"{"seconds":31536001}"#])
            .legal(),
        route("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/seek", &[Group, Queue], Q::None,
            B::Json(&[SEEK, SEEK_TIME]))
            .extra(&[
                r#"{}"#,
                r#"{"toEnd":false}"#,
                r#"{"toEnd":true,"timestamp":"2026-01-02T03:04:05Z"}"#,
                r#"{"toEnd":null,"timestamp":null}"#,
            ]),
        route("POST", "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
            &[Group, Queue, Partition], Q::None, B::Json(&[SEEK, SEEK_TIME]))
            .extra(&[r#"{}"#, r#"{"toEnd":false}"#, r#"{"toEnd":true,"timestamp":"2026-01-02T03:04:05Z"}"#]),
        route("DELETE", "/api/v1/consumer-groups/{group}", &[Group], Q::DeleteGroup, B::None).legal(),
        route("GET", "/api/v1/dlq", &[], Q::Dlq, B::None).legal(),
        route("POST", "/api/v1/transaction", &[], Q::None, B::Json(&[TXN_FULL, TXN_ACKS, TXN_KV, TXN_CHECK]))
            .extra(&[
                r#"{}"#,
                r#"{"operations":[]}"#,
                r#"{"operations":[],"kv":[],"timers":[],"positions":[],"requiredLeases":["x"]}"#,
                r#"{"operations":null,"kv":null}"#,
                r#"{"operations":[{"op":"put","ns":"a","key":"k","value":1,"forever":true}]}"#,
                r#"{"kv":[{"op":"getPrefix","ns":"a"}]}"#,
                r#"{"kv":[{"op":"put","ns":"a","key":"k","value":1,"ttlSeconds":5,"forever":true}]}"#,
                r#"{"kv":[{"op":"put","ns":"a","key":"k","value":1}]}"#,
                r#"{"kv":[{"op":"put","ns":"a","key":"k","value":1,"forever":true},{"op":"delete","ns":"a","key":"k"}]}"#,
                r#"{"timers":[{"op":"cancel","queue":"q","timerKey":"k"},{"op":"cancel","queue":"q","timerKey":"k"}]}"#,
                r#"{"timers":[{"op":"cancel","queue":"q","timerKey":"k","_secret":1}]}"#,
                r#"{"timers":[{"op":"cancel","queue":"q","timerKey":"k","producerSub":"me"}]}"#,
                r#"{"timers":[{"op":"schedule","queue":"q","timerKey":"k","payload":"aGk=","delayMs":1,"deliverAt":"2026-01-01T00:00:00Z"}]}"#,
                r#"{"operations":[{"type":"push","items":{"queue":"q"}}]}"#,
                r#"{"operations":[{"type":"push","partition":"p"}]}"#,
            ]),
        route("POST", "/api/v1/kv", &[], Q::None,
            B::Json(&[KV_STANDALONE_PUT, KV_STANDALONE_MANY, KV_STANDALONE_PREFIX]))
            .extra(&[
                r#"{"operations":[{"op":"getPrefix","ns":"a","limit":0}]}"#,
                r#"{"operations":[{"op":"getPrefix","ns":"a","limit":1001}]}"#,
                r#"{"operations":[{"op":"check","ns":"a","key":"k"}]}"#,
                r#"{"operations":[{"op":"incr","ns":"a","key":"k","delta":"1","forever":true}]}"#,
                r#"{"operations":[{"op":"incr","ns":"a","key":"k","delta":1}]}"#,
            ]),
        route("GET", "/api/v1/kv/{ns}/{key}", &[Ns, Key], Q::None, B::None).legal(),
        route("PUT", "/api/v1/kv/{ns}/{key}", &[Ns, Key], Q::None, B::Json(&[KV_PUT_ONE])).extra(&[
            r#"{"value":1,"ttlSeconds":5,"forever":true}"#,
            r#"{"value":1}"#,
            r#"{"value":1,"ttlSeconds":0}"#,
        ]),
        route("DELETE", "/api/v1/kv/{ns}/{key}", &[Ns, Key], Q::KvDelete, B::None).legal(),
        route("POST", "/api/v1/timers", &[], Q::None, B::Json(&[TIMERS_SCHEDULE, TIMERS_CANCEL])).extra(&[
            r#"{"operations":[{"op":"cancel","queue":"q","timerKey":"k"},{"op":"cancel","queue":"q","timerKey":"k"}]}"#,
            r#"{"operations":[{"op":"schedule","queue":"q","timerKey":"k","payload":"aGk=","delayMs":7776000001}]}"#,
            r#"{"operations":[{"op":"schedule","queue":"q","timerKey":"k","payload":"aGk=","delayMs":1,"attempts":0}]}"#,
            r#"{"operations":[{"op":"schedule","queue":"q","timerKey":"k","payload":"aGk="}]}"#,
        ]),
        route("GET", "/api/v1/timers/{queue}", &[Queue], Q::TimerList, B::None).legal(),
        route("GET", "/api/v1/timers/{queue}/{key}", &[Queue, TimerKey], Q::None, B::None).legal(),
        route("DELETE", "/api/v1/timers/{queue}/{key}", &[Queue, TimerKey], Q::TimerCancel, B::None).legal(),
        route("POST", "/api/v1/locks", &[], Q::None, B::Json(&[LOCKS_ACQUIRE, LOCKS_RELEASE])).extra(&[
            r#"{"operations":[{"op":"renew","name":"l","ttlSeconds":5}]}"#,
            r#"{"operations":[{"op":"acquire","name":"l"}]}"#,
            r#"{"operations":[{"op":"acquire","name":"l","ttlSeconds":5,"limit":1025}]}"#,
        ]),
    ]
}

/// The valid state's names.
struct Base {
    lease: String,
}

fn base_segment(p: P, base: &Base) -> String {
    match p {
        P::Queue => "hostile-base".into(),
        P::Partition => "p0".into(),
        P::Group => "g0".into(),
        P::Lease => base.lease.clone(),
        P::Ns => "hostile".into(),
        P::Key => "k0".into(),
        P::TimerKey => "t0".into(),
    }
}

/// Path segments no route may take: not UTF-8 once decoded, badly percent-encoded, or
/// empty; plus each parameter's own limits.
fn refused_segment(p: P) -> BoxedStrategy<Part> {
    #[rustfmt::skip]
    const COMMON: &[&str] = &[
        "%FF", "a%C3%28", "%ED%A0%80", "%C0%AF", "%F8%88%80%80%80", "%", "a%", "%z", "%zz", "%4",
        "100%", "%%41", "",
    ];
    const NS: &[&str] = &["Upper", "-lead", "a%20b", "%00", "%C3%A9", "a%2Fb", "a~b"];
    let named = |s: &str, what: &str| Part::new(s, Class::Refuse, format!("{what} {s:?}"));
    let long = |min: usize, max: usize, what: &'static str| {
        (min..max).prop_map(move |n| {
            Part::new("n".repeat(n), Class::Refuse, format!("a {n}-byte {what}"))
        })
    };
    let common = select(COMMON).prop_map(move |s| named(s, "path segment"));
    match p {
        P::Queue | P::Partition => prop_oneof![common, long(1025, 6_000, "name")].boxed(),
        P::TimerKey => prop_oneof![common, long(1025, 6_000, "timer key")].boxed(),
        P::Key => prop_oneof![
            common,
            select(&["%00", "a%00b"][..]).prop_map(move |s| named(s, "key")),
            long(513, 3_000, "key")
        ]
        .boxed(),
        P::Ns => prop_oneof![common, select(NS).prop_map(move |s| named(s, "namespace"))].boxed(),
        P::Group | P::Lease => common.boxed(),
    }
}

/// Odd but valid path segments (never one of the base state's names).
fn legal_segment(p: P) -> BoxedStrategy<Part> {
    const ODD: &[&str] = &["..", ".", "%2E%2E", "a%2Fb", "%25", "%2525zz", "~"];
    let (max, nul) = match p {
        P::Ns => {
            return select(&["a", "0.-_z", "legal-ns"][..])
                .prop_map(|s| Part::new(s, Class::Legal, format!("namespace {s:?}")))
                .boxed();
        }
        P::Key => (512, false),
        P::Queue | P::Partition | P::TimerKey => (1024, true),
        P::Group | P::Lease => (20_000, true),
    };
    prop_oneof![
        select(ODD).prop_map(str::to_string),
        hostile_text()
            .prop_filter_map("fits", move |s| fit(&s, 1, max, nul))
            .prop_map(|s| enc(&s)),
    ]
    .prop_map(|s| {
        let what = format!("legal segment {:?}", &s[..s.len().min(40)]);
        Part::new(s, Class::Legal, what)
    })
    .boxed()
}

/// Query parameters that no route may take: malformed percent-encoding or bytes that
/// are not UTF-8 once decoded.
fn refused_query_text() -> BoxedStrategy<Part> {
    const BAD: &[&str] = &[
        "consumerGroup=%FF",
        "x=%zz",
        "%=1",
        "k%C3%28=v",
        "namespace=a%",
        "task=%ED%A0%80",
    ];
    select(BAD)
        .prop_map(|s| Part::new(s, Class::Refuse, format!("query {s:?}")))
        .boxed()
}

/// Out-of-range values of the parameters a route validates.
fn refused_query_param(q: Q) -> Option<BoxedStrategy<Part>> {
    type Pairs = &'static [(&'static str, &'static [&'static str])];
    #[rustfmt::skip]
    let pairs: Pairs = match q {
        Q::None | Q::TimerCancel => return None,
        Q::Pop => &[
            ("batch", &["0", "-1", "10001", "abc", "1.5", "99999999999999999999", "%FF", "+1", "1e3", "%00"]),
            ("wait", &["maybe", "TRUE", "2", "yes", "%00"]),
            ("timeout", &["-1", "3600001", "x", "9223372036854775808"]),
            ("subscriptionMode", &["sometimes", "ALL", "New", "all%00"]),
            ("subscriptionFrom", &["yesterday", "2026-13-01T00:00:00Z", "%00"]),
            ("autoAck", &["2", "yes", "on"]),
            ("leaseSeconds", &["0", "-5", "31536001", "x", "-9223372036854775808"]),
            ("partitions", &["0", "1001", "x", "-1"]),
            ("autopilot", &["maybe", "2"]),
        ],
        Q::Dlq => &[
            ("limit", &["0", "1001", "-1", "x", "1e3", "99999999999999999999"]),
            ("offset", &["-1", "x", "9223372036854775808", "1.0"]),
        ],
        Q::DeleteGroup => &[("deleteMetadata", &["maybe", "2", "TRUE", "yes", "%00"])],
        Q::KvDelete => &[("expect", &["-1", "x", "1.5", "18446744073709551616", "1e400", "%00"])],
        Q::TimerList => &[("limit", &["0", "1001", "-3", "x", "1e2"])],
    };
    let s = select(pairs)
        .prop_flat_map(|(k, vals)| select(vals).prop_map(move |v| format!("{k}={v}")))
        .prop_map(|kv| Part::new(kv.clone(), Class::Refuse, format!("query {kv}")));
    Some(s.boxed())
}

/// Junk query parameters: unknown keys, duplicate keys, keys without values, hostile
/// (but well-encoded) text. They decorate a request; they never make it valid.
fn junk_query() -> BoxedStrategy<String> {
    const JUNK: &[&str] = &["flag", "=", "a=b=c", "x=1&x=2&x=", "+=+", "unknown=%00"];
    let pair = prop_oneof![
        hostile_text()
            .prop_map(|s| format!("consumerGroup={}", enc(&fit(&s, 0, 3000, true).unwrap()))),
        hostile_text().prop_map(|s| format!("{}=v", enc(&fit(&s, 0, 200, true).unwrap()))),
        select(JUNK).prop_map(str::to_string),
    ];
    proptest::collection::vec(pair, 0..4)
        .prop_map(|v| v.join("&"))
        .boxed()
}

#[rustfmt::skip]
const CONTENT_TYPES: &[Option<&str>] = &[
    Some("application/json"), Some("application/json"), Some("application/json; charset=utf-8"),
    None, Some("text/plain"), Some("application/x-www-form-urlencoded"),
    Some("multipart/form-data; boundary=x"), Some("application/json; charset=utf-16"),
    Some("application/octet-stream"),
];

/// Every poisoned body of a route's schemas: one field poisoned (with other string
/// fields decorated), or the body broken as a whole.
fn poisoned_bodies(
    schemas: &'static [&'static [Field]],
    extra: &'static [&'static str],
    enormous: usize,
) -> Vec<(String, BoxedStrategy<Part>)> {
    let mut out: Vec<(String, BoxedStrategy<Part>)> = Vec::new();
    for (si, schema) in schemas.iter().enumerate() {
        let template = sample(&Ty::Obj(schema));
        let mut paths = Vec::new();
        field_paths(schema, Vec::new(), &mut paths);
        let decor: Vec<(Vec<Step>, BoxedStrategy<J>)> = paths
            .iter()
            .filter_map(|(p, f)| decoration(*f).map(|d| (p.clone(), d)))
            .collect();
        let decor = Rc::new(decor);

        // One field out of its domain.
        let t = template.clone();
        let d = decor.clone();
        let field = select(paths.clone())
            .prop_flat_map(move |(path, f)| {
                let t = t.clone();
                let d = d.clone();
                let decorations: Vec<BoxedStrategy<Decoration>> = d
                    .iter()
                    .map(|(p, s)| {
                        let p = p.clone();
                        proptest::option::weighted(0.3, s.clone())
                            .prop_map(move |o| o.map(|j| (p.clone(), j)))
                            .boxed()
                    })
                    .collect();
                (poison_field(f), decorations).prop_map(move |(edit, decs)| {
                    let mut body = t.clone();
                    for (p, j) in decs.into_iter().flatten() {
                        apply(&mut body, &p, &Edit::Set(j));
                    }
                    apply(&mut body, &path, &edit);
                    let shown: Vec<String> = path
                        .iter()
                        .map(|s| match s {
                            Step::Key(k) => k.to_string(),
                            Step::Idx => "[0]".into(),
                        })
                        .collect();
                    let e = match &edit {
                        Edit::Set(j) => format!("set to {}", short(&j.bytes())),
                        Edit::Remove => "removed".into(),
                        Edit::Dup(_) => "given twice".into(),
                    };
                    Part::new(
                        body.bytes(),
                        Class::Refuse,
                        format!("{} {e}", shown.join(".")),
                    )
                })
            })
            .boxed();
        out.push((format!("schema {si}: a field out of its domain"), field));

        // An array holding many valid elements and, last, one poisoned element.
        let arrays: Vec<(Vec<Step>, Field)> = paths
            .iter()
            .filter(|(_, f)| matches!(f.ty, Ty::Arr(_)))
            .cloned()
            .collect();
        if !arrays.is_empty() {
            let t = template.clone();
            let huge = select(arrays)
                .prop_flat_map(move |(path, f)| {
                    let Ty::Arr(elem) = f.ty else { unreachable!() };
                    let t = t.clone();
                    let bad = match elem {
                        Ty::Obj(fields) => {
                            let fields: Vec<Field> = fields.to_vec();
                            select(fields)
                                .prop_flat_map(move |ef| {
                                    poison_field(ef).prop_map(move |edit| {
                                        let mut e = sample(elem);
                                        apply(&mut e, &[Step::Key(ef.name)], &edit);
                                        e
                                    })
                                })
                                .boxed()
                        }
                        other => out_of_domain(other),
                    };
                    // The sweep sends one enormous array per route (its first schema).
                    let n = if enormous > 0 && si == 0 {
                        Just(enormous).boxed()
                    } else {
                        (10usize..3_000).boxed()
                    };
                    (bad, n).prop_map(move |(bad, n)| {
                        let el = sample(elem).bytes();
                        let mut arr = Vec::with_capacity((el.len() + 1) * (n + 1));
                        arr.push(b'[');
                        for _ in 0..n {
                            arr.extend_from_slice(&el);
                            arr.push(b',');
                        }
                        arr.extend_from_slice(&bad.bytes());
                        arr.push(b']');
                        let mut body = t.clone();
                        apply(&mut body, &path, &Edit::Set(J::Raw(arr)));
                        Part::new(
                            body.bytes(),
                            Class::Refuse,
                            format!("{} valid elements then a bad one in {:?}", n, path.last()),
                        )
                    })
                })
                .boxed();
            out.push((
                format!("schema {si}: an enormous array ending in a bad element"),
                huge,
            ));
        }
    }
    let t = sample(&Ty::Obj(schemas[0])).bytes();
    let refuse = |b: Vec<u8>, what: String| Part::new(b, Class::Refuse, what);
    let mut add = |name: &str, s: BoxedStrategy<Part>| out.push((name.to_string(), s));

    let tc = t.clone();
    add(
        "truncated",
        any::<prop::sample::Index>()
            .prop_map(move |at| {
                let cut = 1 + at.index(tc.len() - 1);
                refuse(tc[..cut].to_vec(), format!("cut after {cut} bytes"))
            })
            .boxed(),
    );
    let tc = t.clone();
    add(
        "trailing garbage",
        select(&["}", "x", "{}", ",", "\0", " 1", "]", "\u{feff}"][..])
            .prop_map(move |g| {
                refuse(
                    [&tc[..], g.as_bytes()].concat(),
                    format!("followed by {g:?}"),
                )
            })
            .boxed(),
    );
    let not_object = vec![
        b"[]".to_vec(),
        b"null".to_vec(),
        b"42".to_vec(),
        b"\"{}\"".to_vec(),
        [&b"["[..], &t, b"]"].concat(),
        // A byte-order mark, then UTF-16.
        [&b"\xef\xbb\xbf"[..], &t].concat(),
        t.iter().flat_map(|&c| [c, 0]).collect(),
    ];
    add(
        "not an object",
        select(not_object)
            .prop_map(move |b| refuse(b, "not one JSON object".into()))
            .boxed(),
    );
    add(
        "deep nesting",
        prop_oneof![
            (129usize..10_001).prop_map(|n| format!("{}1{}", "{\"a\":".repeat(n), "}".repeat(n))),
            (1usize..10_001).prop_map(|n| format!("{{\"a\":{}", "[".repeat(n))),
            (129usize..10_001).prop_map(|n| format!(
                "{{\"zz\":{}{}}}",
                "[".repeat(n),
                "]".repeat(n)
            )),
        ]
        .prop_map(move |s| {
            let what = format!("{} bytes of nesting", s.len());
            refuse(s.into_bytes(), what)
        })
        .boxed(),
    );
    let tc = t.clone();
    add(
        "an unknown field holding JSON no route takes",
        exotic()
            .prop_map(move |j| {
                let b = [&b"{\"zz\":"[..], &j.bytes(), b",", &tc[1..]].concat();
                refuse(b, format!("an extra field set to {}", short(&j.bytes())))
            })
            .boxed(),
    );
    // Inside a string: after an opening quote (the samples hold no escaped quotes, so
    // every other quote opens a string).
    let opening: Vec<usize> = t
        .iter()
        .enumerate()
        .filter(|(_, c)| **c == b'"')
        .map(|(i, _)| i + 1)
        .step_by(2)
        .collect();
    const BAD_BYTES: &[&[u8]] = &[
        b"\xff",
        b"\xc0\x80",
        b"\xed\xa0\x80",
        b"\xe2\x82",
        b"\x00",
        b"\x1f",
        b"\n",
    ];
    let tc = t.clone();
    add(
        "bytes that are not UTF-8 or are raw control characters",
        (select(BAD_BYTES), select(opening))
            .prop_map(move |(bad, i)| {
                let b = [&tc[..i], bad, &tc[i..]].concat();
                refuse(b, format!("{bad:?} inserted at byte {i}"))
            })
            .boxed(),
    );
    let s = String::from_utf8(t.clone()).unwrap();
    let extensions = vec![
        ("a trailing comma", format!("{},}}", &s[..s.len() - 1])),
        ("a comment", format!("/* hi */{s}")),
        ("single quotes", s.replacen('"', "'", 2)),
    ];
    add(
        "JSON extensions",
        select(extensions)
            .prop_map(move |(what, b)| refuse(b.into_bytes(), what.into()))
            .boxed(),
    );
    add(
        "random bytes",
        proptest::collection::vec(any::<u8>(), 0..600)
            .prop_map(move |b| refuse(never_valid(b), "random bytes".into()))
            .boxed(),
    );
    if !extra.is_empty() {
        add(
            "a rule across fields",
            select(extra)
                .prop_map(move |s| refuse(s.into(), format!("breaks a rule across fields: {s}")))
                .boxed(),
        );
    }
    out
}

fn short(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(60)]).to_string();
    if b.len() > 60 {
        format!("{s}… ({} bytes)", b.len())
    } else {
        s
    }
}

/// Random bytes made invalid by construction: on the rare draw that is a JSON object
/// (or blank, which the lease extension takes as no body), a NUL is appended.
fn never_valid(mut b: Vec<u8>) -> Vec<u8> {
    let blank = b.iter().all(u8::is_ascii_whitespace);
    if blank || serde_json::from_slice::<Value>(&b).is_ok_and(|v| v.is_object()) {
        b.push(0);
    }
    b
}

/// Builds the target from the pattern and the segments.
fn target(pattern: &str, segs: &[String], query: &str) -> String {
    let mut out = String::new();
    let mut rest = pattern;
    let mut i = 0;
    while let Some(open) = rest.find('{') {
        let close = rest.find('}').unwrap();
        out.push_str(&rest[..open]);
        out.push_str(&segs[i]);
        i += 1;
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    if !query.is_empty() {
        out.push('?');
        out.push_str(query);
    }
    out
}

/// Combines the parts of a request; its class is its worst part's.
fn case(r: &Route, segs: Vec<Part>, query: Part, body: Part, ctype: Option<&'static str>) -> Case {
    let mut class = Class::Valid;
    let mut why = Vec::new();
    for p in segs.iter().chain([&query, &body]) {
        class = class.max(p.class);
        if p.class != Class::Valid && !p.what.is_empty() {
            why.push(p.what.clone());
        }
    }
    let segs: Vec<String> = segs
        .into_iter()
        .map(|p| String::from_utf8(p.text).unwrap())
        .collect();
    let query = String::from_utf8(query.text).unwrap();
    Case {
        method: r.method,
        target: target(r.pattern, &segs, &query),
        ctype,
        body: body.text,
        class,
        what: why.join("; "),
    }
}

/// Every category of hostile request for a route, by name. `enormous`: the element
/// count of the enormous arrays (0: a random, smaller one).
fn categories(
    r: &'static Route,
    base: &Base,
    enormous: usize,
) -> Vec<(String, BoxedStrategy<Case>)> {
    let mut out: Vec<(String, BoxedStrategy<Case>)> = Vec::new();
    let valid_segs: Vec<Part> = r
        .params
        .iter()
        .map(|p| Part::new(base_segment(*p, base), Class::Valid, ""))
        .collect();
    // Each parameter valid or odd-but-legal.
    let loose_segs = {
        let parts: Vec<BoxedStrategy<Part>> = r
            .params
            .iter()
            .map(|p| {
                let valid = Part::new(base_segment(*p, base), Class::Valid, "");
                prop_oneof![3 => Just(valid), 1 => legal_segment(*p)].boxed()
            })
            .collect();
        parts
    };
    let junk = junk_query()
        .prop_map(|q| Part::new(q, Class::Valid, ""))
        .boxed();
    let small_junk_body = prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..256),
        exotic().prop_map(|j| j.bytes()),
    ]
    .prop_filter("small", |b| b.len() <= 4096)
    .prop_map(|b| Part::new(b, Class::Valid, ""))
    .boxed();
    let ctype = select(CONTENT_TYPES);

    // Body poisons, with valid or legal path parameters.
    let (schemas, optional) = match r.body {
        B::Json(s) => (Some(s), false),
        B::Optional(s) => (Some(s), true),
        B::None => (None, false),
    };
    if let Some(schemas) = schemas {
        for (name, bodies) in poisoned_bodies(schemas, r.extra, enormous) {
            let segs = loose_segs.clone();
            let s = (segs, junk.clone(), bodies, ctype.clone())
                .prop_map(move |(segs, q, b, ct)| case(r, segs, q, b, ct))
                .boxed();
            out.push((format!("body: {name}"), s));
        }
        if !optional {
            let segs = loose_segs.clone();
            out.push((
                "body: empty or blank".into(),
                (
                    segs,
                    prop_oneof![Just(""), Just(" "), Just("\r\n\t ")],
                    ctype.clone(),
                )
                    .prop_map(move |(segs, b, ct)| {
                        let q = Part::new("", Class::Valid, "");
                        case(r, segs, q, Part::new(b, Class::Refuse, "an empty body"), ct)
                    })
                    .boxed(),
            ));
        }
    }

    // Path poisons: one parameter refused, the others valid or legal.
    for (i, p) in r.params.iter().enumerate() {
        let mut segs = loose_segs.clone();
        segs[i] = refused_segment(*p);
        let body = match schemas {
            Some(s) => prop_oneof![
                Just(Part::new(sample(&Ty::Obj(s[0])).bytes(), Class::Valid, "")),
                small_junk_body.clone()
            ]
            .boxed(),
            None => small_junk_body.clone(),
        };
        let s = (segs, junk.clone(), body, ctype.clone())
            .prop_map(move |(segs, q, b, ct)| case(r, segs, q, b, ct))
            .boxed();
        out.push((format!("path: a bad {p:?}"), s));
    }

    // Query poisons, after junk (the last value of a key wins).
    if r.query != Q::None {
        let mut poisons = vec![refused_query_text()];
        poisons.extend(refused_query_param(r.query));
        let poison = Union::new(poisons);
        let segs = loose_segs.clone();
        let s = (
            segs,
            junk_query(),
            poison,
            small_junk_body.clone(),
            ctype.clone(),
        )
            .prop_map(move |(segs, j, p, b, ct)| {
                let q = if j.is_empty() {
                    p
                } else {
                    Part {
                        text: format!("{j}&{}", String::from_utf8(p.text).unwrap()).into_bytes(),
                        ..p
                    }
                };
                case(r, segs, q, b, ct)
            })
            .boxed();
        out.push(("query: a bad parameter".into(), s));
    }

    // Legal requests: odd names, no query (so no long-poll), junk bodies the route
    // ignores. Only where that touches nothing of the base state.
    if r.legal {
        let segs: Vec<BoxedStrategy<Part>> = r
            .params
            .iter()
            .enumerate()
            .map(|(i, p)| {
                // The first parameter is odd, so no request names the base state.
                if i == 0 {
                    legal_segment(*p)
                } else {
                    prop_oneof![Just(valid_segs[i].clone()), legal_segment(*p)].boxed()
                }
            })
            .collect();
        let query = match r.query {
            Q::None => junk.clone(),
            Q::Dlq => prop_oneof![
                Just("queue=hostile-dlq"),
                Just("limit=1000&offset=0"),
                Just("consumerGroup=%00")
            ]
            .prop_map(|q| Part::new(q, Class::Valid, ""))
            .boxed(),
            _ => Just(Part::new("", Class::Valid, "")).boxed(),
        };
        let body = if optional {
            prop_oneof![Just(""), Just("{}"), Just("{\"seconds\":null}"), Just("  ")]
                .prop_map(|b| Part::new(b, Class::Valid, ""))
                .boxed()
        } else {
            small_junk_body.clone()
        };
        let s = (segs, query, body, ctype.clone())
            .prop_map(move |(segs, q, b, ct)| {
                let mut c = case(r, segs, q, b, ct);
                c.class = c.class.max(Class::Legal);
                c
            })
            .boxed();
        out.push(("legal: odd names".into(), s));
    }
    out
}

/// Requests that reach no route: unknown paths, wrong methods, odd methods.
fn unrouted() -> BoxedStrategy<Case> {
    #[rustfmt::skip]
    const PATHS: &[&str] = &[
        "/api/v1/nothing-here", "/api/v2/push", "/API/V1/PUSH", "/api/v1/push/", "//api/v1/push",
        "/api/v1/pop/queue/", "/api/v1/kv/ns/k/extra", "/api/v1/./push", "/api/v1/../v1/push",
        "/%2e%2e/%2e%2e/etc/passwd", "/api/v1/push%00", "/api/v1/%FF", "/health/..", "/nope", "*",
    ];
    #[rustfmt::skip]
    const WRONG: &[(&str, &str)] = &[
        ("GET", "/api/v1/push"), ("PUT", "/api/v1/transaction"), ("DELETE", "/api/v1/configure"),
        ("PATCH", "/api/v1/kv"), ("POST", "/health"), ("POST", "/api/v1/dlq"),
        ("GET", "/api/v1/ack/batch"), ("PUT", "/api/v1/timers/q"), ("POST", "/api/v1/kv/ns/k"),
        ("OPTIONS", "/api/v1/push"), ("TRACE", "/api/v1/push"), ("CONNECT", "/api/v1/push"),
        ("FOO", "/api/v1/push"),
    ];
    let path = prop_oneof![
        select(PATHS).prop_map(str::to_string),
        hostile_text().prop_map(|s| format!("/api/v1/{}", enc(&fit(&s, 0, 5000, true).unwrap()))),
    ];
    let no_route = (select(&["GET", "POST", "DELETE", "PUT", "PATCH"][..]), path)
        .prop_map(|(m, p)| (m, format!("no route {m} {}", &p[..p.len().min(60)]), p));
    let wrong =
        select(WRONG).prop_map(|(m, p)| (m, format!("{m} is not a method of {p}"), p.to_string()));
    let body = prop_oneof![
        Just(Vec::new()),
        proptest::collection::vec(any::<u8>(), 0..256)
    ];
    (prop_oneof![no_route, wrong], body)
        .prop_map(|((method, what, target), body)| Case {
            method,
            target,
            ctype: Some("application/json"),
            body,
            class: Class::Refuse,
            what,
        })
        .boxed()
}

// ---------------------------------------------------------------------------------
// The run.
// ---------------------------------------------------------------------------------

/// Panics anywhere in the process (handlers, the writer thread, the test itself).
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

#[derive(Default, Clone, Copy)]
struct Tally {
    tried: u64,
    must_refuse: u64,
    c4xx: u64,
    c2xx: u64,
    c5xx: u64,
    panics: u64,
    bytes: u64,
    secs: f64,
}

struct Run<'a> {
    broker: &'a MockBroker,
    tally: BTreeMap<String, Tally>,
    failures: Vec<String>,
}

impl Run<'_> {
    /// Sends one request and judges the answer.
    fn check(&mut self, label: &str, c: &Case) -> Result<(), String> {
        let commits = self.broker.stats().commits;
        let panics = PANICS.load(Ordering::SeqCst);
        let t0 = Instant::now();
        let a = exchange(self.broker.addr(), c.method, &c.target, c.ctype, &c.body);
        let secs = t0.elapsed().as_secs_f64();
        let panicked = PANICS.load(Ordering::SeqCst) - panics;
        let wrote = self.broker.stats().commits - commits;
        let t = self.tally.entry(label.to_string()).or_default();
        t.tried += 1;
        t.bytes += c.body.len() as u64;
        t.secs += secs;
        t.must_refuse += u64::from(c.class == Class::Refuse);
        t.panics += panicked;
        match a.status {
            200..=299 => t.c2xx += 1,
            400..=499 => t.c4xx += 1,
            500..=599 => t.c5xx += 1,
            _ => {}
        }
        let text = String::from_utf8_lossy(&a.body[..a.body.len().min(300)]).to_string();
        if panicked > 0 {
            return Err(format!(
                "{panicked} panic(s), answered {}: {text}",
                a.status
            ));
        }
        if a.status >= 500 {
            return Err(format!("answered {}: {text}", a.status));
        }
        if (400..500).contains(&a.status) {
            let body: Value = serde_json::from_slice(&a.body).map_err(|e| {
                format!(
                    "answered {} with a body that is not JSON ({e}): {text}",
                    a.status
                )
            })?;
            if body["error"].as_str().is_none_or(str::is_empty) || !body["code"].is_string() {
                return Err(format!(
                    "answered {} without {{error, code}}: {text}",
                    a.status
                ));
            }
            if wrote > 0 {
                return Err(format!("answered {} but made {wrote} commit(s)", a.status));
            }
            return Ok(());
        }
        if c.class == Class::Refuse {
            return Err(format!(
                "accepted: answered {} ({} commits): {text}",
                a.status, wrote
            ));
        }
        if !(200..300).contains(&a.status) {
            return Err(format!("answered {}: {text}", a.status));
        }
        // A legal request: its answer is JSON (or nothing, on 204).
        if a.status != 204 {
            serde_json::from_slice::<serde::de::IgnoredAny>(&a.body).map_err(|e| {
                format!(
                    "answered {} with a body that is not JSON ({e}): {text}",
                    a.status
                )
            })?;
        }
        Ok(())
    }

    /// Runs `strategy` for `cases` cases; a failure is shrunk and kept.
    fn property(&mut self, label: &str, strategy: &BoxedStrategy<Case>, cases: u32, seed: u64) {
        let config = Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 64,
            rng_seed: RngSeed::Fixed(seed),
            ..Config::default()
        };
        let mut runner = TestRunner::new(config);
        let me = std::cell::RefCell::new(&mut *self);
        let out = runner.run(strategy, |c| {
            me.borrow_mut()
                .check(label, &c)
                .map_err(|e| TestCaseError::fail(format!("{e}\n    request: {}", c.describe())))
        });
        if let Err(e) = out {
            self.failures.push(format!("{label}: {e}"));
        }
    }

    /// Sends one case of each category (a deterministic sweep).
    fn sweep(&mut self, label: &str, named: &[(String, BoxedStrategy<Case>)], seed: u64) {
        let mut runner = TestRunner::new(Config {
            rng_seed: RngSeed::Fixed(seed),
            ..Config::default()
        });
        for (name, s) in named {
            let c = s.new_tree(&mut runner).expect("a case").current();
            if let Err(e) = self.check(label, &c) {
                self.failures.push(format!(
                    "{label} ({name}): {e}\n    request: {}",
                    c.describe()
                ));
            }
        }
    }
}

/// A fingerprint of the valid state, to show that no request touched it.
fn fingerprint(b: &MockBroker) -> String {
    let i = b.inspect();
    format!(
        "{:?}\n{:?}\n{:?}\n{:?}\n{:?}\n{:?}",
        i.messages("hostile-base", "p0").unwrap(),
        i.cursor("hostile-base", "p0", "g0").unwrap(),
        i.kv_row("hostile", "k0")
            .unwrap()
            .map(|r| serde_json::to_string(&r).unwrap()),
        i.timers("hostile-base").unwrap(),
        i.kv_row("queen-locks", "l0#0")
            .unwrap()
            .map(|r| serde_json::to_string(&r).unwrap()),
        i.queues().unwrap(),
    )
}

fn ok(addr: SocketAddr, method: &str, path: &str, body: Value) -> Value {
    let a = exchange(
        addr,
        method,
        path,
        Some("application/json"),
        body.to_string().as_bytes(),
    );
    let text = String::from_utf8_lossy(&a.body).to_string();
    assert!(
        (200..300).contains(&a.status),
        "{method} {path}: {} {text}",
        a.status
    );
    if a.status == 204 {
        Value::Null
    } else {
        serde_json::from_str(&text).unwrap()
    }
}

/// A dead letter whose payload is nested 1,000 deep. Pushes refuse such payloads; one
/// stored by another way (an older broker, a timer) must still be listed.
fn dead_letter_too_deep(rt: &tokio::runtime::Runtime, broker: &MockBroker) {
    let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
    let msg = NewMessage {
        queue: "hostile-dlq".into(),
        partition: "Default".into(),
        payload: RawValue::from_string(deep).unwrap(),
        transaction_id: Some("deep-1".into()),
        trace_id: None,
        producer_sub: None,
        message_id: None,
    };
    let pushed = rt
        .block_on(broker.engine().push(DEFAULT_TENANT, vec![msg]))
        .unwrap();
    let pid = pushed[0].1.partition_id.to_string();
    let acked = ok(
        broker.addr(),
        "POST",
        "/api/v1/ack",
        json!({"transactionId": "deep-1", "partitionId": pid, "status": "dlq"}),
    );
    assert_eq!(acked[0]["dlq"], true, "{acked}");
}

/// The valid state every route refuses against.
fn set_up(rt: &tokio::runtime::Runtime, broker: &MockBroker) -> Base {
    let a = broker.addr();
    ok(
        a,
        "POST",
        "/api/v1/configure",
        json!({"queue": "hostile-base", "namespace": "hns", "task": "ht", "options": {"leaseTime": 3600}}),
    );
    ok(
        a,
        "POST",
        "/api/v1/push",
        json!({"items": [
            {"queue": "hostile-base", "partition": "p0", "transactionId": "m1", "payload": {"n": 1}},
            {"queue": "hostile-base", "partition": "p0", "transactionId": "m2", "payload": {"n": 2}},
        ]}),
    );
    let popped = ok(
        a,
        "GET",
        "/api/v1/pop/queue/hostile-base/partition/p0?batch=1&consumerGroup=g0&subscriptionMode=all",
        json!(null),
    );
    let lease = popped["leaseId"].as_str().expect("a lease").to_string();
    ok(
        a,
        "POST",
        "/api/v1/kv",
        json!({"operations": [{"op": "put", "ns": "hostile", "key": "k0", "value": {"n": 1}, "forever": true}]}),
    );
    ok(
        a,
        "POST",
        "/api/v1/timers",
        json!({"operations": [{"op": "schedule", "queue": "hostile-base", "timerKey": "t0", "payload": "aGk=", "delayMs": 86_400_000}]}),
    );
    let lock = ok(
        a,
        "POST",
        "/api/v1/locks",
        json!({"operations": [{"op": "acquire", "name": "l0", "ttlSeconds": 3600}]}),
    );
    assert_eq!(lock["results"][0]["acquired"], true, "{lock}");
    dead_letter_too_deep(rt, broker);
    Base { lease }
}

fn cases_per_route() -> u32 {
    std::env::var("QUEEN_HOSTILE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

#[test]
fn hostile_requests_are_refused_with_a_4xx_and_write_nothing() {
    count_panics();
    let started = Instant::now();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let broker = rt
        .block_on(
            MockBroker::builder()
                .in_memory()
                .clock(ManualClock::new())
                .start(),
        )
        .expect("broker starts");
    let base = set_up(&rt, &broker);
    let before = fingerprint(&broker);
    let seed = std::env::var("QUEEN_HOSTILE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
        });
    let cases = cases_per_route();
    println!(
        "hostile input: seed {seed} (QUEEN_HOSTILE_SEED), {cases} generated cases per route (QUEEN_HOSTILE_CASES)"
    );

    let routes: &'static [Route] = Vec::leak(routes());
    let mut run = Run {
        broker: &broker,
        tally: BTreeMap::new(),
        failures: Vec::new(),
    };
    for (i, r) in routes.iter().enumerate() {
        let label = format!("{} {}", r.method, r.pattern);
        let seed = seed.wrapping_add(i as u64);
        // Every category once, with 100,000-element arrays; then random cases.
        run.sweep(&label, &categories(r, &base, 100_000), seed);
        let named = categories(r, &base, 0);
        let all = Union::new(named.into_iter().map(|(_, s)| s)).boxed();
        run.property(&label, &all, cases, seed);
    }
    run.property("(no route, wrong method)", &unrouted(), cases, seed);

    let after = fingerprint(&broker);
    let mut total = Tally::default();
    let row = |label: &str, t: &Tally| {
        println!(
            "{label:<78} {:>6} {:>7} {:>6} {:>6} {:>4} {:>6} {:>9.1} {:>6.1}",
            t.tried,
            t.must_refuse,
            t.c4xx,
            t.c2xx,
            t.c5xx,
            t.panics,
            t.bytes as f64 / (1024.0 * 1024.0),
            t.secs
        )
    };
    println!();
    println!(
        "{:<78} {:>6} {:>7} {:>6} {:>6} {:>4} {:>6} {:>9} {:>6}",
        "route", "tried", "poison", "4xx", "2xx", "5xx", "panics", "body MiB", "secs"
    );
    for (label, t) in &run.tally {
        row(label, t);
        total.tried += t.tried;
        total.must_refuse += t.must_refuse;
        total.c4xx += t.c4xx;
        total.c2xx += t.c2xx;
        total.c5xx += t.c5xx;
        total.panics += t.panics;
        total.bytes += t.bytes;
        total.secs += t.secs;
    }
    row("total", &total);
    println!("({:.1} s)", started.elapsed().as_secs_f64());
    for f in &run.failures {
        println!("\nFAILED {f}");
    }
    assert!(
        run.failures.is_empty(),
        "{} route(s) mishandled hostile input (see above)",
        run.failures.len()
    );
    assert_eq!(total.c5xx, 0);
    assert_eq!(total.panics, 0);
    assert_eq!(before, after, "the valid state changed");
    // Every route was exercised.
    assert_eq!(run.tally.len(), routes.len() + 1);
    rt.block_on(broker.shutdown());
}

/// The fuzz targets' seeds (`fuzz/seeds/`) through the same parsers, so the code the
/// fuzzer drives is built and run by every `cargo test`.
#[test]
fn fuzz_seeds_parse_without_panicking() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let mut seen = 0;
    for target in ["transaction_body", "push_body"] {
        let mut files: Vec<_> = std::fs::read_dir(dir.join(target))
            .unwrap_or_else(|e| panic!("{target} seeds: {e}"))
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            let status = match target {
                "transaction_body" => queen_mock_broker::http::parse_transaction(&bytes)
                    .err()
                    .map(|e| e.status),
                _ => queen_mock_broker::http::parse_push(&bytes)
                    .err()
                    .map(|e| e.status),
            };
            if let Some(s) = status {
                assert!(s.is_client_error(), "{}: {s}", f.display());
            }
            let valid = f
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("valid");
            assert_eq!(status.is_none(), valid, "{}: {status:?}", f.display());
            seen += 1;
        }
    }
    assert!(seen >= 10, "only {seen} seeds");
}
