//! A session acting on another host through its world over ssh (`World::over_ssh`): the
//! host's service manager over the D-Bus bridge, its journal read and written (a level's two
//! reads in one session, a journalctl that refuses quoted), its files read several at once and
//! removed with their backup, a command run there with its environment, an endpoint on its
//! loopback reached through a forwarded port, and TCP reach and interfaces seen from the host —
//! all on a real host of the test fleet (own network, hostname, sshd, systemd, journald).
//! Skipped, saying why, without root or sshd.

use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;

use opsbook_base::config::{Config, Origin, Value, keys};
use opsbook_base::report::{Format, Mode, Outcome, Recorder};
use opsbook_engine::catalog::Catalog;
use opsbook_fleet::Session;
use opsbook_world::World;
use opsbook_world::transport::Ssh;
use opsbook_world::{endpoints_from_host, forwarded_routes as routes};

use crate::support::fleet::Fleet;

const SLEEPER: &str = "[Unit]\nDescription=Sleeper on a remote host\n[Service]\nExecStart=/bin/sh -c 'echo sleeper up; exec sleep infinity'\n";
// Its error line also carries what ends a part of a journal read's one session: a line of the
// log is never taken for it.
const NOISY: &str = "[Service]\nExecStart=/bin/sh -c 'echo level=error msg=boom opsbook-journal-end:0; echo level=warn msg=careful; echo level=info msg=fine; exec sleep infinity'\n";
const LOOPBACK_WEB: &str =
    "[Service]\nExecStart=/usr/bin/python3 -m http.server 12345 --bind 127.0.0.1 --directory /run\n";

const RUNBOOK: &str = r#"
check("hostname is the host's", hostname() == "c1", hostname());
unit::start(["sleeper", "web", "noisy"]);
let s = unit::status("sleeper");
check("unit started over the bridge", s.active_state == "active" && s.main_pid > 0, `${s}`);
let out = host::exec(["sh", "-c", "echo $(hostname) $GREETING"], #{ env: #{ GREETING: "hello" } });
let said = out.stdout;
said.trim();
check("command ran there, with its environment", said == "c1 hello", said);
journal::emit("opsbook-remote", "written from the operator's machine", "info");
let found = wait::until(|| journal::read(#{ identifier: "opsbook-remote", since: "1 min ago" }).len() > 0,
    #{ timeout: "5s", every: "100ms" });
check("the host's journal has the line", found.ok, `after ${found.waited}s`);
let up = wait::until(|| journal::read(#{ unit: "sleeper.service", grep: "sleeper up" }).len() > 0,
    #{ timeout: "5s", every: "100ms" });
check("the unit's lines are read there", up.ok, `after ${up.waited}s`);
// Both of a level's reads (by priority, by the text's own level) go in one session.
let logged = wait::until(|| journal::warnings("noisy", "1 min ago").len() == 2, #{ timeout: "5s", every: "100ms" });
let errors = journal::errors("noisy", "1 min ago").map(|e| e.message);
let warnings = journal::warnings("noisy", "1 min ago").map(|e| e.message);
check("its errors and warnings are read there", logged.ok && errors == ["level=error msg=boom opsbook-journal-end:0"]
    && warnings == ["level=error msg=boom opsbook-journal-end:0", "level=warn msg=careful"], `${errors}; ${warnings}`);
let refused = "";
try { journal::errors("noisy", "not a time"); } catch (e) { refused = `${e}`; }
check("a read journalctl refuses says why", refused.contains("journalctl failed (status 1)")
    && refused.contains("not a time"), refused);
file::write("/tmp/a.txt", "one\n", #{ backup: false });
file::write("/tmp/a.txt", "two\n");
file::write("/tmp/b.txt", "three\n");
let texts = file::read_all(["/tmp/a.txt", "/tmp/absent.txt", "/tmp/b.txt"]);
let kept = file::exists("/tmp/a.txt.opsbook-backup");
let removed = file::remove("/tmp/a.txt").changed;
check("files are read together and removed with their backup", texts == ["two\n", (), "three\n"] && kept
    && removed && !file::exists("/tmp/a.txt.opsbook-backup") && !file::exists("/tmp/a.txt"), `${texts}`);
let ready = wait::until(|| http::probe(config.log_shipper.url).ok, #{ timeout: "10s", every: "100ms" });
let p = http::probe(config.log_shipper.url);
check("its loopback endpoint answers through the forward", ready.ok && p.status == 200, p.detail);
let open = host::tcp_connect("127.0.0.1:12345", "3s");
let closed = host::tcp_connect("127.0.0.1:1", "3s");
check("TCP reach is tried from the host", open.ok && !closed.ok && closed.detail == "connection refused",
    `${open.detail}; ${closed.detail}`);
let lo = host::interface("lo");
let none = host::interface("wg-nowhere");
check("the host's interfaces are read there", lo.up && !none.exists, `${lo.state}; ${none.state}`);
"#;

#[test]
fn a_session_acts_on_a_remote_host_through_its_world() {
    let fleet = match Fleet::boot(&["c1"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let host = fleet.host("c1");
    host.install_unit("sleeper.service", SLEEPER);
    host.install_unit("web.service", LOOPBACK_WEB);
    host.install_unit("noisy.service", NOISY);
    let mut config = Config::defaults();
    config.set(keys::SCOPE, Value::Text("user".into()), Origin::Flag("test")).unwrap();
    // The shipper's endpoint listens on the host's loopback only.
    config.set(keys::LOG_SHIPPER_URL, Value::Text("http://127.0.0.1:12345".into()), Origin::Flag("test")).unwrap();
    // As a fleet run connects: the forwards known first, the master started holding them.
    let (config, wanted) = endpoints_from_host(&config, "c1").unwrap();
    let ssh = Arc::new(Ssh::connect_with(host.ssh_target(), &wanted).unwrap_or_else(|e| panic!("{e}")));
    let endpoints = routes(&ssh, &wanted);
    // The URL stays the host's own; requests to it go through a socket only we can open.
    assert_eq!(config.text(keys::LOG_SHIPPER_URL), "http://127.0.0.1:12345");
    assert_eq!(config.setting(keys::LOG_SHIPPER_URL).origin.to_string(), "forwarded over ssh, reached from c1");
    let socket = endpoints.socket_for("http://127.0.0.1:12345/ready").expect("forwarded").to_path_buf();
    assert!(std::fs::symlink_metadata(&socket).unwrap().file_type().is_socket(), "{}", socket.display());

    let world = World::over_ssh(&config, ssh.clone(), true, endpoints).unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("runbooks")).unwrap();
    std::fs::write(dir.path().join("runbooks/remote.rhai"), RUNBOOK).unwrap();
    let catalog = Arc::new(Catalog::new(&[dir.path().join("runbooks")]));
    let mode = Mode { host: Some("c1".into()), ..Mode::default() };
    let session = Session::new(config, world, catalog, mode);
    let compiled = session.compile("remote").unwrap();
    let report = session
        .run_recorded(&compiled, &[], |name, source, params, mode| {
            let quiet = opsbook_base::report::formatter(Format::Json, false);
            Recorder::with_output(name, source, params, mode, quiet, Box::new(std::io::sink()))
        })
        .unwrap();
    let seen: Vec<(String, Outcome, String)> =
        report.records().map(|r| (r.name.clone(), r.outcome, r.detail.clone())).collect();
    let names: Vec<&str> = seen.iter().filter(|(_, o, _)| *o == Outcome::Pass).map(|(n, _, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "hostname is the host's",
            "unit started over the bridge",
            "command ran there, with its environment",
            "the host's journal has the line",
            "the unit's lines are read there",
            "its errors and warnings are read there",
            "a read journalctl refuses says why",
            "files are read together and removed with their backup",
            "its loopback endpoint answers through the forward",
            "TCP reach is tried from the host",
            "the host's interfaces are read there",
        ],
        "{seen:#?}\nend: {:?}",
        report.end
    );
    // The unit really runs there, as its own manager says.
    assert_eq!(host.ok(&["systemctl", "--user", "is-active", "sleeper"]).trim(), "active");
}
