//! KV expiry: a TTL in seconds, or forever.

use std::str::FromStr;
use std::time::Duration;

use crate::error::{Error, Result};

/// How long a written KV row lives: `put`, `put_if_absent` and `incr` take one as an
/// argument, [`Ttl::Forever`] or a time to live (a [`Duration`] converts, rounded up to
/// whole seconds).
///
/// ```
/// use std::time::Duration;
/// use queen_sdk::Ttl;
/// assert_eq!("30d".parse::<Ttl>()?, Ttl::days(30));
/// assert_eq!("90m".parse::<Ttl>()?, Ttl::seconds(5400));
/// assert_eq!(Ttl::from(Duration::from_millis(1500)), Ttl::seconds(2));
/// assert!("soon".parse::<Ttl>().is_err());
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
}

/// Parses `"45s"`, `"30m"`, `"12h"`, `"30d"` (a bare number is seconds) and
/// `"forever"`; anything else is [`Error::Invalid`].
///
/// ```
/// use queen_sdk::Ttl;
/// assert_eq!("45s".parse::<Ttl>()?, Ttl::seconds(45));
/// assert_eq!(" 12h ".parse::<Ttl>()?, Ttl::hours(12));
/// assert_eq!("600".parse::<Ttl>()?, Ttl::minutes(10));
/// assert_eq!("forever".parse::<Ttl>()?, Ttl::Forever);
/// assert!("2w".parse::<Ttl>().is_err()); // units are s, m, h and d
/// # Ok::<(), queen_sdk::Error>(())
/// ```
impl FromStr for Ttl {
    type Err = Error;

    fn from_str(s: &str) -> Result<Self> {
        let s = s.trim();
        if s == "forever" {
            return Ok(Ttl::Forever);
        }
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
