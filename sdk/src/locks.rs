//! Locks built on KV rows (the handle lands with the standalone APIs).

/// The KV namespace of lock rows.
pub const NAMESPACE: &str = "queen-locks";
