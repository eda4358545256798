#!/usr/bin/env bash
# REPL start to first prompt: `opsbook repl` reading `:quit` from a pipe (the same start-up:
# config, engine with every host module, line editor, history), against `opsbook --version`
# through the same pipe, so the shell and pipe cost cancel out.
#   bash bench/repl.sh
source "$(dirname "$0")/common.sh"
HOME="$scratch" hyperfine --warmup 5 --runs 100 --export-json "$scratch/repl.json" \
  -n "opsbook repl to first prompt (and :quit)" "echo :quit | $bin repl" \
  -n "opsbook --version, same pipe" "echo :quit | $bin --version" >/dev/null
python3 "$repo/bench/medians.py" "$scratch/repl.json"
