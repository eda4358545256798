//! Hostile input, round three (#50 case 14, the compile): a runbook or module still compiling
//! when the run's time limit passes or the first Ctrl-C comes is stopped there like any run, in
//! the same words and exit codes; and a runbook larger than a runbook may be is refused before
//! the parser sees it. Whole outputs compared.
//!
//! The largest runbook allowed (a `switch` of a hundred thousand arms, under 4 MiB) used to
//! take the compile minutes: Rhai's optimising pass, not the parser. Scripts now parse without
//! that pass (`syntax::parse_settings`), nor interning its names (the same function), and it
//! compiles in about 0.3 s in a debug build — still long enough for a time limit of 100 ms (a
//! run reaches its compile within about 20 ms, in the sandbox's fleet too) or a Ctrl-C to find
//! it compiling.

use std::time::Duration;

use crate::support::{Test, mask};

use crate::support::seeded::Seeded;

/// A `switch` over `arms` arms, each `label(i) => call("…i…", true)` (under 4 MiB for the
/// sizes used here: about 0.3 s of compile in a debug build).
fn big_switch(arms: u64, label: impl Fn(u64) -> String, call: &str) -> String {
    let mut text = String::from("let x = 3;\nswitch x {\n");
    for i in 0..arms {
        text.push_str(&format!("  {} => {call}(\"a{i}\", true),\n", label(i)));
    }
    text.push_str("  _ => ()\n}\n");
    text
}

/// A runbook `big` of the largest switch used here, checking `a3` of its arms.
fn big_runbook() -> Test {
    Test::new().runbook("big", &big_switch(110_000, |i| i.to_string(), "check"))
}

#[test]
fn a_runbook_still_compiling_at_its_time_limit_ends_there() {
    let t = big_runbook();
    let (out, took) = t.args(["run", "big", "--timeout", "100ms"]).spawn().wait(Duration::from_secs(60));
    assert_eq!(
        (out.code, mask(&out.stdout).as_str(), out.stderr.as_str()),
        (
            124,
            "big (runbooks/big.rhai)\n\ntimed out: the run's time limit of [DUR] passed while compiling \
             runbooks/big.rhai\n\n0 passed, 0 failed  ([DUR])\n",
            ""
        )
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn a_fleet_run_still_compiling_its_runbook_at_the_time_limit_ends_there() {
    let t = big_runbook();
    let args = ["run", "big", "--sandbox", "--fleet", "1", "--hosts", "all", "--timeout", "100ms"];
    let (out, took) = t.args(args).spawn().wait(Duration::from_secs(60));
    assert_eq!(
        (out.code, mask(&out.stdout).as_str(), out.stderr.as_str()),
        (
            124,
            "big on server (runbooks/big.rhai)  [sandbox: in-process stack]\n\ntimed out: the run's time limit of [DUR] \
             passed while compiling runbooks/big.rhai\n\n0 passed, 0 failed  ([DUR])\n",
            ""
        )
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn a_module_still_compiling_at_the_time_limit_ends_the_run_where_it_is_imported() {
    let module = format!("fn f() {{\n{}}}\n", big_switch(110_000, |i| i.to_string(), "print"));
    let t = Test::new().module("bigm", &module).runbook("r", "import \"bigm\" as m;\ncheck(\"after\", true);\n");
    let (out, _) = t.args(["run", "r", "--timeout", "100ms"]).spawn().wait(Duration::from_secs(60));
    assert_eq!(
        (out.code, mask(&out.stdout).as_str(), out.stderr.as_str()),
        (
            124,
            "r (runbooks/r.rhai)\n\ntimed out: the run's time limit of [DUR] passed while it was at \
             runbooks/r.rhai:1:8: `import \"bigm\" as m;`\n\n0 passed, 0 failed  ([DUR])\n",
            ""
        )
    );
}

#[test]
fn a_switch_of_a_hundred_thousand_arms_compiles_and_runs_within_seconds() {
    let t = big_runbook();
    let (out, took) = t.args(["run", "big", "--timeout", "60s"]).spawn().wait(Duration::from_secs(90));
    assert_eq!(
        (out.code, mask(&out.stdout).as_str(), out.stderr.as_str()),
        (0, "big (runbooks/big.rhai)\n  ok    a3\n\n1 passed, 0 failed  ([DUR])\n", "")
    );
    // Minutes with Rhai's optimising pass; about 0.3 s without it (a debug build).
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

/// Whether process `pid` has a thread named `name` (`/proc/PID/task/*/comm`).
fn has_thread(pid: i32, name: &str) -> Result<(), String> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).map_err(|e| e.to_string())?;
    let names: Vec<String> = tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("comm")).ok())
        .map(|comm| comm.trim().to_string())
        .collect();
    if names.iter().any(|n| n == name) { Ok(()) } else { Err(format!("threads: {names:?}")) }
}

#[test]
fn the_first_ctrl_c_stops_a_compile_under_way() {
    let t = big_runbook();
    let running = t.args(["run", "big"]).spawn();
    // The parse runs on its thread while the run waits on it and on the signals.
    crate::support::wait_until("the compile under way", Duration::from_secs(30), || {
        has_thread(running.pid(), "opsbook-compile")
    });
    running.signal(libc::SIGINT);
    let (out, took) = running.wait(Duration::from_secs(60));
    assert_eq!(
        (out.code, mask(&out.stdout).as_str(), out.stderr.as_str()),
        (
            130,
            "big (runbooks/big.rhai)\n\ninterrupted\n\n0 passed, 0 failed  ([DUR])\n",
            "\ninterrupted: stopping the runbook (Ctrl-C again to quit at once)\n"
        )
    );
    assert!(took < Duration::from_secs(30), "took {took:?}");
}

#[test]
fn a_runbook_larger_than_a_runbook_may_be_is_refused_naming_it_and_the_limit() {
    let t = Test::new().runbook("huge", &big_switch(200_000, |i| i.to_string(), "check"));
    let (code, stdout, stderr) = t.run_in_place(&["run", "huge", "--timeout", "2s"]);
    assert_eq!(
        (code, stdout.as_str(), stderr.as_str()),
        (2, "", "error: the runbook `runbooks/huge.rhai` is 6.7 MiB — more than the 4.0 MiB a runbook may be\n")
    );
}

/// Shapes of a long parse — arms of numbers or strings, in the runbook or a function of it, or
/// in a module it imports — each ends at the time limit in the words of where it was.
#[test]
fn every_shape_of_a_long_compile_ends_at_the_time_limit() {
    let mut rng = Seeded(0x0c0_3b1e);
    for case in 0..3 {
        let arms = 90_000 + rng.below(20_000);
        let strings = rng.below(2) == 0;
        let label = move |i: u64| if strings { format!("\"s{i}\"") } else { i.to_string() };
        let switch = big_switch(arms, label, "print");
        let (t, expected) = match rng.below(3) {
            0 => (Test::new().runbook("r", &switch), "passed while compiling runbooks/r.rhai".to_string()),
            1 => (
                Test::new().runbook("r", &format!("fn f() {{\n{switch}}}\nf();\n")),
                "passed while compiling runbooks/r.rhai".to_string(),
            ),
            _ => (
                Test::new().module("m", &switch).runbook("r", "import \"m\" as m;\n"),
                "passed while it was at runbooks/r.rhai:1:8: `import \"m\" as m;`".to_string(),
            ),
        };
        let (out, _) = t.args(["run", "r", "--timeout", "100ms"]).spawn().wait(Duration::from_secs(60));
        assert_eq!(
            (out.code, mask(&out.stdout), out.stderr.as_str()),
            (
                124,
                format!(
                    "r (runbooks/r.rhai)\n\ntimed out: the run's time limit of [DUR] {expected}\n\n0 passed, 0 \
                     failed  ([DUR])\n"
                ),
                ""
            ),
            "case {case}: {arms} arms, strings {strings}"
        );
    }
}
