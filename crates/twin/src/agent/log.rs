//! The agent twin's logging, as Telegraf v1.32.0 logs (`logger/`, docs/upstream-checked.md §1):
//!
//! - `logformat = "text"` (the default, `text_logger.go`): `2026-11-23T10:00:10Z E! [outputs.influxdb_v2] …`,
//!   UTC, the indicator `E!` `W!` `I!` `D!`, the plugin's `[category.name]` prefix.
//! - `logformat = "structured"` (`structured_logger.go`, slog's JSON handler):
//!   `{"time":…,"level":"ERROR","msg":…,"category":"outputs","plugin":"influxdb_v2"}`; the
//!   level in capitals, no `[..]` prefix in a plugin's `msg` (agent lines keep their own text).
//! - `debug = true` lets `D!` lines through; `quiet = true` keeps errors only.
//! - `logfile = "PATH"`: every line goes to that file **instead of** stdout (the journal). What
//!   is logged before logging is set up (`I! Loading config: …`, a startup config error) still
//!   goes to the journal, and into the file too (`handler.go`'s early sink replays it).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, RwLock};

use crate::logger::{self, Level, Sink};

/// `logformat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    #[default]
    /// Telegraf's text lines (`2026-11-23T10:00:00Z E! …`).
    Text,
    /// slog's JSON (`logformat = "structured"`).
    Structured,
}

/// The `[agent]` settings that shape logging.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LogSettings {
    /// `debug`: debug lines are written too.
    pub debug: bool,
    /// `quiet`: only errors are written.
    pub quiet: bool,
    /// `logfile`: the file written instead of stderr.
    pub logfile: Option<PathBuf>,
    /// `logformat`.
    pub format: LogFormat,
}

/// Where an agent's lines go and how they look; settings change on reload.
pub(crate) struct TelegrafLog {
    /// stdout (the journal) as a process, the unit's voice in the sandbox.
    sink: Sink,
    settings: RwLock<LogSettings>,
    /// The open log file and its path, when `logfile` is set.
    file: Mutex<Option<(PathBuf, std::fs::File)>>,
    /// A folder standing for `/` (a sandbox host's), under which `logfile` is written.
    root: Mutex<Option<PathBuf>>,
}

/// Telegraf's indicator of a level (`LogLevel.Indicator()`).
fn indicator(level: Level) -> &'static str {
    match level {
        Level::Error => "E!",
        Level::Warn => "W!",
        Level::Info => "I!",
        Level::Debug => "D!",
    }
}

/// slog's level word as Telegraf's `ReplaceAttr` writes it.
fn word(level: Level) -> &'static str {
    match level {
        Level::Error => "ERROR",
        Level::Warn => "WARN",
        Level::Info => "INFO",
        Level::Debug => "DEBUG",
    }
}

impl TelegrafLog {
    pub(crate) fn new(sink: Sink, settings: LogSettings) -> TelegrafLog {
        TelegrafLog { sink, settings: RwLock::new(settings), file: Mutex::new(None), root: Mutex::new(None) }
    }

    /// Writes `logfile` under `root` (a sandbox host's `/`) rather than at its own path.
    pub(crate) fn set_root(&self, root: PathBuf) {
        *self.root.lock().unwrap_or_else(|e| e.into_inner()) = Some(root);
    }

    /// Logging set up again (a reload reads `[agent]` anew).
    pub(crate) fn reconfigure(&self, settings: LogSettings) {
        *self.settings.write().unwrap_or_else(|e| e.into_inner()) = settings;
    }

    fn settings(&self) -> LogSettings {
        self.settings.read().map(|s| s.clone()).unwrap_or_else(|e| e.into_inner().clone())
    }

    /// One line in the configured format; `plugin` is `outputs.influxdb_v2` style, `None`
    /// for the agent's own lines.
    pub(crate) fn format(settings: &LogSettings, level: Level, plugin: Option<&str>, text: &str) -> String {
        match settings.format {
            LogFormat::Text => {
                let prefix = plugin.map(|p| format!("[{p}] ")).unwrap_or_default();
                format!("{} {} {prefix}{text}", logger::now_rfc3339(0), indicator(level))
            }
            LogFormat::Structured => {
                let time = crate::go_time::rfc3339_nano(std::time::SystemTime::now());
                let mut line = format!(
                    "{{\"time\":{},\"level\":\"{}\",\"msg\":{}",
                    serde_json::Value::from(time),
                    word(level),
                    serde_json::Value::from(text)
                );
                if let Some((category, name)) = plugin.and_then(|p| p.split_once('.')) {
                    line.push_str(&format!(
                        ",\"category\":{},\"plugin\":{}",
                        serde_json::Value::from(category),
                        serde_json::Value::from(name)
                    ));
                }
                line.push('}');
                line
            }
        }
    }

    /// A line after logging is set up: filtered by `debug`/`quiet`, then to the log file or
    /// the sink.
    pub(crate) fn log(&self, level: Level, plugin: Option<&str>, text: &str) {
        let s = self.settings();
        if (level == Level::Debug && !s.debug) || (s.quiet && level != Level::Error) {
            return;
        }
        let line = Self::format(&s, level, plugin, text);
        match &s.logfile {
            Some(path) => self.to_file(path, level, &line),
            None => (self.sink)(level, &line),
        }
    }

    /// A line logged before logging is set up: to the sink always, and to the log file too.
    pub(crate) fn early(&self, level: Level, text: &str) {
        let s = self.settings();
        let line = Self::format(&LogSettings { format: LogFormat::Text, ..s.clone() }, level, None, text);
        (self.sink)(level, &line);
        if let Some(path) = &s.logfile {
            self.to_file(path, level, &Self::format(&s, level, None, text));
        }
    }

    /// Appends to the log file (made with its folder, as v1.39.3 does); a file that cannot be
    /// written sends the line to the sink instead, so it is not lost.
    fn to_file(&self, path: &Path, level: Level, line: &str) {
        let root = self.root.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let path = &match root {
            Some(r) => r.join(path.strip_prefix("/").unwrap_or(path)),
            None => path.to_path_buf(),
        };
        let mut file = self.file.lock().unwrap_or_else(|e| e.into_inner());
        if file.as_ref().is_none_or(|(p, _)| p != path) {
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            *file = std::fs::OpenOptions::new().create(true).append(true).open(path).ok().map(|f| (path.clone(), f));
        }
        match file.as_mut() {
            Some((_, f)) => {
                let _ = writeln!(f, "{line}");
            }
            None => (self.sink)(level, line),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_structured_lines() {
        let text = LogSettings::default();
        let line = TelegrafLog::format(&text, Level::Error, Some("outputs.influxdb_v2"), "boom");
        assert!(line.ends_with("Z E! [outputs.influxdb_v2] boom"), "{line}");
        let json = LogSettings { format: LogFormat::Structured, ..LogSettings::default() };
        let line = TelegrafLog::format(&json, Level::Warn, Some("outputs.influxdb_v2"), "full");
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(
            (v["level"].as_str(), v["msg"].as_str(), v["plugin"].as_str()),
            (Some("WARN"), Some("full"), Some("influxdb_v2"))
        );
        assert!(line.starts_with("{\"time\":"), "{line}");
    }

    #[test]
    fn debug_lines_need_debug_and_quiet_keeps_errors() {
        let (sink, kept) = logger::memory();
        let log = TelegrafLog::new(sink, LogSettings::default());
        log.log(Level::Debug, None, "hidden");
        log.reconfigure(LogSettings { quiet: true, ..LogSettings::default() });
        log.log(Level::Warn, None, "hidden too");
        log.log(Level::Error, None, "shown");
        let lines = kept.lock().unwrap().clone();
        assert_eq!(lines.len(), 1);
        assert!(lines[0].1.ends_with("E! shown"));
    }
}
