//! influxd's own configuration, as the metrics-db twin takes it: the flags `--http-bind-address`,
//! `--bolt-path`, `--engine-path`, `--log-level`, and the file `INFLUXD_CONFIG_PATH` names (a
//! TOML file, or a directory holding `config.toml`) with the keys `http-bind-address`,
//! `bolt-path`, `engine-path`, `reporting-disabled` and `log-level`. As in influxd a flag wins
//! over the file, and keys influxd knows but the twin does not use are accepted and ignored.
//!
//! Log levels are zap's (InfluxDB v2.7.12 pins zap v1.16.0, `Level.UnmarshalText`): debug,
//! info, warn, error, dpanic, panic, fatal, in any case, and "" for info. A bad `--log-level`
//! is an error (`kit/cli/loglevelflag.go`); a bad value in the file or in
//! `INFLUXD_LOG_LEVEL` is silently ignored (`kit/cli/viper.go`: `_ = (*destP).Set(s)`).

use std::path::{Path, PathBuf};

use toml::de::{DeTable, DeValue};

/// The settings read from influxd's config file (each absent when the file is silent).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InfluxdFile {
    pub(crate) http_bind_address: Option<String>,
    pub(crate) bolt_path: Option<String>,
    /// `engine-path`.
    pub engine_path: Option<String>,
    pub(crate) reporting_disabled: Option<bool>,
    /// `log-level`, when it is one influxd knows.
    pub log_level: Option<String>,
}

/// The file `INFLUXD_CONFIG_PATH` names, read; `None` when the variable is unset.
pub fn from_env() -> Result<Option<InfluxdFile>, String> {
    match std::env::var_os("INFLUXD_CONFIG_PATH") {
        Some(path) if !path.is_empty() => load(Path::new(&path)).map(Some),
        _ => Ok(None),
    }
}

/// Reads a config file (or `config.toml` in a directory).
pub fn load(path: &Path) -> Result<InfluxdFile, String> {
    let file: PathBuf = if path.is_dir() { path.join("config.toml") } else { path.to_path_buf() };
    let text = std::fs::read_to_string(&file)
        .map_err(|e| format!("failed to read the influxd config file {}: {e}", file.display()))?;
    parse(&file.display().to_string(), &text)
}

/// Parses the TOML text of an influxd config file.
pub fn parse(file: &str, text: &str) -> Result<InfluxdFile, String> {
    let doc = DeTable::parse(text).map_err(|e| {
        let at = e.span().map_or(String::new(), |s| format!(" at byte {}", s.start));
        format!("the influxd config file {file} is not valid TOML{at}: {}", e.message().trim())
    })?;
    let table = doc.get_ref();
    let get = |key: &str| table.iter().find(|(k, _)| k.get_ref().as_ref() == key).map(|(_, v)| v.get_ref());
    let string = |key: &str| -> Result<Option<String>, String> {
        match get(key) {
            None => Ok(None),
            Some(DeValue::String(s)) => Ok(Some(s.to_string())),
            Some(_) => Err(format!("{file}: `{key}` must be a string")),
        }
    };
    let reporting_disabled = match get("reporting-disabled") {
        None => None,
        Some(DeValue::Boolean(b)) => Some(*b),
        Some(_) => return Err(format!("{file}: `reporting-disabled` must be true or false")),
    };
    // A level zap does not know is dropped without a word, as influxd drops it.
    let log_level = string("log-level")?.and_then(|l| zap_level(&l)).map(str::to_string);
    Ok(InfluxdFile {
        http_bind_address: string("http-bind-address")?,
        bolt_path: string("bolt-path")?,
        engine_path: string("engine-path")?,
        reporting_disabled,
        log_level,
    })
}

/// zap v1.16.0's name for a level text (`Level.UnmarshalText`, retried lower-cased), or
/// `None` when zap refuses it. `warning` and `trace` are refused.
pub fn zap_level(text: &str) -> Option<&'static str> {
    const LEVELS: [&str; 7] = ["debug", "info", "warn", "error", "dpanic", "panic", "fatal"];
    let lower = text.to_ascii_lowercase();
    if lower.is_empty() {
        return Some("info");
    }
    LEVELS.iter().find(|l| **l == lower).copied()
}

/// influxd's error for a bad `--log-level` (cobra's `Error:` line, pflag's wording).
pub fn log_level_flag_error(text: &str) -> String {
    format!(
        "Error: invalid argument \"{text}\" for \"--log-level\" flag: unknown log level; supported levels are debug, info, warn, error"
    )
}

/// The socket address of influxd's `http-bind-address` (`:8086` is every interface).
pub(crate) fn socket_address(bind: &str) -> String {
    match bind.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => bind.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_keys_influxd_takes() {
        let text = "http-bind-address = \":8087\"\nbolt-path = \"/srv/influx/influxd.bolt\"\n\
                    engine-path = \"/srv/influx/engine\"\nreporting-disabled = true\nlog-level = \"error\"\n\
                    query-concurrency = 10\n";
        let expected = InfluxdFile {
            http_bind_address: Some(":8087".into()),
            bolt_path: Some("/srv/influx/influxd.bolt".into()),
            engine_path: Some("/srv/influx/engine".into()),
            reporting_disabled: Some(true),
            log_level: Some("error".into()),
        };
        assert_eq!(parse("c.toml", text), Ok(expected));
        assert_eq!(socket_address(":8087"), "0.0.0.0:8087");
        assert_eq!(socket_address("127.0.0.1:8086"), "127.0.0.1:8086");
    }

    #[test]
    fn wrong_values_are_named_but_a_bad_level_is_ignored() {
        assert_eq!(
            parse("c.toml", "reporting-disabled = \"yes\"\n"),
            Err("c.toml: `reporting-disabled` must be true or false".into())
        );
        assert_eq!(parse("c.toml", "log-level = \"loud\"\n").map(|f| f.log_level), Ok(None));
        assert_eq!(parse("c.toml", "log-level = \"WARN\"\n").map(|f| f.log_level), Ok(Some("warn".into())));
    }

    #[test]
    fn zap_takes_its_seven_levels_in_any_case() {
        for (text, level) in
            [("debug", "debug"), ("Info", "info"), ("WARN", "warn"), ("error", "error"), ("DPanic", "dpanic")]
        {
            assert_eq!(zap_level(text), Some(level));
        }
        assert_eq!(zap_level(""), Some("info"));
        assert_eq!((zap_level("warning"), zap_level("trace")), (None, None));
    }
}
