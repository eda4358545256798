//! Work a helper thread does ahead of the run (the engine's library, the modules' parse). On
//! two cores it competed with the main thread on its way to the first check, and the main
//! thread, preempted, lost most of a millisecond a run (bench/quick-check-timeline.sh). A helper
//! thread now gives way to the main thread: it still runs whenever a core is free, and when the
//! main thread needs its work before it is done, the main thread sleeps and leaves it the core.

/// How much lighter a helper thread weighs than the rest: nice 10 is about a tenth of their
/// share of a core they both want. Not 19: on a machine busy with other work, a helper the main
/// thread waits for must still move.
const NICE: libc::c_int = 10;

/// Makes the calling thread a helper: `NICE` lower in priority than the process's other
/// threads (at most 19, the lowest there is).
pub fn helper_thread() {
    // SAFETY: gettid, getpriority and setpriority have no preconditions; raising one's own nice
    // needs no privilege, and a failure leaves the thread as it was. getpriority's -1 is also a
    // nice value: errno, cleared before, tells a failure.
    unsafe {
        let thread = libc::syscall(libc::SYS_gettid) as libc::id_t;
        *libc::__errno_location() = 0;
        let now = libc::getpriority(libc::PRIO_PROCESS, thread);
        if now == -1 && *libc::__errno_location() != 0 {
            return;
        }
        libc::setpriority(libc::PRIO_PROCESS, thread, (now + NICE).min(19));
    }
    // A thread just started runs first, for a whole slice, on the core of the thread that
    // started it: given back now, that core goes to the main thread.
    std::thread::yield_now();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own_nice() -> libc::c_int {
        // SAFETY: as above; getpriority of one's own thread id.
        unsafe { libc::getpriority(libc::PRIO_PROCESS, libc::syscall(libc::SYS_gettid) as libc::id_t) }
    }

    #[test]
    fn a_helper_thread_is_lighter_and_the_others_are_not() {
        let before = own_nice();
        let helper = std::thread::spawn(|| {
            helper_thread();
            own_nice()
        });
        assert_eq!(helper.join().unwrap(), (before + NICE).min(19));
        assert_eq!(own_nice(), before, "only the helper gives way");
    }
}
