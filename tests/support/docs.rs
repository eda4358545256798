//! Reading the project's Markdown pages as the docs tests need them: the pages (README.md,
//! ARCHITECTURE.md and everything under `docs/`), their fenced blocks with the marks of the
//! fence's info string, the `opsbook …` command lines in them with the output a page shows,
//! and the links with the headings' anchors.
//!
//! The conventions (docs/development.md, "Command lines in the docs"): in a ```` ```sh ````
//! block every line starting `opsbook ` is a command line; in a ```` ```text ```` block a line
//! starting `$ opsbook ` is one, and the lines after it, up to the next `$ ` line, are its
//! output (a line `…` stands for any lines). `real-host` after the language marks a block whose
//! commands need a real host, `until-stopped` one whose commands run until stopped (`serve`):
//! they are parsed, not run. `file=PATH` marks a block whose text
//! is a file the page's commands read (written into their directory before they run).

use std::path::{Path, PathBuf};

/// One Markdown page of the repository.
pub(crate) struct Page {
    /// Relative to the repository (`docs/fleets.md`).
    pub(crate) path: PathBuf,
    pub(crate) text: String,
}

/// A fenced block: its language, the marks after it, its first line's number and its lines.
pub(crate) struct Fence {
    pub(crate) lang: String,
    pub(crate) marks: Vec<String>,
    /// The line of the opening fence (1-based).
    pub(crate) line: usize,
    pub(crate) body: Vec<String>,
}

impl Fence {
    pub(crate) fn marked(&self, mark: &str) -> bool {
        self.marks.iter().any(|m| m == mark)
    }

    /// `file=PATH`'s PATH.
    pub(crate) fn file(&self) -> Option<&str> {
        self.marks.iter().find_map(|m| m.strip_prefix("file="))
    }
}

/// An `opsbook …` command line of a page.
pub(crate) struct CommandLine {
    /// `docs/fleets.md:12`, for messages.
    pub(crate) at: String,
    /// The words after `opsbook`, as the shell would pass them (comments and redirections cut).
    pub(crate) args: Vec<String>,
    /// Parsed only: its block is marked `real-host` or `until-stopped`.
    pub(crate) parsed_only: bool,
    /// The output the page shows for it, when it shows one.
    pub(crate) shown: Option<String>,
}

/// Every page: README.md, ARCHITECTURE.md, then `docs/**.md` in name order.
pub(crate) fn pages() -> Vec<Page> {
    let repo = super::repo_dir();
    let mut paths = vec![PathBuf::from("README.md"), PathBuf::from("ARCHITECTURE.md")];
    let mut found = Vec::new();
    markdown_under(&repo, Path::new("docs"), &mut found);
    found.sort();
    paths.extend(found);
    paths.into_iter().map(|path| Page { text: std::fs::read_to_string(repo.join(&path)).unwrap(), path }).collect()
}

fn markdown_under(repo: &Path, dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(repo.join(dir)).unwrap() {
        let path = dir.join(entry.unwrap().file_name());
        if repo.join(&path).is_dir() {
            markdown_under(repo, &path, into);
        } else if path.extension().is_some_and(|e| e == "md") {
            into.push(path);
        }
    }
}

impl Page {
    /// The fenced blocks, in order (a fence may be indented, as in a list).
    pub(crate) fn fences(&self) -> Vec<Fence> {
        let mut fences = Vec::new();
        let mut open: Option<Fence> = None;
        for (index, line) in self.text.lines().enumerate() {
            let trimmed = line.trim_start();
            match (&mut open, trimmed.strip_prefix("```")) {
                (None, Some(info)) => {
                    let mut words = info.split_whitespace().map(str::to_string);
                    let lang = words.next().unwrap_or_default();
                    open = Some(Fence { lang, marks: words.collect(), line: index + 1, body: Vec::new() });
                }
                (Some(_), Some(_)) => fences.push(open.take().unwrap()),
                (Some(fence), None) => fence.body.push(line.to_string()),
                (None, None) => {}
            }
        }
        fences
    }

    /// The text outside fenced blocks and inline code, for links.
    pub(crate) fn prose(&self) -> String {
        let mut prose = String::new();
        let mut in_fence = false;
        for line in self.text.lines() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
                continue;
            }
            if !in_fence {
                // Inline code is cut: `[a](b)` inside backticks is an example, not a link.
                let parts: Vec<&str> = line.split('`').collect();
                prose.extend(parts.iter().step_by(2).copied());
                prose.push('\n');
            }
        }
        prose
    }

    /// Every `opsbook …` command line of the page's `sh` and `text` blocks.
    pub(crate) fn command_lines(&self) -> Vec<CommandLine> {
        let mut commands = Vec::new();
        for fence in self.fences() {
            let prompt = match fence.lang.as_str() {
                "sh" | "bash" | "console" => "",
                "text" => "$ ",
                _ => continue,
            };
            let mut current: Option<CommandLine> = None;
            for (offset, line) in joined(&fence.body) {
                let command = line.strip_prefix(prompt).filter(|_| !prompt.is_empty() || !line.starts_with("$ "));
                match command.and_then(|c| words_of_opsbook(c.trim())) {
                    Some(args) => {
                        commands.extend(current.take());
                        let at = format!("{}:{}", self.path.display(), fence.line + 1 + offset);
                        let shown = (!prompt.is_empty()).then(String::new);
                        current = Some(CommandLine {
                            at,
                            args,
                            parsed_only: fence.marked("real-host") || fence.marked("until-stopped"),
                            shown,
                        });
                    }
                    None if !prompt.is_empty() && line.starts_with(prompt) => commands.extend(current.take()),
                    None => {
                        if let Some(shown) = current.as_mut().and_then(|c| c.shown.as_mut()) {
                            shown.push_str(&line);
                            shown.push('\n');
                        }
                    }
                }
            }
            commands.extend(current.take());
        }
        // A `$ opsbook …` line with nothing after it shows no output.
        for command in &mut commands {
            if command.shown.as_ref().is_some_and(|s| s.trim().is_empty()) {
                command.shown = None;
            }
        }
        commands
    }

    /// The anchors of the page's headings, as GitHub makes them.
    pub(crate) fn anchors(&self) -> Vec<String> {
        let mut anchors: Vec<String> = Vec::new();
        let mut in_fence = false;
        for line in self.text.lines() {
            if line.trim_start().starts_with("```") {
                in_fence = !in_fence;
            } else if !in_fence && line.starts_with('#') {
                let title = line.trim_start_matches('#');
                if title.starts_with(' ') {
                    let slug = slug(title.trim());
                    let taken =
                        anchors.iter().filter(|a| a.as_str() == slug || a.starts_with(&format!("{slug}-"))).count();
                    anchors.push(if taken == 0 { slug } else { format!("{slug}-{taken}") });
                }
            }
        }
        anchors
    }
}

/// A block's lines with `\` continuations joined, each with its offset in the block.
fn joined(body: &[String]) -> Vec<(usize, String)> {
    let mut lines: Vec<(usize, String)> = Vec::new();
    let mut continues = false;
    for (offset, line) in body.iter().enumerate() {
        if continues {
            let last = lines.last_mut().unwrap();
            last.1.push(' ');
            last.1.push_str(line.trim().trim_end_matches('\\'));
        } else {
            lines.push((offset, line.trim_end().trim_end_matches('\\').to_string()));
        }
        continues = line.trim_end().ends_with('\\');
    }
    lines
}

/// The words after `opsbook` of a shell line that runs it (`sudo` and `VAR=value` before it
/// allowed); a comment, redirection, pipe or `&&` ends the command.
fn words_of_opsbook(line: &str) -> Option<Vec<String>> {
    let words = shell_words(line);
    let mut words = words.into_iter().skip_while(|w| w == "sudo" || is_assignment(w));
    (words.next()? == "opsbook").then(|| {
        words
            .take_while(|w| {
                !w.starts_with('#') && !w.starts_with('>') && !["|", "&&", ";", "2>&1"].contains(&w.as_str())
            })
            .collect()
    })
}

fn is_assignment(word: &str) -> bool {
    word.split_once('=')
        .is_some_and(|(name, _)| !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// Splits as the shell does for the lines the docs hold: blanks separate, quotes group.
fn shell_words(line: &str) -> Vec<String> {
    let (mut words, mut word, mut quote, mut started) = (Vec::new(), String::new(), None, false);
    for c in line.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, started) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, c) if c.is_whitespace() => {
                if started {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (_, c) => {
                word.push(c);
                started = true;
            }
        }
    }
    if started {
        words.push(word);
    }
    words
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, blanks `-`.
pub(crate) fn slug(title: &str) -> String {
    title
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// Whether `seen` is what a page shows: both masked (durations, temporary paths), blanks
/// squeezed (a table's columns follow its widest value), and a shown line `…` standing for
/// any number of lines.
pub(crate) fn shows(shown: &str, seen: &str) -> bool {
    let squeeze = |text: &str| -> Vec<String> {
        super::mask(text).lines().map(|l| l.split_whitespace().collect::<Vec<_>>().join(" ")).collect()
    };
    matches(&squeeze(shown), &squeeze(seen))
}

fn matches(shown: &[String], seen: &[String]) -> bool {
    match shown.split_first() {
        None => seen.is_empty(),
        Some((first, rest)) if first == "…" => (0..=seen.len()).any(|skip| matches(rest, &seen[skip..])),
        Some((first, rest)) => seen.split_first().is_some_and(|(line, after)| line == first && matches(rest, after)),
    }
}
