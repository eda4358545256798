//! The sandbox's journal: an in-memory, append-only list of entries that the simulated
//! units and the components write into, and that runbooks read, follow and emit into —
//! the same fields journalctl's JSON gives the real reader.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::sync::broadcast;

/// One journal entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemEntry {
    /// Microseconds since the Unix epoch (journald's `__REALTIME_TIMESTAMP`).
    pub realtime_us: u64,
    /// syslog priority: 0 emerg … 3 err, 4 warning, 6 info, 7 debug.
    pub priority: u8,
    pub unit: String,
    pub identifier: String,
    pub pid: u32,
    pub message: String,
}

/// The journal itself.
pub struct MemJournal {
    entries: Mutex<Vec<MemEntry>>,
    feed: broadcast::Sender<MemEntry>,
    /// Keeps memory bounded in long sandbox sessions (the REPL).
    capacity: usize,
}

impl Default for MemJournal {
    fn default() -> Self {
        MemJournal { entries: Mutex::new(Vec::new()), feed: broadcast::channel(4096).0, capacity: 200_000 }
    }
}

pub fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

impl MemJournal {
    /// Appends an entry stamped now.
    pub fn append(&self, unit: &str, identifier: &str, pid: u32, priority: u8, message: impl Into<String>) {
        let entry = MemEntry {
            realtime_us: now_us(),
            priority,
            unit: unit.to_string(),
            identifier: identifier.to_string(),
            pid,
            message: message.into(),
        };
        let mut entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        if entries.len() >= self.capacity {
            let drop = self.capacity / 10;
            entries.drain(..drop);
        }
        entries.push(entry.clone());
        let _ = self.feed.send(entry);
    }

    /// Entries matching `keep`, oldest first, at most the last `lines`.
    pub fn select(&self, keep: impl Fn(&MemEntry) -> bool, lines: usize) -> Vec<MemEntry> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<MemEntry> = entries.iter().rev().filter(|e| keep(e)).take(lines).cloned().collect();
        out.reverse();
        out
    }

    /// New entries as they are appended.
    pub fn subscribe(&self) -> broadcast::Receiver<MemEntry> {
        self.feed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn select_returns_the_last_lines_in_order() {
        let j = MemJournal::default();
        for i in 0..5 {
            j.append("a.service", "a", 1, 6, format!("line {i}"));
        }
        j.append("b.service", "b", 2, 3, "oops");
        let last = j.select(|e| e.unit == "a.service", 2);
        assert_eq!(last.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["line 3", "line 4"]);
        assert_eq!(j.select(|e| e.priority <= 3, 10)[0].message, "oops");
    }
}
