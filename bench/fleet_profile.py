#!/usr/bin/env python3
"""Prints bench/fleet-profile.sh's tables from its traces: the processes each tool started per
host (strace: successful execve, and fork/clone without CLONE_THREAD), and per host the CPU of
everything it started (perf cpu-clock samples: by process name, and for ssh by kernel entry).

    python3 bench/fleet_profile.py HOSTS RUNS PREFIX...   (PREFIX.strace, PREFIX.script)
"""
import collections
import os
import re
import sys

# A sample's kernel entry: the outermost of these in its stack (user time when none).
ENTRIES = ("__x64_sys_", "__do_sys_", "asm_exc_page_fault", "ret_from_fork")


def processes(path):
    """Successful execs (by program) and new processes (not threads), from `strace -f`."""
    execs, forks, trying = collections.Counter(), 0, {}
    for line in open(path):
        pid = line.split(None, 1)[0]
        tried = re.search(r'execve\("([^"]+)"', line)
        if tried:
            trying[pid] = os.path.basename(tried.group(1))
        if "execve" in line and line.rstrip().endswith("= 0"):
            execs[trying.get(pid, "?")] += 1
        elif re.search(r"\b(fork|vfork|clone3?)\(", line) and "CLONE_THREAD" not in line:
            forks += 1
    return execs, forks


def samples(path):
    """(process name, kernel entry or 'user') of every sample."""
    for block in open(path).read().split("\n\n"):
        lines = block.strip().split("\n")
        if not lines or not lines[0].strip():
            continue
        comm = lines[0].split()[0]
        frames = [line.strip().split(None, 1)[-1] for line in lines[1:]]
        entries = [f for f in frames if f.startswith(ENTRIES)]
        yield comm, entries[-1] if entries else "user"


def main():
    hosts, runs = int(sys.argv[1]), int(sys.argv[2])
    per_host = 1000 / 2000 / (hosts * runs)  # ms per sample (2 kHz), per host and run
    tables = {}
    for prefix in sys.argv[3:]:
        tool = os.path.basename(prefix)
        execs, forks = processes(prefix + ".strace")
        print(f"{tool}: per host, {sum(execs.values()) / hosts:.2f} programs started "
              f"({', '.join(f'{k} {v / hosts:.2f}' for k, v in execs.most_common())}), "
              f"{forks / hosts:.2f} processes (fork/clone, not threads)")
        by_comm, ssh_entry = collections.Counter(), collections.Counter()
        for comm, entry in samples(prefix + ".script"):
            by_comm["opsbook" if comm.startswith("opsbook") else comm] += 1
            if comm == "ssh":
                ssh_entry[entry.replace("__x64_sys_", "").replace("__do_sys_", "")] += 1
        tables[tool] = (by_comm, ssh_entry)
    tools = list(tables)
    print("\nCPU per host (ms), by process:")
    print(f"{'process':<18}" + "".join(f"{t:>10}" for t in tools))
    comms = sorted({c for t in tools for c in tables[t][0]}, key=lambda c: -max(tables[t][0][c] for t in tools))
    for c in comms:
        if max(tables[t][0][c] for t in tools) * per_host >= 0.01:
            print(f"{c:<18}" + "".join(f"{tables[t][0][c] * per_host:>10.2f}" for t in tools))
    print(f"{'all':<18}" + "".join(f"{sum(tables[t][0].values()) * per_host:>10.2f}" for t in tools))
    print("\nssh processes per host (ms), user time and kernel by entry:")
    entries = sorted({e for t in tools for e in tables[t][1]}, key=lambda e: -max(tables[t][1][e] for t in tools))
    for e in entries:
        if max(tables[t][1][e] for t in tools) * per_host >= 0.02:
            print(f"{e:<18}" + "".join(f"{tables[t][1][e] * per_host:>10.2f}" for t in tools))


if __name__ == "__main__":
    main()
