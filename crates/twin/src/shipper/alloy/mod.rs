//! The log shipper's configuration in Alloy's own syntax (`config.alloy`), the subset a
//! journal-to-Loki pipeline uses: `logging { level, format }`, `loki.source.journal "L" {
//! forward_to, labels, max_age, path, matches }` and `loki.write "L" { endpoint { url,
//! batch_wait, batch_size, remote_timeout, … } external_labels }`.
//!
//! `scan` and `parse` read the syntax, `decode` checks the components, their attributes and
//! references and builds the shipper's config (`values` reads durations and sizes); `diag` prints the diagnostics as
//! `alloy validate` prints them: `Error: FILE:LINE:COL: MESSAGE`, a blank line, the lines
//! around the place with a caret line under it (a bar down the margin when it spans lines).

mod decode;
mod diag;
mod parse;
mod scan;
mod values;

use std::path::Path;

use super::config::ShipperConfig;
use diag::{Diag, line_col, render};

/// Why a file could not be loaded, as `alloy run` and `/-/reload` word it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Invalid {
    /// The file could not be read: Go's `stat PATH: no such file or directory`.
    Unreadable(String),
    /// Syntax errors (`reading config path`) or component errors (`the initial load`).
    Diagnostics { file: String, text: String, diags: Vec<Diag>, syntax: bool },
}

impl Invalid {
    /// The one-line error: what `/-/reload` answers and the shipper logs.
    pub(super) fn summary(&self) -> String {
        match self {
            Invalid::Unreadable(e) => e.clone(),
            Invalid::Diagnostics { file, text, diags, syntax } => {
                let first = format!("{file}:{}: {}", line_col(text, diags[0].start), diags[0].message);
                let all = match diags.len() {
                    1 => first,
                    n => format!("{first} (and {} more diagnostics)", n - 1),
                };
                if *syntax {
                    format!("reading config path {file:?}: {all}")
                } else {
                    format!("error during the initial load: {all}")
                }
            }
        }
    }

    /// The report on stderr: the diagnostics with their excerpts (empty when unreadable).
    pub(super) fn report(&self) -> String {
        match self {
            Invalid::Unreadable(_) => String::new(),
            Invalid::Diagnostics { file, text, diags, .. } => render(file, text, diags),
        }
    }
}

/// Reads and checks a `.alloy` file; `listen` is the shipper's HTTP address (a flag).
pub(super) fn load(path: &Path, listen: &str) -> Result<ShipperConfig, Invalid> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| Invalid::Unreadable(go_io_error("stat", &file, &e)))?;
    let (body, diags) = parse::parse(&text);
    if !diags.is_empty() {
        return Err(Invalid::Diagnostics { file, text, diags, syntax: true });
    }
    decode::decode(&file, &text, &body, listen).map_err(|diags| Invalid::Diagnostics {
        file,
        text,
        diags,
        syntax: false,
    })
}

/// Go's wording of a failed file operation: `stat /x: no such file or directory`.
pub(super) fn go_io_error(op: &str, path: &str, e: &std::io::Error) -> String {
    let reason = match e.kind() {
        std::io::ErrorKind::NotFound => "no such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "permission denied".to_string(),
        std::io::ErrorKind::IsADirectory => "is a directory".to_string(),
        _ => e.to_string(),
    };
    format!("{op} {path}: {reason}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn printed_as_alloy_prints_them() {
        let text = "logging {\n\ttest = \"test\"\n}\n\nimport.git \"git\" {\n  revision   = \"main\"\n}\n";
        let attr = text.find("test").unwrap();
        let block = text.find("import").unwrap();
        let diags = vec![
            Diag::span(attr, attr + 12, "unrecognized attribute name \"test\""),
            Diag::span(block, text.rfind('}').unwrap(), "missing required attribute \"repository\""),
            Diag::at(text.len() - 1, "expected ], got EOF"),
        ];
        assert_eq!(
            render("main.alloy", text, &diags),
            "Error: main.alloy:2:2: unrecognized attribute name \"test\"\n\n\
             1 | logging {\n\
             2 |     test = \"test\"\n  |     ^^^^^^^^^^^^^\n\
             3 | }\n\n\
             Error: main.alloy:5:1: missing required attribute \"repository\"\n\n\
             4 |   \n\
             5 |   import.git \"git\" {\n  |  _^^^^^^^^^^^^^^^^^^\n\
             6 | |   revision   = \"main\"\n\
             7 | | }\n  | |_^\n\
             8 |   \n\n\
             Error: main.alloy:7:2: expected ], got EOF\n\n\
             6 |   revision   = \"main\"\n\
             7 | }\n  |  \n\
             8 | \n"
        );
    }

    #[test]
    fn one_line_summaries() {
        let text = "a {\n}\n".to_string();
        let two = vec![Diag::at(0, "first"), Diag::at(4, "second")];
        let syntax = Invalid::Diagnostics { file: "c.alloy".into(), text: text.clone(), diags: two, syntax: true };
        assert_eq!(syntax.summary(), "reading config path \"c.alloy\": c.alloy:1:1: first (and 1 more diagnostics)");
        let load = Invalid::Diagnostics { file: "c.alloy".into(), text, diags: vec![Diag::at(4, "x")], syntax: false };
        assert_eq!(load.summary(), "error during the initial load: c.alloy:2:1: x");
    }
}
