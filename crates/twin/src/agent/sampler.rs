//! Samples the real host as Telegraf's `cpu`, `mem`, `disk` (and `system`, see `system`) inputs do, with their
//! measurement, tag and field names: `cpu` (tag `cpu` = `cpu-total` and `cpu0`…, fields
//! `usage_user`, `usage_system`, `usage_idle`, … in percent of the interval), `mem` (bytes
//! and percentages from /proc/meminfo) and `disk` (statvfs of each mount, tags `path`,
//! `device`, `fstype`, `mode`).
//!
//! CPU usage is a difference between two readings of /proc/stat, so (as in Telegraf) the
//! first gather reports no `cpu` metric; `--test` gathers cpu twice, half a second apart.

use std::collections::HashMap;

use opsbook_wire::line_protocol::{FieldValue, Point};

/// Which inputs to gather and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Inputs {
    pub cpu: Option<CpuInput>,
    pub mem: bool,
    pub disk: Option<DiskInput>,
    /// Telegraf's `system` input (`super::system`).
    pub system: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct CpuInput {
    pub percpu: bool,
    pub totalcpu: bool,
    pub(crate) collect_cpu_time: bool,
    pub(crate) report_active: bool,
}

impl Default for CpuInput {
    fn default() -> Self {
        CpuInput { percpu: true, totalcpu: true, collect_cpu_time: false, report_active: false }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct DiskInput {
    /// Only these mount points (all when empty).
    pub(crate) mount_points: Vec<String>,
    /// File system types skipped.
    pub ignore_fs: Vec<String>,
}

impl Default for DiskInput {
    fn default() -> Self {
        DiskInput {
            mount_points: Vec::new(),
            ignore_fs: ["tmpfs", "devtmpfs", "devfs", "iso9660", "overlay", "aufs", "squashfs"]
                .map(String::from)
                .to_vec(),
        }
    }
}

/// One CPU's counters from /proc/stat, in USER_HZ ticks.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct CpuTimes {
    pub user: f64,
    pub(crate) nice: f64,
    pub system: f64,
    pub idle: f64,
    pub(crate) iowait: f64,
    pub(crate) irq: f64,
    pub(crate) softirq: f64,
    pub(crate) steal: f64,
    pub(crate) guest: f64,
    pub(crate) guest_nice: f64,
}

impl CpuTimes {
    /// gopsutil's total: guest time is already inside user time.
    fn total(&self) -> f64 {
        self.user + self.nice + self.system + self.idle + self.iowait + self.irq + self.softirq + self.steal
    }
}

/// Parses /proc/stat's `cpu` lines: `("cpu-total", …)`, `("cpu0", …)`, ….
pub(super) fn parse_proc_stat(text: &str) -> Vec<(String, CpuTimes)> {
    text.lines()
        .filter(|l| l.starts_with("cpu"))
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let name = parts.next()?;
            let v: Vec<f64> = parts.map(|p| p.parse().unwrap_or(0.0)).collect();
            let get = |i: usize| v.get(i).copied().unwrap_or(0.0);
            let name = if name == "cpu" { "cpu-total".to_string() } else { name.to_string() };
            Some((
                name,
                CpuTimes {
                    user: get(0),
                    nice: get(1),
                    system: get(2),
                    idle: get(3),
                    iowait: get(4),
                    irq: get(5),
                    softirq: get(6),
                    steal: get(7),
                    guest: get(8),
                    guest_nice: get(9),
                },
            ))
        })
        .collect()
}

/// Telegraf's usage fields between two readings (percent of the elapsed ticks).
pub(super) fn cpu_usage(now: &CpuTimes, last: &CpuTimes, report_active: bool) -> Vec<(String, FieldValue)> {
    let total = now.total() - last.total();
    let pct = |d: f64| FieldValue::Float(if total > 0.0 { (100.0 * d / total).clamp(0.0, 100.0) } else { 0.0 });
    let guest = now.guest - last.guest;
    let guest_nice = now.guest_nice - last.guest_nice;
    let mut fields = vec![
        ("usage_guest".to_string(), pct(guest)),
        ("usage_guest_nice".to_string(), pct(guest_nice)),
        ("usage_idle".to_string(), pct(now.idle - last.idle)),
        ("usage_iowait".to_string(), pct(now.iowait - last.iowait)),
        ("usage_irq".to_string(), pct(now.irq - last.irq)),
        ("usage_nice".to_string(), pct(now.nice - last.nice - guest_nice)),
        ("usage_softirq".to_string(), pct(now.softirq - last.softirq)),
        ("usage_steal".to_string(), pct(now.steal - last.steal)),
        ("usage_system".to_string(), pct(now.system - last.system)),
        ("usage_user".to_string(), pct(now.user - last.user - guest)),
    ];
    if report_active {
        let active = total - (now.idle - last.idle) - (now.iowait - last.iowait);
        fields.push(("usage_active".to_string(), pct(active)));
    }
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    fields
}

/// /proc/meminfo in bytes, by key.
pub(super) fn parse_meminfo(text: &str) -> HashMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (k, rest) = l.split_once(':')?;
            let mut parts = rest.split_whitespace();
            let n: u64 = parts.next()?.parse().ok()?;
            let bytes = if parts.next() == Some("kB") { n * 1024 } else { n };
            Some((k.trim().to_string(), bytes))
        })
        .collect()
}

/// Telegraf's `mem` fields (gopsutil's arithmetic for `used` and `cached`).
pub(super) fn mem_fields(m: &HashMap<String, u64>) -> Vec<(String, FieldValue)> {
    let g = |k: &str| m.get(k).copied().unwrap_or(0);
    let total = g("MemTotal");
    let free = g("MemFree");
    let buffers = g("Buffers");
    let cached = g("Cached") + g("SReclaimable");
    let available = m.get("MemAvailable").copied().unwrap_or(free + buffers + cached);
    let used = total.saturating_sub(free + buffers + cached);
    let pct = |n: u64| FieldValue::Float(if total > 0 { 100.0 * n as f64 / total as f64 } else { 0.0 });
    let int = |n: u64| FieldValue::Int(n as i64);
    let mut fields = vec![
        ("active".to_string(), int(g("Active"))),
        ("available".to_string(), int(available)),
        ("available_percent".to_string(), pct(available)),
        ("buffered".to_string(), int(buffers)),
        ("cached".to_string(), int(cached)),
        ("commit_limit".to_string(), int(g("CommitLimit"))),
        ("committed_as".to_string(), int(g("Committed_AS"))),
        ("dirty".to_string(), int(g("Dirty"))),
        ("free".to_string(), int(free)),
        ("inactive".to_string(), int(g("Inactive"))),
        ("mapped".to_string(), int(g("Mapped"))),
        ("shared".to_string(), int(g("Shmem"))),
        ("slab".to_string(), int(g("Slab"))),
        ("sreclaimable".to_string(), int(g("SReclaimable"))),
        ("sunreclaim".to_string(), int(g("SUnreclaim"))),
        ("swap_cached".to_string(), int(g("SwapCached"))),
        ("swap_free".to_string(), int(g("SwapFree"))),
        ("swap_total".to_string(), int(g("SwapTotal"))),
        ("total".to_string(), int(total)),
        ("used".to_string(), int(used)),
        ("used_percent".to_string(), pct(used)),
    ];
    fields.sort_by(|a, b| a.0.cmp(&b.0));
    fields
}

/// A mounted file system from /proc/self/mounts.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Mount {
    pub device: String,
    pub path: String,
    pub fstype: String,
    pub(crate) read_only: bool,
}

/// /proc/self/mounts, octal escapes (`\040` for a space) decoded.
pub(super) fn parse_mounts(text: &str) -> Vec<Mount> {
    let unescape = |s: &str| {
        let mut out = String::new();
        let mut chars = s.chars().peekable();
        while let Some(c) = chars.next() {
            if c == '\\' {
                let code: String = chars.by_ref().take(3).collect();
                match u8::from_str_radix(&code, 8) {
                    Ok(b) => out.push(b as char),
                    Err(_) => {
                        out.push('\\');
                        out.push_str(&code);
                    }
                }
            } else {
                out.push(c);
            }
        }
        out
    };
    text.lines()
        .filter_map(|l| {
            let p: Vec<&str> = l.split_whitespace().collect();
            (p.len() >= 4).then(|| Mount {
                device: unescape(p[0]),
                path: unescape(p[1]),
                fstype: p[2].to_string(),
                read_only: p[3].split(',').any(|o| o == "ro"),
            })
        })
        .collect()
}

/// statvfs of a path: (total, free for users, used, inodes total, inodes free) in bytes/inodes.
fn statvfs(path: &str) -> Option<(u64, u64, u64, u64, u64)> {
    let c = std::ffi::CString::new(path).ok()?;
    // SAFETY: `c` is a valid NUL-terminated path and `st` a properly sized out-parameter.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    let frsize = st.f_frsize as u64;
    let total = st.f_blocks as u64 * frsize;
    let free = st.f_bavail as u64 * frsize;
    let used = (st.f_blocks as u64).saturating_sub(st.f_bfree as u64) * frsize;
    Some((total, free, used, st.f_files as u64, st.f_ffree as u64))
}

/// Gathers metrics; keeps the previous CPU reading between calls.
#[derive(Debug, Default)]
pub(super) struct Sampler {
    last_cpu: HashMap<String, CpuTimes>,
}

impl Sampler {
    pub(super) fn new() -> Sampler {
        Sampler::default()
    }

    /// Reads the host once. `tags` (host, global tags) go on every point; `ts` is the time.
    pub(super) fn gather(&mut self, inputs: &Inputs, tags: &[(String, String)], ts: i64) -> Result<Vec<Point>, String> {
        let point = |measurement: &str, mut own: Vec<(String, String)>, fields| {
            own.extend(tags.iter().cloned());
            own.sort();
            Point { measurement: measurement.to_string(), tags: own, fields, timestamp: Some(ts) }
        };
        let mut points = Vec::new();
        if let Some(cpu) = &inputs.cpu {
            for (name, fields) in self.cpu_fields(cpu)? {
                points.push(point("cpu", vec![("cpu".into(), name)], fields));
            }
        }
        if inputs.mem {
            let text = std::fs::read_to_string("/proc/meminfo")
                .map_err(|e| format!("[inputs.mem] reading /proc/meminfo: {e}"))?;
            points.push(point("mem", Vec::new(), mem_fields(&parse_meminfo(&text))));
        }
        if inputs.system {
            for fields in super::system::gather()? {
                points.push(point("system", Vec::new(), fields));
            }
        }
        if let Some(disk) = &inputs.disk {
            for (own, fields) in disk_fields(disk)? {
                points.push(point("disk", own, fields));
            }
        }
        Ok(points)
    }

    /// Per CPU wanted (and `cpu-total`): its times and, from the second gather on, its usage
    /// since the last one.
    fn cpu_fields(&mut self, cpu: &CpuInput) -> Result<Vec<(String, Fields)>, String> {
        let text =
            std::fs::read_to_string("/proc/stat").map_err(|e| format!("[inputs.cpu] reading /proc/stat: {e}"))?;
        let now = parse_proc_stat(&text);
        let mut out = Vec::new();
        for (name, times) in &now {
            let wanted = if name == "cpu-total" { cpu.totalcpu } else { cpu.percpu };
            if !wanted {
                continue;
            }
            let mut fields = Vec::new();
            if cpu.collect_cpu_time {
                // USER_HZ is 100 on Linux: ticks are hundredths of a second.
                for (k, v) in [
                    ("time_user", times.user),
                    ("time_system", times.system),
                    ("time_idle", times.idle),
                    ("time_nice", times.nice),
                    ("time_iowait", times.iowait),
                    ("time_irq", times.irq),
                    ("time_softirq", times.softirq),
                    ("time_steal", times.steal),
                    ("time_guest", times.guest),
                    ("time_guest_nice", times.guest_nice),
                ] {
                    fields.push((k.to_string(), FieldValue::Float(v / 100.0)));
                }
            }
            if let Some(last) = self.last_cpu.get(name) {
                fields.extend(cpu_usage(times, last, cpu.report_active));
            }
            if !fields.is_empty() {
                fields.sort_by(|a, b| a.0.cmp(&b.0));
                out.push((name.clone(), fields));
            }
        }
        self.last_cpu = now.into_iter().collect();
        Ok(out)
    }
}

/// A point's fields, and its own tags.
type Fields = Vec<(String, FieldValue)>;
type Tags = Vec<(String, String)>;

/// Per mounted file system the disk input wants: its tags and its space and inode fields.
fn disk_fields(disk: &DiskInput) -> Result<Vec<(Tags, Fields)>, String> {
    let text = std::fs::read_to_string("/proc/self/mounts")
        .map_err(|e| format!("[inputs.disk] reading /proc/self/mounts: {e}"))?;
    let mut seen = Vec::new();
    let mut out = Vec::new();
    for m in parse_mounts(&text) {
        if disk.ignore_fs.contains(&m.fstype)
            || (!disk.mount_points.is_empty() && !disk.mount_points.contains(&m.path))
            || seen.contains(&m.path)
        {
            continue;
        }
        let Some((total, free, used, inodes, inodes_free)) = statvfs(&m.path) else { continue };
        if total == 0 {
            continue; // pseudo file systems (proc, sysfs, cgroup) have no blocks
        }
        seen.push(m.path.clone());
        let device = m.device.rsplit('/').next().unwrap_or(&m.device).to_string();
        let pct = |n: u64, of: u64| FieldValue::Float(if of > 0 { 100.0 * n as f64 / of as f64 } else { 0.0 });
        let inodes_used = inodes.saturating_sub(inodes_free);
        let fields = vec![
            ("free".to_string(), FieldValue::Int(free as i64)),
            ("inodes_free".to_string(), FieldValue::Int(inodes_free as i64)),
            ("inodes_total".to_string(), FieldValue::Int(inodes as i64)),
            ("inodes_used".to_string(), FieldValue::Int(inodes_used as i64)),
            ("inodes_used_percent".to_string(), pct(inodes_used, inodes)),
            ("total".to_string(), FieldValue::Int(total as i64)),
            ("used".to_string(), FieldValue::Int(used as i64)),
            ("used_percent".to_string(), pct(used, used + free)),
        ];
        let own = vec![
            ("device".to_string(), device),
            ("fstype".to_string(), m.fstype.clone()),
            ("mode".to_string(), if m.read_only { "ro" } else { "rw" }.to_string()),
            ("path".to_string(), m.path.clone()),
        ];
        out.push((own, fields));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_usage_as_telegraf_computes_it() {
        let before = parse_proc_stat("cpu  100 0 50 800 10 0 0 0 0 0\ncpu0 100 0 50 800 10 0 0 0 0 0\nintr 1\n");
        let after = parse_proc_stat("cpu  150 0 100 1000 10 0 0 0 20 0\n");
        assert_eq!(before.len(), 2);
        assert_eq!(before[0].0, "cpu-total");
        let f = cpu_usage(&after[0].1, &before[0].1, true);
        let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        // total delta 300: user 50 (20 of it guest), system 50, idle 200.
        assert_eq!(get("usage_system"), FieldValue::Float(100.0 * 50.0 / 300.0));
        assert_eq!(get("usage_user"), FieldValue::Float(100.0 * 30.0 / 300.0));
        assert_eq!(get("usage_guest"), FieldValue::Float(100.0 * 20.0 / 300.0));
        assert_eq!(get("usage_idle"), FieldValue::Float(100.0 * 200.0 / 300.0));
        assert_eq!(get("usage_active"), FieldValue::Float(100.0 * 100.0 / 300.0));
        assert!(f.windows(2).all(|w| w[0].0 < w[1].0), "fields sorted");
    }

    #[test]
    fn mem_and_mounts() {
        let m = parse_meminfo(
            "MemTotal: 1000 kB\nMemFree: 200 kB\nMemAvailable: 600 kB\nBuffers: 100 kB\nCached: 250 kB\nSReclaimable: 50 kB\n",
        );
        let f = mem_fields(&m);
        let get = |k: &str| f.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone()).unwrap();
        assert_eq!(get("total"), FieldValue::Int(1_024_000));
        assert_eq!(get("used"), FieldValue::Int(400 * 1024));
        assert_eq!(get("used_percent"), FieldValue::Float(40.0));
        let mounts = parse_mounts("/dev/vda / ext4 rw,relatime 0 0\n/dev/sdb1 /mnt/my\\040disk vfat ro 0 0\n");
        assert_eq!(mounts[1].path, "/mnt/my disk");
        assert!(mounts[1].read_only && !mounts[0].read_only);
    }

    #[test]
    fn gathering_the_real_host() {
        if !std::path::Path::new("/proc/stat").exists() {
            println!("skipped: no /proc on this machine");
            return;
        }
        let inputs =
            Inputs { cpu: Some(CpuInput::default()), mem: true, disk: Some(DiskInput::default()), system: true };
        let mut s = Sampler::new();
        let tags = vec![("host".to_string(), "h1".to_string())];
        let first = s.gather(&inputs, &tags, 1).unwrap();
        assert!(!first.iter().any(|p| p.measurement == "cpu"), "first gather has no cpu usage");
        std::thread::sleep(std::time::Duration::from_millis(50));
        let second = s.gather(&inputs, &tags, 2).unwrap();
        let total =
            second.iter().find(|p| p.measurement == "cpu" && p.tags.contains(&("cpu".into(), "cpu-total".into())));
        let total = total.expect("cpu-total point");
        assert!(total.fields.iter().any(|(k, _)| k == "usage_system"));
        assert!(total.tags.contains(&("host".into(), "h1".into())));
        assert!(second.iter().any(|p| p.measurement == "mem"));
        assert!(second.iter().any(|p| p.measurement == "disk"), "at least one real file system");
    }
}
