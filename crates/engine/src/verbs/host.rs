//! `host::` — the host acted on: run a command, load its CPUs, check TCP reach, network
//! interfaces and WireGuard tunnels (wireguard.rs), the host name. Commands go through the `Commands` world seam.

use std::time::{Duration, Instant};

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};

use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::time::duration_arg;
use super::values::{Probe, record};
use crate::register;
use opsbook_base::config::keys;
use opsbook_world::Reach;
use opsbook_world::{Completed, Invocation};

/// The `host::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "exec",
        Changes,
        ["argv: Array", "Map"],
        "/// Runs a command (argv array, no shell) and returns `#{ok, code, stdout, stderr, duration,\n\
         /// timed_out}`; `ok` is exit status 0. Times out after `host.exec_timeout` (60 s), killing\n\
         /// the whole process group. Throws when the command cannot start.",
        "host::exec([\"uname\", \"-r\"])",
        |call: NativeCallContext, argv: Array| exec(&context(&call), &argv, &Map::new())
    );
    register!(
        &mut m,
        "exec",
        Changes,
        ["argv: Array", "options: Map", "Map"],
        "/// With options `#{timeout: \"10s\", env: #{NAME: \"value\"}, stdin: \"text\"}`.",
        "host::exec([\"cat\"], #{ stdin: \"hello\", timeout: \"5s\" })",
        |call: NativeCallContext, argv: Array, options: Map| exec(&context(&call), &argv, &options)
    );
    register!(
        &mut m,
        "cpu_load",
        Changes,
        ["workers: i64", "duration: ?", "Map"],
        "/// Loads the HOST UNDER TEST: `workers` bounded processes run there through its commands\n\
         /// (over ssh on a remote host), each `timeout DURATION dd if=/dev/zero of=/dev/null`, whose\n\
         /// copies are kernel time (they raise `usage_system`, not only user time). Returns that\n\
         /// host's CPU seconds over the load from its /proc/stat, all processes' time:\n\
         /// `#{user, system, idle, wall}`. Ctrl-C ends it early (the processes are killed).",
        "host::cpu_load(1, \"1s\")",
        |call: NativeCallContext, workers: i64, d: Dynamic| cpu_load(&context(&call), workers, duration_arg(&d)?)
    );
    more(&mut m);
    m
}

/// The reading verbs of `host::`: name, reach, interfaces, tunnels.
fn more(m: &mut Module) {
    register!(
        m,
        "hostname",
        Reads,
        ["String"],
        "/// The host name of the machine this run acts on.",
        "host::hostname()",
        |call: NativeCallContext| context(&call).hostname()
    );
    register!(
        m,
        "tcp_connect",
        Reads,
        ["address: &str", "timeout: ?", "Map"],
        "/// Opens (and closes) a TCP connection to `host:port` or to a URL's host and port, never\n\
         /// throws: `#{ok, address, detail, elapsed_ms}`.",
        "host::tcp_connect(\"127.0.0.1:22\", \"2s\")",
        |call: NativeCallContext, address: &str, timeout: Dynamic| tcp_connect(
            &context(&call),
            address,
            super::time::positive_duration_arg(&timeout, "timeout")?
        )
    );
    register!(
        m,
        "interface",
        Reads,
        ["name: &str", "Map"],
        "/// A network interface of the host (a tunnel, say): `#{exists, up, state}` from /sys/class/net.",
        "host::interface(\"lo\")",
        |call: NativeCallContext, name: &str| interface(&context(&call), name)
    );
    register!(
        m,
        "wireguard",
        Reads,
        ["iface: &str", "Map"],
        "/// A WireGuard interface of the host: `#{exists, up, peers: [#{public_key, handshake_age_s}],\n\
         /// detail}`; `handshake_age_s` is `()` for a peer that never handshook. Kernel WireGuard\n\
         /// and userspace ones (boringtun) alike. Reading the peers needs root on the host.",
        "host::wireguard(\"wg0\")",
        |call: NativeCallContext, iface: &str| super::wireguard::status(&context(&call), iface)
    );
}

/// What a finished command came to, as scripts see it.
#[derive(Serialize)]
struct Run<'a> {
    /// Exit status 0.
    ok: bool,
    /// The exit status; `()` when a signal ended it.
    code: Option<i32>,
    stdout: &'a str,
    stderr: &'a str,
    /// Seconds.
    duration: f64,
    timed_out: bool,
    /// Under `--dry-run`: nothing was run.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

fn completed_record(c: &Completed, dry_run: bool) -> VerbResult<Map> {
    record(&Run {
        ok: c.code == Some(0),
        code: c.code,
        stdout: &c.stdout,
        stderr: &c.stderr,
        duration: c.duration.as_secs_f64(),
        timed_out: c.timed_out,
        dry_run,
    })
}

fn exec(cx: &Context, argv: &Array, options: &Map) -> VerbResult<Map> {
    let argv: Vec<String> = argv.iter().map(super::values::text).collect();
    if argv.is_empty() {
        return Err(fail("host::exec: empty argv"));
    }
    let mut inv = Invocation { argv, timeout: cx.config().duration(keys::HOST_EXEC_TIMEOUT), ..Invocation::default() };
    for (k, v) in options {
        match k.as_str() {
            "timeout" => inv.timeout = super::time::positive_duration_arg(v, "timeout")?,
            "stdin" => inv.stdin = Some(super::values::text(v)),
            "env" => {
                let env = v.read_lock::<Map>().ok_or_else(|| fail("host::exec: `env` must be a map"))?;
                inv.env = env.iter().map(|(k, v)| (k.to_string(), super::values::text(v))).collect();
            }
            other => return Err(fail(format!("host::exec: unknown option `{other}` (timeout, env, stdin)"))),
        }
    }
    if cx.plan(&format!("run `{}`", inv.argv.join(" "))) {
        let nothing = Completed {
            code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
            duration: Duration::ZERO,
            timed_out: false,
        };
        return completed_record(&nothing, true);
    }
    let done = cx.run_command(inv)?.map_err(fail)?;
    completed_record(&done, false)
}

/// The host's CPU time over the load, in seconds (all processes).
#[derive(Debug, PartialEq, Serialize)]
struct Load {
    user: f64,
    system: f64,
    idle: f64,
    wall: f64,
}

// The load script (the sandbox runs it too: it burns CPU time and writes nothing).
use opsbook_world::CPU_LOAD as LOAD;

/// The host's CPU time between the two `cpu` lines the load script printed (user includes
/// nice, as `top` shows it; system is the kernel's own time, Telegraf's `usage_system`).
fn load_from(stdout: &str, wall: Duration) -> Result<Load, String> {
    let mut lines = stdout.lines();
    let hz: f64 = lines.next().and_then(|l| l.trim().parse().ok()).filter(|h| *h > 0.0).ok_or("no clock rate")?;
    let counters = |line: Option<&str>| -> Option<Vec<f64>> {
        let mut words = line?.split_whitespace();
        (words.next()? == "cpu").then(|| words.filter_map(|w| w.parse().ok()).collect::<Vec<f64>>())
    };
    let (before, after) = match (counters(lines.next()), counters(lines.next())) {
        (Some(b), Some(a)) if b.len() >= 4 && a.len() >= 4 => (b, a),
        _ => return Err("no /proc/stat `cpu` lines".into()),
    };
    let delta = |i: usize| (after[i] - before[i]).max(0.0) / hz;
    Ok(Load { user: delta(0) + delta(1), system: delta(2), idle: delta(3), wall: wall.as_secs_f64() })
}

/// Seconds as `timeout` takes them: `5`, or `1.5`.
fn seconds_arg(d: Duration) -> String {
    if d.subsec_millis() == 0 { d.as_secs().to_string() } else { format!("{:.3}", d.as_secs_f64()) }
}

fn cpu_load(cx: &Context, workers: i64, duration: Duration) -> VerbResult<Map> {
    if !(1..=64).contains(&workers) {
        return Err(fail(format!("host::cpu_load: workers must be 1 to 64, got {workers}")));
    }
    if cx.plan(&format!("load {workers} CPU(s) for {}", humantime::format_duration(duration))) {
        return Ok(Map::new());
    }
    let argv = ["sh", "-c", LOAD, "sh", &workers.to_string(), &seconds_arg(duration)];
    let invocation = Invocation {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        timeout: duration + Duration::from_secs(30),
        ..Invocation::default()
    };
    let commands = cx.world().commands.clone();
    let started = Instant::now();
    let done = cx.block_on(|| async move {
        let run = commands.run(&invocation);
        tokio::pin!(run);
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            tokio::select! {
                done = &mut run => break done,
                _ = tick.tick() => opsbook_base::show_progress("generating CPU load", started.elapsed(), duration),
            }
        }
    });
    opsbook_base::clear_progress();
    let done = done?.map_err(|e| fail(format!("host::cpu_load: {e}")))?;
    let load = load_from(&done.stdout, done.duration).map_err(|e| {
        let said = super::tools::tail(&format!("{}\n{}", done.stdout, done.stderr), 3);
        let said = if said.is_empty() { "it printed nothing".to_string() } else { said };
        fail(format!("host::cpu_load: the host's CPU counters could not be read ({e}): {said}"))
    })?;
    record(&load)
}

/// `host:port` from `host:port` or a URL.
fn address_of(text: &str) -> Option<String> {
    let rest = text.split_once("://").map_or(text, |(_, r)| r);
    let authority = rest.split('/').next()?;
    if authority.is_empty() {
        return None;
    }
    if authority.rsplit_once(':').is_some_and(|(_, p)| p.parse::<u16>().is_ok()) {
        return Some(authority.to_string());
    }
    let port = if text.starts_with("https://") { 443 } else { 80 };
    Some(format!("{authority}:{port}"))
}

/// Where a TCP probe connected to.
#[derive(Serialize)]
struct ReachOf {
    /// `host:port`.
    address: String,
}

fn tcp_connect(cx: &Context, target: &str, timeout: Duration) -> VerbResult<Map> {
    let Some(address) = address_of(target) else {
        return Err(fail(format!("host::tcp_connect: `{target}` is not host:port or a URL")));
    };
    let (net, a) = (cx.world().net.clone(), address.clone());
    let started = Instant::now();
    let reach = cx.block_on(|| async move { net.tcp_connect(&a, timeout).await })?;
    let elapsed = started.elapsed();
    let probe = match reach {
        Reach::Connected(took) => {
            Probe::new(true, None, format!("connected in {} ms", took.as_millis()), Some(elapsed))
        }
        Reach::Refused => Probe::new(false, None, "connection refused", Some(elapsed)),
        Reach::Failed(why) => Probe::new(false, None, why, Some(elapsed)),
        Reach::TimedOut => {
            Probe::new(false, None, format!("timed out after {}", humantime::format_duration(timeout)), Some(elapsed))
        }
    };
    probe.with(ReachOf { address }).into_map()
}

/// A network interface's state.
#[derive(Serialize)]
struct Interface {
    exists: bool,
    up: bool,
    /// The kernel's operstate, or `absent`.
    state: String,
}

fn interface(cx: &Context, name: &str) -> VerbResult<Map> {
    if name.is_empty() || name.contains('/') || name.contains("..") {
        return Err(fail(format!("host::interface: `{name}` is not an interface name")));
    }
    let (net, n) = (cx.world().net.clone(), name.to_string());
    let link = cx.block_on(|| async move { net.link(&n).await })?.map_err(fail)?;
    // Tunnels often report operstate "unknown" while up: the IFF_UP flag decides.
    let up = link.state.as_deref() == Some("up") || link.flags.is_some_and(|f| f & 1 == 1);
    record(&Interface { exists: link.state.is_some(), up, state: link.state.unwrap_or_else(|| "absent".into()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hosts_cpu_seconds_from_its_counters() {
        let out = "100\ncpu  100 5 200 1000 0 0 0 0 0 0\ncpu  300 15 700 1200 0 0 0 0 0 0\n";
        let wall = Duration::from_secs(2);
        assert_eq!(load_from(out, wall), Ok(Load { user: 2.1, system: 5.0, idle: 2.0, wall: 2.0 }));
        assert!(load_from("100\ncpu 1 2 3 4\n", wall).is_err());
        assert!(load_from("x\ncpu 1 2 3 4\ncpu 1 2 3 4\n", wall).is_err());
        assert_eq!(
            (seconds_arg(Duration::from_secs(5)), seconds_arg(Duration::from_millis(1500))),
            ("5".into(), "1.500".into())
        );
    }

    #[test]
    fn addresses_from_urls_and_pairs() {
        assert_eq!(address_of("http://127.0.0.1:8086/health").as_deref(), Some("127.0.0.1:8086"));
        assert_eq!(address_of("db.example:3100").as_deref(), Some("db.example:3100"));
        assert_eq!(address_of("https://db.example/x").as_deref(), Some("db.example:443"));
        assert_eq!(address_of("http://").as_deref(), None);
    }
}
