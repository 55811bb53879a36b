//! The whole router: an input is a request as text (`METHOD TARGET`, header lines, an
//! empty line, the body), with nothing pinned: any method, path, query, headers (its
//! own `Authorization` too) and body.
//! Through the real router of an in-process broker (`queen_mock_broker_fuzz::Broker`):
//! every answer must be a 2xx or a 4xx with `{"error", "code"}`, a 4xx must commit
//! nothing, and nothing may panic (libfuzzer-sys aborts on any panic, even one the
//! broker would catch and answer 500).

#![no_main]

use std::cell::RefCell;

use libfuzzer_sys::fuzz_target;
use queen_mock_broker_fuzz::{Broker, decode_request};

thread_local! {
    // One broker for the whole run (rebuilt every few thousand inputs, see
    // `REQUESTS_PER_BROKER`): starting one per input would cost more than the input.
    static BROKER: RefCell<Broker> = RefCell::new(Broker::new());
}

fuzz_target!(|input: &[u8]| {
    BROKER.with_borrow_mut(|b| {
        if let Err(finding) = b.send(&decode_request(input)) {
            panic!("{finding}");
        }
    });
});
