//! What a host's lock is taken through: a backend tried once (`Backend`, one per kind of host:
//! this machine, a host over ssh, the sandbox), and the hold it gives (`Holding`).

use super::record::{Holder, Record};

/// One try at a host's lock.
pub enum Try {
    /// This run holds it now; `took_over` is the record a holder that is gone left behind.
    Taken {
        /// The hold, let go through it.
        holding: Box<dyn Holding>,
        /// The record a holder that is gone left behind, if any.
        took_over: Option<Holder>,
    },
    /// Another run holds it.
    Held(Holder),
}

/// Where a host's lock is tried: this machine, a host over ssh, the sandbox.
pub trait Backend: Send + Sync {
    /// Tries the lock once, without waiting; `record` is written beside it when taken.
    fn try_take(&self, record: &Record) -> Result<Try, String>;
}

/// A lock this run holds: released in two halves (so many hosts release at once).
pub trait Holding: Send {
    /// Removes the record and lets the lock go, without waiting for the host to confirm.
    fn begin_release(&mut self);
    /// Waits (briefly, bounded) until the host confirmed.
    fn finish_release(self: Box<Self>);
}
