//! Fields whose wrong type is a refusal with its own reason (a KV `expect` that is not a
//! version is `kv_bad_expect`, not a generic 400): read whatever JSON is there, judge it
//! after the parse.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A field read as `T` when it is one, or kept as the JSON that was sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Loose<T> {
    /// The field is a `T`.
    Ok(T),
    /// The field is some other JSON, kept for the refusal's text.
    Bad(Value),
}

impl<T: DeserializeOwned> Loose<T> {
    /// Judges `v`.
    pub fn of(v: Value) -> Self {
        match T::deserialize(&v) {
            Ok(t) => Loose::Ok(t),
            Err(_) => Loose::Bad(v),
        }
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Loose<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Value::deserialize(d).map(Loose::of)
    }
}

/// A field whose `null` is a value, not an absence (a KV `value`): present → `Some`.
pub fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

/// A JSON value's kind, for error texts.
pub fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
