//! The tokens of Alloy's configuration syntax, scanned as Alloy's own scanner does: a newline
//! after an identifier, a literal or a closing `)`, `]`, `}` ends a statement (a TERMINATOR
//! token, so lists and objects may span lines after a `,`), `//` and `/* */` comments are
//! skipped, and a string cut by the end of its line is `string literal not terminated`.

use super::diag::Diag;

/// A token's kind; `name` is how Alloy's parser names it in its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Tok {
    Illegal,
    Eof,
    Ident,
    Number,
    Float,
    Str,
    Bool,
    Null,
    Or,
    And,
    Not,
    Assign,
    Eq,
    Neq,
    Lt,
    Lte,
    Gt,
    Gte,
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    LCurly,
    RCurly,
    LParen,
    RParen,
    LBrack,
    RBrack,
    Comma,
    Dot,
    Terminator,
}

impl Tok {
    pub(super) fn name(self) -> &'static str {
        use Tok::*;
        match self {
            Illegal => "ILLEGAL",
            Eof => "EOF",
            Ident => "IDENT",
            Number => "NUMBER",
            Float => "FLOAT",
            Str => "STRING",
            Bool => "BOOL",
            Null => "NULL",
            Or => "||",
            And => "&&",
            Not => "!",
            Assign => "=",
            Eq => "==",
            Neq => "!=",
            Lt => "<",
            Lte => "<=",
            Gt => ">",
            Gte => ">=",
            Add => "+",
            Sub => "-",
            Mul => "*",
            Div => "/",
            Mod => "%",
            Pow => "^",
            LCurly => "{",
            RCurly => "}",
            LParen => "(",
            RParen => ")",
            LBrack => "[",
            RBrack => "]",
            Comma => ",",
            Dot => ".",
            Terminator => "TERMINATOR",
        }
    }

    /// Binding strength as a binary operator (0: not one).
    pub(super) fn precedence(self) -> u8 {
        use Tok::*;
        match self {
            Or => 1,
            And => 2,
            Eq | Neq | Lt | Lte | Gt | Gte => 3,
            Add | Sub => 4,
            Mul | Div | Mod => 5,
            Pow => 6,
            _ => 0,
        }
    }
}

/// One token: its kind, its text and where it is (byte offsets, `end` exclusive).
#[derive(Debug, Clone)]
pub(super) struct Token {
    pub tok: Tok,
    pub pos: usize,
    pub end: usize,
    pub(crate) lit: String,
}

/// Every token of `text`, ending with EOF, and the scanner's errors.
pub(super) fn scan(text: &str) -> (Vec<Token>, Vec<Diag>) {
    let mut s = Scanner { text, at: 0, insert_term: false, errors: Vec::new() };
    let mut tokens = Vec::new();
    loop {
        let t = s.next_token();
        let eof = t.tok == Tok::Eof;
        tokens.push(t);
        if eof {
            return (tokens, s.errors);
        }
    }
}

struct Scanner<'a> {
    text: &'a str,
    at: usize,
    insert_term: bool,
    errors: Vec<Diag>,
}

impl Scanner<'_> {
    fn peek(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    fn peek2(&self) -> Option<char> {
        self.text[self.at..].chars().nth(1)
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.at += c.len_utf8();
        Some(c)
    }

    fn token(&self, tok: Tok, pos: usize) -> Token {
        Token { tok, pos, end: self.at, lit: self.text[pos..self.at].to_string() }
    }

    fn skip_whitespace(&mut self) {
        while let Some(c) = self.peek() {
            if c == ' ' || c == '\t' || c == '\r' || (c == '\n' && !self.insert_term) {
                self.at += 1;
            } else {
                break;
            }
        }
    }

    /// Whether the comment starting here runs to the end of its line (or holds a newline).
    fn comment_ends_line(&self) -> bool {
        let rest = &self.text[self.at..];
        if rest.starts_with("//") {
            return true;
        }
        match rest[2..].find("*/") {
            Some(close) => {
                rest[2..2 + close].contains('\n')
                    || rest[4 + close..].chars().take_while(|c| *c != '\n').all(|c| c == ' ' || c == '\t' || c == '\r')
            }
            None => true,
        }
    }

    fn skip_comment(&mut self) {
        let rest = &self.text[self.at..];
        if rest.starts_with("//") {
            self.at += rest.find('\n').unwrap_or(rest.len());
            return;
        }
        match rest[2..].find("*/") {
            Some(close) => self.at += close + 4,
            None => {
                self.errors.push(Diag::at(self.at, "block comment not terminated"));
                self.at = self.text.len();
            }
        }
    }

    fn next_token(&mut self) -> Token {
        loop {
            self.skip_whitespace();
            let pos = self.at;
            let Some(c) = self.peek() else {
                if std::mem::take(&mut self.insert_term) {
                    return Token { tok: Tok::Terminator, pos, end: pos, lit: "\n".into() };
                }
                return self.token(Tok::Eof, pos);
            };
            if c == '/' && matches!(self.peek2(), Some('/') | Some('*')) {
                if self.insert_term && self.comment_ends_line() {
                    self.insert_term = false;
                    return Token { tok: Tok::Terminator, pos, end: pos, lit: "\n".into() };
                }
                self.skip_comment();
                continue;
            }
            let (tok, term) = self.scan_one(c, pos);
            if tok == Tok::Terminator {
                self.insert_term = false;
                return Token { tok, pos, end: self.at, lit: "\n".into() };
            }
            self.insert_term = term;
            return self.token(tok, pos);
        }
    }

    /// Scans the token starting with `c` at `pos`: its kind, and whether a newline after
    /// it ends the statement.
    fn scan_one(&mut self, c: char, pos: usize) -> (Tok, bool) {
        if c.is_alphabetic() || c == '_' {
            while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                self.bump();
            }
            return match &self.text[pos..self.at] {
                "true" | "false" => (Tok::Bool, true),
                "null" => (Tok::Null, true),
                _ => (Tok::Ident, true),
            };
        }
        if c.is_ascii_digit() || (c == '.' && self.peek2().is_some_and(|d| d.is_ascii_digit())) {
            return (self.scan_number(), true);
        }
        self.bump();
        let two = |s: &mut Self, next: char, one: Tok, both: Tok| {
            if s.peek() == Some(next) {
                s.bump();
                both
            } else {
                one
            }
        };
        match c {
            '\n' => (Tok::Terminator, false),
            '"' => {
                self.scan_string(pos, '"', false);
                (Tok::Str, true)
            }
            '`' => {
                self.scan_string(pos, '`', true);
                (Tok::Str, true)
            }
            '\'' => {
                self.errors.push(Diag::at(pos, "illegal single-quoted string; use double quotes"));
                self.scan_string(pos, '\'', false);
                (Tok::Illegal, true)
            }
            '|' | '&' => {
                if self.peek() == Some(c) {
                    self.bump();
                } else {
                    self.errors.push(Diag::at(self.at, format!("missing second {c} in {c}{c}")));
                }
                (if c == '|' { Tok::Or } else { Tok::And }, false)
            }
            '!' => (two(self, '=', Tok::Not, Tok::Neq), false),
            '=' => (two(self, '=', Tok::Assign, Tok::Eq), false),
            '<' => (two(self, '=', Tok::Lt, Tok::Lte), false),
            '>' => (two(self, '=', Tok::Gt, Tok::Gte), false),
            '+' => (Tok::Add, false),
            '-' => (Tok::Sub, false),
            '*' => (Tok::Mul, false),
            '/' => (Tok::Div, false),
            '%' => (Tok::Mod, false),
            '^' => (Tok::Pow, false),
            '{' => (Tok::LCurly, false),
            '}' => (Tok::RCurly, true),
            '(' => (Tok::LParen, false),
            ')' => (Tok::RParen, true),
            '[' => (Tok::LBrack, false),
            ']' => (Tok::RBrack, true),
            ',' => (Tok::Comma, false),
            '.' => (Tok::Dot, false),
            other => {
                self.errors.push(Diag::at(pos, format!("illegal character {}", go_char(other))));
                (Tok::Illegal, self.insert_term)
            }
        }
    }

    fn scan_number(&mut self) -> Tok {
        let mut tok = Tok::Number;
        while self.peek().is_some_and(|c| c.is_ascii_digit()) {
            self.bump();
        }
        if self.peek() == Some('.') {
            tok = Tok::Float;
            self.bump();
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.bump();
            }
        }
        if matches!(self.peek(), Some('e') | Some('E')) {
            tok = Tok::Float;
            self.bump();
            if matches!(self.peek(), Some('+') | Some('-')) {
                self.bump();
            }
            while self.peek().is_some_and(|c| c.is_ascii_digit()) {
                self.bump();
            }
        }
        tok
    }

    /// Consumes a string whose opening quote at `pos` was read.
    fn scan_string(&mut self, pos: usize, until: char, multiline: bool) {
        loop {
            match self.peek() {
                None => break self.errors.push(Diag::at(pos, "string literal not terminated")),
                Some('\n') if !multiline => break self.errors.push(Diag::at(pos, "string literal not terminated")),
                Some(c) => {
                    self.bump();
                    if c == until {
                        break;
                    }
                    if c == '\\' && !multiline && self.peek().is_some_and(|n| n != '\n') {
                        self.bump();
                    }
                }
            }
        }
    }
}

/// Go's `%#U` of a character: `U+0040 '@'`.
fn go_char(c: char) -> String {
    format!("U+{:04X} '{c}'", c as u32)
}

/// The value of a string literal as written (quotes included): escapes resolved.
pub(super) fn unquote(lit: &str) -> String {
    if let Some(raw) = lit.strip_prefix('`') {
        return raw.strip_suffix('`').unwrap_or(raw).to_string();
    }
    let inner = lit.strip_prefix('"').unwrap_or(lit);
    let inner = inner.strip_suffix('"').unwrap_or(inner);
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('a') => out.push('\u{7}'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('v') => out.push('\u{b}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                out.extend(u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32));
            }
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(text: &str) -> Vec<&'static str> {
        scan(text).0.iter().map(|t| t.tok.name()).collect()
    }

    #[test]
    fn newlines_end_statements_only_after_values() {
        assert_eq!(
            kinds("a = [\n  b.c,\n]\nx \"l\" { // note\n}\n"),
            vec![
                "IDENT",
                "=",
                "[",
                "IDENT",
                ".",
                "IDENT",
                ",",
                "]",
                "TERMINATOR",
                "IDENT",
                "STRING",
                "{",
                "}",
                "TERMINATOR",
                "EOF"
            ]
        );
        assert_eq!(kinds("n = 1.5 /* c */\n"), vec!["IDENT", "=", "FLOAT", "TERMINATOR", "EOF"]);
    }

    #[test]
    fn an_unterminated_string_is_reported_at_its_quote() {
        let (tokens, errors) = scan("x \"ab {\n");
        assert_eq!(tokens[1].lit, "\"ab {");
        assert_eq!((errors[0].start, errors[0].message.as_str()), (2, "string literal not terminated"));
    }

    #[test]
    fn escapes_are_resolved() {
        assert_eq!(unquote(r#""a\"b\n\u0041""#), "a\"b\nA");
        assert_eq!(unquote("`raw\\n`"), "raw\\n");
    }
}
