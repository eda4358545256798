//! `pkg::` — the host's packages: its package manager (from `/etc/os-release`: apt on
//! Debian and Ubuntu, dnf on the RHEL family and Fedora), the version of a package installed,
//! the versions its repositories offer, installing one (optionally a pinned version) and
//! removing or purging one. Vendor repositories are added in the same namespace by
//! `pkg/repo.rs`, their keys by `pkg/key.rs`; what they all ask of the host's package
//! manager is in `pkg/manager.rs`.
//!
//! Every command goes through the `Commands` world seam with a timeout (`package.timeout` for
//! what downloads or installs, `tools.timeout` for questions), so on an ssh host it is that
//! host's package manager; every change passes `Context::plan` first (dry-run, watch-only); what
//! the package manager says of a failure is put in words (`Failure`). The sandbox has no
//! package manager: there every verb refuses. (The namespace is `pkg`: `package` is a reserved
//! word in Rhai.)

pub(crate) mod install;
pub(crate) mod key;
pub(crate) mod manager;
pub(crate) mod repo;

use rhai::{Array, Dynamic, Module, NativeCallContext};

use self::manager::{available, installed, os};
use super::context::context;
use super::values::record;
use crate::register;

/// The `pkg::` namespace.
pub(crate) fn module() -> Module {
    let mut m = Module::new();
    read_verbs(&mut m);
    install::add(&mut m);
    repo::add(&mut m);
    m
}

fn read_verbs(m: &mut Module) {
    register!(
        m,
        "os",
        Reads,
        ["Map"],
        "/// The host's system as `/etc/os-release` says it: `#{id, version_id, name, like, family}`;\n\
         /// `family` is its package manager, `apt` (Debian, Ubuntu) or `dnf` (RHEL, Fedora…), else \"\".",
        "pkg::os().family",
        |call: NativeCallContext| os(&context(&call)).and_then(|o| record(&o))
    );
    register!(
        m,
        "version",
        Reads,
        ["name: &str", "String"],
        "/// The version of the package installed (`dpkg-query`, `rpm -q`), \"\" when it is not.",
        "pkg::version(\"alloy\")",
        |call: NativeCallContext, name: &str| installed(&context(&call), name).map(|s| s.version.unwrap_or_default())
    );
    register!(
        m,
        "available",
        Reads,
        ["name: &str", "Array"],
        "/// The versions of the package the host's repositories offer, as `apt-cache madison` (or\n\
         /// `dnf list --showduplicates`) lists them: newest first; empty when none offers it.",
        "pkg::available(\"telegraf\")",
        |call: NativeCallContext, name: &str| {
            available(&context(&call), name).map(|v| v.into_iter().map(Dynamic::from).collect::<Array>())
        }
    );
}
