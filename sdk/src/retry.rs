//! Retry policy: which failures are retried, how long to wait, and when to give up.
//!
//! Built on the maintained `backon` crate (the `backoff` crate is unmaintained,
//! RUSTSEC-2025-0012, and pulls in `instant`, RUSTSEC-2024-0384).

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

/// How a [`crate::Client`] retries 5xx answers, 429s and connection failures (4xx
/// answers other than 429 are never retried); and, given to
/// [`Worker::retry_handler`](crate::Worker::retry_handler), how a worker runs a failed
/// handler again before acking its message `failed`.
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
    ///
    /// ```
    /// use queen_sdk::RetryPolicy;
    /// assert_eq!(RetryPolicy::none().attempts(), 1);
    /// ```
    pub fn none() -> Self {
        Self::default().max_attempts(1)
    }

    /// Attempts in all, the first included (at least 1).
    ///
    /// ```
    /// use queen_sdk::RetryPolicy;
    /// assert_eq!(RetryPolicy::default().max_attempts(5).attempts(), 5);
    /// assert_eq!(RetryPolicy::default().max_attempts(0).attempts(), 1);
    /// ```
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }

    /// The first backoff delay (default 100 ms). A `Retry-After` longer than the
    /// delay is waited instead.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queen_sdk::RetryPolicy;
    /// let policy = RetryPolicy::default().min_delay(Duration::from_millis(250));
    /// # let _ = policy;
    /// ```
    pub fn min_delay(mut self, d: Duration) -> Self {
        self.min_delay = d;
        self
    }

    /// The longest backoff delay (default 2 s).
    ///
    /// ```
    /// use std::time::Duration;
    /// use queen_sdk::RetryPolicy;
    /// let policy = RetryPolicy::default()
    ///     .min_delay(Duration::from_millis(50))
    ///     .max_delay(Duration::from_millis(500));
    /// # let _ = policy;
    /// ```
    pub fn max_delay(mut self, d: Duration) -> Self {
        self.max_delay = d;
        self
    }

    /// One deadline over every attempt and wait of a call (default 30 s), the attempt
    /// in flight included: a call never takes longer. A long-poll's wait
    /// ([`crate::Pop::wait`]) is added to it: the broker's to spend, not the policy's.
    /// For a worker's handler ([`Worker::retry_handler`](crate::Worker::retry_handler))
    /// no wait ends past it, counted from the handler's first run; a run in progress is
    /// never cut short by it.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queen_sdk::RetryPolicy;
    /// let policy = RetryPolicy::default().deadline(Duration::from_secs(5));
    /// assert_eq!(policy.overall_deadline(), Duration::from_secs(5));
    /// ```
    pub fn deadline(mut self, d: Duration) -> Self {
        self.deadline = d;
        self
    }

    /// Randomises delays so that many clients do not retry in step (on by default): a
    /// call's retries, and the pauses of a consumer's or worker's poll loop after a
    /// failed pop. Off, both are the same on every run (a simulation that replays).
    ///
    /// ```
    /// use queen_sdk::RetryPolicy;
    /// let predictable = RetryPolicy::default().jitter(false);
    /// # let _ = predictable;
    /// ```
    pub fn jitter(mut self, on: bool) -> Self {
        self.jitter = on;
        self
    }

    /// Attempts in all.
    ///
    /// ```
    /// use queen_sdk::RetryPolicy;
    /// assert_eq!(RetryPolicy::default().attempts(), 3);
    /// ```
    pub fn attempts(&self) -> u32 {
        self.max_attempts
    }

    /// The overall deadline.
    ///
    /// ```
    /// use std::time::Duration;
    /// use queen_sdk::RetryPolicy;
    /// assert_eq!(RetryPolicy::default().overall_deadline(), Duration::from_secs(30));
    /// ```
    pub fn overall_deadline(&self) -> Duration {
        self.deadline
    }

    /// The first backoff delay.
    pub(crate) fn first_delay(&self) -> Duration {
        self.min_delay
    }

    /// Whether delays are jittered.
    pub(crate) fn jittered(&self) -> bool {
        self.jitter
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
