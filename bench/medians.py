#!/usr/bin/env python3
"""Print the median (and min/max) of each command in a hyperfine --export-json file."""
import json
import sys

for path in sys.argv[1:]:
    with open(path) as f:
        results = json.load(f)["results"]
    width = max(len(r["command"]) for r in results)
    for r in results:
        print(f"{r['command']:<{width}}  median {r['median'] * 1000:8.2f} ms"
              f"  (min {r['min'] * 1000:.2f}, max {r['max'] * 1000:.2f}, n={len(r['times'])})")
