//! Every verb's own example runs and gives its expected result: `opsbook fns --json` lists
//! each host function with its effect and an example call (declared where the verb is
//! registered); each example is run in the sandbox under `--dry-run` (changing verbs plan
//! instead of acting), inside one runbook, and what it gives — its value in Rhai's debug form,
//! or the sandbox's refusal — is compared, masked, with `tests/fixtures/verb-examples.txt`.

use crate::support::Test;

/// The verbs as `opsbook fns --json` lists them.
fn verbs() -> Vec<serde_json::Value> {
    let listed = Test::new().args(["fns", "--json"]).run().code(0).json();
    listed.as_array().expect("fns --json prints an array").clone()
}

#[test]
fn every_verb_says_its_effect_and_gives_an_example() {
    let missing: Vec<String> = verbs()
        .iter()
        .filter(|f| !f["name"].as_str().unwrap_or_default().starts_with("get$"))
        .filter(|f| {
            !["to_string", "to_debug", "to_map", "print", "debug"].contains(&f["name"].as_str().unwrap_or_default())
        })
        .filter(|f| f["namespace"] != "prom" || f["name"] == "scrape")
        .filter(|f| f["effect"].is_null() || f["example"].is_null())
        .map(|f| f["signature"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(missing, Vec::<String>::new(), "verbs without an effect or an example");
}

/// Every verb's example, run in the sandbox under `--dry-run` (changing verbs plan instead of
/// acting), gives the result `tests/fixtures/verb-examples.txt` says, one `example => result`
/// line each: the value in Rhai's debug form, or what the example threw. `OPSBOOK_BLESS=1`
/// rewrites the file (then review it with `git diff`).
#[test]
fn every_example_gives_its_expected_result_in_the_sandbox() {
    let examples = distinct_examples();
    // One check per example, named by its place: passed with the value's debug form, failed
    // with what it threw. The checks the examples record themselves have other names.
    let mut source = String::from("//! Runs every verb's example.\n");
    for (i, example) in examples.iter().enumerate() {
        // A list whose entries race is shown sorted, each entry in its debug form.
        let shown = if UNORDERED.iter().any(|(unordered, _)| unordered == example) {
            "{ let all = value.map(|v| to_debug(v)); all.sort(); \
             \"[\" + all.reduce(|text, v| if text == \"\" { v } else { text + \", \" + v }, \"\") + \"]\" }"
        } else {
            "to_debug(value)"
        };
        source.push_str(&format!(
            "try {{ let value = {example}; check(\"example {i}\", true, {shown}); }} \
             catch (e) {{ check(\"example {i}\", false, to_debug(e)); }}\n"
        ));
    }
    let report = Test::new()
        .runbook("examples", &source)
        .args(["run", "examples", "--sandbox", "--dry-run", "--format", "json"])
        .run()
        .json();
    let checks = report["checks"].as_array().expect("the report has checks");
    let result = |i: usize| {
        let name = format!("example {i}");
        let check = checks.iter().find(|c| c["name"] == name.as_str());
        let check = check.unwrap_or_else(|| panic!("no result for `{}`", examples[i]));
        (check["outcome"] == "pass", check["detail"].as_str().unwrap_or_default().to_string())
    };
    // What the sandbox does not simulate is refused in words, never acted on this machine:
    // accounts and the firewall (changed on real hosts in the lifecycle tests), containers
    // (its servers run natively; real podman in the container tests) and packages (installed
    // on Debian 13 hosts in the real-hosts tests); a verb that would run a program here (`sh`
    // for WireGuard) is refused too. Those refusals are their examples' results; anything
    // else an example throws is a failure of this test, never a result to bless.
    let unsimulated = |detail: &str| {
        detail.contains("is not available in the sandbox")
            || detail.contains("the sandbox runs its servers natively")
            || detail.contains("the sandbox runs no program on this machine")
    };
    let mut seen = String::new();
    let mut threw = Vec::new();
    for (i, example) in examples.iter().enumerate() {
        let (passed, detail) = result(i);
        if !passed && !unsimulated(&detail) {
            threw.push(format!("{example} threw: {detail}"));
        }
        let shown = match VARYING.iter().find(|(varying, _, _)| varying == example) {
            Some((_, why, pattern)) => {
                let masked = mask_example_result(&detail);
                assert!(regex::Regex::new(pattern).unwrap().is_match(&masked), "{example} gave {masked}");
                format!("(varies: {why})")
            }
            None if passed => mask_example_result(&detail),
            None => format!("refused: {}", mask_example_result(&detail)),
        };
        seen.push_str(&format!("{example} => {shown}\n"));
    }
    assert_eq!(threw, Vec::<String>::new(), "examples that threw");
    compare_with_fixture(&seen);
}

/// Two lines of the results' file around where they first differ (a result can be long).
fn where_differing(expected: &str, seen: &str) -> String {
    let at = expected.chars().zip(seen.chars()).take_while(|(e, s)| e == s).count();
    let around = |line: &str| -> String {
        let example = line.split(" => ").next().unwrap_or_default();
        let shown: String = line.chars().skip(at.saturating_sub(60)).take(160).collect();
        format!("{example}: …{shown}…")
    };
    format!("expected {}\n    seen {}", around(expected), around(seen))
}

/// Examples whose result differs from run to run even masked, each with why: the file shows
/// why in the result's place, and the masked result is held to the pattern given.
const VARYING: &[(&str, &str, &str)] = &[
    (
        "influx::query(`from(bucket: \"${config.metrics_db.bucket}\") |> range(start: -5m) |> limit(n: 1)`)",
        "after the sandbox's history come the rows the agent has sampled of this machine by then",
        r#"^\[#\{"_field": "usage_idle", "_measurement": "cpu", .*"source": "sandbox-history", "table": 0\}, .*\]$"#,
    ),
    ("age(\"2026-11-28T00:00:00Z\")", "the seconds since a fixed moment grow with the clock", r"^\d+\.\d+$"),
    (
        "loki::query(`{unit=\"loki.service\"}`)",
        "which of the log store's start lines the shipper has delivered yet is a matter of timing",
        r#"^\[#\{"labels": #\{.*"unit": "loki.service"\}, "line": .*\]$"#,
    ),
    (
        "loki::query(`{unit=\"loki.service\"}`, #{ since: \"10m\", limit: 5 })",
        "which of the log store's start lines the shipper has delivered yet is a matter of timing",
        r#"^\[#\{"labels": #\{.*"unit": "loki.service"\}, "line": .*\]$"#,
    ),
    (
        "telegraf::watch_reload(#{ pid: unit::status(config.metrics_agent.unit).main_pid, since: \"1 min ago\", timeout: \"1s\" })",
        "the agent's first lines and the service manager's `Started` race at start, as on a real host",
        r#"^#\{"detail": "no `I! Reloading Telegraf config` line within \[DUR\]: the agent did not log the reload", "lines": \[.*"Started Telegraf\.".*\], "ok": false, "pid": \d+, "reloaded": false\}$"#,
    ),
];

/// Examples giving a list whose entries come in an order that races, each with why: their
/// entries are compared sorted.
const UNORDERED: &[(&str, &str)] = &[(
    "journal::read(#{ unit: \"loki\", since: \"10 min ago\", lines: 20 })",
    "the log store's first line and the service manager's `Started` race at start, as on a real host",
)];

/// An example's result with what varies from run to run masked: the support's durations and
/// scratch paths, this machine's name (the sandbox's one host keeps it), moments in each form
/// the verbs give them, what a verb measured (`elapsed_ms`, `waited`, …), the sandbox's
/// loopback ports and the marker `journal::emit` makes unique to its call.
fn mask_example_result(result: &str) -> String {
    use std::sync::OnceLock;
    static RULES: OnceLock<Vec<(regex::Regex, String)>> = OnceLock::new();
    let rules = RULES.get_or_init(|| {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let mut rules = vec![
            (r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z", "[MOMENT]"),
            (r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", "[MOMENT]"),
            (r"[A-Z][a-z]{2}, \d\d [A-Z][a-z]{2} \d{4} \d\d:\d\d:\d\d GMT", "[MOMENT]"),
            (r"@\d{10}\.\d+", "@[MOMENT]"),
            (
                r#""(elapsed_ms|elapsed|waited|duration|time_us|started_us|time_ns)": \d+(?:\.\d+)?"#,
                "\"$1\": [MEASURED]",
            ),
            (r"\b127\.0\.0\.1:\d{4,5}\b", "127.0.0.1:[PORT]"),
            (r"\bopsbook-\d+-[0-9a-f]{16}\b", "opsbook-[MARKER]"),
        ];
        let name = hostname.trim();
        let named = format!(r"\b{}\b", regex::escape(name));
        if !name.is_empty() {
            rules.push((named.as_str(), "[THIS MACHINE]"));
        }
        rules.into_iter().map(|(re, with)| (regex::Regex::new(re).unwrap(), with.to_string())).collect()
    });
    let masked = crate::support::mask(result);
    rules.iter().fold(masked, |t, (re, with)| re.replace_all(&t, with.as_str()).into_owned())
}

/// The table of the namespaces in docs/reference/functions.md is the registry's, generated from
/// `opsbook fns --json` (`OPSBOOK_BLESS=1` writes it into that page), so a verb added, renamed or removed shows there
/// and no namespace is left out.
#[test]
fn the_functions_reference_lists_every_verb_of_the_registry() {
    let listed = verbs();
    let verbs: Vec<&serde_json::Value> = listed
        .iter()
        .filter(|f| !f["name"].as_str().unwrap_or_default().starts_with("get$"))
        .filter(|f| {
            !["to_string", "to_debug", "to_map", "print", "debug"].contains(&f["name"].as_str().unwrap_or_default())
        })
        .filter(|f| !f["effect"].is_null())
        .collect();
    let mut namespaces: Vec<&str> = Vec::new();
    for f in &verbs {
        let ns = f["namespace"].as_str().unwrap_or_default();
        if !namespaces.contains(&ns) {
            namespaces.push(ns);
        }
    }
    let names = |ns: &str, effect: &str| {
        let mut seen: Vec<String> = Vec::new();
        for f in verbs.iter().filter(|f| f["namespace"] == ns && f["effect"] == effect) {
            let name = format!("`{}`", f["name"].as_str().unwrap_or_default());
            if !seen.contains(&name) {
                seen.push(name);
            }
        }
        seen.join(", ")
    };
    let mut table = String::from("| namespace | reads | changes the host |\n|---|---|---|\n");
    for ns in namespaces {
        let shown = if ns.is_empty() { "(global)".to_string() } else { format!("`{ns}::`") };
        table.push_str(&format!("| {shown} | {} | {} |\n", names(ns, "reads"), names(ns, "changes")));
    }
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/reference/functions.md");
    let readme = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = ("<!-- the verbs: generated by tests/verbs.rs -->\n", "<!-- end of the verbs -->");
    let start = readme.find(begin).expect("docs/reference/functions.md has the verbs' markers") + begin.len();
    let stop = readme[start..].find(end).expect("docs/reference/functions.md ends the verbs' table") + start;
    if std::env::var_os("OPSBOOK_BLESS").is_some() {
        std::fs::write(&path, format!("{}{table}{}", &readme[..start], &readme[stop..])).unwrap();
        return;
    }
    assert_eq!(
        &readme[start..stop],
        table,
        "docs/reference/functions.md's verbs differ from the registry (OPSBOOK_BLESS=1 rewrites them)"
    );
}

/// Every verb's example, once each, in the order `opsbook fns` lists them.
fn distinct_examples() -> Vec<String> {
    let mut examples: Vec<String> = Vec::new();
    for f in verbs() {
        if let Some(example) = f["example"].as_str()
            && !examples.iter().any(|e| e == example)
        {
            examples.push(example.to_string());
        }
    }
    assert!(examples.len() > 100, "only {} examples were found", examples.len());
    examples
}

/// `seen` against tests/fixtures/verb-examples.txt, whole (`OPSBOOK_BLESS=1` writes it there).
fn compare_with_fixture(seen: &str) {
    let path = crate::support::repo_dir().join("tests/fixtures/verb-examples.txt");
    if std::env::var_os("OPSBOOK_BLESS").is_some() {
        std::fs::write(&path, seen).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let differing: Vec<String> =
        expected.lines().zip(seen.lines()).filter(|(e, s)| e != s).map(|(e, s)| where_differing(e, s)).collect();
    assert!(
        expected == seen,
        "the examples' results differ from {} (OPSBOOK_BLESS=1 rewrites it):\n{}\n({} lines expected, {} seen)",
        path.display(),
        differing.join("\n"),
        expected.lines().count(),
        seen.lines().count()
    );
}
