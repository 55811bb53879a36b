//! # queen-verify
//!
//! Work in progress: worker verification under seeded fault schedules (issue 19).
