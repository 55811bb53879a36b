//! A programmable hook on every request: for harnesses that decide a request's fate
//! from more than its route, or that must act while a request is in flight.
//!
//! [`Faults`](super::Faults) covers "the next N calls to this route fail this way". A
//! tool that drives a whole fault *schedule* (the n-th transaction gets this fault, the
//! clock jumps while the 3rd step is in flight, the broker restarts after the 5th call)
//! needs to see each call as it arrives, pick its fault, hold it while it moves time,
//! and see the status it was answered. [`RequestHook`] is that: one object, set on a
//! broker's harness, called before and after every request. It is additive: without a
//! hook the harness behaves as before, and injected [`Faults`](super::Faults) still
//! apply to calls the hook leaves alone.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};

use super::faults::FaultKind;

/// What a [`RequestHook`] sees of a call: enough to classify it and to tell callers
/// apart (a harness can give each client its own `User-Agent`).
///
/// ```
/// use queen_mock_broker::harness::CallInfo;
/// let call = CallInfo { seq: 1, method: "POST".into(), path: "/api/v1/transaction".into(), user_agent: None };
/// assert!(call.path.starts_with("/api/v1/transaction"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallInfo {
    /// The call's number on this harness, from 1, in order of arrival: the same in
    /// [`RequestHook::before`] and [`RequestHook::after`], so a hook can pair them.
    pub seq: u64,
    /// The request's method.
    pub method: String,
    /// The request's path.
    pub path: String,
    /// Its `User-Agent` header, when it has a readable one.
    pub user_agent: Option<String>,
}

/// The future a hook answers before a call: `Some(kind)` applies that fault to the
/// call (as an injected [`Fault`](super::Fault) would), `None` lets the call go on
/// (to the injected faults, then the handler). It may wait: the call is held meanwhile.
pub type HookFuture = Pin<Box<dyn Future<Output = Option<FaultKind>> + Send>>;

/// Called by the harness around every request of a broker it is set on
/// ([`Hooks::set`]).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use std::sync::{Arc, Mutex};
/// use queen_mock_broker::MockBroker;
/// use queen_mock_broker::harness::{CallInfo, FaultKind, HookFuture, RequestHook};
///
/// /// Fails every second call with a 503, and keeps the statuses answered.
/// #[derive(Default)]
/// struct EverySecond { calls: Mutex<u32>, statuses: Mutex<Vec<u16>> }
/// impl RequestHook for EverySecond {
///     fn before(&self, _call: &CallInfo) -> HookFuture {
///         let mut n = self.calls.lock().unwrap();
///         *n += 1;
///         let fault = (*n % 2 == 0).then_some(FaultKind::Unavailable("retry"));
///         Box::pin(async move { fault })
///     }
///     fn after(&self, _call: &CallInfo, status: u16, _fault: Option<FaultKind>) {
///         self.statuses.lock().unwrap().push(status);
///     }
/// }
///
/// let broker = MockBroker::start_in_memory().await?;
/// let hook = Arc::new(EverySecond::default());
/// broker.harness().expect("on by default").hooks.set(hook.clone());
/// for _ in 0..4 {
///     reqwest::get(format!("{}/health", broker.url())).await?;
/// }
/// assert_eq!(*hook.statuses.lock().unwrap(), [200, 503, 200, 503]);
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub trait RequestHook: Send + Sync + 'static {
    /// Before the call is handled: choose its fault, or none. The returned future may
    /// wait (hold the call), move a manual clock, or signal another task.
    fn before(&self, call: &CallInfo) -> HookFuture;

    /// After the call was answered (for a dropped connection: the status whose
    /// headers went out), with the fault applied to it, if any; with status 499 when
    /// the call was cancelled before its answer (its client went away: whether it
    /// applied depends on how far it got). Called once per call. The default does
    /// nothing.
    fn after(&self, call: &CallInfo, status: u16, fault: Option<FaultKind>) {
        let _ = (call, status, fault);
    }
}

/// The hook slot of a [`Harness`](super::Harness): empty by default.
///
/// ```
/// use queen_mock_broker::harness::Harness;
/// let harness = Harness::default();
/// assert!(!harness.hooks.is_set());
/// ```
#[derive(Default)]
pub struct Hooks {
    hook: RwLock<Option<Arc<dyn RequestHook>>>,
    calls: AtomicU64,
}

impl fmt::Debug for Hooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hooks")
            .field("set", &self.is_set())
            .finish()
    }
}

impl Hooks {
    /// Sets the hook (replacing any earlier one).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use queen_mock_broker::harness::{CallInfo, Harness, HookFuture, RequestHook};
    /// struct Nothing;
    /// impl RequestHook for Nothing {
    ///     fn before(&self, _: &CallInfo) -> HookFuture { Box::pin(async { None }) }
    /// }
    /// let harness = Harness::default();
    /// harness.hooks.set(Arc::new(Nothing));
    /// assert!(harness.hooks.is_set());
    /// ```
    pub fn set(&self, hook: Arc<dyn RequestHook>) {
        *self.hook.write().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Removes the hook.
    ///
    /// ```
    /// use queen_mock_broker::harness::Harness;
    /// let harness = Harness::default();
    /// harness.hooks.clear();
    /// assert!(!harness.hooks.is_set());
    /// ```
    pub fn clear(&self) {
        *self.hook.write().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Whether a hook is set.
    ///
    /// ```
    /// use queen_mock_broker::harness::Harness;
    /// assert!(!Harness::default().hooks.is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.hook
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
    }

    /// The next call's number.
    pub(crate) fn next_seq(&self) -> u64 {
        self.calls.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn current(&self) -> Option<Arc<dyn RequestHook>> {
        self.hook.read().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
