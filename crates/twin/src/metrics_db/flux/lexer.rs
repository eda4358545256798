//! Flux lexing: the query text as tokens (identifiers, strings, numbers, durations such as
//! `1h30m`, RFC 3339 times, regex literals, punctuation), each with its line and column for
//! error messages.

use std::time::UNIX_EPOCH;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
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
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) line: usize,
    pub(super) col: usize,
}

pub(super) const PUNCT: [&str; 22] = [
    "|>", "=>", "==", "!=", "<=", ">=", "=~", "!~", "(", ")", "[", "]", "{", "}", ",", ":", ".", "<", ">", "=", "+",
    "-",
];

pub(super) fn duration_unit_ns(unit: &str) -> Option<i64> {
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

pub(super) fn lex(src: &str) -> Result<Vec<Token>, String> {
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
            Tok::Str(string_literal(&chars, &mut i, &mut line, &mut line_start).map_err(at)?)
        } else if c == '/' && !prev_is_value {
            Tok::Regex(regex_literal(&chars, &mut i).map_err(at)?)
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

/// A string literal starting at the `"` at `i`, with its escapes; `i` ends past the closing
/// quote and `line`/`line_start` follow the newlines inside it.
fn string_literal(chars: &[char], i: &mut usize, line: &mut usize, line_start: &mut usize) -> Result<String, String> {
    let mut s = String::new();
    *i += 1;
    loop {
        match chars.get(*i) {
            None => return Err("unterminated string literal".into()),
            Some('"') => break,
            Some('\\') => {
                *i += 1;
                match chars.get(*i) {
                    Some('n') => s.push('\n'),
                    Some('t') => s.push('\t'),
                    Some('r') => s.push('\r'),
                    Some('"') => s.push('"'),
                    Some('\\') => s.push('\\'),
                    Some('$') => s.push('$'),
                    Some(o) => return Err(format!("invalid escape sequence \\{o}")),
                    None => return Err("unterminated string literal".into()),
                }
            }
            Some('$') if chars.get(*i + 1) == Some(&'{') => {
                return Err("unsupported by the twin: string interpolation".into());
            }
            Some(ch) => {
                if *ch == '\n' {
                    *line += 1;
                    *line_start = *i + 1;
                }
                s.push(*ch)
            }
        }
        *i += 1;
    }
    *i += 1;
    Ok(s)
}

/// A regex literal starting at the `/` at `i`; `i` ends past the closing slash.
fn regex_literal(chars: &[char], i: &mut usize) -> Result<String, String> {
    let mut s = String::new();
    *i += 1;
    loop {
        match chars.get(*i) {
            None | Some('\n') => return Err("unterminated regex literal".into()),
            Some('/') => break,
            Some('\\') if chars.get(*i + 1) == Some(&'/') => {
                s.push('/');
                *i += 1;
            }
            Some(ch) => s.push(*ch),
        }
        *i += 1;
    }
    *i += 1;
    Ok(s)
}

/// An integer, float, duration (`1h30m`) or time (`2026-11-22T09:00:00Z`) literal.
pub(super) fn number_literal(text: &str) -> Result<Tok, String> {
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
pub(super) fn parse_time(text: &str) -> Option<i64> {
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
