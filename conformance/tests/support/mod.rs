//! Shared by the integration tests: proxies in front of the reference broker that each
//! break one rule of the spec (or several), so the tests can show the suite fails,
//! baselines, diffs and probes.

// Each test file uses a part of this module.
#![allow(dead_code)]

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

/// One rule a proxy breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breakage {
    /// Flips `success` of every transaction answer.
    FlipSuccess,
    /// Drops `reason` from rollbacks.
    DropReason,
    /// When a transaction rolls back, pushes its items anyway.
    ForwardRolledBack,
    /// `GET /health` answers without its `version`.
    HealthWithoutVersion,
    /// A broker without positions: a transaction carrying `positions` and a seek
    /// answer 400.
    RefusePositions,
    /// A broker that does not know `positions`, as Queen v0 and queen-engine 1.3 answer:
    /// a transaction with only `positions` is 400 "transaction requires an operations
    /// array" (the body read as empty), and a seek is the answer for a route it lacks.
    PositionsUnknown,
    /// Every answer comes 150 ms late (the request is held before it is forwarded).
    Slow,
    /// Ack answers never say `noop: true` (a broker that does not know an ack below
    /// the cursor is a repeat).
    NoNoop,
}

struct Proxy {
    upstream: String,
    http: reqwest::Client,
    breaks: Vec<Breakage>,
}

impl Proxy {
    fn breaks(&self, b: Breakage) -> bool {
        self.breaks.contains(&b)
    }

    /// Rewrites a transaction's answer (and, for `ForwardRolledBack`, lands its
    /// rolled-back pushes).
    async fn tamper_txn(&self, request: &[u8], answer: Vec<u8>) -> Vec<u8> {
        let Ok(mut v) = serde_json::from_slice::<Value>(&answer) else {
            return answer;
        };
        let rolled_back = v["success"] == json!(false);
        if self.breaks(Breakage::FlipSuccess)
            && let Some(b) = v["success"].as_bool()
        {
            v["success"] = json!(!b);
        }
        if self.breaks(Breakage::DropReason)
            && rolled_back
            && let Some(o) = v.as_object_mut()
        {
            o.remove("reason");
        }
        if self.breaks(Breakage::ForwardRolledBack) && rolled_back {
            let body: Value = serde_json::from_slice(request).unwrap_or_default();
            let items = pushed_items(&body);
            if !items.is_empty() {
                let url = format!("{}/api/v1/push", self.upstream);
                let sent = self.http.post(url).json(&json!({"items": items})).send();
                let status = sent.await.map(|r| r.status().as_u16());
                assert!(
                    matches!(status, Ok(200..300)),
                    "the proxy's forwarded push failed: {status:?}"
                );
            }
        }
        serde_json::to_vec(&v).expect("JSON")
    }

    /// Rewrites any other answer.
    fn tamper(&self, method: &Method, path: &str, answer: Vec<u8>) -> Vec<u8> {
        let Ok(mut v) = serde_json::from_slice::<Value>(&answer) else {
            return answer;
        };
        if self.breaks(Breakage::HealthWithoutVersion)
            && method == Method::GET
            && path == "/health"
            && let Some(o) = v.as_object_mut()
        {
            o.remove("version");
        }
        if self.breaks(Breakage::NoNoop)
            && method == Method::POST
            && (path == "/api/v1/ack" || path == "/api/v1/ack/batch")
        {
            for r in v.as_array_mut().into_iter().flatten() {
                r["noop"] = json!(false);
            }
        }
        serde_json::to_vec(&v).expect("JSON")
    }

    /// An answer in place of the broker's, for a request this proxy refuses.
    fn refuse(&self, method: &Method, path: &str, body: &[u8]) -> Option<Response> {
        if method != Method::POST {
            return None;
        }
        if self.breaks(Breakage::PositionsUnknown) {
            let only_positions = path == "/api/v1/transaction"
                && serde_json::from_slice::<Value>(body).ok().is_some_and(|b| {
                    b.get("positions").is_some()
                        && b.get("operations").is_none()
                        && b.get("kv").is_none()
                        && b.get("timers").is_none()
                });
            if only_positions {
                let body = json!({"error": "transaction requires an operations array (or a top-level kv/timers array)", "reason": "bad_request"});
                return Some((StatusCode::BAD_REQUEST, axum::Json(body)).into_response());
            }
            if path.starts_with("/api/v1/consumer-groups/") && path.ends_with("/seek") {
                let body = json!({"error": "Not Found", "code": "no_such_route"});
                return Some((StatusCode::NOT_FOUND, axum::Json(body)).into_response());
            }
            return None;
        }
        if !self.breaks(Breakage::RefusePositions) {
            return None;
        }
        let positions = path == "/api/v1/transaction"
            && serde_json::from_slice::<Value>(body)
                .ok()
                .is_some_and(|b| b.get("positions").is_some());
        let seek = path.starts_with("/api/v1/consumer-groups/") && path.ends_with("/seek");
        (positions || seek).then(|| {
            let body = json!({"error": "positions are not supported here", "code": "bad_request"});
            (StatusCode::BAD_REQUEST, axum::Json(body)).into_response()
        })
    }
}

/// Every pushed item of a transaction body (inline ones too).
fn pushed_items(body: &Value) -> Vec<Value> {
    let mut items = Vec::new();
    for op in body["operations"].as_array().into_iter().flatten() {
        if op["type"] != json!("push") {
            continue;
        }
        match op["items"].as_array() {
            Some(list) => items.extend(list.iter().cloned()),
            None => {
                let mut item = op.clone();
                if let Some(o) = item.as_object_mut() {
                    o.remove("type");
                }
                items.push(item);
            }
        }
    }
    items
}

async fn forward(
    State(p): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if p.breaks(Breakage::Slow) {
        tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    }
    if let Some(refused) = p.refuse(&method, uri.path(), &body) {
        return refused;
    }
    let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let m = reqwest::Method::from_bytes(method.as_str().as_bytes()).expect("a method");
    let mut req = p.http.request(m, format!("{}{path}", p.upstream));
    for name in [header::CONTENT_TYPE, header::AUTHORIZATION] {
        if let Some(v) = headers.get(&name).and_then(|v| v.to_str().ok()) {
            req = req.header(name.as_str(), v);
        }
    }
    let res = match req.body(body.to_vec()).send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = StatusCode::from_u16(res.status().as_u16()).expect("a status");
    let mut answer = res.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    if method == Method::POST && uri.path() == "/api/v1/transaction" {
        answer = p.tamper_txn(&body, answer).await;
    } else {
        answer = p.tamper(&method, uri.path(), answer);
    }
    let mut out = Response::new(Body::from(answer));
    *out.status_mut() = status;
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    out
}

/// Starts a proxy to `upstream` that breaks every rule of `breaks`; answers its URL.
pub async fn start_proxy(upstream: &str, breaks: &[Breakage]) -> String {
    let state = Arc::new(Proxy {
        upstream: upstream.trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        breaks: breaks.to_vec(),
    });
    let app = Router::new().fallback(forward).with_state(state);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("the proxy serves");
    });
    format!("http://{addr}")
}

/// A web server that is not a Queen broker: `GET /health` is a file (200, `ok`), a
/// POST is 501 and any other path a 404 page, as `python3 -m http.server` serving a
/// folder with a `health` file answers.
pub async fn start_not_queen() -> String {
    async fn answer(method: Method, uri: Uri) -> Response {
        match (method, uri.path()) {
            (Method::GET, "/health") => (StatusCode::OK, "ok\n").into_response(),
            (Method::GET | Method::HEAD, _) => (
                StatusCode::NOT_FOUND,
                "<html><body>404 File not found</body></html>",
            )
                .into_response(),
            _ => (
                StatusCode::NOT_IMPLEMENTED,
                "<!DOCTYPE HTML>\n<html lang=\"en\">\n    <head>\n        <title>Error response</title>\n    </head>\n    <body>501 Unsupported method</body>\n</html>\n",
            )
                .into_response(),
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        axum::serve(listener, Router::new().fallback(answer))
            .await
            .expect("serves");
    });
    format!("http://{addr}")
}

/// A TCP proxy to `upstream` that dies after `after`, as a broker killed mid-run does:
/// from then on it cuts every open connection and closes each new one unanswered.
pub async fn start_dying_proxy(upstream: &str, after: std::time::Duration) -> String {
    let target = upstream
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_string();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    let (dead_tx, dead) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let _ = dead_tx.send(true);
        // Keep the sender (and so the receivers' state) for the rest of the test.
        std::future::pending::<()>().await;
    });
    tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let mut dead = dead.clone();
            if *dead.borrow() {
                drop(inbound);
                continue;
            }
            let target = target.clone();
            tokio::spawn(async move {
                let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                    return;
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = dead.wait_for(|d| *d) => {}
                }
            });
        }
    });
    format!("http://{addr}")
}

/// A URL where nothing listens (a port bound, then freed).
pub fn unreachable_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("an address").port();
    drop(l);
    format!("http://127.0.0.1:{port}")
}

/// What a run of the binary did.
pub struct Ran {
    /// Its exit code.
    pub code: Option<i32>,
    /// Its standard output.
    pub stdout: String,
    /// Its standard error.
    pub stderr: String,
}

/// Runs the `queen-conformance` binary with `args` (no `QUEEN_*` environment).
pub async fn run_binary(args: &[&str]) -> Ran {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_queen-conformance"))
        .args(args)
        .env_remove("QUEEN_URL")
        .env_remove("QUEEN_TOKEN")
        .env_remove("QUEEN_CONFORMANCE_CASES")
        .output()
        .await
        .expect("the binary runs");
    Ran {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// A fresh folder under the target's temporary directory.
pub fn scratch(what: &str) -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("{what}-{}", uuid::Uuid::now_v7().simple()));
    std::fs::create_dir_all(&dir).expect("a scratch folder");
    dir
}

pub mod replay;
