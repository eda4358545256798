//! Signed apt repositories served over HTTP on the test network, as the vendors serve theirs:
//! `grafana` (alloy, loki) and `influxdata` (telegraf, influxdb2), the packages of
//! `vendor_debs.rs` built with `dpkg-deb`, indexed with `apt-ftparchive` (Packages, Release)
//! and signed with a key of each vendor's own made here with `gpg --batch --quick-gen-key`
//! (InRelease, clear-signed; the public key served ASCII-armored, as vendors publish theirs).
//! Beside them `debian`: the Debian 13 packages the test root leaves out (nftables and its
//! libraries, fetched once by debian13-debs.sh), as the hosts' own distribution repository;
//! and a key that signs nothing (`/wrong.key`), for a repository whose key does not match.
//!
//! Every file is served by a small HTTP/1.1 server on a thread (GET and HEAD, whole files,
//! `Connection: close`), bound to the fleet's bridge address so that only the test hosts see
//! it. Tools missing here (gpg, dpkg-deb, apt-ftparchive) are named in the error the caller
//! skips with; the gpg agent started for the keys is stopped on drop.

use std::io::{BufRead, BufReader, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use super::vendor_debs::{self, Deb};

/// Where debian13-debs.sh leaves the Debian packages the root leaves out.
pub(crate) const DEBIAN_DEBS: &str = "/opt/opsbook-test-tools/trixie-debs";

/// The repositories, built and served until dropped.
pub(crate) struct AptRepos {
    dir: tempfile::TempDir,
    address: SocketAddr,
    stop: Arc<AtomicBool>,
}

/// One repository: its name (its directory), suite and packages; its key is `NAME.key`.
struct Repo {
    name: &'static str,
    suite: &'static str,
    debs: Vec<Deb>,
}

impl AptRepos {
    /// Builds the repositories and serves them on `bind` (a free port): about a second.
    pub(crate) fn build(bind: IpAddr) -> Result<AptRepos, String> {
        for tool in ["gpg", "gpgconf", "dpkg-deb", "apt-ftparchive"] {
            if which(tool).is_none() {
                return Err(format!("{tool} is missing (apt-get install gnupg dpkg-dev apt-utils)"));
            }
        }
        if !Path::new(DEBIAN_DEBS).join("complete").exists() {
            return Err(format!(
                "no Debian packages in {DEBIAN_DEBS} (bash tests/support/debian13-debs.sh fetches them)"
            ));
        }
        let dir = tempfile::Builder::new().prefix("opsbook-apt").tempdir().map_err(|e| e.to_string())?;
        let repos = AptRepos { dir, address: SocketAddr::new(bind, 0), stop: Arc::new(AtomicBool::new(false)) };
        std::fs::create_dir(repos.gnupg()).map_err(|e| e.to_string())?;
        set_mode(&repos.gnupg(), 0o700);
        let vendors = [
            Repo {
                name: "grafana",
                suite: "stable",
                debs: vec![vendor_debs::alloy("1.8.3"), vendor_debs::alloy("1.9.1"), vendor_debs::loki("3.4.6")],
            },
            Repo {
                name: "influxdata",
                suite: "stable",
                debs: vec![vendor_debs::telegraf("1.34.1-1"), vendor_debs::influxdb2("2.7.12-1")],
            },
        ];
        for repo in &vendors {
            repos.key(repo.name)?;
            repos.build_repo(repo)?;
        }
        repos.key("debian")?;
        repos.build_repo(&Repo { name: "debian", suite: "trixie", debs: Vec::new() })?;
        repos.key("wrong")?;
        let mut repos = repos;
        repos.serve()?;
        Ok(repos)
    }

    fn gnupg(&self) -> PathBuf {
        self.dir.path().join("gnupg")
    }

    fn root(&self) -> PathBuf {
        self.dir.path().join("www")
    }

    /// `gpg ARGS` with the repositories' own keyring.
    fn gpg(&self, args: &[&str]) -> Result<Vec<u8>, String> {
        let out = Command::new("gpg")
            .env("GNUPGHOME", self.gnupg())
            .args(["--batch", "--quiet", "--no-tty", "--pinentry-mode", "loopback", "--passphrase", ""])
            .args(args)
            .output()
            .map_err(|e| format!("cannot run gpg: {e}"))?;
        if !out.status.success() {
            return Err(format!("gpg {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(out.stdout)
    }

    /// Makes the key `NAME@opsbook.test` and serves it armored as `/NAME.key`.
    fn key(&self, name: &str) -> Result<(), String> {
        let uid = format!("opsbook test {name} <{name}@opsbook.test>");
        self.gpg(&["--quick-gen-key", &uid, "ed25519", "sign", "never"])?;
        let armored = self.gpg(&["--armor", "--export", &format!("{name}@opsbook.test")])?;
        std::fs::create_dir_all(self.root()).map_err(|e| e.to_string())?;
        std::fs::write(self.root().join(format!("{name}.key")), armored).map_err(|e| e.to_string())
    }

    /// Builds one repository: pool, Packages, Release, InRelease signed by its key.
    fn build_repo(&self, repo: &Repo) -> Result<(), String> {
        let top = self.root().join(repo.name);
        let pool = top.join("pool");
        std::fs::create_dir_all(&pool).map_err(|e| e.to_string())?;
        for deb in &repo.debs {
            build_deb(deb, &pool, &self.dir.path().join("build"))?;
        }
        if repo.name == "debian" {
            for entry in std::fs::read_dir(DEBIAN_DEBS).map_err(|e| e.to_string())?.flatten() {
                if entry.path().extension().is_some_and(|e| e == "deb") {
                    std::fs::copy(entry.path(), pool.join(entry.file_name())).map_err(|e| e.to_string())?;
                }
            }
        }
        let arch = architecture()?;
        let binary = top.join(format!("dists/{}/main/binary-{arch}", repo.suite));
        std::fs::create_dir_all(&binary).map_err(|e| e.to_string())?;
        let packages = tool(Command::new("apt-ftparchive").current_dir(&top).args(["packages", "pool"]))?;
        std::fs::write(binary.join("Packages"), packages).map_err(|e| e.to_string())?;
        let dist = top.join("dists").join(repo.suite);
        let release = tool(Command::new("apt-ftparchive").current_dir(&dist).args([
            "-o",
            &format!("APT::FTPArchive::Release::Suite={}", repo.suite),
            "-o",
            &format!("APT::FTPArchive::Release::Codename={}", repo.suite),
            "-o",
            "APT::FTPArchive::Release::Components=main",
            "-o",
            &format!("APT::FTPArchive::Release::Architectures={arch}"),
            "-o",
            &format!("APT::FTPArchive::Release::Origin={}", repo.name),
            "release",
            ".",
        ]))?;
        std::fs::write(dist.join("Release"), release).map_err(|e| e.to_string())?;
        let (release, signed) = (dist.join("Release"), dist.join("InRelease"));
        let user = format!("{}@opsbook.test", repo.name);
        self.gpg(&["--local-user", &user, "--clearsign", "--output", &s(&signed), &s(&release)])?;
        Ok(())
    }

    /// Serves `root()` on `address` until dropped.
    fn serve(&mut self) -> Result<(), String> {
        let listener =
            TcpListener::bind(self.address).map_err(|e| format!("cannot listen on {}: {e}", self.address))?;
        self.address = listener.local_addr().map_err(|e| e.to_string())?;
        let (root, stop) = (self.root(), self.stop.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                // `drop` sets `stop`, then connects once to end the wait for a connection.
                if stop.load(Ordering::SeqCst) {
                    break;
                }
                if let Ok(stream) = stream {
                    let root = root.clone();
                    std::thread::spawn(move || answer(stream, &root));
                }
            }
        });
        Ok(())
    }

    /// `http://ADDRESS:PORT/PATH`.
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}/{}", self.address, path.trim_start_matches('/'))
    }

    /// The repository settings of every role, pointing at these repositories: dotted keys of
    /// an operator's opsbook.toml (`metrics_db.repository = …`), before its first table.
    pub(crate) fn config_toml(&self) -> String {
        let mut text = String::new();
        for (section, vendor) in [
            ("metrics_db", "influxdata"),
            ("log_store", "grafana"),
            ("metrics_agent", "influxdata"),
            ("log_shipper", "grafana"),
        ] {
            text.push_str(&format!(
                "{section}.repository = \"{} stable main\"\n{section}.repository_key = \"{}\"\n",
                self.url(vendor),
                self.url(&format!("{vendor}.key"))
            ));
        }
        text
    }

    /// The host's own distribution repository, as `/etc/apt/sources.list` names it: here.
    pub(crate) fn debian_sources_list(&self) -> String {
        format!("deb [signed-by=/etc/apt/keyrings/debian-test.asc] {} trixie main\n", self.url("debian"))
    }

    /// The armored key of `name` (`grafana`, `influxdata`, `debian`, `wrong`).
    pub(crate) fn key_text(&self, name: &str) -> String {
        std::fs::read_to_string(self.root().join(format!("{name}.key"))).unwrap_or_default()
    }
}

impl Drop for AptRepos {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(self.address);
        let _ = Command::new("gpgconf").env("GNUPGHOME", self.gnupg()).args(["--kill", "all"]).status();
    }
}

/// Builds `deb` into `pool` with dpkg-deb (files owned by root), working in `scratch`.
fn build_deb(deb: &Deb, pool: &Path, scratch: &Path) -> Result<(), String> {
    let tree = scratch.join(format!("{}-{}", deb.name, deb.version));
    let control = tree.join("DEBIAN");
    std::fs::create_dir_all(&control).map_err(|e| e.to_string())?;
    for (path, mode, text) in &deb.files {
        let file = tree.join(path.trim_start_matches('/'));
        std::fs::create_dir_all(file.parent().expect("a file in a directory")).map_err(|e| e.to_string())?;
        std::fs::write(&file, text).map_err(|e| e.to_string())?;
        set_mode(&file, *mode);
    }
    let fields = format!(
        "Package: {}\nVersion: {}\nArchitecture: {}\nMaintainer: opsbook tests <tests@opsbook.test>\nSection: admin\nPriority: optional\nDescription: {}\n",
        deb.name,
        deb.version,
        architecture()?,
        deb.description
    );
    std::fs::write(control.join("control"), fields).map_err(|e| e.to_string())?;
    if !deb.conffiles.is_empty() {
        let list: String = deb.conffiles.iter().map(|c| format!("{c}\n")).collect();
        std::fs::write(control.join("conffiles"), list).map_err(|e| e.to_string())?;
    }
    for (name, text) in &deb.scripts {
        std::fs::write(control.join(name), text).map_err(|e| e.to_string())?;
        set_mode(&control.join(name), 0o755);
    }
    let out = pool.join(format!("{}_{}_{}.deb", deb.name, deb.version, architecture()?));
    tool(Command::new("dpkg-deb").args(["--root-owner-group", "-Zgzip", "--build"]).arg(&tree).arg(&out))?;
    Ok(())
}

/// Answers one request: the file under `root`, or 404.
fn answer(stream: TcpStream, root: &Path) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut request = String::new();
    if reader.read_line(&mut request).is_err() {
        return;
    }
    // The headers are read and ignored: every answer is the whole file.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        line.clear();
    }
    let mut words = request.split_whitespace();
    let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or("/"));
    let relative = percent_decoded(path.split('?').next().unwrap_or("")).trim_start_matches('/').to_string();
    let file = root.join(&relative);
    let body = if relative.split('/').any(|p| p == "..") { None } else { std::fs::read(&file).ok() };
    let mut stream = stream;
    let _ = match body {
        Some(body) => {
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                body.len()
            );
            stream
                .write_all(head.as_bytes())
                .and_then(|_| if method == "HEAD" { Ok(()) } else { stream.write_all(&body) })
        }
        None => stream.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"),
    };
}

/// A request path with its `%XX` escapes decoded (apt escapes the `+` of Debian versions).
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| u8::from_str_radix(std::str::from_utf8(h).ok()?, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// dpkg's architecture of this machine (the test hosts run on it).
fn architecture() -> Result<String, String> {
    Ok(tool(Command::new("dpkg").arg("--print-architecture"))?.trim().to_string())
}

/// Runs a tool that must succeed; its stdout.
fn tool(cmd: &mut Command) -> Result<String, String> {
    let out = cmd.output().map_err(|e| format!("cannot run {:?}: {e}", cmd.get_program()))?;
    if !out.status.success() {
        return Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&out.stderr).trim()));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(program)).find(|p| p.is_file())
}

fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

fn s(path: &Path) -> String {
    path.display().to_string()
}
