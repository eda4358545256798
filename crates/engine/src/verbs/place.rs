//! `Place`: where a host stands among others — the inventory runbooks see (read on first use),
//! the fleet run it is part of, and the other hosts a block can act on (`fleet::on`); set by the
//! runner on each host's context, read by `fleet.rs`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use super::ground::Ground;
use crate::gathering::Gathering;
use opsbook_inventory::Inventory;

/// Where a host stands among others: the inventory runbooks see, the fleet run (with its
/// name there) when the runbook runs on several hosts at once, and the other hosts a block
/// can act on (`fleet::on`).
#[derive(Default)]
pub struct Place {
    pub(super) inventory: Source,
    pub(super) run: Option<(Arc<Gathering>, String)>,
    /// The run's own hosts, by name: one map shared by every host of the run.
    pub(super) shared: Arc<BTreeMap<String, Ground>>,
    /// Hosts a block reached beyond those (kept, with their connections, until the host's
    /// session ends).
    pub(super) reached: BTreeMap<String, Ground>,
    /// Whether a host not yet reached may be (not in the sandbox, whose hosts are simulated).
    pub(super) may_connect: bool,
}

/// Loads the inventory when a runbook first asks for it.
pub(crate) type Loader = Box<dyn FnOnce() -> Result<Inventory, String> + Send>;

#[derive(Default)]
pub(super) enum Source {
    #[default]
    Absent,
    Pending(Loader),
    Ready(Arc<Inventory>),
    Failed(String),
}

impl Place {
    /// A place on real machines: `fleet::on` connects to hosts of `inventory`.
    pub fn with_inventory(inventory: Arc<Inventory>) -> Place {
        Place { inventory: Source::Ready(inventory), may_connect: true, ..Place::default() }
    }

    /// The same, with the inventory read on first use.
    pub fn loading(loader: Loader) -> Place {
        Place { inventory: Source::Pending(loader), may_connect: true, ..Place::default() }
    }

    /// A place among simulated hosts: `fleet::on` reaches only `grounds`.
    pub fn simulated(inventory: Arc<Inventory>, grounds: Arc<BTreeMap<String, Ground>>) -> Place {
        Place { inventory: Source::Ready(inventory), shared: grounds, may_connect: false, ..Place::default() }
    }

    /// The hosts of the run, reached already: `fleet::on` acts on them through their own
    /// connections.
    pub fn sharing(mut self, grounds: Arc<BTreeMap<String, Ground>>) -> Place {
        self.shared = grounds;
        self
    }

    /// A host reached already, the run's or a block's.
    pub(super) fn ground(&self, name: &str) -> Option<&Ground> {
        self.shared.get(name).or_else(|| self.reached.get(name))
    }

    /// The inventory, read now if this is the first time (once: its loader is used up), or
    /// why there is none.
    pub(super) fn inventory(&mut self) -> Result<Arc<Inventory>, String> {
        self.inventory = match std::mem::take(&mut self.inventory) {
            Source::Pending(load) => match load() {
                Ok(inventory) => Source::Ready(Arc::new(inventory)),
                Err(why) => Source::Failed(why),
            },
            other => other,
        };
        match &self.inventory {
            Source::Ready(inventory) => Ok(inventory.clone()),
            Source::Failed(why) => Err(format!("cannot read the inventory: {why}")),
            Source::Absent | Source::Pending(_) => Err("this run has no inventory (give `--inventory FILE`)".into()),
        }
    }

    /// This host runs as `name` among the hosts of `gathering`.
    pub fn in_run(mut self, gathering: Arc<Gathering>, name: String) -> Place {
        self.run = Some((gathering, name));
        self
    }
}

/// A place with nothing in it (kept per host; `Mutex` so the runner can set it).
pub(crate) fn nowhere() -> Mutex<Place> {
    Mutex::new(Place::default())
}
