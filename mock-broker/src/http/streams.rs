//! HTTP for the stream runner's routes (`/streams/v1/*`): query registration, claims, cycles, state.

use axum::Router;

use super::AppState;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
