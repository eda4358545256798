//! The twins' one clock: now, in nanoseconds since the epoch.

use std::time::{SystemTime, UNIX_EPOCH};

/// Now, in nanoseconds since the epoch (the twins' one clock).
pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64)
}
