//! HTTP: routes, body limits, and the mapping of engine outcomes to status codes and
//! bodies. Handlers parse strictly, call the engine once, and render.

mod acks;
mod bodies;
mod browse;
pub mod browser;
mod budgeted;
pub(crate) mod console;
mod ephemeral;
pub mod error;
pub mod extract;
mod groups;
mod kv;
mod locks;
mod messages;
mod queues;
mod resources;
pub mod serve;
mod status;
mod streams;
mod timers;
mod traces;
mod txn;
mod unparsable;
pub mod wire;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tower_http::catch_panic::CatchPanicLayer;

pub use messages::parse_push;
pub use txn::parse_transaction;

use crate::auth::{Auth, Identity, Role, required_role};
use crate::engine::Engine;
use crate::harness::Harness;
use browser::BrowserPolicy;
use error::ApiError;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The semantics.
    pub engine: Engine,
    /// Who may call; `None`: authentication is off.
    pub auth: Option<Arc<Auth>>,
    /// The test harness around every call (faults, request log, hooks), for a broker
    /// started in-process with one; `None` in the released binary.
    pub harness: Option<Harness>,
    /// Which browsers' requests are taken ([`browser`]).
    pub browser: Arc<BrowserPolicy>,
}

/// A handler's view of one call: the engine, and who is calling.
pub struct Caller {
    /// The semantics.
    pub engine: Engine,
    /// The caller (an admin of the default tenant when authentication is off).
    pub identity: Identity,
}

impl Caller {
    /// The tenant the call acts as.
    pub fn tenant(&self) -> &str {
        &self.identity.tenant
    }

    /// Whether the caller may see figures of the whole process (commits, commands,
    /// stored bytes, CPU, memory): they move with every tenant's traffic, so only an
    /// admin sees them (and everyone when authentication is off, as an admin).
    pub fn sees_process(&self) -> bool {
        self.identity.role >= Role::Admin
    }
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let identity = parts
            .extensions
            .get::<Identity>()
            .cloned()
            .unwrap_or_else(Identity::anonymous);
        Ok(Caller {
            engine: state.engine.clone(),
            identity,
        })
    }
}

/// Every request's gate, one middleware for the harness and both checks (each layer
/// of axum's costs a boxed future and a clone of the route per request). Measured on
/// `push-kv` at 64 connections, the CPU of the call outside the writer thread was a
/// median 14% and 20% lower without the harness as a layer of its own, and 5% lower
/// with the harness inside this middleware (two sets of four alternating runs):
///
/// - with a harness, runs the call inside it ([`crate::harness::layer`]'s work), so
///   its faults come before everything and its log sees every answer;
/// - once the broker is stopping, answers 503 `retry` with `Retry-After` and closes the
///   connection, so clients go to another broker (or wait) instead of starting work
///   that the shutdown would cut; requests already past this point finish normally;
/// - authenticates the call and checks its role for the route (401 without or with a
///   bad token, 403 for too low a role), then hands the identity to the handler.
async fn gate(State(s): State<AppState>, req: Request, next: Next) -> Response {
    match &s.harness {
        Some(h) => crate::harness::around(h, req, |req| admit(&s, req, next)).await,
        None => admit(&s, req, next).await,
    }
}

/// The gate's checks, then the call; an answer to an origin the operator allowed
/// carries its CORS header.
async fn admit(s: &AppState, req: Request, next: Next) -> Response {
    let origin = req.headers().get(header::ORIGIN).cloned();
    let mut res = admit_checked(s, req, next).await;
    s.browser.decorate(origin.as_ref(), &mut res);
    res
}

/// Reads a refused request's body away (up to the body limit, without keeping it)
/// before answering `refused`: a client still writing it would otherwise meet a closed
/// connection, not the answer.
async fn drain_then(req: Request, refused: Response) -> Response {
    let mut body = req.into_body().into_data_stream();
    let mut read = 0usize;
    while let Some(Ok(chunk)) = futures::StreamExt::next(&mut body).await {
        read += chunk.len();
        if read > extract::MAX_BODY_BYTES {
            break;
        }
    }
    refused
}

async fn admit_checked(s: &AppState, req: Request, next: Next) -> Response {
    if s.engine.is_closing() {
        return closing();
    }
    // First, as it reads nothing: a body declared over the limit is not drained.
    if let Some(refused) = declared_too_large(&req) {
        return refused;
    }
    if let Some(preflight) = s.browser.preflight(req.method(), req.headers()) {
        return preflight;
    }
    if let Some(refused) = s
        .browser
        .check(req.method(), req.uri().path(), req.headers())
    {
        return drain_then(req, refused).await;
    }
    let mut req = match untyped_body(req).await {
        Ok(req) => req,
        Err(refused) => return refused,
    };
    if let Some(refused) = not_json(&req) {
        return drain_then(req, refused.into_response()).await;
    }
    // Bodies are charged once the caller is known to be allowed the call: a request
    // refused above takes no room (its body is read away or left unread).
    let bodies = s.engine.body_budget();
    let Some(auth) = &s.auth else {
        return bodies::run_charged(bodies, req, next).await;
    };
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let Some(needed) = required_role(&method, &path) else {
        return bodies::run_charged(bodies, req, next).await;
    };
    let header = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let now = s.engine.clock().now_micros() / 1_000_000;
    let identity = match auth.authenticate(header, now) {
        Ok(id) => id,
        Err(e) => {
            return ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", e.to_string())
                .into_response();
        }
    };
    if identity.role < needed {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{method} {path} needs the {needed:?} role; the token has {:?}",
                identity.role
            ),
        )
        .into_response();
    }
    req.extensions_mut().insert(identity);
    bodies::run_charged(bodies, req, next).await
}

/// Refuses at once a body whose `Content-Length` is over the body limit (413
/// `payload_too_large`), before a byte of it is read: otherwise the call waits for the
/// body until the read deadline (408 after 60 s by default) for a client that declared
/// 100 MB and sends it slowly, or never. The connection is closed after the answer, as
/// the body is left unread on it. A chunked body has no declared length (hyper does not
/// show a chunk's size): it is refused as soon as the bytes read pass the limit.
fn declared_too_large(req: &Request) -> Option<Response> {
    let declared = bodies::declared_length(req)?;
    if declared <= extract::MAX_BODY_BYTES as u64 {
        return None;
    }
    let mut res = ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!(
            "the body is declared as {declared} bytes; the broker reads at most {}",
            extract::MAX_BODY_BYTES
        ),
    )
    .into_response();
    res.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    Some(res)
}

/// Whether a request may carry a body the broker reads.
fn takes_body(req: &Request) -> bool {
    matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH)
}

/// A request whose body has no `Content-Type` and no declared length (chunked): its
/// body is read here, and refused (415) as soon as a byte of it is not whitespace; a
/// body of whitespace alone (none at all, for a route that takes no body) goes on as an
/// empty body, which every route reads as it reads whitespace (a body over the limit
/// is refused 413 as the extractor would). Its bytes are not kept: this runs before
/// the caller is authenticated and before the body budget is charged. A request with
/// a type or a length is handed on untouched.
async fn untyped_body(req: Request) -> Result<Request, Response> {
    let h = req.headers();
    if !takes_body(&req)
        || h.contains_key(header::CONTENT_TYPE)
        || h.contains_key(header::CONTENT_LENGTH)
        || !h.contains_key(header::TRANSFER_ENCODING)
    {
        return Ok(req);
    }
    let (parts, body) = req.into_parts();
    let mut stream = body.into_data_stream();
    let mut read = 0usize;
    while let Some(chunk) = futures::StreamExt::next(&mut stream).await {
        let Ok(chunk) = chunk else {
            return Err(ApiError::bad_request("unreadable body").into_response());
        };
        if !chunk.iter().all(u8::is_ascii_whitespace) {
            return Err(untyped().into_response());
        }
        read += chunk.len();
        if read > extract::MAX_BODY_BYTES {
            return Err(extract::too_large().into_response());
        }
    }
    Ok(Request::from_parts(parts, axum::body::Body::empty()))
}

/// The refusal of a body sent without a `Content-Type`.
fn untyped() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "the body must be JSON and say so (Content-Type: application/json); a body sent \
         without a type is what a web page can send to any address without asking",
    )
}

/// Refuses a body that is not declared JSON (415 `unsupported_media_type`): every body
/// this broker takes is JSON. A body without a `Content-Type` is refused too: a web
/// page can send one to any address without a preflight (a `no-cors` `fetch` of a
/// `Blob`), while every client of the API says `application/json`. An empty body needs
/// no type, whatever it says (a lease extension, a route that takes no body): a
/// `Content-Length: 0`, or no length and no chunked body at all (a chunked body with
/// no type is read first, [`untyped_body`]).
fn not_json(req: &Request) -> Option<ApiError> {
    if !takes_body(req) {
        return None;
    }
    let h = req.headers();
    let empty = h
        .get(header::CONTENT_LENGTH)
        .map_or(!h.contains_key(header::TRANSFER_ENCODING), |l| {
            l.as_bytes() == b"0"
        });
    let Some(ct) = h.get(header::CONTENT_TYPE) else {
        // A chunked body without a type was read by `untyped_body`: whitespace alone.
        return (!empty && h.contains_key(header::CONTENT_LENGTH)).then(untyped);
    };
    let ct = ct.to_str().unwrap_or("");
    let media = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    let json = media == "application/json" || media.ends_with("+json");
    (!json && !empty).then(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!("the body must be JSON (Content-Type: application/json), not {ct:?}"),
        )
    })
}

/// The answer to a request that arrives while the broker stops.
fn closing() -> Response {
    let mut res = ApiError::from(crate::error::EngineError::ShuttingDown).into_response();
    res.headers_mut().insert(
        header::CONNECTION,
        header::HeaderValue::from_static("close"),
    );
    res
}

/// The broker's routes, with authentication when `auth` is given, taking browsers'
/// requests of the broker's own origin only (its `Host` is not checked: the router
/// does not know where it listens; [`crate::MockBroker`] checks it on loopback).
pub fn router(engine: Engine, auth: Option<Auth>) -> Router {
    router_with(engine, auth, None, true, BrowserPolicy::default())
}

/// [`router`], running every call inside `harness` when one is given, taking browsers'
/// requests as `browser` says.
pub(crate) fn router_with(
    engine: Engine,
    auth: Option<Auth>,
    harness: Option<Harness>,
    console: bool,
    browser: BrowserPolicy,
) -> Router {
    let state = AppState {
        engine,
        auth: auth.map(Arc::new),
        harness,
        browser: Arc::new(browser),
    };
    let routes = if console {
        console::routes()
    } else {
        Router::new()
    };
    routes
        .route("/health", get(queues::health))
        .route("/api/v1/configure", post(queues::configure))
        .route("/api/v1/resources/queues", get(resources::list))
        .route(
            "/api/v1/resources/queues/{queue}",
            get(resources::detail).delete(queues::delete_queue),
        )
        .route(
            "/api/v1/messages/{partition_id}/{transaction_id}",
            get(resources::message).delete(browse::delete_message),
        )
        .route("/api/v1/push", post(messages::push))
        .route("/api/v1/pop", get(messages::pop_discovery))
        .route("/api/v1/pop/queue/{queue}", get(messages::pop_queue))
        .route(
            "/api/v1/pop/queue/{queue}/partition/{partition}",
            get(messages::pop_partition),
        )
        .route("/api/v1/ack", post(acks::ack))
        .route("/api/v1/ack/batch", post(acks::ack_batch))
        .route("/api/v1/lease/{lease}/extend", post(acks::extend))
        .route("/api/v1/transaction", post(txn::transaction))
        .route("/api/v1/transactions", get(txn::log))
        .route("/api/v1/kv", get(kv::namespaces).post(kv::kv))
        .route("/api/v1/kv/{ns}", get(kv::rows))
        .route(
            "/api/v1/kv/{ns}/{key}",
            get(kv::get_one).put(kv::put_one).delete(kv::delete_one),
        )
        .route("/api/v1/timers", get(timers::queues).post(timers::timers))
        .route("/api/v1/timers/{queue}", get(timers::list))
        .route("/api/v1/timer-log", get(timers::log))
        // A timer key may contain `/` (the official clients send it unescaped): the
        // key is the whole rest of the path.
        .route(
            "/api/v1/timers/{queue}/{*key}",
            get(timers::peek).delete(timers::cancel),
        )
        .route("/api/v1/locks", post(locks::locks))
        .merge(groups::routes())
        .merge(browse::routes())
        .merge(ephemeral::routes())
        .merge(status::routes())
        .merge(streams::routes())
        .merge(traces::routes())
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(state.clone(), gate))
        .layer(CatchPanicLayer::custom(on_panic))
        .with_state(state)
}

async fn no_such_route() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "no_such_route", "no such route")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method",
    )
}

fn on_panic(_: Box<dyn std::any::Any + Send + 'static>) -> Response {
    tracing::error!("a handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal error",
    )
    .into_response()
}
