#!/usr/bin/env bash
# Start-to-exit of `opsbook list` and `opsbook check` (every built-in runbook and module),
# side by side in one hyperfine run. Run from the repository root:  bash bench/cli.sh
# Uses the release build; runs from an empty directory so only the built-in copies count.
source "$(dirname "$0")/common.sh"
hyperfine -N --warmup 5 --runs 100 --export-json "$scratch/cli.json" \
  -n "opsbook list" "$bin list" -n "opsbook check" "$bin check" -n "opsbook --version" "$bin --version"
python3 "$repo/bench/medians.py" "$scratch/cli.json"
