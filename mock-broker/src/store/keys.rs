//! Order-preserving key encoding.
//!
//! Every table key is a tuple of strings and integers encoded so that byte order equals
//! tuple order, which makes "all rows of this tenant / queue / partition" a byte-prefix
//! range. Strings are escaped (`0x00` becomes `0x00 0xFF`) and terminated by `0x00 0x01`;
//! integers are big-endian. The first component of every key is the tenant, so isolation
//! is a property of the data model rather than a filter applied afterwards.

/// Builds one encoded key.
#[derive(Debug, Default, Clone)]
pub struct Key(Vec<u8>);

impl Key {
    /// A key scoped to `tenant`.
    pub fn tenant(tenant: &str) -> Self {
        Key(Vec::with_capacity(64)).str(tenant)
    }

    /// Appends a string component.
    pub fn str(mut self, s: &str) -> Self {
        escape_into(&mut self.0, s);
        self.0.extend_from_slice(&[0x00, 0x01]);
        self
    }

    /// A string's escaped bytes without the terminator: the byte prefix shared by every
    /// string component that starts with `s`.
    pub fn escaped(s: &str) -> Vec<u8> {
        let mut out = Vec::with_capacity(s.len());
        escape_into(&mut out, s);
        out
    }

    /// Appends an integer component.
    pub fn u64(mut self, v: u64) -> Self {
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// The encoded bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.0
    }
}

/// Appends `s` escaped to `out`. Names almost never hold a NUL: they are copied whole,
/// not byte by byte into a buffer of their own (every key of every command is built
/// here; that way cost 2-3% of the writer thread under ack-push, perf).
fn escape_into(out: &mut Vec<u8>, s: &str) {
    let mut rest = s.as_bytes();
    while let Some(nul) = rest.iter().position(|&b| b == 0) {
        out.extend_from_slice(&rest[..=nul]);
        out.push(0xFF);
        rest = &rest[nul + 1..];
    }
    out.extend_from_slice(rest);
}

/// Reads the components of an encoded key back, in order.
pub struct KeyReader<'a> {
    rest: &'a [u8],
}

impl<'a> KeyReader<'a> {
    /// Starts reading `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }

    /// Reads a string component.
    pub fn str(&mut self) -> Option<String> {
        let mut out = Vec::new();
        let mut i = 0;
        while i + 1 < self.rest.len() {
            let b = self.rest[i];
            if b == 0 {
                match self.rest[i + 1] {
                    0xFF => out.push(0),
                    0x01 => {
                        self.rest = &self.rest[i + 2..];
                        return String::from_utf8(out).ok();
                    }
                    _ => return None,
                }
                i += 2;
            } else {
                out.push(b);
                i += 1;
            }
        }
        None
    }

    /// Reads an integer component.
    pub fn u64(&mut self) -> Option<u64> {
        let (head, rest) = self.rest.split_at_checked(8)?;
        self.rest = rest;
        Some(u64::from_be_bytes(head.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_order_is_tuple_order() {
        let a = Key::tenant("t").str("a").u64(2).into_bytes();
        let b = Key::tenant("t").str("a").u64(10).into_bytes();
        let c = Key::tenant("t").str("a\0").u64(0).into_bytes();
        let d = Key::tenant("t").str("ab").u64(0).into_bytes();
        assert!(a < b && b < c && c < d);
        // A shorter string is never a prefix-collision of a longer one.
        let p = Key::tenant("t").str("a").into_bytes();
        assert!(a.starts_with(&p) && !d.starts_with(&p));
    }

    #[test]
    fn every_nul_is_escaped_wherever_it_is() {
        for s in ["", "\0", "a\0", "\0a", "a\0\0b", "\0\0", "plain"] {
            let want: Vec<u8> = s
                .bytes()
                .flat_map(|b| if b == 0 { vec![0, 0xFF] } else { vec![b] })
                .collect();
            assert_eq!(Key::escaped(s), want, "{s:?}");
            let k = Key::tenant(s).into_bytes();
            assert_eq!(KeyReader::new(&k).str().as_deref(), Some(s), "{s:?}");
        }
    }

    #[test]
    fn components_read_back() {
        let k = Key::tenant("t\0x").str("q").u64(7).into_bytes();
        let mut r = KeyReader::new(&k);
        assert_eq!(r.str().as_deref(), Some("t\0x"));
        assert_eq!(r.str().as_deref(), Some("q"));
        assert_eq!(r.u64(), Some(7));
    }
}
