//! The sandbox's container runtime: the sandbox runs its servers natively, so it has no
//! containers — `container::list` is empty (the `containers` runbook skips, as on a host
//! without Podman deployments) and asking for one by name fails as `podman` would.

use serde_json::Value;

use opsbook_world::BoxFuture;
use opsbook_world::{Container, ContainerRow as Row, ContainerStats as Stats, Containers};

/// No containers.
pub(crate) struct NoContainers;

fn missing<T>(name: &str) -> Result<T, String> {
    Err(format!("no such container `{name}` (the sandbox runs its servers natively, not in containers)"))
}

impl Containers for NoContainers {
    fn list(&self, _all: bool) -> BoxFuture<'_, Result<Vec<Container>, String>> {
        Box::pin(async { Ok(Vec::new()) })
    }

    fn inspect<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Value, String>> {
        Box::pin(async move { missing(name) })
    }

    fn logs<'a>(
        &'a self,
        name: &'a str,
        _tail: usize,
        _since: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        Box::pin(async move { missing(name) })
    }

    fn stats<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Stats, String>> {
        Box::pin(async move { missing(name) })
    }

    fn top<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<Vec<Row>, String>> {
        Box::pin(async move { missing(name) })
    }

    fn restart<'a>(&'a self, name: &'a str) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move { missing(name) })
    }
}
