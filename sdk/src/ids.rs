//! Deterministic identifiers: the same step, run again, names its effects the same way,
//! so a retry or a redelivery is recognised as a duplicate instead of applied twice.

use sha1::{Digest as _, Sha1};
use uuid::Uuid;

/// The namespace of ids derived by this SDK (a fixed UUIDv5 namespace).
const NAMESPACE: Uuid = Uuid::from_bytes([
    0x6a, 0x0f, 0x51, 0x3e, 0x9d, 0x42, 0x4c, 0x1b, 0x8e, 0x77, 0x2c, 0x63, 0x05, 0xd1, 0x94, 0xb8,
]);

/// Derives a stable id (a UUIDv5) from caller-chosen parts. The parts are
/// length-prefixed, so `["ab", "c"]` and `["a", "bc"]` differ.
///
/// As a push's `transactionId`, it makes a second push a duplicate only within the
/// queue's dedup window (`dedupWindowSeconds`, default 3600 s; see
/// [`Worker::past_dedup_window`](crate::Worker::past_dedup_window) for every guard's
/// reach). To process again on purpose, derive in a new epoch ([`crate::Epoch::derive_id`]).
///
/// ```
/// use queen_sdk::derive_id;
/// let a = derive_id(&["order-7", "receipt"]);
/// assert_eq!(a, derive_id(&["order-7", "receipt"]));
/// assert_ne!(a, derive_id(&["order-7", "refund"]));
/// assert_ne!(derive_id(&["ab", "c"]), derive_id(&["a", "bc"]));
/// // The same on every build and version of this SDK: ids already stored stay valid.
/// assert_eq!(a, "08490f4a-edc9-598b-a635-f62cab8a51a1");
/// ```
pub fn derive_id(parts: &[&str]) -> String {
    text(name_based(parts))
}

/// `id` in its hyphenated lowercase form, as `to_string` writes it, without going
/// through the formatter (a few hundred instructions per id).
fn text(id: Uuid) -> String {
    let mut buf = Uuid::encode_buffer();
    id.hyphenated().encode_lower(&mut buf).to_owned()
}

/// The UUIDv5 of `parts`, each length-prefixed: RFC 9562's name-based UUID, SHA-1 of
/// the namespace and the name, as `Uuid::new_v5` makes it (a test holds them equal).
///
/// Hashed here, not by `Uuid::new_v5`: its portable SHA-1 took about 5,000 instructions
/// for an `ack-push` step's id (callgrind, 2026-12-04), about a third of what the SDK
/// added to that step over a hand-written client; `sha1` uses the CPU's SHA extensions
/// when it has them. The parts are fed to the hash as they are, not gathered into a buffer first.
fn name_based(parts: &[&str]) -> Uuid {
    let mut h = Sha1::new();
    h.update(NAMESPACE.as_bytes());
    for p in parts {
        h.update((p.len() as u64).to_be_bytes());
        h.update(p.as_bytes());
    }
    let digest = h.finalize();
    let mut b = [0u8; 16];
    b.copy_from_slice(&digest[..16]);
    // Version 5 in the high nibble of byte 6, the RFC variant (10) in byte 8.
    b[6] = (b[6] & 0x0f) | 0x50;
    b[8] = (b[8] & 0x3f) | 0x80;
    Uuid::from_bytes(b)
}

/// The 48-bit millisecond timestamp that leads a UUIDv7, in its byte order.
pub(crate) type Timestamp = [u8; 6];

/// The timestamp of the earliest UUIDv7 among `ids` (the broker's ids of the messages a
/// step acks); `None` when none is a UUIDv7.
pub(crate) fn earliest_v7<'a>(ids: impl IntoIterator<Item = &'a str>) -> Option<Timestamp> {
    ids.into_iter()
        .filter_map(|id| Uuid::parse_str(id).ok())
        .filter(|id| id.get_version_num() == 7)
        .map(|id| {
            let b = id.into_bytes();
            [b[0], b[1], b[2], b[3], b[4], b[5]]
        })
        .min()
}

/// Derives the id of a push in a step that acks messages: [`derive_id`] of `parts`, but
/// ordered by time when the step acks a message whose broker id is a UUIDv7 (Queen
/// names messages so; `after` is the earliest such id's [`earliest_v7`]): then the id is
/// a UUIDv8 whose first 48 bits are that timestamp and whose other bits are the
/// name-based hash's. The same step still derives the same id; and the ids of
/// successive steps sort by the time of the messages they answer, as a broker-made
/// UUIDv7 does.
///
/// Why: a broker finds duplicates through an index of `transactionId`s per partition (a
/// B-tree in this project's broker and in Queen's PostgreSQL). Ids that sort by time
/// are added at its edge; hashed ones anywhere in it, each touching a page of its own.
/// Two of this project's durable engines growing side by side, 64 callers pushing into
/// 64 partitions, took hashed ids at a median 0.90 of the rate of ordered ones over 28
/// alternating rounds up to 576,000 ids each (slower in 24 of them; `cargo bench -p
/// queen-mock-broker --bench dedup_ids`, 2026-12-03).
pub(crate) fn derive_push_id(after: Option<Timestamp>, parts: &[&str]) -> String {
    let hashed = name_based(parts);
    let Some(at) = after else {
        return text(hashed);
    };
    let mut b = hashed.into_bytes();
    b[..6].copy_from_slice(&at);
    // Version 8 (custom, RFC 9562) in the high nibble of byte 6; the variant (10) stays
    // as the name-based UUID set it.
    b[6] = (b[6] & 0x0f) | 0x80;
    text(Uuid::from_bytes(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    const EARLY: &str = "0199a7c2-5e1a-7000-8000-000000000007";
    const LATE: &str = "0199a7c2-6000-7000-8000-000000000001";

    #[test]
    fn a_push_id_is_a_time_ordered_uuidv8_after_a_uuidv7_message() {
        let at = earliest_v7([EARLY]);
        let id = derive_push_id(at, &["push", "m\0billing\0completed", "out", "p", "0"]);
        let parsed = Uuid::parse_str(&id).expect("a UUID");
        assert_eq!(parsed.get_version_num(), 8);
        assert_eq!(parsed.get_variant(), uuid::Variant::RFC4122);
        assert_eq!(
            &id[..13],
            &EARLY[..13],
            "the message's 48-bit timestamp leads"
        );
        // Stable, and different for other parts.
        let again = derive_push_id(at, &["push", "m\0billing\0completed", "out", "p", "0"]);
        assert_eq!(id, again);
        let other = derive_push_id(at, &["push", "m\0billing\0completed", "out", "p", "1"]);
        assert_ne!(id, other);
        assert_eq!(&other[..13], &EARLY[..13]);
    }

    /// `Uuid::new_v5` of the length-prefixed parts: what `name_based` made before it
    /// hashed for itself.
    fn uuid_crate_v5(parts: &[&str]) -> Uuid {
        let mut name = Vec::new();
        for p in parts {
            name.extend_from_slice(&(p.len() as u64).to_be_bytes());
            name.extend_from_slice(p.as_bytes());
        }
        Uuid::new_v5(&NAMESPACE, &name)
    }

    #[test]
    fn name_based_ids_are_the_uuid_crates_v5() {
        let long = "x".repeat(300);
        let cases: [&[&str]; 6] = [
            &[],
            &[""],
            &["order-7", "receipt"],
            &[
                "push",
                "0199a7c2-5e1a-7000-8000-000000000007\0billing\0completed",
                "out",
                "p",
                "0",
            ],
            &["ünïcode", "🦀", "\0"],
            &[&long, &long, "tail"],
        ];
        for parts in cases {
            assert_eq!(name_based(parts), uuid_crate_v5(parts), "parts {parts:?}");
        }
    }

    #[test]
    fn push_ids_sort_by_the_time_of_the_messages_they_answer() {
        let parts = ["push", "x", "out", "p", "0"];
        let early = derive_push_id(earliest_v7([EARLY]), &parts);
        let late = derive_push_id(earliest_v7([LATE]), &parts);
        assert!(early < late, "{early} sorts before {late}");
        // Of several acked messages, the earliest names the step.
        assert_eq!(earliest_v7([LATE, EARLY]), earliest_v7([EARLY]));
    }

    #[test]
    fn without_a_uuidv7_message_a_push_id_is_the_name_based_uuid() {
        let parts = ["push", "x", "out", "p", "0"];
        for acked in [
            &[][..],
            &["order-7"][..],
            &["6f1c0b8e-2d4a-4c3b-9a1e-5b7d2c9f0a11"][..],
        ] {
            assert_eq!(earliest_v7(acked.iter().copied()), None, "acked {acked:?}");
            let id = derive_push_id(earliest_v7(acked.iter().copied()), &parts);
            assert_eq!(id, derive_id(&parts), "acked {acked:?}");
            assert_eq!(Uuid::parse_str(&id).unwrap().get_version_num(), 5);
        }
    }
}
