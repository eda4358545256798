//! `pkg::install` and `pkg::remove`: a package installed (its newest version, or a pinned
//! one, upgraded or downgraded to it) or removed (purged with its configuration files), in the
//! `pkg` namespace beside the questions of `pkg.rs`. Installing waits for another apt's
//! lock, keeps a configuration file the operator (or opsbook) changed, and says in words why
//! it failed: a version the repositories lack (listing those they offer), a package none
//! offers, a repository that does not answer or whose signature does not verify.

use rhai::{Map, Module, NativeCallContext};
use serde::Serialize;

use super::manager::{
    Failure, Family, Ran, available, classify, family, installed, lister, run_argv, valid_name, valid_version,
};
use crate::register;
use crate::verbs::context::{Context, context};
use crate::verbs::file::Changed;
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::{record, text};
use opsbook_base::config::keys;
use opsbook_base::report::Level;

/// Adds `install` and `remove` to the `pkg` module.
pub(crate) fn add(m: &mut Module) {
    register!(
        m,
        "install",
        Changes,
        ["name: &str", "Map"],
        "/// Installs the package's newest version when it is not installed. Returns\n\
         /// `#{changed, version, previous}`.",
        "pkg::install(\"alloy\")",
        |call: NativeCallContext, name: &str| install(&context(&call), name, &Map::new())
    );
    register!(
        m,
        "install",
        Changes,
        ["name: &str", "options: Map", "Map"],
        "/// With `#{version: \"1.9.1\"}`: that version (installed, upgraded or downgraded to it); a\n\
         /// version no repository offers is an error listing the ones they do. `update: true`: the\n\
         /// indexes of all the host's repositories are updated first when something is to install\n\
         /// (`apt-get update`, `dnf makecache`), as for a package of the distribution itself.",
        "pkg::install(\"telegraf\", #{ version: \"1.34.1-1\" })",
        |call: NativeCallContext, name: &str, options: Map| install(&context(&call), name, &options)
    );
    register!(
        m,
        "remove",
        Changes,
        ["name: &str", "Map"],
        "/// Removes the package when it is installed (its configuration files stay, as apt leaves\n\
         /// them). Returns `#{changed}`. Never touches the repository it came from.",
        "pkg::remove(\"alloy\")",
        |call: NativeCallContext, name: &str| remove(&context(&call), name, &Map::new())
    );
    register!(
        m,
        "remove",
        Changes,
        ["name: &str", "options: Map", "Map"],
        "/// With `#{purge: true}`: its configuration files too (`apt-get purge`).",
        "pkg::remove(\"alloy\", #{ purge: true })",
        |call: NativeCallContext, name: &str, options: Map| remove(&context(&call), name, &options)
    );
}

/// What an install came to, as scripts see it.
#[derive(Serialize)]
struct Installed {
    changed: bool,
    /// The version installed now ("" under `--dry-run` when it was not installed).
    version: String,
    /// The version before ("" when it was not installed).
    previous: String,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

fn pinned(options: &Map, call: &str, known: &[&str]) -> VerbResult<()> {
    for k in options.keys() {
        if !known.contains(&k.as_str()) {
            return Err(fail(format!("{call}: unknown option `{k}` ({})", known.join(", "))));
        }
    }
    Ok(())
}

fn install(cx: &Context, name: &str, options: &Map) -> VerbResult<Map> {
    pinned(options, "pkg::install", &["version", "update"])?;
    let update = match options.get("update") {
        Some(u) => u.as_bool().map_err(|_| fail("pkg::install: `update` must be true or false"))?,
        None => false,
    };
    valid_name(name)?;
    let version = options.get("version").map(text).filter(|v| !v.is_empty());
    if let Some(v) = &version {
        valid_version(v)?;
    }
    let family = family(cx)?;
    let previous = installed(cx, name)?.version.unwrap_or_default();
    let satisfied = !previous.is_empty() && version.as_ref().is_none_or(|v| *v == previous);
    if satisfied {
        return record(&Installed { changed: false, version: previous.clone(), previous, dry_run: false });
    }
    let argv = install_argv(family, name, version.as_deref());
    let what = match (&version, previous.as_str()) {
        (Some(v), "") => format!("install {name} {v}"),
        (Some(v), old) => format!("change {name} {old} → {v}"),
        (None, _) => format!("install {name} (the newest version its repositories offer)"),
    };
    let first = if update { ", the indexes of the host's repositories updated first" } else { "" };
    if cx.plan(&format!("{what}{first}: {}", argv.join(" "))) {
        return record(&Installed { changed: true, version: String::new(), previous, dry_run: true });
    }
    if update {
        update_all(cx, family)?;
    }
    let ran = run_argv(cx, &argv, None, cx.config().duration(keys::PACKAGE_TIMEOUT))?;
    if ran.code != 0 {
        return Err(fail(install_failure(cx, family, name, version.as_deref(), &argv, &ran)?.to_string()));
    }
    let now = installed(cx, name)?.version.unwrap_or_default();
    if now.is_empty() {
        return Err(fail(format!("`{}` succeeded but {name} is not installed: {}", argv.join(" "), ran.tail(6))));
    }
    let from = if previous.is_empty() { String::new() } else { format!(" (was {previous})") };
    cx.log(Level::Info, &format!("changed package {name}: installed {now}{from}"));
    record(&Installed { changed: true, version: now, previous, dry_run: false })
}

/// Updates the indexes of every repository of the host (a source that fails is apt's warning,
/// as in `apt-get update` by hand).
fn update_all(cx: &Context, family: Family) -> VerbResult<()> {
    let argv: Vec<String> = match family {
        Family::Apt => {
            ["apt-get", "update", "-q", "-o", "DPkg::Lock::Timeout=120"].iter().map(|s| s.to_string()).collect()
        }
        Family::Dnf => ["dnf", "makecache", "-q"].iter().map(|s| s.to_string()).collect(),
    };
    let ran = run_argv(cx, &argv, None, cx.config().duration(keys::PACKAGE_TIMEOUT))?;
    if ran.code != 0 {
        return Err(fail(Failure::Failed { command: argv.join(" "), code: ran.code, said: ran.tail(8) }.to_string()));
    }
    cx.log(Level::Info, "updated the indexes of the host's repositories");
    Ok(())
}

fn install_argv(family: Family, name: &str, version: Option<&str>) -> Vec<String> {
    let mut argv: Vec<String> = match family {
        // A changed configuration file is kept (the operator's, or opsbook's own); a pinned
        // version may be older than the installed one; apt waits for another apt's lock.
        Family::Apt => [
            "apt-get",
            "install",
            "-y",
            "-q",
            "--no-install-recommends",
            "-o",
            "Dpkg::Options::=--force-confdef",
            "-o",
            "Dpkg::Options::=--force-confold",
            "-o",
            "DPkg::Lock::Timeout=120",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect(),
        Family::Dnf => ["dnf", "install", "-y", "-q"].iter().map(|s| s.to_string()).collect(),
    };
    match (family, version) {
        (Family::Apt, Some(v)) => argv.extend(["--allow-downgrades".into(), format!("{name}={v}")]),
        (Family::Dnf, Some(v)) => argv.push(format!("{name}-{v}")),
        (_, None) => argv.push(name.to_string()),
    }
    argv
}

/// What an install's failure was, in words.
fn install_failure(
    cx: &Context,
    family: Family,
    name: &str,
    version: Option<&str>,
    argv: &[String],
    ran: &Ran,
) -> VerbResult<Failure> {
    let said = format!("{}\n{}", ran.stdout, ran.stderr);
    if let Some(failure) = classify(&said) {
        return Ok(failure);
    }
    let missing_version = said.contains("was not found") || (family == Family::Dnf && said.contains("No match"));
    if let Some(v) = version.filter(|_| missing_version) {
        let offered = available(cx, name)?;
        if !offered.iter().any(|o| o == v) {
            let (package, version, lister) = (name.to_string(), v.to_string(), lister(family, name));
            return Ok(Failure::NoVersion { package, version, offered, lister });
        }
    }
    for sign in ["Unable to locate package", "has no installation candidate", "No match for argument"] {
        if let Some(line) = said.lines().find(|l| l.contains(sign)) {
            let said = line.trim().trim_start_matches("E: ").trim_start_matches("Error: ").to_string();
            return Ok(Failure::NotOffered { package: name.to_string(), said });
        }
    }
    Ok(Failure::Failed { command: argv.join(" "), code: ran.code, said: ran.tail(8) })
}

fn remove(cx: &Context, name: &str, options: &Map) -> VerbResult<Map> {
    pinned(options, "pkg::remove", &["purge"])?;
    let purge = match options.get("purge") {
        Some(p) => p.as_bool().map_err(|_| fail("pkg::remove: `purge` must be true or false"))?,
        None => false,
    };
    let family = family(cx)?;
    let state = installed(cx, name)?;
    if state.version.is_none() && !(purge && state.config_left) {
        return record(&Changed { changed: false, dry_run: false });
    }
    let argv: Vec<String> = match family {
        Family::Apt => {
            let verb = if purge { "purge" } else { "remove" };
            ["apt-get", verb, "-y", "-q", "-o", "DPkg::Lock::Timeout=120", name].iter().map(|s| s.to_string()).collect()
        }
        Family::Dnf => ["dnf", "remove", "-y", "-q", name].iter().map(|s| s.to_string()).collect(),
    };
    let what = if purge { "purge" } else { "remove" };
    if cx.plan(&format!("{what} the package {name}: {}", argv.join(" "))) {
        return record(&Changed { changed: true, dry_run: true });
    }
    let ran = run_argv(cx, &argv, None, cx.config().duration(keys::PACKAGE_TIMEOUT))?;
    if ran.code != 0 {
        return Err(fail(Failure::Failed { command: argv.join(" "), code: ran.code, said: ran.tail(8) }.to_string()));
    }
    let was = state.version.map(|v| format!(" {v}")).unwrap_or_default();
    let done = if purge { "purged (with its configuration files)" } else { "removed" };
    cx.log(Level::Info, &format!("changed package {name}{was}: {done}"));
    record(&Changed { changed: true, dry_run: false })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn install_command_lines_pin_versions_as_each_manager_does() {
        let apt = install_argv(Family::Apt, "alloy", Some("1.9.1"));
        assert_eq!(apt[..2], ["apt-get".to_string(), "install".to_string()]);
        assert_eq!(apt[apt.len() - 2..], ["--allow-downgrades".to_string(), "alloy=1.9.1".to_string()]);
        assert_eq!(install_argv(Family::Dnf, "alloy", Some("1.9.1")), ["dnf", "install", "-y", "-q", "alloy-1.9.1"]);
        assert_eq!(install_argv(Family::Dnf, "alloy", None).last().map(String::as_str), Some("alloy"));
    }
}
