//! The SSH transport against a fleet of real hosts (tests/support/fleet.rs): one server and
//! three clients, each with its own network namespace, hostname, sshd, `systemd --user` and
//! journald. Shared connections, remote commands, the D-Bus bridge to a remote service
//! manager, forwarded loopback ports, and the errors an operator meets (sshd down, wrong key,
//! a client firewalled from the server). Skipped, saying why, without root or sshd.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use opsbook::process::Capture;
use opsbook::transport::{BusScope, Ssh};

use crate::support::fleet::{Fleet, FleetHost};

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
fn remote(ssh: &Ssh, words: &[&str]) -> (Option<i32>, String, String) {
    let out = ssh.run(&argv(words), Duration::from_secs(10), Capture::default()).unwrap();
    assert!(!out.timed_out, "{words:?} timed out");
    (out.code, out.stdout, out.stderr)
}

/// Waits until something on the host accepts TCP connections on `address:port`.
fn wait_listening(host: &FleetHost, address: &str, port: u16) {
    let probe = format!("exec 3<>/dev/tcp/{address}/{port}");
    let started = Instant::now();
    while !host.exec(&["bash", "-c", &probe]).status.success() {
        assert!(started.elapsed() < Duration::from_secs(10), "nothing listens on {address}:{port} on {}", host.name());
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads properties of a unit from a host's user manager through zbus, over the bridge.
async fn unit_state(address: zbus::Address, unit_path: &str) -> zbus::Result<(String, String, String)> {
    let connection = zbus::connection::Builder::address(address)?.build().await?;
    let unit =
        zbus::Proxy::new(&connection, "org.freedesktop.systemd1", unit_path, "org.freedesktop.systemd1.Unit").await?;
    let id: String = unit.get_property("Id").await?;
    let active: String = unit.get_property("ActiveState").await?;
    let sub: String = unit.get_property("SubState").await?;
    Ok((id, active, sub))
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

    // The D-Bus bridge reads a unit's state from a remote user manager.
    let c2 = &connections[2].0;
    fleet.host("c2").install_unit("probe.service", SLEEPER);
    fleet.host("c2").ok(&["systemctl", "--user", "start", "probe.service"]);
    let address = c2.dbus_address(BusScope::User { uid: c2.remote_uid().unwrap() });
    eprintln!("bridge address: {address}");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let started = Instant::now();
    let state = runtime.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(10),
            unit_state(address.clone(), "/org/freedesktop/systemd1/unit/probe_2eservice"),
        )
        .await
        .expect("the bridge answers within 10 s")
    });
    eprintln!("bridge: connect and read three properties: {:?}", started.elapsed());
    assert_eq!(state.unwrap(), ("probe.service".into(), "active".into(), "running".into()));

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
    assert!(local.ip().is_loopback(), "{local}");
    let client = crate::twin::client();
    let body = client.get(format!("http://{local}/hello.txt")).send().and_then(|r| r.text());
    assert_eq!(body.unwrap(), "hello from c3\n");
    ssh3.cancel_forward(local).unwrap();
    assert!(TcpStream::connect_timeout(&local, Duration::from_secs(2)).is_err(), "the forward is cancelled");

    // Closing ends the master and removes its private directory.
    let dir = ssh3.control_path().parent().unwrap().to_path_buf();
    assert!(dir.exists());
    drop(connections);
    assert!(!dir.exists(), "{} is left behind", dir.display());
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
