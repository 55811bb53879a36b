//! Epochs: reprocessing on purpose. A step's derived ids and `once` markers make a
//! second run of it a duplicate, which is what a retry or a redelivery needs and what
//! a replay after a bug fix does not: the corrected step must run. An epoch names a
//! generation of processing; the same step in a new epoch derives new ids and new
//! markers, so it runs once more, and once only within that epoch.

use std::fmt;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ids::derive_id;

/// The longest epoch name: it is appended to `once` markers' keys, which have their
/// own limit ([`crate::TransactionBuilder::once`]).
pub const MAX_EPOCH_BYTES: usize = 64;

/// A generation of processing, carried into every id a step derives and every
/// [`once`](crate::TransactionBuilder::once) marker it sets: a replay in a new epoch
/// runs each step again, once.
///
/// What an epoch changes in a step ([`TransactionBuilder::epoch`](crate::TransactionBuilder::epoch),
/// or every step of a worker with [`Worker::epoch`](crate::Worker::epoch)):
///
/// - the `transactionId` derived for each push and timer (the epoch's name is one of
///   the parts it is derived from), so the broker's duplicate check does not recognise
///   the pushes of an earlier epoch;
/// - the key of each `once` marker: `key@epoch` (a step's own
///   [`once`](crate::TransactionBuilder::once) key names the work; the epoch says which
///   run of it), so a marker set by an earlier epoch does not gate the step.
///
/// Ids you give yourself ([`Push::transaction_id`](crate::Push::transaction_id)) and
/// other KV keys are not touched: derive them with [`Epoch::derive_id`] to make them
/// follow the epoch. No epoch (the default) derives exactly what this SDK derived
/// before epochs existed, so markers and ids already stored keep their meaning.
///
/// The replay after a fix: seek the group back ([`Client::seek`](crate::Client::seek))
/// and run the corrected worker in a new epoch. Every replayed message is processed
/// again and each of its outputs is produced once; a redelivery inside the new epoch is
/// still a duplicate.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Commit, Epoch, Ttl};
/// let step = || client.transaction().once("invoiced", "order-7", Ttl::days(7)).push("invoices", |p| p.payload(&"order-7"));
/// assert!(step().commit().await?.is_committed());
/// let Commit::Gated { gate, .. } = step().commit().await? else { panic!("done before") };
/// assert!(gate.already_done());
/// // The fix is deployed: epoch "fix-1" runs the step again, once.
/// let fix = Epoch::new("fix-1")?;
/// assert!(step().epoch(&fix).commit().await?.is_committed());
/// let Commit::Gated { gate, .. } = step().epoch(&fix).commit().await? else { panic!("done in fix-1") };
/// assert_eq!((gate.key.as_str(), gate.already_done()), ("order-7@fix-1", true));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Epoch(Arc<str>);

impl Epoch {
    /// An epoch named `name`: 1 to [`MAX_EPOCH_BYTES`] bytes of ASCII letters, digits,
    /// `-`, `_` and `.` (it becomes part of KV keys and is read in logs). Choose a name
    /// that says why (`fix-2026-12-05`, `v2`); an epoch used before replays nothing.
    ///
    /// ```
    /// use queen_sdk::Epoch;
    /// assert_eq!(Epoch::new("fix-1")?.as_str(), "fix-1");
    /// assert!(Epoch::new("").is_err());
    /// assert!(Epoch::new("fix 1").is_err()); // a space
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn new(name: impl Into<String>) -> Result<Epoch> {
        let name = name.into();
        let fits = !name.is_empty()
            && name.len() <= MAX_EPOCH_BYTES
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
        if !fits {
            return Err(Error::invalid(
                "epoch",
                format!(
                    "{name:?}: an epoch is 1 to {MAX_EPOCH_BYTES} bytes of ASCII letters, digits, '-', '_' and '.'"
                ),
            ));
        }
        Ok(Epoch(name.into()))
    }

    /// Its name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// [`derive_id`] of `parts` in this epoch: for ids you give yourself, so that they
    /// follow the epoch as the SDK's derived ones do.
    ///
    /// ```
    /// use queen_sdk::{Epoch, derive_id};
    /// let fix = Epoch::new("fix-1")?;
    /// assert_eq!(fix.derive_id(&["order-7"]), fix.derive_id(&["order-7"]));
    /// assert_ne!(fix.derive_id(&["order-7"]), derive_id(&["order-7"]));
    /// assert_ne!(fix.derive_id(&["order-7"]), Epoch::new("fix-2")?.derive_id(&["order-7"]));
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn derive_id(&self, parts: &[&str]) -> String {
        let mut all = Vec::with_capacity(parts.len() + 1);
        all.push(self.part());
        all.push(self.as_str());
        all.extend_from_slice(parts);
        derive_id(&all)
    }

    /// The leading part of every id derived in this epoch (then its name): a part no
    /// acked message's name (id, group and status, NUL-separated) can be.
    pub(crate) fn part(&self) -> &'static str {
        "\0epoch"
    }

    /// The key a `once` marker of `key` is stored under in this epoch.
    pub(crate) fn marker_key(&self, key: &str) -> String {
        let mut k = String::with_capacity(key.len() + 1 + self.0.len());
        k.push_str(key);
        k.push('@');
        k.push_str(&self.0);
        k
    }
}

impl fmt::Debug for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Epoch").field(&&*self.0).finish()
    }
}

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(Epoch::new("a".repeat(MAX_EPOCH_BYTES)).is_ok());
        assert!(Epoch::new("a".repeat(MAX_EPOCH_BYTES + 1)).is_err());
        for bad in ["", "a@b", "a/b", "é", "a\0"] {
            assert!(Epoch::new(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn marker_keys_carry_the_epoch() {
        let e = Epoch::new("fix-1").unwrap();
        assert_eq!(e.marker_key("order-7"), "order-7@fix-1");
    }
}
