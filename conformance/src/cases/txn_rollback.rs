//! Rollback reasons of `POST /api/v1/transaction` and "a rolled-back transaction wrote
//! nothing".

use serde_json::json;

use crate::case;
use crate::case::Case;
use crate::ctx::{Ctx, expect, expect_eq};

/// The cases of this module.
pub fn cases() -> Vec<Case> {
    vec![
        case!(
            "txn.push.duplicate.in-window",
            Must,
            "An item whose transactionId is already in the partition's dedup window rolls the whole transaction back with reason: \"duplicate\".",
            [Core],
            |cx: Ctx| async move {
                let q = cx.name("q");
                cx.push(&q, "p", "dup-1", json!(1)).await?;
                let out = cx
                    .txn(json!({"operations": [
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "dup-1", "payload": 2}]},
                        {"type": "push", "items": [{"queue": q, "partition": "p", "transactionId": "fresh", "payload": 3}]}
                    ]}))
                    .await?;
                expect_eq("success", false, &out["success"])?;
                expect_eq("reason", "duplicate", &out["reason"])?;
                expect_eq("results", json!([]), &out["results"])?;
                // Nothing written: the fresh item is not there.
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}?batch=10")).await?;
                let n = p
                    .as_ref()
                    .map_or(0, |p| p["messages"].as_array().map_or(0, Vec::len));
                expect(n == 1, "only the original message", format!("{n} messages"))
            }
        ),
        case!(
            "txn.kv.precondition.failed-index",
            Must,
            "A lost required KV operation rolls back with reason: \"kv_precondition\", and failedIndex is in the same index space as results.",
            [Core, Kv],
            |cx: Ctx| async move {
                let (q, ns) = (cx.name("q"), cx.ns("gate"));
                let out = cx
                    .txn(json!({"kv": [{"op": "putIfAbsent", "ns": ns, "key": "m", "value": true, "forever": true}]}))
                    .await?;
                expect_eq("success", true, &out["success"])?;
                let out = cx
                    .txn(json!({
                        "operations": [{"type": "push", "items": [{"queue": q, "payload": 1}, {"queue": q, "payload": 2}]}],
                        "kv": [
                            {"op": "get", "ns": ns, "key": "other"},
                            {"op": "putIfAbsent", "ns": ns, "key": "m", "value": true, "forever": true, "required": true}
                        ]
                    }))
                    .await?;
                expect_eq("reason", "kv_precondition", &out["reason"])?;
                expect_eq("failedIndex", 3, &out["failedIndex"])?;
                expect_eq("kvReason", "exists", &out["kvReason"])?;
                expect_eq("value", true, &out["value"])?;
                let p = cx.pop(&format!("/api/v1/pop/queue/{q}")).await?;
                expect(p.is_none(), "no pushed message", "a message was stored")
            }
        ),
    ]
}
