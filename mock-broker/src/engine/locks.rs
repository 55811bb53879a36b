//! Locks and semaphores on KV rows `queen-locks/{name}#{slot}`. A holder's token is its
//! row's KV version, so a lock's `guard` (a required `check` of that version) makes a
//! transaction commit only while the lock is still held.

use serde_json::{Map, Value, json};

use super::kv::{self, Expiry, KvKind, KvOp, KvRow};
use crate::clock::format_iso;
use crate::error::EngineError;
use crate::fields::Obj;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::decode;
use crate::store::{StoreError, T, Tx};

/// The KV namespace of lock rows.
pub const NAMESPACE: &str = "queen-locks";
/// Most slots of a semaphore.
pub const MAX_LIMIT: i64 = 1024;
/// Most operations in one call.
pub const MAX_OPS: usize = 256;

/// The operations.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockKind {
    /// Take a free slot.
    Acquire,
    /// Extend a held slot.
    Renew,
    /// Give a slot back.
    Release,
    /// List the holders.
    Get,
}

/// One parsed lock operation.
#[derive(Debug, Clone)]
pub struct LockOp {
    /// Which operation.
    pub kind: LockKind,
    /// The lock's name.
    pub name: String,
    /// Time to live (acquire, renew).
    pub ttl_seconds: i64,
    /// Who holds it, kept on the row.
    pub owner: Option<String>,
    /// Slots (acquire).
    pub limit: i64,
    /// The holder's token (renew, release).
    pub token: Option<u64>,
    /// The slot, when known (renew, release).
    pub slot: Option<u64>,
}

fn bad(m: impl Into<String>) -> EngineError {
    EngineError::Coded {
        status: 400,
        code: "locks_bad_request",
        message: m.into(),
        reason: None,
    }
}

/// Parses one operation of a `POST /api/v1/locks` call.
pub fn parse_op(v: &Value, path: &str) -> Result<LockOp, EngineError> {
    let o = Obj::of(v, path).map_err(bad)?;
    let kind = match o.req_str("op").map_err(bad)? {
        "acquire" => LockKind::Acquire,
        "renew" => LockKind::Renew,
        "release" => LockKind::Release,
        "get" => LockKind::Get,
        other => return Err(bad(format!("{path}.op: unknown lock operation {other:?}"))),
    };
    let name = o.req_str("name").map_err(bad)?.to_string();
    if name.is_empty() || name.len() > 400 || name.contains('\0') {
        return Err(bad(format!(
            "{path}.name must be 1 to 400 bytes with no NUL"
        )));
    }
    let ttl = o.int("ttlSeconds").map_err(bad)?;
    let ttl_seconds = match (&kind, ttl) {
        (LockKind::Acquire | LockKind::Renew, Some(t)) if t > 0 => t,
        (LockKind::Acquire | LockKind::Renew, _) => {
            return Err(bad(format!(
                "{path}.ttlSeconds must be an integer greater than 0"
            )));
        }
        _ => 0,
    };
    let limit = o.int("limit").map_err(bad)?.unwrap_or(1);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(bad(format!("{path}.limit must be from 1 to {MAX_LIMIT}")));
    }
    let token = match o.get("token") {
        None => None,
        Some(t) => Some(
            t.as_u64()
                .ok_or_else(|| bad(format!("{path}.token must be a number")))?,
        ),
    };
    if matches!(kind, LockKind::Renew | LockKind::Release) && token.is_none() {
        return Err(bad(format!("{path}.token is required")));
    }
    let slot = match o.get("slot") {
        None => None,
        Some(s) => Some(
            s.as_u64()
                .ok_or_else(|| bad(format!("{path}.slot must be a number")))?,
        ),
    };
    Ok(LockOp {
        kind,
        name,
        ttl_seconds,
        owner: o.str("owner").map_err(bad)?.map(str::to_string),
        limit,
        token,
        slot,
    })
}

fn slot_key(name: &str, slot: u64) -> String {
    format!("{name}#{slot}")
}

/// The KV op that gates a transaction on holding `slot` with `token`.
pub fn guard(name: &str, slot: u64, token: u64) -> Value {
    json!({"op": "check", "ns": NAMESPACE, "key": slot_key(name, slot), "expect": token, "required": true})
}

/// A live holder.
struct Holder {
    slot: u64,
    row: KvRow,
    info: Value,
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
            let info = serde_json::from_str(&row.value).unwrap_or(Value::Null);
            out.push(Holder { slot, row, info });
        }
        Ok(true)
    })?;
    Ok(out)
}

fn write_op(
    kind: KvKind,
    name: &str,
    slot: u64,
    ttl: i64,
    value: Option<Value>,
    expect: Option<u64>,
) -> KvOp {
    let mut op = KvOp::new(kind, NAMESPACE, &slot_key(name, slot));
    op.expiry = Some(Expiry::Ttl(ttl));
    op.value = value.map(|v| v.to_string());
    op.expect = expect;
    op
}

fn holder_list(hs: &[Holder], full: bool) -> Value {
    hs.iter()
        .map(|h| {
            let mut m = json!({"slot": h.slot, "owner": h.info.get("owner").cloned().unwrap_or(Value::Null)});
            if full {
                m["token"] = h.row.version.into();
                m["since"] = h.info.get("since").cloned().unwrap_or(Value::Null);
                m["renewedAt"] = h.info.get("renewedAt").cloned().unwrap_or(Value::Null);
                m["expiresAt"] = h.row.expires_at.map(format_iso).into();
            }
            m
        })
        .collect()
}

/// Applies one lock operation; answers its result fields (no `index`).
pub fn apply(tx: &mut Tx, tenant: &str, op: &LockOp) -> Result<Map<String, Value>, StoreError> {
    let name = op.name.as_str();
    let now = format_iso(tx.now);
    let hs = holders(tx, tenant, name)?;
    let mut out = match op.kind {
        LockKind::Acquire => {
            if let Some(h) = op.owner.as_ref().and_then(|o| {
                hs.iter()
                    .find(|h| h.info.get("owner").and_then(Value::as_str) == Some(o))
            }) {
                json!({"acquired": true, "already": true, "slot": h.slot, "token": h.row.version,
                       "owner": op.owner, "guard": guard(name, h.slot, h.row.version)})
            } else if let Some(slot) =
                (0..op.limit as u64).find(|s| hs.iter().all(|h| h.slot != *s))
            {
                let value = json!({"owner": op.owner, "since": now, "renewedAt": now});
                let w = write_op(KvKind::Put, name, slot, op.ttl_seconds, Some(value), None);
                let a = kv::apply(tx, tenant, &w)?;
                let token = a.result.get("version").and_then(Value::as_u64).unwrap_or(0);
                json!({"acquired": true, "slot": slot, "token": token, "owner": op.owner,
                       "guard": guard(name, slot, token)})
            } else {
                let reason = if op.limit == 1 { "held" } else { "contended" };
                json!({"acquired": false, "reason": reason, "holders": holder_list(&hs, false)})
            }
        }
        LockKind::Renew | LockKind::Release => {
            let token = op.token.unwrap_or(0);
            let slot_ok = |h: &&Holder| op.slot.is_none_or(|s| s == h.slot);
            let held = hs
                .iter()
                .filter(slot_ok)
                .find(|h| h.row.version == token)
                .or_else(|| {
                    // A renew sent again after its answer was lost carries the token
                    // that renew replaced: its owner still holds the permit. Only the
                    // owner, and only an older token of the same slot.
                    let owner = op.owner.as_deref().filter(|_| op.kind == LockKind::Renew)?;
                    hs.iter().filter(slot_ok).find(|h| {
                        h.row.version > token
                            && h.info.get("owner").and_then(Value::as_str) == Some(owner)
                    })
                });
            match (held, &op.kind) {
                (Some(h), LockKind::Renew) => {
                    let mut info = h.info.clone();
                    info["renewedAt"] = now.clone().into();
                    if let Some(o) = &op.owner {
                        info["owner"] = o.clone().into();
                    }
                    let w = write_op(
                        KvKind::Put,
                        name,
                        h.slot,
                        op.ttl_seconds,
                        Some(info),
                        Some(h.row.version),
                    );
                    let a = kv::apply(tx, tenant, &w)?;
                    let token = a.result.get("version").and_then(Value::as_u64).unwrap_or(0);
                    json!({"renewed": true, "slot": h.slot, "token": token, "guard": guard(name, h.slot, token)})
                }
                (Some(h), _) => {
                    let mut w = KvOp::new(KvKind::Delete, NAMESPACE, &slot_key(name, h.slot));
                    w.expect = Some(token);
                    kv::apply(tx, tenant, &w)?;
                    json!({"released": true, "slot": h.slot})
                }
                (None, LockKind::Renew) => {
                    json!({"renewed": false, "reason": "lost", "slot": op.slot,
                                                 "holders": holder_list(&hs, false)})
                }
                (None, _) => json!({"released": false, "reason": "lost", "slot": op.slot}),
            }
        }
        LockKind::Get => json!({"held": !hs.is_empty(), "holders": holder_list(&hs, true)}),
    };
    let m = out.as_object_mut().expect("an object");
    m.insert(
        "op".into(),
        match op.kind {
            LockKind::Acquire => "acquire",
            LockKind::Renew => "renew",
            LockKind::Release => "release",
            LockKind::Get => "get",
        }
        .into(),
    );
    m.insert("name".into(), name.into());
    Ok(std::mem::take(m))
}
