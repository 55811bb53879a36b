//! Bearer tokens that change: a provider the client asks before every request, so a
//! worker whose JWT expires keeps running without rebuilding its client.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

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
    /// The same token on every request.
    Static(String),
    /// A token asked for before every request.
    Provider(Arc<dyn TokenProvider>),
}

impl fmt::Debug for Auth {
    // Never print a token.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Auth::None => "None",
            Auth::Static(_) => "Static(..)",
            Auth::Provider(_) => "Provider(..)",
        })
    }
}
