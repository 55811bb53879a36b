//! A route's body: `METHOD PATTERN` on the first line picks one of the routes that
//! read a body (any other line picks one by its hash), the rest is the body, sent with
//! the route's seeded path and query.
//! Through the real router of an in-process broker (`queen_mock_broker_fuzz::Broker`):
//! every answer must be a 2xx or a 4xx with `{"error", "code"}`, a 4xx must commit
//! nothing, and nothing may panic (libfuzzer-sys aborts on any panic, even one the
//! broker would catch and answer 500).

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use queen_mock_broker_fuzz::{Broker, decode_body};

thread_local! {
    // One broker for the whole run (rebuilt every few thousand inputs, see
    // `REQUESTS_PER_BROKER`): starting one per input would cost more than the input.
    static BROKER: RefCell<Broker> = RefCell::new(Broker::new());
}

fuzz_target!(|input: &[u8]| {
    BROKER.with_borrow_mut(|b| {
        if let Err(finding) = b.send(&decode_body(input)) {
            panic!("{finding}");
        }
    });
});
