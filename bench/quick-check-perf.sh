#!/usr/bin/env bash
# See bench/quick-check-perf-inner.sh: where one quick-check run spends its CPU, by phase
# (perf, Debian's linux-perf); needs root.
#   bash bench/quick-check-perf.sh
command -v perf >/dev/null || { echo "perf is needed: apt-get install -y linux-perf" >&2; exit 1; }
exec bash "$(dirname "$0")/in-private-host.sh" quick-check-perf
