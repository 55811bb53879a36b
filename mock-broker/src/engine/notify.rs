//! Wakers for long-polling pops.
//!
//! A pop that finds nothing and may wait registers interest in its queue (or, for a
//! discovery pop, in the whole tenant) before it looks, so a push committed between the
//! look and the wait is never missed. The writer wakes a queue only after the commit
//! that filled it is durable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

/// Per-queue and per-tenant notifiers.
#[derive(Debug, Default)]
pub struct Wakers {
    queues: Mutex<HashMap<(String, String), Arc<Notify>>>,
    tenants: Mutex<HashMap<String, Arc<Notify>>>,
}

impl Wakers {
    /// The notifier of one queue.
    pub fn queue(&self, tenant: &str, queue: &str) -> Arc<Notify> {
        let mut map = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        map.entry((tenant.to_string(), queue.to_string()))
            .or_default()
            .clone()
    }

    /// The notifier of every queue of a tenant.
    pub fn tenant(&self, tenant: &str) -> Arc<Notify> {
        let mut map = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(tenant.to_string()).or_default().clone()
    }

    /// Wakes the waiters of `queue` and of its tenant.
    pub fn wake(&self, tenant: &str, queue: &str) {
        let q = {
            let map = self.queues.lock().unwrap_or_else(|e| e.into_inner());
            map.get(&(tenant.to_string(), queue.to_string())).cloned()
        };
        if let Some(n) = q {
            n.notify_waiters();
        }
        let t = {
            let map = self.tenants.lock().unwrap_or_else(|e| e.into_inner());
            map.get(tenant).cloned()
        };
        if let Some(n) = t {
            n.notify_waiters();
        }
    }
}
