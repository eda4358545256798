//! `unit::` — the service manager: status, start/stop/restart/reload with job waiting,
//! daemon-reload and listing, over the `Units` world seam (systemd over D-Bus, or the
//! sandbox); installing unit files and enabling them are in `unit/files.rs`, in the same
//! namespace, the jobs both run in `unit/jobs.rs`, a unit's status and names in
//! `unit/state.rs`. Mutating calls honour `--dry-run`: they are recorded as "would …" and
//! never sent. Short names work: `loki` is `loki.service`.

pub(crate) mod files;
mod jobs;
mod state;

use rhai::{Array, Dynamic, Engine, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::result::{VerbResult, fail};
use super::values::record;
use crate::register;
use jobs::{JobRecord, jobs, run_one};
use opsbook_base::config::keys;
use opsbook_world::units::{Job, UnitStatus, full_name};
use state::{enabled_state, status};

/// The `unit::` namespace: the functions that read and run jobs, and the installation verbs
/// of `files.rs`.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    state_verbs(&mut m);
    job_verbs(&mut m);
    reload_and_list_verbs(&mut m);
    files::add(&mut m);
    m
}

fn state_verbs(m: &mut Module) {
    register!(
        m,
        "status",
        Reads,
        ["name: &str", "UnitStatus"],
        "/// The unit's state: `name`, `description`, `load_state`, `active_state`, `sub_state`,\n\
         /// `unit_file_state`, `main_pid`, `since`, `result`, `exec_main_status`, `exec_main_pid`, `exec_start` (the\n\
         /// command line it starts). A unit that is not\n\
         /// installed reads `load_state: \"not-found\"`. Printing it reads like `systemctl status`.",
        "unit::status(\"loki\").active_state",
        |call: NativeCallContext, name: &str| status(&context(&call), name)
    );
    register!(
        m,
        "statuses",
        Reads,
        ["names: Array", "Array"],
        "/// The states of several units (as `status` each), read at once over the one connection:\n\
         /// the wall time of one read, not of one per unit. Throws as `status` does.",
        "unit::statuses([\"influxdb\", \"loki\"])",
        |call: NativeCallContext, names: Array| statuses(&context(&call), names)
    );
    register!(
        m,
        "states",
        Reads,
        ["names: Array", "Array"],
        "/// The states of several units as `systemctl is-active` reads them, in one call to the\n\
         /// manager: `name`, `description`, `load_state`, `active_state`, `sub_state` (the other\n\
         /// fields empty, as in `list`; `status` reads them). Throws as `status` does.",
        "unit::states([\"influxdb\", \"loki\"])",
        |call: NativeCallContext, names: Array| states(&context(&call), names)
    );
    register!(
        m,
        "is_active",
        Reads,
        ["name: &str", "bool"],
        "/// Whether the unit is active (as `systemctl is-active --quiet`).",
        "unit::is_active(\"loki\")",
        |call: NativeCallContext, name: &str| Ok::<_, Box<rhai::EvalAltResult>>(
            status(&context(&call), name)?.active_state == "active"
        )
    );
    register!(
        m,
        "is_enabled",
        Reads,
        ["name: &str", "bool"],
        "/// Whether the unit starts at boot (enabled, static, indirect… as `systemctl is-enabled`).",
        "unit::is_enabled(\"loki\")",
        |call: NativeCallContext, name: &str| Ok::<_, Box<rhai::EvalAltResult>>(enabled_state(
            &status(&context(&call), name)?.unit_file_state
        ))
    );
}

fn job_verbs(m: &mut Module) {
    for job in [Job::Start, Job::Stop, Job::Restart, Job::Reload] {
        let verb = job.verb();
        let doc = format!(
            "/// {}s the unit(s) — a name or an array, in order — waiting for each job to finish\n\
             /// (`units.job_timeout`, 90 s). Returns `[#{{unit, job, result, ok}}]`. Throws when a job\n\
             /// fails, naming the unit, the result and its last log lines; `try_{verb}` returns instead.",
            capitalise(verb)
        );
        register!(
            m,
            verb,
            Changes,
            ["units: ?", "Array"],
            doc.as_str(),
            format!("unit::{verb}(\"loki\")"),
            move |call: NativeCallContext, units: Dynamic| { jobs(&context(&call), job, &units, &Map::new(), true) }
        );
        register!(
            m,
            verb,
            Changes,
            ["units: ?", "options: Map", "Array"],
            "/// With options `#{timeout: \"30s\"}`.",
            format!("unit::{verb}([\"telegraf\", \"alloy\"], #{{ timeout: \"30s\" }})"),
            move |call: NativeCallContext, units: Dynamic, options: Map| jobs(
                &context(&call),
                job,
                &units,
                &options,
                true
            )
        );
        let try_name = format!("try_{verb}");
        register!(
            m,
            try_name.as_str(),
            Changes,
            ["units: ?", "Array"],
            "/// Like the throwing form, but every outcome is returned (`ok: false`, `result`, `error`).",
            format!("unit::try_{verb}(\"loki\")"),
            move |call: NativeCallContext, units: Dynamic| jobs(&context(&call), job, &units, &Map::new(), false)
        );
    }
}

fn reload_and_list_verbs(m: &mut Module) {
    register!(
        m,
        "reload_or_restart",
        Changes,
        ["name: &str", "Map"],
        "/// Reloads the unit; when it cannot reload (systemd refuses the job type), restarts it.\n\
         /// Returns the outcome with `action`: \"reloaded\" or \"restarted\".",
        "unit::reload_or_restart(\"alloy\")",
        |call: NativeCallContext, name: &str| reload_or_restart(&context(&call), name)
    );
    register!(
        m,
        "daemon_reload",
        Changes,
        ["()"],
        "/// Makes the manager re-read unit files (`systemctl daemon-reload`).",
        "unit::daemon_reload()",
        |call: NativeCallContext| -> VerbResult<()> {
            let h = context(&call);
            if h.plan("reload the service manager (daemon-reload)") {
                return Ok(());
            }
            let units = h.world().units.clone();
            h.block_on(|| async move { units.daemon_reload().await })?.map_err(|e| fail(e.to_string()))?;
            h.log(
                opsbook_base::report::Level::Info,
                "changed: the service manager re-read its unit files (daemon-reload)",
            );
            Ok(())
        }
    );
    register!(
        m,
        "list",
        Reads,
        ["pattern: &str", "Array"],
        "/// Loaded units matching a glob (`*.service`): `[#{name, description, load_state,\n\
         /// active_state, sub_state}]`.",
        "unit::list(\"*.service\")",
        |call: NativeCallContext, pattern: &str| list(&context(&call), pattern)
    );
}

/// Registers the `UnitStatus` type: its fields as properties, and how it prints.
pub(crate) fn register_types(engine: &mut Engine) {
    engine.register_type_with_name::<UnitStatus>("UnitStatus");
    engine.register_get("name", |s: &mut UnitStatus| s.name.clone());
    engine.register_get("description", |s: &mut UnitStatus| s.description.clone());
    engine.register_get("load_state", |s: &mut UnitStatus| s.load_state.clone());
    engine.register_get("active_state", |s: &mut UnitStatus| s.active_state.clone());
    engine.register_get("sub_state", |s: &mut UnitStatus| s.sub_state.clone());
    engine.register_get("unit_file_state", |s: &mut UnitStatus| s.unit_file_state.clone());
    engine.register_get("main_pid", |s: &mut UnitStatus| s.main_pid as i64);
    engine.register_get("since", |s: &mut UnitStatus| {
        s.since.map(|t| humantime::format_rfc3339_seconds(t).to_string()).unwrap_or_default()
    });
    engine.register_get("result", |s: &mut UnitStatus| s.result.clone());
    engine.register_get("exec_main_status", |s: &mut UnitStatus| s.exec_main_status as i64);
    engine.register_get("exec_main_pid", |s: &mut UnitStatus| s.exec_main_pid as i64);
    engine.register_get("exec_start", |s: &mut UnitStatus| -> Array {
        s.exec_start.iter().cloned().map(Dynamic::from).collect()
    });
    engine.register_get("can_reload", |s: &mut UnitStatus| s.can_reload);
    engine.register_fn("to_string", |s: &mut UnitStatus| s.to_string());
    engine.register_fn("to_debug", |s: &mut UnitStatus| s.to_string());
    // A plain record always serialises; the default only keeps the signature simple.
    engine.register_fn("to_map", |s: &mut UnitStatus| status_record(s, true).unwrap_or_default());
}

/// A unit's state as a plain map (`to_map`, `unit::list`).
#[derive(Serialize)]
struct StatusRecord<'a> {
    name: &'a str,
    description: &'a str,
    load_state: &'a str,
    active_state: &'a str,
    sub_state: &'a str,
    #[serde(flatten)]
    service: Option<ServiceRecord<'a>>,
}

/// The fields `to_map` adds to the listing's.
#[derive(Serialize)]
struct ServiceRecord<'a> {
    unit_file_state: &'a str,
    main_pid: u32,
    result: &'a str,
    exec_main_status: i32,
    exec_main_pid: u32,
}

fn status_record(s: &UnitStatus, whole: bool) -> VerbResult<Map> {
    record(&StatusRecord {
        name: &s.name,
        description: &s.description,
        load_state: &s.load_state,
        active_state: &s.active_state,
        sub_state: &s.sub_state,
        service: whole.then_some(ServiceRecord {
            unit_file_state: &s.unit_file_state,
            main_pid: s.main_pid,
            result: &s.result,
            exec_main_status: s.exec_main_status,
            exec_main_pid: s.exec_main_pid,
        }),
    })
}

fn capitalise(verb: &str) -> String {
    let mut c = verb.chars();
    c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
}

/// The units an array names, each with its type (`loki` → `loki.service`).
fn full_names(names: &Array) -> Vec<String> {
    names.iter().map(|n| full_name(&crate::verbs::core::text(n))).collect()
}

fn statuses(cx: &Context, names: Array) -> VerbResult<Array> {
    let units = full_names(&names);
    let world = cx.world().units.clone();
    let read =
        cx.block_on(|| async move { futures_util::future::join_all(units.iter().map(|u| world.status(u))).await })?;
    read.into_iter().map(|r| r.map(Dynamic::from).map_err(|e| fail(e.to_string()))).collect()
}

fn states(cx: &Context, names: Array) -> VerbResult<Array> {
    let units = full_names(&names);
    let world = cx.world().units.clone();
    let read = cx.block_on(|| async move { world.states(&units).await })?.map_err(|e| fail(e.to_string()))?;
    Ok(read.into_iter().map(Dynamic::from).collect())
}

fn reload_or_restart(cx: &Context, name: &str) -> VerbResult<Map> {
    let unit = full_name(name);
    let timeout = cx.config().duration(keys::UNITS_JOB_TIMEOUT);
    if cx.dry_run {
        let can_reload = status(cx, &unit).map(|s| s.can_reload).unwrap_or(false);
        let (job, action) = if can_reload { (Job::Reload, "reloaded") } else { (Job::Restart, "restarted") };
        let r = run_one(cx, job, &unit, timeout)?.map_err(|(_, e)| fail(e))?;
        return record(&JobRecord { action: Some(action), ..r });
    }
    match run_one(cx, Job::Reload, &unit, timeout)? {
        Ok(r) => record(&JobRecord { action: Some("reloaded"), ..r }),
        Err((r, message)) if r.result == "not-applicable" => {
            cx.log(opsbook_base::report::Level::Info, &format!("{unit} cannot reload ({message}); restarting it"));
            let r = run_one(cx, Job::Restart, &unit, timeout)?.map_err(|(_, e)| fail(e))?;
            record(&JobRecord { action: Some("restarted"), ..r })
        }
        Err((_, message)) => Err(fail(message)),
    }
}

fn list(cx: &Context, pattern: &str) -> VerbResult<Array> {
    let units = cx.world().units.clone();
    let p = pattern.to_string();
    let found = cx.block_on(|| async move { units.list(&p).await })?.map_err(|e| fail(e.to_string()))?;
    found.iter().map(|s| status_record(s, false).map(Dynamic::from_map)).collect()
}
