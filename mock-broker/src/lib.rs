//! # queen-mock-broker
//!
//! A complete, durable, single-node reference broker for Queen, on [redb]. Use it as a
//! standalone server (the `queen-mock-broker` binary) or start it inside your tests:
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> anyhow::Result<()> {
//! use queen_mock_broker::MockBroker;
//!
//! let broker = MockBroker::start_in_memory().await?;
//! let client = reqwest::Client::new();
//! let pushed = client
//!     .post(format!("{}/api/v1/push", broker.url()))
//!     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": {"id": 1}}]}))
//!     .send()
//!     .await?;
//! assert_eq!(pushed.status(), 201);
//! broker.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! ## Layers
//!
//! The data path reads in one direction: [`http`] parses and validates a request into a
//! command, [`engine`] applies it to a [`store`] view through the group-commit
//! [`engine::writer`], and the answer goes back. No caller hears success before its write is
//! durable; many callers share one commit.
//!
//! ## In your tests: the plain line is the light one
//!
//! ```toml
//! [dev-dependencies]
//! queen-mock-broker = "0.1"
//! ```
//!
//! The default features are empty, and a test that links the library compiles no
//! command-line parser, no regex engine and no C allocator for the binary's sake (its
//! flags are parsed by hand; its log output is `tracing-subscriber`'s `fmt` layer, a
//! few small crates). The binary's one feature:
//!
//! - `mimalloc` (off by default): mimalloc as the `queen-mock-broker` binary's global
//!   allocator. The library never sets an allocator; a test binary that wants mimalloc
//!   declares it itself. Under load, glibc's malloc took a quarter of the broker's CPU,
//!   so a broker you benchmark is built with `--features mimalloc`.
//!
//! [redb]: https://docs.rs/redb

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

pub mod auth;
pub mod broker;
pub mod clock;
pub mod engine;
pub mod error;
pub mod harness;
pub mod http;
mod portable;
pub mod store;

pub use broker::{MockBroker, MockBrokerBuilder, StartError, Storage};
pub use clock::{Clock, ManualClock, SystemClock};
pub use engine::Engine;
pub use engine::writer::{StatsSnapshot, WRITER_THREAD, WriteMode};
pub use error::EngineError;

/// The partition a push that names none goes to: `"Default"`. The harness's
/// [`Inspector::messages`](harness::Inspector::messages) and
/// [`Inspector::cursor`](harness::Inspector::cursor) also read it for `""`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// use queen_mock_broker::{DEFAULT_PARTITION, MockBroker};
/// let broker = MockBroker::start_in_memory().await?;
/// reqwest::Client::new()
///     .post(format!("{}/api/v1/push", broker.url()))
///     .json(&serde_json::json!({"items": [{"queue": "orders", "payload": 1}]})) // no partition
///     .send()
///     .await?;
/// assert_eq!(DEFAULT_PARTITION, "Default");
/// assert_eq!(broker.inspect().messages("orders", DEFAULT_PARTITION)?.len(), 1);
/// broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub const DEFAULT_PARTITION: &str = engine::queues::DEFAULT_PARTITION;

/// The README's examples, compiled as doctests so that the code a reader copies builds.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
