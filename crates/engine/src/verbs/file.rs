//! `file::` — a host's files: read one or several at once, compare several (`compare`), write
//! atomically with a diff and a backup, check a candidate with a component's tool, remove, make
//! directories. Everything goes through the `Files` world seam (a candidate's check through the
//! host's commands, as one script), so on an ssh host it happens there. Every change passes
//! `Context::plan` first (under `--dry-run` the diff is shown and nothing is written) and is
//! logged as it happens (`changed PATH: …`). Diffs never show the API token nor any string the
//! caller names in `secrets`.

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::diff;
use super::result::{VerbResult, fail};
use super::values::{record, text};
use crate::register;
use meta::{absolute, meta_changes, wanted};
use opsbook_base::report::Level;
use opsbook_world::Invocation;
use opsbook_world::files::{BACKUP_SUFFIX, CANDIDATE, CANDIDATE_FAILED, Looked, Meta, Wanted, mode_text};

mod compare;
mod meta;

/// The `file::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    read_verbs(&mut m);
    change_verbs(&mut m);
    m
}

fn read_verbs(m: &mut Module) {
    register!(
        m,
        "read",
        Reads,
        ["path: &str", "?"],
        "/// The file's text, or `()` when it does not exist.",
        "file::read(\"/etc/hostname\")",
        |call: NativeCallContext, path: &str| read(&context(&call), path)
    );
    register!(
        m,
        "read_all",
        Reads,
        ["paths: Array", "Array"],
        "/// The texts of several files, in order, all read in one call (one round trip on an ssh host):\n\
         /// each the file's text, or `()` when it does not exist. A directory fails, as with `file::read`.",
        "file::read_all([\"/etc/hostname\", \"/etc/motd\"])",
        |call: NativeCallContext, paths: Array| read_all(&context(&call), &paths)
    );
    register!(
        m,
        "diff",
        Reads,
        ["path: &str", "content: &str", "String"],
        "/// The unified diff from the file at `path` (none: `/dev/null`) to `content`, the API token\n\
         /// masked; empty when they are the same. Reads only: nothing is written.",
        "file::diff(\"/etc/motd\", \"welcome\\n\")",
        |call: NativeCallContext, path: &str, content: &str| {
            let h = context(&call);
            let old = read_file(&h, path)?.map(|(text, _)| text);
            Ok::<String, Box<rhai::EvalAltResult>>(super::diff::unified(
                path,
                old.as_deref(),
                Some(content),
                &[],
                &secrets(&h, &[]),
            ))
        }
    );
    register!(
        m,
        "compare",
        Reads,
        ["files: Array", "Map"],
        "/// Whether files and directories are already as wanted, all read in one call (one round trip\n\
         /// on an ssh host). Each item is `#{path, content}` for a file or `#{path, dir: true}` for a\n\
         /// directory, with `mode`, `owner` and `group` as `file::write` and `file::mkdir` take them.\n\
         /// Returns `#{same, differing}`: `differing` says what differs, item by item (`PATH: absent`,\n\
         /// `PATH: content, mode 0644 → 0640`). Reads only: the same under `--dry-run`.",
        "file::compare([#{ path: \"/etc/motd\", content: \"welcome\\n\" }, #{ path: \"/etc/opsbook-demo\", dir: true }])",
        |call: NativeCallContext, files: Array| compare::compare(&context(&call), &files)
    );
    register!(
        m,
        "check_candidate",
        Reads,
        ["path: &str", "content: &str", "argv: Array", "options: Map", "Map"],
        "/// Writes `content` as a candidate file at `path` (mode 0600; its directory must exist), runs\n\
         /// `argv` — a component's own check naming the candidate — and removes the candidate whatever\n\
         /// it said: one call on the host (one round trip over ssh). Returns `#{ok, code, stdout,\n\
         /// stderr, timed_out}` as `host::exec` does; options `#{timeout: \"60s\"}`. Under `--dry-run`\n\
         /// nothing is written or run (`ok` true, `dry_run` true).",
        "file::check_candidate(\"/etc/motd\", \"welcome\\n\", [\"true\"], #{ timeout: \"5s\" })",
        |call: NativeCallContext, path: &str, content: &str, argv: Array, options: Map| check_candidate(
            &context(&call),
            path,
            content,
            &argv,
            &options
        )
    );
}

fn change_verbs(m: &mut Module) {
    register!(
        m,
        "exists",
        Reads,
        ["path: &str", "bool"],
        "/// Whether anything (a file, a directory) is at `path`.",
        "file::exists(\"/etc/hostname\")",
        |call: NativeCallContext, path: &str| exists(&context(&call), path)
    );
    register!(
        m,
        "write",
        Changes,
        ["path: &str", "content: &str", "Map"],
        "/// Replaces the file atomically (a temporary file beside it, synced, renamed over it) when its\n\
         /// text differs. Returns `#{changed, path, diff, backup}`: `diff` is a unified diff with the API\n\
         /// token masked; the replaced file is kept as `PATH.opsbook-backup` (`backup` names it).",
        "file::write(\"/etc/motd\", \"welcome\\n\")",
        |call: NativeCallContext, path: &str, content: &str| write(&context(&call), path, content, &Map::new())
    );
    register!(
        m,
        "write",
        Changes,
        ["path: &str", "content: &str", "options: Map", "Map"],
        "/// With options `#{mode: \"0640\", owner: \"root\", group: \"loki\", backup: true, secrets: [\"…\"]}`:\n\
         /// mode and ownership are set before the file appears; a mode or owner change alone is a\n\
         /// change too (named on the diff's `+++` line); `secrets` are masked in the diff like the token.",
        "file::write(\"/etc/motd\", \"welcome\\n\", #{ mode: \"0644\", backup: true })",
        |call: NativeCallContext, path: &str, content: &str, options: Map| write(
            &context(&call),
            path,
            content,
            &options
        )
    );
    register!(
        m,
        "remove",
        Changes,
        ["path: &str", "Map"],
        "/// Removes the file and its `PATH.opsbook-backup`. Returns `#{changed}` (false: nothing was there).",
        "file::remove(\"/etc/motd\")",
        |call: NativeCallContext, path: &str| remove(&context(&call), path)
    );
    register!(
        m,
        "mkdir",
        Changes,
        ["path: &str", "Map"],
        "/// Creates the directory and its parents. Returns `#{changed}`.",
        "file::mkdir(\"/var/lib/opsbook-demo\")",
        |call: NativeCallContext, path: &str| mkdir(&context(&call), path, &Map::new())
    );
    register!(
        m,
        "mkdir",
        Changes,
        ["path: &str", "options: Map", "Map"],
        "/// With options `#{mode: \"0750\", owner: \"loki\", group: \"loki\"}`, set on the last directory.",
        "file::mkdir(\"/var/lib/opsbook-demo\", #{ mode: \"0750\" })",
        |call: NativeCallContext, path: &str, options: Map| mkdir(&context(&call), path, &options)
    );
}

/// How `file::write` (and `unit::install`) should write.
pub(crate) struct WriteOptions {
    pub wanted: Wanted,
    pub backup: bool,
    /// Texts masked in the diff besides the API token.
    pub secrets: Vec<String>,
}

/// What a write came to, as scripts see it.
#[derive(Serialize)]
pub(crate) struct Written {
    pub changed: bool,
    pub path: String,
    pub diff: String,
    /// Where the replaced file was kept; `()` when none was.
    pub backup: Option<String>,
    /// Under `--dry-run`: what would change; nothing was written.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

/// `#{changed}` (and `dry_run` when nothing was done because of it).
#[derive(Serialize)]
pub(crate) struct Changed {
    pub changed: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub dry_run: bool,
}

fn write_options(options: &Map) -> VerbResult<WriteOptions> {
    let wanted = wanted(options, &["backup", "secrets"], "file::write")?;
    let backup = match options.get("backup") {
        Some(b) => b.as_bool().map_err(|_| fail("file::write: `backup` must be true or false"))?,
        None => true,
    };
    let secrets = match options.get("secrets") {
        Some(list) => list
            .read_lock::<Array>()
            .ok_or_else(|| fail("file::write: `secrets` must be an array of strings"))?
            .iter()
            .map(text)
            .collect(),
        None => Vec::new(),
    };
    Ok(WriteOptions { wanted, backup, secrets })
}

/// The API token and the caller's secrets; the caller's are also kept out of every log line.
fn secrets(cx: &Context, given: &[String]) -> Vec<String> {
    for s in given.iter().filter(|s| s.len() >= 4) {
        opsbook_base::secret::Secret::new(s.clone());
    }
    let token = cx.config().token().ok().flatten().map(|t| t.expose().to_string());
    given.iter().cloned().chain(token).collect()
}

pub(crate) fn read_file(cx: &Context, path: &str) -> VerbResult<Option<(String, Meta)>> {
    absolute(path)?;
    let (files, p) = (cx.world().files.clone(), path.to_string());
    cx.block_on(|| async move { files.read(&p).await })?.map_err(fail)
}

pub(crate) fn stat(cx: &Context, path: &str) -> VerbResult<Option<Meta>> {
    absolute(path)?;
    let (files, p) = (cx.world().files.clone(), path.to_string());
    cx.block_on(|| async move { files.stat(&p).await })?.map_err(fail)
}

/// What a candidate's check came to, as scripts see it (the shape of `host::exec`'s answer).
#[derive(Serialize)]
struct Checked {
    ok: bool,
    code: Option<i32>,
    stdout: String,
    stderr: String,
    timed_out: bool,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

fn check_candidate(cx: &Context, path: &str, content: &str, argv: &Array, options: &Map) -> VerbResult<Map> {
    absolute(path)?;
    let argv: Vec<String> = argv.iter().map(text).collect();
    if argv.is_empty() {
        return Err(fail("file::check_candidate: empty argv"));
    }
    let mut timeout = cx.config().duration(opsbook_base::config::keys::HOST_EXEC_TIMEOUT);
    for (k, v) in options {
        match k.as_str() {
            "timeout" => timeout = super::time::positive_duration_arg(v, "timeout")?,
            other => return Err(fail(format!("file::check_candidate: unknown option `{other}` (timeout)"))),
        }
    }
    let nothing = Checked {
        ok: true,
        code: Some(0),
        stdout: String::new(),
        stderr: String::new(),
        timed_out: false,
        dry_run: true,
    };
    if cx.plan(&format!("check a candidate {path} with `{}`", argv.join(" "))) {
        return record(&nothing);
    }
    // (After the plan: a dry run in the sandbox rehearses the check like any other step.)
    if cx.world().sandbox {
        return Err(fail(
            "file::check_candidate is not available in the sandbox: the command would run on this machine, not in the sandbox's directory\n  help: rehearse with --dry-run, or run against a real host",
        ));
    }
    let size = content.len().to_string();
    let mut script = ["sh", "-c", CANDIDATE, "sh", path, "0600", &size].map(String::from).to_vec();
    script.extend(argv);
    let inv = Invocation { argv: script, timeout, env: Vec::new(), stdin: Some(content.to_string()) };
    let done = cx.run_command(inv)?.map_err(fail)?;
    if done.code == Some(125)
        && let Some(why) = done.stderr.lines().find_map(|l| l.strip_prefix(CANDIDATE_FAILED))
    {
        return Err(fail(format!("cannot check the candidate {path}: \"{why}\"")));
    }
    let ok = done.code == Some(0) && !done.timed_out;
    record(&Checked {
        ok,
        code: done.code,
        stdout: done.stdout,
        stderr: done.stderr,
        timed_out: done.timed_out,
        dry_run: false,
    })
}

fn read(cx: &Context, path: &str) -> VerbResult<Dynamic> {
    Ok(read_file(cx, path)?.map_or(Dynamic::UNIT, |(t, _)| t.into()))
}

fn read_all(cx: &Context, paths: &Array) -> VerbResult<Array> {
    let paths = paths
        .iter()
        .map(|p| {
            let path = p.clone().into_string().map_err(|_| fail("file::read_all: each path is a string"))?;
            absolute(&path)?;
            Ok(path)
        })
        .collect::<VerbResult<Vec<String>>>()?;
    let (files, asked) = (cx.world().files.clone(), paths.clone());
    let found = cx.block_on(|| async move { files.look_all(&asked).await })?.map_err(fail)?;
    paths
        .iter()
        .zip(found)
        .map(|(path, looked)| match looked {
            None => Ok(Dynamic::UNIT),
            Some(Looked { text: Some(text), .. }) => Ok(text.into()),
            Some(Looked { text: None, .. }) => Err(fail(format!("cannot read {path}: it is a directory"))),
        })
        .collect()
}

fn exists(cx: &Context, path: &str) -> VerbResult<bool> {
    Ok(stat(cx, path)?.is_some())
}

/// `1 line`, `3 lines`.
fn lines(n: usize) -> String {
    if n == 1 { "1 line".to_string() } else { format!("{n} lines") }
}

/// The part of `wanted` that `meta` does not have yet: a chown to the same owner is not sent.
fn only_differing(meta: &Meta, wanted: &Wanted) -> Wanted {
    Wanted {
        mode: wanted.mode.filter(|m| *m != meta.mode),
        owner: wanted.owner.clone().filter(|o| *o != meta.owner),
        group: wanted.group.clone().filter(|g| *g != meta.group),
    }
}

/// What a new file is given: `mode 0640, owner root, group loki`.
fn new_meta(wanted: &Wanted) -> Vec<String> {
    let mut out = vec![format!("mode {}", mode_text(wanted.mode.unwrap_or(0o644)))];
    out.extend(wanted.owner.iter().map(|o| format!("owner {o}")));
    out.extend(wanted.group.iter().map(|g| format!("group {g}")));
    out
}

fn write(cx: &Context, path: &str, content: &str, options: &Map) -> VerbResult<Map> {
    record(&write_with(cx, path, content, &write_options(options)?)?)
}

/// Writes `content` to `path` unless it is already so: the shared core of `file::write` and
/// `unit::install`.
pub(crate) fn write_with(cx: &Context, path: &str, content: &str, options: &WriteOptions) -> VerbResult<Written> {
    let existing = read_file(cx, path)?;
    let secrets = secrets(cx, &options.secrets);
    let (old, changes, wanted) = match &existing {
        Some((old, meta)) => {
            // What is not asked for stays as it is, also on the file that replaces it.
            let o = &options.wanted;
            let wanted = Wanted {
                mode: o.mode.or(Some(meta.mode)),
                owner: o.owner.clone().or_else(|| Some(meta.owner.clone())),
                group: o.group.clone().or_else(|| Some(meta.group.clone())),
            };
            (Some(old.as_str()), meta_changes(meta, &wanted), wanted)
        }
        None => (None, new_meta(&options.wanted), options.wanted.clone()),
    };
    let rewrite = old != Some(content);
    let unchanged =
        Written { changed: false, path: path.to_string(), diff: String::new(), backup: None, dry_run: false };
    if !rewrite && changes.is_empty() {
        return Ok(unchanged);
    }
    let diff = diff::unified(path, old, Some(content), &changes, &secrets);
    let (added, removed) = diff::counts(&diff);
    let summary = match &existing {
        None => format!("created ({}, {})", lines(added), changes.join(", ")),
        Some(_) if rewrite => {
            let meta = if changes.is_empty() { String::new() } else { format!(", {}", changes.join(", ")) };
            format!("{} added, {removed} removed{meta}", lines(added))
        }
        Some(_) => changes.join(", "),
    };
    let keep = options.backup && rewrite && existing.is_some();
    let backup = keep.then(|| format!("{path}{BACKUP_SUFFIX}"));
    if cx.plan(&format!("write {path}: {summary}\n{}", diff.trim_end())) {
        return Ok(Written { changed: true, diff, backup: None, dry_run: true, ..unchanged });
    }
    let files = cx.world().files.clone();
    let (p, text) = (path.to_string(), content.to_string());
    if rewrite {
        let w = wanted.clone();
        let written = cx.block_on(|| async move { files.write(&p, &text, &w, keep).await })?;
        if let Err(e) = written {
            return Err(fail(missing_parent(cx, path, existing.is_some())?.unwrap_or(e)));
        }
    } else if let Some((_, meta)) = &existing {
        let differing = only_differing(meta, &wanted);
        cx.block_on(|| async move { files.set_meta(&p, &differing).await })?.map_err(fail)?;
    }
    let kept = backup.as_ref().map(|b| format!(" (previous version kept as {b})")).unwrap_or_default();
    cx.log(Level::Info, &format!("changed {path}: {summary}{kept}"));
    Ok(Written { changed: true, diff, backup, ..unchanged })
}

/// Why writing a new file failed when its directory is not there (looked for only then: a
/// write that succeeds costs no second round trip); `None` when the directory is there.
fn missing_parent(cx: &Context, path: &str, existed: bool) -> VerbResult<Option<String>> {
    let parent = path.rsplit_once('/').map_or("/", |(p, _)| if p.is_empty() { "/" } else { p });
    if existed || stat(cx, parent)?.is_some_and(|m| m.dir) {
        return Ok(None);
    }
    Ok(Some(format!(
        "cannot write {path}: the directory {parent} does not exist\n  help: `file::mkdir(\"{parent}\")` first"
    )))
}

fn remove(cx: &Context, path: &str) -> VerbResult<Map> {
    record(&remove_path(cx, path, false)?)
}

/// Removes a file (and its backup), or with `tree` a directory and what it holds.
pub(crate) fn remove_path(cx: &Context, path: &str, tree: bool) -> VerbResult<Changed> {
    let Some(meta) = stat(cx, path)? else { return Ok(Changed { changed: false, dry_run: false }) };
    if meta.dir && !tree {
        return Err(fail(format!("file::remove: {path} is a directory")));
    }
    if cx.plan(&format!("remove {path}")) {
        return Ok(Changed { changed: true, dry_run: true });
    }
    let (files, p) = (cx.world().files.clone(), path.to_string());
    let removed = cx.block_on(|| async move { files.remove(&p, tree).await })?.map_err(fail)?;
    if removed {
        let what = if meta.dir { "directory removed" } else { "removed" };
        cx.log(Level::Info, &format!("changed {path}: {what}"));
    }
    Ok(Changed { changed: removed, dry_run: false })
}

fn mkdir(cx: &Context, path: &str, options: &Map) -> VerbResult<Map> {
    record(&mkdir_with(cx, path, &wanted(options, &[], "file::mkdir")?)?)
}

/// Creates a directory (and parents) and gives the last one `wanted`'s mode and owner.
pub(crate) fn mkdir_with(cx: &Context, path: &str, wanted: &Wanted) -> VerbResult<Changed> {
    let existing = stat(cx, path)?;
    let changes = match &existing {
        Some(meta) if !meta.dir => return Err(fail(format!("file::mkdir: {path} exists and is not a directory"))),
        Some(meta) => meta_changes(meta, wanted),
        None => vec!["created".to_string()],
    };
    if changes.is_empty() {
        return Ok(Changed { changed: false, dry_run: false });
    }
    let summary = changes.join(", ");
    if cx.plan(&format!("make directory {path}: {summary}")) {
        return Ok(Changed { changed: true, dry_run: true });
    }
    let w = existing.as_ref().map_or_else(|| wanted.clone(), |meta| only_differing(meta, wanted));
    let (files, p) = (cx.world().files.clone(), path.to_string());
    let fix = w != Wanted::default();
    cx.block_on(|| async move {
        files.mkdir(&p).await?;
        if fix { files.set_meta(&p, &w).await } else { Ok(()) }
    })?
    .map_err(fail)?;
    let summary = match existing {
        None => format!("directory created{}", new_meta_of_dir(wanted)),
        Some(_) => summary,
    };
    cx.log(Level::Info, &format!("changed {path}: {summary}"));
    Ok(Changed { changed: true, dry_run: false })
}

fn new_meta_of_dir(wanted: &Wanted) -> String {
    if *wanted == Wanted::default() {
        return String::new();
    }
    let mut parts = Vec::new();
    parts.extend(wanted.mode.map(|m| format!("mode {}", mode_text(m))));
    parts.extend(wanted.owner.iter().map(|o| format!("owner {o}")));
    parts.extend(wanted.group.iter().map(|g| format!("group {g}")));
    format!(" ({})", parts.join(", "))
}
