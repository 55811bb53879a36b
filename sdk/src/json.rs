//! Building request bodies without copying what goes in them.

use serde_json::Value;

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
