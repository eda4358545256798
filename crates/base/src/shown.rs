//! Text from outside made safe to show on a terminal: what a server answered, a journal line,
//! a file a runbook read or an argument may hold control characters (ESC, BEL, a carriage
//! return) that would retitle, clear or rewrite the operator's terminal. Human output passes
//! such text through `escaped`, which writes each one visibly (`\x1b`, `\x07`, `\u{9b}`);
//! line breaks and tabs stay as they are. The bidirectional controls (U+202A–U+202E,
//! U+2066–U+2069, the marks U+200E, U+200F, U+061C) are escaped too: they reorder what the
//! operator reads (`evil\u{202e}txt.exe`) without being control characters to Rust. JSON output needs nothing: JSON escapes them itself. `html` is the page's escaping of the
//! same text (one escaper, which the redactor also applies to know a secret's HTML form).

use std::borrow::Cow;
use std::fmt::Write;

/// `text` with every control character but a line break or a tab written as an escape.
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(needs_escape) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if !needs_escape(c) => out.push(c),
            c if (c as u32) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
        }
    }
    Cow::Owned(out)
}

fn needs_escape(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t') || is_bidi_control(c)
}

/// The characters that change the order text is shown in.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}' | '\u{061c}')
}

/// `text` followed by spaces up to `width` characters: a table's cell, however long (`format!`'s
/// width stops at 65,535 and panics past it).
pub fn padded(text: &str, width: usize) -> String {
    let mut out = String::with_capacity(text.len().max(width));
    out.push_str(text);
    out.extend(std::iter::repeat_n(' ', width.saturating_sub(text.chars().count())));
    out
}

/// `text` for HTML content and attribute values (`&`, `<`, `>`, `"` and `'` as entities).
pub fn html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` for XML attributes and content, as JUnit reports write it (`&`, `<`, `>`, `"` and
/// `'` as entities; control characters but tab and newlines dropped).
pub fn xml(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_written_visibly_and_nothing_else_changes() {
        assert_eq!(escaped("\u{1b}]0;PWNED\u{7}\u{1b}[2J"), "\\x1b]0;PWNED\\x07\\x1b[2J");
        assert_eq!(escaped("over\rwritten \u{7f} \u{9b}31m"), "over\\x0dwritten \\x7f \\u{9b}31m");
        assert!(matches!(escaped("two\n\tlines — ünïcode"), Cow::Borrowed("two\n\tlines — ünïcode")));
        assert_eq!(escaped("evil\u{202e}txt.exe \u{2066}x\u{2069}"), "evil\\u{202e}txt.exe \\u{2066}x\\u{2069}");
        assert_eq!(padded("ab", 4), "ab  ");
        assert_eq!(padded(&"x".repeat(70_000), 70_001).len(), 70_001);
    }
}
