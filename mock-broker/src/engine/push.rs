//! Appending messages to partition logs, with deduplication.

use serde_json::value::RawValue;

use super::ids;
use super::queues::{Settings, check_name, ensure_partition, ensure_queue};
use crate::error::EngineError;
use crate::store::keys::Key;
use crate::store::records::{MessageRecord, PartitionRecord, TxnRef};
use crate::store::{StoreError, T, Tx};

/// Longest `transactionId`, in bytes.
pub const MAX_TRANSACTION_ID_BYTES: usize = 65_535;

/// One message to append.
#[derive(Debug, Clone)]
pub struct NewMessage {
    /// Target queue (created with defaults when missing).
    pub queue: String,
    /// Target partition.
    pub partition: String,
    /// The payload, as the producer's JSON text.
    pub payload: Box<RawValue>,
    /// The dedup key; minted when absent.
    pub transaction_id: Option<String>,
    /// Kept on the message (transactions only; the push route drops it).
    pub trace_id: Option<String>,
    /// Stamped from the caller's identity, never from the request.
    pub producer_sub: Option<String>,
    /// The message id to store (a timer's, minted when it was scheduled); minted when absent.
    pub message_id: Option<String>,
}

impl NewMessage {
    /// Checks names and the transaction id before anything is written.
    pub fn validate(&self) -> Result<(), EngineError> {
        check_name("queue", &self.queue)?;
        check_name("partition", &self.partition)?;
        if let Some(t) = &self.transaction_id
            && t.len() > MAX_TRANSACTION_ID_BYTES
        {
            return Err(EngineError::bad(format!(
                "transactionId is {} bytes; the limit is {MAX_TRANSACTION_ID_BYTES}",
                t.len()
            )));
        }
        Ok(())
    }
}

/// What appending one message did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Appended {
    /// The stored message's id (the original's, for a duplicate).
    pub message_id: String,
    /// The dedup key used.
    pub transaction_id: String,
    /// The message's offset in its partition (the original's, for a duplicate).
    pub offset: u64,
    /// The partition's broker-wide id.
    pub partition_id: u64,
    /// `true`: the key was already in the partition's dedup window; nothing was stored.
    pub duplicate: bool,
}

/// Appends one message, or finds the original when its key is inside the dedup window.
/// Duplicates inside one command are found too: the staging view sees earlier appends.
pub fn append(tx: &mut Tx, tenant: &str, msg: NewMessage) -> Result<Appended, StoreError> {
    let queue = ensure_queue(tx, tenant, &msg.queue)?;
    let settings = Settings::of(&queue.options);
    let mut part = ensure_partition(tx, tenant, &msg.queue, &msg.partition)?;
    let message_id = match msg.message_id {
        Some(id) => id,
        None => next_id(tx, tenant, &part)?,
    };
    let txn = msg.transaction_id.unwrap_or_else(|| message_id.clone());
    let idx_key = Key::tenant(tenant).u64(part.id).str(&txn).into_bytes();

    if let Some(found) = find_duplicate(tx, tenant, &part, &idx_key, settings)? {
        return Ok(Appended {
            transaction_id: txn,
            ..found
        });
    }

    let offset = part.next_offset;
    let created_at = super::stamp::message(tx);
    let rec = MessageRecord {
        id: message_id.clone(),
        txn: txn.clone(),
        trace: msg.trace_id,
        data: msg.payload,
        producer_sub: msg.producer_sub,
        created_at,
        visible_at: tx.now + settings.delayed_processing * 1_000_000,
    };
    tx.put(
        T::Messages,
        Key::tenant(tenant).u64(part.id).u64(offset).into_bytes(),
        &rec,
    );
    tx.put(T::TxnIndex, idx_key, &TxnRef { offset, created_at });
    part.next_offset += 1;
    tx.put(
        T::Partitions,
        super::queues::partition_key(tenant, &msg.queue, &msg.partition),
        &part,
    );
    tx.woken.push((tenant.to_string(), msg.queue));
    Ok(Appended {
        message_id,
        transaction_id: txn,
        offset,
        partition_id: part.id,
        duplicate: false,
    })
}

/// A new message id for `part`: above every id minted for it before, so a
/// partition's messages sort by id in offset order ([`ids::MessageIds`]); the last
/// stored message is read only when the writer's memory has no id for the partition.
fn next_id(tx: &Tx, tenant: &str, part: &PartitionRecord) -> Result<String, StoreError> {
    let key = (tenant.to_string(), part.id);
    let remembered = tx.with_memory(|m: &mut ids::MessageIds| m.knows(&key));
    let floor = match (remembered, part.next_offset.checked_sub(1)) {
        (false, Some(last)) => tx
            .get::<MessageRecord>(
                T::Messages,
                &Key::tenant(tenant).u64(part.id).u64(last).into_bytes(),
            )?
            .map(|m| m.id),
        _ => None,
    };
    Ok(tx.with_memory(|m: &mut ids::MessageIds| m.next(key, || floor)))
}

fn find_duplicate(
    tx: &Tx,
    tenant: &str,
    part: &PartitionRecord,
    idx_key: &[u8],
    settings: Settings,
) -> Result<Option<Appended>, StoreError> {
    if settings.dedup_window_seconds <= 0 {
        return Ok(None);
    }
    let Some(prev) = tx.get::<TxnRef>(T::TxnIndex, idx_key)? else {
        return Ok(None);
    };
    if tx.now - prev.created_at >= settings.dedup_window_seconds * 1_000_000 {
        return Ok(None);
    }
    let msg_key = Key::tenant(tenant)
        .u64(part.id)
        .u64(prev.offset)
        .into_bytes();
    let Some(original) = tx.get::<MessageRecord>(T::Messages, &msg_key)? else {
        return Ok(None);
    };
    Ok(Some(Appended {
        message_id: original.id,
        transaction_id: original.txn,
        offset: prev.offset,
        partition_id: part.id,
        duplicate: true,
    }))
}

/// The push route: appends every item in order. Validation of every item happens
/// before the first write, so a bad item stores nothing of the call.
pub fn push(
    tx: &mut Tx,
    tenant: &str,
    items: Vec<NewMessage>,
) -> Result<Vec<(String, Appended)>, EngineError> {
    for item in &items {
        item.validate()?;
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let queue = item.queue.clone();
        out.push((queue, append(tx, tenant, item)?));
    }
    Ok(out)
}
