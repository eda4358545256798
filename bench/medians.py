#!/usr/bin/env python3
"""Print the median (and min/max; the quartiles when bench/interleave.py wrote them) of each
command in a hyperfine --export-json file."""
import json
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        results = json.load(f)["results"]
    width = max(len(r["command"]) for r in results)
    for r in results:
        quartiles = f"q1 {r['q1'] * 1000:.2f}, q3 {r['q3'] * 1000:.2f}, " if "q1" in r else ""
        print(f"{r['command']:<{width}}  median {r['median'] * 1000:8.2f} ms"
              f"  ({quartiles}min {r['min'] * 1000:.2f}, max {r['max'] * 1000:.2f}, n={len(r['times'])})")
