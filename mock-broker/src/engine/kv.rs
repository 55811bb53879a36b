//! KV: versioned rows with TTLs and preconditions, shared by `POST /api/v1/kv`, the
//! transaction's `kv` array and the locks built on it.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Number, Value, json};

use super::queues::next_counter;
use crate::clock::{Micros, format_iso};
use crate::fields::{self, Obj};
use crate::store::keys::{Key, KeyReader};
use crate::store::records::decode;
use crate::store::{StoreError, T, Tx};

/// Largest value, as compact JSON (`QUEEN_KV_MAX_VALUE_BYTES`).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Default and largest `getPrefix` page.
pub const PREFIX_LIMIT: (usize, usize) = (100, 1000);

/// A stored KV row.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct KvRow {
    /// The value as compact JSON text.
    pub value: String,
    /// Broker-wide increasing, new on every write.
    pub version: u64,
    /// When it lapses; `None`: never.
    pub expires_at: Option<Micros>,
    /// When it was last written.
    pub updated_at: Micros,
}

/// The operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvKind {
    /// Read one key.
    Get,
    /// Read several keys.
    GetMany,
    /// Read a page of keys by prefix (standalone only).
    GetPrefix,
    /// Write.
    Put,
    /// Write only if absent.
    PutIfAbsent,
    /// Remove.
    Delete,
    /// Assert a version without writing.
    Check,
    /// Add to a number.
    Incr,
}

impl KvKind {
    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "get" => Self::Get,
            "getMany" => Self::GetMany,
            "getPrefix" => Self::GetPrefix,
            "put" => Self::Put,
            "putIfAbsent" => Self::PutIfAbsent,
            "delete" => Self::Delete,
            "check" => Self::Check,
            "incr" => Self::Incr,
            _ => return None,
        })
    }

    /// The wire name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Get => "get",
            Self::GetMany => "getMany",
            Self::GetPrefix => "getPrefix",
            Self::Put => "put",
            Self::PutIfAbsent => "putIfAbsent",
            Self::Delete => "delete",
            Self::Check => "check",
            Self::Incr => "incr",
        }
    }

    /// Whether the op may store more than is there (a delete only frees space).
    pub fn adds_data(self) -> bool {
        matches!(self, Self::Put | Self::PutIfAbsent | Self::Incr)
    }

    /// Whether the op writes its key.
    pub fn writes(self) -> bool {
        matches!(
            self,
            Self::Put | Self::PutIfAbsent | Self::Delete | Self::Incr
        )
    }
}

/// How long a written row lives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expiry {
    /// This many seconds from the write.
    Ttl(i64),
    /// Never lapses.
    Forever,
}

/// One parsed KV operation.
#[derive(Debug, Clone)]
pub struct KvOp {
    /// Which operation.
    pub kind: KvKind,
    /// Namespace.
    pub ns: String,
    /// The key (single-key ops).
    pub key: String,
    /// The keys (`getMany`).
    pub keys: Vec<String>,
    /// `getPrefix`: the prefix, the key to start after, the page size, keys only.
    pub prefix: String,
    /// `getPrefix`: resume after this key.
    pub after: Option<String>,
    /// `getPrefix`: page size.
    pub limit: usize,
    /// `getPrefix`: leave values out.
    pub keys_only: bool,
    /// The value to write, as compact JSON.
    pub value: Option<String>,
    /// Expiry of a write.
    pub expiry: Option<Expiry>,
    /// Required current version; 0: must not exist.
    pub expect: Option<u64>,
    /// A lost precondition rolls the whole call back.
    pub required: bool,
    /// `incr`: the step, and the bounds of the result.
    pub delta: Number,
    /// `incr`: lowest allowed result.
    pub min: Option<Number>,
    /// `incr`: highest allowed result.
    pub max: Option<Number>,
}

impl KvOp {
    /// An operation of `kind` on `(ns, key)` with every option at its default.
    pub fn new(kind: KvKind, ns: &str, key: &str) -> Self {
        KvOp {
            kind,
            ns: ns.to_string(),
            key: key.to_string(),
            keys: Vec::new(),
            prefix: String::new(),
            after: None,
            limit: PREFIX_LIMIT.0,
            keys_only: false,
            value: None,
            expiry: None,
            expect: None,
            required: false,
            delta: Number::from(1),
            min: None,
            max: None,
        }
    }
}

/// Why a KV operation was refused before anything ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KvRefusal {
    /// Machine-readable, e.g. `kv_expiry_not_specified`.
    pub reason: &'static str,
    /// For a person.
    pub message: String,
    /// A value over [`MAX_VALUE_BYTES`]: 413 rather than 400.
    pub too_large: bool,
}

fn refuse(reason: &'static str, message: impl Into<String>) -> KvRefusal {
    KvRefusal {
        reason,
        message: message.into(),
        too_large: false,
    }
}

/// Checks a namespace against `^[a-z0-9][a-z0-9._-]{0,63}$`.
pub fn valid_ns(ns: &str) -> bool {
    let b = ns.as_bytes();
    !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..].iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        })
}

fn check_key(path: &str, key: &str) -> Result<(), KvRefusal> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES || key.contains('\0') {
        return Err(refuse(
            "kv_bad_key",
            format!("{path}: a key is 1 to {MAX_KEY_BYTES} bytes with no NUL"),
        ));
    }
    Ok(())
}

/// Parses one operation of a `kv` array.
pub fn parse_op(v: &Value, path: &str) -> Result<KvOp, KvRefusal> {
    let bad = |m: String| refuse("kv_bad_request", m);
    let o = Obj::of(v, path).map_err(bad)?;
    let op = o.req_str("op").map_err(bad)?;
    let kind = KvKind::parse(op).ok_or_else(|| {
        refuse(
            "kv_unknown_op",
            format!("{path}.op: unknown KV operation {op:?}"),
        )
    })?;
    let ns = o.req_str("ns").map_err(bad)?.to_string();
    if !valid_ns(&ns) {
        return Err(refuse(
            "kv_bad_ns",
            format!("{path}.ns {ns:?} must match ^[a-z0-9][a-z0-9._-]{{0,63}}$"),
        ));
    }
    let mut out = KvOp::new(kind, &ns, "");
    out.required = o.bool("required").map_err(bad)?.unwrap_or(false);
    match kind {
        KvKind::GetMany => {
            out.keys = o
                .strings("keys")
                .map_err(bad)?
                .ok_or_else(|| bad(format!("{path}.keys is required")))?;
            for (i, k) in out.keys.iter().enumerate() {
                check_key(&format!("{path}.keys[{i}]"), k)?;
            }
        }
        KvKind::GetPrefix => {
            out.prefix = o.str("prefix").map_err(bad)?.unwrap_or("").to_string();
            out.after = o.str("after").map_err(bad)?.map(str::to_string);
            let limit = o
                .int("limit")
                .map_err(bad)?
                .unwrap_or(PREFIX_LIMIT.0 as i64);
            if !(1..=PREFIX_LIMIT.1 as i64).contains(&limit) {
                return Err(bad(format!(
                    "{path}.limit must be from 1 to {}",
                    PREFIX_LIMIT.1
                )));
            }
            out.limit = limit as usize;
            out.keys_only = o.bool("keysOnly").map_err(bad)?.unwrap_or(false);
        }
        _ => {
            out.key = o.req_str("key").map_err(bad)?.to_string();
            check_key(&format!("{path}.key"), &out.key)?;
        }
    }
    if matches!(kind, KvKind::Put | KvKind::PutIfAbsent) {
        let value = o
            .map
            .get("value")
            .ok_or_else(|| bad(format!("{path}.value is required")))?;
        let text = serde_json::to_string(value).expect("a Value serialises");
        if text.len() > MAX_VALUE_BYTES {
            return Err(KvRefusal {
                reason: "kv_value_too_large",
                message: format!(
                    "{path}.value is {} bytes as compact JSON; the limit is {MAX_VALUE_BYTES}",
                    text.len()
                ),
                too_large: true,
            });
        }
        out.value = Some(text);
    }
    if kind.writes() && kind != KvKind::Delete {
        let ttl = o.get("ttlSeconds");
        let forever = o.bool("forever").map_err(bad)?.unwrap_or(false);
        out.expiry = match (ttl, forever) {
            (Some(_), true) => {
                return Err(refuse(
                    "kv_bad_ttl",
                    format!("{path}: give ttlSeconds or forever, not both"),
                ));
            }
            (None, false) => {
                return Err(refuse(
                    "kv_expiry_not_specified",
                    format!("{path}: a {op} needs exactly one expiry: ttlSeconds or forever: true"),
                ));
            }
            (None, true) => Some(Expiry::Forever),
            (Some(t), false) => match t.as_i64() {
                Some(n) if n > 0 => Some(Expiry::Ttl(n)),
                _ => {
                    return Err(refuse(
                        "kv_bad_ttl",
                        format!("{path}.ttlSeconds must be an integer greater than 0, got {t}"),
                    ));
                }
            },
        };
    }
    if let Some(e) = o.get("expect") {
        out.expect = Some(e.as_u64().ok_or_else(|| {
            refuse(
                "kv_bad_expect",
                format!("{path}.expect must be a version number (0: absent), got {e}"),
            )
        })?);
    }
    if kind == KvKind::Check && out.expect.is_none() {
        return Err(refuse(
            "kv_bad_expect",
            format!("{path}: check needs expect"),
        ));
    }
    if kind == KvKind::Incr {
        let num = |name: &str| -> Result<Option<Number>, KvRefusal> {
            match o.get(name) {
                None => Ok(None),
                Some(Value::Number(n)) => Ok(Some(n.clone())),
                Some(other) => Err(refuse(
                    "kv_bad_delta",
                    format!(
                        "{path}.{name} must be a number, got {}",
                        fields::kind(other)
                    ),
                )),
            }
        };
        if let Some(d) = num("delta")? {
            out.delta = d;
        }
        out.min = num("min")?;
        out.max = num("max")?;
    }
    Ok(out)
}

/// Per-call limits.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Most operations.
    pub ops: usize,
    /// Most keys named.
    pub keys: usize,
    /// Inside a transaction: no `getPrefix`, each key written once.
    pub in_transaction: bool,
}

/// Limits of `POST /api/v1/kv`.
pub const STANDALONE: Limits = Limits {
    ops: 256,
    keys: 1024,
    in_transaction: false,
};

/// Limits of a transaction's `kv` array.
pub const TRANSACTION: Limits = Limits {
    ops: 64,
    keys: 256,
    in_transaction: true,
};

/// Checks a call's operations together against `limits`.
pub fn check_limits(ops: &[KvOp], limits: Limits) -> Result<(), KvRefusal> {
    if ops.len() > limits.ops {
        return Err(refuse(
            "kv_too_many_ops",
            format!("{} KV operations; the limit is {}", ops.len(), limits.ops),
        ));
    }
    let keys: usize = ops
        .iter()
        .map(|o| match o.kind {
            KvKind::GetMany => o.keys.len(),
            KvKind::GetPrefix => 0,
            _ => 1,
        })
        .sum();
    if keys > limits.keys {
        return Err(refuse(
            "kv_too_many_keys",
            format!("{keys} KV keys; the limit is {}", limits.keys),
        ));
    }
    if limits.in_transaction {
        let mut written = std::collections::HashSet::new();
        for (i, o) in ops.iter().enumerate() {
            if o.kind == KvKind::GetPrefix {
                return Err(refuse(
                    "kv_bad_request",
                    format!("kv[{i}]: getPrefix is not allowed inside a transaction"),
                ));
            }
            if o.kind.writes() && !written.insert((o.ns.as_str(), o.key.as_str())) {
                return Err(refuse(
                    "kv_key_written_twice",
                    format!("kv[{i}]: {}/{} is written twice in one call", o.ns, o.key),
                ));
            }
        }
    }
    Ok(())
}

/// A lost precondition.
#[derive(Debug, Clone, PartialEq)]
pub struct Lost {
    /// `exists`, `absent`, `version`, `limit` or `type`.
    pub reason: &'static str,
    /// The row's current version, if it exists.
    pub version: Option<u64>,
    /// The row's current value, if it exists.
    pub value: Option<Value>,
}

/// What one operation did: its result fields, and the lost precondition, if any.
#[derive(Debug, Clone)]
pub struct Applied {
    /// `op`, `key`, `applied`, `value`, `version`, ... (no `index`).
    pub result: Map<String, Value>,
    /// Set when a precondition lost (for `required`: the call rolls back).
    pub lost: Option<Lost>,
}

/// The key of a KV row.
pub fn row_key(tenant: &str, ns: &str, key: &str) -> Vec<u8> {
    Key::tenant(tenant).str(ns).str(key).into_bytes()
}

/// The live row at `(ns, key)`: an expired row reads as absent.
pub fn live_row(tx: &Tx, tenant: &str, ns: &str, key: &str) -> Result<Option<KvRow>, StoreError> {
    Ok(tx
        .get::<KvRow>(T::Kv, &row_key(tenant, ns, key))?
        .filter(|r| r.expires_at.is_none_or(|e| e > tx.now)))
}

fn parse_value(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

fn row_json(key: &str, r: &KvRow, with_value: bool) -> Value {
    let mut m = Map::new();
    m.insert("key".into(), key.into());
    if with_value {
        m.insert("value".into(), parse_value(&r.value));
    }
    m.insert("version".into(), r.version.into());
    m.insert("expiresAt".into(), r.expires_at.map(format_iso).into());
    m.insert("updatedAt".into(), format_iso(r.updated_at).into());
    Value::Object(m)
}

/// Whether `expect` holds for `current`; the losing reason if not.
fn expect_holds(expect: Option<u64>, current: Option<&KvRow>) -> Option<&'static str> {
    match (expect, current) {
        (None, _) => None,
        (Some(0), None) => None,
        (Some(0), Some(_)) => Some("exists"),
        (Some(_), None) => Some("absent"),
        (Some(v), Some(r)) if r.version == v => None,
        (Some(_), Some(_)) => Some("version"),
    }
}

/// Writes a row with a new broker-wide version.
fn write(tx: &mut Tx, tenant: &str, op: &KvOp, value: String) -> Result<KvRow, StoreError> {
    let version = next_counter(tx, "kv_version")?;
    let row = KvRow {
        value,
        version,
        expires_at: match op.expiry {
            Some(Expiry::Ttl(s)) => Some(tx.now.saturating_add(s.saturating_mul(1_000_000))),
            _ => None,
        },
        updated_at: tx.now,
    };
    tx.put(T::Kv, row_key(tenant, &op.ns, &op.key), &row);
    Ok(row)
}

/// Applies one operation.
pub fn apply(tx: &mut Tx, tenant: &str, op: &KvOp) -> Result<Applied, StoreError> {
    let mut result = Map::new();
    result.insert("op".into(), op.kind.name().into());
    let mut lost = None;
    let mut lose = |result: &mut Map<String, Value>, reason: &'static str, cur: Option<&KvRow>| {
        result.insert("applied".into(), false.into());
        result.insert("reason".into(), reason.into());
        if let Some(r) = cur {
            result.insert("value".into(), parse_value(&r.value));
            result.insert("version".into(), r.version.into());
        }
        lost = Some(Lost {
            reason,
            version: cur.map(|r| r.version),
            value: cur.map(|r| parse_value(&r.value)),
        });
    };
    match op.kind {
        KvKind::Get => {
            result.insert("key".into(), op.key.clone().into());
            match live_row(tx, tenant, &op.ns, &op.key)? {
                Some(r) => {
                    result.insert("found".into(), true.into());
                    if let Value::Object(m) = row_json(&op.key, &r, true) {
                        result.extend(m);
                    }
                }
                None => {
                    result.insert("found".into(), false.into());
                }
            }
        }
        KvKind::GetMany => {
            let (mut rows, mut missing) = (Vec::new(), Vec::new());
            for k in &op.keys {
                match live_row(tx, tenant, &op.ns, k)? {
                    Some(r) => rows.push(row_json(k, &r, true)),
                    None => missing.push(Value::from(k.clone())),
                }
            }
            result.insert("rows".into(), rows.into());
            result.insert("missing".into(), missing.into());
        }
        KvKind::GetPrefix => {
            let (rows, truncated, next) = prefix_page(tx, tenant, op)?;
            result.insert("rows".into(), rows.into());
            result.insert("truncated".into(), truncated.into());
            result.insert("nextAfter".into(), next.into());
        }
        KvKind::Put | KvKind::PutIfAbsent => {
            result.insert("key".into(), op.key.clone().into());
            let cur = live_row(tx, tenant, &op.ns, &op.key)?;
            let refusal = if op.kind == KvKind::PutIfAbsent {
                cur.as_ref().map(|_| "exists")
            } else {
                expect_holds(op.expect, cur.as_ref())
            };
            match refusal {
                Some(reason) => lose(&mut result, reason, cur.as_ref()),
                None => {
                    let text = op.value.clone().unwrap_or_else(|| "null".into());
                    let row = write(tx, tenant, op, text)?;
                    result.insert("applied".into(), true.into());
                    result.insert("value".into(), parse_value(&row.value));
                    result.insert("version".into(), row.version.into());
                }
            }
        }
        KvKind::Delete => {
            result.insert("key".into(), op.key.clone().into());
            let cur = live_row(tx, tenant, &op.ns, &op.key)?;
            let refusal = match &cur {
                None => Some("absent"),
                Some(_) => expect_holds(op.expect, cur.as_ref()),
            };
            match refusal {
                Some(reason) => lose(&mut result, reason, cur.as_ref()),
                None => {
                    tx.delete(T::Kv, row_key(tenant, &op.ns, &op.key));
                    result.insert("applied".into(), true.into());
                }
            }
        }
        KvKind::Check => {
            result.insert("key".into(), op.key.clone().into());
            let cur = live_row(tx, tenant, &op.ns, &op.key)?;
            match expect_holds(op.expect, cur.as_ref()) {
                Some(reason) => lose(&mut result, reason, cur.as_ref()),
                None => {
                    result.insert("applied".into(), true.into());
                    result.insert("version".into(), cur.map(|r| r.version).into());
                }
            }
        }
        KvKind::Incr => {
            result.insert("key".into(), op.key.clone().into());
            let cur = live_row(tx, tenant, &op.ns, &op.key)?;
            let base = match &cur {
                None => Some(Number::from(0)),
                Some(r) => match parse_value(&r.value) {
                    Value::Number(n) => Some(n),
                    _ => None,
                },
            };
            match base.map(|b| add(&b, &op.delta)) {
                None => lose(&mut result, "type", cur.as_ref()),
                Some(None) => lose(&mut result, "limit", cur.as_ref()),
                Some(Some(n)) if out_of_bounds(&n, op.min.as_ref(), op.max.as_ref()) => {
                    lose(&mut result, "limit", cur.as_ref())
                }
                Some(Some(n)) => {
                    let row = write(tx, tenant, op, n.to_string())?;
                    result.insert("applied".into(), true.into());
                    result.insert("value".into(), Value::Number(n));
                    result.insert("version".into(), row.version.into());
                }
            }
        }
    }
    Ok(Applied { result, lost })
}

/// `a + b`, in integers when both are integers (overflow: `None`), else in floats.
fn add(a: &Number, b: &Number) -> Option<Number> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return x.checked_add(y).map(Number::from);
    }
    Number::from_f64(a.as_f64()? + b.as_f64()?)
}

fn out_of_bounds(n: &Number, min: Option<&Number>, max: Option<&Number>) -> bool {
    let v = n.as_f64().unwrap_or(0.0);
    min.and_then(Number::as_f64).is_some_and(|m| v < m)
        || max.and_then(Number::as_f64).is_some_and(|m| v > m)
}

fn prefix_page(
    tx: &Tx,
    tenant: &str,
    op: &KvOp,
) -> Result<(Vec<Value>, bool, Option<String>), StoreError> {
    let ns_prefix = Key::tenant(tenant).str(&op.ns).into_bytes();
    let mut scan_prefix = ns_prefix.clone();
    scan_prefix.extend(Key::escaped(&op.prefix));
    let start = match &op.after {
        // Just past `after`: its own key sorts first, then everything longer.
        Some(a) if a.as_str() >= op.prefix.as_str() => {
            let mut k = row_key(tenant, &op.ns, a);
            k.push(0xFF);
            k
        }
        _ => scan_prefix.clone(),
    };
    let (mut rows, mut truncated, mut last) = (Vec::new(), false, None);
    tx.scan(T::Kv, &start, &scan_prefix, |k, v| {
        let mut r = KeyReader::new(k);
        let (_, _, key) = (r.str(), r.str(), r.str());
        let Some(key) = key else { return Ok(true) };
        let row: KvRow = decode(v)?;
        if row.expires_at.is_some_and(|e| e <= tx.now) {
            return Ok(true);
        }
        if rows.len() == op.limit {
            truncated = true;
            return Ok(false);
        }
        rows.push(row_json(&key, &row, !op.keys_only));
        last = Some(key);
        Ok(true)
    })?;
    Ok((rows, truncated, if truncated { last } else { None }))
}

/// The body of a call whose `required` operation lost (`failedIndex` in its index space).
pub fn precondition_body(failed_index: usize, lost: &Lost) -> Value {
    json!({
        "ok": false,
        "reason": "kv_precondition",
        "failedIndex": failed_index,
        "kvReason": lost.reason,
        "version": lost.version,
        "value": lost.value,
        "results": [],
    })
}

/// Runs a standalone KV call: every op in order; a lost `required` op discards the
/// whole call's writes and answers the precondition body instead.
pub fn run_standalone(tx: &mut Tx, tenant: &str, ops: &[KvOp]) -> Result<Value, StoreError> {
    let mut results = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let mut a = apply(tx, tenant, op)?;
        if let (Some(lost), true) = (&a.lost, op.required) {
            tx.discard();
            return Ok(precondition_body(i, lost));
        }
        a.result.insert("index".into(), i.into());
        results.push(Value::Object(a.result));
    }
    Ok(json!({ "results": results }))
}
