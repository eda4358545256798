//! One run of a job on one session: the job's deadline and watch-only policy around it, and
//! the report it leaves — or, for a run that could not start, a report saying why. Used for
//! jobs on this machine (`scheduler`) and on each host of a job over hosts (`remote`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde_json::{Value, json};

use super::capture;
use opsbook_base::Cancel;
use opsbook_base::config::serve::Job;
use opsbook_engine::runbook::Compiled;
use opsbook_fleet::Session;

/// The cancel flags of a job's current run: its session's, or its hosts' sessions' while a
/// run over them goes on.
pub(super) type Cancels = Arc<Mutex<Vec<Cancel>>>;

/// One run with the job's deadline and watch-only policy; its JSON report and a note.
pub(super) fn execute(spec: &Job, session: &Session, compiled: &Compiled) -> (Value, Option<String>) {
    let host = &session.context;
    host.cancel.reset();
    host.set_watch_only(!spec.mutating);
    host.take_refusal();
    let deadline = spec.deadline();
    let (done, finished) = mpsc::channel::<()>();
    let cancel = host.cancel.clone();
    let timed_out = Arc::new(AtomicBool::new(false));
    let flag = timed_out.clone();
    let watchdog = std::thread::spawn(move || {
        if let Err(mpsc::RecvTimeoutError::Timeout) = finished.recv_timeout(deadline) {
            flag.store(true, Ordering::SeqCst);
            cancel.cancel();
        }
    });
    let (buffer, recorded) = capture::run(session, compiled, &spec.params);
    let _ = done.send(());
    let _ = watchdog.join();
    let mut document = match recorded {
        Ok(()) => serde_json::from_slice(&buffer).unwrap_or(Value::Null),
        Err(message) => return (error_document(spec, &message), Some(message)),
    };
    let refusal = host.take_refusal();
    let reason = if let Some(refusal) = refusal {
        Some(refusal)
    } else if timed_out.load(Ordering::SeqCst) {
        Some(format!(
            "timed out: still running after {}, the run was interrupted (raise the job's `timeout`)",
            humantime::format_duration(deadline)
        ))
    } else {
        None
    };
    if let Some(reason) = &reason {
        // An interruption the service caused is a failure of the run, not an operator's Ctrl-C.
        document["outcome"] = json!("failed");
        document["exit_code"] = json!(1);
        document["error"] = json!({"kind": "aborted", "message": reason});
    }
    (document, reason)
}

/// The report of a run that could not start (its parameters no longer bind, …).
pub(super) fn error_document(spec: &Job, message: &str) -> Value {
    json!({
        "schema": opsbook_base::report::json::SCHEMA,
        "opsbook": env!("CARGO_PKG_VERSION"),
        "runbook": spec.runbook,
        "source": "",
        "params": {},
        "dry_run": false,
        "sandbox": false,
        "faults": [],
        "started_at": humantime::format_rfc3339_millis(SystemTime::now()).to_string(),
        "duration_s": 0.0,
        "outcome": "error",
        "exit_code": 2,
        "summary": {"passed": 0, "failed": 0, "warnings": 0, "skipped": 0},
        "checks": [],
        "log": [],
        "error": {"kind": "script", "message": message},
    })
}
