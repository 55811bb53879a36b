//! The JSON shapes of ephemeral's routes (see `http/ephemeral.rs`).
