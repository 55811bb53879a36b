//! Lease extension.

use super::consumers;
use crate::clock::Micros;
use crate::store::keys::Key;
use crate::store::records::{ConsumerRecord, LeaseRecord};
use crate::store::{StoreError, T, Tx};

/// What an extension did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Extended {
    /// Partition claims extended; 0 when the lease is unknown or expired.
    pub renewed: u64,
    /// The new expiry, when any claim was extended.
    pub expires_at: Option<Micros>,
}

/// Extends every still-live claim of `lease_id` to `seconds` from now. A lease that has
/// expired is never revived.
pub fn extend(
    tx: &mut Tx,
    tenant: &str,
    lease_id: &str,
    seconds: i64,
) -> Result<Extended, StoreError> {
    let lkey = Key::tenant(tenant).str(lease_id).into_bytes();
    let none = Extended {
        renewed: 0,
        expires_at: None,
    };
    let Some(mut rec) = tx.get::<LeaseRecord>(T::Leases, &lkey)? else {
        return Ok(none);
    };
    let expires_at = tx.now + seconds * 1_000_000;
    let mut renewed = 0;
    for &pid in &rec.claims {
        let ckey = consumers::key(tenant, pid, &rec.group);
        let Some(mut c) = tx.get::<ConsumerRecord>(T::Consumers, &ckey)? else {
            continue;
        };
        if consumers::live_lease(&c, tx.now) != Some(lease_id) {
            continue;
        }
        if let Some(l) = c.lease.as_mut() {
            l.expires_at = expires_at;
        }
        tx.put(T::Consumers, ckey, &c);
        renewed += 1;
    }
    if renewed == 0 {
        return Ok(none);
    }
    rec.expires_at = expires_at;
    tx.put(T::Leases, lkey, &rec);
    Ok(Extended {
        renewed,
        expires_at: Some(expires_at),
    })
}
