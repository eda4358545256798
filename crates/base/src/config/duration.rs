//! Durations as operators write them in the configuration and on the command line.

use std::time::Duration;

/// A duration as operators write it: `5s`, `1m 30s`, `250ms`, or a bare number of seconds.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(text).ok()
}
