//! Every verb's own example runs: `opsbook fns --json` lists each host function with its
//! effect and an example call (declared where the verb is registered); each example is run in
//! the sandbox under `--dry-run` (changing verbs plan instead of acting), inside one runbook
//! that catches and names every example that throws.

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

#[test]
fn every_example_runs_in_the_sandbox() {
    // One check per example, named by it: passed when it ran, failed with what it threw.
    let mut source = String::from("//! Runs every verb's example.\n");
    for f in verbs() {
        let Some(example) = f["example"].as_str() else { continue };
        let name = serde_json::to_string(example).unwrap();
        source.push_str(&format!(
            "try {{ let value = {example}; check({name}, true); }} catch (e) {{ check({name}, false, e); }}\n"
        ));
    }
    let report = Test::new()
        .runbook("examples", &source)
        .args(["run", "examples", "--sandbox", "--dry-run", "--format", "json"])
        .run()
        .json();
    let checks = report["checks"].as_array().expect("the report has checks").clone();
    assert!(checks.len() > 100, "only {} examples were found", checks.len());
    // What the sandbox does not simulate is refused in words, never acted on this machine:
    // accounts and the firewall (changed on real hosts in the lifecycle tests), containers
    // (its servers run natively; real podman in the container tests) and packages (installed
    // on Debian 13 hosts in the real-hosts tests); a verb that would run a program here (`sh`
    // for WireGuard) is refused too.
    let unsimulated = |detail: &str| {
        detail.contains("is not available in the sandbox")
            || detail.contains("the sandbox runs its servers natively")
            || detail.contains("the sandbox runs no program on this machine")
    };
    let failed: Vec<&serde_json::Value> = checks.iter().filter(|c| c["outcome"] == "fail").collect();
    let unexpected: Vec<String> = failed
        .iter()
        .filter(|c| !unsimulated(c["detail"].as_str().unwrap_or_default()))
        .map(|c| format!("{} threw: {}", c["name"], c["detail"]))
        .collect();
    assert_eq!(unexpected, Vec::<String>::new(), "examples that threw");
    let refused: Vec<&str> = failed.iter().map(|c| c["name"].as_str().unwrap_or_default()).collect();
    assert_eq!(
        refused,
        [
            "account::ensure_group(\"opsbook-demo\")",
            "account::ensure_user(\"opsbook-demo\")",
            "account::ensure_user(\"alloy\", #{ group: \"alloy\", home: \"/var/lib/alloy\", groups: [\"systemd-journal\"] })",
            "container::inspect(container::of_unit(config.metrics_db.unit) ?? \"influxdb\")",
            "container::logs(\"influxdb\")",
            "container::logs(\"influxdb\", #{ tail: 20, since: \"10m\" })",
            "container::stats(\"influxdb\")",
            "container::top(\"influxdb\")",
            "firewall::admit(8086, [\"10.0.0.0/24\"])",
            "firewall::remove_table()",
            "firewall::revoke(8086)",
            "host::wireguard(\"wg0\")",
            "pkg::add_repository(\"grafana\", #{ url: \"https://apt.grafana.com stable main\", key: \"https://apt.grafana.com/gpg.key\" })",
            "pkg::available(\"telegraf\")",
            "pkg::install(\"alloy\")",
            "pkg::install(\"telegraf\", #{ version: \"1.34.1-1\" })",
            "pkg::os().family",
            "pkg::refresh(\"grafana\")",
            "pkg::remove(\"alloy\")",
            "pkg::remove(\"alloy\", #{ purge: true })",
            "pkg::remove_repository(\"grafana\")",
            "pkg::version(\"alloy\")",
        ],
        "the examples the sandbox refuses"
    );
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
