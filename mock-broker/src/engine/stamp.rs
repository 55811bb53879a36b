//! The creation times of stored messages and the start of a group subscribed `new`.
//!
//! A group subscribed with `new` reads what is created after its first pop. On a clock
//! that does not move (the harness's `ManualClock`, frozen by default in tests) the
//! backlog, the first pop and a later push all share one instant: taken as they are, the
//! backlog would read as new, which no real broker does. So such a subscription starts
//! one microsecond after its time, and a message stored later is stamped no earlier
//! than that start. On a moving clock neither changes anything that a microsecond does
//! not: a message's time is its command's time.

use crate::clock::Micros;
use crate::store::Tx;

/// The latest start of a `new` subscription: writer state, not data (a command that
/// rolls back leaves it as it is, which keeps later messages after it all the same).
#[derive(Default)]
struct Floor(Micros);

/// Where a group subscribed `new` by `tx` starts: after every message stored so far.
pub fn new_subscription(tx: &Tx) -> Micros {
    let start = tx.now.saturating_add(1);
    tx.with_memory::<Floor, _>(|floor| floor.0 = floor.0.max(start));
    start
}

/// The creation time of a message `tx` stores: its time, or the start of a `new`
/// subscription made at the same instant, whichever is later.
pub fn message(tx: &Tx) -> Micros {
    let now = tx.now;
    tx.with_memory::<Floor, _>(|floor| now.max(floor.0))
}
