//! The network seam: what a host reaches and which interfaces it has, seen *from that host*
//! (a client's reach of the server's ports is a connect from the client, not from the
//! operator's machine). Here: a socket and `/sys/class/net`. On another host: the same
//! questions asked through its commands (bash's `/dev/tcp`, `cat` of `/sys/class/net`). And names
//! resolved through this machine's resolver (`resolve`: the firewall names hosts as the inventory does).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::commands::{Commands, Invocation};
use crate::future::BoxFuture;

/// How a TCP connect ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// Connected, in this time.
    Connected(Duration),
    /// Refused: nothing listens there.
    Refused,
    /// No answer within the timeout.
    TimedOut,
    /// Another failure, in words.
    Failed(String),
}

/// An interface as the kernel reports it: `operstate` and the flags word.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Link {
    /// `operstate` (`up`, `down`, …).
    pub state: Option<String>,
    /// The interface's flags (`IFF_UP` …).
    pub flags: Option<i64>,
}

/// What the host reaches over the network, asked from the host itself.
pub trait Net: Send + Sync {
    /// Opens (and closes) a TCP connection to `host:port`.
    fn tcp_connect<'a>(&'a self, address: &'a str, timeout: Duration) -> BoxFuture<'a, Reach>;
    /// The interface's state (`Link::default()` when there is no such interface).
    fn link<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Link, String>>;
}

/// This machine, reaching only the servers `only` lists (a sandbox's own stack): a connection
/// to any other address is refused in words before a packet is sent. Its interfaces are this
/// machine's, read only.
pub struct ConfinedNet {
    /// The servers it may reach (`Endpoints::only`).
    pub only: crate::endpoints::Endpoints,
}

impl Net for ConfinedNet {
    fn tcp_connect<'a>(&'a self, address: &'a str, timeout: Duration) -> BoxFuture<'a, Reach> {
        match self.only.refusal_of_address(address) {
            Some(refused) => Box::pin(async move { Reach::Failed(refused) }),
            None => LocalNet.tcp_connect(address, timeout),
        }
    }

    fn link<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Link, String>> {
        LocalNet.link(name)
    }
}

/// This machine.
pub struct LocalNet;

impl Net for LocalNet {
    fn tcp_connect<'a>(&'a self, address: &'a str, timeout: Duration) -> BoxFuture<'a, Reach> {
        Box::pin(async move {
            let started = Instant::now();
            match tokio::time::timeout(timeout, tokio::net::TcpStream::connect(address)).await {
                Ok(Ok(_)) => Reach::Connected(started.elapsed()),
                Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Reach::Refused,
                Ok(Err(e)) => Reach::Failed(e.to_string()),
                Err(_) => Reach::TimedOut,
            }
        })
    }

    fn link<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Link, String>> {
        Box::pin(async move {
            let read = |file: &str| std::fs::read_to_string(format!("/sys/class/net/{name}/{file}")).ok();
            Ok(parse_link(read("operstate").as_deref(), read("flags").as_deref()))
        })
    }
}

fn parse_link(state: Option<&str>, flags: Option<&str>) -> Link {
    Link {
        state: state.map(|s| s.trim().to_string()).filter(|s| !s.is_empty()),
        flags: flags.and_then(|f| i64::from_str_radix(f.trim().trim_start_matches("0x"), 16).ok()),
    }
}

/// Another host, asked through its commands.
pub(crate) struct CommandNet {
    pub commands: Arc<dyn Commands>,
}

impl Net for CommandNet {
    fn tcp_connect<'a>(&'a self, address: &'a str, timeout: Duration) -> BoxFuture<'a, Reach> {
        Box::pin(async move {
            let Some((host, port)) = address.rsplit_once(':') else {
                return Reach::Failed(format!("`{address}` is not host:port"));
            };
            let host = host.trim_start_matches('[').trim_end_matches(']');
            // bash's /dev/tcp: no nc or curl needed on the host. The address goes in as
            // arguments, never into the script text.
            let argv = ["bash", "-c", "exec 3<>\"/dev/tcp/$0/$1\"", host, port].map(str::to_string).to_vec();
            let started = Instant::now();
            let invocation = Invocation { argv, timeout, ..Invocation::default() };
            match self.commands.run(&invocation).await {
                Ok(done) if done.timed_out => Reach::TimedOut,
                Ok(done) if done.code == Some(0) => Reach::Connected(started.elapsed()),
                Ok(done) if done.stderr.contains("Connection refused") => Reach::Refused,
                Ok(done) => Reach::Failed(last_line(&done.stderr)),
                Err(e) => Reach::Failed(e),
            }
        })
    }

    fn link<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Link, String>> {
        Box::pin(async move {
            let script =
                "cat \"/sys/class/net/$0/operstate\" 2>/dev/null; echo; cat \"/sys/class/net/$0/flags\" 2>/dev/null";
            let argv = ["sh", "-c", script, name].map(str::to_string).to_vec();
            let invocation = Invocation { argv, timeout: Duration::from_secs(10), ..Invocation::default() };
            let done = self.commands.run(&invocation).await?;
            let mut lines = done.stdout.lines().filter(|l| !l.trim().is_empty());
            let (state, flags) = (lines.next(), lines.next());
            Ok(parse_link(state, flags))
        })
    }
}

fn last_line(text: &str) -> String {
    let line = text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no answer");
    // bash prefixes its own name and the script: keep what the kernel said.
    line.rsplit(": ").next().unwrap_or(line).trim().to_string()
}

/// What a name resolved to through this machine's resolver (`resolve`).
pub enum Resolved {
    /// The first address it resolved to.
    To(std::net::IpAddr),
    /// No address.
    Nothing,
    /// The resolver failed, in words.
    Failed(String),
    /// No answer within the limit.
    TimedOut,
}

/// The first address `name` resolves to through this machine's resolver, within `limit`.
pub async fn resolve(name: &str, limit: std::time::Duration) -> Resolved {
    match tokio::time::timeout(limit, tokio::net::lookup_host(format!("{name}:0"))).await {
        Ok(Ok(mut addresses)) => addresses.next().map_or(Resolved::Nothing, |a| Resolved::To(a.ip())),
        Ok(Err(e)) => Resolved::Failed(e.to_string()),
        Err(_) => Resolved::TimedOut,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_and_errors_read_as_the_kernel_and_bash_say_them() {
        assert_eq!(parse_link(Some("up\n"), Some("0x1003\n")), Link { state: Some("up".into()), flags: Some(0x1003) });
        assert_eq!(parse_link(None, None), Link::default());
        assert_eq!(
            last_line(
                "bash: line 1: connect: No route to host\nbash: line 1: /dev/tcp/10.0.0.9/3100: No route to host\n"
            ),
            "No route to host"
        );
    }
}
