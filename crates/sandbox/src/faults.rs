//! Faults a sandbox run can rehearse (`--fault SPEC`, repeatable).
//!
//! A spec is `[HOST:]COMPONENT:FAULT[=VALUE]`, components named as in the stack module
//! (`metrics-db`, `log-store`, `metrics-agent`, `log-shipper`); in a sandbox fleet a spec
//! without a host applies to every host that runs the component:
//!
//! | spec | effect |
//! |---|---|
//! | `C:down` | the unit is stopped when the run begins |
//! | `C:fail-start` | starting the unit fails (its process exits with status 1) |
//! | `metrics-db:slow-ready[=15s]`, `log-store:slow-ready[=15s]` | not ready for a while after each start (Loki's 503) |
//! | `metrics-db:error-500`, `log-store:error-500` | every answer is a 500 |
//! | `metrics-db:garbage`, `log-store:garbage` | every answer is 200 with an HTML page |
//! | `metrics-db:refuse-token` | the token is refused (401) |
//! | `metrics-db:fresh` | the database is not set up (a fresh influxd: no org, bucket or token until onboarding) |
//! | `metrics-db:all-access-token` | the configured token is all-access, not operator (`/api/v2/config` refuses it) |
//! | `metrics-agent:json-errors`, `log-shipper:json-errors` | the component logs in JSON (Telegraf's `logformat = "structured"`, Alloy's `format = "json"`) |
//! | `metrics-agent:logfile` | the agent logs to the file its `logfile` names; the journal gets only its first line |
//! | `metrics-agent:reload-exits` | a reload (SIGHUP) makes the agent exit about 1 s later, as with a broken file in telegraf.d |
//! | `metrics-agent:not-writing` | the agent runs but writes nothing (and wrote nothing before: no history) |
//! | `metrics-agent:missing-bucket` | the agent writes to a bucket the database lacks (404 `bucket not found`, every flush) while it runs and its configuration tests clean; its history in the database ends 6 minutes before the run |
//! | `metrics-agent:wrong-token` | the agent's writes carry a token the database refuses (401, every flush); its history ends 6 minutes before the run |
//! | `log-shipper:push-dead` | the shipper pushes to a port nothing listens on (connection refused, retried with back-off, logged at warn) |
//! | `log-shipper:push-refused` | the log store answers the shipper's pushes 404 (not retried: dropped, logged at error) |
//! | `log-shipper:bad-config` | the shipper's configuration does not validate |
//! | `log-shipper:reload-fails` | the shipper's reload endpoint answers 400 |
//! | `C:no-reload` | the unit has no reload support (systemd refuses the job) |
//!
//! And one fault of the host rather than a component: `[HOST:]lock-held[=USER@MACHINE]` — a
//! second operator's run holds the host's change lock (`alice@laptop` unless named), so a run
//! that changes the host is refused naming that holder, or waits for it (`--lock-timeout`).

use std::time::Duration;

use opsbook_base::components::{self, Component, Tier};
use opsbook_base::suggest::did_you_mean;

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

/// Every fault's name, for the refusal of one that is unknown or not this component's.
const FAULT_NAMES: [&str; 19] = [
    "down",
    "fail-start",
    "slow-ready",
    "error-500",
    "garbage",
    "refuse-token",
    "fresh",
    "all-access-token",
    "json-errors",
    "logfile",
    "reload-exits",
    "not-writing",
    "missing-bucket",
    "wrong-token",
    "push-dead",
    "push-refused",
    "bad-config",
    "reload-fails",
    "no-reload",
];

/// Why `name` is no fault of `component`: not one at all, or another component's.
fn not_applicable(spec: &str, component: &str, name: &str) -> String {
    let why = if FAULT_NAMES.contains(&name) {
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
    let who = match fault.split_once('=') {
        Some(("lock-held", who)) => who.trim(),
        None if fault == "lock-held" => "alice@laptop",
        _ => return Ok(None),
    };
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
    let server = Component::named(component).is_some_and(|c| c.tier == Tier::Server);
    // Only `slow-ready` takes a value: `down=5` would otherwise silently mean `down`.
    if let Some(value) = value.filter(|_| name != "slow-ready") {
        return Err(format!("fault `{spec}`: `{name}` takes no value (remove `={value}`)"));
    }
    let fault = match name {
        "down" => Fault::Down,
        "fail-start" => Fault::FailStart,
        "slow-ready" if server => {
            let d = value.map_or(Some(Duration::from_secs(15)), opsbook_base::config::parse_duration);
            Fault::SlowReady(d.ok_or_else(|| format!("fault `{spec}`: `{}` is not a duration", value.unwrap_or("")))?)
        }
        "error-500" if server => Fault::Error500,
        "garbage" if server => Fault::Garbage,
        "refuse-token" if component == "metrics-db" => Fault::RefuseToken,
        "fresh" if component == "metrics-db" => Fault::Fresh,
        "all-access-token" if component == "metrics-db" => Fault::AllAccessToken,
        "json-errors" if matches!(component, "metrics-agent" | "log-shipper") => Fault::JsonErrors,
        "logfile" if component == "metrics-agent" => Fault::Logfile,
        "reload-exits" if component == "metrics-agent" => Fault::ReloadExits,
        "not-writing" if component == "metrics-agent" => Fault::NotWriting,
        "missing-bucket" if component == "metrics-agent" => Fault::MissingBucket,
        "wrong-token" if component == "metrics-agent" => Fault::WrongToken,
        "push-dead" if component == "log-shipper" => Fault::PushDead,
        "push-refused" if component == "log-shipper" => Fault::PushRefused,
        "bad-config" if component == "log-shipper" => Fault::BadConfig,
        "reload-fails" if component == "log-shipper" => Fault::ReloadFails,
        "no-reload" => Fault::NoReload,
        other => return Err(not_applicable(spec, component, other)),
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
