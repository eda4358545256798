//! The host's package manager as the `pkg::` verbs ask it: which one (`/etc/os-release`: apt
//! on Debian and Ubuntu, dnf on the RHEL family), the version of a package installed, the
//! versions its repositories offer, running its commands through the `Commands` world seam with
//! a timeout, and what it says of a failure put in words (`Failure`, `classify`). The verbs
//! themselves are registered by `pkg.rs` (questions), `pkg/install.rs`,
//! `pkg/repo.rs` and `pkg/key.rs`, which all build on this one.

use std::time::Duration;

use serde::Serialize;

use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use opsbook_base::config::keys;
use opsbook_world::Invocation;

/// A host's package manager.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Family {
    Apt,
    Dnf,
}

/// What `/etc/os-release` says.
#[derive(Debug, Clone, Default, Serialize)]
pub(crate) struct Os {
    pub id: String,
    pub version_id: String,
    pub name: String,
    pub like: Vec<String>,
    /// `apt`, `dnf`, or "" when neither is known for this system.
    pub family: String,
}

/// What a package manager said of a failure, in words: one `Display` for all of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Failure {
    /// The repository's signature is not made by the key its source names.
    Signature { source: String, said: String },
    /// The repository (or its key) cannot be fetched.
    Unreachable { url: String, said: String },
    /// No repository offers this version; `offered` is what they do offer.
    NoVersion { package: String, version: String, offered: Vec<String>, lister: String },
    /// No repository offers the package at all.
    NotOffered { package: String, said: String },
    /// Anything else: the command and the end of what it printed.
    Failed { command: String, code: i32, said: String },
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Signature { source, said } => write!(
                f,
                "the repository's signature does not match its key: {source} — {said}; the repository was not \
                 added and nothing installed\n  help: check the key's URL (repository_key) against the vendor's \
                 instructions"
            ),
            Failure::Unreachable { url, said } => write!(
                f,
                "the repository is unreachable: {url} — {said}; nothing installed\n  help: check the URL \
                 (repository, repository_key) and that this host reaches it (proxy: Acquire::http::Proxy)"
            ),
            Failure::NoVersion { package, version, offered, lister } => {
                let list = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
                write!(
                    f,
                    "{package} {version} is not in this host's repositories; nothing installed\n  \
                     `{lister}` lists: {list}\n  help: pin one of those (version), or none for the newest"
                )
            }
            Failure::NotOffered { package, said } => write!(
                f,
                "no repository of this host offers {package} ({said}); nothing installed\n  help: add the \
                 vendor's repository (pkg::add_repository), or name the package this host's repositories \
                 call it (package)"
            ),
            Failure::Failed { command, code, said } => write!(f, "`{command}` failed (exit status {code}): {said}"),
        }
    }
}

/// How a command ended: its exit status (-1 when a signal ended it) and what it printed.
pub(crate) struct Ran {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Ran {
    /// The last `n` lines it printed (stderr after stdout), for an error.
    pub(crate) fn tail(&self, n: usize) -> String {
        let text = format!("{}{}", self.stdout, self.stderr);
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(n)..].join("\n  ")
    }
}

/// Runs `argv` on the host with `stdin` and `timeout`: how it ended, or an error when it could
/// not run or did not finish in time. The sandbox refuses.
pub(crate) fn run_argv(cx: &Context, argv: &[String], stdin: Option<String>, timeout: Duration) -> VerbResult<Ran> {
    refuse_in_sandbox(cx)?;
    // apt and dpkg ask nothing, and keep a configuration file the operator (or opsbook) changed.
    let env = vec![("DEBIAN_FRONTEND".to_string(), "noninteractive".to_string())];
    let inv = Invocation { argv: argv.to_vec(), timeout, env, stdin };
    let done = cx.run_command(inv)?.map_err(fail)?;
    if done.timed_out {
        let limit = humantime::format_duration(timeout);
        return Err(fail(format!(
            "`{}` did not finish within {limit}\n  help: package.timeout (or tools.timeout for a question) sets how long it may take",
            shown(argv)
        )));
    }
    Ok(Ran { code: done.code.unwrap_or(-1), stdout: done.stdout, stderr: done.stderr })
}

/// A command line as a person would type it (a `sh -c` script shown as `sh -c …`).
pub(crate) fn shown(argv: &[String]) -> String {
    match argv {
        [sh, c, ..] if sh == "sh" && c == "-c" => "sh -c …".to_string(),
        _ => argv.join(" "),
    }
}

fn refuse_in_sandbox(cx: &Context) -> VerbResult<()> {
    if cx.world().sandbox {
        return Err(fail(
            "pkg:: is not available in the sandbox: it has no package manager of its own, and this machine's is not the sandbox's to change\n  help: run the runbook against a real host (without --sandbox)",
        ));
    }
    Ok(())
}

/// Runs a question (`tools.timeout`).
pub(crate) fn ask(cx: &Context, argv: &[&str]) -> VerbResult<Ran> {
    let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
    run_argv(cx, &argv, None, cx.config().duration(keys::TOOLS_TIMEOUT))
}

/// Package names as apt and rpm take them: letters, digits, `+ . _ -`, a letter or digit first.
pub(crate) fn valid_name(name: &str) -> VerbResult<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "+._-".contains(c));
    if ok { Ok(()) } else { Err(fail(format!("`{name}` is not a package name"))) }
}

pub(crate) fn valid_version(version: &str) -> VerbResult<()> {
    let ok = !version.is_empty() && version.chars().all(|c| c.is_ascii_alphanumeric() || "+.~:_-".contains(c));
    if ok { Ok(()) } else { Err(fail(format!("`{version}` is not a package version"))) }
}

/// `/etc/os-release` parsed: `KEY=value` lines, values optionally quoted.
pub(crate) fn parse_os_release(text: &str) -> Os {
    let mut os = Os::default();
    for line in text.lines() {
        let Some((key, value)) = line.split_once('=') else { continue };
        let value = value.trim().trim_matches('"').trim_matches('\'').to_string();
        match key.trim() {
            "ID" => os.id = value,
            "VERSION_ID" => os.version_id = value,
            "PRETTY_NAME" => os.name = value,
            "ID_LIKE" => os.like = value.split_whitespace().map(str::to_string).collect(),
            _ => {}
        }
    }
    let names: Vec<&str> = std::iter::once(os.id.as_str()).chain(os.like.iter().map(String::as_str)).collect();
    os.family = if names.iter().any(|n| ["debian", "ubuntu"].contains(n)) {
        "apt".into()
    } else if names.iter().any(|n| ["rhel", "fedora", "centos", "rocky", "almalinux", "amzn"].contains(n)) {
        "dnf".into()
    } else {
        String::new()
    };
    os
}

pub(crate) fn os(cx: &Context) -> VerbResult<Os> {
    refuse_in_sandbox(cx)?;
    let files = cx.world().files.clone();
    let read = cx.block_on(|| async move {
        match files.read("/etc/os-release").await? {
            Some(found) => Ok(Some(found)),
            None => files.read("/usr/lib/os-release").await,
        }
    })?;
    let (text, _) = read.map_err(fail)?.ok_or_else(|| fail("the host has no /etc/os-release"))?;
    Ok(parse_os_release(&text))
}

/// The host's package manager, or an error saying which systems `pkg::` knows.
pub(crate) fn family(cx: &Context) -> VerbResult<Family> {
    let os = os(cx)?;
    match os.family.as_str() {
        "apt" => Ok(Family::Apt),
        "dnf" => Ok(Family::Dnf),
        _ => Err(fail(format!(
            "pkg:: knows apt (Debian, Ubuntu) and dnf (RHEL, Fedora and their kin); this host is {} (ID={}, ID_LIKE={})",
            if os.name.is_empty() { "unnamed" } else { &os.name },
            os.id,
            os.like.join(" ")
        ))),
    }
}

/// A package's state: the version installed, and whether configuration files of a removed
/// one are left (apt's `rc`).
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct State {
    pub version: Option<String>,
    pub config_left: bool,
}

/// `dpkg-query -W -f '${db:Status-Abbrev}|${Version}'`'s answer: the second letter of the
/// status is the current state (`i` installed, `c` only its configuration files left).
pub(crate) fn parse_dpkg_state(out: &str) -> State {
    let (status, version) = out.trim().split_once('|').unwrap_or(("", ""));
    match status.chars().nth(1) {
        Some('i') => State { version: Some(version.to_string()), config_left: false },
        Some('c') => State { version: None, config_left: true },
        _ => State::default(),
    }
}

pub(crate) fn installed(cx: &Context, name: &str) -> VerbResult<State> {
    valid_name(name)?;
    match family(cx)? {
        Family::Apt => {
            let ran = ask(cx, &["dpkg-query", "-W", "-f=${db:Status-Abbrev}|${Version}", name])?;
            Ok(if ran.code == 0 { parse_dpkg_state(&ran.stdout) } else { State::default() })
        }
        Family::Dnf => {
            let ran = ask(cx, &["rpm", "-q", "--qf", "%{VERSION}-%{RELEASE}\\n", name])?;
            let version = ran.stdout.lines().next().unwrap_or_default().trim().to_string();
            Ok(State { version: (ran.code == 0 && !version.is_empty()).then_some(version), config_left: false })
        }
    }
}

/// The versions in `apt-cache madison` lines (`name | version | source`), in order, once each.
pub(crate) fn parse_madison(out: &str) -> Vec<String> {
    let mut versions: Vec<String> = Vec::new();
    for line in out.lines() {
        let fields: Vec<&str> = line.split('|').map(str::trim).collect();
        if fields.len() >= 3 && !versions.iter().any(|v| v == fields[1]) {
            versions.push(fields[1].to_string());
        }
    }
    versions
}

/// The versions in `dnf list --showduplicates` lines (`name.arch  version  repo`), newest last
/// as dnf prints them, so reversed.
pub(crate) fn parse_dnf_list(out: &str, name: &str) -> Vec<String> {
    let mut versions: Vec<String> = Vec::new();
    for line in out.lines() {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let ours = fields.first().is_some_and(|f| f.rsplit_once('.').is_some_and(|(n, _)| n == name));
        if ours && fields.len() >= 2 && !versions.iter().any(|v| v == fields[1]) {
            versions.push(fields[1].to_string());
        }
    }
    versions.reverse();
    versions
}

/// The command that lists a package's versions, as the error shows it.
pub(crate) fn lister(family: Family, name: &str) -> String {
    match family {
        Family::Apt => format!("apt-cache madison {name}"),
        Family::Dnf => format!("dnf list --showduplicates {name}"),
    }
}

pub(crate) fn available(cx: &Context, name: &str) -> VerbResult<Vec<String>> {
    valid_name(name)?;
    Ok(match family(cx)? {
        Family::Apt => parse_madison(&ask(cx, &["apt-cache", "madison", name])?.stdout),
        Family::Dnf => {
            let ran = ask(cx, &["dnf", "list", "-q", "--showduplicates", "--available", name])?;
            parse_dnf_list(&ran.stdout, name)
        }
    })
}

/// What apt or dnf said of a repository that failed, in words: a signature its key does not
/// verify, or an address that does not answer; `None` for anything else.
pub(crate) fn classify(said: &str) -> Option<Failure> {
    const SIGNATURE: [&str; 7] = [
        "OpenPGP signature verification failed",
        "is not signed",
        "NO_PUBKEY",
        "GPG error",
        "signatures couldn't be verified",
        "GPG check FAILED",
        "Public key for",
    ];
    if let Some(line) = said.lines().find(|l| SIGNATURE.iter().any(|s| l.contains(s))) {
        let line = line.trim().trim_start_matches("W: ").trim_start_matches("E: ");
        // apt: "OpenPGP signature verification failed: URL SUITE InRelease: WHY".
        let (source, why) = match line.split_once("failed: ") {
            Some((_, rest)) => rest.split_once(": ").map_or((rest, ""), |(s, w)| (s, w)),
            None => (line, ""),
        };
        let said = if why.is_empty() { line } else { why };
        return Some(Failure::Signature { source: source.to_string(), said: tidy(said) });
    }
    for sign in ["Failed to fetch ", "Cannot download repomd.xml", "Curl error"] {
        if let Some(line) = said.lines().find(|l| l.contains(sign)) {
            let line = line.trim().trim_start_matches("W: ").trim_start_matches("E: ");
            let rest = line.split_once(sign).map_or(line, |(_, r)| r);
            let url = rest.split_whitespace().find(|w| w.contains("://")).unwrap_or(rest).trim_end_matches(':');
            let why = rest.split_once("  ").map_or(rest, |(_, w)| w).trim();
            return Some(Failure::Unreachable { url: url.to_string(), said: tidy(why) });
        }
    }
    None
}

/// A quoted sentence without its closing punctuation (the error's own follows it).
pub(crate) fn tidy(said: &str) -> String {
    said.trim().trim_end_matches(['.', ':', ';']).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_release_names_the_package_manager() {
        let debian =
            "PRETTY_NAME=\"Debian GNU/Linux 13 (trixie)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"13\"\nID=debian\n";
        let os = parse_os_release(debian);
        assert_eq!((os.id.as_str(), os.version_id.as_str(), os.family.as_str()), ("debian", "13", "apt"));
        assert_eq!(os.name, "Debian GNU/Linux 13 (trixie)");
        assert_eq!(parse_os_release("ID=ubuntu\nID_LIKE=debian\n").family, "apt");
        assert_eq!(parse_os_release("ID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n").family, "dnf");
        assert_eq!(parse_os_release("ID=fedora\n").family, "dnf");
        assert_eq!(parse_os_release("ID=alpine\n").family, "");
    }

    #[test]
    fn dpkg_states_and_version_lists_read_back() {
        assert_eq!(parse_dpkg_state("ii |1.9.1"), State { version: Some("1.9.1".into()), config_left: false });
        assert_eq!(parse_dpkg_state("hi |1.9.1"), State { version: Some("1.9.1".into()), config_left: false });
        assert_eq!(parse_dpkg_state("rc |1.9.1"), State { version: None, config_left: true });
        assert_eq!(parse_dpkg_state("un |"), State::default());
        let madison = "  telegraf | 1.34.1-1 | https://repos.influxdata.com/debian stable/main amd64 Packages\n\
                       \x20 telegraf | 1.34.0-1 | https://repos.influxdata.com/debian stable/main amd64 Packages\n\
                       \x20 telegraf | 1.34.0-1 | http://mirror/debian stable/main amd64 Packages\n";
        assert_eq!(parse_madison(madison), ["1.34.1-1", "1.34.0-1"]);
        let dnf = "Available Packages\ntelegraf.x86_64   1.34.0-1   influxdata\ntelegraf.x86_64   1.34.1-1   influxdata\n\
                   telegraf-extra.x86_64   1.0-1   influxdata\n";
        assert_eq!(parse_dnf_list(dnf, "telegraf"), ["1.34.1-1", "1.34.0-1"]);
    }

    #[test]
    fn names_and_versions_are_checked() {
        assert!(valid_name("influxdb2").is_ok() && valid_name("g++").is_ok());
        assert!(valid_name("-rf").is_err() && valid_name("a b").is_err() && valid_name("").is_err());
        assert!(valid_version("1:2.7.11-1~deb13").is_ok() && valid_version("1 2").is_err());
    }

    #[test]
    fn failures_read_as_sentences() {
        let f = Failure::NoVersion {
            package: "alloy".into(),
            version: "9.9.9".into(),
            offered: vec!["1.9.1".into(), "1.8.3".into()],
            lister: "apt-cache madison alloy".into(),
        };
        assert_eq!(
            f.to_string(),
            "alloy 9.9.9 is not in this host's repositories; nothing installed\n  \
             `apt-cache madison alloy` lists: 1.9.1, 1.8.3\n  help: pin one of those (version), or none for the newest"
        );
        let ran = Ran { code: 100, stdout: "a\n\nb\n".into(), stderr: "c\n".into() };
        assert_eq!(ran.tail(2), "b\n  c");
    }
}
