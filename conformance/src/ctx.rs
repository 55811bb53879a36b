//! What a case gets: an HTTP client bound to the broker, names unique to this run, and
//! a record of the last exchange so a failure can show the request and the answer.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::case::Failure;

/// One HTTP exchange, kept for the report.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Exchange {
    /// `POST /api/v1/transaction`.
    pub request: String,
    /// The request body, if any.
    pub body: Option<Value>,
    /// The answer's status.
    pub status: u16,
    /// The answer's body (`null` when empty).
    pub answer: Value,
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Resp {
    /// HTTP status.
    pub status: u16,
    /// Body (`null` when empty or not JSON).
    pub body: Value,
}

impl Resp {
    /// `body[key]`.
    pub fn get(&self, key: &str) -> &Value {
        &self.body[key]
    }
}

/// A case's view of the broker.
#[derive(Clone)]
pub struct Ctx {
    http: reqwest::Client,
    url: String,
    token: Option<String>,
    prefix: String,
    last: Arc<Mutex<Option<Exchange>>>,
    /// The last request that got no HTTP answer, with its error: the runner asks
    /// whether the broker is still there before it calls such a failure the broker's.
    transport: Arc<Mutex<Option<String>>>,
    /// The slowest answer of this case run, in microseconds.
    slowest_us: Arc<AtomicU64>,
    settings: crate::Settings,
}

impl Ctx {
    /// A context for `url`, naming its resources with a prefix unique to this case run.
    pub fn new(http: reqwest::Client, url: &str, token: Option<String>, case_id: &str) -> Self {
        let run = uuid::Uuid::now_v7().simple().to_string();
        let short: String = case_id
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '-'
                }
            })
            .collect();
        Ctx {
            http,
            url: url.trim_end_matches('/').to_string(),
            token,
            prefix: format!("cf-{}-{short}", &run[run.len() - 10..]),
            last: Arc::default(),
            transport: Arc::default(),
            slowest_us: Arc::default(),
            settings: crate::Settings::default(),
        }
    }

    /// With the run's settings.
    pub fn with_settings(mut self, settings: crate::Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The run's settings.
    pub fn settings(&self) -> crate::Settings {
        self.settings
    }

    /// A name unique to this case run (queues, groups, partitions, keys).
    pub fn name(&self, what: &str) -> String {
        format!("{}-{what}", self.prefix)
    }

    /// A KV namespace unique to this case run (lowercase, within 64 chars).
    pub fn ns(&self, what: &str) -> String {
        let mut n = format!("{}.{what}", self.prefix);
        n.truncate(64);
        n
    }

    /// The last request of this case run that got no HTTP answer (connection refused
    /// or reset, timed out), with the error.
    pub fn transport_error(&self) -> Option<String> {
        self.transport.lock().ok().and_then(|t| t.clone())
    }

    /// How long the slowest answer of this case run took.
    pub fn slowest(&self) -> Duration {
        Duration::from_micros(self.slowest_us.load(Ordering::Relaxed))
    }

    /// The time one request took at the start of the run (measured by the preflight,
    /// [`mod@crate::preflight`]), or this case run's slowest answer when that is longer:
    /// what a case sizes a time window by.
    pub fn latency(&self) -> Duration {
        self.settings.latency.max(self.slowest())
    }

    /// The shortest lease or TTL a case that waits for one to lapse asks for, in whole
    /// seconds: 1, or the time of 4 requests at the latency the preflight measured
    /// (rounded up), whichever is longer. So the requests a case makes inside the window
    /// (a pop and then an ack under its lease, a put and then a read) fit in it on a
    /// slow broker too, instead of failing a MUST for the broker's speed.
    pub fn window_secs(&self) -> u64 {
        let four = self.settings.latency.as_secs_f64() * 4.0;
        (four.ceil() as u64).max(1)
    }

    /// [`Ctx::window_secs`] as a duration.
    pub fn window(&self) -> Duration {
        Duration::from_secs(self.window_secs())
    }

    /// Waits out a window of [`Ctx::window_secs`], with 1.1 s of room for a broker that
    /// keeps lease and expiry times in whole seconds.
    pub async fn lapse(&self) {
        tokio::time::sleep(self.window() + Duration::from_millis(1_100)).await;
    }

    /// `failure` as [`crate::FailureKind::Inconclusive`] when this case run's slowest
    /// answer is too slow for a window of `window` that must hold `requests` requests:
    /// the case could not tell a broken rule from a slow broker, so it says so instead
    /// of failing. The runner applies it to every failure of a case that needs `Time`,
    /// with [`Ctx::window`] and 4 requests; on a broker that answered as fast as the
    /// preflight measured, a failure stays a failure.
    pub fn too_slow_for(&self, window: Duration, requests: u32, failure: Failure) -> Failure {
        if self.slowest() * requests <= window {
            return failure;
        }
        Failure {
            exchange: failure.exchange,
            ..Failure::inconclusive(
                failure.expected,
                format!(
                    "inconclusive: this case needs {requests} requests inside {window:?}, and one of its answers took {:?} (the preflight measured {:?}); it saw: {}",
                    self.slowest(),
                    self.settings.latency,
                    failure.actual
                ),
            )
        }
    }

    /// The last exchange, for the report.
    pub fn last_exchange(&self) -> Option<Exchange> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<Resp, Failure> {
        let mut req = self
            .http
            .request(method.clone(), format!("{}{path}", self.url));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        if let Some(b) = body {
            req = req.json(b);
        }
        let t0 = Instant::now();
        let res = match req.send().await {
            Ok(res) => res,
            Err(e) => {
                let what = format!("transport error: {e}");
                if let Ok(mut t) = self.transport.lock() {
                    *t = Some(format!("{method} {path}: {what}"));
                }
                return Err(Failure::new("an answer", what));
            }
        };
        let status = res.status().as_u16();
        let text = res.text().await.unwrap_or_default();
        let took = u64::try_from(t0.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.slowest_us.fetch_max(took, Ordering::Relaxed);
        let body_v = serde_json::from_str(&text).unwrap_or(if text.is_empty() {
            Value::Null
        } else {
            Value::String(text)
        });
        if let Ok(mut l) = self.last.lock() {
            *l = Some(Exchange {
                request: format!("{method} {path}"),
                body: body.cloned(),
                status,
                answer: body_v.clone(),
            });
        }
        Ok(Resp {
            status,
            body: body_v,
        })
    }

    /// POST a JSON body.
    pub async fn post(&self, path: &str, body: Value) -> Result<Resp, Failure> {
        self.send(reqwest::Method::POST, path, Some(&body)).await
    }

    /// GET.
    pub async fn get(&self, path: &str) -> Result<Resp, Failure> {
        self.send(reqwest::Method::GET, path, None).await
    }

    /// DELETE.
    pub async fn delete(&self, path: &str) -> Result<Resp, Failure> {
        self.send(reqwest::Method::DELETE, path, None).await
    }

    /// POST /api/v1/transaction, expecting a 200 verdict.
    pub async fn txn(&self, body: Value) -> Result<Value, Failure> {
        let r = self.post("/api/v1/transaction", body).await?;
        expect_status(&r, 200)?;
        Ok(r.body)
    }

    /// Pushes one message; answers its result element.
    pub async fn push(
        &self,
        queue: &str,
        partition: &str,
        txn: &str,
        payload: Value,
    ) -> Result<Value, Failure> {
        let r = self
            .post(
                "/api/v1/push",
                serde_json::json!({"items": [{"queue": queue, "partition": partition, "transactionId": txn, "payload": payload}]}),
            )
            .await?;
        if !(200..300).contains(&r.status) {
            return Err(Failure::new("a 2xx push", format!("{}", r.status)));
        }
        Ok(r.body[0].clone())
    }

    /// Pops; `None` when empty (204, 200 with no messages, or the v0 broker's 200
    /// `{"error": "no_available_partition"}`).
    pub async fn pop(&self, path_and_query: &str) -> Result<Option<Value>, Failure> {
        let r = self.get(path_and_query).await?;
        match r.status {
            204 => Ok(None),
            200 if r.body["messages"].as_array().is_some_and(|m| m.is_empty()) => Ok(None),
            200 if r.body["messages"].is_null()
                && r.body["error"] == serde_json::json!("no_available_partition") =>
            {
                Ok(None)
            }
            200 => Ok(Some(r.body)),
            s => Err(Failure::new("a 200 or 204 pop", format!("{s}"))),
        }
    }

    /// Pops one message (batch 1) from `queue` as `group` from the beginning; fails when empty.
    pub async fn pop_one(&self, queue: &str, group: &str) -> Result<Value, Failure> {
        let q =
            format!("/api/v1/pop/queue/{queue}?batch=1&consumerGroup={group}&subscriptionMode=all");
        let p = self
            .pop(&q)
            .await?
            .ok_or_else(|| Failure::new("a message", "an empty pop"))?;
        Ok(p["messages"][0].clone())
    }

    /// Polls `f` every 100 ms until it answers `Some` or `within` passes.
    pub async fn eventually<T, F, Fut>(
        &self,
        within: Duration,
        mut f: F,
    ) -> Result<Option<T>, Failure>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<Option<T>, Failure>>,
    {
        let deadline = tokio::time::Instant::now() + within;
        loop {
            if let Some(v) = f().await? {
                return Ok(Some(v));
            }
            if tokio::time::Instant::now() >= deadline {
                return Ok(None);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Fails unless the answer has `status`.
pub fn expect_status(r: &Resp, status: u16) -> Result<(), Failure> {
    if r.status == status {
        Ok(())
    } else {
        Err(Failure::new(
            format!("HTTP {status}"),
            format!("HTTP {}: {}", r.status, r.body),
        ))
    }
}

/// Fails unless `actual == expected`, naming `what`.
pub fn expect_eq(what: &str, expected: impl Into<Value>, actual: &Value) -> Result<(), Failure> {
    let expected = expected.into();
    if *actual == expected {
        Ok(())
    } else {
        Err(Failure::new(
            format!("{what} = {expected}"),
            format!("{what} = {actual}"),
        ))
    }
}

/// Fails unless `cond`, with what was expected and what was seen.
pub fn expect(
    cond: bool,
    expected: impl Into<String>,
    actual: impl Into<String>,
) -> Result<(), Failure> {
    if cond {
        Ok(())
    } else {
        Err(Failure::new(expected, actual))
    }
}
