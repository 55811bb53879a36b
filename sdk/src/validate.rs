//! Client-side checks of the spec's limits, so a request that would be refused is
//! never sent.

use std::fmt;

use crate::error::{Error, Result};

/// Where in a request a rule applies, as an error names it (`operations[2] (push)`,
/// `timers[0]`): written out only when a rule is broken, not for every part checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Part {
    /// The list the part is in (`operations`, `kv`, ...).
    pub list: &'static str,
    /// Its place in the list.
    pub index: usize,
    /// What it is, when the list holds several kinds (`push`, `put`, ...).
    pub kind: Option<&'static str>,
}

impl fmt::Display for Part {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}[{}]", self.list, self.index)?;
        match self.kind {
            Some(k) => write!(f, " ({k})"),
            None => Ok(()),
        }
    }
}

/// Longest queue or partition name, in bytes.
pub const MAX_NAME_BYTES: usize = 1024;
/// Longest `transactionId`, in bytes.
pub const MAX_TRANSACTION_ID_BYTES: usize = 65_535;
/// Longest KV key, in bytes.
pub const MAX_KEY_BYTES: usize = 512;
/// Largest KV value, as compact JSON.
pub const MAX_VALUE_BYTES: usize = 64 * 1024;
/// Most KV operations in a transaction.
pub const MAX_KV_OPS: usize = 64;
/// Most KV keys named in a transaction.
pub const MAX_KV_KEYS: usize = 256;
/// Most positions in a transaction.
pub const MAX_POSITIONS: usize = 16_384;

/// A queue or partition name: present and within the key budget.
pub fn name(op: &(impl fmt::Display + ?Sized), n: &str) -> Result<()> {
    if n.is_empty() {
        return Err(Error::invalid(
            op,
            "a queue or partition name must not be empty",
        ));
    }
    if n.len() > MAX_NAME_BYTES {
        return Err(Error::invalid(
            op,
            format!("a name is {} bytes; the limit is {MAX_NAME_BYTES}", n.len()),
        ));
    }
    Ok(())
}

/// A `transactionId` within 65,535 bytes.
pub fn transaction_id(op: &(impl fmt::Display + ?Sized), id: &str) -> Result<()> {
    if id.len() > MAX_TRANSACTION_ID_BYTES {
        return Err(Error::invalid(
            op,
            format!(
                "a transactionId is {} bytes; the limit is {MAX_TRANSACTION_ID_BYTES}",
                id.len()
            ),
        ));
    }
    Ok(())
}

/// A KV namespace: `^[a-z0-9][a-z0-9._-]{0,63}$`.
pub fn ns(op: &(impl fmt::Display + ?Sized), ns: &str) -> Result<()> {
    let b = ns.as_bytes();
    let ok = !b.is_empty()
        && b.len() <= 64
        && (b[0].is_ascii_lowercase() || b[0].is_ascii_digit())
        && b[1..].iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, b'.' | b'_' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            op,
            format!("namespace {ns:?} must match ^[a-z0-9][a-z0-9._-]{{0,63}}$"),
        ))
    }
}

/// A KV key: 1 to 512 bytes, no NUL.
pub fn key(op: &(impl fmt::Display + ?Sized), k: &str) -> Result<()> {
    if k.is_empty() || k.len() > MAX_KEY_BYTES || k.contains('\0') {
        return Err(Error::invalid(
            op,
            format!("a key is 1 to {MAX_KEY_BYTES} bytes with no NUL"),
        ));
    }
    Ok(())
}

/// Percent-encodes a path segment.
pub fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    push_segment(&mut out, s);
    out
}

/// Appends `s` to `out` percent-encoded: every byte but the unreserved ones
/// (`A-Z a-z 0-9 - _ . ~`), so it is safe in a path segment and a query value alike.
pub fn push_segment(out: &mut String, s: &str) {
    use std::fmt::Write as _;
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            // Writing to a String cannot fail.
            let _ = write!(out, "%{b:02X}");
        }
    }
}
