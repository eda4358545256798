//! What Loki 3 adds to what was pushed: a `service_name` label on every stream (discovered
//! from the usual labels, else `unknown_service`) and a `detected_level` for every line (from
//! structured metadata, a `level=`-style field, or keywords), so streams carry labels nobody
//! pushed (`query-range-streams.json`).

use serde_json::Value;

use super::state::Labels;

/// Loki 3's `service_name`: kept if pushed, else taken from the first of the usual labels,
/// else `unknown_service`.
pub(super) fn with_service_name(mut labels: Labels) -> Labels {
    const FROM: [&str; 13] = [
        "service",
        "app",
        "application",
        "app_name",
        "name",
        "app_kubernetes_io_name",
        "container",
        "container_name",
        "k8s_container_name",
        "component",
        "workload",
        "job",
        "k8s_job_name",
    ];
    if labels.iter().any(|(k, _)| k == "service_name") {
        return labels;
    }
    let value = FROM
        .iter()
        .find_map(|want| labels.iter().find(|(k, _)| k == want).map(|(_, v)| v.clone()))
        .unwrap_or_else(|| "unknown_service".into());
    labels.push(("service_name".into(), value));
    labels.sort();
    labels
}

fn normalise_level(text: &str) -> Option<&'static str> {
    Some(match text.to_ascii_lowercase().as_str() {
        "trace" | "trc" => "trace",
        "debug" | "dbg" => "debug",
        "info" | "inf" | "information" | "notice" => "info",
        "warn" | "warning" | "wrn" => "warn",
        "error" | "err" | "eror" => "error",
        "critical" | "crit" | "fatal" | "panic" | "emerg" | "alert" => "critical",
        _ => return None,
    })
}

/// Loki 3's `detected_level`: from structured metadata, a `level=`-style field (logfmt or
/// JSON), or keywords in the line; `unknown` otherwise.
pub(super) fn detect_level(line: &str, metadata: &[(String, String)]) -> &'static str {
    const KEYS: [&str; 5] = ["level", "lvl", "severity", "loglevel", "log_level"];
    for (k, v) in metadata {
        if KEYS.contains(&k.to_ascii_lowercase().as_str())
            && let Some(l) = normalise_level(v)
        {
            return l;
        }
    }
    if line.trim_start().starts_with('{')
        && let Ok(Value::Object(obj)) = serde_json::from_str::<Value>(line)
    {
        for (k, v) in &obj {
            if KEYS.contains(&k.to_ascii_lowercase().as_str())
                && let Some(l) = v.as_str().and_then(normalise_level)
            {
                return l;
            }
        }
    }
    for token in line.split_whitespace() {
        if let Some((k, v)) = token.split_once('=')
            && KEYS.contains(&k.to_ascii_lowercase().as_str())
            && let Some(l) = normalise_level(v.trim_matches('"'))
        {
            return l;
        }
    }
    if line.contains("info") || line.contains("INFO") {
        "info"
    } else if line.contains("err:") || line.contains("ERR:") || line.contains("error") || line.contains("ERROR") {
        "error"
    } else if line.contains("warn") || line.contains("WARN") {
        "warn"
    } else if line.contains("CRITICAL") || line.contains("critical") || line.contains("fatal") || line.contains("FATAL")
    {
        "critical"
    } else if line.contains("debug") || line.contains("DEBUG") {
        "debug"
    } else {
        "unknown"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> Labels {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn service_name_and_detected_level_as_loki_3() {
        assert_eq!(
            with_service_name(labels(&[("hostname", "h1"), ("service_type", "test")])),
            labels(&[("hostname", "h1"), ("service_name", "unknown_service"), ("service_type", "test")])
        );
        assert_eq!(with_service_name(labels(&[("job", "x")]))[1], ("service_name".into(), "x".into()));
        assert_eq!(detect_level("ceo-tools test line level=info msg=\"hello loki\"", &[]), "info");
        assert_eq!(detect_level(r#"{"lvl":"WARNING","msg":"x"}"#, &[]), "warn");
        assert_eq!(detect_level("something ERROR happened", &[]), "error");
        assert_eq!(detect_level("plain words", &[]), "unknown");
    }
}
