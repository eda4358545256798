//! A fleet of test hosts reached over real SSH: each host is a private host (real
//! `systemd --user`, real journald, see private_host.rs) with its own network namespace,
//! hostname and sshd (tests/support/fleet-host.sh), joined to this machine by a veth on a
//! bridge of its own. Hosts boot in parallel (about half a second for four); everything is
//! torn down on drop. Where namespaces, systemd or sshd are missing, `boot` says why.
//!
//! Each fleet claims a subnet `10.231.X.0/24` by creating the bridge `obfX` (creating a link
//! is atomic, so fleets of tests running side by side, even in other processes, never share
//! one); the bridge has `.1`, the hosts `.2`, `.3`, … in the order given.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use opsbook_world::transport::SshTarget;

use super::private_host::ENV;

pub(crate) struct Fleet {
    hosts: Vec<FleetHost>,
    /// The claimed bridge, deleted on drop.
    bridge: Option<String>,
    subnet: u8,
    dir: tempfile::TempDir,
    /// Held while the hosts are up: no container starts meanwhile (`support::cgroups_shared`).
    _cgroups: Option<crate::support::CgroupsShared>,
}

/// One host of the fleet.
pub(crate) struct FleetHost {
    name: String,
    address: Ipv4Addr,
    unshare: Child,
    /// The host's init (PID 1 inside); 0 until found.
    init: u32,
    state: PathBuf,
    key: PathBuf,
}

impl Fleet {
    /// Boots one host per name (the first is usually the server), or says why it cannot (the
    /// caller skips the test with that reason).
    pub(crate) fn boot(names: &[&str]) -> Result<Fleet, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: namespaces and network links need CAP_SYS_ADMIN and CAP_NET_ADMIN".into());
        }
        for needed in
            ["/lib/systemd/systemd", "/usr/sbin/sshd", "/usr/bin/ssh", "/usr/bin/ssh-keygen", "/usr/bin/unshare"]
        {
            if !Path::new(needed).exists() {
                return Err(format!("{needed} is missing (apt-get install systemd openssh-server openssh-client)"));
            }
        }
        crate::support::raise_inotify_instances();
        let dir = tempfile::Builder::new().prefix("opsbook-fleet").tempdir().map_err(|e| e.to_string())?;
        let _cgroups = crate::support::cgroups_shared();
        let mut fleet = Fleet { hosts: Vec::new(), bridge: None, subnet: 0, dir, _cgroups };
        fleet.claim_bridge()?;
        let key = fleet.dir.path().join("key");
        keygen(&key)?;
        let authorized = fleet.dir.path().join("authorized_keys");
        std::fs::copy(key.with_extension("pub"), &authorized).map_err(|e| e.to_string())?;
        let bridge = fleet.bridge.clone().expect("claimed");
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/fleet-host.sh");
        // Start every host first, then wire each one up: they boot side by side.
        for (i, name) in names.iter().enumerate() {
            let (outer, peer) = (format!("{bridge}v{i}"), format!("{bridge}p{i}"));
            ip(&["link", "add", &outer, "type", "veth", "peer", "name", &peer])?;
            ip(&["link", "set", &outer, "master", &bridge, "up"])?;
            let address = Ipv4Addr::new(10, 231, fleet.subnet, i as u8 + 2);
            // The state directory's name also names the host's cgroup: unique per fleet.
            let state = fleet.dir.path().join(format!("{bridge}-{name}"));
            std::fs::create_dir(&state).map_err(|e| e.to_string())?;
            let unshare = Command::new("unshare")
                .args(["--mount", "--net", "--pid", "--uts", "--fork", "--kill-child", "--mount-proc", "bash", script])
                .arg(&state)
                .arg(name)
                .arg(&peer)
                .arg(format!("{address}/24"))
                .arg(&authorized)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .map_err(|e| format!("cannot run unshare: {e}"))?;
            fleet.hosts.push(FleetHost { name: name.to_string(), address, unshare, init: 0, state, key: key.clone() });
        }
        for (i, host) in fleet.hosts.iter_mut().enumerate() {
            host.init = find_init(&mut host.unshare)?;
            ip(&["link", "set", &format!("{bridge}p{i}"), "netns", &host.init.to_string()])?;
        }
        for host in &mut fleet.hosts {
            host.wait_ready()?;
        }
        Ok(fleet)
    }

    /// Creates the first free bridge `obfX` and gives it `10.231.X.1/24`.
    fn claim_bridge(&mut self) -> Result<(), String> {
        let start = (std::process::id() as usize * 7) % 250;
        for k in 0..250 {
            let x = (start + k) % 250 + 1;
            let name = format!("obf{x}");
            if ip(&["link", "add", &name, "type", "bridge"]).is_ok() {
                self.bridge = Some(name.clone());
                self.subnet = x as u8;
                ip(&["addr", "add", &format!("10.231.{x}.1/24"), "dev", &name])?;
                return ip(&["link", "set", &name, "up"]);
            }
        }
        Err("no free test bridge obf1…obf250".into())
    }

    pub(crate) fn hosts(&self) -> &[FleetHost] {
        &self.hosts
    }

    /// The host called `name` (panics when there is none: a mistake in the test).
    #[track_caller]
    pub(crate) fn host(&self, name: &str) -> &FleetHost {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no host {name} in the fleet"))
    }

    /// A fresh key that no host of the fleet accepts.
    #[track_caller]
    pub(crate) fn unknown_key(&self) -> PathBuf {
        let key = self.dir.path().join("unknown-key");
        if !key.exists() {
            keygen(&key).expect("ssh-keygen");
        }
        key
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for host in &mut self.hosts {
            host.kill();
        }
        // A veth goes with its host's namespace, unless the host never got it; the bridge
        // is ours to remove.
        if let Some(bridge) = &self.bridge {
            for i in 0..self.hosts.len() {
                let _ = ip(&["link", "del", &format!("{bridge}v{i}")]);
            }
            let _ = ip(&["link", "del", bridge]);
        }
    }
}

impl FleetHost {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its address on the fleet's bridge.
    pub(crate) fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// The private key every host of the fleet accepts for root.
    pub(crate) fn key(&self) -> &Path {
        &self.key
    }

    /// How an operator reaches it: root with the fleet's key, host keys not recorded (they
    /// are new on every run).
    pub(crate) fn ssh_target(&self) -> SshTarget {
        let mut target = SshTarget::new(self.name.clone(), self.address.to_string());
        target.user = Some("root".into());
        target.key = Some(self.key.clone());
        target.options =
            vec!["StrictHostKeyChecking=no".into(), "UserKnownHostsFile=/dev/null".into(), "LogLevel=ERROR".into()];
        target.connect_timeout = Duration::from_secs(5);
        target
    }

    /// A command that runs inside the host (its namespaces), with the user manager's
    /// environment, as a process on the host would.
    pub(crate) fn command(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &self.init.to_string(), "--mount", "--net", "--pid", "--uts", "--wd=/", "--", "env"]);
        cmd.args(ENV.iter().map(|(k, v)| format!("{k}={v}")));
        cmd.args(argv);
        cmd
    }

    /// Runs a command inside the host (killed after 30 s) and returns its output.
    #[track_caller]
    pub(crate) fn exec(&self, argv: &[&str]) -> Output {
        let mut child = self
            .command(argv)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("nsenter");
        // Output is read once it has ended: what the tests run here prints little.
        if crate::support::poll(Duration::from_secs(30), || child.try_wait().expect("wait").ok_or(())).is_err() {
            child.kill().ok();
            panic!("{argv:?} on {} did not finish within 30 s", self.name);
        }
        child.wait_with_output().expect("output")
    }

    /// Runs a command inside that must succeed; its stdout.
    #[track_caller]
    pub(crate) fn ok(&self, argv: &[&str]) -> String {
        let out = self.exec(argv);
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        assert!(out.status.success(), "{argv:?} on {}: {}{}", self.name, text(&out.stdout), text(&out.stderr));
        text(&out.stdout)
    }

    /// A file's text as the host sees it (its own /etc, /var/lib, /root); `None` when it has no
    /// such file.
    pub(crate) fn read_file(&self, path: &str) -> Option<String> {
        let out = self.exec(&["cat", path]);
        out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Writes a user unit and reloads the user manager.
    #[track_caller]
    pub(crate) fn install_unit(&self, name: &str, text: &str) {
        let path = format!("/run/user/0/systemd/user/{name}");
        let local = self.state.join(name);
        std::fs::write(&local, text).expect("unit file");
        self.ok(&["cp", &local.display().to_string(), &path]);
        self.ok(&["systemctl", "--user", "daemon-reload"]);
    }

    /// Stops the host's sshd and ends every connection to it, as a host whose sshd went down
    /// with it: new connections are refused from then on, and a master an earlier run left
    /// (`ssh.persist`) ends too.
    #[track_caller]
    pub(crate) fn stop_sshd(&self) {
        let pid_file = self.state.join("sshd.pid").display().to_string();
        self.ok(&["sh", "-c", &format!("kill $(cat {pid_file}); pkill -x sshd; true")]);
    }

    /// Starts the host's sshd again (after `stop_sshd`), as fleet-host.sh first started it.
    #[track_caller]
    pub(crate) fn start_sshd(&self) {
        let config = self.state.join("sshd_config").display().to_string();
        let log = self.state.join("sshd.log").display().to_string();
        self.ok(&["/usr/sbin/sshd", "-f", &config, "-E", &log]);
    }

    /// Loads an nftables ruleset (nft's file syntax) inside the host's network namespace.
    #[track_caller]
    pub(crate) fn nft(&self, ruleset: &str) {
        let file = self.state.join("rules.nft");
        std::fs::write(&file, ruleset).expect("ruleset");
        self.ok(&["nft", "-f", &file.display().to_string()]);
    }

    /// Makes TCP connections from this host to `to:port` fail at once (connection refused),
    /// as a firewall between a client and the server would.
    #[track_caller]
    pub(crate) fn block_tcp_to(&self, to: Ipv4Addr, port: u16) {
        self.nft(&format!(
            "table inet opsbook_test {{\n  chain output {{\n    type filter hook output priority 0; policy accept;\n    \
             ip daddr {to} tcp dport {port} reject with tcp reset\n  }}\n}}\n"
        ));
    }

    /// Joins this host and `peer` by a real (userspace) WireGuard tunnel on `wg0`: this host
    /// gets `10.99.0.1`, the peer `10.99.0.2`. Says why when boringtun or wg is missing.
    #[track_caller]
    pub(crate) fn wireguard_with(&self, peer: &FleetHost) -> Result<(), String> {
        let boringtun = boringtun().ok_or(
            "boringtun-cli is missing (cargo install boringtun-cli --root /opt/opsbook-test-tools; .ci/run does)",
        )?;
        if !Path::new("/usr/bin/wg").exists() {
            return Err("/usr/bin/wg is missing (apt-get install wireguard-tools)".into());
        }
        let ends = [(self, peer, 1), (peer, self, 2)];
        for (host, _, _) in ends {
            host.start_boringtun(&boringtun);
        }
        let public: Vec<String> = ends.iter().map(|(h, _, _)| h.state.join("wg.pub")).map(read_trimmed).collect();
        for (i, (host, other, n)) in ends.iter().enumerate() {
            let other_n = 3 - n;
            let key = host.state.join("wg.key").display().to_string();
            let endpoint = format!("{}:51820", other.address);
            let allowed = format!("10.99.0.{other_n}/32");
            host.ok(&[
                "wg",
                "set",
                "wg0",
                "private-key",
                &key,
                "listen-port",
                "51820",
                "peer",
                &public[1 - i],
                "endpoint",
                &endpoint,
                "allowed-ips",
                &allowed,
                "persistent-keepalive",
                "1",
            ]);
            host.ok(&["ip", "addr", "add", &format!("10.99.0.{n}/24"), "dev", "wg0"]);
            host.ok(&["ip", "link", "set", "wg0", "up"]);
        }
        Ok(())
    }

    /// Ends this host's end of its WireGuard tunnel (the tunnel's peer is then gone).
    #[track_caller]
    pub(crate) fn stop_wireguard(&self) {
        let pid = read_trimmed(self.state.join("boringtun.pid"));
        self.ok(&["kill", &pid]);
    }

    #[track_caller]
    fn start_boringtun(&self, program: &Path) {
        let state = self.state.display().to_string();
        // In the foreground under a shell of ours, so its pid is known and it is stopped by pid.
        self.ok(&[
            "sh",
            "-c",
            &format!(
                "umask 077; wg genkey > {state}/wg.key && wg pubkey < {state}/wg.key > {state}/wg.pub || exit 1
                 {} wg0 --foreground --disable-drop-privileges > {state}/boringtun.log 2>&1 &
                 echo $! > {state}/boringtun.pid",
                program.display()
            ),
        ]);
        crate::support::wait_until(&format!("boringtun's wg0 on {}", self.name), Duration::from_secs(10), || {
            let out = self.exec(&["ip", "link", "show", "wg0"]);
            if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
        });
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        // Ready once the script touches STATE/ready; an `unshare` that ended cannot get there.
        let (ready, unshare) = (self.state.join("ready"), &mut self.unshare);
        let booted = crate::support::poll(Duration::from_secs(20), || {
            if ready.exists() {
                return Ok(None);
            }
            match unshare.try_wait() {
                Ok(Some(status)) => Ok(Some(status)),
                _ => Err(()),
            }
        });
        match booted {
            Ok(None) => Ok(()),
            Ok(Some(status)) => {
                let mut err = String::new();
                use std::io::Read;
                self.unshare.stderr.take().map(|mut e| e.read_to_string(&mut err));
                Err(format!("host {} did not boot ({status}): {}", self.name, err.trim()))
            }
            Err(()) => Err(format!("host {} did not boot within 20 s", self.name)),
        }
    }

    fn kill(&mut self) {
        // SIGKILL to the namespace's init takes journald, the manager and sshd with it.
        if self.init != 0 {
            // SAFETY: kill(2) on a pid we started.
            unsafe {
                libc::kill(self.init as i32, libc::SIGKILL);
            }
        }
        self.unshare.kill().ok();
        self.unshare.wait().ok();
        if let Ok(cg) = std::fs::read_to_string(self.state.join("cgroup")) {
            remove_cgroup(Path::new(cg.trim()));
        }
    }
}

/// The userspace WireGuard: where .ci/run installs it, or on PATH.
fn boringtun() -> Option<PathBuf> {
    let fixed = PathBuf::from("/opt/opsbook-test-tools/bin/boringtun-cli");
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).map(|d| d.join("boringtun-cli")).collect::<Vec<_>>())
        .unwrap_or_default();
    std::iter::once(fixed).chain(on_path).find(|p| p.exists())
}

#[track_caller]
fn read_trimmed(path: PathBuf) -> String {
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display())).trim().to_string()
}

/// The first child of `unshare`: the host's init.
fn find_init(unshare: &mut Child) -> Result<u32, String> {
    let pid = unshare.id();
    let found = crate::support::poll(Duration::from_secs(5), || {
        let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(init) = children.split_whitespace().next().and_then(|p| p.parse().ok()) {
            return Ok(Ok(init));
        }
        match unshare.try_wait() {
            Ok(Some(status)) => Ok(Err(format!("unshare ended at once ({status})"))),
            _ => Err(()),
        }
    });
    found.unwrap_or_else(|()| Err("the host's init did not start within 5 s".into()))
}

/// `ip ARGS` in this (the outer) namespace.
fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip").args(args).output().map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("ip {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()))
    }
}

fn keygen(path: &Path) -> Result<(), String> {
    let out = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "opsbook-fleet-test", "-f"])
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

fn remove_cgroup(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path());
            }
        }
    }
    // A cgroup can be removed once its last process is gone, which takes a moment after the
    // kill; one still busy after a second is left (it is empty, and harmless).
    let _ = crate::support::poll(Duration::from_secs(1), || {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() { Ok(()) } else { Err(()) }
    });
}
