//! Locks on the wire: an operation of `POST /api/v1/locks` parsed into [`LockOp`], and
//! [`LockResult`]s rendered.

use serde::{Deserialize, Serialize};

use super::kv::At;
use crate::engine::locks::{
    self, Guard, Holder, LockAction, LockOp, LockResult, MAX_LIMIT, NAMESPACE,
};

/// The body of `POST /api/v1/locks`.
#[derive(Debug, Deserialize)]
pub struct LocksBody {
    /// The operations; required.
    pub operations: Option<Vec<LockOpWire>>,
}

/// One lock operation as sent.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LockOpWire {
    op: Option<String>,
    name: Option<String>,
    ttl_seconds: Option<i64>,
    owner: Option<String>,
    limit: Option<i64>,
    token: Option<u64>,
    slot: Option<u64>,
}

impl LockOpWire {
    /// Checks the operation's rules and builds the command; a refusal is the text of a
    /// `locks_bad_request`.
    pub fn into_op(self, at: At) -> Result<LockOp, String> {
        let op = self.op.ok_or_else(|| format!("{at}.op is required"))?;
        if !matches!(op.as_str(), "acquire" | "renew" | "release" | "get") {
            return Err(format!("{at}.op: unknown lock operation {op:?}"));
        }
        let name = self.name.ok_or_else(|| format!("{at}.name is required"))?;
        if !locks::valid_name(&name) {
            return Err(format!(
                "{at}.name must be 1 to {} bytes with no NUL",
                locks::MAX_NAME_BYTES
            ));
        }
        let ttl = || match self.ttl_seconds {
            Some(t) if t > 0 => Ok(t),
            _ => Err(format!("{at}.ttlSeconds must be an integer greater than 0")),
        };
        let ttl_seconds = match op.as_str() {
            "acquire" | "renew" => ttl()?,
            _ => 0,
        };
        let limit = self.limit.unwrap_or(1);
        if !(1..=MAX_LIMIT).contains(&limit) {
            return Err(format!("{at}.limit must be from 1 to {MAX_LIMIT}"));
        }
        let token = || self.token.ok_or_else(|| format!("{at}.token is required"));
        let action = match op.as_str() {
            "acquire" => LockAction::Acquire {
                ttl_seconds,
                owner: self.owner,
                limit,
            },
            "renew" => LockAction::Renew {
                ttl_seconds,
                token: token()?,
                owner: self.owner,
                slot: self.slot,
            },
            "release" => LockAction::Release {
                token: token()?,
                slot: self.slot,
            },
            _ => LockAction::Get,
        };
        Ok(LockOp { name, action })
    }
}

/// The guard of a held slot: a required KV `check` of its token.
#[derive(Serialize)]
struct GuardWire<'a> {
    expect: u64,
    key: &'a str,
    ns: &'static str,
    op: &'static str,
    required: bool,
}

fn guard(g: &Guard) -> GuardWire<'_> {
    GuardWire {
        expect: g.token,
        key: &g.key,
        ns: NAMESPACE,
        op: "check",
        required: true,
    }
}

/// A holder as listed: who and which slot; `get` adds the token and the times.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct HolderWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<Option<&'a str>>,
    owner: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    renewed_at: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    since: Option<Option<&'a str>>,
    slot: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
}

fn holders(hs: &[Holder], full: bool) -> Vec<HolderWire<'_>> {
    hs.iter()
        .map(|h| HolderWire {
            expires_at: full.then_some(h.expires_at.as_deref()),
            owner: h.info.owner.as_deref(),
            renewed_at: full.then_some(h.info.renewed_at.as_deref()),
            since: full.then_some(h.info.since.as_deref()),
            slot: h.slot,
            token: full.then_some(h.token),
        })
        .collect()
}

/// One lock result as answered, fields in name order.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct LockResultWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    acquired: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    already: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    guard: Option<GuardWire<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    held: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    holders: Option<Vec<HolderWire<'a>>>,
    index: usize,
    name: &'a str,
    op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    released: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    renewed: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    slot: Option<Option<u64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
}

/// Renders the result of `op` at `index` of its call.
pub fn result<'a>(index: usize, op: &'a LockOp, r: &'a LockResult) -> LockResultWire<'a> {
    let base = LockResultWire {
        index,
        name: &op.name,
        op: op.action.name(),
        ..Default::default()
    };
    match r {
        LockResult::Acquired {
            slot,
            token,
            owner,
            already,
            guard: g,
        } => LockResultWire {
            acquired: Some(true),
            already: already.then_some(true),
            guard: Some(guard(g)),
            owner: Some(owner.as_deref()),
            slot: Some(Some(*slot)),
            token: Some(*token),
            ..base
        },
        LockResult::Busy {
            single,
            holders: hs,
        } => LockResultWire {
            acquired: Some(false),
            holders: Some(holders(hs, false)),
            reason: Some(if *single { "held" } else { "contended" }),
            ..base
        },
        LockResult::Renewed {
            slot,
            token,
            guard: g,
        } => LockResultWire {
            guard: Some(guard(g)),
            renewed: Some(true),
            slot: Some(Some(*slot)),
            token: Some(*token),
            ..base
        },
        LockResult::Released { slot } => LockResultWire {
            released: Some(true),
            slot: Some(Some(*slot)),
            ..base
        },
        LockResult::Lost { slot, holders: hs } => match hs {
            Some(hs) => LockResultWire {
                holders: Some(holders(hs, false)),
                reason: Some("lost"),
                renewed: Some(false),
                slot: Some(*slot),
                ..base
            },
            None => LockResultWire {
                reason: Some("lost"),
                released: Some(false),
                slot: Some(*slot),
                ..base
            },
        },
        LockResult::Holders(hs) => LockResultWire {
            held: Some(!hs.is_empty()),
            holders: Some(holders(hs, true)),
            ..base
        },
    }
}

/// `{"results": [...]}` of a locks call.
#[derive(Serialize)]
pub struct LocksAnswer<'a> {
    /// One per operation, in order.
    pub results: Vec<LockResultWire<'a>>,
}
