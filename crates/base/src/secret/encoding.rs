//! Every form a secret takes in what opsbook writes: as it is, escaped by each writer (JSON
//! strings — reports, `/api/runs`, the history file —, XML and HTML text and attributes — JUnit,
//! the page —, URL percent-encoding — a query string), and each line of a multi-line one on
//! its own (output is redacted line by line). The redactor knows them all, so `S3&cretPW`
//! is blanked as `S3&amp;cretPW` in JUnit and `a"b\c` as `a\"b\\c` in JSON.

/// `text`, each of its lines when it has several, and each of those as every writer escapes it.
pub(super) fn forms(text: &str) -> Vec<String> {
    let mut pieces = vec![text.to_string()];
    if text.contains('\n') {
        pieces.extend(text.lines().map(str::trim).filter(|l| !l.is_empty()).map(str::to_string));
    }
    let mut out = Vec::new();
    for piece in pieces {
        // The writers' own escaping (JUnit's, the page's), so the two cannot drift apart.
        let escaped = [json(&piece), crate::shown::xml(&piece), crate::shown::html(&piece), percent(&piece)];
        for form in std::iter::once(piece).chain(escaped) {
            if !out.contains(&form) {
                out.push(form);
            }
        }
    }
    out
}

/// Inside a JSON string, as serde_json writes it (no quotes around).
fn json(text: &str) -> String {
    let quoted = serde_json::to_string(text).unwrap_or_default();
    quoted.get(1..quoted.len().saturating_sub(1)).unwrap_or_default().to_string()
}

/// Percent-encoded as in a URL's query: every byte but the unreserved ones.
fn percent(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_writer_s_form_and_each_line_is_a_form() {
        assert_eq!(
            forms("S3&cret\"P'W"),
            [
                "S3&cret\"P'W",
                "S3&cret\\\"P'W",
                "S3&amp;cret&quot;P&apos;W",
                "S3&amp;cret&quot;P&#39;W",
                "S3%26cret%22P%27W"
            ]
        );
        assert_eq!(
            forms("line-one\nline-two"),
            ["line-one\nline-two", "line-one\\nline-two", "line-one%0Aline-two", "line-one", "line-two"]
        );
    }
}
