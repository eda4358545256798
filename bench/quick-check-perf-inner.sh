#!/usr/bin/env bash
# Where `opsbook run quick-check` spends its CPU, inside the private host with the four twins
# as real units (bench/twin-units.sh): 40 runs under `perf record` (20 kHz, DWARF call
# graphs), each sample put in the first phase found on its stack, in the order below (the
# loader before main, the command line, the configuration and session, the engine and its
# shared library and verbs, parsing modules, the runbook's run, the I/O threads, exit); the
# shares of the opsbook process's samples, its threads together, go to perf.txt. Runs inside
# the private host (bench/quick-check-perf.sh).
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
"$OPSBOOK_BIN" --user run quick-check >/dev/null
perf record -q -F 20000 --call-graph dwarf,16384 -o "$state/perf.data" -- \
  bash -c "for i in \$(seq 40); do $OPSBOOK_BIN --user --format tap run quick-check >/dev/null; done" 2>/dev/null
perf script -i "$state/perf.data" -F comm,tid,ip,sym 2>/dev/null | python3 -c '
import re, sys
# (phase, a frame that marks it); the first phase whose frame is on a sample stack takes it.
phases = [
    ("loader: relocations and libraries, before main", "_dl_start"),
    ("process exit", "exit_group"),
    ("command line (clap)", "clap_builder"),
    ("modules parsed ahead (helper thread)", "prefetch::modules_of"),
    ("shared library and verbs built (helper thread)", "prepare_in_background"),
    ("D-Bus connection opened ahead (I/O thread)", "warm_up"),
    ("unit states (ListUnitsByNames)", "Units>::states"),
    ("HTTP requests", "send_answer"),
    ("a module parsed when imported", "CatalogResolver"),
    ("engine for the host", "engine::build"),
    ("the runbook compiled", "runbook::compile"),
    ("the runbook run (Rhai, report)", "Session::run"),
    ("configuration and session", "Session::open"),
]
counts = {p: 0 for p, _ in phases}
other = total = 0
stack = []
def flush():
    global other, total
    if not stack: return
    total += 1
    for p, mark in phases:
        if any(mark in f for f in stack):
            counts[p] += 1
            break
    else:
        other += 1
for line in sys.stdin:
    if not line.strip():
        flush(); stack = None; continue
    head = re.match(r"^\s*(\S+)\s+\d+\s*$", line)
    if head:
        flush(); stack = [] if head.group(1).startswith("opsbook") else None; continue
    if stack is not None: stack.append(line.strip())
flush()
for p, _ in phases:
    print(f"{p:<52} {100 * counts[p] / total:5.1f} %")
rest = "other (kernel: exec, page faults, threads; runtime)"
print(f"{rest:<52} {100 * other / total:5.1f} %")
print("samples:", total)
' > "$state/perf.txt"
