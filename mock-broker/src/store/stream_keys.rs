//! Keys of the stream runner's tables ([`super::T::StreamQueries`],
//! [`super::T::StreamState`]).
//!
//! `StreamQueries` holds three kinds of rows, told apart by a tag after the tenant so
//! that each kind is one byte-prefix range:
//!
//! - `(tenant, "name", name)`: a registered query, found by the name its runner uses;
//! - `(tenant, "id", query id)`: the name a broker-minted query id stands for;
//! - `(tenant, "part", query id, partition id)`: one partition holding state for the
//!   query, with its newest write and row count, so that listing the partitions a
//!   runner must sweep reads one row per partition instead of every state row.
//!
//! `StreamState` holds the state cells, `(tenant, query id, partition id, key)`, so one
//! partition's cells (and those under a key prefix) are one range in key order.

use super::keys::Key;

const BY_NAME: &str = "name";
const BY_ID: &str = "id";
const PARTITION: &str = "part";

/// A registered query, by its name.
pub fn query_by_name(tenant: &str, name: &str) -> Vec<u8> {
    Key::tenant(tenant).str(BY_NAME).str(name).into_bytes()
}

/// The name a query id stands for.
pub fn query_by_id(tenant: &str, query_id: &str) -> Vec<u8> {
    Key::tenant(tenant).str(BY_ID).str(query_id).into_bytes()
}

/// One partition holding state for a query.
pub fn state_partition(tenant: &str, query_id: &str, pid: u64) -> Vec<u8> {
    Key::tenant(tenant)
        .str(PARTITION)
        .str(query_id)
        .u64(pid)
        .into_bytes()
}

/// Every partition holding state for a query, in partition id order.
pub fn state_partitions_prefix(tenant: &str, query_id: &str) -> Vec<u8> {
    Key::tenant(tenant)
        .str(PARTITION)
        .str(query_id)
        .into_bytes()
}

/// One state cell.
pub fn state_cell(tenant: &str, query_id: &str, pid: u64, key: &str) -> Vec<u8> {
    Key::tenant(tenant)
        .str(query_id)
        .u64(pid)
        .str(key)
        .into_bytes()
}

/// The cells of one partition whose key starts with `key_prefix` ("" for all of them).
/// The key is the last component, so its escaped bytes without the terminator are the
/// prefix shared by every longer key.
pub fn state_cells_prefix(tenant: &str, query_id: &str, pid: u64, key_prefix: &str) -> Vec<u8> {
    let mut k = Key::tenant(tenant).str(query_id).u64(pid).into_bytes();
    k.extend(Key::escaped(key_prefix));
    k
}

/// Every cell of a query, all partitions.
pub fn state_query_prefix(tenant: &str, query_id: &str) -> Vec<u8> {
    Key::tenant(tenant).str(query_id).into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_prefix_selects_exactly_the_keys_that_start_with_it() {
        let p = state_cells_prefix("t", "q", 7, "tumb\u{1f}");
        assert!(state_cell("t", "q", 7, "tumb\u{1f}a").starts_with(&p));
        assert!(state_cell("t", "q", 7, "tumb\u{1f}").starts_with(&p));
        assert!(!state_cell("t", "q", 7, "tumc").starts_with(&p));
        assert!(!state_cell("t", "q", 8, "tumb\u{1f}a").starts_with(&p));
        // A NUL in a key is escaped, so it cannot end a prefix early.
        let nul = state_cells_prefix("t", "q", 7, "a\0");
        assert!(!state_cell("t", "q", 7, "a").starts_with(&nul));
        assert!(state_cell("t", "q", 7, "a\0b").starts_with(&nul));
    }

    #[test]
    fn the_kinds_of_query_rows_never_share_a_range() {
        let parts = state_partitions_prefix("t", "name");
        assert!(!query_by_name("t", "x").starts_with(&parts));
        assert!(state_partition("t", "name", 1).starts_with(&parts));
        assert!(!state_partition("t", "q", 1).starts_with(&state_partitions_prefix("t", "q2")));
        assert!(!state_cell("t2", "q", 1, "k").starts_with(&state_query_prefix("t", "q")));
    }
}
