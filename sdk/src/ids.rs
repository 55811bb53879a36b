//! Deterministic identifiers: the same step, run again, names its effects the same way,
//! so a retry or a redelivery is recognised as a duplicate instead of applied twice.

use uuid::Uuid;

/// The namespace of ids derived by this SDK (a fixed UUIDv5 namespace).
const NAMESPACE: Uuid = Uuid::from_bytes([
    0x6a, 0x0f, 0x51, 0x3e, 0x9d, 0x42, 0x4c, 0x1b, 0x8e, 0x77, 0x2c, 0x63, 0x05, 0xd1, 0x94, 0xb8,
]);

/// Derives a stable id (a UUIDv5) from caller-chosen parts. The parts are
/// length-prefixed, so `["ab", "c"]` and `["a", "bc"]` differ.
///
/// ```
/// use queen_sdk::derive_id;
/// let a = derive_id(&["order-7", "receipt"]);
/// assert_eq!(a, derive_id(&["order-7", "receipt"]));
/// assert_ne!(a, derive_id(&["order-7", "refund"]));
/// assert_ne!(derive_id(&["ab", "c"]), derive_id(&["a", "bc"]));
/// ```
pub fn derive_id(parts: &[&str]) -> String {
    let mut buf = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for p in parts {
        buf.extend_from_slice(&(p.len() as u64).to_be_bytes());
        buf.extend_from_slice(p.as_bytes());
    }
    Uuid::new_v5(&NAMESPACE, &buf).to_string()
}
