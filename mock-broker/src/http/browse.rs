//! HTTP for reading and handling messages by hand: listing, retry, delete, `/api/v1/fetch`, `/api/v1/partitions/changed`.

use axum::Router;

use super::AppState;

/// This module's routes, merged into [`super::router`].
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
