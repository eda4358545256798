//! `opsbook generate man DIR` and `opsbook generate completions DIR` (hidden): the files a
//! package installs beside the binary, made from the command line's own clap definitions so
//! they never disagree with `--help`.
//!
//! - `man`: `opsbook.1` and one page per subcommand (`opsbook-run.1`, `opsbook-twin-metrics-db.1`,
//!   …; hidden subcommands and clap's `help` have none), with clap_mangen.
//! - `completions`: `opsbook.bash`, `_opsbook` (zsh) and `opsbook.fish`, the scripts
//!   `opsbook completions SHELL` prints, without what the command line hides (`generate`).
//!
//! packaging/build-deb.sh runs both before `cargo deb`; each file is written whole and its
//! path printed, one a line.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Arguments, GenerateArgs, What};
use opsbook_base::Error;

/// The shells a package installs completions for, in the order written.
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Runs `opsbook generate`.
pub(crate) fn run(args: &GenerateArgs) -> Result<u8, Error> {
    let dir = &args.dir;
    let io = |source: std::io::Error| Error::Io { context: format!("cannot write into `{}`", dir.display()), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let written = match args.what {
        What::Man => man_pages(dir).map_err(io)?,
        What::Completions => completions(dir).map_err(io)?,
    };
    let mut out = opsbook_base::secret::stdout();
    for path in written {
        writeln!(out, "{}", path.display()).ok();
    }
    Ok(0)
}

/// The completion script for `shell`, as `opsbook completions SHELL` prints it: what an
/// operator may type, so neither hidden subcommands (`generate`) nor hidden options.
pub(crate) fn completion(shell: Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut visible(built()), "opsbook", out);
}

/// The command line, built (its help and version options made), kept for the process's life:
/// clap takes names as `&'static str`, and the copy `visible` makes borrows them from here.
fn built() -> &'static clap::Command {
    static BUILT: OnceLock<clap::Command> = OnceLock::new();
    BUILT.get_or_init(|| {
        let mut command = Arguments::command();
        command.build();
        command
    })
}

/// `command` with what it hides left out, at every depth (clap_complete offers everything it
/// is given, hidden or not). The help and version options the build made are copied as they
/// are; the `help` subcommand is made again, so that it lists only the visible ones.
fn visible(command: &'static clap::Command) -> clap::Command {
    let own_help = !command.is_disable_help_subcommand_set();
    let mut copy = clap::Command::new(command.get_name())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(!own_help)
        .visible_aliases(command.get_visible_aliases())
        .groups(command.get_groups().map(|group| without_hidden(command, group)))
        .args(command.get_arguments().filter(|a| !a.is_hide_set()).cloned());
    if let Some(about) = command.get_about() {
        copy = copy.about(about.clone());
    }
    if let Some(version) = command.get_version() {
        copy = copy.version(version);
    }
    let made_by_clap = |s: &clap::Command| own_help && s.get_name() == "help";
    copy.subcommands(command.get_subcommands().filter(|s| !s.is_hide_set() && !made_by_clap(s)).map(visible))
}

/// `group` of `command` with its hidden arguments left out (clap's derive groups every
/// argument of a struct, hidden or not).
fn without_hidden(command: &clap::Command, group: &clap::ArgGroup) -> clap::ArgGroup {
    let shown = |id: &clap::Id| command.get_arguments().any(|a| a.get_id() == id && !a.is_hide_set());
    let mut copy = group.clone();
    clap::ArgGroup::new(group.get_id().clone())
        .args(group.get_args().filter(|id| shown(id)).cloned())
        .multiple(copy.is_multiple())
        .required(group.is_required_set())
}

fn completions(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut written = Vec::new();
    for shell in SHELLS {
        let mut text = Vec::new();
        completion(shell, &mut text);
        // The names the shells' vendor directories expect (and clap_complete's own).
        let path = dir.join(match shell {
            Shell::Zsh => "_opsbook".to_string(),
            other => format!("opsbook.{other}"),
        });
        opsbook_base::write_atomically(&path, &text, 0o644)?;
        written.push(path);
    }
    Ok(written)
}

/// `opsbook.1`, then a page per visible subcommand, depth first; the paths in that order.
fn man_pages(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    // As clap_mangen::generate_to does, but keeping each path: the `help` subcommand has no
    // page, and each subcommand's page is named after its path (`opsbook-twin-metrics-db`).
    let mut command = Arguments::command().disable_help_subcommand(true);
    command.build();
    let mut written = Vec::new();
    page(command, dir, &mut written)?;
    Ok(written)
}

fn page(command: clap::Command, dir: &Path, written: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let subcommands: Vec<clap::Command> = command.get_subcommands().filter(|s| !s.is_hide_set()).cloned().collect();
    written.push(clap_mangen::Man::new(command).generate_to(dir)?);
    for sub in subcommands {
        page(sub, dir, written)?;
    }
    Ok(())
}
