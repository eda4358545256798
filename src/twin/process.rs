//! `opsbook twin SERVICE`: one twin as a process, in the foreground until SIGINT/SIGTERM,
//! logging to stdout (so under systemd its lines land in the journal). The command line of
//! each service is here; each service is then started the one way every twin starts — its
//! state built from options, then its `serve` (or the agent's `run`) with a shutdown future,
//! here the stop signals, in the sandbox a `Shutdown` handle (`crate::sandbox::components`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::{agent, log_store, logger, metrics_db, shipper, stop_signal};
use crate::error::Error;

/// `opsbook twin SERVICE …`
#[derive(Debug, Args)]
pub struct TwinArgs {
    #[command(subcommand)]
    pub service: Service,
}

#[derive(Debug, Subcommand)]
pub enum Service {
    /// The metrics database: InfluxDB 2 API on 127.0.0.1:8086, data in memory.
    ///
    /// Serves /health, /ping, /api/v2/buckets, /api/v2/write, /api/v2/query (a Flux subset:
    /// from, range, filter, count, max, min, mean, sum, last, first, limit, group, yield) and
    /// /api/v2/config. Every /api/v2 call needs `Authorization: Token …`; errors are
    /// InfluxDB's `{"code","message"}`, a query with no rows a lone CRLF.
    MetricsDb(MetricsDbArgs),
    /// The log store: Loki 3.4 API on 127.0.0.1:3100, logs in memory.
    ///
    /// Serves /ready (503 during the start delay), /metrics, /config, /loki/api/v1/push (JSON,
    /// gzip, protobuf+snappy), query_range, query, labels, label values, series, with Loki's
    /// empty answers (a label list with nothing in it has no `data`). Logs what Loki 3.4.6
    /// logs, its errors included: `empty ring` while starting, `context canceled` when a
    /// query's limit is met and while stopping.
    LogStore(LogStoreArgs),
    /// The metrics agent: samples cpu, mem and disk of this host every interval and writes line
    /// protocol to the metrics database (a Telegraf-style TOML config). SIGHUP reloads.
    #[command(after_long_help = agent::config::EXAMPLE)]
    MetricsAgent(AgentArgs),
    /// The log shipper: follows the journal and pushes to the log store (a TOML config), with
    /// /metrics, /-/ready and /-/reload on 127.0.0.1:12345. SIGHUP reloads.
    #[command(after_long_help = shipper::config::EXAMPLE)]
    LogShipper(ShipperArgs),
}

#[derive(Debug, Args)]
pub struct MetricsDbArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8086", value_name = "ADDR")]
    pub listen: String,
    /// The API token clients must send (never logged).
    #[arg(long, env = "INFLUX_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The organisation.
    #[arg(long, env = "INFLUX_ORG", default_value = "opsbook")]
    pub org: String,
    /// Buckets to create (repeatable).
    #[arg(long = "bucket", default_values_t = vec!["telegraf".to_string()])]
    pub buckets: Vec<String>,
    /// Points older than this are dropped (memory stays bounded).
    #[arg(long, default_value = "1h", value_parser = duration)]
    pub retention: Duration,
    /// Most points held; writes beyond get InfluxDB's 413-like refusal.
    #[arg(long, default_value_t = 5_000_000)]
    pub max_points: usize,
    /// `engine-path` reported by /api/v2/config.
    #[arg(long, default_value = "/var/lib/influxdb2/engine")]
    pub engine_path: String,
}

#[derive(Debug, Args)]
pub struct LogStoreArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:3100", value_name = "ADDR")]
    pub listen: String,
    /// How long /ready answers 503 after start, as Loki's ingester does.
    #[arg(long, default_value = "15s", value_parser = duration)]
    pub ready_delay: Duration,
    /// Entries older than this are dropped.
    #[arg(long, default_value = "24h", value_parser = duration)]
    pub retention: Duration,
    /// Storage backend named in /config (`filesystem`, `s3`, `gcs`, `azure`, …).
    #[arg(long, default_value = "filesystem")]
    pub object_store: String,
    /// A stream's chunk is cut at this many bytes (Loki's chunk_target_size).
    #[arg(long, default_value_t = 1_572_864)]
    pub chunk_target_size: usize,
    /// Bytes of log lines held at most; pushes beyond get 429.
    #[arg(long, default_value_t = 512 << 20)]
    pub max_bytes: usize,
}

#[derive(Debug, Args)]
pub struct AgentArgs {
    /// Config file (a Telegraf TOML subset; the example below).
    #[arg(value_name = "CONFIG")]
    pub config: PathBuf,
    /// Gather once, print each metric as `> ` + line protocol, and exit without writing.
    #[arg(long)]
    pub test: bool,
    /// Gather and write once, then exit.
    #[arg(long, conflicts_with = "test")]
    pub once: bool,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ShipperArgs {
    #[command(subcommand)]
    pub action: Option<ShipperAction>,
    /// Config file (TOML, the example below); without one, the defaults shown there.
    #[arg(value_name = "CONFIG")]
    pub config: Option<PathBuf>,
    /// Address of /metrics, /-/ready and /-/reload (overrides the config's `server.listen`).
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum ShipperAction {
    /// Check a config file like `alloy validate`: exit 0, or diagnostics (file:line:col), exit 1.
    Validate {
        #[arg(value_name = "CONFIG")]
        config: PathBuf,
    },
}

fn duration(text: &str) -> Result<Duration, String> {
    crate::config::parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration (e.g. 15s, 1h)"))
}

/// Runs one twin in the foreground until SIGINT/SIGTERM; returns the exit status.
pub fn run(args: TwinArgs) -> Result<u8, Error> {
    if let Service::LogShipper(ShipperArgs { action: Some(ShipperAction::Validate { config }), .. }) = &args.service {
        return Ok(shipper::validate_command(config));
    }
    if let Service::MetricsAgent(a) = &args.service
        && a.test
    {
        return agent::test_command(&a.config);
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|source| Error::Io { context: "cannot start the async runtime".into(), source })?;
    let code = runtime.block_on(async move {
        match args.service {
            Service::MetricsDb(a) => run_metrics_db(a).await,
            Service::LogStore(a) => run_log_store(a).await,
            Service::MetricsAgent(a) => agent::run_command(&a.config, a.once, stop_signal()).await,
            Service::LogShipper(a) => {
                shipper::run_command(a.config.as_deref(), a.listen.as_deref(), stop_signal()).await
            }
        }
    });
    // Dropping the runtime would wait for every blocking task, a read of a journal follower
    // included: stopped means stopped (the service manager would kill us after its timeout).
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}

async fn bind(addr: &str) -> Result<tokio::net::TcpListener, Error> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Io { context: format!("cannot listen on `{addr}`"), source })
}

async fn run_log_store(a: LogStoreArgs) -> Result<u8, Error> {
    let listener = bind(&a.listen).await?;
    let options = log_store::Options {
        ready_delay: a.ready_delay,
        retention: a.retention,
        object_store: a.object_store,
        chunk_target_bytes: a.chunk_target_size,
        max_bytes: a.max_bytes,
        listen: listener.local_addr().map(|x| x.to_string()).unwrap_or(a.listen),
        ..log_store::Options::default()
    };
    let store = log_store::LogStore::new(options, logger::stdout());
    super::serve(store, Some(listener), stop_signal())
        .await
        .map_err(|source| Error::Io { context: "log store server failed".into(), source })?;
    Ok(0)
}

async fn run_metrics_db(a: MetricsDbArgs) -> Result<u8, Error> {
    let token = a.token.filter(|t| !t.trim().is_empty()).ok_or_else(|| {
        Error::Usage("the metrics-db twin needs an API token: pass `--token` or set INFLUX_TOKEN".into())
    })?;
    let listener = bind(&a.listen).await?;
    let options = metrics_db::Options {
        org: a.org,
        buckets: a.buckets,
        retention: a.retention,
        max_points: a.max_points,
        engine_path: a.engine_path,
        listen: listener.local_addr().map(|x| x.to_string()).unwrap_or(a.listen),
    };
    let db = metrics_db::MetricsDb::new(options, crate::secret::Secret::new(token), logger::stdout());
    super::serve(db, Some(listener), stop_signal())
        .await
        .map_err(|source| Error::Io { context: "metrics database server failed".into(), source })?;
    Ok(0)
}
