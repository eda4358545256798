//! Lasting ssh connections are bounded (`ssh.max_masters`): over real private hosts
//! (tests/support/fleet.rs), a run over three hosts with a maximum of two leaves two masters,
//! the next run reuses them and opens one, and the fleet's summary says how many connections
//! were reused. Each run uses its own runtime directory, so no other test's masters count.
//! And a connection is one process, its master, spoken to on its control socket; two names
//! for one host share one.
//! Skipped, saying why, without root or sshd.

use std::path::Path;
use std::process::Command;

use crate::support::fleet::Fleet;

const RUNBOOK: &str = "//! Says where it runs.\ncheck(`ran on ${hostname()}`, hostname() != \"\");\n";

/// Runs opsbook in `dir` with `runtime` as its XDG_RUNTIME_DIR (where lasting masters live):
/// (exit status, stdout, stderr).
fn opsbook(dir: &Path, runtime: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(crate::support::opsbook())
        .current_dir(dir)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("XDG_STATE_HOME", dir.join(".state"))
        .env("XDG_RUNTIME_DIR", runtime)
        .args(args)
        .output()
        .expect("start opsbook");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// Writes into `dir` an opsbook.toml reaching every host of `fleet` (its `[ssh]` table with
/// `ssh` added) and the runbook `name`.
fn project(dir: &Path, fleet: &Fleet, ssh: &str, name: &str, runbook: &str) {
    let mut config = format!(
        "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n{ssh}"
    );
    for h in fleet.hosts() {
        let (name, address, key) = (h.name(), h.address(), h.key().display());
        config.push_str(&format!("[hosts.{name}]\naddress = \"{address}\"\nuser = \"root\"\nkey = \"{key}\"\n"));
    }
    std::fs::write(dir.join("opsbook.toml"), config).unwrap();
    std::fs::create_dir_all(dir.join("runbooks")).unwrap();
    std::fs::write(dir.join("runbooks").join(format!("{name}.rhai")), runbook).unwrap();
}

/// The control sockets of the lasting masters in `runtime` that answer `ssh -O check`.
fn live_masters(runtime: &Path) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir(runtime.join("opsbook-ssh")) else { return Vec::new() };
    let mut live: Vec<String> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_none())
        .filter(|p| {
            let control = format!("ControlPath={}", p.display());
            Command::new("ssh").args(["-o", &control, "-O", "check", "x"]).output().is_ok_and(|o| o.status.success())
        })
        .map(|p| p.display().to_string())
        .collect();
    live.sort();
    live
}

#[test]
fn past_the_maximum_of_lasting_connections_the_least_recently_used_end() {
    let fleet = match Fleet::boot(&["server", "c1", "c2"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::Builder::new().prefix("obm").tempdir_in("/tmp").unwrap();
    project(dir.path(), &fleet, "persist = \"60s\"\nmax_masters = 2\n", "where", RUNBOOK);

    let (code, out, err) = opsbook(dir.path(), runtime.path(), &["run", "where", "--hosts", "all", "--forks", "3"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.ends_with("\nssh connections: 0 reused, 3 new\n"), "{out}");
    let first = live_masters(runtime.path());
    assert_eq!(first.len(), 2, "two of the three masters stay: {first:?}");

    // The next run finds the two, opens one again, and still leaves two.
    let (code, out, err) = opsbook(dir.path(), runtime.path(), &["run", "where", "--hosts", "all", "--forks", "1"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert!(out.ends_with("\nssh connections: 2 reused, 1 new\n"), "{out}");
    assert_eq!(live_masters(runtime.path()).len(), 2);

    // The JSON summary says it too.
    let (code, out, err) = opsbook(dir.path(), runtime.path(), &["--format", "json", "run", "where", "--hosts", "c1"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    let doc: serde_json::Value = serde_json::from_str(&out).unwrap();
    let seen = &doc["summary"]["ssh_connections"];
    assert_eq!(seen["reused"].as_u64().unwrap() + seen["new"].as_u64().unwrap(), 1, "{seen}");

    for socket in live_masters(runtime.path()) {
        let control = format!("ControlPath={socket}");
        let _ = Command::new("ssh").args(["-o", &control, "-O", "exit", "x"]).output();
    }
}

/// A connection is one process: the master starts holding the forwards it is given — to an
/// endpoint and to the host's bus — with no request after it; it says its pid on its control
/// socket, opens a forward asked there, and ends when the run closes the connection.
#[test]
fn a_master_starts_holding_its_forwards_and_is_spoken_to_on_its_control_socket() {
    use std::io::{Read, Write};
    use std::time::Duration;

    use opsbook_world::transport::Ssh;
    use opsbook_world::transport::control::Remote;
    use opsbook_world::transport::mux::Mux;

    let fleet = match Fleet::boot(&["c1"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let host = fleet.host("c1");
    let sshd = Remote::Port(host.address().to_string(), 22);
    let bus = Remote::Socket("/run/user/0/bus".into());
    let ssh = Ssh::connect_with(host.ssh_target(), std::slice::from_ref(&sshd)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(crate::fleet::banner(&ssh.forward_socket(&sshd)), "SSH-2.0-");
    let control = ssh.control_path().to_path_buf();
    let pid = Mux::connect(&control, Duration::from_secs(5)).and_then(|mut m| m.pid()).unwrap();
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
    assert!(String::from_utf8_lossy(&cmdline).starts_with("ssh"), "pid {pid} is the master");

    // A forward the master lacks is asked on its control socket: the host's bus, which answers
    // the first step of a D-Bus handshake for root, the login user.
    let local = ssh.forward_all(std::slice::from_ref(&bus)).unwrap().remove(0);
    assert_eq!(local, ssh.forward_socket(&bus));
    let mut stream = std::os::unix::net::UnixStream::connect(&local).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    stream.write_all(b"\0AUTH EXTERNAL 30\r\n").unwrap();
    let mut answer = [0u8; 3];
    stream.read_exact(&mut answer).unwrap();
    assert_eq!(&answer, b"OK ", "the bus accepts uid 0");

    drop(ssh);
    crate::support::wait_until(
        "the master of the closed connection to end",
        Duration::from_secs(5),
        || match Path::new(&format!("/proc/{pid}")).exists() {
            true => Err(format!("process {pid} is alive")),
            false => Ok(()),
        },
    );
    assert!(!control.parent().unwrap().exists(), "its private directory is removed");
}

/// Two inventory names for one host share its lasting connection: the hosts' masters start
/// together from one thread, so the second name finds the first's lock held, is left until
/// the others have started, and then reuses the master the first started.
#[test]
fn two_names_for_one_host_share_its_lasting_connection() {
    let fleet = match Fleet::boot(&["c1"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::Builder::new().prefix("obm").tempdir_in("/tmp").unwrap();
    let host = fleet.host("c1");
    let mut config = String::from(
        "scope = \"user\"\n[ssh]\noptions = \"StrictHostKeyChecking=no,UserKnownHostsFile=/dev/null,LogLevel=ERROR\"\n\
         persist = \"60s\"\n",
    );
    for name in ["first", "second"] {
        config.push_str(&format!(
            "[hosts.{name}]\naddress = \"{}\"\nuser = \"root\"\nkey = \"{}\"\n",
            host.address(),
            host.key().display()
        ));
    }
    std::fs::write(dir.path().join("opsbook.toml"), config).unwrap();
    std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
    std::fs::write(dir.path().join("runbooks/where.rhai"), RUNBOOK).unwrap();

    let (code, out, err) =
        opsbook(dir.path(), runtime.path(), &["--format", "tap", "run", "where", "--hosts", "all", "--forks", "2"]);
    assert_eq!(code, Some(0), "{out}\n{err}");
    assert_eq!(
        out,
        "TAP version 13\n# [first] opsbook run where (runbooks/where.rhai)\nok 1 - [first] ran on first\n\
         # [second] opsbook run where (runbooks/where.rhai)\nok 2 - [second] ran on second\n1..2\n\
         # 2 host(s), 0 failed\n# ssh connections: 1 reused, 1 new\n",
        "{err}"
    );
    assert_eq!(live_masters(runtime.path()).len(), 1, "one master for both names");

    for socket in live_masters(runtime.path()) {
        let control = format!("ControlPath={socket}");
        let _ = Command::new("ssh").args(["-o", &control, "-O", "exit", "x"]).output();
    }
}

/// The masters of a run whose connections do not last go with opsbook however it ends: killed
/// with SIGKILL in the middle of a run (no chance to end its connections), its masters follow
/// within moments, since each one's session reads a pipe only opsbook held.
#[test]
fn the_masters_of_a_killed_run_go_with_it() {
    use std::time::Duration;

    let fleet = match Fleet::boot(&["c1", "c2"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let dir = tempfile::tempdir().unwrap();
    let runtime = tempfile::Builder::new().prefix("obk").tempdir_in("/tmp").unwrap();
    project(dir.path(), &fleet, "persist = \"0\"\n", "nap", "check(\"connected\", true);\nsleep(\"1m\");\n");
    let masters = || {
        let needle = runtime.path().display().to_string();
        let mut found = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if cmdline.starts_with("ssh -M ") && cmdline.contains(&needle) {
                    found.push(cmdline);
                }
            }
        }
        found
    };

    let mut run = Command::new(crate::support::opsbook())
        .current_dir(dir.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", dir.path())
        .env("XDG_STATE_HOME", dir.path().join(".state"))
        .env("XDG_RUNTIME_DIR", runtime.path())
        .args(["run", "nap", "--hosts", "all", "--forks", "2"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start opsbook");
    crate::support::wait_until("both hosts' masters running", Duration::from_secs(60), || match masters().len() {
        2 => Ok(()),
        n => Err(format!("{n} of 2")),
    });
    run.kill().unwrap();
    run.wait().unwrap();
    crate::support::wait_until("the masters gone with opsbook", Duration::from_secs(10), || match masters() {
        left if left.is_empty() => Ok(()),
        left => Err(format!("{left:?}")),
    });
}
