//! The values stored in each table, and their encoding.
//!
//! Values carry a one-byte format tag. Records that hold JSON (queue options, messages,
//! KV values, recorded answers) are JSON; the small fixed-shape records the hot path
//! reads and rewrites on every pop, push and ack (partitions, cursors, leases, the
//! dedup index) are postcard, which decodes several times faster. [`decode`] reads
//! either, whatever the table, so files written before the compact format still open.
//! Message payloads are kept as the raw JSON text the producer sent and are never
//! re-parsed on the way out.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use super::StoreError;
use crate::clock::Micros;

const FORMAT_JSON: u8 = 1;
const FORMAT_COMPACT: u8 = 2;

/// Encodes a record as JSON (for records holding JSON values, which only a
/// self-describing format can carry).
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    out.push(FORMAT_JSON);
    // Serialising our own plain structs into a Vec cannot fail.
    serde_json::to_writer(&mut out, value).expect("records serialise");
    out
}

/// Encodes a fixed-shape record (no JSON values, no skipped fields) in postcard.
pub fn encode_compact<T: Serialize>(value: &T) -> Vec<u8> {
    let out = Vec::with_capacity(32);
    let mut out = postcard::to_extend(&FORMAT_COMPACT, out).expect("a tag serialises");
    out = postcard::to_extend(value, out).expect("records serialise");
    out
}

/// Decodes a stored record in either format.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, StoreError> {
    let undecodable =
        |e: &dyn std::fmt::Display| StoreError::Corrupt(format!("undecodable record: {e}"));
    match bytes.split_first() {
        Some((&FORMAT_JSON, body)) => serde_json::from_slice(body).map_err(|e| undecodable(&e)),
        Some((&FORMAT_COMPACT, body)) => postcard::from_bytes(body).map_err(|e| undecodable(&e)),
        _ => Err(StoreError::Corrupt("unknown record format".into())),
    }
}

/// A queue and its options.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct QueueRecord {
    /// The queue's namespace, for discovery pops.
    pub namespace: Option<String>,
    /// The queue's task, for discovery pops.
    pub task: Option<String>,
    /// Every option with its current value.
    pub options: QueueOptions,
    /// When the queue was created.
    pub created_at: Micros,
}

/// Every option of a queue, with its current value. Stored as JSON under the wire names
/// (camelCase), so a record written when options were a free map reads back the same;
/// an option a record lacks takes its default. Options the broker gives no behaviour
/// (`priority`, `ttl`, ...) are kept and echoed, as Queen 2 does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct QueueOptions {
    /// Seconds a popped batch stays leased.
    pub lease_time: i64,
    /// `failed` acks a message may take and still be redelivered.
    pub retry_limit: i64,
    /// Dead-letter (true) or drop (false) an exhausted or `dlq` message.
    pub dead_letter_queue: bool,
    /// Seconds a new message stays invisible.
    pub delayed_processing: i64,
    /// Seconds a `(partition, transactionId)` is remembered; 0 turns dedup off.
    pub dedup_window_seconds: i64,
    /// Retention: delete messages older than this many seconds (0: off).
    pub retention_seconds: i64,
    /// Kept and echoed.
    pub priority: i64,
    /// Kept and echoed, in milliseconds; never applied: Queen 2 redelivers a `failed`
    /// message at once whatever it says (queen-engine 1.3 `005_log_ack.sql` (4) releases
    /// the lease, and its pop never reads the delay).
    pub retry_delay: i64,
    /// Kept and echoed.
    pub max_size: i64,
    /// Kept and echoed.
    pub ttl: i64,
    /// Kept and echoed.
    pub dlq_after_max_retries: bool,
    /// Kept and echoed.
    pub window_buffer: i64,
    /// Retention: delete completed messages older than this many seconds (0: off).
    pub completed_retention_seconds: i64,
    /// Retention applies only when true.
    pub retention_enabled: bool,
    /// Kept and echoed.
    pub encryption_enabled: bool,
    /// Kept and echoed.
    pub max_wait_time_seconds: i64,
    /// Kept and echoed, clamped into `0..=60000`.
    pub min_pop_wait_time: i64,
    /// Kept and echoed.
    pub retention_sink_hold: Option<String>,
    /// Kept and echoed.
    pub retention_sink_hold_max_seconds: i64,
}

impl Default for QueueOptions {
    fn default() -> Self {
        Self {
            lease_time: 300,
            retry_limit: 3,
            dead_letter_queue: true,
            delayed_processing: 0,
            dedup_window_seconds: 3600,
            retention_seconds: 0,
            priority: 0,
            // Queen 2's default (queen-engine 1.3 `012_configure.sql`), and v0's.
            retry_delay: 1000,
            max_size: 0,
            ttl: 0,
            dlq_after_max_retries: false,
            window_buffer: 0,
            completed_retention_seconds: 0,
            retention_enabled: false,
            encryption_enabled: false,
            max_wait_time_seconds: 0,
            min_pop_wait_time: 0,
            retention_sink_hold: None,
            retention_sink_hold_max_seconds: 0,
        }
    }
}

/// The options a configure call sets, each `Some` with its new value (a client's null,
/// "back to the default", arrives here as the default's value). Deserialized from the
/// call's checked `options` object by `http::wire::queues`; unknown names are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)] // one field per option of [`QueueOptions`], same name and meaning
pub struct OptionsPatch {
    pub lease_time: Option<i64>,
    pub retry_limit: Option<i64>,
    pub dead_letter_queue: Option<bool>,
    pub delayed_processing: Option<i64>,
    pub dedup_window_seconds: Option<i64>,
    pub retention_seconds: Option<i64>,
    pub priority: Option<i64>,
    pub retry_delay: Option<i64>,
    pub max_size: Option<i64>,
    pub ttl: Option<i64>,
    pub dlq_after_max_retries: Option<bool>,
    pub window_buffer: Option<i64>,
    pub completed_retention_seconds: Option<i64>,
    pub retention_enabled: Option<bool>,
    pub encryption_enabled: Option<bool>,
    pub max_wait_time_seconds: Option<i64>,
    pub min_pop_wait_time: Option<i64>,
    pub retention_sink_hold: Option<Option<String>>,
    pub retention_sink_hold_max_seconds: Option<i64>,
}

impl QueueOptions {
    /// Sets every option the patch carries.
    pub fn apply(&mut self, p: OptionsPatch) {
        macro_rules! set {
            ($($field:ident),*) => {$(
                if let Some(v) = p.$field {
                    self.$field = v;
                }
            )*};
        }
        set!(
            lease_time,
            retry_limit,
            dead_letter_queue,
            delayed_processing,
            dedup_window_seconds,
            retention_seconds,
            priority,
            retry_delay,
            max_size,
            ttl,
            dlq_after_max_retries,
            window_buffer,
            completed_retention_seconds,
            retention_enabled,
            encryption_enabled,
            max_wait_time_seconds,
            min_pop_wait_time,
            retention_sink_hold,
            retention_sink_hold_max_seconds
        );
    }
}

/// A partition of a queue: its broker-wide id and the next offset of its log.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct PartitionRecord {
    /// Broker-wide id; the wire's `partitionId` is its decimal text.
    pub id: u64,
    /// The offset the next message gets.
    pub next_offset: u64,
    /// When the partition was created.
    pub created_at: Micros,
}

/// The reverse of `PartitionRecord`: which queue and partition an id names.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PartitionRef {
    /// The queue.
    pub queue: String,
    /// The partition's name.
    pub partition: String,
}

/// One message of a partition's log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MessageRecord {
    /// The message id (UUIDv7).
    pub id: String,
    /// Its `transactionId` (the dedup key).
    pub txn: String,
    /// Its trace id (transactions only).
    #[serde(default)]
    pub trace: Option<String>,
    /// The payload, as the producer's JSON text.
    pub data: Box<RawValue>,
    /// The producer's identity, stamped from its token.
    #[serde(default)]
    pub producer_sub: Option<String>,
    /// When it was stored.
    pub created_at: Micros,
    /// When the message becomes visible to consumers (`delayedProcessing`).
    pub visible_at: Micros,
}

/// Where a `(partition, transactionId)` was last stored: the dedup window and ack lookup.
#[derive(Debug, Clone, Copy, Serialize, Deserialize)]
pub struct TxnRef {
    /// The message's offset.
    pub offset: u64,
    /// When it was stored: the dedup window counts from here.
    pub created_at: Micros,
}

/// How a delivered message was last acknowledged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AckMark {
    /// Done for the group.
    Completed,
    /// Counts an attempt; redelivered while the retry limit lasts.
    Failed,
    /// Redelivered without counting an attempt.
    Retry,
    /// Dead-lettered (or dropped).
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
    /// The lease id.
    pub id: String,
    /// When it lapses.
    pub expires_at: Micros,
    /// The lowest offset delivered under it: offsets from here to the cursor were done
    /// while it was held (the cursor forgets their marks as it moves past them).
    #[serde(default)]
    pub first: u64,
}

/// A consumer group's position and lease on one partition.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ConsumerRecord {
    /// The first offset not yet done for this group.
    pub cursor: u64,
    /// The group's lease on this partition, if any (possibly lapsed).
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
    /// The group holding it.
    pub group: String,
    /// The queue of its partitions.
    pub queue: String,
    /// The partition ids it claims.
    pub claims: Vec<u64>,
    /// When it lapses.
    pub expires_at: Micros,
}

/// A dead-lettered message, as the DLQ listing shows it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DlqRecord {
    /// The queue.
    pub queue: String,
    /// The partition's name.
    pub partition: String,
    /// The partition's id.
    pub partition_id: u64,
    /// The message's offset.
    pub offset: u64,
    /// The group that dead-lettered it.
    pub group: String,
    /// The message as stored.
    pub message: MessageRecord,
    /// The last ack's `error`.
    pub error: Option<String>,
    /// `failed` acks taken.
    pub retry_count: u32,
    /// When it was dead-lettered.
    pub failed_at: Micros,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_queue_record_written_with_an_options_map_reads_back_typed() {
        // As written when options were a free JSON map: wire names, some options
        // absent (added later), and one the broker does not know.
        let old = br#"{"namespace":"billing","task":null,"options":{"leaseTime":30,"deadLetterQueue":false,"retentionSinkHold":null,"somethingElse":1},"created_at":5}"#;
        let mut bytes = vec![FORMAT_JSON];
        bytes.extend_from_slice(old);
        let q: QueueRecord = decode(&bytes).unwrap();
        assert_eq!(q.namespace.as_deref(), Some("billing"));
        assert_eq!(q.options.lease_time, 30);
        assert!(!q.options.dead_letter_queue);
        assert_eq!(
            q.options.retry_limit, 3,
            "an absent option takes its default"
        );
        let again: QueueRecord = decode(&encode(&q)).unwrap();
        assert_eq!(again.options, q.options);
    }

    #[test]
    fn both_formats_decode_so_older_files_still_open() {
        let c = ConsumerRecord {
            cursor: 7,
            lease: Some(LeaseState {
                id: "l".into(),
                expires_at: -5,
                first: 3,
            }),
            pending: BTreeMap::from([(
                9,
                MsgState {
                    deliveries: 2,
                    ..Default::default()
                },
            )]),
        };
        for bytes in [encode(&c), encode_compact(&c)] {
            let back: ConsumerRecord = decode(&bytes).unwrap();
            assert_eq!(back.cursor, 7);
            assert_eq!(
                back.lease.as_ref().map(|l| (l.expires_at, l.first)),
                Some((-5, 3))
            );
            assert_eq!(back.pending[&9].deliveries, 2);
        }
        assert!(encode_compact(&c).len() < encode(&c).len());
        assert!(matches!(
            decode::<u64>(&[9, 1]),
            Err(StoreError::Corrupt(_))
        ));
    }
}
