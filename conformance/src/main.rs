//! `queen-conformance`: run the Queen spec against a broker URL.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use queen_conformance::{PROFILES, RunConfig, all_cases, profile, run};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    Text,
    Json,
    Junit,
}

/// Runs the Queen transaction specification, rule by rule, against a broker.
///
/// Exits 0 only when every applicable case passed. Cases that need a capability the
/// profile lacks are reported as skipped, never as passed.
#[derive(Debug, Parser)]
#[command(name = "queen-conformance", version, about, long_about)]
struct Args {
    /// The broker's base URL.
    #[arg(long, env = "QUEEN_URL", default_value = "http://127.0.0.1:6632")]
    url: String,
    /// Bearer token for a broker with auth.
    #[arg(long, env = "QUEEN_TOKEN")]
    token: Option<String>,
    /// What the broker supports: queen2 (everything), queen2-fast (no real-time waits), v0.
    #[arg(long, default_value = "queen2")]
    profile: String,
    /// Only cases whose id contains PATTERN (or matches it, with * wildcards).
    #[arg(long, value_name = "PATTERN")]
    only: Option<String>,
    /// Report format.
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
    let Some(profile) = profile::find(&args.profile) else {
        let names: Vec<_> = PROFILES.iter().map(|p| p.name).collect();
        eprintln!(
            "unknown profile {:?}; known: {}",
            args.profile,
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let cfg = RunConfig {
        url: args.url,
        token: args.token,
        profile,
        only: args.only,
        concurrency: args.concurrency,
        prop_cases: args.cases,
        seed: args.seed,
    };
    let report = run(&cfg, all_cases()).await;
    let text = match args.format {
        Format::Text => report.to_text(),
        Format::Json => report.to_json(),
        Format::Junit => report.to_junit(),
    };
    match &args.output {
        Some(path) => {
            if let Err(e) = std::fs::write(path, &text) {
                eprintln!("cannot write {}: {e}", path.display());
                return ExitCode::from(2);
            }
            let (p, f, s) = report.counts();
            println!("{p} passed, {f} failed, {s} skipped");
        }
        None => print!("{text}"),
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
