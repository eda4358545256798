#!/usr/bin/env bash
# See bench/quick-check-inner.sh for what is measured; needs root (a private host with a real systemd).
#   bash bench/quick-check.sh
# Testinfra, the Python peer measured beside the shell (PyPI's pytest-testinfra).
python3 -c 'import testinfra' 2>/dev/null || python3 -m pip install -q pytest-testinfra
exec bash "$(dirname "$0")/in-private-host.sh" quick-check
