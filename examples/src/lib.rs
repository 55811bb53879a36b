//! # queen-examples
//!
//! Runnable workers built on [`queen_sdk`], one binary each in `src/bin/`:
//!
//! | binary | what it shows |
//! |---|---|
//! | `order-worker` | the seed's step (ack, receipt, KV state, a `once` marker, a reminder timer) committed once, and a redelivery of the same event rolling back as `duplicate` and acked on its own; with `QUEEN_URL`, a long-lived worker on the SDK's runtime (`Client::worker`) that Ctrl-C drains |
//! | `pipeline` | three stages (`ingest` -> `enrich` -> `publish`), each a `Client::worker`, handing work forward with ack + push; a lost answer in the middle stage is retried harmlessly and settled as already done |
//! | `locks` | two workers contend for a lock; a guarded transaction commits while the lock is held and is refused (`Commit::Gated`) once it is lost |
//! | `saga` | an order-fulfilment saga: three workers in one `WorkerSet` (orders start a saga with a KV row, a payment request and a timeout timer; payment results and the fired timeout race through `once_as`, and a payment that lost is refunded; a result that arrives before its saga is run again with a backoff), then a receipts worker's bug fixed and its group replayed in a new `Epoch` |
//! | `verify-worker` | the order worker under 500 seeded fault schedules with [`queen_verify::WorkerCheck`] (`0 violations`), then two broken workers caught, each with its minimal schedule; always on in-process brokers (`QUEEN_URL` is not read) |
//!
//! ```sh
//! cargo run -p queen-examples --bin order-worker
//! QUEEN_URL=http://127.0.0.1:6632 cargo run -p queen-examples --bin pipeline
//! ```
//!
//! Each one talks to the broker at `QUEEN_URL` when it is set (with `QUEEN_TOKEN` as the
//! bearer token, if set), and otherwise starts an embedded in-memory reference broker
//! ([`queen_mock_broker::MockBroker`]) on a free loopback port, so it runs with nothing
//! else installed. This module is what they share: [`Env`] is that choice, made once.
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> anyhow::Result<()> {
//! use queen_examples::{Env, EnvOptions};
//!
//! let env = Env::connect(EnvOptions::default().manual_clock()).await?;
//! println!("broker: {}", env.describe());
//! let orders = env.name("orders"); // "orders", or "orders-<run>" against QUEEN_URL
//! env.client().push(vec![queen_sdk::PushItem::new(&orders, &serde_json::json!({"id": 7}))]).await?;
//! if let Some(clock) = env.clock() {
//!     clock.advance(std::time::Duration::from_secs(60)); // embedded only: move broker time
//! }
//! env.shutdown().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod proof;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context as _;
use queen_mock_broker::{ManualClock, MockBroker};
use queen_sdk::{Client, RetryPolicy, SubscriptionMode};
use serde::de::DeserializeOwned;

/// The environment variable naming an external broker (`http://host:6632`).
pub const URL_VAR: &str = "QUEEN_URL";

/// The environment variable with the bearer token for [`URL_VAR`]'s broker (optional).
pub const TOKEN_VAR: &str = "QUEEN_TOKEN";

/// The route of the atomic step, where the examples inject faults.
pub const TRANSACTION_ROUTE: &str = "/api/v1/transaction";

/// How to start the embedded broker when [`URL_VAR`] is not set.
#[derive(Debug, Clone, Default)]
pub struct EnvOptions {
    manual_clock: bool,
    retry: Option<RetryPolicy>,
}

impl EnvOptions {
    /// Give the embedded broker a [`ManualClock`] (see [`Env::clock`]), so the example
    /// can move broker time (leases, lock TTLs, timers) instead of sleeping.
    pub fn manual_clock(mut self) -> Self {
        self.manual_clock = true;
        self
    }

    /// The client's retry policy (default: [`RetryPolicy::default`]).
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = Some(policy);
        self
    }
}

/// Where an example's broker is: an external one at `QUEEN_URL`, or an embedded
/// in-memory [`MockBroker`] this value owns. Holds a [`Client`] pointed at it.
pub struct Env {
    client: Client,
    url: String,
    embedded: Option<Embedded>,
    run: Option<String>,
}

struct Embedded {
    broker: MockBroker,
    clock: Option<ManualClock>,
}

impl Env {
    /// Connects to `QUEEN_URL` when it is set and not empty; otherwise starts an
    /// embedded in-memory broker as `options` say.
    pub async fn connect(options: EnvOptions) -> anyhow::Result<Env> {
        let url = std::env::var(URL_VAR).ok().filter(|u| !u.trim().is_empty());
        let token = std::env::var(TOKEN_VAR).ok().filter(|t| !t.is_empty());
        match url {
            Some(url) => Self::external(url.trim().trim_end_matches('/'), token, options),
            None => Self::embedded(options).await,
        }
    }

    /// Starts an embedded in-memory broker (whatever `QUEEN_URL` says).
    pub async fn embedded(options: EnvOptions) -> anyhow::Result<Env> {
        let clock = options.manual_clock.then(ManualClock::new);
        let mut builder = MockBroker::builder().in_memory();
        if let Some(c) = &clock {
            builder = builder.clock(c.clone());
        }
        let broker = builder
            .start()
            .await
            .context("starting the embedded broker")?;
        let url = broker.url();
        let client = client(&url, None, options.retry)?;
        Ok(Env {
            client,
            url,
            embedded: Some(Embedded { broker, clock }),
            run: None,
        })
    }

    /// Talks to the broker at `url`. Its names ([`Env::name`]) get a per-run suffix, so
    /// that running an example twice against the same broker starts clean.
    pub fn external(url: &str, token: Option<String>, options: EnvOptions) -> anyhow::Result<Env> {
        let client = client(url, token, options.retry)?;
        let millis = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or(Duration::ZERO)
            .as_millis();
        Ok(Env {
            client,
            url: url.to_string(),
            embedded: None,
            run: Some(format!("{millis:x}")),
        })
    }

    /// The client, pointed at the broker.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The broker's base URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether the broker is the embedded one.
    pub fn is_embedded(&self) -> bool {
        self.embedded.is_some()
    }

    /// The embedded broker, for its harness: `faults()`, `requests()`, `inspect()`.
    /// `None` against `QUEEN_URL`.
    pub fn broker(&self) -> Option<&MockBroker> {
        self.embedded.as_ref().map(|e| &e.broker)
    }

    /// The embedded broker's manual clock, when [`EnvOptions::manual_clock`] asked for
    /// one. `None` against `QUEEN_URL`: real brokers keep real time.
    pub fn clock(&self) -> Option<&ManualClock> {
        self.embedded.as_ref().and_then(|e| e.clock.as_ref())
    }

    /// The name to use for a queue, KV namespace or lock: `base` itself on the embedded
    /// broker, `base-<run>` against `QUEEN_URL` (so earlier runs' messages, markers and
    /// cursors do not meet this one).
    pub fn name(&self, base: &str) -> String {
        match &self.run {
            Some(run) => format!("{base}-{run}"),
            None => base.to_string(),
        }
    }

    /// One line saying which broker this is.
    pub fn describe(&self) -> String {
        match (&self.embedded, &self.run) {
            (Some(e), _) => format!(
                "embedded in-memory broker at {} ({}; set {URL_VAR} to use a running broker)",
                self.url,
                if e.clock.is_some() {
                    "manual clock"
                } else {
                    "system clock"
                }
            ),
            (None, Some(run)) => format!(
                "{URL_VAR}={} (names carry the suffix -{run}, so this run starts clean)",
                self.url
            ),
            (None, None) => format!("{URL_VAR}={}", self.url),
        }
    }

    /// Stops the embedded broker, if any (gracefully: in-flight calls finish).
    pub async fn shutdown(self) {
        if let Some(e) = self.embedded {
            e.broker.shutdown().await;
        }
    }
}

fn client(url: &str, token: Option<String>, retry: Option<RetryPolicy>) -> anyhow::Result<Client> {
    let mut b = Client::builder().url(url);
    if let Some(t) = token {
        b = b.token(t);
    }
    if let Some(r) = retry {
        b = b.retry(r);
    }
    b.build()
        .with_context(|| format!("building a client for {url}"))
}

/// Resolves at the first Ctrl-C (SIGINT) or, on Unix, SIGTERM: a long-lived worker's
/// shutdown signal ([`queen_sdk::Worker::run`] then drains and answers its summary).
pub async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

/// Reads every message stored in `queue` (one `partition` of it, if given) from its
/// beginning, as the consumer group `group` sees it: a fresh group with
/// [`SubscriptionMode::All`] sees everything. The examples count their outputs this way
/// with the SDK alone, so the count means the same against any broker.
pub async fn read_all<T: DeserializeOwned>(
    client: &Client,
    queue: &str,
    partition: Option<&str>,
    group: &str,
) -> queen_sdk::Result<Vec<T>> {
    let mut out = Vec::new();
    loop {
        let mut pop = client
            .pop::<T>(queue)
            .group(group)
            .subscription(SubscriptionMode::All)
            .batch(100);
        if let Some(p) = partition {
            pop = pop.partition(p);
        }
        let batch = pop.send().await?;
        if batch.is_empty() {
            return Ok(out);
        }
        // Acked, so the next pop moves on (and an audit leaves no lease behind).
        let acks: Vec<_> = batch
            .iter()
            .map(|m| (m, queen_sdk::AckStatus::Completed))
            .collect();
        client.ack_batch(&acks).await?;
        out.extend(batch.into_iter().map(|m| m.data));
    }
}
