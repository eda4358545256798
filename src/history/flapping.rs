//! Checks that flap: their outcome changed more than N times over a window of runs.
//!
//! A check is known by its job, host, section and name; its outcomes are read from each run's
//! report, oldest first, and each change (pass → fail, fail → pass, …) counts once. A run
//! where the check did not happen (the runbook aborted earlier) neither counts nor breaks
//! the sequence.

use std::collections::BTreeMap;

use super::store::Run;

/// One flapping check.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub(crate) struct Flap {
    pub job: String,
    pub host: String,
    pub section: Option<String>,
    pub check: String,
    pub changes: usize,
    /// The outcomes in order, one letter per run: `p`ass, `f`ail, `w`arn, `s`kip.
    pub sequence: String,
}

/// The checks of `runs` (oldest first) whose outcome changed more than `more_than` times.
pub(crate) fn flapping(runs: &[Run], more_than: usize) -> Vec<Flap> {
    let mut seen: BTreeMap<(String, String, Option<String>, String), String> = BTreeMap::new();
    for run in runs {
        let Ok(report) = serde_json::from_str::<serde_json::Value>(&run.report) else { continue };
        let Some(checks) = report["checks"].as_array() else { continue };
        for c in checks {
            let section = c["section"].as_str().map(str::to_string);
            let name = c["name"].as_str().unwrap_or_default().to_string();
            let letter = c["outcome"].as_str().and_then(|o| o.chars().next()).unwrap_or('?');
            seen.entry((run.job.clone(), run.host.clone(), section, name)).or_default().push(letter);
        }
    }
    seen.into_iter()
        .filter_map(|((job, host, section, check), sequence)| {
            let letters: Vec<char> = sequence.chars().collect();
            let changes = letters.windows(2).filter(|w| w[0] != w[1]).count();
            (changes > more_than).then_some(Flap { job, host, section, check, changes, sequence })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(job: &str, outcomes: &[(&str, &str)]) -> Run {
        let checks: Vec<_> = outcomes
            .iter()
            .map(|(name, outcome)| serde_json::json!({"section": "s", "name": name, "outcome": outcome}))
            .collect();
        Run {
            id: 0,
            job: job.into(),
            host: "here".into(),
            runbook: job.into(),
            started_ms: 0,
            duration_s: 0.0,
            outcome: "passed".into(),
            note: None,
            report: serde_json::json!({ "checks": checks }).to_string(),
        }
    }

    #[test]
    fn counts_changes_per_check() {
        let runs = vec![
            run("q", &[("a", "pass"), ("b", "pass")]),
            run("q", &[("a", "fail"), ("b", "pass")]),
            run("q", &[("a", "pass")]),
            run("q", &[("a", "fail"), ("b", "fail")]),
        ];
        let flaps = flapping(&runs, 2);
        assert_eq!(
            flaps,
            vec![Flap {
                job: "q".into(),
                host: "here".into(),
                section: Some("s".into()),
                check: "a".into(),
                changes: 3,
                sequence: "pfpf".into()
            }]
        );
        assert_eq!(flapping(&runs, 0).len(), 2);
    }
}
