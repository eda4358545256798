#!/usr/bin/env bash
# See bench/e2e-logs-inner.sh for what is measured; needs root (a private host with a real systemd).
#   bash bench/e2e-logs.sh
exec bash "$(dirname "$0")/in-private-host.sh" e2e-logs
