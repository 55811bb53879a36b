//! Faults injected into the HTTP layer, scoped to a route and to the next N calls.

use std::sync::Mutex;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;

/// What an injected fault does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer 503 with this `code` (`retry`, `no_leader` or `timeout`) without applying.
    Unavailable(&'static str),
    /// Apply and commit, then answer 503 `retry` instead of the real answer.
    CommitThenUnavailable,
    /// Apply and commit, then drop the connection without a complete answer.
    CommitThenDrop,
    /// Wait, then handle the request normally.
    Delay(Duration),
    /// Answer 429 `overloaded` with `Retry-After` (seconds) without applying.
    Overloaded {
        /// Seconds to wait.
        retry_after: u64,
    },
}

/// A fault to inject.
///
/// ```
/// use queen_mock_broker::harness::Fault;
/// let f = Fault::commit_then_drop().on("/api/v1/transaction").times(1);
/// assert_eq!(f.remaining(), 1);
/// ```
#[derive(Debug, Clone)]
pub struct Fault {
    kind: FaultKind,
    route: Option<String>,
    method: Option<String>,
    times: usize,
}

impl Fault {
    /// A fault of `kind`, on every route, for the next call.
    pub fn new(kind: FaultKind) -> Self {
        Fault {
            kind,
            route: None,
            method: None,
            times: 1,
        }
    }

    /// 503 `retry` before applying.
    pub fn unavailable() -> Self {
        Self::new(FaultKind::Unavailable("retry"))
    }

    /// 503 `no_leader` before applying.
    pub fn no_leader() -> Self {
        Self::new(FaultKind::Unavailable("no_leader"))
    }

    /// 503 `timeout` before applying.
    pub fn timeout() -> Self {
        Self::new(FaultKind::Unavailable("timeout"))
    }

    /// Commit, then answer 503.
    pub fn commit_then_unavailable() -> Self {
        Self::new(FaultKind::CommitThenUnavailable)
    }

    /// Commit, then drop the connection: the answer is lost.
    pub fn commit_then_drop() -> Self {
        Self::new(FaultKind::CommitThenDrop)
    }

    /// Delay the answer.
    pub fn delay(d: Duration) -> Self {
        Self::new(FaultKind::Delay(d))
    }

    /// 429 `overloaded` with `Retry-After`.
    pub fn overloaded(retry_after: u64) -> Self {
        Self::new(FaultKind::Overloaded { retry_after })
    }

    /// Only on paths starting with `route` (e.g. `/api/v1/transaction`).
    pub fn on(mut self, route: impl Into<String>) -> Self {
        self.route = Some(route.into());
        self
    }

    /// Only on requests with this method (`POST`, `GET`, ...).
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into().to_ascii_uppercase());
        self
    }

    /// For the next `n` matching calls (default 1).
    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }

    /// Matching calls it will still hit.
    pub fn remaining(&self) -> usize {
        self.times
    }

    fn matches(&self, method: &str, path: &str) -> bool {
        self.route
            .as_ref()
            .is_none_or(|r| path.starts_with(r.as_str()))
            && self.method.as_ref().is_none_or(|m| m == method)
    }
}

/// A fault that hit a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultHit {
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
    /// What was done to it.
    pub kind: FaultKind,
}

/// The injected faults and the record of the calls they hit.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
    hits: Mutex<Vec<FaultHit>>,
}

impl Faults {
    /// Adds a fault; the oldest matching fault is applied first.
    pub fn inject(&self, fault: Fault) {
        if fault.times > 0 {
            lock(&self.rules).push(fault);
        }
    }

    /// Removes every pending fault (the hits stay recorded).
    pub fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// Faults not yet used up.
    pub fn pending(&self) -> usize {
        lock(&self.rules).len()
    }

    /// Every call a fault hit, in order.
    pub fn hits(&self) -> Vec<FaultHit> {
        lock(&self.hits).clone()
    }

    /// Takes one use of the first fault matching the call.
    pub(crate) fn take(&self, method: &str, path: &str) -> Option<FaultKind> {
        let mut rules = lock(&self.rules);
        let i = rules.iter().position(|f| f.matches(method, path))?;
        let kind = rules[i].kind;
        rules[i].times -= 1;
        if rules[i].times == 0 {
            rules.remove(i);
        }
        drop(rules);
        lock(&self.hits).push(FaultHit {
            method: method.to_string(),
            path: path.to_string(),
            kind,
        });
        Some(kind)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Carries out `kind` on the request.
pub(crate) async fn apply(kind: FaultKind, req: Request, next: Next) -> Response {
    match kind {
        FaultKind::Unavailable(code) => ApiError {
            retry_after: Some(1),
            ..ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                code,
                "injected fault: unavailable",
            )
        }
        .into_response(),
        FaultKind::Overloaded { retry_after } => {
            let mut res = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "overloaded",
                "injected fault: overloaded",
            )
            .into_response();
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(retry_after));
            res
        }
        FaultKind::Delay(d) => {
            tokio::time::sleep(d).await;
            next.run(req).await
        }
        FaultKind::CommitThenUnavailable => {
            // The handler runs to completion: the write is committed before we lie.
            let _ = next.run(req).await;
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "retry",
                "injected fault: committed, then unavailable",
            )
            .into_response()
        }
        FaultKind::CommitThenDrop => {
            let _ = next.run(req).await;
            // A body that fails at once: the server aborts the connection mid-answer,
            // so the client gets no complete response.
            let broken = futures::stream::once(async {
                Err::<Bytes, std::io::Error>(std::io::Error::other(
                    "injected fault: connection dropped",
                ))
            });
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(broken))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
    }
}
