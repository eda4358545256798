#!/usr/bin/env bash
# REPL start to first prompt: `opsbook repl` reading `:quit` from a pipe (the same start-up:
# config, engine with every host module, line editor, history), against `opsbook --version`
# through the same pipe, so the shell and pipe cost cancel out.
#   bash bench/repl.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
cargo build --release -q
bin="$PWD/target/release/opsbook"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
HOME="$scratch" hyperfine --warmup 5 --runs 100 --export-json "$scratch/repl.json" \
  -n "opsbook repl to first prompt (and :quit)" "echo :quit | $bin repl" \
  -n "opsbook --version, same pipe" "echo :quit | $bin --version" >/dev/null
python3 "$OLDPWD/bench/medians.py" "$scratch/repl.json"
