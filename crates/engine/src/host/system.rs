//! `host::` — this machine: run a command, generate CPU load, check TCP reach, network
//! interfaces and WireGuard tunnels (wireguard.rs), the host name. Commands go through the `Commands` world seam.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rhai::{Array, Dynamic, Engine, Map, Module};

use serde::Serialize;

use super::time::duration_arg;
use super::values::{Probe, record};
use super::{Host, HostResult, fail};
use crate::config::keys;
use crate::register;
use crate::world::commands::{Completed, Invocation};
use crate::world::net::Reach;

/// Registers the `host::` namespace.
pub(crate) fn register(engine: &mut Engine, host: &Arc<Host>) {
    engine.register_static_module("host", module(host).into());
}

fn module(host: &Arc<Host>) -> Module {
    let mut m = Module::new();
    let h = host.clone();
    register!(
        &mut m,
        "exec",
        Changes,
        ["argv: Array", "Map"],
        "/// Runs a command (argv array, no shell) and returns `#{ok, code, stdout, stderr, duration,\n\
         /// timed_out}`; `ok` is exit status 0. Times out after `host.exec_timeout` (60 s), killing\n\
         /// the whole process group. Throws when the command cannot start.",
        "host::exec([\"uname\", \"-r\"])",
        move |argv: Array| exec(&h, &argv, &Map::new())
    );
    let h = host.clone();
    register!(
        &mut m,
        "exec",
        Changes,
        ["argv: Array", "options: Map", "Map"],
        "/// With options `#{timeout: \"10s\", env: #{NAME: \"value\"}, stdin: \"text\"}`.",
        "host::exec([\"cat\"], #{ stdin: \"hello\", timeout: \"5s\" })",
        move |argv: Array, options: Map| exec(&h, &argv, &options)
    );
    let h = host.clone();
    register!(
        &mut m,
        "cpu_load",
        Changes,
        ["workers: i64", "duration: ?", "Map"],
        "/// Keeps `workers` threads busy for `duration` with system calls (kernel time, which raises\n\
         /// `usage_system`, not only user time). Returns `#{user, system, wall}` CPU seconds produced.\n\
         /// Ctrl-C ends it early.",
        "host::cpu_load(1, \"1s\")",
        move |workers: i64, d: Dynamic| cpu_load(&h, workers, duration_arg(&d)?)
    );
    let h = host.clone();
    register!(
        &mut m,
        "hostname",
        Reads,
        ["String"],
        "/// The host name of the machine this run acts on.",
        "host::hostname()",
        move || h.hostname()
    );
    let h = host.clone();
    register!(
        &mut m,
        "tcp_connect",
        Reads,
        ["address: &str", "timeout: ?", "Map"],
        "/// Opens (and closes) a TCP connection to `host:port` or to a URL's host and port, never\n\
         /// throws: `#{ok, address, detail, elapsed_ms}`.",
        "host::tcp_connect(\"127.0.0.1:22\", \"2s\")",
        move |address: &str, timeout: Dynamic| tcp_connect(&h, address, duration_arg(&timeout)?)
    );
    let h = host.clone();
    register!(
        &mut m,
        "interface",
        Reads,
        ["name: &str", "Map"],
        "/// A network interface of the host (a tunnel, say): `#{exists, up, state}` from /sys/class/net.",
        "host::interface(\"lo\")",
        move |name: &str| interface(&h, name)
    );
    let h = host.clone();
    register!(
        &mut m,
        "wireguard",
        Reads,
        ["iface: &str", "Map"],
        "/// A WireGuard interface of the host: `#{exists, up, peers: [#{public_key, handshake_age_s}],\n\
         /// detail}`; `handshake_age_s` is `()` for a peer that never handshook. Kernel WireGuard\n\
         /// and userspace ones (boringtun) alike. Reading the peers needs root on the host.",
        "host::wireguard(\"wg0\")",
        move |iface: &str| super::wireguard::status(&h, iface)
    );
    m
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

fn completed_record(c: &Completed, dry_run: bool) -> HostResult<Map> {
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

fn exec(host: &Host, argv: &Array, options: &Map) -> HostResult<Map> {
    let argv: Vec<String> = argv.iter().map(super::values::text).collect();
    if argv.is_empty() {
        return Err(fail("host::exec: empty argv"));
    }
    let mut inv =
        Invocation { argv, timeout: host.config().duration(keys::HOST_EXEC_TIMEOUT), ..Invocation::default() };
    for (k, v) in options {
        match k.as_str() {
            "timeout" => inv.timeout = duration_arg(v)?,
            "stdin" => inv.stdin = Some(super::values::text(v)),
            "env" => {
                let env = v.read_lock::<Map>().ok_or_else(|| fail("host::exec: `env` must be a map"))?;
                inv.env = env.iter().map(|(k, v)| (k.to_string(), super::values::text(v))).collect();
            }
            other => return Err(fail(format!("host::exec: unknown option `{other}` (timeout, env, stdin)"))),
        }
    }
    if host.plan(&format!("run `{}`", inv.argv.join(" "))) {
        let nothing = Completed {
            code: Some(0),
            stdout: String::new(),
            stderr: String::new(),
            duration: Duration::ZERO,
            timed_out: false,
        };
        return completed_record(&nothing, true);
    }
    let done = host.run_command(inv)?.map_err(fail)?;
    completed_record(&done, false)
}

/// CPU time the load produced, in seconds.
#[derive(Serialize)]
struct Load {
    user: f64,
    system: f64,
    wall: f64,
}

fn thread_cpu() -> (f64, f64) {
    // SAFETY: getrusage fills the struct we pass; RUSAGE_THREAD is Linux's per-thread usage.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe {
        libc::getrusage(libc::RUSAGE_THREAD, &mut usage);
    }
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    (secs(usage.ru_utime), secs(usage.ru_stime))
}

fn cpu_load(host: &Host, workers: i64, duration: Duration) -> HostResult<Map> {
    if !(1..=64).contains(&workers) {
        return Err(fail(format!("host::cpu_load: workers must be 1 to 64, got {workers}")));
    }
    if host.plan(&format!("load {workers} CPU(s) for {}", humantime::format_duration(duration))) {
        return Ok(Map::new());
    }
    let stop = AtomicBool::new(false);
    let started = Instant::now();
    let (user, system) = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| {
                    use std::io::{Read, Write};
                    let before = thread_cpu();
                    let (mut zero, mut null) = match (
                        std::fs::File::open("/dev/zero"),
                        std::fs::OpenOptions::new().write(true).open("/dev/null"),
                    ) {
                        (Ok(z), Ok(n)) => (z, n),
                        _ => return (0.0, 0.0),
                    };
                    // Reads from /dev/zero are kernel work (page clearing, copies): system time.
                    let mut buf = vec![0u8; 1 << 16];
                    while !stop.load(Ordering::Relaxed) && started.elapsed() < duration {
                        for _ in 0..64 {
                            let _ = zero.read(&mut buf);
                            let _ = null.write(&buf);
                        }
                    }
                    let after = thread_cpu();
                    (after.0 - before.0, after.1 - before.1)
                })
            })
            .collect();
        while started.elapsed() < duration && !host.cancel.is_cancelled() {
            crate::progress::show("generating CPU load", started.elapsed(), duration);
            std::thread::sleep(Duration::from_millis(50));
        }
        stop.store(true, Ordering::Relaxed);
        crate::progress::clear();
        handles.into_iter().map(|h| h.join().unwrap_or((0.0, 0.0))).fold((0.0, 0.0), |a, b| (a.0 + b.0, a.1 + b.1))
    });
    if host.cancel.is_cancelled() {
        return Err(super::interrupted());
    }
    record(&Load { user, system, wall: started.elapsed().as_secs_f64() })
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

fn tcp_connect(host: &Host, target: &str, timeout: Duration) -> HostResult<Map> {
    let Some(address) = address_of(target) else {
        return Err(fail(format!("host::tcp_connect: `{target}` is not host:port or a URL")));
    };
    let (net, a) = (host.world().net.clone(), address.clone());
    let started = Instant::now();
    let reach = host.block_on(|| async move { net.tcp_connect(&a, timeout).await })?;
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

fn interface(host: &Host, name: &str) -> HostResult<Map> {
    if name.is_empty() || name.contains('/') || name.contains("..") {
        return Err(fail(format!("host::interface: `{name}` is not an interface name")));
    }
    let (net, n) = (host.world().net.clone(), name.to_string());
    let link = host.block_on(|| async move { net.link(&n).await })?.map_err(fail)?;
    // Tunnels often report operstate "unknown" while up: the IFF_UP flag decides.
    let up = link.state.as_deref() == Some("up") || link.flags.is_some_and(|f| f & 1 == 1);
    record(&Interface { exists: link.state.is_some(), up, state: link.state.unwrap_or_else(|| "absent".into()) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_from_urls_and_pairs() {
        assert_eq!(address_of("http://127.0.0.1:8086/health").as_deref(), Some("127.0.0.1:8086"));
        assert_eq!(address_of("db.example:3100").as_deref(), Some("db.example:3100"));
        assert_eq!(address_of("https://db.example/x").as_deref(), Some("db.example:443"));
        assert_eq!(address_of("http://").as_deref(), None);
    }
}
