//! Client-side checks of the spec's limits, so a request that would be refused is
//! never sent.

use crate::error::{Error, Result};

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
pub fn name(op: &str, n: &str) -> Result<()> {
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
pub fn transaction_id(op: &str, id: &str) -> Result<()> {
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
pub fn ns(op: &str, ns: &str) -> Result<()> {
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
pub fn key(op: &str, k: &str) -> Result<()> {
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
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// The length of `v` as compact JSON, counted without building the text.
pub(crate) fn json_len(v: &serde_json::Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a `Value` into a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}
