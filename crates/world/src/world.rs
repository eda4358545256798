//! The world a run acts through: the implementations of every seam, chosen once per run, and
//! `World::real`, the one built for this machine.

use std::sync::Arc;

use opsbook_base::config::Config;
use opsbook_base::config::keys;

use crate::{
    change_lock, commands, containers, endpoints, files, hostname, journal, local_files, net, systemd_dbus, transport,
    units,
};

/// The implementations a run acts through, chosen once per run.
#[derive(Clone)]
pub struct World {
    /// The host's name when it is not this machine (a simulated or a remote host).
    pub hostname: Option<String>,
    /// The service manager.
    pub units: Arc<dyn units::Units>,
    /// The journal.
    pub journal: Arc<dyn journal::Journal>,
    /// Running programs.
    pub commands: Arc<dyn commands::Commands>,
    /// The containers.
    pub containers: Arc<dyn containers::Containers>,
    /// What the host reaches over the network, asked from the host itself.
    pub net: Arc<dyn net::Net>,
    /// Reading and changing the host's files.
    pub files: Arc<dyn files::Files>,
    /// Endpoints reached through sockets forwarded to the host (none on this machine).
    pub endpoints: endpoints::Endpoints,
    /// Over ssh: the host's shared connection; `None` on this machine and in the sandbox.
    pub connection: Option<Arc<transport::Ssh>>,
    /// Under `--sandbox`: verbs with no simulation there (user accounts) refuse, rather than
    /// act on this machine.
    pub sandbox: bool,
    /// The host's change lock (`change_lock`): one run changes a host at a time.
    pub change_lock: Arc<change_lock::HostLock>,
}

impl World {
    /// The real machine: system or user service manager per `scope`, real processes.
    /// Cheap: nothing connects until first use (`list`, `check` and `fns` build one too).
    pub fn real(config: &Config) -> World {
        let user = config.text(keys::SCOPE) == "user";
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;
        let commands: Arc<dyn commands::Commands> = Arc::new(commands::Processes);
        World {
            hostname: None,
            units: Arc::new(systemd_dbus::SystemdDbus::new(user)),
            // root reads every journal file; an unprivileged user reads its own with --user.
            journal: Arc::new(journal::Journalctl {
                user: user && !root,
                timeout: config.duration(keys::JOURNAL_TIMEOUT),
                via: None,
            }),
            commands: commands.clone(),
            containers: Arc::new(containers::Podman {
                program: config.text(keys::CONTAINER_RUNTIME),
                commands,
                timeout: config.duration(keys::TOOLS_TIMEOUT),
            }),
            net: Arc::new(net::LocalNet),
            files: Arc::new(local_files::LocalFiles { root: None }),
            endpoints: endpoints::Endpoints::default(),
            connection: None,
            sandbox: false,
            change_lock: Arc::new(change_lock::HostLock::new(
                &hostname::this_machine(),
                Box::new(change_lock::LocalLock { dir: change_lock::lock_dir(user) }),
            )),
        }
    }

    /// Over ssh: whether the run found the host's lasting connection (`true`) or opened one;
    /// `None` on this machine and in the sandbox.
    pub fn ssh_reused(&self) -> Option<bool> {
        self.connection.as_ref().map(|ssh| ssh.reused())
    }

    /// Opens this machine's connection to its service manager in the background, so a run
    /// finds it ready once its runbook is compiled (the handshake overlaps the compile).
    pub fn warm_up(&self) {
        let units = self.units.clone();
        opsbook_base::shared_runtime().spawn(async move { units.warm_up().await });
    }
}
