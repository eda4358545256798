#!/usr/bin/env bash
# Start-to-exit of `opsbook list` and `opsbook check` (every built-in runbook and module),
# side by side in one hyperfine run. Run from the repository root:  bash bench/cli.sh
# Uses the release build; runs from an empty directory so only the built-in copies count.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
cargo build --release -q
bin="$PWD/target/release/opsbook"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
hyperfine -N --warmup 5 --runs 50 --export-markdown "$scratch/cli.md" \
  "$bin list" "$bin check" "$bin --version"
cat "$scratch/cli.md"
