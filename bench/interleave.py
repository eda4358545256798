#!/usr/bin/env python3
"""Contenders measured in turns, so load from elsewhere on the machine falls on all alike.

    interleave.py OUT.json ROUNDS RUNS NAME COMMAND [NAME COMMAND ...]

Each round runs every contender, in order, RUNS times in a row under `hyperfine -N` (no
shell; one warm-up); ROUNDS rounds, so each contender gets ROUNDS x RUNS timed runs spread over
the whole measurement (A B C A B C ...). The times are written to OUT.json as hyperfine's own
--export-json (one result per contender, with its median, min and max), which
bench/medians.py reads; the interquartile range goes beside them as `q1`/`q3`.
"""
import json
import os
import statistics
import subprocess
import sys
import tempfile

out, rounds, runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
pairs = list(zip(sys.argv[4::2], sys.argv[5::2]))
times = {name: [] for name, _ in pairs}
with tempfile.TemporaryDirectory() as scratch:
    block = os.path.join(scratch, "block.json")
    for _ in range(rounds):
        for name, command in pairs:
            subprocess.run(["hyperfine", "-N", "--warmup", "1", "--runs", str(runs), "--export-json", block,
                            "-n", name, command], check=True, stdout=subprocess.DEVNULL)
            with open(block) as f:
                times[name] += json.load(f)["results"][0]["times"]
results = []
for name, _ in pairs:
    t = sorted(times[name])
    q1, _, q3 = statistics.quantiles(t, n=4)
    results.append({"command": name, "times": t, "median": statistics.median(t), "min": t[0], "max": t[-1],
                    "mean": statistics.fmean(t), "q1": q1, "q3": q3})
with open(out, "w") as f:
    json.dump({"results": results}, f, indent=1)
