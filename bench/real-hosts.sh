#!/usr/bin/env bash
# The real-hosts benchmark (needs root, the Debian 13 test root and its packages, gpg,
# dpkg-deb and apt-ftparchive: as tests/realhosts.rs): a fresh deploy of the four roles,
# packages installed from signed local repositories, on one Debian 13 host and on three (a
# server and two clients), each run on freshly booted hosts; prints the median, minimum and
# maximum of each size.
#   sudo bash bench/real-hosts.sh              (OPSBOOK_BENCH_RUNS=5 runs per size)
# opsbook is the test build (debug): the time is the hosts' — apt and dpkg, the units' starts,
# the servers' readiness and the verification after each deploy — far more than opsbook's own.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "booting Debian 13 hosts needs root" >&2; exit 1; }
bash tests/support/debian13-root.sh
bash tests/support/debian13-debs.sh
cargo test -q --test integration realhosts_bench -- --ignored --nocapture --test-threads 1 2>&1 |
  grep -E '^fresh deploy|^healthy rollout|skipped:|panicked'
