//! A log of the requests the broker received.

use std::sync::Mutex;

use super::faults::FaultKind;

/// One received request.
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

/// Every request received, in order.
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

    /// Every request so far.
    pub fn entries(&self) -> Vec<LoggedRequest> {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The requests to paths starting with `prefix`.
    pub fn matching(&self, prefix: &str) -> Vec<LoggedRequest> {
        self.entries()
            .into_iter()
            .filter(|e| e.path.starts_with(prefix))
            .collect()
    }

    /// Forgets everything logged so far.
    pub fn clear(&self) {
        self.entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }
}
