//! The dead-letter listing.

use redb::Database;

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

/// Lists dead letters from the last committed state; never waits on the writer.
pub fn list(db: &Database, tenant: &str, q: &DlqQuery) -> Result<DlqPage, StoreError> {
    let reader = Reader::begin(db)?;
    let prefix = Key::tenant(tenant).into_bytes();
    let mut page = DlqPage::default();
    reader.scan(T::Dlq, &prefix, &prefix, |_, v| {
        let rec: DlqRecord = decode(v)?;
        let wanted = q.queue.as_ref().is_none_or(|x| *x == rec.queue)
            && q.group.as_ref().is_none_or(|x| *x == rec.group);
        if wanted {
            if page.total >= q.offset && page.records.len() < q.limit {
                page.records.push(rec);
            }
            page.total += 1;
        }
        Ok(true)
    })?;
    Ok(page)
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
