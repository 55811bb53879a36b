//! Authentication, roles on every route, tenant isolation on every kind of state, and
//! `producerSub` stamped from the token.

use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role, sign_jwt};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

const SECRET: &[u8] = b"test-secret";

async fn broker() -> MockBroker {
    let auth = Auth::new()
        .token("ro", Role::ReadOnly, "acme", Some("reader"))
        .token("rw", Role::ReadWrite, "acme", Some("svc-billing"))
        .token("admin", Role::Admin, "acme", Some("ops"))
        .token("other", Role::Admin, "globex", Some("intruder"))
        .jwt_secret(SECRET.to_vec());
    MockBroker::builder().auth(auth).start().await.unwrap()
}

async fn call(
    b: &MockBroker,
    method: Method,
    path: &str,
    token: Option<&str>,
    body: Option<Value>,
) -> (StatusCode, Value) {
    let mut req = reqwest::Client::new().request(method, format!("{}{path}", b.url()));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    let res = req.send().await.unwrap();
    let status = res.status();
    let text = res.text().await.unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

/// Every route, with a body it accepts, and the role it needs.
fn routes() -> Vec<(Method, &'static str, Option<Value>, Role)> {
    let push = json!({"items": [{"queue": "q", "payload": 1}]});
    vec![
        (
            Method::POST,
            "/api/v1/configure",
            Some(json!({"queue": "q"})),
            Role::ReadWrite,
        ),
        (Method::POST, "/api/v1/push", Some(push), Role::ReadWrite),
        // A pop is a `GET` that leases (and with `autoAck` commits): `read-write`.
        (Method::GET, "/api/v1/pop/queue/q", None, Role::ReadWrite),
        (
            Method::GET,
            "/api/v1/pop/queue/q/partition/Default",
            None,
            Role::ReadWrite,
        ),
        (
            Method::GET,
            "/api/v1/pop?namespace=n",
            None,
            Role::ReadWrite,
        ),
        (Method::GET, "/api/v1/pop", None, Role::ReadWrite),
        (
            Method::GET,
            "/api/v1/ephemeral/pop?queue=eq",
            None,
            Role::ReadWrite,
        ),
        // Writes nothing, though a `POST`.
        (Method::POST, "/api/v1/stats/refresh", None, Role::ReadOnly),
        (
            Method::GET,
            "/api/v1/resources/queues",
            None,
            Role::ReadOnly,
        ),
        (Method::GET, "/api/v1/consumer-groups", None, Role::ReadOnly),
        (Method::GET, "/api/v1/status", None, Role::ReadOnly),
        (
            Method::POST,
            "/api/v1/ack",
            Some(json!({"transactionId": "t", "partitionId": "1"})),
            Role::ReadWrite,
        ),
        (
            Method::POST,
            "/api/v1/ack/batch",
            Some(json!({"acknowledgments": []})),
            Role::ReadWrite,
        ),
        (
            Method::POST,
            "/api/v1/lease/x/extend",
            Some(json!({})),
            Role::ReadWrite,
        ),
        (
            Method::POST,
            "/api/v1/consumer-groups/g/queues/q/seek",
            Some(json!({"toEnd": true})),
            Role::ReadWrite,
        ),
        (
            Method::POST,
            "/api/v1/consumer-groups/g/queues/q/partitions/Default/seek",
            Some(json!({"toEnd": true})),
            Role::ReadWrite,
        ),
        (Method::GET, "/api/v1/dlq", None, Role::ReadOnly),
        (
            Method::POST,
            "/api/v1/transaction",
            Some(json!({"kv": [{"op": "get", "ns": "n", "key": "k"}]})),
            Role::ReadWrite,
        ),
        (
            Method::POST,
            "/api/v1/kv",
            Some(json!({"operations": [{"op": "get", "ns": "n", "key": "k"}]})),
            Role::ReadWrite,
        ),
        (Method::GET, "/api/v1/kv/n/k", None, Role::ReadOnly),
        (
            Method::PUT,
            "/api/v1/kv/n/k",
            Some(json!({"value": 1, "forever": true})),
            Role::ReadWrite,
        ),
        (Method::DELETE, "/api/v1/kv/n/k", None, Role::ReadWrite),
        (
            Method::POST,
            "/api/v1/timers",
            Some(json!({"operations": [{"op": "cancel", "queue": "q", "timerKey": "k"}]})),
            Role::ReadWrite,
        ),
        (Method::GET, "/api/v1/timers/q", None, Role::ReadOnly),
        (Method::GET, "/api/v1/timers/q/k", None, Role::ReadOnly),
        (Method::DELETE, "/api/v1/timers/q/k", None, Role::ReadWrite),
        (
            Method::POST,
            "/api/v1/locks",
            Some(json!({"operations": [{"op": "get", "name": "l"}]})),
            Role::ReadWrite,
        ),
        (
            Method::DELETE,
            "/api/v1/consumer-groups/g",
            None,
            Role::Admin,
        ),
        (
            Method::DELETE,
            "/api/v1/resources/queues/q",
            None,
            Role::Admin,
        ),
    ]
}

#[tokio::test]
async fn every_route_needs_a_token_with_its_role() {
    let b = broker().await;
    for (method, path, body, needed) in routes() {
        for (token, role) in [
            (None, None),
            (Some("wrong"), None),
            (Some("ro"), Some(Role::ReadOnly)),
            (Some("rw"), Some(Role::ReadWrite)),
            (Some("admin"), Some(Role::Admin)),
        ] {
            let (s, r) = call(&b, method.clone(), path, token, body.clone()).await;
            let what = format!("{method} {path} with {token:?}: {s} {r}");
            match role {
                None => {
                    assert_eq!(s, StatusCode::UNAUTHORIZED, "{what}");
                    assert_eq!(r["code"], "unauthorized", "{what}");
                }
                Some(role) if role < needed => {
                    assert_eq!(s, StatusCode::FORBIDDEN, "{what}");
                    assert_eq!(r["code"], "forbidden", "{what}");
                    assert!(r["error"].is_string(), "{what}");
                }
                Some(_) => assert!(s.is_success(), "{what}"),
            }
        }
    }
    let (s, _) = call(&b, Method::GET, "/health", None, None).await;
    assert_eq!(s, StatusCode::OK, "/health is public");
    b.shutdown().await;
}

/// A read-only token consumes nothing: every pop (by queue, partition, queue-wide, by
/// namespace, ephemeral; with `autoAck` and with a consumer group) answers 403
/// `forbidden` and leaves the message for a read-write consumer.
#[tokio::test]
async fn a_read_only_token_cannot_pop_and_leaves_the_message_there() {
    let b = broker().await;
    let push = json!({"items": [{"queue": "q", "payload": {"n": 1}}]});
    let (s, r) = call(&b, Method::POST, "/api/v1/push", Some("rw"), Some(push)).await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let eph = json!({"queue": "eq", "messages": [{"payload": 2}]});
    let (s, r) = call(
        &b,
        Method::POST,
        "/api/v1/ephemeral/push",
        Some("rw"),
        Some(eph),
    )
    .await;
    assert!(s.is_success(), "{s} {r}");
    for path in [
        "/api/v1/pop/queue/q",
        "/api/v1/pop/queue/q?autoAck=true",
        "/api/v1/pop/queue/q?consumerGroup=g&subscriptionMode=all",
        "/api/v1/pop/queue/q/partition/Default?autoAck=true",
        "/api/v1/pop?autoAck=true",
        "/api/v1/pop?namespace=n&consumerGroup=g",
        "/api/v1/ephemeral/pop?queue=eq&autoAck=true",
    ] {
        let (s, r) = call(&b, Method::GET, path, Some("ro"), None).await;
        assert_eq!(s, StatusCode::FORBIDDEN, "GET {path}: {r}");
        assert_eq!(r["code"], "forbidden", "GET {path}: {r}");
    }
    // Nothing was leased, committed or subscribed: the group does not exist, and the
    // read-write consumers get both messages.
    let (_, groups) = call(&b, Method::GET, "/api/v1/consumer-groups", Some("ro"), None).await;
    assert!(
        !groups.to_string().contains("\"g\""),
        "no subscription row: {groups}"
    );
    let (s, popped) = call(&b, Method::GET, "/api/v1/pop/queue/q", Some("rw"), None).await;
    assert_eq!(s, StatusCode::OK, "{popped}");
    assert_eq!(popped["messages"][0]["data"], json!({"n": 1}), "{popped}");
    let (s, popped) = call(
        &b,
        Method::GET,
        "/api/v1/ephemeral/pop?queue=eq",
        Some("rw"),
        None,
    )
    .await;
    assert_eq!(s, StatusCode::OK, "{popped}");
    assert_eq!(popped["messages"][0]["payload"], json!(2), "{popped}");
    b.shutdown().await;
}

#[tokio::test]
async fn hs256_jwts_carry_role_tenant_and_expiry() {
    let b = broker().await;
    let now = queen_mock_broker::Clock::now_micros(b.clock().as_ref()) / 1_000_000;
    let good = sign_jwt(
        SECRET,
        &json!({"roles": ["read-only", "read-write"], "tenant": "acme", "sub": "jwt-worker", "exp": now + 60}),
    );
    let (s, r) = call(
        &b,
        Method::POST,
        "/api/v1/push",
        Some(&good),
        Some(json!({"items": [{"queue": "j", "payload": 1}]})),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "{r}");
    let (_, popped) = call(&b, Method::GET, "/api/v1/pop/queue/j", Some("rw"), None).await;
    assert_eq!(
        popped["messages"][0]["producerSub"], "jwt-worker",
        "same tenant, stamped sub"
    );
    let expired = sign_jwt(
        SECRET,
        // Past the leeway allowed for clock skew.
        &json!({"role": "admin", "tenant": "acme", "exp": now - 1 - queen_mock_broker::auth::JWT_LEEWAY_SECS}),
    );
    assert_eq!(
        call(&b, Method::GET, "/api/v1/dlq", Some(&expired), None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    let forged = sign_jwt(
        b"not-the-secret",
        &json!({"role": "admin", "tenant": "acme"}),
    );
    assert_eq!(
        call(&b, Method::GET, "/api/v1/dlq", Some(&forged), None)
            .await
            .0,
        StatusCode::UNAUTHORIZED
    );
    let ro = sign_jwt(SECRET, &json!({"role": "read-only", "tenant": "acme"}));
    assert_eq!(
        call(
            &b,
            Method::POST,
            "/api/v1/push",
            Some(&ro),
            Some(json!({"items": []}))
        )
        .await
        .0,
        StatusCode::FORBIDDEN
    );
    b.shutdown().await;
}

/// A JWT must name its tenant with a string: without one it is refused 401 unless the
/// broker names a default tenant; a number or an array is refused either way.
#[tokio::test]
async fn a_jwt_without_a_string_tenant_is_refused_unless_a_default_is_named() {
    let strict = broker().await;
    let lenient = MockBroker::builder()
        .auth(
            Auth::new()
                .jwt_secret(SECRET.to_vec())
                .jwt_default_tenant("acme"),
        )
        .start()
        .await
        .unwrap();
    let push = json!({"items": [{"queue": "t", "payload": 1}]});
    let no_tenant = sign_jwt(SECRET, &json!({"role": "read-write", "sub": "w"}));
    let (s, r) = call(
        &strict,
        Method::POST,
        "/api/v1/push",
        Some(&no_tenant),
        Some(push.clone()),
    )
    .await;
    assert_eq!(
        (s, &r["code"]),
        (StatusCode::UNAUTHORIZED, &json!("unauthorized")),
        "{r}"
    );
    let (s, r) = call(
        &lenient,
        Method::POST,
        "/api/v1/push",
        Some(&no_tenant),
        Some(push.clone()),
    )
    .await;
    assert_eq!(s, StatusCode::CREATED, "the default tenant: {r}");
    for tenant in [json!(7), json!(["acme"])] {
        let jwt = sign_jwt(SECRET, &json!({"role": "read-write", "tenant": tenant}));
        for b in [&strict, &lenient] {
            let (s, r) = call(
                b,
                Method::POST,
                "/api/v1/push",
                Some(&jwt),
                Some(push.clone()),
            )
            .await;
            assert_eq!(
                (s, &r["code"]),
                (StatusCode::UNAUTHORIZED, &json!("unauthorized")),
                "{tenant}: {r}"
            );
        }
    }
    strict.shutdown().await;
    lenient.shutdown().await;
}

#[tokio::test]
async fn producer_sub_comes_from_the_token_never_from_the_request() {
    let b = broker().await;
    let item = json!({"queue": "s", "payload": 1, "producerSub": "forged"});
    call(
        &b,
        Method::POST,
        "/api/v1/push",
        Some("rw"),
        Some(json!({"items": [item]})),
    )
    .await;
    call(&b, Method::POST, "/api/v1/transaction", Some("admin"), Some(json!({"operations": [{"type": "push", "queue": "s", "payload": 2, "producerSub": "forged"}]}))).await;
    let (_, p) = call(
        &b,
        Method::GET,
        "/api/v1/pop/queue/s?batch=10",
        Some("rw"),
        None,
    )
    .await;
    let subs: Vec<&Value> = p["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["producerSub"])
        .collect();
    assert_eq!(subs, [&json!("svc-billing"), &json!("ops")]);
    b.shutdown().await;
}

#[tokio::test]
async fn another_tenants_state_behaves_as_if_it_did_not_exist() {
    let b = broker().await;
    let a = Some("admin"); // tenant acme
    let g = Some("other"); // tenant globex
    // acme builds up every kind of state.
    call(
        &b,
        Method::POST,
        "/api/v1/configure",
        a,
        Some(json!({"queue": "orders", "options": {"retryLimit": 0}})),
    )
    .await;
    let (_, pushed) = call(
        &b,
        Method::POST,
        "/api/v1/push",
        a,
        Some(json!({"items": [
        {"queue": "orders", "partition": "p", "transactionId": "o-1", "payload": 1},
        {"queue": "orders", "partition": "p", "transactionId": "o-2", "payload": 2}]})),
    )
    .await;
    assert_eq!(pushed[0]["status"], "queued");
    let (_, pop) = call(
        &b,
        Method::GET,
        "/api/v1/pop/queue/orders?batch=1&consumerGroup=billing&subscriptionMode=all",
        a,
        None,
    )
    .await;
    let m = pop["messages"][0].clone();
    let (pid, lease) = (m["partitionId"].clone(), m["leaseId"].clone());
    call(&b, Method::POST, "/api/v1/ack", a, Some(json!({"transactionId": "o-1", "partitionId": pid, "leaseId": lease, "consumerGroup": "billing", "status": "dlq"}))).await;
    let (_, pop2) = call(
        &b,
        Method::GET,
        "/api/v1/pop/queue/orders?batch=1&consumerGroup=billing",
        a,
        None,
    )
    .await;
    let lease2 = pop2["leaseId"].clone();
    call(&b, Method::POST, "/api/v1/kv", a, Some(json!({"operations": [{"op": "put", "ns": "n", "key": "k", "value": "secret", "forever": true}]}))).await;
    call(&b, Method::POST, "/api/v1/timers", a, Some(json!({"operations": [{"op": "schedule", "queue": "t", "timerKey": "k", "delayMs": 600000, "payload": "e30="}]}))).await;
    let (_, lock) = call(
        &b,
        Method::POST,
        "/api/v1/locks",
        a,
        Some(json!({"operations": [{"op": "acquire", "name": "l", "ttlSeconds": 60}]})),
    )
    .await;
    assert_eq!(lock["results"][0]["acquired"], true);

    // globex sees none of it.
    assert_eq!(
        call(
            &b,
            Method::GET,
            "/api/v1/pop/queue/orders?batch=10&subscriptionMode=all",
            g,
            None
        )
        .await
        .0,
        StatusCode::NO_CONTENT
    );
    let (_, dlq) = call(&b, Method::GET, "/api/v1/dlq", g, None).await;
    assert_eq!(dlq["total"], 0);
    let (_, r) = call(
        &b,
        Method::POST,
        "/api/v1/ack",
        g,
        Some(json!({"transactionId": "o-2", "partitionId": pid, "consumerGroup": "billing"})),
    )
    .await;
    let (_, unknown) = call(
        &b,
        Method::POST,
        "/api/v1/ack",
        g,
        Some(json!({"transactionId": "o-2", "partitionId": "987654", "consumerGroup": "billing"})),
    )
    .await;
    assert_eq!(r[0]["success"], false);
    assert_eq!(
        r[0]["error"], unknown[0]["error"],
        "a foreign partitionId answers as an unknown one"
    );
    let (_, ext) = call(
        &b,
        Method::POST,
        &format!("/api/v1/lease/{}/extend", lease2.as_str().unwrap()),
        g,
        Some(json!({})),
    )
    .await;
    assert_eq!(ext["success"], false, "a foreign lease is unknown");
    let (_, t) = call(&b, Method::POST, "/api/v1/transaction", g, Some(json!({"operations": [{"type": "ack", "transactionId": "o-2", "partitionId": pid, "consumerGroup": "billing", "leaseId": lease2}]}))).await;
    assert_eq!(t["reason"], "rejected_ack");
    let (_, kv) = call(&b, Method::GET, "/api/v1/kv/n/k", g, None).await;
    assert_eq!(kv["found"], false);
    let (_, timer) = call(&b, Method::GET, "/api/v1/timers/t/k", g, None).await;
    assert_eq!(timer["found"], false);
    let (_, locks) = call(
        &b,
        Method::POST,
        "/api/v1/locks",
        g,
        Some(json!({"operations": [{"op": "get", "name": "l"}]})),
    )
    .await;
    assert_eq!(locks["results"][0]["held"], false);
    let (_, dup) = call(&b, Method::POST, "/api/v1/push", g, Some(json!({"items": [{"queue": "orders", "partition": "p", "transactionId": "o-1", "payload": 9}]}))).await;
    assert_eq!(
        (dup[0]["status"].clone(), dup[0]["offset"].clone()),
        (json!("queued"), json!(0)),
        "its own log, its own dedup"
    );
    let (_, del) = call(&b, Method::DELETE, "/api/v1/resources/queues/t", g, None).await;
    assert_eq!(del["deleted"], false);
    let (_, seek) = call(
        &b,
        Method::POST,
        "/api/v1/consumer-groups/billing/queues/t/seek",
        g,
        Some(json!({"toEnd": true})),
    )
    .await;
    assert!(
        seek.get("success").is_none() || seek["success"] == false,
        "{seek}"
    );

    // acme's state is intact.
    let (_, kv) = call(&b, Method::GET, "/api/v1/kv/n/k", a, None).await;
    assert_eq!(kv["value"], "secret");
    let (_, dlq) = call(&b, Method::GET, "/api/v1/dlq", a, None).await;
    assert_eq!(dlq["total"], 1);
    let (_, ack) = call(&b, Method::POST, "/api/v1/ack", a, Some(json!({"transactionId": "o-2", "partitionId": pid, "leaseId": lease2, "consumerGroup": "billing"}))).await;
    assert_eq!(ack[0]["success"], true, "{ack}");
    b.shutdown().await;
}
