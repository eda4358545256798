//! Passwords written into URLs (`http://bob:S3CRET@host:3100`): found in any text, so the
//! redactor blanks them wherever a URL is quoted — a configuration value, a failed request's
//! error, a line a runbook logs — and learned as secrets when a configuration is read, so the
//! password is blanked on its own too (as the token is).

use std::borrow::Cow;
use std::ops::Range;

/// Where each password sits in `text`: the part between `user:` and the last `@` of a URL's
/// authority (`scheme://user:password@host`).
fn passwords(text: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("://") {
        let start = from + at + 3;
        // The authority ends where a path, query, fragment or the quoted text does.
        let end = text[start..]
            .find(|c: char| c.is_whitespace() || "/?#\"'`<>".contains(c))
            .map_or(text.len(), |n| start + n);
        let authority = &text[start..end];
        if let Some(userinfo_end) = authority.rfind('@')
            && let Some(colon) = authority[..userinfo_end].find(':')
            && colon + 1 < userinfo_end
        {
            found.push(start + colon + 1..start + userinfo_end);
        }
        from = end.max(start);
    }
    found
}

/// `text` with every URL's password replaced by `replacement`.
pub(super) fn blank<'a>(text: &'a str, replacement: &str) -> Cow<'a, str> {
    let found = passwords(text);
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut done = 0;
    for range in found {
        out.push_str(&text[done..range.start]);
        out.push_str(replacement);
        done = range.end;
    }
    out.push_str(&text[done..]);
    Cow::Owned(out)
}

/// Learns the password of every URL in `text` as a secret, as written and percent-decoded:
/// the ones `blank` finds, and on each line the one from `user:` to the line's last `@`,
/// whatever it holds — a password with `'`, `"`, a blank, `<`, `` ` ``, `#`, `/` or `?` ends no
/// URL a reader of a configuration line or value would see.
pub fn learn(text: &str) {
    for range in passwords(text).into_iter().chain(whole_line_passwords(text)) {
        let written = &text[range];
        super::value::Secret::new(written);
        let decoded = percent_decoded(written);
        if decoded != written {
            super::value::Secret::new(decoded);
        }
    }
}

/// On each line, the password of the first URL read to the line's last `@`: `user:` right
/// after `://`, a user without blanks or slashes, and not a port followed by a path.
fn whole_line_passwords(text: &str) -> Vec<Range<usize>> {
    let mut found = Vec::new();
    let mut line_start = 0;
    for line in text.split_inclusive('\n') {
        if let Some(at) = line.find("://") {
            let start = at + 3;
            if let Some(end) = line.rfind('@').filter(|&end| end > start)
                && let Some(colon) = line[start..end].find(':')
            {
                let user = &line[start..start + colon];
                let password = &line[start + colon + 1..end];
                let port_and_path = password.split('/').next().is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
                    && password.contains('/');
                if !password.is_empty()
                    && !port_and_path
                    && !user.contains(|c: char| c.is_whitespace() || "/?#\"'`<>".contains(c))
                {
                    found.push(line_start + start + colon + 1..line_start + end);
                }
            }
        }
        line_start += line.len();
    }
    found
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_password_of_each_url_is_blanked_and_nothing_else() {
        let cases = [
            ("GET http://bob:S3CRET@host:3100/x: refused", "GET http://bob:<p>@host:3100/x: refused"),
            ("\"https://u:a:b@h\" and ftp://v:w@i?x", "\"https://u:<p>@h\" and ftp://v:<p>@i?x"),
            ("a user alone http://bob@host/ and no url", "a user alone http://bob@host/ and no url"),
            ("an empty password http://bob:@host", "an empty password http://bob:@host"),
            ("(http://bob:p@ss@host)", "(http://bob:<p>@host)"),
            ("http://host:3100/x@y and :// alone", "http://host:3100/x@y and :// alone"),
        ];
        for (text, shown) in cases {
            assert_eq!(blank(text, "<p>"), shown, "{text}");
        }
    }

    #[test]
    fn a_learned_password_is_redacted_on_its_own_as_written_and_decoded() {
        learn("url = \"http://bob:pa%24%24word-71@host\"");
        assert_eq!(super::super::redact("said pa$$word-71 and pa%24%24word-71"), "said <redacted> and <redacted>");
    }

    #[test]
    fn a_password_holding_what_ends_a_url_is_learned_whole() {
        for password in
            ["q'uote-52", "bl ank-52", "dq\"uote-52", "l<t-52", "back`tick-52", "ha#sh-52", "sl/ash-52", "qu?ery-52"]
        {
            learn(&format!("url = \"http://bob:{password}@host:3100\""));
            let shown =
                super::super::redact(&format!("GET http://bob:{password}@host:3100/x and {password}")).into_owned();
            assert_eq!(shown, "GET http://bob:<redacted>@host:3100/x and <redacted>", "{password}");
        }
        assert!(whole_line_passwords("url = \"http://host:3100/x@y\"").is_empty());
    }
}
