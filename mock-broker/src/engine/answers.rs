//! The broker-wide byte budget of read answers: what answers being built and sent may
//! hold in memory at once, whatever their number.
//!
//! A read that materialises a large answer (a fetch reads up to 64 MiB of records and
//! renders them as JSON) charges its records to the budget while it reads them and
//! keeps the charge until its body has been handed to the connection. The probe of
//! issue 52 sent 48 read-only 64 MiB fetches at once and took the broker from 1.06 to
//! 6.3 GiB of resident memory: each held its records and their JSON text at the same
//! time. Under the budget a read that finds it spent answers with what it already has
//! (a fetch answers fewer records, which the protocol allows: the client reads on from
//! the next offset); a read that has nothing yet waits for room, at most
//! [`AnswerBudget::WAIT`], then is answered 429 `overloaded` with `Retry-After`, which
//! the official clients retry by themselves.
//!
//! # Whole answers
//!
//! An answer that cannot be cut short (a listing of queues or groups, a message's
//! detail, the status reads, a KV namespace's page, a stream state read, the trace
//! reads, a dead-letter page) charges what it keeps as it reads
//! ([`Held::charge_whole`]). When the budget has no room now, the read gives up what it
//! read, waits for the room it found it needs ([`AnswerBudget::acquire`], at most
//! [`AnswerBudget::WAIT`]) and reads again holding it; a read that still finds too
//! little (what it reads grew meanwhile) is tried three times in all, then refused with
//! [`EngineError::AnswersBusy`]. Such an answer holds its room until it is sent
//! ([`Charged`]). One larger than the whole budget is built alone, holding all of it.
//!
//! The budget counts in units of 1 KiB (a semaphore's permits), taken in steps of
//! [`STEP`] so that a run of small records takes the semaphore rarely.
//!
//! Request bodies have a budget of the same kind, a second one ([`AnswerBudget::for_bodies`],
//! the binary's `--body-budget`): each body is charged [`body_cost`] from before its
//! first byte is read until its handler is done. A second budget rather than a share of
//! this one, because a fetch holds its body's room while it waits for room for its
//! answer: with one budget, fetches with large bodies could hold all of it and each
//! wait for the others (every one refused after [`AnswerBudget::WAIT`]); with two,
//! taken always in the same order (the body's, then the answer's), none waits on
//! itself. And the two loads differ: a broker fed large pushes needs room for bodies,
//! one read by large fetches room for answers.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use crate::error::EngineError;

/// Bytes per permit of the semaphore.
const UNIT: u64 = 1024;

/// The least a charge takes from the semaphore at once (unless the budget is smaller).
pub const STEP: u64 = 256 * 1024;

/// The budget of a broker not told otherwise: four answers of the largest fetch
/// (64 MiB of records, charged twice: read and rendered) at once.
pub const DEFAULT_BYTES: u64 = 512 << 20;

/// What holding one stored record in an answer costs: the record as read and its JSON
/// text both exist while the answer is rendered, and each row of the answer carries
/// its offset, time and keys besides (measured: 80 to 120 bytes of JSON a record).
pub fn record_cost(stored_bytes: usize) -> u64 {
    2 * stored_bytes as u64 + 256
}

/// The body budget of a broker not told otherwise: four of the largest bodies
/// (64 MiB, charged twice: [`body_cost`]) read at once.
pub const DEFAULT_BODY_BYTES: u64 = 512 << 20;

/// What holding a request body of `len` bytes costs until its handler is done: its
/// bytes as read (collected in one buffer, a copy of the slices hyper read) and what
/// the handler parses out of them (a push keeps every payload's text), which exist
/// together while the body is parsed.
pub fn body_cost(len: u64) -> u64 {
    len.saturating_mul(2)
}

/// The broker-wide byte budget of answers being built and sent (or, made with
/// [`AnswerBudget::for_bodies`], of request bodies being read and handled). Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct AnswerBudget {
    sem: Arc<Semaphore>,
    units: u64,
    /// What holds it, for the refusal's text: "answers being sent" or "request bodies
    /// being read".
    holders: &'static str,
    /// The binary's option that sizes it, for the refusal's text.
    option: &'static str,
}

impl AnswerBudget {
    /// How long a read with nothing to answer yet waits for room before it is refused.
    pub const WAIT: Duration = Duration::from_secs(10);

    /// A budget of answers of `bytes` (at least [`STEP`]).
    pub fn new(bytes: u64) -> Self {
        Self::holding(bytes, "answers being sent", "--answer-budget")
    }

    /// A budget of request bodies of `bytes` (at least [`STEP`]), charged
    /// [`body_cost`] per body.
    pub fn for_bodies(bytes: u64) -> Self {
        Self::holding(bytes, "request bodies being read", "--body-budget")
    }

    fn holding(bytes: u64, holders: &'static str, option: &'static str) -> Self {
        let units = bytes
            .max(STEP)
            .div_ceil(UNIT)
            .min(Semaphore::MAX_PERMITS as u64)
            // So that `bytes()` fits in a u64 (an unbounded budget is `u64::MAX`).
            .min(u64::MAX / UNIT);
        AnswerBudget {
            sem: Arc::new(Semaphore::new(units as usize)),
            units,
            holders,
            option,
        }
    }

    /// The budget's size in bytes.
    pub fn bytes(&self) -> u64 {
        self.units * UNIT
    }

    /// Bytes not held by any answer now.
    pub fn available(&self) -> u64 {
        self.sem.available_permits() as u64 * UNIT
    }

    /// An empty charge, to be grown with [`Held::try_charge`].
    pub fn empty(&self) -> Held {
        Held {
            budget: self.clone(),
            permit: None,
            bytes: 0,
        }
    }

    /// Waits for `bytes` of room (all of the budget when it asks more, so that one
    /// answer larger than the budget is served alone), at most [`Self::WAIT`]; then
    /// [`EngineError::AnswersBusy`].
    pub async fn acquire(&self, bytes: u64) -> Result<Held, EngineError> {
        let units = bytes.div_ceil(UNIT).clamp(1, self.units);
        let wanted = u32::try_from(units).unwrap_or(u32::MAX);
        let permit = tokio::time::timeout(Self::WAIT, self.sem.clone().acquire_many_owned(wanted))
            .await
            .map_err(|_| self.busy())?
            .map_err(|_| self.busy())?;
        Ok(Held {
            budget: self.clone(),
            permit: Some(permit),
            bytes: 0,
        })
    }

    pub(crate) fn busy(&self) -> EngineError {
        EngineError::AnswersBusy(format!(
            "{} hold the broker's budget for them ({} MiB, {}) and none made room within \
             {} s; retry shortly",
            self.holders,
            self.bytes() >> 20,
            self.option,
            Self::WAIT.as_secs()
        ))
    }
}

impl Default for AnswerBudget {
    fn default() -> Self {
        AnswerBudget::new(DEFAULT_BYTES)
    }
}

/// A read's answer and the room it holds in the [`AnswerBudget`]: keep `held` until
/// the answer has been sent.
#[derive(Debug)]
pub struct Charged<T> {
    /// What was read.
    pub value: T,
    /// The room it holds.
    pub held: Held,
}

/// A whole answer did not fit in the room the budget had: it needs at least this many
/// bytes ([`Held::charge_whole`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Starved(pub u64);

/// Room one answer holds in the [`AnswerBudget`]; given back when dropped.
#[derive(Debug)]
pub struct Held {
    budget: AnswerBudget,
    permit: Option<OwnedSemaphorePermit>,
    /// Bytes charged so far (at most the permits held, unless they are all of the
    /// budget: [`Held::charge`]).
    bytes: u64,
}

impl Held {
    fn held(&self) -> u64 {
        self.permit.as_ref().map_or(0, |p| p.num_permits() as u64) * UNIT
    }

    /// Whether this answer holds the whole budget.
    pub fn holds_all(&self) -> bool {
        self.held() >= self.budget.bytes()
    }

    /// Bytes charged to this answer.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Charges `n` more bytes, waiting for room as [`AnswerBudget::acquire`] does when
    /// the budget has none now (for the missing bytes, at most the rest of the budget:
    /// a charge that holds all of it goes on alone, whatever it grows to).
    pub async fn charge(&mut self, n: u64) -> Result<(), EngineError> {
        if self.try_charge(n) {
            return Ok(());
        }
        if !self.holds_all() {
            let missing = (self.bytes + n).saturating_sub(self.held());
            let rest = self.budget.bytes().saturating_sub(self.held());
            let more = self.budget.acquire(missing.min(rest)).await?;
            if let Some(more) = more.permit {
                match &mut self.permit {
                    Some(p) => p.merge(more),
                    None => self.permit = Some(more),
                }
            }
        }
        // The room now held covers the charge, or is all of the budget.
        self.bytes += n;
        Ok(())
    }

    /// Charges `n` more bytes if the budget has room for them now, without waiting;
    /// `false` (and nothing charged) when it has not.
    pub fn try_charge(&mut self, n: u64) -> bool {
        let need = self.bytes + n;
        let held = self.held();
        if need <= held {
            self.bytes = need;
            return true;
        }
        let missing = (need - held).div_ceil(UNIT);
        let step = (STEP / UNIT).min(self.budget.units);
        for units in [missing.max(step), missing] {
            let Ok(units) = u32::try_from(units) else {
                continue;
            };
            if let Ok(more) = self.budget.sem.clone().try_acquire_many_owned(units) {
                match &mut self.permit {
                    Some(p) => p.merge(more),
                    None => self.permit = Some(more),
                }
                self.bytes = need;
                return true;
            }
        }
        false
    }

    /// Charges `n` more bytes of an answer that is sent whole or not at all (a listing,
    /// a message's detail, a state read), without waiting: when the budget has no room
    /// now, nothing is charged and [`Starved`] says how much room the answer needs so
    /// far, to wait for before reading again ([`crate::Engine`]'s whole reads do). A
    /// charge that holds all of the budget grows past it: one answer larger than the
    /// budget is built alone.
    pub fn charge_whole(&mut self, n: u64) -> Result<(), Starved> {
        if self.try_charge(n) {
            return Ok(());
        }
        if self.holds_all() {
            self.bytes += n;
            return Ok(());
        }
        Err(Starved(self.bytes + n))
    }

    /// Sets the charge to `bytes`, the answer's size once it is rendered: room held
    /// beyond it goes back to the budget at once; more is taken if the budget has it
    /// (an answer whose JSON outgrew its estimate is sent whatever the budget holds,
    /// as it is already in memory).
    pub fn settle(&mut self, bytes: u64) {
        let units = bytes.div_ceil(UNIT);
        if let Some(p) = &mut self.permit {
            let held = p.num_permits() as u64;
            if held > units {
                drop(p.split((held - units) as usize));
            }
        }
        if bytes > self.held() {
            let extra = bytes - self.bytes.min(bytes);
            self.try_charge(extra);
        }
        self.bytes = bytes.min(self.held());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_take_room_and_dropping_gives_it_back() {
        let budget = AnswerBudget::new(1 << 20);
        let mut a = budget.empty();
        assert!(a.try_charge(700 << 10));
        let mut b = budget.empty();
        // 700 KiB held by `a`: 400 KiB more does not fit, 300 KiB does.
        assert!(!b.try_charge(400 << 10));
        assert!(b.try_charge(300 << 10));
        assert_eq!(budget.available(), 24 << 10);
        drop(a);
        assert!(b.try_charge(400 << 10));
        drop(b);
        assert_eq!(budget.available(), 1 << 20);
    }

    #[test]
    fn settling_gives_back_what_the_rendered_answer_does_not_need() {
        let budget = AnswerBudget::new(4 << 20);
        let mut a = budget.empty();
        assert!(a.try_charge(3 << 20));
        a.settle(1 << 20);
        assert_eq!(a.bytes(), 1 << 20);
        assert_eq!(budget.available(), 3 << 20);
        // An answer larger than its estimate takes more when there is room.
        a.settle(2 << 20);
        assert_eq!(budget.available(), 2 << 20);
    }

    #[tokio::test(start_paused = true)]
    async fn a_charge_grown_past_the_budget_goes_on_alone_and_others_wait() {
        let budget = AnswerBudget::for_bodies(1 << 20);
        let mut body = budget.empty();
        // In steps, as a chunked body's chunks arrive: never waiting on itself.
        for _ in 0..3 {
            body.charge(512 << 10).await.expect("room, or all of it");
        }
        assert!(body.holds_all());
        assert_eq!((body.bytes(), budget.available()), (3 << 19, 0));
        let mut other = budget.empty();
        let refused = other
            .charge(1)
            .await
            .expect_err("no room while `body` holds it");
        assert!(
            format!("{refused}").contains("request bodies being read"),
            "{refused}"
        );
        drop(body);
        other.charge(1).await.expect("room once `body` is done");
    }

    #[tokio::test(start_paused = true)]
    async fn a_read_that_finds_no_room_waits_then_is_refused() {
        let budget = AnswerBudget::new(1 << 20);
        let all = budget
            .acquire(u64::MAX)
            .await
            .expect("an idle budget has room");
        let refused = budget
            .acquire(1)
            .await
            .expect_err("no room until `all` is gone");
        assert!(
            matches!(refused, EngineError::AnswersBusy(_)),
            "{refused:?}"
        );
        let waiting = tokio::spawn({
            let budget = budget.clone();
            async move { budget.acquire(512 << 10).await.map(|h| h.held()) }
        });
        tokio::task::yield_now().await;
        drop(all);
        assert_eq!(waiting.await.unwrap().unwrap(), 512 << 10);
    }

    #[test]
    fn a_whole_answer_says_what_it_needs_and_charges_nothing_when_starved() {
        let budget = AnswerBudget::new(1 << 20);
        let other = budget.empty();
        let mut other = other;
        assert!(other.try_charge(768 << 10));
        let mut whole = budget.empty();
        whole
            .charge_whole(100 << 10)
            .expect("room for the first part");
        let Starved(needs) = whole
            .charge_whole(200 << 10)
            .expect_err("the budget has 256 KiB left, less the first part");
        assert_eq!(
            needs,
            300 << 10,
            "what the answer holds so far, with the part"
        );
        assert_eq!(whole.bytes(), 100 << 10, "a starved charge takes nothing");
        drop(other);
        // Holding all of the budget, an answer grows past it alone.
        let mut all = budget.empty();
        drop(whole);
        assert!(all.try_charge(1 << 20));
        all.charge_whole(5 << 20)
            .expect("the whole budget goes on alone");
        assert_eq!(all.bytes(), 6 << 20);
    }

    #[test]
    fn an_unbounded_budget_counts_its_bytes_without_overflow() {
        let budget = AnswerBudget::new(u64::MAX);
        assert!(budget.bytes() > 1 << 60);
        let mut all = budget.empty();
        assert!(all.try_charge(1 << 40));
        assert!(!all.holds_all());
    }
}
