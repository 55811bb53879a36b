//! What the proof programs (`verify-worker`, `verify-shapes`) share beside
//! [`queen_verify::Cli`]'s own flags: which of their checks to run, a broker by URL to
//! run them against, and the number of schedules.

use std::fmt::Display;
use std::process::ExitCode;

use queen_verify::{Broker, Cli, CliError, Outcome, Resources, WorkerCheck};

/// A proof program's command line, read once: [`Cli`]'s flags, the program's own
/// ([`ProofArgs`]) and the schedules to run ([`ProofArgs::schedules`]).
#[derive(Debug)]
pub struct Proof<T> {
    /// `--seed`, `--schedules`, `--replay`.
    pub cli: Cli,
    /// The checks picked and the broker URL.
    pub args: ProofArgs<T>,
    /// The schedules to run.
    pub schedules: usize,
}

impl<T: PartialEq> Proof<T> {
    /// Reads the process's command line. `--help` prints `usage` (then [`Cli`]'s own)
    /// and answers exit code 0; a mistake prints itself with them and answers 2 (could
    /// not run). `local` and `by_url` are the default schedule counts.
    pub fn from_env(
        usage: &str,
        pick: &str,
        parse: impl Fn(&str) -> Option<T>,
        local: usize,
        by_url: usize,
    ) -> Result<Self, ExitCode> {
        let cli = match Cli::from_env() {
            Ok(cli) => cli,
            Err(CliError::Help) => {
                println!("{usage}\n{}", queen_verify::USAGE);
                return Err(ExitCode::SUCCESS);
            }
            Err(e) => return Err(usage_error(usage, &e)),
        };
        let args = ProofArgs::parse(&cli.rest, pick, parse).map_err(|e| usage_error(usage, &e))?;
        let schedules = args
            .schedules(&cli, local, by_url)
            .map_err(|e| usage_error(usage, &e))?;
        Ok(Proof {
            cli,
            args,
            schedules,
        })
    }
}

/// Prints `e` with `usage` (and [`Cli`]'s own) to stderr; answers exit code 2.
pub fn usage_error(usage: &str, e: &dyn Display) -> ExitCode {
    eprintln!("{e}\n{usage}\n{}", queen_verify::USAGE);
    ExitCode::from(Outcome::CouldNotRun.code())
}

/// A proof program's own flags: `--<pick> NAME[,NAME...]` (the checks to run) and
/// `--url URL` (against the broker there, through a fault proxy).
///
/// ```
/// let args = queen_examples::proof::ProofArgs::parse(
///     &["--shape".into(), "a,b".into(), "--url=http://127.0.0.1:6632".into()],
///     "--shape",
///     |s| ["a", "b"].contains(&s).then(|| s.to_string()),
/// )
/// .unwrap();
/// assert_eq!(args.only, Some(vec!["a".to_string(), "b".to_string()]));
/// assert_eq!(args.url.as_deref(), Some("http://127.0.0.1:6632"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProofArgs<T> {
    /// The checks named with the pick flag; `None`: all of them.
    pub only: Option<Vec<T>>,
    /// The broker to run against; `None`: in-process brokers.
    pub url: Option<String>,
}

impl<T: PartialEq> ProofArgs<T> {
    /// Reads `rest` (what [`Cli`] left), where `pick` names the checks and `parse` reads
    /// one check's name. An unknown flag, a missing value or an unknown name is an
    /// error that says which.
    pub fn parse(
        rest: &[String],
        pick: &str,
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<Self, String> {
        let mut args = ProofArgs {
            only: None,
            url: None,
        };
        let mut rest = rest.iter();
        while let Some(arg) = rest.next() {
            let (flag, value) = match arg.split_once('=') {
                Some((f, v)) => (f, Some(v.to_string())),
                None => (arg.as_str(), rest.next().cloned()),
            };
            match (flag, value) {
                (f, Some(v)) if f == pick => {
                    let mut picked = Vec::new();
                    for name in v.split(',') {
                        match parse(name.trim()) {
                            Some(t) => picked.push(t),
                            None => return Err(format!("{pick}: no check named {name:?}")),
                        }
                    }
                    args.only = Some(picked);
                }
                ("--url", Some(v)) => args.url = Some(v),
                (f, None) if f == pick || f == "--url" => {
                    return Err(format!("{f} needs a value"));
                }
                _ => return Err(format!("unknown argument {arg:?}")),
            }
        }
        Ok(args)
    }

    /// Whether `check` is to run.
    pub fn runs(&self, check: &T) -> bool {
        self.only.as_ref().is_none_or(|o| o.contains(check))
    }

    /// The one check named, for a replay; else an error.
    pub fn one(&self, pick: &str) -> Result<&T, String>
    where
        T: Copy,
    {
        match self.only.as_deref() {
            Some([one]) => Ok(one),
            _ => Err(format!(
                "--replay needs one {pick}: which check's schedule it is"
            )),
        }
    }

    /// `check`, run against the broker at `--url` when there is one (with `QUEEN_TOKEN`
    /// as its token), resetting `resources` there before each schedule.
    pub fn target(&self, check: WorkerCheck, resources: Resources) -> WorkerCheck {
        match &self.url {
            Some(u) => {
                let mut broker = Broker::url(u, resources);
                if let Ok(token) = std::env::var("QUEEN_TOKEN") {
                    broker = broker.token(token);
                }
                check.against(broker)
            }
            None => check,
        }
    }

    /// The command that replays one of `name`'s schedules: `program`, the pick flag and
    /// the URL (the seed and schedule follow, from [`queen_verify::ReplayCommand`]).
    pub fn program(&self, program: &str, pick: &str, name: &str) -> String {
        match &self.url {
            Some(u) => format!("{program} {pick} {name} --url {u}"),
            None => format!("{program} {pick} {name}"),
        }
    }

    /// Where the checks run, as the report's first line says it.
    pub fn where_(&self) -> String {
        match &self.url {
            Some(u) => format!("against the broker at {u} through a fault proxy"),
            None => "each on a fresh in-process broker".to_string(),
        }
    }

    /// The schedules to run: `--schedules`, else [`queen_verify::SCHEDULES_VAR`] (an
    /// error if it is not a number), else `by_url` against a URL (each takes real time)
    /// or `local`.
    pub fn schedules(&self, cli: &Cli, local: usize, by_url: usize) -> Result<usize, String> {
        match (cli.schedules, std::env::var(queen_verify::SCHEDULES_VAR)) {
            (Some(n), _) => Ok(n),
            (None, Ok(v)) => v.trim().parse().map_err(|_| {
                format!(
                    "{}={v:?} is not a number of schedules",
                    queen_verify::SCHEDULES_VAR
                )
            }),
            (None, Err(_)) if self.url.is_some() => Ok(by_url),
            (None, Err(_)) => Ok(local),
        }
    }
}
