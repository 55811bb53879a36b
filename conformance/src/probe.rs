//! Before a run: is the broker up ([`wait_ready`]), and what can it do ([`probe`], for
//! `--profile auto`)?
//!
//! The probe sends harmless requests only: reads of names no one uses (a KV key, a
//! timer, a lock, a stream query's state, an ephemeral queue's depth), and on a queue
//! and group of its own (`cf-probe-<uuid>`) two pushed messages, a pop, two acks, a
//! position, a read by offset, the group forgotten on that queue and a refused retry
//! by hand of a message that is no dead letter, then deletes that queue.

use std::borrow::Cow;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::case::Capability;
use crate::ctx::Ctx;
use crate::profile::Profile;

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

/// One capability's finding.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Finding {
    /// The capability.
    pub capability: Capability,
    /// Whether the broker has it.
    pub present: bool,
    /// What showed it (the request and the answer, in a few words).
    pub evidence: String,
}

/// What the probe found.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Probe {
    /// One finding per capability, in a fixed order.
    pub findings: Vec<Finding>,
    /// The other routes the cases use, each with the status it answered (for the
    /// record: no capability depends on them alone).
    pub routes: Vec<(String, String)>,
}

impl Probe {
    /// The profile `auto`: the capabilities found, real-time waits included, and the
    /// evidence of each missing one as its skip reason.
    pub fn profile(&self) -> Profile {
        let mut caps = vec![Capability::Time];
        let mut missing_why = Vec::new();
        for f in &self.findings {
            if f.present {
                caps.push(f.capability);
            } else {
                missing_why.push((
                    f.capability,
                    format!("not found by the probe ({})", f.evidence),
                ));
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

    /// One line per capability: `yes`/`no` and the evidence.
    pub fn to_text(&self) -> String {
        let mut out = String::from("probe (--profile auto):\n");
        for f in &self.findings {
            out.push_str(&format!(
                "  {:<10} {:<3}  {}\n",
                format!("{:?}", f.capability),
                if f.present { "yes" } else { "no" },
                f.evidence
            ));
        }
        for (route, answer) in &self.routes {
            out.push_str(&format!("  route      {route}: {answer}\n"));
        }
        out
    }
}

/// Probes the broker at `url` for each capability (see the module's note on what it
/// sends).
pub async fn probe(url: &str, token: Option<String>) -> Probe {
    let http = crate::runner::http_client();
    let cx = Ctx::new(http, url, token, "probe");
    let q = cx.name(&format!(
        "probe-{}",
        &uuid::Uuid::now_v7().simple().to_string()[20..]
    ));
    let g = cx.name("probe-g");
    let mut findings = Vec::new();
    let mut find = |capability, present, evidence: String| {
        findings.push(Finding {
            capability,
            present,
            evidence,
        })
    };

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
    let popped = match &pushed {
        Ok(r) if (200..300).contains(&r.status) => cx
            .pop(&format!(
                "/api/v1/pop/queue/{q}/partition/p?batch=2&consumerGroup={g}&subscriptionMode=all"
            ))
            .await
            .ok()
            .flatten(),
        _ => None,
    };
    let msgs: Vec<Value> = popped
        .as_ref()
        .and_then(|p| p["messages"].as_array().cloned())
        .unwrap_or_default();
    find(
        Capability::Core,
        msgs.len() == 2,
        match (&pushed, msgs.len()) {
            (Err(e), _) => format!("POST /api/v1/push: {}", e.actual),
            (Ok(r), _) if !(200..300).contains(&r.status) => {
                format!("POST /api/v1/push answered HTTP {}", r.status)
            }
            (_, 2) => "push, pop of two messages".into(),
            (_, n) => format!("a pop of two pushed messages delivered {n}"),
        },
    );

    // Cursor: acking the last message of the batch completes it; the first is then a
    // repeat (noop).
    let cursor = if msgs.len() == 2 {
        let ack = |m: &Value, fenced: bool| {
            let mut a = json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"],
                               "consumerGroup": g, "status": "completed"});
            if fenced {
                a["leaseId"] = m["leaseId"].clone();
            }
            a
        };
        let last = cx.post("/api/v1/ack", ack(&msgs[1], true)).await.ok();
        let first = cx.post("/api/v1/ack", ack(&msgs[0], false)).await.ok();
        let released = last.as_ref().map(|r| r.body[0]["leaseReleased"].clone());
        let noop = first.as_ref().map(|r| r.body[0]["noop"].clone());
        let yes = released == Some(json!(true)) && noop == Some(json!(true));
        (
            yes,
            format!(
                "ack of the last of a batch of two: leaseReleased {}; then the first: noop {}",
                released.unwrap_or(Value::Null),
                noop.unwrap_or(Value::Null)
            ),
        )
    } else {
        (false, "no batch to ack".into())
    };

    // Positions: a transaction that only sets the probe group's position.
    let pos = cx
        .post(
            "/api/v1/transaction",
            json!({"positions": [{"queue": q, "consumerGroup": g, "partition": "p", "offset": 2}]}),
        )
        .await;
    find(
        Capability::Positions,
        matches!(&pos, Ok(r) if r.status == 200 && r.body["success"] == json!(true)),
        answered("a transaction with only positions", &pos),
    );
    find(Capability::Cursor, cursor.0, cursor.1);

    // Fetch: a read by offset of the probe's two messages (it takes no lease).
    let fetched = cx
        .post(
            "/api/v1/fetch",
            json!({"entries": [{"queue": q, "partition": "p", "offset": 0}]}),
        )
        .await;
    find(
        Capability::Fetch,
        matches!(&fetched, Ok(r) if r.status == 200
            && r.body["entries"][0]["records"].as_array().is_some_and(|a| a.len() == 2)),
        answered("POST /api/v1/fetch of the two messages", &fetched),
    );
    // Streams: the state of a query no one registered is a verdict, not a 404.
    let unknown_query = uuid::Uuid::now_v7().to_string();
    let streams = cx
        .post(
            "/streams/v1/state/get",
            json!({"query_id": unknown_query, "partition_id": "0"}),
        )
        .await;
    find(
        Capability::Streams,
        matches!(&streams, Ok(r) if r.status == 200 && r.body["success"] == json!(false)),
        answered("POST /streams/v1/state/get of an unknown query", &streams),
    );
    // Ephemeral: the depth of an ephemeral queue no one made.
    let ephemeral = cx
        .get(&format!("/api/v1/ephemeral/queues/{q}-e/depth"))
        .await;
    find(
        Capability::Ephemeral,
        matches!(&ephemeral, Ok(r) if r.status == 404
            && r.body["code"] == json!("ephemeral_queue_not_found")),
        answered(
            "GET /api/v1/ephemeral/queues/{queue}/depth of none",
            &ephemeral,
        ),
    );
    // Admin: forgetting the probe's group on its queue, and a retry by hand of a
    // message that is no dead letter (refused as not found).
    let forgot = cx
        .delete(&format!("/api/v1/consumer-groups/{g}/queues/{q}"))
        .await;
    let retried = match msgs.first() {
        Some(m) => Some(
            cx.post(
                &format!(
                    "/api/v1/messages/{}/{}/retry",
                    m["partitionId"].as_str().unwrap_or_default(),
                    m["transactionId"].as_str().unwrap_or_default()
                ),
                json!({}),
            )
            .await,
        ),
        None => None,
    };
    let forgot_ok =
        matches!(&forgot, Ok(r) if r.status == 200 && r.body["deletedPartitions"].is_u64());
    // A 404 about the message, not the route's own `no_such_route`.
    let retried_ok = matches!(&retried, Some(Ok(r)) if r.status == 404
        && r.body["code"].is_string() && r.body["code"] != json!("no_such_route"));
    find(
        Capability::Admin,
        forgot_ok && retried_ok,
        format!(
            "{}; {}",
            answered(
                "DELETE /api/v1/consumer-groups/{group}/queues/{queue}",
                &forgot
            ),
            match &retried {
                Some(r) => answered("POST /api/v1/messages/{pid}/{txn}/retry of a live one", r),
                None => "no message to retry".into(),
            }
        ),
    );

    let kv = cx
        .post(
            "/api/v1/kv",
            json!({"operations": [{"op": "get", "ns": cx.ns("probe"), "key": "probe"}]}),
        )
        .await;
    find(
        Capability::Kv,
        matches!(&kv, Ok(r) if r.status == 200 && r.body["results"][0]["found"] == json!(false)),
        answered("POST /api/v1/kv get", &kv),
    );
    let timer = cx.get(&format!("/api/v1/timers/{q}/probe")).await;
    find(
        Capability::Timers,
        matches!(&timer, Ok(r) if r.status == 200 && r.body["found"] == json!(false)),
        answered("GET /api/v1/timers/{queue}/{key}", &timer),
    );
    let locks = cx
        .post(
            "/api/v1/locks",
            json!({"operations": [{"op": "get", "name": cx.name("probe-lock")}]}),
        )
        .await;
    find(
        Capability::Locks,
        matches!(&locks, Ok(r) if r.status == 200 && r.body["results"][0]["held"] == json!(false)),
        answered("POST /api/v1/locks get", &locks),
    );
    // The other routes, for the record.
    let mut routes = Vec::new();
    let lease = uuid::Uuid::now_v7();
    for (route, r) in [
        (
            "GET /api/v1/dlq",
            cx.get(&format!("/api/v1/dlq?queue={q}")).await,
        ),
        (
            "POST /api/v1/lease/{leaseId}/extend",
            cx.post(&format!("/api/v1/lease/{lease}/extend"), json!({}))
                .await,
        ),
        (
            "POST /api/v1/consumer-groups/{group}/queues/{queue}/seek",
            cx.post(
                &format!("/api/v1/consumer-groups/{g}/queues/{q}/seek"),
                json!({"toEnd": true}),
            )
            .await,
        ),
        // Last: it leaves nothing behind.
        (
            "DELETE /api/v1/resources/queues/{queue}",
            cx.delete(&format!("/api/v1/resources/queues/{q}")).await,
        ),
    ] {
        let answer = match r {
            Ok(r) => format!("HTTP {}", r.status),
            Err(e) => e.actual,
        };
        routes.push((route.to_string(), answer));
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
    Probe { findings, routes }
}

fn answered(what: &str, r: &Result<crate::ctx::Resp, crate::case::Failure>) -> String {
    match r {
        Ok(r) => {
            let body: String = r.body.to_string().chars().take(120).collect();
            format!("{what}: HTTP {} {body}", r.status)
        }
        Err(e) => format!("{what}: {}", e.actual),
    }
}
