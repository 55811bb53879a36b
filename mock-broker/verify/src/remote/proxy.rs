//! The fault proxy of a check against a broker URL: an HTTP/1 server on an ephemeral
//! local port that the worker's replicas talk to, forwarding each call to the broker and
//! doing to it what the schedule says.
//!
//! It mirrors the request hook of an in-process run (`run.rs`, `EpochHook`): each call
//! from a replica (told apart by its user agent, `queen-verify/replica-N`) is counted on
//! its route, gets the schedule's fault for that ordinal, and is recorded in the trace
//! with the status it got; the verifier's own client (`queen-verify/setup`) is neither
//! faulted nor counted. The faults are the ones a proxy can make: a 503 before
//! forwarding, a 503 or a dropped connection after the broker answered, a delay, a 429
//! with `Retry-After`, a worker restart (the answer dropped, then the replica cancelled
//! and started again by the run's loop), and a lease expiry in real time (the call held
//! past the lease, then forwarded). A broker restart needs the broker's process: a
//! remote run does not draw it, and skips it in a schedule that names it.
//!
//! Two rewrites keep a schedule's waits short: a pop's `leaseSeconds` is capped at the
//! check's lease, and so is a lease extension's `seconds` (see `Broker::lease`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper::header::{self, HeaderMap, HeaderValue};
use hyper::http::uri::{Authority, PathAndQuery, Scheme};
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::client::legacy::Client as HttpClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::reset::KnownKeys;
use crate::report::{Event, TraceCall, TraceEntry};
use crate::run::{REPLICA_AGENT, SETUP_AGENT, is_background};
use crate::schedule::{Fault, FaultKind, Route, Schedule};

/// The fault kinds only an in-process broker can make, with why: a remote check never
/// draws them and skips them in a schedule that names them. (A lease expiry is made
/// from outside by holding the call past the lease before forwarding it.)
pub(crate) const IN_PROCESS_ONLY: [(FaultKind, &str); 1] = [(
    FaultKind::BrokerRestart,
    "broker-restart (needs the broker's process)",
)];

/// The broker by URL, through a plain HTTP client of the proxy's own: the calls the
/// proxy forwards, and the few reads and resets the SDK has no call for.
#[derive(Clone)]
pub(crate) struct Upstream {
    client: HttpClient<HttpConnector, Full<Bytes>>,
    scheme: Scheme,
    authority: Authority,
    /// The URL's path, without its trailing `/` (`""` for a broker at the root).
    prefix: String,
    token: Option<String>,
}

/// Headers that belong to one connection, not to the call: never forwarded.
const HOP_BY_HOP: [header::HeaderName; 8] = [
    header::CONNECTION,
    header::TRANSFER_ENCODING,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::PROXY_AUTHORIZATION,
    header::HOST,
    header::CONTENT_LENGTH,
];

fn copy_headers(from: &HeaderMap, to: &mut HeaderMap) {
    for (k, v) in from {
        if !HOP_BY_HOP.contains(k) && k.as_str() != "keep-alive" {
            to.append(k.clone(), v.clone());
        }
    }
}

impl Upstream {
    /// A client for the broker at `url` (`http://host:port`, optionally with a path).
    pub(crate) fn new(url: &str, token: Option<String>) -> Result<Upstream, String> {
        let uri: Uri = url
            .trim_end_matches('/')
            .parse()
            .map_err(|e| format!("the broker URL {url:?} does not parse: {e}"))?;
        let scheme = uri.scheme().cloned().unwrap_or(Scheme::HTTP);
        if scheme != Scheme::HTTP {
            return Err(format!(
                "the broker URL {url:?} is not http://: the fault proxy forwards plain HTTP only"
            ));
        }
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| format!("the broker URL {url:?} names no host"))?;
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        connector.set_connect_timeout(Some(Duration::from_secs(5)));
        Ok(Upstream {
            client: HttpClient::builder(TokioExecutor::new()).build(connector),
            scheme,
            authority,
            prefix: uri.path().trim_end_matches('/').to_string(),
            token,
        })
    }

    /// The broker's base URL, for messages.
    pub(crate) fn base(&self) -> String {
        format!("{}://{}{}", self.scheme, self.authority, self.prefix)
    }

    fn uri(&self, path_and_query: &str) -> Result<Uri, String> {
        let pq: PathAndQuery = format!("{}{path_and_query}", self.prefix)
            .parse()
            .map_err(|e| format!("the path {path_and_query:?} does not parse: {e}"))?;
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(pq)
            .build()
            .map_err(|e| e.to_string())
    }

    /// Sends one call and reads its whole answer.
    async fn send(
        &self,
        method: Method,
        path_and_query: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<Response<Bytes>, String> {
        let mut req = Request::builder()
            .method(method)
            .uri(self.uri(path_and_query)?)
            .body(Full::new(body))
            .map_err(|e| e.to_string())?;
        copy_headers(headers, req.headers_mut());
        let res = self
            .client
            .request(req)
            .await
            .map_err(|e| format!("forwarding to the broker: {e}"))?;
        let (parts, body) = res.into_parts();
        let bytes = body
            .collect()
            .await
            .map_err(|e| format!("reading the broker's answer: {e}"))?
            .to_bytes();
        Ok(Response::from_parts(parts, bytes))
    }

    /// A JSON call of the verifier's own (with the check's token): answers the decoded
    /// body of a 2xx, or says what went wrong.
    pub(crate) async fn json(
        &self,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Value, String> {
        let mut headers = HeaderMap::new();
        headers.insert(header::USER_AGENT, HeaderValue::from_static(SETUP_AGENT));
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if let Some(t) = &self.token {
            let v = HeaderValue::from_str(&format!("Bearer {t}"))
                .map_err(|_| "the token is not a valid header value".to_string())?;
            headers.insert(header::AUTHORIZATION, v);
        }
        let bytes = match body {
            Some(b) => Bytes::from(serde_json::to_vec(b).map_err(|e| e.to_string())?),
            None => Bytes::new(),
        };
        let res = self.send(method.clone(), path, &headers, bytes).await?;
        let status = res.status();
        let text = String::from_utf8_lossy(res.body()).into_owned();
        if !status.is_success() {
            return Err(format!("{method} {path} answered {status}: {text}"));
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text)
            .map_err(|e| format!("{method} {path} answered a body that is not JSON ({e}): {text}"))
    }
}

/// A request to the run's loop from inside a call.
pub(crate) enum Action {
    /// Cancel replica N and start it again.
    RestartWorker(usize),
}

#[derive(Default)]
struct Book {
    counts: HashMap<Route, u32>,
    trace: Vec<TraceEntry>,
    in_flight: usize,
    faults_hit: usize,
}

/// The proxy's shared state: the schedule, the trace, the lease cap.
pub(crate) struct Control {
    schedule: Schedule,
    /// Faults are done only while armed: a run disarms before stopping the worker.
    armed: AtomicBool,
    book: Mutex<Book>,
    actions: mpsc::UnboundedSender<Action>,
    lease_secs: u64,
    /// Where the KV keys a replica writes are noted, for the resets that follow.
    keys: Arc<KnownKeys>,
}

impl Control {
    /// The proxy's state for one run under `schedule`, capping leases at `lease` and
    /// noting in `keys` the KV keys the replicas write.
    pub(crate) fn new(
        schedule: Schedule,
        lease: Duration,
        actions: mpsc::UnboundedSender<Action>,
        keys: Arc<KnownKeys>,
    ) -> Arc<Control> {
        Arc::new(Control {
            schedule,
            armed: AtomicBool::new(true),
            book: Mutex::default(),
            actions,
            lease_secs: lease.as_secs().max(1),
            keys,
        })
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        self.book.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records an act of the verifier in the trace.
    pub(crate) fn event(&self, e: Event) {
        self.book().trace.push(TraceEntry::Event(e));
    }

    /// No more faults from now on.
    pub(crate) fn disarm(&self) {
        self.armed.store(false, Ordering::SeqCst);
    }

    /// Calls under way that hold a step (long-polls and lease renewals left out).
    pub(crate) fn in_flight(&self) -> usize {
        self.book().in_flight
    }

    /// The trace and the faults done, taken out at the end of the run.
    pub(crate) fn take(&self) -> (Vec<TraceEntry>, usize) {
        let mut book = self.book();
        (std::mem::take(&mut book.trace), book.faults_hit)
    }
}

/// Which replica sent a call: `None` for the verifier's own client (let through, not
/// counted), `Some(None)` for a client the verifier did not make.
fn replica_of(headers: &HeaderMap) -> Option<Option<usize>> {
    match headers
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        Some(SETUP_AGENT) => None,
        Some(ua) => Some(ua.strip_prefix(REPLICA_AGENT).and_then(|n| n.parse().ok())),
        None => Some(None),
    }
}

/// A pop's query with its `leaseSeconds` capped at `cap` (added when absent, so a queue
/// the check did not configure is held as briefly).
fn cap_pop_lease(query: Option<&str>, cap: u64) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut seen = false;
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        match pair.split_once('=') {
            Some(("leaseSeconds", v)) => {
                seen = true;
                let asked = v.parse::<u64>().unwrap_or(cap);
                parts.push(format!("leaseSeconds={}", asked.min(cap)));
            }
            _ => parts.push(pair.to_string()),
        }
    }
    if !seen {
        parts.push(format!("leaseSeconds={cap}"));
    }
    parts.join("&")
}

/// A lease extension's body with its `seconds` capped at `cap` (the broker's default,
/// 60, when absent). A body that is not a JSON object is forwarded as it is.
fn cap_extension(body: &Bytes, cap: u64) -> Bytes {
    let mut v: Value = if body.iter().all(u8::is_ascii_whitespace) {
        json!({})
    } else {
        match serde_json::from_slice(body) {
            Ok(v) => v,
            Err(_) => return body.clone(),
        }
    };
    let Some(obj) = v.as_object_mut() else {
        return body.clone();
    };
    let asked = obj.get("seconds").and_then(Value::as_u64).unwrap_or(60);
    obj.insert("seconds".into(), json!(asked.min(cap)));
    serde_json::to_vec(&v).map_or_else(|_| body.clone(), Bytes::from)
}

type ProxyBody = BoxBody<Bytes, io::Error>;

fn full(bytes: Bytes) -> ProxyBody {
    Full::new(bytes).map_err(|never| match never {}).boxed()
}

/// An error answer in the broker's shape (`{error, code}`), as the harness makes it.
fn error_answer(
    status: StatusCode,
    code: &str,
    text: &str,
    retry_after: Option<u64>,
) -> Response<ProxyBody> {
    let body = json!({ "error": text, "code": code }).to_string();
    let mut res = Response::new(full(Bytes::from(body)));
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let Some(s) = retry_after {
        res.headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(s));
    }
    res
}

/// A body that fails at once: the server aborts the connection mid-answer, so the
/// client gets no complete response (the harness's `CommitThenDrop` does the same).
struct Dropped;

impl Body for Dropped {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        Poll::Ready(Some(Err(io::Error::other(
            "injected fault: connection dropped",
        ))))
    }
}

fn dropped(status: StatusCode) -> Response<ProxyBody> {
    let mut res = Response::new(Dropped.boxed());
    *res.status_mut() = status;
    res.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    res
}

fn relay(answer: Response<Bytes>) -> Response<ProxyBody> {
    let (parts, body) = answer.into_parts();
    let mut res = Response::new(full(body));
    *res.status_mut() = parts.status;
    copy_headers(&parts.headers, res.headers_mut());
    res
}

/// Marks a call's trace entry with its status and counts it out of flight, also when
/// the call is cancelled (its client went away): then its status stays unknown.
struct Open<'a> {
    control: &'a Control,
    idx: usize,
    background: bool,
}

impl Open<'_> {
    fn finish(self, status: u16) {
        if let Some(TraceEntry::Call(c)) = self.control.book().trace.get_mut(self.idx) {
            c.status = Some(status);
        }
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        if !self.background {
            let mut book = self.control.book();
            book.in_flight = book.in_flight.saturating_sub(1);
        }
    }
}

/// Handles one call: forwards it, doing the schedule's fault.
async fn handle(
    req: Request<Incoming>,
    control: Arc<Control>,
    upstream: Upstream,
) -> Result<Response<ProxyBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let body = match body.collect().await {
        Ok(b) => b.to_bytes(),
        Err(e) => {
            return Ok(error_answer(
                StatusCode::BAD_REQUEST,
                "bad_request",
                &format!("the fault proxy could not read the request body: {e}"),
                None,
            ));
        }
    };
    let path = parts.uri.path().to_string();
    let route = Route::of(&path);
    let method = parts.method.clone();
    let Some(replica) = replica_of(&parts.headers) else {
        // The verifier's own calls: through, untouched and uncounted.
        let pq = parts.uri.path_and_query().map_or("/", PathAndQuery::as_str);
        return Ok(upstream
            .send(method, pq, &parts.headers, body)
            .await
            .map_or_else(
                |e| error_answer(StatusCode::BAD_GATEWAY, "bad_gateway", &e, None),
                relay,
            ));
    };

    // Noted before the call is faulted or forwarded: a key that may have been
    // written is one the next reset deletes (a delete of a key not there is harmless).
    control.keys.note_call(&method, &path, &body);

    // Leases as short as the check's, so what a lost answer leaves comes back soon.
    let (pq, body) = match route {
        Route::Pop => (
            format!(
                "{path}?{}",
                cap_pop_lease(parts.uri.query(), control.lease_secs)
            ),
            body,
        ),
        Route::LeaseExtend => (
            parts
                .uri
                .path_and_query()
                .map_or(path.clone(), |p| p.to_string()),
            cap_extension(&body, control.lease_secs),
        ),
        _ => (
            parts
                .uri
                .path_and_query()
                .map_or(path.clone(), |p| p.to_string()),
            body,
        ),
    };

    let (fault, open, nth) = {
        let mut book = control.book();
        let n = {
            let n = book.counts.entry(route).or_default();
            *n += 1;
            *n
        };
        let named = if control.armed.load(Ordering::SeqCst) {
            control.schedule.fault_for(route, n)
        } else {
            None
        };
        let skipped = named.and_then(|f| IN_PROCESS_ONLY.iter().find(|(k, _)| *k == f.kind()));
        if let Some((_, why)) = skipped {
            book.trace.push(TraceEntry::Event(Event::Skipped {
                what: format!("{route}#{n}: {why}"),
            }));
        }
        let fault = named.filter(|_| skipped.is_none());
        if fault.is_some() {
            book.faults_hit += 1;
        }
        let idx = book.trace.len();
        book.trace.push(TraceEntry::Call(TraceCall {
            broker_life: 0,
            replica,
            method: method.to_string(),
            path: path.clone(),
            route,
            nth: n,
            fault,
            status: None,
        }));
        let background = is_background(route);
        if !background {
            book.in_flight += 1;
        }
        (
            fault,
            Open {
                control: &control,
                idx,
                background,
            },
            n,
        )
    };

    let gateway = |e: String| error_answer(StatusCode::BAD_GATEWAY, "bad_gateway", &e, None);
    let res = match fault {
        None => upstream
            .send(method, &pq, &parts.headers, body)
            .await
            .map_or_else(gateway, relay),
        Some(Fault::Delay(d)) => {
            tokio::time::sleep(d).await;
            upstream
                .send(method, &pq, &parts.headers, body)
                .await
                .map_or_else(gateway, relay)
        }
        Some(Fault::Unavailable) => error_answer(
            StatusCode::SERVICE_UNAVAILABLE,
            "retry",
            "injected fault: unavailable",
            Some(1),
        ),
        Some(Fault::Overloaded { retry_after_secs }) => error_answer(
            StatusCode::TOO_MANY_REQUESTS,
            "overloaded",
            "injected fault: overloaded",
            Some(retry_after_secs),
        ),
        Some(Fault::CommitThenUnavailable) => {
            // The broker answered: what the call wrote is committed before we lie.
            match upstream.send(method, &pq, &parts.headers, body).await {
                Ok(_) => error_answer(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "retry",
                    "injected fault: committed, then unavailable",
                    None,
                ),
                Err(e) => gateway(e),
            }
        }
        Some(Fault::CommitThenDrop | Fault::WorkerRestart) => {
            match upstream.send(method, &pq, &parts.headers, body).await {
                Ok(answer) => dropped(answer.status()),
                Err(e) => gateway(e),
            }
        }
        // What the in-process run does with its clock, in real time: the call waits
        // until its batch's lease has lapsed (the proxy caps every lease at
        // `lease_secs`), so another replica can take the message meanwhile.
        Some(Fault::LeaseExpiry) => {
            let secs = control.lease_secs + 1;
            control.event(Event::Held {
                secs,
                why: format!("past the lease while {route}#{n} is in flight", n = nth),
            });
            tokio::time::sleep(Duration::from_secs(secs)).await;
            upstream
                .send(method, &pq, &parts.headers, body)
                .await
                .map_or_else(gateway, relay)
        }
        // Filtered out above (a remote run cannot do it): forwarded as it is.
        Some(Fault::BrokerRestart) => upstream
            .send(method, &pq, &parts.headers, body)
            .await
            .map_or_else(gateway, relay),
    };
    open.finish(res.status().as_u16());
    // Once the call has applied and its answer is gone, the replica that sent it is
    // cancelled and started again, as an in-process run does.
    if let (Some(Fault::WorkerRestart), Some(r)) = (fault, replica) {
        let _ = control.actions.send(Action::RestartWorker(r));
    }
    Ok(res)
}

/// Resolves once the proxy is shut down (at once if it already is).
async fn stopped(stop: &mut watch::Receiver<bool>) {
    // The value's guard is dropped here, never held across an await.
    let _ = stop.wait_for(|stopped| *stopped).await;
}

/// The proxy of one run, listening on an ephemeral local port until shut down.
pub(crate) struct Proxy {
    url: String,
    shutdown: watch::Sender<bool>,
    accept: JoinHandle<()>,
}

impl Proxy {
    /// Listens on `127.0.0.1:0` and forwards to `upstream` under `control`.
    pub(crate) async fn start(upstream: Upstream, control: Arc<Control>) -> io::Result<Proxy> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (shutdown, stop) = watch::channel(false);
        let accept = tokio::spawn(async move {
            let mut stop_accepting = stop.clone();
            loop {
                let stream = tokio::select! {
                    r = listener.accept() => match r {
                        Ok((s, _)) => s,
                        // A failed accept (too many files) ends no run: try again.
                        Err(_) => {
                            tokio::time::sleep(Duration::from_millis(10)).await;
                            continue;
                        }
                    },
                    () = stopped(&mut stop_accepting) => return,
                };
                let _ = stream.set_nodelay(true);
                let (control, upstream) = (Arc::clone(&control), upstream.clone());
                let mut stop = stop.clone();
                tokio::spawn(async move {
                    let service =
                        service_fn(move |req| handle(req, Arc::clone(&control), upstream.clone()));
                    let conn = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service);
                    // At shutdown a connection is dropped with what it serves: a
                    // long-poll the worker left behind ends here.
                    tokio::select! {
                        _ = conn => {}
                        () = stopped(&mut stop) => {}
                    }
                });
            }
        });
        Ok(Proxy {
            url,
            shutdown,
            accept,
        })
    }

    /// Its base URL, for the replicas' clients.
    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Stops accepting and drops every connection.
    pub(crate) async fn shutdown(self) {
        let _ = self.shutdown.send(true);
        let _ = self.accept.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pops_lease_is_capped_and_added_when_absent() {
        assert_eq!(
            cap_pop_lease(Some("batch=10&leaseSeconds=60&wait=true"), 2),
            "batch=10&leaseSeconds=2&wait=true"
        );
        assert_eq!(cap_pop_lease(Some("leaseSeconds=1"), 2), "leaseSeconds=1");
        assert_eq!(cap_pop_lease(None, 3), "leaseSeconds=3");
    }

    #[test]
    fn an_extensions_seconds_are_capped() {
        let capped = cap_extension(&Bytes::from_static(br#"{"seconds":60}"#), 2);
        assert_eq!(
            serde_json::from_slice::<Value>(&capped).unwrap(),
            json!({"seconds": 2})
        );
        let empty = cap_extension(&Bytes::new(), 2);
        assert_eq!(
            serde_json::from_slice::<Value>(&empty).unwrap(),
            json!({"seconds": 2})
        );
        let odd = Bytes::from_static(b"[1]");
        assert_eq!(cap_extension(&odd, 2), odd);
    }

    #[test]
    fn the_verifiers_own_calls_are_not_counted() {
        let mut h = HeaderMap::new();
        h.insert(header::USER_AGENT, HeaderValue::from_static(SETUP_AGENT));
        assert_eq!(replica_of(&h), None);
        h.insert(
            header::USER_AGENT,
            HeaderValue::from_static("queen-verify/replica-3"),
        );
        assert_eq!(replica_of(&h), Some(Some(3)));
        assert_eq!(replica_of(&HeaderMap::new()), Some(None));
    }
}
