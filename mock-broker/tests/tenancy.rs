//! Tenants learn nothing of each other, and a token changes only what its role allows
//! (SECURITY.md, issue 40).
//!
//! - [`every_route_keeps_another_tenants_state_and_a_low_role_out`]: one row per route
//!   of ROUTES.md (checked against its headings) and of `wire.md`. Tenant `acme` holds
//!   state of every kind; each route is then called by `globex` (an admin) naming
//!   `acme`'s queue, partition id, lease, message, KV row, timer, lock, trace, stream
//!   query and ephemeral delivery, and by `acme`'s own lower roles. None of `acme`'s
//!   secrets may appear in an answer, a role below the route's gets 403, and everything
//!   `acme` can read is the same after each call as before.
//! - [`another_tenants_operations_change_nothing_a_tenant_observes`]: a property test.
//!   Two brokers on the same manual clock run the same steps of tenant B; one of them
//!   also runs a random sequence of tenant A's. Every answer B gets (push offsets and
//!   partition ids, KV versions, pops, status figures, metrics) must be the same in
//!   both. `QUEEN_TENANCY_CASES` sets the case count (default 24).
//! - [`counters_are_counted_per_tenant`] and [`process_figures_are_for_admins_only`]:
//!   the two leaks the property test exists for, pinned directly.

use std::collections::{BTreeSet, HashMap};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use queen_mock_broker::auth::{Auth, Role};
use queen_mock_broker::clock::format_iso;
use queen_mock_broker::{Clock, ManualClock, MockBroker};
use reqwest::Method;
use serde_json::{Value, json};

/// 2026-12-04T00:00:00Z: every broker of this file starts on a manual clock here, so two
/// brokers given the same steps stamp the same times.
const T0: i64 = 1_796_342_400_000_000;

async fn broker() -> MockBroker {
    let auth = Auth::new()
        .token("a-ro", Role::ReadOnly, "acme", Some("acme-reader"))
        .token("a-rw", Role::ReadWrite, "acme", Some("acme-svc"))
        .token("a-admin", Role::Admin, "acme", Some("acme-ops"))
        .token("g-rw", Role::ReadWrite, "globex", Some("globex-svc"))
        .token("g-admin", Role::Admin, "globex", Some("globex-ops"));
    MockBroker::builder()
        .clock(ManualClock::starting_at(T0))
        .auth(auth)
        .start()
        .await
        .unwrap()
}

/// One answer: status and body text.
struct Answer {
    status: u16,
    text: String,
}

impl Answer {
    fn json(&self) -> Value {
        serde_json::from_str(&self.text).unwrap_or(Value::Null)
    }
}

async fn call(
    http: &reqwest::Client,
    b: &MockBroker,
    token: &str,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> Answer {
    let mut req = http
        .request(method, format!("{}{path}", b.url()))
        .bearer_auth(token);
    if let Some(body) = body {
        req = req.json(body);
    }
    let res = req.send().await.unwrap();
    let status = res.status().as_u16();
    Answer {
        status,
        text: res.text().await.unwrap(),
    }
}

// ---------------------------------------------------------------------------------
// The route table.
// ---------------------------------------------------------------------------------

/// The identifiers of `acme`'s state, put into the rows' paths and bodies.
struct Acme {
    /// The partition id of `orders/p`.
    pid: String,
    /// The live lease of group `billing` on it (message `o-2`).
    lease: String,
    /// The stream query's id.
    query: String,
    /// A delivery of the ephemeral queue `eq`.
    ephemeral: String,
    /// What must never reach another tenant.
    secrets: Vec<String>,
}

/// One route: its method and path as documented, the call made, and the role it needs.
struct Row {
    method: Method,
    /// As in ROUTES.md's heading (or `wire.md`).
    documented: &'static str,
    /// The call, with `PID`, `LEASE`, `QUERY` and `EPHEMERAL` standing for `acme`'s.
    path: &'static str,
    body: Option<Value>,
    needs: Role,
}

fn row(
    method: Method,
    documented: &'static str,
    path: &'static str,
    body: Option<Value>,
    needs: Role,
) -> Row {
    Row {
        method,
        documented,
        path,
        body,
        needs,
    }
}

/// Every route but `/health` (public), with a call naming `acme`'s state.
#[rustfmt::skip]
fn routes() -> Vec<Row> {
    use Method as M;
    use Role::{Admin, ReadOnly as Ro, ReadWrite as Rw};
    let ack = json!({"transactionId": "o-2", "partitionId": "PID", "leaseId": "LEASE", "consumerGroup": "billing"});
    vec![
        // wire.md: the routes around the transaction.
        row(M::POST, "/api/v1/configure", "/api/v1/configure", Some(json!({"queue": "orders", "options": {"retryLimit": 7}})), Rw),
        row(M::POST, "/api/v1/push", "/api/v1/push", Some(json!({"items": [{"queue": "orders", "partition": "p", "transactionId": "o-2", "payload": {"who": "intruder"}}]})), Rw),
        row(M::GET, "/api/v1/pop/queue/{queue}", "/api/v1/pop/queue/orders?consumerGroup=billing&subscriptionMode=all&autoAck=true", None, Rw),
        row(M::GET, "/api/v1/pop/queue/{queue}/partition/{partition}", "/api/v1/pop/queue/orders/partition/p?batch=10", None, Rw),
        row(M::GET, "/api/v1/pop", "/api/v1/pop?namespace=shop&batch=10", None, Rw),
        row(M::POST, "/api/v1/ack", "/api/v1/ack", Some(ack.clone()), Rw),
        row(M::POST, "/api/v1/ack/batch", "/api/v1/ack/batch", Some(json!({"acknowledgments": [ack.clone()]})), Rw),
        row(M::POST, "/api/v1/lease/{leaseId}/extend", "/api/v1/lease/LEASE/extend", Some(json!({"seconds": 600})), Rw),
        row(M::POST, "/api/v1/transaction", "/api/v1/transaction", Some(json!({"operations": [{"type": "ack", "transactionId": "o-2", "partitionId": "PID", "leaseId": "LEASE", "consumerGroup": "billing"}], "requiredLeases": ["LEASE"], "kv": [{"op": "put", "ns": "n", "key": "k", "value": "intruder", "forever": true}]})), Rw),
        row(M::POST, "/api/v1/consumer-groups/{group}/queues/{queue}/seek", "/api/v1/consumer-groups/billing/queues/orders/seek", Some(json!({"toEnd": true})), Rw),
        row(M::POST, "/api/v1/consumer-groups/{group}/queues/{queue}/partitions/{partition}/seek", "/api/v1/consumer-groups/billing/queues/orders/partitions/p/seek", Some(json!({"toEnd": true})), Rw),
        row(M::POST, "/api/v1/kv", "/api/v1/kv", Some(json!({"operations": [{"op": "getMany", "ns": "n", "keys": ["k"]}, {"op": "incr", "ns": "n", "key": "k", "delta": 1, "forever": true}]})), Rw),
        row(M::GET, "/api/v1/kv/{ns}/{key}", "/api/v1/kv/n/k", None, Ro),
        row(M::PUT, "/api/v1/kv/{ns}/{key}", "/api/v1/kv/n/k", Some(json!({"value": "intruder", "forever": true})), Rw),
        row(M::DELETE, "/api/v1/kv/{ns}/{key}", "/api/v1/kv/n/k", None, Rw),
        row(M::POST, "/api/v1/timers", "/api/v1/timers", Some(json!({"operations": [{"op": "cancel", "queue": "t", "timerKey": "k"}]})), Rw),
        row(M::GET, "/api/v1/timers/{queue}", "/api/v1/timers/t", None, Ro),
        row(M::GET, "/api/v1/timers/{queue}/{*timerKey}", "/api/v1/timers/t/k", None, Ro),
        row(M::DELETE, "/api/v1/timers/{queue}/{timerKey}", "/api/v1/timers/t/k", None, Rw),
        row(M::POST, "/api/v1/locks", "/api/v1/locks", Some(json!({"operations": [{"op": "get", "name": "l"}, {"op": "acquire", "name": "l", "ttlSeconds": 60}]})), Rw),
        // ROUTES.md 1: resources.
        row(M::GET, "/api/v1/resources/queues", "/api/v1/resources/queues", None, Ro),
        row(M::GET, "/api/v1/resources/queues/{queue}", "/api/v1/resources/queues/orders", None, Ro),
        row(M::DELETE, "/api/v1/resources/queues/{queue}", "/api/v1/resources/queues/orders", None, Admin),
        row(M::GET, "/api/v1/resources/queues/{queue}/depth", "/api/v1/resources/queues/orders/depth", None, Ro),
        row(M::GET, "/api/v1/resources/namespaces", "/api/v1/resources/namespaces", None, Ro),
        row(M::GET, "/api/v1/resources/tasks", "/api/v1/resources/tasks", None, Ro),
        row(M::GET, "/api/v1/resources/partitions", "/api/v1/resources/partitions?queue=orders", None, Ro),
        row(M::GET, "/api/v1/resources/overview", "/api/v1/resources/overview", None, Ro),
        // 2: status, analytics, stats, metrics.
        row(M::GET, "/api/v1/status", "/api/v1/status", None, Ro),
        row(M::GET, "/api/v1/status/queues", "/api/v1/status/queues", None, Ro),
        row(M::GET, "/api/v1/status/queues/{queue}", "/api/v1/status/queues/orders", None, Ro),
        row(M::GET, "/api/v1/status/analytics", "/api/v1/status/analytics?interval=minute&queue=orders", None, Ro),
        row(M::GET, "/api/v1/analytics/worker-metrics", "/api/v1/analytics/worker-metrics", None, Ro),
        row(M::GET, "/api/v1/analytics/system-metrics", "/api/v1/analytics/system-metrics", None, Admin),
        row(M::POST, "/api/v1/stats/refresh", "/api/v1/stats/refresh", None, Ro),
        row(M::GET, "/metrics", "/metrics", None, Ro),
        // 3: messages.
        row(M::GET, "/api/v1/messages", "/api/v1/messages?queue=orders", None, Ro),
        row(M::GET, "/api/v1/messages/{partitionId}/{transactionId}", "/api/v1/messages/PID/o-2", None, Ro),
        row(M::POST, "/api/v1/messages/{partitionId}/{transactionId}/retry", "/api/v1/messages/PID/o-1/retry", None, Rw),
        row(M::DELETE, "/api/v1/messages/{partitionId}/{transactionId}", "/api/v1/messages/PID/o-3", None, Rw),
        // 4: consumer groups.
        row(M::GET, "/api/v1/consumer-groups", "/api/v1/consumer-groups", None, Ro),
        row(M::GET, "/api/v1/consumer-groups/{group}", "/api/v1/consumer-groups/billing", None, Ro),
        row(M::GET, "/api/v1/consumer-groups/lagging", "/api/v1/consumer-groups/lagging?minLagSeconds=0", None, Ro),
        row(M::POST, "/api/v1/consumer-groups/{group}/subscription", "/api/v1/consumer-groups/billing/subscription", Some(json!({"subscriptionTimestamp": "2020-01-01T00:00:00Z"})), Rw),
        row(M::DELETE, "/api/v1/consumer-groups/{group}/queues/{queue}", "/api/v1/consumer-groups/billing/queues/orders", None, Admin),
        row(M::DELETE, "/api/v1/consumer-groups/{group}", "/api/v1/consumer-groups/billing", None, Admin),
        row(M::GET, "/api/v1/dlq", "/api/v1/dlq?queue=orders", None, Ro),
        // 5: reads by offset and partition discovery.
        row(M::POST, "/api/v1/fetch", "/api/v1/fetch", Some(json!({"entries": [{"queue": "orders", "partition": "p", "offset": 0}]})), Ro),
        row(M::POST, "/api/v1/partitions/changed", "/api/v1/partitions/changed", Some(json!({"entries": [{"queue": "orders"}]})), Ro),
        // 7: traces.
        row(M::POST, "/api/v1/traces", "/api/v1/traces", Some(json!({"transactionId": "o-2", "partitionId": "PID", "traceNames": ["acme-trace"], "data": {"who": "intruder"}})), Rw),
        row(M::GET, "/api/v1/traces/{partitionId}/{transactionId}", "/api/v1/traces/PID/o-2", None, Ro),
        row(M::GET, "/api/v1/traces/names", "/api/v1/traces/names", None, Ro),
        row(M::GET, "/api/v1/traces/by-name/{name}", "/api/v1/traces/by-name/acme-trace", None, Ro),
        // 8: ephemeral queues.
        row(M::POST, "/api/v1/ephemeral/configure", "/api/v1/ephemeral/configure", Some(json!({"queue": "eq", "options": {"maxLength": 1}})), Rw),
        row(M::POST, "/api/v1/ephemeral/push", "/api/v1/ephemeral/push", Some(json!({"queue": "eq", "messages": [{"payload": {"who": "intruder"}}]})), Rw),
        row(M::GET, "/api/v1/ephemeral/pop", "/api/v1/ephemeral/pop?queue=eq&batch=10", None, Rw),
        row(M::POST, "/api/v1/ephemeral/ack", "/api/v1/ephemeral/ack", Some(json!({"queue": "eq", "acks": [{"id": "EPHEMERAL"}]})), Rw),
        row(M::POST, "/api/v1/ephemeral/reset", "/api/v1/ephemeral/reset", Some(json!({"queue": "eq"})), Rw),
        row(M::DELETE, "/api/v1/ephemeral/queue/{queue}", "/api/v1/ephemeral/queue/eq", None, Rw),
        row(M::GET, "/api/v1/ephemeral/queues", "/api/v1/ephemeral/queues", None, Ro),
        row(M::GET, "/api/v1/ephemeral/queues/{queue}/depth", "/api/v1/ephemeral/queues/eq/depth", None, Ro),
        // 9: the stream runner.
        row(M::POST, "/streams/v1/queries", "/streams/v1/queries", Some(json!({"name": "sq", "source_queue": "orders", "config_hash": "other", "reset": true})), Rw),
        row(M::POST, "/streams/v1/cycle", "/streams/v1/cycle", Some(json!({"query_id": "QUERY", "partition_id": "PID", "state_ops": [{"type": "delete", "key": "w"}]})), Rw),
        row(M::POST, "/streams/v1/claim", "/streams/v1/claim", Some(json!({"query_id": "QUERY", "partition_ids": ["PID"]})), Rw),
        row(M::POST, "/streams/v1/state/get", "/streams/v1/state/get", Some(json!({"query_id": "QUERY", "partition_id": "PID"})), Ro),
        row(M::POST, "/streams/v1/state/partitions", "/streams/v1/state/partitions", Some(json!({"query_id": "QUERY"})), Ro),
        // 10: the console's reads.
        row(M::GET, "/api/v1/kv", "/api/v1/kv", None, Ro),
        row(M::GET, "/api/v1/kv/{ns}", "/api/v1/kv/n?prefix=&limit=10", None, Ro),
        row(M::GET, "/api/v1/timers", "/api/v1/timers", None, Ro),
        row(M::GET, "/api/v1/transactions", "/api/v1/transactions?limit=10", None, Ro),
        row(M::GET, "/api/v1/timer-log", "/api/v1/timer-log?limit=10", None, Ro),
        row(M::GET, "/console/whoami", "/console/whoami", None, Ro),
    ]
}

/// `text` with `acme`'s identifiers in place of their stand-ins.
fn fill(text: &str, acme: &Acme) -> String {
    text.replace("PID", &acme.pid)
        .replace("LEASE", &acme.lease)
        .replace("QUERY", &acme.query)
        .replace("EPHEMERAL", &acme.ephemeral)
}

fn fill_body(body: &Option<Value>, acme: &Acme) -> Option<Value> {
    body.as_ref()
        .map(|b| serde_json::from_str(&fill(&b.to_string(), acme)).unwrap())
}

/// The routes ROUTES.md's section headings name, as `METHOD path` (query strings cut).
fn documented_routes() -> BTreeSet<String> {
    let page = include_str!("../ROUTES.md");
    let mut out = BTreeSet::new();
    for line in page.lines().filter(|l| l.starts_with("### ")) {
        for (i, part) in line.split('`').enumerate() {
            if i % 2 == 0 {
                continue;
            }
            let Some((method, path)) = part.split_once(' ') else {
                continue;
            };
            if ["GET", "POST", "PUT", "DELETE"].contains(&method) {
                let path = path.split('?').next().unwrap();
                out.insert(format!("{method} {path}"));
            }
        }
    }
    out
}

#[test]
fn the_route_table_covers_every_route_routes_md_names() {
    let table: BTreeSet<String> = routes()
        .iter()
        .map(|r| format!("{} {}", r.method, r.documented))
        .collect();
    let documented = documented_routes();
    assert!(
        documented.len() >= 40,
        "the headings were not read: {documented:?}"
    );
    let missing: Vec<_> = documented
        .iter()
        .filter(|r| !table.contains(*r) && r.as_str() != "GET /health")
        .collect();
    assert!(missing.is_empty(), "routes without a row: {missing:?}");
}

/// `acme` builds up state of every kind; answers its identifiers.
async fn set_up_acme(http: &reqwest::Client, b: &MockBroker) -> Acme {
    let a = "a-admin";
    let ok = |what: &str, r: &Answer| {
        assert!(
            (200..300).contains(&r.status),
            "{what}: {} {}",
            r.status,
            r.text
        );
        r.json()
    };
    let configure = json!({"queue": "orders", "namespace": "shop", "options": {"retryLimit": 0}});
    ok(
        "configure",
        &call(
            http,
            b,
            a,
            Method::POST,
            "/api/v1/configure",
            Some(&configure),
        )
        .await,
    );
    let items: Vec<Value> = (1..=4)
        .map(|i| json!({"queue": "orders", "partition": "p", "transactionId": format!("o-{i}"), "payload": {"secret": "acme-payload"}}))
        .collect();
    ok(
        "push",
        &call(
            http,
            b,
            a,
            Method::POST,
            "/api/v1/push",
            Some(&json!({"items": items})),
        )
        .await,
    );
    let pop =
        "/api/v1/pop/queue/orders/partition/p?batch=1&consumerGroup=billing&subscriptionMode=all";
    let first = ok("pop", &call(http, b, a, Method::GET, pop, None).await);
    let pid = first["partitionId"].as_str().unwrap().to_string();
    let dead = json!({"transactionId": "o-1", "partitionId": pid, "leaseId": first["leaseId"], "consumerGroup": "billing", "status": "failed", "error": "acme-error"});
    ok(
        "dead letter",
        &call(http, b, a, Method::POST, "/api/v1/ack", Some(&dead)).await,
    );
    let second = ok("pop", &call(http, b, a, Method::GET, pop, None).await);
    assert_eq!(second["messages"][0]["transactionId"], "o-2");
    let lease = second["leaseId"].as_str().unwrap().to_string();
    let kv = json!({"operations": [{"op": "put", "ns": "n", "key": "k", "value": "acme-kv", "forever": true}]});
    ok(
        "kv",
        &call(http, b, a, Method::POST, "/api/v1/kv", Some(&kv)).await,
    );
    // A call for the transaction log: its KV key and timer are acme's names.
    let logged = json!({"kv": [{"op": "put", "ns": "n", "key": "acme-txn-key", "value": 1, "forever": true}],
        "timers": [{"op": "schedule", "queue": "acme-txn-timers", "timerKey": "acme-txn-timer", "payload": B64.encode(b"1"), "delayMs": 600_000}]});
    let committed = ok(
        "transaction",
        &call(
            http,
            b,
            a,
            Method::POST,
            "/api/v1/transaction",
            Some(&logged),
        )
        .await,
    );
    assert_eq!(committed["success"], true, "{committed}");
    let timer_payload = B64.encode(br#"{"secret":"acme-timer"}"#);
    let timers = json!({"operations": [{"op": "schedule", "queue": "t", "timerKey": "k", "delayMs": 600_000, "payload": timer_payload}]});
    ok(
        "timer",
        &call(http, b, a, Method::POST, "/api/v1/timers", Some(&timers)).await,
    );
    let locks = json!({"operations": [{"op": "acquire", "name": "l", "ttlSeconds": 600}]});
    let lock = ok(
        "lock",
        &call(http, b, a, Method::POST, "/api/v1/locks", Some(&locks)).await,
    );
    assert_eq!(lock["results"][0]["acquired"], true, "{lock}");
    let trace = json!({"transactionId": "o-2", "partitionId": pid, "consumerGroup": "billing", "traceNames": ["acme-trace"], "data": {"secret": "acme-trace-data"}});
    ok(
        "trace",
        &call(http, b, a, Method::POST, "/api/v1/traces", Some(&trace)).await,
    );
    let eph = json!({"queue": "eq", "messages": [{"payload": {"secret": "acme-eph"}}, {"payload": {"secret": "acme-eph"}}]});
    ok(
        "ephemeral push",
        &call(
            http,
            b,
            a,
            Method::POST,
            "/api/v1/ephemeral/push",
            Some(&eph),
        )
        .await,
    );
    let delivered = ok(
        "ephemeral pop",
        &call(
            http,
            b,
            a,
            Method::GET,
            "/api/v1/ephemeral/pop?queue=eq",
            None,
        )
        .await,
    );
    let ephemeral = delivered["messages"][0]["id"].as_str().unwrap().to_string();
    let query = json!({"name": "sq", "source_queue": "orders", "config_hash": "h"});
    let registered = ok(
        "stream query",
        &call(
            http,
            b,
            a,
            Method::POST,
            "/streams/v1/queries",
            Some(&query),
        )
        .await,
    );
    let query = registered["query_id"].as_str().unwrap().to_string();
    let cycle = json!({"query_id": query, "partition_id": pid, "consumer_group": "streams.sq", "state_ops": [{"type": "upsert", "key": "w", "value": {"secret": "acme-state"}}]});
    ok(
        "stream cycle",
        &call(http, b, a, Method::POST, "/streams/v1/cycle", Some(&cycle)).await,
    );
    let first_lease = first["leaseId"].as_str().unwrap().to_string();
    Acme {
        secrets: vec![
            "acme".into(),
            timer_payload,
            lease.clone(),
            first_lease,
            query.clone(),
        ],
        pid,
        lease,
        query,
        ephemeral,
    }
}

/// Everything `acme` can read of its state, through a `read-write` token (which sees no
/// process-wide figure, so another tenant's traffic cannot move this).
async fn acme_view(
    http: &reqwest::Client,
    b: &MockBroker,
    acme: &Acme,
) -> Vec<(String, u16, String)> {
    let mut out = Vec::new();
    for r in routes() {
        if r.needs != Role::ReadOnly {
            continue;
        }
        let path = fill(r.path, acme);
        let body = fill_body(&r.body, acme);
        let a = call(http, b, "a-rw", r.method.clone(), &path, body.as_ref()).await;
        out.push((format!("{} {path}", r.method), a.status, a.text));
    }
    let locks = json!({"operations": [{"op": "get", "name": "l"}]});
    let a = call(http, b, "a-rw", Method::POST, "/api/v1/locks", Some(&locks)).await;
    out.push(("lock l".into(), a.status, a.text));
    out
}

fn first_difference(
    before: &[(String, u16, String)],
    after: &[(String, u16, String)],
) -> Option<String> {
    before
        .iter()
        .zip(after)
        .find(|(x, y)| x != y)
        .map(|(x, y)| format!("{}: before {} {}\n  after {} {}", x.0, x.1, x.2, y.1, y.2))
}

#[tokio::test]
async fn every_route_keeps_another_tenants_state_and_a_low_role_out() {
    let b = broker().await;
    let http = reqwest::Client::new();
    let acme = set_up_acme(&http, &b).await;
    let before = acme_view(&http, &b, &acme).await;
    assert!(
        before.iter().any(|(_, _, t)| t.contains("acme-payload")),
        "acme reads its own messages"
    );
    for r in routes() {
        let path = fill(r.path, &acme);
        let body = fill_body(&r.body, &acme);
        let what = format!("{} {path}", r.method);
        // Another tenant, at the highest role, naming acme's state.
        let g = call(&http, &b, "g-admin", r.method.clone(), &path, body.as_ref()).await;
        assert!(g.status < 500, "{what} as globex: {} {}", g.status, g.text);
        let sent = format!("{path} {body:?}");
        // What the caller sent may come back (an extension echoes its lease id).
        for secret in acme.secrets.iter().filter(|s| !sent.contains(s.as_str())) {
            assert!(
                !g.text.contains(secret.as_str()),
                "{what} as globex shows acme's {secret:?}: {}",
                g.text
            );
        }
        // acme's own tokens below the route's role.
        for (token, role) in [("a-ro", Role::ReadOnly), ("a-rw", Role::ReadWrite)] {
            if role < r.needs {
                let a = call(&http, &b, token, r.method.clone(), &path, body.as_ref()).await;
                assert_eq!(a.status, 403, "{what} with {token}: {}", a.text);
                assert_eq!(a.json()["code"], "forbidden", "{what} with {token}");
            } else if r.needs == Role::ReadOnly && token == "a-ro" {
                let a = call(&http, &b, token, r.method.clone(), &path, body.as_ref()).await;
                assert!(
                    (200..300).contains(&a.status),
                    "{what} with {token}: {} {}",
                    a.status,
                    a.text
                );
            }
        }
        let after = acme_view(&http, &b, &acme).await;
        if let Some(diff) = first_difference(&before, &after) {
            panic!(
                "{what} (as globex, or by a lower role of acme) changed what acme reads: {diff}"
            );
        }
    }
    b.shutdown().await;
}

// ---------------------------------------------------------------------------------
// The counters and the process's figures.
// ---------------------------------------------------------------------------------

#[tokio::test]
async fn counters_are_counted_per_tenant() {
    let b = broker().await;
    let http = reqwest::Client::new();
    let put = |key: &str| json!({"operations": [{"op": "put", "ns": "n", "key": key, "value": 1, "forever": true}]});
    let version = async |token: &str, key: &str| -> u64 {
        let a = call(
            &http,
            &b,
            token,
            Method::POST,
            "/api/v1/kv",
            Some(&put(key)),
        )
        .await;
        a.json()["results"][0]["version"].as_u64().unwrap()
    };
    // A new queue's partition id, as its first pop reads it.
    let pid = async |token: &str, queue: &str| -> u64 {
        let push = json!({"items": [{"queue": queue, "payload": 1}]});
        call(&http, &b, token, Method::POST, "/api/v1/push", Some(&push)).await;
        let path = format!("/api/v1/pop/queue/{queue}");
        let pop = call(&http, &b, token, Method::GET, &path, None).await;
        let id = pop.json()["partitionId"].as_str().map(str::to_string);
        id.unwrap_or_else(|| panic!("{}", pop.text))
            .parse()
            .unwrap()
    };
    let (v1, p1) = (version("g-rw", "x").await, pid("g-rw", "g1").await);
    for i in 0..5 {
        version("a-rw", &format!("k{i}")).await;
        pid("a-rw", &format!("a{i}")).await;
    }
    let (v2, p2) = (version("g-rw", "y").await, pid("g-rw", "g2").await);
    assert_eq!(
        v2,
        v1 + 1,
        "acme's five writes do not show in globex's versions"
    );
    assert_eq!(
        p2,
        p1 + 1,
        "nor its five partitions in globex's partition ids"
    );
    b.shutdown().await;
}

#[tokio::test]
async fn process_figures_are_for_admins_only() {
    let b = broker().await;
    let http = reqwest::Client::new();
    call(
        &http,
        &b,
        "a-rw",
        Method::POST,
        "/api/v1/push",
        Some(&json!({"items": [{"queue": "q", "payload": 1}]})),
    )
    .await;
    for (token, admin) in [("g-rw", false), ("g-admin", true)] {
        let m = call(&http, &b, token, Method::GET, "/metrics", None)
            .await
            .json();
        for figure in [
            &m["database"]["commits"],
            &m["database"]["commands"],
            &m["database"]["liveBytes"],
            &m["memory"]["rss"],
            &m["cpu"]["user"],
        ] {
            assert_eq!(figure.is_u64(), admin, "{token}: {m}");
            assert_eq!(figure.is_null(), !admin, "{token}: {m}");
        }
        assert_eq!(
            m["database"]["status"], "healthy",
            "the storage's health is for all"
        );
        for path in ["/api/v1/status", "/api/v1/analytics/worker-metrics"] {
            let s = call(&http, &b, token, Method::GET, path, None).await.json();
            let worker = &s["workers"][0];
            assert_eq!(
                worker["commits"].is_u64(),
                admin,
                "{token} {path}: {worker}"
            );
            assert_eq!(
                worker["commands"].is_null(),
                !admin,
                "{token} {path}: {worker}"
            );
            // The host's name and the process id tell where the broker runs: an
            // operator's business, not a tenant's.
            for detail in ["hostname", "workerId"] {
                assert_eq!(
                    worker[detail].is_string(),
                    admin,
                    "{token} {path}: {worker}"
                );
                assert_eq!(worker[detail].is_null(), !admin, "{token} {path}: {worker}");
            }
        }
        let sys = call(
            &http,
            &b,
            token,
            Method::GET,
            "/api/v1/analytics/system-metrics",
            None,
        )
        .await;
        assert_eq!(
            sys.status,
            if admin { 200 } else { 403 },
            "{token}: {}",
            sys.text
        );
    }
    b.shutdown().await;
}

/// The 74 bits of a UUIDv7 after its millisecond, and the millisecond.
fn v7_parts(id: &str) -> (u64, u128) {
    let v = u128::from_str_radix(&id.replace('-', ""), 16).unwrap_or_else(|_| panic!("{id}"));
    assert_eq!((v >> 76) & 0xF, 7, "not a UUIDv7: {id}");
    let ms = (v >> 80) as u64;
    ((ms), (((v >> 64) & 0xFFF) << 62) | (v & ((1 << 62) - 1)))
}

/// The probe of issue 52 through the API: in each round `acme` sends two pushes of one
/// message to one partition while `globex` sends two pushes of `k` messages, all at
/// once, so the writer mints them in one batch, in one millisecond. With the
/// process-wide counter the gap between acme's two ids was 1 + globex's ids minted in
/// between (in units of 2^32 of the 74 bits after the millisecond); now a partition's
/// ids step from its own last id by a random step of at most 2^32, so acme's gap is one
/// step whatever globex did, and acme's ids still sort in offset order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minted_ids_tell_nothing_of_another_tenants_traffic() {
    let b = broker().await;
    let http = reqwest::Client::new();
    let push = |token: &'static str, queue: &'static str, n: usize| {
        let items: Vec<Value> = (0..n)
            .map(|i| json!({"queue": queue, "payload": i}))
            .collect();
        let body = json!({ "items": items });
        let (http, b) = (&http, &b);
        async move {
            let a = call(http, b, token, Method::POST, "/api/v1/push", Some(&body)).await;
            assert_eq!(a.status, 201, "{}", a.text);
            let first = &a.json()[0];
            let id = first["message_id"]
                .as_str()
                .unwrap_or_else(|| panic!("{}", a.text))
                .to_string();
            (id, first["offset"].as_u64().unwrap_or_default())
        }
    };
    let mut gaps = Vec::new();
    for round in 0..300 {
        let k = 1 + round % 8;
        let ((a1, o1), _, _, (a2, o2)) = tokio::join!(
            push("a-rw", "mine", 1),
            push("g-rw", "noise", k),
            push("g-rw", "noise", k),
            push("a-rw", "mine", 1),
        );
        assert_eq!(
            a1 < a2,
            o1 < o2,
            "ids out of offset order: {a1}@{o1} {a2}@{o2}"
        );
        let ((ms1, r1), (ms2, r2)) = (v7_parts(&a1), v7_parts(&a2));
        if ms1 == ms2 {
            gaps.push((k, r1.abs_diff(r2)));
        }
    }
    assert!(
        gaps.len() >= 10,
        "only {} pairs of acme's ids fell in one millisecond: nothing to measure",
        gaps.len()
    );
    let moved: Vec<_> = gaps.iter().filter(|(_, g)| *g > (1 << 32) + 1).collect();
    assert!(
        moved.is_empty(),
        "of {} gaps, these count globex's ids: {moved:?}",
        gaps.len()
    );
    b.shutdown().await;
}

// ---------------------------------------------------------------------------------
// The property: tenant A's operations leave everything tenant B observes unchanged.
// ---------------------------------------------------------------------------------

/// One operation of a tenant, on small name spaces so that operations meet.
#[derive(Debug, Clone)]
enum Op {
    Configure {
        queue: u8,
        retry_limit: u8,
    },
    Push {
        queue: u8,
        partition: u8,
        count: u8,
    },
    PopAck {
        queue: u8,
        group: u8,
        verdict: u8,
    },
    Transaction {
        queue: u8,
        key: u8,
    },
    Kv {
        key: u8,
        kind: u8,
    },
    Timer {
        key: u8,
        delay_s: u16,
    },
    Lock {
        name: u8,
    },
    Ephemeral {
        queue: u8,
    },
    DeleteQueue {
        queue: u8,
    },
    /// Reads: the tenant's status, metrics, resources, DLQ and a fetch.
    Look,
}

/// Who takes a step: a tenant, or the clock (moved in both worlds).
#[derive(Debug, Clone)]
enum Step {
    A(Op),
    B(Op),
    Tick(u16),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3u8, 0..3u8).prop_map(|(queue, retry_limit)| Op::Configure { queue, retry_limit }),
        (0..3u8, 0..3u8, 1..4u8).prop_map(|(queue, partition, count)| Op::Push {
            queue,
            partition,
            count
        }),
        (0..3u8, 0..2u8, 0..3u8).prop_map(|(queue, group, verdict)| Op::PopAck {
            queue,
            group,
            verdict
        }),
        (0..3u8, 0..3u8).prop_map(|(queue, key)| Op::Transaction { queue, key }),
        (0..3u8, 0..3u8).prop_map(|(key, kind)| Op::Kv { key, kind }),
        (0..3u8, 0..120u16).prop_map(|(key, delay_s)| Op::Timer { key, delay_s }),
        (0..2u8).prop_map(|name| Op::Lock { name }),
        (0..2u8).prop_map(|queue| Op::Ephemeral { queue }),
        (0..3u8).prop_map(|queue| Op::DeleteQueue { queue }),
        Just(Op::Look),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => op().prop_map(Step::A),
        3 => op().prop_map(Step::B),
        1 => (1..90u16).prop_map(Step::Tick),
    ]
}

/// What one tenant sends for `op`: its calls, in order. Both tenants use the same names,
/// so every operation of A lands on the names B uses.
struct Tenant {
    rw: &'static str,
    admin: &'static str,
    /// Transaction ids and KV values are numbered per tenant, so B's are the same in
    /// both worlds.
    next: u64,
}

impl Tenant {
    async fn run(&mut self, http: &reqwest::Client, b: &MockBroker, op: &Op) -> Vec<String> {
        self.next += 1;
        let n = self.next;
        let mut seen = Vec::new();
        let mut say = |a: Answer| seen.push(format!("{} {}", a.status, a.text));
        match *op {
            Op::Configure { queue, retry_limit } => {
                let body =
                    json!({"queue": format!("q{queue}"), "options": {"retryLimit": retry_limit}});
                say(call(
                    http,
                    b,
                    self.rw,
                    Method::POST,
                    "/api/v1/configure",
                    Some(&body),
                )
                .await);
            }
            Op::Push {
                queue,
                partition,
                count,
            } => {
                let items: Vec<Value> = (0..count)
                    .map(|i| json!({"queue": format!("q{queue}"), "partition": format!("p{partition}"), "transactionId": format!("t{n}-{i}"), "payload": {"n": n}}))
                    .collect();
                say(call(
                    http,
                    b,
                    self.rw,
                    Method::POST,
                    "/api/v1/push",
                    Some(&json!({"items": items})),
                )
                .await);
            }
            Op::PopAck {
                queue,
                group,
                verdict,
            } => {
                let path = format!(
                    "/api/v1/pop/queue/q{queue}?batch=2&consumerGroup=g{group}&subscriptionMode=all"
                );
                let pop = call(http, b, self.rw, Method::GET, &path, None).await;
                let msgs = pop.json()["messages"].clone();
                say(pop);
                if let Some(msgs) = msgs.as_array() {
                    let status = ["completed", "failed", "retry"][verdict as usize];
                    let acks: Vec<Value> = msgs
                        .iter()
                        .map(|m| json!({"transactionId": m["transactionId"], "partitionId": m["partitionId"], "leaseId": m["leaseId"], "consumerGroup": format!("g{group}"), "status": status}))
                        .collect();
                    let body = json!({"acknowledgments": acks});
                    say(call(
                        http,
                        b,
                        self.rw,
                        Method::POST,
                        "/api/v1/ack/batch",
                        Some(&body),
                    )
                    .await);
                }
            }
            Op::Transaction { queue, key } => {
                let body = json!({
                    "operations": [{"type": "push", "items": [{"queue": format!("q{queue}"), "transactionId": format!("x{n}"), "payload": {"n": n}}]}],
                    "kv": [{"op": "incr", "ns": "n", "key": format!("k{key}"), "delta": 1, "forever": true}]
                });
                say(call(
                    http,
                    b,
                    self.rw,
                    Method::POST,
                    "/api/v1/transaction",
                    Some(&body),
                )
                .await);
            }
            Op::Kv { key, kind } => {
                let key = format!("k{key}");
                match kind {
                    0 => {
                        let body = json!({"value": n, "forever": true});
                        say(call(
                            http,
                            b,
                            self.rw,
                            Method::PUT,
                            &format!("/api/v1/kv/n/{key}"),
                            Some(&body),
                        )
                        .await);
                    }
                    1 => say(call(
                        http,
                        b,
                        self.rw,
                        Method::DELETE,
                        &format!("/api/v1/kv/n/{key}"),
                        None,
                    )
                    .await),
                    _ => say(call(
                        http,
                        b,
                        self.rw,
                        Method::GET,
                        &format!("/api/v1/kv/n/{key}"),
                        None,
                    )
                    .await),
                }
            }
            Op::Timer { key, delay_s } => {
                let body = json!({"operations": [{"op": "schedule", "queue": "tq", "timerKey": format!("k{key}"), "delayMs": u64::from(delay_s) * 1000, "payload": "e30="}]});
                say(call(
                    http,
                    b,
                    self.rw,
                    Method::POST,
                    "/api/v1/timers",
                    Some(&body),
                )
                .await);
                say(call(http, b, self.rw, Method::GET, "/api/v1/timers/tq", None).await);
            }
            Op::Lock { name } => {
                let body = json!({"operations": [{"op": "acquire", "name": format!("l{name}"), "ttlSeconds": 30}]});
                say(call(http, b, self.rw, Method::POST, "/api/v1/locks", Some(&body)).await);
            }
            Op::Ephemeral { queue } => {
                let body =
                    json!({"queue": format!("e{queue}"), "messages": [{"payload": {"n": n}}]});
                say(call(
                    http,
                    b,
                    self.rw,
                    Method::POST,
                    "/api/v1/ephemeral/push",
                    Some(&body),
                )
                .await);
                let path = format!("/api/v1/ephemeral/pop?queue=e{queue}&autoAck=true");
                say(call(http, b, self.rw, Method::GET, &path, None).await);
            }
            Op::DeleteQueue { queue } => {
                let path = format!("/api/v1/resources/queues/q{queue}");
                say(call(http, b, self.admin, Method::DELETE, &path, None).await);
            }
            Op::Look => {
                for path in [
                    "/api/v1/status",
                    "/api/v1/status/queues",
                    "/api/v1/analytics/worker-metrics",
                    "/api/v1/status/analytics?interval=minute",
                    "/metrics",
                    "/api/v1/resources/queues",
                    "/api/v1/resources/overview",
                    "/api/v1/resources/partitions",
                    "/api/v1/messages",
                    "/api/v1/consumer-groups",
                    "/api/v1/dlq",
                    "/api/v1/ephemeral/queues",
                    "/api/v1/timers/tq",
                ] {
                    say(call(http, b, self.rw, Method::GET, path, None).await);
                }
                let body = json!({"entries": [{"queue": "q0", "partition": "p0", "offset": 0}]});
                say(call(http, b, self.rw, Method::POST, "/api/v1/fetch", Some(&body)).await);
                let body = json!({"entries": [{"queue": "q1"}]});
                say(call(
                    http,
                    b,
                    self.rw,
                    Method::POST,
                    "/api/v1/partitions/changed",
                    Some(&body),
                )
                .await);
            }
        }
        seen
    }
}

/// Ids a broker mints at random (UUIDs: messages, leases, traces; an ephemeral
/// engine's instance tag) replaced by their order of first appearance, so two worlds'
/// transcripts compare by what they mean.
fn canonical(transcript: &[String]) -> Vec<String> {
    let mut names: HashMap<String, usize> = HashMap::new();
    transcript
        .iter()
        .map(|line| {
            let mut out = String::with_capacity(line.len());
            let bytes = line.as_bytes();
            let mut i = 0;
            while i < bytes.len() {
                if let Some(len) = minted_at(&line[i..]) {
                    let id = &line[i..i + len];
                    let k = names.len();
                    let k = *names.entry(id.to_string()).or_insert(k);
                    out.push_str(&format!("<id{k}>"));
                    i += len;
                } else {
                    let c = line[i..].chars().next().unwrap();
                    out.push(c);
                    i += c.len_utf8();
                }
            }
            out
        })
        .collect()
}

/// The length of a minted id starting at `s`: a UUID (8-4-4-4-12 hex), a `txnHash` key
/// and value, or an ephemeral delivery's `e:` and its instance tag (up to 8 hex
/// digits) and `:`.
fn minted_at(s: &str) -> Option<usize> {
    let hex = |t: &str| t.bytes().all(|c| c.is_ascii_hexdigit());
    // A message's `txnHash` hashes its transaction id, which may be minted.
    if let Some(rest) = s.strip_prefix("\"txnHash\":\"") {
        return Some(rest.find('"')? + 12);
    }
    if let Some(u) = s.get(..36) {
        let parts: Vec<&str> = u.split('-').collect();
        if parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12]) && parts.iter().all(|p| hex(p)) {
            return Some(36);
        }
    }
    let tag = s.strip_prefix("e:")?.split(':').next()?;
    if (1..=8).contains(&tag.len()) && hex(tag) && s.len() > tag.len() + 2 {
        return Some(tag.len() + 3);
    }
    None
}

async fn run_world(steps: &[Step], with_a: bool) -> Vec<String> {
    let b = broker().await;
    let http = reqwest::Client::new();
    let mut a = Tenant {
        rw: "a-rw",
        admin: "a-admin",
        next: 0,
    };
    let mut g = Tenant {
        rw: "g-rw",
        admin: "g-admin",
        next: 0,
    };
    let mut transcript = Vec::new();
    let tenants: &[&str] = if with_a { &["a-rw", "g-rw"] } else { &["g-rw"] };
    for (i, s) in steps.iter().enumerate() {
        match s {
            Step::A(op) if with_a => {
                a.run(&http, &b, op).await;
            }
            Step::A(_) => {}
            Step::B(op) => {
                for line in g.run(&http, &b, op).await {
                    transcript.push(format!("step {i} {op:?}: {line}"));
                }
            }
            Step::Tick(s) => {
                let clock = b.manual_clock().unwrap();
                clock.advance(std::time::Duration::from_secs(u64::from(*s)));
            }
        }
        fired(&http, &b, tenants).await;
    }
    for line in g.run(&http, &b, &Op::Look).await {
        transcript.push(format!("at the end: {line}"));
    }
    b.shutdown().await;
    canonical(&transcript)
}

/// Waits until the scheduler has fired every timer due (it sweeps when the clock
/// moves and every tick, but on its own task): a read right after a step must not race
/// it, or B's answers would depend on when the sweep ran, not on what A did.
async fn fired(http: &reqwest::Client, b: &MockBroker, tokens: &[&str]) {
    let now = format_iso(b.manual_clock().unwrap().now_micros());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for token in tokens {
        loop {
            let list = call(http, b, token, Method::GET, "/api/v1/timers/tq", None).await;
            let due = list.json()["rows"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["deliverAt"].as_str())
                .any(|at| at <= now.as_str());
            if !due {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "timers still due: {}",
                list.text
            );
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
    }
}

fn cases() -> u32 {
    std::env::var("QUEEN_TENANCY_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

#[test]
fn another_tenants_operations_change_nothing_a_tenant_observes() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut runner = TestRunner::new(Config {
        cases: cases(),
        failure_persistence: None,
        ..Config::default()
    });
    runner
        .run(&proptest::collection::vec(step(), 4..40), |steps| {
            let (alone, beside) = rt.block_on(async {
                (
                    run_world(&steps, false).await,
                    run_world(&steps, true).await,
                )
            });
            prop_assert_eq!(alone.len(), beside.len());
            for (x, y) in alone.iter().zip(&beside) {
                prop_assert_eq!(x, y, "tenant B saw this differently beside tenant A");
            }
            Ok(())
        })
        .unwrap();
}
