//! `components.toml`: the components an operator adds to the stack's four, one `[[component]]`
//! each, read from beside each runbook folder on the search path (where its `stdlib/` and
//! `templates/` are). An added component brings its template and one stdlib module of its
//! own, named by `module`, with the functions the table names for the built-in ones:
//! `verify(options)`, `ready(component)`, `serving(changed)`, `evidence(changed, options)`,
//! and `set_up(component, options)` when `set_up = true`.
//!
//! ```toml
//! [[component]]
//! name = "web"                      # opsbook's name: HOST:web, config.roles, reports
//! alias = "static-site"             # optional: another name operators use
//! label = "web server"              # how reports name it (default: the name)
//! description = "static web server" # its unit's Description
//! tier = "server"                   # server: starts before the clients, stops after them
//! template = "web/index.html.j2"    # templates/ beside the runbook folder
//! port = 8080                       # its address's port (web.url); 0 or absent: none
//! module = "web"                    # stdlib/web.rhai
//!
//! [component.settings]              # the defaults of web.unit, .exec, .config, …
//! unit = "web.service"
//! exec = "/usr/bin/python3 -m http.server {port} --directory {data_dir}"
//! config = "/var/lib/web/index.html"
//! data_dir = "/var/lib/web"
//! account = "web"
//! package = "python3"
//! ```
//!
//! A malformed file, an unknown key, or a name the table already has is an error naming the
//! file, line and column; nothing of the file is used then.

use std::path::Path;

use serde::Deserialize;
use toml::Spanned;

use super::built_in::all_names;
use super::row::{Behaviour, Component, Reload, Repository, Settings, Tier};
use crate::diagnostic::Diagnostic;
use crate::error::Error;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    component: Vec<Entry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Entry {
    name: Spanned<String>,
    alias: Option<Spanned<String>>,
    label: Option<String>,
    description: String,
    tier: Tier,
    template: String,
    #[serde(default)]
    port: u16,
    #[serde(default = "restart")]
    reload: Reload,
    module: String,
    #[serde(default)]
    set_up: bool,
    #[serde(default)]
    reads_journal: bool,
    /// Its offline check of a file as an argv (`{config}`: the file); empty: none.
    #[serde(default)]
    check: Vec<String>,
    #[serde(default)]
    account_groups: Vec<String>,
    settings: EntrySettings,
    repository: Option<EntryRepository>,
}

fn restart() -> Reload {
    Reload::Restart
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntrySettings {
    unit: String,
    exec: String,
    config: String,
    account: String,
    package: String,
    #[serde(default)]
    data_dir: String,
    #[serde(default)]
    address: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EntryRepository {
    name: String,
    vendor: String,
    #[serde(default)]
    apt: String,
    #[serde(default)]
    apt_key: String,
    #[serde(default)]
    dnf: String,
    #[serde(default)]
    dnf_key: String,
}

/// The components the files that exist among `candidates` add, in order (a missing file adds
/// none). Each is checked against the built-in ones and those before it.
pub fn read(candidates: &[impl AsRef<Path>]) -> Result<Vec<Component>, Error> {
    let mut taken: Vec<String> = all_names().map(str::to_string).collect();
    let mut added = Vec::new();
    let mut read_already = Vec::new();
    for path in candidates.iter().map(AsRef::as_ref) {
        match std::fs::canonicalize(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // One file reached by two candidates (`--runbooks ./runbooks` beside the working
            // directory's) is read once, not taken for a second table naming the same components.
            Ok(real) if read_already.contains(&real) => continue,
            Ok(real) => read_already.push(real),
            Err(_) => {}
        }
        // Bounded and of a regular file: a FIFO or `/dev/zero` is refused naming it.
        let text = crate::input::read_text_or_explain(path, crate::input::Kind::COMPONENTS).map_err(Error::Usage)?;
        let shown = path.display().to_string();
        let at = |message: String, offset: usize| Error::located(Diagnostic::at_offset(message, &shown, &text, offset));
        let file: File =
            toml::from_str(&text).map_err(|e| at(e.message().to_string(), e.span().map_or(0, |s| s.start)))?;
        for entry in file.component {
            for name in std::iter::once(&entry.name).chain(entry.alias.as_ref()) {
                let word = name.get_ref();
                if !is_a_name(word) {
                    return Err(at(
                        format!("`{word}` is not a component name: lower-case letters, digits and `-`"),
                        name.span().start,
                    ));
                }
                if taken.iter().any(|t| t == word || t.replace('-', "_") == word.replace('-', "_")) {
                    return Err(at(format!("a component named `{word}` is already in the table"), name.span().start));
                }
                taken.push(word.clone());
            }
            if entry.reload == Reload::Endpoint {
                let why = "`reload = \"endpoint\"` is the log shipper's own (its POST /-/reload): an added component \
                           restarts (`restart`) or reloads its unit (`unit`)";
                return Err(at(why.to_string(), entry.name.span().start));
            }
            added.push(component(entry));
        }
    }
    Ok(added)
}

fn is_a_name(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_lowercase())
        && word.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn leak_all(words: Vec<String>) -> &'static [&'static str] {
    Vec::leak(words.into_iter().map(leak).collect())
}

/// The table's entry for what the file says: its behaviour is its module's functions.
fn component(e: Entry) -> Component {
    let name = leak(e.name.into_inner());
    let section = leak(name.replace('-', "_"));
    let repository = e.repository.unwrap_or(EntryRepository {
        name: section.to_string(),
        vendor: "its vendor".to_string(),
        apt: String::new(),
        apt_key: String::new(),
        dnf: String::new(),
        dnf_key: String::new(),
    });
    let has_check = !e.check.is_empty();
    Component {
        name,
        alias: e.alias.map_or(name, |a| leak(a.into_inner())),
        label: e.label.map_or(name, leak),
        description: leak(e.description),
        tier: e.tier,
        section,
        template: leak(e.template),
        port: e.port,
        reload: e.reload,
        repository: Box::leak(Box::new(Repository {
            name: leak(repository.name),
            vendor: leak(repository.vendor),
            apt: leak(repository.apt),
            apt_key: leak(repository.apt_key),
            dnf: leak(repository.dnf),
            dnf_key: leak(repository.dnf_key),
        })),
        packaged_config: "",
        account_groups: leak_all(e.account_groups),
        settings: Settings {
            address: leak(e.settings.address),
            address_env: "",
            unit: leak(e.settings.unit),
            exec: leak(e.settings.exec),
            config: leak(e.settings.config),
            account: leak(e.settings.account),
            package: leak(e.settings.package),
            data_dir: leak(e.settings.data_dir),
            image: "",
            check_help: if has_check { "offline check of a configuration file" } else { "" },
        },
        behaviour: Behaviour {
            own_module: leak(e.module),
            verify: "verify",
            ready: "ready",
            serving: "serving",
            evidence: "evidence",
            set_up: if e.set_up { "set_up" } else { "" },
            check_key: if has_check { "check_command" } else { "" },
            check: leak_all(e.check),
            packaged_check: &[],
            container_env: &[],
            container_args: &[],
            reads_journal: e.reads_journal,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read_text(text: &str) -> Result<Vec<Component>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("components.toml");
        std::fs::write(&path, text).unwrap();
        read(&[path, dir.path().join("missing.toml")])
            .map_err(|e| e.to_string().replace(&dir.path().display().to_string(), "DIR"))
    }

    const WEB: &str = "[[component]]\nname = \"web\"\ndescription = \"static web server\"\ntier = \"server\"\n\
        template = \"web/index.html.j2\"\nport = 8080\nmodule = \"web\"\n\n[component.settings]\nunit = \"web.service\"\n\
        exec = \"/usr/bin/python3 -m http.server {port}\"\nconfig = \"/var/lib/web/index.html\"\naccount = \"web\"\npackage = \"python3\"\n";

    #[test]
    fn an_entry_becomes_a_component_whose_behaviour_is_its_module() {
        let added = read_text(WEB).unwrap();
        assert_eq!(added.len(), 1);
        let web = &added[0];
        assert_eq!((web.name, web.alias, web.label, web.section, web.port), ("web", "web", "web", "web", 8080));
        assert_eq!((web.tier, web.reload), (Tier::Server, Reload::Restart));
        assert_eq!((web.behaviour.own_module, web.behaviour.verify, web.behaviour.set_up), ("web", "verify", ""));
        assert_eq!(
            (web.settings.unit, web.settings.data_dir, web.repository.vendor),
            ("web.service", "", "its vendor")
        );
    }

    #[test]
    fn a_name_the_table_has_or_a_stray_key_is_refused_where_it_is_written() {
        let taken = read_text(&WEB.replace("name = \"web\"", "name = \"loki\"")).unwrap_err();
        assert_eq!(
            taken,
            "error: a component named `loki` is already in the table\n --> DIR/components.toml:2:8\n  |\n2 | name = \"loki\"\n  |        ^"
        );
        let stray = read_text(&WEB.replace("port = 8080", "prot = 8080")).unwrap_err();
        assert!(stray.starts_with("error: unknown field `prot`, expected one of"), "{stray}");
        assert!(stray.contains("--> DIR/components.toml:6:1"), "{stray}");
        let endpoint = read_text(&WEB.replace("module =", "reload = \"endpoint\"\nmodule =")).unwrap_err();
        assert!(endpoint.starts_with("error: `reload = \"endpoint\"` is the log shipper's own"), "{endpoint}");
        let twice = read_text(&format!("{WEB}\n{WEB}")).unwrap_err();
        assert!(twice.starts_with("error: a component named `web` is already in the table"), "{twice}");
    }
}
