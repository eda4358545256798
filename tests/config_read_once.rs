//! A command reads each configuration file once: the configuration is loaded once and handed
//! down, and what else the file holds (the inventory's `[hosts]` and `[groups]`) is parsed
//! from the text read then. The kernel counts the opens (inotify), so nothing in opsbook has to
//! say it did.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::support::Test;

/// The opens of one file the kernel reports while a watch lasts.
struct Opens {
    fd: libc::c_int,
}

impl Opens {
    fn watch(path: &Path) -> Opens {
        let name = CString::new(path.as_os_str().as_bytes()).unwrap();
        // SAFETY: plain system calls on a descriptor this value owns, with a valid C string.
        let fd = unsafe { libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC) };
        assert!(fd >= 0, "inotify_init1: {}", std::io::Error::last_os_error());
        // Closes are watched too: inotify folds an event into an identical one not yet read, so
        // open, close, open, close keeps both opens apart.
        let watched = unsafe { libc::inotify_add_watch(fd, name.as_ptr(), libc::IN_OPEN | libc::IN_CLOSE) };
        assert!(watched >= 0, "inotify_add_watch {}: {}", path.display(), std::io::Error::last_os_error());
        Opens { fd }
    }

    /// The opens reported since the watch began (or since the last count).
    fn count(&self) -> usize {
        let mut opens = 0;
        let mut buffer = [0u8; 4096];
        loop {
            // SAFETY: reads into a buffer of the length given.
            let n = unsafe { libc::read(self.fd, buffer.as_mut_ptr().cast(), buffer.len()) };
            if n <= 0 {
                return opens;
            }
            let mut at = 0;
            while at < n as usize {
                // SAFETY: the kernel writes whole events; an unaligned read copies one out.
                let event: libc::inotify_event = unsafe { std::ptr::read_unaligned(buffer[at..].as_ptr().cast()) };
                opens += usize::from(event.mask & libc::IN_OPEN != 0);
                at += std::mem::size_of::<libc::inotify_event>() + event.len as usize;
            }
        }
    }
}

impl Drop for Opens {
    fn drop(&mut self) {
        // SAFETY: closes the descriptor this value owns.
        unsafe { libc::close(self.fd) };
    }
}

#[test]
fn each_command_reads_its_configuration_file_once() {
    let config = "[hosts.here]\nroles = [\"metrics-db\"]\n[hosts.there]\nroles = [\"log-store\"]\n";
    // `inventory::hosts()` makes a run on this machine read the inventory as well.
    let runbook = "//! Reads the inventory.\ncheck(\"two hosts\", inventory::hosts().len() == 2);\n";
    let commands: [&[&str]; 6] = [
        &["run", "inventory", "--dry-run"],
        &["run", "inventory", "--dry-run", "--hosts", "all"],
        &["run", "inventory", "--sandbox"],
        &["hosts"],
        &["config"],
        &["fns", "unit::status"],
    ];
    let mut seen = Vec::new();
    for args in commands {
        let test = Test::new().config(config).runbook("inventory", runbook).args(args);
        let opens = Opens::watch(&test.path().join("opsbook.toml"));
        let code = test.run().code;
        seen.push(format!("opsbook {} (exit {code}): opened {} time(s)", args.join(" "), opens.count()));
    }
    let expected: Vec<String> = commands
        .iter()
        .map(|args| {
            // The sandbox's inventory is its simulated host alone.
            let code = if args.contains(&"--sandbox") { 1 } else { 0 };
            format!("opsbook {} (exit {code}): opened 1 time(s)", args.join(" "))
        })
        .collect();
    assert_eq!(seen, expected);
}

/// A run on this machine reads the inventory once, for the note it starts with (the inventory
/// does not name this machine) and for the runbook's `inventory::hosts()` alike.
#[test]
fn a_run_on_this_machine_reads_its_inventory_once() {
    let inventory = "all:\n  hosts:\n    far1:\n      ansible_host: 192.0.2.7\n";
    let runbook = "//! Reads the inventory.\ncheck(\"one host\", inventory::hosts().len() == 1);\n";
    let test = Test::new().file("hosts.yml", inventory).runbook("inventory", runbook).args([
        "run",
        "inventory",
        "--inventory",
        "hosts.yml",
    ]);
    let opens = Opens::watch(&test.path().join("hosts.yml"));
    let out = test.run();
    let out = out.stdout_has("is not in the inventory, so `inventory` checks it alone").stdout_has("ok    one host");
    assert_eq!((out.code, opens.count()), (0, 1), "exit status and opens of hosts.yml{}", out.stderr);
}
