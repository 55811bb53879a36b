//! The no-op baseline: an axum server that parses each request body as JSON
//! (`serde_json::Value`, as a broker must before anything else) and answers a fixed
//! 200. It measures what HTTP/1.1, axum and one JSON parse cost on this machine, so a
//! broker's figures can be given as a ratio of it, measured in the same run.

use std::future::Future;
use std::net::SocketAddr;

use anyhow::Context as _;
use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use tokio::net::TcpListener;

/// The answer to a call with no body (or one that is not a transaction): a commit
/// with no results.
pub(crate) const TRANSACTION_ANSWER: &str =
    r#"{"transactionId":"00000000-0000-7000-8000-000000000000","success":true,"results":[]}"#;

/// A transaction's commit as Queen 2 answers it: one result per part, in one index
/// space (operations, then `kv`, then `timers`, then `positions`, each with its
/// `opIndex`). The SDK reads a commit of KV, timers or positions without their results
/// as a Queen v0 broker that ignored them, so the baseline has to answer them; counting
/// the parts of the body it has already parsed is the least work that does.
fn commit_answer(body: &serde_json::Value) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(256);
    out.push_str(
        r#"{"transactionId":"00000000-0000-7000-8000-000000000000","success":true,"results":["#,
    );
    let mut index = 0usize;
    for (part, kind) in [
        ("operations", ""),
        ("kv", "kv"),
        ("timers", "timer"),
        ("positions", "position"),
    ] {
        let Some(items) = body.get(part).and_then(|v| v.as_array()) else {
            continue;
        };
        for (op_index, item) in items.iter().enumerate() {
            if index > 0 {
                out.push(',');
            }
            let kind = if kind.is_empty() {
                item.get("type").and_then(|t| t.as_str()).unwrap_or("push")
            } else {
                kind
            };
            let _ = write!(
                out,
                r#"{{"index":{index},"opIndex":{op_index},"type":"{kind}","applied":true}}"#
            );
            index += 1;
        }
    }
    out.push_str("]}");
    out
}

/// The answer to `POST /api/v1/push`: one queued item (the load generator pushes one).
pub(crate) const PUSH_ANSWER: &str = r#"[{"index":0,"message_id":"00000000-0000-7000-8000-000000000001","transaction_id":"noop","queueName":"noop","status":"queued","offset":0}]"#;

/// The answer to a pop (`GET /api/v1/pop...`, with `--noop-pop`): one message, shaped
/// as a broker answers it, carrying an input event of the load generator.
pub(crate) const POP_ANSWER: &str = r#"{"success":true,"queue":"noop","partition":"p-1","partitionId":"1","leaseId":"0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37","consumerGroup":"__QUEUE_MODE__","messages":[{"id":"0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f38","transactionId":"order-noop-paid","traceId":null,"data":{"orderId":"order-noop","customer":"customer-1","total":120.5},"producerSub":null,"createdAt":"2026-11-30T10:18:02.555597Z","partitionId":"1","partition":"p-1","leaseId":"0199a7c2-5e1b-7f3a-8c21-4d9e0b6a1f37","consumerGroup":"__QUEUE_MODE__","queue":"noop","offset":0,"deliveryAttempt":1}],"partitionsClaimed":1}"#;

/// The answer to an ack (`POST /api/v1/ack/batch`, `pop-ack`): one verdict, for the
/// one message of [`POP_ANSWER`].
pub(crate) const ACK_ANSWER: &str = r#"[{"index":0,"transactionId":"order-noop-paid","success":true,"error":null,"leaseReleased":true,"dlq":false,"noop":false}]"#;

async fn handle(uri: Uri, body: Bytes) -> Response {
    let mut parsed = None;
    if !body.is_empty() {
        match serde_json::from_slice::<serde_json::Value>(&body) {
            Ok(v) => parsed = Some(std::hint::black_box(v)),
            Err(e) => {
                return (
                    StatusCode::BAD_REQUEST,
                    [(header::CONTENT_TYPE, "application/json")],
                    format!(
                        r#"{{"error":{},"code":"bad_request"}}"#,
                        serde_json::to_string(&e.to_string()).unwrap_or_default()
                    ),
                )
                    .into_response();
            }
        }
    }
    let answer = if uri.path() == "/api/v1/push" {
        PUSH_ANSWER
    } else if uri.path().starts_with("/api/v1/pop") {
        POP_ANSWER
    } else if uri.path().starts_with("/api/v1/ack") {
        ACK_ANSWER
    } else if let Some(body) = parsed
        .as_ref()
        .filter(|_| uri.path() == "/api/v1/transaction")
    {
        return (
            [(header::CONTENT_TYPE, "application/json")],
            commit_answer(body),
        )
            .into_response();
    } else {
        TRANSACTION_ANSWER
    };
    ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

/// The no-op router: every method and path.
pub(crate) fn router() -> Router {
    Router::new().fallback(handle)
}

/// Binds `addr`.
pub(crate) async fn bind(addr: SocketAddr) -> anyhow::Result<(TcpListener, SocketAddr)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr().context("the bound address")?;
    Ok((listener, bound))
}

/// Serves until `stop` completes.
pub(crate) async fn serve(
    listener: TcpListener,
    stop: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    axum::serve(listener, router())
        .with_graceful_shutdown(stop)
        .await
        .context("the no-op server failed")
}

#[cfg(test)]
mod tests {
    #[test]
    fn fixed_answers_are_json() {
        for a in [
            super::TRANSACTION_ANSWER,
            super::PUSH_ANSWER,
            super::POP_ANSWER,
            super::ACK_ANSWER,
        ] {
            serde_json::from_str::<serde_json::Value>(a).unwrap();
        }
    }

    #[test]
    fn a_commit_answers_every_part_in_one_index_space() {
        let body = serde_json::json!({
            "operations": [{"type": "ack"}, {"type": "push"}],
            "kv": [{"op": "put"}],
            "timers": [{"op": "schedule"}],
            "positions": [{"queue": "q"}]
        });
        let answer: serde_json::Value = serde_json::from_str(&super::commit_answer(&body)).unwrap();
        let results = answer["results"].as_array().unwrap();
        let kinds: Vec<_> = results
            .iter()
            .map(|r| r["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["ack", "push", "kv", "timer", "position"]);
        let indexes: Vec<_> = results
            .iter()
            .map(|r| r["index"].as_u64().unwrap())
            .collect();
        assert_eq!(indexes, [0, 1, 2, 3, 4]);
        assert_eq!(results[2]["opIndex"], 0);
        assert_eq!(answer["success"], true);
    }
}
