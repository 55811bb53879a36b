//! Lenient decoding of the operator reads' figures.
//!
//! These answers are report-shaped: a count may come as a number, as a float (an
//! average, a lag in seconds with a fraction) or, from a broker on PostgreSQL, as a
//! numeric string (`"12"`); a figure the broker does not keep may be `null`. A figure
//! that does not decode must not turn a whole dashboard read into a decode error, so
//! each of these reads what it can and answers 0 (or `None`) for the rest.

use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// A JSON number, float or numeric string as a whole number of at least 0.
fn as_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_i64().map(|i| i.max(0) as u64))
            .or_else(|| n.as_f64().map(|f| if f > 0.0 { f as u64 } else { 0 })),
        Value::String(s) => {
            let s = s.trim();
            s.parse::<u64>().ok().or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .map(|f| if f > 0.0 { f as u64 } else { 0 })
            })
        }
        _ => None,
    }
}

/// A count: 0 when absent, `null` or not a number.
pub(crate) fn count<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    Ok(as_u64(&Value::deserialize(d)?).unwrap_or(0))
}

/// An optional figure: `None` when `null` or not a number.
pub(crate) fn opt_count<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    Ok(as_u64(&Value::deserialize(d)?))
}

/// An optional float (`lag_hours`), also from a numeric string.
pub(crate) fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    })
}

/// A flag, also from `0`/`1` or `"true"`/`"false"`; `false` when absent or `null`.
pub(crate) fn flag<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::Bool(b) => b,
        Value::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Value::String(s) => s == "true" || s == "1",
        _ => false,
    })
}

/// A text that may be `null`, or a number where an id is expected (`partitionId: 42`).
pub(crate) fn opt_text<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match Value::deserialize(d)? {
        Value::String(s) => Some(s),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    })
}

/// A text that must be there, or a number where an id is expected; `""` for `null`.
pub(crate) fn text<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    Ok(opt_text(d)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn figures_read_numbers_floats_and_numeric_strings() {
        for (v, want) in [
            (json!(7), Some(7)),
            (json!(-3), Some(0)),
            (json!(2.9), Some(2)),
            (json!("12"), Some(12)),
            (json!(" 4.5 "), Some(4)),
            (json!(null), None),
            (json!("soon"), None),
            (json!([1]), None),
        ] {
            assert_eq!(as_u64(&v), want, "{v}");
        }
    }
}
