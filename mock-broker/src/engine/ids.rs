//! Broker-minted identifiers.

/// A new message id: a UUIDv7, so ids sort by creation time.
pub fn message_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

/// A new lease id: a UUIDv7.
pub fn lease_id() -> String {
    uuid::Uuid::now_v7().to_string()
}
