#!/usr/bin/env bash
# Build times of this tree beside an earlier commit's, in the same hyperfine runs: opsbook's
# own code built again from scratch (its dependencies already built: `cargo clean -p` of every
# opsbook package first), and an incremental build after touching one verb's file.
#   OPSBOOK_OLD_TREE=/path/to/a/checkout/of/the/earlier/commit bash bench/build.sh
# Each tree builds into its own target directory (OLD_TARGET, NEW_TARGET; default under
# target/bench), so the two never share fingerprints.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
old=${OPSBOOK_OLD_TREE:?give a checkout of the earlier commit: OPSBOOK_OLD_TREE=/path}
out="$repo/target/bench"
mkdir -p "$out"
new_target=${NEW_TARGET:-$out/build-new}
old_target=${OLD_TARGET:-$out/build-old}
runs=${OPSBOOK_BENCH_RUNS:-3}
# The packages of each tree: one crate before the workspace, every member after.
packages() { (cd "$1" && cargo metadata --no-deps --format-version 1 |
  python3 -c 'import json,sys; print(" ".join("-p "+p["name"] for p in json.load(sys.stdin)["packages"]))'); }
verb_file() { if [ -d "$1/crates/engine/src/host" ]; then echo "$1/crates/engine/src/host/unit.rs";
  elif [ -d "$1/crates/engine/src/verbs" ]; then echo "$1/crates/engine/src/verbs/unit.rs";
  else echo "$1/src/host/unit.rs"; fi; }
build() { echo "cd $1 && CARGO_TARGET_DIR=$2 cargo build -q"; }
# Dependencies first (not timed), so both trees start from the same state.
(cd "$repo" && CARGO_TARGET_DIR=$new_target cargo build -q)
(cd "$old" && CARGO_TARGET_DIR=$old_target cargo build -q)
hyperfine --runs "$runs" --export-json "$out/build.json" \
  -n "new: opsbook's own code from scratch" \
  --prepare "cd $repo && CARGO_TARGET_DIR=$new_target cargo clean -q $(packages "$repo")" "$(build "$repo" "$new_target")" \
  -n "old: opsbook's own code from scratch" \
  --prepare "cd $old && CARGO_TARGET_DIR=$old_target cargo clean -q $(packages "$old")" "$(build "$old" "$old_target")" \
  -n "new: one verb's file touched" --prepare "touch $(verb_file "$repo")" "$(build "$repo" "$new_target")" \
  -n "old: one verb's file touched" --prepare "touch $(verb_file "$old")" "$(build "$old" "$old_target")"
python3 "$repo/bench/medians.py" "$out/build.json"
