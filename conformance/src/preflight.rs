//! Before the first case: is the URL a Queen broker, may this token use it, and how
//! fast does it answer? A refused token is found before the preflight makes anything.
//!
//! A run that could not judge the broker must never pass, and must never fail as if the
//! broker broke the spec either: 226 "failures" of a read-only token are a setup
//! mistake, not findings. So every run (whatever its profile) first pushes one message
//! to a queue of its own, pops it, and deletes that queue, and ends with
//! [`CouldNotRun`] (exit 2, one line naming the cause) when:
//!
//! - a request is refused with 401 (no token, or one the broker does not take) or 403
//!   (a role too low: the suite writes, so it needs `read-write`, and deletes the
//!   queues and groups it made, so it needs `admin`);
//! - the push or the pop is not answered as a Queen broker answers them (a web server
//!   that serves a `health` file answers `GET /health` with 200, and then a 501 or a
//!   404 page to a push): the broker has no Core, and nothing it answers could be
//!   judged.
//!
//! The same requests measure how long one answer takes ([`Preflight::latency`]): the
//! cases that wait on a TTL or a lease, and the properties' time budget, size
//! themselves by it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::case::Failure;
use crate::ctx::{Ctx, Resp};

/// A role of the broker's auth (`read-only`, `read-write`, `admin`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[non_exhaustive]
pub enum Role {
    /// Reads only.
    ReadOnly,
    /// Reads and writes: push, pop, ack, transactions, KV, timers.
    ReadWrite,
    /// Everything, deleting queues and consumer groups included.
    Admin,
}

impl Role {
    /// The name the broker's token file and JWT claims use.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::ReadWrite => "read-write",
            Role::Admin => "admin",
        }
    }
}

/// The role a whole run needs: the cases push and pop (`read-write`) and delete the
/// queues and consumer groups they made (`admin`).
pub const ROLE_NEEDED: Role = Role::Admin;

/// Why a run could not judge the broker: exit 2, with [`CouldNotRun`]'s one line.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CouldNotRun {
    /// Nothing answered `GET /health` with 200 (down, or the URL is not a broker's).
    NotReady(String),
    /// Something answers, but not as a Queen broker: the evidence.
    NotQueen(String),
    /// A request was refused with 401: no token, or one the broker does not accept.
    Unauthorized {
        /// The request and the answer.
        evidence: String,
    },
    /// A request was refused with 403: the token's role is too low for it.
    Forbidden {
        /// The request and the answer.
        evidence: String,
        /// The role that request needs.
        needs: Role,
    },
    /// `--only` (or one comma-separated part of it) selects no case.
    NothingSelected {
        /// The part that selects nothing.
        part: String,
    },
    /// Every selected case was skipped or not run: nothing was judged.
    NothingJudged(String),
    /// The broker stopped answering during the run.
    Stopped(crate::report::Stopped),
    /// A requirement of the run cannot hold (a capability `--require` names that the
    /// chosen profile lacks).
    Contradiction(String),
}

impl std::fmt::Display for CouldNotRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CouldNotRun::NotReady(why) => f.write_str(why),
            CouldNotRun::NotQueen(evidence) => write!(
                f,
                "not a Queen broker: {evidence} (it answers GET /health, but not a push and a pop of its own queue: no Core)"
            ),
            CouldNotRun::Unauthorized { evidence } => write!(
                f,
                "auth refused: {evidence}: the broker wants a token it accepts; pass one of role {} with --token or QUEEN_TOKEN",
                ROLE_NEEDED.as_str()
            ),
            CouldNotRun::Forbidden { evidence, needs } => write!(
                f,
                "auth refused: {evidence}: the token's role is too low (this request needs {}); the suite needs a token of role {} (it pushes and pops, and deletes the queues and groups it made)",
                needs.as_str(),
                ROLE_NEEDED.as_str()
            ),
            CouldNotRun::NothingSelected { part } => write!(
                f,
                "--only {part:?} selects no case (see --list for the ids)"
            ),
            CouldNotRun::NothingJudged(why) => write!(f, "nothing was judged: {why}"),
            CouldNotRun::Stopped(s) => write!(
                f,
                "the broker stopped answering during case {}: {} ({} case(s) had finished; the rest were not run)",
                s.case, s.error, s.finished
            ),
            CouldNotRun::Contradiction(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for CouldNotRun {}

/// What the preflight learnt.
#[derive(Debug, Clone)]
pub struct Preflight {
    /// The median time of its requests: how long one answer takes at the start.
    pub latency: Duration,
}

/// A request and its answer (the first 120 characters of the body), for a cause's line.
fn describe(request: &str, r: &Resp) -> String {
    let body = match &r.body {
        Value::String(text) => text.clone(),
        Value::Null => "(empty)".into(),
        b => b.to_string(),
    };
    // One line: a web page's newlines and indentation become single spaces.
    let body = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let body: String = body.chars().take(120).collect();
    format!("{request} answered HTTP {} {body}", r.status)
}

/// Ends the preflight on a 401 or 403 (`needs` is the role `request` takes).
fn auth(request: &str, r: &Resp, needs: Role) -> Result<(), CouldNotRun> {
    match r.status {
        401 => Err(CouldNotRun::Unauthorized {
            evidence: describe(request, r),
        }),
        403 => Err(CouldNotRun::Forbidden {
            evidence: describe(request, r),
            needs,
        }),
        _ => Ok(()),
    }
}

fn lost(url: &str, request: &str, e: &Failure) -> CouldNotRun {
    CouldNotRun::NotReady(format!(
        "the broker at {url} stopped answering during the preflight: {request}: {}",
        e.actual
    ))
}

/// Checks that `url` is a Queen broker this token may use, and measures its latency
/// (see the module's note). Sends: `GET /health`, the deletion of a queue of its own
/// that does not exist yet (the role: `admin`, asked before anything is made), a push
/// of one message to that queue
/// (`cf-…-preflight-q`), pops of that partition by a group of its own from the
/// beginning until a message comes back (at most 5, 200 ms apart: a broker may show a
/// push a moment late), and the deletion of that queue.
pub async fn preflight(url: &str, token: Option<String>) -> Result<Preflight, CouldNotRun> {
    let cx = Ctx::new(crate::runner::http_client(), url, token, "preflight");
    let q = cx.name("q");
    let mut took = Vec::new();
    let t0 = Instant::now();
    let _ = cx.get("/health").await;
    took.push(t0.elapsed());

    // The role first, on a queue that does not exist yet: a token too weak to delete
    // is refused here, before the preflight has made anything it could not remove.
    let delete = "DELETE /api/v1/resources/queues/{queue} of its own queue";
    let path_q = format!("/api/v1/resources/queues/{q}");
    let t0 = Instant::now();
    let first = cx
        .delete(&path_q)
        .await
        .map_err(|e| lost(url, delete, &e))?;
    took.push(t0.elapsed());
    auth(delete, &first, Role::Admin)?;

    let push = "POST /api/v1/push";
    let t0 = Instant::now();
    let pushed = cx
        .post(
            "/api/v1/push",
            json!({"items": [{"queue": q, "partition": "p", "transactionId": "preflight-0", "payload": {"preflight": true}}]}),
        )
        .await
        .map_err(|e| lost(url, push, &e))?;
    took.push(t0.elapsed());
    auth(push, &pushed, Role::ReadWrite)?;
    let accepted =
        (200..300).contains(&pushed.status) && (pushed.body.is_array() || pushed.body.is_object());
    if !accepted {
        return Err(CouldNotRun::NotQueen(describe(push, &pushed)));
    }

    // A group of its own, from the beginning: whatever it pops is the preflight's.
    let pop = "GET /api/v1/pop/queue/{queue}/partition/p";
    let path = format!(
        "/api/v1/pop/queue/{q}/partition/p?batch=2&consumerGroup={}&subscriptionMode=all",
        cx.name("g")
    );
    let mut last = None;
    for attempt in 0..5 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let t0 = Instant::now();
        let popped = cx.get(&path).await.map_err(|e| lost(url, pop, &e))?;
        if attempt == 0 {
            took.push(t0.elapsed());
        }
        auth(pop, &popped, Role::ReadWrite)?;
        if popped.status == 200
            && popped.body["messages"]
                .as_array()
                .is_some_and(|m| !m.is_empty())
        {
            last = None;
            break;
        }
        last = Some(popped);
    }
    if let Some(popped) = last {
        return Err(CouldNotRun::NotQueen(format!(
            "{}; {}",
            describe(push, &pushed),
            describe(&format!("{pop} of it"), &popped)
        )));
    }

    let t0 = Instant::now();
    let deleted = cx
        .delete(&path_q)
        .await
        .map_err(|e| lost(url, delete, &e))?;
    took.push(t0.elapsed());
    auth(delete, &deleted, Role::Admin)?;

    took.sort();
    Ok(Preflight {
        latency: took[took.len() / 2],
    })
}
