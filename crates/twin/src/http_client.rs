//! The HTTP client of the twins' own requests: the agent's writes and the shipper's pushes.

use std::time::Duration;

/// A `reqwest` client for the twins' own requests (agent writes, shipper pushes), sent as
/// `user_agent`. Each request sets its own timeout; connecting is bounded here. On a host
/// without CA certificates (a minimal Debian has no ca-certificates) it still sends over
/// http://, as Telegraf and Alloy do: only an https:// address then fails, when it is used.
pub fn http_client(user_agent: &str) -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let builder = || reqwest::Client::builder().user_agent(user_agent).connect_timeout(Duration::from_secs(5));
    builder().build().or_else(|_| builder().tls_certs_only([]).build()).unwrap_or_default()
}
