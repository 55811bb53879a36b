//! Portable JSON (I-JSON, RFC 7493): the strict check every JSON value a consumer will
//! decode passes, whichever route brought it (a request body, a timer's payload).

use std::borrow::Cow;

/// Checks that `bytes` are one portable JSON value: UTF-8, no number out of range
/// (`1e400`), no lone surrogate (`"\ud800"`), nesting at most 128 deep, no duplicate
/// key in any object.
pub(crate) fn check(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde::Deserialize::deserialize(&mut de).and_then(|Portable| de.end())
}

/// [`check`] for bytes that may not be meant as JSON at all (a timer's payload may be
/// any bytes): text that a lenient parser reads as one JSON value must pass [`check`];
/// anything else (binary, plain text) passes, as it is not delivered as JSON.
pub(crate) fn check_if_json(bytes: &[u8]) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // Lenient: skips without checking number ranges, escapes or (beyond serde_json's
    // own limit) depth, as `RawValue`, which delivers it, does.
    let json = serde::Deserialize::deserialize(&mut de)
        .and_then(|serde::de::IgnoredAny| de.end())
        .is_ok();
    if json { check(bytes) } else { Ok(()) }
}

/// A JSON value walked for [`check`]: serde_json checks UTF-8, escapes, number
/// ranges and depth (its recursion limit, 128) on the way; this adds duplicate keys.
struct Portable;

impl<'de> serde::Deserialize<'de> for Portable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(PortableVisitor)
    }
}

struct PortableVisitor;

impl<'de> serde::de::Visitor<'de> for PortableVisitor {
    type Value = Portable;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Portable, E> {
        Ok(Portable)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Portable, E> {
        Ok(Portable)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Portable, E> {
        Ok(Portable)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Portable, E> {
        Ok(Portable)
    }

    fn visit_str<E>(self, _: &str) -> Result<Portable, E> {
        Ok(Portable)
    }

    fn visit_unit<E>(self) -> Result<Portable, E> {
        Ok(Portable)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Portable, A::Error> {
        while seq.next_element::<Portable>()?.is_some() {}
        Ok(Portable)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Portable, A::Error> {
        // The first keys are scanned (nearly every object is small); the rest hashed.
        let mut few: Vec<Cow<'de, str>> = Vec::new();
        let mut many = std::collections::HashSet::new();
        while let Some(PortableKey(key)) = map.next_key()? {
            if few.contains(&key) || many.contains(&key) {
                return Err(serde::de::Error::custom(format_args!(
                    "duplicate key {key:?}"
                )));
            }
            if few.len() < 16 {
                few.push(key);
            } else {
                many.insert(key);
            }
            map.next_value::<Portable>()?;
        }
        Ok(Portable)
    }
}

/// An object key, borrowed from the body when it has no escapes.
struct PortableKey<'de>(Cow<'de, str>);

impl<'de> serde::Deserialize<'de> for PortableKey<'de> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = PortableKey<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
                Ok(PortableKey(Cow::Borrowed(s)))
            }
            fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
                Ok(PortableKey(Cow::Owned(s.to_string())))
            }
        }
        d.deserialize_str(V)
    }
}
