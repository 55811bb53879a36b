//! Locks and semaphores on KV rows `queen-locks/{name}#{slot}`. A holder's token is its
//! row's KV version, so a lock's `guard` (a required `check` of that version) makes a
//! transaction commit only while the lock is still held.

use serde::{Deserialize, Serialize};

use super::kv::{self, Expiry, KvOp, KvResult, KvRow};
use crate::clock::format_iso;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::decode;
use crate::store::{StoreError, T, Tx};

/// The KV namespace of lock rows.
pub const NAMESPACE: &str = "queen-locks";
/// Most slots of a semaphore.
pub const MAX_LIMIT: i64 = 1024;
/// Most operations in one call.
pub const MAX_OPS: usize = 256;
/// Longest lock name, in bytes.
pub const MAX_NAME_BYTES: usize = 400;

/// What a lock operation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockAction {
    /// Take a free slot of `limit` (or answer the one `owner` already holds).
    Acquire {
        /// Time to live of the slot.
        ttl_seconds: i64,
        /// Who holds it, kept on the row.
        owner: Option<String>,
        /// Slots.
        limit: i64,
    },
    /// Extend a held slot.
    Renew {
        /// The new time to live.
        ttl_seconds: i64,
        /// Who holds it: lets a renew sent again after a lost answer find its slot.
        owner: Option<String>,
        /// The holder's token.
        token: u64,
        /// The slot, when known.
        slot: Option<u64>,
    },
    /// Give a slot back.
    Release {
        /// The holder's token.
        token: u64,
        /// The slot, when known.
        slot: Option<u64>,
    },
    /// List the holders.
    Get,
}

impl LockAction {
    /// The wire name.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Acquire { .. } => "acquire",
            Self::Renew { .. } => "renew",
            Self::Release { .. } => "release",
            Self::Get => "get",
        }
    }
}

/// One checked lock operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOp {
    /// The lock's name.
    pub name: String,
    /// What to do.
    pub action: LockAction,
}

/// The row of a held slot: who and since when (the slot's expiry and token are the KV
/// row's). Fields in name order: the row's text is what it has always been.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct HolderInfo {
    /// The owner given at acquire (or at the last renew).
    pub owner: Option<String>,
    /// Last renewal, ISO-8601.
    pub renewed_at: Option<String>,
    /// When it was acquired, ISO-8601.
    pub since: Option<String>,
}

/// A live holder of a slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The slot.
    pub slot: u64,
    /// The holder's token (its row's version).
    pub token: u64,
    /// When the slot lapses, unless renewed.
    pub expires_at: Option<String>,
    /// Who and since when.
    pub info: HolderInfo,
}

/// The KV `check` that gates a transaction on holding a slot with a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guard {
    /// The slot's row key, `{name}#{slot}` in [`NAMESPACE`].
    pub key: String,
    /// The token the row must still have.
    pub token: u64,
}

/// What one lock operation did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockResult {
    /// A slot is held: newly, or `already` by the same owner.
    Acquired {
        /// The slot.
        slot: u64,
        /// Its token.
        token: u64,
        /// The owner sent.
        owner: Option<String>,
        /// The owner held it before this call.
        already: bool,
        /// The transaction guard on it.
        guard: Guard,
    },
    /// No slot is free.
    Busy {
        /// A lock of one slot (`held`) or a semaphore (`contended`).
        single: bool,
        /// Who holds the slots.
        holders: Vec<Holder>,
    },
    /// The slot is renewed under a new token.
    Renewed {
        /// The slot.
        slot: u64,
        /// Its new token.
        token: u64,
        /// The transaction guard on it.
        guard: Guard,
    },
    /// The slot was given back.
    Released {
        /// The slot.
        slot: u64,
    },
    /// The token no longer holds a slot (lapsed, or taken by another).
    Lost {
        /// The slot sent, if any.
        slot: Option<u64>,
        /// A renew answers who holds the lock now; a release does not.
        holders: Option<Vec<Holder>>,
    },
    /// The holders of the lock (`get`).
    Holders(Vec<Holder>),
}

/// Checks a lock name: 1 to [`MAX_NAME_BYTES`] bytes, no NUL.
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME_BYTES && !name.contains('\0')
}

fn slot_key(name: &str, slot: u64) -> String {
    format!("{name}#{slot}")
}

fn guard(name: &str, slot: u64, token: u64) -> Guard {
    Guard {
        key: slot_key(name, slot),
        token,
    }
}

fn holders(tx: &Tx, tenant: &str, name: &str) -> Result<Vec<Holder>, StoreError> {
    let mut prefix = Key::tenant(tenant).str(NAMESPACE).into_bytes();
    prefix.extend(Key::escaped(&format!("{name}#")));
    let mut out = Vec::new();
    tx.scan(T::Kv, &prefix, &prefix, |k, v| {
        let mut r = KeyReader::new(k);
        let (_, _, key) = (r.str(), r.str(), r.str());
        let slot = key
            .as_deref()
            .and_then(|k| k.strip_prefix(name)?.strip_prefix('#')?.parse::<u64>().ok());
        let row: KvRow = decode(v)?;
        if let Some(slot) = slot
            && row.expires_at.is_none_or(|e| e > tx.now)
        {
            // A row written under this namespace by a plain KV call reads as a holder
            // with nothing known about it.
            let info = serde_json::from_str(&row.value).unwrap_or_default();
            out.push(Holder {
                slot,
                token: row.version,
                expires_at: row.expires_at.map(format_iso),
                info,
            });
        }
        Ok(true)
    })?;
    Ok(out)
}

/// A `put` of a lock row with its TTL, gated on `expect` (a renew keeps its slot only
/// while its token is current).
fn write_op(name: &str, slot: u64, ttl: i64, info: &HolderInfo, expect: Option<u64>) -> KvOp {
    KvOp::Put {
        ns: NAMESPACE.to_string(),
        key: slot_key(name, slot),
        value: serde_json::to_string(info).expect("a HolderInfo renders"),
        expiry: Expiry::Ttl(ttl),
        expect,
        required: false,
    }
}

/// The version a lock-row write answered (its token).
fn token_of(r: &KvResult) -> u64 {
    match r {
        KvResult::Written { version, .. } => *version,
        _ => 0,
    }
}

/// Applies one lock operation.
pub fn apply(tx: &mut Tx, tenant: &str, op: &LockOp) -> Result<LockResult, StoreError> {
    let name = op.name.as_str();
    let now = format_iso(tx.now);
    let hs = holders(tx, tenant, name)?;
    Ok(match &op.action {
        LockAction::Acquire {
            ttl_seconds,
            owner,
            limit,
        } => {
            if let Some(h) = owner
                .as_ref()
                .and_then(|o| hs.iter().find(|h| h.info.owner.as_ref() == Some(o)))
            {
                LockResult::Acquired {
                    slot: h.slot,
                    token: h.token,
                    owner: owner.clone(),
                    already: true,
                    guard: guard(name, h.slot, h.token),
                }
            } else if let Some(slot) = (0..*limit as u64).find(|s| hs.iter().all(|h| h.slot != *s))
            {
                let info = HolderInfo {
                    owner: owner.clone(),
                    renewed_at: Some(now.clone()),
                    since: Some(now),
                };
                let w = write_op(name, slot, *ttl_seconds, &info, None);
                let token = token_of(&kv::apply(tx, tenant, &w)?);
                LockResult::Acquired {
                    slot,
                    token,
                    owner: owner.clone(),
                    already: false,
                    guard: guard(name, slot, token),
                }
            } else {
                LockResult::Busy {
                    single: *limit == 1,
                    holders: hs,
                }
            }
        }
        LockAction::Renew {
            ttl_seconds,
            owner,
            token,
            slot,
        } => {
            let slot_ok = |h: &&Holder| slot.is_none_or(|s| s == h.slot);
            let held = hs
                .iter()
                .filter(slot_ok)
                .find(|h| h.token == *token)
                .or_else(|| {
                    // A renew sent again after its answer was lost carries the token
                    // that renew replaced: its owner still holds the permit. Only the
                    // owner, and only an older token of the same slot.
                    let owner = owner.as_deref()?;
                    hs.iter()
                        .filter(slot_ok)
                        .find(|h| h.token > *token && h.info.owner.as_deref() == Some(owner))
                });
            match held {
                Some(h) => {
                    let mut info = h.info.clone();
                    info.renewed_at = Some(now);
                    if let Some(o) = owner {
                        info.owner = Some(o.clone());
                    }
                    let w = write_op(name, h.slot, *ttl_seconds, &info, Some(h.token));
                    let token = token_of(&kv::apply(tx, tenant, &w)?);
                    LockResult::Renewed {
                        slot: h.slot,
                        token,
                        guard: guard(name, h.slot, token),
                    }
                }
                None => LockResult::Lost {
                    slot: *slot,
                    holders: Some(hs),
                },
            }
        }
        LockAction::Release { token, slot } => {
            let held = hs
                .iter()
                .filter(|h| slot.is_none_or(|s| s == h.slot))
                .find(|h| h.token == *token);
            match held {
                Some(h) => {
                    let w = KvOp::Delete {
                        ns: NAMESPACE.to_string(),
                        key: slot_key(name, h.slot),
                        expect: Some(*token),
                        required: false,
                    };
                    kv::apply(tx, tenant, &w)?;
                    LockResult::Released { slot: h.slot }
                }
                None => LockResult::Lost {
                    slot: *slot,
                    holders: None,
                },
            }
        }
        LockAction::Get => LockResult::Holders(hs),
    })
}
