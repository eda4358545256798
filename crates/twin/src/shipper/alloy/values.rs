//! Alloy's texts for values that are not strings to the twin: Go durations (`"12h"`,
//! `"1m30s"`) and base-2 sizes (`"1MiB"`), as `max_age`, `batch_wait` and `batch_size` take them.

use std::time::Duration;

/// Go's `time.ParseDuration`: a sequence of decimal numbers with units (`1h30m`, `1.5s`,
/// `300ms`); `0` alone is zero.
pub(super) fn go_duration(text: &str) -> Option<Duration> {
    let body = text.strip_prefix('+').unwrap_or(text);
    if body == "0" {
        return Some(Duration::ZERO);
    }
    if body.is_empty() {
        return None;
    }
    let mut rest = body;
    let mut total = 0f64;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let number: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit() || c == '.').unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        total += number * seconds;
        rest = &rest[unit_len..];
    }
    Some(Duration::from_secs_f64(total))
}

/// A size as Alloy's `batch_size` takes it (base 2): `1MiB`, `512KiB`, `1MB`, `100B`.
pub(super) fn base2_bytes(text: &str) -> Option<usize> {
    let split = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let n: usize = text[..split].parse().ok()?;
    let unit = match &text[split..] {
        "B" | "" => 1,
        "KiB" | "KB" | "K" => 1 << 10,
        "MiB" | "MB" | "M" => 1 << 20,
        "GiB" | "GB" | "G" => 1 << 30,
        _ => return None,
    };
    n.checked_mul(unit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_and_sizes() {
        assert_eq!(go_duration("1h30m"), Some(Duration::from_secs(5400)));
        assert_eq!(go_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(go_duration("12 hours"), None);
        assert_eq!(base2_bytes("1MiB"), Some(1 << 20));
        assert_eq!(base2_bytes("2x"), None);
    }
}
