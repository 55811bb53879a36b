//! HTTP for ephemeral queues (`/api/v1/ephemeral/*`): in-memory queues with their own push, pop and ack.

use axum::Router;

use super::AppState;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
