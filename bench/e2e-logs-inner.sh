#!/usr/bin/env bash
# e2e-logs: time from emitting the marked line to finding it in the log store (the runbook's
# own measurement, `after N s`), over 20 runs against the twins as real units, the shipper
# batching for 1 s as Alloy does. The spec waits a blind 5 s. Runs inside the private host
# (bench/e2e-logs.sh).
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
mkdir -p "$state/runs"
for i in $(seq 20); do
  "$OPSBOOK_BIN" --user --format json run e2e-logs > "$state/runs/$i.json" 2>/dev/null || true
done
python3 - "$state" <<'PY' > "$state/e2e-logs.txt"
import glob, json, re, statistics, sys
waits = []
for path in glob.glob(sys.argv[1] + "/runs/*.json"):
    report = json.load(open(path))
    for c in report["checks"]:
        m = re.search(r"after ([0-9.]+)s", c.get("detail", ""))
        if c["section"] == "shipped" and c["outcome"] == "pass" and m:
            waits.append(float(m.group(1)))
print(f"e2e-logs emit to found: median {statistics.median(waits):.2f} s "
      f"(min {min(waits):.2f}, max {max(waits):.2f}, {len(waits)} of 20 runs found it)")
PY
