//! `Ground`: where host calls act — a configuration and the world it describes (this machine,
//! another host over ssh, a simulated one). A runbook's own host, or another's for a block
//! (`fleet::on`).

use std::sync::{Arc, OnceLock};

use rhai::Dynamic;

use opsbook_base::config::Config;
use opsbook_world::World;

/// Where host calls act: a configuration and the world it describes (this machine, another
/// over ssh, a simulated one). A runbook's own host, or another for a block (`fleet::on`).
#[derive(Clone)]
pub struct Ground {
    /// The configuration there.
    pub config: Arc<Config>,
    /// The world there.
    pub world: World,
    /// The configuration as scripts read it (`config.…`), made on first read.
    pub(crate) view: Arc<OnceLock<Dynamic>>,
    /// Inside `fleet::on(NAME, …)`: NAME, which prefixes the checks recorded there.
    pub(crate) elsewhere: Option<String>,
}

impl Ground {
    /// The ground of `world` with `config`, acting on the host itself.
    pub fn new(config: Arc<Config>, world: World) -> Ground {
        Ground { config, world, view: Arc::default(), elsewhere: None }
    }

    /// This ground, as another host's for a block: its checks are recorded as `NAME: check`.
    pub fn elsewhere(mut self, name: &str) -> Ground {
        self.elsewhere = Some(name.to_string());
        self
    }
}
