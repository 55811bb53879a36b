//! A log of the requests the broker received.

use std::sync::Mutex;

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

/// Every request received, in order. Reach a broker's with
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
    entries: Mutex<Vec<LoggedRequest>>,
}

impl RequestLog {
    pub(crate) fn record(&self, method: &str, path: &str, status: u16, fault: Option<FaultKind>) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(LoggedRequest {
                method: method.to_string(),
                path: path.to_string(),
                status,
                fault,
            });
    }

    /// Every request so far, oldest first.
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
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
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
        self.entries()
            .into_iter()
            .filter(|e| e.path.starts_with(prefix))
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
