//! "Did you mean …?": the one place unknown names get a suggestion, for runbooks, modules,
//! hosts, roles, keys, faults, templates and REPL commands alike.

/// Names among `candidates` close to `name`, closest first (for "did you mean").
pub fn suggest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut scored: Vec<(f64, &str)> = candidates
        .into_iter()
        .map(|c| {
            let score = strsim::jaro_winkler(name, c).max(if c.contains(name) || name.contains(c) { 0.9 } else { 0.0 });
            (score, c)
        })
        .filter(|(score, _)| *score >= 0.8)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(b.1)));
    scored.dedup_by(|a, b| a.1 == b.1);
    scored.into_iter().take(3).map(|(_, c)| c.to_string()).collect()
}

/// `; did you mean `NAME`?` for the candidate closest to `name`, when one is close enough; the
/// caller appends it to its "unknown …" message (or says what is known instead).
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    suggest(name, candidates).first().map(|s| format!("; did you mean `{s}`?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggestions_prefer_close_names() {
        let names = ["restart-all", "restart", "status", "quick-check"];
        assert_eq!(suggest("restart-al", names)[0], "restart-all");
        assert!(suggest("zzz", names).is_empty());
        assert_eq!(suggest("quickcheck", names), vec!["quick-check"]);
    }

    #[test]
    fn did_you_mean_names_the_closest_or_nothing() {
        assert_eq!(
            did_you_mean("log-stor", ["log-store", "metrics-db"]).as_deref(),
            Some("; did you mean `log-store`?")
        );
        assert_eq!(did_you_mean("zzz", ["log-store", "metrics-db"]), None);
    }
}
