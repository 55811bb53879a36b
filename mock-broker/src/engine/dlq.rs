//! Dead letters: the listing, and handling one by hand (`DELETE` and `POST .../retry`
//! on `/api/v1/messages/{partitionId}/{transactionId}`).
//!
//! The official client's tests (`admin.rs`, `coverage.rs` of `queen-mq` 2.7.0) pin
//! what those two routes act on: a message's dead-letter rows, never the log. A live
//! message is "not found" for both; a replay pushes the dead letter's snapshot again
//! and drops its rows.

use redb::Database;

use super::Engine;
use super::answers::{self, Held, Starved};
use super::push::{Appended, NewMessage, append};
use crate::error::EngineError;
use crate::store::keys::Key;
use crate::store::records::{DlqRecord, decode};
use crate::store::{Reader, StoreError, T, Tx};

/// Filters and page of a DLQ listing.
#[derive(Debug, Clone, Default)]
pub struct DlqQuery {
    /// Only this queue's dead letters.
    pub queue: Option<String>,
    /// Only this group's dead letters.
    pub group: Option<String>,
    /// Page size.
    pub limit: usize,
    /// Matches to skip.
    pub offset: usize,
}

/// One page of matches and the count of all matches.
#[derive(Debug, Clone, Default)]
pub struct DlqPage {
    /// The page, oldest first.
    pub records: Vec<DlqRecord>,
    /// Every match.
    pub total: usize,
}

/// Lists dead letters from the last committed state; never waits on the writer. Each
/// record of the page is charged to `held` ([`Held::charge_whole`], of
/// [`answers::record_cost`]). A page is answered whole or not at all (a client pages on
/// by `limit`, so a short page would make it skip records): when the budget has no room
/// for all of it, `Err(Starved)` with the whole page's cost, to wait for before
/// reading again.
pub fn list(
    db: &Database,
    tenant: &str,
    q: &DlqQuery,
    held: &mut Held,
) -> Result<Result<DlqPage, Starved>, StoreError> {
    let reader = Reader::begin(db)?;
    let prefix = Key::tenant(tenant).into_bytes();
    let mut page = DlqPage::default();
    // The page's cost so far, and whether it outgrew the room (then the rest of the page
    // is only counted, not kept).
    let (mut cost, mut short) = (0u64, false);
    reader.scan(T::Dlq, &prefix, &prefix, |_, v| {
        let rec: DlqRecord = decode(v)?;
        let wanted = q.queue.as_ref().is_none_or(|x| *x == rec.queue)
            && q.group.as_ref().is_none_or(|x| *x == rec.group);
        if wanted {
            if page.total >= q.offset && page.total - q.offset < q.limit {
                let n = answers::record_cost(v.len());
                cost += n;
                short = short || held.charge_whole(n).is_err();
                if !short {
                    page.records.push(rec);
                }
            }
            page.total += 1;
        }
        Ok(true)
    })?;
    Ok(if short { Err(Starved(cost)) } else { Ok(page) })
}

/// Drops a deleted queue's dead letters.
pub fn delete_queue_entries(tx: &mut Tx, tenant: &str, queue: &str) -> Result<(), StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut doomed = Vec::new();
    tx.scan(T::Dlq, &prefix, &prefix, |k, v| {
        let rec: DlqRecord = decode(v)?;
        if rec.queue == queue {
            doomed.push(k.to_vec());
        }
        Ok(true)
    })?;
    for k in doomed {
        tx.delete(T::Dlq, k);
    }
    Ok(())
}

/// The dead-letter rows of one message (by partition id and transaction id): their
/// keys, and the first row, whose snapshot a replay pushes again.
fn rows_of(
    tx: &Tx,
    tenant: &str,
    partition_id: u64,
    transaction_id: &str,
) -> Result<(Vec<Vec<u8>>, Option<DlqRecord>), StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let (mut keys, mut first) = (Vec::new(), None);
    tx.scan(T::Dlq, &prefix, &prefix, |k, v| {
        let rec: DlqRecord = decode(v)?;
        if rec.partition_id == partition_id && rec.message.txn == transaction_id {
            keys.push(k.to_vec());
            first.get_or_insert(rec);
        }
        Ok(true)
    })?;
    Ok((keys, first))
}

/// What removing a message's dead letters did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Removed {
    /// The message's queue.
    pub queue: String,
    /// Its partition's name.
    pub partition: String,
    /// Dead-letter rows removed (one per group that dead-lettered it).
    pub rows: usize,
}

/// Removes every dead-letter row of one message; `None` when it has none (a live
/// message, an unknown one, or another tenant's: the log itself is never edited).
pub fn remove(
    tx: &mut Tx,
    tenant: &str,
    partition_id: u64,
    transaction_id: &str,
) -> Result<Option<Removed>, StoreError> {
    let (keys, first) = rows_of(tx, tenant, partition_id, transaction_id)?;
    let Some(first) = first else {
        return Ok(None);
    };
    let rows = keys.len();
    for k in keys {
        tx.delete(T::Dlq, k);
    }
    Ok(Some(Removed {
        queue: first.queue,
        partition: first.partition,
        rows,
    }))
}

/// What replaying a dead letter did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// The dead-letter rows dropped.
    pub removed: Removed,
    /// The message pushed again: a new message id at the partition's next offset,
    /// with the same transaction id, payload, trace id and producer.
    pub appended: Appended,
}

/// Replays a dead-lettered message: pushes its snapshot again to its partition (past
/// the dedup window: the replay is meant to be delivered) and drops its dead-letter
/// rows. The transaction id then names the new message, so acks by it reach the
/// replay. `None` when the message has no dead letter.
pub fn replay(
    tx: &mut Tx,
    tenant: &str,
    partition_id: u64,
    transaction_id: &str,
) -> Result<Option<Replayed>, StoreError> {
    let (keys, first) = rows_of(tx, tenant, partition_id, transaction_id)?;
    let Some(first) = first else {
        return Ok(None);
    };
    tx.ensure_room()?;
    // The dedup index would answer the push with the dead original.
    tx.delete(
        T::TxnIndex,
        Key::tenant(tenant)
            .u64(partition_id)
            .str(transaction_id)
            .into_bytes(),
    );
    let m = first.message;
    let appended = append(
        tx,
        tenant,
        NewMessage {
            queue: first.queue.clone(),
            partition: first.partition.clone(),
            payload: m.data,
            transaction_id: Some(m.txn),
            trace_id: m.trace,
            producer_sub: m.producer_sub,
            message_id: None,
        },
    )?;
    let rows = keys.len();
    for k in keys {
        tx.delete(T::Dlq, k);
    }
    Ok(Some(Replayed {
        removed: Removed {
            queue: first.queue,
            partition: first.partition,
            rows,
        },
        appended,
    }))
}

impl Engine {
    /// Removes a message's dead letters ([`remove`]).
    pub async fn delete_dead_letter(
        &self,
        tenant: &str,
        partition_id: u64,
        transaction_id: &str,
    ) -> Result<Option<Removed>, EngineError> {
        let (tenant, txn) = (tenant.to_string(), transaction_id.to_string());
        self.shared
            .writer
            .submit(move |tx| Ok(remove(tx, &tenant, partition_id, &txn)?))
            .await
    }

    /// Replays a dead-lettered message ([`replay`]).
    pub async fn retry_dead_letter(
        &self,
        tenant: &str,
        partition_id: u64,
        transaction_id: &str,
    ) -> Result<Option<Replayed>, EngineError> {
        let (tenant, txn) = (tenant.to_string(), transaction_id.to_string());
        self.shared
            .writer
            .submit(move |tx| Ok(replay(tx, &tenant, partition_id, &txn)?))
            .await
    }
}
