//! Embeds `runbooks/*.rhai`, `stdlib/*.rhai` and every file under `templates/` into the
//! binary, so an installed opsbook works from any directory. Files on the search path still
//! override these copies.

// A build script talks to cargo through its stdout (`cargo:rerun-if-changed=…`).
#![allow(clippy::disallowed_macros)]

use std::fmt::Write;
use std::path::Path;

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    // runbooks/, stdlib/ and templates/ sit at the root of the workspace, two levels up.
    let root = Path::new(&manifest).join("../..");
    let mut code = String::new();
    for (dir, constant) in [("runbooks", "RUNBOOKS"), ("stdlib", "STDLIB")] {
        println!("cargo:rerun-if-changed={}", root.join(dir).display());
        let mut files: Vec<_> = std::fs::read_dir(Path::new(&root).join(dir))
            .map(|rd| rd.filter_map(Result::ok).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.retain(|p| p.extension().is_some_and(|e| e == "rhai"));
        files.sort();
        writeln!(code, "pub(crate) static {constant}: &[(&str, &str)] = &[").unwrap();
        for path in files {
            let name = path.file_stem().unwrap().to_string_lossy();
            println!("cargo:rerun-if-changed={}", path.display());
            writeln!(code, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
        }
        writeln!(code, "];").unwrap();
    }
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("embedded.rs");
    std::fs::write(out, code).expect("write embedded.rs");
    templates(Path::new(&root));
}

/// `TEMPLATES`: each file under `templates/` by its path there (`log-shipper/config.alloy.j2`).
fn templates(root: &Path) {
    fn walk(dir: &Path, prefix: &str, found: &mut Vec<(String, std::path::PathBuf)>) {
        println!("cargo:rerun-if-changed={}", dir.display());
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        for e in entries.filter_map(Result::ok) {
            let name = format!("{prefix}{}", e.file_name().to_string_lossy());
            if e.path().is_dir() {
                walk(&e.path(), &format!("{name}/"), found);
            } else if !e.file_name().to_string_lossy().starts_with('.') {
                println!("cargo:rerun-if-changed={}", e.path().display());
                found.push((name, e.path()));
            }
        }
    }
    let mut found = Vec::new();
    walk(&root.join("templates"), "", &mut found);
    found.sort();
    let mut code = String::from("pub(crate) static TEMPLATES: &[(&str, &str)] = &[\n");
    for (name, path) in found {
        writeln!(code, "    ({name:?}, include_str!({:?})),", path.display().to_string()).unwrap();
    }
    code.push_str("];\n");
    let out = Path::new(&std::env::var("OUT_DIR").unwrap()).join("templates.rs");
    std::fs::write(out, code).expect("write templates.rs");
}
