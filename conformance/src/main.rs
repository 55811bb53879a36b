//! `queen-conformance`: run the Queen spec against a broker URL.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use queen_conformance::{
    Baseline, Diff, PROFILES, Profile, Report, RunConfig, all_cases, probe, profile, run,
    wait_ready,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
    Markdown,
}

/// Exit code: the suite could not run (broker down, wrong URL, bad arguments or files).
const COULD_NOT_RUN: u8 = 2;

/// Runs the Queen transaction specification, rule by rule, against a broker.
///
/// Every case has a stable id, its level (MUST/SHOULD), the sentence of the spec it
/// checks and the section it comes from. Cases that need a capability the profile lacks
/// are reported as skipped (with why), never as passed.
#[derive(Debug, Parser)]
#[command(
    name = "queen-conformance",
    version,
    about,
    long_about,
    after_help = "Exit codes:\n  0  conformant: every applicable case passed (with --baseline: no failure outside the baseline; with --diff: both brokers gave every case the same verdict)\n  1  differences: a case failed (with --baseline: a failure the baseline does not list; with --diff: verdicts differ)\n  2  could not run: the broker never answered GET /health with 200 (down, or the URL is wrong), an unknown profile, or a file that cannot be read or written"
)]
struct Args {
    /// The broker's base URL.
    #[arg(long, env = "QUEEN_URL", default_value = "http://127.0.0.1:6632")]
    url: String,
    /// Bearer token for a broker with auth.
    #[arg(long, env = "QUEEN_TOKEN")]
    token: Option<String>,
    /// What the broker supports: queen2 (everything), queen2-fast (no real-time waits),
    /// v0 (no KV, timers, positions, locks, Queen 2 consumer rules or the newer routes:
    /// fetch, streams, ephemeral queues, administration), or auto (probe
    /// the broker with harmless requests, print what it has, skip what it lacks).
    #[arg(long, default_value = "queen2")]
    profile: String,
    /// Only cases whose id contains PATTERN (or matches it, with * wildcards); several
    /// patterns separated by commas select the cases of any of them.
    #[arg(long, value_name = "PATTERN")]
    only: Option<String>,
    /// Report format (markdown: a summary for a pull-request comment).
    #[arg(long, value_enum, default_value = "text")]
    format: Format,
    /// Write the report here instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Generated cases per property (QUEEN_CONFORMANCE_CASES also sets it).
    #[arg(long, env = "QUEEN_CONFORMANCE_CASES", default_value_t = 32)]
    cases: u32,
    /// Random seed of the properties (a failing run prints the one to reuse).
    #[arg(long)]
    seed: Option<u64>,
    /// Cases run at once.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// List the cases and exit.
    #[arg(long)]
    list: bool,
    /// Wait up to SECS for GET /health to answer 200 before the first case (without
    /// it: one attempt). A broker that never does exits 2, not 1.
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    wait_ready: u64,
    /// Write the failing case ids, each with its one-line reason, to FILE.
    #[arg(long, value_name = "FILE")]
    write_baseline: Option<PathBuf>,
    /// Known failures (a file written by --write-baseline): exit 0 when no other case
    /// fails, 1 naming only the new failures; fixed cases are reported.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// Run the suite against two brokers and print the cases whose verdicts differ,
    /// with each side's answer (--format text, json or markdown).
    #[arg(long, num_args = 2, value_names = ["URL_A", "URL_B"])]
    diff: Option<Vec<String>>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if args.list {
        for c in all_cases() {
            println!("{:<48} {:<6} {}", c.id, c.level.as_str(), c.rule);
        }
        return ExitCode::SUCCESS;
    }
    if args.profile != "auto" && profile::find(&args.profile).is_none() {
        let names: Vec<_> = PROFILES.iter().map(|p| p.name.as_ref()).collect();
        eprintln!(
            "unknown profile {:?}; known: {}, auto",
            args.profile,
            names.join(", ")
        );
        return ExitCode::from(COULD_NOT_RUN);
    }
    match &args.diff {
        Some(urls) => diff(&args, &urls[0], &urls[1]).await,
        None => single(&args).await,
    }
}

/// Where notes go: standard output when the report is text on standard output or in a
/// file, standard error otherwise (so a JSON or JUnit report on stdout stays whole).
fn note(args: &Args, text: &str) {
    if args.format == Format::Text || args.output.is_some() {
        print!("{text}");
    } else {
        eprint!("{text}");
    }
}

/// Waits for the broker, then picks its profile (probing it for `auto`).
async fn prepare(args: &Args, url: &str) -> Result<Profile, ExitCode> {
    let within = Duration::from_secs(args.wait_ready);
    if let Err(e) = wait_ready(url, args.token.as_deref(), within).await {
        eprintln!("queen-conformance: could not run: {e}");
        return Err(ExitCode::from(COULD_NOT_RUN));
    }
    if args.profile == "auto" {
        let found = probe(url, args.token.clone()).await;
        note(args, &format!("{url}: {}", found.to_text()));
        Ok(found.profile())
    } else {
        Ok(profile::find(&args.profile).expect("checked in main"))
    }
}

fn config(args: &Args, url: &str, profile: Profile, seed: Option<u64>) -> RunConfig {
    RunConfig {
        url: url.to_string(),
        token: args.token.clone(),
        profile,
        only: args.only.clone(),
        concurrency: args.concurrency,
        prop_cases: args.cases,
        seed,
    }
}

fn write(path: &Path, text: &str) -> Result<(), ExitCode> {
    std::fs::write(path, text).map_err(|e| {
        eprintln!("queen-conformance: cannot write {}: {e}", path.display());
        ExitCode::from(COULD_NOT_RUN)
    })
}

/// Prints `text`, or writes it to `--output` and prints the one-line `summary`.
fn emit(args: &Args, text: &str, summary: &str) -> Result<(), ExitCode> {
    match &args.output {
        Some(path) => {
            write(path, text)?;
            println!("{summary}");
        }
        None => print!("{text}"),
    }
    Ok(())
}

async fn single(args: &Args) -> ExitCode {
    // Read the baseline first: a missing file is known before the broker is bothered.
    let baseline = match &args.baseline {
        Some(path) => match std::fs::read_to_string(path) {
            Ok(text) => Some(Baseline::parse(&text)),
            Err(e) => {
                eprintln!(
                    "queen-conformance: cannot read the baseline {}: {e}",
                    path.display()
                );
                return ExitCode::from(COULD_NOT_RUN);
            }
        },
        None => None,
    };
    let profile = match prepare(args, &args.url).await {
        Ok(p) => p,
        Err(code) => return code,
    };
    let report = run(&config(args, &args.url, profile, args.seed), all_cases()).await;
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
        Format::Junit => report.to_junit(),
        Format::Markdown => report.to_markdown(),
    };
    let (p, f, s) = report.counts();
    if let Err(code) = emit(args, &text, &format!("{p} passed, {f} failed, {s} skipped")) {
        return code;
    }
    if let Some(path) = &args.write_baseline {
        let b = Baseline::from_report(&report);
        if let Err(code) = write(path, &b.render(&report)) {
            return code;
        }
        note(
            args,
            &format!(
                "baseline written to {}: {} failing case(s)\n",
                path.display(),
                b.known.len()
            ),
        );
    }
    verdict(args, &report, baseline.as_ref())
}

fn verdict(args: &Args, report: &Report, baseline: Option<&Baseline>) -> ExitCode {
    let ok = match baseline {
        Some(b) => {
            let c = b.compare(report);
            let file = args
                .baseline
                .as_ref()
                .map(|p| p.display().to_string())
                .unwrap_or_default();
            note(args, &c.to_text(&file));
            c.ok()
        }
        None => report.ok(),
    };
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

async fn diff(args: &Args, url_a: &str, url_b: &str) -> ExitCode {
    if args.format == Format::Junit {
        eprintln!("queen-conformance: --diff prints text, json or markdown, not junit");
        return ExitCode::from(COULD_NOT_RUN);
    }
    let (pa, pb) = tokio::join!(prepare(args, url_a), prepare(args, url_b));
    let (pa, pb) = match (pa, pb) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(code), _) | (_, Err(code)) => return code,
    };
    // One seed for both, so the properties generate the same sequences on each side.
    let seed = Some(
        args.seed
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0),
    );
    let (cfg_a, cfg_b) = (config(args, url_a, pa, seed), config(args, url_b, pb, seed));
    let (a, b) = tokio::join!(run(&cfg_a, all_cases()), run(&cfg_b, all_cases()));
    let d = Diff::new(&a, &b, args.format == Format::Json);
    let text = match args.format {
        Format::Json => d.to_json(),
        Format::Markdown => d.to_markdown(),
        _ => d.to_text(),
    };
    let summary = format!("{} case(s) differ", d.differences.len());
    if let Err(code) = emit(args, &text, &summary) {
        return code;
    }
    if d.same() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
