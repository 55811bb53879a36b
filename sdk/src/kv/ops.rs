//! KV operations as types: [`Kv`] starts one, each operation's builder ([`Put`],
//! [`Incr`], ...) offers only the options that operation has, and [`KvOp`] is the
//! operation a transaction or a standalone batch sends. An option an operation does not
//! have does not compile (see [`KvOp`]'s `compile_fail` examples).

use serde::Serialize;
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::txn::Ttl;
use crate::validate;

/// Builds KV operations for [`crate::TransactionBuilder::kv`] and
/// [`crate::KvStore::batch`], where it is used by value: `Kv.put(..)`. Each method
/// answers that operation's own builder, which turns into a [`KvOp`] with `.into()`.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Kv, Ttl};
/// // In a transaction, the closure receives a Kv...
/// client.transaction().kv(|k| k.put("carts", "c-1", &2, Ttl::hours(1))).commit().await?.committed().unwrap();
/// // ...and a standalone batch takes operations built from one.
/// let out = client.kv().batch(vec![Kv.get("carts", "c-1")]).await?;
/// assert_eq!(out.results().unwrap()[0].value, Some(serde_json::json!(2)));
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Kv;

/// One KV operation. Build it from [`Kv`]; every operation's builder converts into it
/// (`.into()`), so operations of different kinds can share a list.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> anyhow::Result<()> {
/// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
/// # let client = queen_sdk::Client::new(broker.url())?;
/// use queen_sdk::{Kv, KvOp, Ttl};
/// let claim: KvOp = Kv.put_if_absent("claims", "job-9", &"worker-a", Ttl::minutes(5)).required().into();
/// assert!(matches!(claim, KvOp::PutIfAbsent(_)));
/// let out = client.kv().batch(vec![claim, Kv.get("claims", "job-9").into()]).await?;
/// assert!(out.results().is_some()); // the claim was free
/// # broker.shutdown().await;
/// # Ok(())
/// # }
/// ```
///
/// An option an operation does not have does not compile:
///
/// ```compile_fail,E0599
/// use queen_sdk::{Kv, Ttl};
/// // `min` bounds an `incr`; a `put` has none (no method `min` on `Put`).
/// let op = Kv.put("carts", "c-1", &2, Ttl::hours(1)).min(0);
/// ```
///
/// ```compile_fail,E0061
/// use queen_sdk::Kv;
/// // A read has no expiry: it takes none.
/// let op = Kv.get("carts", "c-1", 60);
/// ```
///
/// ```compile_fail,E0599
/// use queen_sdk::Kv;
/// // A check's version is its argument, and it writes nothing to expire.
/// let op = Kv.check("config", "limits", 3).ttl(60);
/// ```
///
/// And an option the broker requires is an argument: a write without its expiry does
/// not compile (the expiry is [`Ttl::Forever`] or a time to live, never a default).
///
/// ```compile_fail,E0061
/// use queen_sdk::Kv;
/// let op = Kv.put("carts", "c-1", &2); // no expiry
/// ```
///
/// ```compile_fail,E0061
/// use queen_sdk::Kv;
/// let op = Kv.put_if_absent("claims", "job-9", &"worker-a"); // no expiry
/// ```
///
/// ```compile_fail,E0061
/// use queen_sdk::Kv;
/// let op = Kv.incr("stock", "sku-1", -1); // no expiry
/// ```
///
/// ```compile_fail,E0599
/// use queen_sdk::{Kv, Ttl};
/// // The expiry is given once, as an argument: there is no setter to give it twice.
/// let op = Kv.put("carts", "c-1", &2, Ttl::hours(1)).ttl(Ttl::Forever);
/// ```
///
/// The same chains with the options those operations do have build:
///
/// ```
/// use queen_sdk::{Kv, KvOp, Ttl};
/// let ops: Vec<KvOp> = vec![
///     Kv.incr("stock", "sku-1", -1, Ttl::hours(1)).min(0).into(),
///     Kv.put("carts", "c-1", &2, Ttl::hours(1)).expect(3).required().into(),
///     Kv.get_many("carts", ["c-1"]).into(),
///     Kv.check("config", "limits", 3).required().into(),
/// ];
/// assert!(matches!(ops[0], KvOp::Incr(_)));
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub enum KvOp {
    /// Reads one key ([`Kv::get`]).
    Get(Get),
    /// Reads several keys ([`Kv::get_many`]).
    GetMany(GetMany),
    /// Writes a value ([`Kv::put`]).
    Put(Put),
    /// Writes a value if the key is absent ([`Kv::put_if_absent`]).
    PutIfAbsent(PutIfAbsent),
    /// Removes a key ([`Kv::delete`]).
    Delete(Delete),
    /// Asserts a key's version ([`Kv::check`]).
    Check(Check),
    /// Adds to a number ([`Kv::incr`]).
    Incr(Incr),
}

/// A read of one key, from [`Kv::get`].
///
/// ```
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.get("carts", "c-1")).to_body()?;
/// assert_eq!(body["kv"][0], serde_json::json!({"op": "get", "ns": "carts", "key": "c-1"}));
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Get {
    ns: String,
    key: String,
    expect: Option<u64>,
    required: bool,
}

/// A read of several keys, from [`Kv::get_many`].
///
/// ```
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.get_many("carts", ["c-1", "c-2"])).to_body()?;
/// assert_eq!(body["kv"][0]["keys"], serde_json::json!(["c-1", "c-2"]));
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct GetMany {
    ns: String,
    keys: Vec<String>,
}

/// A write, from [`Kv::put`], with its expiry.
///
/// ```
/// # use queen_sdk::Ttl;
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.put("carts", "c-1", &2, Ttl::Forever)).to_body()?;
/// assert_eq!(body["kv"][0]["op"], "put");
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Put {
    ns: String,
    key: String,
    value: std::result::Result<Box<RawValue>, String>,
    ttl: Ttl,
    expect: Option<u64>,
    required: bool,
}

/// A write of an absent key, from [`Kv::put_if_absent`], with its expiry.
///
/// ```
/// # use queen_sdk::Ttl;
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.put_if_absent("claims", "job-9", &"w-1", Ttl::Forever)).to_body()?;
/// assert_eq!(body["kv"][0]["op"], "putIfAbsent");
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct PutIfAbsent {
    ns: String,
    key: String,
    value: std::result::Result<Box<RawValue>, String>,
    ttl: Ttl,
    required: bool,
}

/// A removal, from [`Kv::delete`].
///
/// ```
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.delete("carts", "c-1")).to_body()?;
/// assert_eq!(body["kv"][0], serde_json::json!({"op": "delete", "ns": "carts", "key": "c-1"}));
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Delete {
    ns: String,
    key: String,
    expect: Option<u64>,
    required: bool,
}

/// A version assertion, from [`Kv::check`].
///
/// ```
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.check("config", "limits", 3)).to_body()?;
/// assert_eq!(body["kv"][0]["expect"], 3);
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Check {
    ns: String,
    key: String,
    expect: u64,
    required: bool,
}

/// An increment, from [`Kv::incr`], with its expiry.
///
/// ```
/// # use queen_sdk::Ttl;
/// # let client = queen_sdk::Client::new("http://127.0.0.1:6632")?;
/// let body = client.transaction().kv(|k| k.incr("stats", "orders", 2, Ttl::Forever)).to_body()?;
/// assert_eq!(body["kv"][0]["delta"], 2);
/// # Ok::<(), queen_sdk::Error>(())
/// ```
#[derive(Debug, Clone)]
#[must_use]
pub struct Incr {
    ns: String,
    key: String,
    delta: i64,
    ttl: Ttl,
    min: Option<i64>,
    max: Option<i64>,
    required: bool,
}

impl Kv {
    /// Writes `value`; the row lapses after `ttl` ([`Ttl::Forever`]: never; a
    /// [`Duration`](std::time::Duration) converts, rounded up to whole seconds).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let c = client
    ///     .transaction()
    ///     .kv(|k| k.put("orders", "o-7", &serde_json::json!({"status": "paid"}), Ttl::days(30)))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let put = c.kv().next().unwrap();
    /// assert_eq!(put.applied, Some(true));
    /// assert!(put.version.is_some());
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn put<T: Serialize + ?Sized>(
        self,
        ns: impl Into<String>,
        key: impl Into<String>,
        value: &T,
        ttl: impl Into<Ttl>,
    ) -> Put {
        Put {
            ns: ns.into(),
            key: key.into(),
            value: serde_json::value::to_raw_value(value).map_err(|e| e.to_string()),
            ttl: ttl.into(),
            expect: None,
            required: false,
        }
    }

    /// Writes `value` only if the key is absent; the loser learns the winner's value
    /// (`applied: false`, `reason: "exists"`). Add [`PutIfAbsent::required`] to make it
    /// a gate.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// let claim = |worker: &'static str| {
    ///     client.transaction().kv(move |k| k.put_if_absent("claims", "job-9", &worker, Ttl::minutes(5)))
    /// };
    /// claim("worker-a").commit().await?.committed().unwrap();
    /// let lost = claim("worker-b").commit().await?.committed().unwrap();
    /// let r = lost.kv().next().unwrap();
    /// assert_eq!((r.applied, r.reason.clone()), (Some(false), Some(queen_sdk::KvReason::Exists)));
    /// assert_eq!(r.value, Some(serde_json::json!("worker-a")));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn put_if_absent<T: Serialize + ?Sized>(
        self,
        ns: impl Into<String>,
        key: impl Into<String>,
        value: &T,
        ttl: impl Into<Ttl>,
    ) -> PutIfAbsent {
        PutIfAbsent {
            ns: ns.into(),
            key: key.into(),
            value: serde_json::value::to_raw_value(value).map_err(|e| e.to_string()),
            ttl: ttl.into(),
            required: false,
        }
    }

    /// Removes a key (`applied: false`, `reason: "absent"` when there was none).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let c = client.transaction().kv(|k| k.delete("carts", "c-1")).commit().await?.committed().unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!((r.applied, r.reason.clone()), (Some(false), Some(queen_sdk::KvReason::Absent)));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn delete(self, ns: impl Into<String>, key: impl Into<String>) -> Delete {
        Delete {
            ns: ns.into(),
            key: key.into(),
            expect: None,
            required: false,
        }
    }

    /// Asserts the key's version without writing (`0`: it must not exist). With
    /// [`Check::required`], a lost check gates the transaction.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, Ttl};
    /// let v = client.kv().put("config", "limits", &10, Ttl::Forever).await?.version.unwrap();
    /// // Commit only if nobody changed the config since it was read at version v.
    /// let step = |seen: u64| {
    ///     client
    ///         .transaction()
    ///         .kv(move |k| k.check("config", "limits", seen).required())
    ///         .push("changes", |p| p.payload(&"limits reviewed"))
    /// };
    /// assert!(step(v).commit().await?.is_committed());
    /// client.kv().put("config", "limits", &20, Ttl::Forever).await?;
    /// assert!(matches!(step(v).commit().await?, Commit::Gated { .. }));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn check(self, ns: impl Into<String>, key: impl Into<String>, expect: u64) -> Check {
        Check {
            ns: ns.into(),
            key: key.into(),
            expect,
            required: false,
        }
    }

    /// Adds `delta` to a number (an absent key counts from 0); the result's `value` is
    /// the new number. Bound it with [`Incr::min`] and [`Incr::max`].
    ///
    /// `ttl` applies only when the `incr` creates the key (or creates it again after it
    /// lapsed): it never extends a live key's expiry, as in Queen 2. So a counter with
    /// a TTL is a fixed window (a rate limiter's window closes on time however busy it
    /// is), not one that slides with each increment.
    ///
    /// ```
    /// # use queen_sdk::Ttl;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// let add = |n| client.transaction().kv(move |k| k.incr("stats", "orders", n, Ttl::Forever));
    /// add(5).commit().await?.committed().unwrap();
    /// let c = add(-2).commit().await?.committed().unwrap();
    /// assert_eq!(c.kv().next().unwrap().value, Some(serde_json::json!(3)));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn incr(
        self,
        ns: impl Into<String>,
        key: impl Into<String>,
        delta: i64,
        ttl: impl Into<Ttl>,
    ) -> Incr {
        Incr {
            ns: ns.into(),
            key: key.into(),
            delta,
            ttl: ttl.into(),
            min: None,
            max: None,
            required: false,
        }
    }

    /// Reads one key, as of the transaction (`found`, `value`, `version`).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// client.kv().put("carts", "c-1", &serde_json::json!({"items": 2}), Ttl::hours(1)).await?;
    /// let c = client.transaction().kv(|k| k.get("carts", "c-1")).commit().await?.committed().unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!(r.found, Some(true));
    /// assert_eq!(r.value, Some(serde_json::json!({"items": 2})));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get(self, ns: impl Into<String>, key: impl Into<String>) -> Get {
        Get {
            ns: ns.into(),
            key: key.into(),
            expect: None,
            required: false,
        }
    }

    /// Reads several keys: the result's [`KvResult::raw`](crate::KvResult::raw) holds
    /// `rows` and `missing` ([`KvResult::raw_value`](crate::KvResult::raw_value) parses it).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::Ttl;
    /// client.kv().put("carts", "c-1", &1, Ttl::hours(1)).await?;
    /// let c = client
    ///     .transaction()
    ///     .kv(|k| k.get_many("carts", ["c-1", "c-2"]))
    ///     .commit()
    ///     .await?
    ///     .committed()
    ///     .unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!(r.raw_value()["rows"][0]["key"], "c-1");
    /// assert_eq!(r.raw_value()["missing"], serde_json::json!(["c-2"]));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn get_many<I: IntoIterator<Item = S>, S: Into<String>>(
        self,
        ns: impl Into<String>,
        keys: I,
    ) -> GetMany {
        GetMany {
            ns: ns.into(),
            keys: keys.into_iter().map(Into::into).collect(),
        }
    }
}

/// `required` for every operation that has it.
macro_rules! required {
    ($t:ident, $build:literal) => {
        impl $t {
            #[doc = concat!(
                "Makes the operation a gate: if it does not apply, the whole transaction ",
                "answers [`Commit::Gated`](crate::Commit::Gated) and writes nothing.\n\n```\n",
                "# let client = queen_sdk::Client::new(\"http://127.0.0.1:6632\")?;\n",
                "# #[allow(unused_imports)] use queen_sdk::Ttl;\n",
                "let body = client.transaction().kv(|k| k.", $build, ".required()).to_body()?;\n",
                "assert_eq!(body[\"kv\"][0][\"required\"], true);\n",
                "# Ok::<(), queen_sdk::Error>(())\n```"
            )]
            pub fn required(mut self) -> Self {
                self.required = true;
                self
            }
        }
    };
}

/// `expect` for the operations that take a version precondition.
macro_rules! expect {
    ($t:ident, $build:literal) => {
        impl $t {
            #[doc = concat!(
                "Requires the current version to be `version` (`0`: the key must not exist); ",
                "otherwise the operation does not apply (`reason: \"version\"`, or ",
                "`\"exists\"` / `\"absent\"`).\n\n```\n",
                "# let client = queen_sdk::Client::new(\"http://127.0.0.1:6632\")?;\n",
                "# #[allow(unused_imports)] use queen_sdk::Ttl;\n",
                "let body = client.transaction().kv(|k| k.", $build, ".expect(7)).to_body()?;\n",
                "assert_eq!(body[\"kv\"][0][\"expect\"], 7);\n",
                "# Ok::<(), queen_sdk::Error>(())\n```"
            )]
            pub fn expect(mut self, version: u64) -> Self {
                self.expect = Some(version);
                self
            }
        }
    };
}

expect!(Put, "put(\"carts\", \"c-1\", &2, Ttl::Forever)");
required!(Put, "put(\"carts\", \"c-1\", &2, Ttl::Forever)");
required!(
    PutIfAbsent,
    "put_if_absent(\"claims\", \"job-9\", &\"w-1\", Ttl::Forever)"
);
required!(Incr, "incr(\"stats\", \"orders\", 1, Ttl::Forever)");
expect!(Delete, "delete(\"carts\", \"c-1\")");
required!(Delete, "delete(\"carts\", \"c-1\")");
required!(Check, "check(\"config\", \"limits\", 3)");
expect!(Get, "get(\"carts\", \"c-1\")");
required!(Get, "get(\"carts\", \"c-1\").expect(7)");

impl Incr {
    /// The lowest allowed result. A step that would go below it does not apply: on its
    /// own the operation answers `applied: false` with [`KvReason::Limit`] and **the rest
    /// of the transaction still commits** (the number is left as it was); add
    /// [`Incr::required`] to refuse the whole transaction instead ([`Commit::Gated`]), as
    /// a stock reservation must.
    ///
    /// [`KvReason::Limit`]: crate::KvReason::Limit
    /// [`Commit::Gated`]: crate::Commit::Gated
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{Commit, KvReason, Ttl};
    /// let take = || client.transaction().push("picks", |p| p.payload(&"sku-1")).kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0));
    /// // 0 - 1 would be below 0: the decrement does not apply, but the push commits.
    /// let c = take().commit().await?.committed().unwrap();
    /// let r = c.kv().next().unwrap();
    /// assert_eq!((r.applied, r.reason.clone()), (Some(false), Some(KvReason::Limit)));
    /// assert_eq!(broker.inspect().messages("picks", queen_sdk::DEFAULT_PARTITION)?.len(), 1);
    /// // Required, the limit refuses the whole step.
    /// let step = take().kv(|k| k.incr("stock", "sku-2", -1, Ttl::Forever).min(0).required());
    /// assert!(matches!(step.commit().await?, Commit::Gated { .. }));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub fn min(mut self, min: i64) -> Self {
        self.min = Some(min);
        self
    }

    /// The highest allowed result; a step above it does not apply (`applied: false`,
    /// [`KvReason::Limit`](crate::KvReason::Limit)) and, unless [`Incr::required`], the
    /// rest of the transaction still commits (see [`Incr::min`]).
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> anyhow::Result<()> {
    /// # let broker = queen_mock_broker::MockBroker::start_in_memory().await?;
    /// # let client = queen_sdk::Client::new(broker.url())?;
    /// use queen_sdk::{KvReason, Ttl};
    /// let hit = || client.transaction().kv(|k| k.incr("quota", "user-1", 1, Ttl::Forever).max(2));
    /// for _ in 0..2 {
    ///     assert_eq!(hit().commit().await?.committed().unwrap().kv().next().unwrap().applied, Some(true));
    /// }
    /// let third = hit().commit().await?.committed().unwrap();
    /// assert_eq!(third.kv().next().unwrap().reason, Some(KvReason::Limit));
    /// # broker.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    /// # use queen_sdk::Ttl;
    pub fn max(mut self, max: i64) -> Self {
        self.max = Some(max);
        self
    }
}

macro_rules! into_op {
    ($($t:ident),*) => {$(
        impl From<$t> for KvOp {
            fn from(op: $t) -> KvOp {
                KvOp::$t(op)
            }
        }
    )*};
}
into_op!(Get, GetMany, Put, PutIfAbsent, Delete, Check, Incr);

impl KvOp {
    /// The operation's name on the wire.
    pub(crate) fn name(&self) -> &'static str {
        match self {
            KvOp::Get(_) => "get",
            KvOp::GetMany(_) => "getMany",
            KvOp::Put(_) => "put",
            KvOp::PutIfAbsent(_) => "putIfAbsent",
            KvOp::Delete(_) => "delete",
            KvOp::Check(_) => "check",
            KvOp::Incr(_) => "incr",
        }
    }

    /// The namespace.
    pub(crate) fn ns(&self) -> &str {
        match self {
            KvOp::Get(o) => &o.ns,
            KvOp::GetMany(o) => &o.ns,
            KvOp::Put(o) => &o.ns,
            KvOp::PutIfAbsent(o) => &o.ns,
            KvOp::Delete(o) => &o.ns,
            KvOp::Check(o) => &o.ns,
            KvOp::Incr(o) => &o.ns,
        }
    }

    /// The one key (none for `getMany`).
    pub(crate) fn key(&self) -> Option<&str> {
        match self {
            KvOp::GetMany(_) => None,
            KvOp::Get(Get { key, .. })
            | KvOp::Put(Put { key, .. })
            | KvOp::PutIfAbsent(PutIfAbsent { key, .. })
            | KvOp::Delete(Delete { key, .. })
            | KvOp::Check(Check { key, .. })
            | KvOp::Incr(Incr { key, .. }) => Some(key.as_str()),
        }
    }

    /// How many keys the operation names.
    pub(crate) fn key_count(&self) -> usize {
        match self {
            KvOp::GetMany(o) => o.keys.len(),
            _ => 1,
        }
    }

    /// The length of the value it writes, as rendered (0 without one).
    pub(crate) fn value_len(&self) -> usize {
        match self {
            KvOp::Put(Put { value: Ok(v), .. })
            | KvOp::PutIfAbsent(PutIfAbsent { value: Ok(v), .. }) => v.get().len(),
            _ => 0,
        }
    }

    /// The value it writes, as rendered (`None` without one, or one that did not
    /// serialise).
    pub(crate) fn written_value(&self) -> Option<&RawValue> {
        match self {
            KvOp::Put(Put { value: Ok(v), .. })
            | KvOp::PutIfAbsent(PutIfAbsent { value: Ok(v), .. }) => Some(v),
            _ => None,
        }
    }

    /// The key it writes, if it writes one.
    pub(crate) fn written_key(&self) -> Option<&str> {
        match self {
            KvOp::Put(_) | KvOp::PutIfAbsent(_) | KvOp::Delete(_) | KvOp::Incr(_) => self.key(),
            KvOp::Get(_) | KvOp::GetMany(_) | KvOp::Check(_) => None,
        }
    }

    /// Whether the operation writes its key.
    pub(crate) fn writes(&self) -> bool {
        self.written_key().is_some()
    }

    /// Whether it is a gate.
    pub(crate) fn required(&self) -> bool {
        match self {
            KvOp::GetMany(_) => false,
            KvOp::Get(o) => o.required,
            KvOp::Put(o) => o.required,
            KvOp::PutIfAbsent(o) => o.required,
            KvOp::Delete(o) => o.required,
            KvOp::Check(o) => o.required,
            KvOp::Incr(o) => o.required,
        }
    }

    /// A required write whose precondition its own first application breaks
    /// (`putIfAbsent`, `delete`, a write with `expect`): a replay gates itself.
    pub(crate) fn gates_its_replay(&self) -> bool {
        match self {
            KvOp::PutIfAbsent(o) => o.required,
            KvOp::Delete(o) => o.required,
            KvOp::Put(o) => o.required && o.expect.is_some(),
            KvOp::Get(_) | KvOp::GetMany(_) | KvOp::Check(_) | KvOp::Incr(_) => false,
        }
    }

    /// Checks the operation's own rules (namespace, key, expiry, value size) and renders
    /// it; `op` names it in errors.
    pub(crate) fn checked_wire(
        &self,
        op: &(impl std::fmt::Display + ?Sized),
    ) -> Result<KvWire<'_>> {
        validate::ns(op, self.ns())?;
        match self {
            KvOp::GetMany(o) => {
                for key in &o.keys {
                    validate::key(op, key)?;
                }
            }
            _ => validate::key(op, self.key().unwrap_or_default())?,
        }
        let ttl = match self {
            KvOp::Put(Put { ttl, .. })
            | KvOp::PutIfAbsent(PutIfAbsent { ttl, .. })
            | KvOp::Incr(Incr { ttl, .. }) => match ttl {
                Ttl::Seconds(0) => {
                    return Err(Error::invalid(op, "a TTL must be at least 1 second"));
                }
                t => Some(*t),
            },
            _ => None,
        };
        let value = match self {
            KvOp::Put(Put { value, .. }) | KvOp::PutIfAbsent(PutIfAbsent { value, .. }) => {
                Some(checked_value(op, value)?)
            }
            _ => None,
        };
        let mut wire = KvWire {
            op: self.name(),
            ns: self.ns(),
            key: self.key(),
            keys: None,
            value,
            ttl_seconds: match ttl {
                Some(Ttl::Seconds(s)) => Some(s),
                _ => None,
            },
            forever: (ttl == Some(Ttl::Forever)).then_some(true),
            expect: None,
            required: self.required().then_some(true),
            delta: None,
            min: None,
            max: None,
        };
        match self {
            KvOp::GetMany(o) => wire.keys = Some(o.keys.as_slice()),
            KvOp::Get(o) => wire.expect = o.expect,
            KvOp::Put(o) => wire.expect = o.expect,
            KvOp::Delete(o) => wire.expect = o.expect,
            KvOp::Check(o) => wire.expect = Some(o.expect),
            KvOp::Incr(o) => {
                wire.delta = Some(o.delta);
                wire.min = o.min;
                wire.max = o.max;
            }
            KvOp::PutIfAbsent(_) => {}
        }
        Ok(wire)
    }
}

impl<'a> KvWire<'a> {
    /// The same operation on another key (a `once` marker's key in an epoch).
    pub(crate) fn with_key(mut self, key: &'a str) -> Self {
        self.key = Some(key);
        self
    }
}

/// A value that serialised and fits the limit.
fn checked_value<'a>(
    op: &(impl std::fmt::Display + ?Sized),
    value: &'a std::result::Result<Box<RawValue>, String>,
) -> Result<&'a RawValue> {
    match value {
        Err(e) => Err(Error::invalid(op, format!("value: {e}"))),
        Ok(v) => {
            // Compact JSON, as rendered when the value was set.
            let len = v.get().len();
            if len > validate::MAX_VALUE_BYTES {
                return Err(Error::invalid(
                    op,
                    format!(
                        "the value is {len} bytes as JSON; the limit is {}",
                        validate::MAX_VALUE_BYTES
                    ),
                ));
            }
            Ok(v)
        }
    }
}

/// A KV operation as the broker reads it, borrowed from its [`KvOp`].
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct KvWire<'a> {
    op: &'static str,
    ns: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    key: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    keys: Option<&'a [String]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ttl_seconds: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    forever: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    expect: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    required: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delta: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    min: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max: Option<i64>,
}
