//! Where and how to reach one host (`SshTarget`: address, user, port, key, options, timeouts),
//! checked before ssh sees it, and which of its service managers a bus connection reaches
//! (`BusScope`).

use std::path::PathBuf;
use std::time::Duration;

use crate::transport::ssh_error::SshError;

/// How many lasting masters stay unless `ssh.max_masters` says otherwise.
pub const DEFAULT_MAX_MASTERS: usize = 64;

/// Where and how to reach one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// The host's name in the inventory, used in messages.
    pub name: String,
    /// What ssh connects to: an address, a DNS name or a `Host` alias of `~/.ssh/config`.
    pub address: String,
    /// The ssh user; `None`: ssh's own choice.
    pub user: Option<String>,
    /// The ssh port; `None`: ssh's own choice.
    pub port: Option<u16>,
    /// A private key file (`-i`); the agent and `~/.ssh/config` keys are still tried.
    pub key: Option<PathBuf>,
    /// Further `-o` options, each `Name=value`.
    pub options: Vec<String>,
    /// Gives up connecting after this (TCP connect and authentication).
    pub connect_timeout: Duration,
    /// How long the connection outlives the run for the next one to reuse; `None` or zero:
    /// it ends with the run.
    pub persist: Option<Duration>,
    /// At most this many lasting masters stay (`ssh.max_masters`): past it, the least
    /// recently used that no run uses are asked to exit.
    pub max_masters: usize,
}

impl SshTarget {
    /// A target with ssh's defaults for user, port and key, and a 10 s connect timeout.
    pub fn new(name: impl Into<String>, address: impl Into<String>) -> SshTarget {
        SshTarget {
            name: name.into(),
            address: address.into(),
            user: None,
            port: None,
            key: None,
            options: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            persist: None,
            max_masters: DEFAULT_MAX_MASTERS,
        }
    }

    /// An address or user that ssh would read as an option (`-oProxyCommand=…`) or split is
    /// refused: they come from inventories, which are not always ours.
    pub(super) fn check(&self) -> Result<(), SshError> {
        let bad = |what: &str, value: &str| {
            let problem = if value.is_empty() {
                format!("the {what} is empty")
            } else if value.starts_with('-') {
                format!("the {what} {value:?} starts with `-`, which ssh would read as an option")
            } else if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
                format!("the {what} {value:?} contains blanks or control characters")
            } else {
                return None;
            };
            Some(SshError::BadTarget { host: self.name.clone(), problem })
        };
        let user = self.user.as_deref().and_then(|u| bad("ssh user", u));
        match bad("address", &self.address).or(user) {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Everything that makes a connection to this target what it is: two targets alike share
    /// a lasting master.
    pub(super) fn identity(&self) -> String {
        let key = self.key.as_ref().map(|k| k.display().to_string()).unwrap_or_default();
        format!("{}|{}|{key}|{}", self.destination(), self.port.unwrap_or(0), self.options.join(","))
    }

    /// `user@address`, or the address alone when no user is given.
    pub(super) fn destination(&self) -> String {
        match &self.user {
            Some(user) => format!("{user}@{}", self.address),
            None => self.address.clone(),
        }
    }

    /// The options every ssh invocation for this target carries (before the destination).
    pub(super) fn options(&self) -> Vec<String> {
        let secs = self.connect_timeout.as_secs().max(1);
        let mut o: Vec<String> =
            vec!["-o".into(), "BatchMode=yes".into(), "-o".into(), format!("ConnectTimeout={secs}")];
        if let Some(port) = self.port {
            o.extend(["-p".into(), port.to_string()]);
        }
        if let Some(key) = &self.key {
            o.extend(["-i".into(), key.display().to_string()]);
        }
        for option in &self.options {
            o.extend(["-o".into(), option.clone()]);
        }
        o
    }
}

/// Which service manager of the host a D-Bus connection reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BusScope {
    /// The system manager (PID 1), through the system bus.
    System,
    /// The login user's manager, through that user's session bus.
    User,
}
