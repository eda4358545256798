//! A run whose report is kept, not printed: the `--format json` document, in a buffer.
//!
//! The JSON formatter writes the same document `opsbook run --format json` prints (through
//! the secret redactor); here it writes into memory, and the run's log lines stay in the
//! report instead of going to the service's stderr on every run.

use std::io::Write;
use std::sync::{Arc, Mutex};

use opsbook_base::report::{End, Event, Format, Formatter, Mode, Outcome, Recorder, Report, formatter};
use opsbook_engine::runbook::Compiled;
use opsbook_fleet::Session;

/// A writer into shared memory.
#[derive(Clone, Default)]
struct Buffer(Arc<Mutex<Vec<u8>>>);

impl Write for Buffer {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(data);
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The JSON formatter, claiming the log lines so they are not echoed to stderr.
struct Quiet(Box<dyn Formatter>);

impl Formatter for Quiet {
    fn begin(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        self.0.begin(out, report)
    }
    fn event(&mut self, out: &mut dyn Write, event: &Event) -> std::io::Result<()> {
        self.0.event(out, event)
    }
    fn finish(&mut self, out: &mut dyn Write, report: &Report) -> std::io::Result<()> {
        self.0.finish(out, report)
    }
    fn shows_logs(&self) -> bool {
        true
    }
}

/// The JSON document of a run that never started because `host` could not be reached: one
/// failed check, `HOST reachable over ssh`, with ssh's words as its detail (as `opsbook run
/// --hosts` reports it).
pub(super) fn unreachable(runbook: &str, host: &str, check: &str, why: &str) -> serde_json::Value {
    let buffer = Buffer::default();
    let mode = Mode { host: Some(host.to_string()), ..Mode::default() };
    let json = Box::new(Quiet(formatter(Format::Json, false)));
    let mut recorder =
        Recorder::with_output(runbook, runbook, Default::default(), mode, json, Box::new(buffer.clone()));
    recorder.record(check, Outcome::Fail, why, None, None);
    recorder.finish(End::Completed);
    let bytes = std::mem::take(&mut *buffer.0.lock().unwrap_or_else(|e| e.into_inner()));
    serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null)
}

/// Runs `compiled` with `params`; the JSON document, or why the run could not start.
pub(super) fn run(
    session: &Session,
    compiled: &Compiled,
    params: &[(String, String)],
) -> (Vec<u8>, Result<(), String>) {
    let buffer = Buffer::default();
    let out = buffer.clone();
    let result = session.run_recorded(compiled, params, |name, source, shown, mode| {
        Recorder::with_output(name, source, shown, mode, Box::new(Quiet(formatter(Format::Json, false))), Box::new(out))
    });
    let bytes = std::mem::take(&mut *buffer.0.lock().unwrap_or_else(|e| e.into_inner()));
    (bytes, result.map(|_| ()).map_err(|e| opsbook_base::secret::redact(&e.to_string()).into_owned()))
}
