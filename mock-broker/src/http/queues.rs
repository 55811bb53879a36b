//! Health, queue configuration and deletion.

use axum::Json as AxumJson;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::Caller;
use super::error::ApiError;
use super::extract::{Json, PathParams};
use super::wire::queues::options_patch;
use crate::engine::queues::Configure;
use crate::store::Health;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

/// `GET /health`: `healthy` (200) while writes commit; `degraded` (503, with the
/// `reason`: `storage_full` or `io_error`) from a failed commit until the next one
/// succeeds, so a load balancer takes the broker out while its disk is full or failing.
/// Reads keep answering meanwhile for clients that call the broker directly.
pub async fn health(State(s): State<super::AppState>) -> Response {
    let version = env!("CARGO_PKG_VERSION");
    match s.engine.storage_health() {
        Health::Healthy => {
            AxumJson(json!({ "status": "healthy", "version": version })).into_response()
        }
        Health::Degraded(why) => (
            StatusCode::SERVICE_UNAVAILABLE,
            AxumJson(json!({ "status": "degraded", "reason": why.as_str(), "version": version })),
        )
            .into_response(),
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConfigureBody {
    queue: Option<String>,
    namespace: Option<String>,
    task: Option<String>,
    options: Option<Map<String, Value>>,
    mode: Option<String>,
}

pub async fn configure(
    s: Caller,
    Json(body): Json<ConfigureBody>,
) -> Result<AxumJson<Value>, ApiError> {
    let queue = body
        .queue
        .ok_or_else(|| ApiError::bad_request("queue is required"))?;
    let replace = match body.mode.as_deref() {
        None | Some("merge") => false,
        Some("replace") => true,
        Some(m) => {
            return Err(ApiError::bad_request(format!(
                "mode must be \"merge\" or \"replace\", got {m:?}"
            )));
        }
    };
    let mut options = body.options.unwrap_or_default();
    // Clients may carry namespace and task inside options as well as beside them.
    let inner_ns = take_str(&mut options, "namespace")?;
    let inner_task = take_str(&mut options, "task")?;
    let req = Configure {
        queue: queue.clone(),
        namespace: body.namespace.or(inner_ns).map(Some),
        task: body.task.or(inner_task).map(Some),
        options: options_patch(options).map_err(ApiError::bad_request)?,
        replace,
    };
    let rec = s.engine.configure(s.tenant(), req).await?;
    Ok(AxumJson(json!({
        "configured": true,
        "queue": queue,
        "namespace": rec.namespace,
        "task": rec.task,
        "options": rec.options,
    })))
}

fn take_str(options: &mut Map<String, Value>, key: &str) -> Result<Option<String>, ApiError> {
    match options.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ApiError::bad_request(format!(
            "options.{key} must be a string, got {other}"
        ))),
    }
}

pub async fn delete_queue(
    s: Caller,
    PathParams(queue): PathParams<String>,
) -> Result<AxumJson<Value>, ApiError> {
    let deleted = s.engine.delete_queue(s.tenant(), &queue).await?;
    Ok(AxumJson(json!({ "deleted": deleted, "queue": queue })))
}
