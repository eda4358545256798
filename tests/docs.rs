//! Docs that cannot rot: every `opsbook …` command line in README.md and `docs/` parses and
//! names what exists, the ones not marked `real-host` run (in a scratch directory; the sandbox
//! where they say `--sandbox`) and print what the page shows, every link between pages and
//! every anchor resolves, and README stays the front door that maps every page.
//! The conventions are in docs/development.md, "Command lines in the docs".

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};

use opsbook::{Arguments, Command};

use crate::support::docs::{CommandLine, Page, pages, shows};
use crate::support::{repo_dir, run_in};

/// What a page's commands find around them: a scratch directory as the checkout is (its
/// `runbooks`, `stdlib` and `templates`, as README's first command runs in it) holding the
/// files the page's `file=PATH` blocks give, and the runbooks' parameters asked once each.
struct Scratch {
    dir: tempfile::TempDir,
    params: HashMap<String, Result<Vec<String>, String>>,
}

impl Scratch {
    fn for_page(page: &Page) -> Scratch {
        let dir = tempfile::Builder::new().prefix("opsbook-docs").tempdir().unwrap();
        for folder in ["runbooks", "stdlib", "templates"] {
            copy_folder(&repo_dir().join(folder), &dir.path().join(folder));
        }
        for fence in page.fences() {
            if let Some(file) = fence.file() {
                let path = dir.path().join(file);
                std::fs::create_dir_all(path.parent().unwrap()).unwrap();
                std::fs::write(path, fence.body.join("\n") + "\n").unwrap();
            }
        }
        Scratch { dir, params: HashMap::new() }
    }

    /// The parameters of runbook `name` as `opsbook show NAME` finds it here, or why not.
    fn params(&mut self, name: &str) -> Result<Vec<String>, String> {
        let dir = self.dir.path().to_path_buf();
        self.params
            .entry(name.to_string())
            .or_insert_with(|| {
                let out = run_in(&dir, &["show", name, "--format", "json"], None);
                if out.code != 0 {
                    return Err(format!("no runbook `{name}`: {}", out.stderr.trim()));
                }
                let shown: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
                Ok(shown["params"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| p["name"].as_str().unwrap().to_string())
                    .collect())
            })
            .clone()
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The command line parsed as `opsbook` parses it, or clap's words on why not.
fn parsed(command: &CommandLine) -> Result<Arguments, String> {
    let argv = std::iter::once("opsbook".to_string()).chain(command.args.iter().cloned());
    opsbook::parse(argv.map(Into::into).collect()).map_err(|e| e.render().to_string())
}

/// A copy of `from` (a page's files go into the copy, never into the checkout).
fn copy_folder(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_dir() {
            copy_folder(&entry.path(), &to.join(entry.file_name()));
        } else {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Why a parsed command line names a runbook or a parameter that does not exist.
fn names_what_is_missing(parsed: &Arguments, scratch: &mut Scratch) -> Option<String> {
    let (names, set): (Vec<String>, Vec<String>) = match &parsed.command {
        Command::Run(run) => (vec![run.name.clone()], run.params.iter().map(|(k, _)| k.clone()).collect()),
        Command::Show { name } => (vec![name.clone()], Vec::new()),
        Command::Check { names } => (names.clone(), Vec::new()),
        Command::Serve(serve) => {
            (serve.jobs.iter().map(|j| j.split('@').next().unwrap_or_default().to_string()).collect(), Vec::new())
        }
        _ => (Vec::new(), Vec::new()),
    };
    // A path to a script (`run ./x.rhai`) is a file of the reader's, not a runbook.
    for name in names.iter().filter(|n| !n.ends_with(".rhai")) {
        match scratch.params(name) {
            Err(why) => return Some(why),
            Ok(params) => {
                if let Some(key) = set.iter().find(|k| !params.contains(k)) {
                    return Some(format!("runbook `{name}` has no parameter `{key}` (it has {})", params.join(", ")));
                }
            }
        }
    }
    None
}

/// Why the docs test may not run this command line here: only what changes nothing on this
/// machine runs (the sandbox, or a command that only reads and ends by itself). Anything else
/// must be marked `real-host` (or `until-stopped`) — the test never acts on the machine it
/// runs on.
fn not_runnable_here(parsed: &Arguments) -> Option<&'static str> {
    let sandbox = parsed.global.sandbox;
    match &parsed.command {
        Command::Run(_) | Command::Repl if sandbox => None,
        Command::Run(_) | Command::Repl => Some("it acts on this machine without `--sandbox`"),
        Command::Serve(_) | Command::Twin(_) => Some("it runs until stopped"),
        Command::Scripts(scripts) if scripts.install.is_some() => Some("it writes into a system folder"),
        Command::Generate(_) => Some("it writes files"),
        _ => None,
    }
}

/// Every command line of every page parses, and the runbooks and parameters it names exist;
/// one marked `real-host` is only that.
#[test]
fn every_command_line_in_the_docs_parses_and_names_what_exists() {
    let mut wrong = Vec::new();
    let mut counted = 0;
    for page in pages() {
        let mut scratch = Scratch::for_page(&page);
        for command in page.command_lines() {
            counted += 1;
            let why = match parsed(&command) {
                Ok(parsed) => names_what_is_missing(&parsed, &mut scratch),
                Err(why) => Some(why),
            };
            if let Some(why) = why {
                wrong.push(format!("{}: `opsbook {}`\n{why}", command.at, command.args.join(" ")));
            }
        }
    }
    assert!(counted > 40, "the docs' command lines were not found ({counted})");
    assert!(wrong.is_empty(), "command lines in the docs that do not parse:\n\n{}", wrong.join("\n\n"));
}

/// Every command line not marked `real-host` or `until-stopped` runs here (it must be one that
/// changes nothing on this machine) without a usage, configuration or script error, and
/// prints what its page shows after it.
#[test]
fn every_sandbox_command_line_in_the_docs_runs_and_prints_what_the_page_shows() {
    let mut wrong = Vec::new();
    let mut ran = 0;
    for page in pages() {
        let scratch = Scratch::for_page(&page);
        for command in page.command_lines().into_iter().filter(|c| !c.parsed_only) {
            let args: Vec<&str> = command.args.iter().map(String::as_str).collect();
            let Ok(parsed) = parsed(&command) else { continue }; // the other test says why
            if let Some(why) = not_runnable_here(&parsed) {
                wrong.push(format!(
                    "{}: `opsbook {}`: not run: {why}; mark its block `real-host` (docs/development.md)",
                    command.at,
                    args.join(" ")
                ));
                continue;
            }
            ran += 1;
            eprintln!("{}: opsbook {}", command.at, args.join(" "));
            let out = run_in(scratch.path(), &args, None);
            let seen = format!("{}{}", out.stdout, out.stderr);
            let shown_right = command.shown.as_ref().is_none_or(|shown| shows(shown, &seen));
            let ran_right = command.shown.is_some() || matches!(out.code, 0 | 1);
            if !shown_right || !ran_right {
                let shown = command.shown.as_deref().unwrap_or("(no output shown)\n");
                wrong.push(format!(
                    "{}: `opsbook {}` exited {}\n--- the page shows\n{shown}--- it printed\n{seen}",
                    command.at,
                    args.join(" "),
                    out.code
                ));
            }
        }
    }
    assert!(ran > 10, "the docs' runnable command lines were not found ({ran})");
    assert!(wrong.is_empty(), "command lines in the docs that do not run as shown:\n\n{}", wrong.join("\n\n"));
}

/// Every relative link of every page leads to a file that exists, and every `#anchor` to a
/// heading of its page.
#[test]
fn every_link_between_pages_and_every_anchor_resolves() {
    let repo = repo_dir();
    let pages = pages();
    let anchors: HashMap<PathBuf, Vec<String>> = pages.iter().map(|p| (p.path.clone(), p.anchors())).collect();
    let link = regex::Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut broken = Vec::new();
    for page in &pages {
        for target in link.captures_iter(&page.prose()).map(|c| c[1].to_string()) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let path =
                if file.is_empty() { page.path.clone() } else { normal(&page.path.parent().unwrap().join(file)) };
            if !repo.join(&path).exists() {
                broken.push(format!("{}: `{target}`: no file {}", page.path.display(), path.display()));
            } else if !anchor.is_empty() && !anchors.get(&path).is_some_and(|a| a.iter().any(|a| a == anchor)) {
                broken.push(format!(
                    "{}: `{target}`: {} has no heading `#{anchor}`",
                    page.path.display(),
                    path.display()
                ));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// `docs/../README.md` is `README.md`: the path a link names, without its `..`.
fn normal(path: &Path) -> PathBuf {
    let mut parts: Vec<std::path::Component> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir if !parts.is_empty() => {
                parts.pop();
            }
            std::path::Component::CurDir => {}
            part => parts.push(part),
        }
    }
    parts.iter().collect()
}

/// README is the front door: at most 400 lines, it names the test command CI runs, and its map
/// links every page under `docs/`.
#[test]
fn readme_is_a_front_door_that_maps_every_page() {
    let pages = pages();
    let readme = pages.iter().find(|p| p.path == Path::new("README.md")).unwrap();
    let lines = readme.text.lines().count();
    assert!(lines <= 400, "README.md has {lines} lines: move the detail to a page under docs/");
    assert!(
        readme.text.contains("cargo test --workspace"),
        "README.md must name `cargo test --workspace` (.ci/run runs it)"
    );
    let linked: BTreeSet<String> = regex::Regex::new(r"\]\((docs/[^)#\s]+)")
        .unwrap()
        .captures_iter(&readme.prose())
        .map(|c| c[1].to_string())
        .collect();
    let unmapped: Vec<String> = pages
        .iter()
        .map(|p| p.path.display().to_string())
        .filter(|p| p.starts_with("docs/") && !linked.contains(p))
        .collect();
    assert!(unmapped.is_empty(), "pages README's map does not link: {unmapped:?}");
}
