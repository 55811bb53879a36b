//! Arbitrary bytes as the body of `POST /api/v1/push`, through the broker's own parsing
//! and checks (`queen_mock_broker::http::parse_push`), without HTTP. The parser must
//! never panic, and every refusal must be a client error (4xx).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    match queen_mock_broker::http::parse_push(body) {
        Ok(items) => {
            // What the broker will store: every payload must be JSON a consumer can read.
            for item in items {
                let payload = item.payload.get();
                assert!(
                    serde_json::from_str::<serde_json::Value>(payload).is_ok(),
                    "{payload}"
                );
            }
        }
        Err(e) => {
            assert!(e.status.is_client_error(), "{}: {}", e.status, e.message);
            assert!(!e.code.is_empty() && !e.message.is_empty());
        }
    }
});
