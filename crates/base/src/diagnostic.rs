//! Rustc-style rendering of an error that points into a file.
//!
//! Used for malformed config files and for runbook/module compile and runtime errors, so
//! that every "your file is wrong here" message looks the same:
//!
//! ```text
//! error: expected ';' after statement
//!   --> runbooks/restart-all.rhai:12:5
//!    |
//! 12 |     sleep(settle)
//!    |     ^
//!    = help: …
//! ```

use std::fmt;

/// An error at a place in a text file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// What is wrong.
    pub message: String,
    /// The file, as messages name it.
    pub file: String,
    /// 1-based; 0 when the position is unknown.
    pub line: usize,
    /// 1-based; 0 when the position is unknown.
    pub column: usize,
    /// The text of `line`, when the file could be read.
    pub(crate) source_line: Option<String>,
    /// Extra lines printed after the caret, each as `= help: …` or `= note: …`.
    pub notes: Vec<String>,
}

impl Diagnostic {
    /// A diagnostic at a 1-based line and column of `text`.
    pub fn at(
        message: impl Into<String>,
        file: impl Into<String>,
        text: Option<&str>,
        line: usize,
        column: usize,
    ) -> Self {
        let source_line = text.and_then(|t| t.lines().nth(line.checked_sub(1)?)).map(str::to_string);
        Diagnostic { message: message.into(), file: file.into(), line, column, source_line, notes: Vec::new() }
    }

    /// A diagnostic at a byte offset of `text`.
    pub fn at_offset(message: impl Into<String>, file: impl Into<String>, text: &str, offset: usize) -> Self {
        let (line, column) = line_column(text, offset);
        Self::at(message, file, Some(text), line, column)
    }

    /// Adds a note, written after the caret.
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..floor_char_boundary(text, offset)];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn floor_char_boundary(text: &str, mut offset: usize) -> usize {
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    offset
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "error: {}", self.message)?;
        let gutter = " ".repeat(self.line.max(1).to_string().len());
        if self.line == 0 {
            writeln!(f, "{gutter}--> {}", self.file)?;
        } else {
            writeln!(f, "{gutter}--> {}:{}:{}", self.file, self.line, self.column)?;
        }
        if let Some(src) = &self.source_line {
            // Tabs are shown as four spaces so the caret lines up; a token on the line is
            // shown redacted, and the caret stays under the same text.
            let shown = crate::secret::redact(&src.replace('\t', "    ")).into_owned();
            let prefix: String = src.chars().take(self.column.saturating_sub(1)).collect();
            let prefix = prefix.replace('\t', "    ");
            let caret_at = crate::secret::redact(&prefix).chars().count().min(shown.chars().count());
            writeln!(f, "{gutter} |")?;
            writeln!(f, "{} | {}", self.line, shown)?;
            writeln!(f, "{gutter} | {}^", " ".repeat(caret_at))?;
        }
        for note in &self.notes {
            writeln!(f, "{gutter} = {note}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_caret_under_column() {
        let text = "let a = 1;\nlet b = ;\n";
        let d = Diagnostic::at("expected an expression", "x.rhai", Some(text), 2, 9);
        let shown = d.to_string();
        assert!(shown.contains("--> x.rhai:2:9"), "{shown}");
        assert!(shown.contains("2 | let b = ;\n  |         ^"), "{shown}");
    }

    #[test]
    fn offsets_become_line_and_column() {
        assert_eq!(line_column("ab\ncd", 4), (2, 2));
        assert_eq!(line_column("ab", 0), (1, 1));
        assert_eq!(line_column("é\nx", 3), (2, 1));
    }
}
