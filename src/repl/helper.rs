//! The line editor's helper: tab completion (host functions and namespaces, stdlib modules,
//! runbooks after `:run`, unit names inside `unit::…("`), a hint showing the signature of
//! the function being typed, and the validator that tells an unfinished statement (open
//! brace, unterminated string) from a wrong one, so the first continues on the next line.

use rustyline::completion::{Completer, Pair};
use rustyline::highlight::Highlighter;
use rustyline::hint::Hinter;
use rustyline::validate::{ValidationContext, ValidationResult, Validator};
use rustyline::{Context, Helper};

use opsbook_engine::functions::Function;

/// What completion draws from; refreshed by `:reload`.
#[derive(Default, Clone)]
pub(super) struct Vocabulary {
    pub functions: Vec<Function>,
    pub runbooks: Vec<String>,
    pub modules: Vec<String>,
    pub units: Vec<String>,
    pub commands: Vec<&'static str>,
}

pub(super) struct ReplHelper {
    pub(crate) vocabulary: Vocabulary,
    /// A parse-only engine (same keyword handling as the real one) for the validator.
    pub parser: rhai::Engine,
}

/// The identifier (with `::` paths) that ends at `pos`.
fn word_before(line: &str, pos: usize) -> (usize, &str) {
    let head = &line[..pos];
    let start = head.rfind(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).map_or(0, |i| i + 1);
    (start, &head[start..])
}

impl Completer for ReplHelper {
    type Candidate = Pair;

    fn complete(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> rustyline::Result<(usize, Vec<Pair>)> {
        let head = &line[..pos];
        let pair = |s: &str| Pair { display: s.to_string(), replacement: s.to_string() };
        // `:run NAME` and `:doc NAME`
        for cmd in [":run ", ":doc "] {
            if let Some(rest) = head.strip_prefix(cmd)
                && !rest.contains(' ')
            {
                let mut names: Vec<&String> = self.vocabulary.runbooks.iter().filter(|r| r.starts_with(rest)).collect();
                if cmd == ":doc " {
                    names.extend(self.vocabulary.functions.iter().map(|f| &f.name).filter(|n| n.starts_with(rest)));
                }
                names.dedup();
                return Ok((cmd.len(), names.into_iter().map(|n| pair(n)).collect()));
            }
        }
        if head.starts_with(':') && !head.contains(' ') {
            return Ok((0, self.vocabulary.commands.iter().filter(|c| c.starts_with(head)).map(|c| pair(c)).collect()));
        }
        // Inside a string right after `unit::…(`: unit names.
        if let Some(open) = head.rfind("(\"")
            && head[..open]
                .rsplit(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .is_some_and(|f| f.starts_with("unit::"))
            && !head[open + 2..].contains('"')
        {
            let typed = &head[open + 2..];
            let units = self.vocabulary.units.iter().filter(|u| u.starts_with(typed)).map(|u| pair(u)).collect();
            return Ok((open + 2, units));
        }
        // `import "…`: stdlib modules.
        if let Some(rest) = head.trim_start().strip_prefix("import \"")
            && !rest.contains('"')
        {
            let start = pos - rest.len();
            return Ok((
                start,
                self.vocabulary.modules.iter().filter(|m| m.starts_with(rest)).map(|m| pair(m)).collect(),
            ));
        }
        let (start, word) = word_before(line, pos);
        if word.is_empty() {
            return Ok((pos, Vec::new()));
        }
        let mut names: Vec<String> = Vec::new();
        for f in &self.vocabulary.functions {
            let full = if f.namespace.is_empty() { f.name.clone() } else { format!("{}::{}", f.namespace, f.name) };
            if full.starts_with(word) && !names.contains(&full) {
                names.push(full);
            }
            let ns = format!("{}::", f.namespace);
            if !f.namespace.is_empty() && ns.starts_with(word) && word.len() < ns.len() && !names.contains(&ns) {
                names.push(ns);
            }
        }
        names.sort();
        Ok((start, names.iter().map(|n| pair(n)).collect()))
    }
}

impl Hinter for ReplHelper {
    type Hint = String;

    fn hint(&self, line: &str, pos: usize, _ctx: &Context<'_>) -> Option<String> {
        if pos < line.len() {
            return None;
        }
        // The function whose argument list the cursor is in: `unit::status("lo` → its signature.
        let open = line[..pos].rfind('(')?;
        let (_, name) = word_before(line, open);
        let (ns, fname) = name.rsplit_once("::").unwrap_or(("", name));
        let sigs: Vec<&str> = self
            .vocabulary
            .functions
            .iter()
            .filter(|f| f.name == fname && f.namespace == ns)
            .map(|f| f.signature.as_str())
            .collect();
        (!sigs.is_empty()).then(|| format!("    {}", sigs.join("  |  ")))
    }
}

impl Highlighter for ReplHelper {
    fn highlight_hint<'h>(&self, hint: &'h str) -> std::borrow::Cow<'h, str> {
        std::borrow::Cow::Owned(format!("\x1b[2m{hint}\x1b[0m"))
    }
}

impl Validator for ReplHelper {
    fn validate(&self, ctx: &mut ValidationContext<'_>) -> rustyline::Result<ValidationResult> {
        Ok(if incomplete(&self.parser, ctx.input()) {
            ValidationResult::Incomplete
        } else {
            ValidationResult::Valid(None)
        })
    }
}

impl Helper for ReplHelper {}

/// Whether `input` is an unfinished statement (more lines would complete it), as opposed to
/// complete or wrong (both are handed to the engine, which reports a wrong one).
pub(super) fn incomplete(parser: &rhai::Engine, input: &str) -> bool {
    if input.trim_start().starts_with(':') || input.trim().is_empty() {
        return false;
    }
    match parser.compile(input) {
        Ok(_) => false,
        Err(e) => {
            use rhai::{LexError, ParseErrorType};
            match e.err_type() {
                ParseErrorType::UnexpectedEOF => true,
                ParseErrorType::BadInput(LexError::UnterminatedString) => true,
                ParseErrorType::MissingToken(..) => {
                    // A missing `}`/`)`/`]` at the very end: still typing.
                    let pos = e.position();
                    let last_line = input.lines().count();
                    pos.line().is_none_or(|l| l >= last_line)
                        && (open_count(input, '{', '}') > 0
                            || open_count(input, '(', ')') > 0
                            || open_count(input, '[', ']') > 0)
                }
                _ => false,
            }
        }
    }
}

fn open_count(input: &str, open: char, close: char) -> i64 {
    let mut depth = 0i64;
    let mut in_string = None;
    for c in input.chars() {
        match (in_string, c) {
            (Some(q), c) if c == q => in_string = None,
            (Some(_), _) => {}
            (None, '"' | '`') => in_string = Some(c),
            (None, c) if c == open => depth += 1,
            (None, c) if c == close => depth -= 1,
            _ => {}
        }
    }
    depth
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unfinished_input_continues() {
        let e = rhai::Engine::new();
        assert!(incomplete(&e, "fn f(x) {"));
        assert!(incomplete(&e, "let s = \"abc"));
        assert!(incomplete(&e, "let a = [1, 2,"));
        assert!(incomplete(&e, "if x {\n  1"));
        assert!(!incomplete(&e, "let a = 1;"));
        assert!(!incomplete(&e, "let a = ;"));
        assert!(!incomplete(&e, ":help"));
    }
}
