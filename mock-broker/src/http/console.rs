//! The console: a web page served by the broker itself, at `/console`, to see what a
//! worker did (queues, partitions, groups and lag, messages, dead letters, KV, timers,
//! and each transaction with its parts).
//!
//! The page is three embedded files (HTML, CSS, plain JavaScript: no build step, no npm)
//! that read the broker's own API with the caller's bearer token, so tenants and roles
//! hold in the page exactly as in the API: the page shows what the token may read, and
//! an action the role may not take is refused by the API. Only the files and the
//! redirect from `/` are served without a token (they hold no data); `/console/whoami`
//! names the caller's tenant and role. The files are sent with a strict Content Security
//! Policy: scripts and styles from this origin only, nothing inline, no framing.
//!
//! It costs nothing while no one looks: it is a few static answers, and an open page
//! polls one view's reads every 2 s while it is visible (BENCHMARKS.md has the figure
//! under load). `--no-console` (or [`crate::MockBrokerBuilder::console`]) turns it off.

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use serde_json::json;

use super::{AppState, Caller};

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/app.js");
const STYLE: &str = include_str!("console/app.css");

/// The policy every console file is sent with: this origin's scripts, styles and API
/// calls only; no inline code, no plugins, no framing by another page.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// Whether `path` is one of the console's files (or the redirect to it): served
/// without a token, as they carry no data.
pub(crate) fn is_public(method: &str, path: &str) -> bool {
    (method == "GET" || method == "HEAD")
        && matches!(
            path,
            "/" | "/console" | "/console/" | "/console/app.js" | "/console/app.css"
        )
}

/// The console's routes.
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(|| async { Redirect::to("/console") }))
        .route(
            "/console",
            get(|| async { file(INDEX, "text/html; charset=utf-8") }),
        )
        .route("/console/", get(|| async { Redirect::to("/console") }))
        .route(
            "/console/app.js",
            get(|| async { file(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/console/app.css",
            get(|| async { file(STYLE, "text/css; charset=utf-8") }),
        )
        .route("/console/whoami", get(whoami))
}

fn file(body: &'static str, kind: &'static str) -> Response {
    let mut res = body.into_response();
    let h = res.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // A new broker version serves new files: never a stale script against a new API.
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    res
}

/// `GET /console/whoami`: the caller's tenant and role, and whether authentication is
/// on (off: everyone is an admin of the default tenant).
async fn whoami(
    caller: Caller,
    axum::extract::State(state): axum::extract::State<AppState>,
) -> Response {
    let id = &caller.identity;
    axum::Json(json!({
        "tenant": id.tenant,
        "role": id.role.as_str(),
        "sub": id.sub,
        "auth": state.auth.is_some(),
    }))
    .into_response()
}
