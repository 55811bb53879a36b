//! What the wiremock tests share.

use serde_json::{Value, json};
use wiremock::{Request, Respond, ResponseTemplate};

/// Commits whatever transaction was sent, as a Queen 2 broker answers it: one result
/// per part, so that the SDK finds each Queen 2 part it asked for applied (a missing
/// one is a part the broker dropped, which the SDK reports instead of a commit). With
/// `positions: false`, it answers as Queen 2's engine does: no result for `positions`,
/// which it drops.
pub struct Commits {
    pub positions: bool,
}

impl Respond for Commits {
    fn respond(&self, req: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&req.body).unwrap_or_default();
        let list = |k: &str| body[k].as_array().cloned().unwrap_or_default();
        let mut results = Vec::new();
        for op in list("operations") {
            results.push(json!({"type": op["type"], "success": true}));
        }
        for (i, op) in list("kv").iter().enumerate() {
            results.push(
                json!({"type": "kv", "opIndex": i, "op": op["op"], "ns": op["ns"],
                                "key": op["key"], "applied": true, "version": 1}),
            );
        }
        for (i, t) in list("timers").iter().enumerate() {
            results.push(json!({"type": "timer", "opIndex": i, "queue": t["queue"],
                                "key": t["timerKey"], "ok": true, "status": "scheduled"}));
        }
        if self.positions {
            for (i, p) in list("positions").iter().enumerate() {
                results.push(
                    json!({"type": "position", "opIndex": i, "queue": p["queue"],
                                    "partition": p["partition"], "ok": true}),
                );
            }
        }
        ResponseTemplate::new(200).set_body_json(json!({
            "transactionId": "0199a7c2-61f0-7b02-9a4c-0e5d3f2b8c11", "success": true,
            "results": results
        }))
    }
}
