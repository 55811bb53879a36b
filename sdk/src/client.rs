//! [`Client`]: one cheap-to-clone handle over a connection pool, with the retry policy.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use hyper::Method;
use hyper::header;
use hyper::http::uri::{Authority, Parts, PathAndQuery, Scheme, Uri};
use serde::de::DeserializeOwned;
use serde_json::Value;
use tracing::Instrument;

use crate::auth::{Auth, TokenProvider};
use crate::error::{Capability, Error, Result};
use crate::retry::RetryPolicy;
use crate::transport::{Request, Transport};
use crate::validate;

/// Configures a [`Client`].
///
/// ```
/// use std::time::Duration;
/// use queen_sdk::{Client, RetryPolicy};
/// let client = Client::builder()
///     .url("http://127.0.0.1:6632")
///     .token("s3cret")
///     .request_timeout(Duration::from_secs(35))
///     .retry(RetryPolicy::default().max_attempts(5))
///     .build()?;
/// # let _ = client;
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    urls: Vec<String>,
    auth: Auth,
    request_timeout: Duration,
    connect_timeout: Duration,
    retry: RetryPolicy,
    user_agent: String,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        ClientBuilder {
            urls: Vec::new(),
            auth: Auth::None,
            // Longer than a long-poll's default 30 s wait.
            request_timeout: Duration::from_secs(40),
            connect_timeout: Duration::from_secs(5),
            retry: RetryPolicy::default(),
            user_agent: concat!("queen-sdk-rust/", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}

impl ClientBuilder {
    /// Adds a broker base URL, such as `http://127.0.0.1:6632` (a trailing `/` is
    /// dropped). With several, a failed connection or a 5xx answer moves the client on to
    /// the next one, for the retry and for later calls.
    ///
    /// ```
    /// let client = queen_sdk::Client::builder()
    ///     .url("http://queen-a:6632/")
    ///     .url("http://queen-b:6632")
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn url(mut self, url: impl Into<String>) -> Self {
        // `build` parses it; a trailing `/` is dropped there (`Base::prefix`).
        self.urls.push(url.into());
        self
    }

    /// Adds several base URLs, as [`ClientBuilder::url`] does for one.
    ///
    /// ```
    /// let client = queen_sdk::Client::builder()
    ///     .urls(["http://queen-a:6632", "http://queen-b:6632", "http://queen-c:6632"])
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn urls<I: IntoIterator<Item = S>, S: Into<String>>(mut self, urls: I) -> Self {
        for u in urls {
            self = self.url(u);
        }
        self
    }

    /// Sends `Authorization: Bearer <token>` on every call. A token holding bytes no
    /// header can carry (a line break, a control character) fails
    /// [`ClientBuilder::build`] with [`Error::Invalid`].
    ///
    /// ```no_run
    /// let token = std::env::var("QUEEN_TOKEN").unwrap_or_default();
    /// let client = queen_sdk::Client::builder()
    ///     .url("https://queen.example.com") // https:// needs the `rustls` feature
    ///     .token(token)
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn token(mut self, token: impl Into<String>) -> Self {
        self.auth = Auth::fixed(&token.into());
        self
    }

    /// Asks `provider` for the bearer token before every request, instead of a fixed
    /// [`ClientBuilder::token`]: an expiring JWT is refreshed without rebuilding the
    /// client. A provider that fails fails the call with [`Error::Token`] (not retried).
    /// See [`crate::TokenProvider`].
    ///
    /// ```no_run
    /// let client = queen_sdk::Client::builder()
    ///     .url("https://queen.example.com") // https:// needs the `rustls` feature
    ///     .token_provider(|| async {
    ///         let jwt = std::env::var("QUEEN_TOKEN")?; // or your identity provider's cache
    ///         Ok(jwt)
    ///     })
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn token_provider(mut self, provider: impl TokenProvider) -> Self {
        self.auth = Auth::Provider(Arc::new(provider));
        self
    }

    /// Limit of one HTTP exchange (default 40 s). A pop that long-polls
    /// ([`crate::Pop::wait`]) gets its own limit instead: its wait plus 10 s.
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = queen_sdk::Client::builder()
    ///     .url("http://127.0.0.1:6632")
    ///     .request_timeout(Duration::from_secs(10))
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn request_timeout(mut self, d: Duration) -> Self {
        self.request_timeout = d;
        self
    }

    /// Limit of establishing a connection (default 5 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = queen_sdk::Client::builder()
    ///     .url("http://127.0.0.1:6632")
    ///     .connect_timeout(Duration::from_millis(500))
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }

    /// How failed calls are retried (default: [`RetryPolicy::default`]).
    ///
    /// ```
    /// use queen_sdk::{Client, RetryPolicy};
    /// let client = Client::builder()
    ///     .url("http://127.0.0.1:6632")
    ///     .retry(RetryPolicy::none())
    ///     .build()?;
    /// assert_eq!(client.retry_policy().attempts(), 1);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The `User-Agent` header (default `queen-sdk-rust/<version>`).
    ///
    /// ```
    /// let client = queen_sdk::Client::builder()
    ///     .url("http://127.0.0.1:6632")
    ///     .user_agent("billing-worker/2.1")
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.user_agent = ua.into();
        self
    }

    /// Builds the client. Nothing is sent yet. Fails with [`Error::Invalid`] without
    /// a URL, or with one that is not an `http://` or `https://` URL (`https://` needs
    /// the default `rustls` feature), or that carries a query or a fragment (each
    /// call's path and query go after the base's path) or credentials (give a
    /// [`ClientBuilder::token`] instead), or with a token no header can carry.
    ///
    /// ```
    /// use queen_sdk::{Client, Error};
    /// assert!(matches!(Client::builder().build(), Err(Error::Invalid { .. })));
    /// assert!(matches!(Client::builder().url("queen:6632").build(), Err(Error::Invalid { .. })));
    /// assert!(matches!(Client::builder().url("http://queen:99999").build(), Err(Error::Invalid { .. })));
    /// let client = Client::builder().url("http://127.0.0.1:6632").build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn build(self) -> Result<Client> {
        if self.urls.is_empty() {
            return Err(Error::invalid(
                "client",
                "at least one base URL is required",
            ));
        }
        let bases = self
            .urls
            .iter()
            .map(|u| Base::parse(u))
            .collect::<Result<Vec<_>>>()?;
        if matches!(self.auth, Auth::Unusable) {
            return Err(crate::auth::unusable());
        }
        Ok(Client {
            inner: Arc::new(Inner {
                http: Transport::new(
                    self.connect_timeout,
                    &self.user_agent,
                    bases.iter().any(Base::is_https),
                )?,
                bases,
                current: AtomicUsize::new(0),
                auth: self.auth,
                retry: self.retry,
                request_timeout: self.request_timeout,
                lacking: AtomicU8::new(0),
                having: AtomicU8::new(0),
            }),
        })
    }
}

/// A Queen client. Clones share one connection pool.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// let client = queen_sdk::Client::new(broker.url())?;
/// # client.push(vec![queen_sdk::PushItem::new("orders", &serde_json::json!({"id": "o-7"}))]).await?;
/// let batch = client.pop::<serde_json::Value>("orders").batch(10).send().await?;
/// for msg in &batch {
///     let outcome = client.transaction().ack(msg).commit().await?;
///     assert!(outcome.is_committed());
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    http: Transport,
    bases: Vec<Base>,
    current: AtomicUsize,
    auth: Auth,
    pub(crate) retry: RetryPolicy,
    /// The limit of one exchange, unless the call sets its own (a long-poll).
    request_timeout: Duration,
    /// The features the broker's answers have shown it lacks, one bit each
    /// ([`Capability::bit`]), learned, never set by the user: a route of the feature
    /// answered with a web page (Queen v0 serves its console there) or with 404
    /// `no_such_route`, or a committed transaction came back without the results of
    /// that part (Queen v0 ignores `kv`, `timers` and `positions`; Queen 2's engine
    /// `positions`). A transaction with that part is then refused before it is sent;
    /// the other features are not affected. Proof of a missing part outweighs an
    /// earlier commit of it.
    lacking: AtomicU8,
    /// The features a committed transaction came back with the results of: their
    /// results are no longer read for that proof (it took about 0.8 µs of a KV step:
    /// perf, `push-kv`). Only learned when the client has one URL (behind several, the
    /// next answer may be another broker's).
    having: AtomicU8,
}

/// Whether a failed call may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Replay {
    /// Sending it twice has the effect of sending it once: retry any retryable failure.
    Safe,
    /// Sending it twice may apply it twice: retry only failures that surely did not
    /// apply; others end in [`Error::OutcomeUnknown`].
    Unsafe,
    /// Sending the same bytes again is harmless, but only within this call (a
    /// transaction guarded by a step marker or a push id minted for this call): retry
    /// any retryable failure, and when the call gives up after an attempt that may
    /// have applied, answer [`Error::OutcomeUnknown`], since the caller cannot resend
    /// it safely.
    Guarded,
}

/// Per-call settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Opts {
    /// Whether a failed call may be sent again.
    pub replay: Replay,
    /// A longer limit than the client's for this exchange (a long-poll).
    pub timeout: Option<Duration>,
    /// Time added to the retry policy's overall deadline: a long-poll's wait is the
    /// broker's to spend, not the policy's, so it must not eat into the deadline.
    pub extra_deadline: Duration,
    /// One attempt only: the caller retries (a consumer's poll loop backs off itself
    /// and reports every failure instead of having them folded into one).
    pub single_attempt: bool,
}

impl Opts {
    /// Safe to replay, default timeout.
    pub const SAFE: Opts = Opts {
        replay: Replay::Safe,
        timeout: None,
        extra_deadline: Duration::ZERO,
        single_attempt: false,
    };
}

/// A successful answer, as the bytes that came: the hot calls (pop, transaction, push,
/// ack) decode them straight into their typed answers, the rest through [`Answer::value`].
#[derive(Debug)]
pub(crate) struct Answer {
    /// The body; empty (or blank) for a 204.
    pub body: Bytes,
    /// An earlier attempt failed in a way that may have applied it (not a 429 or a
    /// refused connection): this answer then describes a resend.
    pub maybe_applied_before: bool,
}

impl Answer {
    /// Whether the body holds nothing but whitespace (a 204, or an empty 200).
    pub fn is_blank(&self) -> bool {
        self.body.iter().all(u8::is_ascii_whitespace)
    }

    /// The body as a JSON tree (`null` when blank).
    pub fn value(&self) -> Result<Value> {
        if self.is_blank() {
            return Ok(Value::Null);
        }
        serde_json::from_slice(&self.body).map_err(|e| Error::Decode {
            message: format!("the answer is not JSON: {e}"),
            body: self.text(),
        })
    }

    /// The body decoded into `T` (from `null` when blank); `what` names the answer in
    /// the error.
    pub fn decode<T: DeserializeOwned>(&self, what: &str) -> Result<T> {
        self.decode_borrowed(what)
    }

    /// [`Answer::decode`] into a `T` that borrows from the body (text kept as
    /// [`serde_json::value::RawValue`] until its reader knows what it holds).
    pub fn decode_borrowed<'a, T: serde::Deserialize<'a>>(&'a self, what: &str) -> Result<T> {
        let bytes: &'a [u8] = if self.is_blank() { b"null" } else { &self.body };
        serde_json::from_slice(bytes).map_err(|e| Error::Decode {
            message: format!("{what}: {e}"),
            body: self.text(),
        })
    }

    /// The body as text, for an error.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

impl Client {
    /// A client for one broker with default settings. Nothing is sent yet.
    ///
    /// ```
    /// let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// assert_eq!(client.retry_policy().attempts(), 3);
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn new(url: impl Into<String>) -> Result<Client> {
        Self::builder().url(url).build()
    }

    /// A builder, for several URLs, a token, timeouts or a retry policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = queen_sdk::Client::builder()
    ///     .url("http://127.0.0.1:6632")
    ///     .connect_timeout(Duration::from_secs(2))
    ///     .build()?;
    /// # let _ = client;
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The retry policy.
    ///
    /// ```
    /// use std::time::Duration;
    /// let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
    /// assert_eq!(client.retry_policy().overall_deadline(), Duration::from_secs(30));
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn retry_policy(&self) -> &RetryPolicy {
        &self.inner.retry
    }

    /// Whether the broker is known to lack `c`.
    pub(crate) fn lacks(&self, c: Capability) -> bool {
        self.inner.lacking.load(Ordering::Relaxed) & c.bit() != 0
    }

    /// Records that the broker answered as one without `c` does.
    pub(crate) fn learn_lacks(&self, c: Capability) {
        self.inner.lacking.fetch_or(c.bit(), Ordering::Relaxed);
        self.inner.having.fetch_and(!c.bit(), Ordering::Relaxed);
    }

    /// Whether the broker is known to have `c` (and not since found without it).
    pub(crate) fn has(&self, c: Capability) -> bool {
        self.inner.having.load(Ordering::Relaxed) & c.bit() != 0 && !self.lacks(c)
    }

    /// Records that the broker committed a part of kind `c`, when the client talks to
    /// one broker only.
    pub(crate) fn learn_has(&self, c: Capability) {
        if self.inner.bases.len() == 1 {
            self.inner.having.fetch_or(c.bit(), Ordering::Relaxed);
        }
    }

    fn base(&self) -> &Base {
        let i = self.inner.current.load(Ordering::Relaxed) % self.inner.bases.len();
        &self.inner.bases[i]
    }

    fn rotate(&self) {
        if self.inner.bases.len() > 1 {
            self.inner.current.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// POSTs `body` (JSON, rendered with [`crate::json::render`]) with the retry policy,
    /// replaying it as `replay` allows.
    pub(crate) async fn post(&self, path: &str, body: Bytes, replay: Replay) -> Result<Answer> {
        let opts = Opts {
            replay,
            ..Opts::SAFE
        };
        self.call::<()>(Method::POST, path, None, Some(&body), opts)
            .await
    }

    /// Sends one request with the retry policy; answers the decoded 2xx body.
    pub(crate) async fn call<Q: Query + ?Sized>(
        &self,
        method: Method,
        path: &str,
        query: Option<&Q>,
        body: Option<&Bytes>,
        opts: Opts,
    ) -> Result<Answer> {
        let policy = &self.inner.retry;
        let deadline =
            tokio::time::Instant::now() + policy.overall_deadline() + opts.extra_deadline;
        let retries = if opts.single_attempt { 0 } else { usize::MAX };
        let mut delays = policy.delays().take(retries);
        let mut attempt = 0;
        let mut maybe_applied_before = false;
        loop {
            attempt += 1;
            let span = tracing::debug_span!("queen.call", %method, path, attempt);
            // The deadline bounds the attempt in flight too, not only the waits: when it
            // comes before the attempt's own limit, it becomes that limit.
            let remaining = deadline.saturating_duration_since(tokio::time::Instant::now());
            let own = opts.timeout.unwrap_or(self.inner.request_timeout);
            let cut_by_deadline = remaining < own;
            let limit = own.min(remaining);
            let out = self
                .once(method.clone(), path, query, body, limit)
                .instrument(span)
                .await;
            let hit_deadline = cut_by_deadline
                && matches!(&out, Err(Error::Transport(e)) if e.is_timeout())
                && tokio::time::Instant::now() >= deadline;
            if hit_deadline {
                let err = Error::DeadlineExceeded { attempts: attempt };
                return Err(if opts.replay != Replay::Safe {
                    Error::OutcomeUnknown {
                        cause: Box::new(err),
                    }
                } else {
                    err
                });
            }
            let err = match out {
                Ok(body) => {
                    return Ok(Answer {
                        body,
                        maybe_applied_before,
                    });
                }
                Err(e) => e,
            };
            if !err.retryable() {
                return Err(err);
            }
            if opts.replay == Replay::Unsafe && !err.surely_not_applied() {
                return Err(Error::OutcomeUnknown {
                    cause: Box::new(err),
                });
            }
            maybe_applied_before |= !err.surely_not_applied();
            if matches!(err, Error::Transport(_)) || err.status().is_some_and(|s| s >= 500) {
                self.rotate();
            }
            let give_up = |err: Error| {
                let err = if attempt > 1 {
                    Error::Exhausted {
                        attempts: attempt,
                        last: Box::new(err),
                    }
                } else {
                    err
                };
                if opts.replay == Replay::Guarded && maybe_applied_before {
                    Error::OutcomeUnknown {
                        cause: Box::new(err),
                    }
                } else {
                    err
                }
            };
            let Some(delay) = delays.next() else {
                return Err(give_up(err));
            };
            let delay = err.retry_after().map_or(delay, |ra| ra.max(delay));
            if tokio::time::Instant::now() + delay > deadline {
                return Err(give_up(err));
            }
            tracing::debug!(error = %err, ?delay, attempt, "retrying");
            tokio::time::sleep(delay).await;
        }
    }

    async fn once<Q: Query + ?Sized>(
        &self,
        method: Method,
        path: &str,
        query: Option<&Q>,
        body: Option<&Bytes>,
        limit: Duration,
    ) -> Result<Bytes> {
        let uri = self.base().join(path, query)?;
        let auth = self.inner.auth.header().await?;
        let res = self
            .inner
            .http
            .send(Request {
                method,
                uri,
                auth,
                body,
                limit,
            })
            .await?;
        let status = res.status;
        let retry_after = res
            .headers
            .get(header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map(Duration::from_secs);
        // A success is handed on as bytes: its caller decodes the answer it expects
        // straight into its type, with no JSON tree in between.
        let html = res
            .headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("text/html"));
        let bytes = res.body;
        // A feature route answered by a web page instead of the API: Queen v0 serves
        // its console for every path it does not route (KV, timers, locks).
        if let Some(capability) = capability_of(path)
            && (html || bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'<'))
        {
            self.learn_lacks(capability);
            return Err(Error::Unsupported {
                capability,
                committed: false,
            });
        }
        if status.is_success() {
            return Ok(bytes);
        }
        let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
        let text = || String::from_utf8_lossy(&bytes).into_owned();
        // A refused transaction may carry the rollback envelope instead of an error body.
        if let Some(v) = &parsed
            && v.get("success") == Some(&Value::Bool(false))
            && v.get("reason").is_some_and(Value::is_string)
        {
            return Ok(bytes);
        }
        let field = |k: &str| {
            parsed
                .as_ref()
                .and_then(|v| v.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        let message = field("error").unwrap_or_else(text);
        // Without `code`, `error` is the code (`wire.md` section 1).
        let code = field("code").or_else(|| field("error"));
        // A feature's route the broker does not have at all (Queen 2's engine has no
        // locks): the feature is missing, not the call wrong.
        if let Some(capability) = capability_of(path)
            && status == hyper::StatusCode::NOT_FOUND
            && code.as_deref() == Some("no_such_route")
        {
            self.learn_lacks(capability);
            return Err(Error::Unsupported {
                capability,
                committed: false,
            });
        }
        Err(Error::Api {
            status: status.as_u16(),
            code,
            message,
            retry_after,
        })
    }
}

/// A broker base URL, parsed once when the client is built.
///
/// A call's URI is made of the base's scheme and authority, parsed here once, and a
/// path and query that are the only part checked per call (the paths' segments are
/// percent-encoded where they are made). Parsing each call's whole URL cost 466 ns
/// (`url` 2.5, 2026-12-03), and parsing a whole URI string about 1,000 instructions
/// per request (callgrind, 2026-12-04), most of it the authority again.
#[derive(Debug)]
struct Base {
    scheme: Scheme,
    /// `host[:port]`, the host as the URL parser normalised it.
    authority: Authority,
    /// The base's own path without its trailing `/` (empty for a bare host): it
    /// prefixes every call's path, so a broker served under `/queen` keeps it.
    prefix: String,
}

impl Base {
    /// Parses a base URL given to the builder; only `http://` and `https://` are taken
    /// (whether this build speaks TLS is the transport's to say, when its pool is made).
    ///
    /// The parser is the `http` crate's, which the transport already holds: the `url`
    /// crate's international-domain support brought about 25 crates into every build
    /// of the SDK (the README's "Build weight"). So a host is ASCII: an international
    /// one is written in its punycode (`xn--`) form.
    fn parse(text: &str) -> Result<Base> {
        let refuse = |why: String| Error::invalid("client", format!("{text:?} {why}"));
        let trimmed = text.trim();
        if !trimmed.is_ascii() {
            return Err(refuse(
                "is not ASCII; write an international host in its punycode (xn--) form \
                 and percent-encode the path"
                    .into(),
            ));
        }
        // `Uri` reads no fragment; a base URL takes none anyway.
        if trimmed.contains('#') {
            return Err(refuse(
                "has a query or fragment; a base URL takes neither".into(),
            ));
        }
        let uri: Uri = trimmed
            .parse()
            .map_err(|e| refuse(format!("is not a URL: {e}")))?;
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => Scheme::HTTP,
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::HTTPS,
            _ => return Err(refuse("is not an http(s) URL".into())),
        };
        if uri.query().is_some() {
            return Err(refuse(
                "has a query or fragment; a base URL takes neither".into(),
            ));
        }
        let given = uri
            .authority()
            .ok_or_else(|| refuse("has no host".into()))?;
        if given.as_str().contains('@') {
            return Err(refuse(
                "carries credentials; give a token with `token()` instead".into(),
            ));
        }
        let host = given.host().to_ascii_lowercase();
        if host.is_empty() {
            return Err(refuse("has no host".into()));
        }
        // What follows the host is nothing or a port (`Authority` takes `h:port` and
        // reads no port from it).
        let after_host = &given.as_str()[given.host().len()..];
        if !after_host.is_empty() && given.port_u16().is_none() {
            return Err(refuse("has a port that is not a number up to 65535".into()));
        }
        // A port the scheme implies is left out, as a browser writes the Host header.
        let implied = if scheme == Scheme::HTTPS { 443 } else { 80 };
        let authority = match given.port_u16() {
            Some(port) if port != implied => format!("{host}:{port}"),
            _ => host,
        };
        let authority = Authority::try_from(authority)
            .map_err(|e| refuse(format!("has a host HTTP cannot carry: {e}")))?;
        let prefix = uri.path().trim_end_matches('/').to_string();
        Ok(Base {
            scheme,
            authority,
            prefix,
        })
    }

    /// Whether calls to it need TLS.
    fn is_https(&self) -> bool {
        self.scheme == Scheme::HTTPS
    }

    /// The URI of a call: the base's path, then `path` (which may carry its own
    /// query), then `query`.
    fn join<Q: Query + ?Sized>(&self, path: &str, query: Option<&Q>) -> Result<Uri> {
        let mut rest = String::with_capacity(self.prefix.len() + path.len() + 64);
        rest.push_str(&self.prefix);
        rest.push_str(path);
        if let Some(q) = query {
            q.append_to(&mut rest);
        }
        let invalid = |e: &dyn std::fmt::Display| {
            Error::invalid("url", format!("{path:?} does not make a URI: {e}"))
        };
        let mut parts = Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query =
            Some(PathAndQuery::from_maybe_shared(Bytes::from(rest)).map_err(|e| invalid(&e))?);
        Uri::from_parts(parts).map_err(|e| invalid(&e))
    }
}

/// A call's query parameters, written into its URI once.
pub(crate) trait Query {
    /// Appends `?k=v&...` to `url`, keys and values percent-encoded.
    fn append_to(&self, url: &mut String);
}

/// No parameters.
impl Query for () {
    fn append_to(&self, _: &mut String) {}
}

impl<K: AsRef<str>, V: AsRef<str>> Query for [(K, V)] {
    fn append_to(&self, url: &mut String) {
        for (i, (k, v)) in self.iter().enumerate() {
            url.push(if i == 0 { '?' } else { '&' });
            validate::push_segment(url, k.as_ref());
            url.push('=');
            validate::push_segment(url, v.as_ref());
        }
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Query for Vec<(K, V)> {
    fn append_to(&self, url: &mut String) {
        self.as_slice().append_to(url);
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Query for [(K, V); N] {
    fn append_to(&self, url: &mut String) {
        self.as_slice().append_to(url);
    }
}

/// The feature a route belongs to, for the routes some brokers (Queen v0) lack.
fn capability_of(path: &str) -> Option<Capability> {
    let rest = path.strip_prefix("/api/v1/")?;
    let head = rest.split(['/', '?']).next().unwrap_or("");
    match head {
        "kv" => Some(Capability::Kv),
        "timers" => Some(Capability::Timers),
        "locks" => Some(Capability::Locks),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn feature_routes_are_named_by_their_capability() {
        assert_eq!(capability_of("/api/v1/kv/orders/o-7"), Some(Capability::Kv));
        assert_eq!(capability_of("/api/v1/kv"), Some(Capability::Kv));
        assert_eq!(
            capability_of("/api/v1/timers/reminders"),
            Some(Capability::Timers)
        );
        assert_eq!(capability_of("/api/v1/locks"), Some(Capability::Locks));
        assert_eq!(capability_of("/api/v1/transaction"), None);
        assert_eq!(capability_of("/api/v1/pop/queue/kv"), None);
    }

    fn url_of(base: &str, path: &str, query: &[(&str, &str)]) -> String {
        Base::parse(base)
            .unwrap()
            .join(path, Some(query))
            .unwrap()
            .to_string()
    }

    #[test]
    fn a_call_url_is_its_path_and_query_under_the_base_and_its_own_path() {
        assert_eq!(
            url_of("http://127.0.0.1:6632", "/api/v1/transaction", &[]),
            "http://127.0.0.1:6632/api/v1/transaction"
        );
        // An IPv6 host keeps its brackets; a default port is left out; a host is
        // lower-cased; an international one is given in punycode.
        for (base, want) in [
            ("http://[::1]:6632", "http://[::1]:6632/health"),
            ("http://Queen.Example:80", "http://queen.example/health"),
            ("HTTP://h:8080", "http://h:8080/health"),
            (" http://h ", "http://h/health"),
            (
                "http://xn--bcher-kva.example",
                "http://xn--bcher-kva.example/health",
            ),
        ] {
            assert_eq!(url_of(base, "/health", &[]), want);
        }
        // The builder drops a trailing `/`; the base's path is kept either way.
        assert_eq!(
            url_of(
                "http://gw.example.com/queen/",
                "/api/v1/pop/queue/orders",
                &[("batch", "10")]
            ),
            "http://gw.example.com/queen/api/v1/pop/queue/orders?batch=10"
        );
        // A path that carries its own query (the pop writes its own), kept as written.
        assert_eq!(
            url_of(
                "http://h:1/q",
                "/api/v1/pop/queue/a%2Fb?batch=1&wait=false",
                &[]
            ),
            "http://h:1/q/api/v1/pop/queue/a%2Fb?batch=1&wait=false"
        );
        // The call's pairs, percent-encoded.
        assert_eq!(
            url_of(
                "http://h:1",
                "/api/v1/consumer-groups",
                &[("group", "g 1/2")]
            ),
            "http://h:1/api/v1/consumer-groups?group=g%201%2F2"
        );
    }

    #[test]
    fn an_https_base_needs_the_rustls_feature() {
        let built = Client::builder().url("https://queen.example.com").build();
        if cfg!(feature = "rustls") {
            assert!(built.is_ok(), "{built:?}");
        } else {
            let e = built.unwrap_err();
            assert!(
                matches!(&e, Error::Invalid { rule, .. } if rule.contains("rustls")),
                "{e}"
            );
        }
    }

    #[test]
    fn a_base_url_that_is_not_plain_http_is_refused_at_build() {
        for bad in [
            "queen:6632",
            "ftp://h",
            "http://",
            "http://h:99999",
            "http://h/?x=1",
            "http://h/#top",
            "http://user:pw@h",
            "http://:80",
            "http://h:port",
            "http://bücher.example",
            "http://h/a b",
        ] {
            let e = Client::builder().url(bad).build().unwrap_err();
            assert!(matches!(e, Error::Invalid { .. }), "{bad}: {e}");
        }
        let e = Client::builder()
            .url("http://bücher.example")
            .build()
            .unwrap_err();
        assert!(e.to_string().contains("punycode"), "{e}");
    }
}
