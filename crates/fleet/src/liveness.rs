//! Whether a host stayed reachable while a rollout changed and gated it (`rollout::one_host`).
//! A thread asks the host to answer — `true` through its world's commands: over ssh on the
//! run's own connection, in the sandbox the simulated host — every 2 s, each ask bounded; the
//! first ask that gets no answer (ssh's own failure, exit 255, or nothing within the bound) is
//! kept with the step it fell in. A host of this machine is not asked (it cannot be lost).
//!
//! A lost host is not rolled back by the run: what it runs is not known, and every call to it
//! would wait out its timeout. Its rollback point stays; the next run finds the unfinished
//! change (`stdlib/unfinished.rhai`) and `opsbook run rollback` restores it once it answers.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use opsbook_base::process::Invocation;
use opsbook_world::World;

/// How often the host is asked, and how long one ask may take before the host counts as lost
/// (the ssh process is given this and its own margin on top).
const EVERY: Duration = Duration::from_secs(2);
const WITHIN: Duration = Duration::from_secs(5);

/// The step of a host's change a loss fell in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Step {
    Change,
    Gate,
}

/// The host stopped answering: in which step, and what the ask came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Lost {
    pub step: Step,
    pub why: String,
}

/// A host being watched; `finish` ends the watch and says whether it was lost.
pub(crate) struct Watch {
    step: Arc<AtomicU8>,
    done: Arc<AtomicBool>,
    lost: Arc<Mutex<Option<Lost>>>,
    thread: Option<JoinHandle<()>>,
}

impl Watch {
    /// Starts watching the host `world` reaches (nothing for this machine), in `Step::Change`.
    pub(crate) fn start(world: &World) -> Watch {
        let mut watch = Watch {
            step: Arc::new(AtomicU8::new(0)),
            done: Arc::new(AtomicBool::new(false)),
            lost: Arc::new(Mutex::new(None)),
            thread: None,
        };
        if world.hostname.is_none() {
            return watch;
        }
        let (step, done, lost, world) = (watch.step.clone(), watch.done.clone(), watch.lost.clone(), world.clone());
        watch.thread = Some(std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                let asked_in = if step.load(Ordering::SeqCst) == 0 { Step::Change } else { Step::Gate };
                if let Err(why) = answers(&world) {
                    *lost.lock().unwrap_or_else(|p| p.into_inner()) = Some(Lost { step: asked_in, why });
                    return;
                }
                pause(&done, EVERY);
            }
        }));
        watch
    }

    /// The change is over: a loss from now on falls in its gate.
    pub(crate) fn gate(&self) {
        self.step.store(1, Ordering::SeqCst);
    }

    /// Ends the watch: the loss, if the host stopped answering. After a failed change or gate
    /// (`ask_again`) the host is asked once more, so a loss since the last ask is not missed.
    pub(crate) fn finish(mut self, ask_again: bool, world: &World) -> Option<Lost> {
        self.done.store(true, Ordering::SeqCst);
        let watched = self.thread.take().map(|thread| thread.join()).is_some();
        let lost = self.lost.lock().unwrap_or_else(|p| p.into_inner()).take();
        if lost.is_some() || !ask_again || !watched {
            return lost;
        }
        let step = if self.step.load(Ordering::SeqCst) == 0 { Step::Change } else { Step::Gate };
        answers(world).err().map(|why| Lost { step, why })
    }
}

/// Sleeps `total`, waking early once `done`.
fn pause(done: &AtomicBool, total: Duration) {
    let tick = Duration::from_millis(100);
    let mut slept = Duration::ZERO;
    while slept < total && !done.load(Ordering::SeqCst) {
        std::thread::sleep(tick);
        slept += tick;
    }
}

/// Whether the host answers `true` within `WITHIN`.
fn answers(world: &World) -> Result<(), String> {
    let ask = Invocation { argv: vec!["true".to_string()], timeout: WITHIN, ..Invocation::default() };
    let commands = world.commands.clone();
    let done = opsbook_base::shared_runtime().block_on(async move { commands.run(&ask).await })?;
    match (done.code, done.timed_out) {
        (_, true) | (None, _) => Err(format!("no answer within {}s", WITHIN.as_secs())),
        (Some(0), _) => Ok(()),
        (Some(_), _) => Err(format!("`true` failed: {}", done.failure())),
    }
}
