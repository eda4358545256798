//! The ways to a host's service manager over its shared connection, best first.
//!
//! For root, the host's bus socket forwarded like an endpoint: the master relays it, so no
//! process starts on either machine (the system bus, or root's session bus for `scope =
//! "user"`), and `EXTERNAL` authentication claims uid 0 — sshd connects as the login user, so
//! that is what the bus sees. For any login user, and where the host's sshd forbids socket
//! forwarding, `systemd-stdio-bridge` run over the connection, as `systemctl -H` does.

use zbus::address::transport::{Transport, Unix, UnixSocket, Unixexec};

use super::connection::Ssh;
use super::target::{BusScope, SshTarget};
use crate::transport::control::Remote;
use crate::transport::shell_quote;

/// One way to reach the host's manager.
#[derive(Debug, Clone)]
pub struct BusRoute {
    /// Never text: zbus 5 writes `unixexec` arguments percent-escaped but does not decode them
    /// when it parses such text, so a round trip through a string would hand ssh
    /// `ControlPath%3d…`.
    pub address: zbus::Address,
    /// The uid `EXTERNAL` authentication claims; `None`: this process's own (the bridge runs
    /// as the login user and speaks for itself).
    pub user_id: Option<u32>,
    /// How messages name the route.
    pub via: &'static str,
}

impl SshTarget {
    /// The host's bus socket for `scope`, when it can be forwarded: the login user is root,
    /// whose uid (and so whose session bus) is known without asking the host.
    pub fn bus_socket(&self, scope: BusScope) -> Option<Remote> {
        if self.user.as_deref() != Some("root") {
            return None;
        }
        Some(Remote::Socket(match scope {
            BusScope::System => "/run/dbus/system_bus_socket".into(),
            BusScope::User => "/run/user/0/bus".into(),
        }))
    }
}

impl Ssh {
    /// The routes to the host's manager for `scope`, best first (see the module's doc). A
    /// forward the master refuses leaves the bridge alone, with the reason in the debug log.
    pub fn bus_routes(&self, scope: BusScope) -> Vec<BusRoute> {
        let mut routes = Vec::new();
        if let Some(remote) = self.target.bus_socket(scope) {
            match self.forward_all(std::slice::from_ref(&remote)) {
                Ok(locals) => routes.push(BusRoute {
                    address: zbus::Address::from(Transport::Unix(Unix::new(UnixSocket::File(locals[0].clone())))),
                    user_id: Some(0),
                    via: "its bus socket forwarded",
                }),
                Err(e) => tracing::debug!("{e}; the bus is reached through systemd-stdio-bridge"),
            }
        }
        routes.push(BusRoute { address: self.bridge_address(scope), user_id: None, via: "systemd-stdio-bridge" });
        routes
    }

    /// A zbus address whose connection runs `systemd-stdio-bridge` on the host over the shared
    /// connection, as `systemctl -H` does.
    pub fn bridge_address(&self, scope: BusScope) -> zbus::Address {
        let remote = match scope {
            BusScope::System => vec!["systemd-stdio-bridge".to_string()],
            // `--user` does not find the bus over ssh on systemd 252; the explicit path does.
            // root's uid is known; any other login user's is the host's to say: `sh` expands
            // it there, which saves a round trip for `id -u`.
            BusScope::User if self.target.user.as_deref() == Some("root") => {
                vec!["systemd-stdio-bridge".to_string(), "--bus-path=unix:path=/run/user/0/bus".into()]
            }
            BusScope::User => vec![
                "sh".to_string(),
                "-c".into(),
                "exec systemd-stdio-bridge --bus-path=unix:path=/run/user/$(id -u)/bus".into(),
            ],
        };
        let mut argv = self.client();
        // zbus lets the bridge's stderr through to ours: keep ssh's chatter out of reports.
        argv.splice(1..1, ["-o".to_string(), "LogLevel=ERROR".to_string()]);
        argv.push("--".into());
        argv.push(shell_quote::join(&remote));
        let (program, args) = argv.split_first().expect("ssh is first");
        let exec = Unixexec::new(program.into(), None, args.iter().map(Into::into).collect());
        zbus::Address::from(Transport::Unixexec(exec))
    }
}

#[cfg(test)]
mod tests {
    use super::super::connection::tests::unconnected;
    use super::*;

    /// The bridge's argv, as ssh will get it.
    fn bridge_argv(address: &zbus::Address) -> Vec<String> {
        let Transport::Unixexec(exec) = address.transport() else { panic!("not unixexec: {address}") };
        let mut argv = vec![exec.path().display().to_string()];
        argv.extend(exec.args().iter().map(|a| a.to_string_lossy().into_owned()));
        argv
    }

    #[test]
    fn the_bridge_runs_over_the_shared_connection() {
        let ssh = unconnected();
        let common = "ssh -o LogLevel=ERROR -o ControlPath=/nonexistent/d/cm -o ControlMaster=no -T -o BatchMode=yes \
                      -o ConnectTimeout=10 -p 2222 -i /keys/id -o StrictHostKeyChecking=no root@10.0.0.5 --";
        assert_eq!(
            bridge_argv(&ssh.bridge_address(BusScope::User)).join(" "),
            format!("{common} systemd-stdio-bridge --bus-path=unix:path=/run/user/0/bus")
        );
        let mut deploy = unconnected();
        deploy.target.user = Some("deploy".into());
        assert_eq!(
            bridge_argv(&deploy.bridge_address(BusScope::User)).join(" "),
            format!("{common} sh -c 'exec systemd-stdio-bridge --bus-path=unix:path=/run/user/$(id -u)/bus'")
                .replace("root@", "deploy@")
        );
        assert_eq!(
            bridge_argv(&ssh.bridge_address(BusScope::System)).join(" "),
            format!("{common} systemd-stdio-bridge")
        );
    }

    #[test]
    fn only_root_s_bus_socket_is_forwarded() {
        let ssh = unconnected();
        assert_eq!(ssh.target.bus_socket(BusScope::System), Some(Remote::Socket("/run/dbus/system_bus_socket".into())));
        assert_eq!(ssh.target.bus_socket(BusScope::User), Some(Remote::Socket("/run/user/0/bus".into())));
        let mut deploy = unconnected();
        deploy.target.user = Some("deploy".into());
        assert_eq!(deploy.target.bus_socket(BusScope::System), None);
        assert_eq!(
            deploy.bus_routes(BusScope::System).iter().map(|r| r.via).collect::<Vec<_>>(),
            ["systemd-stdio-bridge"]
        );
    }
}
