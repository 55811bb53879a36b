//! # queen-conformance
//!
//! The Queen transaction specification as runnable cases against any broker URL. Every
//! rule of `transaction.md` (and the parts of `wire.md` it stands on) is a named case
//! with a stable id, its level (MUST/SHOULD) and the sentence it checks; the retry and
//! rollback rules are also checked as properties against a small reference model.
//!
//! The suite speaks raw JSON over HTTP and uses neither the SDK's nor the broker's
//! types, so it judges both. Each case names its queues, groups and namespaces uniquely
//! per run, so it can run against a shared broker, and twice.
//!
//! ```no_run
//! # async fn demo() {
//! use queen_conformance::{RunConfig, all_cases, run};
//! let report = run(&RunConfig::new("http://127.0.0.1:6632"), all_cases()).await;
//! println!("{}", report.to_text());
//! assert!(report.ok());
//! # }
//! ```

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod baseline;
pub mod case;
pub mod cases;
pub mod ctx;
pub mod diff;
pub mod model;
pub mod preflight;
pub mod probe;
pub mod profile;
pub mod report;
pub mod runner;

pub use baseline::{Baseline, Comparison, OnChangedReason};
pub use case::{Capability, Case, Failure, FailureKind, Level, Section, spec_section};
pub use cases::all_cases;
pub use ctx::Ctx;
pub use diff::Diff;
pub use preflight::{CouldNotRun, Preflight, preflight};
pub use probe::{NotReady, Probe, probe, wait_ready};
pub use profile::{PROFILES, Profile};
pub use report::{CaseResult, Format, Report, Status, Stopped};
pub use runner::{RunConfig, run};

/// Settings a case may read (the properties' size and seed, the broker's latency).
#[derive(Debug, Clone, Copy, Default)]
pub struct Settings {
    /// Generated cases per property.
    pub prop_cases: u32,
    /// The properties' seed.
    pub seed: Option<u64>,
    /// How long one request took at the start of the run (the preflight's median;
    /// zero when no preflight ran): cases with a time window size it by this.
    pub latency: std::time::Duration,
}
