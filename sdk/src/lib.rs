//! Typed async client for Queen. The client lands with the SDK issue; this crate
//! is a placeholder in the workspace so the layout of `DESIGN.md` holds from the start.
