//! The test harness: injected faults, a log of the requests received, inspection of
//! stored state without going through the public API, and waits on that state that need
//! no polling loop ([`MockBroker::wait_for`](crate::MockBroker::wait_for)).
//!
//! A [`MockBroker`](crate::MockBroker) carries one [`Harness`]; its HTTP layer consults
//! it on every request, so a test can make the next transaction's answer get lost after
//! its commit, and then check that the worker's retry applied nothing twice.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
//! use queen_mock_broker::harness::Fault;
//!
//! let broker = MockBroker::start_in_memory().await?;
//! let push = || {
//!     reqwest::Client::new()
//!         .post(format!("{}/api/v1/push", broker.url()))
//!         .json(&serde_json::json!({"items": [{"queue": "q", "payload": 1, "transactionId": "t-1"}]}))
//!         .send()
//! };
//! broker.faults().inject(Fault::commit_then_unavailable().on("/api/v1/push"));
//! assert_eq!(push().await?.status(), 503); // the answer is lost...
//! assert_eq!(push().await?.status(), 201); // ...so the client sends it again
//! assert_eq!(broker.requests().matching("/api/v1/push").len(), 2);
//! assert_eq!(broker.inspect().messages("q", DEFAULT_PARTITION)?.len(), 1); // stored once
//! broker.shutdown().await;
//! # Ok(())
//! # }
//! ```

mod faults;
mod hooks;
mod inspect;
mod log;
mod storage;
mod wait;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

pub use crate::engine::kv::KvRow;
pub use faults::{Fault, FaultHit, FaultKind, Faults};
pub use hooks::{CallInfo, HookFuture, Hooks, RequestHook};
pub use inspect::{InspectError, InspectedCursor, InspectedMessage, InspectedTimer, Inspector};
pub use log::{LoggedRequest, RequestLog};
pub(crate) use storage::FaultyBackend;
pub use storage::{StorageFault, StorageFaults};
pub use wait::WaitError;

/// The harness state shared with the HTTP layer. A [`MockBroker`](crate::MockBroker)
/// makes its own; to serve the harness in front of another router, give a clone to
/// [`layer`].
///
/// ```
/// use queen_mock_broker::harness::{Fault, Harness};
/// let harness = Harness::default();
/// let shared = harness.clone(); // clones share the faults and the log
/// shared.faults.inject(Fault::unavailable());
/// assert_eq!(harness.faults.pending(), 1);
/// assert!(harness.log.entries().is_empty());
/// ```
#[derive(Debug, Default, Clone)]
pub struct Harness {
    /// Injected faults and their hits.
    pub faults: Arc<Faults>,
    /// Every request received.
    pub log: Arc<RequestLog>,
    /// A [`RequestHook`] called around every request, if one is set.
    pub hooks: Arc<Hooks>,
}

/// The middleware: asks the [`RequestHook`], if one is set, for the call's fault, else takes a
/// matching injected fault, if any; applies it, and logs the request
/// with the status answered.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use axum::{Router, routing::get};
/// use queen_mock_broker::harness::{self, Fault, Harness};
/// let h = Harness::default();
/// h.faults.inject(Fault::unavailable());
/// let app: Router = Router::new()
///     .route("/ping", get(|| async { "pong" }))
///     .layer(axum::middleware::from_fn_with_state(h.clone(), harness::layer));
/// let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
/// let url = format!("http://{}/ping", listener.local_addr()?);
/// tokio::spawn(async move { axum::serve(listener, app).await });
/// assert_eq!(reqwest::get(&url).await?.status(), 503);
/// assert_eq!(reqwest::get(&url).await?.text().await?, "pong");
/// assert_eq!(h.log.entries().len(), 2);
/// # Ok(())
/// # }
/// ```
pub async fn layer(State(h): State<Harness>, req: Request, next: Next) -> Response {
    around(&h, req, |req| next.run(req)).await
}

/// What [`layer`] does, around `inner` (the rest of the call). The broker's own router
/// calls it from its one per-request middleware rather than adding [`layer`]: each
/// middleware layer of axum's costs a boxed future and a clone of the route per
/// request (see `http::gate`).
pub(crate) async fn around<F, Fut>(h: &Harness, req: Request, inner: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    // One copy of the path per call, for the log; the method is a cheap clone.
    let method = req.method().clone();
    let path: Box<str> = req.uri().path().into();
    // With a hook, `after` is called exactly once: with the status, or with 499 when
    // the call is dropped first (the client went away and the server cancelled it).
    let mut guard = h.hooks.current().map(|hook| AfterGuard {
        call: CallInfo {
            seq: h.hooks.next_seq(),
            method: method.to_string(),
            path: path.to_string(),
            user_agent: req
                .headers()
                .get(axum::http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string),
        },
        hook,
        fault: None,
        done: false,
    });
    let hooked = match &guard {
        Some(g) => g.hook.before(&g.call).await,
        None => None,
    };
    let fault = match hooked {
        Some(kind) => {
            h.faults.record_hit(method.as_str(), &path, kind);
            Some(kind)
        }
        None => h.faults.take(method.as_str(), &path),
    };
    if let Some(g) = &mut guard {
        g.fault = fault;
    }
    let res = match fault {
        Some(kind) => faults::apply(kind, req, inner).await,
        None => inner(req).await,
    };
    let status = res.status().as_u16();
    h.log.record(method, path, status, fault);
    if let Some(mut g) = guard {
        g.done = true;
        g.hook.after(&g.call, status, fault);
    }
    res
}

/// Tells the hook a call ended with 499 if it is dropped before its answer.
struct AfterGuard {
    hook: Arc<dyn RequestHook>,
    call: CallInfo,
    fault: Option<FaultKind>,
    done: bool,
}

impl Drop for AfterGuard {
    fn drop(&mut self) {
        if !self.done {
            self.hook.after(&self.call, 499, self.fault);
        }
    }
}
