//! The shipper as a command, answering as Alloy's does: `validate CONFIG` checks a file
//! offline (silent on success, Alloy's diagnostics otherwise), `run CONFIG` loads it and runs
//! the shipper until stopped, reloading on SIGHUP.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use super::alloy;
use super::config::{self, ShipperConfig};
use super::loading::is_alloy;
use super::pipeline::Shipper;
use crate::logger;
use opsbook_base::Error;
use opsbook_world::journal::{Journal, Journalctl};

/// `alloy validate` of a `.alloy` file: the status, the diagnostics and the closing error.
fn validate_alloy(path: &Path) -> (u8, String, String) {
    match alloy::load(path, DEFAULT_LISTEN) {
        Ok(_) => (0, String::new(), String::new()),
        Err(alloy::Invalid::Unreadable(e)) => (1, String::new(), format!("Error: {e}\n")),
        Err(invalid) => (1, invalid.report(), "Error: validation failed\n".into()),
    }
}

/// Where Alloy serves its HTTP endpoint unless `--server.http.listen-addr` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:12345";

/// What `validate` reports on stderr: exit status 0 and nothing, or 1 and the diagnostics.
pub fn validate_output(path: &Path) -> (u8, String) {
    if is_alloy(path) {
        let (code, report, error) = validate_alloy(path);
        return (code, report + error.as_str());
    }
    match config::load(path) {
        Ok(_) => (0, String::new()),
        Err(diagnostics) => {
            let mut text: String = diagnostics.iter().map(|d| d.to_string()).collect();
            text.push_str(&format!(
                "Error: {} is invalid ({} problem{})\n",
                path.display(),
                diagnostics.len(),
                if diagnostics.len() == 1 { "" } else { "s" }
            ));
            (1, text)
        }
    }
}

/// `opsbook twin log-shipper validate CONFIG`: exit 0 silently, or diagnostics and exit 1.
/// For a `.alloy` file the streams are Alloy's: the diagnostics, a blank line on stdout,
/// then `Error: validation failed`.
pub fn validate_command(path: &Path) -> u8 {
    if is_alloy(path) {
        let (code, report, error) = validate_alloy(path);
        if !report.is_empty() {
            eprint!("{report}");
            println!();
        }
        eprint!("{error}");
        return code;
    }
    let (code, stderr) = validate_output(path);
    eprint!("{stderr}");
    code
}

/// The first load of a config file; its failure as the program reports it (exit 1).
fn initial_load(path: &Path, listen: Option<&str>) -> Result<ShipperConfig, ()> {
    if is_alloy(path) {
        return alloy::load(path, listen.unwrap_or(DEFAULT_LISTEN)).map_err(|e| match e {
            alloy::Invalid::Unreadable(e) => {
                eprintln!("Error: reading config path {:?}: {e}", path.display().to_string())
            }
            invalid => {
                eprint!("{}", invalid.report());
                println!();
                eprintln!("Error: could not perform the initial load successfully");
            }
        });
    }
    config::load(path).map_err(|diagnostics| {
        for d in &diagnostics {
            eprint!("{d}");
        }
    })
}

/// `opsbook twin log-shipper [run] [CONFIG] [--listen ADDR]`: runs until SIGINT/SIGTERM.
/// With `storage` (`run --storage.path`), positions are kept under it.
pub async fn run_command(
    path: Option<&Path>,
    listen: Option<&str>,
    storage: Option<&Path>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<u8, Error> {
    // SIGHUP is a reload from the first instant on, never its default (the end of the
    // process): a reload sent while the config loads is taken once the shipper runs.
    let hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    let config = match path.map(|p| initial_load(p, listen)).transpose() {
        Ok(c) => c.unwrap_or_default(),
        Err(()) => return Ok(1),
    };
    let addr = listen.map(str::to_string).unwrap_or_else(|| config.listen.clone());
    let listener = TcpListener::bind(&addr)
        .await
        .map_err(|source| Error::Io { context: format!("cannot listen on `{addr}`"), source })?;
    let storage_path = storage.map(Path::to_path_buf).or(config.storage_path.clone());
    let config = ShipperConfig { listen: addr, storage_path, ..config };
    let journal: Arc<dyn Journal> =
        Arc::new(Journalctl { user: config.user, timeout: Duration::from_secs(30), via: None });
    let shipper = Shipper::new(config, path.map(Path::to_path_buf), journal, logger::stdout());
    let reloader = shipper.clone();
    tokio::spawn(async move {
        let Ok(mut hup) = hangups else { return };
        while hup.recv().await.is_some() {
            let _ = reloader.reload();
        }
    });
    // Ready once it listens and a reload would be taken, as Alloy tells systemd.
    crate::notify::ready();
    crate::running::serve(shipper, Some(listener), shutdown)
        .await
        .map_err(|source| Error::Io { context: "log shipper server failed".into(), source })?;
    Ok(0)
}
