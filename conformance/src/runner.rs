//! Runs the selected cases against a broker and gathers a [`Report`].

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;

use crate::Settings;
use crate::case::{Case, Failure, FailureKind};
use crate::ctx::Ctx;
use crate::profile::Profile;
use crate::report::{CaseResult, Flake, Report, Status, Stopped};

/// Longest a single case may take.
const CASE_TIMEOUT: Duration = Duration::from_secs(60);

/// A failing case is run again up to this many times, each time under fresh names. One
/// that then holds is [`Status::Flaky`]: its verdict flips between runs on this broker,
/// and reporting it as a failure would make a baseline gate pass or fail by chance. One
/// that fails every attempt is a failure. A timed-out case is not run again (another
/// minute each would not tell more), and the properties rerun on the same seed, so a
/// rare sequence the generator found is not taken for a flip.
pub const RETRIES: u32 = 2;

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
    /// How long one request took at the start (the preflight's,
    /// [`crate::preflight::Preflight::latency`]); zero when unknown.
    pub latency: Duration,
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
            latency: Duration::ZERO,
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

/// The parts of `pattern` (split at commas) that select none of `ids`: `--only` with
/// such a part is a mistake (a typo in one part of a list), not a smaller selection.
pub fn unmatched_parts<'a>(pattern: &'a str, ids: &[&str]) -> Vec<&'a str> {
    let parts: Vec<&str> = pattern
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    if parts.is_empty() {
        return vec![pattern];
    }
    parts
        .into_iter()
        .filter(|p| !ids.iter().any(|id| selected_by(id, p)))
        .collect()
}

/// The HTTP client of a run: one request may take 45 s.
pub fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(45))
        .build()
        .expect("an HTTP client")
}

/// Whether the broker at `url` still answers `GET /health` (any HTTP answer): three
/// tries, 250 ms apart, 3 s each.
pub async fn answers(url: &str) -> bool {
    let Ok(http) = reqwest::Client::builder()
        .timeout(Duration::from_secs(3))
        .build()
    else {
        return false;
    };
    let health = format!("{}/health", url.trim_end_matches('/'));
    for attempt in 0..3 {
        if attempt > 0 {
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if http.get(&health).send().await.is_ok() {
            return true;
        }
    }
    false
}

/// Where the broker stopped answering, shared by the cases of a run: once it is set,
/// no case starts, and a case whose requests then get no answer is not run rather
/// than failed.
#[derive(Default)]
struct Halt {
    stopped: Mutex<Option<Stopped>>,
    finished: std::sync::atomic::AtomicUsize,
}

impl Halt {
    fn is_set(&self) -> Option<String> {
        self.stopped
            .lock()
            .ok()
            .and_then(|s| s.as_ref().map(|s| s.case.clone()))
    }
}

/// Runs `cases` under `cfg`.
///
/// When a case's request gets no HTTP answer and the broker then does not answer
/// `GET /health` either, the run stops there ([`Report::stopped`] names the case and
/// the error): the cases not yet started, and those that lost their broker midway, are
/// [`Status::NotRun`], not 138 transport "failures".
pub async fn run(cfg: &RunConfig, cases: Vec<Case>) -> Report {
    let started = Instant::now();
    let http = http_client();
    // One seed for the run, drawn here when none is given, so a property run again
    // after a failure replays the same sequences.
    let seed = cfg
        .seed
        .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0);
    let settings = Settings {
        prop_cases: cfg.prop_cases,
        seed: Some(seed),
        latency: cfg.latency,
    };
    let halt = Arc::new(Halt::default());
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
            let http = http.clone();
            let halt = halt.clone();
            async move {
                let t0 = Instant::now();
                let status = match (skip, halt.is_set()) {
                    (Some(why), _) => Status::Skip(why),
                    (None, Some(at)) => {
                        Status::NotRun(format!("the broker had stopped answering (during {at})"))
                    }
                    (None, None) => attempts(&case, &http, cfg, settings, &halt).await,
                };
                if !matches!(status, Status::NotRun(_)) {
                    halt.finished
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
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
    let stopped = halt.stopped.lock().ok().and_then(|s| s.clone());
    Report {
        url: cfg.url.clone(),
        profile: cfg.profile.name.to_string(),
        capabilities: crate::case::Capability::ALL
            .into_iter()
            .filter(|c| cfg.profile.has(*c))
            .collect(),
        absent: cfg.profile.missing_why.clone(),
        seed,
        results,
        stopped,
        millis: started.elapsed().as_millis() as u64,
    }
}

/// After a failed attempt that got no HTTP answer (or timed out): whether the broker
/// is gone. If so, the run's halt is set (by the first case to see it) and the case
/// is not run rather than failed.
async fn broker_gone(
    ctx: &Ctx,
    timed_out: bool,
    case: &Case,
    cfg: &RunConfig,
    halt: &Halt,
) -> Option<Status> {
    let error = match (ctx.transport_error(), timed_out) {
        (Some(e), _) => e,
        (None, true) => format!("no answer within {CASE_TIMEOUT:?}"),
        (None, false) => return None,
    };
    if answers(&cfg.url).await {
        return None;
    }
    if let Ok(mut s) = halt.stopped.lock() {
        let first = s.get_or_insert_with(|| Stopped {
            case: case.id.to_string(),
            error: error.clone(),
            finished: halt.finished.load(std::sync::atomic::Ordering::Relaxed),
        });
        if first.case != case.id {
            return Some(Status::NotRun(format!(
                "the broker stopped answering (during {}); this case lost it midway: {error}",
                first.case
            )));
        }
    }
    Some(Status::NotRun(format!(
        "the broker stopped answering during this case: {error}"
    )))
}

/// Runs `case` once, and again after a failure (see [`RETRIES`]).
async fn attempts(
    case: &Case,
    http: &reqwest::Client,
    cfg: &RunConfig,
    settings: Settings,
    halt: &Halt,
) -> Status {
    let mut first: Option<Failure> = None;
    for attempt in 1..=RETRIES + 1 {
        let ctx =
            Ctx::new(http.clone(), &cfg.url, cfg.token.clone(), case.id).with_settings(settings);
        let failure = match tokio::time::timeout(CASE_TIMEOUT, (case.run)(ctx.clone())).await {
            Ok(Ok(())) => {
                return match first {
                    None => Status::Pass,
                    Some(failure) => Status::Flaky(Flake {
                        failure,
                        attempts: attempt,
                        failed: attempt - 1,
                    }),
                };
            }
            Ok(Err(mut f)) => {
                f.exchange = ctx.last_exchange().map(Box::new);
                if let Some(gone) = broker_gone(&ctx, false, case, cfg, halt).await {
                    return gone;
                }
                // A case that waits for a lease or TTL to lapse, whose own answers were
                // too slow for its window, could not judge.
                if case.needs.contains(&crate::case::Capability::Time) {
                    f = ctx.too_slow_for(ctx.window(), 4, f);
                }
                // Too slow to judge: saying so once is enough (a rerun would wait as
                // long again to learn the same).
                if f.kind == FailureKind::Inconclusive {
                    return Status::Inconclusive(f);
                }
                f
            }
            Err(_) => {
                if let Some(gone) = broker_gone(&ctx, true, case, cfg, halt).await {
                    return gone;
                }
                let f = Failure {
                    exchange: ctx.last_exchange().map(Box::new),
                    ..Failure::new(format!("done within {CASE_TIMEOUT:?}"), "timed out")
                };
                return Status::Fail(first.unwrap_or(f));
            }
        };
        first.get_or_insert(failure);
    }
    Status::Fail(first.expect("every attempt failed"))
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::baseline::Baseline;
    use crate::case::{CaseFuture, Level};

    static FLIPS: AtomicU32 = AtomicU32::new(0);
    static FAILS: AtomicU32 = AtomicU32::new(0);
    static HOLDS: AtomicU32 = AtomicU32::new(0);

    fn case(id: &'static str, run: fn(Ctx) -> CaseFuture) -> Case {
        Case {
            id,
            level: Level::Must,
            rule: "r",
            needs: &[],
            run,
        }
    }

    /// A case that fails its first attempt and holds on the next is flaky, one that
    /// fails every attempt fails (after RETRIES more), one that holds runs once; and a
    /// baseline that does not list the flaky one still passes the gate.
    #[tokio::test]
    async fn a_verdict_that_flips_is_flaky_and_never_a_new_failure() {
        let cases = vec![
            case("t.flips", |_| {
                Box::pin(async {
                    match FLIPS.fetch_add(1, Ordering::SeqCst) {
                        0 => Err(Failure::new("a new, higher version", "8025 then 3024")),
                        _ => Ok(()),
                    }
                })
            }),
            case("t.fails", |_| {
                Box::pin(async {
                    FAILS.fetch_add(1, Ordering::SeqCst);
                    Err(Failure::new("x", "y"))
                })
            }),
            case("t.holds", |_| {
                Box::pin(async {
                    HOLDS.fetch_add(1, Ordering::SeqCst);
                    Ok(())
                })
            }),
        ];
        // Nothing listens there: these cases send no request.
        let report = run(&RunConfig::new("http://127.0.0.1:9"), cases).await;
        let status = |id: &str| &report.results.iter().find(|r| r.id == id).expect(id).status;
        let Status::Flaky(fl) = status("t.flips") else {
            panic!("{:?}", status("t.flips"))
        };
        assert_eq!((fl.attempts, fl.failed), (2, 1));
        assert_eq!(fl.failure.actual, "8025 then 3024");
        assert!(matches!(status("t.fails"), Status::Fail(_)));
        assert!(matches!(status("t.holds"), Status::Pass));
        assert_eq!(FAILS.load(Ordering::SeqCst), RETRIES + 1);
        assert_eq!(HOLDS.load(Ordering::SeqCst), 1);
        assert_eq!((report.counts(), report.flaky()), ((1, 1, 0), 1));
        assert_eq!(report.failed_ids(), ["t.fails"]);
        assert!(report.summary().ends_with(", 1 flaky"));

        // The gate: a baseline written when the flaky case passed lists only t.fails.
        let gate = Baseline::parse("t.fails  expected x; got y\n")
            .expect("a baseline")
            .compare(&report);
        assert!(gate.ok(), "{gate:?}");
        assert_eq!(gate.flaky, ["t.flips"]);
        assert!(gate.new.is_empty() && gate.fixed.is_empty());
        assert!(gate.to_text().contains("FLAKY t.flips"));
        // Written from this run, the baseline lists the flaky case with why.
        let written = Baseline::from_report(&report);
        assert!(written.known["t.flips"].starts_with("flaky: failed 1 of 2 attempts"));
    }

    static SLOW: AtomicU32 = AtomicU32::new(0);

    /// A case that could not decide (too slow) is inconclusive: reported as such, run
    /// once, never a failure, and a run with it and a pass is still conformant.
    #[tokio::test]
    async fn an_inconclusive_case_is_neither_passed_nor_failed() {
        let cases = vec![
            case("t.slow", |_| {
                Box::pin(async {
                    SLOW.fetch_add(1, Ordering::SeqCst);
                    Err(Failure::inconclusive(
                        "32 sequences",
                        "inconclusive: 5 of 32 ran",
                    ))
                })
            }),
            case("t.holds2", |_| Box::pin(async { Ok(()) })),
        ];
        let report = run(&RunConfig::new("http://127.0.0.1:9"), cases).await;
        let slow = report
            .results
            .iter()
            .find(|r| r.id == "t.slow")
            .expect("t.slow");
        assert!(
            matches!(slow.status, Status::Inconclusive(_)),
            "{:?}",
            slow.status
        );
        assert_eq!(SLOW.load(Ordering::SeqCst), 1, "not retried");
        assert_eq!(report.counts(), (1, 0, 0));
        assert_eq!(report.inconclusive(), 1);
        assert!(report.ok(), "{}", report.summary());
        assert_eq!(
            report.summary(),
            "1 passed, 0 failed, 0 skipped, 1 inconclusive"
        );
        // Alone, it judged nothing: not ok.
        let alone = run(
            &RunConfig::new("http://127.0.0.1:9"),
            vec![case("t.slow", |_| {
                Box::pin(async { Err(Failure::inconclusive("x", "inconclusive: y")) })
            })],
        )
        .await;
        assert!(!alone.ok(), "{}", alone.summary());
    }

    /// `--only` with a part that selects nothing is a mistake to report, not a smaller
    /// selection: a typo in one part of a list is found, and so is a pattern of none.
    #[test]
    fn a_part_of_a_pattern_that_selects_nothing_is_found() {
        let ids = [
            "core.health",
            "txn.push.duplicate.in-call",
            "txn.ack.fenced",
        ];
        assert!(unmatched_parts("txn.push.*,core.health", &ids).is_empty());
        assert_eq!(
            unmatched_parts("txn.pusj.*,core.health", &ids),
            ["txn.pusj.*"]
        );
        assert_eq!(unmatched_parts("nothing-at-all", &ids), ["nothing-at-all"]);
        assert_eq!(unmatched_parts(",", &ids), [","]);
    }

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
