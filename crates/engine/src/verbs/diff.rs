//! What a file change looks like to an operator: a unified diff (`--- PATH`, `+++ PATH`,
//! hunks) with every secret masked, and mode or owner changes named on the `+++` line.
//!
//! The diff is made from the real texts and masked afterwards, so a changed secret still
//! shows as a changed line (`-token = "********"`, `+token = "********"`) without its value.

/// What a secret becomes in a diff.
pub(crate) const MASK: &str = "********";

/// `text` with every secret replaced by `MASK`, the longest first (so a secret that contains
/// another is masked whole).
pub(crate) fn mask(text: &str, secrets: &[String]) -> String {
    let mut secrets: Vec<&String> = secrets.iter().filter(|s| !s.is_empty()).collect();
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.iter().fold(text.to_string(), |out, s| out.replace(s.as_str(), MASK))
}

/// The unified diff from `old` to `new` (`None`: no file) at `path`, three lines of context,
/// `meta` (e.g. `mode 0644 → 0640`) on the `+++` line, secrets masked. Empty when nothing
/// differs.
pub(crate) fn unified(path: &str, old: Option<&str>, new: Option<&str>, meta: &[String], secrets: &[String]) -> String {
    let hunks: String = {
        let diff = similar::TextDiff::from_lines(old.unwrap_or(""), new.unwrap_or(""));
        let mut unified = diff.unified_diff();
        unified.context_radius(3);
        unified.iter_hunks().map(|h| h.to_string()).collect()
    };
    if hunks.is_empty() && meta.is_empty() && old.is_some() == new.is_some() {
        return String::new();
    }
    let from = if old.is_some() { path } else { "/dev/null" };
    let to = if new.is_some() { path } else { "/dev/null" };
    let meta = if meta.is_empty() { String::new() } else { format!(" ({})", meta.join(", ")) };
    mask(&format!("--- {from}\n+++ {to}{meta}\n{hunks}"), secrets)
}

/// `+N -M`: the lines a diff adds and removes, for one-line reports.
pub(crate) fn counts(diff: &str) -> (usize, usize) {
    let body = diff.lines().skip(2);
    body.fold((0, 0), |(a, r), l| {
        if l.starts_with('+') {
            (a + 1, r)
        } else if l.starts_with('-') {
            (a, r + 1)
        } else {
            (a, r)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const OLD: &str = "[write]\nurl = \"http://db:8086\"\ntoken = \"old-secret-1\"\nbucket = \"telegraf\"\n";
    const NEW: &str = "[write]\nurl = \"http://db:8086\"\ntoken = \"new-secret-22\"\nbucket = \"metrics\"\n";

    #[test]
    fn a_changed_secret_shows_as_changed_but_never_its_value() {
        let secrets = vec!["new-secret-22".to_string(), "old-secret-1".to_string()];
        let diff = unified("/etc/agent.conf", Some(OLD), Some(NEW), &[], &secrets);
        assert_eq!(
            diff,
            "--- /etc/agent.conf\n+++ /etc/agent.conf\n@@ -1,4 +1,4 @@\n [write]\n url = \"http://db:8086\"\n\
             -token = \"********\"\n-bucket = \"telegraf\"\n+token = \"********\"\n+bucket = \"metrics\"\n"
        );
        assert_eq!(counts(&diff), (2, 2));
    }

    #[test]
    fn a_new_file_a_removed_file_and_metadata_alone() {
        assert_eq!(
            unified("/etc/x", None, Some("a\nb\n"), &["mode 0640".into()], &[]),
            "--- /dev/null\n+++ /etc/x (mode 0640)\n@@ -0,0 +1,2 @@\n+a\n+b\n"
        );
        assert_eq!(unified("/etc/x", Some("a\n"), None, &[], &[]), "--- /etc/x\n+++ /dev/null\n@@ -1 +0,0 @@\n-a\n");
        assert_eq!(
            unified("/etc/x", Some("a\n"), Some("a\n"), &["mode 0644 → 0640".into(), "group root → loki".into()], &[]),
            "--- /etc/x\n+++ /etc/x (mode 0644 → 0640, group root → loki)\n"
        );
        assert_eq!(unified("/etc/x", Some("a\n"), Some("a\n"), &[], &[]), "");
    }

    #[test]
    fn masking_takes_the_longest_secret_first_and_skips_empty_ones() {
        let secrets = vec!["abc".to_string(), "abcdef".to_string(), String::new()];
        assert_eq!(mask("x abcdef y abc", &secrets), "x ******** y ********");
    }
}
