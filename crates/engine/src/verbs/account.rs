//! `account::` — the service accounts a component runs as: a group and a (system) user,
//! created when missing and corrected when they differ, and the further groups a package
//! gives its account (Alloy's `systemd-journal` and `adm`, to read the logs). It asks with `getent` and changes
//! with `groupadd`/`useradd`/`usermod`, through the `Commands` world seam, so on an ssh host
//! it is that host's accounts. The sandbox has no user database: there it refuses.

use rhai::{Map, Module, NativeCallContext};

use super::context::{Context, context};
use super::file::Changed;
use super::result::{VerbResult, fail};
use super::values::{record, text};
use crate::register;
use opsbook_base::config::keys;
use opsbook_base::report::Level;
use opsbook_world::Invocation;

/// The `account::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "ensure_group",
        Changes,
        ["name: &str", "Map"],
        "/// Creates the system group when it is missing (`groupadd --system`). Returns `#{changed}`.",
        "account::ensure_group(\"opsbook-demo\")",
        |call: NativeCallContext, name: &str| ensure_group(&context(&call), name)
    );
    register!(
        &mut m,
        "ensure_user",
        Changes,
        ["name: &str", "Map"],
        "/// Creates the system user when it is missing, in a group of its own name. Returns `#{changed}`.",
        "account::ensure_user(\"opsbook-demo\")",
        |call: NativeCallContext, name: &str| ensure_user(&context(&call), name, &Map::new())
    );
    register!(
        &mut m,
        "ensure_user",
        Changes,
        ["name: &str", "options: Map", "Map"],
        "/// With options `#{group: \"loki\", home: \"/var/lib/loki\", shell: \"/bin/sh\", system: true}`: a\n\
         /// missing group is created first; a new system user gets /usr/sbin/nologin; an existing user\n\
         /// whose group, home or shell differ from the ones given is changed (`usermod`). The home\n\
         /// directory is not created (`file::mkdir` does that). `groups: [\"systemd-journal\", \"adm\"]`:\n\
         /// further groups the user joins (never leaves), those that exist on the host, as packages\n\
         /// add their accounts to them.",
        "account::ensure_user(\"alloy\", #{ group: \"alloy\", home: \"/var/lib/alloy\", groups: [\"systemd-journal\"] })",
        |call: NativeCallContext, name: &str, options: Map| ensure_user(&context(&call), name, &options)
    );
    m
}

/// What a user should be.
#[derive(Debug, Default)]
struct UserSpec {
    group: Option<String>,
    home: Option<String>,
    shell: Option<String>,
    system: bool,
    /// Supplementary groups to be in.
    groups: Vec<String>,
}

fn user_spec(options: &Map) -> VerbResult<UserSpec> {
    let mut spec = UserSpec { system: true, ..UserSpec::default() };
    for (k, v) in options {
        match k.as_str() {
            "group" => spec.group = Some(text(v)).filter(|s| !s.is_empty()),
            "home" => spec.home = Some(text(v)).filter(|s| !s.is_empty()),
            "shell" => spec.shell = Some(text(v)).filter(|s| !s.is_empty()),
            "system" => {
                spec.system = v.as_bool().map_err(|_| fail("account::ensure_user: `system` must be true or false"))?
            }
            "groups" => {
                let list = v.read_lock::<rhai::Array>().map(|a| a.iter().map(text).collect::<Vec<_>>());
                spec.groups = list.ok_or_else(|| fail("account::ensure_user: `groups` must be an array of names"))?;
                for g in &spec.groups {
                    valid_name(g, "group")?;
                }
            }
            other => {
                return Err(fail(format!(
                    "account::ensure_user: unknown option `{other}` (group, home, shell, system, groups)"
                )));
            }
        }
    }
    if let Some(g) = &spec.group {
        valid_name(g, "group")?;
    }
    Ok(spec)
}

/// Names as `useradd` accepts them portably: lower case letters, digits, `_` and `-`.
fn valid_name(name: &str, what: &str) -> VerbResult<()> {
    let mut chars = name.chars();
    let first = chars.next().is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    if first && name.len() <= 32 && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '-')
    {
        Ok(())
    } else {
        Err(fail(format!("`{name}` is not a valid {what} name (lower case letters, digits, `_`, `-`; at most 32)")))
    }
}

fn refuse_in_sandbox(cx: &Context, call: &str) -> VerbResult<()> {
    if cx.world().sandbox {
        return Err(fail(format!(
            "{call} is not available in the sandbox: it has no user database of its own, and this machine's is not the sandbox's to change\n  help: run the runbook against a real host (without --sandbox)"
        )));
    }
    Ok(())
}

/// Runs `argv` on the host; `Ok(code, stdout)` for any exit status, `Err` when it cannot run.
fn command(cx: &Context, argv: &[&str]) -> VerbResult<(i32, String, String)> {
    let inv = Invocation {
        argv: argv.iter().map(|a| a.to_string()).collect(),
        timeout: cx.config().duration(keys::TOOLS_TIMEOUT),
        ..Invocation::default()
    };
    let done = cx.run_command(inv)?.map_err(fail)?;
    if done.timed_out {
        return Err(fail(format!("`{}` did not finish in time", argv.join(" "))));
    }
    Ok((done.code.unwrap_or(-1), done.stdout, done.stderr))
}

/// Runs a command that changes accounts; its failure quoted.
fn change(cx: &Context, argv: &[&str]) -> VerbResult<()> {
    let (code, _, stderr) = command(cx, argv)?;
    if code != 0 {
        return Err(fail(format!(
            "`{}` failed (exit status {code}): \"{}\"\n  help: accounts are changed as root",
            argv.join(" "),
            stderr.trim()
        )));
    }
    Ok(())
}

/// The `getent DATABASE NAME` line, `None` when there is no such entry (getent's status 2).
fn getent(cx: &Context, database: &str, name: &str) -> VerbResult<Option<String>> {
    match command(cx, &["getent", database, name])? {
        (0, out, _) => Ok(Some(out.lines().next().unwrap_or_default().to_string())),
        (2, _, _) => Ok(None),
        (code, _, err) => {
            Err(fail(format!("`getent {database} {name}` failed (exit status {code}): \"{}\"", err.trim())))
        }
    }
}

fn ensure_group(cx: &Context, name: &str) -> VerbResult<Map> {
    record(&ensure_group_with(cx, name)?)
}

fn ensure_group_with(cx: &Context, name: &str) -> VerbResult<Changed> {
    refuse_in_sandbox(cx, "account::ensure_group")?;
    valid_name(name, "group")?;
    if getent(cx, "group", name)?.is_some() {
        return Ok(Changed { changed: false, dry_run: false });
    }
    if cx.plan(&format!("create the system group {name}")) {
        return Ok(Changed { changed: true, dry_run: true });
    }
    change(cx, &["groupadd", "--system", name])?;
    cx.log(Level::Info, &format!("changed group {name}: created (system group)"));
    Ok(Changed { changed: true, dry_run: false })
}

fn ensure_user(cx: &Context, name: &str, options: &Map) -> VerbResult<Map> {
    refuse_in_sandbox(cx, "account::ensure_user")?;
    valid_name(name, "user")?;
    let spec = user_spec(options)?;
    let mut dry_run = false;
    if let Some(g) = &spec.group {
        dry_run |= ensure_group_with(cx, g)?.dry_run;
    }
    let Some(entry) = getent(cx, "passwd", name)? else {
        return create_user(cx, name, &spec, dry_run);
    };
    // name:password:uid:gid:gecos:home:shell
    let fields: Vec<&str> = entry.split(':').collect();
    let (home, shell) = (fields.get(5).copied().unwrap_or(""), fields.get(6).copied().unwrap_or(""));
    let group = match &spec.group {
        Some(_) => command(cx, &["id", "-gn", name])?.1.trim().to_string(),
        None => String::new(),
    };
    let mut args: Vec<String> = Vec::new();
    let mut what = Vec::new();
    if let Some(g) = spec.group.as_ref().filter(|g| **g != group) {
        args.extend(["--gid".into(), g.clone()]);
        what.push(format!("group {group} → {g}"));
    }
    if let Some(h) = spec.home.as_ref().filter(|h| *h != home) {
        args.extend(["--home".into(), h.clone()]);
        what.push(format!("home {home} → {h}"));
    }
    if let Some(s) = spec.shell.as_ref().filter(|s| *s != shell) {
        args.extend(["--shell".into(), s.clone()]);
        what.push(format!("shell {shell} → {s}"));
    }
    let joining = groups_to_join(cx, name, &spec.groups, true)?;
    if !joining.is_empty() {
        args.extend(["--append".into(), "--groups".into(), joining.join(",")]);
        what.push(format!("joins {}", joining.join(", ")));
    }
    if what.is_empty() {
        return record(&Changed { changed: false, dry_run });
    }
    let summary = what.join(", ");
    if cx.plan(&format!("change user {name}: {summary}")) {
        return record(&Changed { changed: true, dry_run: true });
    }
    let mut argv: Vec<&str> = vec!["usermod"];
    argv.extend(args.iter().map(String::as_str));
    argv.push(name);
    change(cx, &argv)?;
    cx.log(Level::Info, &format!("changed user {name}: {summary}"));
    record(&Changed { changed: true, dry_run: false })
}

fn create_user(cx: &Context, name: &str, spec: &UserSpec, dry_run: bool) -> VerbResult<Map> {
    // --no-log-init: no lastlog/faillog records for the new uid (they live outside /etc).
    let mut argv: Vec<String> = vec!["useradd".into(), "--no-log-init".into()];
    let kind = if spec.system { "system user" } else { "user" };
    let mut what = Vec::new();
    if spec.system {
        argv.push("--system".into());
    }
    match &spec.group {
        Some(g) => {
            argv.extend(["--gid".into(), g.clone()]);
            what.push(format!("group {g}"));
        }
        // A group of its own name: joined when it is there already, else made with the user.
        None if !dry_run && getent(cx, "group", name)?.is_some() => {
            argv.extend(["--gid".into(), name.to_string()]);
            what.push(format!("group {name}"));
        }
        None => {
            argv.push("--user-group".into());
            what.push(format!("group {name}"));
        }
    }
    if let Some(h) = &spec.home {
        argv.extend(["--home-dir".into(), h.clone(), "--no-create-home".into()]);
        what.push(format!("home {h}"));
    }
    // A new service account does not log in. (An existing user's shell is changed only when
    // one is asked for.)
    let nologin = spec.system.then(|| "/usr/sbin/nologin".to_string());
    if let Some(s) = spec.shell.clone().or(nologin) {
        argv.extend(["--shell".into(), s.clone()]);
        what.push(format!("shell {s}"));
    }
    let joining = groups_to_join(cx, name, &spec.groups, false)?;
    if !joining.is_empty() {
        argv.extend(["--groups".into(), joining.join(",")]);
        what.push(format!("in {}", joining.join(", ")));
    }
    argv.push(name.to_string());
    let summary = what.join(", ");
    if cx.plan(&format!("create the {kind} {name} ({summary})")) {
        return record(&Changed { changed: true, dry_run: true });
    }
    change(cx, &argv.iter().map(String::as_str).collect::<Vec<_>>())?;
    cx.log(Level::Info, &format!("changed user {name}: created ({kind}, {summary})"));
    record(&Changed { changed: true, dry_run: false })
}

/// The groups of `wanted` the user is not in yet (`exists`: the user exists to be asked), of
/// those the host has: like a package's maintainer script, a group the host lacks is passed
/// over, saying so.
fn groups_to_join(cx: &Context, name: &str, wanted: &[String], exists: bool) -> VerbResult<Vec<String>> {
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let current = if exists { command(cx, &["id", "-Gn", name])?.1 } else { String::new() };
    let current: Vec<&str> = current.split_whitespace().collect();
    let mut joining = Vec::new();
    for g in wanted.iter().filter(|g| !current.contains(&g.as_str())) {
        if getent(cx, "group", g)?.is_some() {
            joining.push(g.clone());
        } else {
            cx.log(Level::Warn, &format!("group {g} does not exist on this host: user {name} does not join it"));
        }
    }
    Ok(joining)
}
