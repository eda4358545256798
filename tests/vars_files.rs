//! A vars file of an Ansible inventory (`group_vars/`, `host_vars/`) that is a folder where a
//! file is meant, a FIFO or a device is refused naming it (#36, item 7) — not skipped, which
//! would run the hosts without their variables, and not read, which would block on the FIFO or
//! fill memory from the device.

use std::path::Path;

use crate::support::Test;

const INVENTORY: &str = "[clients]\nc1 ansible_host=10.0.0.1\n";

/// What a case puts in place of a vars file, in the test's directory.
type Setup<'a> = &'a dyn Fn(&Path);

fn refusal(setup: impl FnOnce(&Path)) -> (i32, String, String) {
    let t = Test::new().file("hosts.ini", INVENTORY).file("group_vars/clients.yml", "site: lab\n");
    setup(t.path());
    let (code, out, err) = t.run_in_place(&["hosts", "--inventory", "hosts.ini"]);
    (code, out, err)
}

#[test]
fn a_vars_file_that_is_a_folder_a_fifo_or_a_device_is_refused_naming_it() {
    let cases: [(&str, Setup, &str); 4] = [
        (
            "a folder named as a YAML file",
            &|dir| std::fs::create_dir_all(dir.join("group_vars/all.yml/x")).unwrap(),
            "error: the vars file `group_vars/all.yml` is a directory, not a regular file: give the path of a file\n",
        ),
        (
            "a FIFO",
            &|dir| {
                std::fs::create_dir_all(dir.join("host_vars")).unwrap();
                assert!(std::process::Command::new("mkfifo").arg(dir.join("host_vars/c1")).status().unwrap().success());
            },
            "error: the vars file `host_vars/c1` is a FIFO (named pipe), not a regular file: give the path of a file\n",
        ),
        (
            "a device",
            &|dir| std::os::unix::fs::symlink("/dev/zero", dir.join("group_vars/all.json")).unwrap(),
            "error: the vars file `group_vars/all.json` is a character device, not a regular file: give the path of a file\n",
        ),
        (
            "a folder inside a vars folder",
            &|dir| std::fs::create_dir_all(dir.join("host_vars/c1/more.yml")).unwrap(),
            "error: the vars file `host_vars/c1/more.yml` is a directory, not a regular file: give the path of a file\n",
        ),
    ];
    for (what, setup, expected) in cases {
        assert_eq!(refusal(setup), (2, String::new(), expected.to_string()), "{what}");
    }
    // The same inventory with its vars files as files is read.
    let (code, out, err) = refusal(|_| {});
    assert_eq!((code, err.as_str()), (0, ""), "{out}");
    assert!(
        out.starts_with("HOST  ADDRESS   ROLES  SCOPE   USER  PORT\nc1    10.0.0.1  -      system  -     -\n"),
        "{out}"
    );
}
