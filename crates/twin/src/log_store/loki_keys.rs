//! The keys of a Loki 3.4 config file, section by section, with the kind of value each
//! holds and the name of the Go type that holds them (Loki's errors name it: `field X not
//! found in type server.Config`). Sections the twin reads are listed key by key; the others
//! are `Any`: Loki knows them, the twin takes whatever they hold.

/// The kind of value Loki's Go type holds at a key.
pub(super) enum Ty {
    Str,
    Int,
    Bool,
    /// Prometheus' `model.Duration` (`744h`, `31d`).
    Duration,
    /// A date as `schema_config` takes it (`2024-01-01`).
    Day,
    /// A schema version (`v13`).
    Schema,
    Struct(&'static str, &'static [(&'static str, Ty)]),
    Seq(&'static Ty),
    /// Loki knows this key; the twin takes whatever it holds.
    Any,
}

use Ty::*;

const SERVER: &[(&str, Ty)] = &[
    ("http_listen_network", Str),
    ("http_listen_address", Str),
    ("http_listen_port", Int),
    ("http_listen_conn_limit", Int),
    ("grpc_listen_network", Str),
    ("grpc_listen_address", Str),
    ("grpc_listen_port", Int),
    ("grpc_listen_conn_limit", Int),
    ("register_instrumentation", Bool),
    ("graceful_shutdown_timeout", Any),
    ("http_server_read_timeout", Any),
    ("http_server_write_timeout", Any),
    ("http_server_idle_timeout", Any),
    ("grpc_server_max_recv_msg_size", Int),
    ("grpc_server_max_send_msg_size", Int),
    ("grpc_server_max_concurrent_streams", Int),
    ("log_format", Str),
    ("log_level", Str),
    ("log_source_ips_enabled", Bool),
    ("log_request_headers", Bool),
    ("log_request_at_info_level_enabled", Bool),
    ("http_path_prefix", Str),
];
const FILESYSTEM: &[(&str, Ty)] = &[("chunks_directory", Str), ("rules_directory", Str)];
const STORAGE: &[(&str, Ty)] = &[
    ("s3", Any),
    ("gcs", Any),
    ("azure", Any),
    ("alibabacloud", Any),
    ("bos", Any),
    ("swift", Any),
    ("filesystem", Struct("common.FilesystemConfig", FILESYSTEM)),
    ("hedging", Any),
    ("cos", Any),
    ("congestion_control", Any),
    ("object_store", Any),
];
const KV: &[(&str, Ty)] = &[("store", Str), ("prefix", Str), ("consul", Any), ("etcd", Any), ("multi", Any)];
const RING: &[(&str, Ty)] = &[
    ("kvstore", Struct("kv.Config", KV)),
    ("heartbeat_period", Any),
    ("heartbeat_timeout", Any),
    ("tokens_file_path", Str),
    ("zone_awareness_enabled", Bool),
    ("num_tokens", Int),
    ("replication_factor", Int),
    ("instance_id", Str),
    ("instance_interface_names", Any),
    ("instance_port", Int),
    ("instance_addr", Str),
    ("instance_availability_zone", Str),
    ("instance_enable_ipv6", Bool),
];
const COMMON: &[(&str, Ty)] = &[
    ("path_prefix", Str),
    ("storage", Struct("common.Storage", STORAGE)),
    ("persist_tokens", Bool),
    ("replication_factor", Int),
    ("ring", Struct("ring.RingConfig", RING)),
    ("instance_interface_names", Any),
    ("instance_enable_ipv6", Bool),
    ("instance_addr", Str),
    ("compactor_address", Str),
    ("compactor_grpc_address", Str),
];
/// `IndexPeriodicTableConfig` reads its keys through an anonymous struct; Go names it so.
const INDEX_TYPE: &str = "struct { PathPrefix string \"yaml:\\\"path_prefix\\\"\"; Prefix string \
                          \"yaml:\\\"prefix\\\"\"; Period model.Duration \"yaml:\\\"period\\\"\"; Tags config.Tags \
                          \"yaml:\\\"tags\\\"\" }";
const INDEX: &[(&str, Ty)] = &[("path_prefix", Str), ("prefix", Str), ("period", Duration), ("tags", Any)];
const PERIOD: &[(&str, Ty)] = &[
    ("from", Day),
    ("store", Str),
    ("object_store", Str),
    ("schema", Schema),
    ("index", Struct(INDEX_TYPE, INDEX)),
    ("chunks", Any),
    ("row_shards", Int),
];
const SCHEMA_CONFIG: &[(&str, Ty)] = &[("configs", Seq(&Struct("config.plain", PERIOD)))];
const LIMITS: &[(&str, Ty)] = &[
    ("retention_period", Duration),
    ("retention_stream", Any),
    ("reject_old_samples", Bool),
    ("reject_old_samples_max_age", Duration),
    ("creation_grace_period", Duration),
    ("max_line_size", Any),
    ("max_line_size_truncate", Bool),
    ("ingestion_rate_strategy", Str),
    ("ingestion_rate_mb", Any),
    ("ingestion_burst_size_mb", Any),
    ("max_label_name_length", Int),
    ("max_label_value_length", Int),
    ("max_label_names_per_series", Int),
    ("max_streams_per_user", Int),
    ("max_global_streams_per_user", Int),
    ("unordered_writes", Bool),
    ("per_stream_rate_limit", Any),
    ("per_stream_rate_limit_burst", Any),
    ("max_entries_limit_per_query", Int),
    ("max_query_length", Duration),
    ("max_query_lookback", Duration),
    ("max_query_parallelism", Int),
    ("max_query_series", Int),
    ("max_cache_freshness_per_query", Duration),
    ("split_queries_by_interval", Duration),
    ("query_timeout", Duration),
    ("volume_enabled", Bool),
    ("allow_structured_metadata", Bool),
    ("discover_service_name", Any),
    ("discover_log_levels", Bool),
    ("deletion_mode", Str),
    ("shard_streams", Any),
    ("otlp_config", Any),
];
const ANALYTICS: &[(&str, Ty)] = &[("reporting_enabled", Bool), ("leader_election", Any), ("usage_stats_url", Str)];
/// Loki's top-level keys; those the twin has nothing to configure from take any content.
pub(super) const TOP: &[(&str, Ty)] = &[
    ("target", Any),
    ("auth_enabled", Bool),
    ("http_prefix", Str),
    ("ballast_bytes", Int),
    ("server", Struct("server.Config", SERVER)),
    ("internal_server", Any),
    ("distributor", Any),
    ("querier", Any),
    ("query_scheduler", Any),
    ("frontend", Any),
    ("query_range", Any),
    ("ruler", Any),
    ("ruler_storage", Any),
    ("ingester_client", Any),
    ("ingester", Any),
    ("block_builder", Any),
    ("block_scheduler", Any),
    ("pattern_ingester", Any),
    ("index_gateway", Any),
    ("bloom_build", Any),
    ("bloom_gateway", Any),
    ("storage_config", Any),
    ("chunk_store_config", Any),
    ("schema_config", Struct("config.SchemaConfig", SCHEMA_CONFIG)),
    ("compactor", Any),
    ("compactor_client", Any),
    ("compactor_grpc_client", Any),
    ("limits_config", Struct("validation.plain", LIMITS)),
    ("frontend_worker", Any),
    ("table_manager", Any),
    ("memberlist", Any),
    ("kafka_config", Any),
    ("dataobj_explorer", Any),
    ("runtime_config", Any),
    ("operational_config", Any),
    ("tracing", Any),
    ("analytics", Struct("analytics.Config", ANALYTICS)),
    ("profiling", Any),
    ("legacy_read_target", Bool),
    ("common", Struct("common.Config", COMMON)),
    ("shutdown_delay", Any),
    ("metrics_namespace", Str),
];
