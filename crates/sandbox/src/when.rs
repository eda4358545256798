//! The time texts `journalctl --since/--until` understands, for the sandbox's journal: what
//! runbooks pass (`now()`'s `2026-11-22 09:31:05 UTC`, "1 hour ago", "today", "09:00") must
//! select the same entries in the sandbox as on a real host. Local times use the machine's
//! time zone, as journalctl does.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Microseconds since the epoch for a journalctl time text, or why it is not one.
pub(crate) fn parse(text: &str, now_us: u64) -> Result<u64, String> {
    let t = text.trim();
    let bad = || {
        format!(
            "`{text}` is not a time journalctl understands (e.g. \"1 hour ago\", \"today\", \"2026-11-22 09:00:00\", \"-5min\")"
        )
    };
    let lower = t.to_ascii_lowercase();
    let midnight = |days_back: u64| local_midnight(now_us).saturating_sub(days_back * 86_400_000_000);
    match lower.as_str() {
        "now" => return Ok(now_us),
        "today" => return Ok(midnight(0)),
        "yesterday" => return Ok(midnight(1)),
        "tomorrow" => return Ok(midnight(0) + 86_400_000_000),
        _ => {}
    }
    if let Some(epoch) = t.strip_prefix('@') {
        let secs: f64 = epoch.parse().map_err(|_| bad())?;
        return Ok((secs * 1e6) as u64);
    }
    if let Some(ago) = lower.strip_suffix(" ago") {
        return Ok(now_us.saturating_sub(span(ago).ok_or_else(bad)?));
    }
    if let Some(rest) = lower.strip_prefix('-') {
        return Ok(now_us.saturating_sub(span(rest).ok_or_else(bad)?));
    }
    if let Some(rest) = lower.strip_prefix('+') {
        return Ok(now_us + span(rest).ok_or_else(bad)?);
    }
    absolute(t, now_us).ok_or_else(bad)
}

/// "1 hour", "5min", "2h 30m", "90s".
fn span(text: &str) -> Option<u64> {
    let compact: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    opsbook_base::config::parse_duration(&compact)
        .or_else(|| opsbook_base::config::parse_duration(&compact.replace(' ', "")))
        .or_else(|| humantime::parse_duration(&compact).ok())
        .map(|d: Duration| d.as_micros() as u64)
}

/// `YYYY-MM-DD [HH:MM[:SS[.ffffff]]] [UTC]` or `HH:MM[:SS]` (today).
fn absolute(text: &str, now_us: u64) -> Option<u64> {
    let (text, utc) = match text.strip_suffix(" UTC").or_else(|| text.strip_suffix('Z')) {
        Some(t) => (t.trim(), true),
        None => (text, false),
    };
    let (date, time) = match text.split_once([' ', 'T']) {
        Some((d, t)) => (Some(d), t),
        None if text.contains('-') => (Some(text), "00:00:00"),
        None => (None, text),
    };
    let mut hms = time.split(':');
    let hour: i64 = hms.next()?.parse().ok()?;
    let minute: i64 = hms.next()?.parse().ok()?;
    let (second, micros) = match hms.next() {
        Some(s) => match s.split_once('.') {
            Some((s, frac)) => {
                let digits: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
                (s.parse::<i64>().ok()?, digits.parse::<i64>().ok()?)
            }
            None => (s.parse().ok()?, 0),
        },
        None => (0, 0),
    };
    if hms.next().is_some() || !(0..24).contains(&hour) || !(0..60).contains(&minute) || !(0..61).contains(&second) {
        return None;
    }
    let (year, month, day) = match date {
        Some(d) => {
            let mut p = d.split('-');
            let y: i64 = p.next()?.parse().ok()?;
            let m: i64 = p.next()?.parse().ok()?;
            let day: i64 = p.next()?.parse().ok()?;
            if p.next().is_some() || !(1..=12).contains(&m) || !(1..=31).contains(&day) {
                return None;
            }
            (y, m, day)
        }
        None => {
            let today = local_fields(now_us);
            (today.tm_year as i64 + 1900, today.tm_mon as i64 + 1, today.tm_mday as i64)
        }
    };
    let secs = if utc {
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second
    } else {
        // SAFETY: a zeroed tm is valid input; mktime reads the fields set below.
        let mut tm: libc::tm = unsafe { std::mem::zeroed() };
        tm.tm_year = (year - 1900) as i32;
        tm.tm_mon = (month - 1) as i32;
        tm.tm_mday = day as i32;
        tm.tm_hour = hour as i32;
        tm.tm_min = minute as i32;
        tm.tm_sec = second as i32;
        tm.tm_isdst = -1;
        // SAFETY: tm is a valid, initialised struct.
        (unsafe { libc::mktime(&mut tm) }) as i64
    };
    u64::try_from(secs * 1_000_000 + micros).ok()
}

fn local_fields(us: u64) -> libc::tm {
    let secs = (us / 1_000_000) as libc::time_t;
    // SAFETY: localtime_r writes into the zeroed tm it is given.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    }
}

fn local_midnight(now_us: u64) -> u64 {
    let tm = local_fields(now_us);
    let into_day = (tm.tm_hour as u64 * 3600 + tm.tm_min as u64 * 60 + tm.tm_sec as u64) * 1_000_000;
    (now_us / 1_000_000 * 1_000_000).saturating_sub(into_day)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Now, in microseconds since the epoch.
pub(crate) fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: u64 = 1_795_000_000_000_000;

    #[test]
    fn relative_and_named_times() {
        assert_eq!(parse("1 hour ago", NOW), Ok(NOW - 3_600_000_000));
        assert_eq!(parse("5min ago", NOW), Ok(NOW - 300_000_000));
        assert_eq!(parse("-30s", NOW), Ok(NOW - 30_000_000));
        assert_eq!(parse("now", NOW), Ok(NOW));
        assert!(parse("today", NOW).unwrap() <= NOW && NOW - parse("today", NOW).unwrap() < 86_400_000_000);
        assert_eq!(parse("@1795000000", NOW), Ok(NOW));
        assert_eq!(
            parse("last tuesday-ish", NOW).unwrap_err(),
            "`last tuesday-ish` is not a time journalctl understands (e.g. \"1 hour ago\", \"today\", \"2026-11-22 09:00:00\", \"-5min\")"
        );
    }

    #[test]
    fn absolute_utc_times_like_now_prints() {
        assert_eq!(parse("1970-01-02 00:00:01 UTC", NOW), Ok(86_401_000_000));
        assert_eq!(parse("2026-11-22 09:31:05 UTC", NOW), Ok(1_795_339_865_000_000));
        assert_eq!(parse("2026-11-22T09:31:05.5Z", NOW), Ok(1_795_339_865_500_000));
        assert_eq!(
            parse("2026-13-01", NOW).unwrap_err(),
            "`2026-13-01` is not a time journalctl understands (e.g. \"1 hour ago\", \"today\", \"2026-11-22 09:00:00\", \"-5min\")"
        );
    }
}
