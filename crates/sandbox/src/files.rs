//! The sandbox's files and addresses: its private directory, the token, free loopback
//! ports, and the agent's and shipper's configuration files of each simulated host.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use opsbook_base::secret::Secret;

/// Where the servers of a sandbox listen.
pub(crate) struct Servers {
    pub db: SocketAddr,
    pub logs: SocketAddr,
}

/// A simulated host's client side: its configuration files and its shipper's address.
pub(crate) struct ClientFiles {
    pub(crate) agent_config: PathBuf,
    pub(crate) shipper_config: PathBuf,
    pub shipper: SocketAddr,
    /// The folder standing for the host's `/` (where the agent's `logfile` lands).
    pub(crate) root: PathBuf,
}

impl ClientFiles {
    /// A client host's files inside its `/` (`root`), where the package puts them: the verbs
    /// read them there too. `shipper` is its shipper's address.
    pub(crate) fn inside(root: PathBuf, shipper: SocketAddr) -> ClientFiles {
        ClientFiles {
            agent_config: root.join("etc/telegraf/telegraf.conf"),
            shipper_config: root.join("etc/alloy/alloy.toml"),
            shipper,
            root,
        }
    }
}

/// Where the `metrics-agent:logfile` fault has the agent log, as the host sees it.
pub(crate) const AGENT_LOGFILE: &str = "/var/log/telegraf/telegraf.log";

/// `text` (a TOML config) with `lines` added at the top of its `[section]` (made when absent).
pub(crate) fn with_lines_in(text: &str, section: &str, lines: &str) -> String {
    let header = format!("[{section}]\n");
    match text.find(&header) {
        Some(at) => format!("{}{header}{lines}{}", &text[..at], &text[at + header.len()..]),
        None => format!("{text}{header}{lines}"),
    }
}

/// The metrics agent's configuration: every second to the sandbox's database, tagged with
/// `hostname` (empty: this machine's name, as Telegraf does).
pub(crate) fn agent_config(db: SocketAddr, token: &Secret, org: &str, bucket: &str, hostname: &str) -> String {
    format!(
        "# The sandbox's metrics agent (Telegraf TOML subset).\n[agent]\n  interval = \"1s\"\n  flush_interval = \"1s\"\n  hostname = \"{hostname}\"\n\
[[outputs.influxdb_v2]]\n  urls = [\"http://{db}\"]\n  token = \"{}\"\n  organization = \"{org}\"\n  bucket = \"{bucket}\"\n  timeout = \"2s\"\n\
[[inputs.cpu]]\n  percpu = false\n  totalcpu = true\n[[inputs.mem]]\n[[inputs.disk]]\n  ignore_fs = [\"tmpfs\", \"devtmpfs\", \"overlay\", \"squashfs\"]\n",
        token.expose()
    )
}

/// The log shipper's configuration: the host's whole journal to the sandbox's log store,
/// labelled with `hostname` (empty: this machine's name).
pub(crate) fn shipper_config(listen: SocketAddr, logs: SocketAddr, hostname: &str) -> String {
    format!(
        "# The sandbox's log shipper: the whole sandbox journal to the log store.\n[server]\nlisten = \"{listen}\"\n\
[journal]\nunits = []\n[labels]\nservice_type = \"journal\"\nhostname = \"{hostname}\"\n\
[write]\nurl = \"http://{logs}/loki/api/v1/push\"\nbatch_wait = \"5ms\"\ntimeout = \"2s\"\nmax_retries = 2\nmin_backoff = \"100ms\"\nmax_backoff = \"1s\"\n"
    )
}

/// What the `bad-config` fault leaves in the shipper's file: a typo and a bad address.
pub(crate) const BROKEN_SHIPPER_CONFIG: &str =
    "[write]\nurl = \"127.0.0.1:3100/loki/api/v1/push\"\nbatchwait = \"1s\"\n";

/// `n` distinct free loopback ports (the components bind them again when their units start).
/// All are held until all are chosen, or the kernel may hand out one twice.
pub(crate) fn free_ports(n: usize) -> std::io::Result<Vec<SocketAddr>> {
    let held = (0..n).map(|_| std::net::TcpListener::bind("127.0.0.1:0")).collect::<std::io::Result<Vec<_>>>()?;
    held.iter().map(|l| l.local_addr()).collect()
}

/// A random API token from the kernel's generator.
pub(crate) fn random_token() -> String {
    format!("sandbox-{}", random_hex(24))
}

/// A fresh `$TMPDIR/opsbook-sandbox-PID-RANDOM`, mode 0700: made by this call (`create`
/// fails on anything already at the name, a random suffix makes a planted one useless), never
/// a folder that was there. Leftovers of sandboxes whose process is gone (killed with SIGKILL,
/// or interrupted while a fleet was set up) are removed beside it — only folders of that very
/// shape, not links, owned by the user this one is: another user's, or anything else at a
/// similar name, is left alone. The removal runs on a thread of its own: a fleet's thousands
/// of files take seconds to remove on a busy disk.
pub(crate) fn private_dir() -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let base = std::env::temp_dir();
    let pid = std::process::id();
    let dir = loop {
        let dir = base.join(format!("opsbook-sandbox-{pid}-{}", random_hex(8)));
        match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            made => break made.map(|()| dir)?,
        }
    };
    let owner = std::fs::symlink_metadata(&dir)?.uid();
    let stale: Vec<PathBuf> = std::fs::read_dir(&base)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| left_by_a_sandbox_gone(&e.file_name().to_string_lossy()))
        .filter(|e| std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == owner))
        .map(|e| e.path())
        .collect();
    if !stale.is_empty() {
        std::thread::spawn(move || stale.iter().for_each(|d| drop(std::fs::remove_dir_all(d))));
    }
    Ok(dir)
}

/// Whether `name` is a sandbox folder's (`opsbook-sandbox-PID-` and 16 hex digits) whose
/// process is gone.
fn left_by_a_sandbox_gone(name: &str) -> bool {
    let Some((pid, suffix)) = name.strip_prefix("opsbook-sandbox-").and_then(|rest| rest.split_once('-')) else {
        return false;
    };
    pid.parse::<u32>().is_ok()
        && suffix.len() == 16
        && suffix.bytes().all(|b| b.is_ascii_hexdigit())
        && !Path::new(&format!("/proc/{pid}")).exists()
}

/// `bytes` random bytes from the kernel's generator, in hex.
fn random_hex(bytes: usize) -> String {
    use std::io::Read;
    let mut buf = vec![0u8; bytes];
    if std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf)).is_err() {
        let seed = opsbook_twin::now_ns() as u64 ^ u64::from(std::process::id());
        buf.iter_mut().enumerate().for_each(|(i, b)| *b = (seed >> ((i % 8) * 8)) as u8 ^ i as u8);
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    opsbook_base::write_atomically(path, text.as_bytes(), 0o600)
}
