//! How the REPL shows values: an array of maps (journal entries, query rows, buckets) as an
//! aligned table, a map as key/value lines, a unit status like `systemctl status`'s first
//! lines, everything else as Rhai prints it. Secrets are blanked by the caller.

use rhai::{Array, Dynamic, Map};

use opsbook_engine::verbs::text;
use opsbook_world::units::UnitStatus;

const CELL: usize = 60;

fn cell(value: &Dynamic) -> String {
    let t = text(value).replace('\n', " ");
    if t.chars().count() > CELL { format!("{}…", t.chars().take(CELL - 1).collect::<String>()) } else { t }
}

/// The value as the REPL prints it (no trailing newline); empty for `()`.
pub(super) fn show(value: &Dynamic) -> String {
    if value.is_unit() {
        return String::new();
    }
    if let Some(s) = value.read_lock::<UnitStatus>() {
        return status(&s);
    }
    if let Some(list) = value.read_lock::<Array>()
        && !list.is_empty()
        && list.iter().all(|v| v.is_map())
    {
        return table(&list);
    }
    if let Some(map) = value.read_lock::<Map>() {
        let width = map.keys().map(|k| k.chars().count()).max().unwrap_or(0);
        return map
            .iter()
            .map(|(k, v)| format!("{} : {}", opsbook_base::padded(k, width), text(v)))
            .collect::<Vec<_>>()
            .join("\n");
    }
    if let Some(s) = value.read_lock::<rhai::ImmutableString>() {
        return s.to_string();
    }
    // Arrays and maps to a bounded depth (`[…]` beyond).
    text(value)
}

fn status(s: &UnitStatus) -> String {
    let dot = match s.active_state.as_str() {
        "active" => "●",
        "failed" => "×",
        _ => "○",
    };
    let mut lines = vec![format!("{dot} {} - {}", s.name, s.description)];
    let file = if s.unit_file_state.is_empty() { String::new() } else { format!(" ({})", s.unit_file_state) };
    lines.push(format!("     Loaded: {}{file}", s.load_state));
    let since = s.since.map(|t| format!(" since {}", opsbook_engine::verbs::time_text(t))).unwrap_or_default();
    let result = if s.active_state == "failed" {
        format!(" (Result: {}, status {})", s.result, s.exec_main_status)
    } else {
        String::new()
    };
    lines.push(format!("     Active: {} ({}){result}{since}", s.active_state, s.sub_state));
    if s.main_pid > 0 {
        lines.push(format!("   Main PID: {}", s.main_pid));
    }
    lines.join("\n")
}

fn table(rows: &Array) -> String {
    let mut columns: Vec<String> = Vec::new();
    for row in rows {
        if let Some(m) = row.read_lock::<Map>() {
            for k in m.keys() {
                if !columns.iter().any(|c| c == k.as_str()) {
                    columns.push(k.to_string());
                }
            }
        }
    }
    let cells: Vec<Vec<String>> = rows
        .iter()
        .map(|row| {
            let m = row.read_lock::<Map>().map(|m| m.clone()).unwrap_or_default();
            columns.iter().map(|c| m.get(c.as_str()).map(cell).unwrap_or_default()).collect()
        })
        .collect();
    let widths: Vec<usize> = columns
        .iter()
        .enumerate()
        .map(|(i, c)| cells.iter().map(|r| r[i].chars().count()).max().unwrap_or(0).max(c.len()))
        .collect();
    let line = |values: Vec<String>| -> String {
        values
            .iter()
            .zip(&widths)
            .map(|(v, w)| format!("{v:<w$}", w = *w))
            .collect::<Vec<_>>()
            .join("  ")
            .trim_end()
            .to_string()
    };
    let mut out = vec![line(columns.clone())];
    out.extend(cells.into_iter().map(line));
    out.push(format!("({} rows)", rows.len()));
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arrays_of_maps_become_tables() {
        let mut a = Map::new();
        a.insert("name".into(), "telegraf".into());
        a.insert("retention".into(), Dynamic::from(604800_i64));
        let mut b = Map::new();
        b.insert("name".into(), "_monitoring".into());
        let shown = show(&Dynamic::from_array(vec![a.into(), b.into()]));
        assert_eq!(shown, "name         retention\ntelegraf     604800\n_monitoring\n(2 rows)");
    }

    #[test]
    fn maps_and_scalars() {
        let mut m = Map::new();
        m.insert("ok".into(), true.into());
        m.insert("detail".into(), "HTTP 200".into());
        assert_eq!(show(&m.into()), "detail : HTTP 200\nok     : true");
        assert_eq!(show(&Dynamic::from("x")), "x");
        assert_eq!(show(&Dynamic::UNIT), "");
    }
}
