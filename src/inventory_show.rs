//! `opsbook hosts [PATTERN]`: the inventory as opsbook sees it, as a table or JSON.
//!
//! The table gives each host's address, roles, scope and ssh user and port; a second table
//! says where each of those values came from (file:line and level, or the rule applied); the
//! values that could not be resolved are listed last, and make the exit status 1.
//!
//! `--format prometheus` prints Prometheus file_sd targets instead: where each host's
//! `opsbook serve` answers, for the `file_sd_configs` of a scrape job
//! (prometheus/prometheus.example.yml).

use std::io::Write;

use serde_json::json;

use opsbook_base::Error;
use opsbook_base::report::Format;
use opsbook_inventory::{Fact, Host, Inventory, Source};

/// Prints the hosts `pattern` selects (all when `None`); 1 when a shown host has a value
/// that could not be resolved, or was left out of the Prometheus targets.
pub(crate) fn hosts(inventory: &Inventory, pattern: Option<&str>, format: Format) -> Result<u8, Error> {
    let hosts: Vec<&Host> = match pattern {
        Some(p) => inventory.select(p)?,
        None => inventory.hosts().iter().collect(),
    };
    let mut left_out = Vec::new();
    let text = match format {
        Format::Json => json(&hosts),
        Format::Prometheus => {
            let text;
            (text, left_out) = file_sd(&hosts);
            for (name, why) in &left_out {
                opsbook_base::say!("left out {name}: {why}");
            }
            text
        }
        _ => table(&hosts),
    };
    opsbook_base::secret::stdout().write_all(text.as_bytes()).ok();
    Ok(u8::from(!left_out.is_empty() || hosts.iter().any(|h| !h.problems.is_empty())))
}

/// The file_sd targets of `hosts`, one group per host, as Prometheus reads them:
/// `[{"targets": ["ADDR:PORT"], "labels": {"host": NAME, "roles": "a,b"}}]`, where PORT is
/// that of the host's `serve.listen`. Also the hosts left out, each with the reason.
pub(crate) fn file_sd(hosts: &[&Host]) -> (String, Vec<(String, String)>) {
    let mut groups = Vec::new();
    let mut left_out = Vec::new();
    for h in hosts {
        match scrape_target(h) {
            Ok(target) => {
                let roles: Vec<&str> = h.roles.iter().map(|r| r.value.name()).collect();
                groups.push(json!({"targets": [target], "labels": {"host": h.name, "roles": roles.join(",")}}));
            }
            Err(why) => left_out.push((h.name.clone(), why)),
        }
    }
    (serde_json::to_string_pretty(&groups).unwrap_or_default() + "\n", left_out)
}

/// `ADDR:PORT` of a host's `opsbook serve`: its inventory address, or for this machine the
/// address serve listens on (loopback when it listens on every address).
fn scrape_target(h: &Host) -> Result<String, String> {
    let listen = &h.config().serve.listen;
    let (bind, port) = listen
        .rsplit_once(':')
        .and_then(|(bind, port)| Some((bind, port.parse::<u16>().ok()?)))
        .ok_or_else(|| format!("`serve.listen` is `{listen}`, which names no port"))?;
    let address = match &h.address {
        Some(a) => a.value.clone(),
        None if h.is_local() => match bind.trim_start_matches('[').trim_end_matches(']') {
            "" | "0.0.0.0" => "127.0.0.1".to_string(),
            "::" => "::1".to_string(),
            specific => specific.to_string(),
        },
        None => return Err("its address could not be resolved (`opsbook hosts` says why)".into()),
    };
    // An IPv6 address is bracketed before the port, as in a URL.
    Ok(if address.contains(':') { format!("[{address}]:{port}") } else { format!("{address}:{port}") })
}

fn address(h: &Host) -> String {
    match &h.address {
        Some(a) => a.value.clone(),
        None if h.is_local() => "(this machine)".into(),
        None => "(not resolved)".into(),
    }
}

fn roles(h: &Host) -> String {
    if h.roles.is_empty() { "-".into() } else { h.roles.iter().map(|r| r.value.name()).collect::<Vec<_>>().join(", ") }
}

fn or_dash<T: ToString>(f: &Option<Fact<T>>) -> String {
    f.as_ref().map_or_else(|| "-".to_string(), |f| f.value.to_string())
}

/// Rows as aligned columns, two spaces apart, the last column unpadded.
fn columns(rows: &[Vec<String>]) -> String {
    // Measured as they will be shown: a token's value is `<redacted>` on the way out, control
    // and bidirectional characters escaped.
    let rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.iter().map(|c| opsbook_base::escaped(&opsbook_base::secret::redact(c)).into_owned()).collect())
        .collect();
    let n = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..n).map(|i| rows.iter().map(|r| r.get(i).map_or(0, |c| c.chars().count())).max().unwrap_or(0)).collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            if i + 1 == row.len() {
                line.push_str(cell);
            } else {
                line.push_str(&opsbook_base::padded(cell, widths[i]));
                line.push_str("  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn table(hosts: &[&Host]) -> String {
    let mut rows = vec![["HOST", "ADDRESS", "ROLES", "SCOPE", "USER", "PORT"].map(String::from).to_vec()];
    for h in hosts {
        rows.push(vec![h.name.clone(), address(h), roles(h), h.scope(), or_dash(&h.user), or_dash(&h.port)]);
    }
    let mut out = columns(&rows);
    let mut from = vec![["HOST", "WHAT", "VALUE", "FROM"].map(String::from).to_vec()];
    for h in hosts {
        let mut row = |what: &str, value: String, source: &Source| {
            from.push(vec![h.name.clone(), what.to_string(), value, source.to_string()]);
        };
        match &h.address {
            Some(a) => row("address", a.value.clone(), &a.from),
            None if h.is_local() => row("address", address(h), &Source::Rule("no address: the local machine")),
            None => {}
        }
        for (what, fact) in [("user", &h.user), ("key", &h.key)] {
            if let Some(f) = fact {
                row(what, f.value.clone(), &f.from);
            }
        }
        if let Some(p) = &h.port {
            row("port", p.value.to_string(), &p.from);
        }
        for r in &h.roles {
            row("role", r.value.to_string(), &r.from);
        }
        for o in &h.overrides {
            row(o.key.name, shown_value(h, o), &o.from);
        }
    }
    out.push_str("\nwhere each value came from:\n");
    out.push_str(&columns(&from));
    let problems: Vec<String> = hosts
        .iter()
        .flat_map(|h| h.problems.iter().map(move |p| format!("  {}: `{}` ({}): {}\n", h.name, p.var, p.from, p.reason)))
        .collect();
    if !problems.is_empty() {
        out.push_str("\nnot resolved (nothing was guessed for these):\n");
        out.push_str(&problems.concat());
    }
    out
}

/// A setting's value as shown: secrets (a per-host API token) never are.
fn shown_value(h: &Host, o: &opsbook_inventory::Override) -> String {
    if o.key.secret { "<redacted>".into() } else { h.config().text(o.key) }
}

fn fact<T: serde::Serialize>(f: &Option<Fact<T>>) -> serde_json::Value {
    f.as_ref().map_or(serde_json::Value::Null, |f| json!({"value": f.value, "from": f.from.to_string()}))
}

fn json(hosts: &[&Host]) -> String {
    let rows: Vec<_> = hosts
        .iter()
        .map(|h| {
            json!({
                "name": h.name,
                "local": h.is_local(),
                "address": fact(&h.address),
                "roles": h.roles.iter().map(|r| json!({"role": r.value.name(), "from": r.from.to_string()})).collect::<Vec<_>>(),
                "scope": h.scope(),
                "user": fact(&h.user),
                "port": fact(&h.port),
                "key": fact(&h.key),
                "groups": h.groups,
                "config": h.overrides.iter().map(|o| json!({"key": o.key.name, "value": shown_value(h, o), "from": o.from.to_string()})).collect::<Vec<_>>(),
                "problems": h.problems.iter().map(|p| json!({"var": p.var, "from": p.from.to_string(), "reason": p.reason})).collect::<Vec<_>>(),
            })
        })
        .collect();
    serde_json::to_string_pretty(&json!({ "hosts": rows })).unwrap_or_default() + "\n"
}
