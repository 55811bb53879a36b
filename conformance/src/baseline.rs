//! Baselines: the known failures of a broker, so a pipeline can gate on new ones.
//!
//! A baseline file has one failing case id per line, then its one-line reason; `#`
//! starts a comment, and `#!` a line the gate reads (format 2):
//!
//! ```text
//! #! format 2
//! #! profile auto
//! #! capabilities Core Cursor Kv Timers Time Fetch Streams Ephemeral Admin
//! #! seed 8806261410565541703
//! txn.kv.versions-increase  expected …; got …
//! ```
//!
//! `--write-baseline FILE` writes the failures of a run with those lines;
//! `--baseline FILE` compares a run with it ([`Baseline::compare`]), a gate that
//! cannot drift:
//!
//! - failures not in the file are **new** (the run exits 1 and names only them);
//! - a capability of the file's broker that this run lacks is **lost**, a new failure:
//!   under `--profile auto` a broker that stops answering a capability's routes would
//!   otherwise turn its cases into quiet skips;
//! - a known case that fails for another reason than the file's is **changed**,
//!   reported, and a failure under `--on-changed-reason fail` (reasons are compared
//!   with the run's names, ids, times and long numbers masked, [`normalize`]);
//! - ids of the file that passed are **fixed** (reported, so the file can be
//!   tightened; they do not fail the run);
//! - the properties run on the file's seed (`#! seed`; a file without one: [`GATE_SEED`]),
//!   so a property is FIXED only when the same sequences pass.
//!
//! A flaky case (it failed, then held when run again, [`Status::Flaky`]) is never a
//! new failure: a verdict that flips between runs on one broker cannot flip the gate.
//! `--write-baseline` lists flaky cases too, so a later run in which one fails every
//! attempt is a known failure. A file of format 1 (no `#!` lines) still gates by id;
//! the run says that it records no capabilities.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::case::Capability;
use crate::report::{Report, Status};

/// The seed of the properties in gate mode when neither `--seed` nor the baseline
/// names one: fixed, so two gate runs generate the same sequences.
pub const GATE_SEED: u64 = 0x5157_4545_4e32_0051;

/// The format `--write-baseline` writes.
pub const FORMAT: u32 = 2;

/// The known failures: case id to its one-line reason, and what the broker was when
/// they were recorded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    /// Known failing ids and their reasons.
    pub known: BTreeMap<String, String>,
    /// The capabilities the run that wrote it judged the broker by; `None` for a file
    /// of format 1, which did not record them.
    pub capabilities: Option<Vec<Capability>>,
    /// The profile of that run.
    pub profile: Option<String>,
    /// The properties' seed of that run.
    pub seed: Option<u64>,
}

/// What a gate does with a known failure whose reason changed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum OnChangedReason {
    /// Report it (`CHANGED id`), and pass.
    #[default]
    Report,
    /// Report it, and fail the gate as for a new failure.
    Fail,
}

/// A known case that failed again, for another reason.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Changed {
    /// The case.
    pub id: String,
    /// The baseline's reason.
    pub was: String,
    /// This run's.
    pub now: String,
}

/// A capability the gate wanted and the run did not have.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Missing {
    /// The capability.
    pub capability: Capability,
    /// Who wanted it: the baseline's broker had it, or `--require` named it.
    pub wanted_by: WantedBy,
    /// Why the run lacks it (the probe's evidence, or the profile).
    pub why: String,
}

/// Who wanted a [`Missing`] capability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum WantedBy {
    /// The broker the baseline was written against had it.
    Baseline,
    /// `--require` named it.
    Require,
}

/// A run measured against a baseline (or, without one, against an empty one: then
/// every failure is new).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Comparison {
    /// The baseline file, when there is one (for the report's lines).
    pub file: Option<String>,
    /// Failures the baseline does not list, with their one-line reasons.
    pub new: Vec<(String, String)>,
    /// Baseline ids that passed in this run.
    pub fixed: Vec<String>,
    /// Baseline ids that failed again (the changed ones among them too).
    pub still_failing: Vec<String>,
    /// Baseline ids that failed again for another reason.
    pub changed: Vec<Changed>,
    /// What the gate does with them.
    pub on_changed: OnChangedReason,
    /// Capabilities the baseline's broker had or `--require` names, which this run
    /// lacks: each a new failure.
    pub missing: Vec<Missing>,
    /// Cases that were flaky in this run, listed in the baseline or not: neither new
    /// nor fixed.
    pub flaky: Vec<String>,
    /// Baseline ids that were skipped, inconclusive, not selected, or are not cases of
    /// this suite.
    pub not_run: Vec<String>,
    /// Whether the baseline records capabilities (format 2).
    pub records_capabilities: bool,
}

impl Comparison {
    /// Whether the run passes the gate: no new failure, no missing capability, and no
    /// changed reason when those fail ([`OnChangedReason::Fail`]).
    pub fn ok(&self) -> bool {
        self.new.is_empty()
            && self.missing.is_empty()
            && (self.on_changed == OnChangedReason::Report || self.changed.is_empty())
    }

    /// Whether `id` is a known failure that this gate passes (listed, and its reason
    /// unchanged or changes only reported).
    pub fn known(&self, id: &str) -> bool {
        self.still_failing.iter().any(|k| k == id)
            && (self.on_changed == OnChangedReason::Report
                || !self.changed.iter().any(|c| c.id == id))
    }

    /// The changed reason of `id`, if it changed.
    pub fn changed_reason(&self, id: &str) -> Option<&Changed> {
        self.changed.iter().find(|c| c.id == id)
    }

    /// Adds the capabilities `required` that `report` lacks (`--require`).
    pub fn require(&mut self, required: &[Capability], report: &Report) {
        for &cap in required {
            if !report.capabilities.contains(&cap) {
                self.missing.push(Missing {
                    capability: cap,
                    wanted_by: WantedBy::Require,
                    why: absent_why(report, cap),
                });
            }
        }
    }

    /// A few lines for the terminal: what the gate decided and why.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let verdict = if self.ok() { "pass" } else { "FAIL" };
        match &self.file {
            Some(file) => {
                let _ = writeln!(
                    out,
                    "gate {verdict}: baseline {file}: {} known failure(s) failed again, {} new, {} fixed, {} changed reason, {} capability(ies) missing, {} not run",
                    self.still_failing.len(),
                    self.new.len(),
                    self.fixed.len(),
                    self.changed.len(),
                    self.missing.len(),
                    self.not_run.len()
                );
                if !self.records_capabilities {
                    let _ = writeln!(
                        out,
                        "  note: {file} records no capabilities (format 1): write it again with --write-baseline so a capability that disappears fails the gate"
                    );
                }
            }
            None => {
                let _ = writeln!(
                    out,
                    "gate {verdict}: {} failure(s), {} capability(ies) missing",
                    self.new.len(),
                    self.missing.len()
                );
            }
        }
        if !self.flaky.is_empty() {
            let _ = writeln!(
                out,
                "  {} flaky (failed, then held when run again: not new failures)",
                self.flaky.len()
            );
        }
        for m in &self.missing {
            let _ = writeln!(
                out,
                "  MISSING CAPABILITY {}: {}; this run lacks it: {}",
                m.capability,
                match m.wanted_by {
                    WantedBy::Baseline => "the baseline's broker had it",
                    WantedBy::Require => "--require names it",
                },
                m.why
            );
        }
        if self.file.is_some() {
            for (id, why) in &self.new {
                let _ = writeln!(out, "  NEW FAILURE {id}: {why}");
            }
        }
        for c in &self.changed {
            let _ = writeln!(
                out,
                "  CHANGED {} ({}): was: {}; now: {}",
                c.id,
                match self.on_changed {
                    OnChangedReason::Report => "reported; --on-changed-reason fail fails on it",
                    OnChangedReason::Fail => "a failure under --on-changed-reason fail",
                },
                c.was,
                c.now
            );
        }
        for id in &self.fixed {
            let _ = writeln!(
                out,
                "  FIXED {id} (passes now: remove it from the baseline)"
            );
        }
        for id in &self.flaky {
            let _ = writeln!(out, "  FLAKY {id}");
        }
        for id in &self.not_run {
            let _ = writeln!(out, "  not run: {id}");
        }
        out
    }
}

/// Why `report` lacks `cap`: the probe's evidence, or the profile's name.
fn absent_why(report: &Report, cap: Capability) -> String {
    report
        .absent
        .iter()
        .find(|(c, _)| *c == cap)
        .map(|(_, why)| why.clone())
        .unwrap_or_else(|| format!("profile {} does not have it", report.profile))
}

/// The one-line reason of a failed or flaky row: what was expected and what was seen
/// (for a flaky one, after `flaky:` and how often it failed).
pub fn reason(status: &Status) -> Option<String> {
    let line = match status {
        Status::Fail(f) => format!("expected {}; got {}", f.expected, f.actual),
        Status::Flaky(fl) => fl.summary(),
        Status::Pass | Status::Skip(_) | Status::Inconclusive(_) | Status::NotRun(_) => {
            return None;
        }
    };
    Some(
        line.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(REASON_CHARS)
            .collect(),
    )
}

/// A reason with what changes from run to run masked, so two runs that failed for the
/// same reason compare equal: the run's names (`cf-` and 10 hex digits), UUIDs (with
/// or without hyphens), timestamps (`2026-12-04T10:00:00.123Z`) and numbers of four
/// digits or more (versions, offsets, times in ms, seeds). Status codes and small
/// counts stay, so `HTTP 200` and `HTTP 400` still differ.
pub fn normalize(reason: &str) -> String {
    let c: Vec<char> = reason.chars().collect();
    let hex = |i: usize| c.get(i).is_some_and(|ch| ch.is_ascii_hexdigit());
    let digit = |i: usize| c.get(i).is_some_and(|ch| ch.is_ascii_digit());
    let run = |i: usize, f: &dyn Fn(usize) -> bool| (i..).take_while(|&j| f(j)).count();
    let mut out = String::with_capacity(reason.len());
    let mut i = 0;
    while i < c.len() {
        // Only at the start of a word: "abc123456" is not a number to mask.
        let boundary = i == 0 || !c[i - 1].is_ascii_alphanumeric();
        if boundary && c[i..].starts_with(&['c', 'f', '-']) {
            // Whole, or cut at the reason's length limit.
            let n = run(i + 3, &hex);
            if n == 10 || (n > 0 && i + 3 + n == c.len()) {
                out.push_str("cf-<run>");
                i += 3 + n;
                continue;
            }
        }
        if boundary {
            // A hyphenated UUID: 8-4-4-4-12.
            // A reason cut at its length limit can end inside one: what is left of it
            // after its first group, up to the end, is a UUID too.
            let mut j = i;
            let mut uuid = true;
            for (k, len) in [8, 4, 4, 4, 12].into_iter().enumerate() {
                let n = run(j, &hex);
                if k > 0 && n < len && j + n == c.len() {
                    j = c.len();
                    break;
                }
                if n != len || (k < 4 && c.get(j + len) != Some(&'-')) {
                    uuid = false;
                    break;
                }
                j += len + usize::from(k < 4);
            }
            if uuid {
                out.push_str("<uuid>");
                i = j;
                continue;
            }
            if run(i, &hex) == 32 {
                out.push_str("<uuid>");
                i += 32;
                continue;
            }
            // A timestamp: 4 digits, -, 2 digits, -, 2 digits, T, then its time.
            if run(i, &digit) == 4
                && c.get(i + 4) == Some(&'-')
                && run(i + 5, &digit) == 2
                && c.get(i + 7) == Some(&'-')
                && run(i + 8, &digit) == 2
                && c.get(i + 10) == Some(&'T')
            {
                let mut j = i + 11;
                while c
                    .get(j)
                    .is_some_and(|ch| ch.is_ascii_digit() || ":.Z+-".contains(*ch))
                {
                    j += 1;
                }
                out.push_str("<time>");
                i = j;
                continue;
            }
            let n = run(i, &digit);
            if n >= 4 && !c.get(i + n).is_some_and(|ch| ch.is_ascii_alphanumeric()) {
                out.push_str("<n>");
                i += n;
                continue;
            }
        }
        out.push(c[i]);
        i += 1;
    }
    out
}

/// The longest reason a baseline keeps, in characters.
const REASON_CHARS: usize = 300;

/// Whether a baseline's reason `was` and a run's `now` say the same, after
/// [`normalize`]. A flaky entry (`flaky: failed 1 of 3 attempts, first: expected …`)
/// is compared by its first failure; a reason cut at [`REASON_CHARS`] by the part both
/// kept.
fn same_reason(was: &str, now: &str) -> bool {
    let core = |r: &str| -> String {
        match r.split_once(", first: ") {
            Some((head, rest)) if head.starts_with("flaky:") => rest.to_string(),
            _ => r.to_string(),
        }
    };
    let (a, b) = (normalize(&core(was)), normalize(&core(now)));
    let cut = was.chars().count() >= REASON_CHARS
        || now.chars().count() >= REASON_CHARS
        || was.starts_with("flaky:")
        || now.starts_with("flaky:");
    if !cut {
        return a == b;
    }
    let n = a.chars().count().min(b.chars().count());
    a.chars().take(n).eq(b.chars().take(n))
}

impl Baseline {
    /// The failures of `report`, its flaky cases, and what the broker was: its
    /// capabilities, the profile and the properties' seed.
    pub fn from_report(report: &Report) -> Self {
        Baseline {
            known: report
                .results
                .iter()
                .filter_map(|r| reason(&r.status).map(|why| (r.id.clone(), why)))
                .collect(),
            capabilities: Some(report.capabilities.clone()),
            profile: Some(report.profile.clone()),
            seed: Some(report.seed),
        }
    }

    /// Parses a baseline file (format 1 or 2). A `#!` line it does not know, or a
    /// capability or seed that does not parse, is an error: a gate must not read
    /// half of its file.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut b = Baseline::default();
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if let Some(directive) = line.strip_prefix("#!") {
                let mut words = directive.split_whitespace();
                let at = || format!("line {}: {line:?}", n + 1);
                match words.next() {
                    Some("format") => {
                        let v: u32 = words
                            .next()
                            .and_then(|v| v.parse().ok())
                            .ok_or_else(|| format!("{}: a format number", at()))?;
                        if v > FORMAT {
                            return Err(format!(
                                "{}: format {v} is newer than this suite reads ({FORMAT})",
                                at()
                            ));
                        }
                    }
                    Some("profile") => b.profile = words.next().map(str::to_string),
                    Some("capabilities") => {
                        b.capabilities = Some(
                            words
                                .map(str::parse)
                                .collect::<Result<_, _>>()
                                .map_err(|e| format!("{}: {e}", at()))?,
                        );
                    }
                    Some("seed") => {
                        b.seed = Some(
                            words
                                .next()
                                .and_then(|v| v.parse().ok())
                                .ok_or_else(|| format!("{}: a seed (a number)", at()))?,
                        );
                    }
                    _ => return Err(format!("{}: unknown #! line", at())),
                }
                continue;
            }
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (id, why) = match line.split_once(char::is_whitespace) {
                Some((id, why)) => (id.to_string(), why.trim().to_string()),
                None => (line.to_string(), String::new()),
            };
            b.known.insert(id, why);
        }
        Ok(b)
    }

    /// The file's text, with a header naming where it came from.
    pub fn render(&self, report: &Report) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# queen-conformance baseline: the cases known to fail against {} (profile {}).\n# One id per line, then its reason; `--baseline FILE` fails on failures not listed here,\n# and on a capability of the lines below that a later run lacks. `#!` lines are read.",
            report.url, report.profile
        );
        let _ = writeln!(out, "#! format {FORMAT}");
        if let Some(p) = &self.profile {
            let _ = writeln!(out, "#! profile {p}");
        }
        if let Some(caps) = &self.capabilities {
            let names: Vec<&str> = caps.iter().map(|c| c.as_str()).collect();
            let _ = writeln!(out, "#! capabilities {}", names.join(" "));
        }
        if let Some(seed) = self.seed {
            let _ = writeln!(out, "#! seed {seed}");
        }
        for (id, why) in &self.known {
            let _ = writeln!(out, "{id}  {why}");
        }
        out
    }

    /// Measures `report` against the baseline; a changed reason is only reported.
    pub fn compare(&self, report: &Report) -> Comparison {
        self.compare_with(report, OnChangedReason::Report)
    }

    /// Measures `report` against the baseline, treating a changed reason as `on_changed`
    /// says.
    pub fn compare_with(&self, report: &Report, on_changed: OnChangedReason) -> Comparison {
        let mut c = Comparison {
            on_changed,
            records_capabilities: self.capabilities.is_some(),
            ..Comparison::default()
        };
        for r in &report.results {
            match (&r.status, self.known.get(&r.id)) {
                (Status::Fail(_), None) => c
                    .new
                    .push((r.id.clone(), reason(&r.status).unwrap_or_default())),
                (Status::Fail(_), Some(was)) => {
                    c.still_failing.push(r.id.clone());
                    let now = reason(&r.status).unwrap_or_default();
                    // A file written by hand may carry no reason: nothing to compare.
                    if !was.is_empty() && !same_reason(was, &now) {
                        c.changed.push(Changed {
                            id: r.id.clone(),
                            was: was.clone(),
                            now,
                        });
                    }
                }
                (Status::Pass, Some(_)) => c.fixed.push(r.id.clone()),
                (Status::Flaky(_), _) => c.flaky.push(r.id.clone()),
                (Status::Pass, None)
                | (Status::Skip(_) | Status::Inconclusive(_) | Status::NotRun(_), _) => {}
            }
        }
        for id in self.known.keys() {
            let ran = report.results.iter().any(|r| {
                &r.id == id && matches!(r.status, Status::Pass | Status::Fail(_) | Status::Flaky(_))
            });
            if !ran {
                c.not_run.push(id.clone());
            }
        }
        for &cap in self.capabilities.iter().flatten() {
            if !report.capabilities.contains(&cap) {
                c.missing.push(Missing {
                    capability: cap,
                    wanted_by: WantedBy::Baseline,
                    why: absent_why(report, cap),
                });
            }
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::case::{Failure, Level};
    use crate::report::CaseResult;

    fn row(id: &str, status: Status) -> CaseResult {
        CaseResult {
            id: id.into(),
            level: Level::Must,
            rule: "r".into(),
            section: String::new(),
            status,
            millis: 0,
        }
    }

    fn report(results: Vec<CaseResult>, caps: &[Capability]) -> Report {
        Report {
            url: "u".into(),
            profile: "auto".into(),
            capabilities: caps.to_vec(),
            seed: 7,
            results,
            ..Report::default()
        }
    }

    #[test]
    fn a_baseline_round_trips_and_tells_new_from_known_and_fixed() {
        let fail = |why: &str| Status::Fail(Failure::new("x", why));
        let caps = [Capability::Core, Capability::Positions];
        let first = report(
            vec![
                row("a.one", fail("bad\nline")),
                row("a.two", Status::Pass),
                row("a.three", fail("worse")),
            ],
            &caps,
        );
        let b = Baseline::from_report(&first);
        let text = b.render(&first);
        let parsed = Baseline::parse(&text).expect("a baseline");
        assert_eq!(parsed, b, "{text}");
        assert!(text.contains("#! capabilities Core Positions\n"), "{text}");
        assert!(text.contains("#! seed 7\n"), "{text}");
        assert_eq!(parsed.known["a.one"], "expected x; got bad line");
        assert!(parsed.compare(&first).ok());
        let second = Report {
            results: vec![
                row("a.one", Status::Pass),
                row("a.two", fail("new")),
                row("a.three", fail("worse")),
            ],
            ..first.clone()
        };
        let c = Comparison {
            file: Some("f".into()),
            ..parsed.compare(&second)
        };
        assert!(!c.ok());
        assert_eq!(
            c.new,
            vec![("a.two".to_string(), "expected x; got new".to_string())]
        );
        assert_eq!(c.fixed, vec!["a.one".to_string()]);
        assert_eq!(c.still_failing, vec!["a.three".to_string()]);
        assert!(c.not_run.is_empty());
        assert!(c.to_text().contains("NEW FAILURE a.two"), "{}", c.to_text());
    }

    /// A capability the baseline's broker had and this run lacks fails the gate, with
    /// the probe's evidence; a format-1 file (no `#!` lines) gates by id alone.
    #[test]
    fn a_lost_capability_is_a_new_failure() {
        let fail = Status::Fail(Failure::new("x", "y"));
        let before = report(
            vec![row("a.one", fail.clone())],
            &[Capability::Core, Capability::Positions],
        );
        let b = Baseline::from_report(&before);
        let mut after = report(vec![row("a.one", fail)], &[Capability::Core]);
        after.absent = vec![(Capability::Positions, "not found by the probe (…)".into())];
        let c = b.compare(&after);
        assert!(!c.ok(), "{c:?}");
        assert_eq!(c.missing.len(), 1);
        assert_eq!(c.missing[0].capability, Capability::Positions);
        assert_eq!(c.missing[0].wanted_by, WantedBy::Baseline);
        assert!(
            c.to_text().contains("MISSING CAPABILITY Positions"),
            "{}",
            c.to_text()
        );
        assert!(
            c.to_text().contains("not found by the probe"),
            "{}",
            c.to_text()
        );
        // The same run against a format-1 file: no capabilities to lose.
        let old = Baseline::parse("a.one  expected x; got y\n").expect("format 1");
        let c = old.compare(&after);
        assert!(c.ok() && !c.records_capabilities, "{c:?}");
        // --require: the same capability named explicitly.
        let mut c = Baseline::default().compare(&report(
            vec![row("a.two", Status::Pass)],
            &[Capability::Core],
        ));
        c.require(&[Capability::Positions], &after);
        assert!(!c.ok());
        assert_eq!(c.missing[0].wanted_by, WantedBy::Require);
    }

    /// A known case failing for another reason is reported (and fails the gate under
    /// `OnChangedReason::Fail`); one failing for the same reason in another run's names
    /// and ids is not changed.
    #[test]
    fn a_changed_reason_is_reported_and_can_fail() {
        let b = Baseline::parse(
            "a.one  expected HTTP 400; got HTTP 200: {\"queue\":\"cf-0123456789-a-one-q\",\"leaseId\":\"01a2428e-754b-72fd-ad88-bae66659c7b1\",\"version\":5007}\n\
             a.two  expected success: true; got success: false\n",
        )
        .expect("a baseline");
        let run = report(
            vec![
                row(
                    "a.one",
                    Status::Fail(Failure::new(
                        "HTTP 400",
                        "HTTP 200: {\"queue\":\"cf-fedcba9876-a-one-q\",\"leaseId\":\"01a24300-0000-7000-8000-000000000001\",\"version\":2009}",
                    )),
                ),
                row(
                    "a.two",
                    Status::Fail(Failure::new("success: true", "HTTP 500 database down")),
                ),
            ],
            &[],
        );
        let c = b.compare(&run);
        assert_eq!(c.still_failing, ["a.one", "a.two"]);
        assert_eq!(c.changed.len(), 1, "{c:?}");
        assert_eq!(c.changed[0].id, "a.two");
        assert!(c.ok(), "reported only, by default");
        assert!(c.known("a.two"));
        assert!(c.to_text().contains("CHANGED a.two"), "{}", c.to_text());
        let strict = b.compare_with(&run, OnChangedReason::Fail);
        assert!(!strict.ok());
        assert!(strict.known("a.one") && !strict.known("a.two"));
    }

    #[test]
    fn normalize_masks_what_changes_between_runs_and_keeps_status_codes() {
        assert_eq!(
            normalize("HTTP 404 cf-0123456789-x at 2026-12-04T10:00:00.123Z v 5007 of 3"),
            "HTTP 404 cf-<run>-x at <time> v <n> of 3"
        );
        assert_eq!(
            normalize(
                "lease 01a2428e-754b-72fd-ad88-bae66659c7b1 and 0123456789abcdef0123456789abcdef"
            ),
            "lease <uuid> and <uuid>"
        );
        // Cut at the reason's length limit inside a UUID, at any point after its
        // first group.
        assert_eq!(normalize("id \"01a246cb-b542-7000-a071-"), "id \"<uuid>");
        assert_eq!(
            normalize("id 01a246cb-b636-7000-90b2-83656a7386"),
            "id <uuid>"
        );
        assert_eq!(normalize("queue \"cf-aaa1ede7"), "queue \"cf-<run>");
        assert_ne!(normalize("HTTP 200"), normalize("HTTP 400"));
    }

    #[test]
    fn a_bad_directive_is_an_error_not_ignored() {
        assert!(Baseline::parse("#! capabilities Core Postions\n").is_err());
        assert!(Baseline::parse("#! sed 1\n").is_err());
        assert!(Baseline::parse("#! format 9\n").is_err());
        let b = Baseline::parse("#! format 2\n#! capabilities core kv\n# a comment\n").expect("ok");
        assert_eq!(b.capabilities, Some(vec![Capability::Core, Capability::Kv]));
    }
}
