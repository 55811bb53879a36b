//! The record of each transaction call's answer, under an internal request id.
//!
//! The engine retries a call whose commit outcome it could not observe (a storage
//! error, an injected fault after the commit) under the same request id. The record is
//! written in the same commit as the call's effects, so a retry of a call that did
//! commit finds it and answers from it instead of running the step again. Under an id
//! the engine minted, it is written only where such a retry can find it
//! ([`record_for_retry`]).

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::store::records::decode;
use crate::store::{StoreError, T, Tx};

/// How long a record is kept: far longer than any in-call retry deadline.
pub const KEEP_SECONDS: u64 = 120;

/// A new request id: a UUIDv7, so records sort by their millisecond and old ones purge
/// as a range (its other bits are random, as every minted id's: see `engine::ids`).
pub fn new_id() -> String {
    super::ids::transaction_id()
}

/// The recorded answer of `id`, if its call committed.
pub fn recorded<A: DeserializeOwned>(tx: &Tx, id: &str) -> Result<Option<A>, StoreError> {
    tx.get_raw(T::Requests, id.as_bytes())?
        .map(|b| decode(&b))
        .transpose()
}

/// Records `answer` (a typed outcome, e.g. a transaction's) under `id`, in the
/// current command.
pub fn record<A: Serialize>(tx: &mut Tx, id: &str, answer: &A) {
    tx.put(T::Requests, id.as_bytes().to_vec(), answer);
}

/// Records `answer` under `id` for the engine's own retries alone: an id it minted for
/// one call, which no caller can send again once that call is answered. Such a retry
/// follows a commit that failed, and only a commit straight to redb can fail after
/// reaching the disk, so a batch that goes through the write-ahead log keeps no record
/// (see [`Tx::put_unless_logged`]).
pub fn record_for_retry<A: Serialize + 'static>(tx: &mut Tx, id: &str, answer: A) {
    tx.put_unless_logged(T::Requests, id.as_bytes().to_vec(), answer);
}

/// Drops records older than [`KEEP_SECONDS`].
pub fn purge(tx: &mut Tx) -> Result<usize, StoreError> {
    let cutoff = std::time::SystemTime::now() - std::time::Duration::from_secs(KEEP_SECONDS);
    let secs = cutoff
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    let ts = uuid::Timestamp::from_unix(uuid::NoContext, secs.as_secs(), secs.subsec_nanos());
    let bound = uuid::Uuid::new_v7(ts).to_string();
    let mut old = Vec::new();
    tx.scan(T::Requests, &[], &[], |k, _| {
        if k >= bound.as_bytes() {
            return Ok(false);
        }
        old.push(k.to_vec());
        Ok(true)
    })?;
    let n = old.len();
    for k in old {
        tx.delete(T::Requests, k);
    }
    Ok(n)
}
