//! Authentication and roles: bearer tokens from a token file or HS256 JWTs.
//!
//! Every call acts as one tenant, named by its token. Roles are ordered
//! `read-only` < `read-write` < `admin`; reads need `read-only`, writes `read-write`,
//! deleting a queue or a consumer group `admin`, and `GET /health` nothing.

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use hmac::{KeyInit, Mac};
use serde::Deserialize;
use serde_json::Value;

use crate::engine::DEFAULT_TENANT;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads: pop, list, get.
    ReadOnly,
    /// Reads and writes.
    ReadWrite,
    /// Everything, including deleting queues and consumer groups.
    Admin,
}

impl Role {
    /// Parses `read-only`, `read-write` or `admin` (also with `_`).
    pub fn parse(s: &str) -> Option<Role> {
        match s.replace('_', "-").as_str() {
            "read-only" | "readonly" => Some(Role::ReadOnly),
            "read-write" | "readwrite" => Some(Role::ReadWrite),
            "admin" => Some(Role::Admin),
            _ => None,
        }
    }
}

/// Who is calling.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// What it may do.
    pub role: Role,
    /// Whose data it acts on.
    pub tenant: String,
    /// Its subject, stamped on the messages it produces (`producerSub`).
    pub sub: Option<String>,
}

impl Identity {
    /// The caller when authentication is off: an admin of the default tenant.
    pub fn anonymous() -> Self {
        Identity {
            role: Role::Admin,
            tenant: DEFAULT_TENANT.to_string(),
            sub: None,
        }
    }
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No token, or one that does not verify (401).
    #[error("{0}")]
    Unauthenticated(String),
    /// A valid token whose role is too low for the route (403).
    #[error("{0}")]
    Forbidden(String),
}

/// Why the auth configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum AuthConfigError {
    /// The token file could not be read.
    #[error("cannot read the token file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The token file is not valid.
    #[error("invalid token file {path}: {reason}")]
    Invalid {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
}

#[derive(Deserialize)]
struct TokenEntry {
    role: String,
    #[serde(default)]
    tenant: Option<String>,
    #[serde(default)]
    sub: Option<String>,
}

/// The broker's authentication: a table of opaque tokens and/or an HS256 secret.
///
/// ```
/// use queen_mock_broker::auth::{Auth, Role};
/// let auth = Auth::new()
///     .token("s3cret", Role::ReadWrite, "acme", Some("svc-billing"))
///     .jwt_secret(b"hs256-secret".to_vec());
/// let who = auth.authenticate(Some("Bearer s3cret"), 0).unwrap();
/// assert_eq!((who.role, who.tenant.as_str()), (Role::ReadWrite, "acme"));
/// assert!(auth.authenticate(None, 0).is_err());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Auth {
    tokens: HashMap<String, Identity>,
    jwt_secret: Option<Vec<u8>>,
}

impl Auth {
    /// No tokens yet (every request is refused until some are added).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds an opaque token.
    pub fn token(mut self, token: &str, role: Role, tenant: &str, sub: Option<&str>) -> Self {
        self.tokens.insert(
            token.to_string(),
            Identity {
                role,
                tenant: tenant.to_string(),
                sub: sub.map(str::to_string),
            },
        );
        self
    }

    /// Accepts HS256 JWTs signed with `secret` (claims `role` or `roles`, `tenant`, `sub`,
    /// `exp`).
    pub fn jwt_secret(mut self, secret: Vec<u8>) -> Self {
        self.jwt_secret = Some(secret);
        self
    }

    /// Loads a token file: a JSON object mapping each token to
    /// `{"role": "read-write", "tenant": "acme", "sub": "svc-billing"}` (`tenant`
    /// defaults to `default`).
    pub fn from_token_file(path: &Path) -> Result<Self, AuthConfigError> {
        let p = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| AuthConfigError::Read {
            path: p.clone(),
            source,
        })?;
        let entries: HashMap<String, TokenEntry> =
            serde_json::from_str(&text).map_err(|e| AuthConfigError::Invalid {
                path: p.clone(),
                reason: e.to_string(),
            })?;
        let mut auth = Auth::new();
        for (token, e) in entries {
            let role = Role::parse(&e.role).ok_or_else(|| AuthConfigError::Invalid {
                path: p.clone(),
                reason: format!("unknown role {:?} (read-only, read-write or admin)", e.role),
            })?;
            let tenant = e.tenant.unwrap_or_else(|| DEFAULT_TENANT.to_string());
            auth = auth.token(&token, role, &tenant, e.sub.as_deref());
        }
        Ok(auth)
    }

    /// Checks an `Authorization` header at `now` (Unix seconds, for `exp`).
    pub fn authenticate(&self, header: Option<&str>, now: i64) -> Result<Identity, Denied> {
        let Some(h) = header else {
            return Err(Denied::Unauthenticated("a bearer token is required".into()));
        };
        let token = h
            .strip_prefix("Bearer ")
            .or_else(|| h.strip_prefix("bearer "))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                Denied::Unauthenticated("Authorization must be `Bearer <token>`".into())
            })?;
        if let Some(id) = self.tokens.get(token) {
            return Ok(id.clone());
        }
        if let Some(secret) = &self.jwt_secret
            && token.matches('.').count() == 2
        {
            return verify_jwt(token, secret, now);
        }
        Err(Denied::Unauthenticated("unknown or invalid token".into()))
    }
}

fn bad(why: &str) -> Denied {
    Denied::Unauthenticated(format!("invalid token: {why}"))
}

fn verify_jwt(token: &str, secret: &[u8], now: i64) -> Result<Identity, Denied> {
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(bad("not a JWT"));
    };
    let header: Value = B64URL
        .decode(h)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| bad("undecodable header"))?;
    if header.get("alg").and_then(Value::as_str) != Some("HS256") {
        return Err(bad("only HS256 is accepted"));
    }
    let sig = B64URL.decode(s).map_err(|_| bad("undecodable signature"))?;
    let mut mac =
        hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).map_err(|_| bad("bad secret"))?;
    mac.update(h.as_bytes());
    mac.update(b".");
    mac.update(p.as_bytes());
    // Constant-time comparison.
    mac.verify_slice(&sig)
        .map_err(|_| bad("signature does not verify"))?;
    let claims: Value = B64URL
        .decode(p)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or_else(|| bad("undecodable claims"))?;
    if let Some(exp) = claims.get("exp") {
        let exp = exp.as_i64().ok_or_else(|| bad("exp is not a number"))?;
        if exp <= now {
            return Err(bad("expired"));
        }
    }
    let mut roles: Vec<Role> = Vec::new();
    if let Some(r) = claims.get("role").and_then(Value::as_str) {
        roles.extend(Role::parse(r));
    }
    if let Some(rs) = claims.get("roles").and_then(Value::as_array) {
        roles.extend(rs.iter().filter_map(Value::as_str).filter_map(Role::parse));
    }
    let role = roles
        .into_iter()
        .max()
        .ok_or_else(|| bad("no known role claim"))?;
    Ok(Identity {
        role,
        tenant: claims
            .get("tenant")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_TENANT)
            .to_string(),
        sub: claims
            .get("sub")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The role a route needs; `None` for public routes.
pub fn required_role(method: &str, path: &str) -> Option<Role> {
    if path == "/health" {
        return None;
    }
    let admin = method == "DELETE"
        && (path.starts_with("/api/v1/resources/queues/")
            || path.starts_with("/api/v1/consumer-groups/"));
    Some(if admin {
        Role::Admin
    } else if method == "GET" || method == "HEAD" {
        Role::ReadOnly
    } else {
        Role::ReadWrite
    })
}

/// Signs claims as an HS256 JWT (for tests and tools).
///
/// ```
/// use queen_mock_broker::auth::{Auth, Role, sign_jwt};
/// let jwt = sign_jwt(b"k", &serde_json::json!({"role": "admin", "tenant": "t", "exp": 100}));
/// let who = Auth::new().jwt_secret(b"k".to_vec()).authenticate(Some(&format!("Bearer {jwt}")), 99).unwrap();
/// assert_eq!(who.role, Role::Admin);
/// ```
pub fn sign_jwt(secret: &[u8], claims: &Value) -> String {
    let h = B64URL.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
    let p = B64URL.encode(claims.to_string());
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(secret).expect("any key length");
    mac.update(h.as_bytes());
    mac.update(b".");
    mac.update(p.as_bytes());
    let s = B64URL.encode(mac.finalize().into_bytes());
    format!("{h}.{p}.{s}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn jwts_verify_expire_and_refuse_tampering() {
        let auth = Auth::new().jwt_secret(b"secret".to_vec());
        let ok = sign_jwt(
            b"secret",
            &json!({"roles": ["read-only", "read-write"], "tenant": "acme", "sub": "w1", "exp": 1000}),
        );
        let who = auth
            .authenticate(Some(&format!("Bearer {ok}")), 999)
            .unwrap();
        assert_eq!(
            who,
            Identity {
                role: Role::ReadWrite,
                tenant: "acme".into(),
                sub: Some("w1".into())
            }
        );
        assert!(
            auth.authenticate(Some(&format!("Bearer {ok}")), 1000)
                .is_err(),
            "expired"
        );
        let other_key = sign_jwt(b"nope", &json!({"role": "admin"}));
        assert!(
            auth.authenticate(Some(&format!("Bearer {other_key}")), 0)
                .is_err()
        );
        let mut parts: Vec<&str> = ok.split('.').collect();
        let forged = B64URL.encode(json!({"role": "admin", "tenant": "acme"}).to_string());
        parts[1] = &forged;
        assert!(
            auth.authenticate(Some(&format!("Bearer {}", parts.join("."))), 0)
                .is_err()
        );
        let no_role = sign_jwt(b"secret", &json!({"tenant": "acme"}));
        assert!(
            auth.authenticate(Some(&format!("Bearer {no_role}")), 0)
                .is_err()
        );
    }

    #[test]
    fn routes_need_the_documented_roles() {
        assert_eq!(required_role("GET", "/health"), None);
        assert_eq!(
            required_role("GET", "/api/v1/pop/queue/q"),
            Some(Role::ReadOnly)
        );
        assert_eq!(
            required_role("POST", "/api/v1/transaction"),
            Some(Role::ReadWrite)
        );
        assert_eq!(
            required_role("DELETE", "/api/v1/kv/n/k"),
            Some(Role::ReadWrite)
        );
        assert_eq!(
            required_role("DELETE", "/api/v1/resources/queues/q"),
            Some(Role::Admin)
        );
        assert_eq!(
            required_role("DELETE", "/api/v1/consumer-groups/g"),
            Some(Role::Admin)
        );
        assert!(Role::ReadOnly < Role::ReadWrite && Role::ReadWrite < Role::Admin);
    }
}
