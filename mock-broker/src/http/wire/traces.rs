//! The JSON shapes of traces's routes (see `http/traces.rs`).
