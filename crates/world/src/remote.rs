//! The world of another host, reached over its one shared OpenSSH connection
//! (`crate::transport::Ssh`): its service manager through its bus socket forwarded over it, or
//! `systemd-stdio-bridge` (one D-Bus connection for the run), its journal, commands, containers
//! and files as sessions of the same connection (`Ssh::exec`: no local process), and endpoints
//! that listen only on its loopback through unix sockets forwarded over it.

use std::sync::Arc;
use std::time::Duration;

use super::commands::{Commands, Completed, Invocation};
use super::endpoints::{Endpoints, destination};
use super::{BoxFuture, World, containers, files, journal, net, systemd_dbus};
use crate::transport::control::Remote;
use crate::transport::{BusScope, Ssh};
use opsbook_base::config::{Config, Origin, Value, keys};
use opsbook_base::error::Error;

/// What a remote command may take beyond its own timeout before ssh is given up on.
const SSH_MARGIN: Duration = Duration::from_secs(5);

/// Commands run on the host as sessions of its shared connection (`Ssh::exec`). The environment
/// does not cross ssh, so it goes on the command line (`env K=V …`); closing a session does not
/// stop a remote command (no tty), so the host's own `timeout` ends it.
pub(crate) struct SshCommands {
    pub ssh: Arc<Ssh>,
}

impl Commands for SshCommands {
    fn run<'a>(&'a self, inv: &'a Invocation) -> BoxFuture<'a, Result<Completed, String>> {
        Box::pin(async move {
            let mut remote = vec!["env".to_string()];
            remote.extend(inv.env.iter().map(|(k, v)| format!("{k}={v}")));
            let secs = inv.timeout.as_secs_f64().max(0.1);
            remote.extend(["timeout".into(), "-k".into(), "2".into(), format!("{secs:.1}s")]);
            remote.extend(inv.argv.iter().cloned());
            let host = &self.ssh.target().name;
            let limit = inv.timeout + SSH_MARGIN;
            let mut done = self.ssh.exec(&remote, inv.stdin.clone(), limit).await.map_err(|e| not_run(host, inv, e))?;
            // 124 is `timeout`'s.
            match done.code {
                Some(127) if done.stderr.contains("No such file") || done.stderr.contains("not found") => {
                    let program = inv.argv.first().cloned().unwrap_or_default();
                    return Err(format!("`{program}` not found in PATH on host {host}"));
                }
                Some(124) => {
                    done.timed_out = true;
                    done.code = None;
                }
                _ => {}
            }
            Ok(done)
        })
    }
}

/// Why `inv` did not run on the host or was stopped, naming the remote command.
fn not_run(host: &str, inv: &Invocation, reason: String) -> String {
    let program = inv.argv.first().map(String::as_str).unwrap_or_default();
    if opsbook_base::process::printed_too_much(&reason) {
        let pipe = if reason.ends_with("on stdout: it was stopped") { "stdout" } else { "stderr" };
        return format!(
            "`{program}` on host {host} printed more than {} MiB on {pipe}: it was stopped; have it print less \
             (filter or count on the host, e.g. `| tail -n 1000`), or read a large file in parts",
            opsbook_base::process::MAX_OUTPUT >> 20
        );
    }
    if reason.starts_with("ssh to host ") {
        return reason;
    }
    format!("cannot run `{program}` on host {host}: {reason}")
}

impl World {
    /// The world of the host `ssh` reaches, acting on its `scope` manager (`user`: the login
    /// user's, as `systemctl --user`), its endpoints through the sockets `endpoints` names
    /// (`endpoints_from_host`, `routes`). Cheap: the D-Bus connection is made on the first unit call.
    pub fn over_ssh(config: &Config, ssh: Arc<Ssh>, user: bool, endpoints: Endpoints) -> Result<World, Error> {
        let scope = if user { BusScope::User } else { BusScope::System };
        let name = ssh.target().name.clone();
        let commands: Arc<dyn Commands> = Arc::new(SshCommands { ssh: ssh.clone() });
        Ok(World {
            hostname: Some(name.clone()),
            units: Arc::new(systemd_dbus::SystemdDbus::over(ssh.bus_routes(scope), user, &name)),
            journal: Arc::new(journal::Journalctl {
                user: false,
                timeout: config.duration(keys::JOURNAL_TIMEOUT),
                via: Some(ssh.clone()),
            }),
            commands: commands.clone(),
            containers: Arc::new(containers::Podman {
                program: config.text(keys::CONTAINER_RUNTIME),
                commands: commands.clone(),
                timeout: config.duration(keys::TOOLS_TIMEOUT),
            }),
            files: Arc::new(files::CommandFiles {
                commands: commands.clone(),
                timeout: config.duration(keys::TOOLS_TIMEOUT),
            }),
            net: Arc::new(net::CommandNet { commands }),
            endpoints,
            change_lock: Arc::new(crate::change_lock::HostLock::new(
                &name,
                Box::new(crate::change_lock::RemoteLock { ssh: ssh.clone(), user_scope: user }),
            )),
            connection: Some(ssh),
            sandbox: false,
        })
    }
}

/// Each endpoint of `config` reached *from the host*: forwarded over `ssh` to where the host
/// itself connects — its own loopback (the shipper's 127.0.0.1:12345, often the servers too),
/// or the server a client sends to — through a unix socket of the operator's alone. So
/// endpoints that listen only on a loopback are never opened to the network, nor to other
/// users of the operator's machine, and a server whose firewall admits only its clients is
/// asked through a client, as that client sees it. The URLs keep the host's own address (their
/// origin says they are forwarded).
/// `https://` addresses elsewhere than the host's loopback are left as they are (their
/// certificate names that host, not a forwarded socket).
///
/// This returns, for the host `name` and before connecting (so a new master starts with their
/// forwards, `Ssh::connect_with`), the configuration with their origin set and where each
/// leads; `routes` then names their sockets on the connection.
pub fn endpoints_from_host(config: &Config, name: &str) -> Result<(Config, Vec<Remote>), Error> {
    let mut config = config.clone();
    let mut reached = Vec::new();
    for key in opsbook_base::components::all().iter().filter(|c| c.serves()).map(|c| keys::of(c, "url")) {
        let url = config.text(key);
        let Some((scheme, host, port)) = destination(&url) else { continue };
        let loopback = host == "localhost" || host == "::1" || host.starts_with("127.");
        if scheme == "https" && !loopback {
            continue;
        }
        config.set(key, Value::Text(url), Origin::Forwarded(name.to_string()))?;
        let remote = Remote::Port(host, port);
        if !reached.contains(&remote) {
            reached.push(remote);
        }
    }
    Ok((config, reached))
}

/// Requests to each of `reached` go through its socket on `ssh`.
pub fn routes(ssh: &Ssh, reached: &[Remote]) -> Endpoints {
    let routes = reached
        .iter()
        .filter_map(|remote| match remote {
            Remote::Port(host, port) => Some((host.clone(), *port, ssh.forward_socket(remote))),
            Remote::Socket(_) => None,
        })
        .collect();
    Endpoints::new(routes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_remote_command_printing_too_much_is_told_to_print_less_not_to_install_ssh() {
        let inv = Invocation { argv: vec!["cat".into(), "/dev/zero".into()], ..Invocation::default() };
        assert_eq!(
            not_run("c1", &inv, "`ssh` printed more than 16 MiB on stdout: it was stopped".into()),
            "`cat` on host c1 printed more than 16 MiB on stdout: it was stopped; have it print less (filter or count \
             on the host, e.g. `| tail -n 1000`), or read a large file in parts"
        );
        let too_long = "cannot start `ssh`: its command line is longer than this machine lets a program start with \
                        (E2BIG); pass large data in a file or on standard input rather than as arguments";
        assert_eq!(not_run("c1", &inv, too_long.into()), format!("cannot run `cat` on host c1: {too_long}"));
    }
}
