#!/usr/bin/env bash
# `opsbook run quick-check --sandbox` start to exit (target < 150 ms): the in-process stack is
# started, the runbook runs against it, and everything is torn down. Side by side in the same
# hyperfine run: the process floor (`opsbook --version`) and the same runbook with a server
# down (a failing run exercises the refused-connection path). Then the peak memory of the
# heaviest sandbox runbooks. Run from the repository root:  bash bench/sandbox.sh
source "$(dirname "$0")/common.sh"
hyperfine -N --warmup 5 --runs 50 -i --export-json "$scratch/sandbox.json" \
  -n "opsbook --version" "$bin --version" \
  -n "opsbook run quick-check --sandbox" "$bin run quick-check --sandbox" \
  -n "the same with --fault log-store:down" "$bin run quick-check --sandbox --fault log-store:down"
python3 "$repo/bench/medians.py" "$scratch/sandbox.json"
echo "peak memory (max RSS):"
for r in quick-check verify checklist; do
  /usr/bin/env python3 - "$bin" "$r" <<'PY'
import resource, subprocess, sys
subprocess.run([sys.argv[1], "run", sys.argv[2], "--sandbox"], stdout=subprocess.DEVNULL, check=False)
print(f"  {sys.argv[2]:<12} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024:.1f} MB")
PY
done
