//! Reading fields of a JSON object by hand, for bodies whose shape is itself part of
//! the contract (a part present but not an array, a KV element inside `operations`).
//! Every refusal names the field's path. `null` counts as absent (`wire.md` section 1).

use serde_json::{Map, Value};

/// A JSON object and its path in the body, for error texts.
pub struct Obj<'a> {
    /// The fields.
    pub map: &'a Map<String, Value>,
    /// Where it sits, such as `kv[2]`.
    pub path: String,
}

/// A refusal: the text of a 400.
pub type FieldError = String;

impl<'a> Obj<'a> {
    /// Views `v` as an object, or refuses.
    pub fn of(v: &'a Value, path: impl Into<String>) -> Result<Self, FieldError> {
        let path = path.into();
        match v {
            Value::Object(map) => Ok(Obj { map, path }),
            other => Err(format!("{path} must be an object, got {}", kind(other))),
        }
    }

    /// The field, `None` when absent or null.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        self.map.get(name).filter(|v| !v.is_null())
    }

    /// Whether the field is present and not null.
    pub fn has(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    fn at(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    /// An optional string.
    pub fn str(&self, name: &str) -> Result<Option<&'a str>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(format!(
                "{} must be a string, got {}",
                self.at(name),
                kind(other)
            )),
        }
    }

    /// A required string.
    pub fn req_str(&self, name: &str) -> Result<&'a str, FieldError> {
        self.str(name)?
            .ok_or_else(|| format!("{} is required", self.at(name)))
    }

    /// An optional integer.
    pub fn int(&self, name: &str) -> Result<Option<i64>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| format!("{} must be an integer, got {v}", self.at(name))),
        }
    }

    /// An optional boolean.
    pub fn bool(&self, name: &str) -> Result<Option<bool>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(format!(
                "{} must be a boolean, got {}",
                self.at(name),
                kind(other)
            )),
        }
    }

    /// An optional array.
    pub fn array(&self, name: &str) -> Result<Option<&'a Vec<Value>>, FieldError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(other) => Err(format!(
                "{} must be an array, got {}",
                self.at(name),
                kind(other)
            )),
        }
    }

    /// An optional array of strings.
    pub fn strings(&self, name: &str) -> Result<Option<Vec<String>>, FieldError> {
        let Some(items) = self.array(name)? else {
            return Ok(None);
        };
        items
            .iter()
            .enumerate()
            .map(|(i, v)| match v {
                Value::String(s) => Ok(s.clone()),
                other => Err(format!(
                    "{}[{i}] must be a string, got {}",
                    self.at(name),
                    kind(other)
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// The required `operations` array of a standalone KV, timers or locks call.
pub fn operations(body: &Value) -> Result<&Vec<Value>, FieldError> {
    Obj::of(body, "body")?
        .array("operations")?
        .ok_or_else(|| "operations is required".to_string())
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
