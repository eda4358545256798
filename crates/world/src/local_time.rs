//! This machine's time zone, as journalctl reads times written without `UTC`: a local wall
//! clock time to microseconds since the epoch, and today's date (through libc's `mktime` and
//! `localtime_r`, which read the zone the machine is set to).

/// A local wall-clock time as microseconds since the epoch (the machine's time zone, as
/// journalctl reads times without `UTC`).
pub fn micros(date: [i32; 3], time: [i32; 3]) -> Option<u64> {
    // SAFETY: an all-zero tm is valid; mktime reads and normalises the one we pass.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    (tm.tm_year, tm.tm_mon, tm.tm_mday) = (date[0] - 1900, date[1] - 1, date[2]);
    (tm.tm_hour, tm.tm_min, tm.tm_sec, tm.tm_isdst) = (time[0], time[1], time[2], -1);
    let t = unsafe { libc::mktime(&mut tm) };
    u64::try_from(t).ok().map(|s| s * 1_000_000)
}

/// Today's date in the machine's time zone.
pub fn today(now_us: u64) -> [i32; 3] {
    let now = (now_us / 1_000_000) as libc::time_t;
    // SAFETY: localtime_r writes the tm we pass.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&now, &mut tm) };
    [tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday]
}
