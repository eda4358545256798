//! Host patterns as Ansible accepts them: `all`, a group, a host, a role, a comma list,
//! `a:b` (union), `a:&b` (intersection), `a:!b` (exclusion), wildcards (`web*`) and `~regex`.
//!
//! Parsing is pure; what a name means (group, host or role) is the inventory's business, so
//! `Pattern::evaluate` asks a closure for each term's hosts. Like Ansible, unions are applied
//! first, then intersections, then exclusions, whatever order they were written in.

use std::collections::BTreeSet;

/// How a term combines with the hosts selected so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Union,
    Intersect,
    Exclude,
}

/// What one term names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// `all` or `*`.
    All,
    /// A group, host or role, by its exact name.
    Name(String),
    /// A shell-style wildcard (`*`, `?`, `[…]`) over group and host names.
    Glob(String),
    /// `~REGEX` over group and host names (searched from the start, as Ansible's `re.match`).
    Regex(String),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Term {
    pub op: Op,
    pub matcher: Matcher,
}

/// A parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    /// Its terms, in order.
    pub terms: Vec<Term>,
}

impl Pattern {
    /// Splits on `,` when the pattern has one, else on `:` (Ansible's rule, which keeps the
    /// old colon syntax working).
    pub fn parse(text: &str) -> Result<Pattern, String> {
        let parts: Vec<&str> = if text.contains(',') { text.split(',').collect() } else { text.split(':').collect() };
        let mut terms = Vec::new();
        for part in parts.into_iter().map(str::trim).filter(|p| !p.is_empty()) {
            let (op, rest) = match part.as_bytes()[0] {
                b'!' => (Op::Exclude, &part[1..]),
                b'&' => (Op::Intersect, &part[1..]),
                _ => (Op::Union, part),
            };
            let rest = rest.trim();
            let matcher = if rest == "all" || rest == "*" {
                Matcher::All
            } else if let Some(re) = rest.strip_prefix('~') {
                regex::Regex::new(&format!("^(?:{re})")).map_err(|e| format!("`{part}`: invalid regex: {e}"))?;
                Matcher::Regex(re.to_string())
            } else if rest.contains(['*', '?', '[']) {
                Matcher::Glob(rest.to_string())
            } else if rest.is_empty() {
                return Err(format!("`{part}` names nothing after `{}`", &part[..1]));
            } else {
                Matcher::Name(rest.to_string())
            };
            terms.push(Term { op, matcher });
        }
        if terms.is_empty() {
            return Err(format!("the host pattern `{text}` is empty"));
        }
        Ok(Pattern { terms })
    }

    /// The selected host indices: unions, then intersections, then exclusions. A pattern made
    /// only of intersections and exclusions starts from nothing, as Ansible's does.
    pub fn evaluate<E>(
        &self,
        mut hosts_of: impl FnMut(&Matcher) -> Result<BTreeSet<usize>, E>,
    ) -> Result<BTreeSet<usize>, E> {
        let mut selected = BTreeSet::new();
        for op in [Op::Union, Op::Intersect, Op::Exclude] {
            for term in self.terms.iter().filter(|t| t.op == op) {
                let these = hosts_of(&term.matcher)?;
                match op {
                    Op::Union => selected.extend(these),
                    Op::Intersect => selected.retain(|h| these.contains(h)),
                    Op::Exclude => selected.retain(|h| !these.contains(h)),
                }
            }
        }
        Ok(selected)
    }
}

impl Matcher {
    /// Whether a group or host name matches a wildcard or regex term (names are exact).
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::All => true,
            Matcher::Name(n) => n == name,
            Matcher::Glob(g) => glob(g.as_bytes(), name.as_bytes()),
            Matcher::Regex(r) => regex::Regex::new(&format!("^(?:{r})")).is_ok_and(|re| re.is_match(name)),
        }
    }
}

/// fnmatch: `*` any run, `?` one character, `[abc]`/`[a-z]`/`[!a]` a class.
fn glob(pattern: &[u8], name: &[u8]) -> bool {
    match pattern.split_first() {
        None => name.is_empty(),
        Some((b'*', rest)) => (0..=name.len()).any(|i| glob(rest, &name[i..])),
        Some((b'?', rest)) => !name.is_empty() && glob(rest, &name[1..]),
        Some((b'[', rest)) if rest.contains(&b']') => {
            let Some((&c, name_rest)) = name.split_first() else { return false };
            let close = rest.iter().skip(1).position(|&b| b == b']').map_or(0, |p| p + 1);
            let (class, after) = (&rest[..close], &rest[close + 1..]);
            let (negate, class) = match class.split_first() {
                Some((b'!' | b'^', inner)) => (true, inner),
                _ => (false, class),
            };
            let mut hit = false;
            let mut i = 0;
            while i < class.len() {
                if i + 2 < class.len() && class[i + 1] == b'-' {
                    hit |= class[i] <= c && c <= class[i + 2];
                    i += 3;
                } else {
                    hit |= class[i] == c;
                    i += 1;
                }
            }
            hit != negate && glob(after, name_rest)
        }
        Some((&p, rest)) => name.first() == Some(&p) && glob(rest, &name[1..]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(op: Op, n: &str) -> Term {
        Term { op, matcher: Matcher::Name(n.to_string()) }
    }

    #[test]
    fn commas_and_colons_split_terms_with_their_operators() {
        let p = Pattern::parse("servers:&eu:!monitor3").unwrap();
        assert_eq!(p.terms, vec![name(Op::Union, "servers"), name(Op::Intersect, "eu"), name(Op::Exclude, "monitor3")]);
        let p = Pattern::parse("web*, !web3 ,all").unwrap();
        assert_eq!(
            p.terms,
            vec![
                Term { op: Op::Union, matcher: Matcher::Glob("web*".into()) },
                Term { op: Op::Exclude, matcher: Matcher::Name("web3".into()) },
                Term { op: Op::Union, matcher: Matcher::All },
            ]
        );
        assert_eq!(Pattern::parse("~mon(itor)?1.*").unwrap().terms[0].matcher, Matcher::Regex("mon(itor)?1.*".into()));
    }

    #[test]
    fn malformed_patterns_are_explained() {
        assert_eq!(Pattern::parse(" , ").unwrap_err(), "the host pattern ` , ` is empty");
        assert_eq!(Pattern::parse("a:!").unwrap_err(), "`!` names nothing after `!`");
        assert_eq!(
            Pattern::parse("~(").unwrap_err(),
            "`~(`: invalid regex: regex parse error:\n    ^(?:()\n     ^\nerror: unclosed group"
        );
    }

    #[test]
    fn unions_come_first_then_intersections_then_exclusions() {
        let sets = |m: &Matcher| -> Result<BTreeSet<usize>, ()> {
            Ok(match m {
                Matcher::Name(n) if n == "a" => [1, 2, 3].into(),
                Matcher::Name(n) if n == "b" => [3, 4].into(),
                Matcher::Name(n) if n == "c" => [2, 3, 4, 5].into(),
                _ => BTreeSet::new(),
            })
        };
        let eval = |text: &str| Pattern::parse(text).unwrap().evaluate(sets).unwrap().into_iter().collect::<Vec<_>>();
        assert_eq!(eval("a:b"), [1, 2, 3, 4]);
        assert_eq!(eval("a:&c"), [2, 3]);
        assert_eq!(eval("!b,a"), [1, 2]);
        assert_eq!(eval("&c:a:b:!a"), [4]);
        assert_eq!(eval("&c"), Vec::<usize>::new());
    }

    #[test]
    fn wildcards_match_like_fnmatch() {
        let m = |g: &str, n: &str| Matcher::Glob(g.to_string()).matches(n);
        assert!(m("web*", "web12") && m("web*", "web") && !m("web*", "db1"));
        assert!(m("monitor?", "monitor3") && !m("monitor?", "monitor11"));
        assert!(m("c[1-3]", "c2") && !m("c[1-3]", "c4") && m("c[!1]", "c2") && !m("c[!1]", "c1"));
        assert!(Matcher::Regex("mon.*1$".into()).matches("monitor11"));
        assert!(!Matcher::Regex("itor".into()).matches("monitor11"));
    }
}
