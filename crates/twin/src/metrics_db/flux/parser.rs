//! Flux parsing: tokens into pipelines of calls (`from(…) |> range(…) |> …`), each call's
//! arguments as expressions, filter functions included. Only the shapes the twin evaluates
//! parse; anything else is an error naming the unsupported part.

use regex::Regex;

use super::lexer::{Tok, Token};

/// An expression inside a call argument or a filter function.
#[derive(Debug, Clone)]
pub(super) enum Expr {
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Dur(i64),
    Time(i64),
    Now,
    Regex(Regex),
    Array(Vec<Expr>),
    Func {
        param: String,
        body: Box<Expr>,
    },
    /// `r.name` or `r["name"]`.
    Column {
        record: String,
        name: String,
    },
    Cmp(Box<Expr>, &'static str, Box<Expr>),
    And(Box<Expr>, Box<Expr>),
    Or(Box<Expr>, Box<Expr>),
    Not(Box<Expr>),
    Exists(Box<Expr>),
    /// A bare name (a function value such as `mean`); only unsupported calls take these.
    Ident(String),
}

/// One call in a pipeline, with its position for error messages.
#[derive(Debug, Clone)]
pub(super) struct Call {
    pub(super) name: String,
    pub(super) args: Vec<(String, Expr)>,
    pub(super) line: usize,
    pub(super) col: usize,
}

pub(super) struct Parser {
    pub(super) toks: Vec<Token>,
    pub(super) pos: usize,
}

impl Parser {
    pub(super) fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    pub(super) fn next(&mut self) -> Token {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }

    pub(super) fn error_at(t: &Token, msg: &str) -> String {
        format!("error at @{}:{}: {msg}", t.line, t.col)
    }

    pub(super) fn describe(t: &Tok) -> String {
        match t {
            Tok::Ident(s) => format!("identifier {s}"),
            Tok::Str(s) => format!("string {s:?}"),
            Tok::Int(i) => format!("integer {i}"),
            Tok::Float(f) => format!("float {f}"),
            Tok::Dur(_) => "duration".into(),
            Tok::Time(_) => "time".into(),
            Tok::Regex(_) => "regex".into(),
            Tok::Punct(p) => format!("`{p}`"),
            Tok::Eof => "EOF".into(),
        }
    }

    pub(super) fn expect(&mut self, p: &'static str) -> Result<(), String> {
        let t = self.next();
        if t.tok == Tok::Punct(p) {
            Ok(())
        } else {
            Err(Self::error_at(&t, &format!("expected `{p}`, got {}", Self::describe(&t.tok))))
        }
    }

    pub(super) fn eat(&mut self, p: &'static str) -> bool {
        if self.peek().tok == Tok::Punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    pub(super) fn program(&mut self) -> Result<Vec<Vec<Call>>, String> {
        let mut pipelines = Vec::new();
        loop {
            let t = self.peek().clone();
            match &t.tok {
                Tok::Eof => return Ok(pipelines),
                Tok::Ident(kw) if kw == "import" || kw == "option" || kw == "builtin" || kw == "package" => {
                    return Err(Self::error_at(&t, &format!("unsupported by the twin: `{kw}` statements")));
                }
                Tok::Ident(name) if self.toks.get(self.pos + 1).map(|n| &n.tok) == Some(&Tok::Punct("=")) => {
                    return Err(Self::error_at(
                        &t,
                        &format!("unsupported by the twin: variable assignment `{name} = …` (write one pipeline)"),
                    ));
                }
                _ => pipelines.push(self.pipeline()?),
            }
        }
    }

    pub(super) fn pipeline(&mut self) -> Result<Vec<Call>, String> {
        let mut calls = vec![self.call()?];
        while self.eat("|>") {
            calls.push(self.call()?);
        }
        Ok(calls)
    }

    pub(super) fn call(&mut self) -> Result<Call, String> {
        let t = self.next();
        let Tok::Ident(name) = t.tok.clone() else {
            return Err(Self::error_at(&t, &format!("expected a function call, got {}", Self::describe(&t.tok))));
        };
        if self.peek().tok == Tok::Punct(".") {
            return Err(Self::error_at(&t, &format!("unsupported by the twin: package function `{name}.…`")));
        }
        self.expect("(")?;
        let mut args = Vec::new();
        while !self.eat(")") {
            let k = self.next();
            let Tok::Ident(key) = k.tok.clone() else {
                return Err(Self::error_at(&k, &format!("expected a parameter name, got {}", Self::describe(&k.tok))));
            };
            self.expect(":")?;
            let value = self.expr()?;
            args.push((key, value));
            if !self.eat(",") {
                self.expect(")")?;
                break;
            }
        }
        Ok(Call { name, args, line: t.line, col: t.col })
    }

    pub(super) fn expr(&mut self) -> Result<Expr, String> {
        let mut left = self.and_expr()?;
        while matches!(&self.peek().tok, Tok::Ident(k) if k == "or") {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and_expr()?));
        }
        Ok(left)
    }

    pub(super) fn and_expr(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while matches!(&self.peek().tok, Tok::Ident(k) if k == "and") {
            self.pos += 1;
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    pub(super) fn unary(&mut self) -> Result<Expr, String> {
        match &self.peek().tok {
            Tok::Ident(k) if k == "not" => {
                self.pos += 1;
                Ok(Expr::Not(Box::new(self.unary()?)))
            }
            Tok::Ident(k) if k == "exists" => {
                self.pos += 1;
                Ok(Expr::Exists(Box::new(self.operand()?)))
            }
            _ => self.comparison(),
        }
    }

    pub(super) fn comparison(&mut self) -> Result<Expr, String> {
        let left = self.operand()?;
        let op = match &self.peek().tok {
            Tok::Punct(p @ ("==" | "!=" | "<" | "<=" | ">" | ">=" | "=~" | "!~")) => *p,
            _ => return Ok(left),
        };
        self.pos += 1;
        let right = self.operand()?;
        Ok(Expr::Cmp(Box::new(left), op, Box::new(right)))
    }

    pub(super) fn operand(&mut self) -> Result<Expr, String> {
        let t = self.next();
        Ok(match t.tok.clone() {
            Tok::Str(s) => Expr::Str(s),
            Tok::Int(i) => Expr::Int(i),
            Tok::Float(f) => Expr::Float(f),
            Tok::Dur(d) => Expr::Dur(d),
            Tok::Time(ns) => Expr::Time(ns),
            Tok::Regex(r) => {
                Expr::Regex(Regex::new(&r).map_err(|e| Self::error_at(&t, &format!("invalid regex /{r}/: {e}")))?)
            }
            Tok::Punct("-") => match self.operand()? {
                Expr::Dur(d) => Expr::Dur(-d),
                Expr::Int(i) => Expr::Int(-i),
                Expr::Float(f) => Expr::Float(-f),
                _ => return Err(Self::error_at(&t, "unsupported by the twin: unary minus on a non-literal")),
            },
            Tok::Punct("[") => {
                let mut items = Vec::new();
                while !self.eat("]") {
                    items.push(self.expr()?);
                    if !self.eat(",") {
                        self.expect("]")?;
                        break;
                    }
                }
                Expr::Array(items)
            }
            Tok::Punct("(") => {
                // `(r) => body` or a parenthesised expression.
                if let (Tok::Ident(param), Tok::Punct(")"), Tok::Punct("=>")) = (
                    self.peek().tok.clone(),
                    self.toks.get(self.pos + 1).map(|t| t.tok.clone()).unwrap_or(Tok::Eof),
                    self.toks.get(self.pos + 2).map(|t| t.tok.clone()).unwrap_or(Tok::Eof),
                ) {
                    self.pos += 3;
                    let body = self.expr()?;
                    Expr::Func { param, body: Box::new(body) }
                } else {
                    let e = self.expr()?;
                    self.expect(")")?;
                    e
                }
            }
            Tok::Ident(name) => self.named_operand(&t, name)?,
            other => return Err(Self::error_at(&t, &format!("unexpected {}", Self::describe(&other)))),
        })
    }

    /// An operand that starts with the name in `t`: `true`/`false`, `now()`, a record's column
    /// (`r.cpu`, `r["cpu"]`) or a bare identifier; other function calls are refused.
    fn named_operand(&mut self, t: &Token, name: String) -> Result<Expr, String> {
        Ok(match name.as_str() {
            "true" => Expr::Bool(true),
            "false" => Expr::Bool(false),
            "now" if self.peek().tok == Tok::Punct("(") => {
                self.expect("(")?;
                self.expect(")")?;
                Expr::Now
            }
            _ if self.eat(".") => {
                let p = self.next();
                let Tok::Ident(prop) = p.tok else {
                    return Err(Self::error_at(&p, "expected a property name after `.`"));
                };
                if self.peek().tok == Tok::Punct("(") {
                    return Err(Self::error_at(t, &format!("unsupported by the twin: function `{name}.{prop}`")));
                }
                Expr::Column { record: name, name: prop }
            }
            _ if self.peek().tok == Tok::Punct("[") => {
                self.pos += 1;
                let p = self.next();
                let Tok::Str(prop) = p.tok else {
                    return Err(Self::error_at(&p, "expected a string index like r[\"cpu\"]"));
                };
                self.expect("]")?;
                Expr::Column { record: name, name: prop }
            }
            _ if self.peek().tok == Tok::Punct("(") => {
                return Err(Self::error_at(
                    t,
                    &format!("unsupported by the twin: function `{name}()` in an expression"),
                ));
            }
            _ => Expr::Ident(name),
        })
    }
}
