//! The diff of two brokers: the suite run against both, and the cases whose verdicts
//! differ, with each side's evidence, as text, JSON or Markdown.

use std::fmt::Write as _;

use serde::Serialize;

use crate::report::{Report, Status, cut};

/// One side of a differing case.
#[derive(Debug, Clone, Serialize)]
pub struct Side {
    /// `pass`, `fail`, `skip`, `flaky` or `absent` (not in that run).
    pub verdict: String,
    /// For a failure: what was expected and what was seen; for a skip: why.
    pub detail: Option<String>,
    /// For a failure: the last request and the broker's answer.
    pub exchange: Option<String>,
}

/// A case whose verdicts differ.
#[derive(Debug, Clone, Serialize)]
pub struct Difference {
    /// The case id.
    pub id: String,
    /// The rule it checks.
    pub rule: String,
    /// Where in the spec the rule is.
    pub section: String,
    /// Broker A's verdict.
    pub a: Side,
    /// Broker B's verdict.
    pub b: Side,
}

/// Two runs compared.
#[derive(Debug, Clone, Serialize)]
pub struct Diff {
    /// Broker A's URL.
    pub url_a: String,
    /// Broker B's URL.
    pub url_b: String,
    /// (passed, failed, skipped) for A.
    pub counts_a: (usize, usize, usize),
    /// (passed, failed, skipped) for B.
    pub counts_b: (usize, usize, usize),
    /// The cases whose verdicts differ, by id.
    pub differences: Vec<Difference>,
}

fn side(report: &Report, id: &str, whole: bool) -> Side {
    let bare = |verdict: &str, detail: Option<String>| Side {
        verdict: verdict.into(),
        detail,
        exchange: None,
    };
    let Some(r) = report.results.iter().find(|r| r.id == id) else {
        return bare("absent", None);
    };
    let short = |s: String| if whole { s } else { cut(&s) };
    let (verdict, f, detail) = match &r.status {
        Status::Pass => return bare("pass", None),
        Status::Skip(why) => return bare("skip", Some(why.clone())),
        Status::Fail(f) => (
            "fail",
            f,
            format!("expected {}; got {}", f.expected, f.actual),
        ),
        Status::Flaky(fl) => ("flaky", &fl.failure, fl.summary()),
        Status::Inconclusive(f) => ("inconclusive", f, f.actual.clone()),
        Status::NotRun(why) => return bare("not run", Some(why.clone())),
    };
    Side {
        verdict: verdict.into(),
        detail: Some(detail),
        exchange: f.exchange.as_ref().map(|x| {
            let body = x
                .body
                .as_ref()
                .map(|b| format!(" {}", short(b.to_string())))
                .unwrap_or_default();
            format!(
                "{}{body} -> HTTP {} {}",
                x.request,
                x.status,
                short(x.answer.to_string())
            )
        }),
    }
}

fn verdict(report: &Report, id: &str) -> &'static str {
    match report
        .results
        .iter()
        .find(|r| r.id == id)
        .map(|r| &r.status)
    {
        Some(Status::Pass) => "pass",
        Some(Status::Fail(_)) => "fail",
        Some(Status::Skip(_)) => "skip",
        Some(Status::Flaky(_)) => "flaky",
        Some(Status::Inconclusive(_)) => "inconclusive",
        Some(Status::NotRun(_)) => "not run",
        None => "absent",
    }
}

impl Diff {
    /// Compares two runs of the same selection. `whole` keeps long bodies whole (for
    /// JSON); otherwise they are cut as in the text report.
    pub fn new(a: &Report, b: &Report, whole: bool) -> Diff {
        let mut ids: Vec<&str> = a
            .results
            .iter()
            .chain(&b.results)
            .map(|r| r.id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let differences = ids
            .into_iter()
            .filter(|id| verdict(a, id) != verdict(b, id))
            .map(|id| {
                let row = a
                    .results
                    .iter()
                    .chain(&b.results)
                    .find(|r| r.id == id)
                    .expect("an id of one of the runs");
                Difference {
                    id: id.to_string(),
                    rule: row.rule.clone(),
                    section: row.section.clone(),
                    a: side(a, id, whole),
                    b: side(b, id, whole),
                }
            })
            .collect();
        Diff {
            url_a: a.url.clone(),
            url_b: b.url.clone(),
            counts_a: a.counts(),
            counts_b: b.counts(),
            differences,
        }
    }

    /// Whether both brokers gave every case the same verdict.
    pub fn same(&self) -> bool {
        self.differences.is_empty()
    }

    /// The ids that differ.
    pub fn ids(&self) -> Vec<&str> {
        self.differences.iter().map(|d| d.id.as_str()).collect()
    }

    /// For the terminal.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let (pa, fa, sa) = self.counts_a;
        let (pb, fb, sb) = self.counts_b;
        let _ = writeln!(
            out,
            "queen-conformance diff\n  A {}: {pa} passed, {fa} failed, {sa} skipped\n  B {}: {pb} passed, {fb} failed, {sb} skipped\n",
            self.url_a, self.url_b
        );
        let _ = writeln!(
            out,
            "{} case(s) with different verdicts",
            self.differences.len()
        );
        for d in &self.differences {
            let _ = writeln!(
                out,
                "\n{}  A: {}  B: {}\n  rule: {}\n  spec: {}",
                d.id, d.a.verdict, d.b.verdict, d.rule, d.section
            );
            for (name, s) in [("A", &d.a), ("B", &d.b)] {
                if let Some(detail) = &s.detail {
                    let _ = writeln!(out, "  {name}: {detail}");
                }
                if let Some(x) = &s.exchange {
                    let _ = writeln!(out, "  {name}: {x}");
                }
            }
        }
        out
    }

    /// As JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a diff serialises")
    }

    /// As Markdown, for a pull-request comment.
    pub fn to_markdown(&self) -> String {
        let mut out = String::new();
        let (pa, fa, sa) = self.counts_a;
        let (pb, fb, sb) = self.counts_b;
        let _ = writeln!(
            out,
            "### queen-conformance: {} case(s) differ\n",
            self.differences.len()
        );
        let _ = writeln!(
            out,
            "| broker | passed | failed | skipped |\n|---|---|---|---|"
        );
        let _ = writeln!(out, "| A `{}` | {pa} | {fa} | {sa} |", self.url_a);
        let _ = writeln!(out, "| B `{}` | {pb} | {fb} | {sb} |\n", self.url_b);
        if self.differences.is_empty() {
            out.push_str("Every case has the same verdict on both brokers.\n");
            return out;
        }
        let _ = writeln!(out, "| case | A | B | spec |\n|---|---|---|---|");
        for d in &self.differences {
            let _ = writeln!(
                out,
                "| `{}` | {} | {} | {} |",
                d.id,
                d.a.verdict,
                d.b.verdict,
                md(&d.section)
            );
        }
        for d in &self.differences {
            let _ = writeln!(out, "\n<details><summary><code>{}</code></summary>\n", d.id);
            let _ = writeln!(out, "> {}\n", md(&d.rule));
            for (name, s) in [("A", &d.a), ("B", &d.b)] {
                let _ = writeln!(out, "**{name}: {}**", s.verdict);
                if let Some(detail) = &s.detail {
                    let _ = writeln!(out, "\n```text\n{}\n```", detail.replace("```", "'''"));
                }
                if let Some(x) = &s.exchange {
                    let _ = writeln!(out, "\n```text\n{}\n```", x.replace("```", "'''"));
                }
                out.push('\n');
            }
            out.push_str("</details>\n");
        }
        out
    }
}

/// Text safe inside a Markdown table cell.
fn md(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}
