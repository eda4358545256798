#!/usr/bin/env bash
# See bench/units-inner.sh for what is measured; needs root (a private host with a real systemd).
#   bash bench/units.sh
exec bash "$(dirname "$0")/in-private-host.sh" units
