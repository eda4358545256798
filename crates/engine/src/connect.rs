//! Reaching one inventory host: its configuration and the world calls act on.
//!
//! A host with no address is this machine (`World::real`). Any other is reached over one
//! shared OpenSSH connection (`opsbook_world::transport::Ssh`): its service manager, journal, commands
//! and files over that connection, and its endpoints through sockets forwarded over it, so they
//! are asked from the host itself (`world::remote::endpoints_from_host`). Used by fleet runs (a
//! session per host), the REPL's `--host`, and `fleet::on` (a block acting on another host).

use std::sync::Arc;

use opsbook_base::config::{Config, keys};
use opsbook_inventory::Host;
use opsbook_world::transport::{BusScope, Ssh, SshTarget};
use opsbook_world::{World, remote};

/// The configuration and world of `h`; `Err` quotes why it cannot be reached (ssh's words).
pub fn open(h: &Host) -> Result<(Config, World), String> {
    let config = h.config().clone();
    let Some(address) = &h.address else { return Ok((config.clone(), World::real(&config))) };
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
    let (config, mut wanted) = remote::endpoints_from_host(&config, &h.name).map_err(|e| e.to_string())?;
    let endpoints = wanted.len();
    let user = config.text(keys::SCOPE) == "user";
    wanted.extend(target.bus_socket(if user { BusScope::User } else { BusScope::System }));
    let ssh = Arc::new(Ssh::connect_with(target, &wanted).map_err(|e| e.to_string())?);
    let endpoints = remote::routes(&ssh, &wanted[..endpoints]);
    let world = World::over_ssh(&config, ssh, user, endpoints).map_err(|e| e.to_string())?;
    Ok((config, world))
}
