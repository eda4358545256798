//! `opsbook serve` and `opsbook history`, driven as an operator would: the service against the
//! in-process stack with a fault (health, metrics checked by Prometheus' own `promtool`, the
//! page in a real headless Chromium, the history across a restart), a mutating runbook
//! refused, and the service on a private host watching a twin unit stopped and started with
//! the real systemd.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::ports::free_port;
use crate::support::private_host::PrivateHost;
use crate::support::{Test, skip, wait_until};

/// GET on loopback (HTTP/1.1, `Connection: close`): status and body; status 0 when nothing
/// answers.
pub(crate) fn get(url: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let rest = url.strip_prefix("http://").expect("an http:// URL");
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let Ok(mut stream) = std::net::TcpStream::connect(authority) else { return (0, String::new()) };
    stream.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let path = if path.is_empty() { "/" } else { path };
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    if stream.read_to_string(&mut answer).is_err() {
        return (0, String::new());
    }
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, body.to_string())
}

/// Polls `url` until it answers `status`, for at most `limit`; the body and the time taken.
#[track_caller]
pub(crate) fn until(url: &str, status: u16, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    let body = wait_until(&format!("{url} answering {status}"), limit, || match get(url) {
        (code, body) if code == status => Ok(body),
        (code, body) => Err(format!("{code} {body}")),
    });
    (body, started.elapsed())
}

fn tool(name: &str) -> Option<String> {
    ["/usr/bin", "/usr/local/bin", "/bin"].iter().map(|d| format!("{d}/{name}")).find(|p| Path::new(p).exists())
}

#[track_caller]
fn chromium(args: &[&str]) -> std::process::Output {
    let bin = tool("chromium").expect("checked by the caller");
    Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run chromium")
}

/// The checks of one job on the page, in the order shown: `outcome name`.
#[track_caller]
fn checks_on_page(dom: &str, job: &str) -> Vec<String> {
    let start =
        dom.find(&format!("id=\"job-{job}\"")).unwrap_or_else(|| panic!("job {job} is not on the page:\n{dom}"));
    let card = &dom[start..dom[start..].find("</section>").map_or(dom.len(), |e| start + e)];
    let re = regex::Regex::new(r#"<li class="check (\w+)">.*?<span class="name">([^<]*)</span>"#).unwrap();
    re.captures_iter(card).map(|c| format!("{} {}", &c[1], &c[2])).collect()
}

#[test]
fn sandbox_fault_shows_on_health_metrics_page_and_history_and_the_history_survives_a_restart() {
    let t = Test::new();
    let state = t.path().join("state");
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let serve = |fault: &[&str]| {
        let mut args = vec!["serve", "--sandbox"];
        args.extend_from_slice(fault);
        let listen = format!("127.0.0.1:{port}");
        let state = state.display().to_string();
        Test::new().args(args).args(["quick-check@1s", "--listen", &listen, "--state-dir", &state]).spawn()
    };

    let first = serve(&["--fault", "log-store:down"]);
    until(&format!("{base}/readyz"), 200, Duration::from_secs(20));
    let (status, health) = get(&format!("{base}/healthz"));
    assert_eq!(status, 503);
    let expected = regex::Regex::new(
        r"^failing:\nquick-check: failed \(run \d+\): units › loki\.service active; servers › log store /ready says ready\n$",
    )
    .unwrap();
    assert!(expected.is_match(&health), "{health}");

    // Metrics: Prometheus' own checker accepts them, and the failing checks are the ones at 0.
    let (status, metrics) = get(&format!("{base}/metrics"));
    assert_eq!(status, 200);
    match tool("promtool") {
        None => skip("promtool is missing (apt-get install prometheus)"),
        Some(promtool) => {
            let mut child = Command::new(promtool)
                .args(["check", "metrics"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            use std::io::Write;
            child.stdin.take().unwrap().write_all(metrics.as_bytes()).unwrap();
            let out = child.wait_with_output().unwrap();
            let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert!(out.status.success() && said.is_empty(), "promtool: {said}\n{metrics}");
        }
    }
    // A rehearsal says so in its host name.
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string() + " (sandbox)";
    let success: Vec<&str> = metrics.lines().filter(|l| l.starts_with("opsbook_check_success{")).collect();
    let line = |section: &str, check: &str, v: u8| {
        format!(
            "opsbook_check_success{{job=\"quick-check\",runbook=\"quick-check\",host=\"{host}\",section=\"{section}\",check=\"{check}\"}} {v}"
        )
    };
    assert_eq!(
        success,
        vec![
            line("servers", "log store /ready says ready", 0),
            line("servers", "metrics database /health answers 200", 1),
            line("units", "alloy.service active", 1),
            line("units", "influxdb.service active", 1),
            line("units", "loki.service active", 0),
            line("units", "telegraf.service active", 1),
        ]
    );

    // The page in a real browser: failing checks first, nothing fetched from elsewhere.
    match tool("chromium") {
        None => skip("chromium is missing (apt-get install chromium)"),
        Some(_) => {
            let dom = chromium(&["--dump-dom", &format!("{base}/")]);
            let dom = String::from_utf8_lossy(&dom.stdout).to_string();
            assert_eq!(
                checks_on_page(&dom, "quick-check"),
                vec![
                    "fail loki.service active",
                    "fail log store /ready says ready",
                    "pass influxdb.service active",
                    "pass telegraf.service active",
                    "pass alloy.service active",
                    "pass metrics database /health answers 200",
                ]
            );
            let outside = regex::Regex::new(r#"(?i)(src|href|action)\s*=\s*"?(https?:)?//"#).unwrap();
            assert!(!outside.is_match(&dom), "the page refers to another host:\n{dom}");
            let netlog = t.path().join("netlog.json");
            let shot = t.path().join("serve.png");
            let out = chromium(&[
                &format!("--screenshot={}", shot.display()),
                "--window-size=1000,1200",
                &format!("--log-net-log={}", netlog.display()),
                &format!("{base}/"),
            ]);
            let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("no screenshot ({e}): {out:?}"));
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
            // The browser's own background requests carry no initiator; everything the page
            // asked for names the page's origin as its initiator.
            let log: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&netlog).unwrap()).unwrap();
            let start_job = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"].as_i64().unwrap();
            let from_page: Vec<String> = log["events"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| e["type"].as_i64() == Some(start_job) && e["params"]["initiator"] == base.as_str())
                .map(|e| e["params"]["url"].as_str().unwrap_or_default().to_string())
                .collect();
            assert!(!from_page.is_empty(), "no request of the page in the net log");
            let elsewhere: Vec<&String> = from_page.iter().filter(|u| !u.starts_with(&format!("{base}/"))).collect();
            assert!(elsewhere.is_empty(), "requests left for other hosts: {elsewhere:?}");
        }
    }

    first.signal(libc::SIGTERM);
    let (out, took) = first.wait(Duration::from_secs(30));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(took < Duration::from_secs(10), "stopping took {took:?}");
    assert_eq!(get(&format!("{base}/healthz")).0, 0, "the service is gone");

    // Restarted without the fault: the old runs are still there, and health recovers.
    let second = serve(&[]);
    let (health, _) = until(&format!("{base}/healthz"), 200, Duration::from_secs(20));
    assert_eq!(health, "ok: the latest run of 1 job passed\n");
    let runs: serde_json::Value = serde_json::from_str(&get(&format!("{base}/api/runs?limit=1000")).1).unwrap();
    let outcomes: Vec<&str> = runs["runs"].as_array().unwrap().iter().map(|r| r["outcome"].as_str().unwrap()).collect();
    assert!(outcomes.contains(&"failed") && outcomes[0] == "passed", "{outcomes:?}");
    let id = runs["runs"][0]["id"].as_i64().unwrap();
    let (status, report) = get(&format!("{base}/api/runs/{id}"));
    assert_eq!(status, 200);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    assert_eq!((report["schema"].as_i64(), report["runbook"].as_str()), (Some(2), Some("quick-check")));
    second.signal(libc::SIGTERM);
    assert_eq!(second.wait(Duration::from_secs(30)).0.code, 0);

    let history = Test::new()
        .args([
            "history",
            "--sandbox",
            "quick-check",
            "--failed",
            "--since",
            "1h",
            "--state-dir",
            &state.display().to_string(),
        ])
        .run()
        .code(0);
    let table = regex::Regex::new(
        r"^ +ID  STARTED                   JOB          OUTCOME      DURATION  DETAIL\n( +\d+  \d{4}-\d\d-\d\dT[\d:.]+Z  quick-check  failed +(?:\d+\.\d\ds|\d\.\dms)  units › loki\.service active; servers › log store /ready says ready\n)+\nno flapping checks \(none changed outcome more than 2 times\)\n$",
    )
    .unwrap();
    assert!(table.is_match(&history.stdout), "{}", history.stdout);
}

#[test]
fn a_mutating_runbook_is_refused_unless_the_job_allows_it() {
    // The call hides in a module the runbook imports: the scan follows imports.
    let out = Test::new()
        .module("changes", "/// Restarts a unit.\nfn bounce(u) {\n    unit::restart(u)\n}\n")
        .runbook("bouncer", "import \"changes\" as c;\ncheck(\"looked\", true);\nc::bounce(\"loki\");\n")
        .args(["serve", "--sandbox", "quick-check@1m", "bouncer@1m", "--listen", "127.0.0.1:0"])
        .run();
    out.code(2).stderr_is(
        "error: job `bouncer` (command line): refused: runbook `bouncer` changes the stack (`unit::restart` at \
         stdlib/changes.rhai:3:11), and watching must not\n  help: add `mutating = true` to the job if it is meant to\n",
    );
    // Allowed: the job says it changes the stack; the service runs it and serves.
    let port = free_port();
    let running = Test::new()
        .module("changes", "/// Restarts a unit.\nfn bounce(u) {\n    unit::restart(u)\n}\n")
        .runbook("bouncer", "import \"changes\" as c;\ncheck(\"looked\", true);\nc::bounce(\"loki\");\n")
        .config(&format!(
            "[serve]\nlisten = \"127.0.0.1:{port}\"\nstate_dir = \"state\"\njitter = \"0s\"\n\
             [[serve.job]]\nrunbook = \"bouncer\"\nevery = \"1m\"\nmutating = true\n"
        ))
        .args(["serve", "--sandbox"])
        .spawn();
    let (health, _) = until(&format!("http://127.0.0.1:{port}/healthz"), 200, Duration::from_secs(20));
    assert_eq!(health, "ok: the latest run of 1 job passed\n");
    running.signal(libc::SIGTERM);
    assert_eq!(running.wait(Duration::from_secs(30)).0.code, 0);
}

#[test]
fn a_job_on_hosts_the_inventory_lacks_or_in_the_sandbox_is_refused() {
    let config = "[hosts.db1]\naddress = \"192.0.2.1\"\n[[serve.job]]\nrunbook = \"quick-check\"\nevery = \"1m\"\nhosts = [\"db2\"]\n";
    Test::new().config(config).args(["serve", "--listen", "127.0.0.1:0"]).run().code(2).stderr_is(
        "error: job `quick-check` (opsbook.toml:3): `db2` is no group, host or role of the inventory; did you mean `db1`?\n",
    );
    Test::new().config(config).args(["serve", "--sandbox", "--listen", "127.0.0.1:0"]).run().code(2).stderr_is(
        "error: job `quick-check` (opsbook.toml:3): `hosts = \"db2\"` watches inventory hosts over ssh, and the sandbox has none\n  help: serve without `--sandbox`, or remove `hosts` to watch the sandbox's stack\n",
    );
}

#[test]
fn a_hanging_run_is_ended_at_the_job_timeout_and_a_slow_one_delays_the_next() {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let t = Test::new()
        .runbook("hang", "//! Never ends.\ncheck(\"started\", true);\nsleep(\"1m\");\n")
        .config(&format!(
            "[serve]\nlisten = \"127.0.0.1:{port}\"\nstate_dir = \"state\"\njitter = \"0s\"\n\
             [[serve.job]]\nrunbook = \"hang\"\nevery = \"1s\"\ntimeout = \"1500ms\"\n"
        ))
        .args(["serve", "--sandbox", "--runbooks", "runbooks"]);
    let serve = t.spawn();
    let (health, took) = until(&format!("{base}/healthz"), 503, Duration::from_secs(10));
    // 503 at once (no run yet), then the first run's verdict once it is interrupted.
    assert!(took < Duration::from_secs(5));
    let (_, _) = until(&format!("{base}/readyz"), 200, Duration::from_secs(10));
    let (_, health_after) = get(&format!("{base}/healthz"));
    assert_eq!(health, "failing:\nhang: no run yet\n");
    assert_eq!(
        health_after,
        "failing:\nhang: failed (run 1): timed out: still running after 1s 500ms, the run was interrupted (raise the \
         job's `timeout`)\n"
    );
    // The run took longer than the interval: the next one starts late, and says so.
    let (runs, _) = until(&format!("{base}/api/runs/2"), 200, Duration::from_secs(10));
    let runs: serde_json::Value = serde_json::from_str(&runs).unwrap();
    assert_eq!(runs["outcome"], "failed");
    let (list, _) = until(&format!("{base}/api/runs?job=hang&limit=5"), 200, Duration::from_secs(5));
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let note =
        list["runs"].as_array().unwrap().iter().find(|r| r["id"] == 2).unwrap()["note"].as_str().unwrap().to_string();
    let expected = regex::Regex::new(
        r"^late by \d+ms: the previous run overran its interval; timed out: still running after 1s 500ms, the run was interrupted \(raise the job's `timeout`\)$",
    )
    .unwrap();
    assert!(expected.is_match(&note), "{note}");
    serve.signal(libc::SIGTERM);
    assert_eq!(serve.wait(Duration::from_secs(30)).0.code, 0);
}

#[test]
fn sighup_rereads_the_jobs() {
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let config = format!(
        "[serve]\nlisten = \"127.0.0.1:{port}\"\nstate_dir = \"state\"\n[[serve.job]]\nrunbook = \"quick-check\"\nevery = \"1s\"\n"
    );
    let t = Test::new().config(&config).args(["serve", "--sandbox"]);
    let file = t.path().join("opsbook.toml");
    let serve = t.spawn();
    let (health, _) = until(&format!("{base}/healthz"), 200, Duration::from_secs(20));
    assert_eq!(health, "ok: the latest run of 1 job passed\n");
    std::fs::write(
        &file,
        format!("{config}[[serve.job]]\nname = \"again\"\nrunbook = \"quick-check\"\nevery = \"1s\"\n"),
    )
    .unwrap();
    serve.signal(libc::SIGHUP);
    wait_until("both jobs passing after SIGHUP", Duration::from_secs(10), || {
        let (_, health) = get(&format!("{base}/healthz"));
        if health == "ok: the latest run of 2 jobs passed\n" { Ok(()) } else { Err(health) }
    });
    serve.signal(libc::SIGTERM);
    let (out, _) = serve.wait(Duration::from_secs(30));
    let expected = regex::Regex::new(
        r"^opsbook serve: listening on http://127\.0\.0\.1:\d+/ \(1 job, history in state/rehearsals\.sqlite\)\nopsbook serve: SIGHUP: reloading the configuration and the runbooks\nopsbook serve: stopping: running jobs get 20s to finish\n$",
    )
    .unwrap();
    assert!(out.code == 0 && expected.is_match(&out.stderr), "{}", out.stderr);
}

/// `curl` inside the private host: status and body.
#[track_caller]
fn curl(host: &PrivateHost, url: &str) -> (u16, String) {
    let out = host.exec(&["curl", "-s", "-m", "5", "-w", "\n%{http_code}", url]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[track_caller]
fn curl_until(host: &PrivateHost, url: &str, status: u16, limit: Duration) -> (String, Duration) {
    let started = Instant::now();
    let body = wait_until(&format!("{url} answering {status}"), limit, || match curl(host, url) {
        (code, body) if code == status => Ok(body),
        (code, body) => Err(format!("{code} {body}")),
    });
    (body, started.elapsed())
}

#[test]
fn on_a_real_systemd_health_follows_the_log_store_unit() {
    let host = match PrivateHost::boot() {
        Ok(host) => host,
        Err(e) => return skip(e),
    };
    let t = Test::new().runbook(
        "watch-loki",
        "//! The log store's unit and readiness.\ncheck(\"loki.service active\", unit::is_active(\"loki\"));\n\
         check(\"log store ready\", loki::ready().ok);\n",
    );
    let bin = crate::support::opsbook();
    host.install_unit(
        "loki.service",
        &format!("[Unit]\nDescription=Loki (twin)\n[Service]\nExecStart={bin} twin log-store --ready-delay 0s\n"),
    );
    host.systemctl(&["start", "loki"]);
    let state = t.path().join("state").display().to_string();
    let runbooks = t.path().join("runbooks").display().to_string();
    let mut serve = host
        .command_in(
            t.path(),
            &[bin, "--user", "serve", "--runbooks", &runbooks, "watch-loki@1s", "--state-dir", &state],
        )
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = "http://127.0.0.1:9464";
    let (health, _) = curl_until(&host, &format!("{base}/healthz"), 200, Duration::from_secs(20));
    assert_eq!(health, "ok: the latest run of 1 job passed\n");

    // Runs happen at their interval (1 s, plus up to a tenth of it of jitter): the gaps between
    // the starts of the first few.
    let starts = wait_until("4 runs in the history", Duration::from_secs(10), || {
        let runs: serde_json::Value = serde_json::from_str(&curl(&host, &format!("{base}/api/runs")).1).unwrap();
        let starts: Vec<f64> = runs["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                let t = humantime::parse_rfc3339(r["started_at"].as_str().unwrap()).unwrap();
                t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
            })
            .collect();
        if starts.len() >= 4 { Ok(starts) } else { Err(format!("{starts:?}")) }
    });
    for pair in starts.windows(2) {
        let gap = pair[0] - pair[1];
        assert!((0.85..1.4).contains(&gap), "runs {gap:.3} s apart: {starts:?}");
    }

    host.systemctl(&["stop", "loki"]);
    let (health, took) = curl_until(&host, &format!("{base}/healthz"), 503, Duration::from_secs(5));
    let expected =
        regex::Regex::new(r"^failing:\nwatch-loki: failed \(run \d+\): loki\.service active; log store ready\n$")
            .unwrap();
    assert!(expected.is_match(&health), "{health}");
    assert!(took < Duration::from_millis(2500), "503 only after {took:?}");

    host.systemctl(&["start", "loki"]);
    let (health, took) = curl_until(&host, &format!("{base}/healthz"), 200, Duration::from_secs(5));
    assert_eq!(health, "ok: the latest run of 1 job passed\n");
    assert!(took < Duration::from_millis(2500), "200 only after {took:?}");
    serve.kill().ok();
    serve.wait().ok();
}

/// The service unit docs/serve.md gives, with its sandboxing, run by a real systemd on a private
/// host: the user manager stands in for the system's (its bus bound where the system bus
/// is, `/run/dbus/system_bus_socket`), the `opsbook` account exists only inside the host, and
/// `/var/lib` is a tmpfs there (`StateDirectory=`). Unchanged but for the program's path and
/// where its configuration and runbooks are, the unit must start, answer `/healthz`, read the
/// journal (as a member of `systemd-journal`) and ask the manager about units.
#[test]
fn the_readme_unit_serves_sandboxed_and_reads_the_journal_and_the_manager() {
    let readme = std::fs::read_to_string(crate::support::repo_dir().join("docs/serve.md")).unwrap();
    let unit = readme
        .split("**As a systemd unit** (`/etc/systemd/system/opsbook.service`):\n```ini\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("docs/serve.md's unit")
        .to_string();
    // Anyone may connect to the bus, as to a system bus.
    let policy = "<busconfig><policy context=\"default\"><allow user=\"*\"/></policy></busconfig>";
    let host = match PrivateHost::boot_with_bus_policy(Some(policy)) {
        Ok(host) => host,
        Err(e) => return skip(e),
    };
    // The files are made here, wherever the scratch directory is; the unit reads them from
    // `/var/lib/opsbook-test` inside the host (below), as the unit's PrivateTmp hides /tmp and
    // its ProtectHome hides /home, /root and /run/user.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    std::fs::create_dir(dir.path().join("runbooks")).unwrap();
    std::fs::write(
        dir.path().join("runbooks/watch-loki.rhai"),
        "//! The log store's unit and its journal.\ncheck(\"loki.service active\", unit::is_active(\"loki\"));\n\
         check(\"loki.service journal read\", journal::read(#{ unit: \"loki\", lines: 5 }).len() > 0);\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("opsbook.toml"),
        "[serve]\nlisten = \"127.0.0.1:9464\"\n[[serve.job]]\nrunbook = \"watch-loki\"\nevery = \"1s\"\n",
    )
    .unwrap();
    let passwd =
        std::fs::read_to_string("/etc/passwd").unwrap() + "opsbook:x:64123:64123::/nonexistent:/usr/sbin/nologin\n";
    let group = std::fs::read_to_string("/etc/group").unwrap() + "opsbook:x:64123:\n";
    std::fs::write(dir.path().join("passwd"), passwd).unwrap();
    std::fs::write(dir.path().join("group"), group).unwrap();
    // What PID 1 makes at boot and the unit's ProtectHome=/ProtectKernel*= mount over paths:
    // the host has no system manager, so its inaccessible nodes are made here.
    let inaccessible = "d=/run/systemd/inaccessible && mkdir -p $d/dir && touch $d/reg && mknod $d/chr c 0 0 && \
                        mknod $d/blk b 0 0 && mkfifo $d/fifo && python3 -c \"import socket; \
                        socket.socket(socket.AF_UNIX).bind('$d/sock')\" && chmod 0000 $d/*";
    // The program under test lives in the build directory, which may be under /tmp or /home,
    // out of the unit's sight: it is bound (not copied: it is large) to a path in the host's
    // own /var/lib, with the configuration and runbooks beside it; all of it goes with the host.
    let bin = crate::support::opsbook();
    let setup = format!(
        "{inaccessible} && mount --bind {path}/passwd /etc/passwd && mount --bind {path}/group /etc/group && \
         mount -t tmpfs tmpfs /var/lib && mount -t tmpfs tmpfs /run/dbus && touch /run/dbus/system_bus_socket && \
         mount --bind /run/user/0/bus /run/dbus/system_bus_socket && mkdir /var/lib/opsbook-test && \
         cp -r {path}/opsbook.toml {path}/runbooks /var/lib/opsbook-test/ && touch /var/lib/opsbook-test/opsbook && \
         mount --bind {bin} /var/lib/opsbook-test/opsbook"
    );
    let out = host.exec(&["sh", "-c", &setup]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    host.install_unit(
        "loki.service",
        &format!("[Unit]\nDescription=Loki (twin)\n[Service]\nExecStart={bin} twin log-store --ready-delay 0s\n"),
    );
    host.systemctl(&["start", "loki"]);
    // Where a user manager differs from the system's, the system's behaviour is supplied:
    // its StateDirectory= is ~/.local/state (so /var/lib/opsbook is made for the account and
    // allowed), and its ProtectKernelTunables= and ProtectControlGroups= give a unit a /run of
    // its own (no bus, no journal), which the system's does not.
    let mut lines: Vec<String> = Vec::new();
    for line in unit.lines() {
        match line {
            "ExecStart=/usr/local/bin/opsbook serve --state-dir /var/lib/opsbook" => lines.push(
                "ExecStart=/var/lib/opsbook-test/opsbook --config /var/lib/opsbook-test/opsbook.toml --runbooks \
                 /var/lib/opsbook-test/runbooks serve --state-dir /var/lib/opsbook"
                    .into(),
            ),
            "StateDirectory=opsbook" => lines.push("ReadWritePaths=/var/lib/opsbook".into()),
            "ProtectKernelTunables=yes" | "ProtectControlGroups=yes" => {}
            other => lines.push(other.to_string()),
        }
    }
    assert_eq!(unit.lines().count(), lines.len() + 2, "docs/serve.md's unit changed: adapt the test");
    let unit = lines.join("\n") + "\n";
    // The journal's files belong to the group `systemd-journal` once systemd-tmpfiles has run,
    // as at a system's boot; the host's journald started without it.
    let out = host.exec(&[
        "sh",
        "-c",
        "systemd-tmpfiles --create --prefix=/run/log/journal && mkdir -p /var/lib/opsbook && \
         chown opsbook:opsbook /var/lib/opsbook",
    ]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    host.install_unit("opsbook.service", &unit);
    host.systemctl(&["start", "opsbook"]);
    let base = "http://127.0.0.1:9464";
    let health = crate::support::poll(Duration::from_secs(20), || match curl(&host, &format!("{base}/healthz")) {
        (200, body) => Ok(body),
        other => Err(other),
    })
    .unwrap_or_else(|(code, body)| {
        let status = host.systemctl(&["status", "opsbook", "--no-pager", "-l"]);
        let log =
            String::from_utf8_lossy(&host.exec(&["journalctl", "-u", "opsbook", "--no-pager"]).stdout).to_string();
        panic!("docs/serve.md's unit did not serve a run within 20 s: {code} {body}\n{status}\n{log}");
    });
    assert_eq!(health, "ok: the latest run of 1 job passed\n");
    // It runs as the account the unit names, and keeps its history where the unit says.
    let user = host.exec(&["sh", "-c", "ps -o user= -p $(systemctl --user show -p MainPID --value opsbook)"]);
    assert_eq!(String::from_utf8_lossy(&user.stdout).trim(), "opsbook");
    host.systemctl(&["stop", "loki"]);
    let (health, _) = curl_until(&host, &format!("{base}/healthz"), 503, Duration::from_secs(5));
    let expected = regex::Regex::new(r"^failing:\nwatch-loki: failed \(run \d+\): loki\.service active\n$").unwrap();
    assert!(expected.is_match(&health), "{health}");
    assert!(host.exec(&["test", "-s", "/var/lib/opsbook/history.sqlite"]).status.success());
    host.systemctl(&["stop", "opsbook"]);
}
