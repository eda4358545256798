//! An Ansible inventory, read directly: groups, hosts, children, group and host variables
//! (inline, and from `group_vars/` and `host_vars/` beside the file), combined with Ansible's
//! precedence.
//!
//! Precedence, lowest first, as Ansible's variable manager applies it: the inventory file's
//! `all` vars, its other groups' vars (parents before children: by depth, then
//! `ansible_group_priority`, then name), `group_vars/all`, the other `group_vars/` files in the
//! same group order, the host's inline vars, then `host_vars/HOST`. A later value replaces an
//! earlier one whole (Ansible's default `hash_behaviour = replace`).
//!
//! Values are kept as Ansible hands them out, untemplated; `template.rs` renders them.
//!
//! `vars` holds a variable and where it was written, `inventory` the groups and hosts and
//! their precedence, `load` reads a file (`ini`, `yaml`) and the `group_vars/` and
//! `host_vars/` beside it (`vars_dir`).

mod ini;
mod inventory;
mod load;
mod vars;
mod vars_dir;
mod yaml;

pub use inventory::{AnsibleInventory, Group};
pub use vars::{HostVar, Level, Place, Var};
