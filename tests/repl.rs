//! The REPL driven through a real terminal (tmux): multi-line input, a persisted variable,
//! completion of a host function, `:run`, and Ctrl-C during a long sleep.

use std::time::{Duration, Instant};

use crate::support::Test;

struct Tmux {
    socket: String,
    _test: Test,
}

impl Tmux {
    fn start(test: Test) -> Option<Tmux> {
        Tmux::start_with(test, "")
    }

    /// Starts `opsbook repl` with extra arguments (e.g. `--sandbox`).
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
        let t = Tmux { socket, _test: test };
        t.wait_for(if args.contains("--sandbox") { "opsbook[sandbox]>" } else { "opsbook>" }, Duration::from_secs(20));
        // The prompt is drawn just before the editor switches the terminal to raw mode.
        std::thread::sleep(Duration::from_millis(100));
        Some(t)
    }

    fn keys(&self, keys: &[&str]) {
        let status =
            std::process::Command::new("tmux").args(["-L", &self.socket, "send-keys"]).args(keys).status().unwrap();
        assert!(status.success());
    }

    /// Types text literally, then presses Enter.
    fn line(&self, text: &str) {
        self.keys(&["-l", text]);
        self.keys(&["Enter"]);
    }

    fn screen(&self) -> String {
        let out = std::process::Command::new("tmux").args(["-L", &self.socket, "capture-pane", "-p"]).output().unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn wait_for(&self, text: &str, limit: Duration) -> Duration {
        let started = Instant::now();
        loop {
            if self.screen().contains(text) {
                return started.elapsed();
            }
            assert!(started.elapsed() < limit, "`{text}` did not appear within {limit:?}:\n{}", self.screen());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = std::process::Command::new("tmux").args(["-L", &self.socket, "kill-server"]).status();
    }
}

#[test]
fn multi_line_input_and_persisted_variables() {
    let Some(t) = Tmux::start(Test::new()) else { return };
    t.line("let base = 40;");
    t.line("fn add_two(x) {");
    t.wait_for("fn add_two(x) {", Duration::from_secs(15));
    t.line("  x + 2");
    t.line("}");
    t.line("add_two(base) * 1000 + 7");
    t.wait_for("42007", Duration::from_secs(15));
    t.line(":vars");
    t.wait_for("base = 40", Duration::from_secs(15));
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
    t.line(":run hello who=operator");
    t.wait_for("hello operator", Duration::from_secs(15));
    t.wait_for("1 passed, 0 failed", Duration::from_secs(15));
    t.line(":doc hello");
    t.wait_for("Says hello.", Duration::from_secs(15));
}

#[test]
fn ctrl_c_cancels_a_long_sleep_within_a_second() {
    let Some(t) = Tmux::start(Test::new()) else { return };
    t.line("sleep(\"1m\"); print(\"not reached\");");
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    t.keys(&["C-c"]);
    t.wait_for("interrupted", Duration::from_secs(15));
    assert!(started.elapsed() < Duration::from_secs(1), "took {:?}", started.elapsed());
    t.line("1 + 1");
    t.wait_for("2", Duration::from_secs(15));
    assert!(!t.screen().lines().any(|l| l.trim() == "not reached"), "{}", t.screen());
}

#[test]
fn the_sandbox_stack_can_be_explored_and_broken() {
    let Some(t) = Tmux::start_with(Test::new(), "--sandbox") else { return };
    t.line(":run quick-check");
    t.wait_for("stack healthy", Duration::from_secs(15));
    t.line("unit::stop(\"loki\")");
    t.line(":run quick-check");
    t.wait_for("stack NOT healthy", Duration::from_secs(15));
    t.line("journal::read(#{unit: \"loki\", lines: 2})");
    t.wait_for("Stopped Loki service.", Duration::from_secs(15));
}
