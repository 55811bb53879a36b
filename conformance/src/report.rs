//! The report: one row per case, rendered as a text table, JSON, or JUnit XML.

use std::fmt::Write as _;

use serde::Serialize;

use crate::case::{Failure, Level};

/// A case's outcome.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "lowercase")]
pub enum Status {
    /// It held.
    Pass,
    /// It did not.
    Fail(Failure),
    /// Not applicable to the profile, with the reason.
    Skip(String),
    /// It failed, then held when run again on the same broker: its verdict flips
    /// between runs, so it is told apart from a failure and never fails a run or a
    /// baseline gate (see [`crate::runner::RETRIES`]).
    Flaky(Flake),
}

/// A case whose verdict flipped within one run: the failure it showed, and how often.
#[derive(Debug, Clone, Serialize)]
pub struct Flake {
    /// The first failure seen, with its exchange.
    pub failure: Failure,
    /// Attempts made (the last one held).
    pub attempts: u32,
    /// Of them, the ones that failed.
    pub failed: u32,
}

impl Flake {
    /// One line: how often it failed, and the first failure.
    pub fn summary(&self) -> String {
        format!(
            "flaky: failed {} of {} attempts, first: expected {}; got {}",
            self.failed, self.attempts, self.failure.expected, self.failure.actual
        )
    }
}

/// One case's row.
#[derive(Debug, Clone, Serialize)]
pub struct CaseResult {
    /// The case's id.
    pub id: String,
    /// MUST or SHOULD.
    pub level: Level,
    /// The sentence it checks.
    pub rule: String,
    /// Where in the spec the sentence comes from.
    #[serde(default)]
    pub section: String,
    /// The outcome.
    #[serde(flatten)]
    pub status: Status,
    /// How long it took.
    pub millis: u64,
}

/// A whole run.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The broker.
    pub url: String,
    /// The profile.
    pub profile: String,
    /// One row per selected case, by id.
    pub results: Vec<CaseResult>,
    /// Wall time of the run.
    pub millis: u64,
}

impl Report {
    /// (passed, failed, skipped); a flaky case is none of them ([`Report::flaky`]).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for r in &self.results {
            match r.status {
                Status::Pass => c.0 += 1,
                Status::Fail(_) => c.1 += 1,
                Status::Skip(_) => c.2 += 1,
                Status::Flaky(_) => {}
            }
        }
        c
    }

    /// How many cases were flaky (failed, then held when run again).
    pub fn flaky(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.status, Status::Flaky(_)))
            .count()
    }

    /// `N passed, N failed, N skipped`, then `, N flaky` when any was.
    pub fn summary(&self) -> String {
        let (p, f, s) = self.counts();
        match self.flaky() {
            0 => format!("{p} passed, {f} failed, {s} skipped"),
            n => format!("{p} passed, {f} failed, {s} skipped, {n} flaky"),
        }
    }

    /// Whether every applicable case passed.
    pub fn ok(&self) -> bool {
        self.counts().1 == 0
    }

    /// The failed cases' ids.
    pub fn failed_ids(&self) -> Vec<&str> {
        self.results
            .iter()
            .filter(|r| matches!(r.status, Status::Fail(_)))
            .map(|r| r.id.as_str())
            .collect()
    }

    /// A table, then the details of each failure, then the totals.
    pub fn to_text(&self) -> String {
        let w = self
            .results
            .iter()
            .map(|r| r.id.len())
            .max()
            .unwrap_or(4)
            .max(4);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "queen-conformance against {} (profile {})\n",
            self.url, self.profile
        );
        let _ = writeln!(
            out,
            "{:<w$}  {:<6}  {:<4}  {:>6}",
            "CASE", "LEVEL", "RESULT", "ms"
        );
        for r in &self.results {
            let (s, note) = match &r.status {
                Status::Pass => ("pass", String::new()),
                Status::Fail(_) => ("FAIL", String::new()),
                Status::Skip(why) => ("skip", format!("  ({why})")),
                Status::Flaky(fl) => (
                    "FLAKY",
                    format!("  (failed {} of {} attempts)", fl.failed, fl.attempts),
                ),
            };
            let _ = writeln!(
                out,
                "{:<w$}  {:<6}  {:<6}  {:>6}{note}",
                r.id,
                r.level.as_str(),
                s,
                r.millis
            );
        }
        for r in &self.results {
            let (word, f) = match &r.status {
                Status::Fail(f) => ("FAIL", f),
                Status::Flaky(fl) => ("FLAKY", &fl.failure),
                _ => continue,
            };
            let _ = writeln!(
                out,
                "\n{word} {} [{}]\n  rule:     {}",
                r.id,
                r.level.as_str(),
                r.rule
            );
            if let Status::Flaky(fl) = &r.status {
                let _ = writeln!(
                    out,
                    "  flaky:    failed {} of {} attempts on this broker; the first failure:",
                    fl.failed, fl.attempts
                );
            }
            if !r.section.is_empty() {
                let _ = writeln!(out, "  spec:     {}", r.section);
            }
            let _ = writeln!(out, "  expected: {}\n  actual:   {}", f.expected, f.actual);
            if let Some(x) = &f.exchange {
                let _ = writeln!(out, "  request:  {}", x.request);
                if let Some(b) = &x.body {
                    let _ = writeln!(out, "            {}", cut(&b.to_string()));
                }
                let _ = writeln!(
                    out,
                    "  response: HTTP {} {}",
                    x.status,
                    cut(&x.answer.to_string())
                );
            }
        }
        let _ = writeln!(
            out,
            "\n{} in {:.1} s",
            self.summary(),
            self.millis as f64 / 1000.0
        );
        out
    }

    /// The report as Markdown: the totals, then a table of the failed cases.
    pub fn to_markdown(&self) -> String {
        let f = self.counts().1;
        let mut out = format!(
            "### queen-conformance against `{}` (profile {})\n\n{}\n",
            self.url,
            self.profile,
            self.summary()
        );
        if f > 0 {
            out.push_str("\n| case | level | spec | expected | actual |\n|---|---|---|---|---|\n");
            for r in &self.results {
                if let Status::Fail(fl) = &r.status {
                    let cell = |t: &str| cut(t).replace('|', "\\|").replace('\n', " ");
                    let _ = writeln!(
                        out,
                        "| `{}` | {} | {} | {} | {} |",
                        r.id,
                        r.level.as_str(),
                        cell(&r.section),
                        cell(&fl.expected),
                        cell(&fl.actual)
                    );
                }
            }
        }
        let flaky: Vec<_> = self
            .results
            .iter()
            .filter_map(|r| match &r.status {
                Status::Flaky(fl) => Some((r, fl)),
                _ => None,
            })
            .collect();
        if !flaky.is_empty() {
            out.push_str("\nFlaky (failed, then held when run again; not failures):\n\n");
            for (r, fl) in flaky {
                let _ = writeln!(
                    out,
                    "- `{}`: {}",
                    r.id,
                    cut(&fl.summary()).replace('\n', " ")
                );
            }
        }
        out
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report serialises")
    }

    /// The report as JUnit XML (one testsuite; a testcase per case).
    pub fn to_junit(&self) -> String {
        let (_, f, s) = self.counts();
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites><testsuite name=\"queen-conformance\" tests=\"{}\" failures=\"{f}\" skipped=\"{s}\" time=\"{:.3}\">",
            self.results.len(),
            self.millis as f64 / 1000.0
        );
        for r in &self.results {
            let class = r.id.rsplit_once('.').map(|(c, _)| c).unwrap_or(&r.id);
            let _ = write!(
                out,
                "<testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
                esc(class),
                esc(&r.id),
                r.millis as f64 / 1000.0
            );
            match &r.status {
                Status::Pass => {}
                Status::Skip(why) => {
                    let _ = write!(out, "<skipped message=\"{}\"/>", esc(why));
                }
                // Surefire's form for a test that failed and then passed on a rerun:
                // CI servers that read it show the case as flaky, not failed.
                Status::Flaky(fl) => {
                    let detail = format!(
                        "rule: {}\nspec: {}\n{}\nexchange: {}",
                        r.rule,
                        r.section,
                        fl.summary(),
                        serde_json::to_string(&fl.failure.exchange).unwrap_or_default()
                    );
                    let _ = write!(
                        out,
                        "<flakyFailure message=\"{}\">{}</flakyFailure>",
                        esc(&fl.failure.expected),
                        esc(&detail)
                    );
                }
                Status::Fail(fl) => {
                    let detail = format!(
                        "rule: {}\nspec: {}\nexpected: {}\nactual: {}\nexchange: {}",
                        r.rule,
                        r.section,
                        fl.expected,
                        fl.actual,
                        serde_json::to_string(&fl.exchange).unwrap_or_default()
                    );
                    let _ = write!(
                        out,
                        "<failure message=\"{}\">{}</failure>",
                        esc(&fl.expected),
                        esc(&detail)
                    );
                }
            }
            out.push_str("</testcase>\n");
        }
        out.push_str("</testsuite></testsuites>\n");
        out
    }
}

/// How much of a request or answer body the text report keeps.
pub const TEXT_BODY_LIMIT: usize = 2048;

/// `body` cut to its first [`TEXT_BODY_LIMIT`] bytes (on a character boundary), with a
/// note of how many bytes were cut; whole when it is short enough.
pub fn cut(body: &str) -> String {
    if body.len() <= TEXT_BODY_LIMIT {
        return body.to_string();
    }
    let mut end = TEXT_BODY_LIMIT;
    while !body.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}… [{} more bytes cut; the JSON and JUnit reports keep the whole body]",
        &body[..end],
        body.len() - end
    )
}

fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => {}
            c => o.push(c),
        }
    }
    o
}
