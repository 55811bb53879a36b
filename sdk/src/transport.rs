//! The HTTP exchange under every call: one request and its whole answer, within a time
//! limit, over a pool of kept-alive HTTP/1 connections.
//!
//! Built on hyper-util's pooled client directly, not on reqwest. Counted with callgrind
//! against a standalone broker (`examples/load/sdk-instructions.sh`, 2026-12-04), the
//! same request bodies cost 1.96 to 2.14 times the instructions per step through
//! reqwest as through hyper-util's client: reqwest's layers were half of what a client
//! spent. Among them, its redirect layer parsed every request's URL twice (about 15,600
//! instructions) and a per-request timeout cost a map of extensions (three
//! allocations). What the SDK needs of reqwest is small: a pool, a connect timeout, a
//! time limit per exchange, TLS. Each is one setting here.
//!
//! Redirects are not followed: a broker's API never redirects, and a `3xx` comes back
//! as [`crate::Error::Api`] with its status. No proxy is read from the environment
//! (reqwest was built without one too).

use std::error::Error as StdError;
use std::fmt;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::header::{AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderValue, USER_AGENT};
use hyper::{Method, StatusCode, Uri};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};

use crate::error::{Error, Result};

/// How long an idle TCP connection waits before the kernel probes it, as reqwest set
/// it: a broker that vanished without closing is found within a minute or so.
const TCP_KEEPALIVE: Duration = Duration::from_secs(15);

/// The client's side of HTTP: a connection pool and the headers every request carries.
pub(crate) struct Transport {
    pool: Pool,
    user_agent: HeaderValue,
}

/// The connection pool, with TLS only when some base URL needs it: setting TLS up
/// loads the platform's root certificates, about 18 million instructions (callgrind,
/// 2026-12-04), which a client of `http://` brokers (every in-process test) need not pay.
enum Pool {
    Plain(HyperClient<HttpConnector, Full<Bytes>>),
    #[cfg(feature = "rustls")]
    Tls(HyperClient<hyper_rustls::HttpsConnector<HttpConnector>, Full<Bytes>>),
}

impl fmt::Debug for Transport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tls = match self.pool {
            Pool::Plain(_) => false,
            #[cfg(feature = "rustls")]
            Pool::Tls(_) => true,
        };
        f.debug_struct("Transport")
            .field("user_agent", &self.user_agent)
            .field("tls", &tls)
            .finish_non_exhaustive()
    }
}

/// One request, as [`Transport::send`] takes it.
pub(crate) struct Request<'a> {
    pub method: Method,
    pub uri: Uri,
    /// The whole `Authorization` header value, if any.
    pub auth: Option<HeaderValue>,
    /// A JSON body, sent with `Content-Type: application/json`.
    pub body: Option<&'a Bytes>,
    /// The limit of the whole exchange: connecting, sending and reading the answer.
    pub limit: Duration,
}

/// A whole answer of any status.
pub(crate) struct Response {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Transport {
    /// A pool whose connections take at most `connect_timeout` to open, able to speak
    /// TLS when `tls` (an `https://` base URL); without the `rustls` feature that is
    /// refused here.
    pub fn new(connect_timeout: Duration, user_agent: &str, tls: bool) -> Result<Transport> {
        let user_agent = HeaderValue::from_str(user_agent).map_err(|_| {
            Error::invalid(
                "client",
                format!("{user_agent:?} is not a valid User-Agent"),
            )
        })?;
        let mut tcp = HttpConnector::new();
        tcp.set_connect_timeout(Some(connect_timeout));
        // Requests are small and answered at once: Nagle's delay would only add latency.
        tcp.set_nodelay(true);
        tcp.set_keepalive(Some(TCP_KEEPALIVE));
        let mut builder = HyperClient::builder(TokioExecutor::new());
        // Idle connections are closed after 90 s (the default) by this timer; without
        // one they would only be checked when taken from the pool.
        builder.pool_timer(TokioTimer::new());
        let pool = if tls {
            tls_pool(&builder, tcp)?
        } else {
            Pool::Plain(builder.build(tcp))
        };
        Ok(Transport { pool, user_agent })
    }

    /// Sends `req` and reads its whole answer, or fails within `req.limit`.
    pub async fn send(&self, req: Request<'_>) -> std::result::Result<Response, TransportError> {
        let body = match req.body {
            // Rendered once by the caller; every attempt sends the same bytes.
            Some(b) => Full::new(b.clone()),
            None => Full::new(Bytes::new()),
        };
        let mut request = hyper::Request::new(body);
        *request.method_mut() = req.method;
        *request.uri_mut() = req.uri;
        let headers = request.headers_mut();
        headers.insert(USER_AGENT, self.user_agent.clone());
        if let Some(auth) = req.auth {
            headers.insert(AUTHORIZATION, auth);
        }
        if req.body.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let exchange = async {
            let answer = match &self.pool {
                Pool::Plain(pool) => pool.request(request),
                #[cfg(feature = "rustls")]
                Pool::Tls(pool) => pool.request(request),
            };
            let res = answer.await.map_err(|e| {
                let kind = if e.is_connect() {
                    TransportErrorKind::Connect
                } else {
                    TransportErrorKind::Broken
                };
                TransportError::new(kind, e)
            })?;
            let (parts, body) = res.into_parts();
            let body = body
                .collect()
                .await
                .map_err(|e| TransportError::new(TransportErrorKind::Broken, e))?
                .to_bytes();
            Ok(Response {
                status: parts.status,
                headers: parts.headers,
                body,
            })
        };
        match tokio::time::timeout(req.limit, exchange).await {
            Ok(answer) => answer,
            Err(_) => Err(TransportError {
                kind: TransportErrorKind::Timeout,
                source: Box::new(Elapsed(req.limit)),
            }),
        }
    }
}

#[cfg(feature = "rustls")]
fn tls_pool(builder: &hyper_util::client::legacy::Builder, mut tcp: HttpConnector) -> Result<Pool> {
    use std::sync::Arc;
    // The connector sees `https://` URLs too when TLS wraps it.
    tcp.enforce_http(false);
    // The process's chosen crypto provider if it installed one, else aws-lc-rs (as
    // reqwest chose); certificates checked by the platform's verifier.
    let provider = rustls::crypto::CryptoProvider::get_default()
        .cloned()
        .unwrap_or_else(|| Arc::new(rustls::crypto::aws_lc_rs::default_provider()));
    let tls = hyper_rustls::HttpsConnectorBuilder::new()
        .with_provider_and_platform_verifier(provider)
        .map_err(|e| Error::invalid("client", format!("TLS could not be set up: {e}")))?;
    let connector = tls.https_or_http().enable_http1().wrap_connector(tcp);
    Ok(Pool::Tls(builder.build(connector)))
}

#[cfg(not(feature = "rustls"))]
fn tls_pool(_: &hyper_util::client::legacy::Builder, _: HttpConnector) -> Result<Pool> {
    Err(Error::invalid(
        "client",
        "an https:// URL needs TLS, and this build has none (the `rustls` feature)",
    ))
}

/// A failure below HTTP: no connection, no whole answer in time, or a connection that
/// broke before the answer was read. Inside [`crate::Error::Transport`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_sdk::{Client, Error, RetryPolicy, TransportErrorKind};
/// // Nothing listens on port 9 of this host.
/// let client = Client::builder()
///     .url("http://127.0.0.1:9")
///     .retry(RetryPolicy::none())
///     .build()?;
/// let Err(Error::Transport(e)) = client.health().await else { panic!("no broker there") };
/// assert_eq!(e.kind(), TransportErrorKind::Connect);
/// assert!(e.is_connect() && !e.is_timeout());
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct TransportError {
    kind: TransportErrorKind,
    source: Box<dyn StdError + Send + Sync>,
}

/// What kind of [`TransportError`] happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TransportErrorKind {
    /// No connection could be made (refused, unreachable, the connect timeout, a TLS
    /// handshake that failed): the request was not sent, so it surely did not apply.
    Connect,
    /// The exchange took longer than its limit (the request timeout, a long-poll's own
    /// limit, or what was left of the retry policy's deadline). It may have applied.
    Timeout,
    /// The connection broke while the request was sent or the answer read. It may
    /// have applied.
    Broken,
}

impl TransportError {
    fn new(kind: TransportErrorKind, source: impl StdError + Send + Sync + 'static) -> Self {
        TransportError {
            kind,
            source: Box::new(source),
        }
    }

    /// What kind of failure this is.
    pub fn kind(&self) -> TransportErrorKind {
        self.kind
    }

    /// Whether no connection could be made, so the request was never sent.
    pub fn is_connect(&self) -> bool {
        self.kind == TransportErrorKind::Connect
    }

    /// Whether the exchange ran out of time.
    pub fn is_timeout(&self) -> bool {
        self.kind == TransportErrorKind::Timeout
    }
}

impl fmt::Display for TransportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.kind {
            TransportErrorKind::Connect => "could not connect",
            TransportErrorKind::Timeout => "timed out",
            TransportErrorKind::Broken => "the connection broke",
        })?;
        // The innermost cause says what happened ("Connection refused (os error
        // 111)"); hyper's own layers above it only name themselves.
        let mut cause: &(dyn StdError + 'static) = &*self.source;
        while let Some(next) = cause.source() {
            cause = next;
        }
        write!(f, ": {cause}")
    }
}

impl StdError for TransportError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        Some(&*self.source)
    }
}

/// The time limit that ended an exchange.
#[derive(Debug)]
struct Elapsed(Duration);

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no whole answer within {:?}", self.0)
    }
}

impl StdError for Elapsed {}
