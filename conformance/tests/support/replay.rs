//! Recorded brokers: a proxy that records every exchange with a real broker, and a
//! server that answers with those recordings, so a test can probe Queen v0 or
//! queen-engine without PostgreSQL.
//!
//! The probe names its queue, group and stream query afresh on every run (`cf-…`) and
//! reads ids the broker minted (partition ids, leases), so a request is matched to a
//! recording by its shape: its method and its path with each such name or UUID
//! replaced by a placeholder. Recordings of one shape answer in the order they were
//! made (the probe's two acks share a route); once they are used up, the last one
//! answers again (a broker asked the same thing twice answers the same).

use std::path::Path;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One request and the broker's answer, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Recorded {
    /// `GET`, `POST`, `DELETE`.
    pub method: String,
    /// The path and query, as sent.
    pub path: String,
    /// The request body (JSON), when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Value>,
    /// The answer's status.
    pub status: u16,
    /// The answer's `Content-Type`, when it had one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_type: Option<String>,
    /// The answer's body, byte for byte (as text).
    pub body: String,
}

/// A recorded broker: what it is, and the exchanges.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Recording {
    /// The broker and how it ran.
    pub broker: String,
    /// How the recording was made.
    pub how: String,
    /// The exchanges, in order.
    pub exchanges: Vec<Recorded>,
}

impl Recording {
    /// Reads a fixture of `tests/fixtures/`.
    pub fn fixture(name: &str) -> Recording {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures")
            .join(name);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{} is not a recording: {e}", path.display()))
    }
}

/// The shape of a path and query: each segment or query value that is one of the
/// probe's names (`cf-…`) or a UUID becomes a placeholder.
pub fn shape(method: &str, path_and_query: &str) -> String {
    let part = |s: &str| -> String {
        if s.starts_with("cf-") {
            "{name}".into()
        } else if uuid::Uuid::parse_str(s).is_ok() {
            "{id}".into()
        } else {
            s.into()
        }
    };
    let (path, query) = path_and_query
        .split_once('?')
        .unwrap_or((path_and_query, ""));
    let path: Vec<String> = path.split('/').map(part).collect();
    let mut out = format!("{method} {}", path.join("/"));
    if !query.is_empty() {
        let query: Vec<String> = query
            .split('&')
            .map(|kv| match kv.split_once('=') {
                Some((k, v)) => format!("{k}={}", part(v)),
                None => kv.to_string(),
            })
            .collect();
        out.push('?');
        out.push_str(&query.join("&"));
    }
    out
}

struct Recorder {
    upstream: String,
    http: reqwest::Client,
    log: Arc<Mutex<Vec<Recorded>>>,
}

async fn record(
    State(rec): State<Arc<Recorder>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri
        .path_and_query()
        .map_or("/", |pq| pq.as_str())
        .to_string();
    let m = reqwest::Method::from_bytes(method.as_str().as_bytes()).expect("a method");
    let mut req = rec.http.request(m, format!("{}{path}", rec.upstream));
    for name in [header::CONTENT_TYPE, header::AUTHORIZATION] {
        if let Some(v) = headers.get(&name).and_then(|v| v.to_str().ok()) {
            req = req.header(name.as_str(), v);
        }
    }
    let res = match req.body(body.to_vec()).send().await {
        Ok(r) => r,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = res.status().as_u16();
    let content_type = res
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let answer = res.bytes().await.map(|b| b.to_vec()).unwrap_or_default();
    rec.log.lock().expect("the log").push(Recorded {
        method: method.to_string(),
        path,
        request: serde_json::from_slice(&body).ok(),
        status,
        content_type: content_type.clone(),
        body: String::from_utf8_lossy(&answer).into_owned(),
    });
    respond(status, content_type.as_deref(), answer)
}

fn respond(status: u16, content_type: Option<&str>, body: Vec<u8>) -> Response {
    let mut out = Response::new(Body::from(body));
    *out.status_mut() = StatusCode::from_u16(status).expect("a status");
    if let Some(ct) = content_type.and_then(|ct| header::HeaderValue::from_str(ct).ok()) {
        out.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    out
}

/// Starts a proxy to `upstream` that records every exchange; answers its URL and the
/// log.
pub async fn start_recorder(upstream: &str) -> (String, Arc<Mutex<Vec<Recorded>>>) {
    let log = Arc::new(Mutex::new(Vec::new()));
    let state = Arc::new(Recorder {
        upstream: upstream.trim_end_matches('/').to_string(),
        http: reqwest::Client::new(),
        log: log.clone(),
    });
    (
        serve(Router::new().fallback(record).with_state(state)).await,
        log,
    )
}

struct Replay {
    exchanges: Vec<(String, Recorded)>,
    used: Vec<bool>,
    misses: Vec<String>,
}

/// What a replaying server was asked that its recording does not hold.
#[derive(Clone)]
pub struct Misses(Arc<Mutex<Replay>>);

impl Misses {
    /// The requests (method and path) no recording answered.
    pub fn list(&self) -> Vec<String> {
        self.0.lock().expect("the replay").misses.clone()
    }
}

async fn replay(State(rp): State<Arc<Mutex<Replay>>>, method: Method, uri: Uri) -> Response {
    let path = uri.path_and_query().map_or("/", |pq| pq.as_str());
    let key = shape(method.as_str(), path);
    let mut rp = rp.lock().expect("the replay");
    let fresh = (0..rp.exchanges.len()).find(|&i| !rp.used[i] && rp.exchanges[i].0 == key);
    let found = fresh.or_else(|| rp.exchanges.iter().rposition(|(k, _)| *k == key));
    match found {
        Some(i) => {
            rp.used[i] = true;
            let x = &rp.exchanges[i].1;
            respond(
                x.status,
                x.content_type.as_deref(),
                x.body.as_bytes().to_vec(),
            )
        }
        None => {
            rp.misses.push(format!("{method} {path}"));
            (StatusCode::INTERNAL_SERVER_ERROR, "not recorded").into_response()
        }
    }
}

/// Starts a server that answers with `recording`; answers its URL and what it could
/// not answer.
pub async fn start_replay(recording: &Recording) -> (String, Misses) {
    let exchanges: Vec<(String, Recorded)> = recording
        .exchanges
        .iter()
        .map(|x| (shape(&x.method, &x.path), x.clone()))
        .collect();
    let state = Arc::new(Mutex::new(Replay {
        used: vec![false; exchanges.len()],
        exchanges,
        misses: Vec::new(),
    }));
    let misses = Misses(state.clone());
    (
        serve(Router::new().fallback(replay).with_state(state)).await,
        misses,
    )
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("an address");
    tokio::spawn(async move {
        axum::serve(listener, app).await.expect("the server serves");
    });
    format!("http://{addr}")
}
