//! The `options` object of `POST /api/v1/configure`, checked and turned into the
//! engine's typed [`OptionsPatch`].
//!
//! Clients send options as a loose JSON object: every key optional, `null` meaning
//! "back to the default", unknown keys ignored (as decoders ignore unknown keys). The
//! checks name the option and the values it takes, which serde's own type errors
//! would not say as plainly.

use serde_json::{Map, Value};

use crate::store::records::{OptionsPatch, QueueOptions};

/// The values an option takes.
#[derive(Clone, Copy)]
enum Kind {
    /// An integer of at least the given value that fits in an i32.
    Int(i64),
    Bool,
    /// A string or null.
    Str,
    /// Any integer (the engine stores it clamped into its range).
    Clamped,
}

/// Every queue option's wire name and the values it takes; the options themselves,
/// and their defaults, are [`QueueOptions`]'s fields.
const OPTIONS: &[(&str, Kind)] = &[
    ("leaseTime", Kind::Int(1)),
    ("retryLimit", Kind::Int(0)),
    ("deadLetterQueue", Kind::Bool),
    ("delayedProcessing", Kind::Int(0)),
    ("dedupWindowSeconds", Kind::Int(0)),
    ("retentionSeconds", Kind::Int(0)),
    ("priority", Kind::Int(i32::MIN as i64)),
    ("retryDelay", Kind::Int(0)),
    ("maxSize", Kind::Int(0)),
    ("ttl", Kind::Int(0)),
    ("dlqAfterMaxRetries", Kind::Bool),
    ("windowBuffer", Kind::Int(0)),
    ("completedRetentionSeconds", Kind::Int(0)),
    ("retentionEnabled", Kind::Bool),
    ("encryptionEnabled", Kind::Bool),
    ("maxWaitTimeSeconds", Kind::Int(0)),
    ("minPopWaitTime", Kind::Clamped),
    ("retentionSinkHold", Kind::Str),
    ("retentionSinkHoldMaxSeconds", Kind::Int(0)),
];

/// Checks each known option's value and builds the patch: a `null` becomes the
/// option's default; unknown options are dropped. A bad value is the error message.
pub fn options_patch(options: Map<String, Value>) -> Result<OptionsPatch, String> {
    let Value::Object(defaults) =
        serde_json::to_value(QueueOptions::default()).map_err(|e| e.to_string())?
    else {
        return Err("the default options do not render as an object".into());
    };
    let mut known = Map::new();
    for (name, value) in options {
        let Some((_, kind)) = OPTIONS.iter().find(|(k, _)| *k == name) else {
            continue;
        };
        if value.is_null() {
            let default = defaults.get(&name).cloned().unwrap_or(Value::Null);
            known.insert(name, default);
            continue;
        }
        let ok = match kind {
            Kind::Int(min) => value
                .as_i64()
                .is_some_and(|v| v >= *min && v <= i32::MAX as i64),
            Kind::Bool => value.is_boolean(),
            Kind::Str => value.is_string(),
            Kind::Clamped => value.as_i64().is_some(),
        };
        if !ok {
            let want = match kind {
                Kind::Int(min) => format!("an integer from {min} to {}", i32::MAX),
                Kind::Clamped => "an integer".into(),
                Kind::Bool => "a boolean".into(),
                Kind::Str => "a string".into(),
            };
            return Err(format!("options.{name} must be {want}, got {value}"));
        }
        known.insert(name, value);
    }
    serde_json::from_value(Value::Object(known)).map_err(|e| format!("options: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn patch(v: Value) -> Result<OptionsPatch, String> {
        let Value::Object(m) = v else { unreachable!() };
        options_patch(m)
    }

    #[test]
    fn values_nulls_and_unknown_names() {
        let p = patch(json!({"leaseTime": 30, "retryLimit": null, "whatever": [1],
            "retentionSinkHold": "s3", "minPopWaitTime": 90000}))
        .unwrap();
        assert_eq!(p.lease_time, Some(30));
        assert_eq!(p.retry_limit, Some(3), "null: the default");
        assert_eq!(p.retention_sink_hold, Some(Some("s3".into())));
        assert_eq!(p.min_pop_wait_time, Some(90000), "clamped by the engine");
        assert_eq!(p.dead_letter_queue, None, "not sent");
    }

    #[test]
    fn bad_values_name_the_option() {
        for (body, needle) in [
            (
                json!({"leaseTime": 0}),
                "options.leaseTime must be an integer from 1",
            ),
            (
                json!({"deadLetterQueue": "no"}),
                "options.deadLetterQueue must be a boolean",
            ),
            (json!({"retryLimit": 1.5}), "options.retryLimit"),
            (json!({"retentionSinkHold": 3}), "must be a string"),
            (json!({"priority": 3_000_000_000i64}), "options.priority"),
        ] {
            let e = patch(body).unwrap_err();
            assert!(e.contains(needle), "{e}");
        }
    }
}
