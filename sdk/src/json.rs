//! Building request bodies without copying what goes in them.

use bytes::Bytes;
use serde::Serialize;
use serde_json::Value;

use crate::error::Result;

/// A JSON object of `fields`, each value moved in. `json!` serialises every
/// interpolated expression again, which deep-copies a payload or a whole list of
/// operations on every call.
pub(crate) fn object<const N: usize>(fields: [(&str, Value); N]) -> Value {
    Value::Object(
        fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
    )
}

/// `{"operations": [...]}`, the body of the KV, timers and locks calls, around
/// borrowed operations.
#[derive(Serialize)]
pub(crate) struct Operations<T> {
    pub operations: T,
}

/// `v` rendered to the bytes a call sends (once, for every attempt).
pub(crate) fn render<T: Serialize + ?Sized>(v: &T) -> Result<Bytes> {
    Ok(serde_json::to_vec(v)?.into())
}

/// [`render`] into a buffer of about `hint` bytes to start with.
pub(crate) fn render_sized<T: Serialize + ?Sized>(v: &T, hint: usize) -> Result<Bytes> {
    let mut out = Vec::with_capacity(hint);
    serde_json::to_writer(&mut out, v)?;
    Ok(out.into())
}
