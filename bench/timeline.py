#!/usr/bin/env python3
"""Prints bench/quick-check-timeline-inner.sh's table from a tracefs trace: for each step of the
main thread (from one probe to the next, the first time each fires in a run), the median over
the runs of its wall time and of the time the main thread spent off its core within it: waiting
(asleep: for a reply, a lock, another thread) or preempted (ready, its core given to another).

    python3 bench/timeline.py TRACE
"""
import collections
import re
import statistics
import sys

LINE = re.compile(r"\s*(.+?)-(\d+)\s+\[\d+\]\s+\S+\s+([\d.]+):\s+(\w+):(.*)")


def runs(path):
    """Each run's events, by its pid: (event, time in ms, thread id)."""
    found, pid = collections.defaultdict(list), None
    for line in open(path):
        m = LINE.match(line)
        if not m:
            continue
        _, tid, time, event, rest = m.groups()
        tid, time = int(tid), float(time) * 1000
        if event == "sched_process_exec":
            pid = int(re.search(r"pid=(\d+)", rest).group(1)) if "opsbook" in rest else None
            if pid:
                found[pid].append(("exec", time, pid))
        elif pid is None:
            continue
        elif event == "sched_switch":
            switch = re.search(r"prev_pid=(\d+) .*prev_state=(\S+) .*next_pid=(\d+)", rest)
            if int(switch.group(1)) == pid:
                found[pid].append(("preempted" if switch.group(2).startswith("R") else "off", time, pid))
            if int(switch.group(3)) == pid:
                found[pid].append(("on", time, pid))
        elif event == "sched_process_exit" and tid == pid:
            found[pid].append(("exit", time, pid))
        elif tid == pid and event not in ("sched_process_exit",):
            found[pid].append((event, time, pid))
    return found


def main(path):
    walls, order = collections.defaultdict(list), []
    offs, preempts = collections.defaultdict(list), collections.defaultdict(list)
    for events in runs(path).values():
        last, since, seen = "exec", events[0][1], set()
        off = preempted = 0.0
        off_from = None
        for event, time, _ in events[1:]:
            if event in ("off", "preempted"):
                off_from = (event, time)
            elif event == "on":
                if off_from is not None:
                    if off_from[0] == "off":
                        off += time - off_from[1]
                    else:
                        preempted += time - off_from[1]
                    off_from = None
            elif event not in seen:
                seen.add(event)
                step = f"{last} → {event}"
                if step not in order:
                    order.append(step)
                walls[step].append(time - since)
                offs[step].append(off)
                preempts[step].append(preempted)
                last, since, off, preempted = event, time, 0.0, 0.0
    total = 0.0
    print(f"{'step of the main thread':<34} {'wall ms':>8} {'waiting':>8} {'preempted':>10}")
    for step in order:
        if len(walls[step]) * 2 < max(len(v) for v in walls.values()):
            continue
        wall = statistics.median(walls[step])
        total += wall
        waiting, preempt = statistics.median(offs[step]), statistics.median(preempts[step])
        print(f"{step:<34} {wall:8.2f} {waiting:8.2f} {preempt:10.2f}")
    print(f"{'sum of the medians':<34} {total:8.2f}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
