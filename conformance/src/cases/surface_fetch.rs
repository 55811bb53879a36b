//! Reads by offset, `POST /api/v1/fetch` (`mock-broker/ROUTES.md` 5.1, after
//! `queen-protocol` 1.5.0 `fetch.rs` and the official client's live test
//! `reads.rs` `fetch_reads_every_record_by_offset`): records from an absolute offset,
//! the partition's bounds with every answer, no lease taken and no cursor moved, and a
//! bad body refused whole.
//!
//! The cases need [`Capability::Fetch`](crate::case::Capability::Fetch).

use serde_json::{Value, json};

use super::core::{ack, ack_of, expect_error, msgs, pop_path, push_ids, stored, txn_ids};
use crate::case;
use crate::case::{Case, Failure};
use crate::ctx::{Ctx, expect, expect_eq, expect_status};

/// What a fetch answers.
const BY_OFFSET: &str = "POST /api/v1/fetch answers one result per entry, in request order: the partition's records from the absolute `offset` up, in order, each with its `offset`, `transactionId` and `payload`, and with every result the partition's bounds, `highWatermark` (its next offset) and `logStartOffset` (the oldest kept).";
/// No lease, no cursor.
const NO_LEASE: &str = "A fetch takes no lease, moves no cursor and claims nothing: two callers reading the same offsets get the same records, and neither disturbs a consumer group working the same partitions (a pop afterwards still gets the messages).";
/// The bounds.
const BOUNDS: &str = "An offset equal to `highWatermark` is caught up: no records and no error. An offset above it (or below `logStartOffset`) answers `error: OFFSET_OUT_OF_RANGE` with both bounds, so a consumer resets from the same answer. A queue or partition that does not exist answers no records and `error: UNKNOWN_TOPIC_OR_PARTITION`.";
/// The first record always comes back.
const FIRST_RECORD: &str = "An entry's `maxBytes` bounds what it reads, but at least one record always comes back, so one large record cannot stall a reader.";
/// A bad body.
const BAD_BODY: &str = "A bad fetch body (no `entries`, a negative or missing `offset`, an empty queue or partition name, `maxBytes` 0, more than 1,024 entries, a negative `maxWaitMs`) is 400 with `{error, code: bad_request}`, and the call reads and writes nothing.";

/// POST /api/v1/fetch; answers its `entries` after a 200.
async fn fetch(cx: &Ctx, body: Value) -> Result<Vec<Value>, Failure> {
    let r = cx.post("/api/v1/fetch", body).await?;
    expect_status(&r, 200)?;
    r.body["entries"]
        .as_array()
        .cloned()
        .ok_or_else(|| Failure::new("an `entries` array", r.body.to_string()))
}

/// One entry of a fetch.
fn entry(q: &str, p: &str, offset: i64) -> Value {
    json!({"queue": q, "partition": p, "offset": offset})
}

/// `records[*][key]` of a fetch result.
fn records(e: &Value, key: &str) -> Value {
    json!(
        e["records"]
            .as_array()
            .map(|r| r.iter().map(|x| x[key].clone()).collect::<Vec<_>>())
    )
}

/// Fails unless the result carries no `error`.
fn expect_no_error(what: &str, e: &Value) -> Result<(), Failure> {
    expect(
        e.get("error").is_none_or(Value::is_null),
        format!("{what}: no error"),
        format!("{what}: {e}"),
    )
}

/// Pushes `m0..m{n-1}` to `q`/`p`.
async fn pushed(cx: &Ctx, q: &str, p: &str, n: usize) -> Result<Vec<String>, Failure> {
    let ids: Vec<String> = (0..n).map(|i| format!("m{i}")).collect();
    let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    push_ids(cx, q, p, &refs).await?;
    Ok(ids)
}

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "surface.fetch.by-offset",
            Must,
            BY_OFFSET,
            [Core, Fetch],
            |cx: Ctx| async move {
                let q = cx.name("q");
                pushed(&cx, &q, "p", 3).await?;
                let e = fetch(
                    &cx,
                    json!({"entries": [entry(&q, "p", 0), entry(&q, "p", 1)]}),
                )
                .await?;
                expect_eq("the number of results", 2, &json!(e.len()))?;
                expect_eq(
                    "from 0: offsets",
                    json!([0, 1, 2]),
                    &records(&e[0], "offset"),
                )?;
                expect_eq(
                    "from 0: transactionIds",
                    json!(["m0", "m1", "m2"]),
                    &records(&e[0], "transactionId"),
                )?;
                expect_eq(
                    "from 0: payloads",
                    json!([0, 1, 2]),
                    &records(&e[0], "payload"),
                )?;
                expect_eq("from 0: highWatermark", 3, &e[0]["highWatermark"])?;
                expect_eq("from 0: logStartOffset", 0, &e[0]["logStartOffset"])?;
                expect_no_error("from 0", &e[0])?;
                expect_eq("from 1: offsets", json!([1, 2]), &records(&e[1], "offset"))?;
                expect_eq("from 1: highWatermark", 3, &e[1]["highWatermark"])?;
                expect_no_error("from 1", &e[1])
            }
        ),
        case!(
            "surface.fetch.no-lease-no-cursor",
            Must,
            NO_LEASE,
            [Core, Fetch],
            |cx: Ctx| async move {
                let (q, g) = (cx.name("q"), cx.name("g"));
                pushed(&cx, &q, "p", 3).await?;
                for i in 0..2 {
                    let e = fetch(&cx, json!({"entries": [entry(&q, "p", 0)]})).await?;
                    expect_eq(
                        &format!("fetch {}: offsets", i + 1),
                        json!([0, 1, 2]),
                        &records(&e[0], "offset"),
                    )?;
                }
                // The group that pops afterwards still gets every message.
                let m = msgs(&cx.pop(&pop_path(&q, &g, "&batch=10")).await?);
                expect_eq(
                    "a group's pop after two fetches",
                    json!(["m0", "m1", "m2"]),
                    &json!(txn_ids(&m)),
                )?;
                // Under that group's lease, a fetch still reads the records, and
                // the lease is still the group's.
                let e = fetch(&cx, json!({"entries": [entry(&q, "p", 0)]})).await?;
                expect_eq(
                    "a fetch while the batch is leased: offsets",
                    json!([0, 1, 2]),
                    &records(&e[0], "offset"),
                )?;
                let r = ack(&cx, ack_of(&m[2], "completed")).await?;
                expect(
                    r["success"] == json!(true),
                    "the lease holder's ack after the fetch succeeds",
                    r.to_string(),
                )?;
                // And the queue-mode consumer, which never read, gets them all too.
                let all = msgs(&cx.pop(&pop_path(&q, "__QUEUE_MODE__", "&batch=10")).await?);
                expect_eq(
                    "a queue-mode pop after the fetches",
                    json!(["m0", "m1", "m2"]),
                    &json!(txn_ids(&all)),
                )
            }
        ),
        case!(
            "surface.fetch.bounds",
            Must,
            BOUNDS,
            [Core, Fetch],
            |cx: Ctx| async move {
                let q = cx.name("q");
                pushed(&cx, &q, "p", 2).await?;
                let e = fetch(
                    &cx,
                    json!({"entries": [
                        entry(&q, "p", 2),
                        entry(&q, "p", 7),
                        entry(&q, "nope", 0),
                        entry(&cx.name("missing"), "p", 0),
                    ]}),
                )
                .await?;
                expect_eq("the number of results", 4, &json!(e.len()))?;
                expect_eq(
                    "at the high watermark: records",
                    json!([]),
                    &e[0]["records"],
                )?;
                expect_no_error("at the high watermark", &e[0])?;
                expect_eq(
                    "at the high watermark: highWatermark",
                    2,
                    &e[0]["highWatermark"],
                )?;
                expect_eq("above it: error", "OFFSET_OUT_OF_RANGE", &e[1]["error"])?;
                expect_eq("above it: records", json!([]), &e[1]["records"])?;
                expect_eq("above it: highWatermark", 2, &e[1]["highWatermark"])?;
                expect_eq("above it: logStartOffset", 0, &e[1]["logStartOffset"])?;
                for (i, what) in [(2, "an unknown partition"), (3, "an unknown queue")] {
                    expect_eq(&format!("{what}: records"), json!([]), &e[i]["records"])?;
                    expect_eq(
                        &format!("{what}: error"),
                        "UNKNOWN_TOPIC_OR_PARTITION",
                        &e[i]["error"],
                    )?;
                }
                Ok(())
            }
        ),
        case!(
            "surface.fetch.first-record-always",
            Must,
            FIRST_RECORD,
            [Core, Fetch],
            |cx: Ctx| async move {
                let q = cx.name("q");
                pushed(&cx, &q, "p", 3).await?;
                let e = fetch(
                    &cx,
                    json!({"entries": [{"queue": q, "partition": "p", "offset": 1, "maxBytes": 1}]}),
                )
                .await?;
                expect_eq(
                    "an entry with maxBytes 1 from offset 1: offsets",
                    json!([1]),
                    &records(&e[0], "offset"),
                )?;
                expect_eq("its highWatermark", 3, &e[0]["highWatermark"])
            }
        ),
        case!(
            "surface.fetch.bad-body",
            Must,
            BAD_BODY,
            [Core, Fetch],
            |cx: Ctx| async move {
                let (q, ghost) = (cx.name("q"), cx.name("ghost"));
                pushed(&cx, &q, "p", 2).await?;
                let many: Vec<Value> = (0..1025).map(|_| entry(&ghost, "p", 0)).collect();
                for (what, body) in [
                    ("no entries", json!({})),
                    (
                        "a negative offset",
                        json!({"entries": [entry(&q, "p", -1)]}),
                    ),
                    (
                        "a missing offset",
                        json!({"entries": [{"queue": q, "partition": "p"}]}),
                    ),
                    (
                        "an empty queue name",
                        json!({"entries": [entry("", "p", 0)]}),
                    ),
                    (
                        "an empty partition name",
                        json!({"entries": [entry(&ghost, "", 0)]}),
                    ),
                    (
                        "maxBytes 0",
                        json!({"entries": [{"queue": ghost, "partition": "p", "offset": 0, "maxBytes": 0}]}),
                    ),
                    ("1,025 entries", json!({"entries": many})),
                    (
                        "a negative maxWaitMs",
                        json!({"maxWaitMs": -1, "entries": [entry(&ghost, "p", 0)]}),
                    ),
                    (
                        "a good entry next to a bad one",
                        json!({"entries": [entry(&q, "p", 0), entry(&ghost, "p", -1)]}),
                    ),
                ] {
                    let r = cx.post("/api/v1/fetch", body).await?;
                    expect_error(&r, 400, "bad_request").map_err(|f| Failure {
                        expected: format!("{what}: {}", f.expected),
                        ..f
                    })?;
                }
                // Nothing was made of the names in the refused bodies, and nothing of
                // the real queue was taken.
                let ghosts = stored(&cx, &ghost).await?;
                expect(
                    ghosts.is_empty(),
                    "nothing stored under a name only refused fetches named",
                    format!("{:?}", txn_ids(&ghosts)),
                )?;
                let all = msgs(&cx.pop(&pop_path(&q, "__QUEUE_MODE__", "&batch=10")).await?);
                expect_eq(
                    "a pop of the real queue after the refused fetches",
                    json!(["m0", "m1"]),
                    &json!(txn_ids(&all)),
                )
            }
        ),
    ]
}
