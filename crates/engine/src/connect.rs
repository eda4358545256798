//! Reaching one inventory host: its configuration and the world calls act on.
//!
//! A host with no address is this machine (`World::real`). Any other is reached over one
//! shared OpenSSH connection (`opsbook_world::transport::Ssh`): its service manager, journal, commands
//! and files over that connection, and its endpoints through sockets forwarded over it, so they
//! are asked from the host itself (`opsbook_world::endpoints_from_host`). Used by fleet runs (a
//! session per host), the REPL's `--host`, and `fleet::on` (a block acting on another host).
//! A fleet run opens its hosts in two halves (`begin`, `Opening::finish`), so one thread
//! starts every host's ssh master and waits for them together.

use std::sync::Arc;

use opsbook_base::config::{Config, keys};
use opsbook_base::process::{Completed, Running};
use opsbook_inventory::Host;
use opsbook_world::transport::control::Remote;
use opsbook_world::transport::{BusScope, Connecting, Contention, Ssh, SshTarget};
use opsbook_world::{World, endpoints_from_host, forwarded_routes};

/// The configuration and world of `h`; `Err` quotes why it cannot be reached (ssh's words).
pub fn open(h: &Host) -> Result<(Config, World), String> {
    begin(h, Contention::Wait)?.finish(None)
}

/// A host being reached: `begin` started its connection's master (`master` to watch it with
/// other hosts'), `finish` makes its world once that start ended. This machine needs neither.
pub struct Opening {
    config: Config,
    /// `None`: this machine.
    over: Option<Box<Over>>,
}

/// A host reached over ssh: its connection opening, and what the world is made with.
struct Over {
    connecting: Connecting,
    /// The forwards wanted: the endpoints' first, then the bus.
    wanted: Vec<Remote>,
    endpoints: usize,
    user: bool,
}

/// The first half of `open`: what `h` is reached with, its ssh master (if a new one is
/// needed) started and not waited for; `contention` says what to do when another connection
/// holds a lasting master's lock.
pub fn begin(h: &Host, contention: Contention) -> Result<Opening, String> {
    let config = h.config().clone();
    let Some(address) = &h.address else { return Ok(Opening { config, over: None }) };
    let mut target = SshTarget::new(h.name.clone(), address.value.clone());
    target.user = h.user.as_ref().map(|u| u.value.clone());
    target.port = h.port.as_ref().map(|p| p.value);
    target.key = h.key.as_ref().map(|k| std::path::PathBuf::from(&k.value));
    target.options = opsbook_base::config::list(&config.text(keys::SSH_OPTIONS));
    target.persist = Some(config.duration(keys::SSH_PERSIST));
    let max_masters = config.int(keys::SSH_MAX_MASTERS);
    if max_masters < 1 {
        return Err(format!(
            "`ssh.max_masters` is {max_masters}: it must be 1 or more (how many lasting ssh connections may stay \
             after a run; set ssh.persist = \"0\" for none)"
        ));
    }
    target.max_masters = usize::try_from(max_masters).unwrap_or(usize::MAX);
    // Everything the run forwards is known now, so a new master starts holding it.
    let (config, mut wanted) = endpoints_from_host(&config, &h.name).map_err(|e| e.to_string())?;
    let endpoints = wanted.len();
    let user = config.text(keys::SCOPE) == "user";
    wanted.extend(target.bus_socket(if user { BusScope::User } else { BusScope::System }));
    let connecting = Ssh::begin(target, &wanted, contention).map_err(|e| e.to_string())?;
    Ok(Opening { config, over: Some(Box::new(Over { connecting, wanted, endpoints, user })) })
}

impl Opening {
    /// The ssh master starting for this host, to watch (`process::Children`) and hand back to
    /// `finish`; `None` when there is nothing to wait for.
    pub fn master(&mut self) -> Option<Running> {
        self.over.as_mut().and_then(|over| over.connecting.master())
    }

    /// The second half of `open`: the host's configuration and world, given how its master's
    /// start ended (`None`: nothing was taken from `master`, so it is waited for here).
    pub fn finish(self, started: Option<Result<Completed, String>>) -> Result<(Config, World), String> {
        let Some(over) = self.over else {
            let world = World::real(&self.config);
            return Ok((self.config, world));
        };
        let Over { connecting, wanted, endpoints, user } = *over;
        let ssh = Arc::new(connecting.finish(started).map_err(|e| e.to_string())?);
        let endpoints = forwarded_routes(&ssh, &wanted[..endpoints]);
        let world = World::over_ssh(&self.config, ssh, user, endpoints).map_err(|e| e.to_string())?;
        Ok((self.config, world))
    }
}
