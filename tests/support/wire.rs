//! A real HTTP server on a loopback port with scripted answers (tests/support/wire_server.py),
//! for probing behaviour the twin cannot produce on demand: captured answers of real servers,
//! HTML error pages, servers that never answer.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub(crate) struct WireServer {
    pub port: u16,
    child: Child,
    routes: PathBuf,
    _dir: tempfile::TempDir,
}

/// A captured answer of a real server, kept in `tests/fixtures/wire` (copied from the
/// captures the project was given; its README says what each file shows).
#[track_caller]
pub(crate) fn capture(path: &str) -> String {
    let file = format!("{}/tests/fixtures/wire/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("fixture `{file}` cannot be read: {e}"))
}

impl WireServer {
    /// Starts a server answering `routes` (see wire_server.py); None when python3 is missing.
    #[track_caller]
    pub(crate) fn start(routes: serde_json::Value) -> Option<WireServer> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("routes.json");
        std::fs::write(&path, routes.to_string()).unwrap();
        let script = format!("{}/tests/support/wire_server.py", env!("CARGO_MANIFEST_DIR"));
        let mut child =
            match Command::new("python3").arg(script).arg(&path).stdin(Stdio::piped()).stdout(Stdio::piped()).spawn() {
                Ok(c) => c,
                Err(e) => {
                    super::skip(format!("python3 not available ({e})"));
                    return None;
                }
            };
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port = line.trim().parse().expect("wire server port");
        Some(WireServer { port, child, routes: path, _dir: dir })
    }

    pub(crate) fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests received so far, one JSON object each.
    #[track_caller]
    pub(crate) fn requests(&self) -> Vec<serde_json::Value> {
        let log = std::fs::read_to_string(self.routes.with_extension("json.log")).unwrap_or_default();
        log.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
    }
}

impl Drop for WireServer {
    fn drop(&mut self) {
        self.child.kill().ok();
        self.child.wait().ok();
    }
}
