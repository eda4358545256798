//! A problem found in a `.alloy` file (`Diag`, at byte offsets) and how `alloy validate`
//! prints it: `Error: FILE:LINE:COL: MESSAGE`, a blank line, the lines around the place with a
//! caret line under it (a bar down the margin when it spans lines).

/// One problem, at byte offsets of the file (`end` inclusive; none: one character).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Diag {
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
