//! KV on the wire: an operation of `POST /api/v1/kv` (and of a transaction's `kv`
//! array) parsed into [`KvOp`], and [`KvResult`]s rendered.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Number, Value};

use super::loose::{self, Loose};
use crate::clock::format_iso;
use crate::engine::kv::{
    self, Expiry, KvKind, KvOp, KvRefusal, KvResult, KvRow, Lost, MAX_VALUE_BYTES, Namespace,
    PREFIX_LIMIT, PrefixQuery, Step, refuse,
};

/// Where an element sits in its body, for refusal texts: `operations[2]`, `kv[0]`, or
/// `body` for a single-key route. Formatted only when a refusal needs it.
#[derive(Debug, Clone, Copy)]
pub struct At(pub &'static str, pub Option<usize>);

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self.1 {
            Some(i) => write!(f, "{}[{i}]", self.0),
            None => f.write_str(self.0),
        }
    }
}

/// The body of `POST /api/v1/kv`.
#[derive(Debug, Deserialize)]
pub struct KvBody {
    /// The operations; required.
    pub operations: Option<Vec<KvOpWire>>,
}

/// One KV operation as sent. The fields every operation may carry are read here with
/// their JSON types; [`KvOpWire::into_op`] applies the rules of each operation.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct KvOpWire {
    /// `get`, `put`, ...
    pub op: Option<String>,
    /// Namespace.
    pub ns: Option<String>,
    /// The key (single-key ops).
    pub key: Option<String>,
    /// The keys (`getMany`).
    pub keys: Option<Vec<String>>,
    /// `getPrefix`: the prefix.
    pub prefix: Option<String>,
    /// `getPrefix`: resume after this key.
    pub after: Option<String>,
    /// `getPrefix`: the page size.
    pub limit: Option<i64>,
    /// `getPrefix`: leave values out.
    pub keys_only: Option<bool>,
    /// The value to write; `null` is a value.
    #[serde(default, deserialize_with = "loose::present")]
    pub value: Option<Value>,
    /// Expiry of a write, in seconds.
    pub ttl_seconds: Option<Loose<i64>>,
    /// A write that never lapses.
    pub forever: Option<bool>,
    /// Required current version; 0: must not exist.
    pub expect: Option<Loose<u64>>,
    /// A lost precondition rolls the whole call back.
    pub required: Option<bool>,
    /// `incr`: the step.
    pub delta: Option<Loose<Number>>,
    /// `incr`: lowest allowed result.
    pub min: Option<Loose<Number>>,
    /// `incr`: highest allowed result.
    pub max: Option<Loose<Number>>,
}

fn bad(m: String) -> KvRefusal {
    refuse("kv_bad_request", m)
}

impl KvOpWire {
    /// A single-key operation of a shorthand route (`/kv/{ns}/{key}`).
    pub fn single(op: &str, ns: String, key: String) -> Self {
        KvOpWire {
            op: Some(op.to_string()),
            ns: Some(ns),
            key: Some(key),
            ..Default::default()
        }
    }

    /// Checks the operation's rules and builds the command; `at` names it in refusals.
    pub fn into_op(self, at: At) -> Result<KvOp, KvRefusal> {
        let op = self.op.ok_or_else(|| bad(format!("{at}.op is required")))?;
        let kind = KvKind::parse(&op).ok_or_else(|| {
            refuse(
                "kv_unknown_op",
                format!("{at}.op: unknown KV operation {op:?}"),
            )
        })?;
        let ns = self.ns.ok_or_else(|| bad(format!("{at}.ns is required")))?;
        if !kv::valid_ns(&ns) {
            return Err(refuse(
                "kv_bad_ns",
                format!("{at}.ns {ns:?} must match ^[a-z0-9][a-z0-9._-]{{0,63}}$"),
            ));
        }
        let required = self.required.unwrap_or(false);
        // The per-operation fields, judged in the order of the rules: key, value,
        // expiry, expect, step.
        let key = match kind {
            KvKind::GetMany | KvKind::GetPrefix => String::new(),
            _ => {
                let key = self
                    .key
                    .ok_or_else(|| bad(format!("{at}.key is required")))?;
                kv::check_key(format_args!("{at}.key"), &key)?;
                key
            }
        };
        let keys = match kind {
            KvKind::GetMany => {
                let keys = self
                    .keys
                    .ok_or_else(|| bad(format!("{at}.keys is required")))?;
                for (i, k) in keys.iter().enumerate() {
                    kv::check_key(format_args!("{at}.keys[{i}]"), k)?;
                }
                keys
            }
            _ => Vec::new(),
        };
        let page = match kind {
            KvKind::GetPrefix => {
                let limit = self.limit.unwrap_or(PREFIX_LIMIT.0 as i64);
                if !(1..=PREFIX_LIMIT.1 as i64).contains(&limit) {
                    return Err(bad(format!(
                        "{at}.limit must be from 1 to {}",
                        PREFIX_LIMIT.1
                    )));
                }
                Some(PrefixQuery {
                    prefix: self.prefix.unwrap_or_default(),
                    after: self.after,
                    limit: limit as usize,
                    keys_only: self.keys_only.unwrap_or(false),
                })
            }
            _ => None,
        };
        let value = match kind {
            KvKind::Put | KvKind::PutIfAbsent => {
                let value = self
                    .value
                    .ok_or_else(|| bad(format!("{at}.value is required")))?;
                let text = serde_json::to_string(&value).expect("a Value serialises");
                if text.len() > MAX_VALUE_BYTES {
                    return Err(KvRefusal {
                        reason: "kv_value_too_large",
                        message: format!(
                            "{at}.value is {} bytes as compact JSON; the limit is {MAX_VALUE_BYTES}",
                            text.len()
                        ),
                        too_large: true,
                    });
                }
                text
            }
            _ => String::new(),
        };
        let expiry = match kind {
            KvKind::Put | KvKind::PutIfAbsent | KvKind::Incr => {
                expiry(at, &op, self.ttl_seconds, self.forever.unwrap_or(false))?
            }
            _ => Expiry::Forever,
        };
        let expect = match self.expect {
            None => None,
            Some(Loose::Ok(v)) => Some(v),
            Some(Loose::Bad(e)) => {
                return Err(refuse(
                    "kv_bad_expect",
                    format!("{at}.expect must be a version number (0: absent), got {e}"),
                ));
            }
        };
        let step = match kind {
            KvKind::Incr => Some(Step {
                delta: number(at, "delta", self.delta)?.unwrap_or_else(|| Number::from(1)),
                min: number(at, "min", self.min)?,
                max: number(at, "max", self.max)?,
            }),
            _ => None,
        };
        Ok(match kind {
            KvKind::Get => KvOp::Get { ns, key },
            KvKind::GetMany => KvOp::GetMany { ns, keys },
            KvKind::GetPrefix => KvOp::GetPrefix {
                ns,
                page: page.expect("built for getPrefix"),
            },
            KvKind::Put => KvOp::Put {
                ns,
                key,
                value,
                expiry,
                expect,
                required,
            },
            KvKind::PutIfAbsent => KvOp::PutIfAbsent {
                ns,
                key,
                value,
                expiry,
                required,
            },
            KvKind::Delete => KvOp::Delete {
                ns,
                key,
                expect,
                required,
            },
            KvKind::Check => KvOp::Check {
                ns,
                key,
                expect: expect
                    .ok_or_else(|| refuse("kv_bad_expect", format!("{at}: check needs expect")))?,
                required,
            },
            KvKind::Incr => KvOp::Incr {
                ns,
                key,
                step: step.expect("built for incr"),
                expiry,
                required,
            },
        })
    }
}

/// A write's expiry: exactly one of `ttlSeconds` (over 0) and `forever: true`.
fn expiry(at: At, op: &str, ttl: Option<Loose<i64>>, forever: bool) -> Result<Expiry, KvRefusal> {
    match (ttl, forever) {
        (Some(_), true) => Err(refuse(
            "kv_bad_ttl",
            format!("{at}: give ttlSeconds or forever, not both"),
        )),
        (None, false) => Err(refuse(
            "kv_expiry_not_specified",
            format!("{at}: a {op} needs exactly one expiry: ttlSeconds or forever: true"),
        )),
        (None, true) => Ok(Expiry::Forever),
        (Some(Loose::Ok(n)), false) if n > 0 => Ok(Expiry::Ttl(n)),
        (Some(t), false) => {
            let t = match t {
                Loose::Ok(n) => Value::from(n),
                Loose::Bad(v) => v,
            };
            Err(refuse(
                "kv_bad_ttl",
                format!("{at}.ttlSeconds must be an integer greater than 0, got {t}"),
            ))
        }
    }
}

/// An `incr` number field.
fn number(at: At, name: &str, v: Option<Loose<Number>>) -> Result<Option<Number>, KvRefusal> {
    match v {
        None => Ok(None),
        Some(Loose::Ok(n)) => Ok(Some(n)),
        Some(Loose::Bad(other)) => Err(refuse(
            "kv_bad_delta",
            format!("{at}.{name} must be a number, got {}", loose::kind(&other)),
        )),
    }
}

/// Stored JSON text as a value of the answer (a row that does not parse answers null).
fn raw(text: &str) -> &RawValue {
    serde_json::from_str(text).unwrap_or_else(|_| null())
}

fn null() -> &'static RawValue {
    serde_json::from_str("null").expect("null is JSON")
}

/// A row of `getMany` and `getPrefix` (and the fields of a `get` hit).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RowWire<'a> {
    expires_at: Option<String>,
    key: &'a str,
    updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
    version: u64,
}

fn row<'a>(key: &'a str, r: &'a KvRow, with_value: bool) -> RowWire<'a> {
    RowWire {
        expires_at: r.expires_at.map(format_iso),
        key,
        updated_at: format_iso(r.updated_at),
        value: with_value.then(|| raw(&r.value)),
        version: r.version,
    }
}

/// One KV result as answered. Fields in name order, as the answers have always been
/// rendered; a field that is `None` is left out, one that is `Some(None)` is `null`.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct KvResultWire<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    applied: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expires_at: Option<Option<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    found: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    missing: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_after: Option<Option<&'a str>>,
    op: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    op_index: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<RowWire<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    truncated: Option<bool>,
    #[serde(rename = "type", skip_serializing_if = "Option::is_none")]
    ty: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    updated_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    version: Option<u64>,
}

impl KvResultWire<'_> {
    /// The result at slot `index` of a standalone call.
    pub fn at(self, index: usize) -> Self {
        KvResultWire {
            index: Some(index),
            ..self
        }
    }

    /// The result of `kv[op_index]` at slot `index` of a transaction.
    pub fn in_transaction(self, index: usize, op_index: usize) -> Self {
        KvResultWire {
            index: Some(index),
            op_index: Some(op_index),
            ty: Some("kv"),
            ..self
        }
    }
}

/// Renders the result of a `kind` operation.
pub fn result(kind: KvKind, r: &KvResult) -> KvResultWire<'_> {
    let base = KvResultWire {
        op: kind.name(),
        ..Default::default()
    };
    match r {
        KvResult::Found { key, row: None } => KvResultWire {
            found: Some(false),
            key: Some(key),
            ..base
        },
        KvResult::Found { key, row: Some(r) } => KvResultWire {
            expires_at: Some(r.expires_at.map(format_iso)),
            found: Some(true),
            key: Some(key),
            updated_at: Some(format_iso(r.updated_at)),
            value: Some(raw(&r.value)),
            version: Some(r.version),
            ..base
        },
        KvResult::Many { rows, missing } => KvResultWire {
            missing: Some(missing),
            rows: Some(rows.iter().map(|(k, r)| row(k, r, true)).collect()),
            ..base
        },
        KvResult::Page {
            rows,
            with_values,
            truncated,
            next_after,
        } => KvResultWire {
            next_after: Some(next_after.as_deref()),
            rows: Some(rows.iter().map(|(k, r)| row(k, r, *with_values)).collect()),
            truncated: Some(*truncated),
            ..base
        },
        KvResult::Written {
            key,
            value,
            version,
        } => KvResultWire {
            applied: Some(true),
            key: Some(key),
            value: Some(raw(value)),
            version: Some(*version),
            ..base
        },
        KvResult::Deleted { key } => KvResultWire {
            applied: Some(true),
            key: Some(key),
            ..base
        },
        // A result about an absent (or expired) key answers `version: 0`, as Queen 2
        // does: 0 is the version `expect` names "must not exist" by (queen-mq 2.6.0
        // `tests/test_kv.py` `test_expect_on_an_absent_key_creates_nothing`).
        KvResult::Checked { key, version } => KvResultWire {
            applied: Some(true),
            key: Some(key),
            version: Some(version.unwrap_or(0)),
            ..base
        },
        KvResult::Lost { key, lost } => KvResultWire {
            applied: Some(false),
            key: Some(key),
            reason: Some(lost.reason.as_str()),
            value: lost.current.as_ref().map(|r| raw(&r.value)),
            version: Some(lost.current.as_ref().map_or(0, |r| r.version)),
            ..base
        },
    }
}

/// The fields a lost `required` operation adds to its call's answer (`failedIndex` in
/// the call's index space).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreconditionWire<'a> {
    /// The slot of the operation that lost.
    pub failed_index: usize,
    /// Why it lost.
    pub kv_reason: &'static str,
    /// The row's current value, if it exists.
    pub value: Option<&'a RawValue>,
    /// The row's current version, if it exists.
    pub version: Option<u64>,
}

impl<'a> PreconditionWire<'a> {
    /// The fields of `lost` at `failed_index`.
    pub fn new(failed_index: usize, lost: &'a Lost) -> Self {
        PreconditionWire {
            failed_index,
            kv_reason: lost.reason.as_str(),
            value: lost.current.as_ref().map(|r| raw(&r.value)),
            version: lost.current.as_ref().map(|r| r.version),
        }
    }
}

/// The answer of a standalone call whose `required` operation lost.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreconditionBody<'a> {
    failed_index: usize,
    kv_reason: &'static str,
    ok: bool,
    reason: &'static str,
    results: [(); 0],
    value: Option<&'a RawValue>,
    version: Option<u64>,
}

impl<'a> PreconditionBody<'a> {
    /// The answer for `lost` at `failed_index`.
    pub fn new(failed_index: usize, lost: &'a Lost) -> Self {
        let p = PreconditionWire::new(failed_index, lost);
        PreconditionBody {
            failed_index,
            kv_reason: p.kv_reason,
            ok: false,
            reason: "kv_precondition",
            results: [],
            value: p.value,
            version: p.version,
        }
    }
}

/// A namespace of `GET /api/v1/kv`.
#[derive(Serialize)]
struct NamespaceWire<'a> {
    keys: u64,
    ns: &'a str,
}

/// `GET /api/v1/kv`: the tenant's namespaces with live keys.
#[derive(Serialize)]
pub struct NamespacesWire<'a> {
    namespaces: Vec<NamespaceWire<'a>>,
}

/// Renders the namespace listing.
pub fn namespaces(list: &[Namespace]) -> NamespacesWire<'_> {
    NamespacesWire {
        namespaces: list
            .iter()
            .map(|n| NamespaceWire {
                keys: n.keys,
                ns: &n.ns,
            })
            .collect(),
    }
}

/// `GET /api/v1/kv/{ns}`: a `getPrefix` page without the operation's `op`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PageWire<'a> {
    next_after: Option<&'a str>,
    rows: Vec<RowWire<'a>>,
    truncated: bool,
}

/// Renders a `getPrefix` page ([`KvResult::Page`]; any other result is an empty page).
pub fn page(r: &KvResult) -> PageWire<'_> {
    match r {
        KvResult::Page {
            rows,
            with_values,
            truncated,
            next_after,
        } => PageWire {
            next_after: next_after.as_deref(),
            rows: rows.iter().map(|(k, r)| row(k, r, *with_values)).collect(),
            truncated: *truncated,
        },
        _ => PageWire {
            next_after: None,
            rows: Vec::new(),
            truncated: false,
        },
    }
}
