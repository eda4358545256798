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

use clap::CommandFactory;
use clap_complete::Shell;

use crate::cli::{Arguments, GenerateArgs, What};
use crate::error::Error;

/// The shells a package installs completions for, in the order written.
const SHELLS: [Shell; 3] = [Shell::Bash, Shell::Zsh, Shell::Fish];

/// Runs `opsbook generate`.
pub fn run(args: &GenerateArgs) -> Result<u8, Error> {
    let dir = &args.dir;
    let io = |source: std::io::Error| Error::Io { context: format!("cannot write into `{}`", dir.display()), source };
    std::fs::create_dir_all(dir).map_err(io)?;
    let written = match args.what {
        What::Man => man_pages(dir).map_err(io)?,
        What::Completions => completions(dir).map_err(io)?,
    };
    let mut out = crate::secret::stdout();
    for path in written {
        writeln!(out, "{}", path.display()).ok();
    }
    Ok(0)
}

/// The completion script for `shell`, as `opsbook completions SHELL` prints it: what an
/// operator may type, so neither hidden subcommands (`generate`) nor hidden options.
pub fn completion(shell: Shell, out: &mut dyn Write) {
    let mut command = Arguments::command();
    command.build();
    clap_complete::generate(shell, &mut visible(&command), "opsbook", out);
}

/// A built command with what it hides left out, at every depth (clap_complete offers
/// everything it is given, hidden or not). Its help and version options are the ones the
/// build made, copied as they are.
fn visible(command: &clap::Command) -> clap::Command {
    let mut copy = clap::Command::new(command.get_name().to_string())
        .disable_help_flag(true)
        .disable_version_flag(true)
        .disable_help_subcommand(true)
        .about(command.get_about().cloned())
        .visible_aliases(command.get_visible_aliases().map(str::to_string).collect::<Vec<_>>())
        .groups(command.get_groups().cloned())
        .args(command.get_arguments().filter(|a| !a.is_hide_set()).cloned());
    if let Some(version) = command.get_version() {
        copy = copy.version(version.to_string());
    }
    copy.subcommands(command.get_subcommands().filter(|s| !s.is_hide_set()).map(visible))
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
        std::fs::write(&path, text)?;
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
