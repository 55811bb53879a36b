//! `queen-conformance`: run the Queen spec against a broker URL.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, ValueEnum};
use queen_conformance::baseline::{GATE_SEED, OnChangedReason};
use queen_conformance::runner::unmatched_parts;
use queen_conformance::{
    Baseline, Capability, Comparison, CouldNotRun, Diff, Format, PROFILES, Profile, Report,
    RunConfig, Stopped, all_cases, preflight, probe, profile, run, wait_ready,
};

/// `--on-changed-reason`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ChangedArg {
    /// Report a known failure whose reason changed, and pass.
    Report,
    /// Report it, and fail the gate.
    Fail,
}

/// Exit code: the suite could not run (see `after_help`).
const COULD_NOT_RUN: u8 = 2;

const EXIT_CODES: &str = "Exit codes:
  0  conformant: every applicable case passed and at least one was judged (with --baseline: no failure outside the baseline and no capability lost; with --diff: both brokers gave every case the same verdict)
  1  differences: a case failed (with --baseline: a failure the baseline does not list, a capability it recorded that this run lacks, a changed reason under --on-changed-reason fail; with --require: a capability missing; with --diff: verdicts differ)
  2  could not run, with one line naming the cause: the broker never answered GET /health with 200 (down, or the URL is wrong); it is not a Queen broker (no push and pop of its own queue); auth refused (401/403: the role needed is named); --only selects no case, or one part of it selects none; every selected case was skipped; the broker stopped answering during the run (the case is named); an unknown profile, format or capability; a file that cannot be read or written

Formats: --format KIND or --format KIND=PATH, repeated: e.g. --format text --format junit=junit.xml --format markdown=summary.md writes the text report to standard output and the other two to files. At most one KIND goes to standard output (or to --output FILE); with none there, standard output gets the one-line summary.";

/// Runs the Queen transaction specification, rule by rule, against a broker.
///
/// Every case has a stable id, its level (MUST/SHOULD), the sentence of the spec it
/// checks and the section of `conformance/spec/` that states it. Cases that need a
/// capability the profile lacks are reported as skipped (with why), never as passed.
#[derive(Debug, Parser)]
#[command(
    name = "queen-conformance",
    version,
    about,
    long_about,
    after_help = EXIT_CODES
)]
struct Args {
    /// The broker's base URL.
    #[arg(long, env = "QUEEN_URL", default_value = "http://127.0.0.1:6632")]
    url: String,
    /// Bearer token for a broker with auth (role admin: the suite writes, and deletes
    /// the queues and groups it made).
    #[arg(long, env = "QUEEN_TOKEN")]
    token: Option<String>,
    /// What the broker supports: queen2 (everything), queen2-fast (no real-time waits),
    /// v0 (no KV, timers, positions, locks, Queen 2 consumer rules or the newer routes:
    /// fetch, streams, ephemeral queues, administration), or auto (probe
    /// the broker with harmless requests, print what it has, skip what it lacks).
    #[arg(long, default_value = "queen2")]
    profile: String,
    /// Only cases whose id contains PATTERN (or matches it, with * wildcards); several
    /// patterns separated by commas select the cases of any of them. A pattern (or one
    /// part of the list) that selects no case is an error (exit 2).
    #[arg(long, value_name = "PATTERN")]
    only: Option<String>,
    /// A report: KIND (text, json, junit, markdown) to standard output, or KIND=PATH to
    /// a file; repeat it for several (see below).
    #[arg(long, value_name = "KIND[=PATH]", default_value = "text")]
    format: Vec<String>,
    /// Write the report of the --format without a PATH here instead of standard output.
    #[arg(long)]
    output: Option<PathBuf>,
    /// Generated cases per property (QUEEN_CONFORMANCE_CASES also sets it).
    #[arg(long, env = "QUEEN_CONFORMANCE_CASES", default_value_t = 32)]
    cases: u32,
    /// Seed of the properties (a failing run prints the one to reuse). Without it: the
    /// baseline's seed with --baseline (a fixed one for a file without), else random.
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
    /// Write the failing case ids, each with its one-line reason, and the run's
    /// capabilities, profile and seed, to FILE.
    #[arg(long, value_name = "FILE")]
    write_baseline: Option<PathBuf>,
    /// Known failures (a file written by --write-baseline): exit 0 when no other case
    /// fails and no capability of the file is lost, 1 naming the new failures; fixed
    /// and changed cases are reported.
    #[arg(long, value_name = "FILE")]
    baseline: Option<PathBuf>,
    /// With --baseline: what a known failure that fails for another reason does.
    #[arg(long, value_enum, default_value = "report")]
    on_changed_reason: ChangedArg,
    /// Capabilities the broker must have (comma-separated: Positions,Kv): one the run
    /// lacks is a failure (under --profile auto), or an error when the chosen profile
    /// leaves it out.
    #[arg(long, value_name = "CAP,...")]
    require: Option<String>,
    /// Run the suite against two brokers and print the cases whose verdicts differ,
    /// with each side's answer (formats text, json or markdown).
    #[arg(long, num_args = 2, value_names = ["URL_A", "URL_B"])]
    diff: Option<Vec<String>>,
}

/// Where each report goes.
#[derive(Debug)]
struct Outputs {
    /// The format on standard output (or in `--output`), if any.
    stdout: Option<Format>,
    /// The formats written to files.
    files: Vec<(Format, PathBuf)>,
}

impl Outputs {
    /// Parses the `--format` values: `KIND` or `KIND=PATH`, at most one `KIND` alone.
    fn parse(values: &[String]) -> Result<Outputs, String> {
        let mut out = Outputs {
            stdout: None,
            files: Vec::new(),
        };
        for v in values {
            match v.split_once('=') {
                Some((kind, path)) if !path.is_empty() => {
                    out.files.push((kind.parse()?, PathBuf::from(path)));
                }
                Some((kind, _)) => return Err(format!("--format {kind}= names no file")),
                None => {
                    let f: Format = v.parse()?;
                    if let Some(first) = out.stdout {
                        return Err(format!(
                            "--format {} and --format {}: only one report goes to standard output; give the other a file (--format {}=PATH)",
                            first.as_str(),
                            f.as_str(),
                            f.as_str()
                        ));
                    }
                    out.stdout = Some(f);
                }
            }
        }
        Ok(out)
    }

    /// Whether standard output carries a report a program reads (JSON, JUnit, or
    /// Markdown): then notes go to standard error, so that report stays whole.
    fn stdout_is_data(&self, args: &Args) -> bool {
        args.output.is_none() && self.stdout.is_some_and(|f| f != Format::Text)
    }
}

#[tokio::main]
async fn main() -> ExitCode {
    // `--format` has a default; clap appends given values to it only when none is
    // given, so a user's `--format junit=x` replaces `text` (stdout then gets the
    // summary line).
    let args = Args::parse();
    if args.list {
        for c in all_cases() {
            println!("{:<48} {:<6} {}", c.id, c.level.as_str(), c.rule);
        }
        return ExitCode::SUCCESS;
    }
    match checked(&args) {
        Ok(code) => code.await,
        Err(cause) => could_not_run(&cause),
    }
}

/// Prints the one line of a run that could not judge the broker, and answers exit 2.
fn could_not_run(cause: &CouldNotRun) -> ExitCode {
    // One line whatever the evidence holds (a web page's newlines, a multi-line error).
    let line = cause
        .to_string()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    eprintln!("queen-conformance: could not run: {line}");
    ExitCode::from(COULD_NOT_RUN)
}

/// The arguments checked before the broker is bothered; answers the run to make.
fn checked(
    args: &Args,
) -> Result<std::pin::Pin<Box<dyn std::future::Future<Output = ExitCode> + '_>>, CouldNotRun> {
    if args.profile != "auto" && profile::find(&args.profile).is_none() {
        let names: Vec<_> = PROFILES.iter().map(|p| p.name.as_ref()).collect();
        return Err(CouldNotRun::Contradiction(format!(
            "unknown profile {:?}; known: {}, auto",
            args.profile,
            names.join(", ")
        )));
    }
    if let Some(only) = &args.only {
        let all = all_cases();
        let ids: Vec<&str> = all.iter().map(|c| c.id).collect();
        if let Some(part) = unmatched_parts(only, &ids).first() {
            return Err(CouldNotRun::NothingSelected {
                part: part.to_string(),
            });
        }
    }
    let outputs = Outputs::parse(&args.format).map_err(CouldNotRun::Contradiction)?;
    let required: Vec<Capability> = match &args.require {
        Some(list) => list
            .split(',')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| CouldNotRun::Contradiction(format!("--require: {e}")))?,
        None => Vec::new(),
    };
    if let Some(fixed) = profile::find(&args.profile)
        && let Some(cap) = required.iter().find(|c| !fixed.has(**c))
    {
        return Err(CouldNotRun::Contradiction(format!(
            "--require {cap}, but profile {} leaves it out: use a profile with it, or --profile auto to find it on the broker",
            fixed.name
        )));
    }
    Ok(match &args.diff {
        Some(urls) => Box::pin(diff(args, outputs, &urls[0], &urls[1])),
        None => Box::pin(single(args, outputs, required)),
    })
}

/// Where notes go: standard output, unless it carries a report a program reads.
fn note(args: &Args, outputs: &Outputs, text: &str) {
    if outputs.stdout_is_data(args) {
        eprint!("{text}");
    } else {
        print!("{text}");
    }
}

/// Waits for the broker, checks it is a Queen broker this token may use (measuring its
/// latency), then picks its profile (probing it for `auto`).
async fn prepare(
    args: &Args,
    outputs: &Outputs,
    url: &str,
) -> Result<(Profile, Duration), CouldNotRun> {
    let within = Duration::from_secs(args.wait_ready);
    wait_ready(url, args.token.as_deref(), within)
        .await
        .map_err(|e| CouldNotRun::NotReady(e.to_string()))?;
    let pre = preflight(url, args.token.clone()).await?;
    if args.profile == "auto" {
        let found = probe(url, args.token.clone()).await;
        note(args, outputs, &format!("{url}: {}", found.to_text()));
        if let Some(cause) = found.could_not_run() {
            return Err(cause);
        }
        Ok((found.profile(), pre.latency))
    } else {
        Ok((
            profile::find(&args.profile).expect("checked in main"),
            pre.latency,
        ))
    }
}

fn config(
    args: &Args,
    url: &str,
    profile: Profile,
    seed: Option<u64>,
    latency: Duration,
) -> RunConfig {
    RunConfig {
        url: url.to_string(),
        token: args.token.clone(),
        profile,
        only: args.only.clone(),
        concurrency: args.concurrency,
        prop_cases: args.cases,
        seed,
        latency,
    }
}

fn write(path: &Path, text: &str) -> Result<(), CouldNotRun> {
    std::fs::write(path, text)
        .map_err(|e| CouldNotRun::Contradiction(format!("cannot write {}: {e}", path.display())))
}

/// Writes every report: the one for standard output there (or to `--output`, then
/// printing `summary`), the others to their files.
fn emit(
    args: &Args,
    outputs: &Outputs,
    render: impl Fn(Format) -> String,
    summary: &str,
) -> Result<(), CouldNotRun> {
    for (format, path) in &outputs.files {
        write(path, &render(*format))?;
    }
    match (outputs.stdout, &args.output) {
        (Some(f), Some(path)) => {
            write(path, &render(f))?;
            println!("{summary}");
        }
        (Some(f), None) => print!("{}", render(f)),
        (None, _) => println!("{summary}"),
    }
    Ok(())
}

async fn single(args: &Args, outputs: Outputs, required: Vec<Capability>) -> ExitCode {
    match gate(args, &outputs, &required).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(cause) => could_not_run(&cause),
    }
}

/// One run, its reports, its baseline, and the gate's verdict (`true`: pass).
async fn gate(
    args: &Args,
    outputs: &Outputs,
    required: &[Capability],
) -> Result<bool, CouldNotRun> {
    // Read the baseline first: a missing file is known before the broker is bothered.
    let baseline = match &args.baseline {
        Some(path) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                CouldNotRun::Contradiction(format!(
                    "cannot read the baseline {}: {e}",
                    path.display()
                ))
            })?;
            Some(Baseline::parse(&text).map_err(|e| {
                CouldNotRun::Contradiction(format!("the baseline {}: {e}", path.display()))
            })?)
        }
        None => None,
    };
    let (profile, latency) = prepare(args, outputs, &args.url).await?;
    // A gate runs the properties on one seed, so a FIXED property is one whose very
    // sequences now pass, not a lucky draw.
    let seed = args
        .seed
        .or_else(|| baseline.as_ref().map(|b| b.seed.unwrap_or(GATE_SEED)));
    let report = run(
        &config(args, &args.url, profile, seed, latency),
        all_cases(),
    )
    .await;
    let on_changed = match args.on_changed_reason {
        ChangedArg::Report => OnChangedReason::Report,
        ChangedArg::Fail => OnChangedReason::Fail,
    };
    let mut cmp = match &baseline {
        Some(b) => Comparison {
            file: args.baseline.as_ref().map(|p| p.display().to_string()),
            ..b.compare_with(&report, on_changed)
        },
        None => Baseline::default().compare_with(&report, on_changed),
    };
    cmp.require(required, &report);
    emit(
        args,
        outputs,
        |f| report.render_gated(f, Some(&cmp)),
        &report.summary(),
    )?;
    // The gate's lines are in a text report on standard output; elsewhere, say them.
    let text_on_stdout = outputs.stdout == Some(Format::Text) && args.output.is_none();
    if !text_on_stdout && (cmp.file.is_some() || !cmp.missing.is_empty()) {
        note(args, outputs, &cmp.to_text());
    }
    if let Some(stopped) = &report.stopped {
        return Err(CouldNotRun::Stopped(stopped.clone()));
    }
    if report.judged() == 0 {
        return Err(CouldNotRun::NothingJudged(nothing_judged(&report)));
    }
    if let Some(path) = &args.write_baseline {
        let b = Baseline::from_report(&report);
        write(path, &b.render(&report))?;
        note(
            args,
            outputs,
            &format!(
                "baseline written to {}: {} failing case(s), capabilities {}\n",
                path.display(),
                b.known.len(),
                report
                    .capabilities
                    .iter()
                    .map(|c| c.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        );
    }
    Ok(cmp.ok())
}

/// Why a run judged nothing: every selected case was skipped (or inconclusive).
fn nothing_judged(report: &Report) -> String {
    let (_, _, skipped) = report.counts();
    let first = report.results.iter().find_map(|r| match &r.status {
        queen_conformance::Status::Skip(why) => Some(why.clone()),
        _ => None,
    });
    format!(
        "all {} selected case(s) were skipped or inconclusive ({skipped} skipped{})",
        report.results.len(),
        first
            .map(|w| format!("; the first: {w}"))
            .unwrap_or_default()
    )
}

async fn diff(args: &Args, outputs: Outputs, url_a: &str, url_b: &str) -> ExitCode {
    let all: Vec<Format> = outputs
        .stdout
        .iter()
        .copied()
        .chain(outputs.files.iter().map(|(f, _)| *f))
        .collect();
    if all.contains(&Format::Junit) {
        return could_not_run(&CouldNotRun::Contradiction(
            "--diff prints text, json or markdown, not junit".into(),
        ));
    }
    let (pa, pb) = tokio::join!(
        prepare(args, &outputs, url_a),
        prepare(args, &outputs, url_b)
    );
    let ((pa, la), (pb, lb)) = match (pa, pb) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(cause), _) | (_, Err(cause)) => return could_not_run(&cause),
    };
    // One seed for both, so the properties generate the same sequences on each side.
    let seed = Some(
        args.seed
            .unwrap_or_else(|| uuid::Uuid::new_v4().as_u64_pair().0),
    );
    let (cfg_a, cfg_b) = (
        config(args, url_a, pa, seed, la),
        config(args, url_b, pb, seed, lb),
    );
    let (a, b) = tokio::join!(run(&cfg_a, all_cases()), run(&cfg_b, all_cases()));
    for r in [&a, &b] {
        if let Some(s) = &r.stopped {
            return could_not_run(&CouldNotRun::Stopped(Stopped {
                case: format!("{} (broker {})", s.case, r.url),
                ..s.clone()
            }));
        }
    }
    let whole = all.contains(&Format::Json);
    let d = Diff::new(&a, &b, whole);
    let render = |f: Format| match f {
        Format::Json => d.to_json(),
        Format::Markdown => d.to_markdown(),
        _ => d.to_text(),
    };
    let summary = format!("{} case(s) differ", d.differences.len());
    if let Err(cause) = emit(args, &outputs, render, &summary) {
        return could_not_run(&cause);
    }
    if d.same() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
