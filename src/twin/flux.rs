//! The Flux subset the metrics-db twin evaluates: the pipelines runbooks use.
//!
//! ```text
//! from(bucket: "b") |> range(start: -5m[, stop: now() | -1m | 2026-11-22T09:00:00Z])
//!   |> filter(fn: (r) => r._measurement == "cpu" and (r["cpu"] == "cpu-total" or r.host != "x"))
//!   |> count() | sum() | mean() | max() | min() | first() | last()
//!   |> limit(n: 1[, offset: 0]) |> group([columns: ["host"][, mode: "by"|"except"]]) |> yield([name: "x"])
//! ```
//!
//! Filters compare columns with `==`, `!=`, `<`, `<=`, `>`, `>=`, `=~`, `!~` and combine with
//! `and`, `or`, `not`, `exists`. Anything else — another function, an import, an assignment,
//! a parameter this file does not know — is an error naming the unsupported part, which the
//! server answers with InfluxDB's `400 {"code":"invalid",…}`.
//!
//! Tables stay views over the stored series (`Segment`s: a series and a row range) until an
//! aggregate or selector makes rows, so a count over a million points reads the columns
//! without building a row for each point.

use std::collections::HashMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use regex::Regex;

use super::points::{Bucket, Column, Series};

/// A value in a table cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Null,
    Str(String),
    Float(f64),
    Int(i64),
    UInt(u64),
    Bool(bool),
    /// Nanoseconds since the epoch.
    Time(i64),
}

/// Column names and types of a table, in order.
pub type Schema = Vec<(String, ColType)>;

/// A column's type, named in the CSV `#datatype` annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColType {
    Str,
    Float,
    Int,
    UInt,
    Bool,
    Time,
}

impl ColType {
    pub fn datatype(self) -> &'static str {
        match self {
            ColType::Str => "string",
            ColType::Float => "double",
            ColType::Int => "long",
            ColType::UInt => "unsignedLong",
            ColType::Bool => "boolean",
            ColType::Time => "dateTime:RFC3339",
        }
    }

    fn of_column(c: &Column) -> ColType {
        match c {
            Column::Float(_) => ColType::Float,
            Column::Int(_) => ColType::Int,
            Column::UInt(_) => ColType::UInt,
            Column::Bool(_) => ColType::Bool,
            Column::Str(_) => ColType::Str,
        }
    }
}

fn value_at(c: &Column, i: usize) -> Value {
    match c {
        Column::Float(v) => Value::Float(v[i]),
        Column::Int(v) => Value::Int(v[i]),
        Column::UInt(v) => Value::UInt(v[i]),
        Column::Bool(v) => Value::Bool(v[i]),
        Column::Str(v) => Value::Str(v[i].clone()),
    }
}

// ---------------------------------------------------------------------------------------
// Lexing and parsing

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Str(String),
    Int(i64),
    Float(f64),
    /// Nanoseconds.
    Dur(i64),
    Time(i64),
    Regex(String),
    Punct(&'static str),
    Eof,
}

#[derive(Debug, Clone)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
}

const PUNCT: [&str; 22] = [
    "|>", "=>", "==", "!=", "<=", ">=", "=~", "!~", "(", ")", "[", "]", "{", "}", ",", ":", ".", "<", ">", "=", "+",
    "-",
];

fn duration_unit_ns(unit: &str) -> Option<i64> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "w" => 604_800_000_000_000,
        // Calendar units, approximated: the twin's windows are minutes and hours.
        "mo" => 30 * 86_400_000_000_000,
        "y" => 365 * 86_400_000_000_000,
        _ => return None,
    })
}

fn lex(src: &str) -> Result<Vec<Token>, String> {
    let chars: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let (mut i, mut line, mut line_start) = (0usize, 1usize, 0usize);
    let mut prev_is_value = false;
    while i < chars.len() {
        let c = chars[i];
        let col = i - line_start + 1;
        let (tok_line, tok_col) = (line, col);
        let at = move |msg: String| format!("error at @{tok_line}:{tok_col}: {msg}");
        if c == '\n' {
            i += 1;
            line += 1;
            line_start = i;
            continue;
        }
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        if c == '/' && chars.get(i + 1) == Some(&'/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        }
        let tok = if c == '"' {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None => return Err(at("unterminated string literal".into())),
                    Some('"') => break,
                    Some('\\') => {
                        i += 1;
                        match chars.get(i) {
                            Some('n') => s.push('\n'),
                            Some('t') => s.push('\t'),
                            Some('r') => s.push('\r'),
                            Some('"') => s.push('"'),
                            Some('\\') => s.push('\\'),
                            Some('$') => s.push('$'),
                            Some(o) => return Err(at(format!("invalid escape sequence \\{o}"))),
                            None => return Err(at("unterminated string literal".into())),
                        }
                    }
                    Some('$') if chars.get(i + 1) == Some(&'{') => {
                        return Err(at("unsupported by the twin: string interpolation".into()));
                    }
                    Some(ch) => {
                        if *ch == '\n' {
                            line += 1;
                            line_start = i + 1;
                        }
                        s.push(*ch)
                    }
                }
                i += 1;
            }
            i += 1;
            Tok::Str(s)
        } else if c == '/' && !prev_is_value {
            let mut s = String::new();
            i += 1;
            loop {
                match chars.get(i) {
                    None | Some('\n') => return Err(at("unterminated regex literal".into())),
                    Some('/') => break,
                    Some('\\') if chars.get(i + 1) == Some(&'/') => {
                        s.push('/');
                        i += 1;
                    }
                    Some(ch) => s.push(*ch),
                }
                i += 1;
            }
            i += 1;
            Tok::Regex(s)
        } else if c.is_ascii_digit() {
            let start = i;
            while i < chars.len()
                && (chars[i].is_ascii_alphanumeric() || matches!(chars[i], '.' | ':' | '-' | '+' | 'µ'))
            {
                // A `-`/`+` continues the literal only inside a date or time offset.
                if matches!(chars[i], '-' | '+' | ':') && !chars[start..i].contains(&'-') && i - start != 4 {
                    break;
                }
                i += 1;
            }
            let text: String = chars[start..i].iter().collect();
            number_literal(&text).map_err(at)?
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else {
            let rest: String = chars[i..chars.len().min(i + 2)].iter().collect();
            let Some(p) = PUNCT.iter().find(|p| rest.starts_with(**p)) else {
                return Err(at(format!("invalid token {c:?}")));
            };
            i += p.chars().count();
            Tok::Punct(p)
        };
        prev_is_value = matches!(
            tok,
            Tok::Ident(_)
                | Tok::Str(_)
                | Tok::Int(_)
                | Tok::Float(_)
                | Tok::Dur(_)
                | Tok::Time(_)
                | Tok::Punct(")" | "]")
        );
        out.push(Token { tok, line: tok_line, col: tok_col });
    }
    out.push(Token { tok: Tok::Eof, line, col: chars.len() - line_start + 1 });
    Ok(out)
}

/// An integer, float, duration (`1h30m`) or time (`2026-11-22T09:00:00Z`) literal.
fn number_literal(text: &str) -> Result<Tok, String> {
    if text.len() >= 10 && text.as_bytes()[4] == b'-' {
        let full = if text.len() == 10 { format!("{text}T00:00:00Z") } else { text.to_string() };
        return parse_time(&full).map(Tok::Time).ok_or_else(|| format!("invalid time literal {text:?}"));
    }
    if let Ok(i) = text.parse::<i64>() {
        return Ok(Tok::Int(i));
    }
    if text.contains('.')
        && let Ok(f) = text.parse::<f64>()
    {
        return Ok(Tok::Float(f));
    }
    let mut total: i64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        let unit_len = rest[digits..].find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len() - digits);
        let (n, unit) = (&rest[..digits], &rest[digits..digits + unit_len]);
        let n: i64 = n.parse().map_err(|_| format!("invalid duration literal {text:?}"))?;
        let ns = duration_unit_ns(unit).ok_or_else(|| format!("invalid duration unit {unit:?} in {text:?}"))?;
        total = total.saturating_add(n.saturating_mul(ns));
        rest = &rest[digits + unit_len..];
    }
    Ok(Tok::Dur(total))
}

/// RFC 3339 with optional fraction and offset.
fn parse_time(text: &str) -> Option<i64> {
    let (base, offset_s) = match text.strip_suffix('Z').or_else(|| text.strip_suffix('z')) {
        Some(b) => (b.to_string(), 0i64),
        None => {
            let cut = text.rfind(['+', '-']).filter(|p| *p > 10)?;
            let (b, off) = text.split_at(cut);
            let sign = if off.starts_with('-') { -1 } else { 1 };
            let (h, m) = off[1..].split_once(':')?;
            (b.to_string(), sign * (h.parse::<i64>().ok()? * 3600 + m.parse::<i64>().ok()? * 60))
        }
    };
    let t = humantime::parse_rfc3339_weak(&format!("{base}Z")).ok()?;
    let ns = t.duration_since(UNIX_EPOCH).ok()?.as_nanos() as i64;
    Some(ns - offset_s * 1_000_000_000)
}

/// An expression inside a call argument or a filter function.
#[derive(Debug, Clone)]
enum Expr {
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
struct Call {
    name: String,
    args: Vec<(String, Expr)>,
    line: usize,
    col: usize,
}

struct Parser {
    toks: Vec<Token>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        self.pos += 1;
        t
    }

    fn error_at(t: &Token, msg: &str) -> String {
        format!("error at @{}:{}: {msg}", t.line, t.col)
    }

    fn describe(t: &Tok) -> String {
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

    fn expect(&mut self, p: &'static str) -> Result<(), String> {
        let t = self.next();
        if t.tok == Tok::Punct(p) {
            Ok(())
        } else {
            Err(Self::error_at(&t, &format!("expected `{p}`, got {}", Self::describe(&t.tok))))
        }
    }

    fn eat(&mut self, p: &'static str) -> bool {
        if self.peek().tok == Tok::Punct(p) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn program(&mut self) -> Result<Vec<Vec<Call>>, String> {
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

    fn pipeline(&mut self) -> Result<Vec<Call>, String> {
        let mut calls = vec![self.call()?];
        while self.eat("|>") {
            calls.push(self.call()?);
        }
        Ok(calls)
    }

    fn call(&mut self) -> Result<Call, String> {
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

    fn expr(&mut self) -> Result<Expr, String> {
        let mut left = self.and_expr()?;
        while matches!(&self.peek().tok, Tok::Ident(k) if k == "or") {
            self.pos += 1;
            left = Expr::Or(Box::new(left), Box::new(self.and_expr()?));
        }
        Ok(left)
    }

    fn and_expr(&mut self) -> Result<Expr, String> {
        let mut left = self.unary()?;
        while matches!(&self.peek().tok, Tok::Ident(k) if k == "and") {
            self.pos += 1;
            left = Expr::And(Box::new(left), Box::new(self.unary()?));
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Expr, String> {
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

    fn comparison(&mut self) -> Result<Expr, String> {
        let left = self.operand()?;
        let op = match &self.peek().tok {
            Tok::Punct(p @ ("==" | "!=" | "<" | "<=" | ">" | ">=" | "=~" | "!~")) => *p,
            _ => return Ok(left),
        };
        self.pos += 1;
        let right = self.operand()?;
        Ok(Expr::Cmp(Box::new(left), op, Box::new(right)))
    }

    fn operand(&mut self) -> Result<Expr, String> {
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
            Tok::Ident(name) => match name.as_str() {
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
                        return Err(Self::error_at(&t, &format!("unsupported by the twin: function `{name}.{prop}`")));
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
                        &t,
                        &format!("unsupported by the twin: function `{name}()` in an expression"),
                    ));
                }
                _ => Expr::Ident(name),
            },
            other => return Err(Self::error_at(&t, &format!("unexpected {}", Self::describe(&other)))),
        })
    }
}

// ---------------------------------------------------------------------------------------
// Planning: calls → stages

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agg {
    Count,
    Sum,
    Mean,
    Max,
    Min,
    First,
    Last,
}

#[derive(Debug, Clone)]
enum Stage {
    Filter { body: Expr, keep_empty: bool },
    Agg(Agg),
    Limit { n: usize, offset: usize },
    Group { columns: Vec<String>, except: bool },
    Yield(String),
}

/// One pipeline, checked: its bucket, time range and stages.
#[derive(Debug, Clone)]
struct Plan {
    bucket: String,
    start: i64,
    stop: i64,
    stages: Vec<Stage>,
}

fn call_error(c: &Call, msg: &str) -> String {
    format!("error at @{}:{}: {msg}", c.line, c.col)
}

fn arg<'a>(c: &'a Call, name: &str) -> Option<&'a Expr> {
    c.args.iter().find(|(k, _)| k == name).map(|(_, v)| v)
}

fn only_args(c: &Call, allowed: &[&str]) -> Result<(), String> {
    match c.args.iter().find(|(k, _)| !allowed.contains(&k.as_str())) {
        Some((k, _)) => Err(call_error(c, &format!("unsupported by the twin: parameter `{k}` of {}()", c.name))),
        None => Ok(()),
    }
}

fn time_arg(c: &Call, e: &Expr, now: i64) -> Result<i64, String> {
    match e {
        Expr::Dur(d) => Ok(now + d),
        Expr::Time(t) => Ok(*t),
        Expr::Now => Ok(now),
        // Flux takes integers as Unix seconds here.
        Expr::Int(s) => Ok(s.saturating_mul(1_000_000_000)),
        _ => Err(call_error(c, "range() start and stop must be a duration, a time or now()")),
    }
}

fn plan(calls: Vec<Call>, now: i64) -> Result<Plan, String> {
    let first = &calls[0];
    if first.name != "from" {
        return Err(call_error(
            first,
            &format!("unsupported by the twin: a pipeline starting with {}() (start with from(bucket: …))", first.name),
        ));
    }
    only_args(first, &["bucket"])?;
    let bucket = match arg(first, "bucket") {
        Some(Expr::Str(b)) => b.clone(),
        _ => return Err(call_error(first, "from() needs bucket: \"name\" (bucketID is not supported by the twin)")),
    };
    let mut range = None;
    let mut stages = Vec::new();
    for c in &calls[1..] {
        match c.name.as_str() {
            "range" => {
                only_args(c, &["start", "stop"])?;
                if range.is_some() {
                    return Err(call_error(c, "unsupported by the twin: a second range()"));
                }
                if stages.iter().any(|s| !matches!(s, Stage::Filter { .. })) {
                    return Err(call_error(c, "unsupported by the twin: range() after an aggregate, limit or group"));
                }
                let start = arg(c, "start").ok_or_else(|| call_error(c, "missing required argument start"))?;
                let start = time_arg(c, start, now)?;
                let stop = arg(c, "stop").map(|s| time_arg(c, s, now)).transpose()?.unwrap_or(now);
                range = Some((start, stop));
            }
            "filter" => {
                only_args(c, &["fn", "onEmpty"])?;
                let Some(Expr::Func { param, body }) = arg(c, "fn") else {
                    return Err(call_error(c, "filter() needs fn: (r) => …"));
                };
                let keep_empty = match arg(c, "onEmpty") {
                    None => false,
                    Some(Expr::Str(s)) if s == "drop" => false,
                    Some(Expr::Str(s)) if s == "keep" => true,
                    Some(_) => return Err(call_error(c, "onEmpty must be \"keep\" or \"drop\"")),
                };
                check_fn_body(c, param, body)?;
                stages.push(Stage::Filter { body: (**body).clone(), keep_empty });
            }
            name @ ("count" | "sum" | "mean" | "max" | "min" | "first" | "last") => {
                only_args(c, &["column"])?;
                match arg(c, "column") {
                    None => {}
                    Some(Expr::Str(col)) if col == "_value" => {}
                    Some(_) => {
                        return Err(call_error(
                            c,
                            &format!("unsupported by the twin: {name}() on a column other than _value"),
                        ));
                    }
                }
                stages.push(Stage::Agg(match name {
                    "count" => Agg::Count,
                    "sum" => Agg::Sum,
                    "mean" => Agg::Mean,
                    "max" => Agg::Max,
                    "min" => Agg::Min,
                    "first" => Agg::First,
                    _ => Agg::Last,
                }));
            }
            "limit" => {
                only_args(c, &["n", "offset"])?;
                let n = match arg(c, "n") {
                    Some(Expr::Int(n)) if *n >= 0 => *n as usize,
                    _ => return Err(call_error(c, "limit() needs n: a non-negative integer")),
                };
                let offset = match arg(c, "offset") {
                    None => 0,
                    Some(Expr::Int(o)) if *o >= 0 => *o as usize,
                    _ => return Err(call_error(c, "limit() offset must be a non-negative integer")),
                };
                stages.push(Stage::Limit { n, offset });
            }
            "group" => {
                only_args(c, &["columns", "mode"])?;
                let columns = match arg(c, "columns") {
                    None => Vec::new(),
                    Some(Expr::Array(items)) => items
                        .iter()
                        .map(|i| match i {
                            Expr::Str(s) => Ok(s.clone()),
                            _ => Err(call_error(c, "group() columns must be strings")),
                        })
                        .collect::<Result<_, _>>()?,
                    Some(_) => return Err(call_error(c, "group() columns must be an array of strings")),
                };
                let except = match arg(c, "mode") {
                    None => false,
                    Some(Expr::Str(m)) if m == "by" => false,
                    Some(Expr::Str(m)) if m == "except" => true,
                    Some(_) => return Err(call_error(c, "group() mode must be \"by\" or \"except\"")),
                };
                stages.push(Stage::Group { columns, except });
            }
            "yield" => {
                only_args(c, &["name"])?;
                let name = match arg(c, "name") {
                    None => "_result".to_string(),
                    Some(Expr::Str(n)) => n.clone(),
                    Some(_) => return Err(call_error(c, "yield() name must be a string")),
                };
                stages.push(Stage::Yield(name));
            }
            "from" => return Err(call_error(c, "from() must start a pipeline")),
            other => {
                return Err(call_error(
                    c,
                    &format!(
                        "unsupported by the twin: function {other}() (supported: from, range, filter, count, sum, mean, \
                         max, min, first, last, limit, group, yield)"
                    ),
                ));
            }
        }
    }
    let Some((start, stop)) = range else {
        return Err(format!(
            "error in building plan while starting program: cannot submit unbounded read to \"{bucket}\"; try bounding 'from' with a call to 'range'"
        ));
    };
    Ok(Plan { bucket, start, stop, stages })
}

/// Filter bodies may only read the function's record parameter.
fn check_fn_body(c: &Call, param: &str, e: &Expr) -> Result<(), String> {
    match e {
        Expr::Column { record, .. } if record != param => {
            Err(call_error(c, &format!("undefined identifier {record} (the function's parameter is {param})")))
        }
        Expr::Cmp(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => {
            check_fn_body(c, param, a)?;
            check_fn_body(c, param, b)
        }
        Expr::Not(a) | Expr::Exists(a) => check_fn_body(c, param, a),
        Expr::Ident(name) => Err(call_error(c, &format!("undefined identifier {name}"))),
        Expr::Func { .. } | Expr::Array(_) => {
            Err(call_error(c, "unsupported by the twin: this expression in a filter"))
        }
        _ => Ok(()),
    }
}

// ---------------------------------------------------------------------------------------
// Tables

/// Which rows of a series a segment holds.
#[derive(Debug, Clone)]
enum Rows {
    Range(usize, usize),
    Picked(Vec<usize>),
}

impl Rows {
    fn len(&self) -> usize {
        match self {
            Rows::Range(lo, hi) => hi - lo,
            Rows::Picked(p) => p.len(),
        }
    }

    fn indices(&self) -> Box<dyn Iterator<Item = usize> + '_> {
        match self {
            Rows::Range(lo, hi) => Box::new(*lo..*hi),
            Rows::Picked(p) => Box::new(p.iter().copied()),
        }
    }
}

/// A view on some rows of one series.
#[derive(Debug, Clone)]
struct Segment<'a> {
    series: &'a Series,
    rows: Rows,
}

#[derive(Debug, Clone)]
enum Body<'a> {
    /// Views on stored series; columns `_start,_stop,_time,_value,_field,_measurement,tags…`.
    Segments(Vec<Segment<'a>>),
    /// Rows made by an aggregate or selector.
    Rows { columns: Vec<(String, ColType)>, rows: Vec<Vec<Value>> },
}

/// One result table: its group key (column names) and its data.
#[derive(Debug, Clone)]
pub struct Table<'a> {
    key: Vec<String>,
    start: i64,
    stop: i64,
    body: Body<'a>,
}

/// Columns of a segment body whose value is constant per segment.
fn segment_constant(seg: &Segment<'_>, name: &str, start: i64, stop: i64) -> Value {
    match name {
        "_start" => Value::Time(start),
        "_stop" => Value::Time(stop),
        "_measurement" => Value::Str(seg.series.measurement.clone()),
        "_field" => Value::Str(seg.series.field.clone()),
        tag => seg.series.tag(tag).map_or(Value::Null, |v| Value::Str(v.to_string())),
    }
}

impl<'a> Table<'a> {
    /// Column names and types, in InfluxDB's order.
    pub fn columns(&self) -> Result<Vec<(String, ColType)>, String> {
        match &self.body {
            Body::Rows { columns, .. } => Ok(columns.clone()),
            Body::Segments(segs) => {
                let mut value_type: Option<ColType> = None;
                let mut tags: Vec<&str> = Vec::new();
                for s in segs {
                    let t = ColType::of_column(&s.series.values);
                    match value_type {
                        Some(v) if v != t => {
                            return Err(format!(
                                "schema collision: cannot group {} and {} types together",
                                v.datatype(),
                                t.datatype()
                            ));
                        }
                        _ => value_type = Some(t),
                    }
                    for (k, _) in &s.series.tags {
                        if !tags.contains(&k.as_str()) {
                            tags.push(k);
                        }
                    }
                }
                tags.sort();
                let mut cols = vec![
                    ("_start".to_string(), ColType::Time),
                    ("_stop".to_string(), ColType::Time),
                    ("_time".to_string(), ColType::Time),
                    ("_value".to_string(), value_type.unwrap_or(ColType::Float)),
                    ("_field".to_string(), ColType::Str),
                    ("_measurement".to_string(), ColType::Str),
                ];
                cols.extend(tags.into_iter().map(|t| (t.to_string(), ColType::Str)));
                Ok(cols)
            }
        }
    }

    /// The group key's column names.
    pub fn key(&self) -> &[String] {
        &self.key
    }

    pub fn len(&self) -> usize {
        match &self.body {
            Body::Segments(segs) => segs.iter().map(|s| s.rows.len()).sum(),
            Body::Rows { rows, .. } => rows.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Every row, cells in `columns()` order.
    pub fn rows(&self, columns: &[(String, ColType)]) -> Box<dyn Iterator<Item = Vec<Value>> + '_> {
        match &self.body {
            Body::Rows { rows, .. } => Box::new(rows.iter().cloned()),
            Body::Segments(segs) => {
                let names: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
                let (start, stop) = (self.start, self.stop);
                Box::new(segs.iter().flat_map(move |seg| {
                    let constants: Vec<Value> = names.iter().map(|n| segment_constant(seg, n, start, stop)).collect();
                    let names = names.clone();
                    seg.rows.indices().map(move |i| {
                        names
                            .iter()
                            .zip(&constants)
                            .map(|(n, c)| match n.as_str() {
                                "_time" => Value::Time(seg.series.times[i]),
                                "_value" => value_at(&seg.series.values, i),
                                _ => c.clone(),
                            })
                            .collect()
                    })
                }))
            }
        }
    }

    fn materialize(&self) -> Result<(Schema, Vec<Vec<Value>>), String> {
        let columns = self.columns()?;
        let rows = self.rows(&columns).collect();
        Ok((columns, rows))
    }

    /// The value of a group-key column (the same on every row).
    fn key_value(&self, name: &str) -> Value {
        match &self.body {
            Body::Segments(segs) => {
                segs.first().map_or(Value::Null, |s| segment_constant(s, name, self.start, self.stop))
            }
            Body::Rows { columns, rows } => columns
                .iter()
                .position(|(n, _)| n == name)
                .and_then(|i| rows.first().map(|r| r[i].clone()))
                .unwrap_or(Value::Null),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Evaluation

fn compare(a: &Value, op: &str, b: &Value) -> Option<bool> {
    use std::cmp::Ordering;
    let ord: Option<Ordering> = match (a, b) {
        (Value::Null, _) | (_, Value::Null) => return None,
        (Value::Str(x), Value::Str(y)) => Some(x.cmp(y)),
        (Value::Bool(x), Value::Bool(y)) => Some(x.cmp(y)),
        (Value::Time(x), Value::Time(y)) => Some(x.cmp(y)),
        (Value::Int(x), Value::Int(y)) => Some(x.cmp(y)),
        (Value::UInt(x), Value::UInt(y)) => Some(x.cmp(y)),
        (x, y) => {
            let f = |v: &Value| match v {
                Value::Float(f) => Some(*f),
                Value::Int(i) => Some(*i as f64),
                Value::UInt(u) => Some(*u as f64),
                _ => None,
            };
            f(x)?.partial_cmp(&f(y)?)
        }
    };
    let ord = ord?;
    Some(match op {
        "==" => ord == Ordering::Equal,
        "!=" => ord != Ordering::Equal,
        "<" => ord == Ordering::Less,
        "<=" => ord != Ordering::Greater,
        ">" => ord == Ordering::Greater,
        ">=" => ord != Ordering::Less,
        _ => return None,
    })
}

/// Evaluates a filter body; `None` is Flux's null (the row is dropped).
fn eval(e: &Expr, get: &dyn Fn(&str) -> Value, now: i64) -> Option<Value> {
    Some(match e {
        Expr::Str(s) => Value::Str(s.clone()),
        Expr::Int(i) => Value::Int(*i),
        Expr::Float(f) => Value::Float(*f),
        Expr::Bool(b) => Value::Bool(*b),
        Expr::Time(t) => Value::Time(*t),
        Expr::Now => Value::Time(now),
        Expr::Dur(d) => Value::Int(*d),
        Expr::Column { name, .. } => match get(name) {
            Value::Null => return None,
            v => v,
        },
        Expr::Exists(inner) => Value::Bool(eval(inner, get, now).is_some()),
        Expr::Not(inner) => match eval(inner, get, now)? {
            Value::Bool(b) => Value::Bool(!b),
            _ => return None,
        },
        Expr::And(a, b) => {
            let x = matches!(eval(a, get, now), Some(Value::Bool(true)));
            Value::Bool(x && matches!(eval(b, get, now), Some(Value::Bool(true))))
        }
        Expr::Or(a, b) => {
            let x = matches!(eval(a, get, now), Some(Value::Bool(true)));
            Value::Bool(x || matches!(eval(b, get, now), Some(Value::Bool(true))))
        }
        Expr::Cmp(a, op @ ("=~" | "!~"), b) => {
            let Value::Str(text) = eval(a, get, now)? else { return None };
            let Expr::Regex(re) = &**b else { return None };
            Value::Bool(re.is_match(&text) == (*op == "=~"))
        }
        Expr::Cmp(a, op, b) => Value::Bool(compare(&eval(a, get, now)?, op, &eval(b, get, now)?)?),
        Expr::Regex(_) | Expr::Array(_) | Expr::Func { .. } | Expr::Ident(_) => return None,
    })
}

fn references_row_columns(e: &Expr) -> bool {
    match e {
        Expr::Column { name, .. } => name == "_time" || name == "_value",
        Expr::Cmp(a, _, b) | Expr::And(a, b) | Expr::Or(a, b) => references_row_columns(a) || references_row_columns(b),
        Expr::Not(a) | Expr::Exists(a) => references_row_columns(a),
        _ => false,
    }
}

fn passes(e: &Expr, get: &dyn Fn(&str) -> Value, now: i64) -> bool {
    matches!(eval(e, get, now), Some(Value::Bool(true)))
}

fn apply_filter<'a>(tables: Vec<Table<'a>>, body: &Expr, keep_empty: bool, now: i64) -> Vec<Table<'a>> {
    let per_row = references_row_columns(body);
    let mut out = Vec::new();
    for mut t in tables {
        let (start, stop) = (t.start, t.stop);
        match &mut t.body {
            Body::Segments(segs) => {
                let mut kept = Vec::new();
                for seg in segs.drain(..) {
                    let constant = |name: &str| segment_constant(&seg, name, start, stop);
                    if !per_row {
                        if passes(body, &constant, now) {
                            kept.push(seg);
                        }
                        continue;
                    }
                    let picked: Vec<usize> = seg
                        .rows
                        .indices()
                        .filter(|&i| {
                            let get = |name: &str| match name {
                                "_time" => Value::Time(seg.series.times[i]),
                                "_value" => value_at(&seg.series.values, i),
                                other => constant(other),
                            };
                            passes(body, &get, now)
                        })
                        .collect();
                    if !picked.is_empty() {
                        kept.push(Segment { series: seg.series, rows: Rows::Picked(picked) });
                    }
                }
                *segs = kept;
            }
            Body::Rows { columns, rows } => {
                let names: Vec<String> = columns.iter().map(|(n, _)| n.clone()).collect();
                rows.retain(|row| {
                    let get = |name: &str| names.iter().position(|n| n == name).map_or(Value::Null, |i| row[i].clone());
                    passes(body, &get, now)
                });
            }
        }
        if keep_empty || !t.is_empty() {
            out.push(t);
        }
    }
    out
}

fn numeric(v: &Value) -> Option<f64> {
    match v {
        Value::Float(f) => Some(*f),
        Value::Int(i) => Some(*i as f64),
        Value::UInt(u) => Some(*u as f64),
        _ => None,
    }
}

fn apply_agg<'a>(tables: Vec<Table<'a>>, agg: Agg) -> Result<Vec<Table<'a>>, String> {
    let mut out = Vec::new();
    for t in tables {
        let columns = t.columns()?;
        let value_idx = columns.iter().position(|(n, _)| n == "_value");
        let value_type = value_idx.map(|i| columns[i].1);
        let name = format!("{agg:?}").to_lowercase();
        if matches!(agg, Agg::Sum | Agg::Mean | Agg::Max | Agg::Min)
            && !matches!(value_type, Some(ColType::Float | ColType::Int | ColType::UInt))
        {
            return Err(format!(
                "unsupported input type for {name} aggregate: {}",
                value_type.map_or("null", |t| t.datatype())
            ));
        }
        let Some(vi) = value_idx else {
            return Err(format!("{name}(): column \"_value\" does not exist"));
        };
        match agg {
            Agg::Count | Agg::Sum | Agg::Mean => {
                // Aggregates keep the group key columns and a new _value.
                let mut cols: Vec<(String, ColType)> =
                    columns.iter().filter(|(n, _)| t.key.contains(n)).cloned().collect();
                let mut row: Vec<Value> = cols.iter().map(|(n, _)| t.key_value(n)).collect();
                let value = match agg {
                    Agg::Count => (ColType::Int, Value::Int(t.len() as i64)),
                    _ => {
                        let (mut sum_f, mut sum_i, mut sum_u, mut n) = (0f64, 0i64, 0u64, 0usize);
                        for r in t.rows(&columns) {
                            match &r[vi] {
                                Value::Float(f) => sum_f += f,
                                Value::Int(i) => sum_i = sum_i.wrapping_add(*i),
                                Value::UInt(u) => sum_u = sum_u.wrapping_add(*u),
                                _ => continue,
                            }
                            n += 1;
                        }
                        let total = sum_f + sum_i as f64 + sum_u as f64;
                        match (agg, value_type) {
                            (Agg::Mean, _) if n == 0 => (ColType::Float, Value::Null),
                            (Agg::Mean, _) => (ColType::Float, Value::Float(total / n as f64)),
                            (_, Some(ColType::Int)) => (ColType::Int, Value::Int(sum_i)),
                            (_, Some(ColType::UInt)) => (ColType::UInt, Value::UInt(sum_u)),
                            _ => (ColType::Float, Value::Float(sum_f)),
                        }
                    }
                };
                cols.push(("_value".into(), value.0));
                row.push(value.1);
                out.push(Table {
                    key: t.key.clone(),
                    start: t.start,
                    stop: t.stop,
                    body: Body::Rows { columns: cols, rows: vec![row] },
                });
            }
            Agg::Max | Agg::Min | Agg::First | Agg::Last => {
                let mut best: Option<Vec<Value>> = None;
                for r in t.rows(&columns) {
                    let better = match (&best, agg) {
                        (None, _) => true,
                        (Some(_), Agg::First) => false,
                        (Some(_), Agg::Last) => true,
                        (Some(b), Agg::Max) => numeric(&r[vi]) > numeric(&b[vi]),
                        (Some(b), _) => numeric(&r[vi]) < numeric(&b[vi]),
                    };
                    if better {
                        best = Some(r);
                    }
                }
                let rows: Vec<Vec<Value>> = best.into_iter().collect();
                out.push(Table {
                    key: t.key.clone(),
                    start: t.start,
                    stop: t.stop,
                    body: Body::Rows { columns, rows },
                });
            }
        }
    }
    Ok(out)
}

fn apply_limit<'a>(tables: Vec<Table<'a>>, n: usize, offset: usize) -> Vec<Table<'a>> {
    tables
        .into_iter()
        .map(|mut t| {
            match &mut t.body {
                Body::Rows { rows, .. } => {
                    *rows = rows.drain(..).skip(offset).take(n).collect();
                }
                Body::Segments(segs) => {
                    let (mut skip, mut take) = (offset, n);
                    let mut kept = Vec::new();
                    for seg in segs.drain(..) {
                        let idx: Vec<usize> = seg.rows.indices().collect();
                        let from = skip.min(idx.len());
                        skip -= from;
                        let count = take.min(idx.len() - from);
                        take -= count;
                        if count > 0 {
                            kept.push(Segment {
                                series: seg.series,
                                rows: Rows::Picked(idx[from..from + count].to_vec()),
                            });
                        }
                    }
                    *segs = kept;
                }
            }
            t
        })
        .collect()
}

/// Value of a column as a grouping key (text that sorts and compares like the value).
fn key_text(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Str(s) => format!("s{s}"),
        other => format!("{other:?}"),
    }
}

fn apply_group<'a>(tables: Vec<Table<'a>>, columns: &[String], except: bool) -> Result<Vec<Table<'a>>, String> {
    let (start, stop) = tables.first().map_or((0, 0), |t| (t.start, t.stop));
    let all_segments = tables.iter().all(|t| matches!(t.body, Body::Segments(_)));
    let by_constant_columns = !except && !columns.iter().any(|c| c == "_time" || c == "_value");
    let mut order: Vec<Vec<String>> = Vec::new();
    if all_segments && by_constant_columns {
        // Regroup the views without building rows.
        let mut groups: HashMap<Vec<String>, Vec<Segment<'a>>> = HashMap::new();
        for t in tables {
            let Body::Segments(segs) = t.body else { continue };
            for seg in segs {
                let k: Vec<String> =
                    columns.iter().map(|c| key_text(&segment_constant(&seg, c, t.start, t.stop))).collect();
                if !groups.contains_key(&k) {
                    order.push(k.clone());
                }
                groups.entry(k).or_default().push(seg);
            }
        }
        return Ok(order
            .into_iter()
            .filter_map(|k| groups.remove(&k))
            .map(|segs| {
                let mut t = Table { key: Vec::new(), start, stop, body: Body::Segments(segs) };
                let cols = t.columns().unwrap_or_default();
                t.key = cols.iter().map(|(n, _)| n.clone()).filter(|n| columns.contains(n)).collect();
                t
            })
            .collect());
    }
    // General case: rows regrouped by the key columns' values; columns are the union.
    let mut union: Vec<(String, ColType)> = Vec::new();
    let mut materialized = Vec::new();
    for t in &tables {
        let (cols, rows) = t.materialize()?;
        for c in &cols {
            match union.iter().find(|(n, _)| *n == c.0) {
                Some((_, ty)) if *ty != c.1 => {
                    return Err(format!(
                        "schema collision detected: column \"{}\" is both of type {} and {}",
                        c.0,
                        ty.datatype(),
                        c.1.datatype()
                    ));
                }
                Some(_) => {}
                None => union.push(c.clone()),
            }
        }
        materialized.push((cols, rows));
    }
    let key_cols: Vec<String> = union
        .iter()
        .map(|(n, _)| n.clone())
        .filter(|n| if except { !columns.contains(n) } else { columns.contains(n) })
        .collect();
    let mut groups: HashMap<Vec<String>, Vec<Vec<Value>>> = HashMap::new();
    for (cols, rows) in materialized {
        for row in rows {
            let full: Vec<Value> = union
                .iter()
                .map(|(n, _)| cols.iter().position(|(c, _)| c == n).map_or(Value::Null, |i| row[i].clone()))
                .collect();
            let k: Vec<String> = key_cols
                .iter()
                .map(|c| union.iter().position(|(n, _)| n == c).map_or(String::new(), |i| key_text(&full[i])))
                .collect();
            if !groups.contains_key(&k) {
                order.push(k.clone());
            }
            groups.entry(k).or_default().push(full);
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|k| groups.remove(&k))
        .map(|rows| Table { key: key_cols.clone(), start, stop, body: Body::Rows { columns: union.clone(), rows } })
        .collect())
}

/// Named results, in the order they were yielded.
pub type Results<'a> = Vec<(String, Vec<Table<'a>>)>;

/// A compiled query: its pipelines, checked, with `now` fixed.
#[derive(Debug)]
pub struct Program {
    plans: Vec<Plan>,
    now: i64,
}

impl Program {
    /// The buckets the program reads.
    pub fn buckets(&self) -> Vec<&str> {
        self.plans.iter().map(|p| p.bucket.as_str()).collect()
    }
}

/// Parses and checks a query at time `now` (ns).
pub fn compile(src: &str, now: i64) -> Result<Program, String> {
    let toks = lex(src).map_err(|e| format!("compilation failed: {e}"))?;
    let pipelines = Parser { toks, pos: 0 }.program().map_err(|e| format!("compilation failed: {e}"))?;
    if pipelines.is_empty() {
        return Err("error in query specification while starting program: this Flux script returns no streaming data. \
                    Consider adding a \"yield\" or invoking streaming functions directly, without performing an assignment"
            .into());
    }
    let plans = pipelines.into_iter().map(|p| plan(p, now)).collect::<Result<Vec<_>, _>>()?;
    let mut names: Vec<String> = Vec::new();
    for p in &plans {
        let mut yielded: Vec<String> =
            p.stages.iter().filter_map(|s| if let Stage::Yield(n) = s { Some(n.clone()) } else { None }).collect();
        if !matches!(p.stages.last(), Some(Stage::Yield(_))) {
            yielded.push("_result".into());
        }
        for n in yielded {
            if names.contains(&n) {
                return Err(format!("found duplicate yield name \"{n}\""));
            }
            names.push(n);
        }
    }
    Ok(Program { plans, now })
}

/// Runs a compiled program against the buckets (looked up by name).
pub fn run<'a>(program: &Program, buckets: &dyn Fn(&str) -> Option<&'a Bucket>) -> Result<Results<'a>, String> {
    let mut results = Vec::new();
    for p in &program.plans {
        let bucket = buckets(&p.bucket)
            .ok_or_else(|| format!("failed to initialize execute state: could not find bucket \"{}\"", p.bucket))?;
        let key: Vec<String> = Vec::new();
        let mut tables: Vec<Table<'a>> = Vec::new();
        for series in bucket.sorted_series() {
            let (lo, hi) = series.window(p.start, p.stop);
            if lo < hi {
                let mut k = key.clone();
                k.extend(["_start", "_stop", "_field", "_measurement"].map(String::from));
                k.extend(series.tags.iter().map(|(t, _)| t.clone()));
                tables.push(Table {
                    key: k,
                    start: p.start,
                    stop: p.stop,
                    body: Body::Segments(vec![Segment { series, rows: Rows::Range(lo, hi) }]),
                });
            }
        }
        let mut ended_with_yield = false;
        for stage in &p.stages {
            ended_with_yield = false;
            tables = match stage {
                Stage::Filter { body, keep_empty, .. } => apply_filter(tables, body, *keep_empty, program.now),
                Stage::Agg(a) => apply_agg(tables, *a)?,
                Stage::Limit { n, offset } => apply_limit(tables, *n, *offset),
                Stage::Group { columns, except } => apply_group(tables, columns, *except)?,
                Stage::Yield(name) => {
                    results.push((name.clone(), tables.clone()));
                    ended_with_yield = true;
                    tables
                }
            };
        }
        if !ended_with_yield {
            results.push(("_result".to_string(), tables));
        }
    }
    Ok(results)
}

/// Now, in nanoseconds.
pub fn now_ns() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO).as_nanos() as i64
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lineproto;

    const NOW: i64 = 1_795_338_900_000_000_000;

    fn bucket() -> Bucket {
        let mut b = Bucket::new("telegraf", "1".into());
        let s = NOW - 30_000_000_000;
        let text = format!(
            "cpu,cpu=cpu-total,host=h1 usage_system=10,usage_idle=80 {s}\n\
             cpu,cpu=cpu-total,host=h1 usage_system=30,usage_idle=60 {}\n\
             cpu,cpu=cpu0,host=h1 usage_system=5,usage_idle=90 {s}\n\
             mem,host=h1 used=100i {s}\n\
             cpu,cpu=cpu-total,host=h1 usage_system=99 {}\n",
            s + 10_000_000_000,
            NOW - 600_000_000_000
        );
        b.write(lineproto::parse(&text).unwrap(), 1000).unwrap();
        b
    }

    fn query<'a>(b: &'a Bucket, src: &str) -> Result<Results<'a>, String> {
        let p = compile(src, NOW)?;
        run(&p, &|name| (name == "telegraf").then_some(b))
    }

    fn rows(t: &Table<'_>) -> Vec<Vec<Value>> {
        let c = t.columns().unwrap();
        t.rows(&c).collect()
    }

    #[test]
    fn the_three_spec_queries() {
        let b = bucket();
        let r = query(&b, r#"from(bucket: "telegraf") |> range(start: -5m) |> limit(n: 1)"#).unwrap();
        assert_eq!(r[0].0, "_result");
        assert_eq!(r[0].1.len(), 5, "one table per series in range");
        assert!(r[0].1.iter().all(|t| t.len() == 1));

        let r = query(
            &b,
            r#"from(bucket: "telegraf") |> range(start: -5m) |> filter(fn: (r) => r._measurement == "cpu") |> count()"#,
        )
        .unwrap();
        let tables = &r[0].1;
        assert_eq!(tables.len(), 4);
        let cols: Vec<String> = tables[0].columns().unwrap().into_iter().map(|c| c.0).collect();
        assert_eq!(cols, ["_start", "_stop", "_field", "_measurement", "cpu", "host", "_value"]);
        let total: i64 = tables
            .iter()
            .map(|t| match rows(t)[0][6] {
                Value::Int(n) => n,
                _ => 0,
            })
            .sum();
        assert_eq!(total, 6);

        let r = query(
            &b,
            r#"from(bucket: "telegraf")
                 |> range(start: -1m)
                 |> filter(fn: (r) => r._measurement == "cpu")
                 |> filter(fn: (r) => r._field == "usage_system")
                 |> filter(fn: (r) => r.cpu == "cpu-total")
                 |> max()"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 1);
        let row = &rows(&r[0].1[0])[0];
        assert_eq!(row[3], Value::Float(30.0));
        assert_eq!(row[2], Value::Time(NOW - 20_000_000_000));
    }

    #[test]
    fn filters_with_or_not_brackets_and_values() {
        let b = bucket();
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r["cpu"]=="cpu0" or r._measurement=="mem")"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 3);
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="usage_system" and r._value > 8.0)"#,
        )
        .unwrap();
        assert_eq!(r[0].1.iter().map(Table::len).sum::<usize>(), 2);
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>not (r.host != "h1") and r.cpu =~ /^cpu-/)"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 2);
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>exists r.cpu)"#).unwrap();
        assert_eq!(r[0].1.len(), 4, "mem has no cpu tag");
    }

    #[test]
    fn group_mean_last_first_and_absolute_ranges() {
        let b = bucket();
        let r = query(
            &b,
            r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="usage_system")|>group()|>mean()"#,
        )
        .unwrap();
        assert_eq!(r[0].1.len(), 1);
        assert_eq!(rows(&r[0].1[0]), vec![vec![Value::Float(15.0)]]);
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="usage_system")|>group(columns:["cpu"])|>count()|>yield(name:"n")"#).unwrap();
        assert_eq!(r[0].0, "n");
        assert_eq!(r[0].1.len(), 2);
        assert_eq!(r[0].1[0].key(), ["cpu"]);
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:2026-11-22T09:00:00Z, stop: now())|>filter(fn:(r)=>r.cpu=="cpu-total" and r._field=="usage_system")|>first()"#).unwrap();
        assert_eq!(rows(&r[0].1[0])[0][3], Value::Float(99.0));
        let r = query(&b, r#"from(bucket:"telegraf")|>range(start:-1h, stop:-1m)|>filter(fn:(r)=>r.cpu=="cpu-total" and r._field=="usage_system")|>last()"#).unwrap();
        assert_eq!(rows(&r[0].1[0])[0][3], Value::Float(99.0));
        let r =
            query(&b, r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._field=="used")|>sum()"#).unwrap();
        assert_eq!(rows(&r[0].1[0])[0].last(), Some(&Value::Int(100)));
    }

    #[test]
    fn unsupported_flux_is_named() {
        let b = bucket();
        for (src, want) in [
            (r#"from(bucket:"telegraf")|>range(start:-5m)|>aggregateWindow(every: 1m, fn: mean)"#, "aggregateWindow"),
            (r#"import "strings" from(bucket:"telegraf")|>range(start:-5m)"#, "`import`"),
            (r#"x = from(bucket:"telegraf")"#, "assignment"),
            (r#"from(bucket:"telegraf")|>range(start:-5m, stop: -1m, foo: 1)"#, "`foo`"),
            (r#"from(bucket:"telegraf")|>limit(n:1)"#, "unbounded read"),
            (
                r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>strings.hasPrefix(v: r.cpu, prefix:"c"))"#,
                "strings.hasPrefix",
            ),
            (r#"from(bucket:"telegraf")|>range(start:-5m"#, "expected"),
            (r#"from(bucket:"nope")|>range(start:-5m)"#, "could not find bucket \"nope\""),
            (r#"from(bucket:"telegraf")|>range(start:-5m)|>yield()|>yield()"#, "duplicate yield"),
        ] {
            let e = query(&b, src).unwrap_err();
            assert!(e.contains(want), "{src}: {e}");
        }
        assert!(
            query(
                &b,
                r#"from(bucket:"telegraf")|>range(start:-5m)|>filter(fn:(r)=>r._measurement=="cpu")|>group()|>max()"#
            )
            .is_ok()
        );
    }

    #[test]
    fn literals() {
        assert_eq!(number_literal("1h30m").unwrap(), Tok::Dur(5_400_000_000_000));
        assert_eq!(number_literal("2026-11-22T09:13:44Z").unwrap(), Tok::Time(1_795_338_824_000_000_000));
        assert_eq!(number_literal("2026-11-22T10:13:44+01:00").unwrap(), Tok::Time(1_795_338_824_000_000_000));
        assert_eq!(number_literal("2026-11-22").unwrap(), Tok::Time(1_795_305_600_000_000_000));
        assert!(number_literal("5x").is_err());
    }
}
