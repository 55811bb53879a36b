//! `queen-mock-broker`: the reference Queen broker as a standalone server.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::str::FromStr;
use std::time::Duration;

use queen_mock_broker::auth::Auth;
use queen_mock_broker::{MockBroker, StartError};
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;

/// Every request allocates on one tokio worker and frees on another or on the writer
/// thread; glibc's malloc spent a quarter of the CPU on that under load (perf,
/// ack-push at 64 clients), mimalloc a fraction of it. A cargo feature, off by
/// default: a C build in every test that links the library otherwise.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const ABOUT: &str = "\
A durable, single-node Queen broker on an embedded redb file.

Speaks the Queen 2 HTTP API (push, pop, ack, leases, consumer groups, dead
letters) so that workers and the official clients can run against it unchanged.";

/// One command-line flag: its name, its environment variable, the name of its value
/// (none for a switch), its default and its help text. The table is the parser and
/// the `--help` text both, so the two cannot drift apart. Hand-written instead of
/// clap: every test that links the library compiled clap too (see the workspace
/// README's "Build weight").
struct Flag {
    name: &'static str,
    env: Option<&'static str>,
    value: Option<&'static str>,
    default: Option<&'static str>,
    help: &'static str,
    /// Given more than once, its values add up (joined by commas, as a comma list).
    repeatable: bool,
}

const FLAGS: &[Flag] = &[
    Flag {
        name: "listen",
        env: Some("QUEEN_LISTEN"),
        value: Some("ADDR"),
        default: Some("127.0.0.1:6632"),
        repeatable: false,
        help: "Address to listen on.",
    },
    Flag {
        name: "data",
        env: Some("QUEEN_DATA"),
        value: Some("PATH"),
        default: Some("./queen-data/queen.redb"),
        repeatable: false,
        help: "The redb file holding all data (created, with its folder, if missing); its \
               write-ahead log is `<data>.wal` beside it, part of the database.",
    },
    Flag {
        name: "in-memory",
        env: None,
        value: None,
        default: None,
        repeatable: false,
        help: "Keep everything in memory and lose it on exit (ignores --data).",
    },
    Flag {
        name: "no-console",
        env: None,
        value: None,
        default: None,
        repeatable: false,
        help: "Do not serve the web console (at /console, the page that shows queues, \
               messages, dead letters, KV, timers and transactions through the API).",
    },
    Flag {
        name: "token-file",
        env: Some("QUEEN_TOKEN_FILE"),
        value: Some("PATH"),
        default: None,
        repeatable: false,
        help: "Turn authentication on with this token file: a JSON object mapping each \
               bearer token to {\"role\": \"read-only|read-write|admin\", \"tenant\": \"...\", \
               \"sub\": \"...\"}.",
    },
    Flag {
        name: "jwt-secret",
        env: Some("QUEEN_JWT_SECRET"),
        value: Some("SECRET"),
        default: None,
        repeatable: false,
        help: "Turn authentication on and accept HS256 JWTs signed with this secret \
               (claims role or roles, tenant, sub, exp): at least 32 bytes, or the broker \
               does not start (`openssl rand -hex 32` makes one).",
    },
    Flag {
        name: "jwt-default-tenant",
        env: Some("QUEEN_JWT_DEFAULT_TENANT"),
        value: Some("NAME"),
        default: None,
        repeatable: false,
        help: "The tenant of a JWT that carries no `tenant` claim. Unset (the default), such \
               a token is refused with 401: a credential joins a tenant only by saying so, \
               or by the operator's choice here. A `tenant` that is not a string is refused \
               either way.",
    },
    Flag {
        name: "jwt-require-exp",
        env: Some("QUEEN_JWT_REQUIRE_EXP"),
        value: Some("BOOL"),
        default: Some("true"),
        repeatable: false,
        help: "Refuse JWTs without an `exp` claim (401), so every token expires: `true` or \
               `false`. It applies only with --jwt-secret.",
    },
    Flag {
        name: "storage-cap",
        env: Some("QUEEN_STORAGE_CAP"),
        value: Some("SIZE"),
        default: None,
        repeatable: false,
        help: "Cap on stored data, in bytes of keys and values (suffixes K, M, G and KiB, \
               MiB, GiB accepted). At the cap, pushes, KV writes and timers answer 507 \
               `storage_full`; reads, pops, acks and deletes go on. No cap by default.",
    },
    Flag {
        name: "storage-reserve",
        env: Some("QUEEN_STORAGE_RESERVE"),
        value: Some("SIZE"),
        default: Some("32MiB"),
        repeatable: false,
        help: "Disk held back for a full disk (suffixes as for --storage-cap), as a file \
               beside the data file: when the disk fills, it is given back so pops, acks and \
               deletes go on while writes that add data answer 507; 0 turns it off.",
    },
    Flag {
        name: "cache-size",
        env: Some("QUEEN_CACHE_SIZE"),
        value: Some("SIZE"),
        default: Some("64MiB"),
        repeatable: false,
        help: "Most bytes of database pages kept in memory (suffixes as for --storage-cap): \
               what stored data costs in resident memory, however much is stored (large \
               answers and request bodies come on top, within --answer-budget and \
               --body-budget).",
    },
    Flag {
        name: "answer-budget",
        env: Some("QUEEN_ANSWER_BUDGET"),
        value: Some("SIZE"),
        default: Some("512MiB"),
        repeatable: false,
        help: "Most bytes that fetch answers being read, rendered and sent may hold at once, \
               broker-wide (suffixes as for --storage-cap). When it is spent, a fetch answers \
               the records that fitted, and one that has none waits up to 10 s for room, \
               then is answered 429 `overloaded` with Retry-After. Pops and the dead-letter \
               listing charge it too (a pop delivers fewer messages; a listing's page waits \
               for room for all of it).",
    },
    Flag {
        name: "body-budget",
        env: Some("QUEEN_BODY_BUDGET"),
        value: Some("SIZE"),
        default: Some("512MiB"),
        repeatable: false,
        help: "Most bytes that request bodies being read and handled may hold at once, \
               broker-wide (suffixes as for --storage-cap): each body counts twice its length \
               (read, then parsed) from before it is read until its handler is done. When it \
               is spent, a request waits up to 10 s for room, then is answered 429 \
               `overloaded` with Retry-After. Each body is still at most 64 MiB.",
    },
    Flag {
        name: "checkpoint-ms",
        env: Some("QUEEN_CHECKPOINT_MS"),
        value: Some("MS"),
        default: Some("10000"),
        repeatable: false,
        help: "Longest time, in milliseconds, between checkpoints: durable commits of the \
               data file that make the write-ahead log's records part of it (every write is \
               durable in the log first). Rarer ones stall writes less often but for longer; \
               0 makes one after every group of writes.",
    },
    Flag {
        name: "max-connections",
        env: Some("QUEEN_MAX_CONNECTIONS"),
        value: Some("N"),
        default: Some("4096"),
        repeatable: false,
        help: "Most connections served at once; more wait in the kernel's backlog.",
    },
    Flag {
        name: "header-timeout-secs",
        env: Some("QUEEN_HEADER_TIMEOUT"),
        value: Some("S"),
        default: Some("60"),
        repeatable: false,
        help: "Seconds a client may take to send a request's head (or to start its next \
               request on a kept-alive connection) before the connection is closed.",
    },
    Flag {
        name: "drain-secs",
        env: Some("QUEEN_DRAIN"),
        value: Some("S"),
        default: Some("0"),
        repeatable: false,
        help: "Seconds to keep answering 503 `retry` after SIGTERM or Ctrl-C before closing \
               the port, so load balancers and clients move away first.",
    },
    Flag {
        name: "allow-origin",
        env: Some("QUEEN_ALLOW_ORIGIN"),
        value: Some("ORIGIN"),
        default: None,
        repeatable: true,
        help: "Let web pages of this origin (`http://localhost:3000`, as a browser sends it; \
               `*` for any) call the API, with CORS answers. Repeat it, or give a comma \
               list. Without it a request from a page of another origin than the \
               broker's own (the console) is refused, 403.",
    },
    Flag {
        name: "allow-host",
        env: Some("QUEEN_ALLOW_HOST"),
        value: Some("NAME"),
        default: None,
        repeatable: true,
        help: "Answer requests naming this host (`queen.internal`, no port) while \
               listening on a loopback address, where only loopback names (localhost, \
               127.x.y.z, [::1]) are answered by default and any other Host is refused, \
               403 (DNS rebinding). Repeat it, or give a comma list.",
    },
    Flag {
        name: "max-lease",
        env: Some("QUEEN_MAX_LEASE"),
        value: Some("DURATION"),
        default: Some("1h"),
        repeatable: false,
        help: "Longest lease a call may take (`90s`, `30m`, `2h`; a bare number is \
               seconds): a pop's leaseSeconds or its queue's leaseTime, a lease \
               extension or a stream claim asking for more gets this long.",
    },
    Flag {
        name: "max-wait",
        env: Some("QUEEN_MAX_WAIT"),
        value: Some("DURATION"),
        default: Some("60s"),
        repeatable: false,
        help: "Longest a long-poll waits (`500ms`, `30s`; a bare number is seconds): a \
               pop, ephemeral pop or fetch asking to wait longer answers (empty) after \
               this long.",
    },
    Flag {
        name: "log",
        env: Some("QUEEN_LOG"),
        value: Some("FILTER"),
        default: Some("info"),
        repeatable: false,
        help: "Log filter: a level (`info`) or comma-separated `target=level` directives \
               (`queen_mock_broker=debug,info`); RUST_LOG, when set, wins.",
    },
];

/// The broker's settings, from the command line, else the environment, else the
/// defaults.
#[derive(Debug)]
struct Args {
    listen: SocketAddr,
    data: PathBuf,
    in_memory: bool,
    no_console: bool,
    token_file: Option<PathBuf>,
    jwt_secret: Option<String>,
    jwt_default_tenant: Option<String>,
    jwt_require_exp: bool,
    storage_cap: Option<u64>,
    storage_reserve: u64,
    cache_size: u64,
    answer_budget: u64,
    body_budget: u64,
    checkpoint_ms: u64,
    max_connections: usize,
    header_timeout_secs: u64,
    drain_secs: u64,
    allow_origins: Vec<String>,
    allow_hosts: Vec<String>,
    max_lease: Duration,
    max_wait: Duration,
    log: String,
}

/// What the command line asked for.
enum Command {
    Run(Box<Args>),
    Help,
    Version,
}

impl Args {
    /// Parses `--flag value`, `--flag=value` and switches; a flag given twice, an
    /// unknown one or a value that does not parse is an error naming it.
    fn parse(
        argv: impl IntoIterator<Item = String>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Command, String> {
        let mut given: HashMap<&'static str, Option<String>> = HashMap::new();
        let mut argv = argv.into_iter();
        while let Some(arg) = argv.next() {
            match arg.as_str() {
                "-h" | "--help" => return Ok(Command::Help),
                "-V" | "--version" => return Ok(Command::Version),
                _ => {}
            }
            let Some(body) = arg.strip_prefix("--") else {
                return Err(format!("unexpected argument `{arg}`"));
            };
            let (name, inline) = match body.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (body, None),
            };
            let flag = FLAGS
                .iter()
                .find(|f| f.name == name)
                .ok_or_else(|| format!("unexpected argument `--{name}`"))?;
            let value = match (flag.value, inline) {
                (None, None) => None,
                (None, Some(_)) => return Err(format!("`--{name}` takes no value")),
                (Some(_), Some(v)) => Some(v),
                (Some(v), None) => Some(
                    argv.next()
                        .ok_or_else(|| format!("`--{name}` needs a value <{v}>"))?,
                ),
            };
            match given.get_mut(flag.name) {
                Some(Some(before)) if flag.repeatable => {
                    before.push(',');
                    before.push_str(value.as_deref().unwrap_or_default());
                }
                Some(_) => return Err(format!("`--{name}` is given more than once")),
                None => {
                    given.insert(flag.name, value);
                }
            }
        }
        // The command line, else the flag's environment variable, else its default.
        let text = |name: &str| -> Option<String> {
            let flag = FLAGS.iter().find(|f| f.name == name).expect("a known flag");
            match given.get(name) {
                Some(v) => v.clone(),
                None => flag
                    .env
                    .and_then(&env)
                    .or_else(|| flag.default.map(str::to_string)),
            }
        };
        fn typed<T>(
            name: &str,
            text: Option<String>,
            parse: impl Fn(&str) -> Result<T, String>,
        ) -> Result<Option<T>, String> {
            let flag = FLAGS.iter().find(|f| f.name == name).expect("a known flag");
            let source = match flag.env {
                Some(env) => format!("`--{name}` (or {env})"),
                None => format!("`--{name}`"),
            };
            text.map(|t| parse(&t).map_err(|e| format!("invalid value `{t}` for {source}: {e}")))
                .transpose()
        }
        fn from_str<T: FromStr>(s: &str) -> Result<T, String>
        where
            T::Err: std::fmt::Display,
        {
            s.parse::<T>().map_err(|e| e.to_string())
        }
        let required = |name: &str, parse: fn(&str) -> Result<u64, String>| {
            typed(name, text(name), parse).map(|v| v.expect("the flag has a default"))
        };
        Ok(Command::Run(Box::new(Args {
            listen: typed("listen", text("listen"), from_str)?.expect("a default"),
            data: PathBuf::from(text("data").expect("a default")),
            in_memory: given.contains_key("in-memory"),
            no_console: given.contains_key("no-console"),
            token_file: text("token-file").map(PathBuf::from),
            jwt_secret: text("jwt-secret"),
            jwt_default_tenant: text("jwt-default-tenant"),
            jwt_require_exp: typed("jwt-require-exp", text("jwt-require-exp"), from_str)?
                .expect("a default"),
            storage_cap: typed("storage-cap", text("storage-cap"), parse_size)?,
            storage_reserve: required("storage-reserve", parse_size)?,
            cache_size: required("cache-size", parse_size)?,
            answer_budget: required("answer-budget", parse_size)?,
            body_budget: required("body-budget", parse_size)?,
            checkpoint_ms: required("checkpoint-ms", from_str)?,
            max_connections: typed("max-connections", text("max-connections"), from_str)?
                .expect("a default"),
            header_timeout_secs: required("header-timeout-secs", from_str)?,
            drain_secs: required("drain-secs", from_str)?,
            allow_origins: list(text("allow-origin")),
            allow_hosts: list(text("allow-host")),
            max_lease: typed("max-lease", text("max-lease"), parse_duration)?.expect("a default"),
            max_wait: typed("max-wait", text("max-wait"), parse_duration)?.expect("a default"),
            log: text("log").expect("a default"),
        })))
    }
}

/// The `--help` text: the table above, each flag with its environment variable and
/// default.
fn help() -> String {
    let mut out = format!("{ABOUT}\n\nUsage: queen-mock-broker [OPTIONS]\n\nOptions:\n");
    for f in FLAGS {
        out.push_str(&format!("  --{}", f.name));
        if let Some(v) = f.value {
            out.push_str(&format!(" <{v}>"));
        }
        out.push('\n');
        let mut help = f.help.to_string();
        if let Some(env) = f.env {
            help.push_str(&format!(" [env: {env}]"));
        }
        if let Some(d) = f.default {
            help.push_str(&format!(" [default: {d}]"));
        }
        // Wrapped at 80 columns, indented under the flag.
        let mut line = String::from("         ");
        for word in help.split_whitespace() {
            if line.len() + word.len() >= 80 && !line.trim().is_empty() {
                out.push_str(line.trim_end());
                out.push('\n');
                line = String::from("         ");
            }
            line.push_str(word);
            line.push(' ');
        }
        out.push_str(line.trim_end());
        out.push_str("\n\n");
    }
    out.push_str("  -h, --help\n         Print help\n\n  -V, --version\n         Print version\n");
    out
}

/// A log filter of `target=level` directives (tracing-subscriber's `Targets`: no
/// span or field directives, and no regex engine in the build).
fn log_filter(text: &str) -> Result<Targets, String> {
    text.parse::<Targets>()
        .map_err(|e| format!("invalid log filter `{text}`: {e}"))
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1), |k| std::env::var(k).ok()) {
        Ok(Command::Run(args)) => args,
        Ok(Command::Help) => {
            print!("{}", help());
            return ExitCode::SUCCESS;
        }
        Ok(Command::Version) => {
            println!("queen-mock-broker {}", env!("CARGO_PKG_VERSION"));
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("queen-mock-broker: {e} (see --help)");
            return ExitCode::from(2);
        }
    };
    // RUST_LOG, when set and valid, wins over --log / QUEEN_LOG, as it did with clap
    // and EnvFilter.
    let filter = match std::env::var("RUST_LOG")
        .ok()
        .and_then(|t| log_filter(&t).ok())
        .map_or_else(|| log_filter(&args.log), Ok)
    {
        Ok(f) => f,
        Err(e) => {
            eprintln!("queen-mock-broker: {e} (see --help)");
            return ExitCode::from(2);
        }
    };
    tracing_subscriber::registry()
        .with(tracing_subscriber::fmt::layer())
        .with(filter)
        .init();
    serve(*args).await
}

async fn serve(args: Args) -> ExitCode {
    let mut builder = MockBroker::builder()
        // A server, not a test: no fault table or request log on the request path.
        .harness(false)
        .listen(args.listen)
        .max_connections(args.max_connections)
        .header_read_timeout(Duration::from_secs(args.header_timeout_secs))
        .drain_period(Duration::from_secs(args.drain_secs))
        .console(!args.no_console)
        .max_lease(args.max_lease)
        .max_wait(args.max_wait)
        .answer_budget(args.answer_budget)
        .body_budget(args.body_budget);
    for origin in &args.allow_origins {
        builder = builder.allow_origin(origin);
    }
    for host in &args.allow_hosts {
        builder = builder.allow_host(host);
    }
    if args.in_memory {
        tracing::info!("in-memory mode: nothing is kept after exit");
    } else {
        tracing::info!(data = %args.data.display(), "durable mode");
        builder = builder.data_file(&args.data);
    }
    builder = builder
        .cache_size(usize::try_from(args.cache_size).unwrap_or(usize::MAX))
        .storage_reserve(args.storage_reserve)
        .checkpoint_every(Duration::from_millis(args.checkpoint_ms));
    if let Some(cap) = args.storage_cap {
        tracing::info!(cap_bytes = cap, "storage cap on");
        builder = builder.storage_cap(cap);
    }
    if args.token_file.is_some() || args.jwt_secret.is_some() {
        let mut auth = match &args.token_file {
            Some(path) => match Auth::from_token_file(path) {
                Ok(auth) => auth,
                Err(e) => {
                    eprintln!("queen-mock-broker: {e}");
                    return ExitCode::from(2);
                }
            },
            None => Auth::new(),
        };
        if let Some(secret) = &args.jwt_secret {
            if let Err(e) = strong_enough(secret) {
                eprintln!("queen-mock-broker: {e}");
                return ExitCode::from(2);
            }
            auth = auth
                .jwt_secret(secret.as_bytes().to_vec())
                .jwt_require_exp(args.jwt_require_exp);
            if let Some(tenant) = args.jwt_default_tenant.as_deref().filter(|t| !t.is_empty()) {
                auth = auth.jwt_default_tenant(tenant);
            }
        }
        tracing::info!("authentication on: every route but /health needs a bearer token");
        builder = builder.auth(auth);
    } else {
        tracing::info!("authentication off (local use): every call acts as the default tenant");
    }
    let broker = match builder.start().await {
        Ok(b) => b,
        Err(e) => {
            // One line, no backtrace: this is the operator's problem to read, not ours.
            eprintln!("queen-mock-broker: {}", start_failure(&e, &args));
            return ExitCode::from(2);
        }
    };
    println!("queen-mock-broker listening on {}", broker.url());
    if !args.no_console {
        println!("console: {}/console", broker.url());
    }

    shutdown_signal().await;
    tracing::info!("shutting down: finishing in-flight requests and commits");
    broker.shutdown().await;
    tracing::info!("stopped");
    ExitCode::SUCCESS
}

/// Fewest bytes of a JWT secret: HS256's key is as strong as its secret, and a short
/// one is found offline from any token it signed (RFC 7518 3.2 asks for at least the
/// hash's 256 bits).
const MIN_JWT_SECRET_BYTES: usize = 32;

/// Refuses a JWT secret under [`MIN_JWT_SECRET_BYTES`], saying how long it is and how
/// to make one, never what it is (it may be a real secret, one character short).
fn strong_enough(secret: &str) -> Result<(), String> {
    if secret.len() >= MIN_JWT_SECRET_BYTES {
        return Ok(());
    }
    Err(format!(
        "the JWT secret (`--jwt-secret` or QUEEN_JWT_SECRET) is {} bytes; HS256 needs at \
         least {MIN_JWT_SECRET_BYTES} (make one with `openssl rand -hex 32`)",
        secret.len()
    ))
}

/// Why the broker did not start, in one line, with the way out.
fn start_failure(e: &StartError, args: &Args) -> String {
    match e {
        StartError::Storage(s) if !args.in_memory => format!(
            "cannot open the data file {}: {s}. If it is damaged or truncated, restore it \
             from a backup, or move it away (or pass another --data) to start empty",
            args.data.display()
        ),
        other => other.to_string(),
    }
}

/// The items of a comma list, trimmed, without empty ones.
fn list(text: Option<String>) -> Vec<String> {
    text.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses a duration such as `90s`, `500ms`, `30m`, `2h` or `45` (seconds); at least
/// a millisecond.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a duration: expected a number like 90s"))?;
    let d = match unit.trim() {
        "" | "s" => Duration::from_secs(n),
        "ms" => Duration::from_millis(n),
        "m" => Duration::from_secs(n.saturating_mul(60)),
        "h" => Duration::from_secs(n.saturating_mul(3600)),
        other => {
            return Err(format!(
                "unknown duration unit `{other}` (use ms, s, m or h)"
            ));
        }
    };
    if d < Duration::from_millis(1) {
        return Err("a duration of at least 1ms is needed".into());
    }
    Ok(d)
}

/// Parses a byte count such as `500000`, `64M` or `2GiB`.
fn parse_size(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (digits, unit) = s.split_at(split);
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{s}` is not a size: expected a number of bytes like 512M"))?;
    let scale: u64 = match unit.trim() {
        "" | "B" => 1,
        "K" | "KB" => 1_000,
        "M" | "MB" => 1_000_000,
        "G" | "GB" => 1_000_000_000,
        "KiB" => 1 << 10,
        "MiB" => 1 << 20,
        "GiB" => 1 << 30,
        other => {
            return Err(format!(
                "unknown size unit `{other}` (use K, M, G, KiB, MiB or GiB)"
            ));
        }
    };
    n.checked_mul(scale)
        .ok_or_else(|| format!("`{s}` is too large"))
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str], env: &[(&str, &str)]) -> Result<Args, String> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match Args::parse(argv.iter().map(|a| a.to_string()), |k| env.get(k).cloned())? {
            Command::Run(args) => Ok(*args),
            Command::Help => Err("help".into()),
            Command::Version => Err("version".into()),
        }
    }

    #[test]
    fn no_flags_give_the_documented_defaults() {
        let a = parse(&[], &[]).unwrap();
        assert_eq!(a.listen, "127.0.0.1:6632".parse().unwrap());
        assert_eq!(a.data, PathBuf::from("./queen-data/queen.redb"));
        assert!(!a.in_memory && a.jwt_require_exp);
        assert_eq!(
            (a.token_file, a.jwt_secret, a.storage_cap),
            (None, None, None)
        );
        assert_eq!((a.storage_reserve, a.cache_size), (32 << 20, 64 << 20));
        assert_eq!((a.answer_budget, a.body_budget), (512 << 20, 512 << 20));
        assert_eq!((a.checkpoint_ms, a.max_connections), (10_000, 4096));
        assert_eq!((a.header_timeout_secs, a.drain_secs), (60, 0));
        assert_eq!(a.log, "info");
        assert!(a.allow_origins.is_empty() && a.allow_hosts.is_empty());
        assert_eq!(
            (a.max_lease, a.max_wait),
            (Duration::from_secs(3600), Duration::from_secs(60))
        );
    }

    #[test]
    fn allowed_origins_and_hosts_repeat_or_come_as_comma_lists() {
        let a = parse(
            &[
                "--allow-origin",
                "http://localhost:3000, https://dash.example",
                "--allow-origin=http://127.0.0.1:8080",
                "--allow-host",
                "queen.internal",
                "--max-lease",
                "15m",
                "--max-wait=500ms",
            ],
            &[("QUEEN_ALLOW_HOST", "ignored.example")],
        )
        .unwrap();
        assert_eq!(
            a.allow_origins,
            [
                "http://localhost:3000",
                "https://dash.example",
                "http://127.0.0.1:8080"
            ]
        );
        assert_eq!(a.allow_hosts, ["queen.internal"]);
        assert_eq!(a.max_lease, Duration::from_secs(900));
        assert_eq!(a.max_wait, Duration::from_millis(500));
        let a = parse(&[], &[("QUEEN_ALLOW_HOST", "a.example,b.example")]).unwrap();
        assert_eq!(a.allow_hosts, ["a.example", "b.example"]);
        for bad in [
            &["--max-lease", "soon"][..],
            &["--max-wait", "0"],
            &["--max-wait", "3d"],
        ] {
            assert!(parse(bad, &[]).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_command_line_wins_over_the_environment_which_wins_over_the_default() {
        let env = [("QUEEN_LISTEN", "127.0.0.1:7000"), ("QUEEN_DRAIN", "5")];
        let a = parse(&["--listen=127.0.0.1:8000", "--in-memory"], &env).unwrap();
        assert_eq!(a.listen, "127.0.0.1:8000".parse().unwrap());
        assert_eq!(a.drain_secs, 5);
        assert!(a.in_memory);
        let a = parse(
            &["--jwt-require-exp", "false", "--storage-cap", "2GiB"],
            &[],
        )
        .unwrap();
        assert!(!a.jwt_require_exp);
        assert_eq!(a.storage_cap, Some(2 << 30));
    }

    #[test]
    fn a_bad_command_line_is_refused_naming_the_flag() {
        for (argv, env, says) in [
            (&["--nope"][..], &[][..], "unexpected argument `--nope`"),
            (&["listen"], &[], "unexpected argument `listen`"),
            (&["--listen"], &[], "`--listen` needs a value"),
            (&["--in-memory=yes"], &[], "`--in-memory` takes no value"),
            (
                &["--drain-secs", "1", "--drain-secs", "2"],
                &[],
                "more than once",
            ),
            (
                &["--jwt-require-exp", "maybe"],
                &[],
                "for `--jwt-require-exp`",
            ),
            (&["--cache-size", "12 parsecs"], &[], "unknown size unit"),
            (
                &[],
                &[("QUEEN_CHECKPOINT_MS", "soon")],
                "(or QUEEN_CHECKPOINT_MS)",
            ),
        ] {
            let e = parse(argv, env).err().unwrap_or_default();
            assert!(e.contains(says), "{argv:?}: {e}");
        }
        assert_eq!(
            parse(&["--data", "x", "-h"], &[]).err().as_deref(),
            Some("help")
        );
        assert_eq!(parse(&["--version"], &[]).err().as_deref(), Some("version"));
    }

    #[test]
    fn the_help_names_every_flag_with_its_environment_variable() {
        let text = help();
        for f in FLAGS {
            assert!(text.contains(&format!("--{}", f.name)), "{}", f.name);
            if let Some(env) = f.env {
                assert!(text.contains(env), "{env}");
            }
        }
        assert!(text.lines().all(|l| l.len() <= 80), "{text}");
    }

    #[test]
    fn a_jwt_secret_under_32_bytes_is_refused_without_echoing_it() {
        let e = strong_enough("hunter2").unwrap_err();
        assert!(e.contains("is 7 bytes") && e.contains("at least 32"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        assert!(strong_enough(&"k".repeat(31)).is_err());
        assert!(strong_enough(&"k".repeat(32)).is_ok());
    }

    #[test]
    fn log_filters_take_levels_and_target_directives() {
        assert!(log_filter("info").is_ok());
        assert!(log_filter("queen_mock_broker=debug,warn").is_ok());
        assert!(log_filter("a=b=c").is_err());
    }
}
