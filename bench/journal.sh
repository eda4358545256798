#!/usr/bin/env bash
# See bench/journal-inner.sh for what is measured; needs root (a private host with a real systemd).
#   bash bench/journal.sh
exec bash "$(dirname "$0")/in-private-host.sh" journal
