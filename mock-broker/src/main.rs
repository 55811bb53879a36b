//! `queen-mock-broker`: the reference Queen broker as a standalone server.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use queen_mock_broker::auth::Auth;
use queen_mock_broker::{MockBroker, StartError};
use tracing_subscriber::EnvFilter;

/// Every request allocates on one tokio worker and frees on another or on the writer
/// thread; glibc's malloc spent a quarter of the CPU on that under load (perf,
/// ack-push at 64 clients), mimalloc a fraction of it.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// A durable, single-node Queen broker on an embedded redb file.
///
/// Speaks the Queen 2 HTTP API (push, pop, ack, leases, consumer groups, dead letters)
/// so that workers and the official clients can run against it unchanged.
#[derive(Debug, Parser)]
#[command(name = "queen-mock-broker", version, about, long_about)]
struct Args {
    /// Address to listen on.
    #[arg(long, env = "QUEEN_LISTEN", default_value = "127.0.0.1:6632")]
    listen: SocketAddr,

    /// The redb file holding all data (created, with its folder, if missing); its
    /// write-ahead log is `<data>.wal` beside it, part of the database.
    #[arg(long, env = "QUEEN_DATA", default_value = "./queen-data/queen.redb")]
    data: PathBuf,

    /// Keep everything in memory and lose it on exit (ignores --data).
    #[arg(long)]
    in_memory: bool,

    /// Turn authentication on with this token file: a JSON object mapping each bearer
    /// token to {"role": "read-only|read-write|admin", "tenant": "...", "sub": "..."}.
    #[arg(long, env = "QUEEN_TOKEN_FILE")]
    token_file: Option<PathBuf>,

    /// Turn authentication on and accept HS256 JWTs signed with this secret (claims
    /// role or roles, tenant, sub, exp).
    #[arg(long, env = "QUEEN_JWT_SECRET", hide_env_values = true)]
    jwt_secret: Option<String>,

    /// The tenant of a JWT that carries no `tenant` claim. Unset (the default), such a
    /// token is refused with 401: a credential joins a tenant only by saying so, or by
    /// the operator's choice here. A `tenant` that is not a string is refused either way.
    #[arg(long, env = "QUEEN_JWT_DEFAULT_TENANT")]
    jwt_default_tenant: Option<String>,

    /// Refuse JWTs without an `exp` claim (401), so every token expires: `true` or
    /// `false`. On by default; it applies only with --jwt-secret.
    #[arg(long, env = "QUEEN_JWT_REQUIRE_EXP", default_value_t = true, action = clap::ArgAction::Set)]
    jwt_require_exp: bool,

    /// Cap on stored data, in bytes of keys and values (suffixes K, M, G and KiB,
    /// MiB, GiB accepted). At the cap, pushes, KV writes and timers answer 507
    /// `storage_full`; reads, pops, acks and deletes go on. No cap by default.
    #[arg(long, env = "QUEEN_STORAGE_CAP", value_parser = parse_size)]
    storage_cap: Option<u64>,

    /// Disk held back for a full disk (suffixes as for --storage-cap), as a file beside
    /// the data file: when the disk fills, it is given back so pops, acks and deletes
    /// go on while writes that add data answer 507; 0 turns it off.
    #[arg(long, env = "QUEEN_STORAGE_RESERVE", value_parser = parse_size, default_value = "32MiB")]
    storage_reserve: u64,

    /// Most bytes of database pages kept in memory (suffixes as for --storage-cap): the
    /// bound on the broker's resident memory whatever it stores.
    #[arg(long, env = "QUEEN_CACHE_SIZE", value_parser = parse_size, default_value = "64MiB")]
    cache_size: u64,

    /// Longest time, in milliseconds, between checkpoints: durable commits of the data
    /// file that make the write-ahead log's records part of it (every write is durable
    /// in the log first). Rarer ones stall writes less often but for longer; 0 makes one
    /// after every group of writes.
    #[arg(long, env = "QUEEN_CHECKPOINT_MS", default_value_t = 10_000)]
    checkpoint_ms: u64,

    /// Most connections served at once; more wait in the kernel's backlog.
    #[arg(long, env = "QUEEN_MAX_CONNECTIONS", default_value_t = 4096)]
    max_connections: usize,

    /// Seconds a client may take to send a request's head (or to start its next
    /// request on a kept-alive connection) before the connection is closed.
    #[arg(long, env = "QUEEN_HEADER_TIMEOUT", default_value_t = 60)]
    header_timeout_secs: u64,

    /// Seconds to keep answering 503 `retry` after SIGTERM or Ctrl-C before closing
    /// the port, so load balancers and clients move away first.
    #[arg(long, env = "QUEEN_DRAIN", default_value_t = 0)]
    drain_secs: u64,

    /// Log filter, such as `info` or `queen_mock_broker=debug` (RUST_LOG also works).
    #[arg(long, env = "QUEEN_LOG", default_value = "info")]
    log: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let filter = EnvFilter::try_from_env("RUST_LOG").unwrap_or_else(|_| EnvFilter::new(&args.log));
    tracing_subscriber::fmt().with_env_filter(filter).init();

    let mut builder = MockBroker::builder()
        // A server, not a test: no fault table or request log on the request path.
        .harness(false)
        .listen(args.listen)
        .max_connections(args.max_connections)
        .header_read_timeout(Duration::from_secs(args.header_timeout_secs))
        .drain_period(Duration::from_secs(args.drain_secs));
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
            Some(path) => Auth::from_token_file(path)?,
            None => Auth::new(),
        };
        if let Some(secret) = &args.jwt_secret {
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
            std::process::exit(2);
        }
    };
    println!("queen-mock-broker listening on {}", broker.url());

    shutdown_signal().await;
    tracing::info!("shutting down: finishing in-flight requests and commits");
    broker.shutdown().await;
    tracing::info!("stopped");
    Ok(())
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
