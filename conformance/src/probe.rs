//! Before a run: is the broker up ([`wait_ready`]), and what is it ([`probe`], for
//! `--profile auto`)?
//!
//! The probe answers two questions. **Which generation** of Queen the broker speaks:
//! two wire traits tell Queen v0 (the PostgreSQL broker of
//! `transaction-v0-postgres.md`) from Queen 2 ([`Trait`]); when every trait read points
//! to v0, `auto` judges the broker by the `v0` profile, its own page. **Which
//! capabilities** a Queen 2 broker has ([`Finding`]): `auto` runs the cases of those it
//! has. Each answer is read the same way ([`Reading`]): a 2xx must succeed (a 2xx whose
//! body is an error is no support), and a 4xx shows that a route exists unless it is
//! the broker's answer for a route it lacks, which the probe learns by asking for a
//! route no broker has; so a route is never counted absent because its error body
//! lacks a field.
//!
//! The probe sends harmless requests only: reads of names no one uses (a KV key, a
//! timer, a lock, an ephemeral queue's depth, a lease no one holds, a route no broker
//! has), and on a queue and group of its own (`cf-…-probe-…`) two pushed messages, a
//! pop, two acks, a pop of a partition it never pushed to, a position, a read by
//! offset, a stream query registered over it (no route deletes one: it stays, as the
//! `surface.streams.*` cases' queries do), the group forgotten on that queue and a
//! refused retry by hand of a message that is no dead letter, then deletes that queue.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::case::{Capability, Failure};
use crate::ctx::{Ctx, Resp};
use crate::profile::{self, Profile};

/// Why a run could not start: the broker is not there, or the URL is not a broker's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotReady(pub String);

impl std::fmt::Display for NotReady {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotReady {}

/// Polls `GET {url}/health` every 250 ms until it answers 200, for at most `within`
/// (at least one attempt); answers the health body. A URL that does not parse, or that
/// never answers 200 (nothing listens, or it is not a Queen broker), is [`NotReady`].
pub async fn wait_ready(
    url: &str,
    token: Option<&str>,
    within: Duration,
) -> Result<Value, NotReady> {
    let base = url.trim_end_matches('/');
    let parsed =
        reqwest::Url::parse(base).map_err(|e| NotReady(format!("{url:?} is not a URL: {e}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(NotReady(format!(
            "{url:?} is not an http:// or https:// URL"
        )));
    }
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| NotReady(format!("no HTTP client: {e}")))?;
    let deadline = Instant::now() + within;
    let mut attempts = 0u32;
    loop {
        attempts += 1;
        let mut req = http.get(format!("{base}/health"));
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        let last = match req.send().await {
            Ok(r) if r.status().as_u16() == 200 => {
                return Ok(r.json::<Value>().await.unwrap_or(Value::Null));
            }
            Ok(r) => format!("GET /health answered HTTP {}", r.status().as_u16()),
            Err(e) => format!("GET /health failed: {}", error_chain(&e)),
        };
        if Instant::now() >= deadline {
            return Err(NotReady(format!(
                "the broker at {base} is not ready: {last} ({attempts} attempt{} in {:.1} s)",
                if attempts == 1 { "" } else { "s" },
                within.as_secs_f64()
            )));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        s.push_str(": ");
        s.push_str(&inner.to_string());
        src = inner.source();
    }
    s
}

/// Whether a broker has a capability, as the probe found.
///
/// Absence needs a clear sign: the broker's answer for a route it lacks,
/// or the answer Queen v0 and queen-engine 1.3 give a transaction with only
/// `positions` (they read it as a body without `operations`). Any other refusal, an
/// error in a 2xx or a server error is no such sign: a broker that starts refusing
/// `positions` with a 400 has the capability and breaks it, and its cases run and
/// fail, where reading any 4xx as absence turned a regression into skips and exit 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[non_exhaustive]
pub enum Verdict {
    /// Its routes answered as the capability's routes do.
    Present,
    /// They did not, with a clear sign of absence (see the evidence): its cases skip.
    Absent,
    /// They did not answer as the capability's routes do, but gave no clear sign of
    /// absence either (a refusal, an error): the broker is taken to have it, and its
    /// cases run and judge it.
    Unclear,
}

/// How the probe read one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Reading {
    /// A 2xx whose body is no error.
    Success,
    /// A 2xx whose body is an error (a non-null `error`, or `success: false`): the
    /// route is there in name only, as Queen v0's `POST /streams/v1/state/get` answers
    /// a query id it cannot read with 200 and a database error.
    ErrorIn2xx,
    /// A 4xx from the route itself: it exists, and refused this request. Whatever the
    /// error body holds or lacks (queen-engine 1.3 answers a retry by hand of a live
    /// message 404 without a `code`).
    Refused,
    /// The broker's answer for a route it lacks: a 404, 405 or 501 whose body is not
    /// JSON (Queen v0's web page), says `no_such_route`, or is the answer to the probe's
    /// request for a route no broker has.
    NoRoute,
    /// A 5xx, or a status no route answers with.
    ServerError,
    /// No HTTP answer at all.
    NoAnswer,
}

impl Reading {
    fn describe(self) -> &'static str {
        match self {
            Reading::Success => "success",
            Reading::ErrorIn2xx => "an error in a 2xx",
            Reading::Refused => "refused by the route",
            Reading::NoRoute => "no such route",
            Reading::ServerError => "a server error",
            Reading::NoAnswer => "no answer",
        }
    }
}

/// One request of the probe and the broker's answer.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Evidence {
    /// The request, as a route and what it asked (`POST /api/v1/kv get`).
    pub request: &'static str,
    /// The answer's status; `None` when there was no answer.
    pub status: Option<u16>,
    /// The answer's first 120 characters (or the transport error).
    pub answer: String,
    /// How the probe read it.
    pub reading: Reading,
}

impl std::fmt::Display for Evidence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.status {
            Some(s) => write!(
                f,
                "{}: HTTP {s} {} ({})",
                self.request,
                self.answer,
                self.reading.describe()
            ),
            None => write!(f, "{}: {} (no answer)", self.request, self.answer),
        }
    }
}

/// One capability's finding.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Finding {
    /// The capability.
    pub capability: Capability,
    /// Whether the broker has it.
    pub verdict: Verdict,
    /// The requests that showed it, with their answers.
    pub evidence: Vec<Evidence>,
}

/// A generation of Queen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Generation {
    /// Queen v0, the PostgreSQL broker (`transaction-v0-postgres.md`): judged by the
    /// `v0` profile.
    QueenV0,
    /// Queen 2 (`transaction.md`, `wire.md`): judged by the capabilities it has.
    Queen2,
}

impl Generation {
    fn name(self) -> &'static str {
        match self {
            Generation::QueenV0 => "Queen v0",
            Generation::Queen2 => "Queen 2",
        }
    }
}

/// A trait of the wire on which the two generations differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Trait {
    /// A pop that finds nothing: Queen 2 answers 204 (`wire.md` 4), Queen v0 200 with
    /// `messages: []` and an `error` (`no_available_partition`, `partition_not_found`).
    EmptyPop,
    /// A lease extension: Queen 2 answers an object (`wire.md` 6), Queen v0 an array of
    /// one `{index, leaseId, success, expiresAt, error}`.
    LeaseExtension,
}

impl Trait {
    fn describe(self) -> &'static str {
        match self {
            Trait::EmptyPop => "an empty pop (Queen 2: 204; Queen v0: 200 with messages: [])",
            Trait::LeaseExtension => {
                "a lease extension (Queen 2: an object; Queen v0: an array of one)"
            }
        }
    }
}

/// What one trait showed.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sign {
    /// The trait.
    pub tells: Trait,
    /// The generation its answer belongs to; `None` when it is neither's.
    pub points_to: Option<Generation>,
    /// The request and the answer.
    pub evidence: Evidence,
}

/// How the probe settled the generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub enum Basis {
    /// Every sign that pointed anywhere pointed to this generation.
    Agreed,
    /// Signs pointed to both: judged as Queen 2, by its capabilities, which runs more
    /// cases than `v0` and reports each missing capability.
    Mixed,
    /// No sign pointed anywhere: judged as Queen 2, by its capabilities.
    NoSign,
}

/// What `auto` decided, and on what.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Decision {
    /// The generation the broker is judged as.
    pub generation: Generation,
    /// How the signs settled it.
    pub basis: Basis,
}

/// What the probe found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    /// One finding per capability, in a fixed order.
    pub findings: Vec<Finding>,
    /// What each generation trait showed.
    pub signs: Vec<Sign>,
    /// The other routes the cases use, each with the status it answered (for the
    /// record: no capability depends on them alone).
    pub routes: Vec<(String, String)>,
}

impl Probe {
    /// The generation the signs point to, and how they settled it.
    pub fn decision(&self) -> Decision {
        let points = |g| self.signs.iter().any(|s| s.points_to == Some(g));
        match (points(Generation::QueenV0), points(Generation::Queen2)) {
            (true, false) => Decision {
                generation: Generation::QueenV0,
                basis: Basis::Agreed,
            },
            (false, true) => Decision {
                generation: Generation::Queen2,
                basis: Basis::Agreed,
            },
            (true, true) => Decision {
                generation: Generation::Queen2,
                basis: Basis::Mixed,
            },
            (false, false) => Decision {
                generation: Generation::Queen2,
                basis: Basis::NoSign,
            },
        }
    }

    /// Why the probed broker cannot be judged at all: it has no Core (nothing of a
    /// Queen broker was found; `auto` must never pass such a URL).
    pub fn could_not_run(&self) -> Option<crate::preflight::CouldNotRun> {
        let core = self
            .findings
            .iter()
            .find(|f| f.capability == Capability::Core)?;
        (core.verdict == Verdict::Absent)
            .then(|| crate::preflight::CouldNotRun::NotQueen(joined(&core.evidence)))
    }

    /// The profile `auto` runs: `v0` for a Queen v0 broker (its own page, with the Queen
    /// 2 conventions it never promised waived); otherwise the capabilities found,
    /// real-time waits included, with the evidence of each missing one as its skip
    /// reason.
    pub fn profile(&self) -> Profile {
        if self.decision().generation == Generation::QueenV0 {
            return profile::find("v0").expect("the v0 profile exists");
        }
        let mut caps = vec![Capability::Time];
        let mut missing_why = Vec::new();
        for f in &self.findings {
            match f.verdict {
                Verdict::Present | Verdict::Unclear => caps.push(f.capability),
                Verdict::Absent => missing_why.push((
                    f.capability,
                    format!("not found by the probe ({})", joined(&f.evidence)),
                )),
            }
        }
        Profile {
            name: Cow::Borrowed("auto"),
            about: Cow::Borrowed("the capabilities the probe found"),
            caps: Cow::Owned(caps),
            missing_why,
            waived: &[],
        }
    }

    /// One line per capability (`yes`/`no` and the evidence), one per generation sign,
    /// the routes for the record, and the decision with what decided it.
    pub fn to_text(&self) -> String {
        let mut out = String::from("probe (--profile auto):\n");
        for f in &self.findings {
            let _ = writeln!(
                out,
                "  {:<10} {:<3}  {}",
                format!("{:?}", f.capability),
                match f.verdict {
                    Verdict::Present => "yes",
                    Verdict::Absent => "no",
                    // Run: no clear sign of absence, so the cases judge it.
                    Verdict::Unclear => "run",
                },
                joined(&f.evidence)
            );
        }
        for s in &self.signs {
            let _ = writeln!(
                out,
                "  sign       {}: {} -> {}",
                s.tells.describe(),
                s.evidence,
                s.points_to.map_or("neither", Generation::name)
            );
        }
        for (route, answer) in &self.routes {
            let _ = writeln!(out, "  route      {route}: {answer}");
        }
        let d = self.decision();
        let signs = |g: Generation| -> Vec<&str> {
            self.signs
                .iter()
                .filter(|s| s.points_to == Some(g))
                .map(|s| match s.tells {
                    Trait::EmptyPop => "the empty pop",
                    Trait::LeaseExtension => "the lease extension",
                })
                .collect()
        };
        let _ = match (d.generation, d.basis) {
            (Generation::QueenV0, _) => writeln!(
                out,
                "  decided    Queen v0, by {}: profile v0 (its own page; the capabilities above are not used)",
                signs(Generation::QueenV0).join(" and ")
            ),
            (Generation::Queen2, Basis::Agreed) => writeln!(
                out,
                "  decided    Queen 2, by {}: profile auto (the capabilities found)",
                signs(Generation::Queen2).join(" and ")
            ),
            (Generation::Queen2, Basis::Mixed) => writeln!(
                out,
                "  decided    Queen 2 (mixed signs: Queen v0 by {}, Queen 2 by {}): profile auto (the capabilities found)",
                signs(Generation::QueenV0).join(" and "),
                signs(Generation::Queen2).join(" and ")
            ),
            (Generation::Queen2, Basis::NoSign) => writeln!(
                out,
                "  decided    Queen 2 (no sign of either): profile auto (the capabilities found)"
            ),
        };
        out
    }
}

fn joined(evidence: &[Evidence]) -> String {
    evidence
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A route no broker has, asked with each method the probe reads a 404 of: its answer
/// is this broker's answer for a route it lacks.
const NO_SUCH_ROUTE: &str = "/api/v1/queen-conformance/no-such-route";

/// How the probe reads `r` (see [`Reading`]). `missing` is the broker's answer, with
/// the same method, for a route no broker has.
fn read(r: &Result<Resp, Failure>, missing: Option<&Resp>) -> Reading {
    let Ok(r) = r else {
        return Reading::NoAnswer;
    };
    let is_error = |b: &Value| {
        b.get("error").is_some_and(|e| !e.is_null()) || b.get("success") == Some(&json!(false))
    };
    match r.status {
        200..=299 if is_error(&r.body) => Reading::ErrorIn2xx,
        200..=299 => Reading::Success,
        404 | 405 | 501
            if !(r.body.is_object() || r.body.is_array())
                || r.body["code"] == json!("no_such_route")
                || missing.is_some_and(|m| m.status == r.status && m.body == r.body) =>
        {
            Reading::NoRoute
        }
        400..=499 => Reading::Refused,
        _ => Reading::ServerError,
    }
}

/// `r` as evidence of `request`.
fn evidence(request: &'static str, r: &Result<Resp, Failure>, missing: Option<&Resp>) -> Evidence {
    match r {
        Ok(resp) => Evidence {
            request,
            status: Some(resp.status),
            answer: match &resp.body {
                // A body that is not JSON (a web page) is shown as the text it is.
                Value::String(text) => text.chars().take(120).collect(),
                Value::Null => "(empty)".into(),
                body => body.to_string().chars().take(120).collect(),
            },
            reading: read(r, missing),
        },
        Err(e) => Evidence {
            request,
            status: None,
            answer: e.actual.chars().take(120).collect(),
            reading: Reading::NoAnswer,
        },
    }
}

/// Present when every condition holds; otherwise absent only on a clear sign
/// (`absent_sign`), and unclear (run, and judged by its cases) without one.
fn verdict(all: bool, absent_sign: bool) -> Verdict {
    match (all, absent_sign) {
        (true, _) => Verdict::Present,
        (false, true) => Verdict::Absent,
        (false, false) => Verdict::Unclear,
    }
}

/// Whether `evidence` is a clear sign that a capability is absent: the broker's answer
/// for a route it lacks ([`Reading::NoRoute`]), or a route there in name only, as Queen
/// v0 answers its stream state with 200 and a database error ([`Reading::ErrorIn2xx`]).
/// A refusal (another 4xx) or a server error is no such sign.
fn absent(evidence: &[Evidence]) -> bool {
    evidence
        .iter()
        .any(|e| matches!(e.reading, Reading::NoRoute | Reading::ErrorIn2xx))
}

/// Whether a transaction with only `positions` was refused the way a broker without
/// positions refuses it: a 400 saying the body needs an `operations` array (Queen v0:
/// "operations array required"; queen-engine 1.3: "transaction requires an
/// operations array (or a top-level kv/timers array)"). Such a broker does not know
/// the key, and reads the body as empty.
fn positions_unknown(r: &Result<Resp, Failure>) -> bool {
    let Ok(r) = r else { return false };
    let error = r.body["error"]
        .as_str()
        .unwrap_or_default()
        .to_ascii_lowercase();
    r.status == 400 && error.contains("operations") && error.contains("requir")
}

/// Probes the broker at `url` (see the module's note on what it sends and how it
/// reads the answers).
pub async fn probe(url: &str, token: Option<String>) -> Probe {
    let http = crate::runner::http_client();
    let cx = Ctx::new(http, url, token, "probe");
    let q = cx.name(&format!(
        "probe-{}",
        &uuid::Uuid::now_v7().simple().to_string()[20..]
    ));
    let g = cx.name("probe-g");
    let mut findings = Vec::new();
    let mut find = |capability, verdict, evidence| {
        findings.push(Finding {
            capability,
            verdict,
            evidence,
        })
    };

    // First the broker's answers for a route it lacks.
    let missing_get = cx.get(NO_SUCH_ROUTE).await.ok();
    let missing_post = cx.post(NO_SUCH_ROUTE, json!({})).await.ok();
    let (on_get, on_post) = (missing_get.as_ref(), missing_post.as_ref());

    // Core: a push, a pop and an ack of the probe's own queue.
    let pushed = cx
        .post(
            "/api/v1/push",
            json!({"items": [
                {"queue": q, "partition": "p", "transactionId": "probe-0", "payload": 0},
                {"queue": q, "partition": "p", "transactionId": "probe-1", "payload": 1},
            ]}),
        )
        .await;
    let popped = cx
        .get(&format!(
            "/api/v1/pop/queue/{q}/partition/p?batch=2&consumerGroup={g}&subscriptionMode=all"
        ))
        .await;
    let msgs: Vec<Value> = match &popped {
        Ok(r) if r.status == 200 => r.body["messages"].as_array().cloned().unwrap_or_default(),
        _ => Vec::new(),
    };
    let push_ev = evidence("POST /api/v1/push of two messages", &pushed, on_post);
    find(
        Capability::Core,
        // The preflight found Core already (no run gets here without it); read as
        // absent, it is the probe's verdict of a broker that is not Queen's.
        verdict(push_ev.reading == Reading::Success && msgs.len() == 2, true),
        vec![
            push_ev,
            evidence(
                "GET /api/v1/pop/queue/{queue}/partition/{partition} of them",
                &popped,
                on_get,
            ),
        ],
    );

    // Cursor: acking the last message of the batch completes it; the first is then a
    // repeat (noop).
    if msgs.len() == 2 {
        let ack = |m: &Value, fenced: bool| {
            let mut a = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                               "consumerGroup": g, "status": "completed"});
            if fenced {
                a["leaseId"] = m["leaseId"].clone();
            }
            a
        };
        let last = cx.post("/api/v1/ack", ack(&msgs[1], true)).await;
        let first = cx.post("/api/v1/ack", ack(&msgs[0], false)).await;
        let key =
            |r: &Result<Resp, Failure>, k: &str| r.as_ref().ok().map(|r| r.body[0][k].clone());
        let yes = key(&last, "leaseReleased") == Some(json!(true))
            && key(&first, "noop") == Some(json!(true));
        // Cursor is behaviour, not a route: nothing shows it absent on a broker
        // judged as Queen 2 (Queen v0 is judged by its own profile).
        find(
            Capability::Cursor,
            verdict(yes, false),
            vec![
                evidence(
                    "POST /api/v1/ack of the last of the batch (leaseReleased: true)",
                    &last,
                    on_post,
                ),
                evidence(
                    "POST /api/v1/ack of the first, then (noop: true)",
                    &first,
                    on_post,
                ),
            ],
        );
    } else {
        find(Capability::Cursor, Verdict::Unclear, Vec::new());
    }

    // Generation: a pop of a partition no one pushed to, and the extension of a lease
    // no one holds.
    let empty = cx
        .get(&format!("/api/v1/pop/queue/{q}/partition/none?batch=1"))
        .await;
    let empty_points = match &empty {
        Ok(r) if r.status == 204 => Some(Generation::Queen2),
        Ok(r)
            if r.status == 200 && r.body["messages"] == json!([]) && !r.body["error"].is_null() =>
        {
            Some(Generation::QueenV0)
        }
        _ => None,
    };
    let lease = uuid::Uuid::now_v7();
    let extended = cx
        .post(&format!("/api/v1/lease/{lease}/extend"), json!({}))
        .await;
    let extended_points = match &extended {
        Ok(r) if r.body.is_array() => Some(Generation::QueenV0),
        Ok(r) if r.body.is_object() => Some(Generation::Queen2),
        _ => None,
    };
    let signs = vec![
        Sign {
            tells: Trait::EmptyPop,
            points_to: empty_points,
            evidence: evidence(
                "GET /api/v1/pop/queue/{queue}/partition/{none}",
                &empty,
                on_get,
            ),
        },
        Sign {
            tells: Trait::LeaseExtension,
            points_to: extended_points,
            evidence: evidence(
                "POST /api/v1/lease/{leaseId}/extend of a lease no one holds",
                &extended,
                on_post,
            ),
        },
    ];

    // Positions: a transaction that only sets the probe group's position.
    let pos = cx
        .post(
            "/api/v1/transaction",
            json!({"positions": [{"queue": q, "consumerGroup": g, "partition": "p", "offset": 2}]}),
        )
        .await;
    let pos_ev = evidence(
        "POST /api/v1/transaction with only positions",
        &pos,
        on_post,
    );
    let pos_absent = absent(std::slice::from_ref(&pos_ev)) || positions_unknown(&pos);
    find(
        Capability::Positions,
        verdict(pos_ev.reading == Reading::Success, pos_absent),
        vec![pos_ev],
    );

    // Fetch: a read by offset of the probe's two messages (it takes no lease).
    let fetched = cx
        .post(
            "/api/v1/fetch",
            json!({"entries": [{"queue": q, "partition": "p", "offset": 0}]}),
        )
        .await;
    let fetch_ev = evidence("POST /api/v1/fetch of the two messages", &fetched, on_post);
    let two = matches!(&fetched, Ok(r) if r.body["entries"][0]["records"].as_array().is_some_and(|a| a.len() == 2));
    find(
        Capability::Fetch,
        verdict(
            fetch_ev.reading == Reading::Success && two,
            absent(std::slice::from_ref(&fetch_ev)),
        ),
        vec![fetch_ev],
    );

    // Streams: a query registered over the probe's queue, then the partitions holding
    // its state (none): the stream runner's listing, which the official client takes
    // a 404 of as a broker without claims. Both must succeed: a refusal or an error
    // in a 2xx is no stream runner.
    let registered = cx
        .post(
            "/streams/v1/queries",
            json!({"name": cx.name("probe-query"), "source_queue": q,
                   "sink_queue": format!("{q}-sink"), "config_hash": "probe"}),
        )
        .await;
    let query_id = registered
        .as_ref()
        .ok()
        .and_then(|r| r.body["query_id"].as_str().map(str::to_string));
    let reg_ev = evidence(
        "POST /streams/v1/queries of a query of its own",
        &registered,
        on_post,
    );
    let mut streams_ev = vec![reg_ev];
    let listed_ok = match &query_id {
        Some(id) if streams_ev[0].reading == Reading::Success => {
            let listed = cx
                .post("/streams/v1/state/partitions", json!({"query_id": id}))
                .await;
            let ok = matches!(&listed, Ok(r) if r.body["partitions"].is_array());
            let ev = evidence(
                "POST /streams/v1/state/partitions of that query",
                &listed,
                on_post,
            );
            let ok = ok && ev.reading == Reading::Success;
            streams_ev.push(ev);
            ok
        }
        _ => false,
    };
    let streams_absent = absent(&streams_ev);
    find(
        Capability::Streams,
        verdict(listed_ok, streams_absent),
        streams_ev,
    );

    // Ephemeral: the depth of an ephemeral queue no one made is the route's own 404.
    let ephemeral = cx
        .get(&format!("/api/v1/ephemeral/queues/{q}-e/depth"))
        .await;
    let eph_ev = evidence(
        "GET /api/v1/ephemeral/queues/{queue}/depth of none",
        &ephemeral,
        on_get,
    );
    find(
        Capability::Ephemeral,
        verdict(
            eph_ev.reading == Reading::Refused,
            absent(std::slice::from_ref(&eph_ev)),
        ),
        vec![eph_ev],
    );

    // Admin: forgetting the probe's group on its queue, and a retry by hand of a
    // message that is no dead letter: refused by the route, whatever its body says.
    let forgot = cx
        .delete(&format!("/api/v1/consumer-groups/{g}/queues/{q}"))
        .await;
    let forgot_ev = evidence(
        "DELETE /api/v1/consumer-groups/{group}/queues/{queue}",
        &forgot,
        None,
    );
    let forgot_ok = forgot_ev.reading == Reading::Success
        && matches!(&forgot, Ok(r) if r.body["deletedPartitions"].is_u64());
    let mut admin_ev = vec![forgot_ev];
    let retried_ok = match msgs.first() {
        Some(m) => {
            let retried = cx
                .post(
                    &format!(
                        "/api/v1/messages/{}/{}/retry",
                        m["partitionId"].as_str().unwrap_or_default(),
                        m["transactionId"].as_str().unwrap_or_default()
                    ),
                    json!({}),
                )
                .await;
            let ev = evidence(
                "POST /api/v1/messages/{partitionId}/{transactionId}/retry of a live one",
                &retried,
                on_post,
            );
            let ok = ev.reading == Reading::Refused;
            admin_ev.push(ev);
            ok
        }
        None => false,
    };
    find(
        Capability::Admin,
        verdict(forgot_ok && retried_ok, absent(&admin_ev)),
        admin_ev,
    );

    // KV, timers and locks: a read of a name no one uses; the route's own refusal
    // shows the route too (the cases judge its answers).
    let kv = cx
        .post(
            "/api/v1/kv",
            json!({"operations": [{"op": "get", "ns": cx.ns("probe"), "key": "probe"}]}),
        )
        .await;
    let kv_ev = evidence("POST /api/v1/kv get of a key no one wrote", &kv, on_post);
    let kv_ok = match kv_ev.reading {
        Reading::Success => {
            matches!(&kv, Ok(r) if r.body["results"][0]["found"] == json!(false))
        }
        reading => reading == Reading::Refused,
    };
    let kv_absent = absent(std::slice::from_ref(&kv_ev));
    find(Capability::Kv, verdict(kv_ok, kv_absent), vec![kv_ev]);
    let timer = cx.get(&format!("/api/v1/timers/{q}/probe")).await;
    let timer_ev = evidence("GET /api/v1/timers/{queue}/{key} of none", &timer, on_get);
    let timer_ok = match timer_ev.reading {
        Reading::Success => matches!(&timer, Ok(r) if r.body["found"] == json!(false)),
        reading => reading == Reading::Refused,
    };
    let timer_absent = absent(std::slice::from_ref(&timer_ev));
    find(
        Capability::Timers,
        verdict(timer_ok, timer_absent),
        vec![timer_ev],
    );
    let locks = cx
        .post(
            "/api/v1/locks",
            json!({"operations": [{"op": "get", "name": cx.name("probe-lock")}]}),
        )
        .await;
    let locks_ev = evidence(
        "POST /api/v1/locks get of a lock no one holds",
        &locks,
        on_post,
    );
    let locks_ok = match locks_ev.reading {
        Reading::Success => {
            matches!(&locks, Ok(r) if r.body["results"][0]["held"] == json!(false))
        }
        reading => reading == Reading::Refused,
    };
    let locks_absent = absent(std::slice::from_ref(&locks_ev));
    find(
        Capability::Locks,
        verdict(locks_ok, locks_absent),
        vec![locks_ev],
    );

    // The other routes, for the record.
    let mut routes = Vec::new();
    for (route, r) in [
        (
            "GET /api/v1/dlq",
            cx.get(&format!("/api/v1/dlq?queue={q}")).await,
        ),
        (
            "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
            cx.post(
                &format!("/api/v1/consumer-groups/{g}/queues/{q}/seek"),
                json!({"toEnd": true}),
            )
            .await,
        ),
        // Last: they leave nothing behind (a sink the stream query may have made).
        (
            "DELETE /api/v1/resources/queues/{queue}",
            cx.delete(&format!("/api/v1/resources/queues/{q}")).await,
        ),
        (
            "DELETE /api/v1/resources/queues/{queue} (the stream query's sink)",
            cx.delete(&format!("/api/v1/resources/queues/{q}-sink"))
                .await,
        ),
    ] {
        let answer = match r {
            Ok(r) => format!("HTTP {}", r.status),
            Err(e) => e.actual,
        };
        routes.push((route.to_string(), answer));
    }
    // On a broker whose every sign says Queen v0, acks that did not commit as a cursor
    // are v0's own (message by message): a clear sign, for the record (the v0 profile
    // judges it).
    let v0 = signs
        .iter()
        .all(|s| s.points_to != Some(Generation::Queen2))
        && signs
            .iter()
            .any(|s| s.points_to == Some(Generation::QueenV0));
    for f in &mut findings {
        if v0 && f.capability == Capability::Cursor && f.verdict == Verdict::Unclear {
            f.verdict = Verdict::Absent;
        }
    }
    // Core first, then the order of the capability list.
    let order = [
        Capability::Core,
        Capability::Cursor,
        Capability::Positions,
        Capability::Kv,
        Capability::Timers,
        Capability::Locks,
        Capability::Fetch,
        Capability::Streams,
        Capability::Ephemeral,
        Capability::Admin,
    ];
    findings.sort_by_key(|f| order.iter().position(|c| *c == f.capability));
    Probe {
        findings,
        signs,
        routes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: Value) -> Result<Resp, Failure> {
        Ok(Resp { status, body })
    }

    #[test]
    fn a_2xx_must_succeed() {
        assert_eq!(
            read(&answer(200, json!({"found": false})), None),
            Reading::Success
        );
        assert_eq!(read(&answer(204, Value::Null), None), Reading::Success);
        assert_eq!(
            read(
                &answer(200, json!([{"error": null, "success": true}])),
                None
            ),
            Reading::Success,
            "an array of results with null errors is no error"
        );
        // Queen v0's POST /streams/v1/state/get of an id it cannot read.
        let v0 =
            json!({"error": "ERROR:  invalid input syntax for type uuid: \"0\"", "success": false});
        assert_eq!(read(&answer(200, v0), None), Reading::ErrorIn2xx);
        assert_eq!(
            read(&answer(200, json!({"success": false})), None),
            Reading::ErrorIn2xx
        );
    }

    #[test]
    fn a_4xx_shows_the_route_unless_it_is_the_answer_for_no_route() {
        // queen-engine 1.3: its answer for a route it lacks, and its retry by hand of a
        // live message, whose 404 has no `code`.
        let missing = Resp {
            status: 404,
            body: json!({"error": "Not Found", "code": "no_such_route"}),
        };
        let retry = answer(
            404,
            json!({"error": "Message not found", "message": "No dead-letter row for this address. Only dead-lettered messages can be replayed", "success": false}),
        );
        assert_eq!(read(&retry, Some(&missing)), Reading::Refused);
        assert_eq!(read(&retry, None), Reading::Refused);
        // The same answer as the route no broker has is no route, whatever it says.
        let bare = Resp {
            status: 404,
            body: json!({"error": "not found"}),
        };
        assert_eq!(
            read(&answer(404, json!({"error": "not found"})), Some(&bare)),
            Reading::NoRoute
        );
        // A web page, an empty body, `no_such_route`.
        let page = json!("<html><body><h1>File Not Found</h1></body></html>");
        assert_eq!(read(&answer(404, page), None), Reading::NoRoute);
        assert_eq!(read(&answer(405, Value::Null), None), Reading::NoRoute);
        assert_eq!(
            read(&answer(404, json!({"code": "no_such_route"})), None),
            Reading::NoRoute
        );
        assert_eq!(
            read(
                &answer(400, json!({"error": "operations array required"})),
                None
            ),
            Reading::Refused
        );
        assert_eq!(
            read(&answer(500, json!({"error": "pool"})), None),
            Reading::ServerError
        );
        assert_eq!(
            read(&Err(Failure::new("an answer", "transport error")), None),
            Reading::NoAnswer
        );
    }

    /// Absence needs a clear sign: the answer for a route the broker lacks, or v0's and
    /// queen-engine 1.3's refusal of a body with only `positions`. Any other refusal is
    /// the capability answering badly, so its cases run (and fail).
    #[test]
    fn only_a_clear_sign_makes_a_capability_absent() {
        let v0 = answer(400, json!({"error": "operations array required"}));
        let engine = answer(
            400,
            json!({"error": "transaction requires an operations array (or a top-level kv/timers array)", "reason": "bad_request"}),
        );
        let regression = answer(
            400,
            json!({"error": "positions are not supported here", "code": "bad_request"}),
        );
        assert!(positions_unknown(&v0) && positions_unknown(&engine));
        assert!(!positions_unknown(&regression));
        assert_eq!(
            verdict(false, positions_unknown(&regression)),
            Verdict::Unclear
        );
        assert_eq!(verdict(false, positions_unknown(&engine)), Verdict::Absent);
        assert_eq!(verdict(true, true), Verdict::Present);
        let no_route = evidence(
            "POST /x",
            &answer(404, json!({"code": "no_such_route"})),
            None,
        );
        let refused = evidence("POST /x", &regression, None);
        let server = evidence("POST /x", &answer(500, json!({"error": "pool"})), None);
        let v0_state = evidence(
            "POST /x",
            &answer(
                200,
                json!({"error": "ERROR:  invalid input syntax", "success": false}),
            ),
            None,
        );
        assert!(absent(&[v0_state]));
        assert!(absent(&[no_route]));
        assert!(!absent(&[refused, server]));
        // An unclear capability is run: the profile has it.
        let p = Probe {
            findings: vec![Finding {
                capability: Capability::Positions,
                verdict: Verdict::Unclear,
                evidence: Vec::new(),
            }],
            signs: Vec::new(),
            routes: Vec::new(),
        };
        assert!(p.profile().has(Capability::Positions));
    }

    fn sign(tells: Trait, points_to: Option<Generation>) -> Sign {
        Sign {
            tells,
            points_to,
            evidence: Evidence {
                request: "GET /",
                status: Some(200),
                answer: String::new(),
                reading: Reading::Success,
            },
        }
    }

    #[test]
    fn v0_only_when_every_sign_says_so() {
        let probe = |signs| Probe {
            findings: Vec::new(),
            signs,
            routes: Vec::new(),
        };
        let (v0, q2) = (Some(Generation::QueenV0), Some(Generation::Queen2));
        let cases = [
            (
                vec![sign(Trait::EmptyPop, v0), sign(Trait::LeaseExtension, v0)],
                Generation::QueenV0,
                Basis::Agreed,
            ),
            (
                vec![sign(Trait::EmptyPop, v0), sign(Trait::LeaseExtension, None)],
                Generation::QueenV0,
                Basis::Agreed,
            ),
            (
                vec![sign(Trait::EmptyPop, q2), sign(Trait::LeaseExtension, q2)],
                Generation::Queen2,
                Basis::Agreed,
            ),
            (
                vec![sign(Trait::EmptyPop, v0), sign(Trait::LeaseExtension, q2)],
                Generation::Queen2,
                Basis::Mixed,
            ),
            (
                vec![
                    sign(Trait::EmptyPop, None),
                    sign(Trait::LeaseExtension, None),
                ],
                Generation::Queen2,
                Basis::NoSign,
            ),
        ];
        for (signs, generation, basis) in cases {
            let p = probe(signs);
            assert_eq!(
                p.decision(),
                Decision { generation, basis },
                "{}",
                p.to_text()
            );
            let name = if generation == Generation::QueenV0 {
                "v0"
            } else {
                "auto"
            };
            assert_eq!(p.profile().name, name);
            assert!(p.to_text().contains("decided    "), "{}", p.to_text());
        }
    }
}
