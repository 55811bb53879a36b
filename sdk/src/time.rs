//! Times as the broker writes them: RFC 3339 UTC (`2026-12-04T15:35:51.123Z`), both
//! ways, without a date-time crate for two conversions.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `t` as an RFC 3339 UTC time with milliseconds (`2026-12-04T15:35:51.123Z`); a time
/// before 1970 is sent as the epoch.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    let since = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = since.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, d) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        since.subsec_millis()
    )
}

/// The time of an RFC 3339 text (`2026-12-04T15:35:51.123Z`, `...51+01:00`, a space
/// for the `T`, any number of fraction digits); `None` for anything else, or a time
/// before 1970.
pub(crate) fn parse_rfc3339(s: &str) -> Option<SystemTime> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let part = b.get(r)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut i = 19;
    let mut nanos = 0u32;
    if b[i] == b'.' {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            if i - start < 9 {
                nanos = nanos * 10 + u32::from(b[i] - b'0');
            }
            i += 1;
        }
        if i == start {
            return None;
        }
        for _ in (i - start)..9 {
            nanos *= 10;
        }
    }
    let offset = match b.get(i..)? {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), ..] if b.len() == i + 6 && b[i + 3] == b':' => {
            let o = num(i + 1..i + 3)? * 3600 + num(i + 4..i + 6)? * 60;
            if *sign == b'+' { o } else { -o }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo as u32, d as u32) * 86_400 + h * 3600 + mi * 60 + sec - offset;
    let secs = u64::try_from(secs).ok()?;
    Some(UNIX_EPOCH + Duration::new(secs, nanos))
}

/// The proleptic Gregorian date of a count of days since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
/// `days_from_civil`, the inverse of [`civil_from_days`]).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from((m + 9) % 12);
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: u64, ms: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s) + Duration::from_millis(ms)
    }

    #[test]
    fn times_render_as_rfc3339_utc() {
        assert_eq!(rfc3339(at(0, 0)), "1970-01-01T00:00:00.000Z");
        // 2000-02-29 (a leap day of a year divisible by 400), 12:34:56.789.
        assert_eq!(rfc3339(at(951_827_696, 789)), "2000-02-29T12:34:56.789Z");
        assert_eq!(rfc3339(at(1_796_398_551, 5)), "2026-12-04T15:35:51.005Z");
        // Before the epoch: the epoch.
        assert_eq!(
            rfc3339(UNIX_EPOCH - Duration::from_secs(5)),
            "1970-01-01T00:00:00.000Z"
        );
    }

    #[test]
    fn rendered_times_parse_back() {
        for t in [
            at(0, 0),
            at(951_827_696, 789),
            at(1_796_398_551, 5),
            at(4_102_444_799, 999),
        ] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
    }

    #[test]
    fn the_broker_s_other_spellings_parse() {
        assert_eq!(
            parse_rfc3339("2026-12-04T15:35:51Z"),
            Some(at(1_796_398_551, 0))
        );
        assert_eq!(
            parse_rfc3339("2026-12-04T16:35:51.005123+01:00"),
            Some(at(1_796_398_551, 5) + Duration::from_micros(123))
        );
        assert_eq!(
            parse_rfc3339("2026-12-04 15:35:51.005Z"),
            Some(at(1_796_398_551, 5))
        );
    }

    #[test]
    fn anything_else_is_none() {
        for bad in [
            "",
            "yesterday",
            "2026-12-04",
            "2026-13-04T15:35:51Z",
            "2026-12-04T15:35:51",
            "2026-12-04T15:35:51.Z",
            "2026-12-04T15:35:51+0100",
            "1969-12-31T23:59:59Z",
            "2026-12-04T15:35:51Zjunk",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad:?}");
        }
    }
}
