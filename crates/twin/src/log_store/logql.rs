//! The LogQL subset the log-store twin understands: stream selectors (`=`, `!=`, `=~`, `!~`,
//! regexes anchored as Loki anchors them), line filters (`|=`, `!=`, `|~`, `!~`), and metric
//! queries over them (`count_over_time`, `rate`, `bytes_over_time`, `bytes_rate`, optionally
//! inside `sum|min|max|avg|count [by|without (…)]`). Anything else is rejected with a Loki-style
//! `parse error at line 1, col N: …` naming the unsupported part.

use std::time::Duration;

use regex::Regex;

/// How a label matcher compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MatchOp {
    Eq,
    Ne,
    Re,
    NotRe,
}

/// `name op "value"` inside `{…}`.
#[derive(Debug, Clone)]
pub(super) struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    regex: Option<Regex>,
}

impl Matcher {
    pub(super) fn new(name: &str, op: MatchOp, value: &str) -> Result<Matcher, String> {
        let regex = match op {
            // Loki (like Prometheus) anchors label regexes: the whole value must match.
            MatchOp::Re | MatchOp::NotRe => Some(
                Regex::new(&format!("^(?s:{value})$"))
                    .map_err(|e| format!("invalid regex `{value}`: {}", regex_reason(&e.to_string())))?,
            ),
            _ => None,
        };
        Ok(Matcher { name: name.to_string(), op, value: value.to_string(), regex })
    }

    /// Whether a label value (empty when the label is absent) satisfies the matcher.
    pub(super) fn matches(&self, value: &str) -> bool {
        match self.op {
            MatchOp::Eq => value == self.value,
            MatchOp::Ne => value != self.value,
            MatchOp::Re => self.regex.as_ref().is_some_and(|r| r.is_match(value)),
            MatchOp::NotRe => !self.regex.as_ref().is_some_and(|r| r.is_match(value)),
        }
    }
}

/// How a line filter tests a line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FilterOp {
    Contains,
    NotContains,
    Re,
    NotRe,
}

/// `|= "text"` and friends; regex filters are not anchored (a match anywhere counts).
#[derive(Debug, Clone)]
pub(super) struct LineFilter {
    pub op: FilterOp,
    pub text: String,
    regex: Option<Regex>,
}

impl LineFilter {
    pub(super) fn matches(&self, line: &str) -> bool {
        match self.op {
            FilterOp::Contains => line.contains(&self.text),
            FilterOp::NotContains => !line.contains(&self.text),
            FilterOp::Re => self.regex.as_ref().is_some_and(|r| r.is_match(line)),
            FilterOp::NotRe => !self.regex.as_ref().is_some_and(|r| r.is_match(line)),
        }
    }
}

/// A stream selector with its line filters: what a log query reads.
#[derive(Debug, Clone)]
pub(super) struct LogSelector {
    pub(crate) matchers: Vec<Matcher>,
    pub filters: Vec<LineFilter>,
}

impl LogSelector {
    /// Whether a stream's labels (sorted or not) are selected.
    pub(super) fn selects(&self, labels: &[(String, String)]) -> bool {
        self.matchers.iter().all(|m| {
            let value = labels.iter().find(|(k, _)| *k == m.name).map_or("", |(_, v)| v.as_str());
            m.matches(value)
        })
    }

    pub(super) fn keeps(&self, line: &str) -> bool {
        self.filters.iter().all(|f| f.matches(line))
    }
}

/// The range function of a metric query.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RangeFn {
    CountOverTime,
    Rate,
    BytesOverTime,
    BytesRate,
}

/// The vector aggregation around a range function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AggOp {
    Sum,
    Min,
    Max,
    Avg,
    Count,
}

#[derive(Debug, Clone)]
pub(super) struct Aggregation {
    pub op: AggOp,
    /// `by (…)` when true, `without (…)` when false.
    pub by: bool,
    pub labels: Vec<String>,
}

#[derive(Debug, Clone)]
pub(super) struct MetricQuery {
    pub func: RangeFn,
    pub selector: LogSelector,
    pub range: Duration,
    pub(crate) aggregation: Option<Aggregation>,
}

#[derive(Debug, Clone)]
pub(super) enum Query {
    Log(LogSelector),
    Metric(MetricQuery),
}

/// Parses a whole query.
pub(super) fn parse(text: &str) -> Result<Query, String> {
    let mut p = Parser { text, pos: 0 };
    p.skip_ws();
    let query = if p.peek() == Some('{') { Query::Log(p.log_selector()?) } else { Query::Metric(p.metric()?) };
    p.skip_ws();
    if p.pos < text.len() {
        return Err(p.error(&format!("unexpected `{}`", p.rest_token())));
    }
    let selector = match &query {
        Query::Log(s) => s,
        Query::Metric(m) => &m.selector,
    };
    // Loki refuses selectors that could match every stream.
    if !selector.matchers.iter().any(|m| !m.matches("")) {
        return Err("parse error : queries require at least one regexp or equality matcher that does not have an \
                    empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but \
                    app=~\".+\" will"
            .to_string());
    }
    Ok(query)
}

/// A Prometheus-style duration: `5m`, `1h30m`, `500ms`, `1d`, `1w`.
pub(super) fn parse_duration(text: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    let mut rest = text.trim();
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let ms = match unit {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 604_800_000,
            "y" => 31_536_000_000,
            _ => return None,
        };
        total += Duration::from_millis(n.checked_mul(ms)?);
    }
    Some(total)
}

/// The reason a regex was refused: the `error: …` line of the regex crate's message (whose
/// first line is only `regex parse error:`), or its first line when it has none.
fn regex_reason(text: &str) -> &str {
    text.lines()
        .find_map(|l| l.trim().strip_prefix("error: "))
        .unwrap_or_else(|| text.lines().next().unwrap_or(text))
        .trim()
}

struct Parser<'a> {
    text: &'a str,
    pos: usize,
}

impl Parser<'_> {
    fn error(&self, message: &str) -> String {
        let col = self.text[..self.pos.min(self.text.len())].chars().count() + 1;
        format!("parse error at line 1, col {col}: {message}")
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn rest_token(&self) -> String {
        let rest = &self.text[self.pos..];
        let end = rest.find(char::is_whitespace).unwrap_or(rest.len()).min(24);
        rest.get(..end).unwrap_or(rest).to_string()
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.pos += c.len_utf8();
            } else {
                break;
            }
        }
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        if self.text[self.pos..].starts_with(token) {
            self.pos += token.len();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, token: &str) -> Result<(), String> {
        if self.eat(token) {
            Ok(())
        } else {
            let found = if self.pos >= self.text.len() { "end of query".to_string() } else { self.rest_token() };
            Err(self.error(&format!("syntax error: expected `{token}`, found `{found}`")))
        }
    }

    fn identifier(&mut self) -> Option<String> {
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let len = rest
            .char_indices()
            .find(|(i, c)| !(c.is_ascii_alphabetic() || *c == '_' || (*i > 0 && c.is_ascii_digit())))
            .map_or(rest.len(), |(i, _)| i);
        if len == 0 {
            return None;
        }
        self.pos += len;
        Some(rest[..len].to_string())
    }

    /// A double-quoted string with Go escapes, or a backtick raw string.
    fn string(&mut self) -> Result<String, String> {
        self.skip_ws();
        let start = self.pos;
        match self.peek() {
            Some('`') => {
                let rest = &self.text[self.pos + 1..];
                let end = rest.find('`').ok_or_else(|| self.error("unterminated raw string"))?;
                self.pos += end + 2;
                Ok(rest[..end].to_string())
            }
            Some('"') => {
                self.pos += 1;
                let mut out = String::new();
                let mut chars = self.text[self.pos..].char_indices();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '"' => {
                            self.pos += i + 1;
                            return Ok(out);
                        }
                        '\\' => match chars.next().map(|(_, e)| e) {
                            Some('n') => out.push('\n'),
                            Some('t') => out.push('\t'),
                            Some('r') => out.push('\r'),
                            Some('\\') => out.push('\\'),
                            Some('"') => out.push('"'),
                            Some('\'') => out.push('\''),
                            Some('u') => {
                                let hex: String = (0..4).filter_map(|_| chars.next().map(|(_, h)| h)).collect();
                                let c = u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32);
                                out.push(c.ok_or_else(|| self.error("invalid \\u escape in string"))?);
                            }
                            // Regex escapes such as `\.` or `\d` are kept for the regex engine.
                            Some(other) => {
                                out.push('\\');
                                out.push(other);
                            }
                            None => break,
                        },
                        c => out.push(c),
                    }
                }
                self.pos = start;
                Err(self.error("unterminated string"))
            }
            _ => Err(self.error(&format!("syntax error: expected a string, found `{}`", self.rest_token()))),
        }
    }

    fn matchers(&mut self) -> Result<Vec<Matcher>, String> {
        self.expect("{")?;
        let mut matchers = Vec::new();
        if self.eat("}") {
            return Ok(matchers);
        }
        loop {
            let at = self.pos;
            let name = self.identifier().ok_or_else(|| {
                self.error(&format!("syntax error: expected a label name, found `{}`", self.rest_token()))
            })?;
            self.skip_ws();
            let op = if self.eat("=~") {
                MatchOp::Re
            } else if self.eat("!~") {
                MatchOp::NotRe
            } else if self.eat("!=") {
                MatchOp::Ne
            } else if self.eat("=") {
                MatchOp::Eq
            } else {
                return Err(self.error(&format!(
                    "syntax error: expected one of =, !=, =~, !~ after `{name}`, found `{}`",
                    self.rest_token()
                )));
            };
            let value = self.string()?;
            let matcher = Matcher::new(&name, op, &value).map_err(|e| {
                self.pos = at;
                self.error(&e)
            })?;
            matchers.push(matcher);
            if self.eat(",") {
                continue;
            }
            self.expect("}")?;
            return Ok(matchers);
        }
    }

    fn log_selector(&mut self) -> Result<LogSelector, String> {
        let matchers = self.matchers()?;
        let mut filters = Vec::new();
        loop {
            self.skip_ws();
            let op = if self.eat("|=") {
                FilterOp::Contains
            } else if self.eat("!=") {
                FilterOp::NotContains
            } else if self.eat("|~") {
                FilterOp::Re
            } else if self.eat("!~") {
                FilterOp::NotRe
            } else if self.text[self.pos..].starts_with('|') {
                let at = self.pos;
                self.pos += 1;
                let stage = self.identifier().unwrap_or_else(|| self.rest_token());
                self.pos = at;
                return Err(self.error(&format!(
                    "unsupported by the twin: pipeline stage `| {stage}` (only line filters |=, !=, |~, !~)"
                )));
            } else {
                return Ok(LogSelector { matchers, filters });
            };
            let at = self.pos;
            let text = self.string()?;
            let regex = match op {
                FilterOp::Re | FilterOp::NotRe => Some(Regex::new(&format!("(?s:{text})")).map_err(|e| {
                    self.pos = at;
                    self.error(&format!("invalid regex `{text}`: {}", regex_reason(&e.to_string())))
                })?),
                _ => None,
            };
            filters.push(LineFilter { op, text, regex });
        }
    }

    fn grouping(&mut self) -> Result<Option<(bool, Vec<String>)>, String> {
        let save = self.pos;
        let by = match self.identifier().as_deref() {
            Some("by") => true,
            Some("without") => false,
            _ => {
                self.pos = save;
                return Ok(None);
            }
        };
        self.expect("(")?;
        let mut labels = Vec::new();
        if !self.eat(")") {
            loop {
                labels.push(self.identifier().ok_or_else(|| self.error("syntax error: expected a label name"))?);
                if self.eat(",") {
                    continue;
                }
                self.expect(")")?;
                break;
            }
        }
        Ok(Some((by, labels)))
    }

    fn metric(&mut self) -> Result<MetricQuery, String> {
        let at = self.pos;
        let name = self.identifier().ok_or_else(|| {
            self.error(&format!("syntax error: unexpected `{}`, expected a selector or a function", self.rest_token()))
        })?;
        let agg = match name.as_str() {
            "sum" => Some(AggOp::Sum),
            "min" => Some(AggOp::Min),
            "max" => Some(AggOp::Max),
            "avg" => Some(AggOp::Avg),
            "count" => Some(AggOp::Count),
            _ => None,
        };
        if let Some(op) = agg {
            let before = self.grouping()?;
            self.expect("(")?;
            let mut inner = self.metric()?;
            self.expect(")")?;
            let after = self.grouping()?;
            if inner.aggregation.is_some() {
                return Err(self.error("unsupported by the twin: nested aggregations"));
            }
            let (by, labels) = before.or(after).unwrap_or((false, Vec::new()));
            inner.aggregation = Some(Aggregation { op, by, labels });
            return Ok(inner);
        }
        let func = match name.as_str() {
            "count_over_time" => RangeFn::CountOverTime,
            "rate" => RangeFn::Rate,
            "bytes_over_time" => RangeFn::BytesOverTime,
            "bytes_rate" => RangeFn::BytesRate,
            other => {
                self.pos = at;
                return Err(self.error(&format!(
                    "unsupported by the twin: `{other}` (log selectors, count_over_time, rate, bytes_over_time, \
                     bytes_rate, and sum/min/max/avg/count over them)"
                )));
            }
        };
        self.expect("(")?;
        let selector = self.log_selector()?;
        self.expect("[")?;
        self.skip_ws();
        let rest = &self.text[self.pos..];
        let end = rest.find(']').ok_or_else(|| self.error("syntax error: expected `]`"))?;
        let range = parse_duration(&rest[..end])
            .filter(|d| !d.is_zero())
            .ok_or_else(|| self.error(&format!("invalid range `{}`", &rest[..end])))?;
        self.pos += end + 1;
        self.expect(")")?;
        Ok(MetricQuery { func, selector, range, aggregation: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    fn log(q: &str) -> LogSelector {
        match parse(q).unwrap() {
            Query::Log(s) => s,
            other => panic!("not a log query: {other:?}"),
        }
    }

    #[test]
    fn selectors_match_with_all_four_operators() {
        let s = log(r#"{service_type="test", hostname!="h2", unit=~"loki.*", level!~"debug|trace"}"#);
        assert!(s.selects(&labels(&[("service_type", "test"), ("hostname", "h1"), ("unit", "loki.service")])));
        assert!(!s.selects(&labels(&[("service_type", "test"), ("hostname", "h2"), ("unit", "loki.service")])));
        assert!(!s.selects(&labels(&[("service_type", "test"), ("unit", "xloki.service")])), "regex is anchored");
        assert!(!s.selects(&labels(&[("service_type", "test"), ("unit", "loki"), ("level", "debug")])));
    }

    #[test]
    fn line_filters_chain() {
        let s = log(r#"{a="b"} |= "error" != "timeout" |~ `code=\d+` !~ "(?i)retry""#);
        assert!(s.keeps("error: code=500 at x"));
        assert!(!s.keeps("error: timeout code=500"));
        assert!(!s.keeps("error: code=abc"));
        assert!(!s.keeps("error: code=500 RETRY"));
        assert_eq!(s.filters.len(), 4);
    }

    #[test]
    fn escapes_in_strings() {
        let s = log(r#"{a="x\"y"} |= "tab\there""#);
        assert_eq!(s.matchers[0].value, "x\"y");
        assert_eq!(s.filters[0].text, "tab\there");
        let s = log(r#"{a=~"h\.1"}"#);
        assert!(s.selects(&labels(&[("a", "h.1")])) && !s.selects(&labels(&[("a", "hx1")])));
    }

    #[test]
    fn metric_queries() {
        let Query::Metric(m) = parse(r#"sum by (hostname) (count_over_time({a="b"} |= "x" [5m]))"#).unwrap() else {
            panic!()
        };
        assert_eq!(m.func, RangeFn::CountOverTime);
        assert_eq!(m.range, Duration::from_secs(300));
        let agg = m.aggregation.unwrap();
        assert_eq!((agg.op, agg.by, agg.labels), (AggOp::Sum, true, vec!["hostname".to_string()]));
        let Query::Metric(m) = parse(r#"rate({a="b"}[1m])"#).unwrap() else { panic!() };
        assert!(m.aggregation.is_none() && m.func == RangeFn::Rate);
    }

    #[test]
    fn errors_name_the_place_and_the_unsupported_part() {
        assert_eq!(
            parse(r#"{a="b"} | json"#).unwrap_err(),
            "parse error at line 1, col 9: unsupported by the twin: pipeline stage `| json` (only line filters |=, \
             !=, |~, !~)"
        );
        assert_eq!(
            parse(r#"{a="b""#).unwrap_err(),
            "parse error at line 1, col 7: syntax error: expected `}`, found `end of query`"
        );
        assert_eq!(
            parse(r#"topk(3, count_over_time({a="b"}[1m]))"#).unwrap_err(),
            "parse error at line 1, col 1: unsupported by the twin: `topk` (log selectors, count_over_time, rate, \
             bytes_over_time, bytes_rate, and sum/min/max/avg/count over them)"
        );
        // Loki's own words, for a selector that matches every stream.
        let everything = "parse error : queries require at least one regexp or equality matcher that does not have an \
                          empty-compatible value. For instance, app=~\".*\" does not meet this requirement, but \
                          app=~\".+\" will";
        assert_eq!(parse(r#"{a=~".*"}"#).unwrap_err(), everything);
        assert_eq!(parse("{}").unwrap_err(), everything);
        assert_eq!(
            parse(r#"{a=~"("}"#).unwrap_err(),
            "parse error at line 1, col 2: invalid regex `(`: unclosed group"
        );
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("5x"), None);
        assert_eq!(parse_duration(""), None);
    }
}
