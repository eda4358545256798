//! Faults a sandbox run can rehearse (`--fault SPEC`, repeatable).
//!
//! A spec is `COMPONENT:FAULT[=VALUE]`, components named as in the stack module
//! (`metrics-db`, `log-store`, `metrics-agent`, `log-shipper`):
//!
//! | spec | effect |
//! |---|---|
//! | `C:down` | the unit is stopped when the run begins |
//! | `C:fail-start` | starting the unit fails (its process exits with status 1) |
//! | `metrics-db:slow-ready[=15s]`, `log-store:slow-ready[=15s]` | not ready for a while after each start (Loki's 503) |
//! | `metrics-db:error-500`, `log-store:error-500` | every answer is a 500 |
//! | `metrics-db:garbage`, `log-store:garbage` | every answer is 200 with an HTML page |
//! | `metrics-db:refuse-token` | the token is refused (401) |
//! | `metrics-agent:not-writing` | the agent runs but writes nothing (and wrote nothing before: no history) |
//! | `log-shipper:bad-config` | the shipper's configuration does not validate |
//! | `log-shipper:reload-fails` | the shipper's reload endpoint answers 400 |
//! | `C:no-reload` | the unit has no reload support (systemd refuses the job) |

use std::time::Duration;

/// The four components, in the order the stack module lists them.
pub const COMPONENTS: [&str; 4] = ["metrics-db", "log-store", "metrics-agent", "log-shipper"];

/// One injected fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    Down,
    FailStart,
    SlowReady(Duration),
    Error500,
    Garbage,
    RefuseToken,
    NotWriting,
    BadConfig,
    ReloadFails,
    NoReload,
}

/// Every fault of a run, by component.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    pub list: Vec<(String, Fault)>,
}

impl Faults {
    pub fn parse(specs: &[String]) -> Result<Faults, String> {
        let mut list = Vec::new();
        for spec in specs {
            list.push(parse_one(spec)?);
        }
        Ok(Faults { list })
    }

    /// Whether `component` has a fault matching `pred`.
    pub fn has(&self, component: &str, pred: impl Fn(&Fault) -> bool) -> bool {
        self.list.iter().any(|(c, f)| c == component && pred(f))
    }

    pub fn slow_ready(&self, component: &str) -> Option<Duration> {
        self.list.iter().find_map(|(c, f)| match f {
            Fault::SlowReady(d) if c == component => Some(*d),
            _ => None,
        })
    }
}

fn parse_one(spec: &str) -> Result<(String, Fault), String> {
    let usage = "expected COMPONENT:FAULT, e.g. `log-store:down` or `metrics-db:slow-ready=15s`";
    let (component, fault) = spec.split_once(':').ok_or_else(|| format!("fault `{spec}`: {usage}"))?;
    let component = component.trim();
    if !COMPONENTS.contains(&component) {
        let hint = crate::error::suggest(component, COMPONENTS)
            .first()
            .map(|s| format!("; did you mean `{s}`?"))
            .unwrap_or_default();
        return Err(format!(
            "fault `{spec}`: unknown component `{component}` (one of {}){hint}",
            COMPONENTS.join(", ")
        ));
    }
    let (name, value) = match fault.split_once('=') {
        Some((n, v)) => (n.trim(), Some(v.trim())),
        None => (fault.trim(), None),
    };
    let server = matches!(component, "metrics-db" | "log-store");
    let fault = match name {
        "down" => Fault::Down,
        "fail-start" => Fault::FailStart,
        "slow-ready" if server => {
            let d = value.map_or(Some(Duration::from_secs(15)), crate::config::parse_duration);
            Fault::SlowReady(d.ok_or_else(|| format!("fault `{spec}`: `{}` is not a duration", value.unwrap_or("")))?)
        }
        "error-500" if server => Fault::Error500,
        "garbage" if server => Fault::Garbage,
        "refuse-token" if component == "metrics-db" => Fault::RefuseToken,
        "not-writing" if component == "metrics-agent" => Fault::NotWriting,
        "bad-config" if component == "log-shipper" => Fault::BadConfig,
        "reload-fails" if component == "log-shipper" => Fault::ReloadFails,
        "no-reload" => Fault::NoReload,
        other => {
            let known = [
                "down",
                "fail-start",
                "slow-ready",
                "error-500",
                "garbage",
                "refuse-token",
                "not-writing",
                "bad-config",
                "reload-fails",
                "no-reload",
            ];
            let why = if known.contains(&other) {
                format!("`{other}` does not apply to {component}")
            } else {
                format!("unknown fault `{other}`")
            };
            return Err(format!("fault `{spec}`: {why} (see `opsbook run --help`)"));
        }
    };
    Ok((component.to_string(), fault))
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
    }

    #[test]
    fn bad_specs_say_why() {
        assert!(Faults::parse(&["log-stor:down".into()]).unwrap_err().contains("did you mean `log-store`?"));
        assert!(Faults::parse(&["metrics-agent:garbage".into()]).unwrap_err().contains("does not apply"));
        assert!(Faults::parse(&["down".into()]).unwrap_err().contains("expected COMPONENT:FAULT"));
    }
}
