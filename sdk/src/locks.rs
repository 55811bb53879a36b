//! Locks and semaphores (`POST /api/v1/locks`), built on KV rows
//! `queen-locks/{name}#{slot}`, with a handle that keeps itself renewed.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> anyhow::Result<()> {
//! # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
//! # let client = queen_sdk::Client::new(broker.url())?;
//! use std::time::Duration;
//! use queen_sdk::{Commit, Ttl};
//!
//! let Some(lock) = client.lock("nightly-report").ttl(Duration::from_secs(30)).acquire().await? else {
//!     return Ok(()); // another worker runs it
//! };
//! // ... long work; the lock renews itself in the background ...
//! let outcome = client
//!     .transaction()
//!     .guard(&lock.guard()) // commits only while the lock is still held
//!     .kv(|k| k.put("reports", "nightly", &"done", Ttl::days(1)))
//!     .commit()
//!     .await?;
//! if let Commit::Gated { .. } = outcome {
//!     println!("lost the lock before committing: nothing was written");
//! }
//! lock.release().await?;
//! # broker.shutdown().await;
//! # Ok(())
//! # }
//! ```

use std::future::Future;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;

use crate::client::{Client, Replay};
use crate::error::{Error, Result};
use crate::json::{Operations, render};

/// A held lock's identity, whose guard gates a transaction on still holding it. Get it
/// from [`crate::Lock::guard`] and give it to [`crate::TransactionBuilder::guard`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// let lock = client.lock("nightly-report").acquire().await?.expect("free");
/// let guard: queen_sdk::LockGuard = lock.guard();
/// assert_eq!((guard.name.as_str(), guard.slot), ("nightly-report", 0));
/// assert!(guard.token > 0);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockGuard {
    /// The lock's name.
    pub name: String,
    /// The held slot.
    pub slot: u64,
    /// The holder's token (the lock row's KV version).
    pub token: u64,
}

/// The KV namespace of lock rows: slot `s` of the lock `name` is the row
/// `queen-locks/{name}#{s}`, and its version is the holder's token.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::locks::NAMESPACE;
/// let lock = client.lock("exports").acquire().await?.expect("free");
/// let row = client.kv().get::<serde_json::Value>(NAMESPACE, "exports#0").await?.expect("held");
/// assert_eq!(row.version, lock.guard().token);
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub const NAMESPACE: &str = "queen-locks";

/// Most slots of a semaphore.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::locks::MAX_LIMIT;
/// let too_many = client.lock("exports").limit(MAX_LIMIT + 1).acquire().await;
/// assert!(matches!(too_many, Err(queen_sdk::Error::Invalid { .. })));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub const MAX_LIMIT: u32 = 1024;

/// Longest lock name, in bytes.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::locks::MAX_NAME_BYTES;
/// let long = "x".repeat(MAX_NAME_BYTES + 1);
/// assert!(client.lock(long).acquire().await.is_err()); // refused before sending
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
pub const MAX_NAME_BYTES: usize = 400;

/// Configures an acquisition. Start it with [`Client::lock`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use std::time::Duration;
/// // A semaphore: at most 4 holders of "exports" at a time.
/// if let Some(slot) = client
///     .lock("exports")
///     .limit(4)
///     .ttl(Duration::from_secs(60))
///     .owner("worker-a")
///     .acquire()
///     .await?
/// {
///     println!("holding slot {}", slot.slot());
/// }
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a lock is not taken until acquire() is awaited"]
pub struct LockBuilder {
    client: Client,
    name: String,
    ttl: Duration,
    owner: Option<String>,
    limit: u32,
}

impl Client {
    /// Starts acquiring the lock `name` (a semaphore with [`LockBuilder::limit`]): 30 s
    /// TTL, a new owner, one slot. See [`LockBuilder`].
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let first = client.lock("nightly-report").acquire().await?;
    /// assert!(first.is_some());
    /// let second = client.lock("nightly-report").acquire().await?;
    /// assert!(second.is_none()); // held by the first
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lock(&self, name: impl Into<String>) -> LockBuilder {
        LockBuilder {
            client: self.clone(),
            name: name.into(),
            ttl: Duration::from_secs(30),
            owner: None,
            limit: 1,
        }
    }
}

fn ttl_secs(d: Duration) -> u64 {
    (d.as_secs() + u64::from(d.subsec_nanos() > 0)).max(1)
}

impl LockBuilder {
    /// How long the lock lives without a renewal (whole seconds, rounded up; default
    /// 30 s). The handle renews it about every third of this.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// let lock = client.lock("nightly-report").ttl(Duration::from_millis(9500)).acquire().await?.expect("free");
    /// let row = broker.inspect().kv_row(queen_sdk::locks::NAMESPACE, "nightly-report#0")?.expect("held");
    /// assert_eq!(row.expires_at.unwrap() - row.updated_at, 10_000_000); // 10 s, in µs
    /// # drop(lock);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }

    /// Who holds it, kept on the lock row (default: a new UUIDv7). Acquiring again with
    /// the same owner answers the current hold (see [`Lock::was_already_held`]), which
    /// also makes a retried acquisition safe; two handles with one owner are one holder.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let a = client.lock("nightly-report").owner("worker-a").acquire().await?.expect("free");
    /// let again = client.lock("nightly-report").owner("worker-a").acquire().await?.expect("ours");
    /// assert!(again.was_already_held());
    /// assert_eq!(again.guard(), a.guard());
    /// assert_eq!(again.owner(), "worker-a");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn owner(mut self, owner: impl Into<String>) -> Self {
        self.owner = Some(owner.into());
        self
    }

    /// Slots: up to `n` holders at a time (1 to 1,024; default 1, a plain lock).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let sem = |worker: &'static str| client.lock("exports").limit(2).owner(worker).acquire();
    /// let a = sem("a").await?.expect("a free slot");
    /// let b = sem("b").await?.expect("a free slot");
    /// assert_eq!((a.slot(), b.slot()), (0, 1));
    /// assert!(sem("c").await?.is_none()); // both slots are held
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn limit(mut self, n: u32) -> Self {
        self.limit = n;
        self
    }

    /// Tries once to take a slot. `None` when every slot is held (`held` or
    /// `contended`); otherwise a [`Lock`] that renews itself until it is released,
    /// dropped, or lost. A name of 1 to [`MAX_NAME_BYTES`] bytes without NUL and a
    /// limit of 1 to [`MAX_LIMIT`] are checked before sending ([`Error::Invalid`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// match client.lock("nightly-report").acquire().await? {
    ///     Some(lock) => {
    ///         // ... the work the lock protects ...
    ///         assert!(lock.release().await?);
    ///     }
    ///     None => println!("another worker holds it"),
    /// }
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn acquire(self) -> Result<Option<Lock>> {
        if self.name.is_empty() || self.name.len() > MAX_NAME_BYTES || self.name.contains('\0') {
            return Err(Error::invalid(
                "lock",
                format!("a lock name is 1 to {MAX_NAME_BYTES} bytes with no NUL"),
            ));
        }
        if !(1..=MAX_LIMIT).contains(&self.limit) {
            return Err(Error::invalid(
                "lock",
                format!("limit must be from 1 to {MAX_LIMIT}"),
            ));
        }
        let owner = self
            .owner
            .unwrap_or_else(|| uuid::Uuid::now_v7().to_string());
        let ttl = ttl_secs(self.ttl);
        let started = Instant::now();
        let r = acquire_op(&self.client, &self.name, &owner, ttl, self.limit).await?;
        let Acquired::Yes {
            slot,
            token,
            already,
        } = r
        else {
            return Ok(None);
        };
        let guard = LockGuard {
            name: self.name.clone(),
            slot,
            token,
        };
        let (tx, rx) = watch::channel(LockState { guard, lost: false });
        let (stop_tx, stop_rx) = oneshot::channel();
        let renewer = tokio::spawn(renew_loop(Renewer {
            client: self.client.clone(),
            owner: owner.clone(),
            ttl,
            limit: self.limit,
            held_until: started + Duration::from_secs(ttl),
            state: tx,
            stop: stop_rx,
        }));
        Ok(Some(Lock {
            client: self.client,
            name: self.name,
            owner,
            already,
            state: rx,
            stop: Some(stop_tx),
            renewer,
        }))
    }
}

#[derive(Debug, Clone)]
struct LockState {
    guard: LockGuard,
    lost: bool,
}

/// A held lock (or semaphore slot) that renews itself in the background, about every
/// third of its TTL, for as long as the handle lives.
///
/// Put [`Lock::guard`] in a transaction ([`crate::TransactionBuilder::guard`]) so the
/// transaction commits only while the lock is still held. Dropping the handle stops the
/// renewal (the lock then lapses after its TTL); [`Lock::release`] gives it back now.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Lock, Ttl};
/// let lock: Lock = client.lock("nightly-report").acquire().await?.expect("free");
/// client
///     .transaction()
///     .guard(&lock.guard())
///     .kv(|k| k.put("reports", "nightly", &"done", Ttl::days(1)))
///     .commit()
///     .await?
///     .committed()
///     .expect("still held");
/// lock.release().await?;
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
pub struct Lock {
    client: Client,
    name: String,
    owner: String,
    already: bool,
    state: watch::Receiver<LockState>,
    stop: Option<oneshot::Sender<()>>,
    renewer: JoinHandle<()>,
}

impl Lock {
    /// The lock's name.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// assert_eq!(lock.name(), "nightly-report");
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The held slot (0 for a plain lock; the first free one of a semaphore).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// assert_eq!(lock.slot(), 0);
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn slot(&self) -> u64 {
        self.state.borrow().guard.slot
    }

    /// The holder's identity on the lock row: [`LockBuilder::owner`], or the UUIDv7
    /// minted for this acquisition.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// assert_eq!(lock.owner().len(), 36); // a UUID
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The acquisition found this owner already holding a slot and answered that hold.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let first = client.lock("nightly-report").owner("worker-a").acquire().await?.expect("free");
    /// assert!(!first.was_already_held());
    /// let second = client.lock("nightly-report").owner("worker-a").acquire().await?.expect("ours");
    /// assert!(second.was_already_held());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn was_already_held(&self) -> bool {
        self.already
    }

    /// The current guard: each renewal mints a new token, so take it just before
    /// building the transaction it gates.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// let outcome = client
    ///     .transaction()
    ///     .guard(&lock.guard())
    ///     .kv(|k| k.put("reports", "nightly", &"done", Ttl::days(1)))
    ///     .commit()
    ///     .await?;
    /// assert!(outcome.is_committed());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn guard(&self) -> LockGuard {
        self.state.borrow().guard.clone()
    }

    /// Whether a renewal found the lock lost (it lapsed, or another holder took it).
    /// It is checked at each renewal, so it may lag: [`Lock::guard`] in a transaction
    /// is the safe test.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// assert!(!lock.is_lost());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn is_lost(&self) -> bool {
        self.state.borrow().lost
    }

    /// Resolves when a renewal finds the lock lost (or the renewal stops because the
    /// handle was dropped or released). Race it against the work the lock protects:
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use std::time::Duration;
    /// # async fn long_work() { tokio::time::sleep(Duration::from_secs(30)).await }
    /// let lock = client.lock("exports").ttl(Duration::from_secs(3)).acquire().await?.expect("free");
    /// # // Take the row away behind the holder's back: its next renewal (after 1 s) finds it gone.
    /// # client.kv().delete(queen_sdk::locks::NAMESPACE, "exports#0").await?;
    /// tokio::select! {
    ///     _ = lock.lost() => eprintln!("lost the lock: stopping"),
    ///     _ = long_work() => {}
    /// }
    /// assert!(lock.is_lost());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn lost(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.state.clone();
        async move {
            let _ = rx.wait_for(|s| s.lost).await;
        }
    }

    /// Stops the renewal and gives the lock back. Answers `false` when it was no longer
    /// held (it lapsed or was taken).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let lock = client.lock("nightly-report").acquire().await?.expect("free");
    /// assert!(lock.release().await?);
    /// assert!(client.lock("nightly-report").acquire().await?.is_some()); // free again
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn release(mut self) -> Result<bool> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        // Let an in-flight renewal finish, so the release carries the latest token.
        let _ = (&mut self.renewer).await;
        let state = self.state.borrow().clone();
        if state.lost {
            return Ok(false);
        }
        let g = state.guard;
        let op = json!({"op": "release", "name": g.name, "token": g.token, "slot": g.slot});
        let r = lock_call(&self.client, op, Replay::Safe).await?;
        Ok(r.get("released").and_then(Value::as_bool) == Some(true))
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        self.renewer.abort();
    }
}

/// Sends one lock operation and answers its result.
async fn lock_call(client: &Client, op: Value, replay: Replay) -> Result<Value> {
    let body = render(&Operations { operations: [op] })?;
    let answer = client.post("/api/v1/locks", body, replay).await?;
    answer
        .value()?
        .get_mut("results")
        .and_then(|r| r.get_mut(0))
        .map(Value::take)
        .ok_or_else(|| Error::Decode {
            message: "a locks answer without results".into(),
            body: answer.text(),
        })
}

enum Acquired {
    Yes {
        slot: u64,
        token: u64,
        already: bool,
    },
    No,
}

/// `acquire` with an owner: a replay answers the same hold (`already`), so it is safe.
async fn acquire_op(
    client: &Client,
    name: &str,
    owner: &str,
    ttl: u64,
    limit: u32,
) -> Result<Acquired> {
    let op =
        json!({"op": "acquire", "name": name, "ttlSeconds": ttl, "owner": owner, "limit": limit});
    let r = lock_call(client, op, Replay::Safe).await?;
    if r.get("acquired").and_then(Value::as_bool) != Some(true) {
        return Ok(Acquired::No);
    }
    let num = |k: &str| {
        r.get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| Error::Decode {
                message: format!("an acquired lock without {k}"),
                body: r.to_string(),
            })
    };
    Ok(Acquired::Yes {
        slot: num("slot")?,
        token: num("token")?,
        already: r.get("already").and_then(Value::as_bool).unwrap_or(false),
    })
}

struct Renewer {
    client: Client,
    owner: String,
    ttl: u64,
    limit: u32,
    /// The latest moment the lock is surely held, by this machine's clock.
    held_until: Instant,
    state: watch::Sender<LockState>,
    stop: oneshot::Receiver<()>,
}

enum Renewal {
    Renewed { token: u64 },
    Lost,
}

async fn renew_op(r: &Renewer, g: &LockGuard) -> Result<Renewal> {
    let op = json!({"op": "renew", "name": g.name, "token": g.token, "slot": g.slot,
                    "ttlSeconds": r.ttl, "owner": r.owner});
    // A replay after a renewal applied would find the old token gone: not safe.
    let v = lock_call(&r.client, op, Replay::Unsafe).await?;
    if v.get("renewed").and_then(Value::as_bool) == Some(true) {
        let token = v
            .get("token")
            .and_then(Value::as_u64)
            .ok_or_else(|| Error::Decode {
                message: "a renewed lock without token".into(),
                body: v.to_string(),
            })?;
        Ok(Renewal::Renewed { token })
    } else {
        Ok(Renewal::Lost)
    }
}

async fn renew_loop(mut r: Renewer) {
    let every = Duration::from_secs(r.ttl) / 3;
    let mut next = every;
    loop {
        tokio::select! {
            biased;
            _ = &mut r.stop => return,
            _ = tokio::time::sleep(next) => {}
        }
        let g = r.state.borrow().guard.clone();
        let sent = Instant::now();
        let mark_lost = |r: &Renewer| r.state.send_modify(|s| s.lost = true);
        match renew_op(&r, &g).await {
            Ok(Renewal::Renewed { token }) => {
                r.held_until = sent + Duration::from_secs(r.ttl);
                r.state.send_modify(|s| s.guard.token = token);
                next = every;
                continue;
            }
            Ok(Renewal::Lost) => {
                tracing::warn!(lock = %g.name, slot = g.slot, "lock lost");
                mark_lost(&r);
                return;
            }
            Err(e) => {
                tracing::warn!(lock = %g.name, error = %e, "lock renewal failed; checking the hold");
            }
        }
        // The renewal may or may not have applied (its token would then be new): ask by
        // owner, which answers the current hold without writing.
        match acquire_op(&r.client, &g.name, &r.owner, r.ttl, r.limit).await {
            Ok(Acquired::Yes {
                slot,
                token,
                already: true,
            }) => {
                r.state.send_modify(|s| {
                    s.guard.slot = slot;
                    s.guard.token = token;
                });
            }
            Ok(Acquired::Yes { slot, token, .. }) => {
                // The old hold had lapsed and this took a new one: the old guard is gone.
                tracing::warn!(lock = %g.name, "lock lapsed during a failed renewal");
                mark_lost(&r);
                let op = json!({"op": "release", "name": g.name, "token": token, "slot": slot});
                let _ = lock_call(&r.client, op, Replay::Safe).await;
                return;
            }
            Ok(Acquired::No) => {
                tracing::warn!(lock = %g.name, "lock lost during a failed renewal");
                mark_lost(&r);
                return;
            }
            Err(e) => tracing::warn!(lock = %g.name, error = %e, "lock check failed"),
        }
        let now = Instant::now();
        if now >= r.held_until {
            tracing::warn!(lock = %g.name, "lock not renewed within its TTL");
            mark_lost(&r);
            return;
        }
        // Try again soon, well before the hold lapses.
        next = ((r.held_until - now) / 3).clamp(Duration::from_millis(50), every);
    }
}
