//! Reading the files operators give opsbook: configuration, inventories, runbooks, templates,
//! token files. Each is refused in words when it is not a regular file (a FIFO with no writer
//! would block forever, `/dev/zero` would fill memory) or larger than its kind may be, and
//! read as UTF-8 text or refused saying where it is not.

use std::io::Read;
use std::path::Path;

/// What a file is for, and how large it may be.
#[derive(Debug, Clone, Copy)]
pub struct Kind {
    /// `configuration file`, `inventory`, … as messages name it.
    pub what: &'static str,
    /// The largest it may be; a larger file is refused, not read.
    pub max_bytes: u64,
}

impl Kind {
    /// opsbook's configuration file.
    pub const CONFIG: Kind = Kind { what: "configuration file", max_bytes: 4 << 20 };
    /// `components.toml`, the operator's additions to the component table.
    pub const COMPONENTS: Kind = Kind { what: "component table", max_bytes: 4 << 20 };
    /// Large enough for a generated inventory of tens of thousands of hosts.
    pub const INVENTORY: Kind = Kind { what: "inventory", max_bytes: 256 << 20 };
    /// An Ansible inventory's `group_vars/` or `host_vars/` file.
    pub const VARS: Kind = Kind { what: "vars file", max_bytes: 256 << 20 };
    /// A runbook (`runbooks/NAME.rhai`).
    pub const RUNBOOK: Kind = Kind { what: "runbook", max_bytes: 4 << 20 };
    /// A module runbooks import (`stdlib/NAME.rhai`).
    pub const MODULE: Kind = Kind { what: "module", max_bytes: 4 << 20 };
    /// A Jinja template the deploy renders.
    pub const TEMPLATE: Kind = Kind { what: "template", max_bytes: 4 << 20 };
    /// The file holding the API token (`token_file`).
    pub const TOKEN: Kind = Kind { what: "token file", max_bytes: 64 << 10 };
    /// A script the REPL's `:load` runs.
    pub const SCRIPT: Kind = Kind { what: "script", max_bytes: 4 << 20 };
    /// `http.ca_file`: a few PEM certificates.
    pub const CA_FILE: Kind = Kind { what: "CA file", max_bytes: 1 << 20 };
    /// What a runbook reads with `file::read` (configuration files, for the most part).
    pub const FILE: Kind = Kind { what: "file", max_bytes: 16 << 20 };
}

/// Why a file could not be read as text of its kind.
#[derive(Debug)]
pub enum Refused {
    /// It could not be opened or read (missing, no permission, …).
    Io(std::io::Error),
    /// Not a regular file: a directory, FIFO, socket or device.
    NotAFile {
        /// What it is instead (`a directory`, `a FIFO`, …).
        kind: &'static str,
    },
    /// Larger than its kind allows.
    TooLarge {
        /// Its size.
        bytes: u64,
        /// The largest its kind allows.
        max: u64,
    },
    /// Not UTF-8 text.
    NotText {
        /// The offset of the first byte that is not UTF-8.
        offset: usize,
    },
}

impl Refused {
    /// The reason in an operator's words, for `path` read as `kind`.
    pub fn explain(&self, kind: Kind, path: &Path) -> String {
        let path = path.display();
        match self {
            Refused::Io(e) => format!("cannot read the {} `{path}`: {e}", kind.what),
            Refused::NotAFile { kind: found } => {
                format!("the {} `{path}` is a {found}, not a regular file: give the path of a file", kind.what)
            }
            Refused::TooLarge { bytes, max } => format!(
                "the {} `{path}` is {} — more than the {} a {} may be",
                kind.what,
                size(*bytes),
                size(*max),
                kind.what
            ),
            Refused::NotText { offset } => {
                format!("the {} `{path}` is not UTF-8 text (the bytes at offset {offset} are not)", kind.what)
            }
        }
    }
}

/// Reads `path` as text of `kind`, or says why not (see `Refused::explain`).
pub fn read_text(path: &Path, kind: Kind) -> Result<String, Refused> {
    // `metadata` follows links and never blocks, unlike opening a FIFO.
    let meta = std::fs::metadata(path).map_err(Refused::Io)?;
    if !meta.is_file() {
        return Err(Refused::NotAFile { kind: file_type(&meta) });
    }
    if meta.len() > kind.max_bytes {
        return Err(Refused::TooLarge { bytes: meta.len(), max: kind.max_bytes });
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    // A file growing while it is read is still held to the limit.
    std::fs::File::open(path).and_then(|f| f.take(kind.max_bytes + 1).read_to_end(&mut bytes)).map_err(Refused::Io)?;
    if bytes.len() as u64 > kind.max_bytes {
        return Err(Refused::TooLarge { bytes: bytes.len() as u64, max: kind.max_bytes });
    }
    String::from_utf8(bytes).map_err(|e| Refused::NotText { offset: e.utf8_error().valid_up_to() })
}

/// The same, with the reason as the message.
pub fn read_text_or_explain(path: &Path, kind: Kind) -> Result<String, String> {
    read_text(path, kind).map_err(|r| r.explain(kind, path))
}

/// What a file that is not a regular one is, in words (`directory`, `FIFO (named pipe)`, …).
pub fn file_type(meta: &std::fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let t = meta.file_type();
    if t.is_dir() {
        "directory"
    } else if t.is_fifo() {
        "FIFO (named pipe)"
    } else if t.is_socket() {
        "socket"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 => format!("{:.1} MiB", b as f64 / (1 << 20) as f64),
        b if b >= 1 << 10 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{b} bytes"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_large_files_and_binary_files_are_refused_in_words() {
        let dev_zero = read_text_or_explain(Path::new("/dev/zero"), Kind::CONFIG).unwrap_err();
        assert_eq!(
            dev_zero,
            "the configuration file `/dev/zero` is a character device, not a regular file: give the path of a file"
        );
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        let shown = fifo.display().to_string();
        assert_eq!(
            read_text_or_explain(&fifo, Kind::INVENTORY).unwrap_err(),
            format!("the inventory `{shown}` is a FIFO (named pipe), not a regular file: give the path of a file")
        );
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; 70 << 10]).unwrap();
        assert_eq!(
            read_text_or_explain(&big, Kind::TOKEN).unwrap_err(),
            format!("the token file `{}` is 70.0 KiB — more than the 64.0 KiB a token file may be", big.display())
        );
        let binary = dir.path().join("binary");
        std::fs::write(&binary, b"ok\xff\xfe").unwrap();
        assert_eq!(
            read_text_or_explain(&binary, Kind::TEMPLATE).unwrap_err(),
            format!("the template `{}` is not UTF-8 text (the bytes at offset 2 are not)", binary.display())
        );
        assert_eq!(
            read_text_or_explain(dir.path(), Kind::RUNBOOK).unwrap_err(),
            format!(
                "the runbook `{}` is a directory, not a regular file: give the path of a file",
                dir.path().display()
            )
        );
    }
}
