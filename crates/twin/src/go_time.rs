//! Times and durations as Go prints them, for the twins of Go programs: `time.Duration`'s
//! `String` (`1m2.5s`, `3.215ms`, `0s`), which InfluxDB's `/ready` `up` and Telegraf's
//! "Wrote batch of N metrics in …" print, and `time.RFC3339Nano` (trailing zeros of the
//! fraction dropped).

use std::time::{Duration, SystemTime};

/// Go's `time.Duration.String()` (go/src/time/time.go): under a second in the largest unit
/// that fits (`ns`, `µs`, `ms`) with up to nine fraction digits, else `[Hh][Mm]S.FFFs`,
/// trailing zeros of the fraction dropped.
pub(crate) fn duration(d: Duration) -> String {
    let ns = d.as_nanos();
    if ns == 0 {
        return "0s".into();
    }
    if ns < 1_000 {
        return format!("{ns}ns");
    }
    if ns < 1_000_000 {
        return format!("{}µs", fraction(ns, 1_000));
    }
    if ns < 1_000_000_000 {
        return format!("{}ms", fraction(ns, 1_000_000));
    }
    let total_s = ns / 1_000_000_000;
    let (h, m) = (total_s / 3600, total_s / 60 % 60);
    let s = fraction(ns % 60_000_000_000, 1_000_000_000);
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// `value / unit` with the remainder as a decimal fraction, trailing zeros dropped.
fn fraction(value: u128, unit: u128) -> String {
    let (whole, rest) = (value / unit, value % unit);
    if rest == 0 {
        return whole.to_string();
    }
    let digits = unit.to_string().len() - 1;
    let frac = format!("{rest:0digits$}");
    format!("{whole}.{}", frac.trim_end_matches('0'))
}

/// Go's `t.Format(time.RFC3339Nano)` of a UTC time: `2026-11-23T10:00:10.5Z`.
pub(crate) fn rfc3339_nano(t: SystemTime) -> String {
    let text = humantime::format_rfc3339_nanos(t).to_string();
    match text.strip_suffix('Z').and_then(|t| t.split_once('.')) {
        Some((whole, frac)) => {
            let frac = frac.trim_end_matches('0');
            if frac.is_empty() { format!("{whole}Z") } else { format!("{whole}.{frac}Z") }
        }
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        let cases = [
            (Duration::ZERO, "0s"),
            (Duration::from_nanos(999), "999ns"),
            (Duration::from_nanos(1_500), "1.5µs"),
            (Duration::from_micros(3_215), "3.215ms"),
            (Duration::from_millis(2_500), "2.5s"),
            (Duration::from_millis(62_500), "1m2.5s"),
            (Duration::from_secs(3_600), "1h0m0s"),
            (Duration::from_secs(7 * 3_600 + 61), "7h1m1s"),
        ];
        for (d, text) in cases {
            assert_eq!(duration(d), text, "{d:?}");
        }
    }

    #[test]
    fn rfc3339_nano_drops_trailing_zeros() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_500);
        assert_eq!(rfc3339_nano(t), "1970-01-01T00:00:01.5Z");
        assert_eq!(rfc3339_nano(SystemTime::UNIX_EPOCH + Duration::from_secs(2)), "1970-01-01T00:00:02Z");
    }
}
