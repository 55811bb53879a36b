//! KV: versioned rows with TTLs and preconditions, shared by `POST /api/v1/kv`, the
//! transaction's `kv` array and the locks built on it.

use serde::{Deserialize, Serialize};
use serde_json::Number;

use super::queues::{Counter, next_counter};
use crate::clock::Micros;
use crate::store::keys::{Key, KeyReader};
use crate::store::records::decode;
use crate::store::{StoreError, T, Tx, View};

/// Largest value, as compact JSON (`QUEEN_KV_MAX_VALUE_BYTES`).
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Longest key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Default and largest `getPrefix` page.
pub const PREFIX_LIMIT: (usize, usize) = (100, 1000);

/// A stored KV row.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
    /// The operation named `s` on the wire.
    pub fn parse(s: &str) -> Option<Self> {
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

/// The bounds and step of an `incr`.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// Added to the current number (absent row: 0).
    pub delta: Number,
    /// Lowest allowed result.
    pub min: Option<Number>,
    /// Highest allowed result.
    pub max: Option<Number>,
}

/// A `getPrefix` page request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixQuery {
    /// Keys starting with this.
    pub prefix: String,
    /// Resume after this key.
    pub after: Option<String>,
    /// Page size.
    pub limit: usize,
    /// Leave values out.
    pub keys_only: bool,
}

/// One checked KV operation: each variant carries only what its operation reads.
#[derive(Debug, Clone, PartialEq)]
pub enum KvOp {
    /// Read one key.
    Get {
        /// Namespace.
        ns: String,
        /// The key.
        key: String,
    },
    /// Read several keys.
    GetMany {
        /// Namespace.
        ns: String,
        /// The keys, in the order answered.
        keys: Vec<String>,
    },
    /// Read a page of keys by prefix (standalone only).
    GetPrefix {
        /// Namespace.
        ns: String,
        /// Which page.
        page: PrefixQuery,
    },
    /// Write.
    Put {
        /// Namespace.
        ns: String,
        /// The key.
        key: String,
        /// The value as compact JSON text.
        value: String,
        /// How long the row lives.
        expiry: Expiry,
        /// Required current version; 0: must not exist.
        expect: Option<u64>,
        /// A lost precondition rolls the whole call back.
        required: bool,
    },
    /// Write only if absent.
    PutIfAbsent {
        /// Namespace.
        ns: String,
        /// The key.
        key: String,
        /// The value as compact JSON text.
        value: String,
        /// How long the row lives.
        expiry: Expiry,
        /// A lost precondition rolls the whole call back.
        required: bool,
    },
    /// Remove.
    Delete {
        /// Namespace.
        ns: String,
        /// The key.
        key: String,
        /// Required current version.
        expect: Option<u64>,
        /// A lost precondition rolls the whole call back.
        required: bool,
    },
    /// Assert a version without writing.
    Check {
        /// Namespace.
        ns: String,
        /// The key.
        key: String,
        /// Required current version; 0: must not exist.
        expect: u64,
        /// A lost precondition rolls the whole call back.
        required: bool,
    },
    /// Add to a number.
    Incr {
        /// Namespace.
        ns: String,
        /// The key.
        key: String,
        /// The step and the bounds of the result.
        step: Step,
        /// How long a row this incr creates lives; a live row keeps its own expiry.
        expiry: Expiry,
        /// A lost precondition rolls the whole call back.
        required: bool,
    },
}

impl KvOp {
    /// Which operation.
    pub fn kind(&self) -> KvKind {
        match self {
            Self::Get { .. } => KvKind::Get,
            Self::GetMany { .. } => KvKind::GetMany,
            Self::GetPrefix { .. } => KvKind::GetPrefix,
            Self::Put { .. } => KvKind::Put,
            Self::PutIfAbsent { .. } => KvKind::PutIfAbsent,
            Self::Delete { .. } => KvKind::Delete,
            Self::Check { .. } => KvKind::Check,
            Self::Incr { .. } => KvKind::Incr,
        }
    }

    /// The namespace.
    pub fn ns(&self) -> &str {
        match self {
            Self::Get { ns, .. }
            | Self::GetMany { ns, .. }
            | Self::GetPrefix { ns, .. }
            | Self::Put { ns, .. }
            | Self::PutIfAbsent { ns, .. }
            | Self::Delete { ns, .. }
            | Self::Check { ns, .. }
            | Self::Incr { ns, .. } => ns,
        }
    }

    /// The key of a single-key operation.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::GetMany { .. } | Self::GetPrefix { .. } => None,
            Self::Get { key, .. }
            | Self::Put { key, .. }
            | Self::PutIfAbsent { key, .. }
            | Self::Delete { key, .. }
            | Self::Check { key, .. }
            | Self::Incr { key, .. } => Some(key),
        }
    }

    /// Whether a lost precondition rolls the whole call back (reads never lose).
    pub fn required(&self) -> bool {
        match self {
            Self::Get { .. } | Self::GetMany { .. } | Self::GetPrefix { .. } => false,
            Self::Put { required, .. }
            | Self::PutIfAbsent { required, .. }
            | Self::Delete { required, .. }
            | Self::Check { required, .. }
            | Self::Incr { required, .. } => *required,
        }
    }

    /// How many keys the operation names, for the per-call limit.
    fn key_count(&self) -> usize {
        match self {
            Self::GetMany { keys, .. } => keys.len(),
            Self::GetPrefix { .. } => 0,
            _ => 1,
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

/// A refusal of `reason` (a 400).
pub fn refuse(reason: &'static str, message: impl Into<String>) -> KvRefusal {
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

/// Checks a key: 1 to [`MAX_KEY_BYTES`] bytes, no NUL. `path` names it in the refusal.
pub fn check_key(path: impl std::fmt::Display, key: &str) -> Result<(), KvRefusal> {
    if key.is_empty() || key.len() > MAX_KEY_BYTES || key.contains('\0') {
        return Err(refuse(
            "kv_bad_key",
            format!("{path}: a key is 1 to {MAX_KEY_BYTES} bytes with no NUL"),
        ));
    }
    Ok(())
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
    let keys: usize = ops.iter().map(KvOp::key_count).sum();
    if keys > limits.keys {
        return Err(refuse(
            "kv_too_many_keys",
            format!("{keys} KV keys; the limit is {}", limits.keys),
        ));
    }
    if limits.in_transaction {
        let mut written = std::collections::HashSet::new();
        for (i, o) in ops.iter().enumerate() {
            if o.kind() == KvKind::GetPrefix {
                return Err(refuse(
                    "kv_bad_request",
                    format!("kv[{i}]: getPrefix is not allowed inside a transaction"),
                ));
            }
            if let (true, Some(key)) = (o.kind().writes(), o.key())
                && !written.insert((o.ns(), key))
            {
                let ns = o.ns();
                return Err(refuse(
                    "kv_key_written_twice",
                    format!("kv[{i}]: {ns}/{key} is written twice in one call"),
                ));
            }
        }
    }
    Ok(())
}

/// Why a precondition lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum LostReason {
    /// The row exists (`putIfAbsent`, or `expect: 0`).
    Exists,
    /// The row does not exist.
    Absent,
    /// The row has another version.
    Version,
    /// An `incr` would leave its bounds (or overflow).
    Limit,
    /// An `incr` of a row that is not a number.
    Type,
}

impl LostReason {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Exists => "exists",
            Self::Absent => "absent",
            Self::Version => "version",
            Self::Limit => "limit",
            Self::Type => "type",
        }
    }
}

/// A lost precondition.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Lost {
    /// Why.
    pub reason: LostReason,
    /// The row as it stands, if it exists.
    pub current: Option<KvRow>,
}

/// What one operation did (kept in a transaction's request record, so it is stored
/// as well as answered).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum KvResult {
    /// A `get`: the live row, if any.
    Found {
        /// The key read.
        key: String,
        /// The row; `None`: not found.
        row: Option<KvRow>,
    },
    /// A `getMany`: the rows found, in the order asked, and the keys missing.
    Many {
        /// `(key, row)` of each live row.
        rows: Vec<(String, KvRow)>,
        /// Keys with no live row.
        missing: Vec<String>,
    },
    /// A `getPrefix` page.
    Page {
        /// `(key, row)` in key order.
        rows: Vec<(String, KvRow)>,
        /// Whether values are answered (not `keysOnly`).
        with_values: bool,
        /// More rows follow.
        truncated: bool,
        /// Where the next page starts, when truncated.
        next_after: Option<String>,
    },
    /// A `put`, `putIfAbsent` or `incr` wrote.
    Written {
        /// The key.
        key: String,
        /// The row written.
        value: String,
        /// Its new version.
        version: u64,
    },
    /// A `delete` removed the row.
    Deleted {
        /// The key.
        key: String,
    },
    /// A `check` held.
    Checked {
        /// The key.
        key: String,
        /// The row's version; `None` when it is absent as expected.
        version: Option<u64>,
    },
    /// A precondition lost (for a `required` op: the call rolls back).
    Lost {
        /// The key.
        key: String,
        /// Why, and the row as it stands.
        lost: Lost,
    },
}

impl KvResult {
    /// The lost precondition, if this result is one.
    pub fn lost(&self) -> Option<&Lost> {
        match self {
            Self::Lost { lost, .. } => Some(lost),
            _ => None,
        }
    }
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

/// Whether `expect` holds for `current`; the losing reason if not.
fn expect_holds(expect: Option<u64>, current: Option<&KvRow>) -> Option<LostReason> {
    match (expect, current) {
        (None, _) => None,
        (Some(0), None) => None,
        (Some(0), Some(_)) => Some(LostReason::Exists),
        (Some(_), None) => Some(LostReason::Absent),
        (Some(v), Some(r)) if r.version == v => None,
        (Some(_), Some(_)) => Some(LostReason::Version),
    }
}

/// When a row written now with `expiry` lapses (`None`: never).
fn expires_at(now: Micros, expiry: Expiry) -> Option<Micros> {
    match expiry {
        Expiry::Ttl(s) => Some(now.saturating_add(s.saturating_mul(1_000_000))),
        Expiry::Forever => None,
    }
}

/// Writes a row with the tenant's next version, lapsing at `expires_at`.
fn write(
    tx: &mut Tx,
    tenant: &str,
    (ns, key): (&str, &str),
    expires_at: Option<Micros>,
    value: String,
) -> Result<KvRow, StoreError> {
    let version = next_counter(tx, tenant, Counter::KvVersion)?;
    let row = KvRow {
        value,
        version,
        expires_at,
        updated_at: tx.now,
    };
    tx.put(T::Kv, row_key(tenant, ns, key), &row);
    Ok(row)
}

fn lose(key: &str, reason: LostReason, current: Option<KvRow>) -> KvResult {
    KvResult::Lost {
        key: key.to_string(),
        lost: Lost { reason, current },
    }
}

fn written(key: &str, row: KvRow) -> KvResult {
    KvResult::Written {
        key: key.to_string(),
        value: row.value,
        version: row.version,
    }
}

/// Applies one operation.
pub fn apply(tx: &mut Tx, tenant: &str, op: &KvOp) -> Result<KvResult, StoreError> {
    Ok(match op {
        KvOp::Get { ns, key } => KvResult::Found {
            key: key.clone(),
            row: live_row(tx, tenant, ns, key)?,
        },
        KvOp::GetMany { ns, keys } => {
            let (mut rows, mut missing) = (Vec::new(), Vec::new());
            for k in keys {
                match live_row(tx, tenant, ns, k)? {
                    Some(r) => rows.push((k.clone(), r)),
                    None => missing.push(k.clone()),
                }
            }
            KvResult::Many { rows, missing }
        }
        KvOp::GetPrefix { ns, page } => {
            let Ok(page) = prefix_page(tx, tx.now, tenant, ns, page, &mut |_| {
                Ok::<_, std::convert::Infallible>(())
            })?;
            page
        }
        KvOp::Put {
            ns,
            key,
            value,
            expiry,
            expect,
            ..
        } => {
            let cur = live_row(tx, tenant, ns, key)?;
            match expect_holds(*expect, cur.as_ref()) {
                Some(reason) => lose(key, reason, cur),
                None => {
                    let at = expires_at(tx.now, *expiry);
                    written(key, write(tx, tenant, (ns, key), at, value.clone())?)
                }
            }
        }
        KvOp::PutIfAbsent {
            ns,
            key,
            value,
            expiry,
            ..
        } => match live_row(tx, tenant, ns, key)? {
            Some(cur) => lose(key, LostReason::Exists, Some(cur)),
            None => {
                let at = expires_at(tx.now, *expiry);
                written(key, write(tx, tenant, (ns, key), at, value.clone())?)
            }
        },
        KvOp::Delete {
            ns, key, expect, ..
        } => {
            let cur = live_row(tx, tenant, ns, key)?;
            let refusal = match &cur {
                None => Some(LostReason::Absent),
                Some(_) => expect_holds(*expect, cur.as_ref()),
            };
            match refusal {
                Some(reason) => lose(key, reason, cur),
                None => {
                    tx.delete(T::Kv, row_key(tenant, ns, key));
                    KvResult::Deleted { key: key.clone() }
                }
            }
        }
        KvOp::Check {
            ns, key, expect, ..
        } => {
            let cur = live_row(tx, tenant, ns, key)?;
            match expect_holds(Some(*expect), cur.as_ref()) {
                Some(reason) => lose(key, reason, cur),
                None => KvResult::Checked {
                    key: key.clone(),
                    version: cur.map(|r| r.version),
                },
            }
        }
        KvOp::Incr {
            ns,
            key,
            step,
            expiry,
            ..
        } => {
            let cur = live_row(tx, tenant, ns, key)?;
            let base = match &cur {
                None => Some(Number::from(0)),
                // Only the number itself is read: a row holding anything else is a
                // `type` loss.
                Some(r) => serde_json::from_str::<Number>(&r.value).ok(),
            };
            match base.map(|b| add(&b, &step.delta)) {
                None => lose(key, LostReason::Type, cur),
                Some(None) => lose(key, LostReason::Limit, cur),
                Some(Some(n)) if out_of_bounds(&n, step.min.as_ref(), step.max.as_ref()) => {
                    lose(key, LostReason::Limit, cur)
                }
                Some(Some(n)) => {
                    // The expiry of an incr is create-only: it applies when the incr
                    // creates the row (an absent key, or one whose expiry lapsed), and a
                    // live row keeps its own, so a fixed-window counter's window closes
                    // however often it is counted (queen-mq 2.6.0 `tests/test_kv.py`
                    // `test_incr_does_not_extend_a_live_ttl`).
                    let at = match &cur {
                        Some(live) => live.expires_at,
                        None => expires_at(tx.now, *expiry),
                    };
                    written(key, write(tx, tenant, (ns, key), at, n.to_string())?)
                }
            }
        }
    })
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

/// What one row of a page holds besides its key and value: the row and its JSON.
const PAGE_ROW_COST: u64 = 160;

/// A `getPrefix` page of `ns` as of `now`: live rows in key order. Read through a
/// [`View`], so the operation (staged view, in the writer) and the console's listing of
/// a namespace (`GET /api/v1/kv/{ns}`, a snapshot of the last commit) share one rule.
/// Each row kept is first passed to `charge` with what it holds (its key, and its value
/// twice: read and rendered); a refusal ends the read with it (the listing charges the
/// answer budget, [`Held::charge_whole`](crate::engine::answers::Held::charge_whole); the operation, inside a commit that
/// cannot wait, charges nothing: its page is at most 1,000 rows of 64 KiB).
pub fn prefix_page<E>(
    view: &impl View,
    now: Micros,
    tenant: &str,
    ns: &str,
    q: &PrefixQuery,
    charge: &mut impl FnMut(u64) -> Result<(), E>,
) -> Result<Result<KvResult, E>, StoreError> {
    let ns_prefix = Key::tenant(tenant).str(ns).into_bytes();
    let mut scan_prefix = ns_prefix.clone();
    scan_prefix.extend(Key::escaped(&q.prefix));
    let start = match &q.after {
        // Just past `after`: its own key sorts first, then everything longer.
        Some(a) if a.as_str() >= q.prefix.as_str() => {
            let mut k = row_key(tenant, ns, a);
            k.push(0xFF);
            k
        }
        _ => scan_prefix.clone(),
    };
    let (mut rows, mut truncated, mut refused) = (Vec::new(), false, None);
    view.scan_rows(T::Kv, &start, &scan_prefix, &mut |k, v| {
        let mut r = KeyReader::new(k);
        let (_, _, key) = (r.str(), r.str(), r.str());
        let Some(key) = key else { return Ok(true) };
        let row: KvRow = decode(v)?;
        if row.expires_at.is_some_and(|e| e <= now) {
            return Ok(true);
        }
        if rows.len() == q.limit {
            truncated = true;
            return Ok(false);
        }
        if let Err(e) = charge(PAGE_ROW_COST + key.len() as u64 + 2 * v.len() as u64) {
            refused = Some(e);
            return Ok(false);
        }
        rows.push((key, row));
        Ok(true)
    })?;
    if let Some(e) = refused {
        return Ok(Err(e));
    }
    let next_after = if truncated {
        rows.last().map(|(k, _): &(String, KvRow)| k.clone())
    } else {
        None
    };
    Ok(Ok(KvResult::Page {
        rows,
        with_values: !q.keys_only,
        truncated,
        next_after,
    }))
}

/// One namespace of a tenant, as `GET /api/v1/kv` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Namespace {
    /// Its name.
    pub ns: String,
    /// Its live (unexpired) keys.
    pub keys: u64,
}

/// The tenant's namespaces holding at least one live key as of `now`, in name order.
/// Every row of the tenant is visited (an expired row is only told apart by its
/// value), so this is an operator's read, never a worker's.
pub fn namespaces(
    view: &impl View,
    now: Micros,
    tenant: &str,
) -> Result<Vec<Namespace>, StoreError> {
    let prefix = Key::tenant(tenant).into_bytes();
    let mut out: Vec<Namespace> = Vec::new();
    view.scan_rows(T::Kv, &prefix, &prefix, &mut |k, v| {
        let mut r = KeyReader::new(k);
        let (_, ns) = (r.str(), r.str());
        let Some(ns) = ns else { return Ok(true) };
        let row: KvRow = decode(v)?;
        if row.expires_at.is_some_and(|e| e <= now) {
            return Ok(true);
        }
        // Keys come in namespace order: a namespace's rows are one run.
        match out.last_mut() {
            Some(last) if last.ns == ns => last.keys += 1,
            _ => out.push(Namespace { ns, keys: 1 }),
        }
        Ok(true)
    })?;
    Ok(out)
}

/// What a standalone KV call did.
#[derive(Debug, Clone)]
pub enum KvCall {
    /// Every operation ran: one result each, in order.
    Done(Vec<KvResult>),
    /// The `required` operation at `failed_index` lost; nothing was written.
    Failed {
        /// Its index in the call.
        failed_index: usize,
        /// Why it lost.
        lost: Lost,
    },
}

/// Runs a standalone KV call: every op in order; a lost `required` op discards the
/// whole call's writes and answers [`KvCall::Failed`] instead.
pub fn run_standalone(tx: &mut Tx, tenant: &str, ops: &[KvOp]) -> Result<KvCall, StoreError> {
    let mut results = Vec::with_capacity(ops.len());
    for (i, op) in ops.iter().enumerate() {
        let r = apply(tx, tenant, op)?;
        if let (Some(lost), true) = (r.lost(), op.required()) {
            tx.discard();
            return Ok(KvCall::Failed {
                failed_index: i,
                lost: lost.clone(),
            });
        }
        results.push(r);
    }
    Ok(KvCall::Done(results))
}
