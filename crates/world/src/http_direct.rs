//! One plain-http request on a connection of its own, driven in the caller's task: through a
//! unix socket (an endpoint forwarded over ssh), or straight to an IP address. No client, pool
//! or connection task to set up, and no hop to a connection task on another thread: the
//! request's own future writes and reads, where the shared client hands both to a task of
//! its own and is woken by it (that hand-over was a third of a quick check's request).
//! The request is what the shared client would send (origin-form target, `Host` of the
//! endpoint as the host knows it, opsbook's user agent, `Accept: */*`); failures read as the
//! shared client's do ("connection refused", "timed out after 5s", hyper's own words).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use reqwest::header::{HeaderMap, HeaderValue};

/// What came back, before it is made a `Response`.
pub(crate) struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The answer was larger than the limit (its body is not read on).
    pub too_large: bool,
}

/// Where the request's connection goes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Way<'a> {
    /// Through this unix socket.
    Socket(&'a Path),
    /// Straight to this address.
    Address(SocketAddr),
}

/// How long a connection may take to be made, on either way and in the shared client.
pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Sends `method url` with `headers` and `body` the `way` given, reading at most `limit`
/// bytes of body; the whole exchange within `timeout`.
pub(crate) async fn send(
    way: Way<'_>,
    method: reqwest::Method,
    url: &reqwest::Url,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
    timeout: Duration,
    limit: usize,
) -> Result<Answer, String> {
    let request = request(method, url, headers, body)?;
    let timed_out = || format!("timed out after {}", humantime::format_duration(timeout));
    let exchanged = tokio::time::timeout(timeout, async {
        match way {
            Way::Socket(socket) => {
                let stream = tokio::net::UnixStream::connect(socket).await.map_err(connect_error)?;
                exchange(stream, request, limit).await
            }
            Way::Address(address) => {
                let connecting = tokio::time::timeout(CONNECT_TIMEOUT, tokio::net::TcpStream::connect(address));
                let stream = connecting.await.map_err(|_| timed_out())?.map_err(connect_error)?;
                let _ = stream.set_nodelay(true);
                exchange(stream, request, limit).await
            }
        }
    });
    exchanged.await.unwrap_or_else(|_| Err(timed_out()))
}

/// A failed connect in the shared client's words.
fn connect_error(e: std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::ConnectionRefused => "connection refused".to_string(),
        _ => format!("cannot connect: {e}"),
    }
}

async fn exchange<S>(stream: S, request: hyper::Request<Full<Bytes>>, limit: usize) -> Result<Answer, String>
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
{
    let (mut sender, connection) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.map_err(|e| e.to_string())?;
    // The connection is driven here, beside the request, until the whole body is read. One
    // that ends first (the server closed after its answer, or sent no HTTP) has handed the
    // request its answer or its error already.
    let mut connection = std::pin::pin!(connection);
    let mut connected = true;
    let mut sending = std::pin::pin!(sender.send_request(request));
    let response = tokio::select! {
        biased;
        response = &mut sending => response,
        ended = &mut connection => {
            connected = false;
            match ended {
                Ok(()) => sending.await,
                Err(e) => return Err(e.to_string()),
            }
        }
    }
    .map_err(|e| e.to_string())?;
    let status = response.status().as_u16();
    let headers = header_pairs(response.headers());
    let declared = response.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()?.parse().ok());
    if declared.is_some_and(|n: u64| n > limit as u64) {
        return Ok(Answer { status, headers, body: Vec::new(), too_large: true });
    }
    let mut incoming = response.into_body();
    let mut body = Vec::new();
    // The connection reads the body in: polled beside it until it ends (a server that closes
    // after its answer), its last frames then waiting in the body.
    loop {
        let frame = tokio::select! {
            biased;
            frame = incoming.frame() => frame,
            ended = &mut connection, if connected => {
                connected = false;
                ended.map_err(|e| e.to_string())?;
                continue;
            }
        };
        let Some(frame) = frame else { break };
        if let Ok(data) = frame.map_err(|e| e.to_string())?.into_data() {
            if body.len() + data.len() > limit {
                return Ok(Answer { status, headers, body: Vec::new(), too_large: true });
            }
            body.extend_from_slice(&data);
        }
    }
    Ok(Answer { status, headers, body, too_large: false })
}

/// An answer's headers as `Response` keeps them: lower-case names, in order, values as text.
pub(crate) fn header_pairs(headers: &HeaderMap) -> Vec<(String, String)> {
    headers.iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())).collect()
}

/// The request as the shared client writes it: origin-form target, `Host` from the URL
/// (its port unless the scheme's default), a user agent and `Accept` unless given.
fn request(
    method: reqwest::Method,
    url: &reqwest::Url,
    headers: HeaderMap,
    body: Option<Vec<u8>>,
) -> Result<hyper::Request<Full<Bytes>>, String> {
    let target = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_string(),
    };
    let host = match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => return Err(format!("`{url}` names no host")),
    };
    let mut request = hyper::Request::builder()
        .method(method)
        .uri(target)
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .map_err(|e| format!("invalid request: {e}"))?;
    let all = request.headers_mut();
    *all = headers;
    let defaults = [
        (hyper::header::HOST, host.as_str()),
        (hyper::header::USER_AGENT, concat!("opsbook/", env!("CARGO_PKG_VERSION"))),
        (hyper::header::ACCEPT, "*/*"),
    ];
    for (name, value) in defaults {
        if !all.contains_key(&name) {
            let value = HeaderValue::from_str(value).map_err(|_| format!("invalid value for header `{name}`"))?;
            all.insert(name, value);
        }
    }
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixListener;

    /// A server on a unix socket answering one connection with `answer` (after reading the
    /// request's head), then closing; returns the socket and what the request was.
    fn serve_once(answer: &'static [u8]) -> (tempfile::TempDir, std::path::PathBuf, std::thread::JoinHandle<String>) {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("endpoint.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let server = std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                let n = stream.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
            stream.write_all(answer).unwrap();
            String::from_utf8_lossy(&got).into_owned()
        });
        (dir, socket, server)
    }

    fn get(socket: &Path, url: &str, limit: usize) -> Result<Answer, String> {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let url = reqwest::Url::parse(url).unwrap();
        let sent = send(
            Way::Socket(socket),
            reqwest::Method::GET,
            &url,
            HeaderMap::new(),
            None,
            Duration::from_secs(5),
            limit,
        );
        runtime.block_on(sent)
    }

    #[test]
    fn the_request_names_the_endpoint_as_the_host_knows_it_and_the_answer_is_read_whole() {
        let (_dir, socket, server) =
            serve_once(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 5\r\n\r\nready");
        let answer = get(&socket, "http://10.0.0.2:3100/ready?verbose=1", 1 << 20).unwrap();
        let request = server.join().unwrap();
        let version = env!("CARGO_PKG_VERSION");
        assert_eq!(
            request,
            format!(
                "GET /ready?verbose=1 HTTP/1.1\r\nhost: 10.0.0.2:3100\r\nuser-agent: opsbook/{version}\r\naccept: */*\r\n\r\n"
            )
        );
        assert_eq!((answer.status, answer.body.as_slice(), answer.too_large), (200, &b"ready"[..], false));
        assert_eq!(
            answer.headers,
            vec![
                ("content-type".to_string(), "text/plain".to_string()),
                ("content-length".to_string(), "5".to_string())
            ]
        );
    }

    #[test]
    fn a_chunked_answer_and_one_ended_by_closing_are_read_to_their_end() {
        let (_dir, socket, _server) =
            serve_once(b"HTTP/1.1 503 Service Unavailable\r\nTransfer-Encoding: chunked\r\n\r\n8\r\nIngester\r\na\r\n not ready\r\n0\r\n\r\n");
        let answer = get(&socket, "http://127.0.0.1:3100/ready", 1 << 20).unwrap();
        assert_eq!((answer.status, String::from_utf8(answer.body).unwrap()), (503, "Ingester not ready".to_string()));
        let (_dir, socket, _server) = serve_once(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n{\"status\":\"pass\"}");
        let answer = get(&socket, "http://127.0.0.1:8086/health", 1 << 20).unwrap();
        assert_eq!(String::from_utf8(answer.body).unwrap(), "{\"status\":\"pass\"}");
    }

    #[test]
    fn an_answer_over_the_limit_is_not_read_on() {
        let (_dir, socket, _server) = serve_once(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n");
        let answer = get(&socket, "http://127.0.0.1:8086/big", 10).unwrap();
        assert_eq!((answer.status, answer.body.len(), answer.too_large), (200, 0, true));
        let (_dir, socket, _server) =
            serve_once(b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n0123456789abcdef0123456789abcdef");
        let answer = get(&socket, "http://127.0.0.1:8086/big", 10).unwrap();
        assert_eq!((answer.body.len(), answer.too_large), (0, true));
    }

    #[test]
    fn failures_read_as_the_shared_clients_do() {
        // A forward whose far end refused: ssh accepts, then closes without a word.
        let (_dir, socket, _server) = serve_once(b"");
        assert_eq!(
            get(&socket, "http://127.0.0.1:3100/ready", 1 << 20).err().unwrap(),
            "connection closed before message completed"
        );
        let (_dir, socket, _server) = serve_once(b"SSH-2.0-OpenSSH_9.2\r\n");
        assert_eq!(get(&socket, "http://127.0.0.1:3100/ready", 1 << 20).err().unwrap(), "invalid HTTP version parsed");
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone.sock");
        assert_eq!(
            get(&gone, "http://127.0.0.1:3100/ready", 1 << 20).err().unwrap(),
            "cannot connect: No such file or directory (os error 2)"
        );
        // Bound, nobody accepting any more: the socket refuses.
        let refused = dir.path().join("refused.sock");
        drop(UnixListener::bind(&refused).unwrap());
        assert_eq!(get(&refused, "http://127.0.0.1:3100/ready", 1 << 20).err().unwrap(), "connection refused");
    }

    #[test]
    fn a_server_that_never_answers_times_out_with_the_limit_named() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("silent.sock");
        let _listener = UnixListener::bind(&socket).unwrap();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let url = reqwest::Url::parse("http://127.0.0.1:3100/ready").unwrap();
        let sent = send(
            Way::Socket(&socket),
            reqwest::Method::GET,
            &url,
            HeaderMap::new(),
            None,
            Duration::from_millis(200),
            1 << 20,
        );
        assert_eq!(runtime.block_on(sent).err().unwrap(), "timed out after 200ms");
    }
}
