//! The values stored in each table, and their encoding.
//!
//! Values are JSON behind a one-byte format tag, so a later format can be told apart
//! from this one. Message payloads are kept as the raw JSON text the producer sent and
//! are never re-parsed on the way out.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::StoreError;
use crate::clock::Micros;

const FORMAT_V1: u8 = 1;

/// Encodes a record for storage.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.push(FORMAT_V1);
    // Serialising our own plain structs into a Vec cannot fail.
    serde_json::to_writer(&mut out, value).expect("records serialise");
    out
}

/// Decodes a stored record.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    match bytes.split_first() {
        Some((&FORMAT_V1, body)) => serde_json::from_slice(body)
            .map_err(|e| StoreError::Corrupt(format!("undecodable record: {e}"))),
        _ => Err(StoreError::Corrupt("unknown record format".into())),
    }
}

/// A queue and its options.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueRecord {
    pub namespace: Option<String>,
    pub task: Option<String>,
    /// Every option with its current value (see `engine::queues::OPTIONS`).
    pub options: serde_json::Map<String, serde_json::Value>,
    pub created_at: Micros,
}

/// A partition of a queue: its broker-wide id and the next offset of its log.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PartitionRecord {
    pub id: u64,
    pub next_offset: u64,
    pub created_at: Micros,
}

/// The reverse of `PartitionRecord`: which queue and partition an id names.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionRef {
    pub queue: String,
    pub partition: String,
}

/// One message of a partition's log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageRecord {
    pub id: String,
    pub txn: String,
    #[serde(default)]
    pub trace: Option<String>,
    pub data: Box<RawValue>,
    #[serde(default)]
    pub producer_sub: Option<String>,
    pub created_at: Micros,
    /// When the message becomes visible to consumers (`delayedProcessing`).
    pub visible_at: Micros,
}

/// Where a `(partition, transactionId)` was last stored: the dedup window and ack lookup.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TxnRef {
    pub offset: u64,
    pub created_at: Micros,
}

/// How a delivered message was last acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AckMark {
    Completed,
    Failed,
    Retry,
    Dlq,
}

/// Per-message state of one group, for messages at or after the group's cursor.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct MsgState {
    /// Times delivered to this group.
    pub deliveries: u32,
    /// `failed` acks taken (counted against `retryLimit`).
    pub failures: u32,
    /// The ack this delivery received, if any.
    pub acked: Option<AckMark>,
    /// Done for this group: completed, dead-lettered or dropped.
    pub done: bool,
    /// Delivered under the group's current lease.
    pub in_lease: bool,
}

/// A live (or lapsed, until the next pop notices) lease of one partition for one group.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseState {
    pub id: String,
    pub expires_at: Micros,
}

/// A consumer group's position and lease on one partition.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConsumerRecord {
    /// The first offset not yet done for this group.
    pub cursor: u64,
    pub lease: Option<LeaseState>,
    /// State of messages at or after `cursor` that have been delivered or acked.
    pub pending: BTreeMap<u64, MsgState>,
}

/// When a named group subscribed to a queue: where its cursor starts on a partition it
/// has not read yet.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct SubscriptionRecord {
    /// Messages created at or after this time are delivered; `i64::MIN` means all.
    pub from: Micros,
}

/// A lease id and the partitions it claims.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LeaseRecord {
    pub group: String,
    pub queue: String,
    pub claims: Vec<u64>,
    pub expires_at: Micros,
}

/// A dead-lettered message, as the DLQ listing shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlqRecord {
    pub queue: String,
    pub partition: String,
    pub partition_id: u64,
    pub offset: u64,
    pub group: String,
    pub message: MessageRecord,
    pub error: Option<String>,
    pub retry_count: u32,
    pub failed_at: Micros,
}
