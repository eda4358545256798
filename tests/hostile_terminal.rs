//! Hostile input, round three (#50 case 4): every text from outside reaches the terminal
//! through one writer (`opsbook_base::escaped`) — the REPL's `print`, `log`, what
//! `:load` prints, the `:doc` and `:host` echoes, `opsbook history`'s table and serve's
//! `/healthz` (a runbook's thrown text, stored). Control characters and bidi overrides are
//! written visibly. Whole outputs compared; a generated test feeds every control character.

use std::time::Duration;

use crate::serve::{get, until};
use crate::support::Test;
use crate::support::ports::free_port;

/// Retitles the terminal, rings its bell and turns the rest of the line around.
const HOSTILE: &str = r"\x1b]0;PWNED\x07 \u202eexe.txt";
const SHOWN: &str = r"\x1b]0;PWNED\x07 \u{202e}exe.txt";

#[test]
fn the_repl_shows_printed_logged_loaded_and_echoed_text_escaped() {
    let t = Test::new().file("evil.rhai", &format!("print(\"loaded {HOSTILE}\");\nthrow \"thrown {HOSTILE}\";\n"));
    let input = format!(
        "print(\"p {HOSTILE}\")\nlog(\"l {HOSTILE}\")\n\"v {HOSTILE}\"\n:load evil.rhai\n:doc d\u{1b}[2J\n\
         :host h\u{1b}[2J\u{202e}\n:bogus\u{7}\n:run x a\u{1b}\n"
    );
    let out = t.args(["repl"]).stdin(&input).run().code(0);
    assert_eq!(out.stdout, format!("v {SHOWN}\n"));
    assert_eq!(
        out.stderr,
        format!(
            "p {SHOWN}\nl {SHOWN}\nloaded {SHOWN}\nerror: thrown {SHOWN}\n --> evil.rhai:2:1\n  |\n\
             2 | throw \"thrown {HOSTILE}\";\n  | ^\n\
             error: no host function or runbook named `d\\x1b[2J`\n\
             error: no host named `h\\x1b[2J\\u{{202e}}` in the inventory (hosts: localhost)\n\
             error: unknown command `:bogus\\x07` (:help lists them)\n\
             error: expected key=value, got `a\\x1b`\n"
        )
    );
}

/// A runbook that fails a check and throws, both with hostile names.
const THROWER: &str = "check(\"c \\x1b[2J\", false);\nthrow \"t \\x1b]0;PWNED\\x07 \\u202eexe.txt\";\n";

#[test]
fn healthz_and_history_show_a_stored_thrown_text_escaped() {
    let t = Test::new().runbook("evil", THROWER);
    let state = t.path().join("state");
    let dir = state.display().to_string();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let serve = Test::new()
        .runbook("evil", THROWER)
        .args(["serve", "--sandbox", "--runbooks", "runbooks", "evil@1m", "--listen", &format!("127.0.0.1:{port}")])
        .args(["--state-dir", &dir])
        .spawn();
    until(&format!("{base}/readyz"), 200, Duration::from_secs(20));
    let (status, health) = get(&format!("{base}/healthz"));
    assert_eq!(
        (status, health.as_str()),
        (
            503,
            "failing:\nevil: failed (run 1): c \\x1b[2J; t \\x1b]0;PWNED\\x07 \\u{202e}exe.txt (at runbooks/evil.rhai:2:1)\n"
        )
    );
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.wait(Duration::from_secs(30)).0.code, 0);

    let out = Test::new().args(["history", "--sandbox", "--state-dir", &dir]).run().code(0);
    let masked = regex::Regex::new(r"\d{4}-\d\d-\d\dT[\d:.]+Z  evil  failed +\d+\.\dm?s").unwrap();
    assert_eq!(
        masked.replace_all(&out.stdout, "[TIME]  evil  failed  [DUR]"),
        "    ID  STARTED                   JOB   OUTCOME      DURATION  DETAIL\n     \
         1  [TIME]  evil  failed  [DUR]  c \\x1b[2J; t \\x1b]0;PWNED\\x07 \\u{202e}exe.txt (at runbooks/evil.rhai:2:1)\n\n\
         no flapping checks (none changed outcome more than 2 times)\n"
    );
}

/// Every control character and bidi control, each alone between two letters, printed by a
/// REPL line: the terminal sees each as an escape, never the character itself.
#[test]
fn no_control_or_bidi_character_reaches_the_terminal_from_the_repl() {
    let specials: Vec<char> = (0u32..0x20)
        .chain(0x7f..0xa0)
        .chain([0x200e, 0x200f, 0x061c])
        .chain(0x202a..=0x202e)
        .chain(0x2066..=0x2069)
        .filter_map(char::from_u32)
        .filter(|c| !matches!(c, '\n' | '\t'))
        .collect();
    let input: String = specials.iter().map(|c| format!("print(\"a\\u{:04x}b\")\n", *c as u32)).collect();
    let out = Test::new().args(["repl"]).stdin(&input).run().code(0);
    let expected: String = specials
        .iter()
        .map(|c| match *c as u32 {
            n if n < 0x80 => format!("a\\x{n:02x}b\n"),
            n => format!("a\\u{{{n:x}}}b\n"),
        })
        .collect();
    assert_eq!(out.stderr, expected);
    assert!(!out.stderr.chars().any(|c| specials.contains(&c)));
}
