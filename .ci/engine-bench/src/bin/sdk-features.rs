//! What each `queen-sdk` feature does against one broker, measured: every call of the
//! SDK a worker or an operator makes, once, on names of its own, with what came back
//! (the value, the SDK's typed error, or a result read back from the broker that shows
//! a write was dropped). It prints one Markdown row per call: the draft of the SDK
//! README's compatibility table (issue 50). Run by `.ci/queen-engine.sh features`.
//!
//! Exit codes: 0 every call was made and its row printed (whatever it answered: this
//! records, it does not judge); 2 the broker could not be reached.

use std::convert::Infallible;
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::StreamExt;
use queen_sdk::{
    AckStatus, Client, Commit, DlqQuery, Error, MessageQuery, PushItem, SeekTo, StartAt,
    SubscriptionMode, Ttl,
};
use serde_json::{Value, json};

/// A row: the feature, the call, what it did.
fn row(feature: &str, call: &str, outcome: impl std::fmt::Display) {
    let outcome = outcome.to_string().replace('|', "\\|").replace('\n', " ");
    let outcome: String = outcome.chars().take(300).collect();
    println!("| {feature} | `{call}` | {outcome} |");
}

fn err(e: &Error) -> String {
    format!("Err({}): {e}", kind(e))
}

fn kind(e: &Error) -> &'static str {
    match e {
        Error::Unsupported { .. } => "Unsupported",
        Error::RolledBack { .. } => "RolledBack",
        Error::Api { .. } => "Api",
        Error::Invalid { .. } => "Invalid",
        Error::Decode { .. } => "Decode",
        Error::OutcomeUnknown { .. } => "OutcomeUnknown",
        Error::Transport(_) => "Transport",
        _ => "other",
    }
}

fn commit<T: std::fmt::Debug>(r: &Result<Commit, Error>, extra: T) -> String {
    match r {
        Ok(Commit::Committed(c)) => format!("Committed ({} results) {extra:?}", c.results().len()),
        Ok(Commit::Gated { gate, .. }) => format!("Gated: {gate}"),
        Err(e) => err(e),
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    let url = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("QUEEN_URL").ok())
        .unwrap_or_else(|| "http://127.0.0.1:6632".into());
    let client = match Client::new(&url) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("sdk-features: {e}");
            return ExitCode::from(2);
        }
    };
    match client.health().await {
        Ok(h) => println!("sdk-features against {url}: health {h:?}\n"),
        Err(e) => {
            eprintln!("sdk-features: could not run: {url}: {e}");
            return ExitCode::from(2);
        }
    }
    let run = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis());
    let n = |what: &str| format!("feat-{run}-{what}");
    let (q, receipts, ns, rem, g) = (n("orders"), n("receipts"), n("state"), n("rem"), n("g"));
    println!("| feature | call | on this broker |\n|---|---|---|");

    // Core.
    let pushed = client
        .push(
            (0..6)
                .map(|i| PushItem::new(&q, &json!({"n": i})).transaction_id(format!("e-{i}")))
                .collect(),
        )
        .await;
    row(
        "push",
        "client.push(items)",
        match &pushed {
            Ok(r) => format!("Ok ({} results)", r.len()),
            Err(e) => err(e),
        },
    );
    let popped = client
        .pop::<Value>(&q)
        .group(&g)
        .subscription(SubscriptionMode::All)
        .batch(1)
        .send()
        .await;
    row(
        "pop",
        "client.pop(q).group(g).subscription(All)",
        match &popped {
            Ok(m) => format!("Ok ({} messages)", m.len()),
            Err(e) => err(e),
        },
    );
    let Ok(mut batch) = popped else {
        return ExitCode::from(2);
    };
    let Some(m0) = batch.pop() else {
        return ExitCode::from(2);
    };
    let ext = client
        .extend_lease(&m0.lease_id, Duration::from_secs(30))
        .await;
    row(
        "lease",
        "client.extend_lease(lease, 30 s)",
        match &ext {
            Ok(x) => format!("Ok {x:?}"),
            Err(e) => err(e),
        },
    );
    let acked = client.ack(&m0, AckStatus::Completed).await;
    row(
        "ack",
        "client.ack(&msg, Completed)",
        match &acked {
            Ok(a) => format!("Ok (success {})", a.success),
            Err(e) => err(e),
        },
    );

    // The step.
    let pop1 = |c: Client, q: String, g: String| async move {
        c.pop::<Value>(&q)
            .group(&g)
            .subscription(SubscriptionMode::All)
            .batch(1)
            .send()
            .await
    };
    let m1 = pop1(client.clone(), q.clone(), g.clone())
        .await
        .ok()
        .and_then(|mut b| b.pop());
    if let Some(m1) = &m1 {
        let r = client
            .transaction()
            .ack(m1)
            .push(&receipts, |p| p.payload(&json!({"of": m1.transaction_id})))
            .kv(|k| {
                k.put(
                    &ns,
                    &m1.transaction_id,
                    &json!({"status": "paid"}),
                    Ttl::days(30),
                )
            })
            .once(&ns, format!("{}-paid", m1.transaction_id), Ttl::days(1))
            .timer(&rem, &m1.transaction_id, |t| {
                t.after(Duration::from_secs(86_400)).payload(&json!(1))
            })
            .commit()
            .await;
        row(
            "transaction",
            "ack + push + kv put + once + timer",
            commit(&r, ()),
        );
        // The next message acked under a lease that is not its own: a fenced ack (with
        // a KV put only, so no derived push id can roll it back as a duplicate first).
        if let Some(m) = pop1(client.clone(), q.clone(), g.clone())
            .await
            .ok()
            .and_then(|mut b| b.pop())
        {
            let mut stale = m.clone();
            stale.lease_id = "00000000-0000-7000-8000-000000000000".into();
            let r = client
                .transaction()
                .ack(&stale)
                .kv(|k| k.put(&ns, "stale", &json!(1), Ttl::days(1)))
                .commit()
                .await;
            let kv_written = client
                .kv()
                .get::<Value>(&ns, "stale")
                .await
                .map(|r| r.is_some());
            row(
                "transaction",
                "ack + kv put under a lease not held",
                format!("{}; the KV put applied: {kv_written:?}", commit(&r, ())),
            );
            let _ = client.ack(&m, AckStatus::Completed).await;
        }
        // The same once marker again on the next message: the gate.
        if let Some(m2) = pop1(client.clone(), q.clone(), g.clone())
            .await
            .ok()
            .and_then(|mut b| b.pop())
        {
            let r = client
                .transaction()
                .ack(&m2)
                .once(&ns, format!("{}-paid", m1.transaction_id), Ttl::days(1))
                .commit()
                .await;
            row("transaction", "once(marker already set)", commit(&r, ()));
            let _ = client.ack(&m2, AckStatus::Completed).await;
        }
    }
    let r = client
        .transaction()
        .timer(&rem, "no-ack", |t| {
            t.after(Duration::from_secs(3600)).payload(&json!(1))
        })
        .commit()
        .await;
    row(
        "transaction",
        "timer alone (no ack, so no derived txn)",
        commit(&r, ()),
    );
    let r = client
        .transaction()
        .timer(&rem, "no-ack-txn", |t| {
            t.after(Duration::from_secs(3600))
                .txn("my-txn")
                .payload(&json!(1))
        })
        .commit()
        .await;
    row("transaction", "timer alone with .txn(..)", commit(&r, ()));
    let r = client
        .transaction()
        .kv(|k| k.put(&ns, "kv-only", &json!(1), Ttl::days(1)))
        .once(&ns, "kv-only-gate", Ttl::days(1))
        .commit()
        .await;
    row("transaction", "kv put + once (no ack)", commit(&r, ()));

    // Positions: alone, then with KV; then where the group's cursor is.
    let cursor = |c: Client, g: String, q: String| async move {
        c.consumer_group(&g).await.map(|d| {
            d.partitions(&q)
                .iter()
                .map(|p| {
                    format!(
                        "cursor {:?}, totalConsumed {:?}, offsetLag {}",
                        p.cursor, p.total_consumed, p.offset_lag
                    )
                })
                .collect::<Vec<_>>()
                .join("; ")
        })
    };
    let before = cursor(client.clone(), g.clone(), q.clone()).await;
    let r = client
        .transaction()
        .position(&q, &g, "Default", 5)
        .commit()
        .await;
    row(
        "positions",
        "transaction().position(q, g, p, 5) alone",
        commit(&r, ()),
    );
    let r = client
        .transaction()
        .position(&q, &g, "Default", 5)
        .kv(|k| k.put(&ns, "with-positions", &json!(1), Ttl::days(1)))
        .commit()
        .await;
    let after = cursor(client.clone(), g.clone(), q.clone()).await;
    let kv_written = client
        .kv()
        .get::<Value>(&ns, "with-positions")
        .await
        .map(|r| r.is_some());
    row(
        "positions",
        "position(.., 5) + kv put",
        format!(
            "{}; group before: {before:?}; after: {after:?}; the KV put applied: {kv_written:?}",
            commit(&r, ())
        ),
    );
    // A KV step alone: a missing positions part must not stop the client's KV.
    let r = client
        .transaction()
        .kv(|k| k.put(&ns, "after-unsupported", &json!(1), Ttl::days(1)))
        .commit()
        .await;
    row(
        "positions",
        "a KV step on the same Client after that",
        commit(&r, ()),
    );

    // Seek.
    let r = client
        .seek(&g, &q, SeekTo::Beginning)
        .await;
    row(
        "seek",
        "client.seek(g, q, Time(2000-01-01))",
        match &r {
            Ok(n) => format!("Ok ({n} partitions)"),
            Err(e) => err(e),
        },
    );
    let r = client.seek(&g, &q, SeekTo::End).await;
    row(
        "seek",
        "client.seek(g, q, End)",
        match &r {
            Ok(n) => format!("Ok ({n} partitions)"),
            Err(e) => err(e),
        },
    );

    // KV standalone.
    let kv = client.kv();
    row(
        "kv",
        "kv().put",
        match kv.put(&ns, "k", &json!(1), Ttl::days(1)).await {
            Ok(r) => format!("Ok {r:?}"),
            Err(e) => err(&e),
        },
    );
    row(
        "kv",
        "kv().get",
        match kv.get::<Value>(&ns, "k").await {
            Ok(r) => format!("Ok (found {})", r.is_some()),
            Err(e) => err(&e),
        },
    );
    row(
        "kv",
        "kv().put_if_absent (present)",
        match kv.put_if_absent(&ns, "k", &json!(2), Ttl::days(1)).await {
            Ok(r) => format!("Ok {r:?}"),
            Err(e) => err(&e),
        },
    );
    row(
        "kv",
        "kv().incr",
        match kv.incr(&ns, "c", 5, Ttl::days(1)).await {
            Ok(r) => format!("Ok {r:?}"),
            Err(e) => err(&e),
        },
    );
    row(
        "kv",
        "kv().delete",
        match kv.delete(&ns, "k").await {
            Ok(r) => format!("Ok ({r})"),
            Err(e) => err(&e),
        },
    );

    // Timers standalone.
    let t = client.timers();
    row(
        "timers",
        "timers().schedule",
        match t
            .schedule(&rem, "s1", |t| {
                t.after(Duration::from_secs(3600)).payload(&json!(1))
            })
            .await
        {
            Ok(r) => format!("Ok (status {:?})", r.status),
            Err(e) => err(&e),
        },
    );
    row(
        "timers",
        "timers().peek",
        match t.peek(&rem, "s1").await {
            Ok(r) => format!("Ok (found {})", r.is_some()),
            Err(e) => err(&e),
        },
    );
    row(
        "timers",
        "timers().list",
        match t.list(&rem, None, 100).await {
            Ok(p) => format!("Ok ({} rows)", p.rows.len()),
            Err(e) => err(&e),
        },
    );
    row(
        "timers",
        "timers().cancel",
        match t.cancel(&rem, "s1").await {
            Ok(r) => format!("Ok (status {:?})", r.status),
            Err(e) => err(&e),
        },
    );

    // Locks.
    let r = client
        .lock(n("lock"))
        .ttl(Duration::from_secs(5))
        .acquire()
        .await;
    row(
        "locks",
        "client.lock(name).ttl(5 s).acquire()",
        match &r {
            Ok(l) => format!("Ok (held {})", l.is_some()),
            Err(e) => err(e),
        },
    );

    // The runners.
    let qw = n("worker");
    let _ = client
        .push(
            (0..3)
                .map(|i| PushItem::new(&qw, &json!({"n": i})))
                .collect(),
        )
        .await;
    let s = client
        .worker::<Value>(&qw)
        .group(&g, StartAt::Beginning)
        .run_until_idle(|m, step| async move {
            Ok::<_, Infallible>(step.push(&format!("{}-out", m.queue), |p| p.payload(&m.data)))
        })
        .await;
    row(
        "worker",
        "client.worker(q).group(g, Beginning).run_until_idle",
        match &s {
            Ok(s) => format!("Ok ({s})"),
            Err(e) => format!("Err: {e}"),
        },
    );
    let qc = n("consume");
    let _ = client.push(vec![PushItem::new(&qc, &json!(1))]).await;
    let mut stream = client
        .consume::<Value>(&qc)
        .group(&g, StartAt::Beginning)
        .stream();
    let first = tokio::time::timeout(Duration::from_secs(10), stream.next()).await;
    let r = match first {
        Ok(Some(Ok(d))) => {
            let c = d.step().commit().await;
            format!("delivered; its step: {}", commit(&c, ()))
        }
        Ok(Some(Err(e))) => err(&e),
        Ok(None) => "ended".into(),
        Err(_) => "nothing in 10 s".into(),
    };
    row(
        "consume",
        "client.consume(q).group(g, Beginning).stream()",
        r,
    );
    drop(stream);

    // Operator reads and administration.
    row(
        "operator",
        "client.list_queues()",
        match client.list_queues().await {
            Ok(v) => format!("Ok ({} queues)", v.len()),
            Err(e) => err(&e),
        },
    );
    row(
        "operator",
        "client.queue_stats(q)",
        match client.queue_stats(&q).await {
            Ok(d) => format!("Ok (totals {:?})", d.totals),
            Err(e) => err(&e),
        },
    );
    row(
        "operator",
        "client.queue_depth(q, Some(g))",
        match client.queue_depth(&q, Some(&g)).await {
            Ok(d) => format!("Ok {d:?}"),
            Err(e) => err(&e),
        },
    );
    row(
        "operator",
        "client.consumer_groups()",
        match client.consumer_groups().await {
            Ok(v) => format!("Ok ({} groups)", v.len()),
            Err(e) => err(&e),
        },
    );
    row(
        "operator",
        "client.consumer_group(g)",
        match cursor(client.clone(), g.clone(), q.clone()).await {
            Ok(s) => format!("Ok ({s})"),
            Err(e) => err(&e),
        },
    );
    row(
        "operator",
        "client.lagging_groups(0 s)",
        match client.lagging_groups(Duration::ZERO).await {
            Ok(v) => format!("Ok ({} rows)", v.len()),
            Err(e) => err(&e),
        },
    );
    let listing = client.messages(MessageQuery::queue(&q).limit(10)).await;
    row(
        "operator",
        "client.messages(query)",
        match &listing {
            Ok(p) => format!(
                "Ok ({} rows, offsets {:?})",
                p.messages.len(),
                p.messages.iter().map(|m| m.offset).collect::<Vec<_>>()
            ),
            Err(e) => err(e),
        },
    );
    if let Ok(p) = &listing {
        if let Some(m) = p.messages.first() {
            let d = client
                .message::<Value>(
                    m.partition_id.as_deref().unwrap_or(""),
                    m.transaction_id.as_deref().unwrap_or(""),
                )
                .await;
            row(
                "operator",
                "client.message(pid, txn)",
                match &d {
                    Ok(d) => format!(
                        "Ok (offset {:?}, {} groups)",
                        d.offset,
                        d.consumer_groups.len()
                    ),
                    Err(e) => err(e),
                },
            );
        }
    }
    row(
        "dead letters",
        "client.dlq(DlqQuery::queue(q))",
        match client.dlq::<Value>(DlqQuery::queue(&q)).await {
            Ok(p) => format!("Ok ({} rows)", p.messages.len()),
            Err(e) => err(&e),
        },
    );
    row(
        "dead letters",
        "client.retry_message(pid, txn) of a live message",
        match client
            .retry_message("00000000-0000-0000-0000-000000000000", "e-0")
            .await
        {
            Ok(r) => format!("Ok {r:?}"),
            Err(e) => err(&e),
        },
    );
    row(
        "admin",
        "client.configure(q, lease 10 s)",
        match client
            .configure(
                &q,
                queen_sdk::QueueOptions::new().lease_time(Duration::from_secs(10)),
            )
            .await
        {
            Ok(_) => "Ok".to_string(),
            Err(e) => err(&e),
        },
    );
    row(
        "admin",
        "client.delete_group(g)",
        match client.delete_group(&g).await {
            Ok(n) => format!("Ok ({n})"),
            Err(e) => err(&e),
        },
    );
    for q in [&q, &receipts, &qw, &qc, &format!("{qw}-out")] {
        let _ = client.delete_queue(q).await;
    }
    row(
        "admin",
        "client.delete_queue(q)",
        "Ok (the run's queues deleted)",
    );
    ExitCode::SUCCESS
}
