//! The command line of a proof program: a binary of your own whose `main` is one call,
//! [`Cli::main`], gets seeds, schedule counts, the replay of one printed schedule, and
//! exit codes a CI job can branch on (0 proven, 1 counterexample, 2 could not run).

use std::fmt;
use std::process::ExitCode;

use crate::check::WorkerCheck;
use crate::report::{Outcome, Verdict};
use crate::schedule::Schedule;

/// What [`Cli::main`] prints for `--help` and after a usage error.
///
/// ```
/// assert!(queen_verify::USAGE.contains("--replay"));
/// ```
pub const USAGE: &str = "\
options:
  --seed N            draw the schedules from seed N (decimal or 0x hex; default: the check's,
                      0 unless it sets one: every run draws the same schedules); `random`
                      draws a new seed and prints it, so that the run can be replayed
  --schedules N       run N schedules (default: the check's, or QUEEN_VERIFY_SCHEDULES)
  --replay SCHEDULE   run this one printed schedule, e.g. 'transaction#1:commit-then-drop'
  --allow-reset       by URL: delete what the check finds under the names it resets though it
                      did not make it (without: it refuses, exit 2, naming what it would delete)
  --help              print this
exit codes: 0 proven, 1 counterexample, 2 could not run (or a usage error)";

/// A proof program's command line: seed, schedule count, one schedule to replay, and
/// the arguments it does not know (for the program's own flags).
///
/// ```
/// use queen_verify::Cli;
/// let cli = Cli::parse(["--seed", "0x5eed", "--replay", "transaction#1:lease-expiry"])?;
/// assert_eq!(cli.seed, Some(0x5eed));
/// assert_eq!(cli.replay.map(|s| s.to_string()).as_deref(), Some("transaction#1:lease-expiry"));
/// # Ok::<(), queen_verify::CliError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Cli {
    /// `--seed N`, or the seed `--seed random` drew.
    pub seed: Option<u64>,
    /// Whether [`Cli::seed`] was drawn (`--seed random`): [`Cli::main`] prints it.
    pub seed_drawn: bool,
    /// `--allow-reset`: a check by URL may delete what it did not make
    /// ([`Broker::allow_reset`](crate::Broker::allow_reset)).
    pub allow_reset: bool,
    /// `--schedules N`.
    pub schedules: Option<usize>,
    /// `--replay SCHEDULE`.
    pub replay: Option<Schedule>,
    /// Every argument it does not know, in order.
    pub rest: Vec<String>,
}

/// A command line [`Cli::parse`] refuses.
///
/// ```
/// let e = queen_verify::Cli::parse(["--seed", "many"]).unwrap_err();
/// assert_eq!(e.to_string(), "--seed: \"many\" is not a number (decimal or 0x hex)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CliError {
    /// `--help` was given.
    #[error("help asked for")]
    Help,
    /// A flag came without its value.
    #[error("{0} needs a value")]
    Missing(&'static str),
    /// A flag's value is not what it takes.
    #[error("{flag}: {value:?} is not {wanted}")]
    Bad {
        /// The flag.
        flag: &'static str,
        /// Its value.
        value: String,
        /// What it takes.
        wanted: String,
    },
}

impl Cli {
    /// Parses `args` (without the program's name). `--seed random` draws a seed (and
    /// sets [`Cli::seed_drawn`]).
    ///
    /// ```
    /// let cli = queen_verify::Cli::parse(["--schedules", "50", "--worker", "unfenced"])?;
    /// assert_eq!(cli.schedules, Some(50));
    /// assert_eq!(cli.rest, ["--worker", "unfenced"]);
    /// let random = queen_verify::Cli::parse(["--seed", "random", "--allow-reset"])?;
    /// assert!(random.seed_drawn && random.seed.is_some() && random.allow_reset);
    /// # Ok::<(), queen_verify::CliError>(())
    /// ```
    pub fn parse<I, S>(args: I) -> Result<Cli, CliError>
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut cli = Cli::default();
        let mut args = args.into_iter().map(Into::into);
        while let Some(arg) = args.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f.to_string(), Some(v.to_string())),
                _ => (arg.clone(), None),
            };
            let mut value = |name: &'static str| {
                inline
                    .clone()
                    .or_else(|| args.next())
                    .ok_or(CliError::Missing(name))
            };
            match flag.as_str() {
                "--help" | "-h" => return Err(CliError::Help),
                "--seed" => {
                    let v = value("--seed")?;
                    if v.trim() == "random" {
                        cli.seed = Some(random_seed());
                        cli.seed_drawn = true;
                    } else {
                        cli.seed = Some(parse_seed(&v)?);
                        cli.seed_drawn = false;
                    }
                }
                "--allow-reset" => cli.allow_reset = true,
                "--schedules" => {
                    let v = value("--schedules")?;
                    cli.schedules = Some(v.trim().parse().map_err(|_| CliError::Bad {
                        flag: "--schedules",
                        value: v.clone(),
                        wanted: "a count".into(),
                    })?);
                }
                "--replay" => {
                    let v = value("--replay")?;
                    cli.replay =
                        Some(
                            v.parse()
                                .map_err(|e: crate::ParseScheduleError| CliError::Bad {
                                    flag: "--replay",
                                    value: v.clone(),
                                    wanted: format!("a schedule ({e})"),
                                })?,
                        );
                }
                _ => cli.rest.push(arg),
            }
        }
        Ok(cli)
    }

    /// Parses the program's own command line.
    ///
    /// ```no_run
    /// let cli = queen_verify::Cli::from_env()?;
    /// # Ok::<(), queen_verify::CliError>(())
    /// ```
    pub fn from_env() -> Result<Cli, CliError> {
        Cli::parse(std::env::args().skip(1))
    }

    /// `check` with the seed and schedule count asked for (`--schedules`, else
    /// `QUEEN_VERIFY_SCHEDULES` when set, else the check's own).
    ///
    /// ```
    /// use queen_verify::{Cli, WorkerCheck};
    /// let cli = Cli::parse(["--seed", "7"])?;
    /// let check = cli.configure(WorkerCheck::new(|_c, stop| async move { stop.await }));
    /// assert_eq!(check.drawn(3), WorkerCheck::new(|_c, stop| async move { stop.await }).seed(7).drawn(3));
    /// # Ok::<(), queen_verify::CliError>(())
    /// ```
    pub fn configure(&self, mut check: WorkerCheck) -> WorkerCheck {
        if let Some(seed) = self.seed {
            check = check.seed(seed);
        }
        if self.allow_reset {
            check = check.allowing_reset();
        }
        match self.schedules {
            Some(n) => check.schedules(n),
            None => {
                let n = check.schedules;
                check.schedules_from_env(n)
            }
        }
    }

    /// Runs `check` (its schedules, or the one `--replay` names) and answers the
    /// verdict. Call it outside any async runtime, as [`WorkerCheck::run_blocking`].
    ///
    /// ```
    /// use queen_verify::{Cli, Invariant, Outcome, WorkerCheck};
    /// let cli = Cli::parse(["--replay", "pop#1:unavailable"])?;
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
    ///     .invariant(Invariant::inputs_acked());
    /// let verdict = cli.verdict(&check);
    /// assert_eq!((verdict.schedules, verdict.outcome()), (1, Outcome::Proven));
    /// # Ok::<(), queen_verify::CliError>(())
    /// ```
    pub fn verdict(&self, check: &WorkerCheck) -> Verdict {
        match &self.replay {
            Some(schedule) => check.replay_blocking(schedule.clone()),
            None => check.run_blocking(),
        }
    }

    /// The whole of a proof program: parses the command line, runs `check` as it asks,
    /// prints the verdict (and, on a counterexample, the command that replays it), and
    /// answers the exit code: 0 proven, 1 counterexample, 2 could not run or a usage
    /// error. Call it from a plain `fn main`, outside any async runtime.
    ///
    /// ```no_run
    /// use std::process::ExitCode;
    /// use queen_verify::{Cli, Input, Invariant, WorkerCheck};
    ///
    /// fn main() -> ExitCode {
    ///     let check = WorkerCheck::new(|_client, stop| async move { stop.await })
    ///         .input(Input::new("orders", &1))
    ///         .invariant(Invariant::inputs_acked());
    ///     Cli::main(check)
    /// }
    /// ```
    pub fn main(check: WorkerCheck) -> ExitCode {
        let cli = match Cli::from_env() {
            Ok(cli) => cli,
            Err(CliError::Help) => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            Err(e) => {
                eprintln!("{e}\n{USAGE}");
                return ExitCode::from(Outcome::CouldNotRun.code());
            }
        };
        if let Some(unknown) = cli.rest.first() {
            eprintln!("unknown argument {unknown:?}\n{USAGE}");
            return ExitCode::from(Outcome::CouldNotRun.code());
        }
        let check = cli.configure(check);
        if cli.seed_drawn {
            println!("seed {:#x} (drawn: --seed random)", check.seed);
        }
        let verdict = cli.verdict(&check);
        print!("{verdict}");
        if let Some(c) = &verdict.counterexample
            && !c.violation.is_could_not_run()
        {
            let program = std::env::args()
                .next()
                .unwrap_or_else(|| "<program>".into());
            println!("{}", ReplayCommand::new(&program, &check, &c.schedule));
        }
        verdict.outcome().into()
    }
}

/// The command line that replays one schedule of a check, as [`Cli::main`] prints it.
///
/// ```
/// use queen_verify::{ReplayCommand, Schedule, WorkerCheck};
/// let check = WorkerCheck::new(|_c, stop| async move { stop.await }).seed(0x5eed);
/// let s: Schedule = "transaction#1:lease-expiry".parse()?;
/// assert_eq!(
///     ReplayCommand::new("prove-billing", &check, &s).to_string(),
///     "replay it: prove-billing --seed 0x5eed --replay 'transaction#1:lease-expiry'"
/// );
/// # Ok::<(), queen_verify::ParseScheduleError>(())
/// ```
///
/// By URL it also names the broker and says that the replay keeps real time:
///
/// ```
/// use queen_verify::{Broker, ReplayCommand, Resources, WorkerCheck};
/// let check = WorkerCheck::new(|_c, stop| async move { stop.await })
///     .against(Broker::url("http://127.0.0.1:6632", Resources::new()));
/// let line = ReplayCommand::new("prove", &check, &Default::default()).to_string();
/// assert!(line.contains("against the broker at http://127.0.0.1:6632"), "{line}");
/// assert!(line.contains("timing may differ"), "{line}");
/// // The command stands alone on its line, so that it can be pasted into a shell.
/// assert!(line.lines().next().unwrap().ends_with("--replay 'none'"), "{line}");
/// ```
#[derive(Debug, Clone)]
pub struct ReplayCommand {
    line: String,
    /// Said on the next line: where a by-URL run ran, and that its timing may differ.
    note: Option<String>,
}

impl ReplayCommand {
    /// The command for `program` to replay `schedule` of `check`.
    ///
    /// ```
    /// # use queen_verify::{ReplayCommand, WorkerCheck};
    /// let check = WorkerCheck::new(|_c, stop| async move { stop.await });
    /// let cmd = ReplayCommand::new("prove", &check, &Default::default());
    /// assert!(cmd.to_string().ends_with("--replay 'none'"));
    /// ```
    pub fn new(program: &str, check: &WorkerCheck, schedule: &Schedule) -> Self {
        let line = format!("{program} --seed {:#x} --replay '{schedule}'", check.seed);
        let note = check.remote.as_ref().map(|remote| {
            format!(
                "(against the broker at {}: by URL a run keeps real time, so the replay's \
                 timing may differ from this run's and it may not fail the same way; in \
                 process a replay is exact)",
                remote.url
            )
        });
        ReplayCommand { line, note }
    }
}

impl fmt::Display for ReplayCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "replay it: {}", self.line)?;
        match &self.note {
            Some(note) => write!(f, "\n  {note}"),
            None => Ok(()),
        }
    }
}

/// A seed drawn for `--seed random`: the standard library's per-process random hash
/// keys (from the OS) over the time, so no random-number crate is linked for it.
fn random_seed() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::hash::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    h.finish()
}

fn parse_seed(v: &str) -> Result<u64, CliError> {
    let t = v.trim();
    let parsed = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => t.replace('_', "").parse(),
    };
    parsed.map_err(|_| CliError::Bad {
        flag: "--seed",
        value: v.to_string(),
        wanted: "a number (decimal or 0x hex)".into(),
    })
}
