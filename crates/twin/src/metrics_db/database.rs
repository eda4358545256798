//! The metrics database's state and what it does: its options, the points of each bucket,
//! the tenant (orgs, buckets, tokens), writing line protocol, running a Flux query, checking a
//! token, and logging as InfluxDB does.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::store::{Bucket, WriteError};
use super::tenant::{self, Authorization, Tenant};
use super::{csv, flux};
use crate::clock::now_ns;
use crate::faults::Faults;
use crate::logger::{self, Level, Sink};
use opsbook_base::secret::Secret;
use opsbook_wire::flux_csv::Dialect;

/// The InfluxDB version the twin reports.
pub(crate) const VERSION: &str = "v2.7.11";
/// The commit InfluxDB reports beside its version.
pub(crate) const COMMIT: &str = "fbf5d4ab5e";

#[derive(Debug, Clone)]
/// What a metrics database starts with.
pub struct Options {
    /// The organization it serves.
    pub org: String,
    /// Buckets that exist from the start.
    pub buckets: Vec<String>,
    /// Points older than this are dropped.
    pub retention: Duration,
    /// Most points held over all buckets.
    pub max_points: usize,
    /// `engine-path` in `/api/v2/config`.
    pub engine_path: String,
    /// Address shown in `/api/v2/config` (`http-bind-address`).
    pub listen: String,
    /// `http-bind-address` as configured (`:8086`); none: `:PORT` of `listen`.
    pub http_bind_address: Option<String>,
    /// `bolt-path` in `/api/v2/config`.
    pub bolt_path: String,
    /// `reporting-disabled` in `/api/v2/config`.
    pub reporting_disabled: bool,
    /// `log-level` in `/api/v2/config`.
    pub log_level: String,
    /// Where setup is kept across restarts (`kept_setup`): the bolt path a process was given;
    /// `None` keeps it in memory only.
    pub setup_file: Option<String>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            org: "opsbook".into(),
            buckets: vec!["telegraf".into()],
            retention: Duration::from_secs(3600),
            max_points: 5_000_000,
            engine_path: "/var/lib/influxdb2/engine".into(),
            listen: "127.0.0.1:8086".into(),
            http_bind_address: None,
            bolt_path: "/var/lib/influxdb2/influxd.bolt".into(),
            reporting_disabled: true,
            log_level: "info".into(),
            setup_file: None,
        }
    }
}

/// A running metrics database's state; share it with `Arc`.
pub struct MetricsDb {
    /// What it was started with.
    pub options: Options,
    /// The faults the sandbox sets on it.
    pub faults: Arc<Faults>,
    log: Sink,
    /// Orgs, users, bucket descriptions and tokens (`tenant`); empty until onboarding.
    tenant: RwLock<Tenant>,
    /// When the server was built: `/ready`'s `started` and `up`.
    pub(super) started: std::time::SystemTime,
    /// The points of each bucket, by bucket name.
    pub(super) buckets: RwLock<BTreeMap<String, Bucket>>,
    /// When retention last ran (ns), so it runs at most once a second.
    last_evict: AtomicI64,
    writes: AtomicU64,
    queries: AtomicU64,
}

impl MetricsDb {
    /// A database already onboarded: `options.org` with `options.buckets`, and `token` as the
    /// operator token setup returns (what the twin's `--token`, `--org` and `--bucket` flags
    /// make, as if `influx setup` had run with them).
    pub fn new(options: Options, token: Secret, log: Sink) -> Arc<MetricsDb> {
        let db = MetricsDb::fresh(options, log);
        let retention = db.options.retention.as_secs();
        let (org, buckets) = (db.options.org.clone(), db.options.buckets.clone());
        let first = buckets.first().cloned().unwrap_or_else(|| "telegraf".into());
        if let Err((_, e)) = db.onboard("admin", &org, &first, retention, Some(token.expose().to_string())) {
            tracing::warn!("the metrics-db twin could not set itself up: {e}");
        }
        if let Some(org_id) = db.tenant_read().org_by_name(&org).map(|o| o.id.clone()) {
            for name in buckets.iter().skip(1) {
                let _ = db.create_bucket(&org_id, name, retention);
            }
        }
        db
    }

    /// A database as a fresh `influxd` starts: no org, bucket, user or token until
    /// `POST /api/v2/setup`.
    pub fn fresh(options: Options, log: Sink) -> Arc<MetricsDb> {
        Arc::new(MetricsDb {
            options,
            faults: Faults::new(),
            log,
            tenant: RwLock::new(Tenant::default()),
            started: std::time::SystemTime::now(),
            buckets: RwLock::new(BTreeMap::new()),
            last_evict: AtomicI64::new(0),
            writes: AtomicU64::new(0),
            queries: AtomicU64::new(0),
        })
    }

    pub(super) fn tenant_read(&self) -> std::sync::RwLockReadGuard<'_, Tenant> {
        self.tenant.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn tenant_write(&self) -> std::sync::RwLockWriteGuard<'_, Tenant> {
        self.tenant.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `POST /api/v2/setup` is still allowed (nothing set up yet).
    pub fn onboarding_allowed(&self) -> bool {
        self.tenant_read().onboarding_allowed()
    }

    /// A new user bucket in `org_id`, for its description and its points.
    pub(super) fn create_bucket(
        &self,
        org_id: &str,
        name: &str,
        retention_s: u64,
    ) -> Result<Value, (StatusCode, Value)> {
        let mut tenant = self.tenant_write();
        // InfluxDB v2.7.12 (tenant/error_bucket.go `BucketAlreadyExistsError`): code conflict, 422.
        if tenant.buckets.iter().any(|b| b.name == name) {
            return Err((
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"code": "conflict", "message": format!("bucket with name {name} already exists")}),
            ));
        }
        let mut info = tenant.add_bucket(org_id, name, retention_s);
        info.shard_group_s = Some(shard_group_for(retention_s));
        if let Some(b) = tenant.buckets.iter_mut().find(|b| b.id == info.id) {
            b.shard_group_s = info.shard_group_s;
        }
        let mut buckets = self.buckets.write().map_err(|_| internal("storage lock poisoned"))?;
        buckets.insert(name.to_string(), Bucket::new(name, info.id.clone()));
        Ok(tenant::bucket_json(&info))
    }

    /// InfluxDB's log style: `ts=… lvl=info msg=… log_id=… k=v`; lines less severe than
    /// the configured `log-level` are not written (zap's dpanic, panic and fatal leave only
    /// what the twin never logs).
    pub(super) fn log_line(&self, level: Level, msg: &str, fields: &[(&str, &str)]) {
        let least = match self.options.log_level.as_str() {
            "debug" => Level::Debug,
            "warn" => Level::Warn,
            "error" => Level::Error,
            "dpanic" | "panic" | "fatal" => return,
            _ => Level::Info,
        };
        if level <= least {
            self.log_always(level, msg, fields);
        }
    }

    /// A log line whatever the level: influxd writes its welcome line (which names the level)
    /// at info even when its level is warn.
    pub(super) fn log_always(&self, level: Level, msg: &str, fields: &[(&str, &str)]) {
        let lvl = match level {
            Level::Error => "error",
            Level::Warn => "warn",
            Level::Info => "info",
            Level::Debug => "debug",
        };
        let mut line =
            format!("ts={} lvl={lvl} msg={} log_id=0twin000000", logger::now_rfc3339(6), logger::logfmt_value(msg));
        for (k, v) in fields {
            line.push_str(&format!(" {k}={}", logger::logfmt_value(v)));
        }
        (self.log)(level, &line);
    }

    /// Points held over all buckets.
    pub fn point_count(&self) -> usize {
        self.buckets.read().map(|b| b.values().map(Bucket::point_count).sum()).unwrap_or(0)
    }

    fn evict_if_due(&self, buckets: &mut BTreeMap<String, Bucket>) {
        let now = now_ns();
        if now - self.last_evict.load(Ordering::Relaxed) < 1_000_000_000 {
            return;
        }
        self.last_evict.store(now, Ordering::Relaxed);
        let cutoff = now - self.options.retention.as_nanos() as i64;
        for b in buckets.values_mut() {
            b.evict(cutoff);
        }
    }

    /// Writes line protocol to a bucket, as `POST /api/v2/write` does.
    pub fn write_lines(&self, bucket: &str, precision: &str, text: &str) -> Result<usize, (StatusCode, Value)> {
        let multiplier: i64 = match precision {
            "" | "ns" => 1,
            "us" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            other => {
                return Err(invalid(&format!("invalid precision \"{other}\": must be one of ns, us, ms or s")));
            }
        };
        let mut points = opsbook_wire::line_protocol::parse(text).map_err(|e| {
            let line = text.lines().nth(e.line.saturating_sub(1)).unwrap_or("");
            (
                StatusCode::BAD_REQUEST,
                json!({"code": "invalid",
                    "message": format!("unable to parse '{}': {} (column {})", line, e.message, e.column)}),
            )
        })?;
        // Points without a time get the server's, truncated to the precision, as InfluxDB does.
        let now = now_ns() / multiplier * multiplier;
        for p in &mut points {
            p.timestamp = Some(p.timestamp.map_or(now, |t| t.saturating_mul(multiplier)));
        }
        let mut buckets = self.buckets.write().map_err(|_| internal("storage lock poisoned"))?;
        self.evict_if_due(&mut buckets);
        let held: usize = buckets.values().map(Bucket::point_count).sum();
        let Some(b) = buckets.get_mut(bucket) else {
            return Err((
                StatusCode::NOT_FOUND,
                json!({"code": "not found", "message": format!("bucket \"{bucket}\" not found")}),
            ));
        };
        let room = self.options.max_points.saturating_sub(held) + b.point_count();
        match b.write(points, room) {
            Ok(n) => {
                self.writes.fetch_add(1, Ordering::Relaxed);
                Ok(n)
            }
            Err(WriteError::TypeConflict { field, measurement, input, existing, dropped }) => Err((
                StatusCode::UNPROCESSABLE_ENTITY,
                json!({"code": "unprocessable entity", "message": format!(
                    "failure writing points to database: partial write: field type conflict: input field \"{field}\" on measurement \"{measurement}\" is type {input}, already exists as type {existing} dropped={dropped}"
                )}),
            )),
            Err(WriteError::Full { max }) => Err((
                StatusCode::PAYLOAD_TOO_LARGE,
                json!({"code": "request too large", "message": format!(
                    "the twin holds at most {max} points; older points leave with the retention window"
                )}),
            )),
        }
    }

    /// Runs a Flux query and encodes the CSV answer.
    pub fn query(&self, src: &str, dialect: &Dialect) -> Result<String, (StatusCode, Value)> {
        self.queries.fetch_add(1, Ordering::Relaxed);
        let program = flux::compile(src, now_ns()).map_err(|m| invalid(&m))?;
        let mut buckets = self.buckets.write().map_err(|_| internal("storage lock poisoned"))?;
        self.evict_if_due(&mut buckets);
        drop(buckets);
        let buckets = self.buckets.read().map_err(|_| internal("storage lock poisoned"))?;
        for name in program.buckets() {
            if !buckets.contains_key(name) {
                return Err((
                    StatusCode::NOT_FOUND,
                    json!({"code": "not found", "message": format!(
                        "failed to initialize execute state: could not find bucket \"{name}\""
                    )}),
                ));
            }
        }
        let results = flux::run(&program, &|name| buckets.get(name)).map_err(|m| invalid(&m))?;
        csv::encode(&results, dialect).map_err(|m| invalid(&m))
    }

    /// The authorization an `Authorization` header value carries, when its token is known.
    /// With the `all-access-token` fault, a token setup made is demoted to all-access (its
    /// permissions scoped to its org), as a token made with `influx auth create --all-access`.
    pub(super) fn authorize(&self, authorization: Option<&str>) -> Option<Authorization> {
        if self.faults.refuses_token() {
            return None;
        }
        let value = authorization?;
        let given = value.strip_prefix("Token ").or_else(|| value.strip_prefix("Bearer ")).unwrap_or("");
        let mut auth = self.tenant_read().find_token(given.trim())?.clone();
        if self.faults.all_access_token() && auth.is_operator() {
            auth.permissions = tenant::Permission::everything(Some(&auth.org_id));
        }
        Some(auth)
    }
}

/// The shard-group duration InfluxDB gives a bucket of this retention (`meta`'s
/// `normalisedShardDuration`): 1 h under 2 days, 1 day under 6 months, else 7 days.
fn shard_group_for(retention_s: u64) -> u64 {
    match retention_s {
        0 => 604_800,
        r if r < 2 * 86_400 => 3_600,
        r if r < 180 * 86_400 => 86_400,
        _ => 604_800,
    }
}

pub(crate) fn invalid(message: &str) -> (StatusCode, Value) {
    (StatusCode::BAD_REQUEST, json!({"code": "invalid", "message": message}))
}

pub(crate) fn internal(message: &str) -> (StatusCode, Value) {
    (StatusCode::INTERNAL_SERVER_ERROR, json!({"code": "internal error", "message": message}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db() -> Arc<MetricsDb> {
        MetricsDb::new(Options::default(), Secret::new("s3cret"), logger::discard())
    }

    #[test]
    fn write_then_query_with_precision_and_errors() {
        let db = db();
        let now_s = now_ns() / 1_000_000_000;
        db.write_lines(
            "telegraf",
            "s",
            &format!("cpu,cpu=cpu-total usage_system=5 {now_s}\ncpu,cpu=cpu-total usage_system=7"),
        )
        .unwrap();
        let csv = db.query(r#"from(bucket:"telegraf")|>range(start:-1m)|>max()"#, &Dialect::default()).unwrap();
        assert!(csv.contains(",7,usage_system,cpu,cpu-total\r\n"), "{csv}");
        assert_eq!(
            db.write_lines("telegraf", "ns", "cpu usage=").unwrap_err(),
            (
                StatusCode::BAD_REQUEST,
                serde_json::json!({"code": "invalid", "message": "unable to parse 'cpu usage=': expected a field value (column 11)"})
            )
        );
        assert_eq!(
            db.write_lines("nope", "ns", "m f=1").unwrap_err(),
            (StatusCode::NOT_FOUND, serde_json::json!({"code": "not found", "message": "bucket \"nope\" not found"}))
        );
        assert_eq!(
            db.write_lines("telegraf", "ns", "cpu,cpu=cpu-total usage_system=5i").unwrap_err(),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                serde_json::json!({
                    "code": "unprocessable entity",
                    "message": "failure writing points to database: partial write: field type conflict: input field \
                                \"usage_system\" on measurement \"cpu\" is type integer, already exists as type float \
                                dropped=1"
                })
            )
        );
        assert_eq!(
            db.query("from(bucket:\"x\")|>range(start:-1m)", &Dialect::default()).unwrap_err(),
            (
                StatusCode::NOT_FOUND,
                serde_json::json!({
                    "code": "not found",
                    "message": "failed to initialize execute state: could not find bucket \"x\""
                })
            )
        );
        assert_eq!(
            db.query("from(bucket:\"telegraf\")|>range(start:-1m)|>sort()", &Dialect::default()).unwrap_err(),
            (
                StatusCode::BAD_REQUEST,
                serde_json::json!({
                    "code": "invalid",
                    "message": "error at @1:44: unsupported by the twin: function sort() (supported: from, range, \
                                filter, count, sum, mean, max, min, first, last, limit, group, yield)"
                })
            )
        );
    }
}
