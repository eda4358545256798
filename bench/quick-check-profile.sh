#!/usr/bin/env bash
# See bench/quick-check-profile-inner.sh: where one quick-check run spends its time; needs root.
#   bash bench/quick-check-profile.sh
exec bash "$(dirname "$0")/in-private-host.sh" quick-check-profile
