//! Every case, grouped by the part of the spec it checks.

mod core;
mod cursor;
mod props;
mod surface_ephemeral;
mod surface_fetch;
mod surface_groups;
mod surface_messages;
mod surface_streams;
mod txn_acks;
mod txn_parts;
mod txn_rollback;
mod txn_shape;
mod txn_v0;

use crate::case::Case;

/// Every case of the suite, in id order.
pub fn all_cases() -> Vec<Case> {
    let mut all = Vec::new();
    all.extend(core::cases());
    all.extend(cursor::cases());
    all.extend(props::cases());
    all.extend(surface_ephemeral::cases());
    all.extend(surface_fetch::cases());
    all.extend(surface_groups::cases());
    all.extend(surface_messages::cases());
    all.extend(surface_streams::cases());
    all.extend(txn_acks::cases());
    all.extend(txn_parts::cases());
    all.extend(txn_rollback::cases());
    all.extend(txn_shape::cases());
    all.extend(txn_v0::cases());
    all.sort_by_key(|c| c.id);
    all
}

#[cfg(test)]
mod tests {
    #[test]
    fn case_ids_are_unique_and_dotted() {
        let all = super::all_cases();
        let mut ids: Vec<&str> = all.iter().map(|c| c.id).collect();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "duplicate case ids");
        assert!(all.iter().all(|c| c.id.contains('.') && !c.rule.is_empty()));
    }
}
