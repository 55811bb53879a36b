//! Faults injected into the HTTP layer, scoped to a route and to the next N calls.

use std::sync::Mutex;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::http::error::ApiError;

/// What an injected fault does. Build a [`Fault`] of it with [`Fault::new`] or one of
/// the shorthands; the [`FaultHit`]s and [`LoggedRequest`](super::LoggedRequest)s
/// record it.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::MockBroker;
/// use queen_mock_broker::harness::{Fault, FaultKind};
/// let broker = MockBroker::start_in_memory().await?;
/// broker.faults().inject(Fault::new(FaultKind::Overloaded { retry_after: 2 }).on("/health"));
/// reqwest::get(format!("{}/health", broker.url())).await?;
/// assert_eq!(broker.faults().hits()[0].kind, FaultKind::Overloaded { retry_after: 2 });
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultKind {
    /// Answer 503 with this `code` (`retry`, `no_leader` or `timeout`) and
    /// `Retry-After: 1`, without applying.
    Unavailable(&'static str),
    /// Apply and commit, then answer 503 `retry` (without `Retry-After`) instead of the
    /// real answer.
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
    /// A fault of `kind`, on every route and method, for the next call.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use queen_mock_broker::harness::{Fault, FaultKind};
    /// let f = Fault::new(FaultKind::Delay(Duration::from_millis(200)));
    /// assert_eq!(f.remaining(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn new(kind: FaultKind) -> Self {
        Fault {
            kind,
            route: None,
            method: None,
            times: 1,
        }
    }

    /// 503 `retry` (with `Retry-After: 1`) before applying.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().on("/api/v1/push"));
    /// let push = || {
    ///     reqwest::Client::new()
    ///         .post(format!("{}/api/v1/push", broker.url()))
    ///         .json(&serde_json::json!({"items": [{"queue": "q", "payload": 1}]}))
    ///         .send()
    /// };
    /// let res = push().await?;
    /// assert_eq!(res.status(), 503);
    /// assert_eq!(res.headers()["retry-after"], "1");
    /// let body: serde_json::Value = res.json().await?;
    /// assert_eq!(body["code"], "retry");
    /// assert!(broker.inspect().messages("q", DEFAULT_PARTITION)?.is_empty()); // nothing applied
    /// assert_eq!(push().await?.status(), 201); // the fault was for one call
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn unavailable() -> Self {
        Self::new(FaultKind::Unavailable("retry"))
    }

    /// 503 `no_leader` (with `Retry-After: 1`) before applying.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::no_leader());
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert_eq!(res.status(), 503);
    /// assert_eq!(res.json::<serde_json::Value>().await?["code"], "no_leader");
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn no_leader() -> Self {
        Self::new(FaultKind::Unavailable("no_leader"))
    }

    /// 503 `timeout` (with `Retry-After: 1`) before applying.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::timeout());
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert_eq!(res.json::<serde_json::Value>().await?["code"], "timeout");
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn timeout() -> Self {
        Self::new(FaultKind::Unavailable("timeout"))
    }

    /// Commit, then answer 503 `retry`: the caller thinks it failed, but it applied.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::commit_then_unavailable().on("/api/v1/push"));
    /// let push = || {
    ///     reqwest::Client::new()
    ///         .post(format!("{}/api/v1/push", broker.url()))
    ///         .json(&serde_json::json!({"items": [{"queue": "q", "payload": 1}]}))
    ///         .send()
    /// };
    /// assert_eq!(push().await?.status(), 503);
    /// assert_eq!(broker.inspect().messages("q", DEFAULT_PARTITION)?.len(), 1); // yet it was stored
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn commit_then_unavailable() -> Self {
        Self::new(FaultKind::CommitThenUnavailable)
    }

    /// Commit, then drop the connection: the answer is lost.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::commit_then_drop().on("/api/v1/push"));
    /// let push = || {
    ///     reqwest::Client::new()
    ///         .post(format!("{}/api/v1/push", broker.url()))
    ///         .json(&serde_json::json!({"items": [{"queue": "q", "payload": 1}]}))
    ///         .send()
    /// };
    /// let lost = match push().await {
    ///     Ok(res) => res.bytes().await.is_err(), // the body breaks off
    ///     Err(_) => true,
    /// };
    /// assert!(lost);
    /// assert_eq!(broker.inspect().messages("q", DEFAULT_PARTITION)?.len(), 1); // yet it was stored
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn commit_then_drop() -> Self {
        Self::new(FaultKind::CommitThenDrop)
    }

    /// Wait `d`, then handle the request normally.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use std::time::{Duration, Instant};
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::delay(Duration::from_millis(200)).on("/health"));
    /// let started = Instant::now();
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert!(res.status().is_success());
    /// assert!(started.elapsed() >= Duration::from_millis(200));
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn delay(d: Duration) -> Self {
        Self::new(FaultKind::Delay(d))
    }

    /// 429 `overloaded` with `Retry-After: retry_after` (seconds), before applying.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::overloaded(5));
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert_eq!(res.status(), 429);
    /// assert_eq!(res.headers()["retry-after"], "5");
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn overloaded(retry_after: u64) -> Self {
        Self::new(FaultKind::Overloaded { retry_after })
    }

    /// Only on paths starting with `route` (e.g. `/api/v1/transaction`); calls to other
    /// paths pass untouched and do not use it up.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().on("/api/v1/transaction"));
    /// let health = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert!(health.status().is_success()); // another route
    /// assert_eq!(broker.faults().pending(), 1);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn on(mut self, route: impl Into<String>) -> Self {
        self.route = Some(route.into());
        self
    }

    /// Only on requests with this method (`POST`, `GET`, ...; any case).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().method("post"));
    /// let health = reqwest::get(format!("{}/health", broker.url())).await?; // a GET
    /// assert!(health.status().is_success());
    /// assert_eq!(broker.faults().pending(), 1);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn method(mut self, method: impl Into<String>) -> Self {
        self.method = Some(method.into().to_ascii_uppercase());
        self
    }

    /// For the next `n` matching calls (default 1). A fault of 0 calls is not injected.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().on("/health").times(2));
    /// let url = format!("{}/health", broker.url());
    /// assert_eq!(reqwest::get(&url).await?.status(), 503);
    /// assert_eq!(reqwest::get(&url).await?.status(), 503);
    /// assert_eq!(reqwest::get(&url).await?.status(), 200);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn times(mut self, n: usize) -> Self {
        self.times = n;
        self
    }

    /// Matching calls it will still hit (this value's count: a fault injected into a
    /// broker is used up there, not here).
    ///
    /// ```
    /// use queen_mock_broker::harness::Fault;
    /// assert_eq!(Fault::unavailable().times(3).remaining(), 3);
    /// ```
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
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::MockBroker;
/// use queen_mock_broker::harness::{Fault, FaultHit, FaultKind};
/// let broker = MockBroker::start_in_memory().await?;
/// broker.faults().inject(Fault::unavailable());
/// reqwest::get(format!("{}/health", broker.url())).await?;
/// let hits = broker.faults().hits();
/// assert_eq!(
///     hits[0],
///     FaultHit { method: "GET".into(), path: "/health".into(), kind: FaultKind::Unavailable("retry") }
/// );
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultHit {
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
    /// What was done to it.
    pub kind: FaultKind,
}

/// The injected faults and the record of the calls they hit. Reach a broker's with
/// [`MockBroker::faults`](crate::MockBroker::faults).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::MockBroker;
/// use queen_mock_broker::harness::{Fault, Faults};
/// let broker = MockBroker::start_in_memory().await?;
/// let faults: &Faults = broker.faults();
/// faults.inject(Fault::unavailable().on("/api/v1/transaction"));
/// assert_eq!((faults.pending(), faults.hits().len()), (1, 0));
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
    hits: Mutex<Vec<FaultHit>>,
}

impl Faults {
    /// Adds a fault; when several match a call, the oldest is applied (one fault per
    /// call).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::{Fault, FaultKind};
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::no_leader());
    /// broker.faults().inject(Fault::overloaded(1));
    /// let url = format!("{}/health", broker.url());
    /// assert_eq!(reqwest::get(&url).await?.status(), 503); // the first one
    /// assert_eq!(reqwest::get(&url).await?.status(), 429); // then the second
    /// assert_eq!(broker.faults().hits()[1].kind, FaultKind::Overloaded { retry_after: 1 });
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn inject(&self, fault: Fault) {
        if fault.times > 0 {
            lock(&self.rules).push(fault);
        }
    }

    /// Removes every pending fault (the hits stay recorded).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().times(10));
    /// broker.faults().clear();
    /// assert_eq!(broker.faults().pending(), 0);
    /// let res = reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert!(res.status().is_success());
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear(&self) {
        lock(&self.rules).clear();
    }

    /// Faults not yet used up.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().on("/health").times(2));
    /// broker.faults().inject(Fault::overloaded(1).on("/api/v1/push"));
    /// assert_eq!(broker.faults().pending(), 2);
    /// reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert_eq!(broker.faults().pending(), 2); // one use left of the first
    /// reqwest::get(format!("{}/health", broker.url())).await?;
    /// assert_eq!(broker.faults().pending(), 1);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn pending(&self) -> usize {
        lock(&self.rules).len()
    }

    /// Every call a fault hit, in order.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// use queen_mock_broker::MockBroker;
    /// use queen_mock_broker::harness::Fault;
    /// let broker = MockBroker::start_in_memory().await?;
    /// broker.faults().inject(Fault::unavailable().on("/health").times(2));
    /// for _ in 0..3 {
    ///     reqwest::get(format!("{}/health", broker.url())).await?;
    /// }
    /// let paths: Vec<String> = broker.faults().hits().into_iter().map(|h| h.path).collect();
    /// assert_eq!(paths, ["/health", "/health"]);
    /// broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn hits(&self) -> Vec<FaultHit> {
        lock(&self.hits).clone()
    }

    /// Records a hit chosen by a [`RequestHook`](super::RequestHook).
    pub(crate) fn record_hit(&self, method: &str, path: &str, kind: FaultKind) {
        lock(&self.hits).push(FaultHit {
            method: method.to_string(),
            path: path.to_string(),
            kind,
        });
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

/// Carries out `kind` on the request; `next` runs the rest of the call.
pub(crate) async fn apply<F, Fut>(kind: FaultKind, req: Request, next: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
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
            next(req).await
        }
        FaultKind::CommitThenUnavailable => {
            // The handler runs to completion: the write is committed before we lie.
            let _ = next(req).await;
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "retry",
                "injected fault: committed, then unavailable",
            )
            .into_response()
        }
        FaultKind::CommitThenDrop => {
            let _ = next(req).await;
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
