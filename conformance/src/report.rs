//! The report: one row per case, rendered as a text table, JSON, or JUnit XML.

use std::fmt::Write as _;

use serde::Serialize;

use crate::baseline::{Comparison, WantedBy};
use crate::case::{Capability, Failure, Level};

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
    /// It could not decide: the broker answered too slowly for the case's time window
    /// or budget ([`crate::FailureKind::Inconclusive`]). Neither passed nor failed;
    /// counted apart, like a skip, with what was too slow.
    Inconclusive(Failure),
    /// It was not run (or its run was cut short) because the broker stopped answering
    /// during the run ([`Report::stopped`]); such a run exits 2.
    NotRun(String),
}

/// Where a run stopped: the broker stopped answering (no HTTP answer, and then none to
/// `GET /health` either) during a case.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stopped {
    /// The case during which it stopped.
    pub case: String,
    /// The request that got no answer, with the error.
    pub error: String,
    /// How many cases had finished before.
    pub finished: usize,
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
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The broker.
    pub url: String,
    /// The profile.
    pub profile: String,
    /// The capabilities the run judged the broker by (the profile's, or what the probe
    /// found under `auto`): a baseline records them, so a capability that disappears
    /// later is a new failure, not a quiet skip.
    pub capabilities: Vec<Capability>,
    /// The capabilities the broker lacks, each with why (the probe's evidence).
    pub absent: Vec<(Capability, String)>,
    /// The properties' seed.
    pub seed: u64,
    /// One row per selected case, by id.
    pub results: Vec<CaseResult>,
    /// Set when the broker stopped answering during the run: the run judged nothing
    /// after that and exits 2.
    pub stopped: Option<Stopped>,
    /// Wall time of the run.
    pub millis: u64,
}

impl Report {
    /// (passed, failed, skipped); a flaky, inconclusive or not-run case is none of
    /// them ([`Report::flaky`], [`Report::inconclusive`], [`Report::not_run`]).
    pub fn counts(&self) -> (usize, usize, usize) {
        let mut c = (0, 0, 0);
        for r in &self.results {
            match r.status {
                Status::Pass => c.0 += 1,
                Status::Fail(_) => c.1 += 1,
                Status::Skip(_) => c.2 += 1,
                Status::Flaky(_) | Status::Inconclusive(_) | Status::NotRun(_) => {}
            }
        }
        c
    }

    /// How many cases could not decide ([`Status::Inconclusive`]).
    pub fn inconclusive(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.status, Status::Inconclusive(_)))
            .count()
    }

    /// How many cases were not run because the broker stopped answering.
    pub fn not_run(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.status, Status::NotRun(_)))
            .count()
    }

    /// How many cases were judged: passed, failed or flaky.
    pub fn judged(&self) -> usize {
        let (p, f, _) = self.counts();
        p + f + self.flaky()
    }

    /// How many cases were flaky (failed, then held when run again).
    pub fn flaky(&self) -> usize {
        self.results
            .iter()
            .filter(|r| matches!(r.status, Status::Flaky(_)))
            .count()
    }

    /// `N passed, N failed, N skipped`, then `, N flaky`, `, N inconclusive` and
    /// `, N not run` when any was.
    pub fn summary(&self) -> String {
        let (p, f, s) = self.counts();
        let mut out = format!("{p} passed, {f} failed, {s} skipped");
        for (n, what) in [
            (self.flaky(), "flaky"),
            (self.inconclusive(), "inconclusive"),
            (self.not_run(), "not run"),
        ] {
            if n > 0 {
                let _ = write!(out, ", {n} {what}");
            }
        }
        out
    }

    /// Whether the run judged the broker and it held: no case failed, at least one was
    /// judged (a run of skips alone judged nothing), and the broker did not stop
    /// answering.
    pub fn ok(&self) -> bool {
        self.counts().1 == 0 && self.judged() > 0 && self.stopped.is_none()
    }

    /// The failed cases' ids.
    pub fn failed_ids(&self) -> Vec<&str> {
        self.results
            .iter()
            .filter(|r| matches!(r.status, Status::Fail(_)))
            .map(|r| r.id.as_str())
            .collect()
    }

    /// The report in `format`, without a gate (every failure is a failure).
    pub fn render(&self, format: Format) -> String {
        self.render_gated(format, None)
    }

    /// The report in `format`; with a `gate` ([`Comparison`]: a baseline's known
    /// failures, lost or required capabilities), known failures are shown as known
    /// (JUnit: `<skipped message="known failure: …">`, so a reporter is green on a gate
    /// that passes), and what the gate decided is part of the report.
    pub fn render_gated(&self, format: Format, gate: Option<&Comparison>) -> String {
        match format {
            Format::Text => self.text(gate),
            Format::Json => self.json(gate),
            Format::Junit => self.junit(gate),
            Format::Markdown => self.markdown(gate),
        }
    }

    /// A table, then the details of each failure, then the totals.
    pub fn to_text(&self) -> String {
        self.text(None)
    }

    /// The report as Markdown: the totals, then a table of the failed cases.
    pub fn to_markdown(&self) -> String {
        self.markdown(None)
    }

    /// The report as JSON.
    pub fn to_json(&self) -> String {
        self.json(None)
    }

    /// The report as JUnit XML (one testsuite; a testcase per case).
    pub fn to_junit(&self) -> String {
        self.junit(None)
    }

    /// Whether `id` is a failure the gate knows (and passes).
    fn known(gate: Option<&Comparison>, id: &str) -> bool {
        gate.is_some_and(|g| g.known(id))
    }

    fn text(&self, gate: Option<&Comparison>) -> String {
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
                Status::Fail(_) if Self::known(gate, &r.id) => {
                    ("FAIL", "  (known: in the baseline)".to_string())
                }
                Status::Fail(_) => ("FAIL", String::new()),
                Status::Skip(why) => ("skip", format!("  ({why})")),
                Status::Flaky(fl) => (
                    "FLAKY",
                    format!("  (failed {} of {} attempts)", fl.failed, fl.attempts),
                ),
                Status::Inconclusive(f) => ("INCONC", format!("  ({})", f.actual)),
                Status::NotRun(why) => ("notrun", format!("  ({why})")),
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
                Status::Fail(f) if Self::known(gate, &r.id) => ("KNOWN FAIL", f),
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
        if let Some(s) = &self.stopped {
            let _ = writeln!(
                out,
                "\nSTOPPED: the broker stopped answering during case {}: {}",
                s.case, s.error
            );
        }
        let _ = writeln!(
            out,
            "\n{} in {:.1} s",
            self.summary(),
            self.millis as f64 / 1000.0
        );
        if let Some(g) = gate.filter(|g| g.file.is_some() || !g.missing.is_empty()) {
            out.push_str(&g.to_text());
        }
        out
    }

    fn markdown(&self, gate: Option<&Comparison>) -> String {
        let cell = |t: &str| cut(t).replace('|', "\\|").replace('\n', " ");
        let mut out = format!(
            "### queen-conformance against `{}` (profile {})\n\n{}\n",
            self.url,
            self.profile,
            self.summary()
        );
        if let Some(s) = &self.stopped {
            let _ = writeln!(
                out,
                "\n**Could not run to the end**: the broker stopped answering during `{}`: {}",
                s.case,
                cell(&s.error)
            );
        }
        if let Some(g) = gate.filter(|g| g.file.is_some() || !g.missing.is_empty()) {
            let _ = writeln!(
                out,
                "\n**Gate: {}**{}: {} known failure(s) failed again, {} new, {} fixed, {} changed reason, {} capability(ies) missing",
                if g.ok() && self.stopped.is_none() {
                    "pass"
                } else {
                    "FAIL"
                },
                g.file
                    .as_ref()
                    .map(|f| format!(" (baseline `{f}`)"))
                    .unwrap_or_default(),
                g.still_failing.len(),
                g.new.len(),
                g.fixed.len(),
                g.changed.len(),
                g.missing.len()
            );
            if !g.missing.is_empty() {
                out.push_str("\nMissing capabilities (each a failure):\n\n");
                for m in &g.missing {
                    let _ = writeln!(
                        out,
                        "- `{}`: {}; this run lacks it: {}",
                        m.capability,
                        match m.wanted_by {
                            WantedBy::Baseline => "the baseline's broker had it",
                            WantedBy::Require => "`--require` names it",
                        },
                        cell(&m.why)
                    );
                }
            }
        }
        let table = |out: &mut String, title: &str, rows: Vec<(&CaseResult, &Failure)>| {
            if rows.is_empty() {
                return;
            }
            let _ = write!(
                out,
                "\n{title}\n\n| case | level | spec | expected | actual |\n|---|---|---|---|---|\n"
            );
            for (r, fl) in rows {
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
        };
        let failed = |known: bool| -> Vec<(&CaseResult, &Failure)> {
            self.results
                .iter()
                .filter_map(|r| match &r.status {
                    Status::Fail(f) if Self::known(gate, &r.id) == known => Some((r, f)),
                    _ => None,
                })
                .collect()
        };
        let title = if gate.is_some_and(|g| g.file.is_some()) {
            "New failures:"
        } else {
            "Failures:"
        };
        table(&mut out, title, failed(false));
        table(
            &mut out,
            "Known failures (in the baseline: the gate passes them):",
            failed(true),
        );
        if let Some(g) = gate {
            if !g.changed.is_empty() {
                out.push_str("\nKnown failures whose reason changed:\n\n");
                for c in &g.changed {
                    let _ = writeln!(
                        out,
                        "- `{}`: was {}; now {}",
                        c.id,
                        cell(&c.was),
                        cell(&c.now)
                    );
                }
            }
            if !g.fixed.is_empty() {
                out.push_str("\nFixed (pass now: remove them from the baseline):\n\n");
                for id in &g.fixed {
                    let _ = writeln!(out, "- `{id}`");
                }
            }
        }
        let listed = |out: &mut String, title: &str, rows: Vec<(&str, String)>| {
            if rows.is_empty() {
                return;
            }
            let _ = write!(out, "\n{title}\n\n");
            for (id, line) in rows {
                let _ = writeln!(out, "- `{id}`: {}", cell(&line));
            }
        };
        listed(
            &mut out,
            "Flaky (failed, then held when run again; not failures):",
            self.results
                .iter()
                .filter_map(|r| match &r.status {
                    Status::Flaky(fl) => Some((r.id.as_str(), fl.summary())),
                    _ => None,
                })
                .collect(),
        );
        listed(
            &mut out,
            "Inconclusive (too slow to judge; neither passed nor failed):",
            self.results
                .iter()
                .filter_map(|r| match &r.status {
                    Status::Inconclusive(f) => Some((r.id.as_str(), f.actual.clone())),
                    _ => None,
                })
                .collect(),
        );
        out
    }

    fn json(&self, gate: Option<&Comparison>) -> String {
        let mut v = serde_json::to_value(self).expect("a report serialises");
        if let (Some(g), Some(o)) = (gate, v.as_object_mut()) {
            let mut gv = serde_json::to_value(g).expect("a comparison serialises");
            gv["ok"] = serde_json::Value::Bool(g.ok());
            o.insert("gate".into(), gv);
        }
        serde_json::to_string_pretty(&v).expect("a report serialises")
    }

    fn junit(&self, gate: Option<&Comparison>) -> String {
        let mut cases = String::new();
        let (mut tests, mut failures, mut skipped, mut errors) = (0usize, 0usize, 0usize, 0usize);
        for r in &self.results {
            tests += 1;
            let class = r.id.rsplit_once('.').map(|(c, _)| c).unwrap_or(&r.id);
            let _ = write!(
                cases,
                "<testcase classname=\"{}\" name=\"{}\" time=\"{:.3}\">",
                esc(class),
                esc(&r.id),
                r.millis as f64 / 1000.0
            );
            let detail = |f: &Failure| {
                format!(
                    "rule: {}\nspec: {}\nexpected: {}\nactual: {}\nexchange: {}",
                    r.rule,
                    r.section,
                    f.expected,
                    f.actual,
                    serde_json::to_string(&f.exchange).unwrap_or_default()
                )
            };
            match &r.status {
                Status::Pass => {}
                Status::Skip(why) => {
                    skipped += 1;
                    let _ = write!(cases, "<skipped message=\"{}\"/>", esc(why));
                }
                Status::Inconclusive(f) => {
                    skipped += 1;
                    let _ = write!(
                        cases,
                        "<skipped message=\"inconclusive: {}\">{}</skipped>",
                        esc(&f.actual),
                        esc(&detail(f))
                    );
                }
                Status::NotRun(why) => {
                    skipped += 1;
                    let _ = write!(cases, "<skipped message=\"not run: {}\"/>", esc(why));
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
                        cases,
                        "<flakyFailure message=\"{}\">{}</flakyFailure>",
                        esc(&fl.failure.expected),
                        esc(&detail)
                    );
                }
                // A failure the baseline lists: skipped, so a reporter is green on a
                // gate that passes; the message says it is known, the body keeps all.
                Status::Fail(fl) if Self::known(gate, &r.id) => {
                    skipped += 1;
                    let why = match gate.and_then(|g| g.changed_reason(&r.id)) {
                        Some(c) => format!(
                            "known failure (in the baseline), reason changed: was {}; now {}",
                            c.was, c.now
                        ),
                        None => format!(
                            "known failure (in the baseline): expected {}; got {}",
                            fl.expected, fl.actual
                        ),
                    };
                    let _ = write!(
                        cases,
                        "<skipped message=\"{}\">{}</skipped>",
                        esc(&cut(&why)),
                        esc(&detail(fl))
                    );
                }
                Status::Fail(fl) => {
                    failures += 1;
                    let _ = write!(
                        cases,
                        "<failure message=\"{}\">{}</failure>",
                        esc(&fl.expected),
                        esc(&detail(fl))
                    );
                }
            }
            cases.push_str("</testcase>\n");
        }
        // What the gate decided beyond the cases: each missing capability is a test of
        // its own that fails, and a run cut short is an error.
        for m in gate.map(|g| g.missing.as_slice()).unwrap_or_default() {
            tests += 1;
            failures += 1;
            let _ = writeln!(
                cases,
                "<testcase classname=\"capability\" name=\"capability.{}\" time=\"0.000\"><failure message=\"capability {} missing: {}\">{}</failure></testcase>",
                m.capability,
                m.capability,
                match m.wanted_by {
                    WantedBy::Baseline => "the baseline's broker had it",
                    WantedBy::Require => "--require names it",
                },
                esc(&m.why)
            );
        }
        if let Some(s) = &self.stopped {
            tests += 1;
            errors += 1;
            let _ = writeln!(
                cases,
                "<testcase classname=\"run\" name=\"run.broker-answering\" time=\"0.000\"><error message=\"the broker stopped answering during case {}\">{}</error></testcase>",
                esc(&s.case),
                esc(&s.error)
            );
        }
        // A run that judged nothing (every case skipped or inconclusive) is no pass: a
        // reporter must not show it green.
        if self.judged() == 0 && self.stopped.is_none() {
            tests += 1;
            errors += 1;
            cases.push_str("<testcase classname=\"run\" name=\"run.judged\" time=\"0.000\"><error message=\"nothing was judged: every selected case was skipped or inconclusive\"/></testcase>\n");
        }
        let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        let _ = writeln!(
            out,
            "<testsuites><testsuite name=\"queen-conformance\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\" time=\"{:.3}\">",
            self.millis as f64 / 1000.0
        );
        out.push_str(&cases);
        out.push_str("</testsuite></testsuites>\n");
        out
    }
}

/// A report's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum Format {
    /// A table, then each failure in detail, then the totals (and the gate's lines).
    Text,
    /// The whole report (and the gate, under `gate`), every body whole.
    Json,
    /// JUnit XML: a testcase per case; known failures `<skipped>`.
    Junit,
    /// The totals and tables of the failures, for a pull-request comment.
    Markdown,
}

impl Format {
    /// Every format.
    pub const ALL: [Format; 4] = [Format::Text, Format::Json, Format::Junit, Format::Markdown];

    /// Its name on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Format::Text => "text",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Markdown => "markdown",
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Format::ALL
            .into_iter()
            .find(|f| f.as_str() == s)
            .ok_or_else(|| format!("unknown format {s:?}; known: text, json, junit, markdown"))
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
