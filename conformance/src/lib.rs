//! Conformance cases for Queen brokers. The suite lands with the conformance issue;
//! this crate is a placeholder in the workspace so the layout of `DESIGN.md` holds.
