//! The one HTTP client a run uses: reqwest over rustls (ring), system roots plus an optional
//! CA file, no redirects (a probe reports a 30x instead of following it), a timeout on every
//! request covering connect, headers and body. Failures come back as a short reason an
//! operator can act on: "connection refused", "timed out after 5s", "TLS: …". A request to an
//! endpoint forwarded over ssh connects through its unix socket (`Request::through`), with the
//! URL, Host header and TLS name of the endpoint as the host knows it. Plain http through such
//! a socket, or to an IP address when no proxy is set, goes on a connection of its own
//! (`http_direct`); names and https go through reqwest's client.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use opsbook_base::config::Config;
use opsbook_base::config::keys;
use opsbook_base::secret::Secret;

use crate::http_direct::Way;

/// What both clients share: no redirects (a probe reports a 30x), a connect deadline.
fn builder() -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .connect_timeout(crate::http_direct::CONNECT_TIMEOUT)
        .user_agent(concat!("opsbook/", env!("CARGO_PKG_VERSION")))
}

/// The process's client for plain http to addresses reached directly: no certificate store
/// is loaded (reading the system's hundreds of roots is most of a quick check's start-up), and
/// it depends on no setting (timeouts and size limits are per request), so every host's
/// `Http` shares it and its connections; built on the first such request.
fn plain() -> Result<reqwest::Client, String> {
    static PLAIN: std::sync::OnceLock<Result<reqwest::Client, String>> = std::sync::OnceLock::new();
    PLAIN
        .get_or_init(|| {
            builder()
                .tls_certs_only([])
                .build()
                .map_err(|e| format!("cannot set up HTTP: {}", reason(&e, Duration::ZERO)))
        })
        .clone()
}

/// The one HTTP client of a run: every answer read up to `http.max_body`, https with the
/// system's roots and `http.ca_file`.
pub struct Http {
    /// For https:// addresses: system roots plus `http.ca_file`, built on the first such request.
    secure: std::sync::OnceLock<Result<reqwest::Client, String>>,
    /// For https:// endpoints forwarded to unix sockets: one client per socket, built on the
    /// first request through it (plain http through a socket is `http_direct`'s).
    through: Mutex<HashMap<PathBuf, reqwest::Client>>,
    ca_file: String,
    pub(crate) default_timeout: Duration,
    /// The largest answer read (`http.max_body`, in MB): a larger one is not read on.
    max_body_mb: u64,
}

/// A request to send.
pub struct Request<'a> {
    /// The method.
    pub method: reqwest::Method,
    /// The URL.
    pub url: String,
    /// Headers sent beside the client's own.
    pub headers: Vec<(String, String)>,
    /// The body, if any.
    pub body: Option<Vec<u8>>,
    /// How long the whole request may take; `None`: the client's default.
    pub timeout: Option<Duration>,
    /// Sent as `Authorization: Token …`, marked sensitive so no log shows it.
    pub token: Option<&'a Secret>,
    /// The unix socket the connection goes through (an endpoint forwarded over ssh).
    pub through: Option<PathBuf>,
}

impl<'a> Request<'a> {
    /// A request of `method` to `url`, with no headers, body or token.
    pub fn new(method: reqwest::Method, url: impl Into<String>) -> Request<'a> {
        Request { method, url: url.into(), headers: Vec::new(), body: None, timeout: None, token: None, through: None }
    }

    /// Connects through the unix socket `socket` instead of to the URL's host and port.
    pub fn through(mut self, socket: Option<&Path>) -> Self {
        self.through = socket.map(Path::to_path_buf);
        self
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Sends `token` as `Authorization: Token …`.
    pub fn token(mut self, token: Option<&'a Secret>) -> Self {
        self.token = token;
        self
    }

    /// Sets the timeout (`None`: the client's default).
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }
}

/// What came back.
#[derive(Debug, Clone)]
pub struct Response {
    /// The HTTP status.
    pub status: u16,
    /// Lower-case names, in order.
    pub headers: Vec<(String, String)>,
    /// The body as text (empty when it was too large to read).
    pub body: String,
    /// How long the request took.
    pub elapsed: Duration,
    /// Why the body was not read: `answer larger than 16 MB from URL` (then `body` is empty).
    pub too_large: Option<String>,
}

impl Response {
    /// The value of the header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// The `Content-Type` header, empty when none was sent.
    pub fn content_type(&self) -> &str {
        self.header("content-type").unwrap_or("")
    }

    /// `HTTP 503: Ingester not ready…` — the status and the start of the body.
    pub fn summary(&self) -> String {
        let body = opsbook_wire::excerpt(&self.body, 160);
        if body.is_empty() { format!("HTTP {}", self.status) } else { format!("HTTP {}: {body}", self.status) }
    }
}

impl Http {
    /// The client `config` describes (`http.*` keys); nothing connects until the first request.
    pub fn new(config: &Config) -> Result<Http, String> {
        // One crypto provider for the whole process; a second install is harmless.
        let _ = rustls::crypto::ring::default_provider().install_default();
        Ok(Http {
            secure: std::sync::OnceLock::new(),
            through: Mutex::new(HashMap::new()),
            ca_file: config.text(keys::HTTP_CA_FILE),
            default_timeout: config.duration(keys::HTTP_TIMEOUT),
            max_body_mb: config.int(keys::HTTP_MAX_BODY).max(1) as u64,
        })
    }

    /// The client for `url`: the TLS one (built now if this is the first https:// request);
    /// through a socket, that socket's (plain http through a socket never comes here:
    /// `http_direct` sends it).
    fn client_for(&self, url: &str, through: Option<&Path>) -> Result<reqwest::Client, String> {
        let secure = url.get(..8).is_some_and(|scheme| scheme.eq_ignore_ascii_case("https://"));
        if !secure {
            return plain();
        }
        let Some(socket) = through else {
            return self.secure.get_or_init(|| self.build_secure(None)).clone();
        };
        let mut clients = self.through.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(client) = clients.get(socket) {
            return Ok(client.clone());
        }
        let client = self.build_secure(Some(socket))?;
        clients.insert(socket.to_path_buf(), client.clone());
        Ok(client)
    }

    fn build_secure(&self, through: Option<&Path>) -> Result<reqwest::Client, String> {
        let mut builder = builder();
        if let Some(socket) = through {
            builder = builder.unix_socket(socket);
        }
        if !self.ca_file.is_empty() {
            let ca_file = &self.ca_file;
            let pem = opsbook_base::read_text(Path::new(ca_file), opsbook_base::InputKind::CA_FILE)
                .map_err(|refused| match refused {
                    opsbook_base::Refused::Io(e) => format!("cannot read http.ca_file `{ca_file}`: {e}"),
                    other => {
                        format!("http.ca_file: {}", other.explain(opsbook_base::InputKind::CA_FILE, ca_file.as_ref()))
                    }
                })?
                .into_bytes();
            let cert = reqwest::Certificate::from_pem(&pem).map_err(|e| format!("http.ca_file `{ca_file}`: {e}"))?;
            builder = builder.tls_certs_merge([cert]);
        }
        builder.build().map_err(|e| format!("cannot set up HTTPS: {}", reason(&e, Duration::ZERO)))
    }

    /// Sends a request; `Err` is a reason (the server gave no HTTP answer).
    pub async fn send(&self, request: Request<'_>) -> Result<Response, String> {
        let timeout = request.timeout.unwrap_or(self.default_timeout);
        let url = crate::http_explain::check_url(&request.url)?;
        let started = Instant::now();
        let mut headers = HeaderMap::new();
        for (k, v) in &request.headers {
            let name = HeaderName::from_bytes(k.as_bytes()).map_err(|_| format!("invalid header name `{k}`"))?;
            let value = HeaderValue::from_str(v).map_err(|_| format!("invalid value for header `{k}`"))?;
            headers.append(name, value);
        }
        if let Some(token) = request.token {
            let mut value = HeaderValue::from_str(&format!("Token {}", token.expose()))
                .map_err(|_| "the API token has characters a header cannot carry")?;
            value.set_sensitive(true);
            headers.insert(reqwest::header::AUTHORIZATION, value);
        }
        let limit = usize::try_from(self.max_body_mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX);
        let way = match request.through.as_deref() {
            Some(socket) => Some(Way::Socket(socket)),
            None => direct(&url).map(Way::Address),
        };
        if let Some(way) = way
            && url.scheme() == "http"
        {
            let sent = crate::http_direct::send(way, request.method, &url, headers, request.body, timeout, limit);
            let answer = match sent.await {
                Ok(answer) => answer,
                Err(why) => return Err(crate::http_explain::explain(why, &url, timeout).await),
            };
            return Ok(Response {
                status: answer.status,
                headers: answer.headers,
                body: String::from_utf8_lossy(&answer.body).into_owned(),
                elapsed: started.elapsed(),
                too_large: answer.too_large.then(|| self.too_large(&request.url)),
            });
        }
        let client = self.client_for(&request.url, request.through.as_deref())?;
        let mut builder = client.request(request.method, &request.url).headers(headers).timeout(timeout);
        if let Some(body) = request.body {
            builder = builder.body(body);
        }
        let mut response = match builder.send().await {
            Ok(response) => response,
            Err(e) => return Err(crate::http_explain::explain(reason(&e, timeout), &url, timeout).await),
        };
        let status = response.status().as_u16();
        let headers = crate::http_direct::header_pairs(response.headers());
        let mut body = Vec::new();
        let mut too_large = None;
        if response.content_length().is_some_and(|n| n > limit as u64) {
            too_large = Some(self.too_large(&request.url));
        }
        while too_large.is_none()
            && let Some(chunk) = response.chunk().await.map_err(|e| reason(&e, timeout))?
        {
            if body.len() + chunk.len() > limit {
                too_large = Some(self.too_large(&request.url));
                body = Vec::new();
                break;
            }
            body.extend_from_slice(&chunk);
        }
        Ok(Response {
            status,
            headers,
            body: String::from_utf8_lossy(&body).into_owned(),
            elapsed: started.elapsed(),
            too_large,
        })
    }

    fn too_large(&self, url: &str) -> String {
        format!("answer larger than {} MB from {url} (not read on; `http.max_body` sets the limit)", self.max_body_mb)
    }
}

/// The address a plain-http `url` is sent to straight, on a connection of its own
/// (`http_direct`): an IP address, when no proxy is set for http in the environment (the
/// shared client would go through it). A name is left to the shared client, which resolves it.
fn direct(url: &reqwest::Url) -> Option<std::net::SocketAddr> {
    static PROXIED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    let proxied = PROXIED.get_or_init(|| {
        ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"]
            .iter()
            .any(|name| std::env::var_os(name).is_some_and(|v| !v.is_empty()))
    });
    if *proxied { None } else { ip_address(url) }
}

/// `url`'s IP address and port; `None` when it names its host.
fn ip_address(url: &reqwest::Url) -> Option<std::net::SocketAddr> {
    let host = url.host_str()?;
    let ip: std::net::IpAddr = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')).unwrap_or(host).parse().ok()?;
    Some(std::net::SocketAddr::new(ip, url.port_or_known_default()?))
}

/// A short, actionable reason for a failed request.
fn reason(e: &reqwest::Error, timeout: Duration) -> String {
    if e.is_timeout() {
        return format!("timed out after {}", humantime::format_duration(timeout));
    }
    if e.is_builder() {
        return format!("invalid request: {e}");
    }
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut last = e.to_string();
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            match io.kind() {
                std::io::ErrorKind::ConnectionRefused => return "connection refused".into(),
                std::io::ErrorKind::ConnectionReset => return "connection reset by the server".into(),
                std::io::ErrorKind::TimedOut => {
                    return format!("timed out after {}", humantime::format_duration(timeout));
                }
                _ => {}
            }
        }
        if let Some(tls) = s.downcast_ref::<rustls::Error>() {
            return format!("TLS: {tls}");
        }
        let text = s.to_string();
        if text.contains("dns error") || text.contains("failed to lookup address") {
            return format!("cannot resolve host ({text})");
        }
        last = text;
        source = s.source();
    }
    if e.is_connect() { format!("cannot connect: {last}") } else { last }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    fn http() -> Http {
        Http::new(&Config::defaults()).unwrap()
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    #[test]
    fn refused_connections_say_so() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let r = rt().block_on(http().send(Request::new(reqwest::Method::GET, format!("http://127.0.0.1:{port}/"))));
        assert_eq!(r.unwrap_err(), "connection refused");
    }

    #[test]
    fn a_silent_server_costs_at_most_the_timeout() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let keep = std::thread::spawn(move || {
            if let Ok((s, _)) = listener.accept() {
                std::thread::sleep(Duration::from_secs(3));
                drop(s);
            }
        });
        let started = Instant::now();
        let req = Request::new(reqwest::Method::GET, format!("http://127.0.0.1:{port}/"))
            .timeout(Some(Duration::from_millis(300)));
        let r = rt().block_on(http().send(req));
        assert_eq!(r.unwrap_err(), "timed out after 300ms");
        assert!(started.elapsed() < Duration::from_secs(2));
        drop(keep);
    }

    #[test]
    fn answers_come_back_with_status_headers_and_body() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let auth_ok = req.contains("authorization: Token tok-123-secret");
            let body = if auth_ok { "ready" } else { "no auth" };
            write!(
                s,
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        });
        let token = Secret::new("tok-123-secret");
        let req = Request::new(reqwest::Method::GET, format!("http://127.0.0.1:{port}/ready")).token(Some(&token));
        let r = rt().block_on(http().send(req)).unwrap();
        assert_eq!((r.status, r.body.as_str(), r.content_type()), (503, "ready", "text/plain"));
        assert_eq!(r.summary(), "HTTP 503: ready");
    }
}

#[cfg(test)]
mod direct_tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn only_an_ip_address_is_reached_straight() {
        let at = |url: &str| ip_address(&reqwest::Url::parse(url).unwrap()).map(|a| a.to_string());
        assert_eq!(at("http://127.0.0.1:8086/health").as_deref(), Some("127.0.0.1:8086"));
        assert_eq!(at("http://[::1]:3100/ready").as_deref(), Some("[::1]:3100"));
        assert_eq!(at("http://10.0.0.5/").as_deref(), Some("10.0.0.5:80"));
        assert_eq!(at("http://localhost:3100/ready"), None);
        assert_eq!(at("http://db.example:8086/"), None);
    }

    /// The request's head as a server reads it: its lines, the header lines sorted (their
    /// order means nothing in HTTP).
    fn head(stream: &mut std::net::TcpStream) -> Vec<String> {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while !got.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = stream.read(&mut buf).unwrap();
            assert!(n > 0, "the request ended before its head did");
            got.extend_from_slice(&buf[..n]);
        }
        let text = String::from_utf8(got).unwrap();
        let mut lines: Vec<String> = text.split("\r\n").filter(|l| !l.is_empty()).map(str::to_string).collect();
        lines[1..].sort();
        lines
    }

    #[test]
    fn a_request_sent_straight_is_the_one_the_shared_client_sends() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let server = std::thread::spawn(move || {
            let mut heads = Vec::new();
            for _ in 0..2 {
                let (mut s, _) = listener.accept().unwrap();
                heads.push(head(&mut s));
                s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
            }
            heads
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let http = Http::new(&Config::defaults()).unwrap();
        let token = Secret::new("tok-123");
        // By address: straight; by name: the shared client (it resolves the name).
        for host in ["127.0.0.1", "localhost"] {
            let url = format!("http://{host}:{port}/api/v2/query?org=o");
            let req = Request::new(reqwest::Method::POST, url).token(Some(&token)).body("from(bucket: \"b\")");
            let r = rt.block_on(http.send(req.header("content-type", "application/vnd.flux"))).unwrap();
            assert_eq!((r.status, r.body.as_str()), (200, "ok"));
        }
        let heads = server.join().unwrap();
        let by_name: Vec<String> = heads[1].iter().map(|l| l.replace("localhost", "127.0.0.1")).collect();
        assert_eq!(heads[0], by_name);
        assert_eq!(heads[0][0], "POST /api/v2/query?org=o HTTP/1.1");
    }
}

#[cfg(test)]
mod through_tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn a_request_through_a_socket_keeps_the_hosts_address() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("fwd");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 4096];
            let n = s.read(&mut buf).unwrap();
            let req = String::from_utf8_lossy(&buf[..n]).to_string();
            let host = req.lines().find_map(|l| l.strip_prefix("host: ")).unwrap_or("none").to_string();
            write!(s, "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{host}", host.len()).unwrap();
        });
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let http = Http::new(&Config::defaults()).unwrap();
        // Nothing listens on the URL's port here: the answer came through the socket.
        let req = Request::new(reqwest::Method::GET, "http://127.0.0.1:1/ready").through(Some(&socket));
        let r = rt.block_on(http.send(req)).unwrap();
        assert_eq!((r.status, r.body.as_str()), (200, "127.0.0.1:1"));
    }
}
