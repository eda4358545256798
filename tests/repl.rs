//! The REPL driven through a real terminal (tmux): multi-line input, a persisted variable,
//! lines typed ahead, completion of a host function, `:run`, and Ctrl-C during a long sleep.

use std::time::{Duration, Instant};

use crate::support::Test;

struct Tmux {
    socket: String,
    /// The prompt without its trailing space, as `capture-pane` shows it.
    prompt: &'static str,
    _test: Test,
}

impl Tmux {
    #[track_caller]
    fn start(test: Test) -> Option<Tmux> {
        Tmux::start_with(test, "")
    }

    /// Starts `opsbook repl` with extra arguments (e.g. `--sandbox`).
    #[track_caller]
    fn start_with(test: Test, args: &str) -> Option<Tmux> {
        if std::process::Command::new("tmux").arg("-V").output().is_err() {
            crate::support::skip("tmux is not installed");
            return None;
        }
        let socket =
            format!("opsbook-test-{}-{}", std::process::id(), test.path().file_name().unwrap().to_string_lossy());
        let cmd = format!(
            "env -i PATH=/usr/bin:/bin HOME={d} XDG_STATE_HOME={d}/.state TERM=xterm {bin} repl {args}",
            d = test.path().display(),
            bin = crate::support::opsbook()
        );
        let ok = std::process::Command::new("tmux")
            .args(["-L", &socket, "new-session", "-d", "-x", "150", "-y", "40", "-c"])
            .arg(test.path())
            .arg(cmd)
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        assert!(ok, "tmux new-session failed");
        let prompt = if args.contains("--sandbox") { "opsbook[sandbox]>" } else { "opsbook>" };
        let t = Tmux { socket, prompt, _test: test };
        t.wait_for(prompt, Duration::from_secs(20));
        Some(t)
    }

    #[track_caller]
    fn keys(&self, keys: &[&str]) {
        let status =
            std::process::Command::new("tmux").args(["-L", &self.socket, "send-keys"]).args(keys).status().unwrap();
        assert!(status.success());
    }

    /// Types text literally, waits until the editor shows it, then presses Enter: keys are
    /// only sent to an editor that has shown it reads them, as an operator would type.
    #[track_caller]
    fn line(&self, text: &str) {
        // tmux reads an argument's trailing `;` as its command separator: send that one as hex.
        match text.strip_suffix(';') {
            Some(head) => self.keys(&["-l", head, ";", "send-keys", "-H", "3b"]),
            None => self.keys(&["-l", text]),
        }
        self.wait_until(&format!("the typed `{text}` on the last line"), Duration::from_secs(15), |screen| {
            last_line(screen).contains(text.trim())
        });
        self.keys(&["Enter"]);
    }

    /// Waits for a fresh, empty prompt (the previous line done), then types a line.
    #[track_caller]
    fn command(&self, text: &str) {
        self.wait_until("an empty prompt on the last line", Duration::from_secs(15), |screen| {
            last_line(screen) == self.prompt
        });
        self.line(text);
    }

    #[track_caller]
    fn screen(&self) -> String {
        let out = std::process::Command::new("tmux").args(["-L", &self.socket, "capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    #[track_caller]
    fn wait_for(&self, text: &str, limit: Duration) {
        self.wait_until(&format!("`{text}`"), limit, |screen| screen.contains(text));
    }

    #[track_caller]
    fn wait_until(&self, what: &str, limit: Duration, seen: impl Fn(&str) -> bool) {
        crate::support::wait_until(what, limit, || {
            let screen = self.screen();
            if seen(&screen) { Ok(()) } else { Err(format!("the screen\n{screen}")) }
        });
    }
}

/// The last non-blank line of a screen, without trailing blanks.
fn last_line(screen: &str) -> &str {
    screen.lines().map(str::trim_end).rfind(|l| !l.is_empty()).unwrap_or("")
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

#[test]
fn multi_line_input_and_persisted_variables() {
    let Some(t) = Tmux::start(Test::new()) else { return };
    t.command("let base = 40;");
    t.line("fn add_two(x) {");
    t.line("  x + 2");
    t.line("}");
    t.command("add_two(base) * 1000 + 7");
    t.wait_for("42007", Duration::from_secs(15));
    t.command(":vars");
    t.wait_for("base = 40", Duration::from_secs(15));
}

#[test]
fn lines_typed_ahead_are_kept() {
    // One burst, as a paste without bracketed paste arrives: the editor reads both lines at
    // once, and the second must not be dropped with its read-ahead when the first is accepted.
    let Some(t) = Tmux::start(Test::new()) else { return };
    #[rustfmt::skip]
    t.keys(&[
        "-l", "print(\"first\")", ";", "send-keys", "Enter", ";",
        "send-keys", "-l", "print(\"sec\" + \"ond\")", ";", "send-keys", "Enter",
    ]);
    t.wait_until("the typed-ahead line's output `second`", Duration::from_secs(15), |screen| {
        screen.lines().any(|l| l.trim() == "second")
    });
}

#[test]
fn tab_completes_host_functions() {
    let Some(t) = Tmux::start(Test::new()) else { return };
    t.keys(&["-l", "wait::unt"]);
    t.keys(&["Tab"]);
    t.wait_for("wait::until", Duration::from_secs(15));
    t.keys(&["C-u"]);
    t.keys(&["-l", "duration(\"1m\""]);
    t.keys(&[")"]);
    t.keys(&["Enter"]);
    t.wait_for("60.0", Duration::from_secs(15));
}

#[test]
fn run_prints_a_runbooks_report() {
    let test = Test::new()
        .runbook("hello", "//! Says hello.\nlet who = param(\"who\", \"world\");\ncheck(`hello ${who}`, true);");
    let Some(t) = Tmux::start(test) else { return };
    t.command(":run hello who=operator");
    t.wait_for("hello operator", Duration::from_secs(15));
    t.wait_for("1 passed, 0 failed", Duration::from_secs(15));
    t.command(":doc hello");
    t.wait_for("Says hello.", Duration::from_secs(15));
}

#[test]
fn ctrl_c_cancels_a_long_sleep_within_a_second() {
    let Some(t) = Tmux::start(Test::new()) else { return };
    // Ctrl-C once the statement runs: it prints a line of its own before it sleeps.
    t.command("print(\"sleeping now\"); sleep(\"1m\"); print(\"not reached\");");
    t.wait_until("the output `sleeping now`", Duration::from_secs(15), |screen| {
        screen.lines().any(|l| l.trim() == "sleeping now")
    });
    let started = Instant::now();
    t.keys(&["C-c"]);
    t.wait_for("interrupted", Duration::from_secs(15));
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    t.command("1 + 1");
    t.wait_until("the result 2", Duration::from_secs(15), |screen| screen.lines().any(|l| l.trim() == "2"));
    assert!(!t.screen().lines().any(|l| l.trim() == "not reached"), "{}", t.screen());
}

#[test]
fn the_sandbox_stack_can_be_explored_and_broken() {
    let Some(t) = Tmux::start_with(Test::new(), "--sandbox") else { return };
    t.command(":run quick-check");
    t.wait_for("stack healthy", Duration::from_secs(15));
    t.command("unit::stop(\"loki\")");
    t.command(":run quick-check");
    t.wait_for("stack NOT healthy", Duration::from_secs(15));
    t.command("journal::read(#{unit: \"loki\", lines: 2})");
    t.wait_for("Stopped Loki service.", Duration::from_secs(15));
}
