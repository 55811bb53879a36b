//! Retry policy: which failures are retried, how long to wait, and when to give up.
//!
//! Built on the maintained `backon` crate (the `backoff` crate is unmaintained,
//! RUSTSEC-2025-0012, and pulls in `instant`, RUSTSEC-2024-0384).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// How a [`crate::Client`] retries 5xx answers and connection failures.
///
/// ```
/// use std::time::Duration;
/// use queen_sdk::RetryPolicy;
/// let policy = RetryPolicy::default()
///     .max_attempts(5)
///     .deadline(Duration::from_secs(10));
/// assert_eq!(policy.attempts(), 5);
/// ```
#[derive(Debug, Clone)]
pub struct RetryPolicy {
    max_attempts: u32,
    min_delay: Duration,
    max_delay: Duration,
    deadline: Duration,
    jitter: bool,
}

impl Default for RetryPolicy {
    /// Three attempts, exponential backoff from 100 ms to 2 s with jitter, 30 s overall.
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 3,
            min_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            deadline: Duration::from_secs(30),
            jitter: true,
        }
    }
}

impl RetryPolicy {
    /// No retries: one attempt.
    pub fn none() -> Self {
        Self::default().max_attempts(1)
    }

    /// Attempts in all, the first included (at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// The first backoff delay.
    pub fn min_delay(mut self, d: Duration) -> Self {
        self.min_delay = d;
        self
    }

    /// The longest backoff delay.
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }

    /// One deadline over every attempt and wait of a call.
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = d;
        self
    }

    /// Randomises delays so that many clients do not retry in step (on by default).
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// Attempts in all.
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The overall deadline.
    pub fn overall_deadline(&self) -> Duration {
        self.deadline
    }

    /// The delays between attempts.
    pub(crate) fn delays(&self) -> impl Iterator<Item = Duration> + use<> {
        let mut b = ExponentialBuilder::default()
            .with_min_delay(self.min_delay)
            .with_max_delay(self.max_delay)
            .with_max_times(self.max_attempts.saturating_sub(1) as usize);
        if self.jitter {
            b = b.with_jitter();
        }
        b.build()
    }
}
