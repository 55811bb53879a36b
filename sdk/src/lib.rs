//! # queen-sdk
//!
//! A typed async client for [Queen], a partitioned message queue whose central call,
//! `POST /api/v1/transaction`, commits a worker's whole step (acks, pushes, KV state,
//! timers, positions) atomically. This SDK makes that step correct by construction:
//!
//! - every ack carries its message's lease (and the lease goes into `requiredLeases`), so
//!   a step whose lease expired rolls back instead of acking someone else's delivery;
//! - pushed items and timers get deterministic ids derived from the acked messages, so a
//!   retried or redelivered step rolls back as `duplicate` instead of writing twice;
//! - 5xx answers and lost connections are retried only when that is safe, and a retry
//!   that rolls back says the first attempt probably committed.
//!
//! ## The order worker
//!
//! A worker is a handler from a delivered message to its step; [`Client::worker`] runs
//! it: long-polls (an idle queue is no failure), renews leases, hands the handler each
//! message with its step (a transaction that already acks it, fenced by its lease),
//! commits what the handler returns and settles every outcome: only a step that was
//! done is settled as done (a `once` marker that exists, a duplicate), a step a gate
//! refused goes to [`Worker::on_refused`] (or is acked `failed`), a failed handler is
//! acked `failed` so the retry limit dead-letters it, an undecodable payload is
//! dead-lettered. It keeps each partition's order while running partitions
//! concurrently, and drains on shutdown. A new consumer group states where it starts
//! ([`StartAt`]): nothing already queued is skipped unless you say so.
//!
//! ```no_run
//! use std::time::Duration;
//! use queen_sdk::{Client, StartAt, Ttl};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Deserialize)]
//! #[serde(rename_all = "camelCase")] // producers write {"orderId": .., "customer": .., "total": ..}
//! struct OrderPaid { order_id: String, customer: String, total: f64 }
//! #[derive(Serialize)]
//! #[serde(rename_all = "camelCase")]
//! struct Receipt<'a> { order_id: &'a str, total: f64 }
//!
//! #[tokio::main]
//! async fn main() -> anyhow::Result<()> {
//!     let client = Client::new("http://127.0.0.1:6632")?;
//!     let summary = client
//!         .worker::<OrderPaid>("orders")
//!         .group("billing", StartAt::Beginning) // a first deploy processes the backlog
//!         .concurrency(8) // partitions at once; each in order
//!         .batch(10)
//!         .lease(Duration::from_secs(60))
//!         .run(
//!             |msg, step| async move {
//!                 let order = &msg.data;
//!                 // `step` already acks `msg`, fenced by its lease.
//!                 let step = step
//!                     .push("receipts", |p| {
//!                         p.partition(&order.customer)
//!                             .payload(&Receipt { order_id: &order.order_id, total: order.total })
//!                     }) // its transactionId is derived from the acked message
//!                     .kv(|k| k.put("orders", &order.order_id, &serde_json::json!({"status": "paid"}), Ttl::days(30)))
//!                     .once("paid", format!("{}-paid", order.order_id), Ttl::days(1))
//!                     .timer("reminders", &order.order_id, |t| t.after(Duration::from_secs(86_400)).payload(&order.order_id));
//!                 Ok::<_, std::convert::Infallible>(step)
//!             },
//!             async { tokio::signal::ctrl_c().await.ok(); }, // Ctrl-C drains
//!         )
//!         .await?; // a worker the broker refused (401, 403, the queue gone) fails `main`
//!     println!("{summary}");
//!     Ok(())
//! }
//! ```
//!
//! For a loop of your own, [`Client::consume`] gives the deliveries as a stream
//! ([`Delivery::step`] starts each one's step), and [`TransactionBuilder::commit`]
//! answers every outcome to settle: a `duplicate` rollback, or `Commit::Gated` whose
//! [`Gate::already_done`] (a `once` marker that exists), means the step was done before
//! (ack the message on its own, or it comes back at every lease expiry); any other gate
//! refused it (nothing was written: decide what becomes of the message);
//! `rejected_ack` means the lease is lost.
//!
//! ## The rest of a worker's loop
//!
//! - [`Client::worker`]: the worker runtime ([`Worker`], [`Summary`]), with
//!   [`Worker::retry_handler`] for a backoff before a `failed` ack, and [`WorkerSet`]
//!   to run workers on several queues under one [`CancellationToken`];
//! - [`Client::consume`]: a [`Stream`](futures_core::Stream) of [`Delivery`]s that
//!   long-polls for batches, never ends by itself but on a terminal refusal, decodes each
//!   payload on its own ([`Undecodable`]) and keeps each delivery's lease extended while
//!   it is alive ([`Delivery::lease_lost_signal`]);
//! - [`ClientBuilder::token_provider`]: bearer tokens refreshed without a new client;
//! - [`Client::lock`]: locks and semaphores whose [`Lock`] handle renews itself and whose
//!   [`Lock::guard`] gates a transaction on still holding it;
//! - [`Client::kv`] and [`Client::timers`]: standalone KV and timers, with the
//!   transaction's [`Kv`] and [`Timer`] builders;
//! - [`Client::configure`], [`Client::dlq`], [`Client::seek`], [`Client::delete_queue`],
//!   [`Client::delete_group`] and [`Client::health`]: administration.
//!
//! ## Features
//!
//! - `rustls` (off by default): HTTPS, with rustls on aws-lc-rs and the platform's
//!   certificate verifier. Without it the client speaks plain HTTP and refuses an
//!   `https://` base URL when it is built ([`ClientBuilder::build`] names the feature).
//!   It is off so that a worker talking `http://` to a broker beside it compiles no C
//!   library: `queen-sdk = { version = "0.1", features = ["rustls"] }` turns it on.
//!
//! [Queen]: https://queenmq.com

#![warn(missing_docs)]
#![cfg_attr(docsrs, feature(doc_cfg))]

mod admin;
mod auth;
mod client;
mod consume;
mod epoch;
mod error;
mod ids;
mod json;
mod kv;
pub mod locks;
mod message;
mod operator;
mod retry;
mod time;
mod timers;
mod transport;
mod txn;
mod validate;
mod worker;

pub use admin::{
    DeadLetter, DlqPage, DlqQuery, Health, QueueConfig, QueueOptions, QueueSettings, SeekTo,
};
pub use auth::{TokenError, TokenFuture, TokenProvider};
pub use client::{Client, ClientBuilder};
pub use consume::{Consume, Deliveries, Delivery, StartAt, Undecodable};
pub use epoch::{Epoch, MAX_EPOCH_BYTES};
pub use error::{Capability, Error, Result, RollbackReason};
pub use ids::derive_id;
pub use kv::{
    Check, Delete, Get, GetMany, Incr, Kv, KvBatch, KvOp, KvRow, KvStore, KvWrite, Put, PutIfAbsent,
};
pub use locks::{Lock, LockBuilder, LockGuard};
pub use message::{
    AckOutcome, AckStatus, DEFAULT_PARTITION, LeaseExtension, Message, Pop, PushItem, Pushed,
    QUEUE_MODE, SubscriptionMode,
};
pub use operator::{
    ConsumerMode, DeadLetterHandled, GroupDetail, GroupPartition, GroupState, GroupSummary,
    LaggingPartition, ListedMessage, MessageCounts, MessageDetail, MessageGroup, MessagePage,
    MessageQuery, MessageStatus, PartitionDepth, PartitionLoad, PartitionStats, QueueDepth,
    QueueDetail, QueueSummary,
};
pub use retry::RetryPolicy;
pub use timers::{CancelTimer, PendingTimer, Timer, TimerOp, TimerPage, TimerStart, Timers};
/// The shutdown signal several workers share ([`WorkerSet`]), and one worker's too:
/// [`Worker::run`] takes `token.clone().cancelled_owned()`. Re-exported from
/// `tokio-util` (0.7), so that it needs no dependency of yours.
pub use tokio_util::sync::CancellationToken;
pub use transport::{TransportError, TransportErrorKind};
pub use txn::{
    AckResult, Commit, Committed, Gate, GateKind, KvReason, KvResult, PositionResult, Push,
    PushResult, Resend, STEP_MARKER_NS, StepResult, TimerResult, TimerStatus, TransactionBuilder,
    Ttl,
};
pub use worker::{
    ErrorKind, Outcome, PastWindow, Stopped, Summary, Worker, WorkerError, WorkerErrorKind,
    WorkerSet, WorkerSetError,
};

/// The README's examples, compiled as doctests so that the code a reader copies builds.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
