//! One operation of each shape, driven through the SDK or through bare HTTP.
//!
//! Both drivers send the same bodies: the raw one writes each body from a template with
//! `format!` (field for field what the SDK renders, deterministic ids included) and reads
//! only the fields it needs from the answers, so `sdk / raw` is the SDK's own cost.

use std::fmt::Write as _;
use std::time::Duration;

use anyhow::Context as _;
use axum::body::Bytes;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use queen_sdk::{
    AckStatus, Client, Commit, Message, PushItem, QUEUE_MODE, RetryPolicy, SubscriptionMode,
    TransactionBuilder, Ttl,
};
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue, USER_AGENT};
use reqwest::{Method, StatusCode};
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::{Mode, Shape};

/// The SDK's HTTP settings (`ClientBuilder`'s defaults), which the raw client copies so
/// that both modes use the same HTTP/1.1 connection pool.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(40);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest a pop long-polls before the worker looks at the deadline again.
const MAX_WAIT: Duration = Duration::from_secs(1);

/// The lease of the synthetic message acked against the no-op server.
const NOOP_LEASE: &str = "0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37";

/// The input event: the seed's `order-paid` (`spec/transaction.md`, Example).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Event {
    pub order_id: String,
    pub customer: String,
    pub total: f64,
}

impl Event {
    /// Event `n` of a run: `order-{n}` of one of 1,000 customers.
    pub fn new(n: &str, k: u64) -> Event {
        Event {
            order_id: format!("order-{n}"),
            customer: format!("customer-{}", k % 1000),
            total: 120.5,
        }
    }
}

/// What a step pushes: the receipt of `spec/transaction.md`'s Example.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Receipt<'a> {
    order_id: &'a str,
    total: f64,
}

/// The KV state of an order.
#[derive(Serialize)]
struct Status {
    status: &'static str,
}

/// A reminder timer's payload.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct OrderRef<'a> {
    order_id: &'a str,
}

/// Queue and namespace names of one run (suffixed, so runs against one broker never
/// meet each other's messages, dedup windows or markers).
#[derive(Debug, Clone)]
pub(crate) struct Names {
    /// What `push` writes and what `ack-push` and `seed-step` pop.
    pub input: String,
    /// Where `ack-push` pushes.
    pub output: String,
    /// Where `seed-step` pushes its receipts.
    pub receipts: String,
    /// Where `seed-step` schedules its reminders.
    pub reminders: String,
    /// `seed-step`'s order state.
    pub orders_ns: String,
    /// `seed-step`'s `once` markers.
    pub paid_ns: String,
    /// The background messages of `--stored-messages`.
    pub stored: String,
    /// The namespace of `--stored-kv`'s keys.
    pub stored_ns: String,
    /// The queue `--stored-timers`' timers would fire into.
    pub stored_timers: String,
}

impl Names {
    pub fn new(run: &str) -> Names {
        Names {
            input: format!("load-orders-{run}"),
            output: format!("load-out-{run}"),
            receipts: format!("load-receipts-{run}"),
            reminders: format!("load-reminders-{run}"),
            orders_ns: format!("load-orders-{run}"),
            paid_ns: format!("load-paid-{run}"),
            stored: format!("load-stored-{run}"),
            stored_ns: format!("load-stored-{run}"),
            stored_timers: format!("load-stored-timers-{run}"),
        }
    }
}

/// What the workers share.
pub(crate) struct Plan {
    pub shape: Shape,
    pub names: Names,
    pub partitions: usize,
    /// The target is the no-op server: no pops, a synthetic message per step...
    pub noop: bool,
    /// ...unless this is set: then the pop is sent, and the no-op answers a canned one.
    pub noop_pop: bool,
    /// Most messages a pop of `pop` and `pop-ack` asks for.
    pub batch: u32,
    /// 0: the competing consumers (queue mode); otherwise worker `w` pops as consumer
    /// group `g{w % groups}`, subscription mode `all` (`pop` and `pop-ack`).
    pub groups: usize,
    /// `ack-incr` through the SDK without the step marker.
    pub no_step_marker: bool,
}

impl Plan {
    /// The consumer group worker `w` pops as, if not queue mode.
    pub fn group(&self, worker: usize) -> Option<String> {
        (self.groups > 0).then(|| format!("g{}", worker % self.groups))
    }
}

/// How one operation ended.
#[derive(Debug)]
pub(crate) enum Outcome {
    /// Committed (or pushed).
    Done,
    /// The pop found nothing within its wait.
    Empty,
    /// A verdict that wrote nothing: `duplicate`, `rejected_ack`, `kv_precondition`, ...
    RolledBack(String),
    /// The call failed: a kind (`http 503`, `transport`, `decode`, ...) and the detail.
    Error(String, String),
}

/// One operation's outcome and timings.
#[derive(Debug)]
pub(crate) struct Step {
    pub outcome: Outcome,
    /// Messages popped (they count against the pre-filled input).
    pub popped: u64,
    /// How long the write call took (the transaction alone, for `ack-push` and
    /// `seed-step`; the ack alone for `pop-ack`; the pop itself for `pop`).
    pub commit: Option<Duration>,
}

impl Step {
    fn new(outcome: Outcome) -> Step {
        Step {
            outcome,
            popped: 0,
            commit: None,
        }
    }
}

/// A bare reqwest client with the SDK's pool settings.
pub(crate) struct Raw {
    http: Http,
    base: String,
    auth: Option<HeaderValue>,
}

/// What the raw driver sends its requests with.
enum Http {
    /// reqwest, as the SDK uses it (`--mode raw`).
    Reqwest(reqwest::Client),
    /// hyper-util's HTTP/1 client, without reqwest's layers (`--mode hyper`); boxed,
    /// as it is some 300 bytes against reqwest's one pointer.
    Hyper(Box<HyperClient<HttpConnector, Full<Bytes>>>),
}

/// The SDK, or bare HTTP.
pub(crate) enum Driver {
    Sdk(Client),
    Raw(Raw),
}

/// The fields of a popped message a step needs.
struct Popped {
    transaction_id: String,
    partition_id: String,
    lease_id: String,
    consumer_group: String,
    partition: String,
    data: Event,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawPop {
    #[serde(default)]
    success: Option<bool>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    messages: Vec<RawMsg>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawMsg {
    transaction_id: String,
    partition_id: String,
    lease_id: String,
    consumer_group: String,
    partition: String,
    data: Event,
}

#[derive(Deserialize)]
struct RawCommit {
    success: Option<bool>,
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize)]
struct RawPushed {
    status: String,
}

#[derive(Deserialize)]
struct RawAck {
    success: bool,
}

/// A JSON string literal.
fn js(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into())
}

impl Driver {
    /// A driver for `url`: the SDK (no retries, so that every failure is counted), bare
    /// reqwest with the same pool settings, or hyper-util's client.
    pub fn new(mode: Mode, url: &str, token: Option<&str>) -> anyhow::Result<Driver> {
        let http = match mode {
            Mode::Sdk => return Ok(Driver::Sdk(sdk_client(url, token, RetryPolicy::none())?)),
            Mode::Raw => Http::Reqwest(
                reqwest::Client::builder()
                    .timeout(REQUEST_TIMEOUT)
                    .connect_timeout(CONNECT_TIMEOUT)
                    .user_agent("queen-load-raw")
                    .build()
                    .context("building the HTTP client")?,
            ),
            Mode::Hyper => {
                // reqwest's defaults, so that only reqwest's own work differs.
                let mut connector = HttpConnector::new();
                connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
                connector.set_nodelay(true);
                Http::Hyper(Box::new(
                    HyperClient::builder(TokioExecutor::new()).build(connector),
                ))
            }
        };
        let auth = token
            .map(|t| HeaderValue::from_str(&format!("Bearer {t}")))
            .transpose()
            .context("the token is not a valid header value")?;
        Ok(Driver::Raw(Raw {
            http,
            base: url.trim_end_matches('/').to_string(),
            auth,
        }))
    }

    /// Runs one operation of `plan.shape` for worker `worker`, its `seq`-th.
    pub async fn op(&self, plan: &Plan, worker: usize, seq: u64, deadline: Instant) -> Step {
        match self {
            Driver::Sdk(c) => sdk_op(c, plan, worker, seq, deadline).await,
            Driver::Raw(r) => r.op(plan, worker, seq, deadline).await,
        }
    }
}

/// A client for `url`.
pub(crate) fn sdk_client(
    url: &str,
    token: Option<&str>,
    retry: RetryPolicy,
) -> anyhow::Result<Client> {
    let mut b = Client::builder().url(url).retry(retry);
    if let Some(t) = token {
        b = b.token(t);
    }
    b.build().context("building the SDK client")
}

/// The long-poll of a pop that ends by the deadline.
fn pop_wait(deadline: Instant) -> Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .min(MAX_WAIT)
        .max(Duration::from_millis(1))
}

/// The key of a worker's `seq`-th synthetic op: unique in the run.
fn synthetic_key(worker: usize, seq: u64) -> String {
    format!("w{worker}-{seq}")
}

fn synthetic_partition(plan: &Plan, worker: usize, seq: u64) -> String {
    format!("p{}", (worker as u64 + seq) % plan.partitions as u64)
}

fn sdk_error(e: queen_sdk::Error) -> Outcome {
    use queen_sdk::Error as E;
    let kind = match &e {
        E::RolledBack { reason, .. } => return Outcome::RolledBack(reason.as_str().to_string()),
        E::Api { status, .. } => format!("http {status}"),
        E::Transport(_) => "transport".into(),
        E::Decode { .. } => "decode".into(),
        E::Invalid { .. } => "invalid".into(),
        _ => "other".into(),
    };
    Outcome::Error(kind, e.to_string())
}

async fn sdk_op(c: &Client, plan: &Plan, worker: usize, seq: u64, deadline: Instant) -> Step {
    let n = &plan.names;
    if plan.shape == Shape::Push {
        let key = synthetic_key(worker, seq);
        let item = PushItem::new(&n.input, &Event::new(&key, seq))
            .partition(synthetic_partition(plan, worker, seq))
            .transaction_id(format!("order-{key}-paid"));
        let t = Instant::now();
        let out = c.push(vec![item]).await;
        let commit = Some(t.elapsed());
        let outcome = match out {
            Ok(p) => match p.first().map(|p| p.status.as_str()) {
                Some("queued") => Outcome::Done,
                Some("duplicate") => Outcome::RolledBack("duplicate".into()),
                other => Outcome::Error("push status".into(), format!("{other:?}")),
            },
            Err(e) => sdk_error(e),
        };
        return Step {
            outcome,
            popped: 0,
            commit,
        };
    }
    if plan.shape == Shape::PushKv {
        let (outcome, commit) = timed_commit(push_kv_step(c, plan, worker, seq)).await;
        return Step {
            outcome,
            popped: 0,
            commit,
        };
    }
    if plan.shape.pops_only() {
        return sdk_pop(c, plan, worker).await;
    }
    let (msg, popped) = if plan.noop && !plan.noop_pop {
        let key = synthetic_key(worker, seq);
        let msg = Message {
            id: format!("m-{key}"),
            transaction_id: format!("order-{key}-paid"),
            data: Event::new(&key, seq),
            partition_id: "1".into(),
            partition: synthetic_partition(plan, worker, seq),
            lease_id: NOOP_LEASE.into(),
            consumer_group: QUEUE_MODE.into(),
            queue: n.input.clone(),
            offset: Some(seq),
            delivery_attempt: Some(1),
            trace_id: None,
            producer_sub: None,
            created_at: String::new(),
        };
        (msg, false)
    } else {
        let got = c
            .pop::<Event>(&n.input)
            .batch(1)
            .wait(pop_wait(deadline))
            .send()
            .await;
        match got {
            Ok(mut v) if !v.is_empty() => (v.swap_remove(0), true),
            Ok(_) => return Step::new(Outcome::Empty),
            Err(e) => return Step::new(sdk_error(e)),
        }
    };
    let o = &msg.data;
    let receipt = Receipt {
        order_id: &o.order_id,
        total: o.total,
    };
    let step = match plan.shape {
        Shape::AckPush => c
            .transaction()
            .ack(&msg)
            .push(&n.output, |p| p.partition(&msg.partition).payload(&receipt)),
        Shape::AckIncr => c
            .transaction()
            .ack(&msg)
            .kv(|k| k.incr(&n.orders_ns, &o.customer, 1, Ttl::Forever))
            .resend(if plan.no_step_marker {
                queen_sdk::Resend::Never
            } else {
                queen_sdk::Resend::Marked
            }),
        _ => c
            .transaction()
            .ack(&msg)
            .push(&n.receipts, |p| p.partition(&o.customer).payload(&receipt))
            .kv(|k| {
                k.put(
                    &n.orders_ns,
                    &o.order_id,
                    &Status { status: "paid" },
                    Ttl::days(30),
                )
            })
            .once(&n.paid_ns, format!("{}-paid", o.order_id), Ttl::days(1))
            .timer(&n.reminders, &o.order_id, |t| {
                t.after(Duration::from_secs(86_400)).payload(&OrderRef {
                    order_id: &o.order_id,
                })
            }),
    };
    let (outcome, commit) = timed_commit(step).await;
    Step {
        outcome,
        popped: u64::from(popped),
        commit,
    }
}

/// Commits an SDK transaction: its outcome and how long the call took.
async fn timed_commit(step: TransactionBuilder) -> (Outcome, Option<Duration>) {
    let t = Instant::now();
    let out = step.commit().await;
    let took = Some(t.elapsed());
    let outcome = match out {
        Ok(Commit::Committed(_)) => Outcome::Done,
        Ok(Commit::Gated { .. }) => Outcome::RolledBack("kv_precondition".into()),
        Err(e) => sdk_error(e),
    };
    (outcome, took)
}

/// The transaction of `push-kv`: one push of one item and one KV `put`.
fn push_kv_step(c: &Client, plan: &Plan, worker: usize, seq: u64) -> TransactionBuilder {
    let n = &plan.names;
    let key = synthetic_key(worker, seq);
    let e = Event::new(&key, seq);
    let receipt = Receipt {
        order_id: &e.order_id,
        total: e.total,
    };
    c.transaction()
        .push(&n.output, |p| {
            p.partition(synthetic_partition(plan, worker, seq))
                .transaction_id(format!("receipt-{key}"))
                .payload(&receipt)
        })
        .kv(|k| {
            k.put(
                &n.orders_ns,
                &e.order_id,
                &Status { status: "paid" },
                Ttl::days(30),
            )
        })
}

/// `pop` and `pop-ack` through the SDK: one wildcard pop of up to `plan.batch` messages
/// that does not wait (`autoAck` for `pop`; leased for `pop-ack`, then one batch ack of
/// everything it delivered, `completed`, under the lease).
async fn sdk_pop(c: &Client, plan: &Plan, worker: usize) -> Step {
    let mut pop = c.pop::<Event>(&plan.names.input).batch(plan.batch);
    if let Some(g) = plan.group(worker) {
        pop = pop.group(g).subscription(SubscriptionMode::All);
    }
    if plan.shape == Shape::Pop {
        pop = pop.auto_ack();
    }
    let t = Instant::now();
    let got = pop.send().await;
    let pop_took = t.elapsed();
    let msgs = match got {
        Ok(v) if !v.is_empty() => v,
        Ok(_) => return Step::new(Outcome::Empty),
        Err(e) => return Step::new(sdk_error(e)),
    };
    let popped = msgs.len() as u64;
    if plan.shape == Shape::Pop {
        return Step {
            outcome: Outcome::Done,
            popped,
            commit: Some(pop_took),
        };
    }
    let acks: Vec<(&Message<Event>, AckStatus)> =
        msgs.iter().map(|m| (m, AckStatus::Completed)).collect();
    let t = Instant::now();
    let out = c.ack_batch(&acks).await;
    let commit = Some(t.elapsed());
    let outcome = match out {
        Ok(v) => ack_verdicts(v.iter().map(|a| a.success), v.len(), acks.len()),
        Err(e) => sdk_error(e),
    };
    Step {
        outcome,
        popped,
        commit,
    }
}

/// The outcome of a batch ack of `sent` messages answered with `got` verdicts.
fn ack_verdicts(successes: impl Iterator<Item = bool>, got: usize, sent: usize) -> Outcome {
    if got != sent {
        return Outcome::Error(
            "decode".into(),
            format!("{got} ack verdicts for {sent} acks"),
        );
    }
    let refused = successes.filter(|ok| !ok).count();
    if refused > 0 {
        Outcome::RolledBack("ack_refused".into())
    } else {
        Outcome::Done
    }
}

/// An HTTP exchange's result: the status and body, or the outcome that ends the op.
type Exchange = Result<(StatusCode, Bytes), Outcome>;

impl Raw {
    /// One exchange: `method` on `url`, with a JSON `body` if any.
    async fn send(&self, method: Method, url: String, body: Option<String>) -> Exchange {
        let transport = |e: String| Outcome::Error("transport".into(), e);
        let (status, body) = match &self.http {
            Http::Reqwest(c) => {
                let mut req = c.request(method, url);
                if let Some(b) = body {
                    req = req
                        .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
                        .body(b);
                }
                if let Some(a) = &self.auth {
                    req = req.header(AUTHORIZATION, a.clone());
                }
                let res = req.send().await.map_err(|e| transport(e.to_string()))?;
                let status = res.status();
                let body = res.bytes().await.map_err(|e| transport(e.to_string()))?;
                (status, body)
            }
            Http::Hyper(c) => {
                let mut req = hyper::Request::builder()
                    .method(method)
                    .uri(url)
                    .header(USER_AGENT, HeaderValue::from_static("queen-load-hyper"));
                if body.is_some() {
                    req = req.header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
                }
                if let Some(a) = &self.auth {
                    req = req.header(AUTHORIZATION, a.clone());
                }
                let req = req
                    .body(Full::new(Bytes::from(body.unwrap_or_default())))
                    .map_err(|e| transport(e.to_string()))?;
                let exchange = async {
                    let res = c.request(req).await.map_err(|e| e.to_string())?;
                    let status = res.status();
                    let body = res.into_body().collect().await.map_err(|e| e.to_string())?;
                    Ok::<_, String>((status, body.to_bytes()))
                };
                tokio::time::timeout(REQUEST_TIMEOUT, exchange)
                    .await
                    .map_err(|_| transport("timed out".into()))?
                    .map_err(transport)?
            }
        };
        if !status.is_success() {
            return Err(Outcome::Error(
                format!("http {}", status.as_u16()),
                String::from_utf8_lossy(&body).into_owned(),
            ));
        }
        Ok((status, body))
    }

    async fn post(&self, path: &str, body: String) -> Exchange {
        self.send(Method::POST, format!("{}{path}", self.base), Some(body))
            .await
    }

    /// One long-polled pop of one message (`ack-push`, `seed-step`).
    async fn pop(&self, queue: &str, deadline: Instant) -> Result<Option<Popped>, Outcome> {
        let query = format!(
            "batch=1&wait=true&timeout={}",
            pop_wait(deadline).as_millis()
        );
        Ok(self.pop_with(queue, &query).await?.into_iter().next())
    }

    /// A wildcard pop of `queue` with `query`: the messages delivered (none when empty).
    async fn pop_with(&self, queue: &str, query: &str) -> Result<Vec<Popped>, Outcome> {
        let url = format!("{}/api/v1/pop/queue/{queue}?{query}", self.base);
        let (status, body) = self.send(Method::GET, url, None).await?;
        if status == StatusCode::NO_CONTENT || body.is_empty() {
            return Ok(Vec::new());
        }
        let pop: RawPop = serde_json::from_slice(&body)
            .map_err(|e| Outcome::Error("decode".into(), format!("pop answer: {e}")))?;
        if pop.success == Some(false) {
            return Err(Outcome::Error(
                "pop failed".into(),
                pop.error.unwrap_or_default(),
            ));
        }
        Ok(pop
            .messages
            .into_iter()
            .map(|m| Popped {
                transaction_id: m.transaction_id,
                partition_id: m.partition_id,
                lease_id: m.lease_id,
                consumer_group: m.consumer_group,
                partition: m.partition,
                data: m.data,
            })
            .collect())
    }

    /// `pop` and `pop-ack` over bare HTTP: the same pop as the SDK's (plus an explicit
    /// `wait=false`, the broker's default, which the SDK leaves out), then for `pop-ack`
    /// `POST /api/v1/ack/batch` with the body the SDK renders.
    async fn pop_op(&self, plan: &Plan, worker: usize) -> Step {
        let t = Instant::now();
        let msgs = match self
            .pop_with(&plan.names.input, &pop_query(plan, worker))
            .await
        {
            Ok(v) if !v.is_empty() => v,
            Ok(_) => return Step::new(Outcome::Empty),
            Err(o) => return Step::new(o),
        };
        let pop_took = t.elapsed();
        let popped = msgs.len() as u64;
        if plan.shape == Shape::Pop {
            return Step {
                outcome: Outcome::Done,
                popped,
                commit: Some(pop_took),
            };
        }
        let t = Instant::now();
        let out = self.post("/api/v1/ack/batch", ack_body(&msgs)).await;
        let commit = Some(t.elapsed());
        let outcome = match out {
            Ok((_, b)) => match serde_json::from_slice::<Vec<RawAck>>(&b) {
                Ok(v) => ack_verdicts(v.iter().map(|a| a.success), v.len(), msgs.len()),
                Err(e) => Outcome::Error("decode".into(), format!("ack answer: {e}")),
            },
            Err(o) => o,
        };
        Step {
            outcome,
            popped,
            commit,
        }
    }

    async fn op(&self, plan: &Plan, worker: usize, seq: u64, deadline: Instant) -> Step {
        let n = &plan.names;
        if plan.shape == Shape::Push {
            let key = synthetic_key(worker, seq);
            let e = Event::new(&key, seq);
            let body = format!(
                r#"{{"items":[{{"queue":{},"payload":{{"orderId":{},"customer":{},"total":{}}},"transactionId":{},"partition":{}}}]}}"#,
                js(&n.input),
                js(&e.order_id),
                js(&e.customer),
                e.total,
                js(&format!("order-{key}-paid")),
                js(&synthetic_partition(plan, worker, seq)),
            );
            let t = Instant::now();
            let out = self.post("/api/v1/push", body).await;
            let commit = Some(t.elapsed());
            let outcome = match out {
                Ok((_, b)) => match serde_json::from_slice::<Vec<RawPushed>>(&b) {
                    Ok(p) => match p.first().map(|p| p.status.as_str()) {
                        Some("queued") => Outcome::Done,
                        Some("duplicate") => Outcome::RolledBack("duplicate".into()),
                        other => Outcome::Error("push status".into(), format!("{other:?}")),
                    },
                    Err(e) => Outcome::Error("decode".into(), format!("push answer: {e}")),
                },
                Err(o) => o,
            };
            return Step {
                outcome,
                popped: 0,
                commit,
            };
        }
        if plan.shape.pops_only() {
            return self.pop_op(plan, worker).await;
        }
        let (body, popped) = if plan.shape == Shape::PushKv {
            (push_kv_body(plan, worker, seq), false)
        } else {
            let (msg, popped) = match self.popped(plan, worker, seq, deadline).await {
                Ok(m) => m,
                Err(step) => return step,
            };
            (step_body(plan, &msg), popped)
        };
        let t = Instant::now();
        let out = self.post("/api/v1/transaction", body).await;
        let commit = Some(t.elapsed());
        let outcome = match out {
            Ok((_, b)) => match serde_json::from_slice::<RawCommit>(&b) {
                Ok(RawCommit {
                    success: Some(true),
                    ..
                }) => Outcome::Done,
                Ok(RawCommit {
                    success: Some(false),
                    reason,
                }) => Outcome::RolledBack(reason.unwrap_or_else(|| "unknown".into())),
                Ok(_) => Outcome::Error("decode".into(), "an answer without success".into()),
                Err(e) => Outcome::Error("decode".into(), format!("transaction answer: {e}")),
            },
            Err(o) => o,
        };
        Step {
            outcome,
            popped: u64::from(popped),
            commit,
        }
    }

    /// The message a popping shape's step acks: popped from the input, or synthetic
    /// against the no-op without `--noop-pop`; whether it was popped.
    async fn popped(
        &self,
        plan: &Plan,
        worker: usize,
        seq: u64,
        deadline: Instant,
    ) -> Result<(Popped, bool), Step> {
        let n = &plan.names;
        let (msg, popped) = if plan.noop && !plan.noop_pop {
            let key = synthetic_key(worker, seq);
            let msg = Popped {
                transaction_id: format!("order-{key}-paid"),
                partition_id: "1".into(),
                lease_id: NOOP_LEASE.into(),
                consumer_group: QUEUE_MODE.into(),
                partition: synthetic_partition(plan, worker, seq),
                data: Event::new(&key, seq),
            };
            (msg, false)
        } else {
            match self.pop(&n.input, deadline).await {
                Ok(Some(m)) => (m, true),
                Ok(None) => return Err(Step::new(Outcome::Empty)),
                Err(o) => return Err(Step::new(o)),
            }
        };
        Ok((msg, popped))
    }
}

/// The body of `push-kv`, field for field what the SDK renders: one push of one item
/// and one KV `put`.
fn push_kv_body(plan: &Plan, worker: usize, seq: u64) -> String {
    let n = &plan.names;
    let key = synthetic_key(worker, seq);
    let e = Event::new(&key, seq);
    format!(
        r#"{{"operations":[{{"type":"push","items":[{{"queue":{},"partition":{},"transactionId":{},"payload":{{"orderId":{},"total":{}}}}}]}}],"kv":[{{"op":"put","ns":{},"key":{},"value":{{"status":"paid"}},"ttlSeconds":2592000}}]}}"#,
        js(&n.output),
        js(&synthetic_partition(plan, worker, seq)),
        js(&format!("receipt-{key}")),
        js(&e.order_id),
        e.total,
        js(&n.orders_ns),
        js(&e.order_id),
    )
}

/// The query of a `pop` or `pop-ack` pop: the SDK's parameters in the SDK's order
/// (`batch`, the group and its subscription mode, `autoAck`), then `wait=false`.
fn pop_query(plan: &Plan, worker: usize) -> String {
    let mut q = format!("batch={}", plan.batch);
    if let Some(g) = plan.group(worker) {
        let _ = write!(q, "&consumerGroup={g}&subscriptionMode=all");
    }
    if plan.shape == Shape::Pop {
        q.push_str("&autoAck=true");
    }
    q.push_str("&wait=false");
    q
}

/// The body of `POST /api/v1/ack/batch` completing every message of `msgs`, as the SDK
/// renders it (keys in order, `consumerGroup` also at the top when one group owns all).
fn ack_body(msgs: &[Popped]) -> String {
    let mut b = String::with_capacity(64 + 200 * msgs.len());
    b.push_str(r#"{"acknowledgments":["#);
    for (i, m) in msgs.iter().enumerate() {
        if i > 0 {
            b.push(',');
        }
        let lease = if m.lease_id.is_empty() {
            "null".to_string()
        } else {
            js(&m.lease_id)
        };
        let _ = write!(
            b,
            r#"{{"consumerGroup":{},"error":null,"leaseId":{lease},"partitionId":{},"status":"completed","transactionId":{}}}"#,
            js(&m.consumer_group),
            js(&m.partition_id),
            js(&m.transaction_id),
        );
    }
    b.push(']');
    if let Some(first) = msgs.first()
        && msgs
            .iter()
            .all(|m| m.consumer_group == first.consumer_group)
    {
        let _ = write!(b, r#","consumerGroup":{}"#, js(&first.consumer_group));
    }
    b.push('}');
    b
}

/// The transaction body of a popping shape, field for field what the SDK renders, with
/// the receipt's and the reminder's ids derived from the order as the seed does.
fn step_body(plan: &Plan, m: &Popped) -> String {
    let n = &plan.names;
    let o = &m.data;
    let order = js(&o.order_id);
    let lease = js(&m.lease_id);
    let mut b = String::with_capacity(1024);
    let _ = write!(
        b,
        r#"{{"operations":[{{"type":"ack","transactionId":{},"partitionId":{},"consumerGroup":{},"status":"completed","leaseId":{lease}}},"#,
        js(&m.transaction_id),
        js(&m.partition_id),
        js(&m.consumer_group),
    );
    if plan.shape == Shape::AckIncr {
        // The step without a marker: what a hand-written client sends.
        b.pop(); // the ack's trailing comma
        let _ = write!(
            b,
            r#"],"requiredLeases":[{lease}],"kv":[{{"op":"incr","ns":{},"key":{},"delta":1}}]}}"#,
            js(&n.orders_ns),
            js(&o.customer),
        );
        return b;
    }
    let (queue, partition) = match plan.shape {
        Shape::AckPush => (&n.output, &m.partition),
        _ => (&n.receipts, &o.customer),
    };
    let _ = write!(
        b,
        r#"{{"type":"push","items":[{{"queue":{},"partition":{},"transactionId":{},"payload":{{"orderId":{order},"total":{}}}}}]}}],"requiredLeases":[{lease}]"#,
        js(queue),
        js(partition),
        js(&format!("receipt-{}", o.order_id)),
        o.total,
    );
    if plan.shape == Shape::SeedStep {
        let reminder = B64.encode(format!(r#"{{"orderId":{order}}}"#));
        let _ = write!(
            b,
            r#","kv":[{{"op":"put","ns":{},"key":{order},"value":{{"status":"paid"}},"ttlSeconds":2592000}},{{"op":"putIfAbsent","ns":{},"key":{},"value":true,"ttlSeconds":86400,"required":true}}],"timers":[{{"op":"schedule","queue":{},"timerKey":{order},"delayMs":86400000,"payload":"{reminder}","txn":{}}}]"#,
            js(&n.orders_ns),
            js(&n.paid_ns),
            js(&format!("{}-paid", o.order_id)),
            js(&n.reminders),
            js(&format!("reminder-{}", o.order_id)),
        );
    }
    b.push('}');
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(shape: Shape) -> Plan {
        Plan {
            shape,
            names: Names::new("t"),
            partitions: 4,
            noop: false,
            noop_pop: false,
            batch: 1,
            groups: 0,
            no_step_marker: false,
        }
    }

    fn popped() -> Popped {
        Popped {
            transaction_id: "order-7-paid".into(),
            partition_id: "42".into(),
            lease_id: "L".into(),
            consumer_group: QUEUE_MODE.into(),
            partition: "p3".into(),
            data: Event::new("7", 123),
        }
    }

    #[test]
    fn the_raw_push_kv_body_is_the_sdks() {
        let c = Client::new("http://127.0.0.1:1").unwrap();
        let p = plan(Shape::PushKv);
        let sdk = push_kv_step(&c, &p, 3, 17).to_bytes().unwrap();
        assert_eq!(std::str::from_utf8(&sdk).unwrap(), push_kv_body(&p, 3, 17));
    }

    #[test]
    fn raw_bodies_are_json_of_the_seed_shape() {
        let b: serde_json::Value =
            serde_json::from_str(&step_body(&plan(Shape::SeedStep), &popped())).unwrap();
        assert_eq!(b["operations"][0]["leaseId"], "L");
        assert_eq!(b["requiredLeases"][0], "L");
        assert_eq!(b["operations"][1]["items"][0]["partition"], "customer-123");
        assert_eq!(b["kv"][1]["required"], true);
        assert_eq!(b["timers"][0]["txn"], "reminder-order-7");
        let p = B64
            .decode(b["timers"][0]["payload"].as_str().unwrap())
            .unwrap();
        assert_eq!(p, br#"{"orderId":"order-7"}"#);

        let b: serde_json::Value =
            serde_json::from_str(&step_body(&plan(Shape::AckPush), &popped())).unwrap();
        assert_eq!(b["operations"][1]["items"][0]["queue"], "load-out-t");
        assert_eq!(b["operations"][1]["items"][0]["partition"], "p3");
        assert!(b.get("kv").is_none());

        // `ack-incr` raw: the SDK's step without its marker.
        let b: serde_json::Value =
            serde_json::from_str(&step_body(&plan(Shape::AckIncr), &popped())).unwrap();
        assert_eq!(b["operations"].as_array().unwrap().len(), 1);
        assert_eq!(b["requiredLeases"][0], "L");
        assert_eq!(b["kv"][0]["op"], "incr");
        assert_eq!(b["kv"][0]["delta"], 1);
    }

    #[test]
    fn raw_pops_and_acks_are_what_the_sdk_sends() {
        let mut p = plan(Shape::Pop);
        p.batch = 10;
        assert_eq!(pop_query(&p, 5), "batch=10&autoAck=true&wait=false");
        p.shape = Shape::PopAck;
        p.groups = 4;
        assert_eq!(
            pop_query(&p, 5),
            "batch=10&consumerGroup=g1&subscriptionMode=all&wait=false"
        );

        let mut second = popped();
        second.transaction_id = "order-8-paid".into();
        let b: serde_json::Value = serde_json::from_str(&ack_body(&[popped(), second])).unwrap();
        let acks = b["acknowledgments"].as_array().unwrap();
        assert_eq!(acks.len(), 2);
        assert_eq!(acks[1]["transactionId"], "order-8-paid");
        assert_eq!(acks[0]["leaseId"], "L");
        assert_eq!(acks[0]["partitionId"], "42");
        assert_eq!(acks[0]["status"], "completed");
        assert_eq!(b["consumerGroup"], QUEUE_MODE);
    }

    /// The raw ack body is the SDK's, byte for byte.
    #[test]
    fn the_raw_ack_body_is_the_sdks() {
        let m = popped();
        let msg = Message {
            id: "m".into(),
            transaction_id: m.transaction_id.clone(),
            data: m.data.clone(),
            partition_id: m.partition_id.clone(),
            partition: m.partition.clone(),
            lease_id: m.lease_id.clone(),
            consumer_group: m.consumer_group.clone(),
            queue: "q".into(),
            offset: None,
            delivery_attempt: None,
            trace_id: None,
            producer_sub: None,
            created_at: String::new(),
        };
        let sdk = serde_json::json!({
            "acknowledgments": [{
                "transactionId": msg.transaction_id,
                "partitionId": msg.partition_id,
                "consumerGroup": msg.consumer_group,
                "leaseId": msg.lease_id,
                "status": "completed",
                "error": null,
            }],
            "consumerGroup": msg.consumer_group,
        });
        assert_eq!(ack_body(&[m]), serde_json::to_string(&sdk).unwrap());
    }
}
