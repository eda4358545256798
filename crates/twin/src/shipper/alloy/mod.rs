//! The log shipper's configuration in Alloy's own syntax (`config.alloy`), the subset a
//! journal-to-Loki pipeline uses: `logging { level, format }`, `loki.source.journal "L" {
//! forward_to, labels, max_age, path, matches }` and `loki.write "L" { endpoint { url,
//! batch_wait, batch_size, remote_timeout, … } external_labels }`.
//!
//! `scan` and `parse` read the syntax, `decode` checks the components, their attributes and
//! references and builds the shipper's config (`values` reads durations and sizes); here, the diagnostics are printed as
//! `alloy validate` prints them: `Error: FILE:LINE:COL: MESSAGE`, a blank line, the lines
//! around the place with a caret line under it (a bar down the margin when it spans lines).

mod decode;
mod parse;
mod scan;
mod values;

use std::path::Path;

use super::config::ShipperConfig;

/// One problem, at byte offsets of the file (`end` inclusive; none: one character).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Diag {
    pub start: usize,
    pub end: Option<usize>,
    pub message: String,
}

impl Diag {
    pub(super) fn at(start: usize, message: impl Into<String>) -> Diag {
        Diag { start, end: None, message: message.into() }
    }

    pub(super) fn span(start: usize, end: usize, message: impl Into<String>) -> Diag {
        Diag { start, end: Some(end), message: message.into() }
    }
}

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

/// `LINE:COL` of a byte offset (both from 1; the column counts bytes, as Go's does).
pub(super) fn line_col(text: &str, offset: usize) -> String {
    let (line, col) = position(text, offset);
    format!("{line}:{col}")
}

fn position(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = offset - before.rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, col)
}

const TAB_WIDTH: usize = 4;

/// Diagnostics as Alloy's printer writes them without colour: one line of context before
/// and after, tabs shown as four spaces, a blank line between diagnostics.
pub(super) fn render(file: &str, text: &str, diags: &[Diag]) -> String {
    let lines: Vec<&str> = text.split('\n').collect();
    let mut out = String::new();
    for (i, d) in diags.iter().enumerate() {
        let start = position(text, d.start);
        let end = position(text, d.end.unwrap_or(d.start));
        out.push_str(&format!("Error: {file}:{}:{}: {}\n\n", start.0, start.1, d.message));
        let first = start.0.saturating_sub(1).max(1);
        let last = (end.0 + 1).min(lines.len());
        let multiline = end.0 > start.0;
        let width = last.to_string().len();
        for n in first..=last {
            let line = lines[n - 1];
            out.push_str(&format!("{n:>width$} | "));
            if multiline {
                out.push_str(if in_range(n, 0, start, end) { "| " } else { "  " });
            }
            for c in line.chars() {
                match c {
                    '\r' => {}
                    '\t' | '\u{b}' => out.push_str(&" ".repeat(TAB_WIDTH)),
                    c => out.push(c),
                }
            }
            out.push('\n');
            if n == start.0 || (multiline && n == end.0) {
                out.push_str(&" ".repeat(width));
                out.push_str(match (multiline, n == start.0) {
                    (true, true) => " |  _",
                    (true, false) => " | |_",
                    _ => " | ",
                });
                focus(&mut out, line, n, start, end);
                out.push('\n');
            }
        }
        if i + 1 < diags.len() {
            out.push('\n');
        }
    }
    out
}

/// The caret line under `line` (number `n`): `^` over the range, blanks (or `_` for a range
/// over several lines) before it.
fn focus(out: &mut String, line: &str, n: usize, start: (usize, usize), end: (usize, usize)) {
    let blank = if end.0 > start.0 { '_' } else { ' ' };
    for (i, c) in line.char_indices() {
        let column = i + 1;
        if n == end.0 && column > end.1 {
            break;
        }
        if c == '\t' || c == '\u{b}' {
            out.extend(std::iter::repeat_n(blank, TAB_WIDTH));
        } else if in_range(n, column, start, end) {
            out.push('^');
        } else {
            out.push(blank);
        }
    }
}

fn in_range(line: usize, col: usize, start: (usize, usize), end: (usize, usize)) -> bool {
    if line < start.0 || line > end.0 {
        return false;
    }
    if line == start.0 {
        col >= start.1
    } else if line == end.0 {
        col <= end.1
    } else {
        true
    }
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
