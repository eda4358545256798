//! `opsbook scripts`: the two orchestrator scripts operators drive the stack with,
//! `manage-svc.sh` (deploy, remove, prepare) and `svc-exec.sh` (verify, restart, configure),
//! and `lib/opsbook-scripts.sh`, the body both source.
//!
//! They ship inside the binary (the repository's `scripts/`), so the scripts and the opsbook
//! they call are always of one version. `opsbook scripts` says what they are and where they
//! are installed — beside this opsbook, or where its package put them
//! (`PREFIX/share/opsbook/scripts`, /usr/share/opsbook/scripts for the Debian package's
//! /usr/bin/opsbook); `--install DIR` writes them, each atomically (a
//! temporary file renamed over the old one), the scripts mode 0755 and the sourced body 0644,
//! and never replaces a file that differs without `--force` — an operator's edited copy is
//! not lost by accident.
//!
//! The scripts ask opsbook for the roles rather than naming them (`opsbook_base::components::all()` is
//! their one description): `--role NAME` prints opsbook's name of a role given by any name
//! operators use, or fails naming the roles; `--roles` lists them for the usage.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use opsbook_base::Error;
use opsbook_inventory::Role;

/// Each file: its path under the directory installed to, what it does, its text.
pub(crate) const SCRIPTS: [(&str, &str, &str); 3] = [
    (
        "manage-svc.sh",
        "deploy or remove one service (HOST:ROLE); prepare the hosts of an environment",
        include_str!("../scripts/manage-svc.sh"),
    ),
    ("svc-exec.sh", "verify, restart or reconfigure one service (HOST:ROLE)", include_str!("../scripts/svc-exec.sh")),
    ("lib/opsbook-scripts.sh", "what both scripts share (sourced)", include_str!("../scripts/lib/opsbook-scripts.sh")),
];

/// The mode a file is installed with: the scripts run, the body they source is read.
fn mode_of(name: &str) -> u32 {
    if name.starts_with("lib/") { 0o644 } else { 0o755 }
}

// Arguments of `opsbook scripts` (a plain comment: clap would show a doc comment here in place of the subcommand's own, `Command` being deferred).
#[derive(Debug, Args)]
pub struct ScriptsArgs {
    /// Write both scripts into DIR (created if missing), mode 0755, and the body they share
    /// into DIR/lib. Beside the opsbook binary is best: they call the opsbook beside them first.
    #[arg(long, value_name = "DIR")]
    pub install: Option<PathBuf>,

    /// With --install, replace scripts that differ from this opsbook's.
    #[arg(long, requires = "install")]
    pub force: bool,

    /// For the scripts: opsbook's name of the role NAME (its name or an alias, any case), or an
    /// error naming the roles.
    #[arg(long, value_name = "NAME", hide = true, conflicts_with_all = ["install", "roles"])]
    pub role: Option<String>,

    /// For the scripts: the roles, as their usage lists them.
    #[arg(long, hide = true, conflicts_with = "install")]
    pub roles: bool,
}

/// What is at a script's place in a directory.
#[derive(PartialEq)]
enum Found {
    Missing,
    Same,
    Different,
}

fn found(path: &Path, text: &str) -> Found {
    match std::fs::read(path) {
        Ok(bytes) if bytes == text.as_bytes() => Found::Same,
        Ok(_) => Found::Different,
        Err(_) => Found::Missing,
    }
}

/// Runs `opsbook scripts`.
pub(crate) fn run(args: &ScriptsArgs) -> Result<u8, Error> {
    if let Some(name) = &args.role {
        let role = Role::parse_or_explain(name).map_err(Error::Usage)?;
        opsbook_base::tell!("{role}");
        return Ok(0);
    }
    if args.roles {
        opsbook_base::tell!("{}", Role::listed());
        return Ok(0);
    }
    match &args.install {
        Some(dir) => install(dir, args.force),
        None => describe(),
    }
}

/// Where copies of the scripts may be for the opsbook at `exe`: beside it (where `--install`
/// is best pointed), then where a package puts them, `PREFIX/share/opsbook/scripts` for
/// `PREFIX/bin/opsbook` (the Debian package: /usr/share/opsbook/scripts).
fn places(exe: &Path) -> Vec<PathBuf> {
    let Some(beside) = exe.parent() else { return Vec::new() };
    let mut places = vec![beside.to_path_buf()];
    if let Some(prefix) = beside.parent() {
        places.push(prefix.join("share/opsbook/scripts"));
    }
    places
}

/// What is known of one script's copies in `places`: where it is installed, where a
/// different one is; nothing beside opsbook said so.
fn copies(name: &str, text: &str, places: &[PathBuf]) -> String {
    let seen: Vec<String> = places
        .iter()
        .filter_map(|dir| match found(&dir.join(name), text) {
            Found::Same => Some(format!("installed in {}", dir.display())),
            Found::Different => Some(format!("a different {name} is in {}", dir.display())),
            Found::Missing => None,
        })
        .collect();
    match (seen.is_empty(), places.first()) {
        (false, _) => seen.join("; "),
        (true, Some(beside)) => format!("not installed beside opsbook ({})", beside.display()),
        (true, None) => "where opsbook runs from is unknown".to_string(),
    }
}

fn describe() -> Result<u8, Error> {
    let places = std::env::current_exe().map(|exe| places(&exe)).unwrap_or_default();
    let width = SCRIPTS.iter().map(|(name, _, _)| name.len()).max().unwrap_or(0);
    let mut out = opsbook_base::secret::stdout();
    writeln!(out, "The orchestrator scripts, shipped inside this opsbook:").ok();
    for (name, what, text) in SCRIPTS {
        writeln!(out, "  {name:width$}  {what}\n  {:width$}  {}", "", copies(name, text, &places)).ok();
    }
    // A place holding this opsbook's copy of every one: where to run them from.
    let complete =
        places.iter().find(|dir| SCRIPTS.iter().all(|(name, _, text)| found(&dir.join(name), text) == Found::Same));
    match complete {
        Some(dir) => writeln!(out, "Run them from {0}: `{0}/SCRIPT --help` explains each.", dir.display()),
        None => writeln!(
            out,
            "Install them with `opsbook scripts --install DIR` (beside opsbook is best); `SCRIPT --help` explains each."
        ),
    }
    .ok();
    Ok(0)
}

fn install(dir: &Path, force: bool) -> Result<u8, Error> {
    let lib = dir.join("lib");
    std::fs::create_dir_all(&lib)
        .map_err(|source| Error::Io { context: format!("cannot create `{}`", lib.display()), source })?;
    // Look at each before writing any: a refusal writes nothing.
    let states: Vec<Found> = SCRIPTS.iter().map(|(name, _, text)| found(&dir.join(name), text)).collect();
    if !force && let Some(((name, _, _), _)) = SCRIPTS.iter().zip(&states).find(|(_, s)| **s == Found::Different) {
        return Err(Error::Usage(format!(
            "`{}` exists and differs from this opsbook's {name}: nothing written\n  help: compare them (`diff`), \
             then add `--force` to replace it",
            dir.join(name).display()
        )));
    }
    let mut out = opsbook_base::secret::stdout();
    for ((name, _, text), state) in SCRIPTS.iter().zip(states) {
        let path = dir.join(name);
        let mode = mode_of(name);
        write_atomically(&path, text, mode)?;
        let verb = match state {
            Found::Missing => "wrote",
            Found::Same => "rewrote (unchanged)",
            Found::Different => "replaced",
        };
        writeln!(out, "{verb} {} (mode {mode:04o})", path.display()).ok();
    }
    Ok(0)
}

/// Writes `text` to a temporary file beside `path`, with `mode`, then renames it over `path`:
/// a reader sees the old script or the new one, never half of one.
fn write_atomically(path: &Path, text: &str, mode: u32) -> Result<(), Error> {
    opsbook_base::write_atomically(path, text.as_bytes(), mode)
        .map_err(|source| Error::Io { context: format!("cannot write `{}`", path.display()), source })
}
