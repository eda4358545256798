#!/usr/bin/env bash
set -euo pipefail
state=$1
source "$REPO/bench/twin-units.sh"
b=$OPSBOOK_BIN
$b --user run quick-check >/dev/null
for v in "" "GLIBC_TUNABLES=glibc.malloc.hugetlb=1"; do
  echo "== [$v] faults:"; env $v /usr/bin/time -f "%R minor faults, %M KB max RSS" $b --user --format tap run quick-check 2>&1 >/dev/null | tail -1
done
python3 "$REPO/bench/interleave.py" "$state/x.json" 16 5 plain "env $b --user --format tap run quick-check" thp "env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 $b --user --format tap run quick-check"
python3 -c "
import json; r=json.load(open('$state/x.json'))['results']
for x in r: print(x['command'], round(x['median']*1000,2), 'ms  q1', round(x['q1']*1000,2), 'q3', round(x['q3']*1000,2))
"
