//! Runs the selected cases against a broker and gathers a [`Report`].

use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::case::{Case, Failure};
use crate::ctx::Ctx;
use crate::profile::Profile;
use crate::report::{CaseResult, Report, Status};

/// Longest a single case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// What to run, against what.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The broker's base URL.
    pub url: String,
    /// A bearer token, when the broker has auth.
    pub token: Option<String>,
    /// The capabilities the broker is expected to have.
    pub profile: Profile,
    /// Only cases whose id contains this (or matches it with `*` wildcards).
    pub only: Option<String>,
    /// Cases run at once (each isolates itself by name).
    pub concurrency: usize,
    /// Generated cases per property.
    pub prop_cases: u32,
    /// The properties' random seed; random when absent.
    pub seed: Option<u64>,
}

impl RunConfig {
    /// Defaults for `url`: profile `queen2`, 8 at once, 32 property cases.
    pub fn new(url: impl Into<String>) -> Self {
        RunConfig {
            url: url.into(),
            token: None,
            profile: crate::profile::find("queen2").expect("queen2 exists"),
            only: None,
            concurrency: 8,
            prop_cases: 32,
            seed: None,
        }
    }
}

/// Whether `id` is selected by `pattern`: a substring, or a glob with `*`, or several
/// of those separated by commas (any of them).
pub fn selected(id: &str, pattern: Option<&str>) -> bool {
    let Some(p) = pattern else { return true };
    p.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .any(|p| selected_by(id, p))
}

fn selected_by(id: &str, p: &str) -> bool {
    if !p.contains('*') {
        return id.contains(p);
    }
    let parts: Vec<&str> = p.split('*').collect();
    let mut rest = id;
    for (i, part) in parts.iter().enumerate() {
        if part.is_empty() {
            continue;
        }
        match rest.find(part) {
            Some(pos) if i > 0 || pos == 0 => rest = &rest[pos + part.len()..],
            _ => return false,
        }
    }
    parts.last().is_none_or(|l| l.is_empty() || id.ends_with(l))
}

/// The HTTP client of a run: one request may take 45 s.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(45))
        .build()
        .expect("an HTTP client")
}

/// Runs `cases` under `cfg`.
pub async fn run(cfg: &RunConfig, cases: Vec<Case>) -> Report {
    let started = Instant::now();
    let http = http_client();
    let settings = crate::Settings {
        prop_cases: cfg.prop_cases,
        seed: cfg.seed,
    };
    let jobs = cases
        .into_iter()
        .filter(|c| selected(c.id, cfg.only.as_deref()))
        .map(|case| {
            let missing: Vec<crate::case::Capability> = case
                .needs
                .iter()
                .copied()
                .filter(|n| !cfg.profile.has(*n))
                .collect();
            let skip = if missing.is_empty() {
                cfg.profile.waiver(case.id)
            } else {
                Some(cfg.profile.skip_reason(&missing))
            };
            let ctx = Ctx::new(http.clone(), &cfg.url, cfg.token.clone(), case.id)
                .with_settings(settings);
            async move {
                let t0 = Instant::now();
                let status = if let Some(why) = skip {
                    Status::Skip(why)
                } else {
                    match tokio::time::timeout(CASE_TIMEOUT, (case.run)(ctx.clone())).await {
                        Ok(Ok(())) => Status::Pass,
                        Ok(Err(mut f)) => {
                            f.exchange = ctx.last_exchange().map(Box::new);
                            Status::Fail(f)
                        }
                        Err(_) => Status::Fail(Failure {
                            exchange: ctx.last_exchange().map(Box::new),
                            ..Failure::new(format!("done within {CASE_TIMEOUT:?}"), "timed out")
                        }),
                    }
                };
                CaseResult {
                    id: case.id.to_string(),
                    level: case.level,
                    rule: case.rule.to_string(),
                    section: case.section().to_string(),
                    status,
                    millis: t0.elapsed().as_millis() as u64,
                }
            }
        });
    let mut results: Vec<CaseResult> = futures::stream::iter(jobs)
        .buffer_unordered(cfg.concurrency.max(1))
        .collect()
        .await;
    results.sort_by(|a, b| a.id.cmp(&b.id));
    Report {
        url: cfg.url.clone(),
        profile: cfg.profile.name.to_string(),
        results,
        millis: started.elapsed().as_millis() as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::selected;

    #[test]
    fn patterns_select_by_substring_or_glob() {
        assert!(selected("txn.ack.fenced", None));
        assert!(selected("txn.ack.fenced", Some("ack")));
        assert!(selected("txn.ack.fenced", Some("txn.*.fenced")));
        assert!(selected("txn.ack.fenced", Some("txn.*")));
        assert!(!selected("txn.ack.fenced", Some("kv.*")));
        assert!(!selected("txn.ack.fenced", Some("*.unfenced")));
        assert!(selected("txn.ack.fenced", Some("core.health,txn.*")));
        assert!(selected("core.health", Some("core.health, txn.*")));
        assert!(!selected("core.kv.put-get", Some("core.health,txn.*")));
    }
}
