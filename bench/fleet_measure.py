#!/usr/bin/env python3
"""Runs the contenders of bench/fleet-scale.sh several times each and prints one JSON object
per contender with the medians: wall time, the CPU and peak memory of the tool's own process,
and of its whole process tree on this machine. Needs root (a cpuacct cgroup).

    python3 bench/fleet_measure.py HOSTS RUNS WARMUP CONTENDERS.json

CONTENDERS.json is a list of {"tool", "argv", "setup"} (`{run}` in an argument is replaced by
the number of the run, counted over every contender, from 0): `setup`, when not null, is a shell
command run once in the tool's cgroup first, not measured (the warm ssh loop's masters). The
contenders take turns, one run each per round, the order reversed every other round, so a
load that comes and goes on the shared machine falls on all of them alike (measured one after
another, five runs each, the first contender's block and the last's saw different machines).

- wall_ms: start to exit of COMMAND.
- cpu_ms: the CPU time of COMMAND's own process (its threads included, its children not), read
  from its process CPU clock once it has exited and before it is reaped (nanoseconds, where
  /proc/PID/stat's user and system times are 10 ms ticks, each rounded down).
- peak_rss_kb: its own VmHWM, read every 5 ms while it runs (ru_maxrss when it ended sooner).
- tree_cpu_ms: what the cgroup `opsbook-bench/TOOL-HOSTS` used during the run (cpuacct.usage, ns).
  Every process the tool starts stays in it — also the ssh masters a warm tool keeps between
  runs, so their share of the work counts.
- tree_peak_rss_kb: the highest sum of the resident memory of the cgroup's processes, sampled
  every 20 ms (as `ps` would add them: shared pages count once per process).
- machine_cpu_ms: the busy time of every CPU of this machine over the same span (/proc/stat:
  user, nice, system, irq and softirq; 10 ms ticks): the tool's tree and also the hosts' side of
  its work (sshd, the login shell and commands the loop runs there, D-Bus, the servers), which
  on this machine shares the same cores and on a real fleet runs on the hosts.

A run that exits non-zero stops the benchmark. Warm-up runs are not measured. The cgroup stays
for the next call with the same TOOL and HOSTS (its lasting masters in it);
`--cleanup TOOL-HOSTS` kills what is left in it (processes this benchmark started) and removes it.
"""
import json
import os
import signal
import statistics
import subprocess
import sys
import time

ROOT = "/sys/fs/cgroup/cpuacct/opsbook-bench"
PAGE_KB = os.sysconf("SC_PAGE_SIZE") // 1024


def process_cpu_clock(pid):
    """The clock id of another process's CPU time, as clock_getcpuclockid(3) makes it (its
    scheduler clock: every thread's time, exited threads included, while it is not reaped)."""
    return ((~pid) << 3) | 2


def cgroup(tool):
    path = os.path.join(ROOT, tool)
    os.makedirs(path, exist_ok=True)
    return path


def read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def tree_rss_kb(group):
    total = 0
    for pid in read(os.path.join(group, "cgroup.procs")).split():
        fields = read(f"/proc/{pid}/statm").split()
        if len(fields) > 1:
            total += int(fields[1]) * PAGE_KB
    return total


def machine_busy_ms():
    fields = [int(x) for x in read("/proc/stat").split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) * 1000 / os.sysconf("SC_CLK_TCK")


def own_hwm_kb(pid):
    for line in read(f"/proc/{pid}/status").splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


RUNS = int(os.environ.get("OPSBOOK_BENCH_FIRST_RUN", "0"))


def once(group, argv):
    # `{run}` in an argument: this call's number, one count for every contender (a change
    # that must differ from the one before it, whoever made that: bench/rollout-fleet.sh).
    global RUNS
    argv = [a.replace("{run}", str(RUNS)) for a in argv]
    RUNS += 1
    usage0 = int(read(os.path.join(group, "cpuacct.usage"), "0"))
    busy0 = machine_busy_ms()
    join = os.path.join(group, "cgroup.procs")
    started = time.perf_counter()
    # OPSBOOK_BENCH_OUT=DIR keeps each run's output, DIR/RUN.txt (a failed run's report).
    kept = os.environ.get("OPSBOOK_BENCH_OUT")
    out = open(os.path.join(kept, f"{RUNS - 1}.txt"), "w") if kept else subprocess.DEVNULL
    child = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE,
                             preexec_fn=lambda: open(join, "w").write(str(os.getpid())))
    hwm, tree, tick = 0, 0, 0
    while True:
        done = os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        if done is not None:
            break
        hwm = max(hwm, own_hwm_kb(child.pid))
        if tick % 4 == 0:
            tree = max(tree, tree_rss_kb(group))
        tick += 1
        time.sleep(0.005)
    wall = (time.perf_counter() - started) * 1000
    own_cpu = time.clock_gettime(process_cpu_clock(child.pid)) * 1000
    _, status, usage = os.wait4(child.pid, 0)
    err = child.stderr.read().decode(errors="replace")
    child.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(argv)} exited {os.waitstatus_to_exitcode(status)}: {err[-2000:]}")
    # What the tool's processes finish after it exits (a cold master's exit) counts too.
    time.sleep(0.1)
    tree_cpu = (int(read(os.path.join(group, "cpuacct.usage"), "0")) - usage0) / 1e6
    machine_cpu = machine_busy_ms() - busy0
    return {"wall_ms": wall, "cpu_ms": own_cpu, "tree_cpu_ms": tree_cpu, "machine_cpu_ms": machine_cpu,
            "peak_rss_kb": hwm or usage.ru_maxrss, "tree_peak_rss_kb": max(tree, hwm or usage.ru_maxrss)}


def cleanup(tool):
    group = os.path.join(ROOT, tool)
    for _ in range(50):
        pids = read(os.path.join(group, "cgroup.procs")).split()
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.05)
    for path in (group, ROOT):
        try:
            os.rmdir(path)
        except OSError:
            pass


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--cleanup":
        return cleanup(sys.argv[2])
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    hosts, runs, warmup = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    with open(sys.argv[4]) as f:
        contenders = json.load(f)
    groups = [cgroup(f"{c['tool']}-{hosts}") for c in contenders]
    for contender, group in zip(contenders, groups):
        if contender.get("setup"):
            once(group, ["sh", "-c", contender["setup"]])
        for _ in range(warmup):
            once(group, contender["argv"])
    samples = [[] for _ in contenders]
    for round_ in range(runs):
        turns = list(range(len(contenders)))
        for i in turns if round_ % 2 == 0 else reversed(turns):
            samples[i].append(once(groups[i], contenders[i]["argv"]))
    for contender, taken in zip(contenders, samples):
        result = {"hosts": hosts, "tool": contender["tool"]}
        for key in ("wall_ms", "cpu_ms", "tree_cpu_ms", "machine_cpu_ms", "peak_rss_kb", "tree_peak_rss_kb"):
            result[key] = round(statistics.median(s[key] for s in taken), 1)
        result["runs"] = runs
        print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
