//! The suite can fail: put a proxy in front of the reference broker that breaks one rule
//! of the spec, and the cases that check that rule must fail, with the request and the
//! broker's answer in the report; the same selection, run directly against the broker,
//! passes.
//!
//! The properties run with a fixed seed, the same one directly and through each proxy,
//! so both runs generate the same sequences and a failure through the proxy is the
//! proxy's doing.

use std::sync::Arc;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use queen_conformance::{Case, Report, RunConfig, Status, all_cases, run};
use queen_mock_broker::MockBroker;
use serde_json::{Value, json};

/// The rule cases every proxy below breaks.
const RULE_CASES: [&str; 2] = [
    "txn.push.duplicate.in-window",
    "txn.kv.precondition.failed-index",
];

/// The properties' seed, shared by the direct and the proxied runs.
const SEED: u64 = 1;

/// The one rule a proxy breaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Breakage {
    /// (a) Flips `success` of every transaction answer.
    FlipSuccess,
    /// (b) Drops `reason` from rollbacks.
    DropReason,
    /// (c) When a transaction rolls back, pushes its items anyway.
    ForwardRolledBack,
}

struct Proxy {
    upstream: String,
    http: reqwest::Client,
    breaks: Breakage,
}

impl Proxy {
    /// Rewrites a transaction's answer (and, for (c), lands its rolled-back pushes).
    async fn tamper(&self, request: &[u8], answer: Vec<u8>) -> Vec<u8> {
        let Ok(mut v) = serde_json::from_slice::<Value>(&answer) else {
            return answer;
        };
        let rolled_back = v["success"] == json!(false);
        match self.breaks {
            Breakage::FlipSuccess => {
                if let Some(b) = v["success"].as_bool() {
                    v["success"] = json!(!b);
                }
            }
            Breakage::DropReason => {
                if let (true, Some(o)) = (rolled_back, v.as_object_mut()) {
                    o.remove("reason");
                }
            }
            Breakage::ForwardRolledBack => {
                if rolled_back {
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
            }
        }
        serde_json::to_vec(&v).expect("JSON")
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
        answer = p.tamper(&body, answer).await;
    }
    let mut out = Response::new(Body::from(answer));
    *out.status_mut() = status;
    out.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    out
}

/// Starts a proxy to `upstream` that breaks `breaks`; answers its URL.
async fn start_proxy(upstream: &str, breaks: Breakage) -> String {
    let state = Arc::new(Proxy {
        upstream: upstream.trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        breaks,
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

/// The rule cases, and the properties when `props`.
fn selection(props: bool) -> Vec<Case> {
    let all = all_cases();
    for id in RULE_CASES {
        assert!(all.iter().any(|c| c.id == id), "the suite has no case {id}");
    }
    let chosen: Vec<Case> = all
        .into_iter()
        .filter(|c| RULE_CASES.contains(&c.id) || (props && c.id.starts_with("prop.")))
        .collect();
    if props {
        assert!(chosen.iter().filter(|c| c.id.starts_with("prop.")).count() >= 3);
    }
    chosen
}

fn config(url: &str) -> RunConfig {
    let mut cfg = RunConfig::new(url);
    cfg.seed = Some(SEED);
    cfg.prop_cases = 32;
    cfg
}

fn failure<'a>(report: &'a Report, id: &str) -> &'a queen_conformance::Failure {
    let row = report
        .results
        .iter()
        .find(|r| r.id == id)
        .unwrap_or_else(|| panic!("{id} did not run"));
    match &row.status {
        Status::Fail(f) => f,
        other => panic!(
            "{id} should fail under the proxy, got {other:?}\n{}",
            report.to_text()
        ),
    }
}

/// Runs the selection through a proxy that breaks `breaks`, and checks what failed.
async fn through(breaks: Breakage) -> Report {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let proxy = start_proxy(&broker.url(), breaks).await;
    let report = run(&config(&proxy), selection(true)).await;
    println!("{breaks:?}:\n{}", report.to_text());
    assert!(!report.ok());
    let failed = report.failed_ids();
    assert!(!failed.is_empty());
    for id in RULE_CASES {
        assert!(failed.contains(&id), "{id} passed under {breaks:?}");
    }
    // Every failure shows the request and the answer that showed it.
    for row in &report.results {
        if let Status::Fail(f) = &row.status {
            let x = f
                .exchange
                .as_ref()
                .unwrap_or_else(|| panic!("{}: a failure without its exchange", row.id));
            assert!(
                x.request.starts_with("POST /api/v1/") || x.request.starts_with("GET /api/v1/"),
                "{}: {}",
                row.id,
                x.request
            );
            assert!(x.status >= 200, "{}: status {}", row.id, x.status);
        }
    }
    broker.shutdown().await;
    report
}

fn prop_failures(report: &Report) -> Vec<(&str, &queen_conformance::Failure)> {
    report
        .results
        .iter()
        .filter(|r| r.id.starts_with("prop."))
        .filter_map(|r| match &r.status {
            Status::Fail(f) => Some((r.id.as_str(), f)),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_selection_passes_directly_against_the_broker() {
    let broker = MockBroker::start_in_memory().await.expect("a broker");
    let report = run(&config(&broker.url()), selection(true)).await;
    println!("{}", report.to_text());
    assert!(report.ok(), "failed directly: {:?}", report.failed_ids());
    assert_eq!(report.counts(), (RULE_CASES.len() + 3, 0, 0));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_flips_success_fails_the_suite() {
    let report = through(Breakage::FlipSuccess).await;
    // Every transaction verdict is wrong: every property trips on its first one.
    let props = prop_failures(&report);
    assert_eq!(props.len(), 3, "{}", report.to_text());
    for (id, f) in props {
        assert!(f.expected.contains("success"), "{id}: {}", f.expected);
        assert!(f.actual.contains("minimal failing sequence"), "{id}");
        let x = f.exchange.as_ref().expect("an exchange");
        assert_eq!(x.request, "POST /api/v1/transaction", "{id}");
        assert!(x.body.is_some(), "{id}: the request body");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_drops_the_reason_fails_the_suite() {
    let report = through(Breakage::DropReason).await;
    let f = failure(&report, "txn.push.duplicate.in-window");
    let x = f.exchange.as_ref().expect("an exchange");
    assert_eq!(x.request, "POST /api/v1/transaction");
    assert!(x.body.is_some());
    assert_eq!(x.status, 200);
    assert_eq!(x.answer["success"], json!(false), "{}", x.answer);
    assert!(x.answer.get("reason").is_none(), "{}", x.answer);
    let props = prop_failures(&report);
    assert_eq!(props.len(), 3, "{}", report.to_text());
    for (id, f) in props {
        assert!(f.expected.contains("reason"), "{id}: {}", f.expected);
        let x = f.exchange.as_ref().expect("an exchange");
        assert!(x.answer.get("reason").is_none(), "{id}: {}", x.answer);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_proxy_that_forwards_rolled_back_writes_fails_the_suite() {
    let report = through(Breakage::ForwardRolledBack).await;
    // The rollback itself looks right; what gives it away is the write that landed.
    for id in RULE_CASES {
        let f = failure(&report, id);
        assert!(f.exchange.is_some(), "{id}");
    }
    let props = prop_failures(&report);
    assert!(
        props.iter().any(|(id, _)| *id == "prop.model.queue"),
        "{}",
        report.to_text()
    );
    for (id, f) in props {
        assert!(f.actual.contains("minimal failing sequence"), "{id}");
    }
}
