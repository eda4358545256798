//! The Debian package (packaging/build-deb.sh, run by .ci/run before `cargo test`): lintian
//! finds no error in it; it holds every file it should and nothing else, its man pages and
//! completions are the ones this opsbook generates (so a stale package fails too) and offer
//! nothing hidden; and on a fresh Debian 13 host it installs with `dpkg -i`, leaves the
//! service disabled and stopped, names its copies of the orchestrator scripts, serves
//! /healthz once enabled with the shipped configuration (its job watching this machine), runs
//! it as the user `opsbook` (reading the system journal and units), and `dpkg -r` /
//! `dpkg --purge` take away what each should. Nothing is built here: without a
//! package, or without lintian, dpkg-deb or the Debian 13 root, the test skips, saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::debian13::host::{Debian13Fleet, Debian13Host};
use crate::support::{opsbook, skip};

/// The newest `opsbook_*.deb` of this target directory's `debian/`, where cargo-deb writes it.
fn deb() -> Option<PathBuf> {
    // CARGO_TARGET_TMPDIR is TARGET/tmp, whatever CARGO_TARGET_DIR says.
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).parent().expect("the target dir").join("debian");
    let newest = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("opsbook_") && n.ends_with(".deb"))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    if newest.is_none() {
        skip(format!("no {}/opsbook_*.deb: bash packaging/build-deb.sh builds it (.ci/run does)", dir.display()));
    }
    newest
}

/// `program ARGS`: stdout when it succeeded, else the test fails quoting it.
fn stdout_of(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).stdin(Stdio::null()).output().expect("run a tool");
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    assert!(out.status.success(), "{program} {args:?}: {}{}", text(&out.stdout), text(&out.stderr));
    text(&out.stdout)
}

fn have(program: &str) -> bool {
    Command::new("sh").args(["-c", &format!("command -v {program}")]).output().is_ok_and(|o| o.status.success())
}

#[test]
fn lintian_reports_no_error_in_the_package() {
    let Some(deb) = deb() else { return };
    if !have("lintian") {
        return skip("lintian is missing (apt-get install lintian)");
    }
    let out = Command::new("lintian").arg(&deb).stdin(Stdio::null()).output().expect("run lintian");
    let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    // Warnings are printed for the record; the placeholder maintainer address and the first
    // upload's missing bug closure are the expected ones.
    eprintln!("lintian {}:\n{said}", deb.display());
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("E: ")).collect();
    assert!(errors.is_empty(), "lintian errors:\n{}", errors.join("\n"));
}

/// The package's files (not directories), as `./path`, sorted.
fn files_in(deb: &Path) -> Vec<String> {
    let listing = stdout_of("dpkg-deb", &["--contents", &deb.display().to_string()]);
    let mut files: Vec<String> = listing
        .lines()
        .filter(|l| !l.starts_with('d'))
        .filter_map(|l| l.split_whitespace().nth(5).map(str::to_string))
        .collect();
    files.sort();
    files
}

#[test]
fn the_package_holds_the_binary_its_man_pages_completions_service_config_scripts_and_rules() {
    let Some(deb) = deb() else { return };
    if !have("dpkg-deb") {
        return skip("dpkg-deb is missing (apt-get install dpkg)");
    }
    // What this opsbook generates: a man page per visible subcommand, the completions.
    let scratch = tempfile::tempdir().unwrap();
    let generated = scratch.path().join("generated");
    let man = generated.join("man");
    stdout_of(opsbook(), &["generate", "man", &man.display().to_string()]);
    stdout_of(opsbook(), &["generate", "completions", &generated.join("completions").display().to_string()]);
    let mut pages: Vec<String> =
        std::fs::read_dir(&man).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    pages.sort();
    assert!(
        pages.len() > 10 && pages.contains(&"opsbook.1".into()) && pages.contains(&"opsbook-run.1".into()),
        "{pages:?}"
    );

    let mut expected: Vec<String> = [
        "./etc/opsbook/config.toml",
        "./usr/bin/opsbook",
        "./usr/lib/systemd/system/opsbook-serve.service",
        "./usr/share/bash-completion/completions/opsbook",
        "./usr/share/doc/opsbook/README.md",
        "./usr/share/doc/opsbook/changelog.Debian.gz",
        "./usr/share/doc/opsbook/copyright",
        "./usr/share/fish/vendor_completions.d/opsbook.fish",
        "./usr/share/lintian/overrides/opsbook",
        "./usr/share/opsbook/prometheus/alertmanager.example.yml",
        "./usr/share/opsbook/prometheus/opsbook-targets.example.json",
        "./usr/share/opsbook/prometheus/opsbook.rules.test.yml",
        "./usr/share/opsbook/prometheus/opsbook.rules.yml",
        "./usr/share/opsbook/prometheus/prometheus.example.yml",
        "./usr/share/opsbook/scripts/lib/opsbook-scripts.sh",
        "./usr/share/opsbook/scripts/manage-svc.sh",
        "./usr/share/opsbook/scripts/svc-exec.sh",
        "./usr/share/zsh/vendor-completions/_opsbook",
    ]
    .map(String::from)
    .to_vec();
    expected.extend(pages.iter().map(|p| format!("./usr/share/man/man1/{p}.gz")));
    expected.sort();
    assert_eq!(files_in(&deb), expected, "the package's files");

    // The config file is a conffile (kept on remove, asked about on upgrade when edited).
    assert_eq!(
        stdout_of("dpkg-deb", &["--info", &deb.display().to_string(), "conffiles"]),
        "/etc/opsbook/config.toml\n"
    );
    let fields = stdout_of("dpkg-deb", &["--field", &deb.display().to_string(), "Package", "Recommends", "Suggests"]);
    assert_eq!(fields, "Package: opsbook\nRecommends: openssh-client\nSuggests: prometheus, prometheus-alertmanager\n");
    let depends = stdout_of("dpkg-deb", &["--field", &deb.display().to_string(), "Depends"]);
    let re = regex::Regex::new(r"^(adduser, )?libc6 \(>= 2\.\d+\)(, libgcc-s1 \(>= [\d.]+\))?(, adduser)?\n$").unwrap();
    assert!(re.is_match(&depends) && depends.contains("adduser"), "Depends: {depends}");

    assert_generated_files_match(&deb, &scratch.path().join("root"), &generated, &pages);
}

/// Unpacked into `root`, the package's man pages and completions are the ones this opsbook
/// generated into `generated` (`man/` and `completions/`).
fn assert_generated_files_match(deb: &Path, root: &Path, generated: &Path, pages: &[String]) {
    stdout_of("dpkg-deb", &["--extract", &deb.display().to_string(), &root.display().to_string()]);
    for page in pages {
        let packed = root.join("usr/share/man/man1").join(format!("{page}.gz"));
        let text = stdout_of("gzip", &["-dc", &packed.display().to_string()]);
        let made = std::fs::read_to_string(generated.join("man").join(page)).unwrap();
        assert_eq!(text, made, "{page} is stale: rebuild the package");
    }
    for (packed, made) in [
        ("usr/share/bash-completion/completions/opsbook", "opsbook.bash"),
        ("usr/share/zsh/vendor-completions/_opsbook", "_opsbook"),
        ("usr/share/fish/vendor_completions.d/opsbook.fish", "opsbook.fish"),
    ] {
        let made = std::fs::read_to_string(generated.join("completions").join(made)).unwrap();
        let packed_text = std::fs::read_to_string(root.join(packed)).unwrap();
        assert_eq!(packed_text, made, "{packed} is stale: rebuild the package");
        // What an operator may type only: not the hidden `generate` (nor the scripts' own options).
        for hidden in ["generate", "--roles", "--role"] {
            assert!(!packed_text.contains(hidden), "{packed} offers the hidden {hidden}");
        }
    }
}

/// A runbook for the installed service: what its user can see of this host (the system
/// bus, the system journal through the group `systemd-journal`).
const SMOKE: &str = "//! What the packaged opsbook-serve sees as the user opsbook.
check(\"ssh.service is active\", unit::is_active(\"ssh\"), \"\");
let lines = journal::read(#{unit: \"ssh\", lines: 5});
check(\"the system journal of ssh.service is readable\", lines.len() > 0, `${lines.len()} lines`);
";

/// `opsbook scripts` of the installed package: its copies in /usr/share/opsbook/scripts.
const SCRIPTS_INSTALLED: &str = "The orchestrator scripts, shipped inside this opsbook:
  manage-svc.sh           deploy or remove one service (HOST:ROLE); prepare the hosts of an environment
                          installed in /usr/share/opsbook/scripts
  svc-exec.sh             verify, restart or reconfigure one service (HOST:ROLE)
                          installed in /usr/share/opsbook/scripts
  lib/opsbook-scripts.sh  what both scripts share (sourced)
                          installed in /usr/share/opsbook/scripts
Run them from /usr/share/opsbook/scripts: `/usr/share/opsbook/scripts/SCRIPT --help` explains each.
";

/// `/healthz` of the shipped configuration's job on a host without the stack.
const FIRST_DAY_HEALTHZ: &str = "failing:\nquick-check: failed (run N): units › influxdb.service active; units › \
                                  loki.service active; units › telegraf.service active; units › alloy.service active; \
                                  servers › metrics database /health answers 200; servers › log store /ready says ready\n";

/// Which of the package's places exist on `host`, one `present PATH` / `absent PATH` a line.
fn places(host: &Debian13Host) -> String {
    host.ok(&[
        "sh",
        "-c",
        "for p in /usr/bin/opsbook /usr/lib/systemd/system/opsbook-serve.service /etc/opsbook/config.toml \
         /etc/opsbook /var/lib/opsbook; do if [ -e $p ]; then echo present $p; else echo absent $p; fi; done",
    ])
}

/// Polls `curl URL` inside `host` until it answers `status`; the body.
fn curl_until(host: &Debian13Host, url: &str, status: &str, limit: Duration) -> String {
    let started = Instant::now();
    loop {
        let out = host.exec(&["curl", "-s", "-w", "\n%{http_code}", url]);
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        if let Some(body) = said.strip_suffix(&format!("\n{status}")) {
            return body.to_string();
        }
        let log = host.exec(&["journalctl", "-u", "opsbook-serve", "--no-pager", "-n", "30"]);
        assert!(
            started.elapsed() < limit,
            "{url} did not answer {status} within {limit:?}: {said:?}\n{}",
            String::from_utf8_lossy(&log.stdout)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn on_debian_13_the_package_installs_runs_its_service_as_opsbook_and_removes_and_purges_cleanly() {
    let Some(deb) = deb() else { return };
    let fleet = match Debian13Fleet::boot(&["d13pkg"]) {
        Ok(fleet) => fleet,
        Err(why) => return skip(why),
    };
    let host = fleet.host("d13pkg");
    let mut copy = host.command(&["sh", "-c", "cat > /root/opsbook.deb"]);
    let status = copy.stdin(std::fs::File::open(&deb).unwrap()).status().expect("copy the package in");
    assert!(status.success(), "copying {} in: {status}", deb.display());

    // Installed: its Depends are on a minimal Debian 13 already; the service is neither
    // enabled nor started; its user is a system user in systemd-journal, its home the state.
    host.ok(&["dpkg", "-i", "/root/opsbook.deb"]);
    assert_eq!(
        host.ok(&[
            "sh",
            "-c",
            "systemctl is-enabled opsbook-serve.service; systemctl is-active opsbook-serve.service; id -nG opsbook; \
             getent passwd opsbook | cut -d: -f6,7; stat -c '%U:%G %a' /var/lib/opsbook; opsbook --version",
        ]),
        format!(
            "disabled\ninactive\nopsbook systemd-journal\n/var/lib/opsbook:/usr/sbin/nologin\nopsbook:opsbook 750\n\
             opsbook {}\n",
            env!("CARGO_PKG_VERSION")
        )
    );

    // The orchestrator scripts: the package's copies, named where they are (the package's
    // opsbook: the one under test is at /usr/local/bin, first in PATH).
    assert_eq!(host.ok(&["/usr/bin/opsbook", "scripts"]), SCRIPTS_INSTALLED);

    // The first day: enabled as it comes, the service watches this machine with the shipped
    // job (quick-check every minute) and serves /healthz, saying what fails on a host without
    // the stack; it keeps running (no restart).
    host.ok(&["systemctl", "enable", "--now", "opsbook-serve.service"]);
    let limit = Duration::from_secs(60);
    assert_eq!(curl_until(host, "http://127.0.0.1:9464/readyz", "200", limit), "ready: every job ran\n");
    let run = regex::Regex::new(r"\(run \d+\)").unwrap();
    let healthz = curl_until(host, "http://127.0.0.1:9464/healthz", "503", limit);
    assert_eq!(run.replace_all(&healthz, "(run N)"), FIRST_DAY_HEALTHZ);
    assert_eq!(
        host.ok(&[
            "sh",
            "-c",
            "for p in ActiveState UnitFileState NRestarts; do echo $p=$(systemctl show -P $p opsbook-serve); done"
        ]),
        "ActiveState=active\nUnitFileState=enabled\nNRestarts=0\n"
    );

    // A job, as an operator adds one to the conffile, running a runbook of /etc/opsbook.
    host.ok(&[
        "sh",
        "-c",
        &format!(
            "mkdir -p /etc/opsbook/runbooks && cat > /etc/opsbook/runbooks/package-smoke.rhai <<'EOF'\n{SMOKE}EOF\n\
             printf '\\n[[serve.job]]\\nrunbook = \"package-smoke\"\\nevery = \"5s\"\\n' >> /etc/opsbook/config.toml"
        ),
    ]);
    host.ok(&["systemctl", "restart", "opsbook-serve.service"]);
    assert_eq!(curl_until(host, "http://127.0.0.1:9464/readyz", "200", limit), "ready: every job ran\n");
    // The smoke job passes: only the shipped quick-check fails, as before.
    let healthz = curl_until(host, "http://127.0.0.1:9464/healthz", "503", limit);
    assert_eq!(run.replace_all(&healthz, "(run N)"), FIRST_DAY_HEALTHZ);
    assert_eq!(
        host.ok(&[
            "sh",
            "-c",
            "ps -o user=,group= -p $(systemctl show -P MainPID opsbook-serve.service); \
             stat -c '%U %n' /var/lib/opsbook/history.sqlite",
        ]),
        "opsbook  opsbook\nopsbook /var/lib/opsbook/history.sqlite\n"
    );

    // Removed: the service stopped, the program and unit gone, the configuration kept.
    host.ok(&["dpkg", "-r", "opsbook"]);
    assert_eq!(
        host.ok(&["sh", "-c", "systemctl is-active opsbook-serve.service; dpkg-query -W -f '${Status}\\n' opsbook"]),
        "inactive\ndeinstall ok config-files\n"
    );
    assert_eq!(
        places(host),
        "absent /usr/bin/opsbook\nabsent /usr/lib/systemd/system/opsbook-serve.service\n\
         present /etc/opsbook/config.toml\npresent /etc/opsbook\npresent /var/lib/opsbook\n"
    );
    // Purged: the configuration, the runbook dropped beside it and the history go too.
    host.ok(&["dpkg", "--purge", "opsbook"]);
    assert_eq!(
        places(host),
        "absent /usr/bin/opsbook\nabsent /usr/lib/systemd/system/opsbook-serve.service\n\
         absent /etc/opsbook/config.toml\nabsent /etc/opsbook\nabsent /var/lib/opsbook\n"
    );
}
