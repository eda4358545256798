//! Where the shipper twin's journal source resumes, as Alloy v1.9.0's `loki.source.journal`
//! keeps it: a positions file `<storage.path>/<component id>/positions.yml` (`journal.go`;
//! the package's unit gives `/var/lib/alloy/data/loki.source.journal.<label>/positions.yml`)
//! holding the journal cursor under the key `cursor-<component id>` (`positions.go`, a
//! yaml.v2 map keyed by `{path, labels}`), saved as the source reads and when it stops.
//!
//! A start reads from `now - max_age` (default 7 h) when there is no cursor, the cursor cannot
//! be read, or its entry is older than `max_age`; otherwise just after the cursor (v1.18.1
//! `tailer.go`). So the first start on a busy host ships a backlog.
//!
//! The twin's cursor has journald's shape with only its `t=` (realtime, µs, hex) meaningful.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// One source's position: in memory, and in its file when the shipper has a storage path.
pub(super) struct Positions {
    file: Option<PathBuf>,
    key: String,
    /// Realtime (µs) of the last entry read.
    cursor: Mutex<Option<u64>>,
}

/// journald's cursor text for an entry at `realtime_us`.
fn cursor_text(realtime_us: u64) -> String {
    format!("s=0;i=0;b=0;m=0;t={realtime_us:x};x=0")
}

/// The realtime (µs) in a cursor's `t=` field.
fn parse_cursor(text: &str) -> Option<u64> {
    text.split(';').find_map(|f| f.strip_prefix("t=")).and_then(|t| u64::from_str_radix(t, 16).ok())
}

/// The positions file as yaml.v2 writes Alloy's `File{Positions: map[Entry]string}`.
fn render(key: &str, cursor: &str) -> String {
    format!("positions:\n  ? path: {key}\n    labels: \"\"\n  : {cursor}\n")
}

/// The cursor saved under `key` in a positions file's text.
fn parse(text: &str, key: &str) -> Option<String> {
    let mut lines = text.lines().skip_while(|l| l.trim() != format!("? path: {key}"));
    lines.next()?;
    lines.find_map(|l| l.trim_start().strip_prefix(": ")).map(|c| c.trim().trim_matches('"').to_string())
}

impl Positions {
    /// The positions of source `id` under `storage` (none: kept in memory only).
    pub(super) fn open(storage: Option<&Path>, id: &str) -> Positions {
        let file = storage.map(|s| s.join(id).join("positions.yml"));
        let key = format!("cursor-{id}");
        let cursor = file
            .as_ref()
            .and_then(|f| std::fs::read_to_string(f).ok())
            .and_then(|t| parse(&t, &key))
            .and_then(|c| parse_cursor(&c));
        Positions { file, key, cursor: Mutex::new(cursor) }
    }

    /// Where a start reads from (µs since the epoch): just after the cursor, or `max_age`
    /// back when there is none or it is older than that.
    pub(super) fn since(&self, max_age: Duration, now_us: u64) -> u64 {
        let floor = now_us.saturating_sub(max_age.as_micros() as u64);
        match *self.cursor.lock().unwrap_or_else(|e| e.into_inner()) {
            Some(c) if c >= floor => c + 1,
            _ => floor,
        }
    }

    /// Records the entry just read.
    pub(super) fn put(&self, realtime_us: u64) {
        let mut cursor = self.cursor.lock().unwrap_or_else(|e| e.into_inner());
        if cursor.is_none_or(|c| realtime_us > c) {
            *cursor = Some(realtime_us);
        }
    }

    /// Writes the file (mode 0600, as Alloy's `positionFileMode`), when there is one.
    pub(super) fn save(&self) -> std::io::Result<()> {
        let (Some(file), Some(cursor)) = (&self.file, *self.cursor.lock().unwrap_or_else(|e| e.into_inner())) else {
            return Ok(());
        };
        if let Some(dir) = file.parent() {
            std::fs::create_dir_all(dir)?;
        }
        opsbook_base::write_atomically(file, render(&self.key, &cursor_text(cursor)).as_bytes(), 0o600)
    }

    /// The file, when positions are kept in one.
    pub(super) fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_start_reads_max_age_back_then_resumes_after_its_cursor() {
        let dir = tempfile::tempdir().unwrap();
        let p = Positions::open(Some(dir.path()), "loki.source.journal.read");
        let hour = Duration::from_secs(3600);
        let now = 10 * 3_600_000_000;
        assert_eq!(p.since(7 * hour, now), 3 * 3_600_000_000, "no cursor: max_age back");
        p.put(now - 5);
        p.save().unwrap();
        let file = dir.path().join("loki.source.journal.read/positions.yml");
        let text = std::fs::read_to_string(&file).unwrap();
        let expected = format!(
            "positions:\n  ? path: cursor-loki.source.journal.read\n    labels: \"\"\n  : s=0;i=0;b=0;m=0;t={:x};x=0\n",
            now - 5
        );
        assert_eq!(text, expected);
        let again = Positions::open(Some(dir.path()), "loki.source.journal.read");
        assert_eq!(again.since(7 * hour, now), now - 4, "resumes after the cursor");
        assert_eq!(again.since(7 * hour, now + 8 * 3_600_000_000), now + 3_600_000_000, "too old: max_age back");
    }
}
