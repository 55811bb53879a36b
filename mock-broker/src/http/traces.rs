//! HTTP for traces (`/api/v1/traces*`): recording and reading trace events.

use axum::Router;

use super::AppState;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
