#!/usr/bin/env bash
# See bench/quick-check-timeline-inner.sh: the main thread's way through one quick-check run,
# step by step, with how long it was off its core in each step (uprobes on the binary's own
# functions and the scheduler's switches, through tracefs); needs root.
#   bash bench/quick-check-timeline.sh
exec bash "$(dirname "$0")/in-private-host.sh" quick-check-timeline
