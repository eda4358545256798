//! `--sandbox` (in progress, issue #7): the pieces of an in-process stack that runbooks will
//! run against with no root and no systemd — fault specs, an in-memory journal, and a
//! simulated service manager with systemd's semantics. Wiring them into `World` and the twin
//! servers comes next; each piece is tested on its own below.

pub mod faults;
pub mod journal;
pub mod units;
