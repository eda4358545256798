//! `opsbook twin SERVICE`: one twin as a process, in the foreground until SIGINT/SIGTERM,
//! logging to stdout (so under systemd its lines land in the journal). The command line of
//! each service is here; each service is then started the one way every twin starts — its
//! state built from options, then its `serve` (or the agent's `run`) with a shutdown future,
//! here the stop signals, in the sandbox a `Shutdown` handle (`opsbook-sandbox`'s `components.rs`).

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};

use super::logger::Level;
use super::{agent, log_store, logger, metrics_db, shipper};
use crate::running::{serve, stop_signal};
use opsbook_base::Error;

// `opsbook twin SERVICE …` (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
#[allow(missing_docs)]
#[derive(Debug, Args)]
pub struct TwinArgs {
    #[command(subcommand)]
    /// Which component to stand in for.
    pub service: Service,
}

// The components a twin stands in for, each with its real program's command line
// (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
#[allow(missing_docs)]
#[derive(Debug, Subcommand)]
pub enum Service {
    /// The metrics database: InfluxDB 2 API on 127.0.0.1:8086, data in memory.
    ///
    /// Takes influxd's `--http-bind-address`, `--bolt-path` and `--engine-path`, and reads
    /// influxd's config file from $INFLUXD_CONFIG_PATH (TOML: those keys, `reporting-disabled`,
    /// `log-level`); flags win over the file.
    ///
    /// Without `--token` it starts as a fresh influxd: not set up until `POST /api/v2/setup`.
    ///
    /// Serves /health, /ping, /ready, /api/v2/setup, /api/v2/buckets (paged), /api/v2/orgs,
    /// /api/v2/authorizations, /api/v2/write, /api/v2/query (a Flux subset: from, range,
    /// filter, count, max, min, mean, sum, last, first, limit, group, yield) and
    /// /api/v2/config (operator tokens only). Every /api/v2 call but setup needs
    /// `Authorization: Token …`; errors are InfluxDB's `{"code","message"}`, a query with no
    /// rows a lone CRLF.
    MetricsDb(MetricsDbArgs),
    /// The log store: Loki 3.4 API on 127.0.0.1:3100, logs in memory.
    ///
    /// Takes Loki's command line too: `-config.file=PATH` reads Loki's YAML config (listen
    /// address and port, schema, retention, log level; strict about unknown keys, as Loki),
    /// `-verify-config` checks it and exits.
    ///
    /// Serves /ready (503 during the start delay), /metrics, /config, /loki/api/v1/push (JSON,
    /// gzip, protobuf+snappy), query_range, query, labels, label values, series, with Loki's
    /// empty answers (a label list with nothing in it has no `data`). Logs what Loki 3.4.6
    /// logs, its errors included: `empty ring` while starting, `context canceled` when a
    /// query's limit is met and while stopping.
    LogStore(LogStoreArgs),
    /// The metrics agent: samples cpu, mem and disk of this host every interval and writes line
    /// protocol to the metrics database (a Telegraf-style TOML config, given as `--config PATH`
    /// as to Telegraf, or as the argument). SIGHUP reloads.
    #[command(after_long_help = agent::config::EXAMPLE)]
    MetricsAgent(AgentArgs),
    /// The log shipper: follows the journal and pushes to the log store (a TOML config, or
    /// Alloy's syntax in a `.alloy` file: `run CONFIG.alloy` and `validate CONFIG.alloy` as
    /// with Alloy), with /metrics, /-/ready and /-/reload on 127.0.0.1:12345. SIGHUP reloads.
    #[command(after_long_help = shipper::config::EXAMPLE)]
    LogShipper(ShipperArgs),
}

#[derive(Debug, Args)]
pub struct MetricsDbArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8086", value_name = "ADDR")]
    pub listen: String,
    /// Start already onboarded, with this operator token (never logged), the org and the
    /// buckets below, as if `influx setup` had run. Without it the database starts as a fresh
    /// influxd: nothing set up until `POST /api/v2/setup`.
    #[arg(long, env = "INFLUX_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
    /// The organisation (with --token).
    #[arg(long, env = "INFLUX_ORG", default_value = "opsbook")]
    pub org: String,
    /// Buckets to create (repeatable; with --token).
    #[arg(long = "bucket", default_values_t = vec!["telegraf".to_string()])]
    pub buckets: Vec<String>,
    /// Points older than this are dropped (memory stays bounded).
    #[arg(long, default_value = "1h", value_parser = duration)]
    pub retention: Duration,
    /// Most points held; writes beyond get InfluxDB's 413-like refusal.
    #[arg(long, default_value_t = 5_000_000)]
    pub max_points: usize,
    /// `engine-path` reported by /api/v2/config (default /var/lib/influxdb2/engine).
    #[arg(long, value_name = "PATH")]
    pub engine_path: Option<String>,
    /// influxd's listen address (`:8086` is every interface); overrides `--listen`.
    #[arg(long, value_name = "ADDR")]
    pub(crate) http_bind_address: Option<String>,
    /// `bolt-path` reported by /api/v2/config (default /var/lib/influxdb2/influxd.bolt).
    #[arg(long, value_name = "PATH")]
    pub(crate) bolt_path: Option<String>,
    /// influxd's log level: debug, info, warn, error, dpanic, panic, fatal (any case).
    #[arg(long, value_name = "LEVEL")]
    pub(crate) log_level: Option<String>,
}

#[derive(Debug, Args)]
pub struct LogStoreArgs {
    /// Address to listen on (with --config.file, the file's `server` address and port instead).
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
    pub(crate) max_bytes: usize,
    /// Loki's YAML config file; its listen address, port and schema replace the flags'.
    #[arg(long = "config.file", value_name = "PATH")]
    pub(crate) config_file: Option<PathBuf>,
    /// Check the config file, print whether it is valid and exit (0 valid, 1 not).
    #[arg(long = "verify-config", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub(crate) verify_config: Option<bool>,
    /// Expand ${VAR} in the config file from the environment.
    #[arg(long = "config.expand-env", num_args = 0..=1, require_equals = true, default_missing_value = "true")]
    pub(crate) config_expand_env: Option<bool>,
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
    /// Telegraf's directory of further `.conf` files (its packaged unit passes
    /// /etc/telegraf/telegraf.d). The twin reads one file: a `.conf` file there is refused.
    #[arg(long = "config-directory", value_name = "DIR")]
    pub config_directory: Option<PathBuf>,
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
    /// Run with a config file, as `alloy run` does (`.alloy`: Alloy's syntax; else TOML).
    Run {
        /// Config file: `.alloy` in Alloy's syntax, else the twin's TOML.
        #[arg(value_name = "CONFIG")]
        config: PathBuf,
        /// Address of /metrics, /-/ready and /-/reload.
        #[arg(long = "server.http.listen-addr", value_name = "ADDR", default_value = super::shipper::DEFAULT_LISTEN)]
        listen: String,
        /// Directory for the shipper's data (created if missing): each journal source's
        /// `positions.yml` is kept under it.
        #[arg(long = "storage.path", value_name = "DIR", default_value = "data-alloy/")]
        storage_path: PathBuf,
        /// Accepted as Alloy accepts it; the twin reports nothing anywhere.
        #[arg(long = "disable-reporting")]
        disable_reporting: bool,
        /// Accepted as Alloy accepts it; the twin's components are all generally available.
        #[arg(long = "stability.level", value_name = "LEVEL", default_value = "generally-available",
              value_parser = ["experimental", "public-preview", "generally-available"])]
        stability_level: String,
    },
}

fn duration(text: &str) -> Result<Duration, String> {
    opsbook_base::config::parse_duration(text).ok_or_else(|| format!("`{text}` is not a duration (e.g. 15s, 1h)"))
}

/// Runs one twin in the foreground until SIGINT/SIGTERM; returns the exit status.
pub fn run(args: TwinArgs) -> Result<u8, Error> {
    if let Service::LogShipper(ShipperArgs { action: Some(ShipperAction::Validate { config }), .. }) = &args.service {
        return Ok(shipper::validate_command(config));
    }
    if let Service::MetricsAgent(AgentArgs { config_directory: Some(dir), .. }) = &args.service
        && let Some(extra) = conf_files(dir).first()
    {
        eprintln!(
            "E! the metrics-agent twin reads one configuration file; {} in {} would be read by Telegraf",
            extra,
            dir.display()
        );
        return Ok(1);
    }
    if let Service::MetricsAgent(a) = &args.service
        && a.test
    {
        return agent::test_command(&a.config);
    }
    if let Service::LogStore(a) = &args.service
        && a.verify_config == Some(true)
    {
        return Ok(match loki_config(a) {
            Ok(_) => {
                eprintln!("{}", loki_line("info", "main.go:87", &[("msg", "config is valid")]));
                0
            }
            Err(code) => code,
        });
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
            Service::LogShipper(ShipperArgs {
                action: Some(ShipperAction::Run { config, listen, storage_path, .. }),
                ..
            }) => {
                std::fs::create_dir_all(&storage_path).map_err(|source| Error::Io {
                    context: format!("cannot create the storage path `{}`", storage_path.display()),
                    source,
                })?;
                shipper::run_command(Some(&config), Some(&listen), Some(&storage_path), stop_signal()).await
            }
            Service::LogShipper(a) => {
                shipper::run_command(a.config.as_deref(), a.listen.as_deref(), None, stop_signal()).await
            }
        }
    });
    // Dropping the runtime would wait for every blocking task, a read of a journal follower
    // included: stopped means stopped (the service manager would kill us after its timeout).
    runtime.shutdown_timeout(Duration::from_secs(2));
    code
}

/// The `.conf` files in Telegraf's configuration directory (none when it is missing).
fn conf_files(dir: &std::path::Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".conf"))
        .collect();
    names.sort();
    names
}

async fn bind(addr: &str) -> Result<tokio::net::TcpListener, Error> {
    tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|source| Error::Io { context: format!("cannot listen on `{addr}`"), source })
}

/// One line in Loki's logfmt: `level=… ts=… caller=… k=v…`.
fn loki_line(level: &str, caller: &str, fields: &[(&str, &str)]) -> String {
    let mut line = format!("level={level} ts={} caller={caller}", logger::now_rfc3339(9));
    for (k, v) in fields {
        line.push_str(&format!(" {k}={}", logger::logfmt_value(v)));
    }
    line
}

/// Loki's config file from `-config.file`, loaded and validated as Loki does before it
/// starts; `None` without one. A failure is reported as Loki reports it: the exit status.
fn loki_config(a: &LogStoreArgs) -> Result<Option<log_store::loki_file::LokiFile>, u8> {
    let Some(path) = &a.config_file else { return Ok(None) };
    let shown = path.display().to_string();
    let expand = a.config_expand_env == Some(true);
    let parsed = match std::fs::read_to_string(path) {
        Ok(text) => {
            let text = if expand { super::toml_check::expand_env(&text) } else { text };
            log_store::loki_file::parse(&shown, &text, expand)
        }
        Err(_) => Err(format!("{shown} does not exist, set config.file for custom config path")),
    };
    let file = parsed.map_err(|e| {
        eprintln!("failed parsing config: {e}");
        1u8
    })?;
    log_store::loki_file::validate(&file).map_err(|e| {
        eprintln!("{}", loki_line("error", "main.go:70", &[("msg", "validating config"), ("err", &e)]));
        1u8
    })?;
    Ok(Some(file))
}

async fn run_log_store(a: LogStoreArgs) -> Result<u8, Error> {
    let file = match loki_config(&a) {
        Ok(f) => f,
        Err(code) => return Ok(code),
    };
    let mut options = log_store::Options {
        ready_delay: a.ready_delay,
        retention: a.retention,
        chunk_target_bytes: a.chunk_target_size,
        max_bytes: a.max_bytes,
        ..log_store::Options::default()
    };
    let mut log = logger::stdout();
    let listen = match file {
        Some(f) => {
            let host = if f.http_listen_address.is_empty() { "0.0.0.0" } else { f.http_listen_address.as_str() };
            let listen = format!("{host}:{}", f.http_listen_port);
            if !f.retention_period.is_zero() {
                options.retention = f.retention_period;
            }
            // Loki's `server.log_level`: lines less severe are not written.
            let least = match f.log_level.as_str() {
                "error" => Level::Error,
                "warn" => Level::Warn,
                "debug" => Level::Debug,
                _ => Level::Info,
            };
            let inner = log;
            log = std::sync::Arc::new(move |level, line| {
                if level <= least {
                    inner(level, line)
                }
            });
            options.file = f;
            listen
        }
        None => {
            options.file.periods[0].object_store = a.object_store;
            a.listen
        }
    };
    let listener = bind(&listen).await?;
    options.listen = listener.local_addr().map(|x| x.to_string()).unwrap_or(listen);
    let store = log_store::LogStore::new(options, log);
    // Ready once a stop would be taken as one (its last lines logged).
    let stop = stop_signal();
    super::notify::ready();
    serve(store, Some(listener), stop)
        .await
        .map_err(|source| Error::Io { context: "log store server failed".into(), source })?;
    Ok(0)
}

/// influxd's log level: the flag (an error when zap refuses it), else `INFLUXD_LOG_LEVEL`, else
/// the file (both ignored when zap refuses them), else info.
fn influxd_log_level(flag: Option<&str>, file: Option<String>) -> Result<String, String> {
    use metrics_db::influxd_config::{log_level_flag_error, zap_level};
    if let Some(text) = flag {
        return zap_level(text).map(str::to_string).ok_or_else(|| log_level_flag_error(text));
    }
    let env = std::env::var("INFLUXD_LOG_LEVEL").ok().and_then(|l| zap_level(&l)).map(str::to_string);
    Ok(env.or(file).unwrap_or_else(|| "info".into()))
}

async fn run_metrics_db(a: MetricsDbArgs) -> Result<u8, Error> {
    let file = metrics_db::influxd_config::from_env().map_err(Error::Usage)?.unwrap_or_default();
    let log_level = match influxd_log_level(a.log_level.as_deref(), file.log_level.clone()) {
        Ok(l) => l,
        Err(line) => {
            eprintln!("{line}");
            return Ok(1);
        }
    };
    let defaults = metrics_db::Options::default();
    // As influxd: a flag wins over the config file.
    let bind_address = a.http_bind_address.or(file.http_bind_address);
    let listen = bind_address.as_deref().map_or(a.listen, metrics_db::influxd_config::socket_address);
    let listener = bind(&listen).await?;
    let bolt_path = a.bolt_path.or(file.bolt_path);
    let options = metrics_db::Options {
        org: a.org,
        buckets: a.buckets,
        retention: a.retention,
        max_points: a.max_points,
        engine_path: a.engine_path.or(file.engine_path).unwrap_or(defaults.engine_path),
        listen: listener.local_addr().map(|x| x.to_string()).unwrap_or(listen),
        http_bind_address: bind_address,
        bolt_path: bolt_path.clone().unwrap_or(defaults.bolt_path),
        reporting_disabled: file.reporting_disabled.unwrap_or(defaults.reporting_disabled),
        log_level,
        // A bolt path given keeps the setup across restarts, as influxd's bolt file does.
        setup_file: bolt_path.clone(),
    };
    let db = match a.token.filter(|t| !t.trim().is_empty()) {
        Some(token) => metrics_db::MetricsDb::new(options, opsbook_base::secret::Secret::new(token), logger::stdout()),
        None => metrics_db::MetricsDb::fresh(options, logger::stdout()),
    };
    if let Some(path) = &bolt_path
        && db.onboarding_allowed()
    {
        db.restore_setup(path);
    }
    // Ready once a stop would be taken as one (its last lines logged).
    let stop = stop_signal();
    super::notify::ready();
    serve(db, Some(listener), stop)
        .await
        .map_err(|source| Error::Io { context: "metrics database server failed".into(), source })?;
    Ok(0)
}
