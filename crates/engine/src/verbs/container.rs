//! `container::` — the server containers through the runtime (Podman): list, inspect, logs,
//! stats, top, and what the host's runtime can do (`runtime`: its version, whether it has
//! Quadlet, whether the cgroup layout needs runc). `restart` works but warns: the service
//! manager is the right way, so the container's unit knows about it.

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::values::record;
use crate::register;
use opsbook_base::config::keys;
use opsbook_base::report::Level;
use opsbook_world::Invocation;
use opsbook_world::units::full_name;
use opsbook_world::{Container, parse_podman_version as parse_version};

/// Podman makes units from Quadlet files (`NAME.container`) from this version on.
const QUADLET_SINCE: (u64, u64, u64) = (4, 4, 0);

/// The `container::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    read_verbs(&mut m);
    log_and_change_verbs(&mut m);
    m
}

fn read_verbs(m: &mut Module) {
    register!(
        m,
        "list",
        Reads,
        ["all: bool", "Array"],
        "/// Containers (`all`: also stopped ones): `[#{name, id, image, state, status, running}]`.",
        "container::list(true)",
        |call: NativeCallContext, all: bool| list(&context(&call), all)
    );
    register!(
        m,
        "inspect",
        Reads,
        ["name: &str", "Map"],
        "/// `podman inspect` of one container, as a map.",
        "container::inspect(container::of_unit(config.metrics_db.unit) ?? \"influxdb\")",
        |call: NativeCallContext, name: &str| -> VerbResult<Map> {
            let h = context(&call);
            let c = h.world().containers.clone();
            let n = name.to_string();
            let v = h.block_on(|| async move { c.inspect(&n).await })?.map_err(fail)?;
            let d: Dynamic = rhai::serde::to_dynamic(v)?;
            d.try_cast::<Map>().ok_or_else(|| fail("podman inspect did not describe a container"))
        }
    );
    register!(
        m,
        "of_unit",
        Reads,
        ["unit: &str", "?"],
        "/// The name of the container the unit runs, or `()` when none: the container podman\n\
         /// labelled with the unit (`PODMAN_SYSTEMD_UNIT`, which podman records when a unit starts\n\
         /// it), else the `--name` of the `podman run` in the unit's command line, else one named\n\
         /// as Quadlet names it (`systemd-NAME`) or as the unit (`NAME`).",
        "container::of_unit(\"influxdb.service\")",
        |call: NativeCallContext, unit: &str| -> VerbResult<Dynamic> {
            let h = context(&call);
            let c = h.world().containers.clone();
            let found = h.block_on(|| async move { c.list(true).await })?.map_err(fail)?;
            let units = h.world().units.clone();
            let full = full_name(unit);
            let command = h.block_on(|| async move { units.status(&full).await })?.map(|s| s.exec_start);
            Ok(of_unit(&found, unit, &command.unwrap_or_default()).map_or(Dynamic::UNIT, Dynamic::from))
        }
    );
    register!(
        m,
        "runtime",
        Reads,
        ["Map"],
        "/// What the host's container runtime (`container.runtime`) can do: `#{program, version,\n\
         /// major, minor, patch, quadlet, hybrid_cgroups, runc}` — `quadlet`: podman 4.4 or later;\n\
         /// `hybrid_cgroups`: cgroup v1 controllers beside a v2 hierarchy, which crun refuses;\n\
         /// `runc`: runc is installed. Only reads, so it runs under `--dry-run` too. Throws when the\n\
         /// runtime is missing or prints no version.",
        "container::runtime()",
        |call: NativeCallContext| runtime(&context(&call))
    );
    register!(
        m,
        "logs",
        Reads,
        ["name: &str", "Array"],
        "/// The container's last 100 log lines.",
        "container::logs(\"influxdb\")",
        |call: NativeCallContext, name: &str| { logs(&context(&call), name, &Map::new()) }
    );
}

fn log_and_change_verbs(m: &mut Module) {
    register!(
        m,
        "logs",
        Reads,
        ["name: &str", "options: Map", "Array"],
        "/// Log lines with options `#{tail: 100, since: \"10m\"}`.",
        "container::logs(\"influxdb\", #{ tail: 20, since: \"10m\" })",
        |call: NativeCallContext, name: &str, options: Map| logs(&context(&call), name, &options)
    );
    register!(
        m,
        "stats",
        Reads,
        ["name: &str", "Map"],
        "/// Resource use: `#{name, cpu_percent, mem_usage, mem_percent, net_io, block_io, pids}`.",
        "container::stats(\"influxdb\")",
        |call: NativeCallContext, name: &str| -> VerbResult<Map> {
            let h = context(&call);
            let c = h.world().containers.clone();
            let n = name.to_string();
            let s = h.block_on(|| async move { c.stats(&n).await })?.map_err(fail)?;
            record(&StatsRecord {
                name: &s.name,
                cpu_percent: &s.cpu_percent,
                mem_usage: &s.mem_usage,
                mem_percent: &s.mem_percent,
                net_io: &s.net_io,
                block_io: &s.block_io,
                pids: &s.pids,
            })
        }
    );
    register!(
        m,
        "top",
        Reads,
        ["name: &str", "Array"],
        "/// The container's processes: `[#{USER, PID, …, COMMAND}]` as `podman top` names them.",
        "container::top(\"influxdb\")",
        |call: NativeCallContext, name: &str| -> VerbResult<Array> {
            let h = context(&call);
            let c = h.world().containers.clone();
            let n = name.to_string();
            let rows = h.block_on(|| async move { c.top(&n).await })?.map_err(fail)?;
            Ok(rows
                .into_iter()
                .map(|r| Dynamic::from_map(r.into_iter().map(|(k, v)| (k.into(), v.into())).collect()))
                .collect())
        }
    );
    register!(
        m,
        "restart",
        Changes,
        ["name: &str", "()"],
        "/// Restarts the container directly — discouraged: prefer `unit::restart` on its unit so\n\
         /// the service manager stays in charge. Logs a warning saying so.",
        "container::restart(\"influxdb\")",
        |call: NativeCallContext, name: &str| -> VerbResult<()> {
            let h = context(&call);
            h.log(Level::Warn, &format!("restarting container `{name}` directly; the service manager is the right way (unit::restart on its unit)"));
            if h.plan(&format!("restart container {name}")) {
                return Ok(());
            }
            let c = h.world().containers.clone();
            let n = name.to_string();
            h.block_on(|| async move { c.restart(&n).await })?.map_err(fail)
        }
    );
}

/// One container as scripts see it.
#[derive(Serialize)]
struct ContainerRecord<'a> {
    name: &'a str,
    id: &'a str,
    image: &'a str,
    state: &'a str,
    status: &'a str,
    running: bool,
}

/// Resource use as scripts see it: podman's own texts.
#[derive(Serialize)]
struct StatsRecord<'a> {
    name: &'a str,
    cpu_percent: &'a str,
    mem_usage: &'a str,
    mem_percent: &'a str,
    net_io: &'a str,
    block_io: &'a str,
    pids: &'a str,
}

fn container_record(c: &Container) -> VerbResult<Dynamic> {
    record(&ContainerRecord {
        name: &c.name,
        id: &c.id,
        image: &c.image,
        state: &c.state,
        status: &c.status,
        running: c.state == "running",
    })
    .map(Dynamic::from_map)
}

/// What a host's container runtime can do, as scripts see it.
#[derive(Serialize)]
struct RuntimeRecord<'a> {
    program: &'a str,
    version: String,
    major: i64,
    minor: i64,
    patch: i64,
    quadlet: bool,
    hybrid_cgroups: bool,
    runc: bool,
}

/// Whether podman of this version makes units from Quadlet files.
fn has_quadlet(version: (u64, u64, u64)) -> bool {
    version >= QUADLET_SINCE
}

fn runtime(cx: &Context) -> VerbResult<Map> {
    let config = cx.config();
    let program = config.text(keys::CONTAINER_RUNTIME);
    let timeout = config.duration(keys::TOOLS_TIMEOUT);
    // Reads only: they run under --dry-run as well, so a rehearsal chooses as the real run will.
    let run = |argv: &[&str]| {
        let argv = argv.iter().map(|a| a.to_string()).collect();
        cx.run_command(Invocation { argv, timeout, ..Invocation::default() })
    };
    let done = run(&[&program, "--version"])?.map_err(|e| {
        fail(format!("the container runtime `{program}` cannot run on this host: {e} (apt-get install podman, or set container.runtime)"))
    })?;
    let said = format!("{}{}", done.stdout, done.stderr);
    let version = parse_version(&done.stdout).filter(|_| done.code == Some(0)).ok_or_else(|| {
        fail(format!("`{program} --version` printed no version: {:?} (is container.runtime podman?)", said.trim()))
    })?;
    // crun refuses a hybrid layout (v1 controllers, a v2 hierarchy at /sys/fs/cgroup/unified).
    let hybrid_cgroups = run(&["stat", "-f", "-c", "%T", "/sys/fs/cgroup/unified"])?
        .is_ok_and(|d| d.code == Some(0) && d.stdout.trim() == "cgroup2fs");
    let runc = run(&["sh", "-c", "command -v runc"])?.is_ok_and(|d| d.code == Some(0));
    let (major, minor, patch) = version;
    record(&RuntimeRecord {
        program: &program,
        version: format!("{major}.{minor}.{patch}"),
        major: major as i64,
        minor: minor as i64,
        patch: patch as i64,
        quadlet: has_quadlet(version),
        hybrid_cgroups,
        runc,
    })
}

/// The container `unit` runs, among `found`.
fn of_unit(found: &[Container], unit: &str, command: &[String]) -> Option<String> {
    let unit = full_name(unit);
    let stem = unit.strip_suffix(".service").unwrap_or(&unit);
    let labelled = found.iter().find(|c| c.labels.get("PODMAN_SYSTEMD_UNIT") == Some(&unit));
    let started = || name_in_command(command).and_then(|n| found.iter().find(|c| c.name == n));
    let named = || {
        let quadlet = format!("systemd-{stem}");
        found.iter().find(|c| c.name == quadlet).or_else(|| found.iter().find(|c| c.name == stem))
    };
    labelled.or_else(started).or_else(named).map(|c| c.name.clone())
}

/// The container name a `podman run … --name NAME …` (or `--name=NAME`) command line gives.
fn name_in_command(argv: &[String]) -> Option<&str> {
    argv.iter().enumerate().find_map(|(i, a)| match a.strip_prefix("--name") {
        Some("") => argv.get(i + 1).map(String::as_str),
        Some(rest) => rest.strip_prefix('='),
        None => None,
    })
}

fn list(cx: &Context, all: bool) -> VerbResult<Array> {
    let c = cx.world().containers.clone();
    let found = cx.block_on(|| async move { c.list(all).await })?.map_err(fail)?;
    found.iter().map(container_record).collect()
}

fn logs(cx: &Context, name: &str, options: &Map) -> VerbResult<Array> {
    let mut tail = 100usize;
    let mut since = None;
    for (k, v) in options {
        match k.as_str() {
            "tail" => {
                let n = v.as_int().map_err(|_| fail("container::logs: `tail` must be an integer"))?;
                if n < 0 {
                    return Err(fail(format!("container::logs: `tail` is {n}: how many lines, zero or more")));
                }
                tail = n as usize
            }
            "since" => since = Some(super::values::text(v)),
            other => return Err(fail(format!("container::logs: unknown option `{other}` (tail, since)"))),
        }
    }
    let c = cx.world().containers.clone();
    let n = name.to_string();
    let lines = cx.block_on(|| async move { c.logs(&n, tail, since.as_deref()).await })?.map_err(fail)?;
    Ok(lines.into_iter().map(Dynamic::from).collect())
}

#[cfg(test)]
mod tests {
    use super::{has_quadlet, of_unit};
    use opsbook_world::{Container, parse_podman_version as parse_version};

    #[test]
    fn quadlet_from_podman_4_4_on() {
        let quadlet = |text: &str| has_quadlet(parse_version(text).unwrap());
        assert!(!quadlet("podman version 4.3.1"));
        assert!(!quadlet("podman version 3.4.4"));
        assert!(quadlet("podman version 4.4.0"));
        assert!(quadlet("podman version 4.9.3"));
        assert!(quadlet("podman version 5.0.0"));
        assert!(quadlet("podman version 5.4.2-dev"));
    }

    fn container(name: &str, unit: Option<&str>) -> Container {
        let labels = unit.map(|u| [("PODMAN_SYSTEMD_UNIT".to_string(), u.to_string())].into()).unwrap_or_default();
        Container { name: name.into(), labels, ..Container::default() }
    }

    #[test]
    fn the_unit_label_wins_then_the_command_line_then_names() {
        let none: &[String] = &[];
        let found = [container("loki", None), container("logs", Some("loki.service")), container("db", None)];
        assert_eq!(of_unit(&found, "loki", none).as_deref(), Some("logs"));
        assert_eq!(of_unit(&found, "loki.service", none).as_deref(), Some("logs"));
        let quadlet = [container("loki", None), container("systemd-loki", None)];
        assert_eq!(of_unit(&quadlet, "loki.service", none).as_deref(), Some("systemd-loki"));
        assert_eq!(of_unit(&[container("loki", None)], "loki", none).as_deref(), Some("loki"));
        // Not `service`, the last piece of `loki.service` split from the right.
        assert_eq!(of_unit(&[container("service", None)], "loki.service", none), None);
        // A unit that runs `podman run --replace --name NAME …` (before podman labels it).
        let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let started = [container("loki", None), container("logstore", None)];
        for command in [
            argv(&["/usr/bin/podman", "run", "--replace", "--name", "logstore", "grafana/loki"]),
            argv(&["/usr/bin/podman", "run", "--name=logstore", "grafana/loki"]),
        ] {
            assert_eq!(of_unit(&started, "loki.service", &command).as_deref(), Some("logstore"));
        }
    }
}
