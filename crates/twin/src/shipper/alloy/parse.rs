//! Alloy's configuration syntax parsed into statements: attributes `name = expr` and blocks
//! `a.b "label" { … }`, with expressions (literals, lists, objects, references like
//! `loki.write.default.receiver`, and the operators and calls, which parse but which the twin
//! does not evaluate). The grammar, the error messages and the recovery after an error
//! (skip to the next statement, one error per line) follow Alloy's own parser, so a broken
//! file gets the diagnostics `alloy validate` prints.

use super::diag::Diag;
use super::scan::{Tok, Token, scan, unquote};

/// A statement of a body.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Stmt {
    Attr(Attr),
    Block(Block),
}

/// `name = value`; it spans from `pos` to the end of its value.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Attr {
    pub name: String,
    pub pos: usize,
    pub value: Expr,
}

/// `a.b "label" { body }`, from `pos` to its closing brace at `end`.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Block {
    pub name: Vec<String>,
    pub pos: usize,
    pub label: Option<String>,
    pub body: Vec<Stmt>,
    pub end: usize,
}

impl Block {
    /// `loki.write`
    pub(super) fn full_name(&self) -> String {
        self.name.join(".")
    }

    /// `loki.write.default`: how references and duplicates name a component.
    pub(super) fn id(&self) -> String {
        match &self.label {
            Some(l) => format!("{}.{l}", self.full_name()),
            None => self.full_name(),
        }
    }
}

/// An expression and its extent (`end` is the offset of its last byte).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Expr {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Kind {
    Str(String),
    Number(String),
    Float(String),
    Bool(bool),
    Null,
    Ident(String),
    Access(Box<Expr>, String),
    Array(Vec<Expr>),
    Object(Vec<(String, Expr)>),
    /// Operators, indexing, calls and parentheses: parsed, not evaluated by the twin.
    Other(&'static str),
}

impl Expr {
    /// A reference's dotted path (`loki.write.default.receiver`), if the expression is one.
    pub(super) fn path(&self) -> Option<String> {
        match &self.kind {
            Kind::Ident(name) => Some(name.clone()),
            Kind::Access(inner, name) => inner.path().map(|p| format!("{p}.{name}")),
            _ => None,
        }
    }
}

/// Parses a whole file: its statements, and every diagnostic of scanning and parsing.
pub(super) fn parse(text: &str) -> (Vec<Stmt>, Vec<Diag>) {
    let (tokens, mut diags) = scan(text);
    let mut p = Parser { text, tokens, i: 0, diags: Vec::new(), last_error_line: None };
    let body = p.parse_body(Tok::Eof);
    diags.extend(p.diags);
    (body, diags)
}

struct Parser<'a> {
    text: &'a str,
    tokens: Vec<Token>,
    i: usize,
    diags: Vec<Diag>,
    last_error_line: Option<usize>,
}

impl Parser<'_> {
    fn tok(&self) -> Tok {
        self.tokens[self.i].tok
    }

    fn cur(&self) -> &Token {
        &self.tokens[self.i]
    }

    fn next(&mut self) {
        if self.i + 1 < self.tokens.len() {
            self.i += 1;
        }
    }

    /// Records an error at the current token, unless one was recorded on its line already.
    fn error(&mut self, message: String) {
        let pos = self.cur().pos;
        let line = self.text[..pos.min(self.text.len())].matches('\n').count();
        if self.last_error_line == Some(line) {
            return;
        }
        self.last_error_line = Some(line);
        self.diags.push(Diag::at(pos, message));
    }

    /// Consumes the current token, recording an error if it is not `want`.
    fn expect(&mut self, want: Tok) -> Token {
        let t = self.cur().clone();
        if t.tok != want {
            self.error(format!("expected {}, got {}", want.name(), t.tok.name()));
        }
        self.next();
        t
    }

    fn advance(&mut self, to: Tok) {
        while self.tok() != Tok::Eof && self.tok() != to {
            self.next();
        }
    }

    fn parse_body(&mut self, until: Tok) -> Vec<Stmt> {
        let mut body = Vec::new();
        while self.tok() != until && self.tok() != Tok::Eof {
            if let Some(stmt) = self.parse_statement() {
                body.push(stmt);
            }
            if self.tok() == until {
                break;
            }
            if self.tok() != Tok::Terminator {
                self.error(format!("expected TERMINATOR, got {}", self.tok().name()));
                self.consume_statement();
            }
            self.next();
        }
        body
    }

    /// Skips the rest of a statement, keeping track of nested brackets.
    fn consume_statement(&mut self) {
        let (mut curly, mut brack, mut paren) = (0i32, 0i32, 0i32);
        while self.tok() != Tok::Eof {
            match self.tok() {
                Tok::LCurly => curly += 1,
                Tok::RCurly => curly -= 1,
                Tok::LBrack => brack += 1,
                Tok::RBrack => brack -= 1,
                Tok::LParen => paren += 1,
                Tok::RParen => paren -= 1,
                Tok::Terminator if curly <= 0 && brack <= 0 && paren <= 0 => return,
                _ => {}
            }
            self.next();
        }
    }

    fn parse_statement(&mut self) -> Option<Stmt> {
        let Some((name, pos, label, label_pos)) = self.parse_block_name() else {
            self.advance(Tok::Ident);
            return None;
        };
        match self.tok() {
            Tok::Assign => {
                self.next();
                if name.len() != 1 {
                    let full = name.join(".");
                    self.diags.push(Diag::span(
                        pos,
                        pos + full.len() - 1,
                        "attribute names may only consist of a single identifier with no \".\"",
                    ));
                } else if let (Some(l), Some(lp)) = (&label, label_pos) {
                    self.diags.push(Diag::span(lp, lp + l.len() + 1, "attribute names may not have labels"));
                }
                let value = self.parse_expression();
                Some(Stmt::Attr(Attr { name: name[0].clone(), pos, value }))
            }
            Tok::LCurly => {
                self.next();
                let body = self.parse_body(Tok::RCurly);
                let end = self.expect(Tok::RCurly).pos;
                Some(Stmt::Block(Block { name, pos, label, body, end }))
            }
            other => {
                if name.len() == 1 && label.is_none() {
                    self.error(format!("expected attribute assignment or block body, got {}", other.name()));
                } else {
                    self.error(format!("expected block body, got {}", other.name()));
                }
                self.advance(Tok::Ident);
                None
            }
        }
    }

    /// `identifier { "." identifier } [ string ]`
    #[allow(clippy::type_complexity)]
    fn parse_block_name(&mut self) -> Option<(Vec<String>, usize, Option<String>, Option<usize>)> {
        if self.tok() != Tok::Ident {
            self.error(format!("expected identifier, got {}", self.tok().name()));
            return None;
        }
        let pos = self.cur().pos;
        let mut fragments = vec![self.cur().lit.clone()];
        self.next();
        while self.tok() == Tok::Dot {
            self.next();
            if self.tok() != Tok::Ident {
                self.error(format!("expected identifier, got {}", self.tok().name()));
            }
            fragments.push(self.cur().lit.clone());
            self.next();
        }
        let (mut label, mut label_pos) = (None, None);
        if self.tok() != Tok::Assign && self.tok() != Tok::LCurly {
            if self.tok() == Tok::Str {
                let lit = self.cur().lit.clone();
                if !lit.starts_with('"') {
                    self.error(format!("expected block label to be a double quoted string, but got {lit:?}"));
                }
                if lit.len() > 2 {
                    let inner = lit[1..lit.len() - 1].to_string();
                    if !valid_identifier(&inner) {
                        self.error(format!("expected block label to be a valid identifier, but got {inner:?}"));
                    }
                    label = Some(inner);
                }
                label_pos = Some(self.cur().pos);
            } else {
                self.error(format!("expected block label, got {}", self.tok().name()));
            }
            self.next();
        }
        Some((fragments, pos, label, label_pos))
    }

    fn parse_expression(&mut self) -> Expr {
        self.parse_bin_op(1)
    }

    fn parse_bin_op(&mut self, in_prec: u8) -> Expr {
        let mut lhs = self.parse_pow();
        loop {
            let prec = self.tok().precedence();
            if prec == 0 || prec == 6 || prec < in_prec {
                return lhs;
            }
            self.next();
            let rhs = self.parse_bin_op(prec + 1);
            lhs = Expr { kind: Kind::Other("operator"), start: lhs.start, end: rhs.end };
        }
    }

    fn parse_pow(&mut self) -> Expr {
        let lhs = self.parse_unary();
        if self.tok() == Tok::Pow {
            self.next();
            let rhs = self.parse_pow();
            return Expr { kind: Kind::Other("operator"), start: lhs.start, end: rhs.end };
        }
        lhs
    }

    fn parse_unary(&mut self) -> Expr {
        if matches!(self.tok(), Tok::Not | Tok::Sub) {
            let (op, start) = (self.tok(), self.cur().pos);
            self.next();
            let value = self.parse_unary();
            // A negative number literal is still a number.
            if op == Tok::Sub
                && let Kind::Number(n) | Kind::Float(n) = &value.kind
            {
                let kind = if matches!(value.kind, Kind::Number(_)) {
                    Kind::Number(format!("-{n}"))
                } else {
                    Kind::Float(format!("-{n}"))
                };
                return Expr { kind, start, end: value.end };
            }
            return Expr { kind: Kind::Other("operator"), start, end: value.end };
        }
        let mut primary = self.parse_primary();
        loop {
            match self.tok() {
                Tok::Dot => {
                    self.next();
                    let name = self.expect(Tok::Ident);
                    let start = primary.start;
                    primary = Expr { kind: Kind::Access(Box::new(primary), name.lit), start, end: name.end - 1 };
                }
                Tok::LBrack => {
                    self.next();
                    self.parse_expression();
                    let end = self.expect(Tok::RBrack).pos;
                    primary = Expr { kind: Kind::Other("index"), start: primary.start, end };
                }
                Tok::LParen => {
                    self.next();
                    if self.tok() != Tok::RParen {
                        self.parse_list(Tok::RParen);
                    }
                    let end = self.expect(Tok::RParen).pos;
                    primary = Expr { kind: Kind::Other("function call"), start: primary.start, end };
                }
                Tok::Str | Tok::LCurly => {
                    if self.tok() == Tok::Str {
                        self.next();
                    }
                    if self.expect(Tok::LCurly).tok != Tok::LCurly {
                        self.consume_statement();
                        return primary;
                    }
                    self.parse_body(Tok::RCurly);
                    let end = self.expect(Tok::RCurly);
                    if end.tok != Tok::RCurly {
                        self.consume_statement();
                        return primary;
                    }
                    self.diags.push(Diag::span(primary.start, end.pos, "cannot use a block as an expression"));
                }
                _ => return primary,
            }
        }
    }

    fn parse_primary(&mut self) -> Expr {
        let t = self.cur().clone();
        let leaf = |kind| Expr { kind, start: t.pos, end: t.end.saturating_sub(1).max(t.pos) };
        let kind = match t.tok {
            Tok::Ident => Kind::Ident(t.lit.clone()),
            Tok::Str => Kind::Str(unquote(&t.lit)),
            Tok::Number => Kind::Number(t.lit.clone()),
            Tok::Float => Kind::Float(t.lit.clone()),
            Tok::Bool => Kind::Bool(t.lit == "true"),
            Tok::Null => Kind::Null,
            Tok::LParen => {
                self.next();
                let inner = self.parse_expression();
                let end = self.expect(Tok::RParen).pos;
                return Expr { kind: inner.kind, start: t.pos, end };
            }
            Tok::LBrack => {
                self.next();
                let items = if self.tok() != Tok::RBrack { self.parse_list(Tok::RBrack) } else { Vec::new() };
                let end = self.expect(Tok::RBrack).pos;
                return Expr { kind: Kind::Array(items), start: t.pos, end };
            }
            Tok::LCurly => {
                self.next();
                let fields = if self.tok() != Tok::RBrack { self.parse_fields(Tok::RCurly) } else { Vec::new() };
                let end = self.expect(Tok::RCurly).pos;
                return Expr { kind: Kind::Object(fields), start: t.pos, end };
            }
            other => {
                self.error(format!("expected expression, got {}", other.name()));
                while !matches!(
                    self.tok(),
                    Tok::Eof | Tok::Terminator | Tok::RParen | Tok::RCurly | Tok::RBrack | Tok::Comma
                ) {
                    self.next();
                }
                return Expr { kind: Kind::Null, start: t.pos, end: t.pos };
            }
        };
        self.next();
        leaf(kind)
    }

    fn parse_list(&mut self, until: Tok) -> Vec<Expr> {
        let mut items = Vec::new();
        while self.tok() != until && self.tok() != Tok::Eof {
            items.push(self.parse_expression());
            if self.tok() == until {
                break;
            }
            if self.tok() != Tok::Comma {
                self.error("missing ',' in expression list".into());
            }
            self.next();
        }
        items
    }

    fn parse_fields(&mut self, until: Tok) -> Vec<(String, Expr)> {
        let mut fields = Vec::new();
        while self.tok() != until && self.tok() != Tok::Eof {
            let t = self.cur().clone();
            let name = match t.tok {
                Tok::Ident => {
                    self.next();
                    t.lit
                }
                Tok::Str => {
                    self.next();
                    unquote(&t.lit)
                }
                other => {
                    self.error(format!("expected field name (string or identifier), got {}", other.name()));
                    self.advance(Tok::Assign);
                    String::new()
                }
            };
            self.expect(Tok::Assign);
            fields.push((name, self.parse_expression()));
            if self.tok() == until {
                break;
            }
            if self.tok() != Tok::Comma {
                self.error("missing ',' in field list".into());
            }
            self.next();
        }
        fields
    }
}

/// A block label must be an identifier: a letter or `_`, then letters, digits or `_`.
fn valid_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    chars.next().is_some_and(|c| c.is_alphabetic() || c == '_') && chars.all(|c| c.is_alphanumeric() || c == '_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_attributes_and_references() {
        let text = "loki.write \"default\" {\n  endpoint {\n    url = \"http://x\"\n  }\n}\nlogging {\n  to = [a.b.c.receiver]\n}\n";
        let (body, diags) = parse(text);
        assert!(diags.is_empty(), "{diags:?}");
        let Stmt::Block(w) = &body[0] else { panic!("{body:?}") };
        assert_eq!((w.id(), &text[w.pos..=w.end]), ("loki.write.default".to_string(), &text[..62]));
        let Stmt::Block(e) = &w.body[0] else { panic!("{w:?}") };
        let Stmt::Attr(url) = &e.body[0] else { panic!("{e:?}") };
        assert_eq!((url.name.as_str(), &text[url.value.start..=url.value.end]), ("url", "\"http://x\""));
        assert_eq!(url.value.kind, Kind::Str("http://x".into()));
        let Stmt::Block(l) = &body[1] else { panic!("{body:?}") };
        let Stmt::Attr(to) = &l.body[0] else { panic!("{l:?}") };
        let Kind::Array(items) = &to.value.kind else { panic!("{to:?}") };
        assert_eq!(items[0].path().as_deref(), Some("a.b.c.receiver"));
        assert_eq!(&text[items[0].start..=items[0].end], "a.b.c.receiver");
    }

    #[test]
    fn errors_follow_alloys_parser() {
        let text = "// Missing string termination.\nlocal.file_match \"applogs {\n    path_targets = [{\"__path__\" = \"/tmp/app-logs/app.log\"}]\n}\n";
        let (_, diags) = parse(text);
        let got: Vec<String> =
            diags.iter().map(|d| format!("{} {}", super::super::diag::line_col(text, d.start), d.message)).collect();
        assert_eq!(
            got,
            vec![
                "2:18 string literal not terminated",
                "2:18 expected block label to be a valid identifier, but got \"applogs \"",
                "3:5 expected TERMINATOR, got IDENT",
                "4:1 expected identifier, got }",
            ]
        );
    }
}
