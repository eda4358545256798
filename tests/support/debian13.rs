//! Debian 13 test hosts: what operators run, booted for real. Each host is the Debian 13
//! (trixie) root that tests/support/debian13-root.sh makes once in
//! /opt/opsbook-test-tools/trixie, booted with systemd 257 as PID 1 — the system manager, the
//! system bus, journald, logind, sshd, podman 5.4 with Quadlet — in namespaces of its own
//! (mount, pid, uts, net, ipc, cgroup) by tests/support/debian13-host.sh, and reached as root
//! over ssh with the fleet's key, so opsbook acts on it with `scope = "system"`. The root is
//! only read: each host boots on an overlay whose changes live in its state directory; the
//! opsbook under test is at /usr/local/bin/opsbook on every host (bound read-only). Hosts
//! boot side by side (about a second for three); everything is torn down on drop. Where root,
//! the Debian 13 root or a tool is missing, `boot` says why.
//!
//! Each fleet claims a subnet `10.233.X.0/24` by creating the bridge `obdX` (creating a link
//! is atomic, so fleets running side by side, even in other processes, never share one; the
//! private-host fleets of fleet.rs use `obfX` and `10.231.X.0/24`, the benchmarks' fleets
//! `obbX` and `10.232.X.0/24`); the bridge has `.1`, the hosts `.2`, `.3`, … in the order given.

// Helpers for the tests to come (inventories, ssh configs) are not all used yet.
#![allow(dead_code)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use opsbook_world::transport::SshTarget;

/// Where debian13-root.sh puts the root (`.ci/run` runs it).
pub(crate) const ROOT: &str = "/opt/opsbook-test-tools/trixie";

/// The ssh options every host needs: their host keys are new on every boot.
pub(crate) const SSH_OPTIONS: [&str; 3] =
    ["StrictHostKeyChecking=no", "UserKnownHostsFile=/dev/null", "LogLevel=ERROR"];

/// How long a host may take from start to a finished boot (`running` or `degraded`): about a
/// second on a quiet machine, several under a full test run.
const BOOT_LIMIT: Duration = Duration::from_secs(90);

pub(crate) struct Debian13Fleet {
    hosts: Vec<Debian13Host>,
    /// The claimed bridge, deleted on drop.
    bridge: Option<String>,
    subnet: u8,
    dir: tempfile::TempDir,
    /// Held while the hosts are up: no container starts meanwhile (`support::cgroups_shared`).
    _cgroups: Option<crate::support::CgroupsShared>,
}

/// One booted Debian 13 host.
pub(crate) struct Debian13Host {
    name: String,
    address: Ipv4Addr,
    unshare: Child,
    /// systemd, PID 1 inside; 0 until found.
    init: u32,
    state: PathBuf,
    /// The cgroup2 directory the host's cgroup namespace is rooted at, removed on drop.
    cgroup: PathBuf,
    key: PathBuf,
}

impl Debian13Fleet {
    /// Boots one host per name, side by side, and waits until each one's system manager has
    /// finished booting; or says why it cannot (the caller skips the test with that reason).
    /// The hosts end with the thread that booted them, at the latest.
    pub(crate) fn boot(names: &[&str]) -> Result<Debian13Fleet, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: namespaces, mounts and network links need CAP_SYS_ADMIN and CAP_NET_ADMIN".into());
        }
        if !Path::new(ROOT).join("etc/opsbook-test-root").exists() {
            return Err(format!(
                "no Debian 13 root in {ROOT} (bash tests/support/debian13-root.sh makes it; .ci/run does)"
            ));
        }
        for needed in ["/usr/bin/unshare", "/usr/bin/nsenter", "/usr/bin/ssh", "/usr/bin/ssh-keygen"] {
            if !Path::new(needed).exists() {
                return Err(format!("{needed} is missing (apt-get install util-linux openssh-client)"));
            }
        }
        let cgroups = cgroup2().ok_or("no cgroup2 hierarchy under /sys/fs/cgroup: systemd 257 needs one")?;
        // Each host's systemd, journald, logind and dbus take inotify instances from root's.
        crate::support::raise_inotify_instances();
        // As `support::fleet::Fleet`: hosts never run beside a container of another test.
        let _cgroups = crate::support::cgroups_shared();
        let dir = tempfile::Builder::new().prefix("opsbook-d13").tempdir().map_err(|e| e.to_string())?;
        let mut fleet = Debian13Fleet { hosts: Vec::new(), bridge: None, subnet: 0, dir, _cgroups };
        fleet.claim_bridge()?;
        let bridge = fleet.bridge.clone().expect("claimed");
        let key = fleet.dir.path().join("key");
        keygen(&key)?;
        let addresses: Vec<Ipv4Addr> =
            (0..names.len()).map(|i| Ipv4Addr::new(10, 233, fleet.subnet, i as u8 + 2)).collect();
        // Every host knows the others by name, as hosts of one site do.
        let mut hosts_file = String::from("127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n");
        for (name, address) in names.iter().zip(&addresses) {
            hosts_file.push_str(&format!("{address}\t{name}\n"));
        }
        let hosts_path = fleet.dir.path().join("hosts");
        std::fs::write(&hosts_path, hosts_file).map_err(|e| e.to_string())?;
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/debian13-host.sh");
        // Start every host first, then wire each one up: they boot side by side.
        for (i, (name, address)) in names.iter().zip(&addresses).enumerate() {
            let (outer, peer) = (format!("{bridge}v{i}"), format!("{bridge}p{i}"));
            ip(&["link", "add", &outer, "type", "veth", "peer", "name", &peer])?;
            ip(&["link", "set", &outer, "master", &bridge, "up"])?;
            let state = fleet.dir.path().join(name);
            std::fs::create_dir(&state).map_err(|e| e.to_string())?;
            // Named by the bridge too: unique among the fleets up at once.
            let cgroup = cgroups.join(format!("opsbook-d13-{bridge}-{name}"));
            // A fleet that had this bridge before may have left its host's cgroup behind (it
            // empties a moment after the kill, later than that fleet waited on a loaded
            // machine): the bridge is ours now, so is the name.
            remove_cgroup(&cgroup);
            std::fs::create_dir(&cgroup).map_err(|e| format!("{}: {e}", cgroup.display()))?;
            // systemd writes to its stderr until journald is up: a file, never a pipe that
            // nobody reads and that could fill.
            let log = std::fs::File::create(state.with_extension("log")).map_err(|e| e.to_string())?;
            let mut command = Command::new("bash");
            command
                .arg(script)
                .arg("boot")
                .arg(&cgroup)
                .arg(ROOT)
                .arg(&state)
                .arg(name)
                .arg(&peer)
                .arg(format!("{address}/24"))
                .arg(key.with_extension("pub"))
                .arg(&hosts_path)
                // The opsbook under test, at /usr/local/bin/opsbook on the host.
                .env("OPSBOOK_BIN", crate::support::opsbook())
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(|e| e.to_string())?)
                .stderr(log);
            // A session of its own, as a container manager gives its containers: the host has
            // no controlling terminal, and a terminal's signals are not for it (a Ctrl-C would
            // reach systemd as its ctrl-alt-del). Yet it must not outlive the tests when they
            // are stopped before `drop`: unshare is killed when the thread that booted the
            // fleet ends (so boot and drop a fleet on one thread), and takes the host with it.
            // SAFETY: setsid(2) and prctl(2) are async-signal-safe; they are all that runs
            // between fork and exec.
            unsafe {
                use std::os::unix::process::CommandExt;
                command.pre_exec(|| {
                    libc::setsid();
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            let unshare = command.spawn().map_err(|e| format!("cannot run bash {script}: {e}"))?;
            fleet.hosts.push(Debian13Host {
                name: name.to_string(),
                address: *address,
                unshare,
                init: 0,
                state,
                cgroup,
                key: key.clone(),
            });
        }
        for (i, host) in fleet.hosts.iter_mut().enumerate() {
            host.init = host.find_init()?;
            ip(&["link", "set", &format!("{bridge}p{i}"), "netns", &host.init.to_string()])?;
        }
        let started = Instant::now();
        for host in &mut fleet.hosts {
            host.wait_booted(started)?;
        }
        Ok(fleet)
    }

    /// Creates the first free bridge `obdX` and gives it `10.233.X.1/24`.
    fn claim_bridge(&mut self) -> Result<(), String> {
        let start = (std::process::id() as usize * 7) % 250;
        for k in 0..250 {
            let x = (start + k) % 250 + 1;
            let name = format!("obd{x}");
            if ip(&["link", "add", &name, "type", "bridge"]).is_ok() {
                self.bridge = Some(name.clone());
                self.subnet = x as u8;
                ip(&["addr", "add", &format!("10.233.{x}.1/24"), "dev", &name])?;
                return ip(&["link", "set", &name, "up"]);
            }
        }
        Err("no free test bridge obd1…obd250".into())
    }

    /// This machine's address on the fleet's bridge: where the hosts reach what a test serves.
    pub(crate) fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::new(10, 233, self.subnet, 1)
    }

    pub(crate) fn hosts(&self) -> &[Debian13Host] {
        &self.hosts
    }

    /// The host called `name` (panics when there is none: a mistake in the test).
    pub(crate) fn host(&self, name: &str) -> &Debian13Host {
        self.hosts.iter().find(|h| h.name == name).unwrap_or_else(|| panic!("no host {name} in the fleet"))
    }

    /// The fleet as opsbook's inventory: `[hosts.NAME]` with address, root and the fleet's
    /// key, and the system manager as scope (`roles` gives a host's roles: `["loki"]`, or none
    /// with `[]`); then the group `debian13` of every host.
    pub(crate) fn inventory_toml(&self, roles: impl Fn(&str) -> Vec<&'static str>) -> String {
        let mut text = String::new();
        for h in &self.hosts {
            let roles: Vec<String> = roles(&h.name).iter().map(|r| format!("\"{r}\"")).collect();
            text.push_str(&format!(
                "[hosts.{}]\naddress = \"{}\"\nroles = [{}]\nuser = \"root\"\nkey = \"{}\"\nconfig = {{ scope = \"system\" }}\n",
                h.name,
                h.address,
                roles.join(", "),
                h.key.display()
            ));
        }
        let names: Vec<String> = self.hosts.iter().map(|h| format!("\"{}\"", h.name)).collect();
        text.push_str(&format!("[groups.debian13]\nhosts = [{}]\n", names.join(", ")));
        text
    }

    /// An operator's `opsbook.toml` for the fleet: the system scope, ssh options that accept
    /// the hosts' new keys, and `inventory_toml` (after `extra`, top-level keys of the test's).
    pub(crate) fn config_toml(&self, extra: &str, roles: impl Fn(&str) -> Vec<&'static str>) -> String {
        format!(
            "scope = \"system\"\n{extra}[ssh]\noptions = \"{}\"\n{}",
            SSH_OPTIONS.join(","),
            self.inventory_toml(roles)
        )
    }

    /// An OpenSSH client config naming every host (`Host NAME`, root, the fleet's key), for
    /// `ssh -F FILE NAME` or an operator's `~/.ssh/config`.
    pub(crate) fn ssh_config(&self) -> String {
        let mut text = String::new();
        for h in &self.hosts {
            text.push_str(&format!(
                "Host {}\n  HostName {}\n  User root\n  IdentityFile {}\n  IdentitiesOnly yes\n",
                h.name,
                h.address,
                h.key.display()
            ));
            for option in SSH_OPTIONS {
                let (k, v) = option.split_once('=').expect("Name=value");
                text.push_str(&format!("  {k} {v}\n"));
            }
        }
        text
    }

    /// Writes `ssh_config` to `path`.
    pub(crate) fn write_ssh_config(&self, path: &Path) {
        std::fs::write(path, self.ssh_config()).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

impl Drop for Debian13Fleet {
    fn drop(&mut self) {
        for host in &mut self.hosts {
            host.kill();
        }
        // A veth goes with its host's network namespace, unless the host never got it; the
        // bridge is ours to remove. The state directories go with `dir`.
        if let Some(bridge) = &self.bridge {
            for i in 0..self.hosts.len() {
                let _ = ip(&["link", "del", &format!("{bridge}v{i}")]);
            }
            let _ = ip(&["link", "del", bridge]);
        }
    }
}

impl Debian13Host {
    pub(crate) fn name(&self) -> &str {
        &self.name
    }

    /// Its address on the fleet's bridge (sshd listens there).
    pub(crate) fn address(&self) -> Ipv4Addr {
        self.address
    }

    /// The private key root's authorized_keys on every host of the fleet holds.
    pub(crate) fn key(&self) -> &Path {
        &self.key
    }

    /// PID 1 inside (systemd), as this machine sees it.
    pub(crate) fn init(&self) -> u32 {
        self.init
    }

    /// How an operator reaches it: root with the fleet's key, host keys not recorded.
    pub(crate) fn ssh_target(&self) -> SshTarget {
        let mut target = SshTarget::new(self.name.clone(), self.address.to_string());
        target.user = Some("root".into());
        target.key = Some(self.key.clone());
        target.options = SSH_OPTIONS.iter().map(|o| o.to_string()).collect();
        target.connect_timeout = Duration::from_secs(5);
        target
    }

    /// The arguments of `ssh` that log in as root (before the remote command); no user
    /// config is read (`-F /dev/null`), and ssh never prompts.
    pub(crate) fn ssh_args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["-F".into(), "/dev/null".into(), "-i".into(), self.key.display().to_string()];
        for option in SSH_OPTIONS.iter().chain(&["BatchMode=yes", "IdentitiesOnly=yes", "ConnectTimeout=5"]) {
            args.extend(["-o".into(), option.to_string()]);
        }
        args.push(format!("root@{}", self.address));
        args
    }

    /// Runs `script` over ssh as root (the login shell runs it), killed after 60 s.
    pub(crate) fn ssh(&self, script: &str) -> Output {
        let mut cmd = Command::new("ssh");
        cmd.args(self.ssh_args()).arg("--").arg(script);
        run(cmd, &format!("ssh {} {script:?}", self.name))
    }

    /// Runs `script` over ssh as root, which must succeed; its stdout.
    pub(crate) fn ssh_ok(&self, script: &str) -> String {
        ok(self.ssh(script), &format!("ssh {}: {script}", self.name))
    }

    /// A command inside the host (all its namespaces, its root), with the plain environment
    /// of a root login; no ssh involved.
    pub(crate) fn command(&self, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &self.init.to_string(), "--all", "--root", "--wd", "--", "env", "-i"]);
        cmd.args(["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOME=/root", "LANG=C.UTF-8"]);
        cmd.args(argv);
        cmd
    }

    /// Runs a command inside the host (killed after 60 s) and returns its output.
    pub(crate) fn exec(&self, argv: &[&str]) -> Output {
        run(self.command(argv), &format!("{argv:?} on {}", self.name))
    }

    /// Runs a command inside that must succeed; its stdout.
    pub(crate) fn ok(&self, argv: &[&str]) -> String {
        ok(self.exec(argv), &format!("{argv:?} on {}", self.name))
    }

    /// Where the host's own files are (its overlay's upper layer): what it changed or made,
    /// as this machine sees it.
    pub(crate) fn changes(&self) -> PathBuf {
        self.state.join("upper")
    }

    /// The first child of `unshare`: the host's init.
    fn find_init(&mut self) -> Result<u32, String> {
        let started = Instant::now();
        let pid = self.unshare.id();
        loop {
            // `bash … boot` starts no process: it becomes unshare (exec), whose only child is
            // the init stage.
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
            if let Some(init) = children.split_whitespace().next().and_then(|p| p.parse().ok()) {
                return Ok(init);
            }
            if let Ok(Some(status)) = self.unshare.try_wait() {
                return Err(format!("host {} ended at once ({status}): {}", self.name, self.boot_log()));
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(format!("host {}: its init did not start within 10 s: {}", self.name, self.boot_log()));
            }
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// Polls the system manager until it has booted (`running`, or `degraded` when a unit
    /// failed: the test says which may), the host ends, or `BOOT_LIMIT` from `started` passes.
    fn wait_booted(&mut self, started: Instant) -> Result<(), String> {
        loop {
            // `offline` until systemd is executed and its bus is up, then `initializing` and
            // `starting` while it boots.
            let out = self.exec(&["systemctl", "is-system-running"]);
            let state = String::from_utf8_lossy(&out.stdout).trim().to_string();
            if state == "running" || state == "degraded" {
                return Ok(());
            }
            if let Ok(Some(status)) = self.unshare.try_wait() {
                return Err(format!("host {} did not boot ({status}): {}", self.name, self.boot_log()));
            }
            if started.elapsed() > BOOT_LIMIT {
                return Err(format!("host {} did not boot within {BOOT_LIMIT:?} (it says {state:?})", self.name));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the boot printed (debian13-host.sh, then systemd until journald took over).
    fn boot_log(&self) -> String {
        std::fs::read_to_string(self.state.with_extension("log")).unwrap_or_default().trim().to_string()
    }

    fn kill(&mut self) {
        // SIGKILL to PID 1 ends the pid namespace: every process of the host goes with it
        // (containers too), then its mounts with its mount namespace.
        if self.init != 0 {
            // SAFETY: kill(2) on a pid we started.
            unsafe {
                libc::kill(self.init as i32, libc::SIGKILL);
            }
        }
        self.unshare.kill().ok();
        self.unshare.wait().ok();
        remove_cgroup(&self.cgroup);
    }
}

/// Where this machine's cgroup2 hierarchy is: `/sys/fs/cgroup` itself, or its `unified`
/// part next to the v1 controllers.
fn cgroup2() -> Option<PathBuf> {
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .iter()
        .map(PathBuf::from)
        .find(|d| d.join("cgroup.procs").exists() && d.join("cgroup.subtree_control").exists())
}

/// Runs `cmd` to its end (killed after 60 s).
fn run(mut cmd: Command, what: &str) -> Output {
    let mut child =
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start a command");
    // Read while waiting: a large output must not fill the pipe and stall the command.
    let (out, err) = (child.stdout.take().expect("piped"), child.stderr.take().expect("piped"));
    let read = |mut r: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            r.read_to_end(&mut buf).ok();
            buf
        })
    };
    let (out, err) = (read(Box::new(out)), read(Box::new(err)));
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(60) {
            child.kill().ok();
            panic!("{what} did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: out.join().expect("reader"), stderr: err.join().expect("reader") }
}

fn ok(out: Output, what: &str) -> String {
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(out.status.success(), "{what} ({}): {}{}", out.status, text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
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
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "opsbook-debian13-test", "-f"])
        .arg(path)
        .output()
        .map_err(|e| format!("cannot run ssh-keygen: {e}"))?;
    if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
}

/// Removes a host's cgroup tree, deepest first, once its processes are gone: any still in
/// it are killed (`cgroup.kill`), and a busy machine is given up to 10 s to reap them.
fn remove_cgroup(dir: &Path) {
    let _ = std::fs::write(dir.join("cgroup.kill"), "1");
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                remove_cgroup(&e.path());
            }
        }
    }
    for _ in 0..500 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
