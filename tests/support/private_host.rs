//! A private stack host for tests: a mount + net + pid namespace with a real
//! `systemd --user`, a real `systemd-journald` and its own loopback
//! (tests/support/private-host.sh). Boots in well under a second; dies with its init.
//! Where namespaces or systemd cannot be had, `boot` says why and the test is skipped.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

pub(crate) struct PrivateHost {
    unshare: Child,
    init: u32,
    _state: tempfile::TempDir,
    /// Held while the host is up: no container starts meanwhile (`support::cgroups_shared`).
    _cgroups: Option<crate::support::CgroupsShared>,
}

pub(crate) const ENV: [(&str, &str); 3] = [
    ("XDG_RUNTIME_DIR", "/run/user/0"),
    ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/0/bus"),
    ("HOME", "/run/user/0/home"),
];

impl PrivateHost {
    /// Boots a host, or says why it cannot (the caller prints "skipped: …" and returns).
    pub(crate) fn boot() -> Result<PrivateHost, String> {
        PrivateHost::boot_with_bus_policy(None)
    }

    /// Boots a host whose session bus also reads `policy` (a dbus-daemon `<busconfig>`), as a
    /// system's bus reads its policy files: what it denies is denied by the real bus daemon.
    pub(crate) fn boot_with_bus_policy(policy: Option<&str>) -> Result<PrivateHost, String> {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            return Err("not root: namespaces need CAP_SYS_ADMIN".into());
        }
        for needed in ["/lib/systemd/systemd", "/lib/systemd/systemd-journald", "/usr/bin/unshare", "/usr/bin/nsenter"]
        {
            if !Path::new(needed).exists() {
                return Err(format!("{needed} is missing (apt-get install systemd util-linux)"));
            }
        }
        crate::support::raise_inotify_instances();
        let cgroups = crate::support::cgroups_shared();
        let state = tempfile::tempdir().map_err(|e| e.to_string())?;
        if let Some(policy) = policy {
            let dir = state.path().join("dbus-session.d");
            std::fs::create_dir(&dir)
                .and_then(|()| std::fs::write(dir.join("opsbook-test.conf"), policy))
                .map_err(|e| e.to_string())?;
        }
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/private-host.sh");
        let mut unshare = Command::new("unshare")
            .args(["--mount", "--net", "--pid", "--fork", "--kill-child", "--mount-proc", "bash", script])
            .arg(state.path())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run unshare: {e}"))?;
        // Ready once the script touches STATE/ready; an `unshare` that ended cannot get there.
        let booted = crate::support::poll(Duration::from_secs(20), || {
            if state.path().join("ready").exists() {
                return Ok(None);
            }
            match unshare.try_wait() {
                Ok(Some(status)) => Ok(Some(status)),
                _ => Err(()),
            }
        });
        match booted {
            Ok(None) => {}
            Ok(Some(status)) => {
                let mut err = String::new();
                use std::io::Read;
                unshare.stderr.take().map(|mut e| e.read_to_string(&mut err));
                return Err(format!("the private host did not boot ({status}): {}", err.trim()));
            }
            Err(()) => {
                unshare.kill().ok();
                return Err("the private host did not boot within 20 s".into());
            }
        }
        let children = std::fs::read_to_string(format!("/proc/{}/task/{}/children", unshare.id(), unshare.id()))
            .map_err(|e| format!("cannot find the host's init: {e}"))?;
        let init = children.split_whitespace().next().and_then(|p| p.parse().ok()).ok_or("no init process")?;
        Ok(PrivateHost { unshare, init, _state: state, _cgroups: cgroups })
    }

    /// A command that runs inside the host, with the user manager's environment.
    pub(crate) fn command(&self, argv: &[&str]) -> Command {
        self.command_in(Path::new("/"), argv)
    }

    /// A command inside the host, started in `dir` (a path of the real filesystem, which the
    /// host shares outside its private /run).
    pub(crate) fn command_in(&self, dir: &Path, argv: &[&str]) -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.args(["--target", &self.init.to_string(), "--mount", "--net", "--pid"]);
        cmd.arg(format!("--wd={}", dir.display()));
        cmd.args(["--", "env"]);
        for (k, v) in ENV {
            cmd.arg(format!("{k}={v}"));
        }
        cmd.args(argv);
        cmd
    }

    /// Runs a command inside and returns its output.
    #[track_caller]
    pub(crate) fn exec(&self, argv: &[&str]) -> Output {
        self.command(argv).stdin(Stdio::null()).output().expect("nsenter")
    }

    /// Installs a user unit and reloads the manager.
    #[track_caller]
    pub(crate) fn install_unit(&self, name: &str, text: &str) {
        let path = format!("/run/user/0/systemd/user/{name}");
        let mut child = self.command(&["sh", "-c", &format!("cat > {path}")]).stdin(Stdio::piped()).spawn().unwrap();
        use std::io::Write;
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
        assert!(child.wait().unwrap().success(), "writing {path}");
        let out = self.exec(&["systemctl", "--user", "daemon-reload"]);
        assert!(out.status.success(), "daemon-reload: {}", String::from_utf8_lossy(&out.stderr));
    }

    /// `systemctl --user ARGS` inside; stdout.
    #[track_caller]
    pub(crate) fn systemctl(&self, args: &[&str]) -> String {
        let mut argv = vec!["systemctl", "--user"];
        argv.extend_from_slice(args);
        String::from_utf8_lossy(&self.exec(&argv).stdout).trim().to_string()
    }

    /// Runs the opsbook under test inside the host, in `dir`, against the user manager.
    #[track_caller]
    pub(crate) fn opsbook(&self, dir: &Path, args: &[&str]) -> super::Output {
        let mut argv = vec![super::opsbook(), "--user"];
        argv.extend_from_slice(args);
        let mut cmd = self.command_in(dir, &argv);
        let out = cmd.stdin(Stdio::null()).output().expect("run opsbook inside");
        super::Output::from_raw(out, dir)
    }
}

impl Drop for PrivateHost {
    fn drop(&mut self) {
        // SIGKILL to the namespace's init takes journald and the manager with it.
        // SAFETY: kill(2) on a pid we started.
        unsafe {
            libc::kill(self.init as i32, libc::SIGKILL);
        }
        self.unshare.kill().ok();
        self.unshare.wait().ok();
        // Remove the host's (now empty) cgroups, deepest first.
        if let Ok(cg) = std::fs::read_to_string(self._state.path().join("cgroup")) {
            remove_cgroup(Path::new(cg.trim()));
        }
    }
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
