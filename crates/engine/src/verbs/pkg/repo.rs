//! `pkg::add_repository`, `refresh` and `remove_repository`: a vendor's repository on a
//! host, as the vendor documents adding it. On apt: its key in `/etc/apt/keyrings/NAME.gpg`
//! (`pkg/key.rs`) and its sources line with `signed-by=` in
//! `/etc/apt/sources.list.d/NAME.list`, then `apt-get update` of that source only (the host's
//! other sources are neither fetched nor judged). On dnf: `/etc/yum.repos.d/NAME.repo` with
//! `gpgcheck=1` and `gpgkey=`, then `dnf makecache` of that repository only. A repository whose
//! update fails — a signature its key does not verify, an address that does not answer — is
//! taken off again as it was before (a broken source would fail every later update on the
//! host) and the error says why in words.

use rhai::{Map, Module, NativeCallContext};
use serde::Serialize;

use super::key::{self, KEYRINGS};
use super::manager::{Failure, Family, classify, family, run_argv};
use crate::register;
use crate::verbs::context::{Context, context};
use crate::verbs::file::{Changed, WriteOptions, read_file, remove_path, stat, write_with};
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::{record, text};
use opsbook_base::config::keys;
use opsbook_base::report::Level;
use opsbook_world::files::Wanted;

/// Adds the repository verbs to the `package` module.
pub(crate) fn add(m: &mut Module) {
    register!(
        m,
        "add_repository",
        Changes,
        ["name: &str", "repository: Map", "Map"],
        "/// Adds the vendor repository `name` as the vendor documents it: `#{url, key}` — on apt `url`\n\
         /// is its sources line without `deb` (`\"https://apt.grafana.com stable main\"`) and `key` the\n\
         /// URL of its signing key, fetched on the host into /etc/apt/keyrings/NAME.gpg (dearmored)\n\
         /// and named by `signed-by=` in /etc/apt/sources.list.d/NAME.list; on dnf `url` is its\n\
         /// `baseurl` and `key` its `gpgkey` in /etc/yum.repos.d/NAME.repo. Then updates that\n\
         /// repository's index only. Nothing to change (same source, keyring present): nothing\n\
         /// fetched. A signature the key does not verify, or an address that does not answer, is an\n\
         /// error saying so, and the repository is taken off again. Returns `#{changed, files}`.",
        "pkg::add_repository(\"grafana\", #{ url: \"https://apt.grafana.com stable main\", key: \"https://apt.grafana.com/gpg.key\" })",
        |call: NativeCallContext, name: &str, repository: Map| add_repository(&context(&call), name, &repository)
    );
    register!(
        m,
        "refresh",
        Changes,
        ["name: &str", "Map"],
        "/// Updates the index of the repository `name` only (`apt-get update` of its source file,\n\
         /// `dnf makecache` of that repository), so a following install sees its newest versions.\n\
         /// Returns `#{changed}`; a failure is an error in words, as for `add_repository`.",
        "pkg::refresh(\"grafana\")",
        |call: NativeCallContext, name: &str| refresh(&context(&call), name)
    );
    register!(
        m,
        "remove_repository",
        Changes,
        ["name: &str", "Map"],
        "/// Takes the repository `name` off: its source (or .repo) file and, on apt, its keyring.\n\
         /// Packages installed from it stay. Returns `#{changed}`.",
        "pkg::remove_repository(\"grafana\")",
        |call: NativeCallContext, name: &str| remove_repository(&context(&call), name)
    );
}

/// A repository as `add_repository` is given it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repository {
    pub name: String,
    /// apt: the address, suite and components of its sources line; dnf: the baseurl alone.
    pub url: String,
    pub suite: String,
    pub components: Vec<String>,
    pub key: String,
}

impl Repository {
    pub(crate) fn parse(name: &str, given: &Map, family: Family) -> VerbResult<Repository> {
        valid_name(name)?;
        for k in given.keys() {
            if !["url", "key"].contains(&k.as_str()) {
                return Err(fail(format!("pkg::add_repository: unknown key `{k}` (url, key)")));
            }
        }
        let get = |k: &str| given.get(k).map(text).unwrap_or_default().trim().to_string();
        let (line, key) = (get("url"), get("key"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let address = |w: &str| w.starts_with("http://") || w.starts_with("https://") || w.starts_with("file:/");
        if words.first().is_none_or(|w| !address(w)) {
            return Err(fail(format!(
                "pkg::add_repository({name}): `url` must begin with the repository's http(s):// address, not `{line}`"
            )));
        }
        if key.is_empty() || !address(&key) {
            return Err(fail(format!(
                "pkg::add_repository({name}): `key` must be the http(s):// address of the repository's signing key (a repository is never added unsigned)"
            )));
        }
        let repo = Repository {
            name: name.to_string(),
            url: words[0].to_string(),
            suite: words.get(1).map(|s| s.to_string()).unwrap_or_default(),
            components: words.iter().skip(2).map(|s| s.to_string()).collect(),
            key,
        };
        match family {
            Family::Apt if repo.suite.is_empty() => Err(fail(format!(
                "pkg::add_repository({name}): on apt `url` is the sources line without `deb`: URL SUITE [COMPONENT…] (e.g. https://apt.grafana.com stable main), not `{line}`"
            ))),
            Family::Dnf if words.len() > 1 => Err(fail(format!(
                "pkg::add_repository({name}): on dnf `url` is the repository's baseurl alone, not `{line}`"
            ))),
            _ => Ok(repo),
        }
    }

    /// `deb [signed-by=KEYRING] URL SUITE COMPONENTS…` and where it came from.
    pub(crate) fn apt_source(&self) -> String {
        let mut line = format!("deb [signed-by={}] {} {}", keyring(&self.name), self.url, self.suite);
        for c in &self.components {
            line.push(' ');
            line.push_str(c);
        }
        format!("# {}: added by opsbook (pkg::add_repository), key from {}\n{line}\n", self.name, self.key)
    }

    /// The `.repo` file as the vendors write theirs.
    pub(crate) fn dnf_repo(&self) -> String {
        format!(
            "# {name}: added by opsbook (pkg::add_repository)\n[{name}]\nname={name}\nbaseurl={}\nenabled=1\ngpgcheck=1\ngpgkey={}\n",
            self.url,
            self.key,
            name = self.name
        )
    }
}

/// Repository names become file names: letters, digits, `. _ -`.
fn valid_name(name: &str) -> VerbResult<()> {
    let ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c));
    if ok { Ok(()) } else { Err(fail(format!("`{name}` is not a repository name (letters, digits, `.`, `_`, `-`)"))) }
}

fn keyring(name: &str) -> String {
    format!("{KEYRINGS}/{name}.gpg")
}

fn source_path(family: Family, name: &str) -> String {
    match family {
        Family::Apt => format!("/etc/apt/sources.list.d/{name}.list"),
        Family::Dnf => format!("/etc/yum.repos.d/{name}.repo"),
    }
}

#[derive(Serialize)]
struct Added {
    changed: bool,
    /// The files that make the repository on the host.
    files: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

/// What was there before a change, to put back when the repository's update fails.
struct Before {
    source: Option<String>,
    keyring: Option<Option<Vec<u8>>>,
}

fn add_repository(cx: &Context, name: &str, given: &Map) -> VerbResult<Map> {
    let family = family(cx)?;
    let repo = Repository::parse(name, given, family)?;
    let source = source_path(family, name);
    let (wanted, mut files) = match family {
        Family::Apt => (repo.apt_source(), vec![keyring(name), source.clone()]),
        Family::Dnf => (repo.dnf_repo(), vec![source.clone()]),
    };
    let old = read_file(cx, &source)?.map(|(t, _)| t);
    let key_present = family == Family::Dnf || stat(cx, &keyring(name))?.is_some();
    if old.as_deref() == Some(wanted.as_str()) && key_present {
        return record(&Added { changed: false, files, dry_run: false });
    }
    let words = format!("{} {} {}", repo.url, repo.suite, repo.components.join(" "));
    let what = format!("add the repository {name} ({}, its key from {})", words.trim(), repo.key);
    if cx.plan(&format!("{what}: {}, then update its index", files.join(", "))) {
        return record(&Added { changed: true, files, dry_run: true });
    }
    let mut before = Before { source: old, keyring: None };
    if family == Family::Apt {
        let key = key::fetch(cx, &repo.key)?;
        let existing = key::read(cx, &keyring(name))?;
        if existing.as_deref() != Some(key.as_slice()) {
            key::write(cx, &keyring(name), &key)?;
            cx.log(Level::Info, &format!("changed {}: key from {}", keyring(name), repo.key));
            before.keyring = Some(existing);
        }
    }
    let options =
        WriteOptions { wanted: Wanted { mode: Some(0o644), ..Wanted::default() }, backup: false, secrets: vec![] };
    write_with(cx, &source, &wanted, &options)?;
    if let Err(e) = update(cx, family, name) {
        put_back(cx, family, name, before)?;
        return Err(e);
    }
    files.dedup();
    record(&Added { changed: true, files, dry_run: false })
}

/// Restores the source file and keyring as they were before a failed change.
fn put_back(cx: &Context, family: Family, name: &str, before: Before) -> VerbResult<()> {
    let source = source_path(family, name);
    match before.source {
        Some(text) => {
            let options = WriteOptions { wanted: Wanted::default(), backup: false, secrets: vec![] };
            write_with(cx, &source, &text, &options)?;
        }
        None => {
            remove_path(cx, &source, false)?;
        }
    }
    match before.keyring {
        Some(Some(key)) => key::write(cx, &keyring(name), &key)?,
        Some(None) => {
            remove_path(cx, &keyring(name), false)?;
        }
        None => {}
    }
    cx.log(Level::Warn, &format!("the repository {name} was taken off again: its update failed"));
    Ok(())
}

fn refresh(cx: &Context, name: &str) -> VerbResult<Map> {
    valid_name(name)?;
    let family = family(cx)?;
    let source = source_path(family, name);
    if stat(cx, &source)?.is_none() {
        return Err(fail(format!(
            "pkg::refresh: there is no repository {name} on this host ({source})\n  help: pkg::add_repository(\"{name}\", …) first"
        )));
    }
    if cx.plan(&format!("update the index of the repository {name}")) {
        return record(&Changed { changed: true, dry_run: true });
    }
    update(cx, family, name)?;
    record(&Changed { changed: true, dry_run: false })
}

/// Updates the index of one repository; its failure in words.
fn update(cx: &Context, family: Family, name: &str) -> VerbResult<()> {
    let source = source_path(family, name);
    let argv: Vec<String> = match family {
        // Only this source: its own file as the source list, no sources.list.d, and the other
        // sources' lists kept. Error-Mode=any makes a failed fetch an error, not a warning.
        Family::Apt => vec![
            "apt-get".into(),
            "update".into(),
            "-q".into(),
            "-o".into(),
            "APT::Update::Error-Mode=any".into(),
            "-o".into(),
            format!("Dir::Etc::sourcelist={source}"),
            "-o".into(),
            "Dir::Etc::sourceparts=-".into(),
            "-o".into(),
            "APT::Get::List-Cleanup=0".into(),
        ],
        Family::Dnf => {
            vec![
                "dnf".into(),
                "makecache".into(),
                "-q".into(),
                "--disablerepo=*".into(),
                format!("--enablerepo={name}"),
            ]
        }
    };
    let ran = run_argv(cx, &argv, None, cx.config().duration(keys::PACKAGE_TIMEOUT))?;
    let said = format!("{}\n{}", ran.stdout, ran.stderr);
    if let Some(failure) = classify(&said) {
        return Err(fail(failure.to_string()));
    }
    if ran.code != 0 {
        let command = argv.join(" ");
        return Err(fail(Failure::Failed { command, code: ran.code, said: ran.tail(8) }.to_string()));
    }
    cx.log(Level::Info, &format!("updated the index of the repository {name}"));
    Ok(())
}

fn remove_repository(cx: &Context, name: &str) -> VerbResult<Map> {
    valid_name(name)?;
    let family = family(cx)?;
    let mut changed = remove_path(cx, &source_path(family, name), false)?;
    if family == Family::Apt {
        let key = remove_path(cx, &keyring(name), false)?;
        changed = Changed { changed: changed.changed || key.changed, dry_run: changed.dry_run || key.dry_run };
    }
    record(&changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn given(url: &str, key: &str) -> Map {
        let mut m = Map::new();
        m.insert("url".into(), url.into());
        m.insert("key".into(), key.into());
        m
    }

    #[test]
    fn a_vendor_repository_reads_as_the_vendor_documents_it() {
        let g = given("https://apt.grafana.com stable main", "https://apt.grafana.com/gpg.key");
        let repo = Repository::parse("grafana", &g, Family::Apt).unwrap();
        assert_eq!(
            repo.apt_source(),
            "# grafana: added by opsbook (pkg::add_repository), key from https://apt.grafana.com/gpg.key\n\
             deb [signed-by=/etc/apt/keyrings/grafana.gpg] https://apt.grafana.com stable main\n"
        );
        let i = given(
            "https://repos.influxdata.com/stable/$basearch/main",
            "https://repos.influxdata.com/influxdata-archive.key",
        );
        assert_eq!(
            Repository::parse("influxdata", &i, Family::Dnf).unwrap().dnf_repo(),
            "# influxdata: added by opsbook (pkg::add_repository)\n[influxdata]\nname=influxdata\n\
             baseurl=https://repos.influxdata.com/stable/$basearch/main\nenabled=1\ngpgcheck=1\n\
             gpgkey=https://repos.influxdata.com/influxdata-archive.key\n"
        );
        let bad =
            |url: &str, key: &str, f: Family| Repository::parse("x", &given(url, key), f).unwrap_err().to_string();
        assert!(bad("https://apt.grafana.com", "https://k", Family::Apt).contains("URL SUITE [COMPONENT…]"));
        assert!(bad("deb https://a stable main", "https://k", Family::Apt).contains("must begin with"));
        assert!(bad("https://a stable main", "", Family::Apt).contains("never added unsigned"));
        assert!(bad("https://a stable", "https://k", Family::Dnf).contains("baseurl alone"));
        assert!(Repository::parse("../x", &g, Family::Apt).is_err());
    }

    #[test]
    fn what_apt_says_of_a_failed_update_reads_as_words() {
        let sqv = "W: OpenPGP signature verification failed: http://10.0.0.1:8080/grafana stable InRelease: \
                   Sub-process /usr/bin/sqv returned an error code (1), error message is: Missing key 3F54, which is needed to verify signature.\n\
                   E: The repository 'http://10.0.0.1:8080/grafana stable InRelease' is not signed.\n";
        assert_eq!(
            classify(sqv),
            Some(Failure::Signature {
                source: "http://10.0.0.1:8080/grafana stable InRelease".into(),
                said: "Sub-process /usr/bin/sqv returned an error code (1), error message is: Missing key 3F54, which is needed to verify signature".into(),
            })
        );
        let down = "Err:1 http://127.0.0.1:9/repo stable InRelease\n  Could not connect to 127.0.0.1:9\n\
                    E: Failed to fetch http://127.0.0.1:9/repo/dists/stable/InRelease  Unable to connect to 127.0.0.1:9:\n";
        assert_eq!(
            classify(down),
            Some(Failure::Unreachable {
                url: "http://127.0.0.1:9/repo/dists/stable/InRelease".into(),
                said: "Unable to connect to 127.0.0.1:9".into(),
            })
        );
        assert_eq!(classify("Reading package lists...\n"), None);
    }
}
