//! HTTP for status, analytics and stats (`/api/v1/status*`, `/api/v1/analytics/*`, `/api/v1/stats/refresh`).

use axum::Router;

use super::AppState;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
