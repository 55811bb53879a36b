//! Authentication and roles: bearer tokens from a token file or HS256 JWTs.
//!
//! Every call acts as one tenant, named by its token. Roles are ordered
//! `read-only` < `read-write` < `admin`; reads need `read-only`, every call that changes
//! state `read-write` whatever its method (pops included),
//! deleting a queue or a consumer group `admin`, and `GET /health` nothing.

use std::collections::HashMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use crate::engine::DEFAULT_TENANT;

/// What a caller may do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Reads that change nothing: list, get, browse (not pop: a pop leases).
    ReadOnly,
    /// Reads and writes.
    ReadWrite,
    /// Everything, including deleting queues and consumer groups.
    Admin,
}

impl Role {
    /// Its name: `read-only`, `read-write` or `admin`.
    ///
    /// ```
    /// use queen_mock_broker::auth::Role;
    /// assert_eq!(Role::ReadWrite.as_str(), "read-write");
    /// assert_eq!(Role::parse(Role::Admin.as_str()), Some(Role::Admin));
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            Role::ReadOnly => "read-only",
            Role::ReadWrite => "read-write",
            Role::Admin => "admin",
        }
    }

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
    jwt_default_tenant: Option<String>,
    jwt_require_exp: bool,
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

    /// The tenant of a JWT that carries no `tenant` claim. Without one, such a token is
    /// refused (401 `unauthorized`): a token must say whose data it acts on. A `tenant`
    /// claim that is not a string (a number, an array, `null`) is refused either way.
    pub fn jwt_default_tenant(mut self, tenant: &str) -> Self {
        self.jwt_default_tenant = Some(tenant.to_string());
        self
    }

    /// Refuses a JWT without an `exp` claim (401 `unauthorized`): a token must expire.
    /// Off unless called; the binary turns it on with a JWT secret (`--jwt-require-exp`).
    pub fn jwt_require_exp(mut self, required: bool) -> Self {
        self.jwt_require_exp = required;
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
            return verify_jwt(token, secret, self, now);
        }
        Err(Denied::Unauthenticated("unknown or invalid token".into()))
    }
}

fn bad(why: &str) -> Denied {
    Denied::Unauthenticated(format!("invalid token: {why}"))
}

/// Seconds of clock skew tolerated on `exp` and `nbf` (a token that expired this long
/// ago, or becomes valid this soon, is still taken).
pub const JWT_LEEWAY_SECS: i64 = 5;

/// Says in our own words why `jsonwebtoken` refused a token: its messages name its
/// internals (serde's variants, its error kinds), which a caller has no use for.
fn jwt_refusal(e: &jsonwebtoken::errors::Error) -> Denied {
    use jsonwebtoken::errors::ErrorKind as K;
    bad(match e.kind() {
        K::InvalidSignature => "the signature does not match",
        K::InvalidAlgorithm | K::InvalidAlgorithmName | K::UnsupportedAlgorithm => {
            "only HS256 is accepted"
        }
        K::MissingAlgorithm => "the header names no algorithm (only HS256 is accepted)",
        // A header that does not parse: `alg: none` lands here (no such algorithm).
        K::Json(_) | K::Base64(_) | K::Utf8(_) | K::InvalidToken => {
            "not a well-formed HS256 JWT (header.claims.signature, base64url JSON)"
        }
        _ => "it cannot be verified",
    })
}

/// A time claim (`exp`, `nbf`) as Unix seconds: an integer, or a number past `i64`
/// taken as `i64::MAX`/`i64::MIN`, or a float cut to whole seconds (saturating).
fn time_claim(claims: &Value, name: &str) -> Result<Option<i64>, Denied> {
    let Some(t) = claims.get(name) else {
        return Ok(None);
    };
    if let Some(i) = t.as_i64() {
        return Ok(Some(i));
    }
    if t.as_u64().is_some() {
        return Ok(Some(i64::MAX)); // past i64: as far in the future as it goes
    }
    match t.as_f64() {
        // `as` saturates: 1e300 is i64::MAX, -1e300 i64::MIN.
        Some(f) if f.is_finite() => Ok(Some(f as i64)),
        _ => Err(bad(&format!("{name} is not a number of seconds"))),
    }
}

/// Refuses a JWT whose claims text (the signed middle part, already verified) is not
/// portable JSON: above all, one that gives a key twice.
fn check_claims_text(token: &str) -> Result<(), Denied> {
    use base64::Engine as _;
    let claims = token.split('.').nth(1).unwrap_or_default();
    let text = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(claims.trim_end_matches('='))
        .map_err(|_| bad("the claims are not base64url"))?;
    crate::portable::check(&text)
        .map_err(|e| bad(&format!("the claims are not portable JSON ({e})")))
}

/// Verifies an HS256 JWT with the `jsonwebtoken` crate (signature, algorithm, shape)
/// and checks `exp` and `nbf` against `now`, the broker's clock rather than the system
/// clock the crate would read, so a test's manual clock governs expiry too. The leeway
/// is added and taken with saturating arithmetic: no claim's value can overflow it.
fn verify_jwt(token: &str, secret: &[u8], auth: &Auth, now: i64) -> Result<Identity, Denied> {
    use jsonwebtoken::{Algorithm, DecodingKey, Validation, decode};
    let mut v = Validation::new(Algorithm::HS256);
    v.validate_exp = false;
    v.validate_nbf = false;
    v.validate_aud = false;
    v.required_spec_claims.clear();
    let key = DecodingKey::from_secret(secret).map_err(|e| jwt_refusal(&e))?;
    let claims = decode::<Value>(token, &key, &v)
        .map_err(|e| jwt_refusal(&e))?
        .claims;
    // serde keeps the last of a key given twice: `role: read-only` then `role: admin`
    // would be admin. A claims text that is not portable JSON is refused instead.
    check_claims_text(token)?;
    let exp = time_claim(&claims, "exp")?;
    if exp.is_none() && auth.jwt_require_exp {
        return Err(bad("no exp claim (the broker requires one)"));
    }
    if exp.is_some_and(|exp| exp.saturating_add(JWT_LEEWAY_SECS) <= now) {
        return Err(bad("expired"));
    }
    if time_claim(&claims, "nbf")?.is_some_and(|nbf| nbf.saturating_sub(JWT_LEEWAY_SECS) > now) {
        return Err(bad("not valid yet (nbf)"));
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
    let tenant = match claims.get("tenant") {
        Some(Value::String(t)) => t.clone(),
        Some(_) => return Err(bad("the tenant claim is not a string")),
        None => auth
            .jwt_default_tenant
            .as_deref()
            .ok_or_else(|| bad("no tenant claim (and the broker names no default tenant)"))?
            .to_string(),
    };
    Ok(Identity {
        role,
        tenant,
        sub: claims
            .get("sub")
            .and_then(Value::as_str)
            .map(str::to_string),
    })
}

/// The role a route needs; `None` for public routes.
///
/// What decides is whether the call can change state, not its method: a pop is a `GET`
/// but leases messages, may commit them (`autoAck=true`) and may create a consumer
/// group's subscription, so it needs `read-write` like every other write.
pub fn required_role(method: &str, path: &str) -> Option<Role> {
    // The console's files hold no data: the page asks for a token and reads the API.
    if path == "/health" || crate::http::console::is_public(method, path) {
        return None;
    }
    // Deleting a queue or a group; and the process's own figures (CPU, memory,
    // commits, stored bytes), which move with every tenant's traffic.
    let admin = (method == "DELETE"
        && (path.starts_with("/api/v1/resources/queues/")
            || path.starts_with("/api/v1/consumer-groups/")))
        || ((method == "GET" || method == "HEAD")
            && path.trim_end_matches('/') == "/api/v1/analytics/system-metrics");
    // The `GET`s that consume: every pop (by queue, by partition, queue-wide or by
    // namespace/task, and the ephemeral pop).
    let consumes = (method == "GET" || method == "HEAD") && is_pop(path);
    // The stream runner's state reads, reads by offset, partition discovery and the
    // status refresh are POSTs (their questions are bodies) that change nothing: a
    // read-only token may make them.
    let read = ((method == "GET" || method == "HEAD") && !consumes)
        || (method == "POST"
            && matches!(
                path,
                "/streams/v1/state/get"
                    | "/streams/v1/state/partitions"
                    | "/api/v1/fetch"
                    | "/api/v1/partitions/changed"
                    | "/api/v1/stats/refresh"
            ));
    Some(if admin {
        Role::Admin
    } else if read {
        Role::ReadOnly
    } else {
        Role::ReadWrite
    })
}

/// A pop route: `/api/v1/pop` and everything under it, and `/api/v1/ephemeral/pop`
/// (a trailing `/` or more segments included, so no spelling of the path slips by).
fn is_pop(path: &str) -> bool {
    let under = |root: &str| {
        path.strip_prefix(root)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    under("/api/v1/pop") || under("/api/v1/ephemeral/pop")
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
    use jsonwebtoken::{EncodingKey, Header, encode};
    let key = EncodingKey::from_secret(secret).expect("a usable HS256 secret");
    encode(&Header::default(), claims, &key).expect("HS256 signs any JSON claims")
}

#[cfg(test)]
mod tests {
    use super::*;
    use base64::Engine as _;
    use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
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
            auth.authenticate(Some(&format!("Bearer {ok}")), 1000 + JWT_LEEWAY_SECS - 1)
                .is_ok(),
            "within the leeway"
        );
        assert!(
            auth.authenticate(Some(&format!("Bearer {ok}")), 1000 + JWT_LEEWAY_SECS)
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

    /// A claims text with a key twice: `jsonwebtoken` (serde) keeps the last value, so
    /// `role: read-only` then `role: admin` read as admin. The broker refuses such a
    /// token (401) rather than choose one of the two.
    #[test]
    fn a_jwt_with_a_duplicated_claim_key_is_refused() {
        let signed = |claims: &str| {
            let head = B64URL.encode(br#"{"alg":"HS256","typ":"JWT"}"#);
            let body = B64URL.encode(claims);
            let key = jsonwebtoken::EncodingKey::from_secret(b"secret").unwrap();
            let sig = jsonwebtoken::crypto::sign(
                format!("{head}.{body}").as_bytes(),
                &key,
                jsonwebtoken::Algorithm::HS256,
            )
            .unwrap();
            format!("Bearer {head}.{body}.{sig}")
        };
        let auth = Auth::new().jwt_secret(b"secret".to_vec());
        let once = signed(r#"{"role": "read-only", "tenant": "t"}"#);
        assert_eq!(
            auth.authenticate(Some(&once), 0).unwrap().role,
            Role::ReadOnly
        );
        for claims in [
            r#"{"role": "read-only", "tenant": "t", "role": "admin"}"#,
            r#"{"role": "admin", "tenant": "t", "tenant": "other"}"#,
            r#"{"role": "admin", "tenant": "t", "x": {"a": 1, "a": 2}}"#,
        ] {
            let err = auth.authenticate(Some(&signed(claims)), 0).unwrap_err();
            assert!(
                matches!(&err, Denied::Unauthenticated(m) if m.contains("duplicate")),
                "{claims}: {err:?}"
            );
        }
    }

    #[test]
    fn nbf_is_honoured_with_the_leeway_and_other_algorithms_are_refused() {
        let auth = Auth::new().jwt_secret(b"secret".to_vec());
        let later = sign_jwt(
            b"secret",
            &json!({"role": "admin", "tenant": "t", "nbf": 2000}),
        );
        let at = |now| auth.authenticate(Some(&format!("Bearer {later}")), now);
        assert!(at(2000 - JWT_LEEWAY_SECS - 1).is_err(), "not valid yet");
        assert!(at(2000 - JWT_LEEWAY_SECS).is_ok());
        // An HS512 token with the right secret is still refused: HS256 only.
        let hs512 = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
            &json!({"role": "admin"}),
            &jsonwebtoken::EncodingKey::from_secret(b"secret").unwrap(),
        )
        .unwrap();
        assert!(
            auth.authenticate(Some(&format!("Bearer {hs512}")), 0)
                .is_err()
        );
        // `alg: none` is never accepted.
        let none = format!(
            "{}.{}.",
            B64URL.encode(br#"{"alg":"none","typ":"JWT"}"#),
            B64URL.encode(br#"{"role":"admin"}"#)
        );
        assert!(
            auth.authenticate(Some(&format!("Bearer {none}")), 0)
                .is_err()
        );
    }

    #[test]
    fn time_claims_at_the_edges_of_the_integers_do_not_overflow_the_leeway() {
        let auth = Auth::new().jwt_secret(b"secret".to_vec());
        let at = |mut claims: Value, now: i64| {
            claims["tenant"] = json!("t");
            let jwt = sign_jwt(b"secret", &claims);
            auth.authenticate(Some(&format!("Bearer {jwt}")), now)
        };
        // Far-future expiries are valid at any time, however they are written.
        for exp in [
            json!(i64::MAX),
            json!(u64::MAX),
            json!(i64::MAX - 1),
            json!(1e300),
        ] {
            for now in [0, i64::MAX - JWT_LEEWAY_SECS, i64::MAX - 1] {
                assert!(
                    at(json!({"role": "admin", "exp": exp}), now).is_ok(),
                    "exp {exp} at {now}"
                );
            }
        }
        // Long-past ones are expired, without underflow.
        for exp in [json!(i64::MIN), json!(-1e300)] {
            let err = at(json!({"role": "admin", "exp": exp}), 0).unwrap_err();
            assert!(err.to_string().contains("expired"), "{err}");
        }
        // A very negative `nbf` is valid at once; one at the top never.
        for nbf in [json!(i64::MIN), json!(i64::MIN + 1), json!(-1e300)] {
            assert!(at(json!({"role": "admin", "nbf": nbf}), i64::MIN).is_ok());
            assert!(at(json!({"role": "admin", "nbf": nbf}), 0).is_ok());
        }
        let err = at(json!({"role": "admin", "nbf": u64::MAX}), i64::MAX - 10).unwrap_err();
        assert!(err.to_string().contains("not valid yet"), "{err}");
        let err = at(json!({"role": "admin", "exp": "soon"}), 0).unwrap_err();
        assert_eq!(
            err,
            Denied::Unauthenticated("invalid token: exp is not a number of seconds".into())
        );
    }

    #[test]
    fn token_errors_are_in_our_words_not_the_jwt_librarys() {
        let auth = Auth::new().jwt_secret(b"secret".to_vec());
        let refusal = |token: &str| {
            auth.authenticate(Some(&format!("Bearer {token}")), 0)
                .unwrap_err()
                .to_string()
        };
        let none = format!(
            "{}.{}.",
            B64URL.encode(br#"{"alg":"none","typ":"JWT"}"#),
            B64URL.encode(br#"{"role":"admin"}"#)
        );
        let hs512 = jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
            &json!({"role": "admin"}),
            &jsonwebtoken::EncodingKey::from_secret(b"secret").unwrap(),
        )
        .unwrap();
        let other_key = sign_jwt(b"nope", &json!({"role": "admin"}));
        let garbage = format!(
            "{}.{}.sig",
            B64URL.encode(b"not json"),
            B64URL.encode(b"{}")
        );
        for (token, said) in [
            (
                none.as_str(),
                "invalid token: not a well-formed HS256 JWT (header.claims.signature, base64url JSON)",
            ),
            (hs512.as_str(), "invalid token: only HS256 is accepted"),
            (
                other_key.as_str(),
                "invalid token: the signature does not match",
            ),
            (
                garbage.as_str(),
                "invalid token: not a well-formed HS256 JWT (header.claims.signature, base64url JSON)",
            ),
        ] {
            let err = refusal(token);
            assert_eq!(err, said, "{token}");
            for internal in ["variant", "expected", "Error", "Json", "Base64", "serde"] {
                assert!(!err.contains(internal), "{err} names {internal}");
            }
        }
    }

    #[test]
    fn a_jwt_without_a_string_tenant_is_refused_unless_a_default_is_named() {
        let strict = Auth::new().jwt_secret(b"secret".to_vec());
        let lenient = strict.clone().jwt_default_tenant("fallback");
        let with = |auth: &Auth, claims: Value| {
            let jwt = sign_jwt(b"secret", &claims);
            auth.authenticate(Some(&format!("Bearer {jwt}")), 0)
        };
        // Missing: refused, or the named default.
        let missing = json!({"role": "read-write", "sub": "w"});
        assert_eq!(
            with(&strict, missing.clone()),
            Err(Denied::Unauthenticated(
                "invalid token: no tenant claim (and the broker names no default tenant)".into()
            ))
        );
        assert_eq!(with(&lenient, missing).unwrap().tenant, "fallback");
        // Not a string: refused whatever the default.
        for tenant in [
            json!(42),
            json!(["acme"]),
            json!(null),
            json!({"id": "acme"}),
        ] {
            for auth in [&strict, &lenient] {
                assert_eq!(
                    with(auth, json!({"role": "admin", "tenant": tenant})),
                    Err(Denied::Unauthenticated(
                        "invalid token: the tenant claim is not a string".into()
                    )),
                    "{tenant}"
                );
            }
        }
        // A string tenant is taken as is, default or not.
        for auth in [&strict, &lenient] {
            let who = with(auth, json!({"role": "admin", "tenant": "acme"})).unwrap();
            assert_eq!(who.tenant, "acme");
        }
    }

    #[test]
    fn exp_is_required_when_asked() {
        let lax = Auth::new().jwt_secret(b"secret".to_vec());
        let strict = lax.clone().jwt_require_exp(true);
        let with = |auth: &Auth, claims: Value| {
            let jwt = sign_jwt(b"secret", &claims);
            auth.authenticate(Some(&format!("Bearer {jwt}")), 100)
        };
        let forever = json!({"role": "admin", "tenant": "t"});
        assert!(with(&lax, forever.clone()).is_ok());
        assert_eq!(
            with(&strict, forever),
            Err(Denied::Unauthenticated(
                "invalid token: no exp claim (the broker requires one)".into()
            ))
        );
        let expiring = json!({"role": "admin", "tenant": "t", "exp": 200});
        assert!(with(&strict, expiring).is_ok());
    }

    #[test]
    fn the_jwt_io_test_vector_verifies_and_is_then_refused_for_its_missing_role() {
        // The HS256 example token of jwt.io, signed with "your-256-bit-secret".
        let token = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c";
        let right = Auth::new().jwt_secret(b"your-256-bit-secret".to_vec());
        let err = right
            .authenticate(Some(&format!("Bearer {token}")), 0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("no known role claim"),
            "the signature verified: {err}"
        );
        let wrong = Auth::new().jwt_secret(b"another-secret".to_vec());
        let err = wrong
            .authenticate(Some(&format!("Bearer {token}")), 0)
            .unwrap_err()
            .to_string();
        assert!(!err.contains("role"), "refused at the signature: {err}");
    }

    #[test]
    fn routes_need_the_documented_roles() {
        assert_eq!(required_role("GET", "/health"), None);
        for pop in [
            "/api/v1/pop",
            "/api/v1/pop/",
            "/api/v1/pop/queue/q",
            "/api/v1/pop/queue/q/partition/p",
            "/api/v1/ephemeral/pop",
        ] {
            assert_eq!(required_role("GET", pop), Some(Role::ReadWrite), "{pop}");
        }
        assert_eq!(
            required_role("GET", "/api/v1/popular"),
            Some(Role::ReadOnly),
            "only the pop routes themselves"
        );
        assert_eq!(
            required_role("POST", "/api/v1/stats/refresh"),
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
        for spelling in [
            "/api/v1/analytics/system-metrics",
            "/api/v1/analytics/system-metrics/",
        ] {
            assert_eq!(
                required_role("GET", spelling),
                Some(Role::Admin),
                "{spelling}"
            );
        }
        assert_eq!(
            required_role("GET", "/api/v1/analytics/worker-metrics"),
            Some(Role::ReadOnly)
        );
        assert!(Role::ReadOnly < Role::ReadWrite && Role::ReadWrite < Role::Admin);
    }
}
