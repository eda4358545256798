//! What `file::` verbs ask of a path and its mode and owner: an absolute path, the mode and
//! ownership an options map asks for, and what that would change on what is there.

use rhai::{Dynamic, Map};

use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::text;
use opsbook_world::files::{Meta, Wanted, mode_text};

/// Paths are absolute: on a remote host a relative one would name something else.
pub(crate) fn absolute(path: &str) -> VerbResult<()> {
    if path.starts_with('/') && !path.contains('\0') {
        Ok(())
    } else {
        Err(fail(format!(
            "`{path}` is not an absolute path (files are named from `/`, on whichever host the run acts)"
        )))
    }
}

/// `"0640"`, `"640"` or a number (`0o640`).
fn mode_arg(value: &Dynamic) -> VerbResult<u32> {
    let bad = || fail(format!("mode `{}` is not an octal file mode such as \"0640\"", text(value)));
    if let Ok(n) = value.as_int() {
        return u32::try_from(n).ok().filter(|m| *m <= 0o7777).ok_or_else(bad);
    }
    let t = text(value);
    u32::from_str_radix(t.trim(), 8).ok().filter(|m| *m <= 0o7777).ok_or_else(bad)
}

/// The mode, owner and group an options map asks for; other keys are `extra`'s to take.
pub(crate) fn wanted(options: &Map, extra: &[&str], call: &str) -> VerbResult<Wanted> {
    let mut w = Wanted::default();
    for (k, v) in options {
        match k.as_str() {
            "mode" => w.mode = Some(mode_arg(v)?),
            "owner" => w.owner = Some(text(v)).filter(|s| !s.is_empty()),
            "group" => w.group = Some(text(v)).filter(|s| !s.is_empty()),
            other if extra.contains(&other) => {}
            other => {
                let known = ["mode", "owner", "group"].iter().chain(extra).copied().collect::<Vec<_>>().join(", ");
                return Err(fail(format!("{call}: unknown option `{other}` ({known})")));
            }
        }
    }
    Ok(w)
}

/// `mode 0644 → 0640`, `owner root → loki`… for what `wanted` would change on `meta`.
pub(crate) fn meta_changes(meta: &Meta, wanted: &Wanted) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(mode) = wanted.mode.filter(|m| *m != meta.mode) {
        out.push(format!("mode {} → {}", mode_text(meta.mode), mode_text(mode)));
    }
    if let Some(owner) = wanted.owner.as_ref().filter(|o| **o != meta.owner) {
        out.push(format!("owner {} → {owner}", meta.owner));
    }
    if let Some(group) = wanted.group.as_ref().filter(|g| **g != meta.group) {
        out.push(format!("group {} → {group}", meta.group));
    }
    out
}
