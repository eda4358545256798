# Sourced by the hyperfine benchmarks: from the repository root, checks for hyperfine, builds
# the release binary into $bin, and moves into a scratch directory ($scratch, removed on exit)
# so only the built-in runbooks count. $repo is the repository root.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v hyperfine >/dev/null || { echo "hyperfine is needed: apt-get install -y hyperfine" >&2; exit 1; }
cargo build --release -q
repo="$PWD"
bin="${CARGO_TARGET_DIR:-$repo/target}/release/opsbook"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
cd "$scratch"
