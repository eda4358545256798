//! This run of opsbook: an id made once per process and who runs it (`user@machine`), the
//! same on every host it acts on. A rollback point records them, so a later run can say whose
//! change was never verified (`rollback::save`, `run_id()`, `operator()`).

use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

struct ThisRun {
    who: String,
    id: String,
}

fn this_run() -> &'static ThisRun {
    static RUN: OnceLock<ThisRun> = OnceLock::new();
    RUN.get_or_init(|| {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let user = std::env::var("USER")
            .or_else(|_| std::env::var("LOGNAME"))
            .ok()
            .or_else(account_name)
            .filter(|u| !u.is_empty() && !u.contains(char::is_whitespace))
            // SAFETY: geteuid has no preconditions.
            .unwrap_or_else(|| format!("uid{}", unsafe { libc::geteuid() }));
        let stamp = humantime::format_rfc3339_seconds(UNIX_EPOCH + Duration::from_secs(now.as_secs()))
            .to_string()
            .replace(['-', ':'], "");
        // Two runs started in the same second on one machine differ by their pid and the
        // clock's nanoseconds.
        let tag = (std::process::id() ^ now.subsec_nanos()) & 0xffff;
        ThisRun { who: format!("{user}@{}", crate::hostname::this_machine()), id: format!("{stamp}-{tag:04x}") }
    })
}

/// This run's id, `20261128T210307Z-ab12`: when it began (UTC) and a tag.
pub fn id() -> String {
    this_run().id.clone()
}

/// Who runs it: `user@machine` of the operator's machine.
pub fn who() -> String {
    this_run().who.clone()
}

/// The name of the account this process runs as, from the user database.
fn account_name() -> Option<String> {
    // SAFETY: an all-zero passwd is a valid value for getpwuid_r to fill.
    let mut entry: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buffer = vec![0 as libc::c_char; 4096];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: getpwuid_r writes only into `entry` and `buffer`, both valid for their sizes;
    // the name it points at lives in `buffer`, read before it goes.
    unsafe {
        let uid = libc::geteuid();
        if libc::getpwuid_r(uid, &mut entry, buffer.as_mut_ptr(), buffer.len(), &mut found) != 0 || found.is_null() {
            return None;
        }
        Some(std::ffi::CStr::from_ptr(entry.pw_name).to_string_lossy().into_owned())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn one_id_and_one_operator_a_process() {
        assert_eq!(super::id(), super::id());
        assert!(super::id().contains('T') && super::id().contains("Z-"), "{}", super::id());
        assert!(super::who().contains('@'), "{}", super::who());
    }
}
