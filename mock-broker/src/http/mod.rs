//! HTTP: routes, body limits, and the mapping of engine outcomes to status codes and
//! bodies. Handlers parse strictly, call the engine once, and render.

mod acks;
pub mod error;
pub mod extract;
mod groups;
mod kv;
mod locks;
mod messages;
mod queues;
mod timers;
mod txn;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{delete, get, post};
use tower_http::catch_panic::CatchPanicLayer;

use crate::engine::{DEFAULT_TENANT, Engine};
use error::ApiError;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// The semantics.
    pub engine: Engine,
}

impl AppState {
    /// The tenant a call acts as. One default tenant until authentication lands.
    pub fn tenant(&self) -> &str {
        DEFAULT_TENANT
    }
}

/// The broker's routes.
pub fn router(engine: Engine) -> Router {
    let state = AppState { engine };
    Router::new()
        .route("/health", get(queues::health))
        .route("/api/v1/configure", post(queues::configure))
        .route(
            "/api/v1/resources/queues/{queue}",
            delete(queues::delete_queue),
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
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/seek",
            post(groups::seek_queue),
        )
        .route(
            "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek",
            post(groups::seek_partition),
        )
        .route(
            "/api/v1/consumer-groups/{group}",
            delete(groups::delete_group),
        )
        .route("/api/v1/dlq", get(groups::dlq))
        .route("/api/v1/transaction", post(txn::transaction))
        .route("/api/v1/kv", post(kv::kv))
        .route(
            "/api/v1/kv/{ns}/{key}",
            get(kv::get_one).put(kv::put_one).delete(kv::delete_one),
        )
        .route("/api/v1/timers", post(timers::timers))
        .route("/api/v1/timers/{queue}", get(timers::list))
        .route(
            "/api/v1/timers/{queue}/{key}",
            get(timers::peek).delete(timers::cancel),
        )
        .route("/api/v1/locks", post(locks::locks))
        .fallback(no_such_route)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
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

fn on_panic(_: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    use axum::response::IntoResponse;
    tracing::error!("a handler panicked");
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "internal error",
    )
    .into_response()
}
