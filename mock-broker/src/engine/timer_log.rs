//! The timer log: each tenant's recently fired and cancelled timers, for the console's
//! timers view (`GET /api/v1/timer-log`), which otherwise shows only pending ones (a
//! fired or cancelled timer is deleted from storage).
//!
//! Like the transaction log ([`super::txn_log`]) it lives in the engine's memory and is
//! **not durable**: a restart starts it empty. It is bounded: the last [`KEPT`] timers
//! per tenant, each name cut to [`super::txn_log::TEXT_BYTES`]. An entry is about 150
//! bytes with short names, at most about 1.1 KB (four names of 256 bytes), so at most
//! about 280 KB per tenant that ever fired or cancelled a timer. An entry is recorded
//! after the write that fired or cancelled it was committed, never before.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use super::timers::TimerRecord;
use crate::clock::Micros;

/// Timers kept per tenant; the oldest goes when a new one comes.
pub const KEPT: usize = 256;

/// How a timer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimerEnd {
    /// It fired: its message was pushed.
    Fired,
    /// It was cancelled before it fired.
    Cancelled,
}

impl TimerEnd {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Fired => "fired",
            Self::Cancelled => "cancelled",
        }
    }
}

/// One ended timer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ended {
    /// The tenant's sequence number of the entry, from 1.
    pub seq: u64,
    /// When it fired or was cancelled (the broker's clock).
    pub at: Micros,
    /// How it ended.
    pub end: TimerEnd,
    /// Its queue.
    pub queue: String,
    /// Its key.
    pub timer_key: String,
    /// The `transactionId` of its message.
    pub txn: String,
    /// The id of its message (pushed when it fired).
    pub message_id: String,
    /// The partition its message goes to.
    pub partition: String,
    /// When it was due.
    pub deliver_at: Micros,
}

impl Ended {
    /// An entry for the timer `rec` of `queue`/`key` that ended `end` at `at`.
    pub fn new(end: TimerEnd, at: Micros, queue: &str, key: &str, rec: &TimerRecord) -> Self {
        let text = |s: &str| super::txn_log::cut_text(s);
        Ended {
            seq: 0,
            at,
            end,
            queue: text(queue),
            timer_key: text(key),
            txn: text(&rec.txn),
            message_id: text(&rec.message_id),
            partition: text(&rec.partition),
            deliver_at: rec.deliver_at,
        }
    }
}

#[derive(Debug, Default)]
struct Ring {
    last_seq: u64,
    entries: VecDeque<Ended>,
}

/// Every tenant's ring of ended timers.
#[derive(Debug, Default)]
pub struct TimerLog {
    tenants: Mutex<HashMap<String, Ring>>,
}

impl TimerLog {
    /// Records `ended` for `tenant`, in order, numbering each.
    pub fn record(&self, tenant: &str, ended: impl IntoIterator<Item = Ended>) {
        let mut ended = ended.into_iter().peekable();
        if ended.peek().is_none() {
            return;
        }
        let mut tenants = self
            .tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let ring = tenants.entry(tenant.to_string()).or_default();
        for mut e in ended {
            ring.last_seq += 1;
            e.seq = ring.last_seq;
            if ring.entries.len() == KEPT {
                ring.entries.pop_front();
            }
            ring.entries.push_back(e);
        }
    }

    /// `tenant`'s most recent ended timers (of `queue` only, when given), newest first,
    /// at most `limit`.
    pub fn recent(&self, tenant: &str, queue: Option<&str>, limit: usize) -> Vec<Ended> {
        let tenants = self
            .tenants
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        tenants.get(tenant).map_or_else(Vec::new, |ring| {
            ring.entries
                .iter()
                .rev()
                .filter(|e| queue.is_none_or(|q| e.queue == q))
                .take(limit)
                .cloned()
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(txn: &str) -> TimerRecord {
        TimerRecord {
            txn: txn.into(),
            message_id: format!("m-{txn}"),
            deliver_at: 5,
            partition: "Default".into(),
            payload: String::new(),
            zstd: false,
            encrypted: false,
            attempts: 0,
            scheduled_at: 0,
        }
    }

    #[test]
    fn the_log_keeps_the_last_timers_of_each_tenant_newest_first() {
        let log = TimerLog::default();
        log.record(
            "a",
            (0..KEPT + 10).map(|i| {
                let q = if i % 2 == 0 { "even" } else { "odd" };
                Ended::new(TimerEnd::Fired, i as i64, q, &i.to_string(), &rec("t"))
            }),
        );
        log.record(
            "b",
            [Ended::new(TimerEnd::Cancelled, 1, "q", "k", &rec("t"))],
        );
        let a = log.recent("a", None, usize::MAX);
        assert_eq!(a.len(), KEPT);
        assert_eq!(a[0].timer_key, (KEPT + 9).to_string());
        assert_eq!(a[0].seq, (KEPT + 10) as u64);
        assert_eq!(a.last().unwrap().timer_key, "10");
        let odd = log.recent("a", Some("odd"), 3);
        assert_eq!(
            odd.iter().map(|e| e.queue.as_str()).collect::<Vec<_>>(),
            ["odd"; 3]
        );
        let b = log.recent("b", None, 10);
        assert_eq!((b.len(), b[0].end, b[0].seq), (1, TimerEnd::Cancelled, 1));
        assert!(log.recent("c", None, 10).is_empty());
        let long = "k".repeat(1000);
        log.record("b", [Ended::new(TimerEnd::Fired, 2, "q", &long, &rec("t"))]);
        assert!(log.recent("b", None, 1)[0].timer_key.len() <= super::super::txn_log::TEXT_BYTES);
    }
}
