//! The console in a real browser (Debian's headless Chromium, over WebDriver): a worker
//! pushes, pops, commits a transaction and has one rolled back through the SDK, and the
//! page shows it: queues and lag, a message with the transactions that touched it, the
//! transaction log, KV, timers, dead letters (retried from the page), refreshed without
//! a reload; tenants and roles hold as in the API; keyboard and phone width work.
//! Screenshots go to `target/console-screenshots/` (or `QUEEN_CONSOLE_SCREENSHOTS`).
//!
//! Where Chromium is not installed the browser test is skipped with a line saying so;
//! `QUEEN_CONSOLE_BROWSER=require` (set by CI, which installs it) makes that a failure.

#[path = "common/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;
use std::time::Duration;

use queen_mock_broker::MockBroker;
use queen_mock_broker::auth::{Auth, Role};
use queen_sdk::{AckStatus, Client, PushItem, Ttl};
use serde_json::{Value, json};
use webdriver::Browser;

const TAB: &str = "\u{E004}";
const ENTER: &str = "\u{E007}";

fn screenshots() -> PathBuf {
    std::env::var_os("QUEEN_CONSOLE_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/console-screenshots")
        })
}

async fn broker() -> MockBroker {
    let auth = Auth::new()
        .token("acme-rw", Role::ReadWrite, "acme", Some("acme-svc"))
        .token("acme-ro", Role::ReadOnly, "acme", Some("acme-reader"))
        .token("globex-rw", Role::ReadWrite, "globex", Some("globex-svc"));
    MockBroker::builder().auth(auth).start().await.unwrap()
}

/// What a worker did, through the SDK: three orders popped; o-1's step committed (ack,
/// receipt, KV row, reminder); o-2's step rolled back (its `once` marker exists), then
/// dead-lettered; o-3 dead-lettered.
async fn a_worker_ran(url: &str) {
    let client = Client::builder().url(url).token("acme-rw").build().unwrap();
    let orders = ["o-1", "o-2", "o-3"]
        .map(|id| PushItem::new("orders", &json!({"orderId": id})).transaction_id(id));
    client.push(orders.to_vec()).await.unwrap();
    let popped = client.pop::<Value>("orders").batch(3).send().await.unwrap();
    assert_eq!(popped.len(), 3);
    let [m1, m2, m3] = [&popped[0], &popped[1], &popped[2]];
    let committed = client
        .transaction()
        .ack(m1)
        .push("receipts", |p| p.payload(&json!({"orderId": "o-1"})))
        .kv(|k| k.put("orders", "o-1", &json!({"status": "paid"}), Ttl::days(30)))
        .timer("reminders", "o-1", |t| {
            t.after(Duration::from_secs(86_400))
                .payload(&json!({"orderId": "o-1"}))
        })
        .commit()
        .await
        .unwrap();
    assert!(committed.is_committed());
    let marker = client.transaction().once("paid", "o-2", Ttl::days(1));
    assert!(marker.commit().await.unwrap().is_committed());
    let refused = client
        .transaction()
        .ack(m2)
        .once("paid", "o-2", Ttl::days(1))
        .commit()
        .await
        .unwrap();
    assert!(!refused.is_committed(), "{refused:?}");
    // A rollback that is an error: a required decrement of stock there is none of.
    let short = client
        .transaction()
        .kv(|k| k.incr("stock", "sku-1", -1, Ttl::Forever).min(0).required())
        .commit()
        .await
        .unwrap();
    assert!(!short.is_committed(), "{short:?}");
    for m in [m2, m3] {
        let dead = client.transaction().ack_with(m, AckStatus::Dlq).commit();
        assert!(dead.await.unwrap().is_committed());
    }
    // Timers that ended: o-2's reminder cancelled, o-3's fired (after a second).
    for (key, after) in [("o-2", 3600), ("o-3", 1)] {
        let set = client
            .transaction()
            .timer("reminders", key, |t| {
                t.after(Duration::from_secs(after))
                    .payload(&json!({"orderId": key}))
            })
            .commit()
            .await
            .unwrap();
        assert!(set.is_committed());
    }
    assert!(client.timers().cancel("reminders", "o-2").await.unwrap().ok);
    let fired = tokio::time::Instant::now();
    while client
        .messages(queen_sdk::MessageQuery::queue("reminders"))
        .await
        .unwrap()
        .messages
        .is_empty()
    {
        assert!(
            fired.elapsed() < Duration::from_secs(30),
            "o-3's reminder never fired"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn sign_in(b: &Browser, token: &str) {
    b.wait_for(&["Sign in"]).await;
    let input = b.find("#token").await;
    b.type_into(&input, token).await;
    b.click(&b.find("#token-form button[type=submit]").await)
        .await;
}

async fn sign_out(b: &Browser) {
    b.click(&b.find("#who button").await).await;
}

async fn who(b: &Browser) -> String {
    b.eval("return document.getElementById('who').innerText")
        .await
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_what_a_worker_did_in_a_real_browser() {
    if let Some(why) = webdriver::unavailable() {
        assert_ne!(
            std::env::var("QUEEN_CONSOLE_BROWSER").as_deref(),
            Ok("require"),
            "{why}"
        );
        eprintln!("skipped: the console's browser test needs Chromium: {why}");
        return;
    }
    let broker = broker().await;
    let url = broker.url();
    a_worker_ran(&url).await;
    let shots = screenshots();
    let b = Browser::start(1280, 900).await;

    // Auth on: the page asks for a token, then says whose it is.
    b.goto(&format!("{url}/console")).await;
    sign_in(&b, "acme-rw").await;
    let queues = b.wait_for(&["orders", "receipts"]).await;
    assert!(queues.contains("Queues"), "{queues}");
    assert!(who(&b).await.contains("Tenant acme, role read-write"));
    b.screenshot(&shots.join("queues.png")).await;

    // A queue: partitions and the consumer group with its lag.
    b.goto(&format!("{url}/console#/queue/orders")).await;
    b.wait_for(&["Partitions", "Default", "__QUEUE_MODE__", "Consumer groups"])
        .await;

    // The transaction log: the commit with its parts, the rollback with its reason.
    b.goto(&format!("{url}/console#/transactions")).await;
    // A lost `once` gate reads as what it is, not as an error; a real rollback keeps
    // its reason.
    b.wait_for(&[
        "Committed",
        "Already done: the once marker paid/o-2 is set",
        "Rolled back: kv_precondition (limit)",
    ])
    .await;
    b.eval("document.querySelectorAll('main details').forEach((d) => { d.open = true; })")
        .await;
    let log = b
        .wait_for(&[
            "ack completed o-1",
            "push",
            "receipts",
            "put orders/o-1",
            "reminders/o-1",
        ])
        .await;
    assert!(
        !log.contains("(exists)"),
        "the gate is not a rollback: {log}"
    );
    b.screenshot(&shots.join("transactions.png")).await;

    // From the log to a message: its payload, and the transactions that touched it.
    b.click(&b.find("main a[href^='#/message/']").await).await;
    let msg = b
        .wait_for(&[
            "Payload",
            "orderId",
            "Per consumer group",
            "Transactions that touched it",
        ])
        .await;
    assert!(msg.contains("Committed"), "{msg}");

    // KV and timers.
    b.goto(&format!("{url}/console#/kv")).await;
    b.wait_for(&["orders", "paid"]).await;
    b.goto(&format!("{url}/console#/kv/orders")).await;
    b.wait_for(&["o-1", "\"status\": \"paid\""]).await;
    // Timers: the pending one, and those fired and cancelled since the broker started.
    b.goto(&format!("{url}/console#/timers")).await;
    b.wait_for(&["Pending", "reminders", "Recently fired or cancelled"])
        .await;
    b.goto(&format!("{url}/console#/timers/reminders")).await;
    let timers = b
        .wait_for(&["o-1", "o-2", "o-3", "Fired", "Cancelled"])
        .await;
    let recent = timers
        .split("Recently fired or cancelled")
        .nth(1)
        .unwrap_or_default();
    assert!(recent.contains("o-2") && recent.contains("o-3"), "{timers}");
    assert!(
        !recent.contains("o-1"),
        "o-1 is pending, not ended: {timers}"
    );
    b.screenshot(&shots.join("timers.png")).await;

    // Dead letters, and a retry from the page.
    b.goto(&format!("{url}/console#/dlq")).await;
    b.wait_for(&["o-2", "o-3", "Retry", "Delete"]).await;
    b.screenshot(&shots.join("dead-letters.png")).await;
    b.click(&b.find("button[data-action=retry][data-tx='o-3']").await)
        .await;
    let after = b.wait_for(&["o-2"]).await;
    let notice = b
        .eval("return document.getElementById('notice').innerText")
        .await;
    assert!(
        notice
            .as_str()
            .unwrap_or_default()
            .contains("o-3: dead letter pushed again"),
        "{notice} / {after}"
    );
    b.wait_for(&["1 in all"]).await;

    // Live: a queue made meanwhile appears without a reload.
    b.goto(&format!("{url}/console#/queues")).await;
    b.wait_for(&["orders"]).await;
    let client = Client::builder()
        .url(&url)
        .token("acme-rw")
        .build()
        .unwrap();
    client
        .push(vec![PushItem::new("audit", &json!({"seen": true}))])
        .await
        .unwrap();
    b.wait_for(&["audit"]).await;

    // The keyboard: the skip link first, then the sections; Enter follows a link and
    // moves the focus to the page's content.
    // A new document (the query string), so the keyboard starts from its top.
    b.goto(&format!("{url}/console?keyboard#/queues")).await;
    b.wait_for(&["audit"]).await;
    let mut reached = Vec::new();
    for _ in 0..4 {
        b.press(&[TAB]).await;
        let text = b.eval("return document.activeElement.innerText").await;
        reached.push(text.as_str().unwrap_or_default().to_string());
    }
    assert_eq!(reached[0], "Skip to content", "{reached:?}");
    assert!(reached.contains(&"Transactions".to_string()), "{reached:?}");
    while b.eval("return document.activeElement.innerText").await != json!("Transactions") {
        b.press(&[TAB]).await;
    }
    b.press(&[ENTER]).await;
    b.wait_for(&["Rolled back"]).await;
    assert_eq!(
        b.eval("return location.hash").await,
        json!("#/transactions")
    );
    assert_eq!(
        b.eval("return document.activeElement.id").await,
        json!("view")
    );

    // A phone's width: nothing wider than the screen but the tables' own scroll.
    b.resize(390, 844).await;
    b.goto(&format!("{url}/console#/queues")).await;
    b.wait_for(&["orders"]).await;
    let fits = b
        .eval("return document.documentElement.scrollWidth <= window.innerWidth")
        .await;
    assert_eq!(fits, json!(true));
    b.screenshot(&shots.join("phone.png")).await;
    b.resize(1280, 900).await;

    // A read-only token sees the dead letter, and no action on it.
    sign_out(&b).await;
    sign_in(&b, "acme-ro").await;
    b.goto(&format!("{url}/console#/dlq")).await;
    let ro = b.wait_for(&["o-2", "read-only"]).await;
    assert!(!ro.contains("Retry"), "{ro}");
    assert!(who(&b).await.contains("role read-only"));

    // Another tenant sees none of it.
    sign_out(&b).await;
    sign_in(&b, "globex-rw").await;
    b.goto(&format!("{url}/console#/queues")).await;
    let other = b.wait_for(&["No queues yet"]).await;
    assert!(!other.contains("orders"), "{other}");
    b.goto(&format!("{url}/console#/transactions")).await;
    b.wait_for(&["No transaction yet"]).await;
    b.goto(&format!("{url}/console#/kv")).await;
    b.wait_for(&["No KV rows"]).await;

    drop(b);
    broker.shutdown().await;
}

/// Without a browser: the files are served with their policy, without a token; the
/// caller's identity needs one; `--no-console` (the builder's `console(false)`) turns
/// the page off.
#[tokio::test]
async fn the_console_files_are_public_and_its_data_is_not() {
    let broker = broker().await;
    let http = reqwest::Client::new();
    for (path, kind) in [
        ("/console", "text/html"),
        ("/console/app.js", "text/javascript"),
        ("/console/app.css", "text/css"),
    ] {
        let res = http
            .get(format!("{}{path}", broker.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200, "{path}");
        let h = res.headers();
        assert!(
            h["content-type"].to_str().unwrap().starts_with(kind),
            "{path}"
        );
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert_eq!(h["x-frame-options"], "DENY");
    }
    let root = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap()
        .get(format!("{}/", broker.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(root.headers()["location"], "/console");
    let anonymous = http
        .get(format!("{}/console/whoami", broker.url()))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let me: Value = http
        .get(format!("{}/console/whoami", broker.url()))
        .bearer_auth("acme-ro")
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        me,
        json!({"tenant": "acme", "role": "read-only", "sub": "acme-reader", "auth": true})
    );
    broker.shutdown().await;

    let off = MockBroker::builder().console(false).start().await.unwrap();
    for path in ["/console", "/console/app.js", "/console/whoami", "/"] {
        let res = http
            .get(format!("{}{path}", off.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 404, "{path}");
    }
    off.shutdown().await;
}

/// The console only reads, and only where it means to (issue 52): an address whose
/// argument is `..` (`/console#/message/../pop` made the page fetch
/// `/api/v1/messages/../pop`, which the browser turns into `GET /api/v1/pop`, every 2 s,
/// leasing messages as a read-write viewer), its escaped forms, and the link a
/// transaction whose ack names `partitionId: ".."` puts into the log, all show "Not a
/// valid address" and lease nothing; over several refreshes every request the page
/// sends is a `GET` of a read route.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_address_cannot_make_the_console_pop() {
    if let Some(why) = webdriver::unavailable() {
        assert_ne!(
            std::env::var("QUEEN_CONSOLE_BROWSER").as_deref(),
            Ok("require"),
            "{why}"
        );
        eprintln!("skipped: the console's browser test needs Chromium: {why}");
        return;
    }
    let broker = broker().await;
    let url = broker.url();
    let client = Client::builder()
        .url(&url)
        .token("acme-rw")
        .build()
        .unwrap();
    let orders: Vec<PushItem> = (0..8)
        .map(|n| PushItem::new("orders", &json!({"n": n})))
        .collect();
    client.push(orders).await.unwrap();
    // The poisoned link: an ack naming partition "..", kept in the transaction log.
    let http = reqwest::Client::new();
    let res = http
        .post(format!("{url}/api/v1/transaction"))
        .bearer_auth("acme-rw")
        .json(
            &json!({"operations": [{"type": "ack", "transactionId": "pop",
            "partitionId": "..", "consumerGroup": "g", "leaseId": "x"}]}),
        )
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    broker.requests().clear();

    let b = Browser::start(1280, 900).await;
    b.goto(&format!("{url}/console")).await;
    sign_in(&b, "acme-rw").await;
    b.wait_for(&["orders"]).await;
    for address in [
        "#/message/../pop",
        "#/message/%2E%2E/pop",
        "#/message/..%2F..%2Fpop/x",
        "#/messages/orders/..%2F..%2F..%2Fpop",
        "#/queue/..",
        "#/kv/..%3Fx",
        "#/timers/%zz",
    ] {
        b.goto(&format!("{url}/console{address}")).await;
        b.wait_for(&["Not a valid address"]).await;
    }
    // The log's link to the ".." message leads nowhere either.
    b.goto(&format!("{url}/console#/transactions")).await;
    b.wait_for(&["Rolled back"]).await;
    b.eval("document.querySelectorAll('main details').forEach((d) => { d.open = true; })")
        .await;
    b.click(&b.find("main a[href^='#/message/']").await).await;
    b.wait_for(&["Not a valid address"]).await;
    // Two refreshes and more on the traversal address.
    b.goto(&format!("{url}/console#/message/../pop")).await;
    b.wait_for(&["Not a valid address"]).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    drop(b);

    let sent = broker.requests().entries();
    assert!(!sent.is_empty());
    for r in &sent {
        assert_eq!(r.method, "GET", "{} {}", r.method, r.path);
        assert!(!r.path.starts_with("/api/v1/pop"), "{}", r.path);
    }
    let inspect = broker.inspect();
    let cursor = inspect
        .cursor(
            "orders",
            queen_mock_broker::DEFAULT_PARTITION,
            "__QUEUE_MODE__",
        )
        .unwrap();
    assert!(
        cursor.is_none_or(|c| c.lease_id.is_none() && c.next_offset == 0),
        "the page leased or consumed"
    );
    broker.shutdown().await;
}
