//! Parsing a script the run may stop. Rhai's parser never looks at a run's cancellation, and a
//! runbook of a few MiB (a `switch` of a hundred thousand arms) takes it minutes: so a
//! runbook's or a module's parse runs on a thread of its own, with an engine that parses as
//! the runbook's does (`syntax::parse_settings`), and the caller waits for it or for the run's
//! cancellation (`--timeout`, the first Ctrl-C), whichever comes first. A parse given up on
//! goes on alone until the process ends; the caller ends the run in the usual words. A script
//! of at most `SMALL` bytes parses within milliseconds, so it is parsed where it is asked for,
//! without a thread to start and hand it over (every built-in runbook is one).

use std::sync::mpsc::{RecvTimeoutError, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opsbook_base::Cancel;
use rhai::{AST, Engine, ParseError};

/// The run was cancelled (its time limit, Ctrl-C) before the work was done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stopped;

/// How often the caller looks at the cancellation while it waits.
const LOOK_EVERY: Duration = Duration::from_millis(20);

/// The parser recurses once per nesting level: as much stack as the main thread has.
const STACK: usize = 8 << 20;

/// The largest script parsed without a thread of its own: about 10 ms of parsing at the
/// parser's slowest (a `switch` of small arms), and its nesting bounded by the engine's depth
/// limits (`syntax::parse_settings`) whatever its length.
const SMALL: usize = 64 << 10;

/// Parses `text` as a runbook's engine does, unless `cancel` comes first.
pub(crate) fn parse(text: Arc<str>, cancel: &Cancel) -> Result<Result<AST, ParseError>, Stopped> {
    let size = text.len();
    by_size(cancel, size, move || parse_here(&text))
}

/// What `work` on a script of `size` bytes gives, unless `cancel` comes first: done here for a
/// script of at most `SMALL` bytes, else on a thread of its own (`until_cancelled`).
pub(crate) fn by_size<T: Send + 'static>(
    cancel: &Cancel,
    size: usize,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Stopped> {
    match size <= SMALL {
        true if cancel.is_cancelled() => Err(Stopped),
        true => Ok(work()),
        false => until_cancelled(cancel, work),
    }
}

/// Parses `text` on this thread as a runbook's engine does.
pub(crate) fn parse_here(text: &str) -> Result<AST, ParseError> {
    let mut engine = Engine::new_raw();
    crate::syntax::parse_settings(&mut engine);
    engine.compile(text)
}

/// What `work` gives, done on a thread of its own, unless `cancel` comes first (then the
/// thread is left to finish alone). Without a thread to start, `work` is done here.
fn until_cancelled<T: Send + 'static>(
    cancel: &Cancel,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, Stopped> {
    if cancel.is_cancelled() {
        return Err(Stopped);
    }
    // The work is handed over through a slot, so a thread that cannot start gives it back.
    let slot = Arc::new(Mutex::new(Some(work)));
    let (tx, rx) = sync_channel(1);
    let taken = slot.clone();
    let started = std::thread::Builder::new().name("opsbook-compile".into()).stack_size(STACK).spawn(move || {
        let work = taken.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(work) = work {
            let _ = tx.send(work());
        }
    });
    let handle = match started {
        Ok(handle) => handle,
        Err(_) => {
            let work = slot.lock().unwrap_or_else(|e| e.into_inner()).take().expect("the thread never started");
            return Ok(work());
        }
    };
    loop {
        match rx.recv_timeout(LOOK_EVERY) {
            Ok(done) => return Ok(done),
            Err(RecvTimeoutError::Timeout) if cancel.is_cancelled() => return Err(Stopped),
            Err(RecvTimeoutError::Timeout) => {}
            // The thread ended without an answer: it panicked, and so does the caller.
            Err(RecvTimeoutError::Disconnected) => match handle.join() {
                Err(panic) => std::panic::resume_unwind(panic),
                Ok(()) => unreachable!("the thread sends before it ends"),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parse_gives_what_the_parser_gives() {
        let cancel = Cancel::default();
        let ast = parse(Arc::from("fn f() { 1 }\nlet x = wait::until(1);"), &cancel).unwrap().unwrap();
        assert_eq!(ast.iter_functions().map(|f| f.name).collect::<Vec<_>>(), ["f"]);
        let err = parse(Arc::from("let = ;"), &cancel).unwrap().unwrap_err();
        assert_eq!(err.position().line(), Some(1));
    }

    /// The deepest nesting the depth limits allow, of calls, maps and blocks, in a script small
    /// enough to parse where it is asked for, parses on a quarter of the 2 MiB stack a spawned
    /// thread gets; one level deeper is refused by the limit, not by the stack.
    #[test]
    fn a_small_script_nested_as_deep_as_allowed_parses_on_a_small_stack() {
        let shapes: [fn(String) -> String; 3] =
            [|inner| format!("f({inner})"), |inner| format!("#{{a: {inner}}}"), |inner| format!("{{ {inner} }}")];
        let deepest = std::thread::Builder::new()
            .stack_size(512 << 10)
            .spawn(move || {
                shapes.map(|shape| {
                    let nested = |depth: usize| {
                        let expr = (0..depth).fold("1".to_string(), |inner, _| shape(inner));
                        Arc::from(format!("fn f(x) {{ x }}\nlet v = {expr};\n").as_str())
                    };
                    let parses = |depth| parse(nested(depth), &Cancel::default()).unwrap();
                    let deepest = (1..500).take_while(|&depth| parses(depth).is_ok()).last().unwrap();
                    let refused = parses(deepest + 1).unwrap_err().to_string();
                    assert!(refused.contains("maximum complexity"), "{refused}");
                    assert!(nested(deepest).len() <= SMALL);
                    deepest
                })
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(deepest.iter().all(|&depth| depth >= 30), "{deepest:?}");
    }

    #[test]
    fn a_cancelled_run_stops_waiting_for_work_that_does_not_end() {
        let cancel = Cancel::default();
        let later = cancel.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(100));
            later.cancel();
        });
        let (_keep, never) = std::sync::mpsc::channel::<()>();
        let waited = until_cancelled(&cancel, move || never.recv());
        assert_eq!(waited.map(|_| ()), Err(Stopped));
        assert_eq!(until_cancelled(&cancel, || 1), Err(Stopped), "nothing starts once cancelled");
    }

    #[test]
    fn a_panic_in_the_work_is_the_callers() {
        let caught = std::panic::catch_unwind(|| until_cancelled(&Cancel::default(), || panic!("the parser broke")));
        assert!(caught.is_err());
    }
}
