#!/usr/bin/env bash
# Where one `opsbook run quick-check` spends its time, inside the private host with the four
# twins as real units (bench/twin-units.sh): 20 runs under `strace -f -ttt` traced for a few
# syscalls only (seccomp filter, so the rest run untraced), each run split at the moments that
# mark its phases — process start (execve) to the config read, to the D-Bus connection, the
# units' answer, the first and second HTTP connection, the report's last line, exit. Prints
# the median of each phase (ms) to profile.txt. Runs inside the private host
# (bench/quick-check-profile.sh).
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
"$OPSBOOK_BIN" --user run quick-check >/dev/null
for i in $(seq 20); do
  strace -f -ttt --seccomp-bpf -e trace=execve,connect,openat,write,exit_group -o "$state/trace.$i" \
    "$OPSBOOK_BIN" --user --format tap run quick-check >/dev/null
done
python3 - "$state" <<'PY' > "$state/profile.txt"
import glob, re, statistics, sys
phases = {}
order = ["start to config read", "config to D-Bus connect", "D-Bus connect to the units' answer",
         "units to first HTTP connect", "first to second HTTP connect", "second HTTP to the report's last line",
         "last line to exit", "whole run (under strace)"]
for path in sorted(glob.glob(sys.argv[1] + "/trace.*")):
    lines = open(path).read().splitlines()
    t = lambda l: float(l.split()[1])
    start = t(lines[0])
    marks = {}
    for l in lines:
        if "openat(" in l and "opsbook" in l and ".toml" in l and "config" not in marks:
            marks["config"] = t(l)
        if "connect(" in l and "/bus" in l and "dbus" not in marks:
            marks["dbus"] = t(l)
        if "connect(" in l and "sin_port=htons(8086)" in l and "http1" not in marks:
            marks["http1"] = t(l)
        if "connect(" in l and "sin_port=htons(3100)" in l and "http2" not in marks:
            marks["http2"] = t(l)
        if l.split()[2].startswith("write(1,"):
            marks["report"] = t(l)
        if "exit_group(" in l or "+++ exited" in l:
            marks["exit"] = t(l)
    units = marks.get("http1", start)
    # The units' answer: the last write to the bus before the first HTTP connect.
    for l in lines:
        if t(l) < marks.get("http1", 0) and "write(" in l and t(l) >= marks.get("dbus", 0):
            units = t(l)
    seq = [start, marks.get("config", start), marks.get("dbus", start), units, marks.get("http1", units),
           marks.get("http2", units), marks.get("report", units), marks.get("exit", units)]
    for name, a, b in zip(order, seq, seq[1:]):
        phases.setdefault(name, []).append((b - a) * 1000)
    phases.setdefault(order[-1], []).append((seq[-1] - start) * 1000)
for name in order:
    print(f"{name:<38} median {statistics.median(phases[name]):7.2f} ms")
PY
