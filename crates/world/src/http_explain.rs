//! Why a request could not be made or answered, in words an operator can act on: an address
//! that is not one (`not a url`, `http://`, port 99999) names the address, what is wrong with
//! it and how to write it; a server that does not speak HTTP is quoted (its first bytes), not
//! reported as "invalid HTTP version parsed".

use std::time::Duration;

/// How an address is written, said after every refusal of one.
const HOW: &str = "write it as http://HOST:PORT/PATH or https://HOST:PORT/PATH";

/// Refuses an address reqwest could not use, saying why; `Ok` for a usable one.
pub(crate) fn check_url(url: &str) -> Result<reqwest::Url, String> {
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        // The url crate's errors, by their words (it is reached through reqwest only).
        let what = match e.to_string().as_str() {
            "relative URL without a base" => "it is not an address (no http:// or https://)".to_string(),
            "empty host" => "it names no host".to_string(),
            "invalid port number" => format!("its port is not a number from 1 to 65535{}", port_of(url)),
            "invalid domain character" | "invalid international domain name" => {
                "its host name holds a character no host name can (a space?)".to_string()
            }
            "invalid IPv4 address" | "invalid IPv6 address" => "its IP address is not one".to_string(),
            other => other.to_string(),
        };
        format!("`{url}` is not a usable address: {what}; {HOW}")
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!(
            "`{url}` is not a usable address: opsbook speaks http:// and https:// only, not {}://; {HOW}",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(format!("`{url}` is not a usable address: it names no host; {HOW}"));
    }
    Ok(parsed)
}

/// ` (99999)`: the port as written, when one can be picked out.
fn port_of(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    match authority.rsplit_once(':') {
        Some((_, port)) if !port.is_empty() => format!(" (`{port}`)"),
        _ => String::new(),
    }
}

/// Whether a failure's reason says the server's answer was not HTTP (hyper's parse errors).
pub(crate) fn not_http(reason: &str) -> bool {
    reason.contains("invalid HTTP") || reason.contains("parsed") || reason.contains("message head is too large")
}

/// What a server that does not speak HTTP says first: the first bytes it sends after a
/// request line, quoted as text (control characters blanked), or why there are none.
pub(crate) async fn first_bytes(url: &reqwest::Url, timeout: Duration) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (Some(host), Some(port)) = (url.host_str(), url.port_or_known_default()) else {
        return "nothing".into();
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let limit = timeout.min(Duration::from_secs(2));
    let read = async {
        let mut stream = tokio::net::TcpStream::connect((host, port)).await.ok()?;
        let request = format!("GET {} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n", url.path());
        let _ = stream.write_all(request.as_bytes()).await;
        let mut buf = vec![0u8; 200];
        let mut filled = 0;
        while filled < buf.len() {
            match stream.read(&mut buf[filled..]).await {
                Ok(0) | Err(_) => break,
                Ok(n) => filled += n,
            }
        }
        buf.truncate(filled);
        Some(buf)
    };
    match tokio::time::timeout(limit, read).await {
        Ok(Some(bytes)) if !bytes.is_empty() => {
            format!("\"{}\"", opsbook_wire::excerpt(&String::from_utf8_lossy(&bytes), 80))
        }
        _ => "nothing it could read".into(),
    }
}

/// The reason for a request that got no HTTP answer, with the server's first bytes when what
/// it sent was not HTTP.
pub(crate) async fn explain(reason: String, url: &reqwest::Url, timeout: Duration) -> String {
    let server = match (url.host_str(), url.port_or_known_default()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        _ => url.to_string(),
    };
    // rustls' words for a server that answered its greeting with something that is not TLS.
    if url.scheme() == "https" && (reason.contains("InvalidContentType") || reason.contains("corrupt message")) {
        let said = first_bytes(url, timeout).await;
        return format!(
            "the server at {server} does not speak TLS: it answered {said} to a plain GET {}; is it http://, \
             or the wrong port?",
            url.path()
        );
    }
    if !not_http(&reason) {
        return reason;
    }
    let said = first_bytes(url, timeout).await;
    format!(
        "the server at {server} does not speak HTTP: it answered {said} to GET {}; is this the right port?",
        url.path()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_that_are_not_say_why() {
        assert_eq!(
            check_url("not a url").unwrap_err(),
            "`not a url` is not a usable address: it is not an address (no http:// or https://); write it as http://HOST:PORT/PATH or https://HOST:PORT/PATH"
        );
        assert_eq!(
            check_url("http://").unwrap_err(),
            "`http://` is not a usable address: it names no host; write it as http://HOST:PORT/PATH or https://HOST:PORT/PATH"
        );
        assert_eq!(
            check_url("http://127.0.0.1:99999/").unwrap_err(),
            "`http://127.0.0.1:99999/` is not a usable address: its port is not a number from 1 to 65535 (`99999`); write it as http://HOST:PORT/PATH or https://HOST:PORT/PATH"
        );
        assert!(check_url("http://127.0.0.1:8086/health").is_ok());
    }
}
