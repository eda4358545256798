//! Links the `opsbook` binary with its relative relocations packed (`-z pack-relative-relocs`,
//! DT_RELR: glibc 2.36 and later, as Debian 12 and 13 have). A position-independent binary
//! this size carries ~30,000 of them, each applied by the loader at every start before `main`;
//! packed, the table is a few kilobytes instead of ~750 KB and is applied in a fraction of the
//! time: every run starts sooner. Linux with glibc only.

// A build script speaks to cargo on its stdout: nothing here is the operator's output.
#![allow(clippy::disallowed_macros)]

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    let env = std::env::var("CARGO_CFG_TARGET_ENV").unwrap_or_default();
    if os == "linux" && env == "gnu" {
        println!("cargo::rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}
