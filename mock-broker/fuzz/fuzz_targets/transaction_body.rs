//! Arbitrary bytes as the body of `POST /api/v1/transaction`, through the broker's own
//! parsing and checks (`queen_mock_broker::http::parse_transaction`), without HTTP.
//! The parser must never panic, and every refusal must be a client error (4xx).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    if let Err(e) = queen_mock_broker::http::parse_transaction(body) {
        assert!(e.status.is_client_error(), "{}: {}", e.status, e.message);
        assert!(!e.code.is_empty() && !e.message.is_empty());
    }
});
