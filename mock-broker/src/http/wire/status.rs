//! The JSON shapes of status's routes (see `http/status.rs`).
