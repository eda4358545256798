//! The SSH transport against a fleet of real hosts (tests/support/fleet.rs): one server and
//! three clients, each with its own network namespace, hostname, sshd, `systemd --user` and
//! journald. Shared connections, remote commands, the D-Bus bridge to a remote service
//! manager, forwards to the hosts' loopback (unix sockets only the operator opens), and the errors an operator meets (sshd down, wrong key,
//! a client firewalled from the server). Skipped, saying why, without root or sshd.

use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use futures_util::StreamExt;

use opsbook_world::transport::{BusRoute, BusScope, Ssh};

use crate::support::fleet::{Fleet, FleetHost};
use crate::support::wait_until;

#[track_caller]
fn boot(names: &[&str]) -> Option<Fleet> {
    let started = Instant::now();
    match Fleet::boot(names) {
        Ok(f) => {
            eprintln!("fleet of {} booted in {:?}", names.len(), started.elapsed());
            Some(f)
        }
        Err(why) => {
            crate::support::skip(why);
            None
        }
    }
}

fn argv(words: &[&str]) -> Vec<String> {
    words.iter().map(|w| w.to_string()).collect()
}

/// Connects to every host at once; the connections and how long each took.
fn connect_all(fleet: &Fleet) -> Vec<(Ssh, Duration)> {
    std::thread::scope(|s| {
        let tasks: Vec<_> = fleet
            .hosts()
            .iter()
            .map(|h| {
                s.spawn(move || {
                    let started = Instant::now();
                    let ssh = Ssh::connect(h.ssh_target()).unwrap_or_else(|e| panic!("{e}"));
                    (ssh, started.elapsed())
                })
            })
            .collect();
        tasks.into_iter().map(|t| t.join().unwrap()).collect()
    })
}

/// Runs a command on the host over the connection; (exit status, stdout, stderr).
#[track_caller]
fn remote(ssh: &Ssh, words: &[&str]) -> (Option<i32>, String, String) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let out = rt.block_on(ssh.exec(&argv(words), None, Duration::from_secs(10))).unwrap();
    assert!(!out.timed_out, "{words:?} timed out");
    (out.code, out.stdout, out.stderr)
}

/// Waits until something on the host accepts TCP connections on `address:port`.
#[track_caller]
fn wait_listening(host: &FleetHost, address: &str, port: u16) {
    let probe = format!("exec 3<>/dev/tcp/{address}/{port}");
    let what = format!("something listening on {address}:{port} on {}", host.name());
    wait_until(&what, Duration::from_secs(10), || {
        let out = host.exec(&["bash", "-c", &probe]);
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
}

/// Over the bridge to a host's user manager: reads the unit's state, starts it, and reads
/// its state again once started; prints what the bridge costs.
async fn start_through(route: BusRoute, unit: &str) -> zbus::Result<Vec<(String, String, String)>> {
    let started = Instant::now();
    let builder = zbus::connection::Builder::address(route.address)?;
    let connection = match route.user_id {
        Some(uid) => builder.user_id(uid),
        None => builder,
    }
    .build()
    .await?;
    eprintln!("{}: new D-Bus connection: {:?}", route.via, started.elapsed());
    let path = format!("/org/freedesktop/systemd1/unit/{}", unit.replace('.', "_2e"));
    // Uncached: every read is a call to the remote manager, as the product's reads are.
    let unit_proxy: zbus::Proxy<'_> = zbus::proxy::Builder::new(&connection)
        .destination("org.freedesktop.systemd1")?
        .path(path.as_str())?
        .interface("org.freedesktop.systemd1.Unit")?
        .cache_properties(zbus::proxy::CacheProperties::No)
        .build()
        .await?;
    let state = || async {
        let id: String = unit_proxy.get_property("Id").await?;
        let active: String = unit_proxy.get_property("ActiveState").await?;
        let sub: String = unit_proxy.get_property("SubState").await?;
        zbus::Result::Ok((id, active, sub))
    };
    let mut seen = vec![state().await?];
    let manager = zbus::Proxy::new(
        &connection,
        "org.freedesktop.systemd1",
        "/org/freedesktop/systemd1",
        "org.freedesktop.systemd1.Manager",
    )
    .await?;
    // Jobs are awaited as the product awaits them locally: JobRemoved, subscribed first. The
    // bridge carries the match rule and the signal like any bus would.
    let () = manager.call("Subscribe", &()).await?;
    let mut removed = manager.receive_signal("JobRemoved").await?;
    let job: zbus::zvariant::OwnedObjectPath = manager.call("StartUnit", &(unit, "replace")).await?;
    let result = loop {
        let signal = removed.next().await.ok_or(zbus::Error::Failure("no JobRemoved".into()))?;
        let (_, path, _, result): (u32, zbus::zvariant::OwnedObjectPath, String, String) =
            signal.body().deserialize()?;
        if path == job {
            break result;
        }
    };
    assert_eq!(result, "done");
    seen.push(state().await?);
    let calls = Instant::now();
    for _ in 0..20 {
        let _: u64 = unit_proxy.get_property("StateChangeTimestamp").await?;
    }
    eprintln!("bridge: one call on the open connection: {:?}", calls.elapsed() / 20);
    Ok(seen)
}

/// The command lines of this machine's processes that mention `path`.
fn processes_mentioning(path: &std::path::Path) -> Vec<String> {
    let needle = path.display().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(&needle) {
                found.push(cmdline);
            }
        }
    }
    found
}

const SLEEPER: &str = "[Unit]\nDescription=Probe for the bridge\n[Service]\nExecStart=/bin/sleep infinity\n";

#[test]
fn commands_bridge_and_forwards_over_one_shared_connection_per_host() {
    let Some(fleet) = boot(&["server", "c1", "c2", "c3"]) else { return };
    let connections = connect_all(&fleet);
    for (ssh, took) in &connections {
        eprintln!("connect {}: {took:?}", ssh.target().name);
    }

    // A command runs on each host and answers with that host's own name.
    let names: Vec<_> = connections.iter().map(|(ssh, _)| remote(ssh, &["hostname"])).collect();
    let expected: Vec<_> =
        ["server", "c1", "c2", "c3"].iter().map(|n| (Some(0), format!("{n}\n"), String::new())).collect();
    assert_eq!(names, expected);
    // Arguments arrive as given, whatever the remote shell would make of them.
    let c1 = &connections[1].0;
    assert_eq!(
        remote(c1, &["printf", "[%s]", "a b", "$HOME", "it's", ""]),
        (Some(0), "[a b][$HOME][it's][]".to_string(), String::new())
    );
    let started = Instant::now();
    for _ in 0..10 {
        remote(c1, &["true"]);
    }
    eprintln!("command over the shared connection: {:?} each", started.elapsed() / 10);

    // Both routes reach a remote user manager, read a unit's state and start it: root's bus
    // socket forwarded (first), and the D-Bus bridge (for any login user).
    let c2 = &connections[2].0;
    let routes = c2.bus_routes(BusScope::User);
    assert_eq!(routes.iter().map(|r| r.via).collect::<Vec<_>>(), ["its bus socket forwarded", "systemd-stdio-bridge"]);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for (route, unit) in routes.into_iter().zip(["probe.service", "probe2.service"]) {
        fleet.host("c2").install_unit(unit, SLEEPER);
        let via = route.via;
        let seen = runtime.block_on(async {
            tokio::time::timeout(Duration::from_secs(20), start_through(route, unit))
                .await
                .unwrap_or_else(|_| panic!("{via} answers within 20 s"))
        });
        let state = |active: &str, sub: &str| (unit.to_string(), active.to_string(), sub.to_string());
        assert_eq!(seen.unwrap(), vec![state("inactive", "dead"), state("active", "running")], "{via}");
        assert_eq!(fleet.host("c2").ok(&["systemctl", "--user", "is-active", unit]), "active\n", "{via}");
    }

    // A forwarded port reaches a server that listens only on the remote host's loopback.
    let c3 = fleet.host("c3");
    c3.ok(&["sh", "-c", "mkdir -p /run/user/0/web && echo hello from c3 > /run/user/0/web/hello.txt"]);
    c3.install_unit(
        "web.service",
        "[Service]\nExecStart=/usr/bin/python3 -m http.server 12345 --bind 127.0.0.1 --directory /run/user/0/web\n",
    );
    c3.ok(&["systemctl", "--user", "start", "web.service"]);
    wait_listening(c3, "127.0.0.1", 12345);
    let direct = SocketAddr::from((c3.address(), 12345));
    assert_eq!(
        TcpStream::connect_timeout(&direct, Duration::from_secs(2)).map(drop).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::ConnectionRefused),
        "the web server must not be reachable from the network"
    );
    let ssh3 = &connections[3].0;
    let started = Instant::now();
    let local = ssh3.forward("127.0.0.1", 12345).unwrap();
    eprintln!("forward set up: {:?}", started.elapsed());
    assert_eq!(get_over_unix(&local, "/hello.txt").unwrap(), "hello from c3\n");
    // The forward is the operator's alone: a unix socket (0600, in a 0700 directory), no TCP
    // port on this machine's loopback, and another local user cannot connect to it.
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&local).unwrap().permissions().mode() & 0o777, 0o600, "{}", local.display());
    let dir = local.parent().unwrap();
    assert_eq!(std::fs::metadata(dir).unwrap().permissions().mode() & 0o777, 0o700, "{}", dir.display());
    assert_eq!(tcp_listeners_of_master(ssh3), Vec::<String>::new(), "the master listens on no TCP port");
    match connect_as_another_user(&local) {
        Ok(refused) => assert!(refused.contains("Permission denied"), "another user connected: {refused}"),
        Err(why) => crate::support::skip(format!("another user's attempt: {why}")),
    }
    ssh3.cancel_forward(&local).unwrap();
    assert_eq!(
        std::os::unix::net::UnixStream::connect(&local).map(drop).map_err(|e| e.kind()),
        Err(std::io::ErrorKind::NotFound),
        "the forward is cancelled: its socket {} is gone",
        local.display()
    );

    // A master of this run alone is the connection's one process, this process's own child
    // (no `-f`), holding its own session (it runs each line it reads, until its input, a pipe
    // of ours, ends): nothing can end it while idle. Closing ends
    // it and removes the private directory.
    let dir = ssh3.control_path().parent().unwrap().to_path_buf();
    assert!(dir.exists());
    let seen = processes_mentioning(&dir);
    assert_eq!(seen.len(), 1, "one process: {seen:?}");
    assert!(seen[0].starts_with("ssh -M "), "{seen:?}");
    assert!(
        seen[0].ends_with(" -- echo opsbook-master-ready; exec sh -c 'while read -r c; do eval \"$c\"; done' "),
        "{seen:?}"
    );
    let children = children_of_this_process();
    assert!(
        children.iter().any(|c| c.starts_with("ssh -M ") && c.contains(&dir.display().to_string())),
        "{children:?}"
    );
    drop(connections);
    assert!(!dir.exists(), "{} is left behind", dir.display());
    assert_eq!(processes_mentioning(&dir), Vec::<String>::new());
}

/// The command lines of this process's children.
fn children_of_this_process() -> Vec<String> {
    let me = std::process::id().to_string();
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        // The parent's pid is the second field after the command's closing parenthesis.
        let parent = stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().nth(1));
        if parent == Some(me.as_str())
            && let Ok(cmdline) = std::fs::read(entry.path().join("cmdline"))
        {
            found.push(String::from_utf8_lossy(&cmdline).replace('\0', " "));
        }
    }
    found
}

#[test]
fn unreachable_hosts_wrong_keys_and_firewalls_are_reported_plainly() {
    let Some(fleet) = boot(&["server", "c1", "c2", "c3"]) else { return };
    let server = fleet.host("server");
    let (c1, c2, c3) = (fleet.host("c1"), fleet.host("c2"), fleet.host("c3"));

    // sshd down: the host is named and ssh quoted.
    c1.stop_sshd();
    let e = Ssh::connect(c1.ssh_target()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "host `c1`: connecting failed: ssh said \"ssh: connect to host {} port 22: Connection refused\"; \
             remedy: check that sshd runs on the host and that its port is reachable from here",
            c1.address()
        )
    );

    // A key the host does not accept.
    let mut target = c2.ssh_target();
    target.key = Some(fleet.unknown_key());
    let started = Instant::now();
    let e = Ssh::connect(target).unwrap_err();
    eprintln!("wrong key refused after {:?}", started.elapsed());
    assert_eq!(
        e.to_string(),
        format!(
            "host `c2`: connecting failed: ssh said \"root@{}: Permission denied (publickey).\"; remedy: check the \
             key given for this host and that its public half is in the host's authorized_keys; opsbook never \
             prompts, so a key with a passphrase must be loaded in ssh-agent",
            c2.address()
        )
    );

    // A client firewalled from the server's 3100, next to one that is not.
    server.install_unit("store.service", "[Service]\nExecStart=/usr/bin/python3 -m http.server 3100\n");
    server.ok(&["systemctl", "--user", "start", "store.service"]);
    wait_listening(server, &server.address().to_string(), 3100);
    c3.block_tcp_to(server.address(), 3100);
    let probe = format!("exec 3<>/dev/tcp/{}/3100 && echo open", server.address());
    let reach = |host: &FleetHost| {
        let ssh = Ssh::connect(host.ssh_target()).unwrap();
        remote(&ssh, &["timeout", "5", "bash", "-c", &probe])
    };
    assert_eq!(reach(c2), (Some(0), "open\n".to_string(), String::new()));
    assert_eq!(
        reach(c3),
        (
            Some(1),
            String::new(),
            format!(
                "bash: connect: Connection refused\nbash: line 1: /dev/tcp/{}/3100: Connection refused\n",
                server.address()
            )
        )
    );
}

#[test]
fn a_wireguard_tunnel_carries_traffic_until_its_peer_is_gone() {
    let Some(fleet) = boot(&["server", "c1"]) else { return };
    let (server, c1) = (fleet.host("server"), fleet.host("c1"));
    if let Err(why) = server.wireguard_with(c1) {
        crate::support::skip(why);
        return;
    }
    server.install_unit("store.service", "[Service]\nExecStart=/usr/bin/python3 -m http.server 3100\n");
    server.ok(&["systemctl", "--user", "start", "store.service"]);
    wait_listening(server, "10.99.0.1", 3100);
    let ssh = Ssh::connect(c1.ssh_target()).unwrap();
    let probe = "exec 3<>/dev/tcp/10.99.0.1/3100 && echo open";
    assert_eq!(remote(&ssh, &["timeout", "5", "bash", "-c", probe]), (Some(0), "open\n".to_string(), String::new()));
    // boringtun reports the handshake's age in seconds where kernel WireGuard gives a time.
    let (code, handshakes, _) = remote(&ssh, &["wg", "show", "wg0", "latest-handshakes"]);
    let shape = regex::Regex::new(r"^[A-Za-z0-9+/]{43}=\t[0-9]+\n$").unwrap();
    assert!(code == Some(0) && shape.is_match(&handshakes), "{handshakes:?}");
    let (_, transfer, _) = remote(&ssh, &["wg", "show", "wg0", "transfer"]);
    let counters: Vec<u64> = transfer.split_whitespace().skip(1).map(|n| n.parse().unwrap()).collect();
    assert!(counters.len() == 2 && counters.iter().all(|&n| n > 0), "{transfer:?}");

    // The server's end is gone: nothing crosses any more.
    server.stop_wireguard();
    assert_eq!(remote(&ssh, &["timeout", "2", "bash", "-c", probe]), (Some(124), String::new(), String::new()));
}

/// `GET path` over the unix socket `socket` (HTTP/1.0, so the server closes): the body.
fn get_over_unix(socket: &Path, path: &str) -> std::io::Result<String> {
    use std::io::{Read, Write};
    let mut stream = UnixStream::connect(socket)?;
    stream.set_read_timeout(Some(Duration::from_secs(5)))?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n")?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or(answer))
}

/// What `nobody` (another local user, not the operator) gets connecting to `socket`: Ok with
/// the error it met (or "connected"), Err when it cannot be tried here.
fn connect_as_another_user(socket: &Path) -> Result<String, String> {
    let script = "import socket, sys\ns = socket.socket(socket.AF_UNIX)\ntry:\n    s.connect(sys.argv[1])\n    \
                  print('connected')\nexcept OSError as e:\n    print(e.strerror)\n";
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c", script])
        .arg(socket)
        .output()
        .map_err(|e| format!("cannot run setpriv (util-linux): {e}"))?;
    if !out.status.success() {
        return Err(format!("python3 as uid 65534 failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The TCP ports the connection's master process listens on, as `ss` lists them.
fn tcp_listeners_of_master(ssh: &Ssh) -> Vec<String> {
    let check = std::process::Command::new("ssh")
        .args(["-o", &format!("ControlPath={}", ssh.control_path().display()), "-O", "check", "host"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&check.stderr).to_string();
    let pid = said.split("pid=").nth(1).and_then(|p| p.split(')').next()).unwrap_or_else(|| panic!("{said}"));
    let ss = std::process::Command::new("ss").args(["-Hltnp"]).output().unwrap();
    let needle = format!("pid={pid},");
    String::from_utf8_lossy(&ss.stdout).lines().filter(|l| l.contains(&needle)).map(str::to_string).collect()
}

/// The first bytes a server at the unix socket `socket` says (an sshd's banner).
#[track_caller]
pub(crate) fn banner(socket: &Path) -> String {
    use std::io::Read;
    let mut stream = UnixStream::connect(socket).expect("connect");
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 8];
    stream.read_exact(&mut buf).expect("a banner");
    String::from_utf8_lossy(&buf).into_owned()
}

/// A lasting master whose persist time would pass while a run uses it idly (its forwards alone
/// do not hold it) is held by its keeper, a session of its own asked over the control socket
/// (no `ssh` client runs for it); once the run lets it go, it lasts its persist time and ends.
#[test]
fn a_keeper_session_holds_a_lasting_master_past_its_persist_time() {
    let Some(fleet) = boot(&["c1"]) else { return };
    let mut target = fleet.host("c1").ssh_target();
    target.persist = Some(Duration::from_secs(3));
    let ssh = Ssh::connect(target).unwrap_or_else(|e| panic!("{e}"));
    let socket = ssh.control_path().to_path_buf();
    let (masters, clients) = (
        || processes_mentioning(&socket).iter().filter(|c| c.contains(" -M ")).count(),
        || processes_mentioning(&socket).iter().filter(|c| !c.contains(" -M ")).count(),
    );
    std::thread::sleep(Duration::from_secs(5));
    assert_eq!((masters(), clients()), (1, 0), "held past its persist time, by no ssh client");
    assert_eq!(remote(&ssh, &["hostname"]), (Some(0), "c1\n".to_string(), String::new()));
    ssh.close();
    wait_until("the master gone after its persist time", Duration::from_secs(10), || match masters() {
        0 => Ok(()),
        n => Err(format!("{n} master(s)")),
    });
}

/// With `persist` (`ssh.persist`, as Ansible's ControlPersist) the master outlives the run:
/// the next connection to the same target reuses it and the ports it forwards, so it skips
/// the key exchange; another key is another connection, never this one.
#[test]
fn a_lasting_master_serves_the_next_run_with_its_forwards() {
    let Some(fleet) = boot(&["c1"]) else { return };
    let mut target = fleet.host("c1").ssh_target();
    target.persist = Some(Duration::from_secs(60));
    let started = Instant::now();
    let first = Ssh::connect(target.clone()).unwrap_or_else(|e| panic!("{e}"));
    let cold = started.elapsed();
    let socket = first.control_path().to_path_buf();
    let masters = || processes_mentioning(&socket).into_iter().filter(|c| c.contains(" -M ")).count();
    assert_eq!(masters(), 1);
    // The host's own sshd, as the host reaches it: its banner proves the forward.
    let (sshd, sshd_port) = (fleet.host("c1").address().to_string(), target.port.unwrap_or(22));
    let local = first.forward(&sshd, sshd_port).unwrap();
    assert_eq!(banner(&local), "SSH-2.0-");
    drop(first);
    assert_eq!(masters(), 1, "the master outlives the run");

    let started = Instant::now();
    let second = Ssh::connect(target.clone()).unwrap_or_else(|e| panic!("{e}"));
    let warm = started.elapsed();
    eprintln!("connect cold {cold:?}, warm {warm:?}");
    assert_eq!(second.control_path(), socket.as_path());
    assert_eq!(masters(), 1, "no second master");
    assert_eq!(second.forward(&sshd, sshd_port).unwrap(), local, "the forward is reused");
    assert_eq!(banner(&local), "SSH-2.0-");
    assert_eq!(remote(&second, &["hostname"]), (Some(0), "c1\n".to_string(), String::new()));

    let mut other = target.clone();
    other.key = Some(fleet.unknown_key());
    let err = Ssh::connect(other).expect_err("another key is refused, not handed the lasting master");
    assert_eq!(
        err.to_string(),
        format!(
            "host `c1`: connecting failed: ssh said \"root@{}: Permission denied (publickey).\"; remedy: check the \
             key given for this host and that its public half is in the host's authorized_keys; opsbook never \
             prompts, so a key with a passphrase must be loaded in ssh-agent",
            fleet.host("c1").address()
        )
    );

    let exit = std::process::Command::new("ssh")
        .args(["-o", &format!("ControlPath={}", socket.display()), "-O", "exit", "c1"])
        .output()
        .unwrap();
    assert!(exit.status.success(), "{}", String::from_utf8_lossy(&exit.stderr));
}
