//! `inventory::` and `fleet::` — what a runbook knows of the other machines.
//!
//! `inventory::hosts("log-shipper")` lists the hosts of the inventory a pattern selects (a
//! role, a group, a host, `all`, Ansible's combinations), each as a record with its address,
//! roles and groups; `inventory::service("monitor3:alloy")` reads a service the way operators
//! write it; `inventory::roles()` is the stack's components as `opsbook_base::components::all()`
//! describes them once. `fleet::barrier(name)` is the stack's order across machines: in a run
//! over many hosts it waits until every host reached the same point or ended (see
//! `crate::gathering`).
//!
//! The inventory is read on first use, so a runbook that never asks never pays for it and a
//! broken inventory only fails the runbooks that need it.

use std::sync::Arc;
use std::time::Duration;

use rhai::{Array, Dynamic, FnPtr, Map, Module, NativeCallContext};
use serde::Serialize;

use super::context::{Context, context};
use super::ground::Ground;
use super::result::{VerbResult, fail};
use super::time::positive_duration_arg;
use super::values::record;
use crate::gathering::Left;
use crate::register;
use opsbook_base::report::Level;
use opsbook_inventory::{Inventory, Role};

/// How long a host waits at a barrier unless the runbook says otherwise.
const BARRIER_TIMEOUT: Duration = Duration::from_secs(600);

/// A host of the inventory, as runbooks see it.
#[derive(Serialize)]
struct Member {
    name: String,
    /// Empty for this machine (no ssh).
    address: String,
    local: bool,
    roles: Vec<&'static str>,
    groups: Vec<String>,
    scope: String,
}

impl Member {
    fn of(h: &opsbook_inventory::Host) -> Member {
        Member {
            name: h.name.clone(),
            address: h.address.as_ref().map(|a| a.value.clone()).unwrap_or_default(),
            local: h.address.is_none(),
            roles: h.roles.iter().map(|r| r.value.name()).collect(),
            groups: h.groups.clone(),
            scope: h.scope(),
        }
    }
}

/// The `inventory::` namespace.
pub(crate) fn inventory_module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "hosts",
        Reads,
        ["Array"],
        "/// Every host of the inventory: `#{name, address, local, roles, groups, scope}` each.",
        "inventory::hosts()",
        |call: NativeCallContext| hosts(&context(&call), "all")
    );
    register!(
        &mut m,
        "hosts",
        Reads,
        ["pattern: &str", "Array"],
        "/// The hosts a pattern selects: a role (`log-shipper`, `alloy`), a group, a host, `all`, or\n\
         /// Ansible's combinations (`clients:!c2`, `lab:&log-store`).",
        "inventory::hosts(\"log-shipper\")",
        |call: NativeCallContext, pattern: &str| hosts(&context(&call), pattern)
    );
    register!(
        &mut m,
        "host",
        Reads,
        ["name: &str", "Map"],
        "/// One host of the inventory by name (an unknown name is an error naming the closest).",
        "inventory::host(\"localhost\").roles",
        |call: NativeCallContext, name: &str| {
            let h = context(&call);
            let inventory = inventory(&h)?;
            let found = inventory.host(name).map_err(|e| fail(e.to_string()))?;
            record(&Member::of(found))
        }
    );
    register!(
        &mut m,
        "service",
        Reads,
        ["spec: &str", "Map"],
        "/// A service as operators write it, `HOST:ROLE` (`monitor3:alloy`): `#{host, role}` with the\n\
         /// role's opsbook name (`log-shipper`). The host must be in the inventory and play the role.",
        "inventory::service(\"localhost:log-store\")",
        |call: NativeCallContext, spec: &str| service(&context(&call), spec)
    );
    register!(
        &mut m,
        "role",
        Reads,
        ["name: &str", "String"],
        "/// A role's opsbook name from any name operators use (`alloy` → `log-shipper`).",
        "inventory::role(\"loki\")",
        |name: &str| Role::parse_or_explain(name).map(|r| r.name().to_string()).map_err(fail)
    );
    register!(
        &mut m,
        "roles",
        Reads,
        ["Array"],
        "/// The stack's components, servers first, as opsbook describes them (`opsbook_base::components`):\n\
         /// `#{name, alias, label, description, tier, section, template, port, reload, …}` each, with\n\
         /// its behaviour (`verify`, `ready`, `serving`, `evidence`: the stdlib functions called for it). Their\n\
         /// units and files are this host's configuration's, under `config[section]`: see `stack::components()`.",
        "inventory::roles().map(|r| r.alias)",
        || -> VerbResult<Array> { roles().cloned() }
    );
    register!(
        &mut m,
        "me",
        Reads,
        ["Dynamic"],
        "/// The inventory's record of the host this run acts on, or `()` outside a run over hosts.",
        "inventory::me()",
        |call: NativeCallContext| me(&context(&call))
    );
    m
}

/// `inventory::roles()`: the component table as script values, made once for the process
/// (every quick-check asks for it twice, on every host of a fleet run) and copied per call.
fn roles() -> VerbResult<&'static Array> {
    static ROLES: std::sync::OnceLock<Array> = std::sync::OnceLock::new();
    if let Some(made) = ROLES.get() {
        return Ok(made);
    }
    let made: Array =
        opsbook_base::components::all().iter().map(|c| record(c).map(Dynamic::from_map)).collect::<VerbResult<_>>()?;
    Ok(ROLES.get_or_init(|| made))
}

/// The `fleet::` namespace.
pub(crate) fn fleet_module() -> Module {
    let mut m = Module::new();
    register!(
        &mut m,
        "barrier",
        Reads,
        ["name: &str", "Map"],
        "/// In a run over several hosts, waits until every host reached `fleet::barrier(name)` too or\n\
         /// ended (a failed or unreachable host is not waited for), at most 10 minutes. Returns\n\
         /// `#{waited_for, elapsed}`. On one host it returns at once. This keeps the stack's order\n\
         /// across machines: stop the clients everywhere, `fleet::barrier(\"clients stopped\")`, then\n\
         /// stop the servers.",
        "fleet::barrier(\"clients stopped\")",
        |call: NativeCallContext, name: &str| barrier(&context(&call), name, BARRIER_TIMEOUT)
    );
    register!(
        &mut m,
        "barrier",
        Reads,
        ["name: &str", "timeout: ?", "Map"],
        "/// With a timeout (\"2m\"): past it, the run fails naming the hosts still missing.",
        "fleet::barrier(\"clients stopped\", \"5m\")",
        |call: NativeCallContext, name: &str, timeout: Dynamic| barrier(
            &context(&call),
            name,
            positive_duration_arg(&timeout, "timeout")?
        )
    );
    register!(
        &mut m,
        "change_in_place",
        Reads,
        ["()"],
        "/// Says the run's change is wholly made (files written, units reloaded): what follows only\n\
         /// verifies it. A rollout that loses the host after this says the change is in place, not\n\
         /// \"may be partly in place\". Nothing else changes; outside a rollout it has no effect.",
        "fleet::change_in_place()",
        |call: NativeCallContext| context(&call).mark_in_place()
    );
    register!(
        &mut m,
        "on",
        Reads,
        ["host: &str", "block: FnPtr", "Dynamic"],
        "/// Runs `block` (a closure, `|| …`) acting on another host of the inventory: its units,\n\
         /// journal, files, commands and endpoints, and its `config`; returns what the block returns.\n\
         /// Checks recorded there are named `HOST: check`. A host of this run is reached through its\n\
         /// own connection; another is connected to once and kept for the rest of the run. E.g.\n\
         /// `fleet::on(\"server\", || checks::units_active([config.metrics_db.unit]))`.",
        "fleet::on(\"localhost\", || unit::is_active(\"loki\"))",
        |ctx: NativeCallContext, name: &str, block: FnPtr| on(&context(&ctx), &ctx, name, block)
    );
    register!(
        &mut m,
        "hosts",
        Reads,
        ["Array"],
        "/// The names of the hosts this runbook runs on now (this host alone outside a fleet run).",
        "fleet::hosts()",
        |call: NativeCallContext| {
            let h = context(&call);
            let place = h.place();
            let names = match &place.run {
                Some((gathering, _)) => gathering.hosts().to_vec(),
                None => vec![h.hostname()],
            };
            Ok::<Array, Box<rhai::EvalAltResult>>(names.into_iter().map(Dynamic::from).collect())
        }
    );
    m
}

/// The inventory, read now if this is the first time.
fn inventory(cx: &Context) -> VerbResult<Arc<Inventory>> {
    cx.inventory().map_err(fail)
}

fn hosts(cx: &Context, pattern: &str) -> VerbResult<Array> {
    let inventory = inventory(cx)?;
    let selected = inventory.select(pattern).map_err(|e| fail(e.to_string()))?;
    selected.into_iter().map(|h| record(&Member::of(h)).map(Dynamic::from)).collect()
}

fn service(cx: &Context, spec: &str) -> VerbResult<Map> {
    if !spec.contains(':') {
        return Err(fail(format!("service `{spec}`: write it HOST:ROLE (e.g. `monitor3:log-shipper`)")));
    }
    let inventory = inventory(cx)?;
    let services = inventory.services(spec).map_err(|e| fail(e.to_string()))?;
    let service = services.first().ok_or_else(|| fail(format!("service `{spec}` names nothing")))?;
    let mut map = Map::new();
    map.insert("host".into(), service.host.name.clone().into());
    map.insert("role".into(), service.role.name().into());
    Ok(map)
}

fn me(cx: &Context) -> VerbResult<Dynamic> {
    let name = match &cx.place().run {
        Some((_, name)) => name.clone(),
        None => return Ok(Dynamic::UNIT),
    };
    let inventory = inventory(cx)?;
    match inventory.hosts().iter().find(|h| h.name == name) {
        Some(found) => record(&Member::of(found)).map(Dynamic::from),
        None => Ok(Dynamic::UNIT),
    }
}

fn barrier(cx: &Context, name: &str, timeout: Duration) -> VerbResult<Map> {
    let run = cx.place().run.clone();
    let mut out = Map::new();
    let Some((gathering, me)) = run else {
        out.insert("waited_for".into(), Dynamic::from(Array::new()));
        out.insert("elapsed".into(), Dynamic::from(0.0));
        return Ok(out);
    };
    match gathering.barrier(&me, name, timeout, &cx.cancel) {
        Ok(waited) => {
            if !waited.for_hosts.is_empty() {
                let ms = waited.elapsed.as_millis();
                let took =
                    if ms < 1000 { format!("{ms} ms") } else { format!("{:.1} s", waited.elapsed.as_secs_f64()) };
                cx.log(Level::Info, &format!("waited {took} for {} ({name})", waited.for_hosts.join(", ")));
            }
            let names: Array = waited.for_hosts.into_iter().map(Dynamic::from).collect();
            out.insert("waited_for".into(), Dynamic::from(names));
            out.insert("elapsed".into(), Dynamic::from(waited.elapsed.as_secs_f64()));
            Ok(out)
        }
        Err(Left::Cancelled) => Err(super::result::interrupted()),
        Err(Left::TimedOut(missing)) => Err(fail(format!(
            "waited {} at `{name}` for {}: they neither reached it nor ended",
            humantime::format_duration(timeout),
            missing.join(", ")
        ))),
    }
}

fn on(cx: &Context, ctx: &NativeCallContext, name: &str, block: FnPtr) -> VerbResult<Dynamic> {
    let ground = reach(cx, name)?;
    // On itself, a host's checks keep their names.
    let itself = cx.place().run.as_ref().is_some_and(|(_, me)| me == name);
    let ground = if itself { ground } else { ground.elsewhere(name) };
    cx.acting_on(ground, || block.call_within_context(ctx, ()))
}

/// The ground of host `name`: one the run reached already, or reached now over ssh.
pub fn reach(cx: &Context, name: &str) -> VerbResult<Ground> {
    if let Some(ground) = cx.place().ground(name) {
        return Ok(ground.clone());
    }
    let inventory = inventory(cx)?;
    let found = inventory.host(name).map_err(|e| fail(e.to_string()))?;
    if !cx.place().may_connect {
        let place = cx.place();
        let known: Vec<&str> = place.shared.keys().chain(place.reached.keys()).map(String::as_str).collect();
        return Err(fail(format!("`{name}` is not a host of the sandbox's fleet ({})", known.join(", "))));
    }
    if let Some(p) = found.problems.first() {
        return Err(fail(format!("host {name}: `{}` ({}) cannot be resolved: {}", p.var, p.from, p.reason)));
    }
    let (config, world) = crate::connect::open(found).map_err(|why| fail(format!("cannot reach {name}: {why}")))?;
    let ground = Ground::new(Arc::new(config), world);
    cx.place().reached.insert(name.to_string(), ground.clone());
    Ok(ground)
}
