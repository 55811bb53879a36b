//! What the worker tests against the in-process broker share.

use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_sdk::{Client, RetryPolicy};

/// A client of `broker` (with `token` when auth is on) whose calls are retried within
/// milliseconds, so that a test's failed calls do not wait the default backoff (a
/// handler's own policy is each test's).
pub fn client(broker: &MockBroker, token: Option<&str>) -> Client {
    let mut builder = Client::builder().url(broker.url()).retry(
        RetryPolicy::default()
            .min_delay(Duration::from_millis(10))
            .max_delay(Duration::from_millis(50)),
    );
    if let Some(token) = token {
        builder = builder.token(token);
    }
    builder.build().unwrap()
}
