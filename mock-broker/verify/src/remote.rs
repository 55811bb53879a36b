//! A check against a broker by URL (being built: see issue 42, part 3).

use std::sync::Arc;

use crate::run::{RunOutcome, RunSpec};
use crate::schedule::Schedule;

/// Where a remote check's broker is.
#[derive(Debug)]
pub(crate) struct Remote {
    /// The broker's base URL.
    pub url: String,
}

/// Runs one schedule against `remote`'s broker through a fault proxy.
pub(crate) async fn run_remote(
    _spec: Arc<RunSpec>,
    _schedule: Schedule,
    remote: Arc<Remote>,
) -> RunOutcome {
    crate::run::harness_failure(format!(
        "checks against a broker URL ({}) are not built yet",
        remote.url
    ))
}
