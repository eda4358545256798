//! What a template's `{{ value }}` may put into a configuration file: a value never changes
//! the file's structure (#50: an org `myorg"\n[[outputs.file]]…` added a section to the
//! planned `telegraf.conf`). By the template's format, from its name:
//! - every format is made of lines (TOML, YAML, Alloy, systemd units): a value holding a line
//!   break or another control character is refused;
//! - TOML and Alloy (`.toml`, `.conf`, `.alloy`) put values inside `"…"`: `"` and `\` are
//!   escaped there as both formats read them (`\"`, `\\`);
//! - YAML (`.yaml`, `.yml`) puts them bare: a value holding what YAML reads as structure
//!   (`: `, ` #`, quotes, brackets, a leading indicator) is refused.
//!
//! Numbers, booleans and the rest are written as minijinja writes them.

use minijinja::{Error, ErrorKind, Output, State, Value};

/// The format of the template `name`, by its extension before `.j2`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Format {
    Quoted,
    Yaml,
    Lines,
}

fn format_of(name: &str) -> Format {
    let name = name.strip_suffix(".j2").unwrap_or(name);
    match name.rsplit_once('.').map(|(_, ext)| ext) {
        Some("toml" | "conf" | "alloy") if !name.starts_with("units/") => Format::Quoted,
        Some("yaml" | "yml") => Format::Yaml,
        _ => Format::Lines,
    }
}

/// minijinja's formatter for opsbook's templates: writes a string value as its template's
/// format allows, or refuses it.
pub(crate) fn write(out: &mut Output, state: &mut State, value: &Value) -> Result<(), Error> {
    let Some(text) = value.as_str() else { return minijinja::escape_formatter(out, state, value) };
    let refuse = |why: &str| {
        Err(Error::new(
            ErrorKind::InvalidOperation,
            format!("a value {why}: refused, as it would change the file's structure"),
        ))
    };
    if text.chars().any(char::is_control) {
        return refuse("holds a line break or a control character");
    }
    let written = match format_of(state.name()) {
        Format::Quoted => text.replace('\\', "\\\\").replace('"', "\\\""),
        Format::Yaml if yaml_structure(text) => {
            return refuse("holds what YAML reads as structure (`: `, ` #`, quotes, brackets)");
        }
        Format::Yaml | Format::Lines => text.to_string(),
    };
    out.write_str(&written).map_err(Error::from)
}

/// Whether `text`, written bare in YAML, would be read as more than one plain string.
fn yaml_structure(text: &str) -> bool {
    text.contains(": ")
        || text.contains(" #")
        || text.ends_with(':')
        || text.contains(['"', '\'', '{', '}', '[', ']', ',', '`'])
        || text.starts_with(['-', '?', ':', '#', '&', '*', '!', '|', '>', '%', '@', ' '])
        || text.ends_with(' ')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_template_s_format_comes_from_its_name() {
        assert_eq!(format_of("metrics-agent/telegraf.conf.j2"), Format::Quoted);
        assert_eq!(format_of("log-shipper/config.alloy.j2"), Format::Quoted);
        assert_eq!(format_of("log-store/config.yaml.j2"), Format::Yaml);
        assert_eq!(format_of("units/dropin.conf.j2"), Format::Lines);
        assert_eq!(format_of("units/native.service.j2"), Format::Lines);
    }

    #[test]
    fn yaml_structure_is_seen_and_plain_values_pass() {
        for bad in ["a: b", "x #c", "[1]", "{a}", "-x", "'q'", "a,b", "*ref"] {
            assert!(yaml_structure(bad), "{bad}");
        }
        for good in ["/var/lib/loki", "744h", "http://h:3100", "a-b_c.d"] {
            assert!(!yaml_structure(good), "{good}");
        }
    }
}
