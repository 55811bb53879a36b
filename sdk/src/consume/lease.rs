//! One batch's lease, kept alive in the background while any of its deliveries is, and
//! the signal that it is gone.

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::Client;
use crate::epoch::Epoch;

/// Extends one batch's lease until every holder of it is gone; says when it is lost.
#[derive(Debug)]
pub(crate) struct LeaseKeeper {
    /// The client its batch was popped with: a delivery's step is built on it.
    pub(crate) client: Client,
    /// The epoch its deliveries' steps run in ([`crate::Epoch`]).
    pub(crate) epoch: Option<Epoch>,
    task: Option<JoinHandle<()>>,
    lost: watch::Sender<bool>,
}

impl LeaseKeeper {
    /// The same keeper, its deliveries' steps run in `epoch`.
    pub(crate) fn in_epoch(mut self, epoch: Option<Epoch>) -> LeaseKeeper {
        self.epoch = epoch;
        self
    }

    /// Starts renewing `lease_id` (popped just now for `lease`) about every third of
    /// `lease`. An empty id (an `autoAck` delivery) has nothing to renew.
    pub(crate) fn start(client: Client, lease_id: String, lease: Duration) -> LeaseKeeper {
        let (lost, _) = watch::channel(false);
        if lease_id.is_empty() {
            return LeaseKeeper {
                client,
                epoch: None,
                task: None,
                lost,
            };
        }
        let owner = client.clone();
        let flag = lost.clone();
        let every = (lease / 3).max(Duration::from_millis(100));
        // Popped just before this: the lease runs out no earlier than this.
        let mut expires = Instant::now() + lease;
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval_at(Instant::now() + every, every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let sent = Instant::now();
                match client.extend_lease(&lease_id, lease).await {
                    Ok(ext) if ext.renewed > 0 => {
                        expires = sent + lease;
                        tracing::trace!(lease = %lease_id, expires_at = ?ext.expires_at, "lease extended");
                    }
                    Ok(_) => {
                        tracing::debug!(lease = %lease_id, "lease ended; no longer extending it");
                        flag.send_replace(true);
                        return;
                    }
                    // Failing past the expiry: whatever the broker did, the lease is gone.
                    Err(e) if Instant::now() >= expires => {
                        tracing::warn!(lease = %lease_id, error = %e, "lease extension failed past its expiry: lease lost");
                        flag.send_replace(true);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(lease = %lease_id, error = %e, "lease extension failed; will retry");
                    }
                }
            }
        });
        LeaseKeeper {
            client: owner,
            epoch: None,
            task: Some(task),
            lost,
        }
    }

    /// Whether the lease is known to be gone.
    pub(crate) fn is_lost(&self) -> bool {
        *self.lost.borrow()
    }

    /// Records that the lease is gone (an ack or step found it so) and stops renewing.
    pub(crate) fn mark_lost(&self) {
        self.lost.send_replace(true);
        if let Some(t) = &self.task {
            t.abort();
        }
    }

    /// Resolves when the lease is known to be gone; never, if it is not lost before
    /// the keeper itself is dropped.
    pub(crate) fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.lost.subscribe();
        async move {
            if rx.wait_for(|lost| *lost).await.is_err() {
                // The keeper is gone with every delivery of the batch: nothing to wait for.
                std::future::pending::<()>().await;
            }
        }
    }
}

impl Drop for LeaseKeeper {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::message::LeaseExtension;

    #[test]
    fn reads_queen2_and_v0_extensions() {
        let q2 = LeaseExtension::read(&json!({"leaseId": "l", "success": true, "renewed": 2,
            "newExpiresAt": "2026-12-01T22:42:04Z", "expiresAt": "2026-12-01T22:42:04Z"}));
        assert_eq!(
            (q2.renewed, q2.expires_at.as_deref()),
            (2, Some("2026-12-01T22:42:04Z"))
        );
        // Queen v0 (queen-mq/queen ab23212): an array of one, no `renewed`.
        let v0 = LeaseExtension::read(
            &json!([{"error": null, "expiresAt": "2026-12-01T22:42:04.479Z",
            "index": 0, "leaseId": "l", "success": true}]),
        );
        assert_eq!(
            (v0.renewed, v0.expires_at.as_deref()),
            (1, Some("2026-12-01T22:42:04.479Z"))
        );
        let gone = LeaseExtension::read(&json!([{"error": "Lease not found", "expiresAt": null,
            "index": 0, "leaseId": "l", "success": false}]));
        assert_eq!((gone.renewed, gone.expires_at), (0, None));
        assert_eq!(LeaseExtension::read(&json!([])).renewed, 0);
    }
}
