//! The process's one tokio runtime: two I/O threads that every host of a fleet run, every
//! child process and every request drive their I/O through, started on first use (listing
//! and compiling never start it).

use std::sync::OnceLock;

/// The runtime, started on first use.
pub fn shared() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("opsbook-io")
            .enable_all()
            .build()
            .expect("cannot start the tokio runtime")
    })
}
