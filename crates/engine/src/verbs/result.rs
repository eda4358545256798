//! What a verb returns and the errors it raises: a failure the run aborts with, the stop
//! `exit(code)` unwinds with, an interruption.

use rhai::{Dynamic, EvalAltResult, Position};

/// The result type of host functions.
pub(crate) type VerbResult<T> = Result<T, Box<EvalAltResult>>;

/// A runtime error raised by a host function: the run aborts with this message.
pub(crate) fn fail(message: impl Into<String>) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorRuntime(Dynamic::from(message.into()), Position::NONE))
}

/// What `exit(code)` unwinds a script with: not an error, a stop with the run's exit status.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Stop(pub u8);

/// The unwinding `exit(code)` starts: like an interruption, no `catch` stops it.
pub(crate) fn stop(code: u8) -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorTerminated(Dynamic::from(Stop(code)), Position::NONE))
}

/// The error that unwinds a script when the operator interrupts it.
pub(crate) fn interrupted() -> Box<EvalAltResult> {
    Box::new(EvalAltResult::ErrorTerminated(Dynamic::from("interrupted"), Position::NONE))
}
