#!/usr/bin/env bash
# Where `opsbook run quick-check` spends its CPU, inside the private host with the four twins
# as real units (bench/twin-units.sh): 40 runs under `perf record` (20 kHz, DWARF call
# graphs), each sample put in the first phase that claims its stack, in the order below (the
# loader before main, exit, the command line, the helper threads' work, parsing, the unit and
# HTTP requests, the engine, the run, the configuration, the I/O threads, page faults and
# thread starts); the shares of the opsbook process's samples, its threads together, go to
# perf.txt. Runs inside
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
def on(stack, *marks):
    return any(m in f for f in stack for m in marks)
# Each sample goes to the first phase that claims it; helper threads are told by what they do.
phases = [
    ("loader: relocations and libraries, before main", lambda s: on(s, "_dl_start", "_dl_relocate_object")),
    ("process exit", lambda s: on(s, "exit_group", "do_exit")),
    ("command line (clap)", lambda s: on(s, "clap_builder")),
    ("Rhai library and verbs registered (helper thread)", lambda s: on(s, "register_lazy_functions", "add_manifest", "FuncRegistration", "verbs::modules", "build_index")),
    ("modules parsed ahead (helper thread)", lambda s: on(s, "rhai::parser::") and not on(s, "CatalogResolver", "runbook::compile")),
    ("a module parsed or run when imported", lambda s: on(s, "CatalogResolver")),
    ("the runbook compiled", lambda s: on(s, "runbook::compile")),
    ("unit states (ListUnitsByNames)", lambda s: on(s, "Units>::states")),
    ("HTTP requests", lambda s: on(s, "send_answer", "hyper")),
    ("D-Bus connection (zbus)", lambda s: on(s, "zbus::", "warm_up")),
    ("engine for the host", lambda s: on(s, "engine::build")),
    ("the runbook run (Rhai, report)", lambda s: on(s, "Session::run")),
    ("configuration and session", lambda s: on(s, "Session::open", "Config::load")),
    ("I/O threads, other work (tokio)", lambda s: on(s, "tokio::")),
    ("page faults elsewhere (heap growth, first touch)", lambda s: on(s, "asm_exc_page_fault")),
    ("threads started (clone3, stacks)", lambda s: on(s, "clone3", "start_thread")),
]
counts = {p: 0 for p, _ in phases}
other = total = 0
stack = []
def flush():
    global other, total
    if not stack: return
    total += 1
    for p, claims in phases:
        if claims(stack):
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
rest = "other (kernel: exec, memory maps, syscalls)"
print(f"{rest:<52} {100 * other / total:5.1f} %")
print("samples:", total)
' > "$state/perf.txt"
