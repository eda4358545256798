#!/usr/bin/env bash
# See bench/quick-check-inner.sh for what is measured; needs root (a private host with a real systemd).
#   bash bench/quick-check.sh
exec bash "$(dirname "$0")/in-private-host.sh" quick-check
