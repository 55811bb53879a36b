//! What an invariant reads of a broker's messages and timers ([`State::messages`],
//! [`State::timers`]): the crate's own types, the same in process and by URL, so that
//! a build for checks by URL only (without the `in-process` feature) needs no broker.
//!
//! [`State::messages`]: crate::State::messages
//! [`State::timers`]: crate::State::timers

use serde_json::Value;

/// A stored message, as [`State::messages`](crate::State::messages) reads it.
///
/// ```
/// let first = queen_verify::Invariant::new("receipts start at offset 0", |s| {
///     let m: Vec<queen_verify::StoredMessage> =
///         s.messages("receipts", "Default").map_err(|e| e.to_string())?;
///     match m.first() {
///         Some(m) if m.offset != 0 => Err(format!("first at {}", m.offset)),
///         _ => Ok(()),
///     }
/// });
/// # let _ = first;
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct StoredMessage {
    /// Its offset in its partition.
    pub offset: u64,
    /// Its id.
    pub id: String,
    /// Its `transactionId`.
    pub transaction_id: String,
    /// Its payload.
    pub data: Value,
    /// Its trace id.
    pub trace_id: Option<String>,
    /// When it was stored, in microseconds since the epoch (0 when the broker did not
    /// say).
    pub created_at: i64,
}

/// A pending timer, as [`State::timers`](crate::State::timers) reads it.
///
/// ```
/// let soon = queen_verify::Invariant::new("reminders a day out", |s| {
///     let now = s.now_micros();
///     for t in s.timers("reminders").map_err(|e| e.to_string())? {
///         if t.deliver_at < now + 3_600_000_000 {
///             return Err(format!("{} fires within the hour", t.key));
///         }
///     }
///     Ok(())
/// });
/// # let _ = soon;
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct StoredTimer {
    /// Its key.
    pub key: String,
    /// The `transactionId` of the message it pushes.
    pub txn: String,
    /// The id of the message it pushes.
    pub message_id: String,
    /// When it fires, in microseconds since the epoch.
    pub deliver_at: i64,
}

impl StoredMessage {
    pub(crate) fn new(
        offset: u64,
        id: String,
        transaction_id: String,
        data: Value,
        trace_id: Option<String>,
        created_at: i64,
    ) -> Self {
        StoredMessage {
            offset,
            id,
            transaction_id,
            data,
            trace_id,
            created_at,
        }
    }
}

impl StoredTimer {
    pub(crate) fn new(key: String, txn: String, message_id: String, deliver_at: i64) -> Self {
        StoredTimer {
            key,
            txn,
            message_id,
            deliver_at,
        }
    }
}

#[cfg(feature = "in-process")]
impl From<queen_mock_broker::harness::InspectedMessage> for StoredMessage {
    fn from(m: queen_mock_broker::harness::InspectedMessage) -> Self {
        StoredMessage::new(
            m.offset,
            m.id,
            m.transaction_id,
            m.data,
            m.trace_id,
            m.created_at,
        )
    }
}

#[cfg(feature = "in-process")]
impl From<queen_mock_broker::harness::InspectedTimer> for StoredTimer {
    fn from(t: queen_mock_broker::harness::InspectedTimer) -> Self {
        StoredTimer::new(t.key, t.txn, t.message_id, t.deliver_at)
    }
}

/// An RFC 3339 time (`2026-01-01T00:00:00.123456Z`, or with an offset `+02:00`) in
/// microseconds since the epoch; `None` when it is not one. Written here rather than
/// linking a date crate for the one format brokers answer (a build by URL only links
/// no `time`).
pub(crate) fn parse_iso(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let d = b.get(from..from + len)?;
        d.iter().all(u8::is_ascii_digit).then_some(())?;
        std::str::from_utf8(d).ok()?.parse().ok()
    };
    let sep = |at: usize, c: &[u8]| b.get(at).is_some_and(|x| c.contains(x));
    if !(sep(4, b"-") && sep(7, b"-") && sep(10, b"Tt ") && sep(13, b":") && sep(16, b":")) {
        return None;
    }
    let (y, mo, d) = (num(0, 4)?, num(5, 2)?, num(8, 2)?);
    let (h, mi, sec) = (num(11, 2)?, num(14, 2)?, num(17, 2)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut micros = 0i64;
    if sep(i, b".") {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            if i - start < 6 {
                micros = micros * 10 + i64::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..6 {
            micros *= 10;
        }
    }
    let offset_secs = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == i + 6 && sep(i + 3, b":") => {
            let off = num(i + 1, 2)? * 3600 + num(i + 4, 2)? * 60;
            if *sign == b'+' { off } else { -off }
        }
        _ => return None,
    };
    // Days from the civil date (Howard Hinnant's algorithm), proleptic Gregorian.
    let (y, mo) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * mo + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + sec - offset_secs;
    Some(secs * 1_000_000 + micros)
}

#[cfg(test)]
mod tests {
    use super::parse_iso;

    #[test]
    fn rfc3339_times_parse_to_microseconds() {
        assert_eq!(parse_iso("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_iso("2026-01-01T00:00:00Z"),
            Some(1_767_225_600_000_000)
        );
        assert_eq!(
            parse_iso("2026-01-01T00:00:00.5Z"),
            Some(1_767_225_600_500_000)
        );
        assert_eq!(
            parse_iso("2026-01-01T02:00:00.1234567+02:00"),
            Some(1_767_225_600_123_456)
        );
        assert_eq!(
            parse_iso("2024-02-29T12:00:00-01:30"),
            Some(1_709_213_400_000_000)
        );
        for bad in [
            "yesterday",
            "2026-01-01",
            "2026-13-01T00:00:00Z",
            "2026-01-01T00:00:00",
        ] {
            assert_eq!(parse_iso(bad), None, "{bad}");
        }
    }

    /// The broker's own formatter and parser agree with this one.
    #[cfg(feature = "in-process")]
    #[test]
    fn the_brokers_times_parse_the_same() {
        use queen_mock_broker::clock;
        let mut t: i64 = 1;
        while t < 4_000_000_000_000_000 {
            let s = clock::format_iso(t);
            assert_eq!(parse_iso(&s), clock::parse_iso(&s), "{s}");
            assert_eq!(parse_iso(&s), Some(t), "{s}");
            t = t * 7 + 123_457;
        }
    }
}
