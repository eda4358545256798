//! Telegraf's `system` input: three metrics named `system` per gather, as Telegraf writes
//! them — the load averages with `n_cpus` (and `n_users`, `n_unique_users` when the login
//! records in /var/run/utmp can be read), `uptime` in seconds, and `uptime_format` as text
//! (`3 days, 4:05`).

use opsbook_wire::line_protocol::FieldValue;

/// The fields of the three `system` metrics, read from /proc (and /var/run/utmp).
pub(super) fn gather() -> Result<Vec<Vec<(String, FieldValue)>>, String> {
    let read = |path: &str| std::fs::read_to_string(path).map_err(|e| format!("[inputs.system] reading {path}: {e}"));
    let load = read("/proc/loadavg")?;
    let uptime = read("/proc/uptime")?;
    let stat = read("/proc/stat")?;
    let users = std::fs::read("/var/run/utmp").ok().map(|b| login_users(&b));
    let uptime = parse_uptime(&uptime).ok_or("[inputs.system] /proc/uptime holds no uptime")?;
    let mut first = load_fields(&load).ok_or("[inputs.system] /proc/loadavg holds no load averages")?;
    first.push(("n_cpus".into(), FieldValue::Int(count_cpus(&stat) as i64)));
    if let Some(users) = users {
        let mut unique = users.clone();
        unique.sort();
        unique.dedup();
        first.push(("n_unique_users".into(), FieldValue::Int(unique.len() as i64)));
        first.push(("n_users".into(), FieldValue::Int(users.len() as i64)));
    }
    first.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(vec![
        first,
        vec![("uptime".into(), FieldValue::Int(uptime as i64))],
        vec![("uptime_format".into(), FieldValue::Str(format_uptime(uptime)))],
    ])
}

fn load_fields(text: &str) -> Option<Vec<(String, FieldValue)>> {
    let mut parts = text.split_whitespace().map(|p| p.parse::<f64>().ok());
    let (l1, l5, l15) = (parts.next()??, parts.next()??, parts.next()??);
    Some(vec![
        ("load1".into(), FieldValue::Float(l1)),
        ("load15".into(), FieldValue::Float(l15)),
        ("load5".into(), FieldValue::Float(l5)),
    ])
}

/// Whole seconds since boot (the first number of /proc/uptime).
fn parse_uptime(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse::<f64>().ok().map(|s| s as u64)
}

/// Logical CPUs: the `cpuN` lines of /proc/stat.
fn count_cpus(stat: &str) -> usize {
    stat.lines().filter(|l| l.starts_with("cpu") && l.as_bytes().get(3).is_some_and(u8::is_ascii_digit)).count()
}

/// The user names of the USER_PROCESS records of a utmp file (glibc's 384-byte records:
/// `ut_type` first, `ut_user` 32 bytes at offset 44).
fn login_users(utmp: &[u8]) -> Vec<String> {
    const RECORD: usize = 384;
    const USER_PROCESS: i32 = 7;
    utmp.chunks_exact(RECORD)
        .filter(|r| i32::from_ne_bytes([r[0], r[1], r[2], r[3]]) == USER_PROCESS)
        .map(|r| {
            let name = &r[44..76];
            let end = name.iter().position(|b| *b == 0).unwrap_or(name.len());
            String::from_utf8_lossy(&name[..end]).into_owned()
        })
        .collect()
}

/// Telegraf's uptime text: `[N day(s), ]HH:MM`, hours padded to two columns.
pub(super) fn format_uptime(seconds: u64) -> String {
    let days = seconds / 86_400;
    let mut out = String::new();
    if days != 0 {
        out.push_str(&format!("{days} day{}, ", if days > 1 { "s" } else { "" }));
    }
    out.push_str(&format!("{:2}:{:02}", seconds / 3600 % 24, seconds / 60 % 60));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_and_texts() {
        assert_eq!(
            load_fields("0.52 0.58 0.59 1/189 12345\n"),
            Some(vec![
                ("load1".into(), FieldValue::Float(0.52)),
                ("load15".into(), FieldValue::Float(0.59)),
                ("load5".into(), FieldValue::Float(0.58)),
            ])
        );
        assert_eq!(parse_uptime("350735.47 234388.90\n"), Some(350_735));
        assert_eq!(count_cpus("cpu  1 2 3\ncpu0 1 2\ncpu1 1 2\nintr 5\n"), 2);
        assert_eq!(format_uptime(350_735), "4 days,  1:25");
        assert_eq!(format_uptime(86_400 + 3600 * 13 + 60 * 7), "1 day, 13:07");
        assert_eq!(format_uptime(59), " 0:00");
        let mut record = vec![0u8; 384];
        record[..4].copy_from_slice(&7i32.to_ne_bytes());
        record[44..48].copy_from_slice(b"root");
        let mut boot = vec![0u8; 384];
        boot[..4].copy_from_slice(&2i32.to_ne_bytes());
        assert_eq!(login_users(&[record.clone(), boot, record].concat()), vec!["root", "root"]);
    }
}
