#!/usr/bin/env bash
# This build beside an earlier one, in the same hyperfine runs: the start-to-exit times of the
# commands that need no stack (--version, list, check, a trivial runbook, quick-check and a
# failing one in the sandbox, the REPL to its first prompt).
#   OPSBOOK_OLD_BIN=/path/to/older/opsbook bash bench/old-new.sh
# Whichever build is measured first tends to come out slower: OPSBOOK_OLD_FIRST=1 measures the
# older one first, for the same table in the other order.
# (the private-host benchmarks take the same variable: bench/quick-check.sh)
source "$(dirname "$0")/common.sh"
old=${OPSBOOK_OLD_BIN:?give the earlier build: OPSBOOK_OLD_BIN=/path/to/opsbook}
mkdir -p runbooks
echo 'check("trivial", true);' > runbooks/trivial.rhai
pairs=()
for pair in "--version" "list" "check" "--format tap run trivial" "run quick-check --sandbox" \
  "run quick-check --sandbox --fault log-store:down"; do
  if [ "${OPSBOOK_OLD_FIRST:-0}" = 1 ]; then
    pairs+=(-n "old: $pair" "$old $pair" -n "new: $pair" "$bin $pair")
  else
    pairs+=(-n "new: $pair" "$bin $pair" -n "old: $pair" "$old $pair")
  fi
done
hyperfine -N -i --warmup 5 --runs 60 --export-json "$scratch/old-new.json" "${pairs[@]}" >/dev/null
HOME="$scratch" hyperfine --warmup 5 --runs 60 --export-json "$scratch/old-new-repl.json" \
  -n "new: repl to first prompt" "echo :quit | $bin repl" \
  -n "old: repl to first prompt" "echo :quit | $old repl" >/dev/null
python3 "$repo/bench/medians.py" "$scratch/old-new.json" "$scratch/old-new-repl.json"
