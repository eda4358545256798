//! One shared OpenSSH connection to one host for a whole run.
//!
//! `Ssh::connect_with` starts a ControlMaster (`ssh -M`) already holding the forwards
//! the run needs, or finds the one an earlier run left (`SshTarget::persist`, as Ansible's
//! ControlPersist; see `control`); everything else is a cheap client of it: remote commands
//! (`command`), unix sockets, the operator's alone, forwarded to the host's endpoints and to
//! its bus (`forwards`, `bus`), and requests to the master itself spoken on its control
//! socket (`mux`), not run as `ssh -O`. The operator's `~/.ssh/config`, keys and agent apply
//! as they do for their own `ssh`; `BatchMode=yes` means ssh never prompts, it fails with a
//! message we quote. `close` (or drop) ends a master of this run alone; a lasting one stays
//! for its `persist` time.
//!
//! A connection costs one process: the master. Its forwards are given when it starts (`-L`)
//! and, on a lasting master, added through the control socket when a run needs one it lacks.
//!
//! Lifetime: a master of this run alone is opsbook's own child (`ssh -M`, no `-f`, no
//! ControlPersist), whose one session reads a pipe from us, running each line it reads
//! (`process::start_staying`, `own_session`): it lasts exactly as long as we hold that pipe, ends when asked
//! (`let_go`, `close`), and goes with opsbook however opsbook dies, since the kernel then
//! closes the pipe. Not forking saves what the background fork of `-f` costs (about 1.6 ms of
//! CPU a host). A lasting master (`ssh -M -N -f` with a `ControlPersist`) must
//! outlive us: if it could end while idle during a run (forwarded ports alone do not hold it),
//! a keeper session (`exec cat` over it, reading a socket of ours; `keeper`) starts after a
//! quarter of its persist time, and ends when that socket closes.
//!
//! Where to connect is `target`'s, the connection itself (`Ssh`) `connection`'s, its start
//! `connecting`'s.

mod bus;
mod connecting;
mod connection;
mod forwards;
mod keeper;
mod own_session;
mod target;

pub use bus::BusRoute;
pub use connecting::{Connecting, Contention};
pub use connection::Ssh;
pub use own_session::OwnSession;
pub use target::{BusScope, DEFAULT_MAX_MASTERS, SshTarget};
