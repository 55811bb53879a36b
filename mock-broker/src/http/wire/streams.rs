//! The JSON shapes of streams's routes (see `http/streams.rs`).
