//! Bearer tokens that change: a provider the client asks before every request, so a
//! worker whose JWT expires keeps running without rebuilding its client.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hyper::header::HeaderValue;

use crate::error::Error;

/// What a [`TokenProvider`] fails with: any error, kept as text in
/// [`crate::Error::Token`].
pub type TokenError = Box<dyn std::error::Error + Send + Sync>;

/// The future a [`TokenProvider`] answers.
pub type TokenFuture<'a> = Pin<Box<dyn Future<Output = Result<String, TokenError>> + Send + 'a>>;

/// Supplies the bearer token of each request ([`crate::ClientBuilder::token_provider`]).
///
/// It is called before every HTTP exchange (every attempt of a retried call included),
/// so it should answer from a cache and fetch a new token only when the cached one is
/// near its expiry. Any async closure answering `Result<String, TokenError>` is one.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicU32, Ordering};
/// let asked = Arc::new(AtomicU32::new(0));
/// let counter = asked.clone();
/// let client = queen_sdk::Client::builder()
///     .url(broker.url())
///     .token_provider(move || {
///         let counter = counter.clone();
///         async move {
///             counter.fetch_add(1, Ordering::Relaxed);
///             Ok::<_, queen_sdk::TokenError>("a-fresh-jwt".to_string()) // e.g. from your IdP's cache
///         }
///     })
///     .build()?;
/// client.health().await?;
/// assert_eq!(asked.load(Ordering::Relaxed), 1);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub trait TokenProvider: Send + Sync + 'static {
    /// The token to send now.
    fn token(&self) -> TokenFuture<'_>;
}

impl<F, Fut> TokenProvider for F
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<String, TokenError>> + Send + 'static,
{
    fn token(&self) -> TokenFuture<'_> {
        Box::pin(self())
    }
}

/// How the client authenticates.
#[derive(Clone, Default)]
pub(crate) enum Auth {
    /// No `Authorization` header.
    #[default]
    None,
    /// The same header on every request, made once from the token.
    Static(HeaderValue),
    /// A token holding bytes no header can carry: the client refuses to be built.
    Unusable,
    /// A token asked for before every request.
    Provider(Arc<dyn TokenProvider>),
}

impl Auth {
    /// A fixed token.
    pub fn fixed(token: &str) -> Auth {
        bearer(token).map_or(Auth::Unusable, Auth::Static)
    }

    /// The `Authorization` header of the next request.
    pub async fn header(&self) -> Result<Option<HeaderValue>, Error> {
        match self {
            Auth::None => Ok(None),
            Auth::Static(h) => Ok(Some(h.clone())),
            Auth::Unusable => Err(unusable()),
            Auth::Provider(p) => {
                let t = p.token().await.map_err(|e| Error::Token {
                    message: e.to_string(),
                })?;
                bearer(&t).map(Some).ok_or_else(|| Error::Token {
                    message: unusable().to_string(),
                })
            }
        }
    }
}

/// The error of a token no header can carry.
pub(crate) fn unusable() -> Error {
    Error::invalid("token", "it holds bytes an HTTP header cannot carry")
}

/// `Bearer <token>` as a header value kept out of debug output, or `None` when the
/// token holds bytes a header cannot (a line break, a control character).
fn bearer(token: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::try_from(format!("Bearer {token}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

impl fmt::Debug for Auth {
    // Never print a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Auth::None => "None",
            Auth::Static(_) => "Static(..)",
            Auth::Unusable => "Unusable",
            Auth::Provider(_) => "Provider(..)",
        })
    }
}
