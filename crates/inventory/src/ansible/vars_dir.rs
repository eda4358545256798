//! `group_vars/` and `host_vars/` beside an inventory, as Ansible's `host_group_vars` plugin
//! reads them: `NAME`, `NAME.yml`, `NAME.yaml` or `NAME.json`, or a directory `NAME/` whose
//! files are read in name order (later files win). Whatever stands where a vars file is meant
//! and is no regular file (a folder named `all.yml`, a folder inside `NAME/`, a FIFO, a device)
//! is refused naming it, never skipped: the hosts would run without their variables.

use std::path::{Path, PathBuf};

use super::vars::Vars;
use super::yaml;
use opsbook_base::Error;

const EXTENSIONS: [&str; 4] = ["", ".yml", ".yaml", ".json"];

/// The variables for `name` under `dir` (empty when there are none).
pub(super) fn read(dir: &Path, name: &str) -> Result<Vars, Error> {
    let mut files: Vec<PathBuf> = Vec::new();
    for ext in EXTENSIONS {
        let candidate = dir.join(format!("{name}{ext}"));
        // `metadata` follows links and never blocks; what is not there is no vars file.
        let Ok(meta) = std::fs::metadata(&candidate) else { continue };
        if ext.is_empty() && meta.is_dir() {
            let mut inside: Vec<PathBuf> = std::fs::read_dir(&candidate)
                .map_err(|source| Error::Io { context: format!("cannot list `{}`", candidate.display()), source })?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| vars_file(p))
                .collect();
            inside.sort();
            files.extend(inside);
        } else {
            files.push(candidate);
        }
    }
    let mut vars = Vars::new();
    for file in files {
        let text = opsbook_base::read_text_or(&file, opsbook_base::InputKind::VARS, |source| Error::Io {
            context: format!("cannot read `{}`", file.display()),
            source,
        })?;
        if let Some(doc) = yaml::parse(&file, &text)? {
            vars.extend(yaml::vars(&file, &text, &doc, "a vars file")?);
        }
    }
    Ok(vars)
}

/// Files Ansible reads inside a vars directory: YAML or JSON, or no extension at all.
fn vars_file(path: &Path) -> bool {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    !name.starts_with('.')
        && match path.extension().and_then(|e| e.to_str()) {
            None => true,
            Some(ext) => matches!(ext, "yml" | "yaml" | "json"),
        }
}
