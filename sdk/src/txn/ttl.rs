//! KV expiry: a TTL in seconds, or forever.

use std::time::Duration;

use crate::error::{Error, Result};

/// How long a written KV row lives. Every `put`, `putIfAbsent` and `incr` carries
/// exactly one.
///
/// ```
/// use std::time::Duration;
/// use queen_sdk::Ttl;
/// assert_eq!(Ttl::parse("30d")?, Ttl::days(30));
/// assert_eq!(Ttl::parse("90m")?, Ttl::seconds(5400));
/// assert_eq!(Ttl::from(Duration::from_millis(1500)), Ttl::seconds(2));
/// assert!(Ttl::parse("soon").is_err());
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ttl {
    /// This many seconds (at least 1: a write with 0 is refused before sending).
    Seconds(u64),
    /// Never lapses.
    Forever,
}

impl Ttl {
    /// `n` seconds.
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// assert_eq!(Ttl::seconds(90), Ttl::Seconds(90));
    /// ```
    pub fn seconds(n: u64) -> Self {
        Ttl::Seconds(n)
    }

    /// `n` minutes.
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// assert_eq!(Ttl::minutes(5), Ttl::seconds(300));
    /// ```
    pub fn minutes(n: u64) -> Self {
        Ttl::Seconds(n * 60)
    }

    /// `n` hours.
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// assert_eq!(Ttl::hours(12), Ttl::seconds(43_200));
    /// ```
    pub fn hours(n: u64) -> Self {
        Ttl::Seconds(n * 3600)
    }

    /// `n` days.
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// assert_eq!(Ttl::days(30), Ttl::seconds(2_592_000));
    /// ```
    pub fn days(n: u64) -> Self {
        Ttl::Seconds(n * 86_400)
    }

    /// Never lapses.
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// assert_eq!(Ttl::forever(), Ttl::Forever);
    /// ```
    pub fn forever() -> Self {
        Ttl::Forever
    }

    /// Parses `"45s"`, `"30m"`, `"12h"`, `"30d"` (a bare number is seconds). It never
    /// answers [`Ttl::Forever`].
    ///
    /// ```
    /// use queen_sdk::Ttl;
    /// assert_eq!(Ttl::parse("45s")?, Ttl::seconds(45));
    /// assert_eq!(Ttl::parse(" 12h ")?, Ttl::hours(12));
    /// assert_eq!(Ttl::parse("600")?, Ttl::minutes(10));
    /// assert!(Ttl::parse("2w").is_err()); // units are s, m, h and d
    /// # Ok::<(), queen_sdk::Error>(())
    /// ```
    pub fn parse(s: &str) -> Result<Self> {
        let s = s.trim();
        let (num, unit) = match s.char_indices().last() {
            Some((i, c)) if c.is_ascii_alphabetic() => (&s[..i], c),
            _ => (s, 's'),
        };
        let n: u64 = num.parse().map_err(|_| {
            Error::invalid(
                "ttl",
                format!("{s:?} is not a TTL such as 30d, 12h, 5m or 45s"),
            )
        })?;
        let secs = match unit {
            's' => n,
            'm' => n * 60,
            'h' => n * 3600,
            'd' => n * 86_400,
            _ => {
                return Err(Error::invalid(
                    "ttl",
                    format!("{s:?}: the unit must be s, m, h or d"),
                ));
            }
        };
        Ok(Ttl::Seconds(secs))
    }
}

impl From<Duration> for Ttl {
    /// Rounds up to whole seconds.
    fn from(d: Duration) -> Self {
        let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
        Ttl::Seconds(secs)
    }
}
