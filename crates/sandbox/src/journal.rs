//! The sandbox's journal: an in-memory, append-only list of entries that the simulated units
//! and the components write into, and that runbooks read, follow and emit into through the
//! same `Journal` trait (and the same query semantics) as the real journalctl reader.

use std::sync::Mutex;

use tokio::sync::{broadcast, mpsc};

use super::when;
use opsbook_world::BoxFuture;
use opsbook_world::journal::{Entry, Feed, Journal, Query};
use opsbook_world::units::full_name;

/// The journal itself.
pub struct MemJournal {
    entries: Mutex<Vec<Entry>>,
    feed: broadcast::Sender<Entry>,
    /// Keeps memory bounded in long sandbox sessions (the REPL).
    capacity: usize,
}

impl Default for MemJournal {
    fn default() -> Self {
        MemJournal { entries: Mutex::new(Vec::new()), feed: broadcast::channel(4096).0, capacity: 200_000 }
    }
}

impl MemJournal {
    /// Appends an entry stamped now.
    pub fn append(&self, unit: &str, identifier: &str, pid: u32, priority: u8, message: impl Into<String>) {
        self.append_at(when::now_us(), unit, identifier, pid, priority, message);
    }

    /// Appends an entry stamped `realtime_us`.
    pub(crate) fn append_at(
        &self,
        realtime_us: u64,
        unit: &str,
        identifier: &str,
        pid: u32,
        priority: u8,
        message: impl Into<String>,
    ) {
        let entry = Entry {
            realtime_us,
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
        // Sent under the lock, so followers see entries in the order they were stored.
        let _ = self.feed.send(entry);
    }

    /// Entries matching `keep`, oldest first, at most the last `lines`.
    pub fn select(&self, keep: impl Fn(&Entry) -> bool, lines: usize) -> Vec<Entry> {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let mut out: Vec<Entry> = entries.iter().rev().filter(|e| keep(e)).take(lines).cloned().collect();
        out.reverse();
        out
    }

    /// The last `lines` entries matching `keep` and a receiver of every later entry: taken
    /// under one lock, so each entry is in exactly one of the two.
    fn backlog_and_subscribe(
        &self,
        keep: impl Fn(&Entry) -> bool,
        lines: usize,
    ) -> (Vec<Entry>, broadcast::Receiver<Entry>) {
        let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
        let live = self.feed.subscribe();
        let mut backlog: Vec<Entry> = entries.iter().rev().filter(|e| keep(e)).take(lines).cloned().collect();
        backlog.reverse();
        (backlog, live)
    }

    /// How many followers are attached (the shipper's pipeline is one).
    pub(crate) fn followers(&self) -> usize {
        self.feed.receiver_count()
    }
}

/// A query compiled once: what `journalctl` would keep.
struct Filter {
    unit: Option<String>,
    since: Option<u64>,
    until: Option<u64>,
    max_priority: Option<u8>,
    grep: Option<regex::Regex>,
    identifier: Option<String>,
    pid: Option<u32>,
}

impl Filter {
    fn new(q: &Query) -> Result<Filter, String> {
        let now = when::now_us();
        let time = |t: &Option<String>| t.as_deref().map(|t| when::parse(t, now)).transpose();
        let grep = q
            .grep
            .as_deref()
            .map(|g| regex::Regex::new(g).map_err(|e| format!("--grep `{g}` is not a regular expression: {e}")))
            .transpose()?;
        Ok(Filter {
            unit: q.unit.as_deref().map(full_name),
            since: time(&q.since)?,
            until: time(&q.until)?,
            max_priority: q.max_priority,
            grep,
            identifier: q.identifier.clone(),
            pid: q.pid,
        })
    }

    fn keeps(&self, e: &Entry) -> bool {
        self.unit.as_ref().is_none_or(|u| &e.unit == u)
            && self.since.is_none_or(|s| e.realtime_us >= s)
            && self.until.is_none_or(|u| e.realtime_us <= u)
            && self.max_priority.is_none_or(|p| e.priority <= p)
            && self.identifier.as_ref().is_none_or(|i| &e.identifier == i)
            && self.pid.is_none_or(|p| e.pid == p)
            && self.grep.as_ref().is_none_or(|g| g.is_match(&e.message))
    }
}

impl Journal for MemJournal {
    fn read<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Vec<Entry>, String>> {
        Box::pin(async move {
            let filter = Filter::new(query)?;
            Ok(self.select(|e| filter.keeps(e), query.lines.unwrap_or(usize::MAX)))
        })
    }

    fn follow<'a>(&'a self, query: &'a Query) -> BoxFuture<'a, Result<Feed, String>> {
        Box::pin(async move {
            let filter = Filter::new(query)?;
            let (backlog, mut live) = self.backlog_and_subscribe(|e| filter.keeps(e), query.lines.unwrap_or(0));
            let (tx, rx) = mpsc::channel(1024);
            tokio::spawn(async move {
                for e in backlog {
                    if tx.send(Ok(e)).await.is_err() {
                        return;
                    }
                }
                loop {
                    tokio::select! {
                        _ = tx.closed() => return,
                        next = live.recv() => match next {
                            Ok(e) if filter.keeps(&e) => {
                                if tx.send(Ok(e)).await.is_err() { return; }
                            }
                            Ok(_) => {}
                            Err(broadcast::error::RecvError::Lagged(n)) => {
                                let lost = Err(format!("the follower fell behind: {n} entries were skipped"));
                                if tx.send(lost).await.is_err() { return; }
                            }
                            Err(broadcast::error::RecvError::Closed) => return,
                        }
                    }
                }
            });
            Ok(rx)
        })
    }

    fn emit<'a>(&'a self, identifier: &'a str, message: &'a str, priority: u8) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            // journald attributes a line sent from a login shell to no service unit.
            self.append("", identifier, std::process::id(), priority, message);
            Ok(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

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

    #[test]
    fn read_filters_like_journalctl() {
        let j = MemJournal::default();
        let now = when::now_us();
        j.append_at(now - 7_200_000_000, "loki.service", "loki", 7, 3, "old error");
        j.append_at(now - 60_000_000, "loki.service", "loki", 7, 3, "level=error msg=\"recent\"");
        j.append_at(now - 50_000_000, "loki.service", "loki", 7, 6, "level=info msg=ok");
        j.append_at(now - 40_000_000, "alloy.service", "alloy", 8, 3, "other unit");
        let q = Query {
            unit: Some("loki".into()),
            since: Some("1 hour ago".into()),
            max_priority: Some(3),
            ..Query::default()
        };
        let got = rt().block_on(j.read(&q)).unwrap();
        assert_eq!(got.iter().map(|e| e.message.as_str()).collect::<Vec<_>>(), ["level=error msg=\"recent\""]);
        let grep = Query { grep: Some("^level=info".into()), ..Query::default() };
        assert_eq!(rt().block_on(j.read(&grep)).unwrap().len(), 1);
        let bad = Query { since: Some("the other day".into()), ..Query::default() };
        assert_eq!(
            rt().block_on(j.read(&bad)).unwrap_err(),
            "`the other day` is not a time journalctl understands (e.g. \"1 hour ago\", \"today\", \"2026-11-22 09:00:00\", \"-5min\")"
        );
    }

    #[test]
    fn follow_sees_new_entries_and_emits_arrive() {
        let j = std::sync::Arc::new(MemJournal::default());
        j.append("a.service", "a", 1, 6, "before");
        rt().block_on(async {
            let mut feed = j.follow(&Query { unit: Some("a".into()), ..Query::default() }).await.unwrap();
            assert_eq!(j.followers(), 1);
            j.append("b.service", "b", 2, 6, "not this unit");
            j.append("a.service", "a", 1, 6, "after");
            assert_eq!(feed.recv().await.unwrap().unwrap().message, "after");
            let mut all = j.follow(&Query::default()).await.unwrap();
            j.emit("opsbook-e2e", "marker", 6).await.unwrap();
            let e = all.recv().await.unwrap().unwrap();
            assert_eq!((e.identifier.as_str(), e.message.as_str(), e.unit.as_str()), ("opsbook-e2e", "marker", ""));
        });
    }
}
