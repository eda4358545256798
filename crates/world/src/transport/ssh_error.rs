//! What can go wrong reaching a host over ssh, worded for operators: the host named, ssh's
//! own words quoted, and a remedy where what ssh said makes one clear.

use std::fmt;
use std::time::Duration;

/// What went wrong reaching a host; every variant names the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SshError {
    /// ssh is not installed (or not executable).
    NoSsh {
        /// The host, by its inventory name.
        host: String,
        /// Why it could not be run.
        reason: String,
    },
    /// ssh was there but could not be started (a command line too long), or it was stopped
    /// for printing more than a command may: `reason` says which.
    NotRun {
        /// The host, by its inventory name.
        host: String,
        /// Which of the two, in words.
        reason: String,
    },
    /// ssh ran and failed; `stderr` is what it said.
    Failed {
        /// The host, by its inventory name.
        host: String,
        /// What ssh was asked to do.
        what: String,
        /// What ssh wrote on stderr.
        stderr: String,
    },
    /// ssh did not finish in time.
    TimedOut {
        /// The host, by its inventory name.
        host: String,
        /// What ssh was asked to do.
        what: String,
        /// How long it was given.
        after: Duration,
    },
    /// The address or user cannot be handed to ssh as they are.
    BadTarget {
        /// The host, by its inventory name.
        host: String,
        /// What is wrong with them.
        problem: String,
    },
    /// The private control directory could not be made.
    ControlDir {
        /// The host, by its inventory name.
        host: String,
        /// Why, in words.
        reason: String,
    },
}

impl fmt::Display for SshError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SshError::NoSsh { host, reason } => {
                write!(f, "cannot reach host `{host}`: {reason}; remedy: install the OpenSSH client (`ssh`)")
            }
            SshError::NotRun { host, reason } if opsbook_base::process::printed_too_much(reason) => write!(
                f,
                "cannot reach host `{host}`: {reason}; remedy: the host printed more than opsbook keeps (a login \
                 banner, its shell's start-up files or the command's own output): have it print less"
            ),
            SshError::NotRun { host, reason } => write!(f, "cannot reach host `{host}`: {reason}"),
            SshError::Failed { host, what, stderr } => {
                let said = stderr.trim();
                let said = if said.is_empty() { "(nothing on stderr)" } else { said };
                write!(f, "host `{host}`: {what} failed: ssh said {said:?}")?;
                if let Some(remedy) = remedy(said) {
                    write!(f, "; remedy: {remedy}")?;
                }
                Ok(())
            }
            SshError::TimedOut { host, what, after } => {
                write!(f, "host `{host}`: {what} got no answer within {}s", after.as_secs_f64())
            }
            SshError::BadTarget { host, problem } => {
                write!(f, "host `{host}`: {problem}; remedy: correct the host's entry in the inventory")
            }
            SshError::ControlDir { host, reason } => {
                write!(f, "cannot make a private directory for the connection to host `{host}`: {reason}")
            }
        }
    }
}

impl std::error::Error for SshError {}

/// What an operator can do about what ssh said, where that is clear.
fn remedy(stderr: &str) -> Option<&'static str> {
    if stderr.contains("Permission denied") {
        Some(
            "check the key given for this host and that its public half is in the host's authorized_keys; \
             opsbook never prompts, so a key with a passphrase must be loaded in ssh-agent",
        )
    } else if stderr.contains("Host key verification failed") {
        Some("the host's key is unknown or changed: connect once with `ssh` yourself and check its fingerprint")
    } else if ["Connection refused", "No route to host", "timed out", "Network is unreachable"]
        .iter()
        .any(|s| stderr.contains(s))
    {
        Some("check that sshd runs on the host and that its port is reachable from here")
    } else if stderr.contains("Could not resolve hostname") {
        Some("check the host's address in the inventory")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_host_quote_ssh_and_give_a_remedy() {
        let e = SshError::Failed {
            host: "c2".into(),
            what: "connecting".into(),
            stderr: "root@10.0.0.5: Permission denied (publickey).\n".into(),
        };
        assert_eq!(
            e.to_string(),
            "host `c2`: connecting failed: ssh said \"root@10.0.0.5: Permission denied (publickey).\"; remedy: \
             check the key given for this host and that its public half is in the host's authorized_keys; opsbook \
             never prompts, so a key with a passphrase must be loaded in ssh-agent"
        );
    }

    #[test]
    fn only_a_missing_ssh_is_told_to_install_openssh() {
        let host = || "c1".to_string();
        let missing = SshError::NoSsh { host: host(), reason: "`ssh` is not installed or not in PATH".into() };
        assert_eq!(
            missing.to_string(),
            "cannot reach host `c1`: `ssh` is not installed or not in PATH; remedy: install the OpenSSH client (`ssh`)"
        );
        let flood = SshError::NotRun {
            host: host(),
            reason: "`ssh` printed more than 16 MiB on stderr: it was stopped".into(),
        };
        assert_eq!(
            flood.to_string(),
            "cannot reach host `c1`: `ssh` printed more than 16 MiB on stderr: it was stopped; remedy: the host printed \
             more than opsbook keeps (a login banner, its shell's start-up files or the command's own output): have \
             it print less"
        );
        let long = "cannot start `ssh`: its command line is longer than this machine lets a program start with (E2BIG); \
                    pass large data in a file or on standard input rather than as arguments";
        assert_eq!(
            SshError::NotRun { host: host(), reason: long.into() }.to_string(),
            format!("cannot reach host `c1`: {long}")
        );
    }
}
