//! Quoting for the remote side of `ssh HOST -- CMD`: sshd hands the command line to the login
//! user's shell as one string, so every argument must reach it as exactly one word.

/// One argument as a POSIX shell word: left bare when it holds only characters no shell
/// treats specially, otherwise in single quotes (a `'` inside becomes `'\''`).
pub fn quote(arg: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        return arg.to_string();
    }
    format!("'{}'", arg.replace('\'', r"'\''"))
}

/// A whole argv as one command line for the remote shell.
pub fn join(argv: &[String]) -> String {
    argv.iter().map(|a| quote(a)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_words_stay_bare_and_others_are_single_quoted() {
        let argv: Vec<String> =
            ["journalctl", "-o", "json", "_SYSTEMD_UNIT=loki.service", "", "a b", "it's", "$HOME", "x;rm -rf /", "*"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        assert_eq!(
            join(&argv),
            r#"journalctl -o json _SYSTEMD_UNIT=loki.service '' 'a b' 'it'\''s' '$HOME' 'x;rm -rf /' '*'"#
        );
    }

    #[test]
    fn a_real_shell_reads_back_every_argument_unchanged() {
        let args = ["", "a b", "it's", "$HOME", "`id`", "x;y", "tab\there", "new\nline", "ünï", "\\", "\"q\"", "!"];
        let argv: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        let script = format!("for a in {}; do printf '%s\\0' \"$a\"; done", join(&argv));
        let out = std::process::Command::new("sh").args(["-c", &script]).output().expect("sh");
        let seen: Vec<&str> = std::str::from_utf8(&out.stdout).unwrap().split_terminator('\0').collect();
        assert_eq!(seen, args);
    }
}
