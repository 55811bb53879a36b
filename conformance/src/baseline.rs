//! Baselines: the known failures of a broker, so a pipeline can gate on new ones.
//!
//! A baseline file has one failing case id per line, then its one-line reason;
//! `#` starts a comment. `--write-baseline FILE` writes the failures of a run;
//! `--baseline FILE` compares a run with it: failures not in the file are new (the run
//! exits 1 and names only them), ids of the file that passed are fixed (reported, so
//! the file can be tightened; they do not fail the run). A flaky case (it failed, then
//! held when run again, [`Status::Flaky`]) is never a new failure: a verdict that flips
//! between runs on one broker cannot flip the gate. `--write-baseline` lists flaky
//! cases too, so a later run in which one fails every attempt is a known failure.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::report::{Report, Status};

/// The known failures: case id to its one-line reason.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Baseline {
    /// Known failing ids and their reasons.
    pub known: BTreeMap<String, String>,
}

/// A run measured against a baseline.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Comparison {
    /// Failures the baseline does not list, with their one-line reasons.
    pub new: Vec<(String, String)>,
    /// Baseline ids that passed in this run.
    pub fixed: Vec<String>,
    /// Baseline ids that failed again.
    pub still_failing: Vec<String>,
    /// Cases that were flaky in this run, listed in the baseline or not: neither new
    /// nor fixed.
    pub flaky: Vec<String>,
    /// Baseline ids that were skipped, not selected, or are not cases of this suite.
    pub not_run: Vec<String>,
}

impl Comparison {
    /// Whether the run matches the baseline: no new failure.
    pub fn ok(&self) -> bool {
        self.new.is_empty()
    }

    /// A few lines for the terminal.
    pub fn to_text(&self, file: &str) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "baseline {file}: {} known failure(s) failed again, {} new, {} fixed, {} not run",
            self.still_failing.len(),
            self.new.len(),
            self.fixed.len(),
            self.not_run.len()
        );
        if !self.flaky.is_empty() {
            let _ = writeln!(
                out,
                "  {} flaky (failed, then held when run again: not new failures)",
                self.flaky.len()
            );
        }
        for (id, why) in &self.new {
            let _ = writeln!(out, "  NEW FAILURE {id}: {why}");
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

/// The one-line reason of a failed or flaky row: what was expected and what was seen
/// (for a flaky one, after `flaky:` and how often it failed).
pub fn reason(status: &Status) -> Option<String> {
    let line = match status {
        Status::Fail(f) => format!("expected {}; got {}", f.expected, f.actual),
        Status::Flaky(fl) => fl.summary(),
        Status::Pass | Status::Skip(_) => return None,
    };
    Some(
        line.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .take(300)
            .collect(),
    )
}

impl Baseline {
    /// The failures of `report`, and its flaky cases.
    pub fn from_report(report: &Report) -> Self {
        Baseline {
            known: report
                .results
                .iter()
                .filter_map(|r| reason(&r.status).map(|why| (r.id.clone(), why)))
                .collect(),
        }
    }

    /// Parses a baseline file.
    pub fn parse(text: &str) -> Self {
        let known = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| match l.split_once(char::is_whitespace) {
                Some((id, why)) => (id.to_string(), why.trim().to_string()),
                None => (l.to_string(), String::new()),
            })
            .collect();
        Baseline { known }
    }

    /// The file's text, with a header naming where it came from.
    pub fn render(&self, report: &Report) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "# queen-conformance baseline: the cases known to fail against {} (profile {}).\n# One id per line, then its reason; `--baseline FILE` fails only on failures not listed here.",
            report.url, report.profile
        );
        for (id, why) in &self.known {
            let _ = writeln!(out, "{id}  {why}");
        }
        out
    }

    /// Measures `report` against the baseline.
    pub fn compare(&self, report: &Report) -> Comparison {
        let mut c = Comparison::default();
        for r in &report.results {
            match (&r.status, self.known.contains_key(&r.id)) {
                (Status::Fail(_), false) => c
                    .new
                    .push((r.id.clone(), reason(&r.status).unwrap_or_default())),
                (Status::Fail(_), true) => c.still_failing.push(r.id.clone()),
                (Status::Pass, true) => c.fixed.push(r.id.clone()),
                (Status::Flaky(_), _) => c.flaky.push(r.id.clone()),
                (Status::Pass, false) | (Status::Skip(_), _) => {}
            }
        }
        for id in self.known.keys() {
            let ran = report
                .results
                .iter()
                .any(|r| &r.id == id && !matches!(r.status, Status::Skip(_)));
            if !ran {
                c.not_run.push(id.clone());
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

    #[test]
    fn a_baseline_round_trips_and_tells_new_from_known_and_fixed() {
        let fail = |why: &str| Status::Fail(Failure::new("x", why));
        let first = Report {
            url: "u".into(),
            profile: "queen2".into(),
            results: vec![
                row("a.one", fail("bad\nline")),
                row("a.two", Status::Pass),
                row("a.three", fail("worse")),
            ],
            millis: 0,
        };
        let b = Baseline::from_report(&first);
        let text = b.render(&first);
        let parsed = Baseline::parse(&text);
        assert_eq!(parsed, b, "{text}");
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
        let c = parsed.compare(&second);
        assert!(!c.ok());
        assert_eq!(
            c.new,
            vec![("a.two".to_string(), "expected x; got new".to_string())]
        );
        assert_eq!(c.fixed, vec!["a.one".to_string()]);
        assert_eq!(c.still_failing, vec!["a.three".to_string()]);
        assert!(c.not_run.is_empty());
        assert!(c.to_text("f").contains("NEW FAILURE a.two"));
    }
}
