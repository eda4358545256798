//! `unit::install`, `path`, `install_dropin`, `uninstall`, `enable` and `disable`: a service's unit
//! files and whether it starts at boot, in the `unit` namespace beside the jobs of `unit.rs`.
//!
//! Unit files go to the scope's unit directory of the host the run acts on: the system's
//! `/etc/systemd/system`, or for `scope = "user"` the acting user's
//! `~/.config/systemd/user` (that user's home on that host, asked through the files seam).
//! They are written with `file::`'s atomic write, so they report a diff the same way.

use rhai::{Array, Dynamic, Map, Module, NativeCallContext};
use serde::Serialize;

use super::jobs::jobs;
use super::state::{enabled_state, names, status};
use crate::register;
use crate::verbs::context::{Context, context};
use crate::verbs::file::{Changed, WriteOptions, Written, mkdir_with, remove_path, write_with};
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::record;
use opsbook_base::config::keys;
use opsbook_base::report::Level;
use opsbook_world::files::Wanted;
use opsbook_world::units::{Job, full_name};

/// Adds the installation verbs to the `unit` module.
pub(super) fn add(m: &mut Module) {
    register!(
        m,
        "install",
        Changes,
        ["name: &str", "text: &str", "Map"],
        "/// Writes the unit file `name` (`loki` is `loki.service`) into the scope's unit directory\n\
         /// (/etc/systemd/system, or ~/.config/systemd/user), atomically, when its text differs.\n\
         /// Returns `#{changed, path, diff}`. Call `unit::daemon_reload()` after installing.",
        "unit::install(\"opsbook-demo.service\", \"[Service]\\nExecStart=/bin/true\\n\")",
        |call: NativeCallContext, name: &str, text: &str| install(&context(&call), name, text)
    );
    register!(
        m,
        "path",
        Reads,
        ["name: &str", "String"],
        "/// Where `unit::install(name, …)` puts the unit file: its path in the scope's unit directory\n\
         /// on the host the run acts on (read it with `file::read`, compare it with `file::compare`).",
        "unit::path(\"loki\")",
        |call: NativeCallContext, name: &str| unit_path(&context(&call), name)
    );
    register!(
        m,
        "install_dropin",
        Changes,
        ["unit: &str", "name: &str", "text: &str", "Map"],
        "/// Writes the drop-in `UNITDIR/UNIT.d/NAME.conf` (overrides for a unit installed by a package).\n\
         /// Returns `#{changed, path, diff}`.",
        "unit::install_dropin(\"alloy\", \"opsbook.conf\", \"[Service]\\nSupplementaryGroups=systemd-journal\\n\")",
        |call: NativeCallContext, unit: &str, name: &str, text: &str| install_dropin(&context(&call), unit, name, text)
    );
    register!(
        m,
        "uninstall",
        Changes,
        ["name: &str", "Map"],
        "/// Removes the unit file and its drop-in folder `UNIT.d` from the scope's unit directory.\n\
         /// Returns `#{changed}`. Stop and disable the unit first; call `unit::daemon_reload()` after.",
        "unit::uninstall(\"opsbook-demo.service\")",
        |call: NativeCallContext, name: &str| uninstall(&context(&call), name)
    );
    for (verb, enable) in [("enable", true), ("disable", false)] {
        let doc = if enable {
            "/// Enables the unit file(s) — a name or an array — at boot, then reloads the manager (as\n\
             /// systemctl). Returns `#{changed, changes}`: `changes` as systemctl prints them."
        } else {
            "/// Disables the unit file(s) at boot, then reloads the manager. Returns `#{changed, changes}`."
        };
        register!(
            m,
            verb,
            Changes,
            ["units: ?", "Map"],
            doc,
            format!("unit::{verb}(\"loki\")"),
            move |call: NativeCallContext, units: Dynamic| set_enabled(&context(&call), &units, enable, &Map::new())
        );
        let doc = if enable {
            "/// With `#{now: true}`: also starts the units that are not running (as `systemctl enable --now`)."
        } else {
            "/// With `#{now: true}`: stops the running units first (as `systemctl disable --now`)."
        };
        register!(
            m,
            verb,
            Changes,
            ["units: ?", "options: Map", "Map"],
            doc,
            format!("unit::{verb}([\"loki\"], #{{ now: true }})"),
            move |call: NativeCallContext, units: Dynamic, options: Map| {
                set_enabled(&context(&call), &units, enable, &options)
            }
        );
    }
}

/// The scope's unit directory on the host the run acts on. For the user manager, the one it
/// reads itself (`$XDG_CONFIG_HOME/systemd/user` from its `UnitPath`: its environment, not the
/// login's, decides), else `~/.config/systemd/user` of the acting user.
fn unit_dir(cx: &Context) -> VerbResult<String> {
    if cx.config().text(keys::SCOPE) != "user" {
        return Ok("/etc/systemd/system".to_string());
    }
    let units = cx.world().units.clone();
    let searched = cx.block_on(|| async move { units.unit_path().await })?.unwrap_or_default();
    if let Some(dir) = searched.iter().find(|d| d.ends_with("/systemd/user") && !is_shared_dir(d)) {
        return Ok(dir.clone());
    }
    let files = cx.world().files.clone();
    let home = cx.block_on(|| async move { files.home().await })?.map_err(fail)?;
    Ok(format!("{}/.config/systemd/user", home.trim_end_matches('/')))
}

/// The manager's directories that are not the user's own configuration: the system's and
/// the vendor's. (The runtime's `…/systemd/user` comes after the user's own in `UnitPath`.)
fn is_shared_dir(dir: &str) -> bool {
    ["/etc/", "/usr/", "/lib/", "/run/systemd/"].iter().any(|p| dir.starts_with(p))
}

/// A unit or drop-in name: one path component.
fn plain_name(name: &str, what: &str) -> VerbResult<()> {
    if name.is_empty() || name.contains('/') || name.starts_with('.') || name.contains('\0') {
        return Err(fail(format!("`{name}` is not a {what} name (one file name, no `/`)")));
    }
    Ok(())
}

/// Unit files are world-readable, as systemctl leaves them, and have no backup beside them:
/// a `NAME.service.opsbook-backup` in a unit directory only confuses the reader.
fn unit_options() -> WriteOptions {
    WriteOptions { wanted: Wanted { mode: Some(0o644), owner: None, group: None }, backup: false, secrets: Vec::new() }
}

/// Writes `text` at `dir/file`, making `dir` first when it is missing.
fn install_at(cx: &Context, dir: &str, file: &str, text: &str) -> VerbResult<Written> {
    mkdir_with(cx, dir, &Wanted::default())?;
    write_with(cx, &format!("{dir}/{file}"), text, &unit_options())
}

fn unit_path(cx: &Context, name: &str) -> VerbResult<String> {
    plain_name(name, "unit")?;
    Ok(format!("{}/{}", unit_dir(cx)?, full_name(name)))
}

fn install(cx: &Context, name: &str, text: &str) -> VerbResult<Map> {
    plain_name(name, "unit")?;
    let unit = full_name(name);
    record(&install_at(cx, &unit_dir(cx)?, &unit, text)?)
}

fn install_dropin(cx: &Context, unit: &str, name: &str, text: &str) -> VerbResult<Map> {
    plain_name(unit, "unit")?;
    plain_name(name, "drop-in")?;
    let name = name.strip_suffix(".conf").unwrap_or(name);
    let dir = format!("{}/{}.d", unit_dir(cx)?, full_name(unit));
    record(&install_at(cx, &dir, &format!("{name}.conf"), text)?)
}

fn uninstall(cx: &Context, name: &str) -> VerbResult<Map> {
    plain_name(name, "unit")?;
    let (dir, unit) = (unit_dir(cx)?, full_name(name));
    let file = remove_path(cx, &format!("{dir}/{unit}"), false)?;
    let dropins = remove_path(cx, &format!("{dir}/{unit}.d"), true)?;
    record(&Changed { changed: file.changed || dropins.changed, dry_run: file.dry_run || dropins.dry_run })
}

/// What enabling or disabling came to.
#[derive(Serialize)]
struct Enabled {
    changed: bool,
    /// As systemctl prints them: `created symlink A → B`, `removed A`; started or stopped units.
    changes: Vec<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

fn now_option(options: &Map, verb: &str) -> VerbResult<bool> {
    for k in options.keys() {
        if k != "now" {
            return Err(fail(format!("unit::{verb}: unknown option `{k}` (now)")));
        }
    }
    match options.get("now") {
        Some(v) => v.as_bool().map_err(|_| fail(format!("unit::{verb}: `now` must be true or false"))),
        None => Ok(false),
    }
}

fn set_enabled(cx: &Context, units: &Dynamic, enable: bool, options: &Map) -> VerbResult<Map> {
    let verb = if enable { "enable" } else { "disable" };
    let now = now_option(options, verb)?;
    let names = names(units)?;
    // Read first, so what is already so is neither planned nor sent.
    let mut to_switch = Vec::new();
    let mut to_run = Vec::new();
    for unit in &names {
        let s = status(cx, unit)?;
        // A static unit has no [Install] section: it is neither enabled nor disabled by this.
        let on = enabled_state(&s.unit_file_state);
        if (enable && !on) || (!enable && on && s.unit_file_state != "static") {
            to_switch.push(unit.clone());
        }
        let active = matches!(s.active_state.as_str(), "active" | "activating" | "reloading");
        if now && active != enable {
            to_run.push(unit.clone());
        }
    }
    if to_switch.is_empty() && to_run.is_empty() {
        return record(&Enabled { changed: false, changes: Vec::new(), dry_run: false });
    }
    let mut plan = Vec::new();
    if !to_switch.is_empty() {
        plan.push(format!("{verb} {}", to_switch.join(" ")));
    }
    if !to_run.is_empty() {
        plan.push(format!("{} {}", if enable { "start" } else { "stop" }, to_run.join(" ")));
    }
    if cx.plan(&plan.join(", then ")) {
        return record(&Enabled { changed: true, changes: Vec::new(), dry_run: true });
    }
    let mut changes = Vec::new();
    if !enable && !to_run.is_empty() {
        jobs(cx, Job::Stop, &to_array(&to_run), &Map::new(), true)?;
        changes.extend(to_run.iter().map(|u| format!("stopped {u}")));
    }
    if !to_switch.is_empty() {
        let world = cx.world().units.clone();
        let list = to_switch.clone();
        let done = cx.block_on(|| async move { world.set_enabled(&list, enable).await })?;
        changes.extend(done.map_err(|e| fail(e.to_string()))?);
    }
    if enable && !to_run.is_empty() {
        jobs(cx, Job::Start, &to_array(&to_run), &Map::new(), true)?;
        changes.extend(to_run.iter().map(|u| format!("started {u}")));
    }
    for change in &changes {
        cx.log(Level::Info, &format!("changed: {change}"));
    }
    record(&Enabled { changed: !changes.is_empty(), changes, dry_run: false })
}

fn to_array(units: &[String]) -> Dynamic {
    Dynamic::from_array(units.iter().cloned().map(Dynamic::from).collect::<Array>())
}
