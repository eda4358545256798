//! Faults a sandbox run can rehearse (`--fault SPEC`, repeatable).
//!
//! A spec is `[HOST:]COMPONENT:FAULT[=VALUE]`, components named as in the stack module
//! (`metrics-db`, `log-store`, `metrics-agent`, `log-shipper`); in a sandbox fleet a spec
//! without a host applies to every host that runs the component:
//!
//! Each fault is one row of `FAULTS`: its name, the components it applies to, what it does
//! and which runbooks catch it. The parser, `opsbook run --help` (`help`) and the table of
//! docs/sandbox.md (`tests/docs_reference.rs`) are made from it.
//!
//! And one fault of the host rather than a component: `[HOST:]lock-held[=USER@MACHINE]` — a
//! second operator's run holds the host's change lock (`alice@laptop` unless named), so a run
//! that changes the host is refused naming that holder, or waits for it (`--lock-timeout`).

use std::time::Duration;

use opsbook_base::components::{self, Component, Tier};
use opsbook_base::did_you_mean;

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Down,
    FailStart,
    SlowReady(Duration),
    Error500,
    Garbage,
    RefuseToken,
    Fresh,
    AllAccessToken,
    JsonErrors,
    Logfile,
    ReloadExits,
    NotWriting,
    MissingBucket,
    WrongToken,
    PushDead,
    PushRefused,
    BadConfig,
    ReloadFails,
    NoReload,
    LostMidChange,
}

/// The components a fault applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applies {
    /// Every component.
    Every,
    /// The servers (the table's `Tier::Server`).
    Servers,
    /// These components.
    Only(&'static [&'static str]),
    /// The host rather than a component.
    Host,
}

/// One row of the faults table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FaultRow {
    /// Its name in a spec (`down`).
    pub name: &'static str,
    /// The components it may be given to.
    pub applies: Applies,
    /// What the spec may add after `=` (its default when absent), "" when it takes nothing.
    pub value: &'static str,
    /// What a spec names before the component: `HOST:` when the fault is one host's.
    pub host: &'static str,
    /// What it does.
    pub effect: &'static str,
    /// Which runbooks catch it, and how.
    pub caught_by: &'static str,
    /// The fault a spec makes (`SlowReady`'s duration replaced by the spec's); `None` for a
    /// fault of the host (`lock-held`).
    fault: Option<Fault>,
}

const METRICS_DB: &[&str] = &["metrics-db"];
const METRICS_AGENT: &[&str] = &["metrics-agent"];
const LOG_SHIPPER: &[&str] = &["log-shipper"];
const CLIENTS_LOGGING: &[&str] = &["metrics-agent", "log-shipper"];

/// A row of the table.
const fn row(
    name: &'static str,
    applies: Applies,
    fault: Option<Fault>,
    effect: &'static str,
    caught_by: &'static str,
) -> FaultRow {
    FaultRow { name, applies, value: "", host: "", effect, caught_by, fault }
}

/// Every fault a sandbox run can rehearse, in the order `--help` and the docs list them.
pub const FAULTS: [FaultRow; 21] = [
    row(
        "down",
        Applies::Every,
        Some(Fault::Down),
        "the unit is stopped when the run begins",
        "`quick-check`, `status`, `verify-*`",
    ),
    row(
        "fail-start",
        Applies::Every,
        Some(Fault::FailStart),
        "starting the unit fails (its process exits with status 1, its last line in the journal)",
        "`quick-check`; `start` quotes the line",
    ),
    FaultRow {
        value: "15s",
        ..row(
            "slow-ready",
            Applies::Servers,
            Some(Fault::SlowReady(Duration::from_secs(15))),
            "not listening / not ready for a while after each start (Loki's 15 s)",
            "`quick-check`; `start` holds the clients back past its deadline",
        )
    },
    row(
        "error-500",
        Applies::Servers,
        Some(Fault::Error500),
        "every answer is a 500",
        "`quick-check`, `verify-*` quote the answer",
    ),
    row(
        "garbage",
        Applies::Servers,
        Some(Fault::Garbage),
        "every answer is 200 with an HTML page",
        "`quick-check`, `verify-*` quote the answer",
    ),
    row(
        "refuse-token",
        Applies::Only(METRICS_DB),
        Some(Fault::RefuseToken),
        "the token is refused (401)",
        "`verify-metrics-db`, `checklist`",
    ),
    row(
        "fresh",
        Applies::Only(METRICS_DB),
        Some(Fault::Fresh),
        "a fresh InfluxDB 2, not set up (no org, bucket or token) until `POST /api/v2/setup`",
        "`verify-metrics-db`, `checklist` say \"not set up yet (run deploy, or `influx setup`)\", not \"token refused\"",
    ),
    row(
        "all-access-token",
        Applies::Only(METRICS_DB),
        Some(Fault::AllAccessToken),
        "the configured token is all-access, not the operator's (`/api/v2/config` refuses it)",
        "`verify-metrics-db` passes; its storage check reads the server's config file or skips saying why",
    ),
    row(
        "json-errors",
        Applies::Only(CLIENTS_LOGGING),
        Some(Fault::JsonErrors),
        "the component logs JSON (Telegraf's `logformat = \"structured\"`, Alloy's `format = \"json\"`); with \
         `metrics-db:refuse-token` or `log-store:error-500` it logs its errors that way",
        "`verify-metrics-agent`, `verify-log-shipper`, `checklist` read `\"level\":\"ERROR\"` / `\"level\":\"error\"` as errors",
    ),
    row(
        "logfile",
        Applies::Only(METRICS_AGENT),
        Some(Fault::Logfile),
        "the agent logs to `/var/log/telegraf/telegraf.log` (`logfile = …`), the journal gets only its first line",
        "`verify-metrics-agent` reads the file (\"logs to FILE: read N lines\"), never \"no errors\" from an empty journal",
    ),
    row(
        "reload-exits",
        Applies::Only(METRICS_AGENT),
        Some(Fault::ReloadExits),
        "after a HUP the agent exits about 1 s later (as with a broken file in `telegraf.d`)",
        "`reload-agent` fails, quoting the agent's last lines",
    ),
    row(
        "not-writing",
        Applies::Only(METRICS_AGENT),
        Some(Fault::NotWriting),
        "the agent runs but writes nothing (and wrote nothing before: no history)",
        "`verify-metrics-agent`, `checklist`, `e2e-metrics`",
    ),
    row(
        "missing-bucket",
        Applies::Only(METRICS_AGENT),
        Some(Fault::MissingBucket),
        "its writes name a bucket the database lacks (404 `bucket not found`, every flush), the unit running and \
         its configuration testing clean; its history ends 6 minutes before the run",
        "`verify-metrics-agent` (newest point 6 min old; the `Failed to write metric` lines); after a change — \
         `reload-agent`, `restart`, `restart-all`, a rollout's gate — no point stamped after it",
    ),
    row(
        "wrong-token",
        Applies::Only(METRICS_AGENT),
        Some(Fault::WrongToken),
        "the database refuses its token (401, every flush); its history ends 6 minutes before the run",
        "as `missing-bucket`, quoting the `401 Unauthorized` lines",
    ),
    row(
        "push-dead",
        Applies::Only(LOG_SHIPPER),
        Some(Fault::PushDead),
        "its pushes go to a port nothing listens on: connection refused, retried with back-off, logged at warn, \
         the unit running and its configuration valid",
        "`verify-log-shipper` (no recent line of this host, the failed pushes); after a change — `reload-shipper`, \
         `restart`, `restart-all`, a rollout's gate — the marker never arrives, its retried and dropped counters grow",
    ),
    row(
        "push-refused",
        Applies::Only(LOG_SHIPPER),
        Some(Fault::PushRefused),
        "the log store answers its pushes 404 (the push URL without Loki's API path): dropped at once, logged at error",
        "as `push-dead`",
    ),
    row(
        "bad-config",
        Applies::Only(LOG_SHIPPER),
        Some(Fault::BadConfig),
        "its configuration file no longer validates (the running shipper still has the old one)",
        "`reload-shipper` stops before reloading; `verify-log-shipper`",
    ),
    row(
        "reload-fails",
        Applies::Only(LOG_SHIPPER),
        Some(Fault::ReloadFails),
        "its reload endpoint answers 400",
        "`reload-shipper` warns naming the error and restarts the unit instead",
    ),
    row(
        "no-reload",
        Applies::Every,
        Some(Fault::NoReload),
        "the unit has no reload support (systemd refuses the job)",
        "`reload-agent` says so and restarts instead",
    ),
    FaultRow {
        host: "HOST:",
        ..row(
            "lost-mid-change",
            Applies::Every,
            Some(Fault::LostMidChange),
            "the host stops answering once C's unit started, restarted or reloaded: a host lost mid-change",
            "a rollout reports the host *unreachable* — not rolled back, its rollback point kept — and stops \
             ([change safety](change-safety.md#a-lost-host))",
        )
    },
    FaultRow {
        value: "alice@laptop",
        host: "[HOST:]",
        ..row(
            "lock-held",
            Applies::Host,
            None,
            "a second operator's run holds the host's change lock (USER@MACHINE, `alice@laptop` unless named)",
            "a run that changes the host is refused naming that holder, or waits for it (`--lock-timeout`)",
        )
    },
];

impl FaultRow {
    /// The components it applies to, in the component table's order: the built-in ones, which
    /// the sandbox simulates (read before an operator's `components.toml` is: `--help` is made
    /// from it).
    pub fn components(&self) -> Vec<&'static str> {
        let built_in: &'static [Component] = &components::BUILT_IN;
        built_in
            .iter()
            .filter(|c| match self.applies {
                Applies::Every => true,
                Applies::Servers => c.tier == Tier::Server,
                Applies::Only(names) => names.contains(&c.name),
                Applies::Host => false,
            })
            .map(|c| c.name)
            .collect()
    }

    /// How a spec writes it: `C:down`, `metrics-db:slow-ready[=15s], log-store:slow-ready[=15s]`,
    /// `[HOST:]lock-held[=alice@laptop]`.
    pub fn specs(&self) -> String {
        let value = if self.value.is_empty() { String::new() } else { format!("[={}]", self.value) };
        let name = format!("{}{value}", self.name);
        match self.applies {
            Applies::Every => format!("{}C:{name}", self.host),
            Applies::Host => format!("{}{name}", self.host),
            _ => self.components().iter().map(|c| format!("{}{c}:{name}", self.host)).collect::<Vec<_>>().join(", "),
        }
    }
}

/// What `opsbook run --help` says of `--fault`: the spec's form, then each fault of the table.
pub fn help() -> String {
    let mut help = format!(
        "With --sandbox, make the stack misbehave (repeatable): [HOST:]COMPONENT:FAULT[=VALUE], the components \
         being {}; with --fleet, HOST (server, c1, c2…) limits the fault to one host, else it applies wherever the \
         component runs.",
        components::BUILT_IN.map(|c| c.name).join(", ")
    );
    for row in &FAULTS {
        help.push_str(&format!("\n- {} — {}", row.specs(), row.effect.replace('`', "")));
    }
    help
}

/// Every fault of a run, by component.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// (host, component, fault); no host: wherever the component runs.
    pub list: Vec<(Option<String>, String, Fault)>,
    /// (host, who): a second operator holds the host's change lock; no host: every host's.
    pub lock_held: Vec<(Option<String>, String)>,
}

impl Faults {
    pub fn parse(specs: &[String]) -> Result<Faults, String> {
        let (mut list, mut lock_held) = (Vec::new(), Vec::new());
        for spec in specs {
            match lock_fault(spec)? {
                Some(held) => lock_held.push(held),
                None => list.push(parse_one(spec)?),
            }
        }
        Ok(Faults { list, lock_held })
    }

    /// Whether `component` has a fault matching `pred`.
    pub fn has(&self, component: &str, pred: impl Fn(&Fault) -> bool) -> bool {
        self.list.iter().any(|(_, c, f)| c == component && pred(f))
    }

    pub(crate) fn slow_ready(&self, component: &str) -> Option<Duration> {
        self.list.iter().find_map(|(_, c, f)| match f {
            Fault::SlowReady(d) if c == component => Some(*d),
            _ => None,
        })
    }

    /// The faults of one host: those naming it and those naming no host.
    pub fn on(&self, host: &str) -> Faults {
        let list = self.list.iter().filter(|(h, _, _)| h.as_deref().is_none_or(|h| h == host)).cloned().collect();
        let lock_held =
            self.lock_held.iter().filter(|(h, _)| h.as_deref().is_none_or(|h| h == host)).cloned().collect();
        Faults { list, lock_held }
    }

    /// The hosts the specs name.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.list
            .iter()
            .filter_map(|(h, _, _)| h.as_deref())
            .chain(self.lock_held.iter().filter_map(|(h, _)| h.as_deref()))
    }

    /// Who holds this host's change lock, when a `lock-held` fault says someone does.
    pub fn lock_holder(&self) -> Option<&str> {
        self.lock_held.first().map(|(_, who)| who.as_str())
    }
}

/// Why `name` is no fault of `component`: not one at all, or another component's.
fn not_applicable(spec: &str, component: &str, name: &str) -> String {
    let why = if FAULTS.iter().any(|row| row.name == name) {
        format!("`{name}` does not apply to {component}")
    } else {
        format!("unknown fault `{name}`")
    };
    format!("fault `{spec}`: {why} (see `opsbook run --help`)")
}

/// `[HOST:]lock-held[=USER@MACHINE]`: `(host, who)`; `None` when the spec is another fault.
fn lock_fault(spec: &str) -> Result<Option<(Option<String>, String)>, String> {
    let (host, fault) = match spec.split_once(':') {
        Some((host, fault)) => (Some(host.trim().to_string()), fault.trim()),
        None => (None, spec.trim()),
    };
    let held = FAULTS.iter().find(|r| r.applies == Applies::Host && fault.split('=').next() == Some(r.name));
    let Some(held) = held else { return Ok(None) };
    let who = fault.split_once('=').map_or(held.value, |(_, who)| who.trim());
    if who.is_empty() || who.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!("fault `{spec}`: name the holder as USER@MACHINE, e.g. `lock-held=alice@laptop`"));
    }
    Ok(Some((host, who.to_string())))
}

fn parse_one(spec: &str) -> Result<(Option<String>, String, Fault), String> {
    let usage = "expected [HOST:]COMPONENT:FAULT, e.g. `log-store:down`, `c2:log-shipper:down` or \
                 `metrics-db:slow-ready=15s`";
    let (first, rest) = spec.split_once(':').ok_or_else(|| format!("fault `{spec}`: {usage}"))?;
    // `c2:log-shipper:down`: a host first, when the first part is no component and more follows.
    let (host, component, fault) = match rest.split_once(':') {
        Some((component, fault)) if !components::names().contains(&first.trim()) => {
            (Some(first.trim().to_string()), component, fault)
        }
        _ => (None, first, rest),
    };
    let component = component.trim();
    if !components::names().contains(&component) {
        let hint = did_you_mean(component, components::names().iter().copied()).unwrap_or_default();
        return Err(format!(
            "fault `{spec}`: unknown component `{component}` (one of {}){hint}",
            components::names().join(", ")
        ));
    }
    let (name, value) = match fault.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (fault.trim(), None),
    };
    // Only a fault that takes a value takes one: `down=5` would otherwise silently mean `down`.
    let takes_value = FAULTS.iter().any(|row| row.name == name && !row.value.is_empty());
    if let Some(value) = value.filter(|_| !takes_value) {
        return Err(format!("fault `{spec}`: `{name}` takes no value (remove `={value}`)"));
    }
    let row = FAULTS.iter().find(|row| row.name == name && row.components().contains(&component));
    let Some(fault) = row.and_then(|row| row.fault.clone()) else {
        return Err(not_applicable(spec, component, name));
    };
    let fault = match (fault, value) {
        (Fault::SlowReady(_), Some(value)) => Fault::SlowReady(
            opsbook_base::config::parse_duration(value)
                .ok_or_else(|| format!("fault `{spec}`: `{value}` is not a duration"))?,
        ),
        (fault, _) => fault,
    };
    Ok((host, component.to_string(), fault))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse_with_defaults_and_values() {
        let f = Faults::parse(&[
            "log-store:slow-ready".into(),
            "metrics-db:slow-ready=2s".into(),
            "log-shipper:bad-config".into(),
        ])
        .unwrap();
        assert_eq!(f.slow_ready("log-store"), Some(Duration::from_secs(15)));
        assert_eq!(f.slow_ready("metrics-db"), Some(Duration::from_secs(2)));
        assert!(f.has("log-shipper", |x| *x == Fault::BadConfig));
        let specs = [
            "metrics-db:fresh",
            "metrics-db:all-access-token",
            "metrics-agent:json-errors",
            "log-shipper:json-errors",
            "metrics-agent:logfile",
            "metrics-agent:reload-exits",
        ];
        let f = Faults::parse(&specs.map(String::from)).unwrap();
        let expected = [
            Fault::Fresh,
            Fault::AllAccessToken,
            Fault::JsonErrors,
            Fault::JsonErrors,
            Fault::Logfile,
            Fault::ReloadExits,
        ];
        assert_eq!(f.list.iter().map(|(_, _, x)| x.clone()).collect::<Vec<_>>(), expected);
    }

    /// The table, the enum and the parser agree: each variant is one row's, and each spec the
    /// table shows parses to that row's fault.
    #[test]
    fn every_fault_is_one_row_of_the_table_and_parses_from_its_specs() {
        // A new variant does not compile here until it is listed, then fails until it has its row.
        let position = |f: &Fault| match f {
            Fault::Down | Fault::FailStart | Fault::SlowReady(_) | Fault::Error500 | Fault::Garbage => (),
            Fault::RefuseToken | Fault::Fresh | Fault::AllAccessToken | Fault::JsonErrors | Fault::Logfile => (),
            Fault::ReloadExits | Fault::NotWriting | Fault::MissingBucket | Fault::WrongToken => (),
            Fault::PushDead | Fault::PushRefused | Fault::BadConfig | Fault::ReloadFails => (),
            Fault::NoReload | Fault::LostMidChange => (),
        };
        let variants = FAULTS.iter().filter_map(|row| row.fault.as_ref()).inspect(|f| position(f)).count();
        assert_eq!(variants, FAULTS.len() - 1, "one row is the host's (lock-held), every other a variant's");
        for row in &FAULTS {
            let names: Vec<&str> = FAULTS.iter().map(|r| r.name).filter(|n| *n == row.name).collect();
            assert_eq!(names.len(), 1, "{} is named twice", row.name);
            let Some(fault) = &row.fault else {
                let spec = format!("c2:{}", row.name);
                assert_eq!(Faults::parse(&[spec]).unwrap().on("c2").lock_holder(), Some(row.value));
                continue;
            };
            for component in row.components() {
                let spec = format!("c2:{component}:{}", row.name);
                let parsed = Faults::parse(std::slice::from_ref(&spec)).unwrap_or_else(|e| panic!("{spec}: {e}"));
                assert_eq!(parsed.list, [(Some("c2".to_string()), component.to_string(), fault.clone())], "{spec}");
            }
            let elsewhere = components::names().iter().find(|c| !row.components().contains(c));
            if let Some(other) = elsewhere {
                let refused = Faults::parse(&[format!("{other}:{}", row.name)]).unwrap_err();
                assert!(refused.contains("does not apply"), "{refused}");
            }
        }
        assert!(help().contains("\n- metrics-db:slow-ready[=15s], log-store:slow-ready[=15s] — not listening"));
    }

    #[test]
    fn bad_specs_say_why() {
        assert_eq!(
            Faults::parse(&["log-stor:down".into()]).unwrap_err(),
            "fault `log-stor:down`: unknown component `log-stor` (one of metrics-db, log-store, metrics-agent, \
             log-shipper); did you mean `log-store`?"
        );
        assert_eq!(
            Faults::parse(&["metrics-agent:garbage".into()]).unwrap_err(),
            "fault `metrics-agent:garbage`: `garbage` does not apply to metrics-agent (see `opsbook run --help`)"
        );
        assert_eq!(
            Faults::parse(&["down".into()]).unwrap_err(),
            "fault `down`: expected [HOST:]COMPONENT:FAULT, e.g. `log-store:down`, `c2:log-shipper:down` or \
             `metrics-db:slow-ready=15s`"
        );
        assert_eq!(
            Faults::parse(&["log-store:json-errors".into()]).unwrap_err(),
            "fault `log-store:json-errors`: `json-errors` does not apply to log-store (see `opsbook run --help`)"
        );
    }

    #[test]
    fn a_held_lock_is_a_fault_of_a_host_or_of_every_host() {
        let f = Faults::parse(&["c2:lock-held=bob@desk".into(), "log-store:down".into()]).unwrap();
        assert_eq!(f.on("c2").lock_holder(), Some("bob@desk"));
        assert_eq!(f.on("c1").lock_holder(), None);
        assert_eq!(f.hosts().collect::<Vec<_>>(), ["c2"]);
        let every = Faults::parse(&["lock-held".into()]).unwrap();
        assert_eq!(every.on("sandbox").lock_holder(), Some("alice@laptop"));
        assert_eq!(
            Faults::parse(&["lock-held=".into()]).unwrap_err(),
            "fault `lock-held=`: name the holder as USER@MACHINE, e.g. `lock-held=alice@laptop`"
        );
    }

    #[test]
    fn a_host_prefix_limits_a_fault_to_that_host() {
        let f = Faults::parse(&["c2:log-shipper:down".into(), "log-store:error-500".into()]).unwrap();
        assert!(f.on("c2").has("log-shipper", |x| *x == Fault::Down));
        assert!(!f.on("c1").has("log-shipper", |x| *x == Fault::Down));
        assert!(f.on("c1").has("log-store", |x| *x == Fault::Error500));
        assert_eq!(f.hosts().collect::<Vec<_>>(), ["c2"]);
    }
}
