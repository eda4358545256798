//! Remote commands as sessions of a host's shared connection (`Ssh::exec`), on a real host of
//! the test fleet: input given, stdout and stderr apart, the command's own exit status (255
//! included, which a local `ssh` client would have taken for its own failure), a command
//! killed by a signal told in words, a session given up on at its limit, no local process
//! started for any of it, a session ended at once by the run's Ctrl-C, a command that outlives
//! its timeout stopped on the host, and a client `ssh` taking over when the master is gone.

use std::collections::BTreeSet;
use std::time::Duration;

use opsbook_base::process::Invocation;
use opsbook_world::World;
use opsbook_world::transport::Ssh;

use crate::support::fleet::Fleet;

/// The `ssh` clients (not masters) to `address` this test binary has started and not yet
/// reaped (every thread's children; other tests start processes of their own meanwhile).
fn ssh_clients(address: &str) -> BTreeSet<String> {
    let mut found = BTreeSet::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
        let listed = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
        found.extend(listed.split_whitespace().map(|pid| {
            let argv = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            String::from_utf8_lossy(&argv).replace('\0', " ").trim().to_string()
        }));
    }
    found.retain(|argv| {
        argv.starts_with("ssh ") && !argv.starts_with("ssh -M") && argv.contains(&format!("@{address} "))
    });
    found
}

#[test]
fn commands_run_as_sessions_of_the_master_with_no_local_process() {
    let fleet = match Fleet::boot(&["c1"]) {
        Ok(f) => f,
        Err(why) => return crate::support::skip(why),
    };
    let host = fleet.host("c1");
    let ssh = Ssh::connect(host.ssh_target()).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let argv = |words: &[&str]| words.iter().map(|w| w.to_string()).collect::<Vec<_>>();
    let exec = |words: &[&str], stdin: Option<&str>, limit: u64| {
        rt.block_on(ssh.exec(&argv(words), stdin.map(str::to_string), Duration::from_secs(limit)))
    };

    let address = host.address().to_string();
    let (done, clients) = watching_clients(&address, || {
        exec(&["sh", "-c", "cat; echo to stderr >&2; sleep 0.3; exit 3"], Some("given on stdin\n"), 10).unwrap()
    });
    assert_eq!(
        (done.code, done.stdout.as_str(), done.stderr.as_str(), done.timed_out),
        (Some(3), "given on stdin\n", "to stderr\n", false)
    );
    assert_eq!(clients, BTreeSet::<String>::new(), "no ssh client: the command was a session of the master");

    let done = exec(&["sh", "-c", "exit 255"], None, 10).unwrap();
    assert_eq!(done.code, Some(255), "255 is the command's own status");

    let killed = exec(&["sh", "-c", "kill -9 $$"], None, 10).unwrap_err();
    assert_eq!(
        killed,
        "ssh to host c1 failed: the session ended without an exit status (the connection was lost, or a signal \
         killed the command)"
    );

    let late = exec(&["sleep", "30"], None, 1).unwrap();
    assert_eq!(
        (late.code, late.stderr.as_str(), late.timed_out),
        (None, "no answer within 1s: the session was closed", true)
    );

    // Ctrl-C (or the run's time limit) ends a session in flight at once, as it ends every wait
    // of a run: the session blocks its thread, and looks at the cancel that thread watches.
    let (ended, took) = cancelled_after(&rt, &ssh, Duration::from_millis(300));
    assert_eq!(ended, "interrupted");
    assert!(took < Duration::from_secs(2), "ended {took:?} after the start");

    // Through the host's world, a command past its timeout is ended there, not left running.
    let world =
        World::over_ssh(&opsbook_base::config::Config::defaults(), std::sync::Arc::new(ssh), true, Default::default())
            .unwrap();
    let inv = Invocation { argv: argv(&["sleep", "31"]), timeout: Duration::from_secs(1), ..Invocation::default() };
    let done = rt.block_on(world.commands.run(&inv)).unwrap();
    assert_eq!((done.code, done.timed_out), (None, true));
    let left = host.exec(&["pgrep", "-f", "sleep 31"]);
    assert_eq!(String::from_utf8_lossy(&left.stdout), "", "the host ended the command at its timeout");

    // With its master gone, a client ssh runs the command over a connection of its own (and
    // the watch sees it).
    let connection = world.connection.clone().unwrap();
    connection.close();
    let (done, clients) = watching_clients(&address, || {
        let words = argv(&["sh", "-c", "sleep 0.3; hostname"]);
        rt.block_on(connection.exec(&words, None, Duration::from_secs(20))).unwrap()
    });
    assert_eq!((done.code, done.stdout.as_str()), (Some(0), "c1\n"));
    assert_eq!(clients.len(), 1, "{clients:?}");
}

/// A `sleep 7` on the host, run as `Context::block_on` runs a verb's work (raced against the
/// run's cancel, which the thread watches), cancelled after `after`: what ended the wait, and
/// when.
fn cancelled_after(rt: &tokio::runtime::Runtime, ssh: &Ssh, after: Duration) -> (String, Duration) {
    let cancel = opsbook_base::Cancel::default();
    let started = std::time::Instant::now();
    let words: Vec<String> = ["sleep", "7"].map(String::from).to_vec();
    let ended = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(after);
            cancel.cancel();
        });
        cancel.watch_here(|| {
            rt.block_on(async {
                tokio::select! {
                    biased;
                    _ = cancel.cancelled() => "interrupted".to_string(),
                    done = ssh.exec(&words, None, Duration::from_secs(60)) => format!("{done:?}"),
                }
            })
        })
    });
    (ended, started.elapsed())
}

/// What `run` gives, and the ssh clients to `address` seen while it ran (looked for every 10 ms).
fn watching_clients<T: Send>(address: &str, run: impl FnOnce() -> T) -> (T, BTreeSet<String>) {
    let done = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let watch = s.spawn(|| {
            let mut seen = BTreeSet::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) {
                seen.extend(ssh_clients(address));
                std::thread::sleep(Duration::from_millis(10));
            }
            seen
        });
        let result = run();
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        (result, watch.join().unwrap())
    })
}
