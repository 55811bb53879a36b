//! What a web browser may ask of the broker: only what a page of the broker's own
//! origin asks (the console), or one the operator allowed.
//!
//! With auth off (the default, on a laptop) a broker on loopback trusts whoever can
//! open a connection to it, and every web page the developer opens can: a `no-cors`
//! `fetch` of a JSON `Blob` (no `Content-Type`, no preflight) pushed messages and wrote
//! KV rows, an `<img src=".../pop/queue/q?autoAck=true">` consumed a queue, and a name
//! of the attacker's that resolves to 127.0.0.1 (DNS rebinding) made its page
//! same-origin with the broker. Three checks close those ways, before authentication:
//!
//! - **Origin**: a request whose `Origin` is not the broker's own (`http://` or
//!   `https://` and its `Host`) and not one the operator allowed is refused, 403
//!   `origin_not_allowed`. A request with no `Origin` whose `Sec-Fetch-Site` says
//!   another site sent it (`cross-site`, `same-site`: a page of another port on
//!   localhost is `same-site`) is refused alike, but for a `GET` of the console's own
//!   files (opening the console from a link reads nothing). Clients that are not
//!   browsers (curl, the SDK, the official clients) send neither header.
//! - **Content-Type** (in `http::not_json`): a body that is not declared JSON is 415,
//!   whether it declares another type or none; an empty body needs no type.
//! - **Host**: while the broker listens on a loopback address, a request whose `Host`
//!   is not a loopback name (`localhost`, `*.localhost`, `127.x.y.z`, `[::1]`, with any
//!   port) or one the operator allowed is refused, 403 `host_not_allowed`: a rebound
//!   name reaches the broker with its own name in `Host`. A request without a `Host`
//!   (HTTP/1.0) carries no name to judge, and no browser sends one.
//!
//! An allowed origin gets CORS answers (`Access-Control-Allow-Origin`, and 204 to its
//! preflight `OPTIONS`), so its page can call the API with a token.

use std::net::IpAddr;

use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// Which browsers' requests the broker takes beyond its own origin's, and under which
/// host names; built by [`crate::MockBrokerBuilder::allow_origin`] and
/// [`crate::MockBrokerBuilder::allow_host`] (the binary's `--allow-origin`,
/// `--allow-host`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BrowserPolicy {
    /// Origins (`scheme://host[:port]`, lowercase, no trailing `/`) whose pages may call.
    origins: Vec<String>,
    /// Host names (lowercase, without a port) taken on a loopback broker beyond the
    /// loopback names.
    hosts: Vec<String>,
    /// Whether `Host` is checked: the broker listens on a loopback address.
    loopback: bool,
}

impl BrowserPolicy {
    /// Lets pages of `origin` (`http://localhost:3000`; `*` for any) call the API.
    pub fn allow_origin(mut self, origin: &str) -> Self {
        self.origins
            .push(origin.trim().trim_end_matches('/').to_ascii_lowercase());
        self
    }

    /// Takes requests naming `host` (`queen.internal`, without a port) on a broker that
    /// listens on loopback.
    pub fn allow_host(mut self, host: &str) -> Self {
        let h = host.trim().to_ascii_lowercase();
        self.hosts.push(split_port(&h).to_string());
        self
    }

    /// The policy for a broker listening on `ip`: `Host` is checked only on loopback.
    pub(crate) fn listening_on(mut self, ip: IpAddr) -> Self {
        self.loopback = ip.is_loopback();
        self
    }

    fn origin_allowed(&self, origin: &str) -> bool {
        let o = origin.to_ascii_lowercase();
        self.origins.iter().any(|a| a == "*" || *a == o)
    }

    /// The refusal of a request this policy does not take, if it does not.
    pub(crate) fn check(
        &self,
        method: &Method,
        path: &str,
        headers: &HeaderMap,
    ) -> Option<Response> {
        let host = headers
            .get(header::HOST)
            .map(|h| h.to_str().unwrap_or("\u{0}"));
        if self.loopback
            && let Some(host) = host
            && !self.host_allowed(host)
        {
            return Some(
                ApiError::new(
                    StatusCode::FORBIDDEN,
                    "host_not_allowed",
                    format!(
                        "this broker listens on loopback and answers only to loopback names \
                         (localhost, 127.0.0.1, [::1]), not {host:?}; start it with \
                         --allow-host NAME to answer to that name"
                    ),
                )
                .into_response(),
            );
        }
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or("");
            let own = host.is_some_and(|h| {
                let h = h.to_ascii_lowercase();
                let o = origin.to_ascii_lowercase();
                o == format!("http://{h}") || o == format!("https://{h}")
            });
            if own || self.origin_allowed(origin) {
                return None;
            }
            return Some(refuse_origin(&format!("a page of {origin:?}")));
        }
        let site = headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let other_site =
            site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site");
        if other_site && !super::console::is_public(method.as_str(), path) {
            return Some(refuse_origin(&format!("a {site} page")));
        }
        None
    }

    /// Whether `host` (a `Host` header: a name or address, maybe with a port) names
    /// this loopback broker.
    fn host_allowed(&self, host: &str) -> bool {
        let name = split_port(host.trim()).to_ascii_lowercase();
        if name == "localhost" || name.ends_with(".localhost") {
            return true;
        }
        let bare = name.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback()) {
            return true;
        }
        self.hosts.contains(&name)
    }

    /// The CORS answer to an allowed origin's preflight, or its refusal; `None` for a
    /// request that is not a preflight.
    pub(crate) fn preflight(&self, method: &Method, headers: &HeaderMap) -> Option<Response> {
        if method != Method::OPTIONS || !headers.contains_key("access-control-request-method") {
            return None;
        }
        let origin = headers.get(header::ORIGIN)?;
        if !self.origin_allowed(origin.to_str().unwrap_or("")) {
            return None; // refused by `check`, or the broker's own origin (no preflight).
        }
        let mut res = StatusCode::NO_CONTENT.into_response();
        let h = res.headers_mut();
        h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
        h.insert(
            header::ACCESS_CONTROL_ALLOW_METHODS,
            HeaderValue::from_static("GET, POST, PUT, DELETE"),
        );
        h.insert(
            header::ACCESS_CONTROL_ALLOW_HEADERS,
            HeaderValue::from_static("authorization, content-type"),
        );
        h.insert(
            header::ACCESS_CONTROL_MAX_AGE,
            HeaderValue::from_static("600"),
        );
        h.insert(header::VARY, HeaderValue::from_static("origin"));
        Some(res)
    }

    /// Adds `Access-Control-Allow-Origin` to an answer to an allowed origin.
    pub(crate) fn decorate(&self, origin: Option<&HeaderValue>, res: &mut Response) {
        if let Some(origin) = origin
            && self.origin_allowed(origin.to_str().unwrap_or(""))
        {
            let h = res.headers_mut();
            h.insert(header::ACCESS_CONTROL_ALLOW_ORIGIN, origin.clone());
            h.append(header::VARY, HeaderValue::from_static("origin"));
        }
    }
}

/// `host` without its port: `localhost:6632` is `localhost`, `[::1]:6632` is `[::1]`.
fn split_port(host: &str) -> &str {
    if host.starts_with('[') {
        return host.find(']').map_or(host, |end| &host[..=end]);
    }
    match host.rsplit_once(':') {
        Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
        _ => host,
    }
}

fn refuse_origin(who: &str) -> Response {
    ApiError::new(
        StatusCode::FORBIDDEN,
        "origin_not_allowed",
        format!(
            "{who} may not call this broker: only its own origin's pages (the console) may; \
             start it with --allow-origin ORIGIN to let another page call it"
        ),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_with_any_port_are_loopback() {
        let p = BrowserPolicy::default()
            .listening_on([127, 0, 0, 1].into())
            .allow_host("Queen.Internal:80");
        for ok in [
            "localhost",
            "localhost:6632",
            "LOCALHOST:1",
            "app.localhost:3",
            "127.0.0.1:6632",
            "127.9.8.7",
            "[::1]:6632",
            "[::1]",
            "queen.internal:6632",
        ] {
            assert!(p.host_allowed(ok), "{ok}");
        }
        for no in [
            "attacker.example",
            "attacker.example:6632",
            "localhost.attacker.example",
            "127.0.0.1.nip.io",
            "10.0.0.1:6632",
            "[::2]:6632",
            "",
        ] {
            assert!(!p.host_allowed(no), "{no}");
        }
    }
}
