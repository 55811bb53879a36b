//! The test harness: injected faults, a log of the requests received, and inspection of
//! stored state without going through the public API.
//!
//! A [`MockBroker`](crate::MockBroker) carries one [`Harness`]; its HTTP layer consults
//! it on every request, so a test can make the next transaction's answer get lost after
//! its commit, and then check that the worker's retry applied nothing twice.

mod faults;
mod inspect;
mod log;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

pub use faults::{Fault, FaultHit, FaultKind, Faults};
pub use inspect::{InspectedCursor, InspectedMessage, InspectedTimer, Inspector};
pub use log::{LoggedRequest, RequestLog};

/// The harness state shared with the HTTP layer.
#[derive(Debug, Default, Clone)]
pub struct Harness {
    /// Injected faults and their hits.
    pub faults: Arc<Faults>,
    /// Every request received.
    pub log: Arc<RequestLog>,
}

/// The middleware: logs the request, then applies a matching fault, if any.
pub async fn layer(State(h): State<Harness>, req: Request, next: Next) -> Response {
    let method = req.method().to_string();
    let path = req.uri().path().to_string();
    let fault = h.faults.take(&method, &path);
    let res = match fault {
        Some(kind) => faults::apply(kind, req, next).await,
        None => next.run(req).await,
    };
    h.log.record(&method, &path, res.status().as_u16(), fault);
    res
}
