//! Example workers. They land with the harness-and-examples issue; this crate is a
//! placeholder in the workspace so the layout of `DESIGN.md` holds.
