//! Reading the shipper's configuration file, in either syntax: Alloy's own (`.alloy`, `alloy`)
//! or the twin's TOML (`config`); a failure in one line, as a reload reports it.

use std::path::Path;

use super::alloy;
use super::config::{self, ShipperConfig};

/// Whether `path` is in Alloy's syntax (`.alloy`) rather than the twin's TOML.
pub(super) fn is_alloy(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "alloy")
}

/// Reads a config file of either syntax; the error in one line, as a reload reports it.
pub(super) fn load(path: &Path, listen: &str) -> Result<ShipperConfig, String> {
    if is_alloy(path) {
        return alloy::load(path, listen).map_err(|e| e.summary());
    }
    config::load(path)
        .map(|c| ShipperConfig { listen: listen.to_string(), ..c })
        .map_err(|d| d.iter().map(|d| d.to_string().trim_end().to_string()).collect::<Vec<_>>().join("\n"))
}
