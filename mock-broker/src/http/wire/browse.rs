//! The JSON shapes of browse's routes (see `http/browse.rs`).
