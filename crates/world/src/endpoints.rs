//! Endpoints a world reaches through a unix socket instead of the network: a host reached over
//! ssh has its endpoints (the URLs of its configuration, as the host itself sees them)
//! forwarded over its connection to sockets only the operator can open (`transport::ssh`).
//! The HTTP client connects a request whose address is one of them through its socket; the
//! URL stays the host's own, so reports name the endpoint the host knows. The sandbox's world
//! reaches only its own servers (`only`): any other address — a real server on this machine's
//! loopback, the network — is refused in words before a byte is sent.

use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The endpoints of one world that are reached through sockets; empty on this machine and in
/// the sandbox. In the sandbox, the only addresses its world may reach.
#[derive(Debug, Clone, Default)]
pub struct Endpoints {
    routes: Arc<[Route]>,
    /// When set, no address but these is reached (the sandbox's own servers).
    only: Option<Arc<[std::net::SocketAddr]>>,
}

#[derive(Debug)]
struct Route {
    host: String,
    port: u16,
    socket: PathBuf,
}

impl Endpoints {
    /// Requests to each `(host, port)` go through its `socket`.
    pub fn new(routes: Vec<(String, u16, PathBuf)>) -> Endpoints {
        Endpoints {
            routes: routes.into_iter().map(|(host, port, socket)| Route { host, port, socket }).collect(),
            only: None,
        }
    }

    /// A world that reaches no address but `servers` (on loopback, named by address or as
    /// `localhost`): the sandbox's.
    pub fn only(servers: Vec<std::net::SocketAddr>) -> Endpoints {
        Endpoints { routes: Arc::new([]), only: Some(servers.into()) }
    }

    /// Why a request to `url` may not be sent from this world, when it may not: its address
    /// is none of the servers of `only`. A URL that is no http(s) address is left to the
    /// client to refuse.
    pub fn refusal(&self, url: &str) -> Option<String> {
        let (_, host, port) = destination(url)?;
        self.refused(&host, port, url)
    }

    /// Why a TCP connection to `address` (`HOST:PORT`) may not be opened from this world, when
    /// it may not (`refusal`'s rule).
    pub fn refusal_of_address(&self, address: &str) -> Option<String> {
        let (_, host, port) = destination(&format!("http://{address}/"))?;
        self.refused(&host, port, address)
    }

    fn refused(&self, host: &str, port: u16, shown: &str) -> Option<String> {
        let only = self.only.as_ref()?;
        let ours = only.iter().any(|server| {
            server.port() == port
                && (server.ip().to_string() == host || (host == "localhost" && server.ip().is_loopback()))
        });
        if ours {
            return None;
        }
        let servers: Vec<String> = only.iter().map(ToString::to_string).collect();
        Some(format!(
            "`{shown}` is outside the sandbox: a sandbox run reaches only its own stack ({}), never a real server",
            servers.join(", ")
        ))
    }

    /// The socket a request to `url` goes through, if its host and port are forwarded.
    pub fn socket_for(&self, url: &str) -> Option<&Path> {
        if self.routes.is_empty() {
            return None;
        }
        let (_, host, port) = destination(url)?;
        self.routes.iter().find(|r| r.host == host && r.port == port).map(|r| r.socket.as_path())
    }
}

/// `(scheme, host, port)` of an http(s) URL: the host without IPv6 brackets, lower-case, and
/// the scheme's port when none is written. `None` for what is not such a URL.
pub(crate) fn destination(url: &str) -> Option<(String, String, u16)> {
    let parsed = reqwest::Url::parse(url).ok()?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return None;
    }
    let host = parsed.host_str()?.trim_start_matches('[').trim_end_matches(']').to_string();
    Some((parsed.scheme().to_string(), host, parsed.port_or_known_default()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_forwarded_destination_is_found_by_host_and_port_whatever_the_path() {
        let e = Endpoints::new(vec![
            ("127.0.0.1".into(), 12345, "/d/a".into()),
            ("10.0.0.1".into(), 80, "/d/b".into()),
            ("::1".into(), 8086, "/d/c".into()),
        ]);
        assert_eq!(e.socket_for("http://127.0.0.1:12345/metrics?x=1"), Some(Path::new("/d/a")));
        assert_eq!(e.socket_for("http://10.0.0.1/ready"), Some(Path::new("/d/b")));
        assert_eq!(e.socket_for("https://[::1]:8086"), Some(Path::new("/d/c")));
        assert_eq!(e.socket_for("http://127.0.0.1:12346/"), None);
        assert_eq!(e.socket_for("not a url"), None);
        assert_eq!(Endpoints::default().socket_for("http://127.0.0.1:12345"), None);
    }

    #[test]
    fn a_world_confined_to_its_servers_refuses_every_other_address() {
        let e = Endpoints::only(vec!["127.0.0.1:40001".parse().unwrap(), "127.0.0.1:40002".parse().unwrap()]);
        assert_eq!(e.refusal("http://127.0.0.1:40001/health"), None);
        assert_eq!(e.refusal("http://localhost:40002/ready"), None);
        assert_eq!(
            e.refusal("http://127.0.0.1:8086/api/v2/write"),
            Some(
                "`http://127.0.0.1:8086/api/v2/write` is outside the sandbox: a sandbox run reaches only its own stack \
                 (127.0.0.1:40001, 127.0.0.1:40002), never a real server"
                    .into()
            )
        );
        for elsewhere in ["http://10.0.0.1:40001/", "https://127.0.0.1:40003/", "http://[::1]:40001/"] {
            assert!(e.refusal(elsewhere).is_some(), "{elsewhere}");
        }
        assert_eq!(e.refusal("not a url"), None, "left to the client");
        assert_eq!(Endpoints::default().refusal("http://10.0.0.1/"), None, "outside the sandbox, anything");
    }

    #[test]
    fn destinations_take_the_schemes_port_when_none_is_written() {
        assert_eq!(destination("https://Example.org/x"), Some(("https".into(), "example.org".into(), 443)));
        assert_eq!(destination("http://[::1]:3100"), Some(("http".into(), "::1".into(), 3100)));
        assert_eq!(destination("ftp://h/"), None);
    }
}
