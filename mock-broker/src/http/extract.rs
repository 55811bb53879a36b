//! Strict request extraction: every refusal is an [`ApiError`] with a clear text.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Path, Query, RawPathParams, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;

use super::error::ApiError;
use crate::engine::queues::check_name;
use crate::error::EngineError;

/// Largest request body (`wire.md` section 1).
pub const MAX_BODY_BYTES: usize = 64 * 1024 * 1024;

/// A JSON body parsed strictly, with the path of the offending field in the error.
pub struct Json<T>(pub T);

/// Parses `bytes` as one JSON object of type `T`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    parse_json_with(bytes, ApiError::bad_request)
}

/// [`parse_json`] with the refusal of a body that is JSON but not of the shape of `T`
/// built by `shape` from its text (a route with its own code, e.g. `kv_bad_request`).
/// A body that is not portable JSON is still a plain `bad_request`.
pub fn parse_json_with<T: DeserializeOwned>(
    bytes: &[u8],
    shape: impl Fn(String) -> ApiError,
) -> Result<T, ApiError> {
    // Every body of the API is an object; serde would also read a struct from an array.
    if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    check_portable(bytes)?;
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // The plain parse first: tracking the path costs an allocation per field, and only a
    // refusal needs it. A body that fails is parsed again, with the path, for the error.
    if let Ok(value) = <T as serde::Deserialize>::deserialize(&mut de) {
        de.end()
            .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
        return Ok(value);
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let value: T = serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner();
        if path == "." {
            shape(format!("invalid JSON body: {inner}"))
        } else {
            shape(format!("invalid JSON body at {path}: {inner}"))
        }
    })?;
    de.end()
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))?;
    Ok(value)
}

/// Refuses a body that is not portable JSON (I-JSON, RFC 7493) anywhere in it, before
/// the typed parse. That parse skips the parts it does not read (unknown fields, a push
/// `payload` kept as raw text) without checking them, so without this a body with bytes
/// that are not UTF-8, a number out of range (`1e400`), a lone surrogate (`"\ud800"`)
/// or nesting deeper than 128 levels in such a part was stored and then broke every
/// consumer that decodes it (and the transaction route refused the same payload). A
/// duplicate key is refused too: the typed parse would keep one of the two silently, and
/// a proxy may have judged the other.
fn check_portable(bytes: &[u8]) -> Result<(), ApiError> {
    crate::portable::check(bytes)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

/// The refusal of a body over [`MAX_BODY_BYTES`].
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("the body is larger than {MAX_BODY_BYTES} bytes"),
    )
}

async fn body_bytes<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else if let Some(busy) = budget_spent(&e) {
            busy
        } else if timed_out(&e) {
            ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "the body did not arrive in time",
            )
        } else {
            ApiError::bad_request(format!("unreadable body: {}", e.body_text()))
        }
    })
}

/// The 429 of a chunked body whose next chunk found no room in the body budget
/// (`http::bodies`), if that is why reading it failed.
fn budget_spent(e: &(dyn std::error::Error + 'static)) -> Option<ApiError> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(EngineError::AnswersBusy(why)) = c.downcast_ref::<EngineError>() {
            return Some(EngineError::AnswersBusy(why.clone()).into());
        }
        cause = c.source();
    }
    None
}

/// Whether reading the body failed on the body deadline (see `http::serve`).
fn timed_out(e: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if c.is::<tower_http::timeout::TimeoutError>() {
            return true;
        }
        cause = c.source();
    }
    false
}

/// Parses a required body as [`Json`] does: present, then [`parse_json`].
pub fn parse_body<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    parse_body_with(bytes, ApiError::bad_request)
}

/// [`parse_body`] with the shape refusal of [`parse_json_with`].
pub fn parse_body_with<T: DeserializeOwned>(
    bytes: &[u8],
    shape: impl Fn(String) -> ApiError,
) -> Result<T, ApiError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ApiError::bad_request("a JSON body is required"));
    }
    parse_json_with(bytes, shape)
}

/// A body's bytes, read under the body limit and deadline, for a handler that parses
/// it with its own shape refusal ([`parse_body_with`]).
pub struct Body(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for Body {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        body_bytes(req, state).await.map(Body)
    }
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        parse_body(&bytes).map(Json)
    }
}

/// A JSON body that may be absent or empty (lease extension).
pub struct OptionalJson<T>(pub Option<T>);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body_bytes(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(None));
        }
        parse_json(&bytes).map(|v| OptionalJson(Some(v)))
    }
}

/// Query parameters, last value wins.
pub struct Params(pub HashMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for Params {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        check_escapes(parts.uri.query().unwrap_or(""), "query string")?;
        let q = Query::<Vec<(String, String)>>::try_from_uri(&parts.uri)
            .map_err(|e| ApiError::bad_request(format!("invalid query string: {e}")))?;
        Ok(Params(q.0.into_iter().collect()))
    }
}

impl Params {
    /// A parameter, with empty treated as absent.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .get(name)
            .map(String::as_str)
            .filter(|s| !s.is_empty())
    }

    /// A boolean parameter (`true`/`false`, `1`/`0`).
    pub fn bool(&self, name: &str, default: bool) -> Result<bool, ApiError> {
        match self.get(name) {
            None => Ok(default),
            Some("true" | "1") => Ok(true),
            Some("false" | "0") => Ok(false),
            Some(v) => Err(ApiError::bad_request(format!(
                "query parameter {name} must be true or false, got {v:?}"
            ))),
        }
    }

    /// An integer parameter within `min..=max`.
    pub fn int(&self, name: &str, default: i64, min: i64, max: i64) -> Result<i64, ApiError> {
        let Some(v) = self.get(name) else {
            return Ok(default);
        };
        match v.parse::<i64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            _ => Err(ApiError::bad_request(format!(
                "query parameter {name} must be an integer from {min} to {max}, got {v:?}"
            ))),
        }
    }
}

/// Path parameters, with a 400 instead of axum's default rejection.
pub struct PathParams<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for PathParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        check_escapes(parts.uri.path(), "path")?;
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("invalid path: {}", e.body_text())))?;
        for (name, value) in raw.iter() {
            // The router matches an empty segment (`/consumer-groups//queues/q/seek`):
            // that is a client's unfilled template, not a group, queue or key named "".
            if value.is_empty() {
                return Err(ApiError::bad_request(format!(
                    "invalid path: {name} must not be empty"
                )));
            }
            // Queue and partition names keep the same budget in a path as in a body
            // (413 `name_too_long`), on every route that names one.
            if matches!(name, "queue" | "partition") {
                check_name(name, value)?;
            }
        }
        Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| PathParams(p.0))
            .map_err(|e| ApiError::bad_request(format!("invalid path: {}", e.body_text())))
    }
}

/// Refuses a path or query string whose percent-escapes are malformed (`%zz`, a lone
/// `%`) or decode to bytes that are not UTF-8. The decoders axum uses are lenient: they
/// keep a malformed escape as literal text and replace bad bytes with U+FFFD, so `a%zz`
/// and `a%25zz` (or `%FF` and `%EF%BF%BD`) would silently name the same queue or group.
fn check_escapes(s: &str, what: &str) -> Result<(), ApiError> {
    let bad = |why: &str| ApiError::bad_request(format!("invalid {what}: {why}"));
    let b = s.as_bytes();
    let mut decoded = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok());
            let byte = hex
                .filter(|h| h.bytes().all(|c| c.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| bad("a % that does not start an escape of two hex digits"))?;
            decoded.push(byte);
            i += 3;
        } else {
            decoded.push(b[i]);
            i += 1;
        }
    }
    std::str::from_utf8(&decoded).map_err(|_| bad("an escape that does not decode to UTF-8"))?;
    Ok(())
}
