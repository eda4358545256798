//! `file::compare`: whether files and directories are already as wanted — text, mode, owner,
//! group — all read in one call (`Files::look_all`: one round trip on an ssh host).

use rhai::{Array, Dynamic, Map};
use serde::Serialize;

use super::meta::{absolute, meta_changes, wanted};
use crate::verbs::context::Context;
use crate::verbs::result::{VerbResult, fail};
use crate::verbs::values::{record, text};
use opsbook_world::files::{Looked, Wanted};

/// What `file::compare` found against what was wanted.
#[derive(Serialize)]
struct Compared {
    same: bool,
    differing: Vec<String>,
}

/// One item of `file::compare`: what should be at a path (`content: None` is a directory).
struct Expected {
    path: String,
    content: Option<String>,
    wanted: Wanted,
}

fn expected(item: &Dynamic) -> VerbResult<Expected> {
    let shape = "file::compare: each item is `#{path, content}` (a file) or `#{path, dir: true}` (a directory)";
    let map = item.read_lock::<Map>().ok_or_else(|| fail(shape))?;
    let path = map.get("path").map(text).ok_or_else(|| fail(shape))?;
    absolute(&path)?;
    let dir = match map.get("dir") {
        Some(d) => d.as_bool().map_err(|_| fail("file::compare: `dir` must be true or false"))?,
        None => false,
    };
    let content = map.get("content").map(text);
    if dir == content.is_some() {
        return Err(fail(format!("{shape}; {path} has {}", if dir { "both" } else { "neither" })));
    }
    let wanted = wanted(&map, &["path", "content", "dir"], "file::compare")?;
    Ok(Expected { path, content, wanted })
}

/// What differs between what is at a path and what is wanted there; empty when nothing does.
fn differences(expected: &Expected, found: Option<Looked>) -> Vec<String> {
    match found {
        None => vec!["absent".to_string()],
        Some(l) if l.meta.dir != expected.content.is_none() => {
            vec![if l.meta.dir { "a directory" } else { "not a directory" }.to_string()]
        }
        Some(l) => {
            let content = (l.text != expected.content).then(|| "content".to_string());
            content.into_iter().chain(meta_changes(&l.meta, &expected.wanted)).collect()
        }
    }
}

pub(super) fn compare(cx: &Context, items: &Array) -> VerbResult<Map> {
    let expected = items.iter().map(expected).collect::<VerbResult<Vec<_>>>()?;
    let paths: Vec<String> = expected.iter().map(|e| e.path.clone()).collect();
    let files = cx.world().files.clone();
    let found = cx.block_on(|| async move { files.look_all(&paths).await })?.map_err(fail)?;
    let differing: Vec<String> = expected
        .iter()
        .zip(found)
        .filter_map(|(e, f)| {
            let what = differences(e, f);
            (!what.is_empty()).then(|| format!("{}: {}", e.path, what.join(", ")))
        })
        .collect();
    record(&Compared { same: differing.is_empty(), differing })
}
