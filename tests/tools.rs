//! `host::`, `telegraf::`, `alloy::` and `container::`: real processes (small stand-in
//! executables that print what the real tools print), real sockets, and the real podman.

use std::time::{Duration, Instant};

use serde_json::json;

use crate::support::Test;
use crate::support::wire::WireServer;

#[track_caller]
fn executable(t: Test, name: &str, script: &str) -> Test {
    let t = t.file(name, script);
    let path = t.path().join(name);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    t
}

#[test]
fn exec_captures_output_and_kills_the_group_on_timeout() {
    let t = Test::new();
    let pidfile = t.path().join("child.pid");
    let src = format!(
        r#"
let r = host::exec(["sh", "-c", "echo out; echo err >&2; exit 3"]);
check("captured", r.code == 3 && r.stdout == "out\n" && r.stderr == "err\n" && !r.ok, r);
let e = host::exec(["sh", "-c", "echo $GREETING; cat"], #{{ env: #{{ GREETING: "hi" }}, stdin: "from stdin" }});
check("env and stdin", e.stdout == "hi\nfrom stdin", e.stdout);
let started = timestamp();
let s = host::exec(["sh", "-c", "sleep 30 & echo $! > {pid}; echo waiting for the lock; sleep 30"], #{{ timeout: "300ms" }});
check("timed out", s.timed_out && s.code == () && started.elapsed < 5.0, s);
check("what it printed before is kept", s.stdout == "waiting for the lock\n" && s.stderr.contains("killed after 300ms"), s);
"#,
        pid = pidfile.display()
    );
    let _out = t.runbook("x", &src).args(["run", "x"]).run().code(0).stdout_has("4 passed, 0 failed");
    // The group is killed with the command: its background child ends (gone, or a zombie
    // until its new parent reaps it) within moments, long before its own `sleep 30` would.
    let pid = std::fs::read_to_string(&pidfile).unwrap();
    crate::support::wait_until("the background child of the timed-out command ended", Duration::from_secs(5), || {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
        if stat.is_empty() || stat.contains(") Z ") { Ok(()) } else { Err(stat) }
    });
    Test::new()
        .runbook("x", "host::exec([\"no-such-tool-here\"]);")
        .args(["run", "x"])
        .run()
        .code(1)
        .stdout_has("`no-such-tool-here` not found in PATH");
}

const TELEGRAF_TEST: &str = "#!/bin/sh\n\
echo \"$@\" > \"$(dirname \"$0\")/args\"\n\
echo '2026-11-22T09:00:00Z I! Loading config: /etc/telegraf/telegraf.conf' >&2\n\
echo '> cpu,cpu=cpu-total,host=h1 usage_idle=97.5,usage_system=1.25,usage_user=1.25 1795338824000000000'\n\
echo '> cpu,cpu=cpu0,host=h1 usage_idle=97,usage_system=1.5,usage_user=1.5 1795338824000000000'\n\
echo '> mem,host=h1 available_percent=71.2,total=8589934592i,used=2466250752i 1795338824000000000'\n\
echo '> disk,device=vda,fstype=ext4,host=h1,mode=rw,path=/ free=85899345920i,used_percent=13.1 1795338824000000000'\n";

#[test]
fn agent_config_test_parses_what_telegraf_prints() {
    let t = executable(Test::new(), "bin/telegraf", TELEGRAF_TEST);
    let bin = t.path().join("bin/telegraf");
    let config = format!(
        "[metrics_agent]\nconfig = \"/etc/telegraf/telegraf.conf\"\ntest_command = [\"{}\", \"--config\", \"{{config}}\", \"--test\"]\n",
        bin.display()
    );
    let src = r#"
let r = telegraf::config_test();
check("ok", r.ok, r.detail);
check("collected", r.measurements == ["cpu", "mem", "disk"] && r.points == 4, r.measurements);
let cpu = r.records[0];
check("record", cpu.measurement == "cpu" && cpu.tags.cpu == "cpu-total" && cpu.fields.usage_system == 1.25 && cpu.timestamp == 1795338824000000000, cpu);
check("integers", r.records[2].fields.total == 8589934592, r.records[2]);
"#;
    let out = t.config(&config).runbook("a", src).args(["run", "a"]).run().code(0).stdout_has("4 passed, 0 failed");
    let args = std::fs::read_to_string(out.test.path().join("bin/args")).unwrap();
    assert_eq!(args.trim(), "--config /etc/telegraf/telegraf.conf --test");
}

#[test]
fn a_broken_agent_config_fails_the_test_with_its_message() {
    let t = executable(
        Test::new(),
        "bin/telegraf",
        "#!/bin/sh\necho '2026-11-22T09:00:00Z E! error loading config file /etc/telegraf/telegraf.conf: line 12: invalid TOML syntax' >&2\nexit 1\n",
    );
    let bin = t.path().join("bin/telegraf");
    t.config(&format!("[metrics_agent]\ntest_command = [\"{}\", \"--test\"]\n", bin.display()))
        .runbook("a", "let r = telegraf::config_test();\ncheck(\"config test\", r.ok, r.detail);")
        .args(["run", "a"])
        .run()
        .code(1)
        .stdout_has("exit status 1")
        .stdout_has("line 12: invalid TOML syntax");
    Test::new()
        .env("PATH", "/nonexistent")
        .runbook("a", "telegraf::config_test();")
        .args(["run", "a"])
        .run()
        .code(1)
        .stdout_has("`telegraf` not found in PATH (set metrics_agent.test_command in config)");
}

#[test]
fn shipper_validate_and_reload() {
    let t = executable(
        Test::new(),
        "bin/alloy",
        "#!/bin/sh\nif grep -q broken \"$2\"; then echo \"Error: $2:3:5: unrecognized attribute name \\\"urll\\\"\" >&2; exit 1; fi\necho ok\n",
    );
    let bin = t.path().join("bin/alloy");
    let good = t.path().join("good.alloy");
    let bad = t.path().join("bad.alloy");
    std::fs::write(&good, "loki.write \"default\" {}\n").unwrap();
    std::fs::write(&bad, "broken\n").unwrap();
    let Some(server) = WireServer::start(
        json!({"POST /-/reload": {"status": 400, "body": "error during the initial load: /etc/alloy/config.alloy:3:5: unrecognized attribute"}}),
    ) else {
        return;
    };
    let cfg = |path: &std::path::Path| {
        format!(
            "[log_shipper]\nconfig = \"{}\"\nurl = \"{}\"\nvalidate_command = [\"{}\", \"validate\", \"{{config}}\"]\n",
            path.display(),
            server.url(),
            bin.display()
        )
    };
    let src = "let v = alloy::validate();\ncheck(\"valid\", v.ok, v.detail);\nlet r = alloy::reload();\ncheck(\"reload\", r.ok, r.detail);";
    let t = t.config(&cfg(&good)).runbook("s", src);
    let out = t.args(["run", "s"]).run().code(1);
    out.stdout_has("ok    valid").stdout_has("FAIL  reload — HTTP 400: error during the initial load");
    let t = executable(
        Test::new(),
        "bin/alloy",
        "#!/bin/sh\necho \"Error: $2:3:5: unrecognized attribute name \\\"urll\\\"\" >&2; exit 1\n",
    );
    let bin = t.path().join("bin/alloy");
    t.config(&format!("[log_shipper]\nconfig = \"/etc/alloy/config.alloy\"\nvalidate_command = [\"{}\", \"validate\", \"{{config}}\"]\n", bin.display()))
        .runbook("s", "let v = alloy::validate();\ncheck(\"valid\", v.ok, v.detail);\ncheck(\"diagnostics\", v.errors.len() == 1 && v.errors[0].contains(\"3:5\"), v.errors);")
        .args(["run", "s"])
        .run()
        .code(1)
        .stdout_has("is invalid: Error: /etc/alloy/config.alloy:3:5: unrecognized attribute")
        .stdout_has("ok    diagnostics");
}

#[test]
fn cpu_load_produces_kernel_time() {
    let started = Instant::now();
    Test::new()
        .runbook("c", "let r = host::cpu_load(2, \"1s\");\ncheck(\"system time\", r.system > 0.2 && r.wall >= 1.0 && r.wall < 3.0, r);")
        .args(["run", "c"])
        .run()
        .code(0)
        .stdout_has("1 passed");
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn tcp_reach_and_interfaces() {
    let Some(server) = WireServer::start(json!({})) else { return };
    let src = format!(
        "let a = host::tcp_connect(\"{}/x\", \"2s\");\ncheck(\"reach\", a.ok && a.address == \"127.0.0.1:{}\", a);\nlet b = host::tcp_connect(\"127.0.0.1:1\", \"2s\");\ncheck(\"refused\", !b.ok && b.detail == \"connection refused\", b);\nlet lo = host::interface(\"lo\");\ncheck(\"lo\", lo.exists, lo);\ncheck(\"absent\", !host::interface(\"tun-nope9\").exists);",
        server.url(),
        server.port
    );
    Test::new().runbook("n", &src).args(["run", "n"]).run().code(0).stdout_has("4 passed, 0 failed");
}

#[test]
fn containers_through_the_real_podman() {
    if std::process::Command::new("podman").arg("--version").output().is_err() {
        return crate::support::skip("podman is not installed");
    }
    let t = Test::new();
    let name = format!("opsbook-test-{}", std::process::id());
    let image = format!("localhost/opsbook-empty:{}", std::process::id());
    // An image made locally from a tarball (no registry): one empty file.
    std::fs::write(t.path().join("empty"), "").unwrap();
    let tar = t.path().join("img.tar");
    assert!(
        std::process::Command::new("tar")
            .args(["-C", t.path().to_str().unwrap(), "-cf", tar.to_str().unwrap(), "empty"])
            .status()
            .unwrap()
            .success()
    );
    let imported =
        std::process::Command::new("podman").args(["import", tar.to_str().unwrap(), &image]).output().unwrap();
    if !imported.status.success() {
        return crate::support::skip(format!(
            "podman cannot import images here: {}",
            String::from_utf8_lossy(&imported.stderr)
        ));
    }
    let created =
        std::process::Command::new("podman").args(["create", "--name", &name, &image, "/empty"]).output().unwrap();
    assert!(created.status.success(), "{}", String::from_utf8_lossy(&created.stderr));
    let src = format!(
        r#"
let all = container::list(true);
let mine = all.filter(|c| c.name == "{name}");
check("listed", mine.len() == 1 && mine[0].state == "created" && !mine[0].running, all);
check("not among running", container::list(false).filter(|c| c.name == "{name}").is_empty());
let i = container::inspect("{name}");
check("inspect", i.State.Status == "created" && i.Name == "{name}", i.State);
let s = container::stats("{name}");
check("stats", s.name == "{name}" && s.cpu_percent.ends_with("%"), s);
check("logs", container::logs("{name}", #{{ tail: 5 }}).is_empty());
container::top("{name}");
"#
    );
    let out = t.runbook("p", &src).args(["run", "p"]).run();
    std::process::Command::new("podman").args(["rm", "-f", &name]).output().ok();
    std::process::Command::new("podman").args(["rmi", "-f", &image]).output().ok();
    out.code(1).stdout_has("5 passed, 0 failed").stdout_has("top can only be used on running containers");
}

#[test]
fn restarting_a_container_directly_warns() {
    if std::process::Command::new("podman").arg("--version").output().is_err() {
        return crate::support::skip("podman is not installed");
    }
    Test::new()
        .runbook("r", "container::restart(\"opsbook-no-such-container\");")
        .args(["run", "r"])
        .run()
        .code(1)
        .stdout_has(
            "warning: restarting container `opsbook-no-such-container` directly; the service manager is the right way",
        )
        .stdout_has("`podman restart opsbook-no-such-container` failed");
}
