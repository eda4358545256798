//! Hostile input, round three (#50, the sandbox's smaller cases): the sandbox's scratch folder
//! is made fresh and never a folder someone else made (a root run deleted another user's
//! `/tmp/opsbook-sandbox-PID`), and a sandbox run reaches no server outside its own stack.
//! Whole outputs compared.

use std::path::Path;
use std::process::Command;

use crate::support::{Test, opsbook};

/// Every file under `dir`, as `path: content` lines (sorted), with pids shown as their names.
fn listing(dir: &Path, pids: &[(&str, &str)]) -> String {
    fn walk(dir: &Path, under: &Path, into: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            let shown = path.strip_prefix(under).unwrap().display().to_string();
            if path.is_dir() {
                into.push(format!("{shown}/"));
                walk(&path, under, into);
            } else {
                into.push(format!("{shown}: {}", std::fs::read_to_string(&path).unwrap_or_default().trim_end()));
            }
        }
    }
    let mut lines = Vec::new();
    walk(dir, dir, &mut lines);
    let mut lines: Vec<String> =
        lines.into_iter().map(|l| pids.iter().fold(l, |l, (pid, name)| l.replace(pid, name))).collect();
    lines.sort();
    lines.iter().map(|l| l.clone() + "\n").collect()
}

/// A pid no process has now.
fn a_dead_pid() -> u32 {
    (4_000_000..4_194_000).rev().find(|pid| !Path::new(&format!("/proc/{pid}")).exists()).unwrap()
}

/// `dir` with a file `file` holding `text`, owned by `nobody` when we are root.
fn plant(dir: &Path, text: &str) {
    std::fs::create_dir_all(dir.join("kept")).unwrap();
    std::fs::write(dir.join("kept/file"), text).unwrap();
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        assert!(Command::new("chown").args(["-R", "nobody"]).arg(dir).status().unwrap().success());
    }
}

#[test]
fn the_sandbox_makes_its_folder_fresh_and_removes_no_folder_it_did_not_make() {
    let t = Test::new();
    let tmp = t.path().join("tmp");
    let dead = a_dead_pid();
    // Another user's folders at the names the old scheme used (this run's pid and a gone
    // process's) and at the new scheme's (a gone process's): all three stay.
    plant(&tmp.join(format!("opsbook-sandbox-{dead}")), "another user's, old name");
    plant(&tmp.join(format!("opsbook-sandbox-{dead}-00112233aabbccdd")), "another user's, new name");
    // A leftover of one of this user's own sandboxes, killed: swept.
    std::fs::create_dir_all(tmp.join(format!("opsbook-sandbox-{dead}-ffeeddccbbaa9988/h1"))).unwrap();
    // The shell plants a folder at the name of its own pid, which opsbook then runs as (`exec`).
    let script = "d=\"$TMPDIR/opsbook-sandbox-$$\"; mkdir -p \"$d/kept\" && echo \"another user's, this pid\" > \
                  \"$d/kept/file\" && { [ \"$(id -u)\" != 0 ] || chown -R nobody \"$d\"; } && exec \"$0\" \"$@\"";
    let base = t.command();
    let mut cmd = Command::new("sh");
    cmd.current_dir(t.path()).env_clear();
    for (key, value) in base.get_envs() {
        if let Some(value) = value {
            cmd.env(key, value);
        }
    }
    let out =
        cmd.env("TMPDIR", &tmp).args(["-c", script, opsbook(), "run", "quick-check", "--sandbox"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let pid = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter_map(|name| name.strip_prefix("opsbook-sandbox-").map(str::to_string))
        .find(|rest| rest.parse::<u32>().is_ok_and(|pid| pid != dead))
        .expect("the folder planted at the run's own pid");
    assert_eq!(
        listing(&tmp, &[(&pid, "[PID]"), (&dead.to_string(), "[DEAD]")]),
        "opsbook-sandbox-[DEAD]-00112233aabbccdd/
opsbook-sandbox-[DEAD]-00112233aabbccdd/kept/
opsbook-sandbox-[DEAD]-00112233aabbccdd/kept/file: another user's, new name
opsbook-sandbox-[DEAD]/
opsbook-sandbox-[DEAD]/kept/
opsbook-sandbox-[DEAD]/kept/file: another user's, old name
opsbook-sandbox-[PID]/
opsbook-sandbox-[PID]/kept/
opsbook-sandbox-[PID]/kept/file: another user's, this pid
"
    );
}

/// A real HTTP server on loopback that counts the connections made to it and answers `ok`.
struct Listener {
    port: u16,
    hits: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Listener {
    fn start() -> Listener {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let hits = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = hits.clone();
        std::thread::spawn(move || {
            for mut stream in listener.incoming().flatten() {
                counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let _ = stream.set_read_timeout(Some(std::time::Duration::from_millis(200)));
                let _ = stream.read(&mut [0u8; 65536]);
                let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
            }
        });
        Listener { port, hits }
    }

    fn hits(&self) -> usize {
        self.hits.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// `text` with the sandbox's server addresses in a refusal shown as `[SERVERS]`.
fn servers_masked(text: &str) -> String {
    let re = regex::Regex::new(r"its own stack \((?:127\.0\.0\.1:\d+(?:, )?)+\)").unwrap();
    crate::support::mask(&re.replace_all(text, "its own stack ([SERVERS])"))
}

#[test]
fn a_sandbox_run_sends_nothing_to_a_real_server_on_loopback_and_a_dry_run_posts_nothing() {
    let server = Listener::start();
    let url = format!("http://127.0.0.1:{}", server.port);
    let runbook = format!(
        "let r = http::post(\"{url}/api/v2/write\", #{{ body: \"m v=1\" }});\ncheck(\"post\", r.ok, `${{r}}`);\n\
         let p = http::probe(\"{url}/health\");\ncheck(\"probe\", p.ok, p.detail);\n\
         let own = http::probe(config.metrics_db.url + \"/health\");\ncheck(\"own stack\", own.ok, own.detail);\n"
    );
    let t = Test::new().runbook("p", &runbook);
    // A dry run plans the POST and sends nothing; the probe of the real server is refused.
    let (code, stdout, stderr) = t.run_in_place(&["run", "p", "--sandbox", "--dry-run"]);
    assert_eq!(
        (code, servers_masked(&stdout), stderr.as_str()),
        (
            1,
            format!(
                "p (runbooks/p.rhai)  [sandbox: in-process stack]  (dry run: nothing will be changed)
  plan: would POST {url}/api/v2/write
  ok    post — #{{\"elapsed_ms\": 0, \"headers\": #{{}}, \"ok\": true, \"planned\": true, \"status\": 0, \"text\": \"\"}}
  FAIL  probe — `{url}/health` is outside the sandbox: a sandbox run reaches only its own stack ([SERVERS]), never a real server
  ok    own stack — HTTP 200

2 passed, 1 failed  ([DUR])
"
            ),
            ""
        )
    );
    // Without `--dry-run` the POST is refused in words before a byte is sent.
    let (code, stdout, _) = t.run_in_place(&["run", "p", "--sandbox"]);
    assert_eq!(
        (code, servers_masked(&stdout)),
        (
            1,
            format!(
                "p (runbooks/p.rhai)  [sandbox: in-process stack]

aborted: `{url}/api/v2/write` is outside the sandbox: a sandbox run reaches only its own stack ([SERVERS]), never a real server

0 passed, 0 failed  ([DUR])
"
            )
        )
    );
    assert_eq!(server.hits(), 0, "the sandbox reached the real server");
    // Every verb and every spelling of a loopback address: refused, the server never reached.
    let mut seed = 0x5a4d_b0c5_u64;
    let hosts = ["127.0.0.1", "localhost", "127.0.0.2", "[::1]"];
    let calls = [
        "http::get(U)",
        "http::head(U)",
        "http::post(U)",
        "http::probe(U).detail",
        "http::get(U, #{ timeout: \"1s\" })",
    ];
    let mut lines = String::new();
    for i in 0..8 {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let address = format!("\"http://{}:{}/x{i}\"", hosts[(seed % 4) as usize], server.port);
        let call = calls[((seed >> 8) % calls.len() as u64) as usize].replace('U', &address);
        lines.push_str(&format!("try {{ print({call}); }} catch (e) {{ print(e); }}\n"));
    }
    let t = Test::new().runbook("many", &lines);
    let (code, stdout, _) = t.run_in_place(&["run", "many", "--sandbox"]);
    assert_eq!(code, 0, "{stdout}");
    let refused = stdout.lines().filter(|l| l.contains("is outside the sandbox")).count();
    assert_eq!((refused, server.hits()), (8, 0), "{stdout}");
    // The same POST from this machine (no sandbox) does reach the server: the listener counts.
    let (_, stdout, _) = Test::new().runbook("p", &runbook).run_in_place(&["run", "p"]);
    assert!(stdout.contains("ok    post"), "{stdout}");
    assert_eq!(server.hits(), 2, "the POST and the probe from this machine");
}

#[test]
fn a_sandbox_run_opens_no_tcp_connection_to_a_real_server() {
    let server = Listener::start();
    let runbook = format!(
        "let far = host::tcp_connect(\"127.0.0.1:{}\", \"1s\");\ncheck(\"real server\", far.ok, far.detail);\n\
         let own = config.metrics_db.url;\nown.replace(\"http://\", \"\");\n\
         let near = host::tcp_connect(own, \"1s\");\ncheck(\"own stack\", near.ok, near.detail);\n",
        server.port
    );
    let (code, stdout, stderr) = Test::new().runbook("t", &runbook).run_in_place(&["run", "t", "--sandbox"]);
    let stdout = regex::Regex::new(r"connected in \d+ ms").unwrap().replace_all(&stdout, "connected in [N] ms");
    assert_eq!(
        (code, servers_masked(&stdout), stderr.as_str()),
        (
            1,
            format!(
                "t (runbooks/t.rhai)  [sandbox: in-process stack]
  FAIL  real server — `127.0.0.1:{}` is outside the sandbox: a sandbox run reaches only its own stack ([SERVERS]), never a real server
  ok    own stack — connected in [N] ms

1 passed, 1 failed  ([DUR])
",
                server.port
            ),
            ""
        )
    );
    assert_eq!(server.hits(), 0, "the sandbox reached the real server");
}
