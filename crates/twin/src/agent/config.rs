//! The metrics-agent twin's config: a subset of Telegraf's TOML, so a real `telegraf.conf`
//! for this stack reads the same:
//!
//! ```toml
//! [global_tags]                  # optional tags on every metric
//!   role = "client"
//! [agent]
//!   interval = "10s"             # gather (and write) every interval
//!   hostname = ""                # "" = this machine's name; omit_hostname = true drops the tag
//!   metric_buffer_limit = 10000  # metrics kept while the output fails; beyond, dropped
//!   metric_batch_size = 1000     # metrics per write
//!   debug = false                # D! lines (e.g. "Wrote batch of N metrics in …")
//!   quiet = false                # errors only
//!   logformat = "text"           # or "structured" (JSON lines)
//!   logfile = ""                 # a file instead of stdout (the journal)
//! [[outputs.influxdb_v2]]
//!   urls = ["http://127.0.0.1:8086"]
//!   token = "$INFLUX_TOKEN"      # $VAR / ${VAR} come from the environment
//!   organization = "opsbook"
//!   bucket = "telegraf"
//!   timeout = "5s"
//!   content_encoding = "gzip"    # or "identity"
//! [[inputs.cpu]]
//!   percpu = true
//!   totalcpu = true
//! [[inputs.mem]]
//! [[inputs.disk]]
//!   ignore_fs = ["tmpfs", "devtmpfs", "overlay"]
//! [[inputs.system]]              # load, n_cpus, users, uptime
//! ```
//!
//! Unknown sections, plugins and keys are errors at their `file:line:col`, as are values of
//! the wrong type; all problems of a file are reported together.

use std::time::Duration;

use super::log::{LogFormat, LogSettings};
use super::sampler::{CpuInput, DiskInput, Inputs};
use crate::toml_check::{self, Checker};
use opsbook_base::Diagnostic;
use opsbook_base::secret::Secret;

/// A complete config, shown by `opsbook twin metrics-agent --help` (and tested to load).
pub const EXAMPLE: &str = r#"# Config file: a subset of Telegraf's TOML.
[global_tags]                  # optional tags on every metric
  role = "client"
[agent]
  interval = "10s"             # gather and write every interval
  hostname = ""                # "" = this machine's name
[[outputs.influxdb_v2]]
  urls = ["http://127.0.0.1:8086"]
  token = "$INFLUX_TOKEN"      # $VAR and ${VAR} come from the environment
  organization = "opsbook"
  bucket = "telegraf"
  timeout = "5s"
  content_encoding = "gzip"    # or "identity"
[[inputs.cpu]]
  percpu = true
  totalcpu = true
[[inputs.mem]]
[[inputs.disk]]
  ignore_fs = ["tmpfs", "devtmpfs", "overlay", "squashfs"]
"#;

/// One `[[outputs.influxdb_v2]]`.
#[derive(Debug, Clone)]
pub struct Output {
    /// `urls`: the metrics databases written to.
    pub urls: Vec<String>,
    /// `token`: the API token sent with each write.
    pub token: Secret,
    /// `organization`: the org written to.
    pub organization: String,
    /// `bucket`: the bucket written to.
    pub bucket: String,
    /// `timeout`: how long one write may take.
    pub timeout: Duration,
    /// `content_encoding = "gzip"`: writes are gzipped.
    pub gzip: bool,
}

#[derive(Debug, Clone)]
/// A Telegraf-style config as the agent twin runs it: the `[agent]` table, its outputs and inputs.
pub struct AgentConfig {
    /// `interval`: how often inputs are sampled.
    pub interval: Duration,
    /// `flush_interval`: how often the buffer is written out.
    pub flush_interval: Duration,
    /// The `host` tag (empty with `omit_hostname`).
    pub hostname: String,
    /// `[global_tags]`: tags added to every metric.
    pub global_tags: Vec<(String, String)>,
    /// The `[[outputs.influxdb_v2]]` tables.
    pub outputs: Vec<Output>,
    /// The inputs sampled.
    pub inputs: Inputs,
    /// `metric_buffer_limit`: metrics held for the output at most (Telegraf's default 10000).
    pub buffer_limit: usize,
    /// `metric_batch_size`: metrics per write (default 1000).
    pub batch_size: usize,
    /// `debug`, `quiet`, `logfile`, `logformat`.
    pub log: LogSettings,
}

impl AgentConfig {
    /// Tags on every metric: `host` (unless omitted) and the global tags.
    pub fn tags(&self) -> Vec<(String, String)> {
        let mut t = self.global_tags.clone();
        if !self.hostname.is_empty() {
            t.push(("host".into(), self.hostname.clone()));
        }
        t.sort();
        t
    }

    /// Names of the loaded inputs, as Telegraf's "Loaded inputs:" line lists them.
    pub(crate) fn input_names(&self) -> Vec<&'static str> {
        let mut n = Vec::new();
        if self.inputs.cpu.is_some() {
            n.push("cpu");
        }
        if self.inputs.disk.is_some() {
            n.push("disk");
        }
        if self.inputs.mem {
            n.push("mem");
        }
        if self.inputs.system {
            n.push("system");
        }
        n
    }
}

/// Reads and checks a config file.
pub fn load(path: &std::path::Path) -> Result<AgentConfig, Vec<Diagnostic>> {
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(path)
        .map_err(|e| vec![Diagnostic::at(format!("cannot read the agent config: {e}"), &shown, None, 0, 0)])?;
    parse(&shown, &text)
}

/// Checks a config text; every problem is a located diagnostic.
pub fn parse(file: &str, text: &str) -> Result<AgentConfig, Vec<Diagnostic>> {
    let doc = toml_check::parse(file, text).map_err(|d| vec![d])?;
    let root = doc.get_ref();
    let mut c = Checker::new(file, text);
    c.only(root, &["global_tags", "agent", "outputs", "inputs", "processors", "aggregators"], "the top level");

    let mut global_tags = Vec::new();
    if let Some((t, _)) = c.table(root, "global_tags") {
        for (k, v, span) in c.string_map(t) {
            if !opsbook_wire::loki::valid_label_name(&k) {
                c.error(span, format!("tag name `{k}` is not valid"));
            }
            global_tags.push((k, toml_check::expand_env(&v)));
        }
    }
    let agent = agent_section(&mut c, root);
    let outputs = outputs_section(&mut c, root);
    let inputs = inputs_section(&mut c, root);
    for (section, span) in
        [("processors", Checker::span_of(root, "processors")), ("aggregators", Checker::span_of(root, "aggregators"))]
    {
        if let Some(span) = span {
            c.error(span, format!("[{section}] are not supported by the twin agent"));
        }
    }
    if inputs.cpu.is_none() && !inputs.mem && inputs.disk.is_none() && !inputs.system && c.errors.is_empty() {
        c.error(0..0, "no inputs configured: add [[inputs.cpu]], [[inputs.mem]], [[inputs.disk]] or [[inputs.system]]");
    }
    if outputs.is_empty() && c.errors.is_empty() {
        c.error(0..0, "no outputs configured: add [[outputs.influxdb_v2]]");
    }
    if !c.errors.is_empty() {
        return Err(c.errors);
    }
    let hostname = if agent.omit_hostname {
        String::new()
    } else if agent.hostname.is_empty() {
        opsbook_world::this_machine()
    } else {
        agent.hostname
    };
    Ok(AgentConfig {
        interval: agent.interval,
        flush_interval: agent.flush_interval.unwrap_or(agent.interval),
        hostname,
        global_tags,
        outputs,
        inputs,
        buffer_limit: agent.buffer_limit,
        batch_size: agent.batch_size,
        log: agent.log,
    })
}

/// What `[agent]` says.
struct AgentSection {
    interval: Duration,
    flush_interval: Option<Duration>,
    hostname: String,
    omit_hostname: bool,
    buffer_limit: usize,
    batch_size: usize,
    log: LogSettings,
}

const AGENT_KEYS: [&str; 15] = [
    "interval",
    "round_interval",
    "metric_batch_size",
    "metric_buffer_limit",
    "collection_jitter",
    "flush_interval",
    "flush_jitter",
    "precision",
    "hostname",
    "omit_hostname",
    "debug",
    "quiet",
    "logfile",
    "logformat",
    "log_with_timezone",
];

fn agent_section<'a>(c: &mut Checker<'a>, root: &toml::de::DeTable<'a>) -> AgentSection {
    let mut a = AgentSection {
        interval: Duration::from_secs(10),
        flush_interval: None,
        hostname: String::new(),
        omit_hostname: false,
        buffer_limit: 10_000,
        batch_size: 1000,
        log: LogSettings::default(),
    };
    let Some((agent, _)) = c.table(root, "agent") else { return a };
    c.only(agent, &AGENT_KEYS, "[agent]");
    if let Some(d) = c.duration(agent, "interval") {
        if d.is_zero() {
            let span = Checker::span_of(agent, "interval").unwrap_or(0..0);
            c.error(span, "`interval` must be longer than zero");
        } else {
            a.interval = d;
        }
    }
    a.flush_interval = c.duration(agent, "flush_interval");
    c.bool(agent, "round_interval");
    c.string(agent, "log_with_timezone");
    a.log.debug = c.bool(agent, "debug").unwrap_or(false);
    a.log.quiet = c.bool(agent, "quiet").unwrap_or(false);
    a.log.logfile = c.string(agent, "logfile").filter(|f| !f.is_empty()).map(|f| toml_check::expand_env(&f).into());
    match c.string(agent, "logformat").as_deref() {
        None | Some("text") => {}
        Some("structured") => a.log.format = LogFormat::Structured,
        // Telegraf v1.32.0 (logger/logger.go `SetupLogging`).
        Some(other) => {
            let span = Checker::span_of(agent, "logformat").unwrap_or(0..0);
            c.error(span, format!("unsupported log-format: {other}"));
        }
    }
    for key in ["collection_jitter", "flush_jitter", "precision"] {
        if Checker::span_of(agent, key).is_some() {
            c.duration(agent, key);
        }
    }
    a.batch_size = c.int(agent, "metric_batch_size", 1).map_or(a.batch_size, |n| n as usize);
    a.buffer_limit = c.int(agent, "metric_buffer_limit", 1).map_or(a.buffer_limit, |n| n as usize);
    a.hostname = c.string(agent, "hostname").map(|h| toml_check::expand_env(&h)).unwrap_or_default();
    a.omit_hostname = c.bool(agent, "omit_hostname").unwrap_or(false);
    a
}

fn outputs_section<'a>(c: &mut Checker<'a>, root: &toml::de::DeTable<'a>) -> Vec<Output> {
    let mut outputs = Vec::new();
    let Some((outs, _)) = c.table(root, "outputs") else { return outputs };
    c.only(outs, &["influxdb_v2"], "[outputs] (the twin writes with influxdb_v2 only)");
    for (o, span) in c.tables(outs, "influxdb_v2") {
        c.only(
            o,
            &["urls", "token", "organization", "bucket", "timeout", "content_encoding", "user_agent", "bucket_tag"],
            "[[outputs.influxdb_v2]]",
        );
        let urls: Vec<String> = c
            .strings(o, "urls")
            .unwrap_or_else(|| vec!["http://localhost:8086".into()])
            .iter()
            .map(|u| toml_check::expand_env(u))
            .collect();
        for u in &urls {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                let at = Checker::span_of(o, "urls").unwrap_or(span.clone());
                c.error(at, format!("`{u}` is not an http:// or https:// address"));
            }
        }
        let token = toml_check::expand_env(&c.string(o, "token").unwrap_or_default());
        let organization = toml_check::expand_env(&c.string(o, "organization").unwrap_or_default());
        let bucket = toml_check::expand_env(&c.string(o, "bucket").unwrap_or_default());
        if bucket.is_empty() {
            c.error(span.clone(), "[[outputs.influxdb_v2]] needs a `bucket`");
        }
        let timeout = c.duration(o, "timeout").unwrap_or(Duration::from_secs(5));
        let gzip = match c.string(o, "content_encoding").as_deref() {
            None | Some("gzip") => true,
            Some("identity") => false,
            Some(other) => {
                let at = Checker::span_of(o, "content_encoding").unwrap_or(span.clone());
                c.error(at, format!("content_encoding `{other}` is not one of gzip, identity"));
                false
            }
        };
        c.string(o, "user_agent");
        c.string(o, "bucket_tag");
        outputs.push(Output { urls, token: Secret::new(token), organization, bucket, timeout, gzip });
    }
    outputs
}

fn inputs_section<'a>(c: &mut Checker<'a>, root: &toml::de::DeTable<'a>) -> Inputs {
    let mut inputs = Inputs { cpu: None, mem: false, disk: None, system: false };
    let Some((ins, _)) = c.table(root, "inputs") else { return inputs };
    c.only(ins, &["cpu", "mem", "disk", "system"], "[inputs] (the twin gathers cpu, mem, disk and system)");
    if let Some((cpu, _)) = c.tables(ins, "cpu").first() {
        c.only(cpu, &["percpu", "totalcpu", "collect_cpu_time", "report_active", "core_tags"], "[[inputs.cpu]]");
        let d = CpuInput::default();
        inputs.cpu = Some(CpuInput {
            percpu: c.bool(cpu, "percpu").unwrap_or(d.percpu),
            totalcpu: c.bool(cpu, "totalcpu").unwrap_or(d.totalcpu),
            collect_cpu_time: c.bool(cpu, "collect_cpu_time").unwrap_or(d.collect_cpu_time),
            report_active: c.bool(cpu, "report_active").unwrap_or(d.report_active),
        });
        c.bool(cpu, "core_tags");
    }
    if let Some((mem, _)) = c.tables(ins, "mem").first() {
        c.only(mem, &[], "[[inputs.mem]]");
        inputs.mem = true;
    }
    if let Some((system, _)) = c.tables(ins, "system").first() {
        c.only(system, &[], "[[inputs.system]]");
        inputs.system = true;
    }
    if let Some((disk, _)) = c.tables(ins, "disk").first() {
        c.only(disk, &["mount_points", "ignore_fs", "ignore_mount_opts"], "[[inputs.disk]]");
        let d = DiskInput::default();
        inputs.disk = Some(DiskInput {
            mount_points: c.strings(disk, "mount_points").unwrap_or(d.mount_points),
            ignore_fs: c.strings(disk, "ignore_fs").unwrap_or(d.ignore_fs),
        });
        c.strings(disk, "ignore_mount_opts");
    }
    inputs
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
[global_tags]
  role = "client"
[agent]
  interval = "2s"
  hostname = "h1"
  round_interval = true
[[outputs.influxdb_v2]]
  urls = ["http://127.0.0.1:8086"]
  token = "${OPSBOOK_AGENT_TEST_TOKEN}"
  organization = "opsbook"
  bucket = "telegraf"
[[inputs.cpu]]
  percpu = false
[[inputs.mem]]
[[inputs.disk]]
  mount_points = ["/"]
"#;

    #[test]
    fn a_telegraf_style_file_reads() {
        // SAFETY: test-local variable name, no other thread reads it.
        unsafe { std::env::set_var("OPSBOOK_AGENT_TEST_TOKEN", "tok") };
        let c = parse("telegraf.conf", GOOD).unwrap();
        assert_eq!(c.interval, Duration::from_secs(2));
        assert_eq!(c.tags(), vec![("host".to_string(), "h1".to_string()), ("role".into(), "client".into())]);
        assert_eq!(c.outputs[0].token.expose(), "tok");
        assert!(c.outputs[0].gzip);
        assert_eq!(c.inputs.cpu.as_ref().map(|c| c.percpu), Some(false));
        assert_eq!(c.input_names(), vec!["cpu", "disk", "mem"]);
    }

    #[test]
    fn the_documented_example_loads() {
        let c = parse("example.conf", EXAMPLE).unwrap();
        assert_eq!(c.input_names(), vec!["cpu", "disk", "mem"]);
    }

    #[test]
    fn problems_are_located_and_all_reported() {
        let bad = "[agent]\n  interval = 10\n  intervall = \"1s\"\n[[outputs.influxdb_v2]]\n  urls = [\"localhost:8086\"]\n[[inputs.cpu]]\n  percpu = \"yes\"\n[[inputs.nginx]]\n";
        let errors = parse("t.conf", bad).unwrap_err();
        let text: Vec<String> = errors.iter().map(|d| format!("{}:{}: {}", d.line, d.column, d.message)).collect();
        assert!(
            text.iter().any(|t| t.starts_with("3:3: unknown key `intervall`") && t.contains("did you mean `interval`")),
            "{text:?}"
        );
        assert!(text.iter().any(|t| t.starts_with("5:10:") && t.contains("not an http")), "{text:?}");
        assert!(text.iter().any(|t| t.contains("needs a `bucket`")), "{text:?}");
        assert!(
            text.iter().any(|t| t.starts_with("7:12:") && t.contains("`percpu` must be true or false")),
            "{text:?}"
        );
        assert!(text.iter().any(|t| t.contains("unknown key `nginx`")), "{text:?}");
        assert!(parse("t.conf", "[agent\n").unwrap_err()[0].message.contains("invalid TOML"));
        assert!(parse("t.conf", "[agent]\n").unwrap_err()[0].message.contains("no inputs"));
    }
}
