//! A log of the requests the broker received.

use std::collections::VecDeque;
use std::sync::Mutex;

use axum::http::Method;

use super::faults::FaultKind;

/// One received request.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let http = reqwest::Client::new();
/// use queen_mock_broker::harness::LoggedRequest;
/// http.get(format!("{}/health", broker.url())).send().await?;
/// let log = broker.requests().entries();
/// assert_eq!(
///     log[0],
///     LoggedRequest { method: "GET".into(), path: "/health".into(), status: 200, fault: None }
/// );
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggedRequest {
    /// Its method.
    pub method: String,
    /// Its path.
    pub path: String,
    /// The status answered (200 for a dropped connection: the headers went out).
    pub status: u16,
    /// The fault injected into it, if any.
    pub fault: Option<FaultKind>,
}

/// The requests received, in order: the most recent [`RequestLog::CAPACITY`], so a
/// broker that runs for days under load keeps a bounded log. Reach a broker's with
/// [`MockBroker::requests`](crate::MockBroker::requests).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let http = reqwest::Client::new();
/// use queen_mock_broker::harness::RequestLog;
/// http.get(format!("{}/health", broker.url())).send().await?;
/// let log: &RequestLog = broker.requests();
/// assert_eq!(log.entries().len(), 1);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Default)]
pub struct RequestLog {
    entries: Mutex<VecDeque<Entry>>,
}

/// A [`LoggedRequest`] as kept: every call of an in-process broker is logged, so an
/// entry costs one allocation (its path), and the strings a reader sees are made when
/// it reads.
#[derive(Debug)]
struct Entry {
    method: Method,
    path: Box<str>,
    status: u16,
    fault: Option<FaultKind>,
}

impl Entry {
    fn to_logged(&self) -> LoggedRequest {
        LoggedRequest {
            method: self.method.as_str().to_string(),
            path: self.path.to_string(),
            status: self.status,
            fault: self.fault,
        }
    }
}

impl RequestLog {
    /// Most entries kept; older ones are dropped first.
    pub const CAPACITY: usize = 10_000;

    pub(crate) fn record(
        &self,
        method: Method,
        path: Box<str>,
        status: u16,
        fault: Option<FaultKind>,
    ) {
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= Self::CAPACITY {
            entries.pop_front();
        }
        entries.push_back(Entry {
            method,
            path,
            status,
            fault,
        });
    }

    /// The requests kept (the last [`RequestLog::CAPACITY`]), oldest first.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// http.get(format!("{}/health", broker.url())).send().await?;
    /// http.get(format!("{}/api/v1/pop/queue/orders", broker.url())).send().await?;
    /// let statuses: Vec<u16> = broker.requests().entries().iter().map(|e| e.status).collect();
    /// assert_eq!(statuses, [200, 204]); // the pop found nothing
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn entries(&self) -> Vec<LoggedRequest> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries.iter().map(Entry::to_logged).collect()
    }

    /// The requests to paths starting with `prefix`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// http.get(format!("{}/health", broker.url())).send().await?;
    /// http.get(format!("{}/api/v1/pop/queue/orders", broker.url())).send().await?;
    /// let pops = broker.requests().matching("/api/v1/pop");
    /// assert_eq!(pops.len(), 1);
    /// assert_eq!(pops[0].path, "/api/v1/pop/queue/orders");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn matching(&self, prefix: &str) -> Vec<LoggedRequest> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .filter(|e| e.path.starts_with(prefix))
            .map(Entry::to_logged)
            .collect()
    }

    /// Forgets everything logged so far.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let http = reqwest::Client::new();
    /// http.get(format!("{}/health", broker.url())).send().await?;
    /// broker.requests().clear();
    /// assert!(broker.requests().entries().is_empty());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_log_keeps_only_the_most_recent_entries() {
        let log = RequestLog::default();
        for i in 0..RequestLog::CAPACITY + 5 {
            log.record(Method::GET, format!("/{i}").into(), 200, None);
        }
        let kept = log.entries();
        assert_eq!(kept.len(), RequestLog::CAPACITY);
        assert_eq!(kept[0].path, "/5");
        assert_eq!(
            kept.last().unwrap().path,
            format!("/{}", RequestLog::CAPACITY + 4)
        );
    }
}
